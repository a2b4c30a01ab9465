/* tests/strict.c — the header as a user's strict build sees it: make test compiles this as C99 and as C++11 with
   -Wall -Wextra -Wpedantic -Werror, with and without -fopenmp (CPU backend; the CUDA part is nvcc's). */
#define GPT2_IMPLEMENTATION
#include "gpt2.cuh"

int main(void) {
    gpt2_options o = gpt2_default_options();
    return o.max_batch;
}
