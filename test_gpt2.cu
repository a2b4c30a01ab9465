/* test_gpt2 — the test suite: logits against float64 Hugging Face references, tokenizer against
   tiktoken/HF, sampler, generation, bad input. One test per behaviour; ends with "N passed, N failed".

   Usage: ./test_gpt2 [substring...]     run the tests whose names contain any substring (all if none)
   GPT2_TEST_BACKEND=cpu|cuda (default cpu), GPT2_TEST_DTYPE=f32|f16|bf16 (default f32) pick what the
   model tests run on. Run from the repository root (fixtures are read from tests/ and weights/). */
#define GPT2_IMPLEMENTATION
#include "gpt2.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

/* A test returns 0 when it passes, 1 when it fails, SKIP when what it needs is absent (no GPU);
   EXPECT prints what differed, by how much, where, and fails it. */
#define SKIP 2
#define EXPECT(cond, ...)                                                          \
    do {                                                                           \
        if (!(cond)) {                                                             \
            printf("    %s:%d: ", __FILE__, __LINE__);                             \
            printf(__VA_ARGS__);                                                   \
            printf("\n");                                                          \
            return 1;                                                              \
        }                                                                          \
    } while (0)

typedef struct test_case { const char *name; int (*fn)(void); } test_case;

/* the backend and dtype the model tests run on (from the environment) */
static gpt2_options test_options(void) {
    gpt2_options o = gpt2_default_options();
    const char *b = getenv("GPT2_TEST_BACKEND"), *d = getenv("GPT2_TEST_DTYPE");
    o.backend = (b && !strcmp(b, "cuda")) ? GPT2_BACKEND_CUDA : GPT2_BACKEND_CPU;
    o.dtype = (d && !strcmp(d, "f16")) ? GPT2_DTYPE_F16 : (d && !strcmp(d, "bf16")) ? GPT2_DTYPE_BF16 : GPT2_DTYPE_F32;
    return o;
}

#include "tests/tokenizer_tests.inc"
#include "tests/cuda_tests.inc"

static const test_case *const test_groups[] = { tokenizer_tests, cuda_tests };

int main(int argc, char **argv) {
    int passed = 0, failed = 0, skipped = 0;
    for (size_t g = 0; g < sizeof test_groups / sizeof test_groups[0]; g++) {
        for (const test_case *t = test_groups[g]; t->name; t++) {
            int selected = argc < 2;
            for (int a = 1; a < argc; a++) if (strstr(t->name, argv[a])) selected = 1;
            if (!selected) continue;
            fflush(stdout);
            int r = t->fn();
            printf("%s %s\n", r == SKIP ? "skip" : r ? "FAIL" : "ok  ", t->name);
            if (r == SKIP) skipped++; else if (r) failed++; else passed++;
        }
    }
    if (skipped) printf("%d skipped (what they need is absent here)\n", skipped);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
