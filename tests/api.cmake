# tests of group api
fmsa_add_test(test_api_bad_input LABELS api cpu SOURCES test_api_bad_input.c)
set_tests_properties(test_api_bad_input PROPERTIES
                     ENVIRONMENT "FLASHMSA_TEST_BACKEND=cpu")
# The same malformed calls on the OpenCL backend (device buffers are cl_mem).
if(FLASHMSA_HAVE_OPENCL)
  add_test(NAME test_api_bad_input_opencl COMMAND test_api_bad_input --backend opencl)
  set_tests_properties(test_api_bad_input_opencl PROPERTIES
    LABELS "api;opencl" SKIP_RETURN_CODE 77
    ENVIRONMENT "FLASHMSA_TEST_BACKEND=opencl;POCL_CACHE_DIR=${CMAKE_BINARY_DIR}/pocl-cache")
endif()

# One binary for heterogeneous fleets: GPU backends load their runtimes
# lazily, so the shared library must not depend on them at link level, and a
# machine whose OpenCL loader finds no platform still runs on the CPU while an
# explicit OpenCL request fails cleanly.
find_program(FMSA_READELF readelf)
if(FMSA_READELF)
  add_test(NAME api_no_gpu_runtime_link_deps
           COMMAND ${CMAKE_COMMAND} -DREADELF=${FMSA_READELF} -DLIB=$<TARGET_FILE:flashmsa>
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/check_link_deps.cmake)
  set_tests_properties(api_no_gpu_runtime_link_deps PROPERTIES LABELS "api;cpu")
endif()
if(FLASHMSA_HAVE_OPENCL)
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
endif()
fmsa_add_test(test_api_large_offsets LABELS api cpu SOURCES test_api_large_offsets.c)

# Passes on one CPU context from several threads at once (the context's kept
# buffers go to one pass, the others allocate their own): bit-identical to
# each problem run alone, with the internal buffers poisoned.
find_package(Threads REQUIRED)
fmsa_add_test(test_api_concurrent LABELS api cpu SOURCES test_api_concurrent.c)
target_link_libraries(test_api_concurrent PRIVATE Threads::Threads)
set_tests_properties(test_api_concurrent PROPERTIES
                     ENVIRONMENT "FLASHMSA_CPU_POISON=1;OMP_NUM_THREADS=2")
