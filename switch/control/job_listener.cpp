#include "control/job_listener.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "control/text.hpp"

namespace agq::control {
namespace {

constexpr const char* kOnly =
    "this endpoint is read-only and answers only 'job get ID --json' (everything else: the switch's control "
    "socket)";

std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> w;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ') ++i;
    if (i > start) w.push_back(line.substr(start, i - start));
  }
  return w;
}

std::string addr_text(const sockaddr_in& a) {
  char ip[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(a.sin_port));
}

}  // namespace

std::optional<sockaddr_in> parse_listen_address(const std::string& s, std::string& err) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos) {
    err = "'" + s + "' is not HOST:PORT (an IPv4 address and a port, e.g. 127.0.0.1:7600)";
    return std::nullopt;
  }
  const auto ip = parse_ipv4(s.substr(0, colon));
  if (!ip) {
    err = "'" + s.substr(0, colon) + "' is not an IPv4 address (a.b.c.d)";
    return std::nullopt;
  }
  const auto port = parse_uint(s.substr(colon + 1));
  if (!port || *port > 65535) {
    err = "'" + s.substr(colon + 1) + "' is not a port (0..65535)";
    return std::nullopt;
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(*ip);
  a.sin_port = htons(uint16_t(*port));
  return a;
}

JobListener::JobListener(std::string address, JobGet job_get)
    : address_(std::move(address)), job_get_(std::move(job_get)) {
  global_.tokens = kGlobalBurst;
}

JobListener::~JobListener() {
  for (auto& c : conns_) close_conn(c);
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void JobListener::start() {
  std::string err;
  const auto a = parse_listen_address(address_, err);
  if (!a) throw std::runtime_error("job endpoint: " + err);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) throw std::runtime_error("job endpoint " + address_ + ": socket: " + std::strerror(errno));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&*a), sizeof *a) != 0 || ::listen(fd, 16) != 0) {
    const int e = errno;
    ::close(fd);
    throw std::runtime_error("job endpoint " + address_ + ": cannot listen: " + std::strerror(e));
  }
  socklen_t len = sizeof bound_;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound_), &len);
  listen_fd_ = fd;
}

std::string JobListener::bound() const { return addr_text(bound_); }

void JobListener::add_fds(std::vector<pollfd>& fds) const {
  fds.push_back({listen_fd_, POLLIN, 0});
  for (const auto& c : conns_) fds.push_back({c.fd, short(c.phase == Conn::Phase::Writing ? POLLOUT : POLLIN), 0});
}

