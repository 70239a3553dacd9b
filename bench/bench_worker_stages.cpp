// The worker's own per-element costs, without DPDK (Google Benchmark), for
// bench/README.md's per-stage table (the switch's share is bench_pipeline's,
// the memif I/O's is the memif benchmark's):
//   encode   fastc::encode_be, float32 -> big-endian lanes of a DATA (AVX2)
//   decode   fastc::decode_be, RESULT lanes -> float32 output
//   verify   AgqVerifier::check of one RESULT (N workers' values re-encoded
//            with the scalar reference, exact sum, float bound); per element
//            of a checked chunk (sample:K divides it by K)
//   engine   AllreduceEngine, one logical worker of an N = 1 job through an
//            in-memory loopback (a DATA turned into its RESULT in place):
//            encode + bookkeeping + timers + decode per element, no I/O;
//            arg 1: with error feedback (residual added and updated)
// Counter ns_per_elem = time / elements of the tensor processed.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "lib/agq_codec.hpp"
#include "lib/agq_fast_codec.hpp"
#include "lib/agq_verifier.hpp"
#include "lib/allreduce_engine.hpp"
#include "lib/buffer_frame_io.hpp"
#include "lib/gradient_source.hpp"
#include "proto/agq.hpp"

using namespace agq;
using namespace agq::worker;

namespace {

constexpr unsigned kLanes = 32;
constexpr size_t kElems = 1 << 18;  // 1 MB of float32, the e2e benchmark's smallest tensor

std::vector<float> tensor(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0, 1);
  std::vector<float> v(kElems);
  for (float& x : v) x = nd(rng);
  return v;
}

// ns per tensor element: the counter is inverted (time / (value x iterations)).
void ns_per_elem(benchmark::State& st, size_t elems) {
  st.counters["ns_per_elem"] = benchmark::Counter(double(elems) * 1e-9, benchmark::Counter::kIsIterationInvariantRate |
                                                                             benchmark::Counter::kInvert);
}

void BM_Encode(benchmark::State& st) {
  const auto x = tensor(1);
  std::vector<uint8_t> out(kLanes * 4);
  const int guard = agqc::guard_bits(unsigned(st.range(0)));
  for (auto _ : st) {
    for (size_t c = 0; c < kElems; c += kLanes)
      benchmark::DoNotOptimize(fastc::encode_be(x.data() + c, kLanes, kLanes, 16, guard, -10, out.data()));
    benchmark::ClobberMemory();
  }
  ns_per_elem(st, kElems);
}

// args: N, d (the RESULT's truncation: d > 0 adds the unbiased decode's offset)
void BM_Decode(benchmark::State& st) {
  const unsigned n = unsigned(st.range(0));
  const int d = int(st.range(1));
  const int guard = agqc::guard_bits(n);
  std::vector<uint8_t> in(kElems * 4);
  std::mt19937 rng(2);
  for (auto& b : in) b = uint8_t(rng());
  for (size_t i = 0; i < in.size(); i += 4) in[i] &= 0x7F;
  std::vector<float> out(kElems);
  for (auto _ : st) {
    for (size_t c = 0; c < kElems; c += kLanes)
      benchmark::DoNotOptimize(fastc::decode_be(in.data() + 4 * c, kLanes, n, 16 - d, guard, -10, d, out.data() + c));
    benchmark::ClobberMemory();
  }
  ns_per_elem(st, kElems);
}

