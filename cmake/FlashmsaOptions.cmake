# Build options.  Each backend's option FLASHMSA_<NAME> (AUTO: on when its
# toolchain is found, ON: an error if it is not, OFF) is declared by its own
# fmsa_add_backend call (cmake/FlashmsaBackend.cmake).
set(FLASHMSA_OPENMP AUTO CACHE STRING "OpenMP for the CPU backend: AUTO|ON|OFF")
set_property(CACHE FLASHMSA_OPENMP PROPERTY STRINGS AUTO ON OFF)
option(FLASHMSA_SANITIZE "Build everything with AddressSanitizer + UBSan" OFF)
option(FLASHMSA_FUZZ "Build the libFuzzer harness tests/fuzz (clang; implies FLASHMSA_SANITIZE)" OFF)

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

# Backends the public enum names whose backends/<name>/backend.cmake is not in
# this tree yet: asking for one with ON fails loudly instead of being ignored.
# No cache entry is made here, so once the file lands its fmsa_add_backend
# call declares the option with its own default.
foreach(b CUDA HIP)
  string(TOLOWER ${b} dir)
  if(NOT EXISTS ${PROJECT_SOURCE_DIR}/backends/${dir}/backend.cmake)
    if(FLASHMSA_${b} STREQUAL "ON")
      message(FATAL_ERROR "FLASHMSA_${b}=ON: the ${b} backend is not implemented in this version")
    endif()
  endif()
endforeach()

# Warnings: strict for our own code.
function(fmsa_target_warnings target)
  if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wstrict-prototypes
                           -Wmissing-prototypes -Wno-unused-parameter)
  endif()
endfunction()

if(FLASHMSA_FUZZ)
  # coverage feedback for libFuzzer in every object; the harness links its main
  add_compile_options(-fsanitize=fuzzer-no-link)
  set(FLASHMSA_SANITIZE ON)
endif()
if(FLASHMSA_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
