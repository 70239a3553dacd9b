// Seeded random-frame fuzzer (a ctest, label `fuzz`, in the Release and the
// ASan/UBSan passes of scripts/test.sh): valid frames of every kind the
// parser knows, most of them mutated (truncation, bit flips, wrong lengths
// and versions, VLAN tags inserted or stripped, garbage), through the parser
// and both pipelines with the invariants of fuzz_checks.hpp checked on every
// frame, and the second agq job removed and re-added now and then. Bounded
// by time, so it fits CI whatever the build's speed.
//
//   fuzz_frames [--seconds S] [--seed N] [--write-corpus DIR]
//
// On a failed invariant it prints the seed, the frame's index and bytes, and
// exits 1: `--seed N` replays the same stream.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "../common/random_frames.hpp"
#include "fuzz_checks.hpp"

namespace {

void usage() {
  std::fprintf(stderr, "usage: fuzz_frames [--seconds S] [--seed N] [--write-corpus DIR]\n");
  std::exit(2);
}

void dump(const std::vector<uint8_t>& f) {
  for (size_t i = 0; i < f.size(); ++i) std::fprintf(stderr, "%02x%s", f[i], i % 32 == 31 ? "\n" : " ");
  std::fprintf(stderr, "\n");
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 10;
  uint64_t seed = 1;
  std::string corpus;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage();
    char* end = nullptr;
    if (a == "--seconds") {
      seconds = std::strtod(argv[++i], &end);
      if (*end || seconds <= 0) usage();
    } else if (a == "--seed") {
      seed = std::strtoull(argv[++i], &end, 0);
      if (*end) usage();
    } else if (a == "--write-corpus") {
      corpus = argv[++i];
    } else {
      usage();
    }
  }
  if (!corpus.empty()) {
    // Seed corpus for the libFuzzer target: one valid frame of every kind.
    std::filesystem::create_directories(corpus);
    int n = 0;
    for (const auto& f : agq::fuzz::FuzzHarness::seed_frames()) {
      std::ofstream out(corpus + "/frame" + std::to_string(n++), std::ios::binary);
      out.write(reinterpret_cast<const char*>(f.data()), std::streamsize(f.size()));
    }
    std::printf("fuzz_frames: wrote %d frames to %s\n", n, corpus.c_str());
    return 0;
  }

  agq::fuzz::FuzzHarness h;
  agq::testframes::FrameGen gen(seed);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  uint64_t now = 0, index = 0;
  std::vector<uint8_t> frame;
  try {
    while (std::chrono::steady_clock::now() < deadline) {
      for (int k = 0; k < 64; ++k, ++index) {
        frame = gen.any(gen.chance(50), 70);
        now += gen.below(1000);
        h.check(frame, uint16_t(gen.below(6)), now);
        if (gen.chance(1) && gen.chance(20)) h.churn_jobs();
      }
    }
    h.check_classic_state();
  } catch (const agq::fuzz::FuzzFailure& e) {
    std::fprintf(stderr, "fuzz_frames: seed %llu frame %llu: %s\nframe (%zu bytes):\n",
                 (unsigned long long)seed, (unsigned long long)index, e.what(), frame.size());
    dump(frame);
    return 1;
  }
  const auto& s = h.stats();
  std::printf(
      "fuzz_frames: seed %llu, %llu frames in %.0f s: %llu parser errors, %llu classic AGQ, %llu agq (%llu rejected, "
      "%llu accepted), %llu job churns; every invariant held\n",
      (unsigned long long)seed, (unsigned long long)s.frames, seconds, (unsigned long long)s.parser_errors,
      (unsigned long long)s.classic_frames, (unsigned long long)s.agq_frames, (unsigned long long)s.agq_rejected,
      (unsigned long long)s.agq_accepted, (unsigned long long)s.job_churns);
  return 0;
}
