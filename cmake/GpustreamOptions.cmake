# Build options. Each can be set with -D on the cmake command line. Tests, benchmarks, examples,
# the CLI and install rules default to ON only when gpustream is the top-level project; as a
# subproject (add_subdirectory, FetchContent) the parent builds the libraries it links and
# installs what it chooses (set GPUSTREAM_INSTALL=ON to install gpustream with it). CLI11 is
# looked for only when the CLI is built.
option(GPUSTREAM_BUILD_TESTS "Build the test suite" ${PROJECT_IS_TOP_LEVEL})
# OFF: the GoogleTest suites (tests/<folder>/) stay configured (their compile commands are in
# compile_commands.json for clang-tidy) but are not built by default nor registered with ctest;
# the other tests (integration, browser, Python, install, package, docs) still are. The full
# test command builds the suites once, in the sanitizer build, not twice (scripts/test.sh).
option(GPUSTREAM_TEST_SUITES "Build and register the GoogleTest suites" ON)
option(GPUSTREAM_BUILD_BENCHMARKS "Build the Google Benchmark programs" ${PROJECT_IS_TOP_LEVEL})
option(GPUSTREAM_BUILD_EXAMPLES "Build the examples" ${PROJECT_IS_TOP_LEVEL})
option(GPUSTREAM_BUILD_CLI "Build the gpustream command-line tool (needs CLI11)"
  ${PROJECT_IS_TOP_LEVEL})
option(GPUSTREAM_INSTALL "Generate install rules and the find_package(gpustream) package"
  ${PROJECT_IS_TOP_LEVEL})
option(GPUSTREAM_INSTALL_DEBUG_INFO
  "Keep debug information in the installed static libraries (default: stripped with --strip-debug)"
  OFF)
option(GPUSTREAM_USE_PCH "Precompile the heavy Boost headers" ON)
option(GPUSTREAM_WERROR "Treat warnings as errors" OFF)
option(GPUSTREAM_UNITY_BUILD
  "Compile the libraries, the CLI, the Python module and the GoogleTest suites in batches of sources (a unity build): less than half the CPU of a sanitizer build's compile; scripts/test.sh uses it for every build tree"
  OFF)
set(GPUSTREAM_SANITIZE "" CACHE STRING "Sanitizers: '', 'address,undefined' or 'thread'")

if(NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(GPUSTREAM_CCACHE ccache)
  if(GPUSTREAM_CCACHE)
    set(CMAKE_CXX_COMPILER_LAUNCHER "${GPUSTREAM_CCACHE}")
    set(CMAKE_C_COMPILER_LAUNCHER "${GPUSTREAM_CCACHE}")
  endif()
endif()

# How gpustream's own code compiles Asio: its implementation once, in sdk/src/asio_impl.cpp
# (separate compilation), without the deprecated names. Directory-scoped, so it applies to
# every target of this tree (libraries, CLI, tests, benchmarks, examples) and never to a parent
# project nor to an installed package's consumers, whose Asio code keeps its meaning
# (io_service included). Consumers that do not define it compile Asio's inline header-only
# form; the library's own copy is the same code, so both link together.
add_compile_definitions(BOOST_ASIO_SEPARATE_COMPILATION BOOST_ASIO_NO_DEPRECATED)

# Warnings for our own targets only.
add_library(gpustream_warnings INTERFACE)
target_compile_options(gpustream_warnings INTERFACE
  $<$<CXX_COMPILER_ID:GNU,Clang>:-Wall -Wextra -Wpedantic -Wno-missing-field-initializers>
  $<$<BOOL:${GPUSTREAM_WERROR}>:-Werror>)

if(GPUSTREAM_SANITIZE)
  string(REPLACE "," ";" _san "${GPUSTREAM_SANITIZE}")
  set(_flags "-fsanitize=${GPUSTREAM_SANITIZE}" -fno-omit-frame-pointer)
  if("undefined" IN_LIST _san)
    list(APPEND _flags -fno-sanitize-recover=undefined)
  endif()
  add_compile_options(${_flags})
  add_link_options("-fsanitize=${GPUSTREAM_SANITIZE}")
  if("address" IN_LIST _san)
    # The ASan+UBSan executables link as non-PIE: as PIE, their sanitizer metadata made a
    # 137 MB relocation table that the loader applied at every start, writing every page of a
    # 155 MB .data. CI starts a test binary once per GoogleTest case (about 1,500 times):
    # 0.24 → 0.10 CPU s per start (docs/benchmarks.md, "The test command's cold run").
    # Shared objects (the fake vendor libraries, the Python module) stay position independent.
    add_link_options($<$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>:-no-pie>)
  endif()
  # Precompiled headers stay on: the header is compiled with the same sanitizer flags, and
  # ccache caches PCH users given the sloppiness scripts/test.sh sets. A missing #include that
  # the PCH would hide is still caught by scripts/lint.sh, which compiles each changed file
  # without the PCH.
endif()

# gpustream_unity(target): the target's sources compiled in batches of 8 when
# GPUSTREAM_UNITY_BUILD is on. Each batch is one translation unit, so names in anonymous
# namespaces must be unique across a target's files (a clash is a compile error in the
# sanitizer builds). Measured on 10 probe sources under ASan: 42.2 → 17.7 CPU s.
function(gpustream_unity target)
  if(GPUSTREAM_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
    # GCC warns when a class of one file of a batch holds a type from another file's anonymous
    # namespace: true of the batch, not of the code (every file is its own unit elsewhere).
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(${target} PRIVATE -Wno-subobject-linkage)
    endif()
  endif()
endfunction()
