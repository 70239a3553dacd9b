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
// Pipelines are a list (pipelines()): the project's own `agq` pipeline
// (issue 4) gets an entry next to classic once it exists, with its own trace
// builder, and every benchmark below runs for it too.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "pipeline/agq/agq_program.hpp"
#include "pipeline/agq/encoding.hpp"
#include "pipeline/classic/classic_program.hpp"
#include "pipeline/classic/tables.hpp"
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

const std::vector<Shape>& kAgqShapes();

// What one benchmark replays: frames and how many of them are AGQ packets.
struct Trace {
  std::vector<Frame> frames;
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
  return t;
}

// Ordinary traffic: UDP to a MAC with a static entry (plain L2 switching
// inside the same program), 64 distinct source MACs so learning is exercised.
Trace l2_trace() {
  Trace t;
  std::vector<uint8_t> payload(64, 0xAB);
  for (unsigned i = 0; i < 64; ++i) {
    auto sp = spec();
    sp.src_mac[5] = uint8_t(0x40 + i);
    sp.dst_port = 9000;
    t.frames.push_back(build_udp_frame(sp, payload));
  }
  return t;
}

// --- agq traffic --------------------------------------------------------------

// One agq job per shape, so every shape has its own N and packing:
// job id = workers * 16 + seqs_per_agg, `window` slots, window/seqs rows, so
// seqs_per_agg sequences of 32/seqs_per_agg bits share each row. Every
// worker sends from kIngress with its own IPv4 address.
uint16_t agq_job_id(const Shape& s) { return uint16_t(s.workers * 16 + s.seqs_per_agg); }
uint32_t agq_worker_ip(unsigned w) { return 0x0A000001u + w; }

void add_agq_jobs(agq::pipeline::agq::AgqProgram& prog) {
  for (const Shape& s : kAgqShapes()) {
    if (s.stale_acks) continue;
    agq::pipeline::agq::JobSpec j;
    j.job_id = agq_job_id(s);
    j.num_workers = uint8_t(s.workers);
    for (unsigned w = 0; w < s.workers; ++w)
      j.workers.push_back({uint8_t(w), kIngress, agq_worker_ip(w), {0x02, 0, 0, 0, 1, uint8_t(w)}});
    j.slots = s.window;
    j.rows = s.window / s.seqs_per_agg;
    j.ps_port = 0;
    j.ps_ipv4 = 0x0A020264;
    if (auto err = prog.add_job(j)) {
      std::fprintf(stderr, "bench: add_job %u: %s\n", j.job_id, err->c_str());
      std::abort();
    }
  }
}

// Two uses of every slot (version 0, then 1), every worker, 32 lanes: a
// replay loops back to version 0, which the bitmaps see as the next use.
// The stale shape sends DATA of an unregistered job (the cheap drop path).
Trace agq_trace(const Shape& s) {
  Trace t;
  const unsigned width = 32 / s.seqs_per_agg;
  const int g = agq::pipeline::agq::guard_bits(s.workers);
  for (unsigned v = 0; v < 2; ++v)
    for (unsigned w = 0; w < s.workers; ++w)
      for (unsigned slot = 0; slot < s.window; ++slot) {
        auto sp = spec();
        sp.src_port = sp.dst_port = agq::proto::kAgqPort;
        sp.src_ip = agq_worker_ip(w);
        agq::proto::Agq a;
        a.flags = uint8_t(v);
        a.job_id = s.stale_acks ? 999 : agq_job_id(s);
        a.worker_id = uint8_t(w);
        a.num_workers = uint8_t(s.workers);
        a.slot = uint16_t(slot);
        a.seq = slot;
        a.req_width = uint8_t(width);
        const int b = int(width) - g;
        for (auto& x : a.lanes) x = b >= 32 ? rng()() : rng()() & ((1u << b) - 1);
        uint8_t payload[agq::proto::Agq::kLen];
        a.encode(payload);
        t.frames.push_back(build_udp_frame(sp, payload));
      }
  return t;
}

// --- the pipeline list -----------------------------------------------------

