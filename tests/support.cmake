# Backend-neutral test support: random problems, guarded/poisoned device
# buffers, the correctness rule (against common/naive.h's naive yardstick) and
# the table-driven suite runner.  It reaches the library only through the
# public API (plus the fp64 reference, the naive oracle and the shared
# headers of common/).
add_library(fmsa_testsupport STATIC
  support/fmsa_test_rng.c
  support/fmsa_test_spec.c
  support/fmsa_test_options.c
  support/fmsa_test_buffer.c
  support/fmsa_test_problem.c
  support/fmsa_test_check.c
  support/fmsa_test_runner.c
  support/fmsa_test_oracle.c
)
target_include_directories(fmsa_testsupport PUBLIC ${CMAKE_CURRENT_SOURCE_DIR} ${CMOCKA_INCLUDE_DIR})
target_link_libraries(fmsa_testsupport PUBLIC flashmsa_static ${CMOCKA_LIBRARIES})
fmsa_target_warnings(fmsa_testsupport)
