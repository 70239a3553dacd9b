// The classic pipeline's constant tables (reference §4) and their formulas,
// checked exhaustively over all 256 bitmaps x 8 positions against an
// independent formulation written here (nibble loops, no 64-bit tricks).
#include <gtest/gtest.h>

#include <array>
#include <string>

#include "pipeline/classic/tables.hpp"

using namespace agq::pipeline::classic;

namespace {

// Independent formulas: the window as a union of nibble masks, TOP bit by
// bit, the next start by scanning the bitmap from its MSB side.
uint32_t ref_window(unsigned p, unsigned q) {
  uint32_t m = 0;
  for (unsigned n = p; n < q; ++n) m |= 0xFu << (28 - 4 * n);
  return m;
}
uint32_t ref_top(unsigned L) {
  uint32_t m = 0;
  for (unsigned b = 0; b < L; ++b) m |= 1u << (31 - b);
  return m;
}
bool ref_has(unsigned B, unsigned p) { return (B >> (7 - p)) & 1; }
unsigned ref_next(unsigned B, unsigned p) {
  unsigned q = p + 1;
  while (q < 8 && !ref_has(B, q)) ++q;
  return q;
}

}  // namespace

TEST(ClassicFormulas, WindowTopNextStartAgainstIndependentFormulas) {
  for (unsigned p = 0; p < 8; ++p)
    for (unsigned q = p + 1; q <= 8; ++q) EXPECT_EQ(W(p, q), ref_window(p, q)) << p << "," << q;
  for (unsigned L = 0; L <= 32; L += 4) EXPECT_EQ(TOP(L), ref_top(L)) << L;
  for (unsigned B = 0; B < 256; ++B)
    for (unsigned p = 0; p < 8; ++p) {
      EXPECT_EQ(next_start(uint8_t(B), p), ref_next(B, p));
      EXPECT_EQ(has_start(uint8_t(B), p), ref_has(B, p));
    }
  EXPECT_EQ(W(0, 8), 0xFFFFFFFFu);
  EXPECT_EQ(W(7, 8), 0x0000000Fu);
  EXPECT_EQ(W(0, 1), 0xF0000000u);
  EXPECT_EQ(TOP(0), 0u);
  EXPECT_EQ(TOP(32), 0xFFFFFFFFu);
}

TEST(ClassicTables, EntryCounts) {
  const ConstTables& t = const_tables();
  EXPECT_EQ(t.split_t.size(), 2048u);
  EXPECT_EQ(t.get_length_t.size(), 1024u);
  EXPECT_EQ(t.ack_t.size(), 1024u);
  EXPECT_EQ(t.posi_2_bitmap_t0.size(), 8u);
  EXPECT_EQ(t.posi_2_bitmap_t1.size(), 8u);
  EXPECT_EQ(t.align_t.size(), 7u);
  EXPECT_EQ(t.data_extract_t.size(), 7u);
}

TEST(ClassicTables, SplitTExhaustive) {
  const auto& split_t = const_tables().split_t;
  for (unsigned B = 0; B < 256; ++B)
    for (unsigned p = 0; p < 8; ++p) {
      const SplitInfo& e = split_t.apply(B * 8 + p);
      ASSERT_TRUE(split_t.hit(B * 8 + p));
      if (ref_has(B, p)) {
        EXPECT_EQ(e, (SplitInfo{0, 0xFFFFFFFFu, 0, 0})) << B << "," << p;
      } else {
        const unsigned q = ref_next(B, p), L = 4 * (q - p);
        EXPECT_EQ(e, (SplitInfo{uint8_t(L), ~ref_window(p, q), ref_window(p, q), ref_top(L)}))
            << B << "," << p;
      }
    }
}

TEST(ClassicTables, GetLengthTExhaustive) {
  const auto& t = const_tables().get_length_t;
  for (unsigned B = 0; B < 256; ++B)
    for (unsigned p = 0; p < 8; ++p) {
      const std::size_t key = B * 8 + p;
      ASSERT_EQ(t.hit(key), ref_has(B, p)) << B << "," << p;
      const LengthInfo& e = t.apply(key);
      if (!ref_has(B, p)) {
        EXPECT_EQ(e, LengthInfo{}) << "miss must leave L and masks at 0";
        continue;
      }
      const unsigned q = ref_next(B, p), L = 4 * (q - p);
      EXPECT_EQ(e, (LengthInfo{uint8_t(L), ref_window(p, q), ref_top(L)})) << B << "," << p;
    }
}

TEST(ClassicTables, AckTExhaustive) {
  const auto& t = const_tables().ack_t;
  for (unsigned B = 0; B < 256; ++B)
    for (unsigned p = 0; p < 8; ++p) {
      const std::size_t key = B * 8 + p;
      ASSERT_EQ(t.hit(key), ref_has(B, p)) << B << "," << p;
      const AckInfo& e = t.apply(key);
      if (!ref_has(B, p)) {
        // The miss that wipes the aggregator (quirk §5.1): mask_clear stays 0.
        EXPECT_EQ(e, AckInfo{});
        continue;
      }
      const unsigned q = ref_next(B, p), L = 4 * (q - p);
      EXPECT_EQ(e, (AckInfo{uint8_t(L), ~ref_window(p, q), ref_top(L)})) << B << "," << p;
    }
}

