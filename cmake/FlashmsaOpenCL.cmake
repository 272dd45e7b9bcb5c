# The OpenCL backend.  Included from the top-level CMakeLists.txt after the
# flashmsa_objects library exists and before the libraries link.
#
# FLASHMSA_OPENCL=AUTO builds it when the Khronos headers (CL/cl.h) are found,
# ON requires them, OFF skips it.  Only the headers are needed at build time:
# the backend dlopen()s libOpenCL.so.1 at run time, so the library neither
# links -lOpenCL nor fails to load where no OpenCL runtime is installed.
# Sets FLASHMSA_HAVE_OPENCL (tests/opencl.cmake is included on it).

if(FLASHMSA_OPENCL STREQUAL "OFF")
  return()
endif()

find_path(FMSA_OPENCL_INCLUDE_DIR NAMES CL/cl.h OpenCL/cl.h
          DOC "Directory holding the Khronos OpenCL headers (CL/cl.h)")
if(NOT FMSA_OPENCL_INCLUDE_DIR)
  if(FLASHMSA_OPENCL STREQUAL "ON")
    message(FATAL_ERROR "FLASHMSA_OPENCL=ON but CL/cl.h was not found "
                        "(Debian: apt-get install opencl-c-headers)")
  endif()
  message(STATUS "flashmsa: OpenCL backend off (CL/cl.h not found)")
  return()
endif()
find_package(Threads REQUIRED)

set(FLASHMSA_HAVE_OPENCL 1)
set(_fmsa_ocl_dir ${PROJECT_SOURCE_DIR}/backends/opencl)

# One OpenCL program's source, embedded as the C array `var` in `out`: the
# shared headers (limits, sequences and window bounds, score transforms,
# online softmax) and both families' adapters to them, then the .cl files.
function(fmsa_embed_ocl_program out var comment)
  set(inputs
    ${PROJECT_SOURCE_DIR}/common/fmsa_portable.h
    ${PROJECT_SOURCE_DIR}/common/fmsa_limits.h
    ${PROJECT_SOURCE_DIR}/common/fmsa_seq.h
    ${PROJECT_SOURCE_DIR}/common/fmsa_score.h
    ${PROJECT_SOURCE_DIR}/common/fmsa_softmax.h
    ${_fmsa_ocl_dir}/kernels/fmsa_ocl_seq.cl
    ${ARGN})
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} "-DOUTPUT=${out}" "-DINPUTS=${inputs}" -DVAR=${var}
            -P ${_fmsa_ocl_dir}/embed_source.cmake
    DEPENDS ${inputs} ${_fmsa_ocl_dir}/embed_source.cmake
    COMMENT "${comment}"
    VERBATIM)
endfunction()

set(_fmsa_ocl_generated ${PROJECT_BINARY_DIR}/generated/fmsa_ocl_source.c)
fmsa_embed_ocl_program(${_fmsa_ocl_generated} fmsa_ocl_kernel_source
  "Embedding the OpenCL kernel source"
  ${_fmsa_ocl_dir}/kernels/fmsa_ocl_common.cl
  ${_fmsa_ocl_dir}/kernels/fmsa_ocl_forward.cl
  ${_fmsa_ocl_dir}/kernels/fmsa_ocl_backward.cl)
# The CPU-device variant (cpu/): its own program, so the generic one's
# text (and the GPUs' binaries) do not change with it.
set(_fmsa_ocl_cpu_generated ${PROJECT_BINARY_DIR}/generated/fmsa_ocl_cpu_source.c)
fmsa_embed_ocl_program(${_fmsa_ocl_cpu_generated} fmsa_ocl_cpu_kernel_source
  "Embedding the OpenCL CPU-variant kernel source"
  ${_fmsa_ocl_dir}/cpu/fmsa_ocl_cpu_common.cl
  ${_fmsa_ocl_dir}/cpu/fmsa_ocl_cpu_forward.cl
  ${_fmsa_ocl_dir}/cpu/fmsa_ocl_cpu_backward.cl)

target_sources(flashmsa_objects PRIVATE
  ${_fmsa_ocl_dir}/ocl_loader.c
  ${_fmsa_ocl_dir}/ocl_device.c
  ${_fmsa_ocl_dir}/ocl_backend.c
  ${_fmsa_ocl_dir}/ocl_config.c
  ${_fmsa_ocl_dir}/ocl_program.c
  ${_fmsa_ocl_dir}/ocl_launch.c
  ${_fmsa_ocl_dir}/ocl_args.c
  ${_fmsa_ocl_dir}/cpu/ocl_cpu.c
  ${_fmsa_ocl_generated}
  ${_fmsa_ocl_cpu_generated})
target_include_directories(flashmsa_objects PRIVATE ${FMSA_OPENCL_INCLUDE_DIR})
target_compile_definitions(flashmsa_objects PRIVATE FLASHMSA_HAVE_OPENCL=1
                           CL_TARGET_OPENCL_VERSION=120)
list(APPEND FMSA_LIBRARY_DEPS Threads::Threads ${CMAKE_DL_LIBS})
message(STATUS "flashmsa: OpenCL backend on (headers in ${FMSA_OPENCL_INCLUDE_DIR}; "
               "libOpenCL.so.1 loaded at run time)")
