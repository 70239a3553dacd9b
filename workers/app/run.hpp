// The roles' main loops (classic and agq protocol) around the DPDK-free engines.
#pragma once

#include "app/options.hpp"
#include "app/ports.hpp"

namespace agq::worker {

int run_worker(const Options& o, Ports& ports);
int run_ps(const Options& o, Ports& ports);
int run_agq_worker(const Options& o, Ports& ports);
int run_agq_ps(const Options& o, Ports& ports);

// Set by SIGINT/SIGTERM: the loops stop, print their summary, exit 130.
extern volatile bool g_stop;

}  // namespace agq::worker
