#include "observe/job_meter.hpp"

#include <rte_byteorder.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "control/command_util.hpp"
#include "control/json.hpp"
#include "observe/port_hooks.hpp"
#include "proto/agq.hpp"
#include "proto/headers.hpp"

namespace agq::observe {
namespace {

using control::CommandError;
using control::Json;

constexpr const char* kUsage = "meter on | meter off | meter [--json]";
constexpr unsigned kEntries = 1024;  // job_id mod 1024
constexpr auto kLease = std::chrono::seconds(10);

struct JobCount {
  uint64_t results = 0, resent = 0, fallback_results = 0, fallback_data = 0;
  uint64_t width[9] = {};  // RESULT width / 4 (0 = PS result)
  uint64_t last_id = 0;
};

// One lcore's counts: written by that lcore only.
struct alignas(RTE_CACHE_LINE_SIZE) LcoreCounts {
  JobCount job[kEntries];
};

inline void bump(uint64_t& c) { __atomic_store_n(&c, c + 1, __ATOMIC_RELAXED); }
inline uint64_t load(const uint64_t& c) { return __atomic_load_n(&c, __ATOMIC_RELAXED); }

struct State {
  std::vector<LcoreCounts> per_lcore;  // rte_lcore_count() + 1 (last: any non-EAL thread)

  LcoreCounts& mine() {
    const int i = rte_lcore_index(int(rte_lcore_id()));
    return per_lcore[i >= 0 && size_t(i) + 1 < per_lcore.size() ? size_t(i) : per_lcore.size() - 1];
  }

  // The agq header of a frame, or null: untagged or one 802.1Q tag, IPv4
  // without options, UDP to 50100, whole header in the first segment.
  static const uint8_t* agq_header(const rte_mbuf* m) {
    const uint8_t* p = rte_pktmbuf_mtod(m, const uint8_t*);
    const uint32_t len = rte_pktmbuf_data_len(m);
    uint32_t l3 = 14;
    if (len < 14 + 20 + 8 + 20) return nullptr;
    uint16_t et = uint16_t(p[12] << 8 | p[13]);
    if (et == proto::kEtherTypeVlan) {
      et = uint16_t(p[16] << 8 | p[17]);
      l3 = 18;
    }
    if (et != proto::kEtherTypeIpv4 || len < l3 + 28 + 20) return nullptr;
    const uint8_t* ip = p + l3;
    if (ip[0] != 0x45 || ip[9] != 17) return nullptr;
    const uint8_t* udp = ip + 20;
    if (uint16_t(udp[2] << 8 | udp[3]) != proto::kAgqPort) return nullptr;
    return udp + 8;
  }

  void count(rte_mbuf** pkts, uint16_t n) {
    LcoreCounts& c = mine();
    for (uint16_t i = 0; i < n; ++i) {
      const uint8_t* h = agq_header(pkts[i]);
      if (h == nullptr) continue;
      const unsigned type = h[0] & 0x0F, flags = h[1];
      const unsigned id = unsigned(h[2] << 8 | h[3]);
      JobCount& j = c.job[id % kEntries];
      if (type == 2) {  // RESULT
        if (flags & 0x02) bump(j.resent);
        else if (flags & 0x08) bump(j.fallback_results);
        else bump(j.results);
        if (!(flags & 0x02)) bump(j.width[RTE_MIN(unsigned(h[13]) / 4, 8u)]);
      } else if (type == 4) {  // FALLBACK_DATA
        bump(j.fallback_data);
      } else {
        continue;
      }
      if (j.last_id != id) __atomic_store_n(&j.last_id, uint64_t(id), __ATOMIC_RELAXED);
    }
  }
};

uint16_t on_tx(uint16_t, uint16_t, rte_mbuf** pkts, uint16_t n, void* user) {
  static_cast<State*>(user)->count(pkts, n);
  return n;
}

}  // namespace

struct JobMeter::Impl {
  std::mutex mu;  // control thread vs the lease thread; never an lcore
  PortHooks hooks;  // first: destroyed last
  // Created at the first 'on', kept to the end (a removed callback may still
  // be counting into it); counts are cumulative, readers take differences.
  std::unique_ptr<State> state;
  State* live = nullptr;
  std::vector<PortHooks::Set> sets;
  std::chrono::steady_clock::time_point last_read, since;
  std::atomic<bool> quit{false};
  std::thread lease;

