/* fuzz.h — what every harness in tests/fuzz shares: the library (CPU part, implementation included
   so harnesses may reach its internal entry points), built with a capped allocator, plus temp files.

   The cap plays a small machine: an allocation the input sizes (a config asking for a 100 GB model)
   is refused as malloc would refuse it there, so the library's out-of-memory paths run instead of
   libFuzzer's -malloc_limit_mb stopping the run. Anything the cap refuses is counted, not a failure.

   GPT2_FUZZ_ROOT (set by run.sh) is the repository root: fixtures are read from there. */
#ifndef GPT2_FUZZ_H
#define GPT2_FUZZ_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>

#ifndef GPT2_FUZZ_ROOT
#define GPT2_FUZZ_ROOT "."
#endif

#define FUZZ_ALLOC_CAP ((size_t)256 << 20)
static size_t fuzz_refused;

static inline void *fuzz_malloc(size_t n) {
    if (n > FUZZ_ALLOC_CAP) { fuzz_refused++; return NULL; }
    return malloc(n);
}
static inline void *fuzz_calloc(size_t n, size_t s) {
    if (s && n > FUZZ_ALLOC_CAP / s) { fuzz_refused++; return NULL; }
    return calloc(n, s);
}
#define GPT2_MALLOC(n) fuzz_malloc(n)
#define GPT2_CALLOC(n, s) fuzz_calloc((n), (s))
#define GPT2_FREE(p) free(p)

#define GPT2_IMPLEMENTATION
#include "gpt2.cuh"

/* A broken invariant: print what differed and abort, which libFuzzer reports as a crash. */
#define FUZZ_CHECK(cond, ...)                                                     \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                         \
            fprintf(stderr, "\n");                                                \
            abort();                                                              \
        }                                                                         \
    } while (0)

/* A directory of our own for the files a harness writes (tmpfs when there is one), removed at exit. */
static char fuzz_dir[256];
static char fuzz_dir_files[8][64];
static int fuzz_dir_n_files;

static inline void fuzz_dir_remove(void) {
    char path[512];
    for (int i = 0; i < fuzz_dir_n_files; i++) {
        snprintf(path, sizeof path, "%s/%s", fuzz_dir, fuzz_dir_files[i]);
        unlink(path);
    }
    rmdir(fuzz_dir);
}

static inline const char *fuzz_dir_make(void) {
    if (fuzz_dir[0]) return fuzz_dir;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(fuzz_dir, sizeof fuzz_dir, "%s/gpt2_fuzz_XXXXXX", base);
    if (!mkdtemp(fuzz_dir)) { perror("mkdtemp"); exit(2); }
    atexit(fuzz_dir_remove);
    return fuzz_dir;
}

/* Writes data to name inside the harness's directory (a file of that name is replaced). */
static inline void fuzz_write(const char *name, const void *data, size_t len) {
    char path[512];
    int known = 0;
    snprintf(path, sizeof path, "%s/%s", fuzz_dir_make(), name);
    for (int i = 0; i < fuzz_dir_n_files; i++) known |= !strcmp(fuzz_dir_files[i], name);
    if (!known && fuzz_dir_n_files < 8) snprintf(fuzz_dir_files[fuzz_dir_n_files++], sizeof fuzz_dir_files[0], "%s", name);
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0) { perror(path); exit(2); }
}

static inline void fuzz_unlink(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir_make(), name);
    unlink(path);
}

/* Writes a tokenizer's two files under the names `odd` picks (encoder.json + vocab.bpe, else
   vocab.json + merges.txt; the other pair is removed) and loads them. A failed load must leave no
   tokenizer and say why; returns the tokenizer, or NULL after a (checked) failure. */
static inline gpt2_tokenizer *fuzz_load_tokenizer(int odd, const void *vocab, size_t vocab_len, const void *merges, size_t merges_len) {
    fuzz_unlink(odd ? "vocab.json" : "encoder.json");
    fuzz_unlink(odd ? "merges.txt" : "vocab.bpe");
    fuzz_write(odd ? "encoder.json" : "vocab.json", vocab, vocab_len);
    fuzz_write(odd ? "vocab.bpe" : "merges.txt", merges, merges_len);
    gpt2_tokenizer *tok = NULL;
    gpt2__error[0] = 0;
    gpt2_status st = gpt2_tokenizer_load(&tok, fuzz_dir_make());
    if (st != GPT2_OK) {
        FUZZ_CHECK(tok == NULL, "a failed load (status %d) returned a tokenizer", (int)st);
        FUZZ_CHECK(gpt2_last_error()[0], "status %d without a message", (int)st);
        return NULL;
    }
    return tok;
}

/* A fixture of the repository (path relative to its root), read whole; exits when it is missing. */
static inline char *fuzz_fixture(const char *rel, size_t *len) {
    char path[1024], *data;
    snprintf(path, sizeof path, "%s/%s", GPT2_FUZZ_ROOT, rel);
    if (gpt2__read_file(path, &data, len)) { fprintf(stderr, "fixture: %s\n", gpt2_last_error()); exit(2); }
    return data;
}

