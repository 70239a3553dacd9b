// The fast agq program (pipeline/agq_fast/) against the TNA model
// (pipeline/agq/, the reference): seeded random multi-job traces through
// both -- protocol traffic with loss, duplicates, retransmissions after
// completion and slot reuse in both versions; random and malformed DATA of
// every kind; PS_RESULTs; ordinary traffic of every kind (ARP proxied,
// routed, L2 unicast / flood / same port, learning and moves) interleaved
// with agq frames in most bursts, and garbage; tiny row quotas
// (PS fallback); OVERFLOW; both lane profiles; jobs added and removed
// mid-trace; bursts with several packets on one slot and one row. Every
// output frame (bytes and decision), every egress replica, every counter
// and every register cell must be identical, for every SIMD variant the
// CPU has -- and for the switch's shared-nothing split: L fast instances,
// instance k holding only the rows of the shards k mod L (row_layout.hpp),
// each packet given to the instance the dataplane gives it to (its shard's
// owner; shard-less frames to instance 0), counters summed as the control
// plane sums them (control::Pipes), each register cell read from its owner,
// and no other instance holding it.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "../common/random_frames.hpp"
#include "agq_test_util.hpp"
#include "control/pipes.hpp"
#include "pipeline/agq_fast/agq_fast_program.hpp"
#include "pipeline/agq_fast/wire.hpp"

using namespace agq;
using namespace agq::agq_test;
namespace fast = agq::pipeline::agq::fast;

namespace {

const AgqConfig kCfg{40, 200};  // small: rows fill up, jobs collide

void fix_ipv4_checksum(std::vector<uint8_t>& f) {
  // Frames the trace mutates keep a valid IPv4 checksum (see
  // IncrementalChecksumKeepsAWrongChecksumWrong for why it matters).
  std::size_t l3 = 14;
  if (f.size() >= 18 && f[12] == 0x81 && f[13] == 0x00) l3 = 18;
  if (f.size() < l3 + 20 || proto::load_be16(f.data() + l3 - 2) != proto::kEtherTypeIpv4 || (f[l3] >> 4) != 4) return;
  proto::Ipv4 ip;
  ip.decode(f.data() + l3);
  proto::store_be16(f.data() + l3 + 10, ip.compute_checksum());
}

std::string describe(const Decision& d) {
  return "kind " + std::to_string(int(d.kind)) + " port " + std::to_string(d.port) + " group " +
         std::to_string(d.group) + " excl " + std::to_string(d.exclude_port) + " reason " +
         std::to_string(d.drop_reason);
}
bool same(const Decision& a, const Decision& b) {
  return a.kind == b.kind && a.port == b.port && a.group == b.group && a.exclude_port == b.exclude_port &&
         a.drop_reason == b.drop_reason;
}

struct Frame {
  std::vector<uint8_t> bytes;
  tna::PortId port;
};

// Per (job, slot): the protocol state of the workers (docs/PROTOCOL.md §5).
struct SlotUse {
  uint32_t use = 0;
  uint8_t req = 16;
  uint8_t min_width = 16;  // the workers' min_width of this use
  std::set<uint8_t> sent;
};

class Trace {
 public:
  Trace(uint64_t seed) : rng_(seed), fg_(seed ^ 0x5EED) {}

  // Ordinary traffic of every kind the forwarding control distinguishes
  // (testframes::FrameGen: ARP requests to proxied and other addresses,
  // routed and switched IPv4, classic AGQ frames, plain L2, VLAN tags,
  // damaged frames), with its tables installed in both programs.
  template <typename Prog> void install_forwarding(Prog& p) {
    p.forwarding().add_route(fg_.host(1), 2);
    p.forwarding().add_route(fg_.host(2), 3);
    p.forwarding().add_arp_proxy(fg_.host(3), fg_.station(5));
    p.forwarding().add_static_mac(fg_.station(0), 1);
  }

