# The Debian package (CPack DEB) and what only the package needs: the systemd unit, the default
# configuration, the documentation. See docs/operations.md.
#
#   cmake --build build && cd build && cpack -G DEB     # -> gpustream_<version>_<arch>.deb
#
# The package installs under /usr: the CLI, the static libraries, the headers, the CMake package
# and pkg-config file (GpustreamInstall.cmake), the Python module when it is built, the docs, and
# /usr/lib/systemd/system/gpustream.service. Its postinst copies /usr/share/gpustream/config.json
# to /etc/gpustream/config.json once (kept on remove, deleted on purge). Its dependencies are
# Debian package names: those of the shared libraries the binaries link (dpkg-shlibdeps), and, as
# Recommends, the -dev packages a program that builds against the headers needs.

# The CLI is installed without its debug information, as the libraries are (see
# GpustreamInstall.cmake); GPUSTREAM_INSTALL_DEBUG_INFO=ON keeps it.
if(TARGET gpustream AND NOT GPUSTREAM_INSTALL_DEBUG_INFO AND CMAKE_STRIP)
  install(CODE "
    set(_file \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/$<TARGET_FILE_NAME:gpustream>\")
    execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-unneeded \"\${_file}\" RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0)
      message(FATAL_ERROR \"strip --strip-unneeded \${_file} failed (\${_rc})\")
    endif()")
endif()

# systemd looks in <prefix>/lib/systemd/system for /usr (the package); for another prefix the
# file is there for the administrator to link or copy.
install(FILES packaging/gpustream.service DESTINATION lib/systemd/system)
install(FILES packaging/config.json DESTINATION ${CMAKE_INSTALL_DATADIR}/gpustream)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
file(GLOB _gpustream_docs CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/docs/*.md")
install(FILES ${_gpustream_docs} DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "gpustream")
set(CPACK_PACKAGE_VENDOR "gpustream")
set(CPACK_PACKAGE_CONTACT "gpustream developers <gpustream@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "admin")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
  "Embeddable, asynchronous GPU telemetry\n gpustream samples every GPU on the machine (NVIDIA NVML, AMD amd-smi/rocm-smi/sysfs,\n Intel i915/xe and Level Zero, Apple macmon) and serves the snapshots over HTTP,\n WebSocket, TCP, Prometheus /metrics and NATS. This package holds the gpustream command,\n its systemd service, the C++ SDK (headers, static libraries, CMake package, pkg-config)\n and, when built, the Python module.")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS
  "libboost1.81-dev, libboost-json1.81-dev, libboost-url1.81-dev, libspdlog-dev, libfmt-dev, python3")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libnats-dev, prometheus, nats-server")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  "${PROJECT_SOURCE_DIR}/packaging/postinst;${PROJECT_SOURCE_DIR}/packaging/prerm;${PROJECT_SOURCE_DIR}/packaging/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
