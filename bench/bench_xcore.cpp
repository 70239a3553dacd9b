// bench_xcore: the one-way latency of a cache line between two CPUs, by
// ping-pong. On this VM class the host moves the two vCPUs between placements
// where a line crosses in ~30 ns and ones where it takes ~160 ns
// (bench/README.md, "Caveats"); every cross-core
// rate (2-lcore replays, above all the software hand-off) follows that state,
// so bench/run.py measures it beside each 2-lcore rep and prints it with the
// rates. A number, never a pass/fail.
//
//   bench_xcore [--cpus A,B] [--rounds N] [--batches K]
//
// Prints one line: "xcore one_way_ns <median> min <min> max <max> cpus A,B".
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

struct alignas(64) Line {
  std::atomic<uint64_t> v{0};
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "bench_xcore: %s\n"
               "usage: bench_xcore [--cpus A,B] [--rounds N] [--batches K]\n"
               "  one-way cache-line latency between CPUs A and B (default 0,1) by ping-pong:\n"
               "  K batches (default 7) of N round trips (default 20000); prints the median batch\n",
               why);
  std::exit(2);
}

bool pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

unsigned long parse_count(const char* flag, const char* s) {
  char* end = nullptr;
  const unsigned long v = std::strtoul(s, &end, 10);
  if (!end || *end || v == 0) usage((std::string(flag) + ": a positive integer, not '" + s + "'").c_str());
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  int a = 0, b = 1;
  unsigned long rounds = 20000, batches = 7;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "-h" || f == "--help") usage("one-way cache-line latency between two CPUs");
    if (i + 1 >= argc) usage((f + ": missing value").c_str());
    const char* v = argv[++i];
    if (f == "--cpus") {
      if (std::sscanf(v, "%d,%d", &a, &b) != 2 || a < 0 || b < 0 || a == b) usage("--cpus: two different CPUs, e.g. 0,1");
    } else if (f == "--rounds") {
      rounds = parse_count("--rounds", v);
    } else if (f == "--batches") {
      batches = parse_count("--batches", v);
    } else {
      usage(("unknown flag " + f).c_str());
    }
  }

  // Two lines, one written by each side: the ping's writer never writes
  // the pong's line, so each transfer is one line moving one way.
  if (!pin(a)) {
    std::fprintf(stderr, "bench_xcore: cannot run on CPU %d\n", a);
    return 1;
  }
  Line ping, pong;
  std::atomic<bool> pinned_b{true};
  std::thread other([&] {
    if (!pin(b)) pinned_b = false;
    for (uint64_t n = 1; n <= rounds * batches; ++n) {
      while (ping.v.load(std::memory_order_acquire) != n) {
      }
      pong.v.store(n, std::memory_order_release);
    }
  });
  std::vector<double> ns;
  uint64_t n = 0;
  for (unsigned long k = 0; k < batches; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    for (unsigned long r = 0; r < rounds; ++r) {
      ping.v.store(++n, std::memory_order_release);
      while (pong.v.load(std::memory_order_acquire) != n) {
      }
    }
    const auto t1 = std::chrono::steady_clock::now();
    ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / double(2 * rounds));
  }
  other.join();
  if (!pinned_b) {
    std::fprintf(stderr, "bench_xcore: cannot run on CPU %d\n", b);
    return 1;
  }
  std::sort(ns.begin(), ns.end());
  std::printf("xcore one_way_ns %.1f min %.1f max %.1f cpus %d,%d\n", ns[ns.size() / 2], ns.front(), ns.back(), a, b);
  return 0;
}
