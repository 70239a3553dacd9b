#include "control/top.hpp"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <ctime>
#include <map>
#include <stdexcept>

#include "control/columns.hpp"
#include "control/ctl_protocol.hpp"
#include "control/json.hpp"

namespace agq::control {
namespace {

volatile sig_atomic_t g_quit = 0;
extern "C" void on_quit(int) { g_quit = 1; }

Json ask(const std::string& socket, const std::string& line) {
  const CtlReply r = ctl_request(socket, line + " --json", 2000);
  if (!r.ok) throw std::runtime_error(line + ": " + r.message);
  return Json::parse(r.body);
}

// One sample of everything top shows.
struct Sample {
  std::chrono::steady_clock::time_point at;
  Json ports, counters, jobs, meter, queues;
};

Sample take(const std::string& socket) {
  Sample s;
  s.ports = ask(socket, "ports");
  s.counters = ask(socket, "counters");
  s.jobs = ask(socket, "job list");
  s.meter = ask(socket, "meter");
  s.queues = ask(socket, "queues");
  s.at = std::chrono::steady_clock::now();
  return s;
}

uint64_t u(const Json& j, const char* k) {
  auto it = j.find(k);
  return it != j.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
}

std::string rate(double v) {
  char b[32];
  if (v >= 1e9) std::snprintf(b, sizeof b, "%.2fG", v / 1e9);
  else if (v >= 1e6) std::snprintf(b, sizeof b, "%.2fM", v / 1e6);
  else if (v >= 1e4) std::snprintf(b, sizeof b, "%.1fk", v / 1e3);
  else std::snprintf(b, sizeof b, "%.0f", v);
  return b;
}

double per_s(uint64_t now, uint64_t before, double dt) { return now >= before ? double(now - before) / dt : 0.0; }

const Json* meter_job(const Json& meter, uint64_t id) {
  for (const auto& j : meter["jobs"])
    if (u(j, "id") == id) return &j;
  return nullptr;
}

std::string render(const Sample& a, const Sample& b, const std::string& socket, double interval) {
  const double dt = std::chrono::duration<double>(b.at - a.at).count();
  std::string out;
  char head[256];
  const std::time_t now = std::time(nullptr);
  char clock[16];
  std::strftime(clock, sizeof clock, "%H:%M:%S", std::localtime(&now));
  std::snprintf(head, sizeof head, "agq-switch top  %s  every %.1f s  (Ctrl-C quits)  %s\n\n", socket.c_str(), interval,
                clock);
  out += head;

  Columns p;
  p.row({"PORT", "NAME", "LINK", "RX pkt/s", "RX bit/s", "TX pkt/s", "TX bit/s", "RX drop/s", "TX drop/s"});
  for (size_t i = 0; i < b.ports.size(); ++i) {
    const Json& n = b.ports[i];
    const Json& o = i < a.ports.size() ? a.ports[i] : n;
    p.row({u(n, "port"), n.value("name", std::string()), n.value("link", std::string()),
           rate(per_s(u(n, "rx_packets"), u(o, "rx_packets"), dt)),
           rate(8 * per_s(u(n, "rx_bytes"), u(o, "rx_bytes"), dt)),
           rate(per_s(u(n, "tx_packets"), u(o, "tx_packets"), dt)),
           rate(8 * per_s(u(n, "tx_bytes"), u(o, "tx_bytes"), dt)),
           rate(per_s(u(n, "rx_dropped"), u(o, "rx_dropped"), dt)),
           rate(per_s(u(n, "tx_dropped"), u(o, "tx_dropped"), dt))});
  }
  out += p.render() + "\n";

  // Shaped ports' egress queues ([[port]] rate): depth now, rates over the interval.
  if (!b.queues.empty()) {
    Columns q;
    q.row({"QUEUE", "RATE bit/s", "DEPTH pkt", "DEPTH B", "MAX pkt", "IN pkt/s", "OUT pkt/s", "OUT bit/s", "DROP/s",
           "ECN CE/s", "NOT-ECT/s"});
    for (size_t i = 0; i < b.queues.size(); ++i) {
      const Json& n = b.queues[i];
      const Json* op = &n;
      for (const auto& x : a.queues)
        if (u(x, "port") == u(n, "port")) op = &x;
      const Json& o = *op;
      q.row({u(n, "port"), rate(double(u(n, "rate_bps"))), u(n, "depth_packets"), u(n, "depth_bytes"),
             u(n, "max_depth_packets"), rate(per_s(u(n, "enqueued_packets"), u(o, "enqueued_packets"), dt)),
             rate(per_s(u(n, "dequeued_packets"), u(o, "dequeued_packets"), dt)),
             rate(8 * per_s(u(n, "dequeued_bytes"), u(o, "dequeued_bytes"), dt)),
             rate(per_s(u(n, "dropped_packets"), u(o, "dropped_packets"), dt)),
             rate(per_s(u(n, "ecn_marked"), u(o, "ecn_marked"), dt)),
             rate(per_s(u(n, "ecn_not_ect"), u(o, "ecn_not_ect"), dt))});
    }
    out += q.render() + "\n";
  }

  Columns j;
  j.row({"JOB", "N", "LANES", "RESULTS/s", "ELEMENTS/s", "RESENT/s", "FALLBACK/s", "TO_PS/s", "WIDTHS (bits: share)"});
  for (const auto& job : b.jobs) {
    const uint64_t id = u(job, "id"), n = std::max<uint64_t>(1, u(job, "workers")), lanes = u(job, "lanes");
    // A multicast RESULT leaves once per worker; delivery "ps": once.
    const double replicas = job.value("delivery", std::string()) == "multicast" ? double(n) : 1.0;
    const Json* mb = meter_job(b.meter, id);
    const Json* ma = meter_job(a.meter, id);
    static const Json empty = Json::object();
    const Json& nb = mb ? *mb : empty;
    const Json& na = ma ? *ma : empty;
    const double results = per_s(u(nb, "result_frames"), u(na, "result_frames"), dt) / replicas;
    const double fallbacks = per_s(u(nb, "fallback_results"), u(na, "fallback_results"), dt) / replicas;
    std::string widths;
    uint64_t total = 0;
    std::map<int, uint64_t> d;
    if (mb)
      for (const auto& [k, v] : (*mb)["widths"].items()) {
        uint64_t before = 0;
        if (ma && (*ma)["widths"].contains(k)) before = (*ma)["widths"][k].get<uint64_t>();
        const uint64_t x = v.get<uint64_t>() - before;
        if (x) d[std::stoi(k)] = x;
        total += x;
      }
    for (auto it = d.rbegin(); it != d.rend(); ++it) {
      char c[32];
      const double share = 100.0 * double(it->second) / double(total);
      if (share < 1) std::snprintf(c, sizeof c, "%s%d:<1%%", widths.empty() ? "" : " ", it->first);
      else std::snprintf(c, sizeof c, "%s%d:%.0f%%", widths.empty() ? "" : " ", it->first, share);
      widths += c;
    }
    j.row({id, n, lanes, rate(results), rate(results * double(lanes)),
           rate(per_s(u(nb, "resent"), u(na, "resent"), dt)), rate(fallbacks),
           rate(per_s(u(nb, "fallback_data"), u(na, "fallback_data"), dt)), widths.empty() ? "-" : widths});
  }
  out += b.jobs.empty() ? "no agq jobs\n\n" : j.render() + "\n";

  // Drops by reason, switch-wide: every counter that names a drop, except
  // dp.program_drops (every "no output" decision, absorbed contributions too).
  Columns dr;
  dr.row({"DROPS (switch-wide)", "per s", "total"});
  for (const auto& [name, v] : b.counters.items()) {
    if (name.find("drop") == std::string::npos && name.find("errors") == std::string::npos) continue;
    if (name == "dp.program_drops") continue;
    if (!v.is_number_unsigned() || v.get<uint64_t>() == 0) continue;
    dr.row({name, rate(per_s(v.get<uint64_t>(), u(a.counters, name.c_str()), dt)), v.get<uint64_t>()});
  }
  out += dr.render();
  return out;
}

// Sleeps up to `s` seconds; false once Ctrl-C was pressed.
bool nap(double s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(s);
  while (!g_quit && std::chrono::steady_clock::now() < until) ::poll(nullptr, 0, 20);
  return !g_quit;
}

}  // namespace

int run_top(const TopOptions& opt) {
  struct sigaction sa {};
  sa.sa_handler = on_quit;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const bool tty = ::isatty(STDOUT_FILENO);
  Sample prev;
  try {
    ctl_request(opt.socket, "meter on", 2000);
    prev = take(opt.socket);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "agqctl top: %s\n", e.what());
    return 2;
  }
  if (tty) std::fputs("\x1b[?1049h\x1b[?25l", stdout);  // alternate screen, no cursor
  int rc = 0;
  std::string error;
  for (unsigned i = 0; opt.iterations == 0 || i < opt.iterations; ++i) {
    if (!nap(opt.interval_s)) break;
    Sample cur;
    try {
      cur = take(opt.socket);
      ctl_request(opt.socket, "meter on", 2000);  // renews the meter's lease
    } catch (const std::exception& e) {
      error = e.what();
      rc = 1;
      break;
    }
    const std::string screen = render(prev, cur, opt.socket, opt.interval_s);
    if (tty) {
      // Home, then every line followed by clear-to-end-of-line, then clear below.
      std::string s = "\x1b[H";
      for (size_t at = 0; at < screen.size();) {
        const size_t nl = screen.find('\n', at);
        s.append(screen, at, nl - at);
        s += "\x1b[K\n";
        at = nl + 1;
      }
      s += "\x1b[J";
      std::fputs(s.c_str(), stdout);
    } else {
      std::fputs(screen.c_str(), stdout);
      std::fputs("\n", stdout);
    }
    std::fflush(stdout);
    prev = std::move(cur);
  }
  if (tty) std::fputs("\x1b[?25h\x1b[?1049l", stdout);
  std::fflush(stdout);
  try {
    ctl_request(opt.socket, "meter off", 2000);
  } catch (const std::exception&) {
  }
  if (rc != 0) std::fprintf(stderr, "agqctl top: the switch stopped answering: %s\n", error.c_str());
  return rc;
}

}  // namespace agq::control
