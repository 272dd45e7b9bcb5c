# tests of group core: backend-neutral pieces of common/ (planner, online
# softmax, fp16/bf16 conversion); no device needed, each runs in well under 5 s.
fmsa_add_test(test_core_planner LABELS core cpu SOURCES test_core_planner.c)
fmsa_add_test(test_core_softmax LABELS core cpu SOURCES test_core_softmax.c)
fmsa_add_test(test_core_half LABELS core cpu SOURCES test_core_half.c)
# The CPU backend's exp2 forms: the accuracy cpu_exp2.h claims, measured.
fmsa_add_test(test_cpu_exp2 LABELS core cpu SOURCES test_cpu_exp2.c)
# The CPU backend's work order: every item once, slots dealt by load, affinity,
# and the turns of the ordered backward dQ on real threads.
fmsa_add_test(test_cpu_sched LABELS core cpu SOURCES test_cpu_sched.c)
find_package(Threads REQUIRED)
target_link_libraries(test_cpu_sched PRIVATE Threads::Threads)
# a turn handed out of order never comes back: the test then hangs, and fails here
set_tests_properties(test_cpu_sched PROPERTIES TIMEOUT 60)
# The backend list and the registry it generates, against the backends this
# build turned on (cmake/FlashmsaBackend.cmake records them).
fmsa_add_test(test_core_backends LABELS core cpu SOURCES test_core_backends.c)
get_property(_fmsa_built_backends GLOBAL PROPERTY FMSA_BACKENDS)
string(REPLACE ";" "\\;" _fmsa_built_backends_def "${_fmsa_built_backends}")
target_compile_definitions(test_core_backends PRIVATE
                           "FMSA_TEST_BUILT_BACKENDS=\"${_fmsa_built_backends_def}\"")
# The fp64 reference on issue 13's features (finite differences of dsink and
# dlse, sinks of -inf, Dv != D, the merge); no backend.
fmsa_add_test(test_oracle_features LABELS core cpu SOURCES test_oracle_features.c)
