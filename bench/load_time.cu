/* load_time — how long gpt2_load takes, and the host memory it leaves held.
   Usage: bench/load_time MODEL_DIR cpu|cuda f16|bf16|f32 [REPS] [cold]
   Loads the model REPS times (default 3) in one process, freeing it in between, and prints each load's wall time
   and the process's resident set (VmRSS, Linux) right after it, then the peak (VmHWM). The first CUDA load also
   pays for the context's creation. The file is read through the page cache as the loader maps it; with `cold`,
   each load is preceded by dropping MODEL_DIR/model.safetensors from the page cache (posix_fadvise DONTNEED,
   which needs no privileges but drops only pages nobody maps or dirtied), and the line says how much of the file
   was still cached just before the load (mincore), so a cold figure is only as cold as that says. */
#define GPT2_IMPLEMENTATION
#include "gpt2.cuh"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if !defined(_WIN32)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* a /proc/self/status field in MB, or -1 where there is none */
static double status_mb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    double kb = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':') { kb = atof(line + n + 1); break; }
    fclose(f);
    return kb < 0 ? -1 : kb / 1024.0;
}

/* Drops a file from the page cache; returns the fraction of its pages still cached afterwards (-1: not known). */
static double drop_cached(const char *path) {
#if defined(_WIN32)
    (void)path;
    return -1;
#else
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    struct stat sb;
    double frac = -1;
    if (fstat(fd, &sb) == 0 && sb.st_size > 0) {
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        size_t len = (size_t)sb.st_size, pg = (size_t)sysconf(_SC_PAGESIZE), np = (len + pg - 1) / pg;
        void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
        unsigned char *v = (unsigned char *)malloc(np);
        if (p != MAP_FAILED && v && mincore(p, len, v) == 0) {
            size_t in = 0;
            for (size_t i = 0; i < np; i++) in += v[i] & 1;
            frac = (double)in / (double)np;
        }
        free(v);
        if (p != MAP_FAILED) munmap(p, len);
    }
    close(fd);
    return frac;
#endif
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 6 || (argc == 6 && strcmp(argv[5], "cold"))) {
        fprintf(stderr, "usage: %s MODEL_DIR cpu|cuda f16|bf16|f32 [REPS] [cold]\n", argv[0]);
        return 2;
    }
    int cold = argc == 6;
    char st_path[4096];
    snprintf(st_path, sizeof st_path, "%s/model.safetensors", argv[1]);
    gpt2_options o = gpt2_default_options();
    o.backend = !strcmp(argv[2], "cpu") ? GPT2_BACKEND_CPU : GPT2_BACKEND_CUDA;
    o.dtype = !strcmp(argv[3], "bf16") ? GPT2_DTYPE_BF16 : !strcmp(argv[3], "f32") ? GPT2_DTYPE_F32 : GPT2_DTYPE_F16;
    o.max_batch = 1;
    int reps = argc > 4 ? atoi(argv[4]) : 3;
    printf("%s %s %s: before any load, VmRSS %.0f MB\n", argv[1], argv[2], argv[3], status_mb("VmRSS"));
    for (int r = 0; r < reps; r++) {
        gpt2_model *m = NULL;
        if (cold) printf("cold: %.1f%% of %s cached before load %d\n", 100.0 * drop_cached(st_path), st_path, r + 1);
        double t0 = now_s();
        if (gpt2_load(&m, argv[1], &o) != GPT2_OK) { fprintf(stderr, "load: %s\n", gpt2_last_error()); return 1; }
        double dt = now_s() - t0;
        printf("load %d: %.3f s, VmRSS after %.0f MB\n", r + 1, dt, status_mb("VmRSS"));
        gpt2_free(m);
    }
    printf("peak VmHWM %.0f MB\n", status_mb("VmHWM"));
    return 0;
}
