# The CUDA backend.  The library stays plain C: nvcc compiles each kernel
# file offline into one fatbin (SASS for every FLASHMSA_CUDA_ARCHITECTURES
# entry plus PTX of FLASHMSA_CUDA_PTX for later GPUs), the fatbins are
# embedded in a generated C file, and the backend dlopen()s libcuda.so.1 at
# run time.  So the library links no CUDA library, needs no CUDA header, and
# loads where no NVIDIA driver is installed.  No CMake CUDA language: nvcc is
# a build tool here, as the OpenCL embedding is.
#
#   FLASHMSA_CUDA                AUTO (on where nvcc is found) | ON | OFF
#   FLASHMSA_CUDA_ARCHITECTURES  SASS targets (default: CMAKE_CUDA_ARCHITECTURES
#                                if set, else 80;90a: A100 and H100/H200)
#   FLASHMSA_CUDA_PTX            PTX virtual arch (default 90; empty = none)
#   FLASHMSA_CUDA_FLAGS          extra nvcc flags (e.g. -Xptxas=-v)
#   FLASHMSA_CUDA_FATBIN_DIR     take the fatbins from this directory (the
#                                cuda-fatbin/ folder of another build tree of
#                                the same sources) instead of running nvcc:
#                                the sanitizer build reuses the default
#                                build's, since nvcc's output does not depend
#                                on host sanitizers

set(_fmsa_cuda_dir ${CMAKE_CURRENT_LIST_DIR})

# The toolchain: nvcc, unless another build's fatbins are embedded.
function(fmsa_cuda_probe)
  set(FLASHMSA_CUDA_FATBIN_DIR "" CACHE PATH
      "Embed the fatbins of this directory (another build's cuda-fatbin/) instead of running nvcc")
  if(FLASHMSA_CUDA_FATBIN_DIR)
    set(FMSA_PROBE_FOUND TRUE PARENT_SCOPE)
    return()
  endif()
  if(DEFINED ENV{CUDACXX} AND NOT "$ENV{CUDACXX}" STREQUAL "")
    set(FMSA_NVCC "$ENV{CUDACXX}" CACHE FILEPATH "nvcc used for the CUDA kernels")
  endif()
  find_program(FMSA_NVCC nvcc HINTS ENV CUDA_HOME ENV CUDA_PATH PATH_SUFFIXES bin
               PATHS /usr/local/cuda/bin DOC "nvcc used for the CUDA kernels")
  if(FMSA_NVCC)
    set(FMSA_PROBE_FOUND TRUE PARENT_SCOPE)
  else()
    set(FMSA_PROBE_FOUND FALSE PARENT_SCOPE)
    set(FMSA_PROBE_WHY "nvcc was not found (set CUDACXX or CUDA_HOME)" PARENT_SCOPE)
  endif()
endfunction()

