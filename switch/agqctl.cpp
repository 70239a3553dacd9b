// agqctl: sends one command to a running agq-switch over its control socket
// and prints the answer. Exit status: 0 ok, 1 the switch answered "error",
// 2 the switch could not be reached (or bad agqctl flags).
// CLI11 lives only in this file: it is slow to compile.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "control/ctl_protocol.hpp"
#include "control/top.hpp"

namespace {

// agqctl top [--interval S] [--iterations N]: runs here, not in the switch.
int top(const std::string& socket, const std::vector<std::string>& words) {
  agq::control::TopOptions opt;
  opt.socket = socket;
  CLI::App app{"agqctl top: live view of a running switch (Ctrl-C quits)", "agqctl top"};
  app.add_option("--interval", opt.interval_s, "seconds between refreshes")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--iterations", opt.iterations, "stop after N refreshes (0: until Ctrl-C)")->capture_default_str();
  std::vector<std::string> args(words.rbegin(), words.rend() - 1);  // CLI11 wants them reversed, without "top"
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return agq::control::run_top(opt);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"agqctl: talk to a running agq-switch (try: agqctl help)"};
  std::string socket = agq::control::kDefaultCtlSocket;
  app.add_option("--socket", socket, "control socket of the switch (its --ctl-socket), or tcp:HOST:PORT: its read-only job endpoint "
                 "(--job-listen), which answers only 'job get ID --json'")
      ->envname("AGQ_CTL_SOCKET")
      ->capture_default_str();
  bool json = false;
  app.add_flag("--json", json, "data as JSON (the same as ending the command with --json)");
  // Everything from the first positional word on is the command, passed
  // through untouched (so "dump 3 -1" reaches the switch's own checks).
  app.prefix_command();
  app.footer("COMMAND... e.g.: ports | counters | dump 0 4 | route add 10.2.2.1 1 | mac list | job get 1 --json | help\n"
             "           top [--interval S] [--iterations N]   live view, Ctrl-C quits");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  std::vector<std::string> words = app.remaining();
  if (words.empty()) {
    std::cerr << "agqctl: no command given (try: agqctl help)\n";
    return 2;
  }
  // prefix_command() also passes unknown options through; before the
  // command word they are agqctl typos, not switch arguments.
  if (words[0].size() > 1 && words[0][0] == '-') {
    std::cerr << "agqctl: unknown option " << words[0] << "\n" << app.help();
    return 2;
  }
  // The switch writes capture files from its own working directory: give it
  // an absolute path ("capture PORT DIR FILE ...").
  if (words[0] == "capture" && words.size() >= 4 && !words[3].empty() && words[3][0] != '/')
    words[3] = std::filesystem::absolute(words[3]).lexically_normal().string();
  if (words[0] == "top") return top(socket, words);
  std::string line;
  for (const auto& w : words) line += (line.empty() ? "" : " ") + w;
  if (json && words.back() != "--json") line += " --json";

  try {
    const agq::control::CtlReply r = agq::control::ctl_request(socket, line);
    if (r.ok) {
      std::cout << r.body << std::flush;
      return 0;
    }
    std::cerr << r.raw;
    if (!r.raw.empty() && r.raw.back() != '\n') std::cerr << '\n';
    return 1;
  } catch (const agq::control::CtlTransportError& e) {
    std::cerr << "agqctl: " << e.what();
    if (e.connect_failed)
      std::cerr << (agq::control::is_tcp_target(socket)
                        ? " (is agq-switch running with --job-listen at that address, reachable from here?)"
                        : " (is agq-switch running? pass its --ctl-socket path with --socket)");
    std::cerr << '\n';
    return 2;
  }
}