// One chunk's RESULT checked by the verifier, as agq-worker --verify all does.
void BM_Verify(benchmark::State& st) {
  const unsigned n = unsigned(st.range(0));
  AgqJobSpec job;
  job.num_workers = uint8_t(n);
  job.elements = kLanes * 1024;
  job.rounds = 1;
  AgqGradients g;
  std::string err;
  if (!g.init(job, "normal", 1, {}, err)) {
    st.SkipWithError(err.c_str());
    return;
  }
  const int guard = agqc::guard_bits(n);
  const agqc::ChunkParams p = agqc::initial_params(16, 4.0, guard);
  AgqVerifier v(g, job, kLanes);
  // Per chunk: the exact RESULT (sum of the scalar encodings) and our DATA.
  const size_t chunks = job.elements / kLanes;
  std::vector<uint8_t> res(job.elements * 4), sent(job.elements * 4);
  std::vector<float> dec(job.elements);
  for (size_t c = 0; c < chunks; ++c) {
    fastc::encode_be(g.tensor(0, 0).data() + c * kLanes, kLanes, kLanes, p.width, guard, p.exponent, &sent[c * 128]);
    for (unsigned k = 0; k < kLanes; ++k) {
      uint64_t s = 0;
      for (unsigned w = 0; w < n; ++w) s += agqc::encode(g.tensor(w, 0)[c * kLanes + k], p.width, guard, p.exponent).u;
      const uint32_t x = uint32_t(s);
      uint8_t* o = &res[(c * kLanes + k) * 4];
      o[0] = uint8_t(x >> 24), o[1] = uint8_t(x >> 16), o[2] = uint8_t(x >> 8), o[3] = uint8_t(x);
    }
    fastc::decode_be(&res[c * 128], kLanes, n, p.width, guard, p.exponent, 0, &dec[c * kLanes]);
  }
  ErrorStats es;
  uint64_t exact = 0;
  for (auto _ : st) {
    for (size_t c = 0; c < chunks; ++c)
      exact += v.check(0, c, p, p.width, &res[c * 128], &sent[c * 128], 0, &dec[c * kLanes], es).exact;
  }
  if (exact != chunks * st.iterations()) st.SkipWithError("the verifier disagreed with the reference sums");
  ns_per_elem(st, job.elements);
}

// The engine alone: N = 1, every DATA turned into its RESULT in place (the
// io adopts nothing: the frame stays the slot's buffer), as a poll loop
// would drive it (rx drained, then tick).
class Loopback final : public FrameIo {
 public:
  Loopback(uint32_t buffers, size_t len) : len_(len), mem_(buffers * len) {}
  uint8_t* frame(uint32_t b) override { return mem_.data() + size_t(b) * len_; }
  bool send(uint16_t, uint32_t b, uint16_t) override {
    q_.push_back(b);
    return true;
  }
  std::vector<uint32_t> q_;
  size_t len_;
  std::vector<uint8_t> mem_;
};

// arg: error feedback off (0) / on (1, the engine's default)
void BM_Engine(benchmark::State& st) {
  EngineConfig c;
  c.job.num_workers = 1;
  c.job.slots = 256;
  c.tuning.error_feedback = st.range(0) != 0;
  c.workers = {WorkerIdentity::defaults(1, 0)};
  const auto x = tensor(3);
  std::vector<float> y(kElems);
  Loopback io(c.job.slots, agq_frame_len(32));
  AllreduceEngine e;
  std::string err;
  if (!e.init(c, io, err)) {
    st.SkipWithError(err.c_str());
    return;
  }
  uint64_t now = 1'000'000'000;
  const uint8_t result = uint8_t(proto::kAgqVersion << 4 | uint8_t(proto::AgqType::Result));
  std::vector<uint32_t> q;
  for (auto _ : st) {
    bool done = false;
    e.submit(make_op(7, x, y, [&](AllreduceOp&) { done = true; }));
    while (!done) {
      now += 1000;
      q.swap(io.q_);
      for (uint32_t b : q) {
        uint8_t* h = io.frame(b) + kAgqHdrOffset;
        h[0] = result;
        h[13] = h[12];  // granted = requested
        h[15] = uint8_t(agqc::guard_bits(1));
        e.on_frame({io.frame(b), io.len_}, now);
      }
      q.clear();
      e.tick(now);
    }
  }
  ns_per_elem(st, kElems);
  st.counters["retransmissions"] = double(e.counters().retransmissions);
}

