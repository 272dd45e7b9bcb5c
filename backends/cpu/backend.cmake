# The CPU backend: always compiled in; OpenMP when the build found it.
# FLASHMSA_TEST_REQUIRE_ALL=cpu: the CPU backend runs every feature of the API,
# so a refusal in the features grid is a failure here, never a skip.
set(_fmsa_cpu_tests_env
    "FLASHMSA_TEST_BACKEND=cpu;FLASHMSA_BACKEND=cpu;FLASHMSA_CPU_POISON=1;FLASHMSA_TEST_REQUIRE_ALL=cpu")
fmsa_add_backend(cpu ALWAYS
  SOURCES
    cpu_backend.c      # the vtable, memory helpers, supports / workspace_size
    cpu_device.c       # device query: brand, ISA key, caches, threads
    cpu_memory.c       # 64-byte aligned host allocations
    cpu_options.c      # the developer variables, read once per context
    cpu_plan.c         # the one variant decision: tiles, splits, panels, workspace
    cpu_dispatch.c     # run-time choice of the kernel path (cpuid, FLASHMSA_CPU_KERNEL)
    cpu_pack.c         # K/V panels in fp32 and bf16
    cpu_sched.c        # work items: slot groups dealt to threads, then stealing
    cpu_tile.c         # fp32 row I/O with dtype conversion
    cpu_score.c        # score tile: scale, softcap, ALiBi, window, bit mask
    cpu_forward.c      # forward + split-KV merge
    cpu_forward_b16.c  # forward of bf16 inputs on bf16 products (AMX, AVX512-BF16)
    cpu_backward.c     # backward: preprocess, dK/dV, dQ
    cpu_backward_b16.c # backward of bf16 inputs on bf16 products
    cpu_merge.c        # fmsa_merge_states: two partial results into one
    cpu_accumulate.c   # the ring's elementwise op and copy (common/accumulate.h)
    cpu_peak.c         # FMA peak probe (flashmsa peak, through the vtable's .peak)
    cpu_trace.c        # FLASHMSA_CPU_TRACE: where a pass spends its time (developers)
    cpu_kern_generic.c # portable C kernels (auto-vectorised) + generic-bf16
    cpu_kern_scalar.c  # the same, not vectorised: the scalar baseline
    cpu_kern_avx2.c    # AVX2 + FMA kernels
    cpu_kern_avx512.c  # AVX-512F kernels (+ AVX512-BF16 for bf16 inputs)
    cpu_kern_amx.c     # AMX-BF16 tile kernels for bf16 inputs
    cpu_kern_neon.c    # AArch64 Advanced SIMD kernels (a stub elsewhere)
  # The suites keep their plain names on the CPU.  The environment pins them to
  # the CPU even if the caller exported a FLASHMSA_BACKEND override, and
  # poisons the backend's internal buffers (FLASHMSA_CPU_POISON: NaN bytes), so
  # a result that reads memory a pass never wrote fails instead of passing on
  # zeroed pages.  No skip code: the CPU backend is always present, so
  # "backend unavailable" (exit status 77) is a failure on it.
  TEST_NAME_SUFFIX NONE
  TEST_ENV ${_fmsa_cpu_tests_env}
  TESTS ${PROJECT_SOURCE_DIR}/tests/cpu.cmake)

set(_fmsa_cpu_dir ${CMAKE_CURRENT_LIST_DIR})
# Per-ISA files get their ISA flags on their own; everything else stays at the
# baseline so the library loads on any CPU of the architecture.  Each file
# checks the matching __AVX2__ / __AVX512F__ / __AMX_TILE__ macro and compiles
# to a stub returning NULL where the flags are not given (other compilers,
# other architectures).
if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang" AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
  set_source_files_properties(${_fmsa_cpu_dir}/cpu_kern_avx2.c TARGET_DIRECTORY flashmsa_objects
    PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma")
  set_source_files_properties(${_fmsa_cpu_dir}/cpu_kern_avx512.c TARGET_DIRECTORY flashmsa_objects
    PROPERTIES COMPILE_OPTIONS "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512bf16;-mfma")
  set_source_files_properties(${_fmsa_cpu_dir}/cpu_kern_amx.c TARGET_DIRECTORY flashmsa_objects
    PROPERTIES COMPILE_OPTIONS
    "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512bf16;-mfma;-mamx-tile;-mamx-bf16")
endif()
if(CMAKE_C_COMPILER_ID STREQUAL "GNU")
  set_source_files_properties(${_fmsa_cpu_dir}/cpu_kern_scalar.c TARGET_DIRECTORY flashmsa_objects
    PROPERTIES COMPILE_OPTIONS "-fno-tree-vectorize;-fno-tree-slp-vectorize")
elseif(CMAKE_C_COMPILER_ID MATCHES "Clang")
  set_source_files_properties(${_fmsa_cpu_dir}/cpu_kern_scalar.c TARGET_DIRECTORY flashmsa_objects
    PROPERTIES COMPILE_OPTIONS "-fno-vectorize;-fno-slp-vectorize")
endif()

# Hot loops of every kernel file on 64-byte boundaries, so the kernels' speed
# does not follow unrelated edits elsewhere in the library (the case that
# showed it: bench/RESULTS.md, "Loop alignment").  APPEND keeps the per-ISA
# options above.
include(CheckCCompilerFlag)
check_c_compiler_flag(-falign-loops=64 FMSA_HAVE_ALIGN_LOOPS)
if(FMSA_HAVE_ALIGN_LOOPS)
  foreach(src cpu_kern_generic.c cpu_kern_scalar.c cpu_kern_avx2.c cpu_kern_avx512.c cpu_kern_amx.c)
    set_property(SOURCE ${_fmsa_cpu_dir}/${src} TARGET_DIRECTORY flashmsa_objects APPEND
                 PROPERTY COMPILE_OPTIONS "-falign-loops=64")
  endforeach()
endif()

# pthread_once in cpu_dispatch.c (part of libc since glibc 2.34; older systems
# need -pthread on the final libraries, which link FMSA_LIBRARY_DEPS)
find_package(Threads REQUIRED)
if(CMAKE_THREAD_LIBS_INIT)
  list(APPEND FMSA_LIBRARY_DEPS ${CMAKE_THREAD_LIBS_INIT})
endif()
if(FLASHMSA_HAVE_OPENMP)
  target_link_libraries(flashmsa_objects PRIVATE OpenMP::OpenMP_C)
endif()
