// Socket side of the control plane: creating the socket safely, the serve
// loop with its periodic MAC ageing, and tear-down. The command interpreter
// lives in commands.cpp.
#include "control/control_plane.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "control/ctl_protocol.hpp"

namespace agq::control {
namespace {

// Suffix of the name the socket is bound under before it is renamed into
// place (see start()).
constexpr const char* kTmpSuffix = ".new";

[[noreturn]] void fail(const std::string& path, const std::string& what, int err = 0) {
  throw std::runtime_error("control socket " + path + ": " + what + (err ? std::string(": ") + std::strerror(err) : ""));
}

// mkdir -p; components this creates get 0700, because the socket lets
// anyone who can reach it reconfigure the switch.
void make_parent_dirs(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return;
  const std::string dir = path.substr(0, slash);
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) fail(path, dir + " is not a directory");
    return;
  }
  make_parent_dirs(dir);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) fail(path, "cannot create directory " + dir, errno);
}

sockaddr_un make_addr(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);  // caller checked the length
  return a;
}

// True when a process accepts connections on the socket file `path`.
bool someone_listens(const std::string& path) {
  const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  const sockaddr_un a = make_addr(path);
  const bool live = ::connect(s, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
  const int err = errno;
  ::close(s);
  if (!live && err != ECONNREFUSED && err != ENOENT) fail(path, "cannot check for a running switch", err);
  return live;
}

uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

}  // namespace

ControlPlane::ControlPlane(Pipes& pipes, DataplaneView& dp, std::string socket_path)
    : pipes_(pipes), dp_(dp), socket_path_(std::move(socket_path)) {}

ControlPlane::ControlPlane(pipeline::SwitchProgram& prog, DataplaneView& dp, std::string socket_path)
    : own_pipes_(std::make_unique<Pipes>(std::vector<pipeline::SwitchProgram*>{&prog})),
      pipes_(*own_pipes_),
      dp_(dp),
      socket_path_(std::move(socket_path)) {}

ControlPlane::~ControlPlane() { stop_and_unlink(); }

void ControlPlane::start() {
  const std::string& path = socket_path_;
  if (path.empty()) fail("(empty)", "no path given");
  const std::string tmp = path + kTmpSuffix;
  if (tmp.size() >= sizeof(sockaddr_un::sun_path))
    fail(path, "path too long (" + std::to_string(path.size()) + " bytes, at most " +
                   std::to_string(sizeof(sockaddr_un::sun_path) - 1 - std::strlen(kTmpSuffix)) + ")");
  make_parent_dirs(path);

  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) fail(path, "exists and is not a socket; refusing to replace it");
    if (someone_listens(path)) fail(path, "another agq-switch is already listening there");
    // Otherwise it is stale (a switch that died); the rename below replaces it.
  }
  if (::lstat(tmp.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(tmp.c_str());

  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) fail(path, "socket", errno);
  // Bind under a temporary name, restrict it to 0600, listen, and only then
  // rename it into place: nobody can ever connect to a socket with the
  // umask's (wider) mode, and there is no umask() call, which would race with
  // other threads creating files.
  const sockaddr_un a = make_addr(tmp);
  auto give_up = [&](const std::string& what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(path, what, err);
  };
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    const int err = errno;
    ::close(fd);
    fail(path, "cannot bind " + tmp, err);
  }
  if (::chmod(tmp.c_str(), 0600) != 0) give_up("chmod 0600", errno);
  // Listen before the rename: once the path exists it accepts connections,
  // so a client that waits for the file never sees "connection refused".
  if (::listen(fd, 16) != 0) give_up("listen", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) give_up("cannot rename " + tmp + " into place", errno);
  if (::stat(path.c_str(), &st) == 0) {
    socket_ino_ = st.st_ino;
    socket_dev_ = st.st_dev;
  }
  listen_fd_ = fd;
}

void ControlPlane::run(const std::atomic<bool>& stop) {
  constexpr uint64_t kAgeEveryNs = 1'000'000'000;
  uint64_t next_age = now_ns() + kAgeEveryNs;
  std::vector<pollfd> fds;
  while (!stop.load(std::memory_order_relaxed)) {
    // A negative fd (start() not called) is ignored by poll: then this loop
    // only ages the MAC table. 10 ms: learned MACs reach the other lcores'
    // instances within that.
    // The job endpoint's sockets (if any) follow the control socket's entry.
    fds.assign(1, pollfd{listen_fd_, POLLIN, 0});
    if (jobs_) jobs_->add_fds(fds);
    const int n = ::poll(fds.data(), fds.size(), 10);
    if (n > 0 && (fds[0].revents & POLLIN)) {
      const int conn = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn >= 0) {
        serve_one(conn);
        ::close(conn);
      }
    }
    if (jobs_) jobs_->on_poll(fds.data() + 1, fds.size() - 1, now_ns() / 1'000'000);
    apply_mac_digests();
    if (now_ns() >= next_age) {
      age_macs(now_ns());
      next_age = now_ns() + kAgeEveryNs;
    }
  }
}

