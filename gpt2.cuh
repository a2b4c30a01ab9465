/* gpt2.cuh — GPT-2 inference in one file: CPU reference backend and CUDA backend.

   Do this:
       #define GPT2_IMPLEMENTATION
   before you include this file in *one* C or C++ (or CUDA) file to create the implementation.
   Every other file includes it plainly and sees only the API below.

   Build:
       nvcc -O3 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
            app.cu -lcublasLt -lcublas        (CUDA + CPU backends; any sm_70+ target works)
       cc -O3 -fopenmp -x c -DGPT2_NO_CUDA app.c -lm      (CPU backend only, plain C99)
   The CUDA backend exists when the implementation is compiled by nvcc (__CUDACC__) and
   GPT2_NO_CUDA is not defined. OpenMP, when enabled, threads the CPU backend.

   Configuration macros (define before the implementation include):
       GPT2_NO_CUDA           leave the CUDA backend out even under nvcc
       GPT2_MALLOC(n), GPT2_CALLOC(n,s), GPT2_FREE(p)   host allocator (default: stdlib)
       GPT2_MAX_ERROR         length of the error message buffer (default 512)

   Models: a Hugging Face GPT-2 directory as published (config.json + model.safetensors;
   gpt2, gpt2-medium, gpt2-large, gpt2-xl, distilgpt2), F32/F16/BF16 tensors, either key layout.
   Tokenizer: vocab.json + merges.txt (or encoder.json + vocab.bpe), byte-exact with tiktoken.

   Example (error handling shortened):
       gpt2_model *m; gpt2_tokenizer *tok;
       if (gpt2_load(&m, "weights", NULL) != GPT2_OK) { puts(gpt2_last_error()); return 1; }
       gpt2_tokenizer_load(&tok, "weights");
       int prompt[256], out[64];
       int n = gpt2_encode(tok, "To be, or not", 13, prompt, 256);
       gpt2_request r = {0};
       r.prompt = prompt; r.prompt_len = n; r.max_new_tokens = 64;
       r.sampling.temperature = 0.8f; r.sampling.top_k = 40; r.sampling.seed = 1;
       r.stop_token = 50256; r.out = out;
       gpt2_generate(m, &r, 1, NULL, NULL);
       char text[4096]; gpt2_decode(tok, out, r.n_out, text, sizeof text);

   Errors: every call returns a gpt2_status (or -1); gpt2_last_error() says why, naming the
   file, tensor or argument. The library never prints and never exits.

   Threads: a model serves one call at a time; different models may run on different threads.
   The last error is per thread.

   License: MIT, at the end of this file.
*/
#ifndef GPT2_CUH
#define GPT2_CUH

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define GPT2_API extern "C"
#else
#define GPT2_API extern
#endif

/* ---------------------------------------------------------------- public API */

typedef enum gpt2_status { GPT2_OK = 0, GPT2_ERR_ARG, GPT2_ERR_IO, GPT2_ERR_FORMAT,
                           GPT2_ERR_OOM, GPT2_ERR_DEVICE, GPT2_ERR_MPI } gpt2_status;
/* why the last call on this thread failed */
GPT2_API const char *gpt2_last_error(void);

typedef enum gpt2_backend { GPT2_BACKEND_AUTO = 0, GPT2_BACKEND_CPU, GPT2_BACKEND_CUDA } gpt2_backend;
typedef enum gpt2_dtype { GPT2_DTYPE_AUTO = 0, GPT2_DTYPE_F32, GPT2_DTYPE_F16, GPT2_DTYPE_BF16 } gpt2_dtype;
typedef struct gpt2_options {
    gpt2_backend backend;   /* AUTO: CUDA when a usable GPU exists, else CPU */
    int device;             /* CUDA ordinal; -1: current/default */
    gpt2_dtype dtype;       /* AUTO: F16 on CUDA, F32 on CPU */
    int max_batch;          /* sequences in flight at once; 0: engine decides */
    int max_seq;            /* prompt + generated tokens per sequence; 0: n_ctx */
} gpt2_options;
GPT2_API gpt2_options gpt2_default_options(void);

