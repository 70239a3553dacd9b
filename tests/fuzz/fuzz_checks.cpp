// The fuzz harness: see fuzz_checks.hpp for the invariants.
#include "fuzz_checks.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <string_view>

#include "../common/random_frames.hpp"
#include "pipeline/agq/agq_program.hpp"
#include "pipeline/agq_fast/agq_fast_program.hpp"
#include "pipeline/classic/classic_program.hpp"
#include "pipeline/parser.hpp"
#include "pipeline/reference/classic_reference.hpp"
#include "tna/pre.hpp"

namespace agq::fuzz {

namespace {

using pipeline::DropReason;
using pipeline::ParserError;
using pipeline::agq::AgqDrop;

constexpr uint32_t kClassicCapacity = 64;
constexpr uint16_t kJobA = 1, kJobB = 2;
constexpr unsigned kAgqWorkers = 4;

void require(bool ok, const std::string& what) {
  if (!ok) throw FuzzFailure(what);
}

std::string describe(const tna::Decision& d) {
  return "kind " + std::to_string(int(d.kind)) + " port " + std::to_string(d.port) + " group " +
         std::to_string(d.group) + " exclude " + std::to_string(d.exclude_port) + " reason " +
         std::to_string(d.drop_reason);
}
bool same(const tna::Decision& a, const tna::Decision& b) {
  return a.kind == b.kind && a.port == b.port && a.group == b.group && a.exclude_port == b.exclude_port &&
         a.drop_reason == b.drop_reason;
}

uint64_t counter(const tna::Program& p, std::string_view name) {
  uint64_t v = 0;
  bool found = false;
  p.visit_counters([&](std::string_view n, uint64_t x) {
    if (n == name) v = x, found = true;
  });
  require(found, "no counter " + std::string(name));
  return v;
}

std::vector<std::pair<std::string, uint64_t>> counters(const tna::Program& p) {
  std::vector<std::pair<std::string, uint64_t>> v;
  p.visit_counters([&](std::string_view n, uint64_t x) { v.emplace_back(n, x); });
  return v;
}

const testframes::Universe& universe() {
  static const testframes::Universe u = [] {
    testframes::Universe x;
    x.classic_slots = kClassicCapacity + 8;
    x.agq_jobs = {kJobA, kJobB, 3};  // 3 is unknown
    x.agq_workers = kAgqWorkers;
    x.agq_slots = 20;  // past the jobs' 16 slots now and then
    return x;
  }();
  return u;
}

pipeline::agq::JobSpec agq_job(uint16_t id) {
  pipeline::agq::JobSpec j;
  j.job_id = id;
  j.num_workers = kAgqWorkers;
  testframes::FrameGen names(0, universe());
  for (unsigned w = 0; w < kAgqWorkers; ++w)
    j.workers.push_back({uint8_t(w), tna::PortId(w), names.host(w), names.station(w)});
  j.slots = 16;
  j.rows = 4;
  j.ps_port = 4;
  j.ps_ipv4 = names.host(7);
  j.ps_mac = names.station(7);
  return j;
}

}  // namespace

struct FuzzHarness::Impl {
  Impl()
      : classic(cfg(), pipeline::ForwardingConfig{}, pre_classic),
        classic_ref(cfg(), pipeline::ForwardingConfig{}, pre_ref) {
    // Both agq programs: the TNA model and the fast one the switch runs.
    agqs.push_back({std::make_unique<tna::ReplicationEngine>(), nullptr});
    agqs.back().prog = std::make_unique<pipeline::agq::AgqProgram>(pipeline::agq::AgqConfig{16, 64},
                                                                   pipeline::ForwardingConfig{}, *agqs.back().pre);
    agqs.push_back({std::make_unique<tna::ReplicationEngine>(), nullptr});
    agqs.back().prog = std::make_unique<pipeline::agq::fast::AgqFastProgram>(
        pipeline::agq::AgqConfig{16, 64}, pipeline::ForwardingConfig{}, *agqs.back().pre);
    testframes::FrameGen names(0, universe());
    auto setup = [&](auto& f) {
      f.add_static_mac(names.station(0), 1);
      f.add_route(names.host(1), 2);
      f.add_arp_proxy(names.host(3), names.station(5));
    };
    setup(classic.forwarding());
    setup(classic_ref.forwarding());
    for (auto& a : agqs) {
      setup(a.prog->forwarding());
      for (uint16_t id : {kJobA, kJobB})
        if (auto err = a.prog->add_job(agq_job(id))) throw FuzzFailure("add_job: " + *err);
    }
  }

