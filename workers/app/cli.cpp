// The only translation unit that includes CLI11 (it is slow to compile).
#include <CLI/CLI.hpp>

#include "app/options.hpp"
#include "lib/verify_mode.hpp"

namespace agq::worker {

int parse_options(int argc, char** argv, Options& o) {
  CLI::App app{
      "agq-worker: DPDK workers and parameter server for agq-switch (classic pipeline, or --protocol agq).\n"
      "Usage: agq-worker [EAL options] -- [options]\n"
      "  e.g. agq-worker --no-huge -m 256 --no-pci -l 1 --file-prefix w0 \\\n"
      "         --vdev=net_memif0,role=client,id=0,socket=/tmp/agq1.sock,socket-abstract=no \\\n"
      "         -- --role worker --ids 0 --workers 2\n"
      "Every worker and the PS must get the same job flags (--job-id --workers --elements --window\n"
      "--slot-base --seqs-per-agg --source --seed --range): the PS regenerates each worker's gradient\n"
      "to verify every aggregate.\n"
      "Exit codes: 0 ok, 1 verification mismatch, 2 usage, 3 no reply / cannot connect, 4 stalled, 130 interrupted.",
      "agq-worker"};
  std::string role = "worker", protocol = "classic";
  unsigned job_id = o.job.job_id, workers = o.job.total_workers;
  app.add_option("--role", role, "worker | ps")->check(CLI::IsMember({"worker", "ps"}))->capture_default_str();
  app.add_option("--protocol", protocol,
                 "classic (the published AGQ program's packets) | agq (docs/PROTOCOL.md: adaptive widths, "
                 "retransmission, PS fallback)")
      ->check(CLI::IsMember({"classic", "agq"}))->capture_default_str();
  app.add_option("--job-id", job_id, "job: 1..31 in classic (top 5 bits of jobAndSeq), 1..65535 in agq")
      ->capture_default_str();
  app.add_option("--workers", workers, "N: contributions per chunk (classic 1..255, agq 1..32)")->capture_default_str();
  app.add_option("--elements", o.job.elements, "gradient length (float32 elements)")->capture_default_str();
  app.add_option("--window", o.job.window,
                 "classic: slots (chunks in flight per worker); agq: slots in flight per worker (default: --slots)")
      ->capture_default_str();
  app.add_option("--slots", o.agq.slots, "agq: the job's slots on the switch (its [[job]] slots)")->capture_default_str();
  app.add_option("--rows", o.agq.rows, "agq: the job's rows on the switch, for the memory report (0: unknown)")
      ->capture_default_str();
  app.add_option("--rounds", o.agq.rounds, "agq: iterations; round r's widths come from round r-1's aggregate")
      ->capture_default_str();
  app.add_option("--init-width", o.init_width, "agq: round 0's requested width in bits (8..32, multiple of 4)")
      ->capture_default_str();
  app.add_option("--init-scale", o.init_scale, "agq: round 0's exponent represents |x| up to this unclipped")
      ->capture_default_str();
  app.add_option("--error-budget", o.error_budget,
                 "agq: quantization step per chunk <= this x max|aggregate/N| of the previous round")
      ->capture_default_str();
  app.add_option("--margin", o.margin, "agq: headroom over the previous round's chunk max before clipping")
      ->capture_default_str();
  app.add_option("--min-width-slack", o.min_width_slack,
                 "agq: bits a grant may fall below the request (min_width = R - this, at least g + 2 rounded up "
                 "to 4; PROTOCOL.md §5); 0 = a grant is R or the PS's exact sum")
      ->check(CLI::IsMember({0, 4, 8, 12, 16, 20, 24, 28}))->capture_default_str();
  app.add_option("--fixed-width", o.fixed_width,
                 "agq: request R = min_width = this for every chunk, the exponent still adapts (32: the "
                 "SwitchML/ATP design, for comparisons); 0 = adaptive widths")
      ->check(CLI::IsMember({0, 4, 8, 12, 16, 20, 24, 28, 32}))->capture_default_str();
  app.add_option("--error-feedback", o.error_feedback,
                 "agq: keep what quantization and truncation removed from each worker's contribution and add it "
                 "into the next round (PROTOCOL.md §5): auto = on with --verify off, off otherwise (the verifier "
                 "checks bit for bit against the raw gradients); on needs --verify off")
      ->check(CLI::IsMember({"auto", "on", "off"}))->capture_default_str();
  app.add_option("--rto-ms", o.rto_ms, "agq: first retransmission timeout per slot (doubles per retry)")
      ->capture_default_str();
  app.add_option("--rto-min-ms", o.rto_min_ms,
                 "agq: floor of the RTO's variance term (RTO = srtt + max(4 rttvar, this))")
      ->capture_default_str();
  app.add_option("--rto-max-ms", o.rto_max_ms, "agq: retransmission timeout cap")->capture_default_str();
  app.add_option("--reo-min-us", o.reo_min_us,
                 "agq: floor of RACK's reorder window (a sequence overtaken by a later one on its switch lcore "
                 "is resent after this); 0 = no loss detection by order")
      ->capture_default_str();
  app.add_option("--verify", o.verify,
                 "agq: check results against the scalar reference: all | sample:K (one chunk in K) | off")
      ->capture_default_str();
  unsigned job_from_switch = 0;
  app.add_option("--switch-ctl", o.switch_ctl,
                 "agq: the switch's control socket, or tcp:HOST:PORT (its read-only job endpoint, agq-switch "
                 "--job-listen): take the job (N, slots, rows, lanes, max width, addresses) from it (with --job ID)");
  app.add_option("--job", job_from_switch, "agq: with --switch-ctl: the job id to ask the switch for");
  app.add_option("--job-file", o.job_file, "agq: the job as `agqctl job get ID --json` wrote it");
  app.add_option("--lanes", o.lanes, "agq: the job's lane profile, 32 or 16 (PROTOCOL.md §10)")
      ->check(CLI::IsMember({32u, 16u}))->capture_default_str();
  app.add_option("--switch-lcores", o.switch_lcores,
                 "the switch's dataplane lcores (it serves shard k on lcore k mod this). agq: loss is found by "
                 "order per lcore; from the switch with --switch-ctl/--job-file. classic: connect with this many "
                 "memif rings per port and send shard k on ring k mod this, straight to its owner lcore (the "
                 "switch needs --memif-queues this)")
      ->check(CLI::Range(1u, 4096u))->capture_default_str();
  app.add_option("--handoff-ring", o.handoff_ring,
                 "agq, several lcores: entries of each lcore's hand-off ring (RESULTs another lcore received for "
                 "its slots); full = dropped as lost, never a wait (power of two)")
      ->check(CLI::IsMember({2u, 4u, 8u, 16u, 32u, 64u, 128u, 256u, 512u, 1024u, 2048u, 4096u, 8192u, 16384u,
                             32768u, 65536u}))
      ->capture_default_str();
  app.add_option("--max-retries", o.max_retries, "agq: retransmissions of one slot before giving up (exit 4)")
      ->capture_default_str();
  app.add_option("--retry-time", o.retry_time_s,
                 "agq: ... and not before the slot has waited this many seconds since its first transmission "
                 "(a descheduled peer on a loaded host is a stall, not a dead worker)")
      ->check(CLI::Range(0.0, 3600.0))->capture_default_str();
  app.add_option("--slot-base", o.job.slot_base, "first aggregator (hash1) of the job")->capture_default_str();
  app.add_option("--seqs-per-agg", o.job.seqs_per_agg,
                 "live seqs per aggregator: 1 = exact (default); 2..8 pack windows, results order-dependent")
      ->capture_default_str();
  app.add_option("--source", o.source,
                 "normal[:sigma] | laplace[:b] | sparse[:density] | constant[:v] | file:PATH ({id} = worker id)")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the synthetic gradients")->capture_default_str();
  app.add_option("--range", o.range, "quantizer clip range [-R, R], shared by the job")->capture_default_str();
  app.add_option("--ids", o.ids, "worker role: logical worker ids in this process (id i on port i mod ports)")
      ->delimiter(',');
  app.add_flag("--join", o.join, "worker role: (re)join a running job; send only what ACK/retry notices ask for");
  app.add_flag("--fresh-switch", o.fresh_switch,
               "PS: the switch's registers are fresh, so every aggregator's cursor starts at 0 (strictest check)");
  app.add_option("--reply-timeout", o.reply_timeout_s, "worker: seconds to wait for the first ACK")
      ->capture_default_str();
  app.add_option("--stall-timeout", o.stall_timeout_s, "seconds without progress before giving up")
      ->capture_default_str();
  app.add_option("--connect-timeout", o.connect_timeout_s, "seconds to wait for ports to start and link up")
      ->capture_default_str();
  app.add_option("--retry-ms", o.retry_ms, "PS: release a slot with a retry ACK after this long without its aggregate")
      ->capture_default_str();
  app.add_option("--progress", o.progress_s, "seconds between progress lines on stderr (0: none)")
      ->capture_default_str();
  app.add_option("--idle-sleep-us", o.idle_sleep_us, "sleep when a poll finds nothing to do (0: busy-poll)")
      ->capture_default_str();
  app.add_flag("--json", o.json, "print the final summary as one JSON object on stdout");
  app.add_option("--output", o.output, "classic PS / agq worker: write the dequantized aggregate (float32 .npy; agq: last round)");
  app.add_option("--max-print", o.max_print, "PS: mismatches printed in full")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  o.role = role == "ps" ? Role::Ps : Role::Worker;
  for (const CLI::Option* opt : app.get_options())
    if (opt->count() && !opt->get_lnames().empty()) o.given.push_back("--" + opt->get_lnames()[0]);
  // Flags of the other protocol are errors, not silently ignored.
  static const char* const kClassicOnly[] = {"--slot-base", "--seqs-per-agg", "--range", "--join", "--fresh-switch",
                                             "--retry-ms", "--stall-timeout"};
  static const char* const kAgqOnly[] = {"--slots", "--rows", "--rounds", "--init-width", "--init-scale",
                                         "--error-budget", "--margin", "--rto-ms", "--rto-min-ms", "--rto-max-ms", "--reo-min-us",
                                         "--max-retries", "--verify", "--lanes", "--switch-ctl", "--job", "--job-file",
                                         "--handoff-ring", "--retry-time", "--min-width-slack", "--fixed-width",
                                         "--error-feedback"};
  const std::vector<const char*> other = protocol == "agq"
                                              ? std::vector<const char*>(std::begin(kClassicOnly), std::end(kClassicOnly))
                                              : std::vector<const char*>(std::begin(kAgqOnly), std::end(kAgqOnly));
  for (const char* f : other)
    if (o.flag_given(f)) {
      std::fprintf(stderr, "agq-worker: %s does not apply to --protocol %s (it is a --protocol %s flag)\n", f,
                   protocol.c_str(), protocol == "agq" ? "classic" : "agq");
      return 2;
    }
  if (app.count("--job") && o.switch_ctl.empty()) {
    std::fprintf(stderr, "agq-worker: --job needs --switch-ctl SOCKET (or use --job-file)\n");
    return 2;
  }
  if (!o.switch_ctl.empty() && (!app.count("--job") || !o.job_file.empty())) {
    std::fprintf(stderr, "agq-worker: --switch-ctl needs --job ID (and no --job-file)\n");
    return 2;
  }
  if (app.count("--job")) {
    if (app.count("--job-id") && job_id != job_from_switch) {
      std::fprintf(stderr, "agq-worker: --job %u and --job-id %u disagree\n", job_from_switch, job_id);
      return 2;
    }
    job_id = job_from_switch;
  }
  if (protocol == "agq") {
    o.protocol = Protocol::Agq;
    if (job_id > 65535 || workers > 32) {
      std::fprintf(stderr, "agq-worker: agq: --job-id must be 1..65535 and --workers 1..32\n");
      return 2;
    }
    o.agq.job_id = uint16_t(job_id);
    o.agq.num_workers = uint8_t(workers);
    o.agq.elements = o.job.elements;
    // --window defaults to every slot in agq (classic's default is its slot count).
    o.agq.window = app.count("--window") ? o.job.window : 0;
    if (std::string err; !parse_verify(o.verify, o.verify_every, err)) {
      std::fprintf(stderr, "agq-worker: %s\n", err.c_str());
      return 2;
    }
    if (o.error_feedback == "on" && o.verify_every) {
      std::fprintf(stderr,
                   "agq-worker: --error-feedback on needs --verify off: with it every worker encodes its gradient "
                   "plus its residual, which --verify's bit-exact reference (the raw gradients) does not model\n");
      return 2;
    }
    o.error_feedback_on = o.error_feedback == "on" || (o.error_feedback == "auto" && !o.verify_every);
    if (const std::string err = o.agq.validate(); !err.empty()) {
      std::fprintf(stderr, "agq-worker: %s\n", err.c_str());
      return 2;
    }
    if (o.ids.empty()) {
      std::fprintf(stderr, "agq-worker: --ids needs at least one worker id\n");
      return 2;
    }
    return -1;
  }
  if (job_id > 255 || workers > 255) {
    std::fprintf(stderr, "agq-worker: --job-id and --workers must fit in 8 bits\n");
    return 2;
  }
  o.job.job_id = uint8_t(job_id);
  o.job.total_workers = uint8_t(workers);
  if (const std::string err = o.job.validate(); !err.empty()) {
    std::fprintf(stderr, "agq-worker: %s\n", err.c_str());
    return 2;
  }
  if (o.ids.empty()) {
    std::fprintf(stderr, "agq-worker: --ids needs at least one worker id\n");
    return 2;
  }
  return -1;
}

}  // namespace agq::worker
