# tests of group api.  The bad-input suite runs on every backend
# (tests/CMakeLists.txt, fmsa_add_backend_suites); the OpenCL-specific api
# tests are in tests/opencl.cmake.

# One binary for heterogeneous fleets: GPU backends load their runtimes
# lazily, so the shared library must not depend on them at link level.
find_program(FMSA_READELF readelf)
if(FMSA_READELF)
  add_test(NAME api_no_gpu_runtime_link_deps
           COMMAND ${CMAKE_COMMAND} -DREADELF=${FMSA_READELF} -DLIB=$<TARGET_FILE:flashmsa>
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/check_link_deps.cmake)
  set_tests_properties(api_no_gpu_runtime_link_deps PROPERTIES LABELS "api;cpu")
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
# Bugs found by the fuzzer (tests/fuzz, issue 18), fixed: their reproducers
# (tests/test_fuzz_repro.c says what and where).
fmsa_add_test(test_fuzz_repro LABELS api cpu SOURCES test_fuzz_repro.c)
