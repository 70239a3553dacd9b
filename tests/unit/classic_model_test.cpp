// ClassicProgram against the reference pseudo-code of §3.5 (faithful mode),
// written here independently as a plain per-packet function over maps, on
// random traffic that takes every path: allocation, aggregation, collision,
// ACKs with isACK 1 and 2, ACK without owner, cursor wrap onto live starts,
// carries, bad indices, VLAN tags. Also checks that the program never trips
// the TNA rule check (one access per register per pass) on any of it.
#include <gtest/gtest.h>

#include <array>
#include <map>
#include <random>

#include "classic_test_util.hpp"

using namespace agq;
using namespace agq::classic_test;

namespace {

struct RefModel {
  enum class Out { Ps, Workers, Drop };
  uint32_t capacity = 35000;
  std::map<uint32_t, uint16_t> owner;
  std::map<uint32_t, uint8_t> start, count, cursor, startmap;
  std::map<uint32_t, std::array<uint32_t, 4>> lanes;

  static uint32_t top(unsigned L) { return L ? uint32_t(0xFFFFFFFFull << (32 - L)) : 0; }
  static uint32_t win(unsigned p, unsigned q) {
    uint32_t m = 0;
    for (unsigned n = p; n < q; ++n) m |= 0xF0000000u >> (4 * n);
    return m;
  }
  static bool has(uint8_t B, unsigned p) { return B & (0x80 >> p); }
  static unsigned next(uint8_t B, unsigned p) {
    for (unsigned q = p + 1; q < 8; ++q)
      if (has(B, q)) return q;
    return 8;
  }

  Out process(AgqClassic& P) {
    const uint32_t h = P.hash_id, a = P.hash1;
    if (h >= capacity || a >= capacity) return Out::Drop;
    auto& L4 = lanes[a];
    if (P.is_ack == 0) {
      if (owner[h] == 0) {
        owner[h] = P.job_and_seq;
        const uint8_t p = cursor[a];
        cursor[a] = uint8_t((p + 3) & 7);
        start[h] = p;
        const uint8_t Bold = startmap[a];
        startmap[a] = uint8_t(Bold | (0x80 >> p));
        if (!has(Bold, p))
          for (auto& c : L4) c &= ~win(p, next(Bold, p));
      } else if (owner[h] != P.job_and_seq) {
        return Out::Drop;
      }
      const unsigned p = start[h];
      const uint8_t B = startmap[a];
      const uint8_t n = ++count[h];
      if (has(B, p)) {
        const unsigned q = next(B, p), L = 4 * (q - p);
        for (int k = 0; k < 4; ++k) {
          L4[k] += (P.data[k] & top(L)) >> (4 * p);
          P.data[k] = (L4[k] & win(p, q)) << (4 * p);
        }
      }
      return n == P.total_workers ? Out::Ps : Out::Drop;
    }
    if (owner[h] != P.job_and_seq) return Out::Drop;
    owner[h] = 0;
    const unsigned p = start[h];
    start[h] = 0;
    count[h] = 0;
    const uint8_t Bold = startmap[a];
    startmap[a] = uint8_t(Bold - (0x80 >> p));
    if (has(Bold, p)) {
      const unsigned q = next(Bold, p), L = 4 * (q - p);
      for (int k = 0; k < 4; ++k) {
        const uint32_t x = (P.data[k] & top(L)) >> (4 * p);
        if (P.is_ack == 1) { L4[k] &= ~win(p, q); P.data[k] = x; }
        else { L4[k] += x; P.data[k] = 0; }
      }
    } else {
      for (int k = 0; k < 4; ++k) {
        if (P.is_ack == 1) L4[k] = 0;
        P.data[k] = 0;
      }
    }
    return Out::Workers;
  }
};

using ClassicVsModel = ClassicFixture;

}  // namespace

TEST_F(ClassicVsModel, RandomTrafficBitExactAndWithinTnaRules) {
  RefModel model;
  std::mt19937 rng(12345);
  auto rnd = [&](uint32_t n) { return uint32_t(rng() % n); };
  const uint16_t aggs[] = {5, 6, 4000};
  std::map<uint32_t, uint16_t> live;  // hashID -> jas the traffic generator believes live
  int to_ps = 0, to_workers = 0, drops = 0;

  for (int i = 0; i < 20000; ++i) {
    const uint16_t a = aggs[rnd(3)];
    uint16_t h = uint16_t(a * 8 + rnd(8));
    uint16_t jas = live.count(h) ? live[h] : uint16_t(1 + rnd(5));
    AgqClassic P = agq_pkt(jas, h, uint8_t(1 + rnd(3)));
    if (rnd(50) == 0) P.hash1 = uint16_t(a + 1);  // inconsistent hash1: allowed, unchecked
    if (rnd(200) == 0) P.hash_id = uint16_t(35000 + rnd(30000));  // bad index
    const bool big = rnd(10) < 3;  // values near 2^32: carries spill
    for (int k = 0; k < 16; ++k) P.data[k] = big ? uint32_t(rng()) : uint32_t(rnd(1 << 20) << rnd(12));
    if (rnd(10) < 7) {
      live[h] = jas;
    } else {
      live.erase(h);
      const uint32_t r = rnd(4);
      P.is_ack = uint8_t(r == 3 ? 2 + rnd(254) : 1);
      if (rnd(10) == 0) P.job_and_seq = uint16_t(1 + rnd(5));  // maybe not the owner
    }
    const std::optional<uint16_t> vlan = rnd(5) == 0 ? std::optional<uint16_t>(7) : std::nullopt;

    AgqClassic expected = P;
    const RefModel::Out want = model.process(expected);
    Sent s;
    ASSERT_NO_THROW(s = send(P, vlan)) << "packet " << i;
    switch (want) {
      case RefModel::Out::Ps:
        ASSERT_TRUE(is_unicast(s.decision, kPsPort)) << "packet " << i;
        ++to_ps;
        break;
      case RefModel::Out::Workers:
        ASSERT_TRUE(is_worker_multicast(s.decision)) << "packet " << i;
        ++to_workers;
        break;
      case RefModel::Out::Drop:
        ASSERT_EQ(s.decision.kind, Decision::Kind::Drop) << "packet " << i;
        ++drops;
        continue;
    }
    std::vector<uint8_t> want_bytes = proto::build_agq_classic_frame(frame_spec(vlan), expected);
    ASSERT_EQ(s.out, want_bytes) << "packet " << i;
  }
  // The traffic took every branch.
  EXPECT_GT(to_ps, 100);
  EXPECT_GT(to_workers, 100);
  EXPECT_GT(drops, 100);
  EXPECT_GT(counter("collisions"), 0u);
  EXPECT_GT(counter("acks_no_owner"), 0u);
  EXPECT_GT(counter("drops_agq_bad_index"), 0u);

  // Final register state equals the model's.
  for (const auto& [h, jas] : model.owner) {
    if (h >= 35000) continue;
    const auto slot = prog.seq_slot(h);
    EXPECT_EQ(slot.job_and_seq, jas) << h;
    EXPECT_EQ(slot.start_posi, model.start[h]) << h;
    EXPECT_EQ(slot.worker_agg, model.count[h]) << h;
  }
  for (uint16_t a : {5, 6, 7, 4000, 4001}) {
    const auto agg = prog.aggregator(a);
    EXPECT_EQ(agg.insert_posi, model.cursor[a]) << a;
    EXPECT_EQ(agg.data_isEmpty, model.startmap[a]) << a;
    for (int k = 0; k < 4; ++k) EXPECT_EQ(agg.reg[k], model.lanes[a][k]) << a;
  }
}
