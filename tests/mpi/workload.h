/* The requests the MPI tests send, made the same way by tests/mpi/test_mpi.c (under mpirun) and by
   tests/mpi_tests.inc (the single-process reference): prompts of 9..40 tokens, 1..24 new tokens,
   greedy, sampled, or both mixed with stop tokens and callbacks that end requests early; the controls workload
   adds every field behind gpt2_sampling and gpt2_request's pointers (penalties, bias lists with bans, stop ids,
   stop strings, logprobs with alternatives). Every request costs more than 8 positions, so a rank whose model has
   max_seq = 8 rejects whatever it is given. The texts of the scoring tests are made here too. */
#ifndef GPT2_MPI_WORKLOAD_H
#define GPT2_MPI_WORKLOAD_H

enum { WORKLOAD_GREEDY = 0, WORKLOAD_SAMPLED = 1, WORKLOAD_MIXED = 2, WORKLOAD_CONTROLS = 3 };
#define WORKLOAD_MAX_PROMPT 40
#define WORKLOAD_MAX_NEW 24
#define WORKLOAD_MAX_TOP 20
#define WORKLOAD_TOKENIZER "weights" /* GPT-2's: the test model's 101 ids decode to single bytes, some not ASCII */
/* a request's line at most (workload_format) */
#define WORKLOAD_LINE (64 + WORKLOAD_MAX_NEW * (12 + 9 + WORKLOAD_MAX_TOP * 14))

static uint32_t workload_next(uint32_t *x) {
    *x = *x * 1664525u + 1013904223u;
    return *x >> 8;
}

/* Fills n requests; prompts has room for n * WORKLOAD_MAX_PROMPT ids, outs for n * WORKLOAD_MAX_NEW. */
static inline void workload_make(gpt2_request *reqs, int *prompts, int *outs, int n, int kind, int n_vocab) {
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
        const int mixed = kind == WORKLOAD_MIXED || kind == WORKLOAD_CONTROLS;
        const int sampled = kind == WORKLOAD_SAMPLED || (mixed && i % 2);
        if (sampled) {
            r->sampling.temperature = 0.7f + 0.1f * (float)(i % 5);
            r->sampling.top_k = i % 3 ? 20 : 0;
            r->sampling.top_p = i % 4 ? 0.9f : 0.0f;
            r->sampling.seed = 1000u + (uint64_t)i;
        }
        if (mixed && i % 3 == 0) r->stop_token = (int)(workload_next(&x) % (uint32_t)n_vocab);
    }
}

/* The controls workload's lists, shared by the requests that use them. */
static const int workload_bias_ids[4] = {7, 19, 42, 64};
static const float workload_bias[4] = {2.5f, -INFINITY, -1.25f, -INFINITY};
static const int workload_stop_ids[2] = {16, 57};
static const char *const workload_stop_strings[3] = {"(D", "\xa2", "i"};

/* Makes the workload WORKLOAD_CONTROLS's from a WORKLOAD_MIXED one: every request gets some of the controls, so that
   each control is met greedy and sampled. lps has room for n * WORKLOAD_MAX_NEW floats, top_ids and top_lps for
   n * WORKLOAD_MAX_NEW * WORKLOAD_MAX_TOP; tok decodes the stop strings (rank 0's). */
static inline void workload_controls(gpt2_request *reqs, int n, float *lps, int *top_ids, float *top_lps, const gpt2_tokenizer *tok) {
    for (int i = 0; i < n; i++) {
        gpt2_request *r = &reqs[i];
        gpt2_sampling *s = &r->sampling;
        switch (i % 4) {
        case 0: s->repetition_penalty = 1.3f; s->no_repeat_ngram = 2; break;
        case 1: s->presence_penalty = 0.5f; s->frequency_penalty = 0.3f; s->min_p = 0.05f; break;
        case 2: s->typical_p = 0.9f; s->no_repeat_ngram = 3; s->repetition_penalty = 0.8f; break;
        default: s->frequency_penalty = -0.2f; break;
        }
        if (i % 3 != 2) { s->bias_ids = workload_bias_ids + i % 2; s->bias = workload_bias + i % 2; s->n_bias = 3; }
        if (i % 2 == 0) { r->stop_ids = workload_stop_ids; r->n_stop_ids = 2; s->min_new_tokens = 1 + i % 5; }
        if (i % 5 != 3) { r->stop_strings = workload_stop_strings + i % 3; r->n_stop_strings = 3 - i % 3; r->tokenizer = tok; }
        if (i % 4 != 1) r->out_logprobs = lps + (size_t)i * WORKLOAD_MAX_NEW;
        r->top_logprobs = i % 3 == 0 ? 5 : i % 7 == 1 ? WORKLOAD_MAX_TOP : 0;
        if (r->top_logprobs) {
            r->out_top_ids = top_ids + (size_t)i * WORKLOAD_MAX_NEW * WORKLOAD_MAX_TOP;
            r->out_top_logprobs = top_lps + (size_t)i * WORKLOAD_MAX_NEW * WORKLOAD_MAX_TOP;
        }
    }
}