  std::mt19937_64& rng() { return rng_; }
  unsigned below(unsigned n) { return unsigned(rng_() % n); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  JobSpec random_job(uint16_t id) {
    static const uint8_t kN[] = {1, 2, 3, 4, 5, 8, 32};
    JobSpec j = job_spec(id, kN[below(7)], 1 + below(24), 1 + below(4),
                         chance(0.25) ? ResultDelivery::Ps : ResultDelivery::Multicast, uint8_t(4 * (1 + below(8))));
    j.lanes = chance(0.4) ? 16 : 32;
    if (j.delivery == ResultDelivery::Multicast && chance(0.1)) j.ps_port = tna::kNoPort;  // no PS at all
    return j;
  }

  void job_added(const JobSpec& j) {
    jobs_[j.job_id] = j;
    for (auto it = uses_.begin(); it != uses_.end();)
      it = it->first.first == j.job_id ? uses_.erase(it) : std::next(it);
  }
  void job_removed(uint16_t id) { jobs_.erase(id); }
  const std::map<uint16_t, JobSpec>& jobs() const { return jobs_; }

  // One input frame; nullopt when the generator "lost" the packet.
  std::optional<Frame> next() {
    const unsigned k = below(100);
    if (jobs_.empty() || k < 12) return ordinary();
    if (k < 66) return protocol();
    if (k < 76) return random_data();
    if (k < 84) return ps_result();
    return malformed();
  }

 private:
  const JobSpec& some_job() {
    auto it = jobs_.begin();
    std::advance(it, below(unsigned(jobs_.size())));
    return it->second;
  }
  std::vector<uint32_t> lanes(unsigned bits) {
    std::vector<uint32_t> v(32);
    for (auto& x : v) x = uint32_t(rng_()) & low_mask(bits);
    return v;
  }
  Agq with_profile(const JobSpec& j, Agq a) {
    a.n_lanes = j.lanes;
    return a;
  }

  // Protocol traffic: per slot, uses alternate versions; each worker
  // contributes once per use (some lost, some duplicated); after every
  // worker has, the slot is reused or a worker retransmits after completion.
  // Consecutive packets often hit the same slot (and so the same row).
  std::optional<Frame> protocol() {
    if (!(sticky_ && chance(0.6) && jobs_.count(last_.first))) {
      const JobSpec& j = some_job();
      last_ = {j.job_id, uint16_t(below(j.slots))};
    }
    sticky_ = true;
    const JobSpec& j = jobs_.at(last_.first);
    SlotUse& u = uses_[last_];
    const uint8_t g = uint8_t(guard_bits(j.num_workers));
    if (u.sent.size() == j.num_workers) {
      if (chance(0.3)) {  // retransmission after completion
        const uint8_t w = uint8_t(below(j.num_workers));
        Agq a = with_profile(j, data_pkt(j, w, last_.second, uint8_t(u.use & 1), u.req, lanes(32), u.use,
                                         proto::kAgqFlagRetransmit));
        return Frame{worker_frame(j, w, a), j.workers[w].port};
      }
      ++u.use;
      u.sent.clear();
      const unsigned min_units = min_grant_units(g);
      u.req = uint8_t(4 * (min_units + below(9 - min_units)));
      if (chance(0.1)) u.req = 32;
      // min_width anywhere from the narrowest valid one to the request,
      // often the request itself (the workers' default: a grant is R or a
      // fallback) or the narrowest (every grant accepted).
      const unsigned k = below(10);
      u.min_width = k < 4 ? u.req : k < 6 ? uint8_t(4 * min_units)
                                          : uint8_t(4 * (min_units + below(u.req / 4 - min_units + 1)));
    }
    uint8_t w;
    uint8_t flags = 0;
    if (!u.sent.empty() && chance(0.1)) {  // duplicate of a pending contribution
      auto it = u.sent.begin();
      std::advance(it, below(unsigned(u.sent.size())));
      w = *it;
      flags |= proto::kAgqFlagRetransmit;
    } else {
      do w = uint8_t(below(j.num_workers)); while (u.sent.count(w));
      u.sent.insert(w);
      if (chance(0.05)) return std::nullopt;  // lost on the way to the switch
    }
    if (chance(0.05)) flags |= proto::kAgqFlagOverflow;
    const unsigned bits = chance(0.05) ? 32 : u.req - g;  // some workers send junk above their bits
    // Only the first contribution's min_width counts: now and then a later
    // worker disagrees (within what is valid).
    int min_width = std::min<int>(u.min_width, u.req);
    if (u.sent.size() > 1 && chance(0.1)) min_width = int(4 * min_grant_units(g));
    Agq a = with_profile(j, data_pkt(j, w, last_.second, uint8_t(u.use & 1), u.req, lanes(bits), u.use, flags,
                                     min_width));
    a.exponent = int8_t(below(256));
    a.epoch = uint16_t(rng_());  // ignored by the switch
    return Frame{worker_frame(j, w, a), j.workers[w].port};
  }

  // DATA with random fields: versions out of turn, other workers, widths.
  std::optional<Frame> random_data() {
    sticky_ = false;
    const JobSpec& j = some_job();
    static const uint8_t kReq[] = {0, 2, 4, 6, 8, 12, 16, 20, 24, 28, 32, 36, 255};
    const uint8_t w = uint8_t(below(j.num_workers));
    Agq a = with_profile(j, data_pkt(j, w, uint16_t(below(j.slots + 2)), uint8_t(below(2)), kReq[below(13)],
                                     lanes(32), uint32_t(rng_()), uint8_t(rng_() & 0x0E)));
    // min_width: valid or not (no multiple of 4, below g + 2, above R)
    static const uint8_t kMin[] = {0, 1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 28, 32, 36, 255};
    if (chance(0.5)) a.width = kMin[below(15)];
    if (chance(0.2)) a.worker_id = uint8_t(below(40));
    if (chance(0.1)) a.num_workers = uint8_t(below(34));
    if (chance(0.1)) a.job_id = uint16_t(below(400));
    tna::PortId port = j.workers[w].port;
    if (chance(0.1)) port = tna::PortId(below(200));
    return Frame{worker_frame(j, w, a), port};
  }

  std::optional<Frame> ps_result() {
    sticky_ = false;
    const JobSpec& j = some_job();
    Agq a = with_profile(j, data_pkt(j, uint8_t(below(j.num_workers + 2)), uint16_t(below(j.slots + 1)),
                                     uint8_t(below(2)), 32, lanes(32), uint32_t(rng_()), uint8_t(rng_() & 0x0F)));
    a.type = AgqType::PsResult;
    a.width = 32;
    a.guard = uint8_t(guard_bits(j.num_workers));
    auto f = ps_frame(a);
    if (chance(0.3)) {  // the PS answers from its own address
      proto::store_be32(f.data() + 14 + 12, j.ps_ipv4);
    }
    fix_ipv4_checksum(f);
    return Frame{f, chance(0.9) ? j.ps_port : tna::PortId(below(50))};
  }

  // A valid DATA, then one thing wrong with it.
  std::optional<Frame> malformed() {
    sticky_ = false;
    const JobSpec& j = some_job();
    const uint8_t w = uint8_t(below(j.num_workers));
    Agq a = with_profile(j, data_pkt(j, w, uint16_t(below(j.slots)), uint8_t(below(2)), 16, lanes(32)));
    switch (below(12)) {
      case 0: a.ver = uint8_t(below(16)); break;
      case 1: a.type = AgqType(below(16)); break;
      case 2: a.n_lanes = uint8_t(chance(0.5) ? (j.lanes == 16 ? 32 : 16) : below(256)); break;
      case 3: {  // min_width out of its range: < g + 2, > R, or no multiple of 4
        const unsigned g = guard_bits(j.num_workers);
        const uint8_t bad[] = {uint8_t(g + 1), 20, 32, uint8_t(4 * min_grant_units(g) + 2), 0};
        a.width = bad[below(5)];
        break;
      }
      default: break;
    }
    auto f = worker_frame(j, w, a);
    std::size_t agq = 42;
    switch (below(9)) {
      case 0: f.resize(below(unsigned(f.size()))); break;                     // truncated anywhere
      case 1: f.resize(agq + 20 + 4 * below(32)); break;                       // truncated lanes
      case 2: f[14] = uint8_t(0x40 | below(16)); break;                        // IHL
      case 3: f[14 + 6] = uint8_t(rng_()); break;                              // fragments
      case 4: f[14 + 9] = uint8_t(chance(0.5) ? 6 : rng_()); break;            // not UDP
      case 5: proto::store_be16(f.data() + 36, uint16_t(chance(0.5) ? 50000 : rng_())); break;  // port
      case 6: {                                                                 // one VLAN tag
        const uint8_t tag[4] = {0x81, 0x00, uint8_t(below(16)), uint8_t(rng_())};
        f.insert(f.begin() + 12, tag, tag + 4);
        break;
      }
      case 7: f[12] = uint8_t(rng_()); break;                                   // ethertype
      default: f[agq + below(20)] = uint8_t(rng_()); break;                     // any fixed field
    }
    fix_ipv4_checksum(f);
    return Frame{f, j.workers[w].port};
  }

  std::optional<Frame> ordinary() {
    sticky_ = false;
    if (chance(0.6)) return Frame{fg_.any(false, 15), tna::PortId(fg_.below(fg_.universe().ports))};
    proto::UdpFrameSpec s;
    s.src_mac = {0x02, 0, 0, 0, 0x77, uint8_t(below(4))};
    s.dst_mac = chance(0.5) ? proto::Mac{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF} : proto::Mac{0x02, 0, 0, 0, 0x77, uint8_t(below(4))};
    s.src_ip = 0x0A630000 | below(4);
    s.dst_ip = 0x0A630000 | below(4);
    s.dst_port = uint16_t(chance(0.2) ? 50000 : 9000);
    std::vector<uint8_t> payload(below(100));
    for (auto& b : payload) b = uint8_t(rng_());
    auto f = proto::build_udp_frame(s, payload);
    if (chance(0.2)) {
      f.resize(below(80));
      for (auto& b : f) b = uint8_t(rng_());
    }
    return Frame{f, tna::PortId(200 + below(4))};
  }

  std::mt19937_64 rng_;
  testframes::FrameGen fg_;
  std::map<uint16_t, JobSpec> jobs_;
  std::map<std::pair<uint16_t, uint16_t>, SlotUse> uses_;
  std::pair<uint16_t, uint16_t> last_{0, 0};
  bool sticky_ = false;
};

// The model and L fast instances (lcore k of L each), as the switch runs them.
struct Programs {
  explicit Programs(fast::Simd simd, unsigned lcores = 1) : model(kCfg, pipeline::ForwardingConfig{}, model_pre) {
    model.set_epoch(0xE0C4);
    std::vector<pipeline::SwitchProgram*> all;
    for (unsigned k = 0; k < lcores; ++k) {
      pres.push_back(std::make_unique<tna::ReplicationEngine>());
      insts.push_back(std::make_unique<fast::AgqFastProgram>(kCfg, pipeline::ForwardingConfig{}, *pres.back()));
      EXPECT_TRUE(insts.back()->set_simd(simd));
      insts.back()->set_epoch(0xE0C4);
      insts.back()->own_shards(k, lcores);
      all.push_back(insts.back().get());
    }
    pipes = std::make_unique<control::Pipes>(all);
  }
  unsigned lcores() const { return unsigned(insts.size()); }
  // The instance the dataplane gives a frame to: its shard's owner;
  // shard-less frames to instance 0 (the only one whose tables learn here).
  unsigned owner_of(const std::vector<uint8_t>& b) const { return pipes->owner(fast().shard_of(b)); }
  fast::AgqFastProgram& fast(unsigned k = 0) const { return *insts.at(k); }
  tna::ReplicationEngine& fast_pre(unsigned k = 0) const { return *pres.at(k); }

