# The OpenCL backend.  FLASHMSA_OPENCL=AUTO builds it when the Khronos headers
# (CL/cl.h) are found, ON requires them, OFF skips it.  Only the headers are
# needed at build time: the backend dlopen()s libOpenCL.so.1 at run time, so
# the library neither links -lOpenCL nor fails to load where no OpenCL
# runtime is installed.

set(_fmsa_ocl_dir ${CMAKE_CURRENT_LIST_DIR})

function(fmsa_opencl_probe)
  find_path(FMSA_OPENCL_INCLUDE_DIR NAMES CL/cl.h OpenCL/cl.h
            DOC "Directory holding the Khronos OpenCL headers (CL/cl.h)")
  if(FMSA_OPENCL_INCLUDE_DIR)
    set(FMSA_PROBE_FOUND TRUE PARENT_SCOPE)
    set(FMSA_PROBE_INCLUDE_DIRS ${FMSA_OPENCL_INCLUDE_DIR} PARENT_SCOPE)
  else()
    set(FMSA_PROBE_FOUND FALSE PARENT_SCOPE)
    set(FMSA_PROBE_WHY "CL/cl.h was not found (Debian: apt-get install opencl-c-headers)"
        PARENT_SCOPE)
  endif()
endfunction()

# One OpenCL program's source, embedded as the C array `var` in `out`: the
# shared headers (online softmax, score predicates) followed by the .cl files.
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

# The kernel embedding hook: the library carries its OpenCL C, so it needs no
# files at run time.
function(fmsa_opencl_embed)
  set(generic ${PROJECT_BINARY_DIR}/generated/fmsa_ocl_source.c)
  fmsa_embed_ocl_program(${generic} fmsa_ocl_kernel_source
    "Embedding the OpenCL kernel source"
    ${_fmsa_ocl_dir}/kernels/fmsa_ocl_common.cl
    ${_fmsa_ocl_dir}/kernels/fmsa_ocl_forward.cl
    ${_fmsa_ocl_dir}/kernels/fmsa_ocl_backward.cl)
  # The CPU-device variant (cpu/): its own program, so the generic one's
  # text (and the GPUs' binaries) do not change with it.
  set(cpu ${PROJECT_BINARY_DIR}/generated/fmsa_ocl_cpu_source.c)
  fmsa_embed_ocl_program(${cpu} fmsa_ocl_cpu_kernel_source
    "Embedding the OpenCL CPU-variant kernel source"
    ${_fmsa_ocl_dir}/cpu/fmsa_ocl_cpu_common.cl
    ${_fmsa_ocl_dir}/cpu/fmsa_ocl_cpu_forward.cl
    ${_fmsa_ocl_dir}/cpu/fmsa_ocl_cpu_backward.cl)
  # The kernels both families share (dsink's sums, fmsa_merge_states).
  set(aux ${PROJECT_BINARY_DIR}/generated/fmsa_ocl_aux_source.c)
  fmsa_embed_ocl_program(${aux} fmsa_ocl_aux_source
    "Embedding the OpenCL shared-kernel source"
    ${_fmsa_ocl_dir}/kernels/fmsa_ocl_aux.cl)
  set(FMSA_EMBEDDED ${generic} ${cpu} ${aux} PARENT_SCOPE)
endfunction()

# Threads: the backend's program cache lock (found even when the backend is
# off, which costs nothing: the CPU backend needs it as well).
find_package(Threads REQUIRED)
fmsa_add_backend(opencl
  DEFAULT AUTO
  DOC "OpenCL backend (needs only CL/cl.h to build)"
  PROBE fmsa_opencl_probe
  EMBED fmsa_opencl_embed
  SOURCES
    ocl_loader.c
    ocl_device.c
    ocl_backend.c
    ocl_config.c
    ocl_program.c
    ocl_launch.c
    ocl_args.c
    ocl_aux.c
    cpu/ocl_cpu.c
  DEFINITIONS CL_TARGET_OPENCL_VERSION=120
  LIBRARY_DEPS Threads::Threads ${CMAKE_DL_LIBS}
  # Exit status 77 (no OpenCL device) counts as skipped.  PoCL keeps compiled
  # kernels in POCL_CACHE_DIR, pointed into the build tree.
  TEST_ENV "FLASHMSA_TEST_BACKEND=opencl;POCL_CACHE_DIR=${CMAKE_BINARY_DIR}/pocl-cache"
  TEST_SKIP_RETURN_CODE 77
  TEST_TIMEOUT 900
  TESTS ${PROJECT_SOURCE_DIR}/tests/opencl.cmake)
if(FLASHMSA_HAVE_OPENCL)
  message(STATUS "flashmsa: OpenCL headers in ${FMSA_OPENCL_INCLUDE_DIR}; "
                 "libOpenCL.so.1 loaded at run time")
endif()