typedef struct gpt2_config { int n_layer, n_head, n_embd, n_ctx, n_vocab; float ln_eps; } gpt2_config;
typedef struct gpt2_model gpt2_model;
/* path: a directory holding config.json + model.safetensors, or a .safetensors file
   (config then from config.json beside it). opt may be NULL. */
GPT2_API gpt2_status gpt2_load(gpt2_model **model, const char *path, const gpt2_options *opt);
GPT2_API void        gpt2_free(gpt2_model *model);
GPT2_API gpt2_config gpt2_model_config(const gpt2_model *model);
/* logits for every position: tokens [B][T] -> logits [B][T][n_vocab], float32, host memory */
GPT2_API gpt2_status gpt2_forward(gpt2_model *model, const int *tokens, int B, int T, float *logits);

typedef struct gpt2_tokenizer gpt2_tokenizer;
/* path: a directory holding vocab.json + merges.txt (or encoder.json + vocab.bpe) */
GPT2_API gpt2_status gpt2_tokenizer_load(gpt2_tokenizer **tok, const char *path);
GPT2_API void gpt2_tokenizer_free(gpt2_tokenizer *tok);
/* both return the full count (ids or bytes) even when it exceeds cap (then cap are written); -1 on error */
GPT2_API int gpt2_encode(const gpt2_tokenizer *tok, const char *text, size_t len, int *ids, int cap);
GPT2_API int gpt2_decode(const gpt2_tokenizer *tok, const int *ids, int n, char *out, size_t cap);

/* temperature <= 0: greedy; top_k <= 0: no limit; top_p <= 0 or >= 1: no nucleus cut.
   A zero-filled struct therefore means plain greedy decoding. */
typedef struct gpt2_sampling { float temperature; int top_k; float top_p; uint64_t seed; } gpt2_sampling;
typedef struct gpt2_request {
    const int *prompt; int prompt_len;
    int max_new_tokens;
    gpt2_sampling sampling; /* temperature <= 0: greedy */
    int stop_token;         /* generation ends after this token is emitted; -1: never */
    int *out;               /* caller's buffer with room for max_new_tokens */
    int n_out;              /* set by gpt2_generate */
} gpt2_request;
/* called for each new token in order per request; return nonzero to end that request */
typedef int (*gpt2_token_fn)(void *user, int request, int token);
GPT2_API gpt2_status gpt2_generate(gpt2_model *model, gpt2_request *reqs, int n, gpt2_token_fn on_token, void *user);

/* Beyond the stable API: what the model actually runs on (after AUTO was resolved). */
GPT2_API gpt2_backend gpt2_model_backend(const gpt2_model *model);
GPT2_API gpt2_dtype   gpt2_model_dtype(const gpt2_model *model);
GPT2_API int          gpt2_model_max_batch(const gpt2_model *model);
GPT2_API int          gpt2_model_max_seq(const gpt2_model *model);

#endif /* GPT2_CUH */

#ifdef GPT2_IMPLEMENTATION
#ifndef GPT2_IMPLEMENTATION_DONE
#define GPT2_IMPLEMENTATION_DONE

#if defined(__CUDACC__) && !defined(GPT2_NO_CUDA)
#define GPT2__CUDA 1
#else
#define GPT2__CUDA 0
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <math.h>
#include <errno.h>
#include <sys/types.h>
#include <sys/stat.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#ifndef GPT2_MALLOC
#define GPT2_MALLOC(n) malloc(n)
#define GPT2_CALLOC(n, s) calloc((n), (s))
#define GPT2_FREE(p) free(p)
#endif
#ifndef GPT2_MAX_ERROR
#define GPT2_MAX_ERROR 512
#endif

