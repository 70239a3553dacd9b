#include "pipeline/classic/tables.hpp"

#include <utility>

#include "proto/headers.hpp"

namespace agq::pipeline::classic {

namespace {

constexpr int kLanes = proto::kAgqClassicAggLanes;

// One action per constant shift amount (4p bits, p = 1..7), as on Tofino.
template <unsigned P>
void align_shr(uint32_t* lanes) {
  for (int k = 0; k < kLanes; ++k) lanes[k] >>= 4 * P;
}
template <unsigned P>
void extract_shl(uint32_t* lanes) {
  for (int k = 0; k < kLanes; ++k) lanes[k] <<= 4 * P;
}

template <unsigned... P>
void fill_shift_tables(ConstTables& t, std::integer_sequence<unsigned, P...>) {
  static constexpr const char* kAlignNames[] = {"", "align_1", "align_2", "align_3", "align_4",
                                               "align_5", "align_6", "align_7"};
  static constexpr const char* kExtractNames[] = {"", "extract_1", "extract_2", "extract_3",
                                                 "extract_4", "extract_5", "extract_6", "extract_7"};
  // P = 1..7; position 0 has no entry (a shift by 0 is the NoAction default).
  (t.align_t.set(P, ShiftAction{kAlignNames[P], &align_shr<P>}), ...);
  (t.data_extract_t.set(P, ShiftAction{kExtractNames[P], &extract_shl<P>}), ...);
}

ConstTables build() {
  ConstTables t;
  for (unsigned B = 0; B < 256; ++B) {
    for (unsigned p = 0; p < 8; ++p) {
      const std::size_t key = bitmap_position_key(uint8_t(B), p);
      // split_t has all 256 x 8 keys; the other two only keys where p is a start.
      t.split_t.set(key, split_entry(uint8_t(B), p));
      if (has_start(uint8_t(B), p)) {
        t.get_length_t.set(key, get_length_entry(uint8_t(B), p));
        t.ack_t.set(key, ack_entry(uint8_t(B), p));
      }
    }
  }
  for (unsigned p = 0; p < 8; ++p) {
    t.posi_2_bitmap_t0.set(p, InsertBitmap{position_bit(p)});
    t.posi_2_bitmap_t1.set(p, InsertBitmap{position_bit(p)});
  }
  fill_shift_tables(t, std::integer_sequence<unsigned, 1, 2, 3, 4, 5, 6, 7>{});
  return t;
}

}  // namespace

SplitInfo split_entry(uint8_t B_old, unsigned p) {
  // p already a start: no window to open (L = 0, clear nothing). This is the
  // entry behind quirk §5.1 (cursor landing on a live start).
  if (has_start(B_old, p)) return SplitInfo{0, 0xFFFFFFFFu, 0, 0};
  const unsigned q = next_start(B_old, p);
  const unsigned L = 4 * (q - p);
  return SplitInfo{uint8_t(L), ~W(p, q), W(p, q), TOP(L)};
}

LengthInfo get_length_entry(uint8_t B, unsigned p) {
  const unsigned q = next_start(B, p);
  const unsigned L = 4 * (q - p);
  return LengthInfo{uint8_t(L), W(p, q), TOP(L)};
}

AckInfo ack_entry(uint8_t B_old, unsigned p) {
  const unsigned q = next_start(B_old, p);
  const unsigned L = 4 * (q - p);
  return AckInfo{uint8_t(L), ~W(p, q), TOP(L)};
}

const ConstTables& const_tables() {
  static const ConstTables tables = build();
  return tables;
}

tna::ConstTable<InaForward> make_ina_send_or_drop(const ClassicConfig& cfg) {
  using K = InaForward::Kind;
  tna::ConstTable<InaForward> t("ina_send_or_drop", 256, InaForward{K::Drop});
  t.set(0, InaForward{K::SendBack});
  t.set(1, InaForward{K::Send, cfg.ps_port});
  t.set(2, InaForward{K::Drop});
  if (cfg.worker_ports.size() == 1)
    t.set(3, InaForward{K::Send, cfg.worker_ports.front()});
  else
    t.set(3, InaForward{K::Multicast, tna::kNoPort, ClassicProgram::kWorkerGroup});
  return t;
}

}  // namespace agq::pipeline::classic
