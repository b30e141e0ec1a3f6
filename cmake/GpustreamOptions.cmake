# Build options. Each can be set with -D on the cmake command line.
option(GPUSTREAM_BUILD_TESTS "Build the test suite" ON)
option(GPUSTREAM_BUILD_BENCHMARKS "Build the Google Benchmark programs" ON)
option(GPUSTREAM_BUILD_EXAMPLES "Build the examples" ON)
option(GPUSTREAM_USE_PCH "Precompile the heavy Boost headers" ON)
option(GPUSTREAM_WERROR "Treat warnings as errors" OFF)
set(GPUSTREAM_SANITIZE "" CACHE STRING "Sanitizers: '', 'address,undefined' or 'thread'")

if(NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(GPUSTREAM_CCACHE ccache)
  if(GPUSTREAM_CCACHE)
    set(CMAKE_CXX_COMPILER_LAUNCHER "${GPUSTREAM_CCACHE}")
    set(CMAKE_C_COMPILER_LAUNCHER "${GPUSTREAM_CCACHE}")
  endif()
endif()

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
  # PCH and sanitizer flags mix badly with ccache; keep the sanitizer builds plain.
  set(GPUSTREAM_USE_PCH OFF CACHE BOOL "" FORCE)
endif()