TEST(ClassicTables, PublishedWorkedExamples) {
  const ConstTables& t = const_tables();
  EXPECT_EQ(t.split_t.apply(bitmap_position_key(0b00000000, 1)),
            (SplitInfo{28, 0xF0000000u, 0x0FFFFFFFu, 0xFFFFFFF0u}));
  EXPECT_EQ(t.get_length_t.apply(bitmap_position_key(0b00000011, 6)),
            (LengthInfo{4, 0x000000F0u, 0xF0000000u}));
}

TEST(ClassicTables, Posi2BitmapBothCopies) {
  const ConstTables& t = const_tables();
  for (unsigned p = 0; p < 8; ++p) {
    EXPECT_EQ(t.posi_2_bitmap_t0.apply(p).insert_bitmap, 0x80u >> p);
    EXPECT_EQ(t.posi_2_bitmap_t1.apply(p).insert_bitmap, 0x80u >> p);
  }
}

TEST(ClassicTables, ShiftTablesOneConstantPerAction) {
  const ConstTables& t = const_tables();
  EXPECT_FALSE(t.align_t.hit(0));
  EXPECT_FALSE(t.data_extract_t.hit(0));
  EXPECT_EQ(t.align_t.apply(0).run, nullptr);
  for (unsigned p = 1; p < 8; ++p) {
    ASSERT_TRUE(t.align_t.hit(p));
    ASSERT_TRUE(t.data_extract_t.hit(p));
    EXPECT_EQ(std::string(t.align_t.apply(p).name), "align_" + std::to_string(p));
    std::array<uint32_t, 4> v = {0xFFFFFFFFu, 0x12345678u, 0x80000000u, 1u};
    const auto orig = v;
    t.align_t.apply(p).run(v.data());
    for (int k = 0; k < 4; ++k) EXPECT_EQ(v[k], orig[k] >> (4 * p));
    v = orig;
    t.data_extract_t.apply(p).run(v.data());
    for (int k = 0; k < 4; ++k) EXPECT_EQ(v[k], orig[k] << (4 * p));
  }
}

TEST(ClassicTables, InaSendOrDropPortsFromConfig) {
  using K = InaForward::Kind;
  ClassicConfig two{7, {8, 9}, 35000};
  auto t = make_ina_send_or_drop(two);
  EXPECT_EQ(t.size(), 4u);
  EXPECT_EQ(t.apply(0).kind, K::SendBack);
  EXPECT_EQ(t.apply(1).kind, K::Send);
  EXPECT_EQ(t.apply(1).port, 7);
  EXPECT_EQ(t.apply(2).kind, K::Drop);
  EXPECT_EQ(t.apply(3).kind, K::Multicast);
  EXPECT_EQ(t.apply(3).mcast_grp, ClassicProgram::kWorkerGroup);
  EXPECT_EQ(t.apply(200).kind, K::Drop);  // miss
  ClassicConfig one{7, {8}, 35000};
  auto u = make_ina_send_or_drop(one);
  EXPECT_EQ(u.apply(3).kind, K::Send);  // exactly one worker port: unicast
  EXPECT_EQ(u.apply(3).port, 8);
}

// Reference §2.1: window widths as seqs arrive at one fresh aggregator
// (starts 0,3,6,1,4,7,2,5), read back through get_length_t.
TEST(ClassicTables, WindowWidthTableOfSection2_1) {
  const char* expected[8] = {
      "0:32",
      "0:12 3:20",
      "0:12 3:12 6:8",
      "0:4 1:8 3:12 6:8",
      "0:4 1:8 3:4 4:8 6:8",
      "0:4 1:8 3:4 4:8 6:4 7:4",
      "0:4 1:4 2:4 3:4 4:8 6:4 7:4",
      "0:4 1:4 2:4 3:4 4:4 5:4 6:4 7:4",
  };
  const uint8_t bitmaps[8] = {0b10000000, 0b10010000, 0b10010010, 0b11010010,
                              0b11011010, 0b11011011, 0b11111011, 0b11111111};
  const auto& t = const_tables().get_length_t;
  uint8_t B = 0;
  unsigned cursor = 0;
  for (int n = 0; n < 8; ++n) {
    B |= position_bit(cursor);
    cursor = (cursor + 3) % 8;
    EXPECT_EQ(B, bitmaps[n]) << n + 1 << " live seqs";
    std::string windows;
    for (unsigned p = 0; p < 8; ++p)
      if (t.hit(bitmap_position_key(B, p))) {
        if (!windows.empty()) windows += ' ';
        windows += std::to_string(p);
        windows += ':';
        windows += std::to_string(t.apply(bitmap_position_key(B, p)).L);
      }
    EXPECT_EQ(windows, expected[n]) << n + 1 << " live seqs";
  }
}
