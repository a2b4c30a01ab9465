/* bench/mpi_load — how long gpt2_mpi_load takes on CPU ranks (the slowest rank, between barriers) and the peak
   resident memory summed over the ranks. Built and run by bench/mpi_load.sh. */
#define GPT2_IMPLEMENTATION
#include "gpt2.cuh"
#define GPT2_MPI_IMPLEMENTATION
#include "gpt2_mpi.h"

static long peak_rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) v = atol(line + 6);
    if (f) fclose(f);
    return v;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2) { if (!rank) fprintf(stderr, "usage: mpirun -np N bench/mpi_load MODEL_DIR\n"); MPI_Finalize(); return 2; }
    gpt2_options o = gpt2_default_options();
    o.backend = GPT2_BACKEND_CPU;
    o.max_batch = 1;
    o.max_seq = 16;
    gpt2_model *m = NULL;
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime();
    gpt2_status st = gpt2_mpi_load(MPI_COMM_WORLD, &m, argv[1], &o);
    double dt = MPI_Wtime() - t, slowest = 0;
    MPI_Reduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    long rss = peak_rss_kb(), rss_sum = 0;
    MPI_Reduce(&rss, &rss_sum, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (!rank) printf("ranks %d status %d load %.2f s (slowest rank), peak RSS summed over ranks %.0f MB\n", size, (int)st, slowest, rss_sum / 1024.0);
    if (!st) gpt2_free(m);
    MPI_Finalize();
    return st ? 1 : 0;
}
