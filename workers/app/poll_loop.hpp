// The poll loop of the single-threaded roles (the PS of both protocols, the
// classic worker): receive on every rx queue of every port whose link is
// up, let the engine react and send, flush TX, watch the links (a port whose
// switch went away is restarted until it connects again: a restarted switch
// finds its PS back), print progress, back off when idle.
#pragma once

#include <cstdio>
#include <string>

#include "app/link_watch.hpp"
#include "app/options.hpp"
#include "app/ports.hpp"
#include "app/run.hpp"
#include "dataplane/idle_backoff.hpp"
#include "lib/stats.hpp"

namespace agq::worker {

template <typename Engine>
void poll_loop(Engine& eng, Ports& ports, const Options& o, const char* role) {
  dataplane::IdleBackoff idle(o.idle_sleep_us);
  Progress progress;
  const uint64_t period = uint64_t(o.progress_s * 1e9);
  uint64_t next_progress = now_ns() + period;
  progress.line(role, eng.counters(), eng.elements_done(), eng.outstanding(), now_ns());  // rate baseline
  // Scripts wait for this line before starting the next process: the switch
  // drops what it sends to a port whose peer is not connected yet.
  std::string names;
  for (const auto& n : ports.names()) {
    if (!names.empty()) names += ' ';
    names += n;
  }
  std::fprintf(stderr, "[%s] ready: link up on %s\n", role, names.c_str());
  LinkWatch links(ports, true);
  auto on_link = [&](uint16_t p, bool up) {
    std::fprintf(stderr, "[%s] link %s on %s%s\n", role, up ? "up" : "DOWN", ports.names()[p].c_str(),
                 up ? "" : ": restarting the port every 500 ms until the switch serves it again");
  };
  while (!g_stop) {
    const uint64_t now = now_ns();
    unsigned work = 0;
    for (uint16_t p = 0; p < ports.count(); ++p)
      if (links.up(p))
        work += ports.poll(p, [&](uint16_t port, std::span<const uint8_t> b) { eng.on_frame(port, b, now); });
    work += eng.tick(now, ports);
    work += ports.flush();
    links.poll(now, on_link);
    if (eng.finished() || eng.failed()) break;
    if (period && now >= next_progress) {
      std::fprintf(stderr, "%s\n", progress.line(role, eng.counters(), eng.elements_done(), eng.outstanding(), now).c_str());
      next_progress = now + period;
    }
    if (work)
      idle.reset();
    else
      idle.idle();
  }
  // Whatever the engine queued last (final ACKs) leaves before the ports stop.
  for (int i = 0; i < 100 && ports.flush(); ++i) {
  }
}

}  // namespace agq::worker
