# Installation: the shared library, its public headers, a CMake package
# (find_package(flashmsa CONFIG) -> flashmsa::flashmsa) and a pkg-config file.
#
# Only the shared library is installed.  Its link dependencies (OpenMP, libm,
# libdl) are PRIVATE, so they do not appear in the exported interface: a
# consumer links libflashmsa.so and the loader finds the rest, and the package
# needs no find_dependency() calls.  The static library and the command-line
# program's internals stay in the build tree; the `flashmsa` program itself is
# installed by apps/CMakeLists.txt.
include(CMakePackageConfigHelpers)

set(FLASHMSA_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/flashmsa"
    CACHE STRING "Where flashmsaConfig.cmake is installed, relative to the prefix")
mark_as_advanced(FLASHMSA_INSTALL_CMAKEDIR)

install(TARGETS flashmsa EXPORT flashmsaTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/flashmsa
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")

install(EXPORT flashmsaTargets
  NAMESPACE flashmsa::
  FILE flashmsaTargets.cmake
  DESTINATION ${FLASHMSA_INSTALL_CMAKEDIR})
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/flashmsaConfig.cmake.in
  ${PROJECT_BINARY_DIR}/flashmsaConfig.cmake
  INSTALL_DESTINATION ${FLASHMSA_INSTALL_CMAKEDIR})
# 0.x: a minor release may change the API, so only the same minor matches.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/flashmsaConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/flashmsaConfig.cmake
  ${PROJECT_BINARY_DIR}/flashmsaConfigVersion.cmake
  DESTINATION ${FLASHMSA_INSTALL_CMAKEDIR})

# pkg-config: paths relative to the .pc file (${pcfiledir}), so the package
# stays correct when installed with `cmake --install --prefix <elsewhere>`.
set(FMSA_PC_DIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
if(IS_ABSOLUTE "${FMSA_PC_DIR}")
  set(FMSA_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH FMSA_PC_UP "/${FMSA_PC_DIR}" "/")
  string(REGEX REPLACE "/$" "" FMSA_PC_UP "${FMSA_PC_UP}")
  set(FMSA_PC_PREFIX "\${pcfiledir}/${FMSA_PC_UP}")
endif()
foreach(kind LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
    set(FMSA_PC_${kind} "${CMAKE_INSTALL_${kind}}")
  else()
    set(FMSA_PC_${kind} "\${prefix}/${CMAKE_INSTALL_${kind}}")
  endif()
endforeach()
# For static linking (pkg-config --static) only; the shared library records
# its own dependencies.
set(FMSA_PC_LIBS_PRIVATE "-lm")
if(FLASHMSA_HAVE_OPENMP)
  string(APPEND FMSA_PC_LIBS_PRIVATE " ${OpenMP_C_FLAGS}")
endif()
if(CMAKE_DL_LIBS)
  string(APPEND FMSA_PC_LIBS_PRIVATE " -l${CMAKE_DL_LIBS}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/flashmsa.pc.in
               ${PROJECT_BINARY_DIR}/flashmsa.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/flashmsa.pc DESTINATION ${FMSA_PC_DIR})
