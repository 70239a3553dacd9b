// bench_gen: the benchmarks' traffic source and sink, built on the project's
// dataplane library (agq::dataplane::Ports), so it runs on any port DPDK
// gives it; the benchmarks use two memif client ports.
//
//   bench_gen [EAL] -- --traffic l2|classic|agq [--seconds S] [--warmup S]
//                      [--rate-mpps R] [--burst N] [--window N] [--workers N]
//                      [--width BITS] [--rows R] [--queues Q] [--no-rx] [--reuse] [--linger S]
//                      [--cpu-of TID[,TID...]]
//   bench_gen --write-pcap FILE --traffic l2|classic|agq [--stream K]
//             [--shard-mod M --shard-rem K] ...                              (no EAL)
//
// Shards (docs/PROTOCOL.md section 10): every agq DATA carries 0xC000|shard
// in its UDP source port, shard = (job_id + (slot >> row_shift)) & 0xFFF,
// row_shift from the job's slots (--window) and rows (--rows, default the
// quota run.py gives: window * width / 32); every classic frame carries its
// aggregator's shard, hash1 & 0xFFF. With --queues Q the memif ports
// get Q rings (the switch runs with --memif-queues Q) and shard k leaves on
// ring k mod Q, so a switch with L = Q lcores receives every packet on the
// lcore that owns it. --write-pcap --shard-mod M --shard-rem K keeps only the
// frames with shard % M == K: one pcap per rx queue, steered as a NIC would.
//
// It sends the traffic's frames cyclically on port 0 (open loop: as fast as
// the port takes them, or paced to R Mpps), receives on every port, and
// prints one JSON line: packets the port accepted per second (the device
// under test's input rate once it is the bottleneck), packets received back,
// and the latency distribution of the packets that came back. --no-rx never
// polls the rx queues: the device's tx toward this process then finds its
// memif rings full (the switch's tx-drop test). --linger S: after the JSON
// line, stay connected for S s (or until SIGINT), receiving and freeing, so
// that a device under test can be stopped with its memif link still up
// (testpmd's --record-core-cycles; bench/run.py's memif part).
//
// --cpu-of (the device under test's lcore threads, any process): the CPU
// time they got over exactly the measured interval, as a share of it
// ("watched_cpu" in the JSON line; /proc/<tid>/schedstat, read at the
// interval's start and end). A device whose lcores start polling only once
// its links are up (testpmd) would otherwise look starved when measured
// over the generator's whole run, its start-up and warm-up included.
//
// --reuse (throughput runs): every frame of the cycle is built once into its
// own mbuf, and sending it is a reference-count increment (the memif PMD
// copies the bytes into its ring and drops that reference); received frames
// are counted and freed in bulk without being read. No allocation, copy or
// stamp per packet: the generator's own cost per packet is the memif copies,
// so it can outrun the device under test (with a zero-copy memif client --
// zero-copy=yes, hugepages -- not even those). No latency samples then.
//
// Latency: every frame carries a magic word and the TSC at tx (written just
// before rte_eth_tx_burst) in bytes the device under test leaves alone (UDP
// payload for l2; data4..5 of the AGQ header for classic, which the classic
// pipeline passes through, also in completions and ACKs). The receiver reads
// the TSC on the same core, so the number is tx-burst -> device -> rx-burst:
// both memif copies, the device's polling and processing, and this process's
// own poll interval (one loop round, well under a microsecond at low load).
//
// Classic traffic is a cycle that leaves the switch as it found it: for each
// of `window` slots, `workers` contributions (the first allocates the slot),
// then the PS's ACK for every slot. The generator plays workers and PS at
// once; completions come back on the PS port, ACKs on the worker port.
//
// agq traffic (docs/PROTOCOL.md) is DATA of job k + 1 for stream k: N =
// `workers` logical workers behind the one port the stream enters on, worker
// w at IPv4 10.200.k.(w+1), MAC 02:00:c8:k:00:w (run.py writes the matching
// [[job]]: `window` slots, rows for `width`-bit windows). A cycle is two
// uses of every slot (version 0, then 1), worker by worker over the window,
// as workers with a full window send; the next cycle's version 0 is the next
// use of each slot, so every sequence allocates (2 passes), aggregates and
// ends in a RESULT multicast to the N workers (N replicas back on the
// stream's port). Latency for agq: DATA carries the low 32 bits of the TSC
// in `seq`, echoed in the RESULT (made from the completing DATA; the switch
// writes its boot epoch at offset 18, so nothing of ours lives there), and
// every agq RESULT of our jobs is a sample: the completing contribution's tx
// burst -> its RESULT replica's rx burst.
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "dataplane/port_readers.hpp"
#include "dataplane/ports.hpp"
#include "proto/agq.hpp"
#include "proto/frame.hpp"

