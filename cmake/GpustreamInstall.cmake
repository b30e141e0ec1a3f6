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

set(GPUSTREAM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/gpustream)
install(EXPORT gpustreamTargets NAMESPACE gpustream:: DESTINATION ${GPUSTREAM_CMAKE_DIR})
configure_package_config_file(cmake/gpustreamConfig.cmake.in
  ${PROJECT_BINARY_DIR}/gpustreamConfig.cmake INSTALL_DESTINATION ${GPUSTREAM_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gpustreamConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/gpustreamConfig.cmake
  ${PROJECT_BINARY_DIR}/gpustreamConfigVersion.cmake DESTINATION ${GPUSTREAM_CMAKE_DIR})
