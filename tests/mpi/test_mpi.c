/* test_mpi — the MPI side of the MPI tests (tests/mpi_tests.inc runs it under mpirun and compares).

   Usage: mpirun -np K tests/mpi/test_mpi MODEL N KIND [options]
       MODEL  model directory (only rank 0 reads it)     N  requests (rank 0 makes them)
       KIND   0 greedy, 1 sampled, 2 mixed, 3 controls (see workload.h; rank 0 alone loads the controls' tokenizer)
       --max-batch B        KV slots per rank (default 3, so requests queue on every rank)
       --bad F              rank 0's request 3 gets a bad field F: 1 sampling.bias[1] NaN, 2 an empty stop string,
                            3 top_logprobs 21 (gpt2_mpi_generate must fail everywhere with rank 0's message)
       --score B            no generation: gpt2_mpi_score of N texts (workload_texts); B 1: good texts, 2: text 2's
                            n_context is 0; rank 0 prints "score R S message" per rank, then a line per text
       --fail-load-rank R   rank R loads with options.max_batch = -1 (gpt2_mpi_load must fail everywhere)
       --fail-gen-rank R    rank R loads with options.max_seq = 8 (every request is longer: generation fails there)
       --hidden PATH        each rank reports whether it can open PATH (the multi-node test's model file)
       --logits T           no generation: each rank runs gpt2_forward on T tokens (workload_logit_tokens) and
                            rank 0 prints "logits R" and every logit's bits in hex, per rank
   Rank 0 prints, in order: "ranks K", "local_rank R L" per rank, "sees R yes|no" with --hidden,
   "load R S message" per rank, then (when loading worked) "generate R S message" per rank and, when
   generation worked, each request's workload_format line and "callbacks ok" (or what was wrong with them). */
#define GPT2_IMPLEMENTATION
#include "gpt2.cuh"
#define GPT2_MPI_IMPLEMENTATION
#include "gpt2_mpi.h"
#include "tests/mpi/workload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <math.h>

/* what on_token saw on this rank: (global index, token) pairs in call order */
typedef struct token_log { int kind, n, cap; int *pairs; int *count; } token_log;

static int log_token(void *user, int request, int token) {
    token_log *l = (token_log *)user;
    if (l->n < l->cap) { l->pairs[2 * l->n] = request; l->pairs[2 * l->n + 1] = token; }
    l->n++;
    int seen = ++l->count[request];
    return workload_callback_stops(l->kind, request, seen);
}

