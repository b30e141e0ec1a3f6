# Script mode: install, configure the consumer against the installed tree, build it, run it.
cmake_policy(SET CMP0057 NEW)  # IN_LIST in script mode
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install "${BINARY_DIR}" --prefix "${prefix}")
if(NOT EXISTS "${prefix}/lib/cmake/gpustream/gpustreamConfig.cmake")
  message(FATAL_ERROR "gpustreamConfig.cmake was not installed under ${prefix}/lib/cmake/gpustream")
endif()
# The installed headers: exactly the targets' PUBLIC_HEADER lists, none of the private ones.
file(GLOB_RECURSE installed_headers RELATIVE "${prefix}/include" "${prefix}/include/*")
list(SORT installed_headers)
list(LENGTH installed_headers n_headers)
foreach(private "gpustream/log.hpp" "gpustream/detail/scheduler_impl.hpp"
    "gpustream/probes/nvidia_formats.hpp" "gpustream/probes/amd_probe.hpp"
    "gpustream/probes/apple_probe.hpp" "gpustream/probes/intel_probe.hpp"
    "gpustream/probes/readers.hpp")
  if(private IN_LIST installed_headers)
    message(FATAL_ERROR "the private header ${private} was installed")
  endif()
endforeach()
foreach(public "gpustream/telemetry.hpp" "gpustream/version.hpp" "gpustream/probes/registry.hpp"
    "gpustream/transport/server.hpp")
  if(NOT public IN_LIST installed_headers)
    message(FATAL_ERROR "${public} was not installed")
  endif()
endforeach()
string(REPLACE ";" " " _list "${installed_headers}")
message(STATUS "installed headers (${n_headers}): ${_list}")
file(READ "${prefix}/include/gpustream/version.hpp" version_hpp)
if(NOT version_hpp MATCHES "#define GPUSTREAM_VERSION_STRING \"${VERSION}\"")
  message(FATAL_ERROR "version.hpp does not say ${VERSION}:
${version_hpp}")
endif()

# The exported targets: relocatable (no absolute libnats path), and no private definitions that
# would change a consumer's own code.
file(READ "${prefix}/lib/cmake/gpustream/gpustreamTargets.cmake" targets)
foreach(bad "libnats.so" "BOOST_ASIO_NO_DEPRECATED" "BOOST_ASIO_SEPARATE_COMPILATION")
  string(FIND "${targets}" "${bad}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "gpustreamTargets.cmake contains '${bad}'")
  endif()
endforeach()

# The installed static libraries carry no debug information by default: stripping a copy again
# must not make it smaller. Their sizes are reported.
set(sizes "")
foreach(lib gpustream_sdk gpustream_probes gpustream_transport)
  set(file "${prefix}/lib/lib${lib}.a")
  file(SIZE "${file}" installed)
  if(STRIP)
    file(COPY_FILE "${file}" "${WORK_DIR}/${lib}.a")
    run("${STRIP}" --strip-debug "${WORK_DIR}/${lib}.a")
    file(SIZE "${WORK_DIR}/${lib}.a" restripped)
    if(restripped LESS installed)
      message(FATAL_ERROR "lib${lib}.a was installed with debug information (${installed} bytes; ${restripped} without)")
    endif()
  endif()
  string(APPEND sizes " lib${lib}.a=${installed}")
endforeach()
message(STATUS "installed sizes (bytes):${sizes}")

run(${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/install/consumer" -B "${WORK_DIR}/build"
    -G "${GENERATOR}" -DCMAKE_CXX_COMPILER=${COMPILER} -DCMAKE_PREFIX_PATH=${prefix})
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run("${WORK_DIR}/build/consumer")
string(FIND "${last_output}" "version=${VERSION} " pos)
if(pos EQUAL -1)
  message(FATAL_ERROR "the consumer did not see version ${VERSION}:\n${last_output}")
endif()
string(FIND "${last_output}" "consumer: ok" pos)
if(pos EQUAL -1)
  message(FATAL_ERROR "consumer did not print 'consumer: ok':\n${last_output}")
endif()
message(STATUS "${last_output}")

# A version that is not installed is refused by the package's version file.
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/install/too_new"
    -B "${WORK_DIR}/too_new" -G "${GENERATOR}" -DCMAKE_CXX_COMPILER=${COMPILER}
    -DCMAKE_PREFIX_PATH=${prefix}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "find_package(gpustream 99.0) was accepted by gpustream ${VERSION}")
endif()
if(NOT err MATCHES "99\\.0" OR NOT err MATCHES "${VERSION}")
  message(FATAL_ERROR "find_package(gpustream 99.0) failed without naming both versions:\n${err}")
endif()
message(STATUS "find_package(gpustream 99.0) refused, as it must be")
