// The control-socket protocol shared by agq-switch and agqctl.
//
// A unix stream socket; per connection the client writes one request line
// (a command, '\n'-terminated) and the server writes the whole response and
// closes. A response starts with "ok\n" (then the body) or with
// "error: <message>\n" (then, possibly, the usage of the command).
// One request per connection keeps both sides trivially simple and lets any
// tool (socat, nc -U, Python) talk to the switch.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace agq::control {

inline constexpr const char* kDefaultCtlSocket = "/run/agq-switch/agq-switch.sock";
// Longest request line the server accepts; commands are short.
inline constexpr std::size_t kMaxRequestLine = 4096;

// The socket could not be reached (connect failed) or the exchange broke.
// `connect_failed` tells agqctl which hint to print.
struct CtlTransportError : std::runtime_error {
  CtlTransportError(const std::string& what, bool connect_failed)
      : std::runtime_error(what), connect_failed(connect_failed) {}
  bool connect_failed;
};

struct CtlReply {
  bool ok = false;
  std::string body;     // ok: everything after "ok\n"
  std::string message;  // error: the text after "error: " on the first line
  std::string raw;      // the full response
};

// agqctl's default wait for a response: longer than the switch's own wait
// for its lcores' acks (SwitchDataplane::kCommandTimeoutMs), so that a slow
// lcore on a loaded machine yields the switch's answer (late or an error
// naming the lcore), not a client-side timeout.
inline constexpr int kCtlTimeoutMs = 15000;

// Sends one request and reads the full response. `timeout_ms` bounds every
// wait on the socket. `socket_path` is the control socket's path, or
// "tcp:HOST:PORT": a switch's read-only job endpoint (agq-switch
// --job-listen, job_endpoint.hpp), which answers only "job get ID --json".
// Throws CtlTransportError.
CtlReply ctl_request(const std::string& socket_path, const std::string& line, int timeout_ms = kCtlTimeoutMs);
// "tcp:..." (a job endpoint) rather than a socket path.
bool is_tcp_target(const std::string& target);

// Splits a raw response into a CtlReply (exposed for tests).
CtlReply parse_reply(std::string raw);

}  // namespace agq::control