/* The full GPT-2 tokenizer of weights/, loaded once (encode and decode harnesses). */
static inline gpt2_tokenizer *fuzz_gpt2_tokenizer(void) {
    static gpt2_tokenizer *tok;
    char path[1024];
    if (tok) return tok;
    snprintf(path, sizeof path, "%s/weights", GPT2_FUZZ_ROOT);
    if (gpt2_tokenizer_load(&tok, path)) { fprintf(stderr, "tokenizer: %s\n", gpt2_last_error()); exit(2); }
    return tok;
}

/* Encodes text and checks what every encoding must satisfy: the sizing call and the filling call
   agree, a short buffer gets a prefix (texts up to 4 KB), every id is in the vocabulary, and decoding gives the text
   back byte for byte. Returns the ids (caller frees) and their count; NULL and -1 when the encoder
   ran out of memory because the allocator's cap refused it (a text too big for this machine). */
static inline int *fuzz_encode_round_trip(const gpt2_tokenizer *tok, const char *text, size_t len, int *count) {
    size_t refused = fuzz_refused;
    int n = gpt2_encode(tok, text, len, NULL, 0);
    *count = -1;
    if (n < 0 && fuzz_refused > refused && strstr(gpt2_last_error(), "out of memory")) return NULL;
    FUZZ_CHECK(n >= 0, "encode of %zu bytes failed: %s", len, gpt2_last_error());
    FUZZ_CHECK(len == 0 || n > 0, "%zu bytes encoded to no tokens", len);
    FUZZ_CHECK((size_t)n <= len, "%zu bytes encoded to %d tokens (more than one per byte)", len, n);
    int *ids = (int *)malloc((size_t)n * sizeof(int) + 1);
    int again = gpt2_encode(tok, text, len, ids, n);
    FUZZ_CHECK(again == n, "sizing call said %d tokens, filling call %d", n, again);
    for (int i = 0; i < n; i++)
        FUZZ_CHECK(ids[i] >= 0 && ids[i] < tok->n_vocab, "id %d at %d is outside [0, %d)", ids[i], i, tok->n_vocab);
    if (n > 1 && len <= 4096) { /* (a third encode of a long run would slow the fuzzer for little) */
        int half = n / 2, *pre = (int *)malloc((size_t)half * sizeof(int));
        int got = gpt2_encode(tok, text, len, pre, half);
        FUZZ_CHECK(got == n, "encode with cap %d returned %d, expected the full count %d", half, got, n);
        FUZZ_CHECK(!memcmp(pre, ids, (size_t)half * sizeof(int)), "encode with cap %d wrote other ids than the full call", half);
        free(pre);
    }
    int total = gpt2_decode(tok, ids, n, NULL, 0);
    FUZZ_CHECK(total >= 0 && (size_t)total == len, "decode(encode(%zu bytes)) sizes %d bytes", len, total);
    char *back = (char *)malloc(len + 1);
    total = gpt2_decode(tok, ids, n, back, len + 1);
    FUZZ_CHECK((size_t)total == len && back[len] == 0, "decode into %zu bytes returned %d", len + 1, total);
    for (size_t i = 0; i < len; i++)
        FUZZ_CHECK(back[i] == text[i], "decode(encode(text)) differs at byte %zu of %zu: 0x%02X vs 0x%02X",
                   i, len, (unsigned char)back[i], (unsigned char)text[i]);
    free(back);
    *count = n;
    return ids;
}

/* Runs a model that loaded from fuzzed files: a forward pass and a short generation (greedy and
   sampled). Weights may be anything (NaN, inf): nothing may crash, and every token is in range. */
static inline void fuzz_run_model(gpt2_model *m) {
    gpt2_config c = gpt2_model_config(m);
    int T = gpt2_model_max_seq(m) < 3 ? gpt2_model_max_seq(m) : 3;
    int tokens[3] = { 0, c.n_vocab - 1, c.n_vocab / 2 };
    float *logits = (float *)malloc((size_t)T * c.n_vocab * sizeof(float));
    FUZZ_CHECK(gpt2_forward(m, tokens, 1, T, logits) == GPT2_OK, "forward failed: %s", gpt2_last_error());
    free(logits);
    if (gpt2_model_max_seq(m) < 2) return;
    int out[2][2];
    gpt2_request r[2];
    memset(r, 0, sizeof r);
    for (int i = 0; i < 2; i++) {
        r[i].prompt = tokens; r[i].prompt_len = 1; r[i].max_new_tokens = 1; r[i].stop_token = -1; r[i].out = out[i];
    }
    r[1].sampling.temperature = 0.8f; r[1].sampling.top_k = 3; r[1].sampling.top_p = 0.9f; r[1].sampling.seed = 7;
    FUZZ_CHECK(gpt2_generate(m, r, 2, NULL, NULL) == GPT2_OK, "generate failed: %s", gpt2_last_error());
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < r[i].n_out; k++)
            FUZZ_CHECK(out[i][k] >= 0 && out[i][k] < c.n_vocab, "request %d drew token %d (vocabulary %d)", i, out[i][k], c.n_vocab);
}

#endif /* GPT2_FUZZ_H */
