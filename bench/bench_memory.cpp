// Memory efficiency of the agq pipeline (docs/PROTOCOL.md §2–3), not a timing
// benchmark. Two questions per granted width W = 4..32 bits:
//
// 1. Concurrent sequences per MiB of aggregator memory. Measured, not
//    assumed: an AgqProgram with one job of N = 1 worker (so every DATA
//    completes at once and its RESULT reports the grant), `kRows` rows and
//    8 slots per row gets the first contribution of every slot (version 0)
//    at req_width W; the RESULTs whose granted width is W are the rows'
//    capacity at a uniform width W. Widths that do not divide 32 leave units
//    over: 12 bits -> 2 per row half, not 2.67; the allocator grants the
//    rest narrower (best fit, else the widest free run), counted apart. A row is 32 lanes x 2 halves
//    (the version / shadow copy: the previous result stays readable) x 32
//    bits = 256 B. The SwitchML-like baseline keeps one 32-bit register per
//    gradient, also with a shadow copy: 32 lanes x 2 x 32 bits per sequence.
//    Also per MiB including the per-slot control registers (agq: bitmap,
//    count, window pairs = 14 B per slot + 2 B occupancy per row; baseline:
//    bitmap and count pairs = 10 B per slot).
//
// 2. Quantization error at that width, for N = 4 and 8 workers, normal and
//    Laplace gradients: the switch's own encoding (pipeline/agq/encoding.hpp:
//    encode_value on the worker side, contribution() as the switch adds it,
//    decode_sum), block floating point per 32-lane chunk with the exponent
//    sized to the chunk's max as PROTOCOL §5 does (margin 1: no clipping).
//    Errors are relative to the largest |sum| of the sample.
//
// 3. Register memory per lcore instance (docs/ARCHITECTURE.md "Memory"):
//    the switch runs one fast-program instance per dataplane lcore, lcore k
//    of L holding only the rows of the shards s % L == k
//    (pipeline/agq_fast/row_layout.hpp). For L = 1, 2, 4 and the default
//    and maximum capacities filled with jobs, each instance's register bytes
//    (AgqFastProgram::register_bytes) and the resident memory the jobs'
//    installation added to the process (/proc/self/statm, all L instances),
//    beside the full register file every instance held before.
//
//   bench_memory [--json FILE] [--chunks N] [--lcores-only]
// prints Markdown tables; --json also writes the numbers of table 1-2 (run.py
// plots them); --lcores-only prints table 3 alone.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "pipeline/agq/agq_program.hpp"
#include "pipeline/agq/encoding.hpp"
#include "pipeline/agq_fast/agq_fast_program.hpp"
#include "proto/agq.hpp"
#include "proto/frame.hpp"
#include "tna/pre.hpp"

