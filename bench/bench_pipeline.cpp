// Pipeline cost without DPDK (Google Benchmark): ns per packet of a
// program's process() on realistic frames, and the per-lane cost of the
// packed-register add against a plain 32-bit add over the same memory.
//
// Every trace is a cycle that leaves the pipeline state as it found it (each
// allocation is released by its ACK), so it can be replayed for as long as
// the benchmark wants without the state drifting into collisions or 8-bit
// counter wraps. Frames are processed in place and not restored: process()
// only rewrites data0..3, and no control decision depends on them, so the
// cost of a replayed frame equals the cost of a fresh one.
//
// Pipelines are a list (pipelines()): each entry has a factory and its own
// named traces. classic runs the shapes of kShapes; agq runs kAgqShapes
// (N = 1..32 workers, granted widths 4..32 bits, retransmissions, unknown
// jobs). A multicast decision is completed as the dataplane does it: one
// copy of the frame per replica of the PRE group and the program's egress()
// on each (the agq RESULT rewrite per worker), inside the timed loop.
//
// Counters: ns_per_pkt (every packet of the trace), ns_per_elem (time per
// gradient element contributed: DATA packets that count x lanes per packet;
// ACKs, resends and duplicates are overhead in it), lanes (per packet),
// width_bits (window width), passes_per_pkt (agq: 1 + resubmissions),
// out_per_pkt (frames leaving the switch per packet: replicas + unicasts).
#include <array>
#include <benchmark/benchmark.h>

#include <algorithm>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "pipeline/agq/agq_program.hpp"
#include "pipeline/agq_fast/agq_fast_program.hpp"
#include "pipeline/agq/encoding.hpp"
#include "pipeline/classic/classic_program.hpp"
#include "pipeline/classic/tables.hpp"
#include "pipeline/reference/classic_reference.hpp"
#include "proto/agq.hpp"
#include "proto/frame.hpp"
#include "tna/pre.hpp"

