#include "proto/headers.hpp"

#include <arpa/inet.h>

#include <cstdio>

namespace agq::proto {

std::string mac_to_string(const Mac& m) {
  char b[18];
  std::snprintf(b, sizeof b, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
  return b;
}

bool mac_from_string(const std::string& s, Mac& out) {
  unsigned v[6];
  char tail;
  if (std::sscanf(s.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                  &tail) != 6)
    return false;
  for (int i = 0; i < 6; ++i) out[i] = uint8_t(v[i]);
  return true;
}

std::string ipv4_to_string(uint32_t ip) {
  char b[16];
  std::snprintf(b, sizeof b, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
  return b;
}

bool ipv4_from_string(const std::string& s, uint32_t& out) {
  in_addr a{};
  if (inet_pton(AF_INET, s.c_str(), &a) != 1) return false;
  out = ntohl(a.s_addr);
  return true;
}

void Ethernet::decode(const uint8_t* p) {
  std::copy(p, p + 6, dst.begin());
  std::copy(p + 6, p + 12, src.begin());
  ether_type = load_be16(p + 12);
}
void Ethernet::encode(uint8_t* p) const {
  std::copy(dst.begin(), dst.end(), p);
  std::copy(src.begin(), src.end(), p + 6);
  store_be16(p + 12, ether_type);
}

void Vlan::decode(const uint8_t* p) {
  const uint16_t tci = load_be16(p);
  pcp = uint8_t(tci >> 13);
  cfi = uint8_t((tci >> 12) & 1);
  vid = tci & 0x0FFF;
  ether_type = load_be16(p + 2);
}
void Vlan::encode(uint8_t* p) const {
  store_be16(p, uint16_t((pcp & 7) << 13 | (cfi & 1) << 12 | (vid & 0x0FFF)));
  store_be16(p + 2, ether_type);
}

void Ipv4::decode(const uint8_t* p) {
  version = p[0] >> 4;
  ihl = p[0] & 0x0F;
  diffserv = p[1];
  total_len = load_be16(p + 2);
  identification = load_be16(p + 4);
  flags = p[6] >> 5;
  frag_offset = load_be16(p + 6) & 0x1FFF;
  ttl = p[8];
  protocol = p[9];
  hdr_checksum = load_be16(p + 10);
  src = load_be32(p + 12);
  dst = load_be32(p + 16);
}
void Ipv4::encode(uint8_t* p) const {
  p[0] = uint8_t(version << 4 | (ihl & 0x0F));
  p[1] = diffserv;
  store_be16(p + 2, total_len);
  store_be16(p + 4, identification);
  store_be16(p + 6, uint16_t((flags & 7) << 13 | (frag_offset & 0x1FFF)));
  p[8] = ttl;
  p[9] = protocol;
  store_be16(p + 10, hdr_checksum);
  store_be32(p + 12, src);
  store_be32(p + 16, dst);
}
uint16_t Ipv4::compute_checksum() const {
  Ipv4 h = *this;
  h.hdr_checksum = 0;
  uint8_t b[kLen];
  h.encode(b);
  uint32_t sum = 0;
  for (int i = 0; i < kLen; i += 2) sum += load_be16(b + i);
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return uint16_t(~sum);
}

void Udp::decode(const uint8_t* p) {
  src_port = load_be16(p);
  dst_port = load_be16(p + 2);
  length = load_be16(p + 4);
  checksum = load_be16(p + 6);
}
void Udp::encode(uint8_t* p) const {
  store_be16(p, src_port);
  store_be16(p + 2, dst_port);
  store_be16(p + 4, length);
  store_be16(p + 6, checksum);
}

void Arp::decode(const uint8_t* p) {
  htype = load_be16(p);
  ptype = load_be16(p + 2);
  hlen = p[4];
  plen = p[5];
  oper = load_be16(p + 6);
  std::copy(p + 8, p + 14, sha.begin());
  spa = load_be32(p + 14);
  std::copy(p + 18, p + 24, tha.begin());
  tpa = load_be32(p + 24);
}
void Arp::encode(uint8_t* p) const {
  store_be16(p, htype);
  store_be16(p + 2, ptype);
  p[4] = hlen;
  p[5] = plen;
  store_be16(p + 6, oper);
  std::copy(sha.begin(), sha.end(), p + 8);
  store_be32(p + 14, spa);
  std::copy(tha.begin(), tha.end(), p + 18);
  store_be32(p + 24, tpa);
}

void AgqClassic::decode(const uint8_t* p) {
  job_and_seq = load_be16(p);
  worker_id = p[2];
  total_workers = p[3];
  for (int i = 0; i < kAgqClassicLanes; ++i) data[i] = load_be32(p + 4 + 4 * i);
  is_ack = p[68];
  hash_id = load_be16(p + 69);
  const uint16_t h = load_be16(p + 71);
  hash1 = h >> 3;
  hash2 = h & 7;
}
void AgqClassic::encode(uint8_t* p) const {
  store_be16(p, job_and_seq);
  p[2] = worker_id;
  p[3] = total_workers;
  for (int i = 0; i < kAgqClassicLanes; ++i) store_be32(p + 4 + 4 * i, data[i]);
  p[68] = is_ack;
  store_be16(p + 69, hash_id);
  store_be16(p + 71, uint16_t((hash1 & 0x1FFF) << 3 | (hash2 & 7)));
}

}  // namespace agq::proto
