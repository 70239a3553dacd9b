# DPDK through pkg-config as an imported target (its include dirs become
# -isystem, which keeps -Wall -Wextra clean). Debian's libdpdk.pc adds
# -march=corei7 after our own flags, where it would win; strip it.
find_package(PkgConfig REQUIRED)
pkg_check_modules(DPDK REQUIRED IMPORTED_TARGET libdpdk)
get_target_property(_dpdk_opts PkgConfig::DPDK INTERFACE_COMPILE_OPTIONS)
if(_dpdk_opts)
  list(FILTER _dpdk_opts EXCLUDE REGEX "^-march=")
  set_target_properties(PkgConfig::DPDK PROPERTIES INTERFACE_COMPILE_OPTIONS "${_dpdk_opts}")
endif()
