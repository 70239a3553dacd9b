// agq_workerlib building blocks: the classic model's arithmetic, the
// quantizer's headroom, the job's chunk/slot/jobAndSeq mapping, gradient
// sources, .npy files and frames.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "lib/agq_verifier.hpp"
#include "lib/classic_window.hpp"
#include "lib/expected_model.hpp"
#include "lib/gradient_source.hpp"
#include "lib/job.hpp"
#include "lib/npy.hpp"
#include "lib/quantizer.hpp"
#include "lib/wire.hpp"

using namespace agq::worker;

TEST(WorkerModel, PublishedWorkedExampleAtPositionZero) {
  // Reference §3.5: two identical contributions, p = 0, L = 32.
  const uint32_t v[4] = {0x0000F0C0, 0x0146F43C, 0x0015B4C9, 0x00DCEEE3};
  const uint32_t want[4] = {0x0001E180, 0x028DE878, 0x002B6992, 0x01B9DDC6};
  for (int k = 0; k < 4; ++k) {
    const uint32_t c[2] = {v[k], v[k]};
    EXPECT_EQ(solo_lane_result(c, 0), want[k]) << k;
  }
}

TEST(WorkerModel, SoloWindowTruncatesToTopBits) {
  // p = 4: window [4, 8), L = 16: each value keeps its top 16 bits.
  const uint32_t c[3] = {0x1234FFFF, 0x00010001, 0x0000F0C0};
  EXPECT_EQ(solo_lane_result(c, 4), 0x12350000u);
  EXPECT_EQ(solo_width(7), 4);
  EXPECT_EQ(next_cursor(0), 3);
  EXPECT_EQ(next_cursor(5), 0);
  EXPECT_EQ(next_cursor(7), 2);
}

TEST(WorkerModel, ExactModeLearnsAndTracksTheCursor) {
  JobSpec job;
  ExpectedModel m(job);
  const uint32_t a[2] = {0x12345678, 0x01010101};
  std::array<std::span<const uint32_t>, 4> c{a, a, a, a};
  // Unknown cursor: the result at p = 3 reveals it.
  const uint32_t r3 = solo_lane_result(a, 3);
  Check ck = m.check(7, c, {r3, r3, r3, r3});
  EXPECT_EQ(ck.verdict, Verdict::Exact);
  EXPECT_EQ(ck.p, 3);
  EXPECT_EQ(m.predicted_p(7), 6);
  // Next result must be at p = 6; p = 0 bits are a mismatch.
  const uint32_t r0 = solo_lane_result(a, 0);
  ck = m.check(7, c, {r0, r0, r0, r0});
  EXPECT_EQ(ck.verdict, Verdict::Exact);  // explained by another cursor position...
  EXPECT_TRUE(ck.resynced);              // ...but reported as a resync
  ck = m.check(7, c, {r0 + 1, r0, r0, r0});
  EXPECT_EQ(ck.verdict, Verdict::Mismatch);
}

TEST(WorkerModel, FreshSwitchStartsAtZero) {
  JobSpec job;
  ExpectedModel m(job);
  m.assume_fresh();
  EXPECT_EQ(m.predicted_p(100), 0);
  m.forget(100);
  EXPECT_FALSE(m.predicted_p(100).has_value());
}

TEST(WorkerQuantizer, HeadroomForEveryWorker) {
  for (unsigned n : {1u, 2u, 3u, 4u, 7u, 255u}) {
    Quantizer q(4.0, n);
    const uint64_t top = q.quantize(1e9f);
    EXPECT_LT(top * n, uint64_t(1) << 32) << n;
    EXPECT_EQ(q.quantize(-1e9f), 0u);
    // Round trip of a sum of n values within half a step each.
    const uint64_t s = uint64_t(q.quantize(1.25f)) * n;
    EXPECT_NEAR(q.dequantize_sum(s, n), 1.25 * n, n * 0.5 / q.scale() + 1e-9);
  }
}

TEST(WorkerJob, ChunkSlotHashIdAndJobAndSeq) {
  JobSpec job;
  job.job_id = 3;
  job.window = 10;
  job.slot_base = 100;
  job.elements = 1000;
  EXPECT_EQ(job.chunks(), 250u);
  EXPECT_EQ(job.slot_of(23), 3u);
  EXPECT_EQ(job.hash_id_of_slot(3), (103 << 3));
  EXPECT_EQ(job.slot_of_hash_id(103 << 3), 3);
  EXPECT_EQ(job.slot_of_hash_id((103 << 3) | 1), -1);  // one seq per aggregator
  EXPECT_EQ(job.job_and_seq(23), (3 << 11) | 2);
  EXPECT_NE(job.job_and_seq(3), job.job_and_seq(13));  // consecutive users of a slot differ
  EXPECT_EQ(job.validate(), "");
  job.seqs_per_agg = 4;
  EXPECT_EQ(job.hash_id_of_slot(6), ((100 + 1) << 3) | 2);
  EXPECT_EQ(job.slot_of_hash_id(((100 + 1) << 3) | 2), 6);
  job.slot_base = 4374;  // 4374 + 3 aggregators -> hashIDs beyond 35000
  EXPECT_NE(job.validate(), "");
  job.job_id = 0;
  EXPECT_NE(job.validate(), "");
}

