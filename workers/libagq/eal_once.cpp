#include "libagq/eal_once.hpp"

#include <pthread.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <sched.h>

#include <mutex>

namespace agq::libagq {

namespace {
std::mutex g_mu;
bool g_running = false;
std::vector<std::string> g_args;
}  // namespace

bool eal_running() {
  std::lock_guard lk(g_mu);
  return g_running;
}

bool start_eal_once(const std::vector<std::string>& args, std::string& err) {
  std::lock_guard lk(g_mu);
  if (g_running) {
    if (args == g_args) return true;
    err = "the DPDK EAL already runs in this process with other arguments (one EAL per process): "
          "close() the first Client and reuse its port, or start one process per rank";
    return false;
  }
  cpu_set_t saved;
  CPU_ZERO(&saved);
  const bool have_affinity = pthread_getaffinity_np(pthread_self(), sizeof saved, &saved) == 0;
  std::vector<std::string> store = args;  // rte_eal_init keeps pointers into argv and permutes it
  std::vector<char*> argv;
  for (auto& a : store) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc = rte_eal_init(int(store.size()), argv.data());
  if (have_affinity) pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
  if (rc < 0) {
    std::string line;
    for (const auto& a : args) line += (line.empty() ? "" : " ") + a;
    err = std::string("rte_eal_init failed: ") + rte_strerror(rte_errno) + " (EAL arguments: " + line + ")";
    return false;
  }
  // The EAL keeps the strings for its lifetime: park them where they live on.
  static std::vector<std::string>* keep = new std::vector<std::string>(std::move(store));
  (void)keep;
  g_args = args;
  g_running = true;
  return true;
}

}  // namespace agq::libagq
