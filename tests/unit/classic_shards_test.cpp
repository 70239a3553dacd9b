// The classic pipeline on L lcores (docs/PROTOCOL.md section 10): a classic
// aggregation packet's shard is its aggregator (hash1 & 0xFFF) and lcore
// shard mod L owns it, as a Tofino pipe owns its registers. For hosts that
// keep the published invariant hashID == hash1 << 3 | hash2, L instances fed
// their own shards' packets must together behave exactly like one instance
// fed everything: every decision, every output byte, every register cell
// (held by its owner, untouched elsewhere) and every counter summed.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "pipeline/classic/classic_program.hpp"
#include "pipeline/parser.hpp"
#include "proto/frame.hpp"
#include "tna/pre.hpp"

using namespace agq;
using agq::pipeline::ForwardingConfig;
using agq::pipeline::classic::ClassicConfig;
using agq::pipeline::classic::ClassicProgram;

namespace {

using Frame = std::vector<uint8_t>;

// Classic data and ACKs over a few hot seq slots spread over the whole
// register space (so hash1 crosses 4096 and shards wrap), with collisions,
// completions, odd isACK values and indices past the registers.
struct TraceGen {
  explicit TraceGen(uint64_t seed, uint32_t capacity) : rng(seed) {
    for (int i = 0; i < 48; ++i) hot.push_back(uint16_t(below(capacity)));
    hot.push_back(uint16_t(capacity + 3));  // past the registers: dropped
    hot.push_back(uint16_t(8 * 4096 + 5));  // hash1 4096: shard 0 again
    hot.push_back(uint16_t(8 * 4097 + 1));  // hash1 4097: shard 1
  }
  uint64_t below(uint64_t n) { return rng() % n; }
  bool chance(unsigned pct) { return below(100) < pct; }
  Frame classic() {
    proto::AgqClassic a;
    static const uint16_t kJas[] = {1, 2, 3, 0x801, 0x802};
    a.job_and_seq = chance(95) ? kJas[below(5)] : uint16_t(below(65536));
    a.worker_id = uint8_t(below(4));
    a.total_workers = chance(95) ? uint8_t(1 + below(3)) : uint8_t(below(256));
    for (auto& d : a.data) d = uint32_t(rng() >> (chance(70) ? 40 : 32));
    a.is_ack = chance(75) ? 0 : chance(85) ? 1 : uint8_t(below(256));
    a.hash_id = hot[below(hot.size())];
    a.hash1 = uint16_t(a.hash_id >> 3);  // the published invariant
    a.hash2 = uint8_t(a.hash_id & 7);
    proto::UdpFrameSpec s;
    s.dst_mac = {0x02, 0, 0, 0, 0, 0xFE};
    s.src_mac = {0x02, 0, 0, 0, 0, uint8_t(a.worker_id)};
    s.src_ip = 0x0A000001u + a.worker_id;
    s.dst_ip = 0x0A0000FEu;
    s.src_port = proto::shard_port(proto::classic_shard(a.hash1));
    s.dst_port = chance(50) ? proto::kAgqClassicPortA : proto::kAgqClassicPortB;
    Frame f = proto::build_agq_classic_frame(s, a);
    if (chance(2)) f.resize(below(f.size()));  // truncated: a parser error, no shard
    return f;
  }
  std::mt19937_64 rng;
  std::vector<uint16_t> hot;
};

std::map<std::string, uint64_t> counters(const tna::Program& p) {
  std::map<std::string, uint64_t> v;
  p.visit_counters([&](std::string_view n, uint64_t x) { v[std::string(n)] += x; });
  return v;
}

bool same(const tna::Decision& a, const tna::Decision& b) {
  return a.kind == b.kind && a.port == b.port && a.group == b.group && a.exclude_port == b.exclude_port &&
         a.drop_reason == b.drop_reason;
}

void run(unsigned lcores, uint64_t seed) {
  const ClassicConfig cfg{1, {2, 3}, 35000};
  tna::ReplicationEngine pre_one;
  ClassicProgram one(cfg, ForwardingConfig{}, pre_one);
  std::vector<std::unique_ptr<tna::ReplicationEngine>> pres;
  std::vector<std::unique_ptr<ClassicProgram>> pipes;
  for (unsigned k = 0; k < lcores; ++k) {
    pres.push_back(std::make_unique<tna::ReplicationEngine>());
    pipes.push_back(std::make_unique<ClassicProgram>(cfg, ForwardingConfig{}, *pres.back()));
    pipes.back()->own_shards(k, lcores);
  }
  TraceGen gen(seed, cfg.register_capacity);
  uint64_t now = 1000, per_lcore_bursts = 0, handoffs = 0;
  for (int burst = 0; burst < 400; ++burst) {
    const unsigned n = unsigned(1 + gen.below(32));
    std::vector<Frame> a(n), b(n);
    std::vector<tna::IngressIntrinsicMd> md(n);
    for (unsigned i = 0; i < n; ++i) {
      a[i] = b[i] = gen.classic();
      md[i].ingress_port = tna::PortId(gen.below(4));
      md[i].ingress_mac_tstamp_ns = now++;
    }
    std::vector<tna::BurstPacket> all(n);
    for (unsigned i = 0; i < n; ++i) all[i] = {a[i].data(), uint16_t(a[i].size()), md[i], {}};
    one.process_burst(all.data(), n);
    // Steered: each lcore's vector holds its shards' packets in arrival
    // order; a packet without a shard (malformed) goes to any lcore.
    std::vector<std::vector<tna::BurstPacket>> vec(lcores);
    std::vector<std::vector<unsigned>> index(lcores);
    for (unsigned i = 0; i < n; ++i) {
      const uint32_t shard = pipes[0]->shard_of(b[i]);
      const unsigned k = shard == tna::kAnyShard ? unsigned(gen.below(lcores)) : shard % lcores;
      vec[k].push_back({b[i].data(), uint16_t(b[i].size()), md[i], {}});
      index[k].push_back(i);
    }
    // A stray (a packet on another lcore's queue): every non-owner gets
    // each packet with a shard first and must hand it back --
    // Decision::handoff(its shard), bytes and counters untouched; the
    // owners' results below, cell for cell, show no register was either.
    // Even bursts: the strays as a vector of their own, before the owners
    // run. Odd bursts: mixed into each lcore's own vector in arrival order
    // (a mis-steered queue), so a vector holds both.
    const bool mixed = burst % 2 == 1;
    for (unsigned k = 0; k < lcores && lcores > 1 && !mixed; ++k) {
      std::vector<Frame> copies;
      std::vector<tna::BurstPacket> stray;
      std::vector<unsigned> at;
      copies.reserve(n);
      for (unsigned i = 0; i < n; ++i) {
        const uint32_t shard = pipes[0]->shard_of(b[i]);
        if (shard == tna::kAnyShard || shard % lcores == k) continue;
        copies.push_back(b[i]);
        stray.push_back({copies.back().data(), uint16_t(copies.back().size()), md[i], {}});
        at.push_back(i);
      }
      if (stray.empty()) continue;
      const auto before = counters(*pipes[k]);
      pipes[k]->process_burst(stray.data(), unsigned(stray.size()));
      for (size_t j = 0; j < stray.size(); ++j) {
        ASSERT_EQ(stray[j].decision.kind, tna::Decision::Kind::Handoff) << "L " << lcores << " burst " << burst;
        ASSERT_EQ(stray[j].decision.shard, pipes[0]->shard_of(b[at[j]]));
        ASSERT_EQ(copies[j], b[at[j]]) << "a handed-off frame was written";
        ++handoffs;
      }
      ASSERT_EQ(before, counters(*pipes[k])) << "a hand-off counted on lcore " << k;
    }
    for (unsigned k = 0; k < lcores; ++k) {
      if (vec[k].empty()) continue;
      ++per_lcore_bursts;
      if (mixed && lcores > 1) {
        // This lcore's packets and every other lcore's (copies) in arrival
        // order; the strays must come back as hand-offs, unwritten.
        std::vector<Frame> copies;
        copies.reserve(n);
        std::vector<tna::BurstPacket> v;
        std::vector<int> from;  // index into vec[k], or -1 - i for a stray of packet i
        size_t j = 0;
        for (unsigned i = 0; i < n; ++i) {
          if (j < index[k].size() && index[k][j] == i) {
            v.push_back(vec[k][j]);
            from.push_back(int(j++));
          } else if (pipes[0]->shard_of(b[i]) != tna::kAnyShard) {
            copies.push_back(b[i]);
            v.push_back({copies.back().data(), uint16_t(copies.back().size()), md[i], {}});
            from.push_back(-1 - int(i));
          }
        }
        pipes[k]->process_burst(v.data(), unsigned(v.size()));
        size_t c = 0;
        for (size_t x = 0; x < v.size(); ++x) {
          if (from[x] >= 0) {
            vec[k][size_t(from[x])].decision = v[x].decision;
            continue;
          }
          const unsigned i = unsigned(-1 - from[x]);
          ASSERT_EQ(v[x].decision.kind, tna::Decision::Kind::Handoff) << "L " << lcores << " burst " << burst;
          ASSERT_EQ(v[x].decision.shard, pipes[0]->shard_of(b[i]));
          ASSERT_EQ(copies[c++], b[i]) << "a handed-off frame was written";
          ++handoffs;
        }
      } else {
        pipes[k]->process_burst(vec[k].data(), unsigned(vec[k].size()));
      }
      for (size_t j = 0; j < vec[k].size(); ++j) {
        const unsigned i = index[k][j];
        ASSERT_TRUE(same(vec[k][j].decision, all[i].decision))
            << "L " << lcores << " seed " << seed << " burst " << burst << " packet " << i;
        ASSERT_EQ(b[i], a[i]) << "L " << lcores << " seed " << seed << " burst " << burst << " packet " << i;
      }
    }
  }
  tna::ReplicationEngine pre_fresh;
  const ClassicProgram fresh(cfg, ForwardingConfig{}, pre_fresh);
  unsigned nonzero = 0;
  for (uint32_t g = 0; g < one.aggregator_count(); ++g) {
    const unsigned owner = one.aggregator_shard(g) % lcores;
    const auto want = one.dump_aggregator(g);
    ASSERT_EQ(pipes[owner]->dump_aggregator(g), want) << "L " << lcores << " seed " << seed << " aggregator " << g;
    for (unsigned k = 0; k < lcores; ++k) {
      if (k == owner) continue;
      ASSERT_EQ(pipes[k]->dump_aggregator(g), fresh.dump_aggregator(g))
          << "aggregator " << g << " written outside its owner (lcore " << k << ")";
    }
    nonzero += want != fresh.dump_aggregator(g);
  }
  std::map<std::string, uint64_t> sum;
  for (const auto& p : pipes)
    for (const auto& [name, v] : counters(*p)) sum[name] += v;
  const auto want = counters(one);
  EXPECT_EQ(sum, want) << "L " << lcores << " seed " << seed;
  // The trace reached the interesting states.
  EXPECT_GT(nonzero, 20u);
  EXPECT_GT(want.at("completions"), 0u);
  EXPECT_GT(want.at("acks_released"), 0u);
  EXPECT_GT(want.at("collisions"), 0u);
  EXPECT_GT(want.at("parser_errors"), 0u);
  EXPECT_GT(per_lcore_bursts, 400u);
  if (lcores > 1) {
    EXPECT_GT(handoffs, 0u);
  }
}

}  // namespace

TEST(ClassicShard, LcoresTogetherEqualOneLcore) {
  for (unsigned lcores : {2u, 3u, 4u})
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      run(lcores, seed * 10 + lcores);
      if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(ClassicShard, AShardIsTheAggregatorsLow12Bits) {
  for (uint32_t h1 : {0u, 1u, 37u, 4095u, 4096u, 4097u, 8191u}) {
    EXPECT_EQ(proto::classic_shard(uint16_t(h1)), h1 & 0xFFFu);
    EXPECT_EQ(proto::shard_port(proto::classic_shard(uint16_t(h1))), 0xC000u | (h1 & 0xFFFu));
  }
}
