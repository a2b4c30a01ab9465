/* The requests the MPI tests send, made the same way by tests/mpi/test_mpi.c (under mpirun) and by
   tests/mpi_tests.inc (the single-process reference): prompts of 9..40 tokens, 1..24 new tokens,
   greedy, sampled, or both mixed with stop tokens and callbacks that end requests early. Every request costs more than 8 positions, so a
   rank whose model has max_seq = 8 rejects whatever it is given. */
#ifndef GPT2_MPI_WORKLOAD_H
#define GPT2_MPI_WORKLOAD_H

enum { WORKLOAD_GREEDY = 0, WORKLOAD_SAMPLED = 1, WORKLOAD_MIXED = 2 };
#define WORKLOAD_MAX_PROMPT 40
#define WORKLOAD_MAX_NEW 24

static uint32_t workload_next(uint32_t *x) {
    *x = *x * 1664525u + 1013904223u;
    return *x >> 8;
}

/* Fills n requests; prompts has room for n * WORKLOAD_MAX_PROMPT ids, outs for n * WORKLOAD_MAX_NEW. */
static void workload_make(gpt2_request *reqs, int *prompts, int *outs, int n, int kind, int n_vocab) {
    uint32_t x = 20261122u;
    for (int i = 0; i < n; i++) {
        gpt2_request *r = &reqs[i];
        int *p = prompts + (size_t)i * WORKLOAD_MAX_PROMPT;
        memset(r, 0, sizeof *r);
        r->prompt_len = 9 + (int)(workload_next(&x) % (WORKLOAD_MAX_PROMPT - 8));
        for (int t = 0; t < r->prompt_len; t++) p[t] = (int)(workload_next(&x) % (uint32_t)n_vocab);
        r->prompt = p;
        r->max_new_tokens = 1 + (int)(workload_next(&x) % WORKLOAD_MAX_NEW);
        r->out = outs + (size_t)i * WORKLOAD_MAX_NEW;
        r->stop_token = -1;
        int sampled = kind == WORKLOAD_SAMPLED || (kind == WORKLOAD_MIXED && i % 2);
        if (sampled) {
            r->sampling.temperature = 0.7f + 0.1f * (float)(i % 5);
            r->sampling.top_k = i % 3 ? 20 : 0;
            r->sampling.top_p = i % 4 ? 0.9f : 0.0f;
            r->sampling.seed = 1000u + (uint64_t)i;
        }
        if (kind == WORKLOAD_MIXED && i % 3 == 0) r->stop_token = (int)(workload_next(&x) % (uint32_t)n_vocab);
    }
}

/* The mixed workload's callback rule: requests 4, 9, 14, ... are ended by on_token after 3 tokens. */
static int workload_callback_stops(int kind, int index, int n_so_far) {
    return kind == WORKLOAD_MIXED && index % 5 == 4 && n_so_far >= 3;
}

/* The tokens of the logits check (test_mpi --logits T and the single-process reference): T tokens of the vocabulary. */
static void workload_logit_tokens(int *tokens, int T, int n_vocab) {
    for (int i = 0; i < T; i++) tokens[i] = (int)(((uint32_t)i * 7919u + 3u) % (uint32_t)n_vocab);
}

#endif