namespace {

using Frame = std::vector<uint8_t>;

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) { g_stop.store(true); }

constexpr uint64_t kMagic = 0x41475142454e4348ull;  // "AGQBENCH"
constexpr int kFrameLen = 115;                       // the classic AGQ frame: same size for both traffics

struct Opts {
  std::string traffic = "l2";
  std::string write_pcap;
  unsigned stream = 0;  // pcap replay: stream k uses its own slots / MACs
  double seconds = 5, warmup = 1;
  double rate_mpps = 0;  // 0: as fast as the port accepts
  unsigned burst = 32;
  unsigned window = 256, workers = 2;
  unsigned width = 16;  // agq: req_width in bits
  unsigned rows = 0;    // agq: the job's row quota; 0 = window * width / 32
  unsigned queues = 1;  // memif rings per port; shard k leaves on ring k % queues
  unsigned shard_mod = 0, shard_rem = 0;  // --write-pcap: keep shard % mod == rem
  double linger = 0;    // --linger: seconds to stay connected after the report
  bool no_rx = false;   // never receive: the device under test's tx toward us fills and must drop
  bool reuse = false;   // throughput only: prebuilt mbufs sent again and again (no alloc, no copy, no stamp)
  std::vector<unsigned> cpu_of;  // thread ids whose CPU time over the measured interval is reported
  size_t max_samples = 4u << 20;
};

agq::proto::UdpFrameSpec spec(unsigned stream) {
  agq::proto::UdpFrameSpec s;
  // The bench configurations have a static MAC entry 02:..:02 -> port 1
  // (memif) and 02:00:00:00:0k:02 -> the stream's sink port (pcap).
  s.dst_mac = {0x02, 0, 0, 0, uint8_t(stream), 0x02};
  s.src_mac = {0x02, 0, 0, 0, uint8_t(stream), 0x01};
  s.src_ip = 0x0A020201;
  s.dst_ip = 0x0A020264;
  return s;
}

// Where the stamp lives: UDP payload +20 for l2, AGQ data4 for classic;
// agq: seq (32-bit TSC) of a RESULT (type: low nibble of byte 0; job_id: bytes 2..3).
constexpr int kPayloadOff = 14 + 20 + 8;
constexpr int kStampOffL2 = kPayloadOff + 20;
constexpr int kStampOffAgq = kPayloadOff + 4 + 4 * 4;
constexpr int kAgqTypeOff = kPayloadOff;
constexpr int kAgqJobOff = kPayloadOff + 2;
constexpr int kAgqSeqOff = kPayloadOff + 8;

// The job's row_shift (docs/PROTOCOL.md section 3): the smallest s with
// ceil(slots / 2^s) <= rows.
unsigned row_shift(const Opts& o) {
  const unsigned rows = o.rows ? o.rows : std::max(1u, o.window * o.width / 32);
  unsigned s = 0;
  while (((o.window + (1u << s) - 1) >> s) > rows) ++s;
  return s;
}

uint32_t shard_of(unsigned job, unsigned slot, unsigned shift) { return (job + (slot >> shift)) & 0x0FFFu; }

// agq addresses of stream k: 10.200.k.host; worker w is host w + 1, the PS
// 254 (run.py's [[job]] uses the same).
uint32_t agq_ip(unsigned stream, unsigned host) { return 0x0AC80000u | stream << 8 | host; }

