# Sourced by the one-call device scripts (bench/final_call.sh, bench/cuda_bwd_call.sh):
# steps that run only while the call's deadline leaves them the time they may need.
# The sourcing script sets T0 (its start, in $SECONDS) and DEADLINE (seconds), and
# defines pack, which packs its logs after every step so a cut-off call brings back
# the last ones.
left() { echo $((DEADLINE - (SECONDS - T0))); }
step() { # name, seconds it needs at most, command...
  local name=$1 need=$2
  shift 2
  if [[ $(left) -lt $need ]]; then echo "=== $name: SKIPPED ($(left) s left, needs $need)"; return; fi
  echo "=== $name ($(left) s left)"
  timeout "$need" "$@"
  echo "=== $name: rc $? after $((SECONDS - T0)) s"
  pack
}
