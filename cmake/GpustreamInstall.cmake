# Installation and the find_package(gpustream) package (filled in with the install test).
include(GNUInstallDirs)
