# Script mode: install, configure the consumer against the installed tree, build it, run it.
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
string(FIND "${last_output}" "consumer: ok" pos)
if(pos EQUAL -1)
  message(FATAL_ERROR "consumer did not print 'consumer: ok':\n${last_output}")
endif()
message(STATUS "${last_output}")
