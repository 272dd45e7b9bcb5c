# The CPU backend's own test variants (included by fmsa_add_backend_suites;
# the backend-neutral suites already run once on the CPU with the environment
# of backends/cpu/backend.cmake).  Each variant runs a suite again with one
# developer override forced, under that same environment plus the override.

# The backward has three ways to own dQ (backends/cpu/cpu_backward.c): the
# planner picks by shape, and the grids' small shapes mostly get the ordered
# one (one partial every key tile adds into in turn), so the backward suites
# run again with the dQ-partials variant and with the recomputing one forced.
foreach(suite test_grid_backward test_grid_edges test_grid_large test_grid_features)
  foreach(variant dqparts:parts recompute:recompute)
    string(REPLACE ":" ";" v ${variant})
    list(GET v 0 tag)
    list(GET v 1 value)
    add_test(NAME ${suite}_${tag} COMMAND ${suite})
    set_tests_properties(${suite}_${tag} PROPERTIES LABELS cpu TIMEOUT 600
      ENVIRONMENT "FLASHMSA_TEST_BACKEND=cpu;FLASHMSA_BACKEND=cpu;FLASHMSA_CPU_BWD=${value};FLASHMSA_CPU_POISON=1;FLASHMSA_TEST_REQUIRE_ALL=cpu")
  endforeach()
endforeach()

# The fp32 forward's tiles are 128x128 wherever L2 holds them (planner rows
# cpu-fwd-d*-128x128); the grids run again at the 64x64 the planner falls back
# to on a smaller L2, where a tile crossing the causal edge splits into two
# row blocks instead of four.
foreach(suite test_grid_forward test_grid_edges)
  add_test(NAME ${suite}_fwd64 COMMAND ${suite})
  set_tests_properties(${suite}_fwd64 PROPERTIES LABELS cpu TIMEOUT 600
    ENVIRONMENT "FLASHMSA_TEST_BACKEND=cpu;FLASHMSA_BACKEND=cpu;FLASHMSA_CPU_POISON=1;FLASHMSA_CPU_TILES=fwd=64x64")
endforeach()

# The oracle itself (fp64 reference, naive implementation, checks); no backend.
fmsa_add_test(test_oracle LABELS cpu SOURCES test_oracle.c)

# The bf16-product forward on 128 x 256 tiles (the planner takes 64 x 256):
# 128-row tiles through the padded S rows and the P·V of every row group, on
# the portable bf16-product twin so every machine runs it.
foreach(suite test_grid_forward test_grid_edges)
  add_test(NAME ${suite}_b16_tiles128 COMMAND ${suite})
  set_tests_properties(${suite}_b16_tiles128 PROPERTIES LABELS cpu TIMEOUT 600
    ENVIRONMENT "FLASHMSA_TEST_BACKEND=cpu;FLASHMSA_BACKEND=cpu;FLASHMSA_CPU_POISON=1;FLASHMSA_CPU_KERNEL=generic-bf16;FLASHMSA_CPU_TILES=fwd=128x256")
endforeach()

# NaN and Inf in the K and V of keys no row sees must not reach any output
# (tests/test_grid_masked_nan.c), on every kernel path: the plan's, the
# portable fp32 and bf16-product twins, scalar, and the two other dQ owners.
foreach(variant default: scalar:FLASHMSA_CPU_KERNEL=scalar generic:FLASHMSA_CPU_KERNEL=generic
        b16:FLASHMSA_CPU_KERNEL=generic-bf16 parts:FLASHMSA_CPU_BWD=parts
        recompute:FLASHMSA_CPU_BWD=recompute)
  string(REPLACE ":" ";" v ${variant})
  list(GET v 0 tag)
  list(LENGTH v n)
  set(extra "")
  if(n GREATER 1)
    list(GET v 1 extra)
  endif()
  add_test(NAME test_grid_masked_nan_${tag} COMMAND test_grid_masked_nan --backend cpu)
  set_tests_properties(test_grid_masked_nan_${tag} PROPERTIES LABELS cpu TIMEOUT 600
    ENVIRONMENT "FLASHMSA_BACKEND=cpu;FLASHMSA_CPU_POISON=1;${extra}")
endforeach()

# Scores far above the running max on interior key tiles (tests/test_grid_climb.c).
add_test(NAME test_grid_climb_cpu COMMAND test_grid_climb --backend cpu)
set_tests_properties(test_grid_climb_cpu PROPERTIES LABELS cpu TIMEOUT 600
  ENVIRONMENT "FLASHMSA_BACKEND=cpu;FLASHMSA_CPU_POISON=1")

# The features of API v0.2 (sinks, dlse, Dv != D, head dims to 576) on the
# portable bf16-product twin, so the bf16-product passes' handling of them is
# checked on every machine, whatever path the dispatcher picks here.
add_test(NAME test_grid_features_generic_bf16 COMMAND test_grid_features)
set_tests_properties(test_grid_features_generic_bf16 PROPERTIES LABELS cpu TIMEOUT 600
  ENVIRONMENT "FLASHMSA_TEST_BACKEND=cpu;FLASHMSA_BACKEND=cpu;FLASHMSA_CPU_POISON=1;FLASHMSA_TEST_REQUIRE_ALL=cpu;FLASHMSA_CPU_KERNEL=generic-bf16")
