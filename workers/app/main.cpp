// agq-worker: [EAL options] -- [options]. Parses the application flags
// first (a typo fails fast, before the EAL touches memory), then brings up
// DPDK and runs the worker or PS role.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <vector>

#include <rte_lcore.h>

#include "app/options.hpp"
#include "app/ports.hpp"
#include "app/run.hpp"

using namespace agq::worker;

int main(int argc, char** argv) {
  int sep = -1;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--") == 0) {
      sep = i;
      break;
    }
  // App flags: after "--"; "agq-worker --help" alone works without EAL.
  std::vector<char*> app{argv[0]};
  for (int i = sep < 0 ? 1 : sep + 1; i < argc; ++i) app.push_back(argv[i]);
  Options o;
  if (sep < 0) {
    const int rc = parse_options(int(app.size()), app.data(), o);
    if (rc >= 0) return rc;
    std::fprintf(stderr, "agq-worker: EAL options and ports are missing: agq-worker [EAL options] -- [options]\n");
    return 2;
  }
  if (const int rc = parse_options(int(app.size()), app.data(), o); rc >= 0) return rc;
  if (std::string err; !apply_switch_job(o, err)) {
    std::fprintf(stderr, "agq-worker: %s\n", err.c_str());
    return 2;
  }

  if (eal_init(sep, argv) < 0) {
    std::fprintf(stderr, "agq-worker: EAL initialisation failed (see the EAL messages above)\n");
    return 2;
  }
  std::signal(SIGINT, [](int) { g_stop = true; });
  std::signal(SIGTERM, [](int) { g_stop = true; });
  int rc;
  {
    Ports ports;
    std::string err;
    // agq workers keep one mbuf per outstanding slot (lib/allreduce_engine.hpp).
    // An agq worker runs one part per EAL lcore, each on its own queue of
    // every port (memif: the client asks for that many rings; the switch
    // serves them with --memif-queues = its lcores, PROTOCOL.md §10).
    // An agq PS connects with one ring per switch lcore (--switch-lcores or
    // the job from the switch): FALLBACK_DATA leave the switch on the tx
    // queue of the lcore that owns their shard, and the PS polls every ring.
    // It transmits on ring 0 only (PS_RESULTs carry no shard state; ring 0
    // exists whatever the switch's --memif-queues).
    const bool agq_worker = o.protocol == Protocol::Agq && o.role == Role::Worker;
    const bool agq_ps = o.protocol == Protocol::Agq && o.role == Role::Ps;
    const unsigned queues = agq_worker ? rte_lcore_count() : agq_ps ? o.switch_lcores : 1;
    const unsigned extra = agq_worker ? queues * unsigned(o.ids.size()) * o.agq.slots : 0;
    if (!ports.open(o.connect_timeout_s, err, queues, extra)) {
      std::fprintf(stderr, "agq-worker: %s\n", err.c_str());
      eal_cleanup();
      return 3;
    }
    if (o.protocol == Protocol::Agq)
      rc = o.role == Role::Ps ? run_agq_ps(o, ports) : run_agq_worker(o, ports);
    else
      rc = o.role == Role::Ps ? run_ps(o, ports) : run_worker(o, ports);
    ports.close();
  }
  eal_cleanup();
  return rc;
}