  static pipeline::classic::ClassicConfig cfg() { return {1, {2, 3}, kClassicCapacity}; }

  // Classic registers as one vector (seq slots then aggregators).
  std::vector<uint64_t> classic_cells() const {
    std::vector<uint64_t> v;
    v.reserve(2 * kClassicCapacity * 2);
    for (uint32_t i = 0; i < kClassicCapacity; ++i) {
      const auto s = classic.seq_slot(i);
      v.push_back(uint64_t(s.job_and_seq) << 16 | uint64_t(s.start_posi) << 8 | s.worker_agg);
      const auto a = classic.aggregator(i);
      v.push_back(uint64_t(a.insert_posi) << 8 | a.data_isEmpty);
      for (uint32_t r : a.reg) v.push_back(r);
    }
    return v;
  }

  // Every cell of one agq job (its rows and their slots).
  static pipeline::SwitchProgram::NamedCells job_cells(const pipeline::agq::AgqSwitchProgram& agq, uint16_t id) {
    pipeline::SwitchProgram::NamedCells out;
    const auto p = agq.placement(id);
    if (!p) return out;
    for (uint32_t row = p->row_base; row < p->row_base + p->rows; ++row) {
      auto cells = agq.dump_aggregator(row);
      out.insert(out.end(), cells.begin(), cells.end());
    }
    return out;
  }

  static uint64_t agq_drops(const pipeline::agq::AgqSwitchProgram& agq) {
    uint64_t n = 0;
    for (const char* c : {"drops_agq_malformed", "drops_agq_unknown_job", "drops_agq_bad_worker",
                          "drops_agq_bad_slot", "drops_agq_bad_width"})
      n += counter(agq, c);
    return n;
  }

  struct Agq {
    std::unique_ptr<tna::ReplicationEngine> pre;
    std::unique_ptr<pipeline::agq::AgqSwitchProgram> prog;
  };

