# Build options.  Each backend is AUTO (on when its toolchain is found), ON
# (an error if it is not) or OFF.
set(FLASHMSA_OPENMP AUTO CACHE STRING "OpenMP for the CPU backend: AUTO|ON|OFF")
set(FLASHMSA_CUDA AUTO CACHE STRING "CUDA backend: AUTO|ON|OFF (AUTO: on where nvcc is found)")
set(FLASHMSA_HIP OFF CACHE STRING "HIP backend: AUTO|ON|OFF (not implemented yet)")
set(FLASHMSA_OPENCL AUTO CACHE STRING "OpenCL backend: AUTO|ON|OFF (needs only CL/cl.h to build)")
set_property(CACHE FLASHMSA_OPENMP FLASHMSA_CUDA FLASHMSA_HIP FLASHMSA_OPENCL
             PROPERTY STRINGS AUTO ON OFF)
option(FLASHMSA_SANITIZE "Build everything with AddressSanitizer + UBSan" OFF)

set(FMSA_LIBRARY_DEPS "")
find_library(FMSA_LIBM m)
if(FMSA_LIBM)
  list(APPEND FMSA_LIBRARY_DEPS ${FMSA_LIBM})
endif()
list(APPEND FMSA_LIBRARY_DEPS ${CMAKE_DL_LIBS})

if(NOT FLASHMSA_OPENMP STREQUAL "OFF")
  if(FLASHMSA_OPENMP STREQUAL "ON")
    find_package(OpenMP REQUIRED COMPONENTS C)
  else()
    find_package(OpenMP COMPONENTS C)
  endif()
  if(OpenMP_C_FOUND)
    list(APPEND FMSA_LIBRARY_DEPS OpenMP::OpenMP_C)
    set(FLASHMSA_HAVE_OPENMP 1)
  endif()
endif()

foreach(b HIP)
  if(FLASHMSA_${b} STREQUAL "ON")
    message(FATAL_ERROR "FLASHMSA_${b}=ON: the ${b} backend is not implemented in this version")
  endif()
endforeach()

# Warnings: strict for our own code.
function(fmsa_target_warnings target)
  if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wstrict-prototypes
                           -Wmissing-prototypes -Wno-unused-parameter)
  endif()
endfunction()

if(FLASHMSA_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