  ~Impl() {
    quit = true;
    if (lease.joinable()) lease.join();
  }

  void off_locked() {
    for (auto& s : sets) hooks.remove(s);
    sets.clear();
    live = nullptr;
  }

  void on_locked() {
    last_read = std::chrono::steady_clock::now();
    if (live) return;  // renewed
    if (!state) {
      state = std::make_unique<State>();
      state->per_lcore.resize(rte_lcore_count() + 1);
    }
    uint16_t port;
    try {
      RTE_ETH_FOREACH_DEV(port) sets.push_back(hooks.install(port, nullptr, on_tx, state.get()));
    } catch (...) {
      off_locked();
      throw;
    }
    live = state.get();
    since = last_read;
    if (!lease.joinable()) lease = std::thread([this] { lease_loop(); });
  }

  void lease_loop() {
    while (!quit.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      std::lock_guard g(mu);
      if (live && std::chrono::steady_clock::now() - last_read > kLease) off_locked();
    }
  }

  Json read_locked() {
    last_read = std::chrono::steady_clock::now();
    Json jobs = Json::array();
    if (live) {
      for (unsigned e = 0; e < kEntries; ++e) {
        JobCount sum;
        for (const auto& l : live->per_lcore) {
          const JobCount& j = l.job[e];
          sum.results += load(j.results);
          sum.resent += load(j.resent);
          sum.fallback_results += load(j.fallback_results);
          sum.fallback_data += load(j.fallback_data);
          for (int k = 0; k < 9; ++k) sum.width[k] += load(j.width[k]);
          if (load(j.last_id)) sum.last_id = load(j.last_id);
        }
        if (sum.results + sum.resent + sum.fallback_results + sum.fallback_data == 0) continue;
        Json widths = Json::object();
        for (int k = 0; k < 9; ++k)
          if (sum.width[k]) widths[std::to_string(4 * k)] = sum.width[k];
        jobs.push_back(Json{{"id", sum.last_id},
                            {"result_frames", sum.results},
                            {"resent", sum.resent},
                            {"fallback_results", sum.fallback_results},
                            {"fallback_data", sum.fallback_data},
                            {"widths", widths}});
      }
    }
    const double age = live ? std::chrono::duration<double>(last_read - since).count() : 0.0;
    return Json{{"on", live != nullptr}, {"seconds", age}, {"jobs", jobs}};
  }
};

JobMeter::JobMeter() : impl_(std::make_unique<Impl>()) {}
JobMeter::~JobMeter() = default;

std::string JobMeter::command(const std::vector<std::string>& w, bool json) {
  control::check_arg_count(w, 1, 2, kUsage);
  std::lock_guard g(impl_->mu);
  if (w.size() == 2) {
    if (w[1] == "on") impl_->on_locked();
    else if (w[1] == "off") impl_->off_locked();
    else throw CommandError{"unknown meter subcommand '" + w[1] + "'", kUsage};
    return "";
  }
  const Json j = impl_->read_locked();
  if (json) return j.dump() + "\n";
  std::string out = std::string("meter ") + (j["on"].get<bool>() ? "on" : "off") + "\n";
  control::Columns t;
  t.row({"job", "result_frames", "resent", "fallback_results", "fallback_data", "widths"});
  for (const auto& r : j["jobs"]) {
    std::string widths;
    for (const auto& [k, v] : r["widths"].items()) widths += (widths.empty() ? "" : " ") + k + ":" + v.dump();
    t.row({r["id"].get<uint64_t>(), r["result_frames"].get<uint64_t>(), r["resent"].get<uint64_t>(),
           r["fallback_results"].get<uint64_t>(), r["fallback_data"].get<uint64_t>(), widths});
  }
  return out + t.render();
}

}  // namespace agq::observe