namespace {

using agq::proto::AgqClassic;
using Frame = std::vector<uint8_t>;

// Ports as in conf/classic.toml: PS 0, workers 1 and 2; packets enter on 3.
constexpr agq::tna::PortId kIngress = 3;

agq::proto::UdpFrameSpec spec() {
  agq::proto::UdpFrameSpec s;
  s.dst_mac = {0x02, 0, 0, 0, 0, 0x02};
  s.src_mac = {0x02, 0, 0, 0, 0, 0x01};
  s.src_ip = 0x0A020201;
  s.dst_ip = 0x0A020264;  // 10.2.2.100, the PS
  return s;
}

// --- traffic shapes ------------------------------------------------------

// A worker-like job: `window` slots, `workers` contributions per chunk, then
// the PS's ACK. seqs_per_agg live seqs share one aggregator (as agq-worker's
// --seqs-per-agg), which is what shrinks the classic windows: 1 -> 32 bits,
// 2 -> 12/20, 4 -> 4..12, 8 -> 4 bits.
struct Shape {
  const char* name;
  unsigned workers;       // total_workers (contributions per chunk)
  unsigned window;        // slots in flight
  unsigned seqs_per_agg;  // live seqs per aggregator
  bool stale_acks;        // ACKs for slots nobody owns (the cheap drop path)
};

const std::vector<Shape>& kShapes();

// What one benchmark replays: frames and how many of them are AGQ packets.
struct Trace {
  std::vector<Frame> frames;
  uint64_t elements = 0;  // gradient elements contributed per cycle (DATA that counts x lanes)
  unsigned lanes = 0;     // lanes per aggregation packet (0: not aggregation traffic)
  unsigned width = 0;     // window width in bits (0: not applicable)
  // No program rewrites these frames (forwarded unchanged), so the burst
  // harness replays them in place, as the buffers an rx burst hands over,
  // with no copy at all; checked after the run (abort if a frame changed).
  // Otherwise every frame is copied into its burst buffer first.
  bool in_place = false;
};

std::mt19937& rng() {
  static std::mt19937 r(2026);
  return r;
}

uint32_t small_value() { return rng()() >> 8; }  // headroom for the classic unsigned add

Trace classic_trace(const Shape& s) {
  Trace t;
  auto sp = spec();
  if (s.stale_acks) {
    for (unsigned slot = 0; slot < s.window; ++slot) {
      AgqClassic a;
      a.job_and_seq = 1;
      a.is_ack = 1;
      a.hash1 = uint16_t(slot);
      a.hash_id = uint16_t(slot << 3);
      t.frames.push_back(build_agq_classic_frame(sp, a));
    }
    return t;
  }
  // Real workers interleave: every worker sends its chunk for every slot of
  // the window, then the PS ACKs each completed slot.
  auto header = [&](unsigned slot, unsigned worker) {
    AgqClassic a;
    a.job_and_seq = uint16_t(1u << 11 | 1);
    a.worker_id = uint8_t(worker);
    a.total_workers = uint8_t(s.workers);
    for (auto& d : a.data) d = small_value();
    a.hash1 = uint16_t(slot / s.seqs_per_agg);
    a.hash2 = uint8_t(slot % s.seqs_per_agg);
    a.hash_id = uint16_t(a.hash1 << 3 | a.hash2);
    return a;
  };
  for (unsigned w = 0; w < s.workers; ++w)
    for (unsigned slot = 0; slot < s.window; ++slot) t.frames.push_back(build_agq_classic_frame(sp, header(slot, w)));
  t.elements = uint64_t(s.workers) * s.window * 4;
  t.lanes = 4;
  t.width = 32 / s.seqs_per_agg;  // the classic windows at these packings (see the Shape comment)
  for (unsigned slot = 0; slot < s.window; ++slot) {
    AgqClassic a = header(slot, 0);
    a.is_ack = 1;
    t.frames.push_back(build_agq_classic_frame(sp, a));
  }
  return t;
}

// Reference §3.5 worked example: seq 1, hashID 300 (aggregator 37), two
// identical contributions, then the PS's ACK.
Trace classic_worked_example() {
  AgqClassic a;
  a.job_and_seq = 1;
  a.total_workers = 2;
  const uint32_t d[4] = {0x0000F0C0, 0x0146F43C, 0x0015B4C9, 0x00DCEEE3};
  for (int k = 0; k < 4; ++k) a.data[k] = d[k];
  a.hash_id = 300;
  a.hash1 = 37;
  a.hash2 = 4;
  Trace t;
  t.frames.push_back(build_agq_classic_frame(spec(), a));
  a.worker_id = 1;
  t.frames.push_back(build_agq_classic_frame(spec(), a));
  a.is_ack = 1;
  for (int k = 0; k < 4; ++k) a.data[k] = 2 * d[k];
  t.frames.push_back(build_agq_classic_frame(spec(), a));
  t.elements = 2 * 4;
  t.lanes = 4;
  t.width = 32;
  return t;
}

// Ordinary traffic: UDP to a MAC with a static entry (plain L2 switching
// inside the same program), 64 distinct source MACs so learning is exercised.
// A bigger station set: kL2Stations sources (learned on the ingress port)
// each sending to one of kL2Stations destinations with static entries on
// port 2, in random order, so both MAC lookups of a packet land anywhere in
// the table (3 MiB at the default 65536 entries: beyond L2), and the frames
// (one per source, 2 KiB apart like mbufs: 32 MiB) are not in any cache when
// their burst comes round again -- what the burst's prefetches are for.
constexpr unsigned kL2Stations = 16384;
agq::proto::Mac l2_station(unsigned i, bool dst) {
  return {0x02, 0, 0, uint8_t(dst ? 0x0D : 0x05), uint8_t(i >> 8), uint8_t(i)};
}
template <typename Fwd>
void add_l2_stations(Fwd& fwd) {
  fwd.add_static_mac({0x02, 0, 0, 0, 0, 0x02}, 2);
  for (unsigned i = 0; i < kL2Stations; ++i) fwd.add_static_mac(l2_station(i, true), 2);
}
Trace l2_many_trace() {
  Trace t;
  std::vector<uint8_t> payload(64, 0xAB);
  std::mt19937 r(11);
  for (unsigned i = 0; i < kL2Stations; ++i) {
    auto sp = spec();
    sp.src_mac = l2_station(i, false);
    sp.dst_mac = l2_station(r() % kL2Stations, true);
    sp.dst_port = 9000;
    t.frames.push_back(build_udp_frame(sp, payload));
  }
  std::shuffle(t.frames.begin(), t.frames.end(), r);
  t.in_place = true;
  return t;
}

Trace l2_trace() {
  Trace t;
  std::vector<uint8_t> payload(64, 0xAB);
  for (unsigned i = 0; i < 64; ++i) {
    auto sp = spec();
    sp.src_mac[5] = uint8_t(0x40 + i);
    sp.dst_port = 9000;
    t.frames.push_back(build_udp_frame(sp, payload));
  }
  t.in_place = true;
  return t;
}

// What bench/run.py's pcap part replays: one station's frame, over and over
// (a burst of one flow: the lookup memos and repeated decisions hit).
Trace l2_flow_trace() {
  Trace t;
  std::vector<uint8_t> payload(64, 0xAB);
  auto sp = spec();
  sp.src_mac[5] = 0x40;
  sp.dst_port = 9000;
  for (unsigned i = 0; i < 64; ++i) t.frames.push_back(build_udp_frame(sp, payload));
  t.in_place = true;
  return t;
}

// --- agq traffic --------------------------------------------------------------

// A job per shape (docs/PROTOCOL.md): N workers, `slots` slots, and exactly
// enough rows for every slot to hold a window of `width` bits in both
// versions (rows = slots * width / 32: 32/width sequences share a row), so
// every first contribution gets its full request and nothing falls back.
struct AgqShape {
  const char* name;
  unsigned workers;
  unsigned width;        // req_width = granted width, bits
  unsigned slots = 256;  // sequences in flight
  unsigned retx_every = 0;  // every k-th slot: worker 0 retransmits before and after completion
  bool unknown_job = false; // DATA of an unregistered job (the cheap drop path)
  unsigned lanes = agq::proto::kAgqLanes;  // lane profile: 32, or 16 (Tofino 1, PROTOCOL §10)
};

const AgqShape kAgqShapes[] = {
    // workers x granted width: the steady state of a job
    {"n2_w8", 2, 8}, {"n2_w16", 2, 16}, {"n2_w32", 2, 32},
    {"n4_w8", 4, 8}, {"n4_w16", 4, 16}, {"n4_w32", 4, 32},
    {"n8_w8", 8, 8}, {"n8_w16", 8, 16}, {"n8_w32", 8, 32},
    // the narrowest window: 8 sequences per row (4 bits, N <= 4)
    {"n2_w4", 2, 4},
    // allocation-heavy: every packet is a first contribution (2 passes) and a RESULT
    {"n1_w32_alloc", 1, 32},
    // aggregation-heavy: 31 of 32 packets absorbed
    {"n32_w32", 32, 32},
    // retransmissions: for every 4th slot worker 0 resends its DATA while the
    // sequence is pending (dropped as a duplicate) and after it completed
    // (the kept RESULT is unicast back): 11% of the packets are resends
    {"n4_w16_retx", 4, 16, 256, 4},
    {"unknown_job", 4, 16, 256, 0, true},
    // the 16-lane profile (84-byte header, half a row per pass)
    {"n2_w16_l16", 2, 16, 256, 0, false, 16}, {"n4_w16_l16", 4, 16, 256, 0, false, 16},
    {"n8_w16_l16", 8, 16, 256, 0, false, 16},
};

uint16_t agq_job_id(unsigned shape_index) { return uint16_t(100 + shape_index); }
uint32_t agq_worker_ip(unsigned w) { return 0x0A000001u + w; }

void add_agq_jobs(agq::pipeline::agq::AgqSwitchProgram& prog) {
  unsigned i = 0;
  for (const AgqShape& s : kAgqShapes) {
    const uint16_t id = agq_job_id(i++);
    if (s.unknown_job) continue;
    agq::pipeline::agq::JobSpec j;
    j.job_id = id;
    j.num_workers = uint8_t(s.workers);
    for (unsigned w = 0; w < s.workers; ++w)
      j.workers.push_back({uint8_t(w), kIngress, agq_worker_ip(w), {0x02, 0, 0, 0, 1, uint8_t(w)}});
    j.slots = s.slots;
    j.rows = s.slots * s.width / 32;
    j.ps_port = 0;
    j.ps_ipv4 = 0x0A020264;
    j.lanes = uint8_t(s.lanes);
    if (auto err = prog.add_job(j)) {
      std::fprintf(stderr, "bench: add_job %u: %s\n", j.job_id, err->c_str());
      std::abort();
    }
  }
}

// Two uses of every slot (version 0, then 1), worker by worker over the
// whole window as workers with a full window send: a replay loops back to
// version 0, the next use of (slot, 0), which releases and reallocates its
// window (so the first contribution of every sequence takes its 2 passes in
// every cycle). Lanes are random within the value bits (W - g).
Trace agq_trace(unsigned index) {
  const AgqShape& s = kAgqShapes[index];
  Trace t;
  t.lanes = s.lanes;
  t.width = s.width;
  const int g = int(agq::pipeline::agq::guard_bits(s.workers));
  const int b = int(s.width) - g;
  auto frame = [&](unsigned v, unsigned w, unsigned slot, bool retx) {
    auto sp = spec();
    sp.src_port = sp.dst_port = agq::proto::kAgqPort;
    sp.src_ip = agq_worker_ip(w);
    agq::proto::Agq a;
    a.flags = uint8_t(v | (retx ? agq::proto::kAgqFlagRetransmit : 0));
    a.job_id = agq_job_id(index);
    a.worker_id = uint8_t(w);
    a.num_workers = uint8_t(s.workers);
    a.slot = uint16_t(slot);
    a.seq = v * s.slots + slot;
    a.req_width = uint8_t(s.width);
    a.width = uint8_t(s.width);  // min_width = the request (the workers' default); every window is granted whole
    a.n_lanes = uint8_t(s.lanes);
    for (auto& x : a.lanes) x = b >= 32 ? rng()() : rng()() & ((1u << b) - 1);
    uint8_t payload[agq::proto::Agq::kLen];
    a.encode(payload);
    t.frames.push_back(build_udp_frame(sp, std::span<const uint8_t>(payload, size_t(a.len()))));
  };
  const bool retx = s.retx_every != 0;
  for (unsigned v = 0; v < 2; ++v) {
    for (unsigned w = 0; w < s.workers; ++w) {
      for (unsigned slot = 0; slot < s.slots; ++slot) frame(v, w, slot, false);
      if (retx && w == 0 && s.workers > 1)  // pending: duplicates
        for (unsigned slot = 0; slot < s.slots; slot += s.retx_every) frame(v, 0, slot, true);
    }
    if (retx)  // completed: the RESULT is resent
      for (unsigned slot = 0; slot < s.slots; slot += s.retx_every) frame(v, 0, slot, true);
  }
  t.elements = s.unknown_job ? 0 : uint64_t(2) * s.workers * s.slots * t.lanes;
  return t;
}

// --- the pipeline list -----------------------------------------------------

struct NamedTrace {
  std::string name;
  Trace trace;
};

struct PipelineUnderTest {
  std::string name;
  // Runs the trace in bursts of kBurst through process_burst() (the
  // dataplane's call) instead of one process() per packet.
  bool burst = false;
  // A fresh program with its forwarding entries (static MAC 02:..:02 ->
  // port 2) and, for agq, every shape's job.
  std::function<std::unique_ptr<agq::tna::Program>(agq::tna::ReplicationEngine&)> make;
  // This pipeline's traces (its wire format); l2_forward is added to every list.
  std::function<std::vector<NamedTrace>()> traces;
};

// The harness alone: a program that touches nothing and drops everything.
// Its rows are what every other row pays for copying frames into the
// buffers and reading the decisions back.
class NullProgram final : public agq::tna::Program {
 public:
  std::string_view name() const override { return "null"; }
  agq::tna::Decision process(std::span<uint8_t>, const agq::tna::IngressIntrinsicMd&) override {
    return agq::tna::Decision::drop(0);
  }
  void process_burst(agq::tna::BurstPacket* pkts, unsigned n) override {
    for (unsigned i = 0; i < n; ++i) pkts[i].decision = agq::tna::Decision::drop(0);
  }
  void visit_counters(const agq::tna::CounterVisitor&) const override {}
  void clear_counters() override {}
  void clear_state() override {}
};

std::vector<PipelineUnderTest> pipelines() {
  std::vector<PipelineUnderTest> v;
  // classic: the fast program (what the switch runs), beside the
  // implementation it replaced, kept as its reference model (classic_ref_burst:
  // TNA-vocabulary registers and tables, full header decode/encode,
  // std::unordered_map forwarding tables), and the harness alone (null);
  // each per packet (process()) and in bursts (process_burst(), *_burst).
  auto classic_traces = [] {
    std::vector<NamedTrace> out;
    for (const Shape& s : kShapes()) out.push_back({s.name, classic_trace(s)});
    out.push_back({"worked_example", classic_worked_example()});
    return out;
  };
  auto classic_fast = [](agq::tna::ReplicationEngine& pre) -> std::unique_ptr<agq::tna::Program> {
    agq::pipeline::classic::ClassicConfig cfg{0, {1, 2}, 35000};
    auto p = std::make_unique<agq::pipeline::classic::ClassicProgram>(cfg, agq::pipeline::ForwardingConfig{}, pre);
    add_l2_stations(p->forwarding());
    return p;
  };
  auto classic_ref = [](agq::tna::ReplicationEngine& pre) -> std::unique_ptr<agq::tna::Program> {
    agq::pipeline::classic::ClassicConfig cfg{0, {1, 2}, 35000};
    auto p = std::make_unique<agq::pipeline::reference::ClassicReference>(cfg, agq::pipeline::ForwardingConfig{}, pre);
    add_l2_stations(p->forwarding());
    return p;
  };
  auto null_program = [](agq::tna::ReplicationEngine&) -> std::unique_ptr<agq::tna::Program> {
    return std::make_unique<NullProgram>();
  };
  auto no_traces = [] { return std::vector<NamedTrace>{}; };
  // The burst harness alone on one copied trace of each wire format (the
  // in-place l2_forward is added below like everywhere): what the rows of
  // that format pay for copies and reading decisions back.
  auto harness_traces = [] {
    std::vector<NamedTrace> out;
    for (const Shape& s : kShapes())
      if (std::string(s.name) == "steady_w2") out.push_back({s.name, classic_trace(s)});
    for (unsigned i = 0; i < std::size(kAgqShapes); ++i)
      if (std::string(kAgqShapes[i].name) == "n4_w16") out.push_back({kAgqShapes[i].name, agq_trace(i)});
    return out;
  };
  v.push_back({"null", false, null_program, no_traces});
  v.push_back({"null_burst", true, null_program, harness_traces});
  v.push_back({"classic", false, classic_fast, classic_traces});
  v.push_back({"classic_burst", true, classic_fast, classic_traces});
  // The reference through the same burst harness (its process_burst() is
  // the default loop over process(), so these rows are its process() cost
  // plus the burst harness), for side-by-side burst rows.
  v.push_back({"classic_ref_burst", true, classic_ref, classic_traces});
  // agq: the TNA model (the reference) and the fast program the switch
  // runs, both through process_burst() in bursts of kBurst, side by side;
  // the fast one also with each SIMD variant the CPU has, on n4_w16.
  auto agq_traces = [](bool only_n4_w16) {
    return [only_n4_w16] {
      std::vector<NamedTrace> out;
      for (unsigned i = 0; i < std::size(kAgqShapes); ++i)
        if (!only_n4_w16 || std::string(kAgqShapes[i].name) == "n4_w16")
          out.push_back({kAgqShapes[i].name, agq_trace(i)});
      return out;
    };
  };
  auto agq_fast = [](agq::pipeline::agq::fast::Simd simd) {
    return [simd](agq::tna::ReplicationEngine& pre) -> std::unique_ptr<agq::tna::Program> {
      auto p = std::make_unique<agq::pipeline::agq::fast::AgqFastProgram>(agq::pipeline::agq::AgqConfig{},
                                                                          agq::pipeline::ForwardingConfig{}, pre);
      p->set_simd(simd);
      add_l2_stations(p->forwarding());
      add_agq_jobs(*p);
      return p;
    };
  };
  v.push_back({"agq",
               true,
               [](agq::tna::ReplicationEngine& pre) -> std::unique_ptr<agq::tna::Program> {
                 auto p = std::make_unique<agq::pipeline::agq::AgqProgram>(agq::pipeline::agq::AgqConfig{},
                                                                          agq::pipeline::ForwardingConfig{}, pre);
                 add_l2_stations(p->forwarding());
                 add_agq_jobs(*p);
                 return p;
               },
               agq_traces(false)});
  using agq::pipeline::agq::fast::Simd;
  v.push_back({"agq_fast", true, agq_fast(agq::pipeline::agq::fast::best_simd()), agq_traces(false)});
  for (Simd s : {Simd::Scalar, Simd::Avx2, Simd::Avx512})
    if (agq::pipeline::agq::fast::simd_supported(s))
      v.push_back({std::string("agq_fast_") + agq::pipeline::agq::fast::to_string(s), true, agq_fast(s),
                   agq_traces(true)});
  return v;
}

uint64_t counter(const agq::tna::Program& p, std::string_view name) {
  uint64_t v = 0;
  p.visit_counters([&](std::string_view n, uint64_t x) {
    if (n == name) v = x;
  });
  return v;
}

// The counters of a replay of `pkts` packets (shared by both runners).
void report(benchmark::State& state, const agq::tna::Program& prog, const PipelineUnderTest& pu, const Trace& trace,
            double pkts, uint64_t drops, uint64_t out) {
  const size_t n = trace.frames.size();
  state.SetItemsProcessed(int64_t(pkts));
  state.counters["ns_per_pkt"] = benchmark::Counter(pkts * 1e-9, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  if (trace.elements)
    state.counters["ns_per_elem"] = benchmark::Counter(pkts * double(trace.elements) / double(n) * 1e-9,
                                                       benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["drop_frac"] = double(drops) / pkts;
  state.counters["out_per_pkt"] = double(out) / pkts;
  state.counters["trace_pkts"] = double(n);
  state.counters["lanes"] = trace.lanes;
  state.counters["width_bits"] = trace.width;
  if (const uint64_t agq_pkts = counter(prog, "agq_packets"))
    state.counters["passes_per_pkt"] = 1.0 + double(counter(prog, "agq_resubmits")) / double(agq_pkts);
  if (const uint64_t fb = counter(prog, "agq_fallback"))  // the shapes are sized so that this never happens
    std::fprintf(stderr, "bench: %s: %llu sequences fell back to the PS\n", pu.name.c_str(), (unsigned long long)fb);
}

// Replays `trace` through the program; one iteration = one packet, with
// its multicast replicas through egress().
void run_trace(benchmark::State& state, const PipelineUnderTest& pu, const Trace& trace) {
  agq::tna::ReplicationEngine pre;
  auto prog = pu.make(pre);
  agq::tna::IngressIntrinsicMd md;
  md.ingress_port = kIngress;
  std::vector<Frame> frames = trace.frames;
  const size_t n = frames.size();
  size_t i = 0;
  uint64_t drops = 0, out = 0;
  const bool egress = prog->has_egress();
  // Programs rewrite packets in place (an agq DATA becomes a RESULT), so
  // every iteration gets a fresh copy of the trace's frame, as a real
  // dataplane gets a fresh mbuf: ~190 bytes of memcpy, no allocation. Each
  // replica gets its own copy too when the program rewrites replicas.
  Frame f, r;
  f.reserve(2048);
  r.reserve(2048);
  for (auto _ : state) {
    f.assign(frames[i].begin(), frames[i].end());
    const auto d = prog->process(f, md);
    switch (d.kind) {
      case agq::tna::Decision::Kind::Drop: ++drops; break;
      case agq::tna::Decision::Kind::Handoff: ++drops; break;  // one instance owns every shard here: never
      case agq::tna::Decision::Kind::Unicast: ++out; break;
      case agq::tna::Decision::Kind::Multicast:
        for (const agq::tna::Replica& rep : pre.members(d.group)) {
          if (rep.port == d.exclude_port) continue;
          ++out;
          if (egress) {
            r.assign(f.begin(), f.end());
            prog->egress(r, rep.port, rep.rid);
            benchmark::DoNotOptimize(r.data());
          }
        }
        break;
    }
    benchmark::DoNotOptimize(d);
    if (++i == n) i = 0;
  }
  report(state, *prog, pu, trace, double(state.iterations()), drops, out);
}

// The same replay through process_burst(), kBurst packets per iteration as
// the dataplane hands them over, then each packet's decision with its
// replicas through egress_replicas() (one call per group, as the
// dataplane makes them). The burst descriptors are built before the timed loop (a ring of the trace's frames, each in its own 64-byte-aligned
// buffer like an mbuf's data, plus the first kBurst again at the end so that
// every burst is one contiguous run of descriptors). An in-place trace is
// processed straight from those buffers; any other trace is first copied,
// frame by frame, into the burst's kBurst buffers (a fresh rx burst: the
// programs rewrite packets in place, an agq DATA becomes a RESULT). Each
// replica gets its own copy when the program rewrites replicas.
constexpr unsigned kBurst = 32;
constexpr size_t kBufStride = 2048;  // an mbuf's data room
void run_trace_burst(benchmark::State& state, const PipelineUnderTest& pu, const Trace& trace) {
  agq::tna::ReplicationEngine pre;
  auto prog = pu.make(pre);
  agq::tna::IngressIntrinsicMd md;
  md.ingress_port = kIngress;
  const std::vector<Frame>& frames = trace.frames;
  const size_t n = frames.size();
  for (const Frame& f : frames)
    if (f.size() > kBufStride) std::abort();
  const bool in_place = trace.in_place;
  // The buffers: one per frame of the trace (in place) or one per packet of
  // a burst (copied into).
  const size_t nbuf = in_place ? n : kBurst;
  std::unique_ptr<uint8_t, decltype(&std::free)> pool(
      static_cast<uint8_t*>(std::aligned_alloc(64, nbuf * kBufStride)), &std::free);
  std::vector<agq::tna::BurstPacket> ring(n + kBurst);
  for (size_t j = 0; j < n + kBurst; ++j) {
    const Frame& f = frames[j % n];
    uint8_t* buf = pool.get() + (in_place ? j % n : j % kBurst) * kBufStride;
    if (in_place) std::memcpy(buf, f.data(), f.size());
    ring[j] = agq::tna::BurstPacket{buf, uint16_t(f.size()), md, {}};
  }
  // The pristine frames packed back to back, for the copies.
  std::vector<const uint8_t*> src(n + kBurst);
  for (size_t j = 0; j < n + kBurst; ++j) src[j] = frames[j % n].data();
  size_t i = 0;
  uint64_t drops = 0, out = 0;
  const bool egress = prog->has_egress();
  constexpr unsigned kMaxReplicas = 64;
  std::array<agq::tna::Replica, kMaxReplicas> reps;
  std::array<uint8_t*, kMaxReplicas> rout;
  std::unique_ptr<uint8_t, decltype(&std::free)> rbufs(
      static_cast<uint8_t*>(std::aligned_alloc(64, kMaxReplicas * kBufStride)), &std::free);
  for (auto _ : state) {
    agq::tna::BurstPacket* pkts = &ring[i];
    if (!in_place)
      for (unsigned k = 0; k < kBurst; ++k) std::memcpy(pkts[k].bytes, src[i + k], pkts[k].len);
    prog->process_burst(pkts, kBurst);
    for (unsigned k = 0; k < kBurst; ++k) {
      const agq::tna::Decision& d = pkts[k].decision;
      switch (d.kind) {
        case agq::tna::Decision::Kind::Drop: ++drops; break;
        case agq::tna::Decision::Kind::Handoff: ++drops; break;  // one instance owns every shard here: never
        case agq::tna::Decision::Kind::Unicast: ++out; break;
        case agq::tna::Decision::Kind::Multicast: {
          // As the dataplane does it: the group's replicas in one
          // egress_replicas() call, n-1 copies into fresh buffers and the
          // original (when the trace is not replayed in place) the last.
          unsigned nr = 0;
          for (const agq::tna::Replica& rep : pre.members(d.group)) {
            if (rep.port == d.exclude_port || nr == kMaxReplicas) continue;
            ++out;
            reps[nr] = rep;
            rout[nr] = rbufs.get() + nr * kBufStride;
            ++nr;
          }
          if (egress && nr) {
            if (!in_place) rout[nr - 1] = pkts[k].bytes;
            prog->egress_replicas(pkts[k].bytes, pkts[k].len, reps.data(), rout.data(), nr);
            benchmark::DoNotOptimize(rout[0]);
          }
          break;
        }
      }
    }
    benchmark::ClobberMemory();
    i = (i + kBurst) % n;  // (a trace may be shorter than a burst)
  }
  if (in_place)
    for (size_t j = 0; j < n; ++j)
      if (std::memcmp(ring[j].bytes, frames[j].data(), frames[j].size()) != 0) {
        std::fprintf(stderr, "bench: %s rewrote frame %zu of an in-place trace\n", pu.name.c_str(), j);
        std::abort();
      }
  report(state, *prog, pu, trace, double(state.iterations()) * kBurst, drops, out);
}

const Shape kClassicShapes[] = {
    // allocation-heavy: every chunk is 1 first packet (2 passes) + 1 ACK
    {"alloc_w1", 1, 256, 1, false},
    // the worked-example job shape at scale: 2 workers, 256 slots in flight
    {"steady_w2", 2, 256, 1, false},
    {"steady_w8", 8, 256, 1, false},
    // aggregation-heavy: 30 of 32 packets are plain contributions
    {"agg_w32", 32, 256, 1, false},
    // window widths: live seqs per aggregator 2, 4, 8 (4-bit windows at 8)
    {"steady_w2_seqs2", 2, 256, 2, false},
    {"steady_w2_seqs4", 2, 256, 4, false},
    {"steady_w2_seqs8", 2, 256, 8, false},
    // ACKs for slots nobody owns: dropped after one register action
    {"ack_stale", 1, 256, 1, true},
};

const std::vector<Shape>& kShapes() {
  static const std::vector<Shape> v(std::begin(kClassicShapes), std::end(kClassicShapes));
  return v;
}

// --- packed lanes vs plain 32-bit add ---------------------------------------

// The classic register layout: 4 registers (one per lane) of 8192 cells,
// 128 KiB, fits L2. Each "packet" names an aggregator and carries 4 lanes.
constexpr unsigned kAggs = 8192, kLanes = 4, kPkts = 4096;

struct LaneInput {
  std::vector<uint32_t> agg, pos;  // per packet
  std::vector<uint32_t> data;      // kPkts x kLanes
};

LaneInput lane_input(unsigned L) {
  LaneInput in;
  std::mt19937 r(7);
  const unsigned nibbles = L / 4;
  for (unsigned i = 0; i < kPkts; ++i) {
    in.agg.push_back(r() % kAggs);
    // A window of L bits starts at a nibble p with p + L/4 <= 8.
    in.pos.push_back(r() % (8 - nibbles + 1));
    for (unsigned k = 0; k < kLanes; ++k) in.data.push_back(r() >> 4);
  }
  return in;
}

// data[k] = reg[k][a] += data[k]: what a 32-bit-per-gradient switch does,
// with the register action's output written back like the pipeline does.
void BM_LaneAdd_Plain32(benchmark::State& state) {
  std::vector<uint32_t> regs(kLanes * kAggs, 0);
  const LaneInput in = lane_input(32);
  std::vector<uint32_t> data = in.data;
  for (auto _ : state) {
    for (unsigned i = 0; i < kPkts; ++i) {
      const uint32_t a = in.agg[i];
      uint32_t* d = &data[i * kLanes];
      for (unsigned k = 0; k < kLanes; ++k) d[k] = regs[k * kAggs + a] += d[k];
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * kPkts * kLanes);
  state.counters["ns_per_lane"] = benchmark::Counter(double(state.iterations()) * kPkts * kLanes * 1e-9,
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["values_per_cell"] = 1;
}

// The classic lane stages 6-11 for a window of L bits at nibble p:
// compress (top L bits), align (>> 4p), add, extract (window mask), realign
// (<< 4p). Masks are computed per packet from (L, p), where the pipeline
// looks them up in get_length_t; a table lookup is not cheaper.
void BM_LaneAdd_Packed(benchmark::State& state) {
  const unsigned L = unsigned(state.range(0));
  std::vector<uint32_t> regs(kLanes * kAggs, 0);
  const LaneInput in = lane_input(L);
  std::vector<uint32_t> data = in.data;
  using agq::pipeline::classic::TOP;
  using agq::pipeline::classic::W;
  for (auto _ : state) {
    for (unsigned i = 0; i < kPkts; ++i) {
      const uint32_t a = in.agg[i], p = in.pos[i];
      const uint32_t compress = TOP(L), extract = W(p, p + L / 4);
      uint32_t* d = &data[i * kLanes];
      for (unsigned k = 0; k < kLanes; ++k) {
        const uint32_t x = (d[k] & compress) >> (4 * p);
        const uint32_t cell = regs[k * kAggs + a] += x;
        d[k] = (cell & extract) << (4 * p);
      }
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * kPkts * kLanes);
  state.counters["ns_per_lane"] = benchmark::Counter(double(state.iterations()) * kPkts * kLanes * 1e-9,
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  // One cell holds 32/L such windows: the memory side of the trade.
  state.counters["values_per_cell"] = 32.0 / L;
}

BENCHMARK(BM_LaneAdd_Plain32);
BENCHMARK(BM_LaneAdd_Packed)->Arg(4)->Arg(8)->Arg(16)->Arg(32);

void register_pipeline_benchmarks() {
  static const std::vector<PipelineUnderTest> list = pipelines();
  for (const auto& pu : list) {
    std::vector<NamedTrace> traces = pu.traces();
    if (pu.name.rfind("agq_fast_", 0) != 0) {
      traces.push_back({"l2_forward", l2_trace()});
      traces.push_back({"l2_one_flow", l2_flow_trace()});
      if (pu.burst) traces.push_back({"l2_16k_stations", l2_many_trace()});
    }
    for (auto& nt : traces)
      benchmark::RegisterBenchmark(("Pipeline/" + pu.name + "/" + nt.name).c_str(),
                                   [&pu, t = std::move(nt.trace)](benchmark::State& st) {
                                     if (pu.burst) run_trace_burst(st, pu, t);
                                     else run_trace(st, pu, t);
                                   });
  }
}

// The usual console output, then the agq rows side by side: the fast
// program against the model, measured in this run (ratios, not absolutes,
// are what survive a loaded machine).
class SideBySideReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      auto it = r.counters.find("ns_per_pkt");
      if (it != r.counters.end() && r.run_type == Run::RT_Iteration) ns_[r.benchmark_name()] = it->second.value;
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    print_l2();
    print_classic();
    print_agq();
  }

 private:
  const double* find(const std::string& name) const {
    const auto it = ns_.find(name);
    return it == ns_.end() ? nullptr : &it->second;
  }

  // Plain L2 forwarding: the fast Forwarding inside both fast programs, its
  // reference, and the harness alone, all on the same frames in this run.
  // "program" = row - harness, printed beside the row, never instead of it.
  void print_l2() const {
    print_l2("l2_forward", "64 stations -> a static MAC");
    print_l2("l2_one_flow", "one station -> a static MAC, as run.py's pcap replay");
    print_l2("l2_16k_stations", "16384 stations -> 16384 static MACs, random, 32 MiB of frames");
  }
  void print_l2(const std::string& trace, const char* what) const {
    const double* harness = find("Pipeline/null_burst/" + trace);
    const double* ref = find("Pipeline/classic_ref_burst/" + trace);
    struct Row {
      const char* label;
      const char* bench;
    };
    const Row rows[] = {
        {"classic (fast Forwarding)", "Pipeline/classic_burst/"},
        {"agq_fast (fast Forwarding)", "Pipeline/agq_fast/"},
        {"agq model (parse, Headers)", "Pipeline/agq/"},
        {"reference (ForwardingReference)", "Pipeline/classic_ref_burst/"},
    };
    bool header = false;
    for (const Row& r : rows) {
      const double* v = find(r.bench + trace);
      if (!v) continue;
      if (!header) {
        std::printf("\nplain L2 forwarding (%s: %s; bursts of %u, frames in place), ns/packet\n", trace.c_str(),
                    what, kBurst);
        std::printf("%-32s %9s %9s %9s\n", "program", "row", "-harness", "ref/row");
        if (harness) std::printf("%-32s %9.1f\n", "harness alone (null_burst)", *harness);
        header = true;
      }
      std::printf("%-32s %9.1f", r.label, *v);
      if (harness) std::printf(" %9.1f", *v - *harness);
      else std::printf(" %9s", "-");
      if (ref) std::printf(" %8.1fx", *ref / *v);
      std::printf("\n");
    }
  }

  // classic: the fast program against its reference, both in bursts.
  void print_classic() const {
    bool header = false;
    for (const Shape& s : kShapes()) {
      const double* f = find(std::string("Pipeline/classic_burst/") + s.name);
      const double* r = find(std::string("Pipeline/classic_ref_burst/") + s.name);
      if (!f || !r) continue;
      if (!header) {
        std::printf("\nclassic pipeline, ns/packet (bursts of %u, frames copied in): reference vs fast\n", kBurst);
        if (const double* h = find("Pipeline/null_burst/steady_w2"))
          std::printf("harness alone (null_burst/steady_w2): %.1f ns/packet, included below\n", *h);
        std::printf("%-16s %10s %10s %8s\n", "shape", "reference", "fast", "speedup");
        header = true;
      }
      std::printf("%-16s %10.1f %10.1f %7.1fx\n", s.name, *r, *f, *r / *f);
    }
  }

  void print_agq() const {
    bool header = false;
    for (const AgqShape& s : kAgqShapes) {
      const auto m = ns_.find(std::string("Pipeline/agq/") + s.name);
      const auto f = ns_.find(std::string("Pipeline/agq_fast/") + s.name);
      if (m == ns_.end() || f == ns_.end()) continue;
      if (!header) {
        std::printf("\nagq pipeline, ns/packet (bursts of %u, replicas through egress_replicas()): model vs fast (%s)\n",
                    kBurst, agq::pipeline::agq::fast::to_string(agq::pipeline::agq::fast::best_simd()));
        std::printf("%-14s %10s %10s %8s\n", "shape", "model", "fast", "speedup");
        header = true;
      }
      std::printf("%-14s %10.1f %10.1f %7.1fx\n", s.name, m->second, f->second, m->second / f->second);
    }
    const auto m = ns_.find("Pipeline/agq/n4_w16");
    for (const char* v : {"scalar", "avx2", "avx512"}) {
      const auto f = ns_.find(std::string("Pipeline/agq_fast_") + v + "/n4_w16");
      if (f == ns_.end()) continue;
      std::printf("n4_w16 %-7s %10.1f ns/packet", v, f->second);
      if (m != ns_.end()) std::printf("  (%.1fx the model)", m->second / f->second);
      std::printf("\n");
    }
    if (const double* h = find("Pipeline/null_burst/n4_w16"))
      std::printf("harness alone (null_burst/n4_w16): %.1f ns/packet, included above\n", *h);
  }

  std::map<std::string, double> ns_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_pipeline_benchmarks();
  SideBySideReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