// The engine under loss: as BM_Engine with a 16 MB tensor, but each
// transmission is lost with probability arg/1000 (it never comes back; the
// engine finds and resends it), and one round of the loop is one use of
// every slot (164 us, the loss-free use of a slot at N = 2, 16 MB
// end to end). Losses make slots fall behind each other by whole uses, so
// the chunks the engine touches in a row stop being neighbours in memory:
// the figure is the CPU cost per element that this adds (e2e: the worker's
// job CPU time doubled at 1% loss).
void BM_EngineLoss(benchmark::State& st) {
  EngineConfig c;
  c.job.num_workers = 1;
  c.job.slots = 256;
  c.workers = {WorkerIdentity::defaults(1, 0)};
  constexpr size_t kBig = 16 * kElems;
  std::vector<float> x(kBig), y(kBig);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0, 1);
  for (float& v : x) v = nd(rng);
  Loopback io(c.job.slots, agq_frame_len(32));
  AllreduceEngine e;
  std::string err;
  if (!e.init(c, io, err)) {
    st.SkipWithError(err.c_str());
    return;
  }
  const uint32_t drop = uint32_t(double(st.range(0)) / 1000.0 * 4294967296.0);
  uint64_t now = 1'000'000'000;
  const uint8_t result = uint8_t(proto::kAgqVersion << 4 | uint8_t(proto::AgqType::Result));
  std::vector<uint32_t> q;
  for (auto _ : st) {
    bool done = false;
    e.submit(make_op(7, x, y, [&](AllreduceOp&) { done = true; }));
    while (!done) {
      now += 164'000;
      q.swap(io.q_);
      for (uint32_t b : q) {
        if (uint32_t(rng()) < drop) continue;
        uint8_t* h = io.frame(b) + kAgqHdrOffset;
        h[0] = result;
        h[13] = h[12];  // granted = requested
        h[15] = uint8_t(agqc::guard_bits(1));
        e.on_frame({io.frame(b), io.len_}, now);
      }
      q.clear();
      e.tick(now);
    }
  }
  ns_per_elem(st, kBig);
  st.counters["retransmissions"] = double(e.counters().retransmissions) / double(st.iterations());
  st.counters["lag_at_half"] = double(e.stats().lag_at_half);
}

// Making a synthetic tensor (--source normal), the start-up of a worker that
// checks every RESULT: arg 0 = at() per element (the classic workers and
// verifiers), 1 = fill() (the agq workers' tensors, four lanes of libmvec
// log and cos). The reference, BM_ScalarBoxMuller, is the per-element
// formula the source used before (splitmix counter, libm log, sqrt and
// cos; without the virtual call it also paid), in the same run.
void source_bench(benchmark::State& st, const char* spec) {
  std::string err;
  const auto src = make_source(spec, 7, 0, kElems, err);
  std::vector<float> out(kElems);
  for (auto _ : st) {
    if (st.range(0) == 0)
      for (size_t i = 0; i < kElems; ++i) out[i] = src->at(i);
    else
      src->fill(0, kElems, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  ns_per_elem(st, kElems);
}
void BM_NormalSource(benchmark::State& st) { source_bench(st, "normal"); }
// The same for --source laplace (four lanes of libmvec log since session
// IX), beside its old per-element formula, BM_ScalarLaplace.
void BM_LaplaceSource(benchmark::State& st) { source_bench(st, "laplace"); }

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

void BM_ScalarBoxMuller(benchmark::State& st) {
  std::vector<float> out(kElems);
  const uint64_t key = splitmix(7);
  for (auto _ : st) {
    for (size_t i = 0; i < kElems; ++i) {
      const double u0 = (double(splitmix(key ^ splitmix(i * 4)) >> 11) + 0.5) * 0x1.0p-53;
      const double u1 = (double(splitmix(key ^ splitmix(i * 4 + 1)) >> 11) + 0.5) * 0x1.0p-53;
      out[i] = float(std::sqrt(-2.0 * std::log(u0)) * std::cos(2.0 * M_PI * u1));
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  ns_per_elem(st, kElems);
}

void BM_ScalarLaplace(benchmark::State& st) {
  std::vector<float> out(kElems);
  const uint64_t key = splitmix(7);
  for (auto _ : st) {
    for (size_t i = 0; i < kElems; ++i) {
      const double u = (double(splitmix(key ^ splitmix(i * 4)) >> 11) + 0.5) * 0x1.0p-53 - 0.5;
      out[i] = float(-1.0 * std::copysign(1.0, u) * std::log(1.0 - 2.0 * std::fabs(u)));
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  ns_per_elem(st, kElems);
}

}  // namespace

BENCHMARK(BM_Encode)->Arg(2)->Arg(8)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Decode)->Args({2, 0})->Args({2, 4})->Args({8, 0})->Args({8, 4})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Verify)->Arg(2)->Arg(4)->Arg(8)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Engine)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EngineLoss)->Arg(0)->Arg(40)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_NormalSource)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ScalarBoxMuller)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LaplaceSource)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ScalarLaplace)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
