# The CUDA backend's tests.  CI has no GPU: there the device suites exit 77
# (skipped) and only the host-side test runs; on a GPU machine
# `ctest -L cuda` runs them all.
#
# The host side, with CUDA_VISIBLE_DEVICES="" so that a GPU machine takes the
# no-device path too: params filling, validation's deferred metadata reads,
# the embedded fatbins, a clean "no device" and the CPU from the same binary.
fmsa_add_test(test_cuda_host LABELS api cuda SOURCES test_cuda_host.c)
set_tests_properties(test_cuda_host PROPERTIES ENVIRONMENT "CUDA_VISIBLE_DEVICES=")

# The planner's CUDA rows against the compiled instances (one to one, and the
# planner's choice is the instance lists' rule on every head-dim pair).
fmsa_add_test(test_cuda_plan_rows LABELS api cuda SOURCES test_cuda_plan_rows.c)

# The decode's split-KV count (the planner's, fmsa_plan_split_count) against
# the count the backend launched before the rule moved into the planner.
fmsa_add_test(test_cuda_splits LABELS api cuda SOURCES test_cuda_splits.c)

# The device-side metadata check, graph capture of forward + backward, the
# deterministic backward bitwise over 10 runs.
fmsa_add_test(test_cuda_graph LABELS cuda SOURCES test_cuda_graph.c)
set_tests_properties(test_cuda_graph PROPERTIES SKIP_RETURN_CODE 77)

# The forward's API v0.2 features (sinks, value head dims, head dims to 576,
# fmsa_merge_states) against the fp64 reference; skips without a device.
fmsa_add_test(test_cuda_features LABELS cuda SOURCES test_cuda_features.c)
set_tests_properties(test_cuda_features PROPERTIES SKIP_RETURN_CODE 77)

# NaN and Inf in the K and V of keys no row sees must not reach any output
# (tests/test_grid_masked_nan.c): the forward and split-KV decode mask the
# scores by select and zero such keys' V fragments before P V; the backward
# cases need the backward kernel's own fix.  Skips without a device.
add_test(NAME test_grid_masked_nan_cuda COMMAND test_grid_masked_nan --backend cuda)
set_tests_properties(test_grid_masked_nan_cuda PROPERTIES LABELS cuda TIMEOUT 900
  ENVIRONMENT "FLASHMSA_TEST_BACKEND=cuda" SKIP_RETURN_CODE 77)

# Scores far above the running max on interior key tiles (tests/test_grid_climb.c):
# the d128 FAST kernel's stale pass must give such tiles back to the full softmax.
add_test(NAME test_grid_climb_cuda COMMAND test_grid_climb --backend cuda)
set_tests_properties(test_grid_climb_cuda PROPERTIES LABELS cuda TIMEOUT 300
  ENVIRONMENT "FLASHMSA_TEST_BACKEND=cuda" SKIP_RETURN_CODE 77)

# The backend-neutral suites run with --backend cuda through fmsa_add_backend
# (backends/cuda/backend.cmake).  FLASHMSA_CUDA_ARCH=sm80 (the planner's A100
# rows on any device) is the "sm_80 kernels forced" run of the device script.

# The program: an explicit CUDA request without a usable device is an error
# naming the backend; AUTO still runs on the CPU.
add_test(NAME api_cuda_unavailable_is_an_error
         COMMAND flashmsa_cli run --backend cuda --seqlen 64 --heads 2 --dim 32)
add_test(NAME api_cpu_without_cuda_devices COMMAND flashmsa_cli run --seqlen 64 --heads 2 --dim 32)
set_tests_properties(api_cuda_unavailable_is_an_error api_cpu_without_cuda_devices PROPERTIES
  LABELS "api;cuda" ENVIRONMENT "CUDA_VISIBLE_DEVICES=;OCL_ICD_VENDORS=/nonexistent")
set_tests_properties(api_cuda_unavailable_is_an_error PROPERTIES
  PASS_REGULAR_EXPRESSION "BACKEND_UNAVAILABLE.*cuda")
set_tests_properties(api_cpu_without_cuda_devices PROPERTIES
  PASS_REGULAR_EXPRESSION "device +cpu:0.*\nPASS")

# The Hopper (wgmma) kernels' index, descriptor and synchronisation logic on the
# host (backends/cuda/dev/emu/run_wg.sh: the kernel files compiled as C++ over an
# emulated wgmma, cp.async and block scheduler, against fp64), so that CI, which
# has no GPU, runs them on every change: the landed backward and the forward in
# development (its first cases in two thread orders: EMU_WG_QUICK; run_wg.sh
# alone runs them all in three).  It needs a C++17 compiler and
# glibc's ucontext; the asan test preset leaves it out (its programs are its own,
# not sanitized).
find_program(FMSA_EMU_CXX NAMES g++ c++)
if(FMSA_EMU_CXX AND CMAKE_SYSTEM_NAME STREQUAL "Linux")
  add_test(NAME test_cuda_emu_wgmma
           COMMAND sh ${PROJECT_SOURCE_DIR}/backends/cuda/dev/emu/run_wg.sh ${CMAKE_CURRENT_BINARY_DIR}/emu_wg)
  set_tests_properties(test_cuda_emu_wgmma PROPERTIES LABELS "cuda;emu" TIMEOUT 600
    ENVIRONMENT "CXX=${FMSA_EMU_CXX};EMU_WG_QUICK=1")
endif()