TEST(WorkerSource, DeterministicPerWorkerAndSeed) {
  std::string err;
  auto a = make_source("normal", 7, 0, 100, err);
  auto b = make_source("normal", 7, 0, 100, err);
  auto c = make_source("normal", 7, 1, 100, err);
  ASSERT_TRUE(a && b && c) << err;
  EXPECT_EQ(a->at(42), b->at(42));
  EXPECT_NE(a->at(42), c->at(42));
  double sum = 0, sq = 0;
  for (int i = 0; i < 20000; ++i) {
    sum += a->at(i);
    sq += double(a->at(i)) * a->at(i);
  }
  EXPECT_NEAR(sum / 20000, 0.0, 0.05);
  EXPECT_NEAR(sq / 20000, 1.0, 0.05);
  auto s = make_source("sparse:0.1", 1, 0, 100, err);
  int nz = 0;
  for (int i = 0; i < 10000; ++i) nz += s->at(i) != 0.0f;
  EXPECT_NEAR(nz, 1000, 150);
  EXPECT_EQ(make_source("constant:2.5", 1, 0, 10, err)->at(3), 2.5f);
  EXPECT_TRUE(make_source("laplace:0.5", 1, 0, 10, err));
  EXPECT_FALSE(make_source("gauss", 1, 0, 10, err));
  EXPECT_NE(err.find("kind must be"), std::string::npos);
}

// fill() is the batched path (four lanes of libmvec log and cos) the agq
// workers build their tensors with; at() is what the classic workers and
// verifiers read element by element. They must agree bit for bit, at every
// offset and length (the scalar tail of a batch, a batch that starts at an
// odd element), and fill() of a source without a batched path is at().
TEST(WorkerSource, FillEqualsAtBitForBit) {
  std::string err;
  for (const char* spec : {"normal", "normal:0.01", "laplace", "sparse:0.3", "constant:2"}) {
    auto s = make_source(spec, 11, 3, 1000, err);
    ASSERT_TRUE(s) << err;
    for (uint64_t first : {0u, 1u, 7u, 1000u}) {
      for (size_t n : {0u, 1u, 3u, 4u, 5u, 257u}) {
        std::vector<float> got(n + 1, -7.0f);
        s->fill(first, n, got.data());
        for (size_t k = 0; k < n; ++k) {
          const float want = s->at(first + k);
          ASSERT_EQ(std::memcmp(&got[k], &want, sizeof want), 0)
              << spec << " element " << first + k << ": fill " << got[k] << ", at " << want;
        }
        EXPECT_EQ(got[n], -7.0f) << spec << ": fill wrote past n = " << n;
      }
    }
  }
}

// Every worker's rounds, as the sources make them; and a job too large for
// the machine refused before any memory is touched, saying what to change.
TEST(WorkerGradients, BuildsEveryRoundOrRefusesWhatDoesNotFit) {
  AgqJobSpec job;
  job.num_workers = 3;
  job.rounds = 4;
  job.elements = 1001;
  std::string err;
  AgqGradients g;
  ASSERT_TRUE(g.init(job, "normal", 5, {}, err)) << err;
  for (unsigned w = 0; w < 3; ++w)
    for (uint32_t r = 0; r < 4; ++r) {
      auto s = make_source("normal", round_seed(5, r), w, job.elements, err);
      ASSERT_TRUE(s) << err;
      const auto t = g.tensor(w, r);
      ASSERT_EQ(t.size(), job.elements);
      for (uint64_t i : {uint64_t(0), uint64_t(517), job.elements - 1}) EXPECT_EQ(t[i], s->at(i)) << w << " " << r;
    }
  job.rounds = 1u << 20;
  job.elements = uint64_t(1) << 30;  // 3 workers x 2^20 rounds x 4 GiB
  AgqGradients big;
  err.clear();
  EXPECT_FALSE(big.init(job, "normal", 5, {}, err));
  EXPECT_NE(err.find("MiB this machine has available"), std::string::npos) << err;
  EXPECT_NE(err.find("--verify off"), std::string::npos) << err;  // all workers' tensors: verification's
  err.clear();
  EXPECT_FALSE(big.init(job, "normal", 5, {1}, err));
  EXPECT_EQ(err.find("--verify off"), std::string::npos) << err;  // only its own: nothing to gain there
}

TEST(WorkerSource, NpyFileRoundTripWithIdPattern) {
  const auto dir = std::filesystem::temp_directory_path() / ("agq_npy_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::vector<float> v{1.5f, -2.0f, 0.25f, 3.0f, 4.0f};
  std::string err;
  ASSERT_TRUE(save_float32_npy((dir / "g1.npy").string(), v, err)) << err;
  auto s = make_source("file:" + (dir / "g{id}.npy").string(), 0, 1, 5, err);
  ASSERT_TRUE(s) << err;
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(s->at(i), v[i]);
  EXPECT_FALSE(make_source("file:" + (dir / "g{id}.npy").string(), 0, 1, 6, err));  // too short
  EXPECT_NE(err.find("needs 6"), std::string::npos) << err;
  std::filesystem::remove_all(dir);
}

TEST(WorkerWire, ContributionFrameParsesBack) {
  const auto ep = worker_endpoint(2, 5);
  const FrameTemplate t = classic_frame_template(ep, ps_endpoint(2));
  uint8_t buf[kAgqFrameLen];
  t.write(make_agq(0x1003, 5, 4, 300, 0, 77, Kind::Contribution, {1, 2, 3, 4}), buf);
  const RxPacket r = classify(buf);
  ASSERT_EQ(r.type, RxPacket::Type::Agq);
  EXPECT_TRUE(r.ours);
  EXPECT_EQ(r.chunk, 77u);
  EXPECT_EQ(r.agq.hash1, 37);
  EXPECT_EQ(r.agq.hash2, 4);
  EXPECT_EQ(r.agq.data[3], 4u);
  const auto done = build_done_frame(ps_endpoint(2), 2, 12345);
  const RxPacket d = classify(done);
  ASSERT_EQ(d.type, RxPacket::Type::Done);
  EXPECT_EQ(d.done_job, 2);
  EXPECT_EQ(d.done_chunks, 12345u);
}