#if defined(__cplusplus)
#define GPT2__TLS thread_local
#elif defined(_MSC_VER)
#define GPT2__TLS __declspec(thread)
#else
#define GPT2__TLS _Thread_local
#endif

#if defined(__GNUC__)
#define GPT2__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define GPT2__PRINTF(a, b)
#endif

/* ---------------------------------------------------------------- utilities: errors, allocation, files */

static GPT2__TLS char gpt2__error[GPT2_MAX_ERROR];

GPT2_API const char *gpt2_last_error(void) { return gpt2__error; }

/* Records why a call failed and returns the status, so failures read `return gpt2__fail(...)`. */
static gpt2_status gpt2__fail(gpt2_status st, const char *fmt, ...) GPT2__PRINTF(2, 3);
static gpt2_status gpt2__fail(gpt2_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(gpt2__error, sizeof gpt2__error, fmt, ap);
    va_end(ap);
    return st;
}

static void *gpt2__alloc(size_t n) { return GPT2_MALLOC(n ? n : 1); }
static void *gpt2__zalloc(size_t n) { return GPT2_CALLOC(n ? n : 1, 1); }

/* a*b (and a*b*c) in size_t, or 0 when the product overflows; callers treat 0 from nonzero inputs as overflow */
static int gpt2__mul_ok(size_t a, size_t b, size_t *out) {
    if (a && b > (size_t)-1 / a) return 0;
    *out = a * b;
    return 1;
}

/* Reads a whole file into memory (NUL-terminated for the text parsers). */
static gpt2_status gpt2__read_file(const char *path, char **data, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return gpt2__fail(GPT2_ERR_IO, "%s: cannot open (%s)", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return gpt2__fail(GPT2_ERR_IO, "%s: cannot seek", path); }
    long n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) { fclose(f); return gpt2__fail(GPT2_ERR_IO, "%s: not a regular file", path); }
    char *buf = (char *)gpt2__alloc((size_t)n + 1);
    if (!buf) { fclose(f); return gpt2__fail(GPT2_ERR_OOM, "%s: cannot allocate %ld bytes", path, n); }
    size_t got = n ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    if (got != (size_t)n) { GPT2_FREE(buf); return gpt2__fail(GPT2_ERR_IO, "%s: short read", path); }
    buf[n] = 0;
    *data = buf;
    *len = (size_t)n;
    return GPT2_OK;
}

static int gpt2__is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* dir + "/" + name into out (cap bytes); 0 when it does not fit */
static int gpt2__join(char *out, size_t cap, const char *dir, const char *name) {
    int n = snprintf(out, cap, "%s/%s", dir, name);
    return n > 0 && (size_t)n < cap;
}

/* ---------------------------------------------------------------- utilities: a small JSON reader */

/* A cursor over JSON text. The reader validates as it goes and never reads past `end`. */
typedef struct gpt2__json { const char *start, *p, *end; const char *file; int depth; } gpt2__json;

static void gpt2__json_ws(gpt2__json *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static gpt2_status gpt2__json_err(gpt2__json *j, const char *what) {
    return gpt2__fail(GPT2_ERR_FORMAT, "%s: bad JSON at byte %ld: %s", j->file, (long)(j->p - j->start), what);
}

static int gpt2__hex4(const char *p, unsigned *v) {
    unsigned r = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        r <<= 4;
        if (c >= '0' && c <= '9') r |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') r |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') r |= (unsigned)(c - 'A' + 10);
        else return 0;
    }
    *v = r;
    return 1;
}

static size_t gpt2__utf8_put(unsigned cp, char *out) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) { out[0] = (char)(0xC0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12)); out[1] = (char)(0x80 | ((cp >> 6) & 63));
        out[2] = (char)(0x80 | (cp & 63)); return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18)); out[1] = (char)(0x80 | ((cp >> 12) & 63));
    out[2] = (char)(0x80 | ((cp >> 6) & 63)); out[3] = (char)(0x80 | (cp & 63)); return 4;
}

