#!/usr/bin/env bash
# The Python package's test: a fresh virtual environment, torch, transformers
# and pytest from the package index pip is configured with, `pip install .`
# (scikit-build-core builds the C library into the package), then pytest on
# tests/python against the installed package.  CI's stage 6 runs this.
#
#   scripts/python_test.sh [VENV_DIR]   (default: a temporary directory, removed after)
#   scripts/python_test.sh --deps-only VENV_DIR
#                                  only make the environment and install the
#                                  dependencies (network and disk: torch's
#                                  wheels with its CUDA libraries are ~3 GB);
#                                  CI does this in the background during its
#                                  C stages, then runs the test on VENV_DIR,
#                                  where pip finds them installed
#
# Variables: PYTHON (default python3); FLASHMSA_TORCH_INDEX, when set, is the
# index pip installs torch from (e.g. one serving CPU-only wheels); unset, torch
# comes from the default index like everything else.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
python=${PYTHON:-python3}

deps_only=0
if [[ "${1:-}" == --deps-only ]]; then
  [[ $# -eq 2 ]] || { echo "python_test: --deps-only needs the environment's folder" >&2; exit 2; }
  deps_only=1
  shift
fi
if [[ $# -ge 1 ]]; then
  venv=$1
else
  venv_parent=$(mktemp -d)
  trap 'rm -rf "$venv_parent"' EXIT
  venv=$venv_parent/venv
fi

# Debian's own python3 needs python3-venv for `-m venv` (ensurepip).
if ! "$python" -c 'import ensurepip' 2>/dev/null; then
  if command -v apt-get >/dev/null 2>&1 && ((EUID == 0)); then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
  else
    echo "python_test: $python has no ensurepip; install python3-venv" >&2
    exit 1
  fi
fi

t=$SECONDS
"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip --quiet --disable-pip-version-check)
if [[ -n "${FLASHMSA_TORCH_INDEX:-}" ]]; then
  "${pip[@]}" install --index-url "$FLASHMSA_TORCH_INDEX" torch
else
  "${pip[@]}" install torch
fi
"${pip[@]}" install numpy pytest transformers
echo "python_test: torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)'), transformers $("$venv/bin/python" -c 'import transformers; print(transformers.__version__)') installed in $((SECONDS - t)) s"
if ((deps_only)); then exit 0; fi

t=$SECONDS
# The CUDA kernels do not depend on how the package is built: where CI's
# stage 1 left its fatbins, embed them instead of running nvcc again.
if [[ -z "${CMAKE_ARGS:-}" && -d build/cuda-fatbin ]] && ls build/cuda-fatbin/*.fatbin > /dev/null 2>&1; then
  export CMAKE_ARGS="-DFLASHMSA_CUDA_FATBIN_DIR=$PWD/build/cuda-fatbin"
fi
"${pip[@]}" install .
echo "python_test: pip install . took $((SECONDS - t)) s"

# From tests/python, with FLASHMSA_LIBRARY unset, `import flashmsa` is the
# installed package and its own library.  The CPU backend has every feature,
# so a test that the library refuses fails rather than skips (conftest.py).
t=$SECONDS
cd tests/python
env -u FLASHMSA_LIBRARY -u FLASHMSA_ROOT FLASHMSA_TEST_REQUIRE="${FLASHMSA_TEST_REQUIRE-all}" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider
echo "python_test: pytest took $((SECONDS - t)) s"