// Frames in cycle order, and the shard of each (0 for shard-less traffic).
std::vector<Frame> make_agq_frames(const Opts& o, std::vector<uint32_t>* shards) {
  std::vector<Frame> out;
  const unsigned shift = row_shift(o);
  unsigned g = 0;
  while ((1u << g) < o.workers) ++g;
  const unsigned b = o.width - g;
  uint32_t x = 12345;
  for (unsigned v = 0; v < 2; ++v)
    for (unsigned w = 0; w < o.workers; ++w)
      for (unsigned slot = 0; slot < o.window; ++slot) {
        agq::proto::UdpFrameSpec sp;
        sp.dst_mac = {0x02, 0, 0xc8, uint8_t(o.stream), 0, 0xfe};
        sp.src_mac = {0x02, 0, 0xc8, uint8_t(o.stream), 0, uint8_t(w)};
        sp.src_ip = agq_ip(o.stream, w + 1);
        sp.dst_ip = agq_ip(o.stream, 254);
        const uint32_t shard = shard_of(o.stream + 1, slot, shift);
        if (o.shard_mod && shard % o.shard_mod != o.shard_rem) continue;
        sp.src_port = uint16_t(0xC000u | shard);
        sp.dst_port = agq::proto::kAgqPort;
        agq::proto::Agq a;
        a.flags = uint8_t(v);
        a.job_id = uint16_t(o.stream + 1);
        a.worker_id = uint8_t(w);
        a.num_workers = uint8_t(o.workers);
        a.slot = uint16_t(slot);
        a.seq = v * o.window + slot;
        a.req_width = uint8_t(o.width);
        a.width = uint8_t(o.width);  // min_width = the request, as the workers send it (PROTOCOL §5)
        for (auto& l : a.lanes) {
          x = x * 1103515245u + 12345u;  // any values: the switch masks them to b bits
          l = b >= 32 ? x : x & ((1u << b) - 1);
        }
        uint8_t payload[agq::proto::Agq::kLen];
        a.encode(payload);
        out.push_back(agq::proto::build_udp_frame(sp, payload));
        if (shards) shards->push_back(shard);
      }
  return out;
}

// A classic frame carries its aggregator's shard in the UDP source port
// (docs/PROTOCOL.md section 10); --shard-mod keeps the shards of one queue.
bool keep_classic(const Opts& o, agq::proto::UdpFrameSpec& sp, const agq::proto::AgqClassic& a,
                  std::vector<uint32_t>* shards) {
  const uint32_t shard = agq::proto::classic_shard(a.hash1);
  if (o.shard_mod && shard % o.shard_mod != o.shard_rem) return false;
  sp.src_port = agq::proto::shard_port(shard);
  if (shards) shards->push_back(shard);
  return true;
}

std::vector<Frame> make_frames(const Opts& o, std::vector<uint32_t>* shards = nullptr) {
  std::vector<Frame> out;
  const auto base = spec(o.stream);
  const auto& sp = base;
  if (o.traffic == "l2") {
    std::vector<uint8_t> payload(kFrameLen - kPayloadOff, 0);
    auto s = sp;
    s.dst_port = 9000;  // not an AGQ port: ordinary switching
    out.push_back(agq::proto::build_udp_frame(s, payload));
    return out;
  }
  if (o.traffic == "agq") return make_agq_frames(o, shards);
  // classic: slots of stream k are k*window .. (k+1)*window-1, so replayed
  // streams on different lcores never share a slot.
  for (unsigned w = 0; w < o.workers; ++w)
    for (unsigned slot = 0; slot < o.window; ++slot) {
      auto sp = base;
      agq::proto::AgqClassic a;
      const unsigned h1 = o.stream * o.window + slot;
      a.job_and_seq = uint16_t((o.stream + 1) << 11 | 1);
      a.worker_id = uint8_t(w);
      a.total_workers = uint8_t(o.workers);
      for (int k = 0; k < 4; ++k) a.data[k] = (slot * 7 + w * 13 + unsigned(k)) << 8;  // small: no carries
      a.hash1 = uint16_t(h1);
      a.hash_id = uint16_t(h1 << 3);
      if (!keep_classic(o, sp, a, shards)) continue;
      out.push_back(agq::proto::build_agq_classic_frame(sp, a));
    }
  for (unsigned slot = 0; slot < o.window; ++slot) {
    auto sp = base;
    agq::proto::AgqClassic a;
    const unsigned h1 = o.stream * o.window + slot;
    a.job_and_seq = uint16_t((o.stream + 1) << 11 | 1);
    a.total_workers = uint8_t(o.workers);
    a.is_ack = 1;
    a.hash1 = uint16_t(h1);
    a.hash_id = uint16_t(h1 << 3);
    if (!keep_classic(o, sp, a, shards)) continue;
    out.push_back(agq::proto::build_agq_classic_frame(sp, a));
  }
  return out;
}

