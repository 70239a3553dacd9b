// Entry generation of the agq constant tables.
#include "pipeline/agq/tables.hpp"

#include <utility>

#include "proto/agq.hpp"

namespace agq::pipeline::agq {

namespace {

constexpr int kLanes = proto::kAgqLanes;

// One action per constant shift amount, as Tofino needs.
template <unsigned S>
void shr(uint32_t* lanes) {
  for (int k = 0; k < kLanes; ++k) lanes[k] >>= S;
}
template <unsigned S>
void shl(uint32_t* lanes) {
  for (int k = 0; k < kLanes; ++k) lanes[k] <<= S;
}
template <unsigned S>
uint32_t row_shr(uint32_t slot) {
  return slot >> S;
}

template <unsigned... D>
void fill_unit_shifts(ConstTables& t, std::integer_sequence<unsigned, D...>) {
  // D = 1..7 units; a shift by 0 (d = 0, end = 8) is the NoAction default.
  static constexpr const char* kTrunc[] = {"", "trunc_4", "trunc_8", "trunc_12", "trunc_16",
                                           "trunc_20", "trunc_24", "trunc_28"};
  static constexpr const char* kAlign[] = {"", "align_4", "align_8", "align_12", "align_16",
                                           "align_20", "align_24", "align_28"};
  static constexpr const char* kExtract[] = {"", "extract_4", "extract_8", "extract_12", "extract_16",
                                             "extract_20", "extract_24", "extract_28"};
  // trunc_t: d = R/4 - w units (a worker asking less than W: no shift).
  for (unsigned r = 2; r <= kUnits; ++r)
    for (unsigned w = 0; w < r; ++w)
      ((r - w == D ? t.trunc_t.set(trunc_key(r, w), ShiftAction{kTrunc[D], &shr<4 * D>, 4 * D}) : void()), ...);
  // key = end = 8 - D units
  (t.align_t.set(kUnits - D, ShiftAction{kAlign[D], &shl<4 * D>, 4 * D}), ...);
  (t.extract_t.set(kUnits - D, ShiftAction{kExtract[D], &shr<4 * D>, 4 * D}), ...);
}

template <unsigned... S>
void fill_row_shifts(ConstTables& t, std::integer_sequence<unsigned, S...>) {
  static constexpr const char* kNames[] = {"row_shift_0",  "row_shift_1",  "row_shift_2",  "row_shift_3",
                                           "row_shift_4",  "row_shift_5",  "row_shift_6",  "row_shift_7",
                                           "row_shift_8",  "row_shift_9",  "row_shift_10", "row_shift_11",
                                           "row_shift_12", "row_shift_13", "row_shift_14", "row_shift_15",
                                           "row_shift_16"};
  (t.slot_row_t.set(S, RowShiftAction{kNames[S], &row_shr<S>, S}), ...);
}

void fill_forward(ConstTables& t) {
  using K = ForwardAction::Kind;
  using proto::AgqType;
  for (ResultDelivery d : {ResultDelivery::Multicast, ResultDelivery::Ps}) {
    const bool ps = d == ResultDelivery::Ps;
    t.agq_forward_t.set(forward_key(Verdict::Drop, d), ForwardAction{"drop_invalid", K::Drop});
    t.agq_forward_t.set(forward_key(Verdict::Absorb, d), ForwardAction{"drop_absorbed", K::Drop});
    t.agq_forward_t.set(forward_key(Verdict::Duplicate, d), ForwardAction{"drop_duplicate", K::Drop});
    t.agq_forward_t.set(forward_key(Verdict::Result, d),
                        ps ? ForwardAction{"result_to_ps", K::UnicastPs, AgqType::Result, 0}
                           : ForwardAction{"result_multicast", K::MulticastJob, AgqType::Result, 0});
    t.agq_forward_t.set(forward_key(Verdict::Resend, d),
                        ForwardAction{"result_resend", K::SendBack, AgqType::Result,
                                      proto::kAgqFlagRetransmit});
    t.agq_forward_t.set(forward_key(Verdict::FallbackData, d),
                        ForwardAction{"fallback_to_ps", K::UnicastPs, AgqType::FallbackData, 0});
    t.agq_forward_t.set(forward_key(Verdict::PsResult, d),
                        ForwardAction{"ps_result_multicast", K::MulticastJob, AgqType::Result,
                                      proto::kAgqFlagFallback});
    t.agq_forward_t.set(forward_key(Verdict::PsResultUnicast, d),
                        ForwardAction{"ps_result_unicast", K::UnicastWorker, AgqType::Result,
                                      proto::kAgqFlagFallback});
  }
}

ConstTables build() {
  ConstTables t;
  for (unsigned occ = 0; occ < 256; ++occ)
    for (unsigned req = 1; req <= kUnits; ++req)
      t.alloc_t.set(alloc_key(uint8_t(occ), req), alloc_entry(uint8_t(occ), req));
  for (unsigned pos = 0; pos < kUnits; ++pos)
    for (unsigned w = 1; pos + w <= kUnits; ++w)
      t.window_t.set(window_key(pos, w), WindowAction{window_cell_mask(pos, w), window_occ_mask(pos, w)});
  for (unsigned w = 0; w <= kUnits; ++w)
    for (unsigned g = 0; g <= guard_bits(kMaxWorkers); ++g) {
      const bool ok = kUnitBits * w >= g + 2;
      const GrantAction e = ok ? GrantAction{true, low_mask(kUnitBits * w - g), low_mask(kUnitBits * w)}
                               : GrantAction{};
      t.grant_t.set(grant_key(w, g), e);
    }
  for (unsigned w = 0; w <= kUnits; ++w)
    for (unsigned m = 1; m <= kUnits; ++m)
      t.grant_alloc_t.set(grant_alloc_key(w, m), GrantAllocAction{grant_alloc_ok(w, m)});
  fill_unit_shifts(t, std::integer_sequence<unsigned, 1, 2, 3, 4, 5, 6, 7>{});
  fill_row_shifts(t, std::make_integer_sequence<unsigned, kMaxRowShift + 1>{});
  fill_forward(t);
  return t;
}

}  // namespace

AllocAction alloc_entry(uint8_t occ, unsigned req_units) {
  // Walk the maximal runs of free units (bit 7 - u clear = unit u free).
  unsigned fit_pos = 0, fit_len = 0;      // smallest run with len >= req
  unsigned wide_pos = 0, wide_len = 0;    // widest run
  for (unsigned u = 0; u < kUnits;) {
    if (occ & (0x80u >> u)) { ++u; continue; }
    unsigned len = 0;
    while (u + len < kUnits && !(occ & (0x80u >> (u + len)))) ++len;
    if (len >= req_units && (fit_len == 0 || len < fit_len)) { fit_pos = u; fit_len = len; }
    if (len > wide_len) { wide_pos = u; wide_len = len; }
    u += len;
  }
  if (fit_len != 0) return AllocAction{uint8_t(fit_pos), uint8_t(req_units), window_occ_mask(fit_pos, req_units)};
  return AllocAction{uint8_t(wide_pos), uint8_t(wide_len), window_occ_mask(wide_pos, wide_len)};
}

const ConstTables& const_tables() {
  static const ConstTables tables = build();
  return tables;
}

}  // namespace agq::pipeline::agq
