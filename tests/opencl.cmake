# Correctness suites on the OpenCL backend (CI: PoCL on the CPU; the H200
# through NVIDIA's OpenCL on the device machine).  The executables are the
# backend-neutral ones that cpu.cmake defines; here they run with
# --backend opencl under the label opencl.  Exit status 77 (no OpenCL device)
# counts as skipped.
#
# Run time is OpenCL C compilation when PoCL's cache is cold.  On a CPU device
# the backend runs its CPU variant (backends/opencl/cpu/ocl_cpu.c): one program
# whose five kernels take dtype, head dim and features as arguments, so a cold
# cache costs one compile (~10 s) for all suites; warm, the label takes ~15 s.
# (The generic kernels, specialised by -D, built 140 distinct programs over
# these suites, 5-100+ s each on PoCL: 14-27 minutes cold.)  PoCL keeps
# compiled kernels in POCL_CACHE_DIR, pointed into the build tree.
#
# FLASHMSA_TEST_OPENCL_GENERIC=ON adds the same suites with
# FLASHMSA_OCL_VARIANT=generic (label opencl_generic): the generic kernels on
# PoCL, as GPUs run them.  Off by default for the compile time above.
option(FLASHMSA_TEST_OPENCL_GENERIC
       "Also run the OpenCL suites with the generic (GPU-shaped) kernels on CPU devices" OFF)
set(_fmsa_ocl_variants cpu)
if(FLASHMSA_TEST_OPENCL_GENERIC)
  list(APPEND _fmsa_ocl_variants generic)
endif()
foreach(variant IN LISTS _fmsa_ocl_variants)
  foreach(suite test_grid_forward test_grid_backward test_grid_edges test_grid_large)
    if(variant STREQUAL "cpu")
      # The default: whatever the backend picks for the device.
      set(name ${suite}_opencl)
      set(label opencl)
      set(env "FLASHMSA_TEST_BACKEND=opencl;POCL_CACHE_DIR=${CMAKE_BINARY_DIR}/pocl-cache")
      set(timeout 900)
    else()
      set(name ${suite}_opencl_generic)
      set(label opencl_generic)
      set(env "FLASHMSA_TEST_BACKEND=opencl;FLASHMSA_OCL_VARIANT=generic;POCL_CACHE_DIR=${CMAKE_BINARY_DIR}/pocl-cache")
      set(timeout 2400)
    endif()
    add_test(NAME ${name} COMMAND ${suite} --backend opencl)
    set_tests_properties(${name} PROPERTIES
      LABELS ${label}
      ENVIRONMENT "${env}"
      SKIP_RETURN_CODE 77
      TIMEOUT ${timeout})
  endforeach()
endforeach()