  tna::ReplicationEngine model_pre;
  AgqProgram model;
  std::vector<std::unique_ptr<tna::ReplicationEngine>> pres;
  std::vector<std::unique_ptr<fast::AgqFastProgram>> insts;
  std::unique_ptr<control::Pipes> pipes;
};

std::vector<std::pair<std::string, uint64_t>> counters_of(const tna::Program& p) {
  std::vector<std::pair<std::string, uint64_t>> out;
  p.visit_counters([&](std::string_view n, uint64_t v) { out.emplace_back(std::string(n), v); });
  return out;
}

std::vector<std::pair<std::string, uint64_t>> counters_of(control::Pipes& p) {
  std::vector<std::pair<std::string, uint64_t>> out;
  p.visit_counters([&](std::string_view n, uint64_t v) { out.emplace_back(std::string(n), v); });
  return out;
}

// Every register cell of the model equals the one of the instance that owns
// it (PROTOCOL §10: the shard of its row, mod L); no other instance holds
// it. A row or slot of no job is held by no instance and reads as zero.
void expect_same_cells(const Programs& p, const std::string& when) {
  const unsigned L = p.lcores();
  std::vector<uint32_t> row_owner(kCfg.total_rows, ~0u), slot_owner(kCfg.total_slots, ~0u);
  for (const JobSpec& j : p.model.jobs()) {
    const JobPlacement pl = *p.model.placement(j.job_id);
    for (uint32_t r = 0; r < pl.rows; ++r) row_owner[pl.row_base + r] = ((j.job_id + r) & 0xFFFu) % L;
    for (uint32_t s = 0; s < pl.slots; ++s) slot_owner[pl.slot_base + s] = ((j.job_id + (s >> pl.row_shift)) & 0xFFFu) % L;
  }
  const RegisterCells& x = p.model.cells();
  for (uint32_t i = 0; i < kCfg.total_slots; ++i) {
    for (unsigned k = 0; k < L; ++k)
      ASSERT_EQ(p.fast(k).cells().owns_slot(i), slot_owner[i] == k) << "slot " << i << " on instance " << k << " " << when;
    const RegisterCells& y = p.fast(slot_owner[i] == ~0u ? 0 : slot_owner[i]).cells();
    ASSERT_EQ(x.slot_bitmap(i), y.slot_bitmap(i)) << "slot_bitmap[" << i << "] " << when;
    ASSERT_EQ(x.slot_count(i), y.slot_count(i)) << "slot_count[" << i << "] " << when;
    ASSERT_EQ(x.slot_window(i), y.slot_window(i)) << "slot_window[" << i << "] " << when;
  }
  for (uint32_t r = 0; r < kCfg.total_rows; ++r) {
    for (unsigned k = 0; k < L; ++k)
      ASSERT_EQ(p.fast(k).cells().owns_row(r), row_owner[r] == k) << "row " << r << " on instance " << k << " " << when;
    const RegisterCells& y = p.fast(row_owner[r] == ~0u ? 0 : row_owner[r]).cells();
    ASSERT_EQ(x.row_occupancy(r), y.row_occupancy(r)) << "row_occupancy[" << r << "] " << when;
    for (unsigned k = 0; k < 32; ++k) ASSERT_EQ(x.lane(r, k), y.lane(r, k)) << "lane" << k << "[" << r << "] " << when;
  }
}

struct Stats {
  uint64_t packets = 0, bursts = 0, shared_slot_bursts = 0, results = 0, replicas = 0, jobs_changed = 0;
  uint64_t mixed_bursts = 0;  // agq frames and ordinary frames interleaved in one burst
  uint64_t handoffs = 0;      // DATA a non-owner instance handed back (lcores > 1)
  std::map<std::string, uint64_t> counters;  // the model's, summed over the trace
};

void run_trace(uint64_t seed, fast::Simd simd, unsigned n_packets, Stats& st, unsigned lcores = 1) {
  Programs p(simd, lcores);
  Trace t(seed);
  t.install_forwarding(p.model);
  for (unsigned k = 0; k < lcores; ++k) t.install_forwarding(p.fast(k));
  uint16_t next_id = 1;
  auto add = [&](const JobSpec& j) {
    const auto e1 = p.model.add_job(j);
    for (unsigned k = 0; k < lcores; ++k) {
      const auto e2 = p.fast(k).add_job(j);
      ASSERT_EQ(e1, e2);
      ASSERT_EQ(p.model.placement(j.job_id).has_value(), p.fast(k).placement(j.job_id).has_value());
    }
    if (!e1) t.job_added(j);
    ++st.jobs_changed;
  };
  for (int i = 0; i < 4; ++i) add(t.random_job(next_id++));
  unsigned sent = 0;
  while (sent < n_packets) {
    // Jobs come and go while traffic runs.
    if (t.chance(0.03)) {
      if (!t.jobs().empty() && t.chance(0.5)) {
        auto it = t.jobs().begin();
        std::advance(it, t.below(unsigned(t.jobs().size())));
        const uint16_t id = it->first;
        const bool removed = p.model.remove_job(id);
        for (unsigned k = 0; k < lcores; ++k) ASSERT_EQ(removed, p.fast(k).remove_job(id));
        t.job_removed(id);
        ++st.jobs_changed;
      } else {
        add(t.random_job(next_id++ % 1000 + 1));
      }
    }
    // One burst.
    const unsigned n = 1 + t.below(48);
    std::vector<Frame> in;
    while (in.size() < n)
      if (auto f = t.next()) in.push_back(std::move(*f));
    sent += n;
    std::vector<std::vector<uint8_t>> model_bytes, fast_bytes;
    std::vector<tna::BurstPacket> burst(n);
    std::vector<unsigned> owner(n);  // the instance that processes packet i
    std::vector<Decision> model_d(n);
    std::set<uint32_t> slot_keys;  // job << 16 | slot
    bool shared = false;
    unsigned agq_frames = 0, ordinary_frames = 0;
    for (unsigned i = 0; i < n; ++i) {
      pipeline::FrameView v;
      if (pipeline::parse_view(in[i].bytes.data(), in[i].bytes.size(), v) == pipeline::ParserError::None)
        ++(v.agq_valid ? agq_frames : ordinary_frames);
      model_bytes.push_back(in[i].bytes);
      fast_bytes.push_back(in[i].bytes);
      tna::IngressIntrinsicMd md;
      md.ingress_port = in[i].port;
      model_d[i] = p.model.process(model_bytes[i], md);
      burst[i] = tna::BurstPacket{fast_bytes[i].data(), uint16_t(fast_bytes[i].size()), md, {}};
      owner[i] = p.owner_of(in[i].bytes);
      // The shard (PROTOCOL §10): every DATA that touches state has one, the
      // same as the generic AgqSwitchProgram::shard_of computes.
      const uint32_t shard = p.fast().shard_of(in[i].bytes);
      if (shard != tna::kAnyShard) {
        ASSERT_EQ(shard, p.model.shard_of(in[i].bytes));
      }
      const auto& b = in[i].bytes;
      if (b.size() >= 50 && b[42] == 0x11) {  // job and slot of an untagged DATA
        shared |= !slot_keys.insert(uint32_t(b[44]) << 24 | uint32_t(b[45]) << 16 | uint32_t(b[48]) << 8 | b[49]).second;
      }
    }
    // The dataplane gives every packet to the instance of the lcore that
    // received it (checks_ownership()); one that is not the owner hands a
    // DATA of another shard back -- Decision::handoff(its shard), bytes,
    // registers and counters untouched -- unless a stateless check drops it
    // first (the model's decision then says why, and the owner drops it
    // alike). Here every non-owner sees every such packet before the
    // owners run: the owners' results below, cell for cell against the
    // model, show that nothing was touched.
    for (unsigned k = 0; k < lcores && lcores > 1; ++k) {
      std::vector<tna::BurstPacket> foreign;
      std::vector<std::vector<uint8_t>> copies;
      std::vector<unsigned> idx;
      copies.reserve(n);
      for (unsigned i = 0; i < n; ++i) {
        const uint32_t shard = p.fast().shard_of(in[i].bytes);
        const bool stateless_drop = model_d[i].kind == Decision::Kind::Drop &&
                                    model_d[i].drop_reason >= uint16_t(AgqDrop::Malformed) &&
                                    model_d[i].drop_reason <= uint16_t(AgqDrop::BadWidth);
        if (shard == tna::kAnyShard || owner[i] == k || stateless_drop) continue;
        copies.push_back(in[i].bytes);
        foreign.push_back(tna::BurstPacket{copies.back().data(), uint16_t(copies.back().size()), burst[i].md, {}});
        idx.push_back(i);
      }
      if (foreign.empty()) continue;
      const auto before = counters_of(p.fast(k));
      p.fast(k).process_burst(foreign.data(), unsigned(foreign.size()));
      for (size_t j = 0; j < foreign.size(); ++j) {
        const unsigned i = idx[j];
        ASSERT_EQ(foreign[j].decision.kind, Decision::Kind::Handoff)
            << "seed " << seed << " instance " << k << " of " << lcores << ", burst index " << i << ": "
            << describe(foreign[j].decision);
        ASSERT_EQ(foreign[j].decision.shard, p.fast().shard_of(in[i].bytes));
        ASSERT_EQ(foreign[j].decision.shard % lcores, owner[i]);
        ASSERT_EQ(copies[j], in[i].bytes) << "a handed-off frame was written";
        ++st.handoffs;
      }
      ASSERT_EQ(before, counters_of(p.fast(k))) << "a hand-off counted on instance " << k;
    }
    // Each instance gets its packets of the burst, in arrival order, as
    // its lcore's burst (after the dataplane's hand-off).
    for (unsigned k = 0; k < lcores; ++k) {
      std::vector<tna::BurstPacket> mine;
      for (unsigned i = 0; i < n; ++i)
        if (owner[i] == k) mine.push_back(burst[i]);
      if (mine.empty()) continue;
      p.fast(k).process_burst(mine.data(), unsigned(mine.size()));
      for (unsigned i = 0, j = 0; i < n; ++i)
        if (owner[i] == k) burst[i].decision = mine[j++].decision;
    }
    for (unsigned i = 0; i < n; ++i) {  // a packet that went through the registers had a shard
      // Absorbed, duplicate, or turned into a RESULT / FALLBACK_DATA (type 2, 4).
      const bool data = in[i].bytes.size() > 42 && (in[i].bytes[42] & 0x0F) == 1 && in[i].bytes[12] == 0x08;
      const uint8_t out_type = data ? uint8_t(model_bytes[i][42] & 0x0F) : 0;
      const bool stateful = model_d[i].drop_reason == uint16_t(AgqDrop::Absorbed) ||
                            model_d[i].drop_reason == uint16_t(AgqDrop::Duplicate) ||
                            (model_d[i].kind != Decision::Kind::Drop && (out_type == 2 || out_type == 4));
      if (stateful && data) {
        ASSERT_NE(p.fast().shard_of(in[i].bytes), tna::kAnyShard) << "an aggregated DATA without a shard";
      }
    }
    st.shared_slot_bursts += shared;
    st.mixed_bursts += agq_frames != 0 && ordinary_frames != 0;
    ++st.bursts;
    for (unsigned i = 0; i < n; ++i) {
      const std::string what = "seed " + std::to_string(seed) + " simd " + fast::to_string(simd) + " packet " +
                               std::to_string(st.packets + i) + " (burst index " + std::to_string(i) + ")";
      ASSERT_TRUE(same(model_d[i], burst[i].decision))
          << what << ": model " << describe(model_d[i]) << ", fast " << describe(burst[i].decision);
      ASSERT_EQ(model_bytes[i], fast_bytes[i]) << what;
      if (model_d[i].kind == Decision::Kind::Multicast) {
        ++st.results;
        const auto& mm = p.model_pre.members(model_d[i].group);
        fast::AgqFastProgram& f = p.fast(owner[i]);
        ASSERT_EQ(mm, p.fast_pre(owner[i]).members(model_d[i].group)) << what;
        // The whole group in one egress_replicas() call, as the dataplane
        // makes it (copies into fresh buffers, the original rewritten last)
        // must give each replica the model's egress() bytes.
        std::vector<std::vector<uint8_t>> group(mm.size());
        std::vector<uint8_t*> out(mm.size());
        for (size_t r = 0; r < mm.size(); ++r)
          out[r] = r + 1 == mm.size() ? fast_bytes[i].data() : (group[r].resize(fast_bytes[i].size()), group[r].data());
        const std::vector<uint8_t> fast_result = fast_bytes[i];
        f.egress_replicas(fast_bytes[i].data(), uint16_t(fast_bytes[i].size()), mm.data(), out.data(),
                               unsigned(mm.size()));
        for (size_t r = 0; r < mm.size(); ++r) {
          auto a = model_bytes[i], b = fast_result;
          p.model.egress(a, mm[r].port, mm[r].rid);
          f.egress(b, mm[r].port, mm[r].rid);
          ASSERT_EQ(a, b) << what << " replica rid " << mm[r].rid;
          ASSERT_EQ(a, std::vector<uint8_t>(out[r], out[r] + a.size())) << what << " group replica rid " << mm[r].rid;
          ++st.replicas;
        }
        // Member after member on the RESULT itself, as the dataplane's
        // replicate_in_place makes them: each egress_member() over the
        // previous member's rewrite gives the model's egress() bytes, and
        // a rid that is no worker of the job gets the original's.
        std::vector<uint8_t> inplace = fast_result;
        uint8_t* frame = inplace.data();
        const uint16_t len = uint16_t(inplace.size());
        std::vector<tna::Replica> order(mm.begin(), mm.end());
        if (!order.empty()) std::rotate(order.begin(), order.begin() + long(i % order.size()), order.end());
        order.insert(order.begin() + long(i % (order.size() + 1)), tna::Replica{0, 999});
        for (size_t r = 0; r < order.size(); ++r) {
          f.egress_member(&frame, &len, 1, order[r], r != 0);
          auto a = model_bytes[i];
          p.model.egress(a, order[r].port, order[r].rid);
          ASSERT_EQ(a, inplace) << what << " in place, member " << r << " rid " << order[r].rid;
        }
      }
    }
    st.packets += n;
    ASSERT_EQ(counters_of(p.model), counters_of(*p.pipes)) << "after packet " << st.packets;
    if (st.bursts % 16 == 0) expect_same_cells(p, "after packet " + std::to_string(st.packets));
  }
  expect_same_cells(p, "at the end");
  for (const auto& [name, v] : counters_of(p.model)) st.counters[name] += v;
  // agqctl's dump: each row read from the owner of its shard (commands.cpp).
  for (uint32_t r = 0; r < kCfg.total_rows; ++r) {
    const unsigned k = p.pipes->owner(p.fast().aggregator_shard(r));
    ASSERT_EQ(p.model.dump_aggregator(r), p.fast(k).dump_aggregator(r)) << "row " << r << " from instance " << k;
  }
  // Every instance aggregated: the split is not vacuous.
  for (unsigned k = 0; k < lcores; ++k) {
    uint64_t contributions = 0;
    p.fast(k).visit_counters([&](std::string_view n, uint64_t v) {
      if (n == "agq_contributions") contributions = v;
    });
    EXPECT_GT(contributions, 0u) << "instance " << k << " of " << lcores;
  }
  // clear state: every instance zeroes the rows it holds.
  p.model.clear_state();
  for (unsigned k = 0; k < lcores; ++k) p.fast(k).clear_state();
  expect_same_cells(p, "after clear_state");
}

std::vector<fast::Simd> variants() {
  std::vector<fast::Simd> v;
  for (fast::Simd s : {fast::Simd::Scalar, fast::Simd::Avx2, fast::Simd::Avx512})
    if (fast::simd_supported(s)) v.push_back(s);
  return v;
}

}  // namespace

TEST(AgqFastDiff, RandomTracesEqualTheModelFrameByFrameAndCellByCell) {
#if defined(__SANITIZE_ADDRESS__)
  const unsigned kPackets = 3000;
#else
  const unsigned kPackets = 12000;
#endif
  for (fast::Simd simd : variants()) {
    // Paths are required over the three traces together: a short (ASan)
    // trace of one seed may miss a rare frame kind (an ARP request to a
    // proxied address) that another seed hits.
    std::map<std::string, uint64_t> reached;
    for (uint64_t seed : {1u, 2u, 3u}) {
      Stats st;
      run_trace(seed, simd, kPackets, st);
      if (HasFatalFailure()) return;
      std::printf("seed %lu %s: %lu packets in %lu bursts (%lu with two packets on one slot, %lu mixing agq "
                  "and ordinary frames), %lu results, %lu replicas, %lu job changes\n",
                  (unsigned long)seed, fast::to_string(simd), (unsigned long)st.packets, (unsigned long)st.bursts,
                  (unsigned long)st.shared_slot_bursts, (unsigned long)st.mixed_bursts, (unsigned long)st.results, (unsigned long)st.replicas,
                  (unsigned long)st.jobs_changed);
      EXPECT_GT(st.shared_slot_bursts, st.bursts / 4);
      EXPECT_GT(st.mixed_bursts, st.bursts / 2);
      for (const auto& [name, v] : st.counters) reached[name] += v;
      if (seed == 1 && simd == variants().front())
        for (const auto& [name, v] : st.counters) std::printf("  %s %lu\n", name.c_str(), (unsigned long)v);
    }
    // The traces reach every path of the pipeline.
    for (const char* c : {"agq_first", "agq_results", "agq_result_resent", "agq_absorbed", "agq_duplicate",
                          "agq_fallback", "agq_fallback_data", "agq_ps_results", "agq_overflow",
                          "drops_agq_malformed", "drops_agq_unknown_job", "drops_agq_bad_worker",
                          "drops_agq_bad_slot", "drops_agq_bad_width", "parser_errors", "fwd_routed",
                          "fwd_l2_unicast", "fwd_flooded", "fwd_arp_answered", "fwd_learned", "fwd_moved",
                          "drops_l2_same_port"})
      EXPECT_GT(reached[c], 0u) << c << " (simd " << fast::to_string(simd) << ")";
  }
}

// The switch's split over L lcores (docs/PROTOCOL.md §10, row_layout.hpp):
// L = 2 and 4 take the power-of-two arithmetic, L = 3 the per-job table.
TEST(AgqFastDiff, InstancesOfLcoresTogetherEqualTheModel) {
#if defined(__SANITIZE_ADDRESS__)
  const unsigned kPackets = 2000;
#else
  const unsigned kPackets = 8000;
#endif
  for (unsigned lcores : {2u, 3u, 4u}) {
    for (uint64_t seed : {1u, 2u}) {
      Stats st;
      run_trace(seed, fast::best_simd(), kPackets, st, lcores);
      if (HasFatalFailure()) return;
      std::printf("%u lcores, seed %lu: %lu packets, %lu results, %lu job changes, %lu hand-offs\n", lcores,
                  (unsigned long)seed, (unsigned long)st.packets, (unsigned long)st.results,
                  (unsigned long)st.jobs_changed, (unsigned long)st.handoffs);
      EXPECT_GT(st.results, 0u);
      EXPECT_GT(st.handoffs, 0u);
    }
  }
}

// The one deliberate difference: the fast program updates IPv4 checksums
// incrementally (RFC 1624), so a frame that arrived with a wrong checksum
// leaves with a wrong one; the model recomputes it. Everything else is equal.
TEST(AgqFastDiff, IncrementalChecksumKeepsAWrongChecksumWrong) {
  Programs p(fast::best_simd());
  const JobSpec j = job_spec(1, 2, 4, 4);
  ASSERT_FALSE(p.model.add_job(j));
  ASSERT_FALSE(p.fast().add_job(j));
  tna::IngressIntrinsicMd md;
  for (uint8_t w : {0, 1}) {
    auto f = worker_frame(j, w, data_pkt(j, w, 0, 0, 16, std::vector<uint32_t>(32, 5)));
    if (w == 1) f[14 + 10] ^= 0x5A;  // a wrong IPv4 checksum
    auto g = f;
    md.ingress_port = j.workers[w].port;
    const Decision dm = p.model.process(f, md);
    const Decision df = p.fast().process(g, md);
    ASSERT_TRUE(same(dm, df));
    if (w == 0) continue;
    ASSERT_EQ(dm.kind, Decision::Kind::Multicast);
    const tna::Replica r = p.model_pre.members(dm.group).at(0);
    p.model.egress(f, r.port, r.rid);
    p.fast().egress(g, r.port, r.rid);
    pipeline::Headers hm, hf;
    ASSERT_EQ(pipeline::parse(f, hm), pipeline::ParserError::None);
    ASSERT_EQ(pipeline::parse(g, hf), pipeline::ParserError::None);
    EXPECT_EQ(hm.ipv4.hdr_checksum, hm.ipv4.compute_checksum());
    EXPECT_NE(hf.ipv4.hdr_checksum, hf.ipv4.compute_checksum());  // still wrong
    f[24] = g[24];
    f[25] = g[25];
    EXPECT_EQ(f, g);
  }
}

// The burst memo's frame template (JobMemo::frame) stands for one
// req_width: a DATA of the same job with another req_width that cannot
// become the template (VLAN-tagged) must drop it, or the next untagged DATA
// shaped like the old template would take the new req_units. Found by
// InstancesOfLcoresTogetherEqualTheModel (3 lcores); pinned down here in one
// burst: A (untagged, 16 bits) sets the template, B (tagged, 12 bits) moves
// the memo's req_width, C (untagged, 16 bits, a new slot) is allocated
// with 16 bits, D completes C's slot; the RESULT says 16 bits granted.
TEST(AgqFastDiff, FrameTemplateFollowsTheMemosReqWidth) {
  for (fast::Simd simd : variants()) {
    Programs p(simd);
    const JobSpec j = job_spec(1, 2, 8, 8);
    ASSERT_FALSE(p.model.add_job(j));
    ASSERT_FALSE(p.fast().add_job(j));
    const std::vector<uint32_t> lanes(32, 3);
    auto tagged = [](std::vector<uint8_t> f) {
      const uint8_t tag[4] = {0x81, 0x00, 0x00, 0x05};
      f.insert(f.begin() + 12, tag, tag + 4);
      return f;
    };
    const std::vector<std::pair<std::vector<uint8_t>, uint8_t>> frames = {
        {worker_frame(j, 0, data_pkt(j, 0, 0, 0, 16, lanes)), 0},
        {tagged(worker_frame(j, 0, data_pkt(j, 0, 1, 0, 12, lanes))), 0},
        {worker_frame(j, 0, data_pkt(j, 0, 2, 0, 16, lanes)), 0},
        {worker_frame(j, 1, data_pkt(j, 1, 2, 0, 16, lanes)), 1},
    };
    std::vector<std::vector<uint8_t>> model_bytes, fast_bytes;
    std::vector<tna::BurstPacket> burst;
    for (const auto& [f, w] : frames) {
      model_bytes.push_back(f);
      fast_bytes.push_back(f);
    }
    for (std::size_t i = 0; i < frames.size(); ++i) {
      tna::BurstPacket b{};
      b.bytes = fast_bytes[i].data();
      b.len = uint16_t(fast_bytes[i].size());
      b.md.ingress_port = j.workers[frames[i].second].port;
      burst.push_back(b);
    }
    p.fast().process_burst(burst.data(), unsigned(burst.size()));
    for (std::size_t i = 0; i < frames.size(); ++i) {
      tna::IngressIntrinsicMd md;
      md.ingress_port = j.workers[frames[i].second].port;
      const Decision dm = p.model.process(model_bytes[i], md);
      const std::string what = std::string(fast::to_string(simd)) + " frame " + std::to_string(i);
      ASSERT_TRUE(same(dm, burst[i].decision)) << what << ": model " << describe(dm) << ", fast "
                                               << describe(burst[i].decision);
      ASSERT_EQ(model_bytes[i], fast_bytes[i]) << what;
    }
    ASSERT_EQ(burst[3].decision.kind, Decision::Kind::Multicast);
    EXPECT_EQ(fast_bytes[3][42 + fast::kWidth], 16);
    expect_same_cells(p, fast::to_string(simd));
  }
}

// The memo and its frame template stand for one min_width too: two DATA
// of one job and req_width that differ only in min_width (and slot) must
// not share the memo's min_units. In one burst: A (24 bits, min_width 24)
// sets the template; B asks 24 with min_width 8 where 8 bits are left,
// and is granted them (with A's min_units it would fall back); C
// completes B's slot.
TEST(AgqFastDiff, FrameTemplateFollowsTheMemosMinWidth) {
  for (fast::Simd simd : variants()) {
    Programs p(simd);
    const JobSpec j = job_spec(1, 2, 2, 1);
    ASSERT_FALSE(p.model.add_job(j));
    ASSERT_FALSE(p.fast().add_job(j));
    const std::vector<uint32_t> lanes(32, 5);
    const std::vector<std::pair<std::vector<uint8_t>, uint8_t>> frames = {
        {worker_frame(j, 0, data_pkt(j, 0, 0, 0, 24, lanes, 0, 0, 24)), 0},
        {worker_frame(j, 0, data_pkt(j, 0, 1, 0, 24, lanes, 0, 0, 8)), 0},
        {worker_frame(j, 1, data_pkt(j, 1, 1, 0, 24, lanes, 0, 0, 8)), 1},
    };
    std::vector<std::vector<uint8_t>> model_bytes, fast_bytes;
    std::vector<tna::BurstPacket> burst;
    for (const auto& [f, w] : frames) {
      model_bytes.push_back(f);
      fast_bytes.push_back(f);
    }
    for (std::size_t i = 0; i < frames.size(); ++i) {
      tna::BurstPacket b{};
      b.bytes = fast_bytes[i].data();
      b.len = uint16_t(fast_bytes[i].size());
      b.md.ingress_port = j.workers[frames[i].second].port;
      burst.push_back(b);
    }
    p.fast().process_burst(burst.data(), unsigned(burst.size()));
    for (std::size_t i = 0; i < frames.size(); ++i) {
      tna::IngressIntrinsicMd md;
      md.ingress_port = j.workers[frames[i].second].port;
      const Decision dm = p.model.process(model_bytes[i], md);
      const std::string what = std::string(fast::to_string(simd)) + " frame " + std::to_string(i);
      ASSERT_TRUE(same(dm, burst[i].decision)) << what << ": model " << describe(dm) << ", fast "
                                               << describe(burst[i].decision);
      ASSERT_EQ(model_bytes[i], fast_bytes[i]) << what;
    }
    ASSERT_EQ(burst[2].decision.kind, Decision::Kind::Multicast);
    EXPECT_EQ(fast_bytes[2][42 + fast::kWidth], 8);
    expect_same_cells(p, fast::to_string(simd));
  }
}

// locate_agq()'s untagged fast shape (three masked word compares) against
// its generic field-by-field path, on agq frames of both lane profiles,
// every other kind of traffic, and their mutations -- including single-byte
// changes at exactly the bytes the compares cover and every truncation
// around the header's end: same answer, same offsets, always.
TEST(AgqFastDiff, LocateAgqFastShapeEqualsTheGenericPath) {
  testframes::FrameGen gen(0x10CA7E);
  static const std::size_t kShapeBytes[] = {12, 13, 14, 20, 21, 23, 36, 37, 59};
  unsigned fast_hits = 0;
  auto check = [&](const std::vector<uint8_t>& f) {
    fast::AgqFrame a, b;
    const bool got = fast::locate_agq(f.data(), f.size(), a);
    const bool want = fast::locate_agq_generic(f.data(), f.size(), b);
    ASSERT_EQ(got, want) << "frame of " << f.size() << " bytes";
    if (!got) return;
    EXPECT_EQ(a.l3, b.l3);
    EXPECT_EQ(a.agq, b.agq);
    if (a.l3 == 14) ++fast_hits;
  };
  for (int i = 0; i < 200000; ++i) {
    std::vector<uint8_t> f = gen.chance(60) ? gen.agq() : gen.valid(true);
    if (gen.chance(30)) gen.mutate(f);
    check(f);
    if (HasFatalFailure()) return;
    if (f.size() > 60 && gen.chance(30)) {  // one byte the fast compares look at
      const std::size_t at = kShapeBytes[gen.below(std::size(kShapeBytes))];
      f[at] = gen.chance(50) ? uint8_t(f[at] ^ (1u << gen.below(8))) : uint8_t(gen.below(256));
      check(f);
    }
    if (f.size() > 60 && gen.chance(10)) {  // lengths around the fixed header and the lanes
      const std::size_t cut = 58 + gen.below(f.size() - 58);
      f.resize(cut);
      check(f);
    }
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(fast_hits, 50000u);  // the fast shape really was exercised
}