/* Parses a JSON string at the cursor. With out != NULL the decoded UTF-8 is written there
   (the caller gives room for the raw length, which decoding never exceeds) and *n its length. */
static gpt2_status gpt2__json_string(gpt2__json *j, char *out, size_t *n) {
    gpt2__json_ws(j);
    if (j->p >= j->end || *j->p != '"') return gpt2__json_err(j, "expected a string");
    j->p++;
    size_t k = 0;
    while (j->p < j->end && *j->p != '"') {
        unsigned char c = (unsigned char)*j->p++;
        if (c < 0x20) return gpt2__json_err(j, "control character in string");
        if (c != '\\') { if (out) out[k] = (char)c; k++; continue; }
        if (j->p >= j->end) break;
        char e = *j->p++;
        unsigned cp = 0;
        switch (e) {
        case '"': cp = '"'; break; case '\\': cp = '\\'; break; case '/': cp = '/'; break;
        case 'b': cp = 8; break; case 'f': cp = 12; break; case 'n': cp = 10; break;
        case 'r': cp = 13; break; case 't': cp = 9; break;
        case 'u':
            if (j->end - j->p < 4 || !gpt2__hex4(j->p, &cp)) return gpt2__json_err(j, "bad \\u escape");
            j->p += 4;
            if (cp >= 0xD800 && cp < 0xDC00) {
                unsigned lo;
                if (j->end - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u' && gpt2__hex4(j->p + 2, &lo) &&
                    lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    j->p += 6;
                } else cp = 0xFFFD;
            } else if (cp >= 0xDC00 && cp < 0xE000) cp = 0xFFFD;
            break;
        default: return gpt2__json_err(j, "bad escape");
        }
        if (out) k += gpt2__utf8_put(cp, out + k);
        else { char tmp[4]; k += gpt2__utf8_put(cp, tmp); }
    }
    if (j->p >= j->end) return gpt2__json_err(j, "unterminated string");
    j->p++;
    if (n) *n = k;
    return GPT2_OK;
}

static gpt2_status gpt2__json_number(gpt2__json *j, double *v) {
    gpt2__json_ws(j);
    const char *s = j->p;
    if (s < j->end && (*s == '-' || *s == '+')) s++;
    while (s < j->end && ((*s >= '0' && *s <= '9') || *s == '.' || *s == 'e' || *s == 'E' || *s == '-' || *s == '+')) s++;
    size_t n = (size_t)(s - j->p);
    if (n == 0 || n > 63) return gpt2__json_err(j, "expected a number");
    char buf[64];
    memcpy(buf, j->p, n);
    buf[n] = 0;
    char *e;
    *v = strtod(buf, &e);
    if (e != buf + n) return gpt2__json_err(j, "bad number");
    j->p = s;
    return GPT2_OK;
}

/* Skips any JSON value (depth-limited, so hostile nesting cannot exhaust the stack). */
static gpt2_status gpt2__json_skip(gpt2__json *j) {
    gpt2__json_ws(j);
    if (j->p >= j->end) return gpt2__json_err(j, "unexpected end");
    char c = *j->p;
    if (c == '"') return gpt2__json_string(j, NULL, NULL);
    if (c == '{' || c == '[') {
        if (++j->depth > 64) return gpt2__json_err(j, "nested too deeply");
        char close = c == '{' ? '}' : ']';
        j->p++;
        gpt2__json_ws(j);
        if (j->p < j->end && *j->p == close) { j->p++; j->depth--; return GPT2_OK; }
        for (;;) {
            gpt2_status st;
            if (c == '{') {
                if ((st = gpt2__json_string(j, NULL, NULL))) return st;
                gpt2__json_ws(j);
                if (j->p >= j->end || *j->p != ':') return gpt2__json_err(j, "expected ':'");
                j->p++;
            }
            if ((st = gpt2__json_skip(j))) return st;
            gpt2__json_ws(j);
            if (j->p < j->end && *j->p == ',') { j->p++; continue; }
            if (j->p < j->end && *j->p == close) { j->p++; j->depth--; return GPT2_OK; }
            return gpt2__json_err(j, "expected ',' or a closing bracket");
        }
    }
    if (c == 't' && j->end - j->p >= 4 && !memcmp(j->p, "true", 4)) { j->p += 4; return GPT2_OK; }
    if (c == 'f' && j->end - j->p >= 5 && !memcmp(j->p, "false", 5)) { j->p += 5; return GPT2_OK; }
    if (c == 'n' && j->end - j->p >= 4 && !memcmp(j->p, "null", 4)) { j->p += 4; return GPT2_OK; }
    double v;
    return gpt2__json_number(j, &v);
}

