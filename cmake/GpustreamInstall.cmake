# Installation and the find_package(gpustream) package.
#
#   cmake --install build --prefix /opt/gpustream
#   # in another project:
#   find_package(gpustream REQUIRED)          # CMAKE_PREFIX_PATH=/opt/gpustream
#   target_link_libraries(app PRIVATE gpustream::sdk gpustream::probes)
include(CMakePackageConfigHelpers)

install(TARGETS gpustream_sdk gpustream_probes gpustream_transport
  EXPORT gpustreamTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY sdk/include/ probes/include/ transport/include/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp")
if(TARGET gpustream)
  install(TARGETS gpustream RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# The default build (RelWithDebInfo) carries DWARF for development: ~10x the code. Installed
# static libraries end up in every consumer's link, so they are installed without it unless
# GPUSTREAM_INSTALL_DEBUG_INFO=ON (`strip --strip-debug` keeps the symbol table an archive
# needs). `cmake --install build --prefix P` and DESTDIR both work.
if(NOT GPUSTREAM_INSTALL_DEBUG_INFO AND CMAKE_STRIP)
  foreach(_lib gpustream_sdk gpustream_probes gpustream_transport)
    install(CODE "
      set(_file \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:${_lib}>\")
      execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-debug \"\${_file}\" RESULT_VARIABLE _rc)
      if(NOT _rc EQUAL 0)
        message(FATAL_ERROR \"strip --strip-debug \${_file} failed (\${_rc})\")
      endif()")
  endforeach()
endif()

# What the package config must find again for gpustream::transport's NATS bridge (see
# transport/CMakeLists.txt): libnats through pkg-config, or nothing.
if(NOT DEFINED GPUSTREAM_NATS_PROVIDER)
  set(GPUSTREAM_NATS_PROVIDER "")
endif()

set(GPUSTREAM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/gpustream)
install(EXPORT gpustreamTargets NAMESPACE gpustream:: DESTINATION ${GPUSTREAM_CMAKE_DIR})
configure_package_config_file(cmake/gpustreamConfig.cmake.in
  ${PROJECT_BINARY_DIR}/gpustreamConfig.cmake INSTALL_DESTINATION ${GPUSTREAM_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gpustreamConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/gpustreamConfig.cmake
  ${PROJECT_BINARY_DIR}/gpustreamConfigVersion.cmake DESTINATION ${GPUSTREAM_CMAKE_DIR})
