#include "pipeline/agq_fast/fast_tables.hpp"

namespace agq::pipeline::agq::fast {

namespace {

template <typename Arr, typename Table>
void copy_table(Arr& out, const Table& t) {
  for (std::size_t k = 0; k < out.size(); ++k) out[k] = t.apply(k);
}
template <typename Arr, typename Table>
void copy_shifts(Arr& out, const Table& t) {
  for (std::size_t k = 0; k < out.size(); ++k) out[k] = t.apply(k).bits;
}

FastTables build() {
  const ConstTables& c = const_tables();
  FastTables t{};
  copy_table(t.alloc_t, c.alloc_t);
  copy_table(t.window_t, c.window_t);
  copy_table(t.grant_t, c.grant_t);
  copy_table(t.grant_alloc_t, c.grant_alloc_t);
  copy_shifts(t.trunc_t, c.trunc_t);
  copy_shifts(t.align_t, c.align_t);
  copy_shifts(t.extract_t, c.extract_t);
  copy_table(t.agq_forward_t, c.agq_forward_t);
  return t;
}

}  // namespace

const FastTables& fast_tables() {
  static const FastTables tables = build();
  return tables;
}

}  // namespace agq::pipeline::agq::fast