namespace {

namespace ag = agq::pipeline::agq;

constexpr int kLanes = agq::proto::kAgqLanes;
constexpr double kRowBytes = kLanes * 2 * 4;  // 256 B
constexpr double kMiB = 1024.0 * 1024.0;
constexpr unsigned kRows = 64;
constexpr double kAgqSlotCtlBytes = 2 * 4 + 2 * 1 + 2 * 2;  // slot_bitmap, slot_count, slot_window pairs
constexpr double kAgqRowCtlBytes = 2;                        // row_occupancy pair
constexpr double kPlainSlotCtlBytes = 2 * 4 + 2 * 1;         // bitmap and count pairs

// Sequences that kRows rows hold at once at the full width w, and how many
// more got a narrower grant, measured on AgqProgram.
struct Capacity {
  unsigned full = 0, narrower = 0;
};
Capacity measured_capacity(unsigned w) {
  agq::tna::ReplicationEngine pre;
  ag::AgqProgram prog(ag::AgqConfig{}, agq::pipeline::ForwardingConfig{}, pre);
  ag::JobSpec j;
  j.job_id = 1;
  j.num_workers = 1;
  constexpr agq::tna::PortId port = 1;
  for (unsigned i = 0; i < 1; ++i) j.workers.push_back({uint8_t(i), port, 0x0A000001u + i, {2, 0, 0, 0, 1, uint8_t(i)}});
  j.slots = kRows * ag::kUnits;  // 8 slots per row: more than any width can hold
  j.rows = kRows;
  j.ps_port = 0;
  j.ps_ipv4 = 0x0A0000FE;
  if (auto err = prog.add_job(j)) {
    std::fprintf(stderr, "bench_memory: add_job: %s\n", err->c_str());
    std::exit(1);
  }
  agq::tna::IngressIntrinsicMd md;
  md.ingress_port = port;
  Capacity c;
  for (unsigned slot = 0; slot < j.slots; ++slot) {
    agq::proto::UdpFrameSpec sp;
    sp.dst_mac = {2, 0, 0, 0, 0, 0xFE};
    sp.src_mac = {2, 0, 0, 0, 1, 0};
    sp.src_ip = 0x0A000001u;
    sp.dst_ip = 0x0A0000FEu;
    sp.src_port = sp.dst_port = agq::proto::kAgqPort;
    agq::proto::Agq a;
    a.job_id = 1;
    a.num_workers = 1;
    a.slot = uint16_t(slot);
    a.req_width = uint8_t(w);
    // min_width: the narrowest valid one (N = 1: g = 0, one unit), so that
    // a row's leftover units are granted narrower (the second column)
    // rather than sent to the PS.
    a.width = uint8_t(ag::kUnitBits * ag::min_grant_units(0));
    uint8_t payload[agq::proto::Agq::kLen];
    a.encode(payload);
    auto f = agq::proto::build_udp_frame(sp, payload);
    if (prog.process(f, md).kind == agq::tna::Decision::Kind::Drop) continue;
    agq::proto::Agq r;
    r.decode(f.data() + agq::proto::udp_payload_offset(sp));
    if (r.type != agq::proto::AgqType::Result || r.width == 0) continue;  // PS fallback
    ++(r.width == w ? c.full : c.narrower);
  }
  return c;
}

struct ErrorStats {
  bool valid = false;
  double rms = 0, max = 0;  // relative to max |sum|
};

// `chunks` chunks of 32 lanes from n workers at width w (granted = requested).
ErrorStats error_at(unsigned w, unsigned n, bool laplace, int chunks) {
  const unsigned g = ag::guard_bits(n);
  if (w < g + 2) return {};
  std::mt19937_64 rng(1234 + w * 7 + n + (laplace ? 1000 : 0));
  std::normal_distribution<double> normal(0.0, 1.0);
  std::exponential_distribution<double> expo(1.0);
  const unsigned b = w - g;
  double se = 0, worst = 0, scale = 0;
  long count = 0;
  std::vector<double> x(size_t(n) * kLanes);
  for (int c = 0; c < chunks; ++c) {
    double m = 0;
    for (auto& e : x) {
      e = double(float(laplace ? ((rng() & 1) ? 1 : -1) * expo(rng) : normal(rng)));
      m = std::max(m, std::fabs(e));
    }
    // The smallest exponent whose range 2^(b-1) - 1 steps holds m.
    const int e = int(std::ceil(std::log2(m / double((uint64_t(1) << (b - 1)) - 1))));
    for (int k = 0; k < kLanes; ++k) {
      uint64_t s = 0;
      double exact = 0;
      for (unsigned i = 0; i < n; ++i) {
        const double xi = x[size_t(i) * kLanes + k];
        s += ag::contribution(ag::encode_value(xi, e, w, g).u, w, w, g);
        exact += xi;
      }
      const double got = ag::decode_sum(uint32_t(s & ag::low_mask(w)), n, w, g, e, w);
      const double err = std::fabs(got - exact);
      se += err * err;
      worst = std::max(worst, err);
      scale = std::max(scale, std::fabs(exact));
      ++count;
    }
  }
  return {true, std::sqrt(se / double(count)) / scale, worst / scale};
}

std::string cell(const ErrorStats& s) {
  if (!s.valid) return "— (W < g + 2)";
  char b[64];
  std::snprintf(b, sizeof b, "%.2e / %.2e", s.rms, s.max);
  return b;
}

// Resident bytes of this process (/proc/self/statm, pages).
double resident_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  unsigned long size = 0, res = 0;
  if (!f || std::fscanf(f, "%lu %lu", &size, &res) != 2) res = 0;
  if (f) std::fclose(f);
  return double(res) * double(sysconf(_SC_PAGESIZE));
}