# The kernel embedding hook: one fatbin per kernel file, all in one generated C file.
function(fmsa_cuda_embed)
  if(CMAKE_CUDA_ARCHITECTURES)
    set(_fmsa_cuda_default_archs "${CMAKE_CUDA_ARCHITECTURES}")
  else()
    set(_fmsa_cuda_default_archs "80;90a")
  endif()
  set(FLASHMSA_CUDA_ARCHITECTURES "${_fmsa_cuda_default_archs}" CACHE STRING
      "SASS targets of the CUDA kernels (80 = A100, 90a = H100/H200 with wgmma)")
  set(FLASHMSA_CUDA_PTX "90" CACHE STRING
      "PTX virtual architecture embedded for later GPUs (empty: none)")
  set(FLASHMSA_CUDA_FLAGS "" CACHE STRING "Extra nvcc flags for the CUDA kernels")
  set(_fmsa_gencode "")
  foreach(a IN LISTS FLASHMSA_CUDA_ARCHITECTURES)
    string(REGEX REPLACE "-(real|virtual)$" "" a "${a}")
    list(APPEND _fmsa_gencode "-gencode=arch=compute_${a},code=sm_${a}")
  endforeach()
  if(FLASHMSA_CUDA_PTX)
    list(APPEND _fmsa_gencode
         "-gencode=arch=compute_${FLASHMSA_CUDA_PTX},code=compute_${FLASHMSA_CUDA_PTX}")
  endif()
  separate_arguments(_fmsa_cuda_user_flags UNIX_COMMAND "${FLASHMSA_CUDA_FLAGS}")

  set(_fmsa_fatbin_dir ${PROJECT_BINARY_DIR}/cuda-fatbin)
  if(FLASHMSA_CUDA_FATBIN_DIR)
    set(_fmsa_fatbin_dir ${FLASHMSA_CUDA_FATBIN_DIR})
  endif()
  set(_fmsa_fatbins "")
  set(_fmsa_asm "")
  set(_fmsa_table "")
  set(_fmsa_entries "")
  set(_i 0)
  foreach(src IN LISTS FMSA_CUDA_KERNEL_SOURCES)
    get_filename_component(name ${src} NAME_WE)
    set(fatbin ${_fmsa_fatbin_dir}/${name}.fatbin)
    if(NOT FLASHMSA_CUDA_FATBIN_DIR)
      add_custom_command(
        OUTPUT ${fatbin}
        COMMAND ${CMAKE_COMMAND} -E make_directory ${_fmsa_fatbin_dir}
        COMMAND ${FMSA_NVCC} -fatbin ${_fmsa_gencode} -O3 -std=c++17 -lineinfo
                -I${PROJECT_SOURCE_DIR} -I${PROJECT_SOURCE_DIR}/include ${_fmsa_cuda_user_flags}
                -MD -MF ${fatbin}.d -o ${fatbin} ${src}
        DEPENDS ${src}
        DEPFILE ${fatbin}.d
        COMMENT "nvcc: ${name}.cu -> fatbin (${FLASHMSA_CUDA_ARCHITECTURES}; PTX ${FLASHMSA_CUDA_PTX})"
        VERBATIM)
    endif()
    list(APPEND _fmsa_fatbins ${fatbin})
    # .incbin keeps the embedding instant whatever the fatbins weigh (a hex
    # array, as the OpenCL source uses, costs CMake minutes on tens of MB).
    string(APPEND _fmsa_asm
      "    \".balign 64\\n.hidden fmsa_cuda_fatbin_${_i}\\nfmsa_cuda_fatbin_${_i}:\\n\"\n"
      "    \".incbin \\\"${fatbin}\\\"\\n\"\n"
      "    \".hidden fmsa_cuda_fatbin_${_i}_end\\nfmsa_cuda_fatbin_${_i}_end:\\n\"\n")
    string(APPEND _fmsa_table
      "extern const unsigned char fmsa_cuda_fatbin_${_i}[], fmsa_cuda_fatbin_${_i}_end[];\n")
    string(APPEND _fmsa_entries
      "    {\"${name}.cu\", fmsa_cuda_fatbin_${_i}, fmsa_cuda_fatbin_${_i}_end},\n")
    math(EXPR _i "${_i} + 1")
  endforeach()

  # The Hopper (wgmma) kernels exist only in sm_90a SASS: the host runs them
  # only where the embedded fatbins have it.
  set(_fmsa_sm90a 0)
  if("90a" IN_LIST FLASHMSA_CUDA_ARCHITECTURES OR "90a-real" IN_LIST FLASHMSA_CUDA_ARCHITECTURES)
    set(_fmsa_sm90a 1)
  endif()
  set(_fmsa_cuda_embed ${PROJECT_BINARY_DIR}/generated/fmsa_cuda_fatbins.c)
  file(GENERATE OUTPUT ${_fmsa_cuda_embed} CONTENT
  "/* Generated by backends/cuda/backend.cmake; do not edit. */
  #include \"backends/cuda/cuda_internal.h\"

  __asm__(\".section .rodata.fmsa_cuda_fatbins,\\\"a\\\",%progbits\\n\"
  ${_fmsa_asm}    \".previous\\n\");

  ${_fmsa_table}
  const fmsa_cuda_fatbin fmsa_cuda_fatbins[] = {
  ${_fmsa_entries}};
  const int fmsa_cuda_fatbin_count = ${_i};
  const int fmsa_cuda_fatbin_sm90a = ${_fmsa_sm90a};
  ")
  set_source_files_properties(${_fmsa_cuda_embed} TARGET_DIRECTORY flashmsa_objects
      PROPERTIES OBJECT_DEPENDS "${_fmsa_fatbins}")
  if(NOT FLASHMSA_CUDA_FATBIN_DIR)
    add_custom_target(flashmsa_cuda_fatbins DEPENDS ${_fmsa_fatbins})
    add_dependencies(flashmsa_objects flashmsa_cuda_fatbins)
  endif()

  set(FMSA_EMBEDDED ${_fmsa_cuda_embed} PARENT_SCOPE)
  if(FLASHMSA_CUDA_FATBIN_DIR)
    message(STATUS "flashmsa: CUDA fatbins from ${FLASHMSA_CUDA_FATBIN_DIR}")
  else()
    message(STATUS "flashmsa: CUDA kernels by ${FMSA_NVCC}, SASS ${FLASHMSA_CUDA_ARCHITECTURES}, "
                   "PTX ${FLASHMSA_CUDA_PTX}; libcuda.so.1 loaded at run time")
  endif()
endfunction()

# One entry per kernel file; each becomes one fatbin and one module.
set(FMSA_CUDA_KERNEL_SOURCES)
foreach(k fmsa_cuda_check fmsa_cuda_fwd fmsa_cuda_merge fmsa_cuda_bwd fmsa_cuda_bwd_pre_post
          fmsa_cuda_accumulate fmsa_cuda_bwd_f32 fmsa_cuda_bwd_wg fmsa_cuda_bwd_wg256
          fmsa_cuda_fwd_wg)
  list(APPEND FMSA_CUDA_KERNEL_SOURCES ${_fmsa_cuda_dir}/kernels/${k}.cu)
endforeach()

find_package(Threads REQUIRED)
fmsa_add_backend(cuda
  DEFAULT AUTO
  DOC "CUDA backend (AUTO: on where nvcc is found)"
  PROBE fmsa_cuda_probe
  EMBED fmsa_cuda_embed
  SOURCES
    cuda_loader.c
    cuda_device.c
    cuda_backend.c
    cuda_plan.c
    cuda_params.c
    cuda_launch.c
    cuda_forward.c
    cuda_backward.c
    cuda_merge.c
    cuda_accumulate.c
    cuda_fwd_pick.c
    cuda_bwd_pick.c
  LIBRARY_DEPS Threads::Threads ${CMAKE_DL_LIBS}
  # Exit status 77 (no CUDA device) counts as skipped: CI has no GPU.
  TEST_ENV "FLASHMSA_TEST_BACKEND=cuda"
  TEST_SKIP_RETURN_CODE 77
  TEST_TIMEOUT 900
  TESTS ${PROJECT_SOURCE_DIR}/tests/cuda.cmake)
