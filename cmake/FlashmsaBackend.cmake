# How a backend plugs into the build: one call of fmsa_add_backend() in
# backends/<name>/backend.cmake, which the top-level CMakeLists.txt includes
# (one line per backend).  The same call serves the CPU and the OpenCL
# backend, so a new backend copies a pattern that is known to work
# (backends/README.md lists everything else a backend adds).
#
#   fmsa_add_backend(<name>
#     [ALWAYS | DEFAULT <AUTO|ON|OFF>] [DOC <text>]
#     [LANGUAGE <CUDA|HIP>]
#     [PROBE <function>] [EMBED <function>]
#     SOURCES <files...>
#     [INCLUDE_DIRS <dirs...>] [DEFINITIONS <defs...>] [LIBRARY_DEPS <libs...>]
#     [TEST_LABEL <label>] [TEST_ENV <VAR=value...>] [TEST_SKIP_RETURN_CODE <rc>]
#     [TEST_TIMEOUT <s>] [TEST_NAME_SUFFIX <suffix>|NONE] [TESTS <file>])
#
# - The option FLASHMSA_<NAME> (AUTO|ON|OFF, default DEFAULT): AUTO builds the
#   backend when its toolchain is found, ON makes a missing one an error, OFF
#   skips it.  ALWAYS (the CPU): no option, and a missing toolchain is an error.
# - LANGUAGE: the backend's device language.  It is checked (check_language)
#   and enabled (enable_language) only when the backend is on, so a machine
#   without nvcc / hipcc configures as before.  That is why fmsa_add_backend is
#   a macro: enable_language must run at file scope, and every backend.cmake is
#   included from the top-level directory, the one all targets share.  The
#   backend sets its own language flags (e.g. CMAKE_CUDA_ARCHITECTURES) before
#   the call.
# - PROBE: a function that looks for what the backend needs to build and sets
#   in its PARENT_SCOPE FMSA_PROBE_FOUND (TRUE/FALSE), when not found
#   FMSA_PROBE_WHY, and when found FMSA_PROBE_INCLUDE_DIRS (headers it found,
#   added like INCLUDE_DIRS).  Runs after the LANGUAGE check, and not at all
#   when the option is OFF.
# - EMBED: the kernel embedding hook, a function called only when the backend
#   is on; it returns generated sources (kernel text or binaries as C arrays)
#   in FMSA_EMBEDDED (PARENT_SCOPE), which join SOURCES.
# - SOURCES (relative to the calling file), INCLUDE_DIRS and DEFINITIONS go
#   to flashmsa_objects, with FLASHMSA_HAVE_<NAME>=1: the macro that puts the
#   backend into the registry (common/backend_list.h).  LIBRARY_DEPS join
#   FMSA_LIBRARY_DEPS, which both libraries link.
# - Sets FLASHMSA_HAVE_<NAME> (1 or 0) in the caller's scope.
# - The TEST_* arguments say how the backend-neutral suites run on it
#   (fmsa_add_backend_suites, called by tests/CMakeLists.txt): each suite as
#   `<suite><suffix> --backend <name>` (suffix default _<name>; NONE keeps the
#   plain suite name, the CPU's), labels <label> (default <name>) and, for the
#   api suites, api too; TEST_ENV is the environment of each run; a GPU backend
#   gives TEST_SKIP_RETURN_CODE 77 (the suites' "no device").  TESTS is a
#   file of the backend's own extra registrations, included after them.

set(FMSA_BACKEND_ONE_VALUE DEFAULT DOC LANGUAGE PROBE EMBED TEST_LABEL TEST_SKIP_RETURN_CODE
    TEST_TIMEOUT TEST_NAME_SUFFIX TESTS)
set(FMSA_BACKEND_MULTI_VALUE SOURCES INCLUDE_DIRS DEFINITIONS LIBRARY_DEPS TEST_ENV)

