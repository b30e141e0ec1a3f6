# The Debian packages (CPack DEB, one per install component) and what only they need: the
# systemd unit, the default configuration, the alert rules, the documentation. See
# docs/operations.md.
#
#   cmake --build build && cd build && cpack -G DEB
#   # -> gpustream_<version>_<arch>.deb          daemon + CLI, unit, config, rules, docs
#   #    libgpustream-dev_<version>_<arch>.deb   headers, static libraries, CMake package, .pc
#   #    python3-gpustream_<version>_<arch>.deb  the Python module (when it is built)
#
# Everything installs under /usr. gpustream's postinst copies /usr/share/gpustream/config.json
# to /etc/gpustream/config.json once (kept on remove, deleted on purge), creates
# /etc/gpustream/credentials (the unit's LoadCredential= folder) and, on an upgrade, restarts the
# service if it was running. Dependencies are Debian package names: those of the shared
# libraries the binaries link (dpkg-shlibdeps), and for libgpustream-dev the -dev packages a
# program that builds against the headers needs.

# The CLI is installed without its debug information, as the libraries are (see
# GpustreamInstall.cmake); GPUSTREAM_INSTALL_DEBUG_INFO=ON keeps it.
if(TARGET gpustream AND NOT GPUSTREAM_INSTALL_DEBUG_INFO AND CMAKE_STRIP)
  install(CODE "
    set(_file \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/$<TARGET_FILE_NAME:gpustream>\")
    execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-unneeded \"\${_file}\" RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0)
      message(FATAL_ERROR \"strip --strip-unneeded \${_file} failed (\${_rc})\")
    endif()" COMPONENT daemon)
endif()

# systemd looks in <prefix>/lib/systemd/system for /usr (the package); for another prefix the
# file is there for the administrator to link or copy.
install(FILES packaging/gpustream.service DESTINATION lib/systemd/system COMPONENT daemon)
install(FILES packaging/config.json DESTINATION ${CMAKE_INSTALL_DATADIR}/gpustream
  COMPONENT daemon)
# The alert rules (promtool-tested: examples/prometheus/), for Prometheus' rule_files.
install(FILES examples/prometheus/gpustream.rules.yml
  DESTINATION ${CMAKE_INSTALL_DATADIR}/gpustream/prometheus COMPONENT daemon)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT daemon)
file(GLOB _gpustream_docs CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/docs/*.md")
install(FILES ${_gpustream_docs} DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT daemon)

set(CPACK_GENERATOR "DEB")
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL daemon dev)
if(TARGET gpustream_python)
  list(APPEND CPACK_COMPONENTS_ALL python)
endif()
set(CPACK_PACKAGE_NAME "gpustream")
set(CPACK_PACKAGE_VENDOR "gpustream")
set(CPACK_PACKAGE_CONTACT "gpustream developers <gpustream@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(_gpustream_about
  " gpustream samples every GPU on the machine (NVIDIA NVML, AMD amd-smi/rocm-smi/sysfs,\n Intel i915/xe and Level Zero, Apple macmon) and serves the snapshots over HTTP,\n WebSocket, TCP, Prometheus /metrics and NATS.")

# gpustream: the daemon and CLI, its unit, default config, alert rules and docs.
set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME "gpustream")
set(CPACK_DEBIAN_DAEMON_PACKAGE_SECTION "admin")
set(CPACK_DEBIAN_DAEMON_DESCRIPTION
  "Embeddable, asynchronous GPU telemetry: daemon and CLI\n${_gpustream_about}\n This package holds the gpustream command, its systemd service, the default\n configuration and the Prometheus alert rules.")
set(CPACK_DEBIAN_DAEMON_PACKAGE_SUGGESTS "prometheus, nats-server")
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA
  "${PROJECT_SOURCE_DIR}/packaging/postinst;${PROJECT_SOURCE_DIR}/packaging/prerm;${PROJECT_SOURCE_DIR}/packaging/postrm")

# libgpustream-dev: the C++ SDK (static libraries: nothing at run time but what a program links).
set(CPACK_DEBIAN_DEV_PACKAGE_NAME "libgpustream-dev")
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION "libdevel")
set(CPACK_DEBIAN_DEV_DESCRIPTION
  "Embeddable, asynchronous GPU telemetry: C++ SDK\n${_gpustream_about}\n This package holds the headers, the static libraries, the CMake package\n (find_package(gpustream)) and the pkg-config file.")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
  "libboost1.81-dev, libboost-json1.81-dev, libboost-url1.81-dev, libspdlog-dev, libfmt-dev,
  libdeflate-dev")
set(CPACK_DEBIAN_DEV_PACKAGE_SUGGESTS "libnats-dev, libbenchmark-dev")

# python3-gpustream: the Python module.
set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME "python3-gpustream")
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION "python")
set(CPACK_DEBIAN_PYTHON_DESCRIPTION
  "Embeddable, asynchronous GPU telemetry: Python module\n${_gpustream_about}\n This package holds the gpustream Python module (import gpustream).")
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "python3")

# The packages before the split (one gpustream package held the SDK and the module too): the new
# ones take those files over.
set(CPACK_DEBIAN_DEV_PACKAGE_REPLACES "gpustream (<< ${PROJECT_VERSION}-2)")
set(CPACK_DEBIAN_DEV_PACKAGE_BREAKS "gpustream (<< ${PROJECT_VERSION}-2)")
set(CPACK_DEBIAN_PYTHON_PACKAGE_REPLACES "gpustream (<< ${PROJECT_VERSION}-2)")
set(CPACK_DEBIAN_PYTHON_PACKAGE_BREAKS "gpustream (<< ${PROJECT_VERSION}-2)")
set(CPACK_DEBIAN_PACKAGE_RELEASE 2)
include(CPack)