void ControlPlane::serve_one(int conn) {
  // A client that connects and then says nothing must not stall the control
  // plane (and the MAC ageing) for long.
  timeval tv{1, 0};
  ::setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);

  std::string line;
  bool too_long = false;
  char buf[512];
  for (;;) {
    const ssize_t n = ::recv(conn, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF, timeout or error: answer what we have
    line.append(buf, size_t(n));
    if (line.find('\n') != std::string::npos) break;
    if (line.size() > kMaxRequestLine) { too_long = true; break; }
  }
  if (auto nl = line.find('\n'); nl != std::string::npos) line.resize(nl);
  if (!line.empty() && line.back() == '\r') line.pop_back();

  const std::string resp = too_long ? "error: request longer than " + std::to_string(kMaxRequestLine) + " bytes\n"
                                    : execute(line);
  for (size_t off = 0; off < resp.size();) {
    const ssize_t n = ::send(conn, resp.data() + off, resp.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // client gone or stuck; drop the response
    off += size_t(n);
  }
}

std::size_t ControlPlane::age_macs(uint64_t now) {
  // The entries idle on every instance: the union of the instances' hit
  // states, which is what one switch's idle timeout sees.
  std::vector<uint64_t> idle;
  for (unsigned i = 0; i < pipes_.count(); ++i) {
    std::vector<uint64_t> mine = pipes_.on(i, [&](pipeline::SwitchProgram& p) { return p.forwarding().idle_learned(now); });
    if (i == 0) {
      idle = std::move(mine);
    } else {
      std::vector<uint64_t> both;
      std::set_intersection(idle.begin(), idle.end(), mine.begin(), mine.end(), std::back_inserter(both));
      idle = std::move(both);
    }
    if (idle.empty()) return 0;
  }
  // Removed everywhere, so the instances' tables stay equal. Each instance
  // re-checks idleness as it removes (expire_idle): a station that spoke
  // between the two steps (on any lcore) keeps its entry there, and gets it
  // back in every instance that removed it, before any digest is applied
  // (this thread applies them), so it is neither aged nor counted as
  // learned again.
  std::vector<std::vector<std::pair<uint64_t, tna::PortId>>> kept(pipes_.count());
  for (unsigned i = 0; i < pipes_.count(); ++i)
    kept[i] = pipes_.on(i, [&](pipeline::SwitchProgram& p) { return p.forwarding().expire_idle(idle, now); });
  std::vector<std::pair<uint64_t, tna::PortId>> back;
  for (const auto& k : kept) back.insert(back.end(), k.begin(), k.end());
  std::sort(back.begin(), back.end());
  back.erase(std::unique(back.begin(), back.end(), [](const auto& a, const auto& b) { return a.first == b.first; }),
             back.end());
  if (!back.empty())
    pipes_.all([&](pipeline::SwitchProgram& p) {
      for (const auto& [key, port] : back) p.forwarding().restore_learned(key, port, now);
    });
  return idle.size() - back.size();
}

// Learned MACs, reported by any lcore's instance, installed in every
// instance: what a Tofino control plane does with a learn digest.
void ControlPlane::apply_mac_digests() {
  auto digests = dp_.take_mac_digests();
  if (digests.empty()) return;
  // One entry per MAC, the latest report wins (a station that moved).
  std::vector<tna::MacDigest> unique;
  for (auto it = digests.rbegin(); it != digests.rend(); ++it) {
    const bool seen = std::any_of(unique.begin(), unique.end(), [&](const tna::MacDigest& u) {
      return std::equal(u.mac, u.mac + 6, it->mac);
    });
    if (!seen) unique.push_back(*it);
  }
  const uint64_t now = now_ns();
  pipes_.all([&](pipeline::SwitchProgram& p) {
    for (const auto& d : unique) p.forwarding().apply_mac_digest(d, now);
  });
}

std::string ControlPlane::listen_jobs(const std::string& address) {
  // The endpoint's one answer, computed like the control socket's (same
  // thread, same interpreter): the same document (PROTOCOL.md §12).
  auto ep = std::make_unique<JobListener>(address, [this](uint16_t id) {
    return execute("job get " + std::to_string(id) + " --json");
  });
  ep->start();
  jobs_ = std::move(ep);
  return jobs_->bound();
}

void ControlPlane::stop_and_unlink() {
  jobs_.reset();
  if (listen_fd_ < 0) return;
  ::close(listen_fd_);
  listen_fd_ = -1;
  // Only remove the file if it is still the socket we created; a second
  // switch may have replaced a file it believed stale.
  struct stat st {};
  if (::lstat(socket_path_.c_str(), &st) == 0 && st.st_ino == socket_ino_ && st.st_dev == socket_dev_)
    ::unlink(socket_path_.c_str());
}

}  // namespace agq::control
