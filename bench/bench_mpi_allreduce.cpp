// The reference an ML user would run instead of in-network aggregation on
// the same machine: MPI_Allreduce (sum) of a float32 tensor across N ranks.
//
//   mpirun -np N bench_mpi_allreduce --bytes B [--reps R]
//
// One warm-up allreduce, then R timed ones; rank 0 prints one JSON line with
// the median time. The result is checked (every rank contributes rank+1 at
// every element, so each element must be N(N+1)/2): a wrong sum is reported,
// not silently timed.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long long bytes = 1 << 20;
  int reps = 3;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--bytes") == 0) bytes = std::atoll(argv[++i]);
    else if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[++i]);
  }
  const size_t n = size_t(bytes / 4);
  std::vector<float> in(n, float(rank + 1)), out(n, 0.f);
  std::vector<double> times;
  for (int r = 0; r <= reps; ++r) {  // r == 0: warm-up (connection set-up, page faults)
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    MPI_Allreduce(in.data(), out.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    const double t = MPI_Wtime() - t0;
    double tmax = 0;  // the allreduce is done when the slowest rank is done
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (r > 0) times.push_back(tmax);
  }
  const float expect = float(size) * float(size + 1) / 2;
  long long bad = 0;
  for (size_t i = 0; i < n; ++i) bad += out[i] != expect;
  long long bad_all = 0;
  MPI_Reduce(&bad, &bad_all, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::sort(times.begin(), times.end());
    const double med = times.empty() ? 0 : times[times.size() / 2];
    std::printf("{\"ranks\":%d,\"bytes\":%lld,\"elements\":%zu,\"reps\":%d,\"seconds_median\":%.6f,"
                "\"seconds_min\":%.6f,\"elements_per_s\":%.4g,\"wrong_elements\":%lld}\n",
                size, bytes, n, reps, med, times.empty() ? 0 : times.front(), med > 0 ? double(n) / med : 0,
                bad_all);
    std::fflush(stdout);
  }
  MPI_Finalize();
  return 0;
}