/* A float's bits, so that results compare bit for bit */
static unsigned workload_bits(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return (unsigned)b;
}

/* Request i's results as one line: "req I N: tokens | finish R text T | lp bits | top id:bits ..."; returns its length. */
static inline int workload_format(char *buf, int i, const gpt2_request *r) {
    char *p = buf;
    p += sprintf(p, "req %d %d:", i, r->n_out);
    for (int t = 0; t < r->n_out; t++) p += sprintf(p, " %d", r->out[t]);
    p += sprintf(p, " | finish %d text %d | lp", r->finish_reason, r->text_len);
    for (int t = 0; r->out_logprobs && t < r->n_out; t++) p += sprintf(p, " %08x", workload_bits(r->out_logprobs[t]));
    p += sprintf(p, " | top");
    for (int t = 0; t < r->n_out * r->top_logprobs; t++)
        p += sprintf(p, " %d:%08x", r->out_top_ids[t], workload_bits(r->out_top_logprobs[t]));
    p += sprintf(p, "\n");
    return (int)(p - buf);
}

/* The scoring tests' texts: n texts of 1..150 tokens (the test model's window is 64), n_context 1..3 (never more than
   the text), strides 0, 1, 17 and 64, logprobs and ranks asked for or not. tokens has room for n * WORKLOAD_MAX_TEXT
   ids, lps and ranks for as many values. */
#define WORKLOAD_MAX_TEXT 150
static inline void workload_texts(gpt2_score_request *reqs, int *tokens, float *lps, int *ranks, int n, int n_vocab) {
    uint32_t x = 4099u;
    static const int strides[4] = {0, 1, 17, 64};
    for (int i = 0; i < n; i++) {
        gpt2_score_request *r = &reqs[i];
        int *t = tokens + (size_t)i * WORKLOAD_MAX_TEXT;
        memset(r, 0, sizeof *r);
        r->n_tokens = 1 + (int)(workload_next(&x) % WORKLOAD_MAX_TEXT);
        for (int k = 0; k < r->n_tokens; k++) t[k] = (int)(workload_next(&x) % (uint32_t)n_vocab);
        r->tokens = t;
        r->n_context = 1 + i % 3 < r->n_tokens ? 1 + i % 3 : r->n_tokens;
        r->stride = strides[i % 4];
        if (i % 3 != 1) r->logprobs = lps + (size_t)i * WORKLOAD_MAX_TEXT;
        if (i % 2 == 0) r->ranks = ranks + (size_t)i * WORKLOAD_MAX_TEXT;
    }
}

/* Text i's results as one line: "score I N sum BITS: lp bits | ranks"; returns its length. */
static inline int workload_format_score(char *buf, int i, const gpt2_score_request *r) {
    char *p = buf;
    uint64_t sum;
    memcpy(&sum, &r->sum_logprob, 8);
    p += sprintf(p, "score %d %d sum %016llx:", i, r->n_scored, (unsigned long long)sum);
    for (int t = 0; r->logprobs && t < r->n_scored; t++) p += sprintf(p, " %08x", workload_bits(r->logprobs[t]));
    p += sprintf(p, " | ranks");
    for (int t = 0; r->ranks && t < r->n_scored; t++) p += sprintf(p, " %d", r->ranks[t]);
    p += sprintf(p, "\n");
    return (int)(p - buf);
}
#define WORKLOAD_SCORE_LINE (64 + WORKLOAD_MAX_TEXT * 21)

/* The mixed and controls workloads' callback rule: requests 4, 9, 14, ... are ended by on_token after 3 tokens. */
static inline int workload_callback_stops(int kind, int index, int n_so_far) {
    return (kind == WORKLOAD_MIXED || kind == WORKLOAD_CONTROLS) && index % 5 == 4 && n_so_far >= 3;
}

/* The tokens of the logits check (test_mpi --logits T and the single-process reference): T tokens of the vocabulary. */
static inline void workload_logit_tokens(int *tokens, int T, int n_vocab) {
    for (int i = 0; i < T; i++) tokens[i] = (int)(((uint32_t)i * 7919u + 3u) % (uint32_t)n_vocab);
}

#endif