# Whether backend <name> is on: the option, the device language, the probe.
# Sets _fmsa_backend_on and _fmsa_backend_language in the caller's scope.
function(_fmsa_backend_decide name)
  cmake_parse_arguments(B "ALWAYS" "${FMSA_BACKEND_ONE_VALUE}" "${FMSA_BACKEND_MULTI_VALUE}" ${ARGN})
  string(TOUPPER "${name}" NAME)
  set(_fmsa_backend_on FALSE PARENT_SCOPE)
  set(_fmsa_backend_language "" PARENT_SCOPE)
  set(_fmsa_backend_probe_include_dirs "" PARENT_SCOPE)
  set(FLASHMSA_HAVE_${NAME} 0 PARENT_SCOPE)
  if(B_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "fmsa_add_backend(${name}): unknown arguments ${B_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT B_ALWAYS)
    if(NOT B_DEFAULT)
      set(B_DEFAULT AUTO)
    endif()
    set(FLASHMSA_${NAME} ${B_DEFAULT} CACHE STRING "${B_DOC}: AUTO|ON|OFF")
    set_property(CACHE FLASHMSA_${NAME} PROPERTY STRINGS AUTO ON OFF)
    if(NOT FLASHMSA_${NAME} MATCHES "^(AUTO|ON|OFF)$")
      message(FATAL_ERROR "FLASHMSA_${NAME}=${FLASHMSA_${NAME}}: expected AUTO, ON or OFF")
    endif()
    if(FLASHMSA_${NAME} STREQUAL "OFF")
      message(STATUS "flashmsa: ${name} backend off (FLASHMSA_${NAME}=OFF)")
      return()
    endif()
  endif()
  set(found TRUE)
  set(why "")
  if(B_LANGUAGE)
    include(CheckLanguage)
    check_language(${B_LANGUAGE})
    if(NOT CMAKE_${B_LANGUAGE}_COMPILER)
      set(found FALSE)
      set(why "no ${B_LANGUAGE} compiler was found")
    endif()
  endif()
  if(found AND B_PROBE)
    set(FMSA_PROBE_FOUND FALSE)
    set(FMSA_PROBE_WHY "${B_PROBE} found nothing")
    set(FMSA_PROBE_INCLUDE_DIRS "")
    cmake_language(CALL ${B_PROBE})
    set(found ${FMSA_PROBE_FOUND})
    set(why "${FMSA_PROBE_WHY}")
    set(_fmsa_backend_probe_include_dirs "${FMSA_PROBE_INCLUDE_DIRS}" PARENT_SCOPE)
  endif()
  if(NOT found)
    if(B_ALWAYS OR FLASHMSA_${NAME} STREQUAL "ON")
      message(FATAL_ERROR "flashmsa: the ${name} backend cannot be built: ${why}")
    endif()
    message(STATUS "flashmsa: ${name} backend off (${why})")
    return()
  endif()
  set(_fmsa_backend_on TRUE PARENT_SCOPE)
  set(_fmsa_backend_language "${B_LANGUAGE}" PARENT_SCOPE)
endfunction()

# Adds an enabled backend's sources, definitions and test registration.
function(_fmsa_backend_add name)
  cmake_parse_arguments(B "ALWAYS" "${FMSA_BACKEND_ONE_VALUE}" "${FMSA_BACKEND_MULTI_VALUE}" ${ARGN})
  string(TOUPPER "${name}" NAME)
  set(sources "")
  foreach(src IN LISTS B_SOURCES)
    get_filename_component(src "${src}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_LIST_DIR}")
    list(APPEND sources "${src}")
  endforeach()
  if(B_EMBED)
    set(FMSA_EMBEDDED "")
    cmake_language(CALL ${B_EMBED})
    list(APPEND sources ${FMSA_EMBEDDED})
  endif()
  target_sources(flashmsa_objects PRIVATE ${sources})
  if(B_LANGUAGE)
    # flashmsa_objects exists before the language does, so it did not pick up
    # CMAKE_<LANG>_ARCHITECTURES when it was created
    set_property(TARGET flashmsa_objects PROPERTY ${B_LANGUAGE}_ARCHITECTURES
                 "${CMAKE_${B_LANGUAGE}_ARCHITECTURES}")
  endif()
  target_compile_definitions(flashmsa_objects PRIVATE FLASHMSA_HAVE_${NAME}=1 ${B_DEFINITIONS})
  if(B_INCLUDE_DIRS OR _fmsa_backend_probe_include_dirs)
    target_include_directories(flashmsa_objects PRIVATE ${B_INCLUDE_DIRS}
                               ${_fmsa_backend_probe_include_dirs})
  endif()
  set(FMSA_LIBRARY_DEPS ${FMSA_LIBRARY_DEPS} ${B_LIBRARY_DEPS} PARENT_SCOPE)
  set(FLASHMSA_HAVE_${NAME} 1 PARENT_SCOPE)

  if(NOT B_TEST_LABEL)
    set(B_TEST_LABEL ${name})
  endif()
  if(NOT DEFINED B_TEST_NAME_SUFFIX)
    set(B_TEST_NAME_SUFFIX _${name})
  elseif(B_TEST_NAME_SUFFIX STREQUAL "NONE")
    set(B_TEST_NAME_SUFFIX "")
  endif()
  if(NOT B_TEST_TIMEOUT)
    set(B_TEST_TIMEOUT 600)
  endif()
  if(B_TESTS)
    get_filename_component(B_TESTS "${B_TESTS}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_LIST_DIR}")
  endif()
  set_property(GLOBAL APPEND PROPERTY FMSA_BACKENDS ${name})
  foreach(key LABEL ENV SKIP_RETURN_CODE TIMEOUT NAME_SUFFIX)
    set_property(GLOBAL PROPERTY FMSA_BACKEND_${NAME}_TEST_${key} "${B_TEST_${key}}")
  endforeach()
  set_property(GLOBAL PROPERTY FMSA_BACKEND_${NAME}_TEST_TESTS "${B_TESTS}")
  message(STATUS "flashmsa: ${name} backend on")
endfunction()

macro(fmsa_add_backend name)
  _fmsa_backend_decide(${name} ${ARGN})
  if(_fmsa_backend_on)
    if(_fmsa_backend_language)
      enable_language(${_fmsa_backend_language})
    endif()
    _fmsa_backend_add(${name} ${ARGN})
  endif()
endmacro()

# Registers the backend-neutral suites (executables already built) for every
# backend that is on, then each backend's own TESTS file.  Called once, from
# tests/CMakeLists.txt.
function(fmsa_add_backend_suites)
  get_property(backends GLOBAL PROPERTY FMSA_BACKENDS)
  foreach(name IN LISTS backends)
    string(TOUPPER "${name}" NAME)
    foreach(key LABEL ENV SKIP_RETURN_CODE TIMEOUT NAME_SUFFIX TESTS)
      get_property(${key} GLOBAL PROPERTY FMSA_BACKEND_${NAME}_TEST_${key})
    endforeach()
    foreach(suite IN LISTS ARGN)
      set(test ${suite}${NAME_SUFFIX})
      set(labels ${LABEL})
      if(suite MATCHES "^test_api_")
        set(labels api ${LABEL})
      endif()
      add_test(NAME ${test} COMMAND ${suite} --backend ${name})
      set_tests_properties(${test} PROPERTIES LABELS "${labels}" ENVIRONMENT "${ENV}"
                           TIMEOUT ${TIMEOUT})
      if(NOT SKIP_RETURN_CODE STREQUAL "")
        set_tests_properties(${test} PROPERTIES SKIP_RETURN_CODE ${SKIP_RETURN_CODE})
      endif()
    endforeach()
    if(TESTS)
      include(${TESTS})
    endif()
  endforeach()
endfunction()
