# The OpenCL backend's own tests (included by fmsa_add_backend_suites once the
# backend is on; CI: PoCL on the CPU; the H200 through NVIDIA's OpenCL on the
# device machine).  The backend-neutral suites already run with
# --backend opencl under the label opencl (backends/opencl/backend.cmake);
# exit status 77 (no OpenCL device) counts as skipped.
#
# Run time is OpenCL C compilation when PoCL's cache is cold.  On a CPU device
# the backend runs its CPU variant (backends/opencl/cpu/ocl_cpu.c): one program
# whose kernels take dtype, head dim and features as arguments, so a cold
# cache costs one compile for all suites, where the generic kernels,
# specialised by -D, build one program per case (the times:
# backends/opencl/README.md, "CI time").  PoCL keeps compiled kernels in
# POCL_CACHE_DIR, pointed into the build tree.
#
# FLASHMSA_TEST_OPENCL_GENERIC=ON adds the same suites with
# FLASHMSA_OCL_VARIANT=generic (label opencl_generic): the generic kernels on
# PoCL, as GPUs run them.  Off by default for the compile time above.
option(FLASHMSA_TEST_OPENCL_GENERIC
       "Also run the OpenCL suites with the generic (GPU-shaped) kernels on CPU devices" OFF)
if(FLASHMSA_TEST_OPENCL_GENERIC)
  foreach(suite test_grid_forward test_grid_backward test_grid_edges test_grid_large
                test_grid_features test_merge_states)
    add_test(NAME ${suite}_opencl_generic COMMAND ${suite} --backend opencl)
    set_tests_properties(${suite}_opencl_generic PROPERTIES
      LABELS opencl_generic
      ENVIRONMENT "FLASHMSA_TEST_BACKEND=opencl;FLASHMSA_OCL_VARIANT=generic;POCL_CACHE_DIR=${CMAKE_BINARY_DIR}/pocl-cache"
      SKIP_RETURN_CODE 77
      TIMEOUT 2400)
  endforeach()
endif()

# One binary for heterogeneous fleets (the shared library's link dependencies
# are checked in tests/api.cmake): a machine whose OpenCL loader finds no
# platform still runs on the CPU while an explicit OpenCL request fails cleanly.
add_test(NAME api_cpu_without_opencl_platforms
         COMMAND flashmsa_cli run --seqlen 64 --heads 2 --dim 32)
add_test(NAME api_opencl_unavailable_is_an_error
         COMMAND flashmsa_cli run --backend opencl --seqlen 64 --heads 2 --dim 32)
set_tests_properties(api_cpu_without_opencl_platforms api_opencl_unavailable_is_an_error
                     PROPERTIES LABELS "api;cpu" ENVIRONMENT "OCL_ICD_VENDORS=/nonexistent")
set_tests_properties(api_cpu_without_opencl_platforms PROPERTIES
                     PASS_REGULAR_EXPRESSION "device +cpu:0.*\nPASS")
set_tests_properties(api_opencl_unavailable_is_an_error PROPERTIES
                     WILL_FAIL FALSE PASS_REGULAR_EXPRESSION "BACKEND_UNAVAILABLE|backend unavailable")

# NaN and Inf in the K and V of keys no row sees must not reach any output
# (tests/test_grid_masked_nan.c), on both kernel families: the CPU-device
# family PoCL runs by default and the generic (GPU) kernels.
foreach(variant default generic)
  set(env "FLASHMSA_TEST_BACKEND=opencl;POCL_CACHE_DIR=${CMAKE_BINARY_DIR}/pocl-cache")
  if(variant STREQUAL "generic")
    # PoCL's optimiser is nearly all of a cold compile of the generic kernels
    # (20+ CPU-minutes for this grid, 10 s unoptimised: .ci/run stage 3): the
    # select-not-multiply logic is checked here unoptimised, the optimised
    # kernels in stage 3 and on the H200 (bench/RESULTS.md)
    set(env "FLASHMSA_TEST_BACKEND=opencl;POCL_CACHE_DIR=${CMAKE_BINARY_DIR}/pocl-cache-noopt"
        "FLASHMSA_OCL_VARIANT=generic" "FLASHMSA_OCL_BUILD_FLAGS=-cl-opt-disable")
    if(FLASHMSA_SANITIZE)
      # LeakSanitizer reports allocations inside libpocl's unoptimised
      # compile path (never freed by PoCL itself); leaks of ours are checked
      # by the default variant and every other suite
      list(APPEND env "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:strict_string_checks=1")
    endif()
  endif()
  add_test(NAME test_grid_masked_nan_opencl_${variant} COMMAND test_grid_masked_nan --backend opencl)
  set_tests_properties(test_grid_masked_nan_opencl_${variant} PROPERTIES LABELS opencl
    ENVIRONMENT "${env}" SKIP_RETURN_CODE 77 TIMEOUT 2400)
endforeach()
