# Installation and the find_package(gpustream) package.
#
#   cmake --install build --prefix /opt/gpustream
#   # in another project:
#   find_package(gpustream REQUIRED)          # CMAKE_PREFIX_PATH=/opt/gpustream
#   target_link_libraries(app PRIVATE gpustream::sdk gpustream::probes)
#   # or: pkg-config --cflags --libs --static gpustream  (PKG_CONFIG_PATH=/opt/gpustream/lib/pkgconfig)
#
# The package's components (find_package(gpustream COMPONENTS ...), one export set and one
# gpustream_<component>Targets.cmake each, their dependencies looked for only when the component
# is loaded: cmake/gpustreamConfig.cmake.in): sdk, probes, transport, and benchmark when
# gpustream::benchmark is built.
#
# Install components (the Debian packages of GpustreamPackage.cmake): `daemon` (the gpustream executable),
# `dev` (libraries, headers, CMake package, pkg-config); the Python module is `python`
# (python/CMakeLists.txt). `cmake --install` installs them all.
#
# The headers installed are each target's PUBLIC_HEADER list (sdk/, probes/ and
# transport/CMakeLists.txt name them one by one; nothing is installed by a directory glob):
# include/gpustream/ (with the generated version.hpp), include/gpustream/probes/,
# include/gpustream/transport/. The private headers (sdk/private, probes/toolkit and the probe folders) never are.
include(CMakePackageConfigHelpers)

set(GPUSTREAM_PACKAGE_COMPONENTS sdk probes transport)
set(_gpustream_installed "gpustream_sdk:gpustream:sdk" "gpustream_probes:gpustream/probes:probes"
    "gpustream_transport:gpustream/transport:transport")
if(TARGET gpustream_benchmark)
  list(APPEND GPUSTREAM_PACKAGE_COMPONENTS benchmark)
  list(APPEND _gpustream_installed "gpustream_benchmark:gpustream:benchmark")
endif()
foreach(_pair IN LISTS _gpustream_installed)
  string(REPLACE ":" ";" _pair "${_pair}")
  list(GET _pair 0 _target)
  list(GET _pair 1 _dir)
  list(GET _pair 2 _component)
  install(TARGETS ${_target}
    EXPORT gpustream_${_component}Targets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT dev
    PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${_dir} COMPONENT dev
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()
if(TARGET gpustream)
  install(TARGETS gpustream RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT daemon)
endif()

# The default build (RelWithDebInfo) carries DWARF for development: ~10x the code. Installed
# static libraries end up in every consumer's link, so they are installed without it unless
# GPUSTREAM_INSTALL_DEBUG_INFO=ON (`strip --strip-debug` keeps the symbol table an archive
# needs). `cmake --install build --prefix P` and DESTDIR both work.
if(NOT GPUSTREAM_INSTALL_DEBUG_INFO AND CMAKE_STRIP)
  set(_gpustream_libs gpustream_sdk gpustream_probes gpustream_transport)
  if(TARGET gpustream_benchmark)
    list(APPEND _gpustream_libs gpustream_benchmark)
  endif()
  foreach(_lib IN LISTS _gpustream_libs)
    install(CODE "
      set(_file \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:${_lib}>\")
      execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-debug \"\${_file}\" RESULT_VARIABLE _rc)
      if(NOT _rc EQUAL 0)
        message(FATAL_ERROR \"strip --strip-debug \${_file} failed (\${_rc})\")
      endif()" COMPONENT dev)
  endforeach()
endif()

# What the package config must find again for gpustream::transport's NATS bridge (see
# transport/CMakeLists.txt): libnats through pkg-config, or nothing.
if(NOT DEFINED GPUSTREAM_NATS_PROVIDER)
  set(GPUSTREAM_NATS_PROVIDER "")
endif()

set(GPUSTREAM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/gpustream)
foreach(_component IN LISTS GPUSTREAM_PACKAGE_COMPONENTS)
  install(EXPORT gpustream_${_component}Targets NAMESPACE gpustream::
    FILE gpustream_${_component}Targets.cmake DESTINATION ${GPUSTREAM_CMAKE_DIR} COMPONENT dev)
endforeach()
configure_package_config_file(cmake/gpustreamConfig.cmake.in
  ${PROJECT_BINARY_DIR}/gpustreamConfig.cmake INSTALL_DESTINATION ${GPUSTREAM_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gpustreamConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/gpustreamConfig.cmake
  ${PROJECT_BINARY_DIR}/gpustreamConfigVersion.cmake DESTINATION ${GPUSTREAM_CMAKE_DIR}
  COMPONENT dev)

# pkg-config: gpustream.pc, relocatable (prefix from ${pcfiledir}). The libraries are static, so
# `pkg-config --libs --static gpustream` adds the libraries they use (Libs.private), named
# directly rather than through Requires.private, so that --cflags stays just the include
# directory (no spdlog or fmt definitions for a program that uses neither). Boost ships no .pc.
set(GPUSTREAM_PC_LIBS_PRIVATE "-lboost_json -lboost_url -lspdlog -lfmt -lssl -lcrypto -ldeflate")
if(GPUSTREAM_NATS_PROVIDER STREQUAL "pkg-config")
  string(APPEND GPUSTREAM_PC_LIBS_PRIVATE " -lnats")
endif()
string(APPEND GPUSTREAM_PC_LIBS_PRIVATE " -pthread")
foreach(_lib IN LISTS CMAKE_DL_LIBS)
  string(APPEND GPUSTREAM_PC_LIBS_PRIVATE " -l${_lib}")
endforeach()
file(RELATIVE_PATH GPUSTREAM_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" GPUSTREAM_PC_TO_PREFIX "${GPUSTREAM_PC_TO_PREFIX}")
configure_file(cmake/gpustream.pc.in ${PROJECT_BINARY_DIR}/gpustream.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/gpustream.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
  COMPONENT dev)
