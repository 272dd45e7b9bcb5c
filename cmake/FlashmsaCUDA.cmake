# The CUDA backend.  Included from the top-level CMakeLists.txt after the
# flashmsa_objects library exists and before the libraries link.
#
# FLASHMSA_CUDA=AUTO builds it when nvcc is found, ON requires nvcc, OFF skips
# it.  The library stays plain C: nvcc compiles each kernel file offline into
# one fatbin (SASS for every FLASHMSA_CUDA_ARCHITECTURES entry plus PTX of
# FLASHMSA_CUDA_PTX for later GPUs), the fatbins are embedded in a generated C
# file, and the backend dlopen()s libcuda.so.1 at run time.  So the library
# links no CUDA library, needs no CUDA header, and loads where no NVIDIA
# driver is installed.  Sets FLASHMSA_HAVE_CUDA (tests/cuda.cmake is included
# on it).
#
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

if(FLASHMSA_CUDA STREQUAL "OFF")
  return()
endif()

set(FLASHMSA_CUDA_FATBIN_DIR "" CACHE PATH
    "Embed the fatbins of this directory (another build's cuda-fatbin/) instead of running nvcc")
if(NOT FLASHMSA_CUDA_FATBIN_DIR)
  if(DEFINED ENV{CUDACXX} AND NOT "$ENV{CUDACXX}" STREQUAL "")
    set(FMSA_NVCC "$ENV{CUDACXX}" CACHE FILEPATH "nvcc used for the CUDA kernels")
  endif()
  find_program(FMSA_NVCC nvcc HINTS ENV CUDA_HOME ENV CUDA_PATH PATH_SUFFIXES bin
               PATHS /usr/local/cuda/bin DOC "nvcc used for the CUDA kernels")
  if(NOT FMSA_NVCC)
    if(FLASHMSA_CUDA STREQUAL "ON")
      message(FATAL_ERROR "FLASHMSA_CUDA=ON but nvcc was not found (set CUDACXX or CUDA_HOME)")
    endif()
    message(STATUS "flashmsa: CUDA backend off (nvcc not found)")
    return()
  endif()
endif()
find_package(Threads REQUIRED)

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

set(FLASHMSA_HAVE_CUDA 1)
set(_fmsa_cuda_dir ${PROJECT_SOURCE_DIR}/backends/cuda)
# One entry per kernel file; each becomes one fatbin and one module.  Until
# the kernel branches are merged their files (and the instance lists the host
# picks from, cuda_<pass>_instances.h) are taken where present; a pass without
# its list is "not supported" (cuda_instances_pending.c).
set(FMSA_CUDA_KERNEL_SOURCES ${_fmsa_cuda_dir}/kernels/fmsa_cuda_check.cu)
foreach(k fmsa_cuda_fwd fmsa_cuda_bwd fmsa_cuda_bwd_pre_post)
  if(EXISTS ${_fmsa_cuda_dir}/kernels/${k}.cu)
    list(APPEND FMSA_CUDA_KERNEL_SOURCES ${_fmsa_cuda_dir}/kernels/${k}.cu)
  endif()
endforeach()
set(_fmsa_cuda_picks "")
foreach(pass fwd bwd)
  if(EXISTS ${_fmsa_cuda_dir}/cuda_${pass}_instances.h)
    string(TOUPPER ${pass} _p)
    list(APPEND _fmsa_cuda_picks ${_fmsa_cuda_dir}/cuda_${pass}_pick.c)
    target_compile_definitions(flashmsa_objects PRIVATE FMSA_CUDA_HAVE_${_p}_INSTANCES=1)
  endif()
endforeach()

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

set(_fmsa_cuda_embed ${PROJECT_BINARY_DIR}/generated/fmsa_cuda_fatbins.c)
file(GENERATE OUTPUT ${_fmsa_cuda_embed} CONTENT
"/* Generated by cmake/FlashmsaCUDA.cmake; do not edit. */
#include \"backends/cuda/cuda_internal.h\"

__asm__(\".section .rodata.fmsa_cuda_fatbins,\\\"a\\\",%progbits\\n\"
${_fmsa_asm}    \".previous\\n\");

${_fmsa_table}
const fmsa_cuda_fatbin fmsa_cuda_fatbins[] = {
${_fmsa_entries}};
const int fmsa_cuda_fatbin_count = ${_i};
")
set_source_files_properties(${_fmsa_cuda_embed} PROPERTIES OBJECT_DEPENDS "${_fmsa_fatbins}")
if(NOT FLASHMSA_CUDA_FATBIN_DIR)
  add_custom_target(flashmsa_cuda_fatbins DEPENDS ${_fmsa_fatbins})
  add_dependencies(flashmsa_objects flashmsa_cuda_fatbins)
endif()

target_sources(flashmsa_objects PRIVATE
  ${_fmsa_cuda_dir}/cuda_loader.c
  ${_fmsa_cuda_dir}/cuda_device.c
  ${_fmsa_cuda_dir}/cuda_backend.c
  ${_fmsa_cuda_dir}/cuda_plan.c
  ${_fmsa_cuda_dir}/cuda_params.c
  ${_fmsa_cuda_dir}/cuda_launch.c
  ${_fmsa_cuda_dir}/cuda_forward.c
  ${_fmsa_cuda_dir}/cuda_backward.c
  ${_fmsa_cuda_dir}/cuda_instances_pending.c
  ${_fmsa_cuda_picks}
  ${_fmsa_cuda_embed})
target_compile_definitions(flashmsa_objects PRIVATE FLASHMSA_HAVE_CUDA=1)
list(APPEND FMSA_LIBRARY_DEPS Threads::Threads ${CMAKE_DL_LIBS})
if(FLASHMSA_CUDA_FATBIN_DIR)
  message(STATUS "flashmsa: CUDA backend on (fatbins from ${FLASHMSA_CUDA_FATBIN_DIR}; "
                 "libcuda.so.1 loaded at run time)")
else()
  message(STATUS "flashmsa: CUDA backend on (${FMSA_NVCC}, SASS ${FLASHMSA_CUDA_ARCHITECTURES}, "
                 "PTX ${FLASHMSA_CUDA_PTX}; libcuda.so.1 loaded at run time)")
endif()