int write_pcap(const Opts& o) {
  FILE* f = std::fopen(o.write_pcap.c_str(), "wb");
  if (!f) {
    std::perror(o.write_pcap.c_str());
    return 1;
  }
  // libpcap file format: global header (magic, v2.4, snaplen, LINKTYPE_ETHERNET).
  const uint32_t gh[6] = {0xa1b2c3d4u, 0x00040002u, 0, 0, 65535, 1};
  std::fwrite(gh, sizeof gh, 1, f);
  uint32_t usec = 0;
  for (const Frame& fr : make_frames(o)) {
    const uint32_t rh[4] = {0, usec++, uint32_t(fr.size()), uint32_t(fr.size())};
    std::fwrite(rh, sizeof rh, 1, f);
    std::fwrite(fr.data(), fr.size(), 1, f);
  }
  return std::fclose(f) == 0 ? 0 : 1;
}

// CPU time (ns) the threads got so far: the first field of their
// /proc/<tid>/schedstat; -1 when one is gone (the device under test exited).
int64_t threads_cpu_ns(const std::vector<unsigned>& tids) {
  int64_t total = 0;
  for (unsigned tid : tids) {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%u/schedstat", tid);
    FILE* f = std::fopen(path, "r");
    if (!f) return -1;
    unsigned long long ns = 0;
    const int got = std::fscanf(f, "%llu", &ns);
    std::fclose(f);
    if (got != 1) return -1;
    total += int64_t(ns);
  }
  return total;
}

bool parse_args(int argc, char** argv, Opts& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_gen: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--traffic") o.traffic = next();
    else if (a == "--write-pcap") o.write_pcap = next();
    else if (a == "--stream") o.stream = unsigned(std::atoi(next()));
    else if (a == "--seconds") o.seconds = std::atof(next());
    else if (a == "--warmup") o.warmup = std::atof(next());
    else if (a == "--rate-mpps") o.rate_mpps = std::atof(next());
    else if (a == "--burst") o.burst = unsigned(std::atoi(next()));
    else if (a == "--window") o.window = unsigned(std::atoi(next()));
    else if (a == "--workers") o.workers = unsigned(std::atoi(next()));
    else if (a == "--width") o.width = unsigned(std::atoi(next()));
    else if (a == "--rows") o.rows = unsigned(std::atoi(next()));
    else if (a == "--queues") o.queues = unsigned(std::atoi(next()));
    else if (a == "--shard-mod") o.shard_mod = unsigned(std::atoi(next()));
    else if (a == "--shard-rem") o.shard_rem = unsigned(std::atoi(next()));
    else if (a == "--no-rx") o.no_rx = true;
    else if (a == "--linger") o.linger = std::atof(next());
    else if (a == "--reuse") o.reuse = true;
    else if (a == "--cpu-of") {
      for (const char* t = next(); *t;) {
        char* end = nullptr;
        const unsigned long tid = std::strtoul(t, &end, 10);
        if (end == t || tid == 0 || (*end && *end != ',')) {
          std::fprintf(stderr, "bench_gen: --cpu-of wants thread ids separated by commas\n");
          return false;
        }
        o.cpu_of.push_back(unsigned(tid));
        t = *end ? end + 1 : end;
      }
    }
    else {
      std::fprintf(stderr, "bench_gen: unknown option %s\n", a.c_str());
      return false;
    }
  }
  if (o.traffic != "l2" && o.traffic != "classic" && o.traffic != "agq") {
    std::fprintf(stderr, "bench_gen: --traffic l2|classic|agq\n");
    return false;
  }
  if (o.traffic == "agq" && (o.workers > 32 || o.width < 4 || o.width > 32 || o.width % 4 || o.window > 65536)) {
    std::fprintf(stderr, "bench_gen: agq needs --workers 1..32, --width 4..32 (multiple of 4)\n");
    return false;
  }
  if (o.queues < 1 || o.queues > 16 || (o.shard_mod && o.shard_rem >= o.shard_mod)) {
    std::fprintf(stderr, "bench_gen: --queues 1..16, --shard-rem < --shard-mod\n");
    return false;
  }
  o.burst = std::clamp(o.burst, 1u, 64u);
  return o.window > 0 && o.workers > 0 && o.workers < 256 && (o.traffic == "agq" || o.window * (o.stream + 1) <= 8192);
}

