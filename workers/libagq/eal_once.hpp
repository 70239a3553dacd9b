// One DPDK EAL per process, started on demand by the first libagq Client.
// rte_eal_init works once per process (pitfall P4) and pins the calling
// thread to the main lcore: a training process's Python and PyTorch threads
// must keep the whole machine, so the caller's CPU affinity is restored
// after the EAL started.
#pragma once

#include <string>
#include <vector>

namespace agq::libagq {

// Starts the EAL with `args` (argv[0] included) unless it already runs.
// Returns false with `err` set if it failed, or if it already runs with
// other arguments (a second Client in one process would need another port
// in the same EAL: name every port in the first one's vdev list instead).
bool start_eal_once(const std::vector<std::string>& args, std::string& err);
bool eal_running();

}  // namespace agq::libagq
