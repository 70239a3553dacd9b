// Seeded random frames for the differential tests and the fuzz driver: every
// kind of traffic the switch's parser distinguishes (classic AGQ data and
// ACKs, agq DATA, ARP requests and replies, routed and switched IPv4/UDP,
// plain L2, VLAN-tagged variants) drawn from a small universe of stations,
// addresses and slots so that tables hit and registers collide, plus
// mutations of them (truncation, bit flips, wrong lengths and versions, a
// VLAN tag inserted or removed, garbage).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "proto/agq.hpp"
#include "proto/frame.hpp"
#include "proto/headers.hpp"

namespace agq::testframes {

using Frame = std::vector<uint8_t>;

struct Universe {
  unsigned stations = 8;          // unicast MACs 02:00:00:00:00:01..
  unsigned hosts = 8;             // IPv4 10.0.0.1..
  unsigned ports = 5;             // ingress ports 0..ports-1
  uint32_t classic_slots = 64;    // hashID range (register capacity + a few)
  std::vector<uint16_t> agq_jobs = {1, 2};
  uint8_t agq_workers = 4;
  uint16_t agq_slots = 16;
};

class FrameGen {
 public:
  FrameGen(uint64_t seed, Universe u = {}) : rng_(seed), u_(std::move(u)) {}

  std::mt19937_64& rng() { return rng_; }
  const Universe& universe() const { return u_; }
  uint64_t below(uint64_t n) { return n ? rng_() % n : 0; }
  bool chance(unsigned percent) { return below(100) < percent; }

