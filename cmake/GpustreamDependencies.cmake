# Third-party dependencies, all from Debian's packages (see scripts/deps.sh).
set(Boost_NO_WARN_NEW_VERSIONS ON)
find_package(Boost 1.81 REQUIRED COMPONENTS json url)
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
# TLS on the listeners and in the clients (Asio's ssl over Debian's libssl-dev).
find_package(OpenSSL 1.1.1 REQUIRED)

if(GPUSTREAM_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()
if(GPUSTREAM_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
  find_package(nlohmann_json 3 QUIET)
endif()
# gpustream::benchmark (benchmark/, the Google Benchmark helper): built whenever Google Benchmark
# (Debian libbenchmark-dev) is found, like the NATS bridge with libnats.
option(GPUSTREAM_BUILD_BENCHMARK_HELPER
  "Build gpustream::benchmark (Google Benchmark counters) when Google Benchmark is found" ON)
set(GPUSTREAM_HAS_BENCHMARK_HELPER OFF)
if(GPUSTREAM_BUILD_BENCHMARK_HELPER)
  if(NOT benchmark_FOUND)
    find_package(benchmark QUIET)
  endif()
  if(benchmark_FOUND)
    set(GPUSTREAM_HAS_BENCHMARK_HELPER ON)
  else()
    message(STATUS "gpustream: gpustream::benchmark disabled (install libbenchmark-dev)")
  endif()
endif()
if(GPUSTREAM_BUILD_CLI)
  find_package(CLI11 REQUIRED)
endif()
# The Python module (python/, `import gpustream`): built by default whenever pybind11 (Debian
# pybind11-dev) and Python's headers (python3-dev) are found, as the NATS bridge is with libnats.
# The interpreter is Debian's /usr/bin/python3 when it exists (a python3 earlier on PATH, e.g.
# pyenv's, may lack the headers or be another version); -DPython3_EXECUTABLE=... picks another.
# Off by default in sanitizer builds: an instrumented extension cannot be loaded into a plain
# interpreter.
if(GPUSTREAM_SANITIZE)
  set(_gpustream_python_default OFF)
else()
  set(_gpustream_python_default ${PROJECT_IS_TOP_LEVEL})
endif()
option(GPUSTREAM_BUILD_PYTHON
  "Build the Python module when pybind11 and the Python headers are found" ${_gpustream_python_default})
set(GPUSTREAM_HAS_PYTHON OFF)
if(GPUSTREAM_BUILD_PYTHON)
  if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python3_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "The Python the module is built for")
  endif()
  find_package(Python3 QUIET COMPONENTS Interpreter Development.Module)
  if(Python3_FOUND)
    find_package(pybind11 CONFIG QUIET)
  endif()
  if(Python3_FOUND AND pybind11_FOUND)
    set(GPUSTREAM_HAS_PYTHON ON)
    message(STATUS "gpustream: Python module enabled (Python ${Python3_VERSION} at "
      "${Python3_EXECUTABLE}, pybind11 ${pybind11_VERSION})")
  else()
    message(STATUS "gpustream: Python module disabled (install pybind11-dev and python3-dev)")
  endif()
endif()