bool JobListener::take(Bucket& b, double rate, double burst, uint64_t now_ms) {
  if (b.last_ms) b.tokens = std::min(burst, b.tokens + double(now_ms - b.last_ms) * rate / 1000.0);
  b.last_ms = now_ms;
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

void JobListener::on_poll(const pollfd* fds, std::size_t n, uint64_t now_ms) {
  now_ms_ = now_ms;
  // fds[0] is the listener, then one entry per connection in conns_ order
  // (add_fds); connections accepted below are polled from the next round on.
  const std::size_t open = std::min(n ? n - 1 : 0, conns_.size());
  for (std::size_t i = 0; i < open; ++i) {
    Conn& c = conns_[i];
    const short re = fds[i + 1].revents;
    if (c.fd < 0 || re == 0) continue;
    if (c.phase == Conn::Phase::Writing) flush(c);
    else if (c.phase == Conn::Phase::Draining) drain(c);
    else on_readable(c, now_ms);
  }
  for (auto& c : conns_)
    if (c.fd >= 0 && now_ms >= c.deadline_ms) {
      if (c.phase == Conn::Phase::Reading) {
        ++c_.timed_out;
        c.deadline_ms = now_ms + 500;  // to write the error and see the client's EOF
        reply(c, "error: no complete request line within " + std::to_string(kDeadlineMs) + " ms\n");
      } else {
        close_conn(c);  // a client that does not read its answer in time loses it
      }
    }
  conns_.erase(std::remove_if(conns_.begin(), conns_.end(), [](const Conn& c) { return c.fd < 0; }), conns_.end());
  if (n && (fds[0].revents & POLLIN)) accept_all(now_ms);
}

void JobListener::accept_all(uint64_t now_ms) {
  for (;;) {
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // EAGAIN: none left (or a transient error: next round)
    Conn c;
    c.fd = fd;
    c.peer = ntohl(peer.sin_addr.s_addr);
    c.deadline_ms = now_ms + kDeadlineMs;
    // Refusals are written at once, best effort, without reading the request.
    if (conns_.size() >= kMaxConns) {
      ++c_.too_many;
      reply(c, "error: busy: " + std::to_string(kMaxConns) + " connections open, retry later\n");
      if (c.fd >= 0) close_conn(c);
      continue;
    }
    auto it = clients_.find(c.peer);
    if (it == clients_.end()) {
      if (clients_.size() >= kMaxClients) {
        // Forget the buckets that have refilled (their clients are idle).
        for (auto j = clients_.begin(); j != clients_.end();)
          j = now_ms - j->second.last_ms > uint64_t(1000 * kClientBurst / kClientRate) ? clients_.erase(j) : ++j;
      }
      if (clients_.size() < kMaxClients) it = clients_.emplace(c.peer, Bucket{kClientBurst, now_ms}).first;
    }
    const bool client_ok = it != clients_.end() && take(it->second, kClientRate, kClientBurst, now_ms);
    if (!client_ok || !take(global_, kGlobalRate, kGlobalBurst, now_ms)) {
      ++c_.rate_limited;
      reply(c, std::string("error: rate limit: at most ") +
                   (client_ok ? std::to_string(int(kGlobalRate)) + " requests per second in total"
                              : std::to_string(int(kClientRate)) + " requests per second per client") +
                   ", retry later\n");
      // Drained like an answer (its request line is unread), briefly.
      c.deadline_ms = now_ms + 200;
      if (c.fd >= 0) conns_.push_back(std::move(c));
      continue;
    }
    conns_.push_back(std::move(c));
  }
}

void JobListener::on_readable(Conn& c, uint64_t) {
  char buf[kMaxLine + 1];
  for (;;) {
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) break;  // EOF or error: answer what came (a client may shut down its side after the line)
    c.in.append(buf, size_t(n));
    if (c.in.find('\n') != std::string::npos) break;
    if (c.in.size() >= kMaxLine) {
      ++c_.oversized;
      reply(c, "error: request longer than " + std::to_string(kMaxLine) + " bytes\n");
      return;
    }
  }
  const size_t nl = c.in.find('\n');
  if (nl != std::string::npos && nl + 1 > kMaxLine) {
    ++c_.oversized;
    reply(c, "error: request longer than " + std::to_string(kMaxLine) + " bytes\n");
    return;
  }
  std::string line = c.in.substr(0, nl);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  bool served = false;
  std::string resp = answer(line, served);
  ++(served ? c_.served : c_.refused);
  reply(c, std::move(resp));
}

std::string JobListener::answer(const std::string& line, bool& served) {
  served = false;
  for (unsigned char ch : line)
    if (ch < 0x20 || ch > 0x7e) return std::string("error: not a request (bytes outside printable ASCII); ") + kOnly + "\n";
  const auto w = words_of(line);
  if (w.empty()) return std::string("error: empty request; ") + kOnly + "\n";
  if (w.size() == 4 && w[0] == "job" && w[1] == "get" && w[3] == "--json") {
    const auto id = parse_uint(w[2]);
    if (!id || *id < 1 || *id > 65535) return "error: id: '" + w[2] + "' is not a job id (1..65535)\n";
    served = true;
    return job_get_(uint16_t(*id));
  }
  std::string shown = w[0] + (w.size() > 1 ? " " + w[1] : "");
  if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
  return "error: '" + shown + "' refused: " + kOnly + "\n";
}

void JobListener::reply(Conn& c, std::string text) {
  c.out = std::move(text);
  c.sent = 0;
  c.phase = Conn::Phase::Writing;
  flush(c);
}

void JobListener::flush(Conn& c) {
  while (c.sent < c.out.size()) {
    const ssize_t n = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // POLLOUT, until the deadline
    if (n <= 0) break;
    c.sent += size_t(n);
  }
  if (c.sent < c.out.size()) {
    close_conn(c);  // the client is gone
    return;
  }
  ::shutdown(c.fd, SHUT_WR);
  c.phase = Conn::Phase::Draining;
  // A client that keeps its end open after the answer holds a connection
  // slot for 250 ms at most.
  c.deadline_ms = std::min(c.deadline_ms, now_ms_ + 250);
  drain(c);
}

void JobListener::drain(Conn& c) {
  char buf[16384];
  for (int i = 0; i < 64; ++i) {  // at most 1 MiB per round: a client that keeps sending meets its deadline
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      close_conn(c);  // EOF: the client has read its answer
      return;
    }
  }
}

void JobListener::close_conn(Conn& c) {
  if (c.fd >= 0) ::close(c.fd);
  c.fd = -1;
}

}  // namespace agq::control
