// agq-worker: [EAL options] -- [options]. Parses the application flags
// first (a typo fails fast, before the EAL touches memory), then brings up
// DPDK and runs the worker or PS role.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <rte_ethdev.h>
#include <rte_lcore.h>

#include <algorithm>

#include "app/options.hpp"
#include "app/ports.hpp"
#include "app/run.hpp"

using namespace agq::worker;

namespace {

// A memif client with more rings than the server has queues is refused by
// the server (the link never comes up: it would look like a dead switch);
// one with fewer is served through the switch's ring 0 and its software
// hand-off. Said here, before connecting.
bool check_memif_rings(unsigned rings, unsigned switch_queues) {
  bool memif = false;
  uint16_t p;
  RTE_ETH_FOREACH_DEV(p) {
    rte_eth_dev_info di{};
    if (rte_eth_dev_info_get(p, &di) == 0 && di.driver_name && std::strcmp(di.driver_name, "net_memif") == 0) memif = true;
  }
  if (!memif || rings == switch_queues) return true;
  if (rings > switch_queues) {
    std::fprintf(stderr,
                 "agq-worker: %u lcores = %u memif rings per port, but the switch serves %u queue pair%s per memif "
                 "port (its --memif-queues) and refuses a client with more: run at most %u lcore%s (EAL -l), or "
                 "start the switch with --memif-queues %u\n",
                 rings, rings, switch_queues, switch_queues == 1 ? "" : "s", switch_queues,
                 switch_queues == 1 ? "" : "s", rings);
    return false;
  }
  std::fprintf(stderr,
               "agq-worker: note: %u lcore%s = %u memif ring%s per port, the switch serves %u queues (--memif-queues): "
               "the shards of its other lcores reach this process through its software hand-off (slower)\n",
               rings, rings == 1 ? "" : "s", rings, rings == 1 ? "" : "s", switch_queues);
  return true;
}

}  // namespace

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
    // An agq PS connects with as many rings as the switch's memif ports have
    // queues (its job from the switch says so; else one): FALLBACK_DATA
    // leave the switch on the tx queue of the lcore that owns their shard,
    // and the PS polls every ring. It sends each PS_RESULT on its shard's
    // ring (Ports::send), so the switch lcore that owns the shard sends the
    // RESULTs on to the worker lcore that owns the slot.
    const bool agq_worker = o.protocol == Protocol::Agq && o.role == Role::Worker;
    const bool agq_ps = o.protocol == Protocol::Agq && o.role == Role::Ps;
    // A classic worker or PS connects with one ring per switch lcore
    // (--switch-lcores) and sends each frame on its shard's ring (Ports::send).
    const unsigned queues = agq_worker ? rte_lcore_count()
                            : agq_ps   ? std::max(1u, o.switch_rings)
                                       : std::max(1u, o.switch_lcores);
    if (agq_worker && o.switch_rings && !check_memif_rings(queues, o.switch_rings)) {
      eal_cleanup();
      return 2;
    }
    const unsigned extra = agq_worker ? queues * unsigned(o.ids.size()) * o.agq.slots : 0;
    if (!ports.open(o.connect_timeout_s, err, queues, extra)) {
      // A memif server refuses a client with more rings than its queues by
      // never bringing the link up: the same symptom as no server at all.
      if (queues > 1)
        err += ". This client asks for " + std::to_string(queues) + " memif rings per port (" +
               (agq_worker ? "one per EAL lcore" : agq_ps ? "the switch's rings" : "--switch-lcores") +
               "): a switch serving fewer (its --memif-queues) refuses it the same way";
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