  proto::Mac station(unsigned i) const { return {0x02, 0, 0, 0, 0, uint8_t(1 + i)}; }
  proto::Mac any_station() { return station(unsigned(below(u_.stations))); }
  uint32_t host(unsigned i) const { return 0x0A000001u + i; }
  uint32_t any_host() { return host(unsigned(below(u_.hosts))); }
  proto::Mac dst_mac() {
    switch (below(6)) {
      case 0: return {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
      case 1: return {0x01, 0x00, 0x5e, 0, 0, uint8_t(below(4))};  // multicast
      case 2: return {0x02, 0, 0, 0, 1, uint8_t(below(4))};        // never a station: unknown
      default: return any_station();
    }
  }
  std::optional<uint16_t> vlan() {
    if (!chance(15)) return std::nullopt;
    return uint16_t(below(4096));
  }

  proto::UdpFrameSpec udp_spec(uint16_t dst_port) {
    proto::UdpFrameSpec s;
    s.dst_mac = dst_mac();
    s.src_mac = any_station();
    s.vlan_id = vlan();
    s.src_ip = any_host();
    s.dst_ip = chance(80) ? any_host() : uint32_t(rng_());
    s.src_port = uint16_t(below(65536));
    s.dst_port = dst_port;
    return s;
  }

  // A classic AGQ packet. Mostly well-formed traffic of a few sequences
  // (hash1/hash2 derived from hashID as hosts do), some with odd fields.
  Frame classic() {
    proto::AgqClassic a;
    const uint32_t slots = std::max<uint32_t>(u_.classic_slots, 1);
    static const uint16_t kJas[] = {1, 2, 3, 0x801, 0x802, 0};
    a.job_and_seq = chance(90) ? kJas[below(5)] : chance(50) ? 0 : uint16_t(rng_());
    a.worker_id = uint8_t(below(4));
    a.total_workers = chance(90) ? uint8_t(1 + below(4)) : uint8_t(rng_());
    for (auto& d : a.data) d = chance(70) ? uint32_t(rng_() >> 40) : uint32_t(rng_());
    a.is_ack = chance(70) ? 0 : chance(85) ? 1 : uint8_t(rng_());
    a.hash_id = uint16_t(chance(95) ? below(slots) : rng_());
    a.hash1 = chance(95) ? uint16_t(a.hash_id >> 3) : uint16_t(below(1u << 13));
    a.hash2 = uint8_t(a.hash_id & 7);
    auto s = udp_spec(chance(50) ? proto::kAgqClassicPortA : proto::kAgqClassicPortB);
    s.dst_mac = station(0);
    return proto::build_agq_classic_frame(s, a);
  }

  // An agq (docs/PROTOCOL.md) DATA for one of the universe's jobs, or junk
  // in the header's fields now and then.
  Frame agq() {
    proto::Agq a;
    a.type = chance(90) ? proto::AgqType::Data : proto::AgqType(below(8));
    a.job_id = chance(90) ? u_.agq_jobs[below(u_.agq_jobs.size())] : uint16_t(rng_());
    a.worker_id = uint8_t(chance(95) ? below(u_.agq_workers) : rng_());
    a.num_workers = chance(95) ? u_.agq_workers : uint8_t(rng_());
    a.slot = uint16_t(chance(95) ? below(u_.agq_slots) : rng_());
    a.flags = uint8_t(chance(80) ? below(2) : rng_());
    a.seq = uint32_t(below(64));
    static const uint8_t kWidths[] = {4, 8, 16, 32};
    a.req_width = chance(95) ? kWidths[below(4)] : uint8_t(rng_());
    // min_width (the DATA's width byte): mostly valid for the job's guard
    // (a multiple of 4, <= the request), sometimes anything.
    a.width = chance(90) ? std::min<uint8_t>(a.req_width, kWidths[below(4)]) : uint8_t(rng_());
    a.n_lanes = chance(90) ? uint8_t(proto::kAgqLanes) : chance(50) ? 16 : uint8_t(rng_());
    for (auto& l : a.lanes) l = uint32_t(rng_() >> 48);
    uint8_t payload[proto::Agq::kLen];
    a.encode(payload);
    auto s = udp_spec(proto::kAgqPort);
    s.src_port = uint16_t(0xC000 | below(0x1000));
    if (chance(85)) s.src_ip = host(a.worker_id % u_.hosts);  // worker w sends from host w
    return proto::build_udp_frame(s, payload);
  }

  Frame arp() {
    const bool vlan_tag = chance(15);
    Frame f(60 + (vlan_tag ? 4 : 0), 0x5A);
    uint8_t* p = f.data();
    proto::Ethernet e{chance(70) ? proto::Mac{0xff, 0xff, 0xff, 0xff, 0xff, 0xff} : dst_mac(), any_station(),
                      vlan_tag ? proto::kEtherTypeVlan : proto::kEtherTypeArp};
    e.encode(p);
    p += proto::Ethernet::kLen;
    if (vlan_tag) {
      proto::Vlan v;
      v.vid = uint16_t(below(4096));
      v.ether_type = proto::kEtherTypeArp;
      v.encode(p);
      p += proto::Vlan::kLen;
    }
    proto::Arp a;
    a.oper = chance(80) ? 1 : uint16_t(below(4));
    if (chance(10)) a.htype = uint16_t(below(3));
    if (chance(10)) a.ptype = uint16_t(rng_());
    if (chance(5)) a.hlen = uint8_t(below(8));
    if (chance(5)) a.plen = uint8_t(below(8));
    a.sha = e.src;
    a.spa = any_host();
    a.tpa = chance(15) ? a.spa : any_host();  // gratuitous now and then
    a.encode(p);
    return f;
  }

  Frame udp() {
    std::vector<uint8_t> payload(size_t(below(80)), uint8_t(rng_()));
    return proto::build_udp_frame(udp_spec(uint16_t(1024 + below(4096))), payload);
  }

  Frame l2() {
    Frame f(60 + below(40), uint8_t(rng_()));
    proto::Ethernet{dst_mac(), any_station(), uint16_t(chance(50) ? 0x88B5 : rng_())}.encode(f.data());
    return f;
  }

  // Any well-formed frame, classic-heavy or agq-heavy.
  Frame valid(bool agq_traffic) {
    const uint64_t k = below(100);
    if (k < 45) return agq_traffic ? agq() : classic();
    if (k < 60) return arp();
    if (k < 85) return udp();
    return l2();
  }

  // Damage a frame the way a broken host or link would.
  void mutate(Frame& f) {
    switch (below(8)) {
      case 0:  // truncation anywhere (also below the Ethernet header)
        f.resize(size_t(below(f.size() + 1)));
        break;
      case 1:  // bit flips
        for (unsigned i = 0, n = unsigned(1 + below(4)); i < n && !f.empty(); ++i)
          f[below(f.size())] ^= uint8_t(1u << below(8));
        break;
      case 2:  // a random byte in the headers
        if (!f.empty()) f[below(std::min<size_t>(f.size(), 64))] = uint8_t(rng_());
        break;
      case 3:  // IPv4 version / IHL / fragment bits
        if (f.size() > 21) {
          const size_t l3 = (f[12] == 0x81 && f[13] == 0x00) ? 18 : 14;
          if (f.size() > l3 + 7) {
            if (chance(50)) f[l3] = uint8_t(rng_());
            else f[l3 + 6] = uint8_t(rng_());
          }
        }
        break;
      case 4:  // wrong UDP/IP lengths (the parser does not trust them; nor may anyone)
        if (f.size() > 40) {
          f[16] = uint8_t(rng_());
          f[38] = uint8_t(rng_());
        }
        break;
      case 5:  // insert or strip a VLAN tag
        if (f.size() >= 14) {
          if (f[12] == 0x81 && f[13] == 0x00 && f.size() >= 18) {
            f.erase(f.begin() + 12, f.begin() + 16);
          } else {
            const uint8_t tag[4] = {0x81, 0x00, uint8_t(below(16)), uint8_t(rng_())};
            f.insert(f.begin() + 12, tag, tag + 4);
          }
        }
        break;
      case 6:  // extra trailing bytes
        f.resize(f.size() + below(32), uint8_t(rng_()));
        break;
      default:  // garbage
        f.resize(size_t(below(200)));
        for (auto& b : f) b = uint8_t(rng_());
        break;
    }
  }

  Frame any(bool agq_traffic, unsigned mutate_percent) {
    Frame f = valid(agq_traffic);
    if (chance(mutate_percent)) mutate(f);
    return f;
  }

 private:
  std::mt19937_64 rng_;
  Universe u_;
};

}  // namespace agq::testframes