/* Iterates an object's members: call with *first = 1; returns 1 with the key read (into key, up to
   cap-1 bytes, NUL-terminated; longer keys are truncated and flagged by *klen), 0 at '}', -1 on error. */
static int gpt2__json_member(gpt2__json *j, int *first, char *key, size_t cap, size_t *klen) {
    gpt2__json_ws(j);
    if (*first) {
        if (j->p >= j->end || *j->p != '{') { gpt2__json_err(j, "expected an object"); return -1; }
        j->p++;
        gpt2__json_ws(j);
        if (j->p < j->end && *j->p == '}') { j->p++; return 0; }
        *first = 0;
    } else {
        if (j->p < j->end && *j->p == '}') { j->p++; return 0; }
        if (j->p >= j->end || *j->p != ',') { gpt2__json_err(j, "expected ',' or '}'"); return -1; }
        j->p++;
    }
    gpt2__json k = *j;
    size_t n;
    if (gpt2__json_string(&k, NULL, &n)) return -1;
    *klen = n;
    if (n < cap) { if (gpt2__json_string(j, key, NULL)) return -1; key[n] = 0; }
    else { *j = k; if (cap) key[0] = 0; }
    gpt2__json_ws(j);
    if (j->p >= j->end || *j->p != ':') { gpt2__json_err(j, "expected ':'"); return -1; }
    j->p++;
    return 1;
}

/* ---------------------------------------------------------------- the model: config, weights, state */

#if GPT2__CUDA
#define GPT2__HD __host__ __device__
#else
#define GPT2__HD
#endif

/* One transformer block's weights, float32 on the host as loaded. GPT-2's Conv1D stores [in][out]. */
typedef struct gpt2__layer {
    float *ln1_w, *ln1_b;            /* [C] */
    float *qkv_w, *qkv_b;            /* [C][3C], [3C]: q | k | v along the output */
    float *attn_proj_w, *attn_proj_b; /* [C][C], [C] */
    float *ln2_w, *ln2_b;            /* [C] */
    float *fc_w, *fc_b;              /* [C][4C], [4C] */
    float *fc_proj_w, *fc_proj_b;    /* [4C][C], [C] */
} gpt2__layer;

typedef struct gpt2__weights {
    float *wte;                      /* [V][C], also the (tied) output projection */
    float *wpe;                      /* [n_ctx][C] */
    gpt2__layer *layers;             /* [n_layer] */
    float *lnf_w, *lnf_b;            /* [C] */
    float *arena;                    /* one allocation holding every tensor above */
    size_t n_floats;
} gpt2__weights;

/* The CPU backend's state: KV cache [n_layer][max_batch][max_seq][C] for K and for V. */
typedef struct gpt2__cpu {
    float *k_cache, *v_cache;
} gpt2__cpu;

struct gpt2_model {
    gpt2_config cfg;
    gpt2_backend backend;            /* resolved: CPU or CUDA */
    gpt2_dtype dtype;                /* resolved */
    int device;
    int max_batch, max_seq;
    gpt2__weights w;                 /* host weights (the CUDA backend may release them after upload) */
    gpt2__cpu cpu;
    void *cuda;                      /* gpt2__cuda_state *, owned by the CUDA backend */
};

