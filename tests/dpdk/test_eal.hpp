// The EAL of a DPDK unit-test process, started once whichever test asks
// first (the tests of one binary share a process when it is run by hand;
// ctest runs each in its own): --no-huge, 256 MiB, no PCI, one net_null
// port, lcore 0.
#pragma once

#include <rte_eal.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace agq::test {

inline bool test_eal() {
  static const bool ok = [] {
    const std::string prefix = "--file-prefix=agqdpdkut" + std::to_string(getpid());
    std::vector<std::string> args = {"agq_dpdk_unit_tests", "--no-huge", "-m", "256", "--no-pci", prefix,
                                     "--log-level=warning", "--no-telemetry", "--vdev=net_null0", "-l", "0"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    return rte_eal_init(int(argv.size()), argv.data()) >= 0;
  }();
  return ok;
}

}  // namespace agq::test
