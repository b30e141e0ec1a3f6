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
# One targets file per component (find_package(gpustream COMPONENTS ...)).
file(GLOB targets_files "${prefix}/lib/cmake/gpustream/gpustream_*Targets.cmake")
foreach(component sdk probes transport)
  if(NOT "${prefix}/lib/cmake/gpustream/gpustream_${component}Targets.cmake" IN_LIST targets_files)
    message(FATAL_ERROR "gpustream_${component}Targets.cmake was not installed")
  endif()
endforeach()
foreach(file IN LISTS targets_files)
  file(READ "${file}" targets)
  foreach(bad "libnats.so" "BOOST_ASIO_NO_DEPRECATED" "BOOST_ASIO_SEPARATE_COMPILATION")
    string(FIND "${targets}" "${bad}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${file} contains '${bad}'")
    endif()
  endforeach()
endforeach()

# The installed static libraries carry no debug information by default: stripping a copy again
# must not make it smaller. Their sizes are reported.
set(sizes "")
set(libs gpustream_sdk gpustream_probes gpustream_transport)
if(BENCHMARK_HELPER)
  list(APPEND libs gpustream_benchmark)
endif()
foreach(lib IN LISTS libs)
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

# Each component's dependencies load only when it is asked for. With libnats hidden from
# pkg-config (an empty PKG_CONFIG_LIBDIR), a program that asks only for the probes configures,
# builds and runs, and libnats is not even looked for; find_package(gpustream) without
# COMPONENTS still works (transport is left out, saying why); asking for transport fails naming
# libnats.
# libdeflate (which transport always needs) stays visible there: its .pc file is copied in.
set(no_nats "${WORK_DIR}/no-pkgconfig")
file(MAKE_DIRECTORY "${no_nats}")
find_program(PKG_CONFIG NAMES pkg-config pkgconf REQUIRED)
run("${PKG_CONFIG}" --variable=pcfiledir libdeflate)
string(STRIP "${last_output}" deflate_pc_dir)
file(COPY "${deflate_pc_dir}/libdeflate.pc" DESTINATION "${no_nats}")
set(no_pkgconfig "${WORK_DIR}/empty-pkgconfig")
file(MAKE_DIRECTORY "${no_pkgconfig}")
set(hide_nats ${CMAKE_COMMAND} -E env PKG_CONFIG_LIBDIR=${no_nats} PKG_CONFIG_PATH=)
function(configure_components dir want)
  if(ARGC GREATER 2)
    set(hide ${CMAKE_COMMAND} -E env PKG_CONFIG_LIBDIR=${ARGV2} PKG_CONFIG_PATH=)
  else()
    set(hide ${hide_nats})
  endif()
  execute_process(COMMAND ${hide} ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/install/components"
      -B "${WORK_DIR}/${dir}" -G "${GENERATOR}" -DCMAKE_CXX_COMPILER=${COMPILER}
      -DCMAKE_PREFIX_PATH=${prefix} "-DWANT=${want}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(rc "${rc}" PARENT_SCOPE)
  set(out "${out}\n${err}" PARENT_SCOPE)
endfunction()

configure_components(probes-only "probes")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "find_package(gpustream COMPONENTS probes) needed more than the probes' "
    "dependencies (libnats hidden):\n${out}")
endif()
foreach(expect "loaded: sdk" "loaded: probes")
  string(FIND "${out}" "${expect}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "COMPONENTS probes: '${expect}' missing:\n${out}")
  endif()
endforeach()
foreach(unexpected "loaded: transport" "loaded: benchmark" "libnats was looked for")
  string(FIND "${out}" "${unexpected}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "COMPONENTS probes: '${unexpected}':\n${out}")
  endif()
endforeach()
run(${CMAKE_COMMAND} --build "${WORK_DIR}/probes-only")
run("${WORK_DIR}/probes-only/probes_only")
if(NOT last_output MATCHES "probes_only: ok devices=1")
  message(FATAL_ERROR "probes_only did not run:\n${last_output}")
endif()
message(STATUS "find_package(gpustream COMPONENTS probes) without libnats: built and ran")

configure_components(no-components "")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "find_package(gpustream) without COMPONENTS failed with libnats hidden:\n${out}")
endif()
if(NATS AND NOT out MATCHES "left out: component 'transport' needs libnats")
  message(FATAL_ERROR "find_package(gpustream) did not say why transport was left out:\n${out}")
endif()
if(NOT out MATCHES "loaded: probes")
  message(FATAL_ERROR "find_package(gpustream) did not load the probes:\n${out}")
endif()

if(NATS)
  configure_components(transport-no-nats "transport")
  if(rc EQUAL 0 OR NOT out MATCHES "component 'transport' needs libnats")
    message(FATAL_ERROR "find_package(gpustream COMPONENTS transport) without libnats did not fail "
      "naming libnats (rc=${rc}):\n${out}")
  endif()
  message(STATUS "find_package(gpustream COMPONENTS transport) without libnats refused, naming it")
endif()

# With nothing visible to pkg-config, transport is refused naming libdeflate (the bus's
# compression: needed with or without the NATS bridge).
configure_components(transport-no-deflate "transport" "${no_pkgconfig}")
if(rc EQUAL 0 OR NOT out MATCHES "component 'transport' needs libdeflate")
  message(FATAL_ERROR "find_package(gpustream COMPONENTS transport) without libdeflate did not "
    "fail naming libdeflate (rc=${rc}):\n${out}")
endif()
message(STATUS "find_package(gpustream COMPONENTS transport) without libdeflate refused, naming it")

configure_components(unknown "probes;nonsense")
if(rc EQUAL 0 OR NOT out MATCHES "component 'nonsense' is not part of this gpustream")
  message(FATAL_ERROR "an unknown component was not refused by name (rc=${rc}):\n${out}")
endif()

# gpustream::benchmark: a Google Benchmark program with no main() of its own, one simulated GPU.
if(BENCHMARK_HELPER)
  run(${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/install/bench_consumer"
      -B "${WORK_DIR}/bench_consumer" -G "${GENERATOR}" -DCMAKE_CXX_COMPILER=${COMPILER}
      -DCMAKE_PREFIX_PATH=${prefix})
  run(${CMAKE_COMMAND} --build "${WORK_DIR}/bench_consumer")
  file(WRITE "${WORK_DIR}/simulated.json" "{\"probes\": [\"simulated\"], \"simulate\": 1}\n")
  run(${CMAKE_COMMAND} -E env "GPUSTREAM_BENCHMARK_CONFIG=${WORK_DIR}/simulated.json"
      "${WORK_DIR}/bench_consumer/bench_consumer" --benchmark_min_time=0.01
      --benchmark_format=json)
  foreach(counter gpu_energy_J gpu_power_mean_W gpu_window_s)
    if(NOT last_output MATCHES "\"${counter}\": [0-9]")
      message(FATAL_ERROR "bench_consumer has no counter ${counter}:\n${last_output}")
    endif()
  endforeach()
  message(STATUS "find_package(gpustream COMPONENTS benchmark): the benchmark ran with its counters")
endif()