struct PipelineUnderTest {
  std::string name;
  // A fresh program with its forwarding entries (PS/worker ports as in
  // conf/classic.toml, static MAC 02:..:02 -> port 2).
  std::function<std::unique_ptr<agq::pipeline::SwitchProgram>(agq::tna::ReplicationEngine&)> make;
  // Aggregation traffic of this pipeline's wire format for a shape.
  std::function<Trace(const Shape&)> agg_trace;
  std::function<Trace()> worked_example;  // may be empty
};

std::vector<PipelineUnderTest> pipelines() {
  std::vector<PipelineUnderTest> v;
  v.push_back({"classic",
               [](agq::tna::ReplicationEngine& pre) -> std::unique_ptr<agq::pipeline::SwitchProgram> {
                 agq::pipeline::classic::ClassicConfig cfg{0, {1, 2}, 35000};
                 auto p = std::make_unique<agq::pipeline::classic::ClassicProgram>(cfg, agq::pipeline::ForwardingConfig{}, pre);
                 p->forwarding().add_static_mac({0x02, 0, 0, 0, 0, 0x02}, 2);
                 return p;
               },
               classic_trace, classic_worked_example});
  v.push_back({"agq",
               [](agq::tna::ReplicationEngine& pre) -> std::unique_ptr<agq::pipeline::SwitchProgram> {
                 auto p = std::make_unique<agq::pipeline::agq::AgqProgram>(agq::pipeline::agq::AgqConfig{},
                                                                          agq::pipeline::ForwardingConfig{}, pre);
                 p->forwarding().add_static_mac({0x02, 0, 0, 0, 0, 0x02}, 2);
                 add_agq_jobs(*p);
                 return p;
               },
               agq_trace, nullptr});
  return v;
}

// Replays `trace` through the program; one iteration = one packet.
void run_trace(benchmark::State& state, const PipelineUnderTest& pu, const Trace& trace) {
  agq::tna::ReplicationEngine pre;
  auto prog = pu.make(pre);
  agq::tna::IngressIntrinsicMd md;
  md.ingress_port = kIngress;
  std::vector<Frame> frames = trace.frames;
  const size_t n = frames.size();
  size_t i = 0;
  uint64_t drops = 0;
  // Programs rewrite packets in place (an agq DATA becomes a RESULT), so
  // every iteration gets a fresh copy of the trace's frame, as a real
  // dataplane gets a fresh mbuf: ~190 bytes of memcpy, no allocation.
  Frame f;
  f.reserve(2048);
  for (auto _ : state) {
    f.assign(frames[i].begin(), frames[i].end());
    const auto d = prog->process(f, md);
    drops += d.kind == agq::tna::Decision::Kind::Drop;
    benchmark::DoNotOptimize(d);
    if (++i == n) i = 0;
  }
  state.SetItemsProcessed(int64_t(state.iterations()));
  state.counters["ns_per_pkt"] = benchmark::Counter(double(state.iterations()) * 1e-9,
                                                    benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["drop_frac"] = double(drops) / double(state.iterations());
  state.counters["trace_pkts"] = double(n);
}

const Shape kShapes[] = {
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

const std::vector<Shape>& kAgqShapes() {
  static const std::vector<Shape> v(std::begin(kShapes), std::end(kShapes));
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
    for (const Shape& s : kShapes) {
      const Trace t = pu.agg_trace(s);
      benchmark::RegisterBenchmark(("Pipeline/" + pu.name + "/" + s.name).c_str(),
                                   [&pu, t](benchmark::State& st) { run_trace(st, pu, t); });
    }
    if (pu.worked_example) {
      const Trace t = pu.worked_example();
      benchmark::RegisterBenchmark(("Pipeline/" + pu.name + "/worked_example").c_str(),
                                   [&pu, t](benchmark::State& st) { run_trace(st, pu, t); });
    }
    const Trace l2 = l2_trace();
    benchmark::RegisterBenchmark(("Pipeline/" + pu.name + "/l2_forward").c_str(),
                                 [&pu, l2](benchmark::State& st) { run_trace(st, pu, l2); });
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_pipeline_benchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
