/* MPI_Allreduce timing for tools/bench/ddp: for each size (fp32 elements), one warm-up then REPS timed
 * in-place sums; a rep's time is the slowest rank's. Rank 0 prints one JSON line {"size": [seconds...]}. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int reps = argc > 1 ? atoi(argv[1]) : 3;
  if (rank == 0) printf("{");
  for (int a = 2; a < argc; ++a) {
    const long n = atol(argv[a]);
    float* buf = malloc((size_t)n * sizeof(float));
    if (buf == NULL) MPI_Abort(MPI_COMM_WORLD, 2);
    for (long i = 0; i < n; ++i) buf[i] = 1.0f;
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("%s\"%ld\": [", a > 2 ? ", " : "", n);
    for (int r = 0; r < reps; ++r) {
      for (long i = 0; i < n; ++i) buf[i] = 1.0f;
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double dt = MPI_Wtime() - t0, slowest = 0;
      MPI_Reduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      if (rank == 0) printf("%s%.6f", r ? ", " : "", slowest);
    }
    if (rank == 0) printf("]");
    free(buf);
  }
  if (rank == 0) printf("}\n");
  MPI_Finalize();
  return 0;
}