/* One sequence's work in a batched step (engine -> backend): feed n_tok tokens at positions
   pos..pos+n_tok-1 of KV slot `slot`, then sample the next token from the last position's logits
   as the draw-th token of a request with these sampling parameters. */
typedef struct gpt2__seq {
    int slot, pos, n_tok;
    const int *tok;
    gpt2_sampling sampling;
    uint64_t draw;
} gpt2__seq;

/* ---------------------------------------------------------------- sampler (shared by both backends) */

/* Counter-based RNG: the draw-th uniform of a request depends on (seed, draw) alone, so a request's
   tokens never depend on batch, slot, backend or MPI rank. splitmix64's finalizer, twice. */
static GPT2__HD inline uint64_t gpt2__mix64(uint64_t x) {
    x ^= x >> 30; x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27; x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
}
static GPT2__HD inline double gpt2__uniform(uint64_t seed, uint64_t draw) {
    uint64_t x = gpt2__mix64(gpt2__mix64(seed ^ 0x6A09E667F3BCC909ull) + 0x9E3779B97F4A7C15ull * (draw + 1));
    return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

/* The sampling rule, which the GPU sampler follows step for step:
   1. temperature <= 0: argmax, the lowest index among ties.
   2. z = logits / temperature; candidates: all V tokens, or with 0 < top_k < V the top_k largest z
      (ties: lower index first).
   3. p = exp(z - max z) in float; with 0 < top_p < 1, candidates sorted by p descending (ties: lower
      index first) are cut to the shortest prefix whose sum reaches top_p * (sum over candidates).
   4. u = gpt2__uniform(seed, draw); walk the kept candidates (index order when neither cut applies,
      else the sorted order), summing p in double; pick the first where the sum exceeds u * total. */
static int gpt2__sample_greedy(const float *logits, int V) {
    int best = 0;
    for (int i = 1; i < V; i++) if (logits[i] > logits[best]) best = i;
    return best;
}

typedef struct gpt2__cand { float p; int id; } gpt2__cand;

static int gpt2__cand_cmp(const void *a, const void *b) {
    const gpt2__cand *x = (const gpt2__cand *)a, *y = (const gpt2__cand *)b;
    if (x->p > y->p) return -1;
    if (x->p < y->p) return 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* scratch: room for V candidates */
static int gpt2__sample(const float *logits, int V, const gpt2_sampling *s, uint64_t draw, gpt2__cand *scratch) {
    if (!(s->temperature > 0.0f)) return gpt2__sample_greedy(logits, V);
    float inv_t = 1.0f / s->temperature;
    int cut_k = s->top_k > 0 && s->top_k < V;
    int cut_p = s->top_p > 0.0f && s->top_p < 1.0f;
    float zmax = logits[0] * inv_t;
    for (int i = 1; i < V; i++) if (logits[i] * inv_t > zmax) zmax = logits[i] * inv_t;
    int n = V;
    for (int i = 0; i < V; i++) { scratch[i].p = expf(logits[i] * inv_t - zmax); scratch[i].id = i; }
    if (cut_k || cut_p) {
        /* exp is monotone, so ordering by p is ordering by z (ties by index) */
        qsort(scratch, (size_t)V, sizeof *scratch, gpt2__cand_cmp);
        if (cut_k) n = s->top_k;
        if (cut_p) {
            double total = 0.0, cum = 0.0;
            for (int i = 0; i < n; i++) total += scratch[i].p;
            int keep = n;
            for (int i = 0; i < n; i++) {
                cum += scratch[i].p;
                if (cum >= (double)s->top_p * total) { keep = i + 1; break; }
            }
            n = keep;
        }
    }
    double total = 0.0;
    for (int i = 0; i < n; i++) total += scratch[i].p;
    double target = gpt2__uniform(s->seed, draw) * total, cum = 0.0;
    for (int i = 0; i < n; i++) {
        cum += scratch[i].p;
        if (cum > target) return scratch[i].id;
    }
    return scratch[n - 1].id;
}
