/* tests/strict.c — the headers as a user's strict build sees them: make test compiles this as C99 and as C++11
   with -Wall -Wextra -Wpedantic -Werror, with and without -fopenmp (CPU backend; the CUDA part is nvcc's), and
   with STRICT_MPI (gpt2_mpi.h too) where Open MPI is installed. */
#define GPT2_IMPLEMENTATION
#include "gpt2.cuh"
#ifdef STRICT_MPI
#define GPT2_MPI_IMPLEMENTATION
#include "gpt2_mpi.h"
#endif

int main(void) {
    gpt2_options o = gpt2_default_options();
    return o.max_batch;
}
