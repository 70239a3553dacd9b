// The roles' main loops (classic and agq protocol) around the DPDK-free engines.
#pragma once

#include <cstdio>
#include <string>

#include "app/options.hpp"
#include "app/ports.hpp"

namespace agq::worker {

int run_worker(const Options& o, Ports& ports);
int run_ps(const Options& o, Ports& ports);
int run_agq_worker(const Options& o, Ports& ports);
int run_agq_ps(const Options& o, Ports& ports);

// Set by SIGINT/SIGTERM: the loops stop, print their summary, exit 130.
extern volatile bool g_stop;

// How a role ended, the same way for every engine: interrupted (130), the
// engine's own failure (its code, diagnostic printed), a verification
// mismatch (1), or ok (0).
struct Outcome {
  int rc = 0;
  std::string status = "ok";
};
template <typename Engine>
Outcome outcome_of(const Engine& eng, bool mismatch) {
  if (g_stop) return {130, "interrupted"};
  if (eng.failed()) {
    std::fprintf(stderr, "agq-worker: %s\n", eng.diagnostic().c_str());
    return {eng.failure_code(), "failed"};
  }
  if (mismatch) return {1, "mismatch"};
  return {};
}

}  // namespace agq::worker