// Table 3: L instances (lcore k of L) with jobs filling `cfg`; jobs of
// 4096 rows (the 12-bit shard space) and up to 65536 slots each.
void lcore_split_table() {
  std::printf("\n| capacity (rows / slots) | lcores L | registers per instance (max over k) | all L instances |"
              " resident added by the jobs (all L) | before: full file per instance, x L |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (const ag::AgqConfig cfg : {ag::AgqConfig{4096, 32768}, ag::AgqConfig{65536, 1u << 20}}) {
    const double full = double(cfg.total_rows) * (sizeof(ag::fast::RowLanes) + 2) +
                        double(cfg.total_slots) * sizeof(ag::fast::SlotRecord);
    for (unsigned L : {1u, 2u, 4u}) {
      // Each point in a fresh child process: the allocator of a process that
      // freed the previous point's registers would hand them back resident.
      std::fflush(stdout);
      const pid_t child = fork();
      if (child > 0) {
        int status = 0;
        waitpid(child, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) std::exit(1);
        continue;
      }
      std::vector<std::unique_ptr<agq::tna::ReplicationEngine>> pres;
      std::vector<std::unique_ptr<ag::fast::AgqFastProgram>> inst;
      for (unsigned k = 0; k < L; ++k) {
        pres.push_back(std::make_unique<agq::tna::ReplicationEngine>());
        inst.push_back(std::make_unique<ag::fast::AgqFastProgram>(cfg, agq::pipeline::ForwardingConfig{}, *pres[k]));
        inst[k]->own_shards(k, L);
      }
      const double before = resident_bytes();
      const uint32_t jobs = cfg.total_rows / 4096;
      for (uint32_t j = 0; j < jobs; ++j) {
        ag::JobSpec spec;
        spec.job_id = uint16_t(1 + j);
        spec.num_workers = 1;
        spec.workers.push_back({0, 1, 0x0A000001u, {2, 0, 0, 0, 1, 0}});
        spec.rows = 4096;
        spec.slots = cfg.total_slots / jobs;
        for (auto& p : inst)
          if (auto err = p->add_job(spec)) {
            std::fprintf(stderr, "bench_memory: add_job: %s\n", err->c_str());
            std::exit(1);
          }
      }
      const double added = resident_bytes() - before;
      double most = 0, all = 0;
      for (auto& p : inst) {
        most = std::max(most, double(p->register_bytes()));
        all += double(p->register_bytes());
      }
      std::printf("| %u / %u | %u | %.2f MiB | %.2f MiB | %.2f MiB | %.2f MiB x %u = %.2f MiB |\n", cfg.total_rows,
                  cfg.total_slots, L, most / kMiB, all / kMiB, added / kMiB, full / kMiB, L, L * full / kMiB);
      std::fflush(stdout);
      std::_Exit(0);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string json;
  int chunks = 400;
  bool lcores_only = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else if (!std::strcmp(argv[i], "--chunks") && i + 1 < argc) chunks = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--lcores-only")) lcores_only = true;
    else {
      std::fprintf(stderr, "usage: bench_memory [--json FILE] [--chunks N] [--lcores-only]\n");
      return 2;
    }
  }
  if (lcores_only) {
    lcore_split_table();
    return 0;
  }
  const double plain = kMiB / kRowBytes;
  const double plain_ctl = kMiB / (kRowBytes + kPlainSlotCtlBytes);
  std::string js = "[";
  std::printf("| granted width W | seqs per row (measured) | + narrower grants | seqs per MiB (agq) | per MiB (32-bit design) | saving |"
              " saving incl. control regs | N=4 normal rms / max | N=4 Laplace rms / max | N=8 normal rms / max |"
              " N=8 Laplace rms / max |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (unsigned w = 4; w <= 32; w += 4) {
    const Capacity cap = measured_capacity(w);
    const double per_row = double(cap.full) / kRows;
    const double per_mib = per_row * kMiB / kRowBytes;
    const double per_mib_ctl = kMiB / ((kRowBytes + kAgqRowCtlBytes) / per_row + kAgqSlotCtlBytes);
    const ErrorStats e[4] = {error_at(w, 4, false, chunks), error_at(w, 4, true, chunks),
                             error_at(w, 8, false, chunks), error_at(w, 8, true, chunks)};
    std::printf("| %u | %.0f | %.0f | %.0f | %.0f | %.1fx | %.1fx | %s | %s | %s | %s |\n", w, per_row,
                double(cap.narrower) / kRows, per_mib, plain,
                per_mib / plain, per_mib_ctl / plain_ctl, cell(e[0]).c_str(), cell(e[1]).c_str(), cell(e[2]).c_str(),
                cell(e[3]).c_str());
    char b[1024];
    auto num = [](const ErrorStats& s, bool rms) { return s.valid ? (rms ? s.rms : s.max) : -1.0; };
    std::snprintf(b, sizeof b,
                  "%s{\"width_bits\":%u,\"seqs_per_row\":%.3f,\"narrower_per_row\":%.3f,\"seqs_per_mib\":%.1f,\"seqs_per_mib_32bit\":%.1f,"
                  "\"saving_x\":%.3f,\"seqs_per_mib_with_control\":%.1f,\"seqs_per_mib_32bit_with_control\":%.1f,"
                  "\"saving_with_control_x\":%.3f,\"err\":{\"n4_normal\":[%.4e,%.4e],\"n4_laplace\":[%.4e,%.4e],"
                  "\"n8_normal\":[%.4e,%.4e],\"n8_laplace\":[%.4e,%.4e]}}",
                  w == 4 ? "" : ",", w, per_row, double(cap.narrower) / kRows, per_mib, plain, per_mib / plain, per_mib_ctl, plain_ctl,
                  per_mib_ctl / plain_ctl, num(e[0], true), num(e[0], false), num(e[1], true), num(e[1], false),
                  num(e[2], true), num(e[2], false), num(e[3], true), num(e[3], false));
    js += b;
  }
  js += "]\n";
  std::printf("\nCapacity measured on AgqProgram (%u rows, uniform width). Errors: %d chunks x 32 lanes,"
              " relative to the largest |sum|; -1 in the JSON = width below g + 2.\n",
              kRows, chunks);
  lcore_split_table();
  if (!json.empty()) {
    FILE* f = std::fopen(json.c_str(), "w");
    if (!f || std::fputs(js.c_str(), f) < 0 || std::fclose(f) != 0) {
      std::perror(json.c_str());
      return 1;
    }
  }
  return 0;
}