  tna::ReplicationEngine pre_classic, pre_ref;
  pipeline::classic::ClassicProgram classic;
  pipeline::reference::ClassicReference classic_ref;
  std::vector<Agq> agqs;
};

FuzzHarness::FuzzHarness() : impl_(std::make_unique<Impl>()) {}
FuzzHarness::~FuzzHarness() = default;

void FuzzHarness::check(std::span<const uint8_t> frame, uint16_t port, uint64_t now_ns) {
  Impl& s = *impl_;
  ++stats_.frames;
  tna::IngressIntrinsicMd md;
  md.ingress_port = port;
  md.ingress_mac_tstamp_ns = now_ns;

  // ---- parser
  pipeline::Headers h;
  const ParserError err = pipeline::parse(frame, h);
  pipeline::FrameView v;
  require(pipeline::parse_view(frame.data(), frame.size(), v) == err, "parser: parse_view error differs");
  if (err == ParserError::None) {
    require(v.vlan_valid == h.vlan_valid && v.ipv4_valid == h.ipv4_valid && v.udp_valid == h.udp_valid &&
                v.arp_valid == h.arp_valid && v.agq_classic_valid == h.agq_classic_valid &&
                v.agq_valid == h.agq_valid && v.l3_offset == h.l3_offset && v.l4_offset == h.l4_offset &&
                v.payload_offset == h.payload_offset,
            "parser: parse_view headers differ");
  } else {
    ++stats_.parser_errors;
  }

  // ---- classic: fast == reference, and registers only for classic AGQ
  {
    const std::vector<uint64_t> before = s.classic_cells();
    const uint64_t errors_before = counter(s.classic, "parser_errors");
    std::vector<uint8_t> a(frame.begin(), frame.end()), b = a;
    const tna::Decision d = s.classic.process(a, md);
    const tna::Decision want = s.classic_ref.process(b, md);
    require(same(d, want), "classic: decision " + describe(d) + ", reference " + describe(want));
    require(a == b, "classic: output bytes differ from the reference");
    const bool classic_agq = err == ParserError::None && h.agq_classic_valid;
    stats_.classic_frames += classic_agq;
    if (err != ParserError::None) {
      require(d.kind == tna::Decision::Kind::Drop && d.drop_reason == uint16_t(DropReason::ParserError),
              "classic: a parser error was not dropped as one");
      require(counter(s.classic, "parser_errors") == errors_before + 1, "classic: parser error not counted");
    }
    if (!classic_agq) require(s.classic_cells() == before, "classic: a frame that is not classic AGQ changed a register");
    if (stats_.frames % 512 == 0) check_classic_state();
  }

  // ---- agq: jobs isolated, malformed counted and harmless
  for (Impl::Agq& A : s.agqs) {
    pipeline::agq::AgqSwitchProgram& agq = *A.prog;
    const std::string who = A.prog.get() == s.agqs.front().prog.get() ? "agq model: " : "agq fast: ";
    const auto cells_a = Impl::job_cells(agq, kJobA), cells_b = Impl::job_cells(agq, kJobB);
    const uint64_t errors_before = counter(agq, "parser_errors");
    const uint64_t drops_before = Impl::agq_drops(agq);
    std::vector<uint8_t> a(frame.begin(), frame.end());
    const tna::Decision d = agq.process(a, md);
    if (d.kind == tna::Decision::Kind::Unicast) require(d.port != tna::kNoPort, who + "unicast to no port");
    if (d.kind == tna::Decision::Kind::Multicast) {
      require(d.group == pipeline::Forwarding::kFloodGroup || (*A.pre).has_group(d.group),
              who + "multicast to a group that does not exist");
      if (agq.has_egress())
        for (const tna::Replica& r : (*A.pre).members(d.group)) {
          std::vector<uint8_t> copy = a;
          agq.egress(copy, r.port, r.rid);
        }
    }
    const bool untouched_a = Impl::job_cells(agq, kJobA) == cells_a, untouched_b = Impl::job_cells(agq, kJobB) == cells_b;
    if (err != ParserError::None) {
      require(d.kind == tna::Decision::Kind::Drop, who + "a parser error was not dropped");
      require(counter(agq, "parser_errors") == errors_before + 1, who + "parser error not counted");
      require(untouched_a && untouched_b, who + "a frame the parser rejected changed a job's registers");
    } else if (!h.agq_valid) {
      require(untouched_a && untouched_b, who + "ordinary traffic changed a job's registers");
    } else {
      stats_.agq_frames += A.prog.get() == s.agqs.front().prog.get();
      const uint16_t job = h.agq.job_id;
      const bool rejected = d.kind == tna::Decision::Kind::Drop && d.drop_reason >= uint16_t(AgqDrop::Malformed) &&
                            d.drop_reason <= uint16_t(AgqDrop::BadWidth);
      if (rejected) {
        ++stats_.agq_rejected;
        require(Impl::agq_drops(agq) == drops_before + 1, who + "a rejected frame was not counted under its drop reason");
        require(untouched_a && untouched_b, who + "a rejected frame (drop " + std::to_string(d.drop_reason) +
                                                ") changed a job's registers");
      } else {
        ++stats_.agq_accepted;
      }
      if (job != kJobA) require(untouched_a, who + "a frame of job " + std::to_string(job) + " changed job 1");
      if (job != kJobB) require(untouched_b, who + "a frame of job " + std::to_string(job) + " changed job 2");
    }
  }
}

void FuzzHarness::churn_jobs() {
  Impl& s = *impl_;
  ++stats_.job_churns;
  for (Impl::Agq& A : s.agqs) {
    const auto cells_a = Impl::job_cells(*A.prog, kJobA);
    require(A.prog->remove_job(kJobB), "agq: remove_job failed");
    require(Impl::job_cells(*A.prog, kJobA) == cells_a, "agq: removing job 2 changed job 1");
    if (auto err = A.prog->add_job(agq_job(kJobB))) throw FuzzFailure("agq: re-adding job 2: " + *err);
    require(Impl::job_cells(*A.prog, kJobA) == cells_a, "agq: adding job 2 changed job 1");
  }
}

void FuzzHarness::check_classic_state() {
  Impl& s = *impl_;
  for (uint32_t i = 0; i < kClassicCapacity; ++i) {
    const auto a = s.classic.seq_slot(i), b = s.classic_ref.seq_slot(i);
    require(a.job_and_seq == b.job_and_seq && a.start_posi == b.start_posi && a.worker_agg == b.worker_agg,
            "classic: seq slot " + std::to_string(i) + " differs from the reference");
    const auto x = s.classic.aggregator(i), y = s.classic_ref.aggregator(i);
    require(x.insert_posi == y.insert_posi && x.data_isEmpty == y.data_isEmpty && x.reg == y.reg,
            "classic: aggregator " + std::to_string(i) + " differs from the reference");
  }
  require(counters(s.classic) == counters(s.classic_ref), "classic: counters differ from the reference");
}

std::vector<std::vector<uint8_t>> FuzzHarness::seed_frames() {
  testframes::FrameGen g(1, universe());
  std::vector<std::vector<uint8_t>> out;
  for (int i = 0; i < 64; ++i) out.push_back(g.valid(i % 2 == 0));
  return out;
}

}  // namespace agq::fuzz
