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

# agq_dpdk: what the project's code links for DPDK. Headers and flags come
# from libdpdk.pc; the libraries are DPDK's shared ones, or -- for a target
# with the property AGQ_DPDK_STATIC set (agq_dpdk_static() below) -- its
# static archives, as DPDK's own examples link them.
#
# Why static for the switch: every packet calls into DPDK's own code (the
# PMD's rx/tx, the mempool behind them), and in a shared library that code
# reaches the lcore id through the general-dynamic TLS model, a call to
# __tls_get_addr per mbuf freed or burst allocated (22 instructions per
# packet over memif, bench/README "Session 2026-11-27 (VI)"), and other
# libraries' functions through the PLT. Linked into the executable, the
# linker relaxes those to a %fs-relative load and direct calls. EAL then
# also skips loading the ~150 plugin PMDs of the shared install at start.
#
# A static binary has only the PMDs linked into it: AGQ_DPDK_STATIC_PMDS,
# the virtual devices the tests, demo and benchmarks use and the common
# server NICs. -DAGQ_DPDK_STATIC=OFF builds everything against the shared
# libraries (every installed PMD, loaded at start).
set(_static_default OFF)
if(CMAKE_BUILD_TYPE STREQUAL "Release" AND NOT AGQ_SANITIZE)
  set(_static_default ON)
endif()
option(AGQ_DPDK_STATIC "Link the data-plane executables with DPDK's static archives" ${_static_default})
set(AGQ_DPDK_STATIC_PMDS
    # virtual devices: memif, pcap, null, ring, tap, af_packet, af_xdp, vhost/virtio-user
    net_memif net_pcap net_null net_ring net_tap net_af_packet net_af_xdp net_vhost net_virtio
    # server NICs: Intel, Mellanox/NVIDIA, Amazon, Broadcom, VMware
    net_i40e net_iavf common_iavf net_ice net_ixgbe net_e1000 net_igc
    net_mlx5 common_mlx5 bus_auxiliary net_ena net_bnxt net_vmxnet3
    bus_pci bus_vdev mempool_ring mempool_stack
    CACHE STRING "DPDK drivers linked into the static data-plane executables")
# The libraries: what the project calls and what those drivers need, in
# link order (dependants first).
set(_dpdk_static_libs
    vhost cryptodev dmadev gso hash pcapng pdump rcu timer security bpf ethdev meter net mbuf mempool stack
    ring pci cmdline eal telemetry kvargs)

add_library(agq_dpdk INTERFACE)
get_target_property(_dpdk_inc PkgConfig::DPDK INTERFACE_INCLUDE_DIRECTORIES)
target_include_directories(agq_dpdk SYSTEM INTERFACE ${_dpdk_inc})
if(_dpdk_opts)
  target_compile_options(agq_dpdk INTERFACE ${_dpdk_opts})
endif()

set(_dpdk_archives)
if(AGQ_DPDK_STATIC)
  pkg_get_variable(_dpdk_libdir libdpdk libdir)
  foreach(_lib ${AGQ_DPDK_STATIC_PMDS} ${_dpdk_static_libs})
    set(_a "${_dpdk_libdir}/librte_${_lib}.a")
    if(NOT EXISTS "${_a}")
      message(FATAL_ERROR "AGQ_DPDK_STATIC: ${_a} is missing (libdpdk-dev ships the static archives; "
                          "drop ${_lib} from AGQ_DPDK_STATIC_PMDS or configure with -DAGQ_DPDK_STATIC=OFF)")
    endif()
    list(APPEND _dpdk_archives "${_a}")
  endforeach()
  # The drivers' own dependencies (libdpdk.pc's Requires.private, installed
  # with libdpdk-dev).
  find_package(Threads REQUIRED)
  set(_dpdk_static_system numa pcap bsd fdt elf z jansson bpf xdp mlx5 ibverbs crypto atomic rt dl m)
  # --whole-archive: drivers register themselves from constructors nothing
  # refers to, which a plain archive link would leave out.
  add_library(agq_dpdk_archives INTERFACE)
  target_link_libraries(agq_dpdk_archives INTERFACE -Wl,--whole-archive ${_dpdk_archives} -Wl,--no-whole-archive
                        ${_dpdk_static_system} Threads::Threads)
  set(_static "$<BOOL:$<TARGET_PROPERTY:AGQ_DPDK_STATIC>>")
  target_link_libraries(agq_dpdk INTERFACE "$<${_static}:agq_dpdk_archives>" "$<$<NOT:${_static}>:PkgConfig::DPDK>")
else()
  target_link_libraries(agq_dpdk INTERFACE PkgConfig::DPDK)
endif()

# agq_dpdk_static(TARGET): TARGET (an executable) links DPDK statically when
# AGQ_DPDK_STATIC is on.
function(agq_dpdk_static target)
  set_target_properties(${target} PROPERTIES AGQ_DPDK_STATIC ${AGQ_DPDK_STATIC})
endfunction()
