#include "proto/agq.hpp"

#include "proto/bytes.hpp"

namespace agq::proto {

void Agq::decode(const uint8_t* p) {
  ver = p[0] >> 4;
  type = AgqType(p[0] & 0x0F);
  flags = p[1];
  job_id = load_be16(p + 2);
  worker_id = p[4];
  num_workers = p[5];
  slot = load_be16(p + 6);
  seq = load_be32(p + 8);
  req_width = p[12];
  width = p[13];
  pos = p[14];
  guard = p[15];
  exponent = int8_t(p[16]);
  n_lanes = p[17];
  epoch = load_be16(p + 18);
  const int n = lanes_carried(n_lanes);
  for (int k = 0; k < n; ++k) lanes[k] = load_be32(p + 20 + 4 * k);
  for (int k = n; k < kAgqLanes; ++k) lanes[k] = 0;
}

void Agq::encode(uint8_t* p) const {
  p[0] = uint8_t(ver << 4 | (uint8_t(type) & 0x0F));
  p[1] = flags;
  store_be16(p + 2, job_id);
  p[4] = worker_id;
  p[5] = num_workers;
  store_be16(p + 6, slot);
  store_be32(p + 8, seq);
  p[12] = req_width;
  p[13] = width;
  p[14] = pos;
  p[15] = guard;
  p[16] = uint8_t(exponent);
  p[17] = n_lanes;
  store_be16(p + 18, epoch);
  const int n = lanes_carried(n_lanes);
  for (int k = 0; k < n; ++k) store_be32(p + 20 + 4 * k, lanes[k]);
}

}  // namespace agq::proto
