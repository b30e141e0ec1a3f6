# Script mode: configure a parent project that includes gpustream with add_subdirectory, with no
# CMAKE_BUILD_TYPE, and check that gpustream leaves the parent alone: no build type forced into
# its cache, no install rules of gpustream's (GPUSTREAM_INSTALL defaults OFF in a subproject),
# no tests/benchmarks/examples/CLI (and no search for CLI11), and no private Asio definitions on
# gpustream::sdk's interface. With -DBUILD=ON it then builds and runs the parent's program that
# embeds gpustream (parent/consumer.cpp), which checks the version.
file(REMOVE_RECURSE "${WORK_DIR}")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

# The build compiles gpustream::sdk's sources in the parent: in batches
# (GPUSTREAM_UNITY_BUILD, a parent's choice the subproject honours): 58 CPU s against 106 one unit
# per file (measured with ccache off), and the longest of the normal build's tests otherwise
# (issue #32). The configure-only test keeps every option at its default.
set(parent_options "")
if(BUILD)
  set(parent_options -DGPUSTREAM_UNITY_BUILD=ON)
endif()
run(${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/install/parent" -B "${WORK_DIR}/build"
    -G "${GENERATOR}" -DCMAKE_CXX_COMPILER=${COMPILER} -DGPUSTREAM_SOURCE_DIR=${SOURCE_DIR}
    ${parent_options})

file(STRINGS "${WORK_DIR}/build/CMakeCache.txt" build_type REGEX "^CMAKE_BUILD_TYPE:")
if(NOT build_type MATCHES "^CMAKE_BUILD_TYPE:[A-Z]*=$")
  message(FATAL_ERROR "gpustream set the parent's build type: ${build_type}")
endif()
foreach(opt GPUSTREAM_INSTALL GPUSTREAM_BUILD_TESTS GPUSTREAM_BUILD_BENCHMARKS GPUSTREAM_BUILD_EXAMPLES
    GPUSTREAM_BUILD_CLI)
  file(STRINGS "${WORK_DIR}/build/CMakeCache.txt" line REGEX "^${opt}:BOOL=")
  if(NOT line STREQUAL "${opt}:BOOL=OFF")
    message(FATAL_ERROR "${opt} must default to OFF in a subproject, got '${line}'")
  endif()
endforeach()
file(STRINGS "${WORK_DIR}/build/CMakeCache.txt" cli11 REGEX "^CLI11_DIR:")
if(cli11)
  message(FATAL_ERROR "gpustream looked for CLI11 without building its CLI: ${cli11}")
endif()
file(READ "${WORK_DIR}/build/gpustream/cmake_install.cmake" sub_install)
if(sub_install MATCHES "gpustream_[a-z]+Targets|gpustreamConfig|libgpustream_sdk")
  message(FATAL_ERROR "gpustream generated install rules as a subproject")
endif()
file(READ "${WORK_DIR}/build/sdk_interface_definitions.txt" defs)
if(defs MATCHES "BOOST_ASIO")
  message(FATAL_ERROR "gpustream::sdk exports Asio definitions to its users: ${defs}")
endif()
message(STATUS "subproject: build type untouched, no install rules, interface definitions '${defs}'")

if(BUILD)
  # Two jobs: the machines that run the suite are shared.
  run(${CMAKE_COMMAND} --build "${WORK_DIR}/build" --target parent_consumer --parallel 2)
  run("${WORK_DIR}/build/parent_consumer")
  string(FIND "${last_output}" "parent consumer: ok version=${VERSION}" pos)
  if(pos EQUAL -1)
    message(FATAL_ERROR "the add_subdirectory consumer did not print 'ok version=${VERSION}':\n${last_output}")
  endif()
  message(STATUS "${last_output}")
endif()
