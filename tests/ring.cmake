# Ring attention (include/flashmsa/flashmsa_dist.h): the loopback suite always
# (label ring, not cpu: CI's AArch64 stage runs -L cpu under qemu-user, where
# threads hang), and the MPI suite for P = 1, 2, 3, 4 processes where MPI was
# found.  Both run the passes single-threaded per rank (OMP_NUM_THREADS=1):
# the ranks are the parallelism.
find_package(Threads REQUIRED)
# The per-step plan against brute force over global positions (no attention math).
fmsa_add_test(test_ring_plan LABELS "ring" SOURCES test_ring_plan.c)
fmsa_add_test(test_ring_loopback LABELS "ring" SOURCES test_ring_loopback.c)
# The elementwise op and device copy the ring runs on the context's device
# (common/accumulate.h), on the CPU and again on OpenCL and CUDA where those
# are built (exit 77, skipped, without their device).
fmsa_add_test(test_ring_accumulate LABELS "ring" SOURCES test_ring_accumulate.c)
# The ALiBi distance offset of the ring's local passes against a padded, masked
# public problem (tests/test_ring_alibi_offset.c), on every backend built.
fmsa_add_test(test_ring_alibi_offset LABELS "ring" SOURCES test_ring_alibi_offset.c)
# The loopback suite on CUDA: P = 2, 4, 8 virtual ranks on device 0.
foreach(_b opencl cuda)
  string(TOUPPER ${_b} _B)
  if(FLASHMSA_HAVE_${_B})
    add_test(NAME test_ring_accumulate_${_b} COMMAND test_ring_accumulate --backend ${_b})
    set_tests_properties(test_ring_accumulate_${_b} PROPERTIES LABELS "ring;${_b}"
                         SKIP_RETURN_CODE 77 TIMEOUT 300)
    add_test(NAME test_ring_alibi_offset_${_b} COMMAND test_ring_alibi_offset --backend ${_b})
    set_tests_properties(test_ring_alibi_offset_${_b} PROPERTIES LABELS "ring;${_b}"
                         SKIP_RETURN_CODE 77 TIMEOUT 300)
  endif()
endforeach()
if(FLASHMSA_HAVE_CUDA)
  add_test(NAME test_ring_loopback_cuda COMMAND test_ring_loopback --backend cuda)
  set_tests_properties(test_ring_loopback_cuda PROPERTIES LABELS "ring;cuda" SKIP_RETURN_CODE 77
                       TIMEOUT 300)
endif()
target_link_libraries(test_ring_loopback PRIVATE Threads::Threads)
# Under the sanitizers, ASan's own teardown of the rank threads' alternate
# signal stacks aborts ("unable to unmap", sanitizer_posix.cpp, in
# AsanThread::Destroy; gcc 12 with glibc's dynamic SIGSTKSZ): those stacks are
# left out (use_sigaltstack=0); every other check stays on.
set(_fmsa_ring_env "OMP_NUM_THREADS=1")
if(FLASHMSA_SANITIZE)
  list(APPEND _fmsa_ring_env
       "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:use_sigaltstack=0")
endif()
set_tests_properties(test_ring_loopback PROPERTIES ENVIRONMENT "${_fmsa_ring_env}")

if(FLASHMSA_HAVE_DIST_MPI)
  find_package(MPI REQUIRED COMPONENTS C) # its imported targets are per directory
  # The MPI transport's source is compiled in (not libflashmsa_dist, which
  # links the shared library) so the suite has one copy of the library.
  fmsa_add_test_executable(test_ring_mpi SOURCES test_ring_mpi.c
                           ${PROJECT_SOURCE_DIR}/dist/transport_mpi.c)
  target_link_libraries(test_ring_mpi PRIVATE MPI::MPI_C)
  foreach(np 1 2 3 4)
    add_test(NAME test_ring_mpi_np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
                     $<TARGET_FILE:test_ring_mpi> ${MPIEXEC_POSTFLAGS})
    # Open MPI refuses root and more ranks than cores unless told; MPICH
    # ignores these variables (it oversubscribes by default).  Under the
    # sanitizers, leak checking is off for these runs only: Open MPI never frees
    # what MPI_Init allocates (in its dlopened components, which LSan cannot
    # name for a suppression); the loopback suite checks the ring's own memory.
    set_tests_properties(test_ring_mpi_np${np} PROPERTIES LABELS "ring;mpi" TIMEOUT 300
      ENVIRONMENT "OMP_NUM_THREADS=1;OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:strict_string_checks=1")
  endforeach()
endif()

# The NCCL transport with a communicator of size 1 on a CUDA device (skipped,
# exit 77, without a GPU or without libnccl.so.2 on the library path).
fmsa_add_test(test_ring_nccl LABELS "ring;cuda" SOURCES test_ring_nccl.c)
target_link_libraries(test_ring_nccl PRIVATE ${CMAKE_DL_LIBS})
set_tests_properties(test_ring_nccl PROPERTIES SKIP_RETURN_CODE 77)

# ring_timing: a ring step against the local kernel alone (a device run's
# figure for bench/RESULTS.md, not a test).
fmsa_add_test_executable(ring_timing SOURCES test_ring_timing.c)
target_link_libraries(ring_timing PRIVATE Threads::Threads)