/* Rank 0 prints one line per rank: "<what> R S message". */
static void print_statuses(const char *what, gpt2_status st, int rank, int size) {
    char line[600];
    snprintf(line, sizeof line, "%d %s", (int)st, st ? gpt2_last_error() : "ok");
    char *all = rank == 0 ? (char *)malloc((size_t)size * sizeof line) : NULL;
    MPI_Gather(line, (int)sizeof line, MPI_CHAR, all, (int)sizeof line, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) for (int r = 0; r < size; r++) printf("%s %d %s\n", what, r, all + (size_t)r * sizeof line);
    free(all);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 4) {
        if (rank == 0) fprintf(stderr, "usage: test_mpi MODEL N KIND [--max-batch B] [--fail-load-rank R] [--fail-gen-rank R] [--hidden PATH]\n");
        MPI_Finalize();
        return 2;
    }
    const char *model_dir = argv[1], *hidden = NULL;
    int n = atoi(argv[2]), kind = atoi(argv[3]), max_batch = 3, fail_load = -1, fail_gen = -1, logits_T = 0, bad = 0, score = 0, single = 0;
    for (int a = 4; a + 1 < argc; a += 2) {
        if (!strcmp(argv[a], "--max-batch")) max_batch = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "--fail-load-rank")) fail_load = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "--fail-gen-rank")) fail_gen = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "--hidden")) hidden = argv[a + 1];
        else if (!strcmp(argv[a], "--logits")) logits_T = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "--bad")) bad = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "--score")) score = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "--single")) single = atoi(argv[a + 1]);
    }
    int local = gpt2_mpi_local_rank(MPI_COMM_WORLD);
    int *locals = (int *)malloc((size_t)size * sizeof(int));
    MPI_Gather(&local, 1, MPI_INT, locals, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("ranks %d\n", size);
        for (int r = 0; r < size; r++) printf("local_rank %d %d\n", r, locals[r]);
    }
    free(locals);
    if (hidden) {
        int sees = access(hidden, R_OK) == 0, *all = (int *)malloc((size_t)size * sizeof(int));
        MPI_Gather(&sees, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (rank == 0) for (int r = 0; r < size; r++) printf("sees %d %s\n", r, all[r] ? "yes" : "no");
        free(all);
    }

    gpt2_options opt = gpt2_default_options();
    opt.backend = GPT2_BACKEND_CPU;
    opt.max_batch = rank == fail_load ? -1 : max_batch;
    if (rank == fail_gen) opt.max_seq = 8;
    gpt2_model *m = NULL;
    /* --single 1 (with one rank): the same work through the single-process calls, the reference of the MPI runs
       from the same build (another build, e.g. one with fused multiply-adds, may differ in the last bits) */
    gpt2_status st = single ? gpt2_load(&m, model_dir, &opt) : gpt2_mpi_load(MPI_COMM_WORLD, &m, model_dir, &opt);
    print_statuses("load", st, rank, size);
    if (st) { fflush(stdout); MPI_Finalize(); return 1; }
    if (logits_T > 0) { /* every rank's model, on the same tokens; rank 0 prints them all */
        const int V = gpt2_model_config(m).n_vocab, T = logits_T < gpt2_model_config(m).n_ctx ? logits_T : gpt2_model_config(m).n_ctx;
        int *tokens = (int *)malloc((size_t)T * sizeof(int));
        float *lg = (float *)malloc((size_t)T * V * sizeof(float)), *all = rank == 0 ? (float *)malloc((size_t)size * T * V * sizeof(float)) : NULL;
        workload_logit_tokens(tokens, T, V);
        st = gpt2_forward(m, tokens, 1, T, lg);
        print_statuses("forward", st, rank, size);
        MPI_Gather(lg, T * V, MPI_FLOAT, all, T * V, MPI_FLOAT, 0, MPI_COMM_WORLD);
        for (int r = 0; rank == 0 && r < size; r++) {
            printf("logits %d", r);
            for (int i = 0; i < T * V; i++) {
                uint32_t bits;
                memcpy(&bits, &all[(size_t)r * T * V + i], 4);
                printf(" %08x", (unsigned)bits);
            }
            printf("\n");
        }
        fflush(stdout);
        free(tokens); free(lg); free(all);
        gpt2_free(m);
        MPI_Finalize();
        return st ? 1 : 0;
    }

    if (score) { /* rank 0's texts scored across the ranks; rank 0 prints every result */
        gpt2_score_request *texts = NULL;
        int *tokens = NULL, *ranks = NULL, n_texts = 0;
        float *lps = NULL;
        if (rank == 0) {
            texts = (gpt2_score_request *)calloc((size_t)n + 1, sizeof *texts);
            tokens = (int *)calloc((size_t)n * WORKLOAD_MAX_TEXT + 1, sizeof(int));
            ranks = (int *)calloc((size_t)n * WORKLOAD_MAX_TEXT + 1, sizeof(int));
            lps = (float *)calloc((size_t)n * WORKLOAD_MAX_TEXT + 1, sizeof(float));
            workload_texts(texts, tokens, lps, ranks, n, gpt2_model_config(m).n_vocab);
            if (score == 2 && n > 2) texts[2].n_context = 0;
            n_texts = n;
        }
        st = single ? gpt2_score(m, texts, n_texts) : gpt2_mpi_score(MPI_COMM_WORLD, m, texts, n_texts);
        print_statuses("score", st, rank, size);
        if (rank == 0 && st == GPT2_OK) {
            char *line = (char *)malloc(WORKLOAD_SCORE_LINE);
            for (int i = 0; i < n; i++) { workload_format_score(line, i, &texts[i]); fputs(line, stdout); }
            free(line);
        }
        fflush(stdout);
        free(texts); free(tokens); free(ranks); free(lps);
        gpt2_free(m);
        MPI_Finalize();
        return st ? 1 : 0;
    }

    gpt2_request *reqs = NULL;
    gpt2_tokenizer *tok = NULL;
    int *prompts = NULL, *outs = NULL, *top_ids = NULL, n_here = 0;
    float *lps = NULL, *top_lps = NULL;
    static const int bad_bias_ids[2] = {5, 6};
    static const char *const bad_stop[2] = {"x", ""};
    float bad_bias[2];
    bad_bias[0] = 1.0f; bad_bias[1] = NAN;
    if (rank == 0) {
        reqs = (gpt2_request *)calloc((size_t)n + 1, sizeof *reqs);
        prompts = (int *)calloc((size_t)n * WORKLOAD_MAX_PROMPT + 1, sizeof(int));
        outs = (int *)calloc((size_t)n * WORKLOAD_MAX_NEW + 1, sizeof(int));
        lps = (float *)calloc((size_t)n * WORKLOAD_MAX_NEW + 1, sizeof(float));
        top_ids = (int *)calloc((size_t)n * WORKLOAD_MAX_NEW * WORKLOAD_MAX_TOP + 1, sizeof(int));
        top_lps = (float *)calloc((size_t)n * WORKLOAD_MAX_NEW * WORKLOAD_MAX_TOP + 1, sizeof(float));
        workload_make(reqs, prompts, outs, n, kind, gpt2_model_config(m).n_vocab);
        if (kind == WORKLOAD_CONTROLS) {
            if (gpt2_tokenizer_load(&tok, WORKLOAD_TOKENIZER)) printf("tokenizer: %s\n", gpt2_last_error());
            workload_controls(reqs, n, lps, top_ids, top_lps, tok);
        }
        if (bad == 1 && n > 3) { reqs[3].sampling.bias_ids = bad_bias_ids; reqs[3].sampling.bias = bad_bias; reqs[3].sampling.n_bias = 2; }
        if (bad == 2 && n > 3) { reqs[3].stop_strings = bad_stop; reqs[3].n_stop_strings = 2; reqs[3].tokenizer = tok; }
        if (bad == 3 && n > 3) reqs[3].top_logprobs = 21;
        n_here = n;
    }
    token_log log;
    log.kind = kind; log.n = 0; log.cap = n * WORKLOAD_MAX_NEW;
    log.pairs = (int *)malloc(((size_t)log.cap + 1) * 2 * sizeof(int));
    log.count = (int *)calloc((size_t)n + 1, sizeof(int));
    st = single ? gpt2_generate(m, reqs, n_here, log_token, &log) : gpt2_mpi_generate(MPI_COMM_WORLD, m, reqs, n_here, log_token, &log);
    print_statuses("generate", st, rank, size);

    /* every rank's callback log to rank 0, to check it against the gathered outputs */
    int *log_n = rank == 0 ? (int *)calloc((size_t)size, sizeof(int)) : NULL, *displ = NULL, *all = NULL;
    if (log.n > log.cap) log.n = log.cap + 1; /* overflow: reported below as a mismatch */
    int send_n = log.n > log.cap ? log.cap : log.n;
    MPI_Gather(&send_n, 1, MPI_INT, log_n, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        displ = (int *)calloc((size_t)size, sizeof(int));
        int total = 0;
        for (int r = 0; r < size; r++) { log_n[r] *= 2; displ[r] = total; total += log_n[r]; }
        all = (int *)malloc(((size_t)total + 1) * sizeof(int));
    }
    MPI_Gatherv(log.pairs, 2 * send_n, MPI_INT, all, log_n, displ, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0 && st == GPT2_OK) {
        char *line = (char *)malloc(WORKLOAD_LINE);
        for (int i = 0; i < n; i++) { workload_format(line, i, &reqs[i]); fputs(line, stdout); }
        free(line);
        /* per request: the tokens its callbacks delivered, all on one rank, must be its output */
        int *seen = (int *)calloc((size_t)n + 1, sizeof(int)), *where = (int *)malloc(((size_t)n + 1) * sizeof(int));
        int bad = 0;
        for (int i = 0; i < n; i++) where[i] = -1;
        for (int r = 0; r < size && !bad; r++)
            for (int k = displ[r]; k < displ[r] + log_n[r] && !bad; k += 2) {
                int i = all[k], tok = all[k + 1];
                if (i < 0 || i >= n) { printf("callbacks BAD: rank %d reported request %d of %d\n", r, i, n); bad = 1; break; }
                if (where[i] >= 0 && where[i] != r) { printf("callbacks BAD: request %d reported by ranks %d and %d\n", i, where[i], r); bad = 1; break; }
                where[i] = r;
                if (seen[i] >= reqs[i].n_out || reqs[i].out[seen[i]] != tok) {
                    printf("callbacks BAD: request %d token %d: callback %d, output %d\n", i, seen[i], tok,
                           seen[i] < reqs[i].n_out ? reqs[i].out[seen[i]] : -1);
                    bad = 1;
                    break;
                }
                seen[i]++;
            }
        for (int i = 0; i < n && !bad; i++)
            if (seen[i] != reqs[i].n_out) { printf("callbacks BAD: request %d: %d callbacks for %d tokens\n", i, seen[i], reqs[i].n_out); bad = 1; }
        if (!bad) printf("callbacks ok\n");
        free(seen); free(where);
    }
    fflush(stdout);
    free(log_n); free(displ); free(all); free(log.pairs); free(log.count);
    free(reqs); free(prompts); free(outs); free(lps); free(top_ids); free(top_lps);
    gpt2_tokenizer_free(tok);
    gpt2_free(m);
    MPI_Finalize();
    return st ? 1 : 0;
}
