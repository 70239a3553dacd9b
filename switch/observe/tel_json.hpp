// JSON (control/json.hpp) -> rte_tel_data, for the switch's rte_telemetry
// commands. DPDK 22.11 telemetry holds a dict or an array of scalars
// (u64, int, string), and a dict entry may be an array of scalars (one
// level of nesting). So:
//   object            -> dict; nested objects flattened as "outer_inner"
//   array of objects  -> "columns": one array per key ("rx_packets": [..]),
//                        an element's nested object as "key_inner" columns
//   array of scalars  -> array (or a dict entry holding one)
// Numbers that are not unsigned integers, bools and null become strings in
// a column that is not all unsigned. Arrays of arrays are left out.
// Names keep only the characters DPDK allows ([A-Za-z0-9_/]; others
// become '_': counter "dp.rx" is "dp_rx", register "lane00.v1" "lane00_v1").
#pragma once

#include <string>

#include "control/json.hpp"

struct rte_tel_data;

namespace agq::observe {

// 0, or a negative errno: -ENOSPC when the data exceeds telemetry's limits
// (256 dict entries, 512 array entries; strings are cut to 127 bytes).
int json_to_tel(const control::Json& j, rte_tel_data* d);

}  // namespace agq::observe