double percentile(std::vector<uint64_t>& v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, size_t(q * double(v.size())));
  std::nth_element(v.begin(), v.begin() + long(k), v.end());
  return double(v[k]);
}

int run(const Opts& o) {
  std::vector<uint32_t> shards;
  const std::vector<Frame> frames = make_frames(o, &shards);
  if (frames.empty()) {
    std::fprintf(stderr, "bench_gen: no frames (check --shard-mod/--shard-rem)\n");
    return 2;
  }
  agq::dataplane::PortOptions popt;
  popt.lcores = 1;
  popt.burst = uint16_t(o.burst);
  popt.with_clone_pool = false;
  popt.cancel = &g_stop;
  popt.memif_queues = uint16_t(o.queues);
  popt.extra_mbufs = o.reuse ? unsigned(frames.size()) : 0;  // the prebuilt frames
  agq::dataplane::Ports ports(popt);
  const uint16_t nports = ports.count();
  // --reuse: one mbuf per frame of the cycle, held (refcount >= 1) for the run.
  std::vector<rte_mbuf*> prebuilt;
  if (o.reuse) {
    prebuilt.resize(frames.size());
    if (rte_pktmbuf_alloc_bulk(ports.pool(), prebuilt.data(), unsigned(prebuilt.size())) != 0) {
      std::fprintf(stderr, "bench_gen: no mbufs for %zu prebuilt frames (raise EAL -m)\n", prebuilt.size());
      return 1;
    }
    for (size_t i = 0; i < frames.size(); ++i) {
      auto* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(prebuilt[i], uint16_t(frames[i].size())));
      std::memcpy(d, frames[i].data(), frames[i].size());
    }
  }
  // The tx queue of every frame: its shard's ring (shard-less traffic: 0).
  const uint16_t txq_n = ports.info(0).tx_queues;
  std::vector<uint16_t> frame_q(frames.size(), 0);
  for (size_t i = 0; i < shards.size(); ++i) frame_q[i] = uint16_t(shards[i] % txq_n);
  const bool agq_traffic = o.traffic == "agq";
  const int stamp_off = o.traffic == "l2" ? kStampOffL2 : kStampOffAgq;
  const uint64_t hz = rte_get_tsc_hz();
  const uint64_t t_start = rte_rdtsc();
  const uint64_t t_meas = t_start + uint64_t(o.warmup * double(hz));
  const uint64_t t_end = t_meas + uint64_t(o.seconds * double(hz));
  // Pacing: packets allowed so far = elapsed TSC * rate.
  const double pkts_per_tsc = o.rate_mpps > 0 ? o.rate_mpps * 1e6 / double(hz) : 0;

  std::vector<uint64_t> lat_ns;
  lat_ns.reserve(std::min<size_t>(o.max_samples, 1u << 20));
  uint64_t sent = 0, sent_meas = 0, rcvd_meas = 0, refused = 0, sent_at_meas = 0;
  bool measuring = false;
  int64_t cpu_at_meas = -1, cpu_at_end = -1;  // --cpu-of threads' CPU ns
  uint64_t tsc_at_meas = 0, tsc_at_end = 0;
  size_t next_frame = 0;
  rte_mbuf* tx[64];
  rte_mbuf* rx[64];
  uint16_t txq[64];
  rte_mbuf* per_q[16][64];
  uint16_t n_q[16];

  // A port reader while it polls: a memif peer (the switch) leaving makes
  // the PMD unmap the rings, and that unmap waits for this loop to be
  // between rounds (dataplane/port_readers.hpp, pitfall P7).
  std::optional<agq::dataplane::PortReader> reader(std::in_place);
  while (!g_stop.load(std::memory_order_relaxed)) {
    reader->quiescent();
    const uint64_t now = rte_rdtsc();
    if (now >= t_end) {
      if (!o.cpu_of.empty()) cpu_at_end = threads_cpu_ns(o.cpu_of), tsc_at_end = rte_rdtsc();
      break;
    }
    if (!measuring && now >= t_meas) {
      measuring = true;
      sent_at_meas = sent;
      if (!o.cpu_of.empty()) cpu_at_meas = threads_cpu_ns(o.cpu_of), tsc_at_meas = rte_rdtsc();
    }
    unsigned want = o.burst;
    if (pkts_per_tsc > 0) {
      const double allowed = double(now - t_start) * pkts_per_tsc - double(sent);
      want = allowed < 1 ? 0 : unsigned(std::min<double>(allowed, o.burst));
    }
    if (want && o.reuse) {
      for (unsigned i = 0; i < want; ++i) {
        tx[i] = prebuilt[next_frame];
        txq[i] = frame_q[next_frame];
        rte_mbuf_refcnt_update(tx[i], 1);  // the PMD's free takes this reference back
        if (++next_frame == frames.size()) next_frame = 0;
      }
    } else if (want && rte_pktmbuf_alloc_bulk(ports.pool(), tx, want) == 0) {
      for (unsigned i = 0; i < want; ++i) {
        const Frame& f = frames[next_frame];
        txq[i] = frame_q[next_frame];
        if (++next_frame == frames.size()) next_frame = 0;
        auto* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(tx[i], uint16_t(f.size())));
        std::memcpy(d, f.data(), f.size());
        if (!agq_traffic) std::memcpy(d + stamp_off, &kMagic, 8);
      }
      const uint64_t stamp = rte_rdtsc();
      const uint32_t stamp32 = uint32_t(stamp);
      for (unsigned i = 0; i < want; ++i) {
        uint8_t* d = rte_pktmbuf_mtod(tx[i], uint8_t*);
        if (agq_traffic) std::memcpy(d + kAgqSeqOff, &stamp32, 4);
        else std::memcpy(d + stamp_off + 8, &stamp, 8);
      }
    } else {
      want = 0;  // pool empty: try again next round
    }
    if (want) {
      if (txq_n == 1) {
        const uint16_t ok = rte_eth_tx_burst(0, 0, tx, uint16_t(want));
        // Unsent frames go back to the pool and the cycle position rewinds, so
        // the classic cycle stays in order (an ACK never overtakes its data).
        if (ok < want) {
          rte_pktmbuf_free_bulk(tx + ok, want - ok);
          refused += want - ok;
          next_frame = (next_frame + frames.size() - (want - ok) % frames.size()) % frames.size();
        }
        sent += ok;
      } else {
        // One ring per shard class (agq only: sequences are independent, so
        // a refused frame is simply not sent; the next cycle uses its slot).
        std::fill(n_q, n_q + txq_n, uint16_t(0));
        for (unsigned i = 0; i < want; ++i) per_q[txq[i]][n_q[txq[i]]++] = tx[i];
        for (uint16_t q = 0; q < txq_n; ++q) {
          if (!n_q[q]) continue;
          const uint16_t ok = rte_eth_tx_burst(0, q, per_q[q], n_q[q]);
          if (ok < n_q[q]) {
            rte_pktmbuf_free_bulk(per_q[q] + ok, n_q[q] - ok);
            refused += n_q[q] - ok;
          }
          sent += ok;
        }
      }
    }
    for (uint16_t p = 0; p < nports && !o.no_rx; ++p)
    for (uint16_t q = 0; q < ports.info(p).rx_queues; ++q) {
      const uint16_t n = rte_eth_rx_burst(p, q, rx, 64);
      if (!n) continue;
      if (o.reuse) {  // throughput only: count, do not read
        if (measuring) rcvd_meas += n;
        rte_pktmbuf_free_bulk(rx, n);
        continue;
      }
      const uint64_t t_rx = rte_rdtsc();
      for (uint16_t i = 0; i < n; ++i) {
        const uint8_t* d = rte_pktmbuf_mtod(rx[i], const uint8_t*);
        uint64_t magic = 0, stamp = 0;
        if (agq_traffic) {
          // A RESULT of this stream's job (or its DATA itself, echoed by a
          // plain forwarder): its seq is the
          // TSC of the completing DATA. 32-bit TSC: exact for latencies below
          // 2^32 cycles (> 1 s here).
          const uint8_t type = d[kAgqTypeOff] & 0x0F;  // RESULT from a switch, DATA from a forwarder (testpmd)
          if (rx[i]->data_len >= kAgqSeqOff + 4 &&
              (type == uint8_t(agq::proto::AgqType::Result) || type == uint8_t(agq::proto::AgqType::Data)) &&
              (unsigned(d[kAgqJobOff]) << 8 | d[kAgqJobOff + 1]) == o.stream + 1) {
            uint32_t s32;
            std::memcpy(&s32, d + kAgqSeqOff, 4);
            magic = kMagic;
            stamp = t_rx - uint32_t(uint32_t(t_rx) - s32);
          }
        } else if (rx[i]->data_len >= stamp_off + 16) {
          std::memcpy(&magic, d + stamp_off, 8);
          std::memcpy(&stamp, d + stamp_off + 8, 8);
        }
        if (measuring) {
          ++rcvd_meas;
          if (magic == kMagic && stamp <= t_rx && lat_ns.size() < o.max_samples)
            lat_ns.push_back(uint64_t(double(t_rx - stamp) * 1e9 / double(hz)));
        }
      }
      rte_pktmbuf_free_bulk(rx, n);
    }
  }
  sent_meas = sent - sent_at_meas;
  const double secs = o.seconds;
  // -1: not asked (--cpu-of), or a watched thread went away.
  const double watched = cpu_at_meas >= 0 && cpu_at_end >= cpu_at_meas && tsc_at_end > tsc_at_meas
                             ? double(cpu_at_end - cpu_at_meas) * 1e-9 / (double(tsc_at_end - tsc_at_meas) / double(hz))
                             : -1.0;
  std::printf(
      "{\"traffic\":\"%s\",\"rate_mpps_target\":%.4f,\"seconds\":%.3f,\"tx_pkts\":%llu,\"rx_pkts\":%llu,"
      "\"tx_refused\":%llu,\"tx_mpps\":%.4f,\"rx_mpps\":%.4f,\"lat_samples\":%zu,\"lat_p50_ns\":%.0f,"
      "\"lat_p99_ns\":%.0f,\"lat_p999_ns\":%.0f,\"lat_max_ns\":%.0f,\"watched_cpu\":%.4f}\n",
      o.traffic.c_str(), o.rate_mpps, secs, (unsigned long long)sent_meas, (unsigned long long)rcvd_meas,
      (unsigned long long)refused, double(sent_meas) / secs * 1e-6, double(rcvd_meas) / secs * 1e-6, lat_ns.size(),
      percentile(lat_ns, 0.50), percentile(lat_ns, 0.99), percentile(lat_ns, 0.999), percentile(lat_ns, 1.0),
      watched);
  std::fflush(stdout);
  // --linger: the report is out; stay connected, receiving (and freeing)
  // whatever still comes back, so that the device under test can be
  // stopped while its memif link is up -- testpmd prints its forward
  // statistics (--record-core-cycles) from port statistics that a memif
  // peer leaving resets.
  const uint64_t t_linger = rte_rdtsc() + uint64_t(o.linger * double(hz));
  while (o.linger > 0 && !g_stop.load(std::memory_order_relaxed) && rte_rdtsc() < t_linger) {
    reader->quiescent();
    bool any = false;
    for (uint16_t p = 0; p < nports; ++p)
      for (uint16_t q = 0; q < ports.info(p).rx_queues; ++q)
        if (const uint16_t n = rte_eth_rx_burst(p, q, rx, 64)) {
          rte_pktmbuf_free_bulk(rx, n);
          any = true;
        }
    if (!any) rte_delay_us_sleep(100);  // idle: leave the CPU to the device
  }
  reader.reset();
  rte_pktmbuf_free_bulk(prebuilt.data(), unsigned(prebuilt.size()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // --write-pcap needs no EAL: handle it before rte_eal_init sees argv.
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--write-pcap") == 0) {
      Opts o;
      if (!parse_args(argc, argv, o)) return 2;
      return write_pcap(o);
    }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::vector<char*> eal_argv(argv, argv + argc);  // rte_eal_init permutes its argv
  const int used = rte_eal_init(argc, eal_argv.data());
  if (used < 0) {
    std::fprintf(stderr, "bench_gen: EAL initialisation failed\n");
    return 1;
  }
  Opts o;
  int rc = 2;
  if (parse_args(argc - used, eal_argv.data() + used, o)) {
    try {
      rc = run(o);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_gen: %s\n", e.what());
      rc = 1;
    }
  }
  rte_eal_cleanup();
  return rc;
}
