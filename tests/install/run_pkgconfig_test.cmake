# Script mode: installs gpustream, moves the installed tree elsewhere (gpustream.pc must find its
# prefix from its own place), then builds a program with nothing but
#   c++ $(pkg-config --cflags gpustream) main.cpp $(pkg-config --libs --static gpustream)
# and runs it. The version pkg-config reports is the one in gpustream/version.hpp.
#   -DBINARY_DIR= -DSOURCE_DIR= -DWORK_DIR= -DCOMPILER= -DVERSION=
file(REMOVE_RECURSE "${WORK_DIR}")
find_program(PKG_CONFIG NAMES pkg-config pkgconf REQUIRED)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install "${BINARY_DIR}" --prefix "${WORK_DIR}/staged")
file(RENAME "${WORK_DIR}/staged" "${WORK_DIR}/moved")
set(prefix "${WORK_DIR}/moved")
set(ENV{PKG_CONFIG_PATH} "${prefix}/lib/pkgconfig")
unset(ENV{PKG_CONFIG_LIBDIR})

run("${PKG_CONFIG}" --modversion gpustream)
if(NOT last_output STREQUAL "${VERSION}")
  message(FATAL_ERROR "pkg-config --modversion gpustream: '${last_output}', expected '${VERSION}'")
endif()
run("${PKG_CONFIG}" --variable=prefix gpustream)
get_filename_component(pc_prefix "${last_output}" REALPATH)
get_filename_component(real_prefix "${prefix}" REALPATH)
if(NOT pc_prefix STREQUAL real_prefix)
  message(FATAL_ERROR "gpustream.pc is not relocatable: prefix '${pc_prefix}', installed at '${real_prefix}'")
endif()
run("${PKG_CONFIG}" --cflags gpustream)
separate_arguments(cflags UNIX_COMMAND "${last_output}")
run("${PKG_CONFIG}" --libs --static gpustream)
separate_arguments(libs UNIX_COMMAND "${last_output}")
# A version the package is not must be refused.
execute_process(COMMAND "${PKG_CONFIG}" --exists "gpustream >= 99.0" RESULT_VARIABLE rc)
if(rc EQUAL 0)
  message(FATAL_ERROR "pkg-config accepted 'gpustream >= 99.0'")
endif()

run("${COMPILER}" -std=c++20 ${cflags} "-DEXPECTED_VERSION=\"${VERSION}\""
    "${SOURCE_DIR}/tests/install/pkgconfig/main.cpp" -o "${WORK_DIR}/pc_consumer" ${libs})
run("${WORK_DIR}/pc_consumer")
string(FIND "${last_output}" "pkg-config consumer: ok" pos)
if(pos EQUAL -1)
  message(FATAL_ERROR "the pkg-config consumer did not print 'ok':\n${last_output}")
endif()
message(STATUS "${last_output} (cflags: ${cflags}; libs --static: ${libs})")
