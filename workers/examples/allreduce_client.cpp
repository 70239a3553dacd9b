// libagq from C++: one rank of a job sums `--ops` tensors of `--elements`
// float32 values through an agq-switch, all in flight at once, then waits on
// every future and prints one JSON line per op (its stats and a checksum of
// the result) plus the largest deviation from the exact sum, which it can
// compute because every rank's input is a known function of (rank, op, i).
//
//   agq-allreduce-example --vdev net_memif0,role=client,id=0,socket=/tmp/w0.sock,socket-abstract=no
//       --switch-ctl /tmp/agq.ctl --job 1 --rank 0 --elements 100000 --ops 4   (one command line)
// (or the job by hand: --workers 2 --slots 64 --rows 32 instead of --switch-ctl)
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <vector>

#include "libagq/client.hpp"
#include "libagq/switch_job.hpp"

namespace {

// Rank r's element i of op k: distinct per rank, op and element, exactly
// reproducible by every rank (the expected sum).
float input(unsigned rank, unsigned op, uint64_t i) {
  return float(std::sin(0.001 * double(i) + 0.7 * rank + 1.3 * op) * (0.1 + 0.05 * rank));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"libagq example: allreduce of float32 tensors through an agq-switch, many in flight"};
  agq::libagq::ClientOptions o;
  unsigned job = 1, workers = 2, rank = 0, slots = 64, rows = 0, ops = 4;
  uint64_t elements = 100000;
  std::string ctl;
  app.add_option("--vdev", o.vdev, "DPDK --vdev of the port towards the switch")->required();
  app.add_option("--switch-ctl", ctl, "the switch's control socket: take the job from it (job get)");
  app.add_option("--job", job, "job id (the switch's [[job]] id)")->capture_default_str();
  app.add_option("--workers", workers, "N")->capture_default_str();
  app.add_option("--rank", rank, "this process's worker id")->capture_default_str();
  app.add_option("--slots", slots, "the job's slots")->capture_default_str();
  app.add_option("--rows", rows, "the job's rows (for the shard in the UDP source port)")->capture_default_str();
  app.add_option("--elements", elements, "elements per tensor")->capture_default_str();
  app.add_option("--ops", ops, "tensors submitted before waiting on the first")->capture_default_str();
  app.add_option("--file-prefix", o.file_prefix, "EAL --file-prefix (default agqlib<pid>)");
  CLI11_PARSE(app, argc, argv);
  if (workers < 1 || workers > 32 || rank >= workers || job < 1 || job > 65535) {
    std::fprintf(stderr, "agq-allreduce-example: need 1 <= --workers <= 32, --rank < --workers, --job 1..65535\n");
    return 2;
  }
  std::unique_ptr<agq::libagq::Client> client;
  try {
    if (!ctl.empty()) {
      o.job = agq::libagq::job_from_switch(ctl, uint16_t(job), rank);
      workers = o.job.job.num_workers;
    } else {
      o.job.job.job_id = uint16_t(job);
      o.job.job.num_workers = uint8_t(workers);
      o.job.job.slots = slots;
      o.job.job.row_shift = agq::worker::AllreduceJob::row_shift_for(slots, rows);
      o.job.worker_id = rank;
    }
    client = agq::libagq::Client::open(o);
  } catch (const agq::libagq::ClientError& e) {
    std::fprintf(stderr, "agq-allreduce-example: %s\n", e.what());
    return 3;
  }
  std::vector<std::vector<float>> data(ops), bound(ops);
  std::vector<agq::libagq::Future> futs;
  for (unsigned k = 0; k < ops; ++k) {
    data[k].resize(elements);
    bound[k].resize(elements);
    for (uint64_t i = 0; i < elements; ++i) data[k][i] = input(rank, k, i);
    // In place, tag k: every op is its own tensor (its first op: 32-bit request).
    futs.push_back(client->allreduce(data[k], data[k], 1.0f, k, bound[k]));
  }
  int rc = 0;
  double worst = 0;  // max over elements of |got - exact| / bound
  for (unsigned k = 0; k < ops; ++k) {
    try {
      const agq::libagq::OpStats& st = futs[k].get();
      double sum = 0, over = 0;
      for (uint64_t i = 0; i < elements; ++i) {
        double exact = 0;
        for (unsigned r = 0; r < workers; ++r) exact += double(input(r, k, i));
        const double err = std::fabs(double(data[k][i]) - exact);
        // float32 rounding of the output beside the protocol's bound
        over = std::max(over, err / (double(bound[k][i]) + std::fabs(exact) * 0x1p-23 + 1e-30));
        sum += double(data[k][i]);
      }
      worst = std::max(worst, over);
      std::printf("{\"op\":%u,\"ok\":true,\"elements\":%llu,\"chunks\":%llu,\"avg_granted_bits\":%.3f,"
                  "\"fallbacks\":%llu,\"retransmissions\":%llu,\"seconds\":%.6f,\"checksum\":%.9g,"
                  "\"max_error_over_bound\":%.4f}\n",
                  k, (unsigned long long)st.elements, (unsigned long long)st.engine.chunks,
                  st.engine.avg_granted_bits(), (unsigned long long)st.engine.fallbacks,
                  (unsigned long long)st.engine.retransmissions, st.seconds, sum, over);
    } catch (const agq::libagq::ClientError& e) {
      std::string msg = e.what();
      for (char& c : msg)
        if (c == '"' || c == '\\') c = '\'';
      std::printf("{\"op\":%u,\"ok\":false,\"error\":\"%s\"}\n", k, msg.c_str());
      rc = 1;
    }
  }
  std::fflush(stdout);
  client->close();
  if (worst > 1.0) rc = 1;
  return rc;
}
