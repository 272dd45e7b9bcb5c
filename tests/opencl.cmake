# Correctness suites on the OpenCL backend (CI: PoCL on the CPU; the H200
# through NVIDIA's OpenCL on the device machine).  The executables are the
# backend-neutral ones that cpu.cmake defines; here they run with
# --backend opencl under the label opencl.  Exit status 77 (no OpenCL device)
# counts as skipped.
#
# Run time is dominated by OpenCL C compilation (each case's dtype, head dim
# and feature set is its own program, built once per process).  PoCL keeps
# compiled kernels in POCL_CACHE_DIR, pointed into the build tree, so only
# the first run after a kernel change pays for the compiles (5-8 s per case on
# an idle core, so several minutes per suite when cold and sharing 2 cores with
# the other suites; the timeout leaves room for that, ~40 s warm).
foreach(suite test_grid_forward test_grid_backward test_grid_edges test_grid_large)
  add_test(NAME ${suite}_opencl COMMAND ${suite} --backend opencl)
  set_tests_properties(${suite}_opencl PROPERTIES
    LABELS opencl
    ENVIRONMENT "FLASHMSA_TEST_BACKEND=opencl;POCL_CACHE_DIR=${CMAKE_BINARY_DIR}/pocl-cache"
    SKIP_RETURN_CODE 77
    TIMEOUT 2400)
endforeach()
