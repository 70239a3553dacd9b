#include "control/ctl_protocol.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <netdb.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace agq::control {
namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

[[noreturn]] void broken(const std::string& path, const std::string& what, int err) {
  throw CtlTransportError(path + ": " + what + ": " + std::strerror(err), false);
}

// Waits until `fd` is ready for `events`; false on timeout.
bool wait_for(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int n = ::poll(&p, 1, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    return n > 0;
  }
}

}  // namespace

CtlReply parse_reply(std::string raw) {
  CtlReply r;
  r.raw = std::move(raw);
  if (r.raw.rfind("ok\n", 0) == 0) {
    r.ok = true;
    r.body = r.raw.substr(3);
  } else if (r.raw == "ok") {
    r.ok = true;
  } else {
    const size_t nl = r.raw.find('\n');
    const std::string first = r.raw.substr(0, nl);
    r.message = first.rfind("error: ", 0) == 0 ? first.substr(7) : first;
    if (r.message.empty()) r.message = "empty response from the switch";
  }
  return r;
}

namespace {

// "tcp:HOST:PORT": a connected TCP socket, within `timeout_ms`.
int connect_tcp(const std::string& target, int timeout_ms) {
  const std::string hp = target.substr(4);
  const size_t colon = hp.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == hp.size())
    throw CtlTransportError("cannot connect to " + target + ": expected tcp:HOST:PORT", true);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (const int rc = ::getaddrinfo(hp.substr(0, colon).c_str(), hp.substr(colon + 1).c_str(), &hints, &res); rc != 0)
    throw CtlTransportError("cannot connect to " + target + ": " + ::gai_strerror(rc), true);
  int err = ECONNREFUSED;
  for (addrinfo* a = res; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      if (wait_for(fd, POLLOUT, timeout_ms)) {
        socklen_t len = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
      } else {
        err = ETIMEDOUT;
      }
    } else if (rc != 0) {
      err = errno;
    }
    if (rc == 0) {
      ::freeaddrinfo(res);
      return fd;
    }
    ::close(fd);
  }
  ::freeaddrinfo(res);
  throw CtlTransportError("cannot connect to " + target + ": " + std::strerror(err), true);
}

int connect_unix(const std::string& socket_path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof addr.sun_path)
    throw CtlTransportError("cannot connect to " + socket_path + ": path longer than " +
                                std::to_string(sizeof addr.sun_path - 1) + " bytes",
                            true);
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) broken(socket_path, "socket", errno);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int e = errno;
    ::close(fd);
    throw CtlTransportError("cannot connect to " + socket_path + ": " + std::strerror(e), true);
  }
  return fd;
}

}  // namespace

bool is_tcp_target(const std::string& target) { return target.rfind("tcp:", 0) == 0; }

CtlReply ctl_request(const std::string& socket_path, const std::string& line, int timeout_ms) {
  Fd s{is_tcp_target(socket_path) ? connect_tcp(socket_path, timeout_ms) : connect_unix(socket_path)};

  std::string req = line;
  if (req.empty() || req.back() != '\n') req += '\n';
  for (size_t off = 0; off < req.size();) {
    if (!wait_for(s.fd, POLLOUT, timeout_ms)) broken(socket_path, "send", ETIMEDOUT);
    // MSG_NOSIGNAL: a switch that closes early must give an error, not SIGPIPE.
    const ssize_t n = ::send(s.fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      broken(socket_path, "send", errno);
    }
    off += size_t(n);
  }
  ::shutdown(s.fd, SHUT_WR);

  std::string raw;
  char buf[4096];
  for (;;) {
    if (!wait_for(s.fd, POLLIN, timeout_ms)) broken(socket_path, "no response", ETIMEDOUT);
    const ssize_t n = ::recv(s.fd, buf, sizeof buf, 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      broken(socket_path, "receive", errno);
    }
    raw.append(buf, size_t(n));
  }
  if (raw.empty()) broken(socket_path, "the switch closed the connection without a response", EPIPE);
  return parse_reply(std::move(raw));
}

}  // namespace agq::control
