#include "control/ctl_protocol.hpp"

#include <poll.h>
#include <sys/socket.h>
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

CtlReply ctl_request(const std::string& socket_path, const std::string& line, int timeout_ms) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof addr.sun_path)
    throw CtlTransportError("cannot connect to " + socket_path + ": path longer than " +
                                std::to_string(sizeof addr.sun_path - 1) + " bytes",
                            true);
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);

  Fd s{::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (s.fd < 0) broken(socket_path, "socket", errno);
  if (::connect(s.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
    throw CtlTransportError("cannot connect to " + socket_path + ": " + std::strerror(errno), true);

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
