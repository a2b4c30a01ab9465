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
    float *fc_w, *fc_b;              /* [C][F], [F]   (F = n_inner, 4C in every published model) */
    float *fc_proj_w, *fc_proj_b;    /* [F][C], [C] */
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
    int n_inner;                     /* MLP width: config's n_inner, else 4 * n_embd */
    gpt2_backend backend;            /* resolved: CPU or CUDA */
    gpt2_dtype dtype;                /* resolved */
    int device;
    int max_batch, max_seq;
    int prefill_tokens;              /* prompt tokens one engine step may feed (set by the backend; 0: 2048) */
    gpt2__weights w;                 /* host weights (the CUDA backend may release them after upload) */
    gpt2__cpu cpu;
    void *cuda;                      /* gpt2__cuda_state *, owned by the CUDA backend */
};

/* One sequence's work in a batched step (engine -> backend): feed n_tok tokens at positions
   pos..pos+n_tok-1 of KV slot `slot` (writing their K and V there); then, when `sample` is set,
   sample the next token from the last fed position's logits as the draw-th token of a request
   with these sampling parameters (a prompt fed in chunks samples only after its last chunk). */
typedef struct gpt2__seq {
    int slot, pos, n_tok;
    const int *tok;
    int sample;
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
    if (cut_k) {
        /* the top_k largest by a min-heap over (p, -id) in scratch[0..k), then sorted:
           O(V log k), and the same set and order a full sort would give */
        int k = s->top_k;
        for (int i = 0; i < V; i++) {
            gpt2__cand c = scratch[i];
            int pos;
            if (i < k) pos = i;
            else if (gpt2__cand_cmp(&c, &scratch[0]) < 0) pos = 0; /* beats the heap's smallest */
            else continue;
            if (i < k) { /* sift up */
                while (pos > 0 && gpt2__cand_cmp(&scratch[(pos - 1) / 2], &c) < 0) { scratch[pos] = scratch[(pos - 1) / 2]; pos = (pos - 1) / 2; }
            } else { /* replace the root, sift down */
                for (;;) {
                    int l = 2 * pos + 1, r = l + 1, m = pos;
                    const gpt2__cand *mc = &c;
                    if (l < k && gpt2__cand_cmp(&scratch[l], mc) > 0) { m = l; mc = &scratch[l]; }
                    if (r < k && gpt2__cand_cmp(&scratch[r], mc) > 0) m = r;
                    if (m == pos) break;
                    scratch[pos] = scratch[m];
                    pos = m;
                }
            }
            scratch[pos] = c;
        }
        qsort(scratch, (size_t)k, sizeof *scratch, gpt2__cand_cmp);
        n = k;
    } else if (cut_p) {
        /* exp is monotone, so ordering by p is ordering by z (ties by index) */
        qsort(scratch, (size_t)V, sizeof *scratch, gpt2__cand_cmp);
    }
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
    double total = 0.0;
    for (int i = 0; i < n; i++) total += scratch[i].p;
    double target = gpt2__uniform(s->seed, draw) * total, cum = 0.0;
    for (int i = 0; i < n; i++) {
        cum += scratch[i].p;
        if (cum > target) return scratch[i].id;
    }
    return scratch[n - 1].id;
}

/* ---------------------------------------------------------------- loader: config.json + model.safetensors */

static float gpt2__f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023, bits;
    if (exp == 0) {
        if (man == 0) bits = sign;
        else { /* subnormal: renormalise */
            int e = -1;
            do { e++; man <<= 1; } while (!(man & 1024));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 1023) << 13);
        }
    } else if (exp == 31) bits = sign | 0x7F800000u | (man << 13);
    else bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static float gpt2__bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Reads the model's config.json. Keys are HF's GPT2Config names; absent keys take HF's defaults. */
static gpt2_status gpt2__parse_config(const char *text, size_t len, const char *file, gpt2_config *cfg, int *n_inner) {
    gpt2__json j = {text, text, text + len, file, 0};
    double n_layer = -1, n_head = -1, n_embd = -1, n_pos = -1, n_ctx = -1, vocab = -1, eps = 1e-5, inner = -1;
    int first = 1, r;
    char key[64];
    size_t klen;
    gpt2_status st;
    while ((r = gpt2__json_member(&j, &first, key, sizeof key, &klen)) == 1) {
        double *num = !strcmp(key, "n_layer") ? &n_layer : !strcmp(key, "n_head") ? &n_head :
                      !strcmp(key, "n_embd") ? &n_embd : !strcmp(key, "n_positions") ? &n_pos :
                      !strcmp(key, "n_ctx") ? &n_ctx : !strcmp(key, "vocab_size") ? &vocab :
                      !strcmp(key, "layer_norm_epsilon") ? &eps : NULL;
        gpt2__json_ws(&j);
        if (!strcmp(key, "n_inner") && j.p < j.end && *j.p != 'n') num = &inner;
        if (num) { if ((st = gpt2__json_number(&j, num))) return st; continue; }
        if (!strcmp(key, "activation_function")) {
            char act[32];
            size_t n;
            gpt2__json k = j;
            if ((st = gpt2__json_string(&k, NULL, &n))) return st;
            if (n >= sizeof act) return gpt2__fail(GPT2_ERR_FORMAT, "%s: activation_function is too long", file);
            gpt2__json_string(&j, act, NULL);
            act[n] = 0;
            if (strcmp(act, "gelu_new") && strcmp(act, "gelu_pytorch_tanh"))
                return gpt2__fail(GPT2_ERR_FORMAT, "%s: activation_function \"%s\" is not supported (expected gelu_new)", file, act);
            continue;
        }
        if (!strcmp(key, "scale_attn_by_inverse_layer_idx") || !strcmp(key, "add_cross_attention")) {
            gpt2__json_ws(&j);
            if (j.end - j.p >= 4 && !memcmp(j.p, "true", 4))
                return gpt2__fail(GPT2_ERR_FORMAT, "%s: %s = true is not supported", file, key);
        }
        if ((st = gpt2__json_skip(&j))) return st;
    }
    if (r < 0) return GPT2_ERR_FORMAT;
    if (n_pos < 0) n_pos = n_ctx;
    struct { const char *name; double v, lo, hi; } need[] = {
        {"n_layer", n_layer, 1, 1024}, {"n_head", n_head, 1, 4096}, {"n_embd", n_embd, 1, 65536},
        {"n_positions", n_pos, 1, 1 << 20}, {"vocab_size", vocab, 1, 1 << 24}};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        if (need[i].v < 0) return gpt2__fail(GPT2_ERR_FORMAT, "%s: %s is missing", file, need[i].name);
        if (!(need[i].v == floor(need[i].v) && need[i].v >= need[i].lo && need[i].v <= need[i].hi))
            return gpt2__fail(GPT2_ERR_FORMAT, "%s: %s = %g is out of range (expected an integer in %g..%g)",
                              file, need[i].name, need[i].v, need[i].lo, need[i].hi);
    }
    if (!(eps >= 1e-30 && eps < 1)) return gpt2__fail(GPT2_ERR_FORMAT, "%s: layer_norm_epsilon = %g is out of range", file, eps);
    if ((int)n_embd % (int)n_head)
        return gpt2__fail(GPT2_ERR_FORMAT, "%s: n_embd = %d is not divisible by n_head = %d", file, (int)n_embd, (int)n_head);
    if (inner < 0) inner = 4 * n_embd;
    if (inner != floor(inner) || inner < 1 || inner > 4 * 65536)
        return gpt2__fail(GPT2_ERR_FORMAT, "%s: n_inner = %g is out of range", file, inner);
    cfg->n_layer = (int)n_layer; cfg->n_head = (int)n_head; cfg->n_embd = (int)n_embd;
    cfg->n_ctx = (int)n_pos; cfg->n_vocab = (int)vocab; cfg->ln_eps = (float)eps;
    *n_inner = (int)inner;
    return GPT2_OK;
}

/* Where each expected tensor goes: name (without the optional "transformer." prefix), shape, destination. */
typedef struct gpt2__slot { char name[48]; int ndim; size_t shape[2]; float *dst; int found; } gpt2__slot;

static void gpt2__slot_set(gpt2__slot *s, const char *name, int ndim, size_t d0, size_t d1, float *dst) {
    snprintf(s->name, sizeof s->name, "%s", name);
    s->ndim = ndim; s->shape[0] = d0; s->shape[1] = d1; s->dst = dst; s->found = 0;
}

/* Lays out every weight in one arena and lists the tensors a checkpoint must provide. A file of
   file_len bytes must hold at least 2 bytes per parameter: checked before anything is allocated. */
static gpt2_status gpt2__weights_layout(gpt2_model *m, size_t file_len, const char *file, gpt2__slot **slots_out, int *n_slots) {
    size_t L = (size_t)m->cfg.n_layer, C = (size_t)m->cfg.n_embd, V = (size_t)m->cfg.n_vocab;
    size_t P = (size_t)m->cfg.n_ctx, F = (size_t)m->n_inner;
    /* all factors are bounded by the config checks, so these products fit in 64 bits */
    size_t per_layer = 2 * C + C * 3 * C + 3 * C + C * C + C + 2 * C + C * F + F + F * C + C;
    size_t total = V * C + P * C + L * per_layer + 2 * C;
    if (total > file_len / 2)
        return gpt2__fail(GPT2_ERR_FORMAT, "%s: the config describes %zu parameters (at least %zu bytes), the file has %zu bytes",
                          file, total, 2 * total, file_len);
    gpt2__weights *w = &m->w;
    w->arena = (float *)gpt2__alloc(total * sizeof(float));
    w->layers = (gpt2__layer *)gpt2__zalloc(L * sizeof(gpt2__layer));
    gpt2__slot *s = (gpt2__slot *)gpt2__zalloc((L * 12 + 4) * sizeof(gpt2__slot));
    if (!w->arena || !w->layers || !s) {
        GPT2_FREE(s);
        return gpt2__fail(GPT2_ERR_OOM, "cannot allocate %zu MB for the weights", total * 4 >> 20);
    }
    w->n_floats = total;
    float *p = w->arena;
    int n = 0;
    char name[48];
#define GPT2__TAKE(field, nm, nd, d0, d1) \
    do { field = p; gpt2__slot_set(&s[n++], nm, nd, d0, d1, p); p += (size_t)(d0) * (size_t)(d1); } while (0)
    GPT2__TAKE(w->wte, "wte.weight", 2, V, C);
    GPT2__TAKE(w->wpe, "wpe.weight", 2, P, C);
    for (size_t l = 0; l < L; l++) {
        gpt2__layer *y = &w->layers[l];
        struct { float **f; const char *suffix; int nd; size_t d0, d1; } t[12] = {
            {&y->ln1_w, "ln_1.weight", 1, C, 1}, {&y->ln1_b, "ln_1.bias", 1, C, 1},
            {&y->qkv_w, "attn.c_attn.weight", 2, C, 3 * C}, {&y->qkv_b, "attn.c_attn.bias", 1, 3 * C, 1},
            {&y->attn_proj_w, "attn.c_proj.weight", 2, C, C}, {&y->attn_proj_b, "attn.c_proj.bias", 1, C, 1},
            {&y->ln2_w, "ln_2.weight", 1, C, 1}, {&y->ln2_b, "ln_2.bias", 1, C, 1},
            {&y->fc_w, "mlp.c_fc.weight", 2, C, F}, {&y->fc_b, "mlp.c_fc.bias", 1, F, 1},
            {&y->fc_proj_w, "mlp.c_proj.weight", 2, F, C}, {&y->fc_proj_b, "mlp.c_proj.bias", 1, C, 1}};
        for (int i = 0; i < 12; i++) {
            snprintf(name, sizeof name, "h.%zu.%s", l, t[i].suffix);
            GPT2__TAKE(*t[i].f, name, t[i].nd, t[i].d0, t[i].d1);
        }
    }
    GPT2__TAKE(w->lnf_w, "ln_f.weight", 1, C, 1);
    GPT2__TAKE(w->lnf_b, "ln_f.bias", 1, C, 1);
#undef GPT2__TAKE
    *slots_out = s;
    *n_slots = n;
    return GPT2_OK;
}

/* Tensors a checkpoint may carry that the model does not use: the causal-mask buffers
   (h.N.attn.bias / h.N.attn.masked_bias, matched as whole names) and the tied lm_head. */
static int gpt2__ignored_tensor(const char *name) {
    if (!strcmp(name, "lm_head.weight")) return 1;
    if (strncmp(name, "h.", 2)) return 0;
    const char *p = name + 2;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') p++;
    return !strcmp(p, ".attn.bias") || !strcmp(p, ".attn.masked_bias");
}

/* Parses a safetensors image (8-byte little-endian header length, JSON header, data) and converts
   every expected tensor to float32 into its slot. Every offset and size is checked against the file. */
static gpt2_status gpt2__read_safetensors(const unsigned char *data, size_t len, const char *file,
                                          gpt2__slot *slots, int n_slots) {
    if (len < 8) return gpt2__fail(GPT2_ERR_FORMAT, "%s: file is %zu bytes, too short for a safetensors header", file, len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | data[i];
    if (hlen > len - 8)
        return gpt2__fail(GPT2_ERR_FORMAT, "%s: header length %llu exceeds the file size %zu", file, (unsigned long long)hlen, len);
    if (hlen > ((uint64_t)100 << 20))
        return gpt2__fail(GPT2_ERR_FORMAT, "%s: header length %llu is over the 100 MB limit", file, (unsigned long long)hlen);
    const char *hdr = (const char *)data + 8;
    const unsigned char *body = data + 8 + hlen;
    size_t body_len = len - 8 - (size_t)hlen;
    gpt2__json j = {hdr, hdr, hdr + hlen, file, 0};
    int first = 1, r;
    char name[256];
    size_t nlen;
    gpt2_status st;
    while ((r = gpt2__json_member(&j, &first, name, sizeof name, &nlen)) == 1) {
        const char *key = name;
        if (nlen >= sizeof name) return gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor name of %zu bytes is too long", file, nlen);
        if (!strcmp(key, "__metadata__")) { if ((st = gpt2__json_skip(&j))) return st; continue; }
        if (!strncmp(key, "transformer.", 12)) key += 12;
        gpt2__slot *s = NULL;
        for (int i = 0; i < n_slots && !s; i++) if (!strcmp(slots[i].name, key)) s = &slots[i];
        if (!s) {
            if (gpt2__ignored_tensor(key)) { if ((st = gpt2__json_skip(&j))) return st; continue; }
            return gpt2__fail(GPT2_ERR_FORMAT, "%s: unexpected tensor \"%s\" (not part of a GPT-2 model with this config)", file, name);
        }
        if (s->found) return gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\" appears twice", file, name);
        /* the tensor's entry: {"dtype": ..., "shape": [...], "data_offsets": [b, e]} in any order */
        char dtype[16] = "";
        double shape[8], off[2] = {-1, -1};
        int ndim = -1, n_off = 0, f2 = 1, r2;
        char fk[32];
        size_t fklen;
        while ((r2 = gpt2__json_member(&j, &f2, fk, sizeof fk, &fklen)) == 1) {
            if (!strcmp(fk, "dtype")) {
                size_t dn;
                gpt2__json k = j;
                if ((st = gpt2__json_string(&k, NULL, &dn))) return st;
                if (dn >= sizeof dtype) return gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\": bad dtype", file, name);
                gpt2__json_string(&j, dtype, NULL);
                dtype[dn] = 0;
            } else if (!strcmp(fk, "shape") || !strcmp(fk, "data_offsets")) {
                int is_shape = fk[0] == 's', cnt = 0;
                gpt2__json_ws(&j);
                if (j.p >= j.end || *j.p != '[') return gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\": %s is not a list", file, name, fk);
                j.p++;
                gpt2__json_ws(&j);
                if (j.p < j.end && *j.p == ']') j.p++;
                else for (;;) {
                    double v;
                    if ((st = gpt2__json_number(&j, &v))) return st;
                    if (is_shape ? cnt >= 8 : cnt >= 2)
                        return gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\": %s has too many entries", file, name, fk);
                    if (is_shape) shape[cnt] = v; else off[cnt] = v;
                    cnt++;
                    gpt2__json_ws(&j);
                    if (j.p < j.end && *j.p == ',') { j.p++; continue; }
                    if (j.p < j.end && *j.p == ']') { j.p++; break; }
                    return gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\": bad %s list", file, name, fk);
                }
                if (is_shape) ndim = cnt; else n_off = cnt;
            } else if ((st = gpt2__json_skip(&j))) return st;
        }
        if (r2 < 0) return GPT2_ERR_FORMAT;
        size_t esize = !strcmp(dtype, "F32") ? 4 : (!strcmp(dtype, "F16") || !strcmp(dtype, "BF16")) ? 2 : 0;
        if (!esize)
            return gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\" has dtype \"%s\" (expected F32, F16 or BF16)", file, name, dtype);
        /* shape must match the config exactly (1-D tensors as [n], 2-D as [d0, d1]) */
        int shape_ok = ndim == s->ndim;
        for (int d = 0; shape_ok && d < ndim; d++) shape_ok = shape[d] == (double)s->shape[d];
        if (!shape_ok) {
            char got[96] = "", *g = got;
            for (int d = 0; d < ndim && d < 8 && g < got + sizeof got - 1; d++) {
                int k = shape[d] >= 0 && shape[d] < 1e15 ? snprintf(g, (size_t)(got + sizeof got - g), d ? ", %.0f" : "%.0f", shape[d])
                                                          : snprintf(g, (size_t)(got + sizeof got - g), d ? ", %g" : "%g", shape[d]);
                g = k < 0 || k >= got + sizeof got - g ? got + sizeof got - 1 : g + k;
            }
            if (s->ndim == 1)
                return gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\" has shape [%s], expected [%zu] from config.json", file, name, got, s->shape[0]);
            return gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\" has shape [%s], expected [%zu, %zu] from config.json",
                              file, name, got, s->shape[0], s->shape[1]);
        }
        size_t count = s->shape[0] * s->shape[1], bytes;
        if (!gpt2__mul_ok(count, esize, &bytes)) return gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\" is too large", file, name);
        if (n_off != 2 || off[0] < 0 || off[1] < off[0] || off[0] != floor(off[0]) || off[1] != floor(off[1]))
            return gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\" has bad data_offsets", file, name);
        if (off[1] > (double)body_len)
            return gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\" data [%.0f, %.0f) lies outside the %zu-byte data section",
                              file, name, off[0], off[1], body_len);
        if ((size_t)(off[1] - off[0]) != bytes)
            return gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\" holds %.0f bytes, expected %zu for its shape and dtype",
                              file, name, off[1] - off[0], bytes);
        const unsigned char *src = body + (size_t)off[0];
        float *dst = s->dst;
        if (esize == 4) memcpy(dst, src, bytes); /* little-endian hosts only, as the format itself */
        else {
            int bf = dtype[0] == 'B';
            for (size_t i = 0; i < count; i++) {
                uint16_t h = (uint16_t)(src[2 * i] | (src[2 * i + 1] << 8));
                dst[i] = bf ? gpt2__bf16_to_f32(h) : gpt2__f16_to_f32(h);
            }
        }
        s->found = 1;
    }
    if (r < 0) return GPT2_ERR_FORMAT;
    for (int i = 0; i < n_slots; i++)
        if (!slots[i].found) return gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\" is missing", file, slots[i].name);
    return GPT2_OK;
}

#include "wip/tokenizer.inc"

/* ---------------------------------------------------------------- CPU backend: plain C fp32 forward with KV cache */

/* out [N][O] = in [N][I] @ w [I][O] + b [O]   (GPT-2's Conv1D layout; b may be NULL).
   Blocks of 4 rows × 256 columns keep their sums in a local tile, so each weight row read
   serves 4 input rows; threads split the blocks. */
static void gpt2__cpu_matmul(float *out, const float *in, const float *w, const float *b, int N, int I, int O) {
    enum { RB = 4, CB = 256 };
    int n_rb = (N + RB - 1) / RB, n_cb = (O + CB - 1) / CB;
    #pragma omp parallel for schedule(static) if ((double)N * I * O > 4e6)
    for (int blk = 0; blk < n_rb * n_cb; blk++) {
        int r0 = (blk / n_cb) * RB, c0 = (blk % n_cb) * CB;
        int nr = N - r0 < RB ? N - r0 : RB, nc = O - c0 < CB ? O - c0 : CB;
        float acc[RB][CB];
        for (int r = 0; r < RB; r++)
            for (int c = 0; c < nc; c++) acc[r][c] = b ? b[c0 + c] : 0.0f;
        for (int i = 0; i < I; i++) {
            const float *wr = w + (size_t)i * O + c0;
            float a0 = in[(size_t)r0 * I + i];
            float a1 = nr > 1 ? in[(size_t)(r0 + 1) * I + i] : 0.0f;
            float a2 = nr > 2 ? in[(size_t)(r0 + 2) * I + i] : 0.0f;
            float a3 = nr > 3 ? in[(size_t)(r0 + 3) * I + i] : 0.0f;
            for (int c = 0; c < nc; c++) {
                float wv = wr[c];
                acc[0][c] += a0 * wv; acc[1][c] += a1 * wv; acc[2][c] += a2 * wv; acc[3][c] += a3 * wv;
            }
        }
        for (int r = 0; r < nr; r++) memcpy(out + (size_t)(r0 + r) * O + c0, acc[r], (size_t)nc * sizeof(float));
    }
}

/* out [N][C] = layer_norm(in [N][C]) * g + b, statistics in double (HF: torch.nn.LayerNorm, biased variance) */
static void gpt2__cpu_layernorm(float *out, const float *in, const float *g, const float *b, int N, int C, float eps) {
    #pragma omp parallel for schedule(static) if ((double)N * C > 1e5)
    for (int n = 0; n < N; n++) {
        const float *x = in + (size_t)n * C;
        float *y = out + (size_t)n * C;
        double mean = 0.0, var = 0.0;
        for (int i = 0; i < C; i++) mean += x[i];
        mean /= C;
        for (int i = 0; i < C; i++) { double d = x[i] - mean; var += d * d; }
        var /= C;
        float rstd = (float)(1.0 / sqrt(var + eps)), mu = (float)mean;
        for (int i = 0; i < C; i++) y[i] = (x[i] - mu) * rstd * g[i] + b[i];
    }
}

/* gelu_new (HF NewGELUActivation): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in place */
static void gpt2__cpu_gelu(float *x, size_t n) {
    #pragma omp parallel for schedule(static) if (n > 100000)
    for (long i = 0; i < (long)n; i++) {
        float v = x[i];
        x[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}

static float *gpt2__cpu_kv(const gpt2_model *m, float *cache, int layer, int slot, int pos) {
    size_t C = (size_t)m->cfg.n_embd;
    return cache + (((size_t)layer * m->max_batch + slot) * m->max_seq + pos) * C;
}

static void gpt2__cpu_free(gpt2_model *m) {
    GPT2_FREE(m->cpu.k_cache);
    GPT2_FREE(m->cpu.v_cache);
    m->cpu.k_cache = m->cpu.v_cache = NULL;
}

static gpt2_status gpt2__cpu_init(gpt2_model *m) {
    size_t n = (size_t)m->cfg.n_layer * m->max_batch * m->max_seq * m->cfg.n_embd;
    m->cpu.k_cache = (float *)gpt2__alloc(n * sizeof(float));
    m->cpu.v_cache = (float *)gpt2__alloc(n * sizeof(float));
    if (!m->cpu.k_cache || !m->cpu.v_cache) {
        gpt2__cpu_free(m);
        return gpt2__fail(GPT2_ERR_OOM, "cannot allocate the KV cache: %zu MB for %d sequences of %d tokens",
                          2 * n * sizeof(float) >> 20, m->max_batch, m->max_seq);
    }
    return GPT2_OK;
}

/* The forward pass over a ragged batch: seqs[s] feeds seqs[s].n_tok tokens at positions seqs[s].pos..
   into KV slot seqs[s].slot. Row r of the activations is token r of the concatenation.
   logits: with all_rows, [N][V] for every fed token; else [n][V] for each sequence's last token.
   Matches HF GPT2LMHeadModel.forward (pre-LN blocks, gelu_new, tied lm_head). */
static gpt2_status gpt2__cpu_run(gpt2_model *m, const gpt2__seq *seqs, int n, int all_rows, float *logits) {
    const gpt2_config *cf = &m->cfg;
    const int C = cf->n_embd, H = cf->n_head, hd = C / H, F = m->n_inner, V = cf->n_vocab;
    int N = 0, maxT = 0;
    for (int s = 0; s < n; s++) {
        N += seqs[s].n_tok;
        if (seqs[s].pos + seqs[s].n_tok > maxT) maxT = seqs[s].pos + seqs[s].n_tok;
    }
    int nthreads = 1;
#ifdef _OPENMP
    nthreads = omp_get_max_threads();
#endif
    /* activations: x, ln, attention out [N][C]; qkv [N][3C]; fc [N][F]; attention scores per thread */
    size_t need = (size_t)N * (3 * C + 3 * C + F) + (size_t)nthreads * maxT;
    float *buf = (float *)gpt2__alloc(need * sizeof(float));
    int *row_seq = (int *)gpt2__alloc((size_t)N * sizeof(int));
    if (!buf || !row_seq) {
        GPT2_FREE(buf); GPT2_FREE(row_seq);
        return gpt2__fail(GPT2_ERR_OOM, "CPU forward: cannot allocate %zu MB of activations", need * 4 >> 20);
    }
    float *x = buf, *ln = x + (size_t)N * C, *att = ln + (size_t)N * C, *qkv = att + (size_t)N * C;
    float *fc = qkv + (size_t)N * 3 * C, *scores = fc + (size_t)N * F;
    const gpt2__weights *w = &m->w;
    for (int s = 0, r = 0; s < n; s++)
        for (int t = 0; t < seqs[s].n_tok; t++, r++) {
            row_seq[r] = s;
            const float *te = w->wte + (size_t)seqs[s].tok[t] * C, *pe = w->wpe + (size_t)(seqs[s].pos + t) * C;
            for (int i = 0; i < C; i++) x[(size_t)r * C + i] = te[i] + pe[i];
        }
    int *row_pos = (int *)gpt2__alloc((size_t)N * sizeof(int));
    if (!row_pos) { GPT2_FREE(buf); GPT2_FREE(row_seq); return gpt2__fail(GPT2_ERR_OOM, "CPU forward: out of memory"); }
    for (int s = 0, r = 0; s < n; s++)
        for (int t = 0; t < seqs[s].n_tok; t++, r++) row_pos[r] = seqs[s].pos + t;
    const float scale = 1.0f / sqrtf((float)hd);
    for (int l = 0; l < cf->n_layer; l++) {
        const gpt2__layer *y = &w->layers[l];
        gpt2__cpu_layernorm(ln, x, y->ln1_w, y->ln1_b, N, C, cf->ln_eps);
        gpt2__cpu_matmul(qkv, ln, y->qkv_w, y->qkv_b, N, C, 3 * C);
        for (int r = 0; r < N; r++) {
            const gpt2__seq *q = &seqs[row_seq[r]];
            memcpy(gpt2__cpu_kv(m, m->cpu.k_cache, l, q->slot, row_pos[r]), qkv + (size_t)r * 3 * C + C, (size_t)C * sizeof(float));
            memcpy(gpt2__cpu_kv(m, m->cpu.v_cache, l, q->slot, row_pos[r]), qkv + (size_t)r * 3 * C + 2 * C, (size_t)C * sizeof(float));
        }
        /* causal attention: row r (position p) attends to positions 0..p of its slot */
        #pragma omp parallel for schedule(dynamic, 1) if ((double)N * maxT * C > 4e6)
        for (int rh = 0; rh < N * H; rh++) {
            int r = rh / H, h = rh % H, p = row_pos[r], slot = seqs[row_seq[r]].slot;
            int tid = 0;
#ifdef _OPENMP
            tid = omp_get_thread_num();
#endif
            float *sc = scores + (size_t)tid * maxT;
            const float *qv = qkv + (size_t)r * 3 * C + h * hd;
            float mx = -INFINITY;
            for (int j = 0; j <= p; j++) {
                const float *kv = gpt2__cpu_kv(m, m->cpu.k_cache, l, slot, j) + h * hd;
                float d = 0.0f;
                for (int i = 0; i < hd; i++) d += qv[i] * kv[i];
                sc[j] = d * scale;
                if (sc[j] > mx) mx = sc[j];
            }
            float sum = 0.0f;
            for (int j = 0; j <= p; j++) { sc[j] = expf(sc[j] - mx); sum += sc[j]; }
            float *o = att + (size_t)r * C + h * hd;
            for (int i = 0; i < hd; i++) o[i] = 0.0f;
            for (int j = 0; j <= p; j++) {
                const float *vv = gpt2__cpu_kv(m, m->cpu.v_cache, l, slot, j) + h * hd;
                float pj = sc[j] / sum;
                for (int i = 0; i < hd; i++) o[i] += pj * vv[i];
            }
        }
        gpt2__cpu_matmul(ln, att, y->attn_proj_w, y->attn_proj_b, N, C, C);
        for (size_t i = 0; i < (size_t)N * C; i++) x[i] += ln[i];
        gpt2__cpu_layernorm(ln, x, y->ln2_w, y->ln2_b, N, C, cf->ln_eps);
        gpt2__cpu_matmul(fc, ln, y->fc_w, y->fc_b, N, C, F);
        gpt2__cpu_gelu(fc, (size_t)N * F);
        gpt2__cpu_matmul(ln, fc, y->fc_proj_w, y->fc_proj_b, N, F, C);
        for (size_t i = 0; i < (size_t)N * C; i++) x[i] += ln[i];
    }
    /* final layer norm of the rows whose logits are wanted, then logits = row @ wte^T */
    int n_out = all_rows ? N : n;
    for (int o = 0, r = 0, s = 0; o < n_out; o++) {
        int src;
        if (all_rows) src = o;
        else { r += seqs[s].n_tok; src = r - 1; s++; }
        gpt2__cpu_layernorm(ln + (size_t)o * C, x + (size_t)src * C, w->lnf_w, w->lnf_b, 1, C, cf->ln_eps);
    }
    #pragma omp parallel for schedule(static) if ((double)n_out * V * C > 4e6)
    for (long ov = 0; ov < (long)n_out * V; ov++) {
        const float *a = ln + (size_t)(ov / V) * C, *e = w->wte + (size_t)(ov % V) * C;
        float d = 0.0f;
        for (int i = 0; i < C; i++) d += a[i] * e[i];
        logits[ov] = d;
    }
    GPT2_FREE(buf); GPT2_FREE(row_seq); GPT2_FREE(row_pos);
    return GPT2_OK;
}

/* One engine step on the CPU: the forward pass, then each sequence samples from its last logits. */
static gpt2_status gpt2__cpu_step(gpt2_model *m, const gpt2__seq *seqs, int n, int *next) {
    int V = m->cfg.n_vocab;
    float *logits = (float *)gpt2__alloc((size_t)n * V * sizeof(float));
    gpt2__cand *scratch = (gpt2__cand *)gpt2__alloc((size_t)V * sizeof(gpt2__cand));
    if (!logits || !scratch) { GPT2_FREE(logits); GPT2_FREE(scratch); return gpt2__fail(GPT2_ERR_OOM, "CPU step: out of memory"); }
    gpt2_status st = gpt2__cpu_run(m, seqs, n, 0, logits);
    for (int s = 0; st == GPT2_OK && s < n; s++)
        next[s] = seqs[s].sample ? gpt2__sample(logits + (size_t)s * V, V, &seqs[s].sampling, seqs[s].draw, scratch) : -1;
    GPT2_FREE(logits); GPT2_FREE(scratch);
    return st;
}

#include "wip/cuda.inc"

/* ---------------------------------------------------------------- engine: model lifetime, forward, generate */

GPT2_API gpt2_options gpt2_default_options(void) {
    gpt2_options o;
    memset(&o, 0, sizeof o);
    o.backend = GPT2_BACKEND_AUTO;
    o.device = -1;
    o.dtype = GPT2_DTYPE_AUTO;
    return o;
}

GPT2_API void gpt2_free(gpt2_model *m) {
    if (!m) return;
#if GPT2__CUDA
    if (m->cuda) gpt2__cuda_free(m);
#endif
    gpt2__cpu_free(m);
    GPT2_FREE(m->w.arena);
    GPT2_FREE(m->w.layers);
    GPT2_FREE(m);
}

/* The CPU backend's default slot count: up to 8 sequences, and the KV cache within 1 GB. */
static int gpt2__cpu_default_batch(const gpt2_model *m) {
    double per_slot = 2.0 * 4.0 * m->cfg.n_layer * (double)m->max_seq * m->cfg.n_embd;
    int b = (int)((1024.0 * 1024.0 * 1024.0) / per_slot);
    return b < 1 ? 1 : b > 8 ? 8 : b;
}

static const char *gpt2__dtype_name(gpt2_dtype d) {
    return d == GPT2_DTYPE_F32 ? "F32" : d == GPT2_DTYPE_F16 ? "F16" : d == GPT2_DTYPE_BF16 ? "BF16" : "AUTO";
}

/* Builds a model from a config.json text and a safetensors image held in memory (gpt2_load reads the
   files; gpt2_mpi_load broadcasts the same bytes). cfg_name / st_name only label error messages. */
static gpt2_status gpt2__load_memory(gpt2_model **out, const char *cfg_text, size_t cfg_len, const char *cfg_name,
                                     const unsigned char *st_data, size_t st_len, const char *st_name,
                                     const gpt2_options *opt_in) {
    gpt2_options opt = opt_in ? *opt_in : gpt2_default_options();
    if (opt.backend != GPT2_BACKEND_AUTO && opt.backend != GPT2_BACKEND_CPU && opt.backend != GPT2_BACKEND_CUDA)
        return gpt2__fail(GPT2_ERR_ARG, "options.backend = %d is not a gpt2_backend", (int)opt.backend);
    if (opt.dtype < GPT2_DTYPE_AUTO || opt.dtype > GPT2_DTYPE_BF16)
        return gpt2__fail(GPT2_ERR_ARG, "options.dtype = %d is not a gpt2_dtype", (int)opt.dtype);
    if (opt.max_batch < 0 || opt.max_batch > 65536)
        return gpt2__fail(GPT2_ERR_ARG, "options.max_batch = %d is out of range (0..65536)", opt.max_batch);
    gpt2_model *m = (gpt2_model *)gpt2__zalloc(sizeof *m);
    if (!m) return gpt2__fail(GPT2_ERR_OOM, "cannot allocate the model");
    gpt2_status st = gpt2__parse_config(cfg_text, cfg_len, cfg_name, &m->cfg, &m->n_inner);
    if (st) { gpt2_free(m); return st; }
    if (opt.max_seq < 0 || opt.max_seq > m->cfg.n_ctx) {
        int n_ctx = m->cfg.n_ctx;
        gpt2_free(m);
        return gpt2__fail(GPT2_ERR_ARG, "options.max_seq = %d is out of range (0..n_ctx = %d)", opt.max_seq, n_ctx);
    }
    m->max_seq = opt.max_seq ? opt.max_seq : m->cfg.n_ctx;
    /* backend: AUTO takes the GPU when one is usable */
    m->backend = opt.backend;
    m->device = opt.device;
    if (m->backend == GPT2_BACKEND_AUTO) {
        m->backend = GPT2_BACKEND_CPU;
#if GPT2__CUDA
        char why[256];
        if (gpt2__cuda_usable(opt.device, why, sizeof why)) m->backend = GPT2_BACKEND_CUDA;
#endif
    } else if (m->backend == GPT2_BACKEND_CUDA) {
#if GPT2__CUDA
        char why[256];
        if (!gpt2__cuda_usable(opt.device, why, sizeof why)) { gpt2_free(m); return gpt2__fail(GPT2_ERR_DEVICE, "%s", why); }
#else
        gpt2_free(m);
        return gpt2__fail(GPT2_ERR_DEVICE, "the CUDA backend was asked for, but this program was built without CUDA "
                                           "(compile the implementation with nvcc, without GPT2_NO_CUDA)");
#endif
    }
    m->dtype = opt.dtype != GPT2_DTYPE_AUTO ? opt.dtype : m->backend == GPT2_BACKEND_CUDA ? GPT2_DTYPE_F16 : GPT2_DTYPE_F32;
    if (m->backend == GPT2_BACKEND_CPU && m->dtype != GPT2_DTYPE_F32) {
        gpt2_dtype d = m->dtype;
        gpt2_free(m);
        return gpt2__fail(GPT2_ERR_ARG, "the CPU backend computes in F32 only (dtype %s was asked for)", gpt2__dtype_name(d));
    }
    gpt2__slot *slots = NULL;
    int n_slots = 0;
    st = gpt2__weights_layout(m, st_len, st_name, &slots, &n_slots);
    if (st) { gpt2_free(m); return st; }
    st = gpt2__read_safetensors(st_data, st_len, st_name, slots, n_slots);
    GPT2_FREE(slots);
    if (st) { gpt2_free(m); return st; }
    m->max_batch = opt.max_batch;
    if (m->backend == GPT2_BACKEND_CPU) {
        if (!m->max_batch) m->max_batch = gpt2__cpu_default_batch(m);
        st = gpt2__cpu_init(m);
    }
#if GPT2__CUDA
    else st = gpt2__cuda_init(m); /* chooses max_batch when 0 */
#endif
    if (st) { gpt2_free(m); return st; }
    *out = m;
    return GPT2_OK;
}

#if defined(_WIN32)
static gpt2_status gpt2__map_file(const char *path, unsigned char **data, size_t *len, int *mapped) {
    *mapped = 0;
    return gpt2__read_file(path, (char **)data, len);
}
static void gpt2__unmap_file(unsigned char *data, size_t len, int mapped) { (void)len; (void)mapped; GPT2_FREE(data); }
#else
#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>
/* Maps a file read-only (the safetensors data is only read once, to convert); falls back to reading. */
static gpt2_status gpt2__map_file(const char *path, unsigned char **data, size_t *len, int *mapped) {
    *mapped = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return gpt2__fail(GPT2_ERR_IO, "%s: cannot open (%s)", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) { close(fd); return gpt2__fail(GPT2_ERR_IO, "%s: not a regular file", path); }
    *len = (size_t)sb.st_size;
    if (*len == 0) { close(fd); *data = NULL; return GPT2_OK; }
    void *p = mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return gpt2__read_file(path, (char **)data, len);
    *data = (unsigned char *)p;
    *mapped = 1;
    return GPT2_OK;
}
static void gpt2__unmap_file(unsigned char *data, size_t len, int mapped) {
    if (mapped) munmap(data, len); else GPT2_FREE(data);
}
#endif

/* The two files of a model: path is a directory holding config.json + model.safetensors, or the
   .safetensors file itself with config.json beside it. The caller checks path fits (cap - 16). */
static void gpt2__model_paths(const char *path, int is_dir, char *cfg_path, char *st_path, size_t cap) {
    if (is_dir) {
        snprintf(cfg_path, cap, "%s/config.json", path);
        snprintf(st_path, cap, "%s/model.safetensors", path);
        return;
    }
    const char *slash = strrchr(path, '/');
    snprintf(st_path, cap, "%s", path);
    if (slash) snprintf(cfg_path, cap, "%.*s/config.json", (int)(slash - path), path);
    else snprintf(cfg_path, cap, "config.json");
}

GPT2_API gpt2_status gpt2_load(gpt2_model **model, const char *path, const gpt2_options *opt) {
    if (!model) return gpt2__fail(GPT2_ERR_ARG, "gpt2_load: model is NULL");
    *model = NULL;
    if (!path || !*path) return gpt2__fail(GPT2_ERR_ARG, "gpt2_load: path is empty");
    char cfg_path[4096], st_path[4096];
    if (strlen(path) + 32 >= sizeof st_path) return gpt2__fail(GPT2_ERR_ARG, "gpt2_load: path is too long");
    struct stat sb;
    if (stat(path, &sb) != 0) return gpt2__fail(GPT2_ERR_IO, "%s: cannot open (%s)", path, strerror(errno));
    gpt2__model_paths(path, S_ISDIR(sb.st_mode), cfg_path, st_path, sizeof st_path);
    char *cfg_text;
    size_t cfg_len;
    gpt2_status st = gpt2__read_file(cfg_path, &cfg_text, &cfg_len);
    if (st) return st;
    unsigned char *st_data;
    size_t st_len;
    int mapped;
    st = gpt2__map_file(st_path, &st_data, &st_len, &mapped);
    if (st) { GPT2_FREE(cfg_text); return st; }
    st = gpt2__load_memory(model, cfg_text, cfg_len, cfg_path, st_data, st_len, st_path, opt);
    gpt2__unmap_file(st_data, st_len, mapped);
    GPT2_FREE(cfg_text);
    return st;
}

GPT2_API gpt2_config gpt2_model_config(const gpt2_model *m) {
    gpt2_config c;
    memset(&c, 0, sizeof c);
    return m ? m->cfg : c;
}
GPT2_API gpt2_backend gpt2_model_backend(const gpt2_model *m) { return m ? m->backend : GPT2_BACKEND_AUTO; }
GPT2_API gpt2_dtype gpt2_model_dtype(const gpt2_model *m) { return m ? m->dtype : GPT2_DTYPE_AUTO; }
GPT2_API int gpt2_model_max_batch(const gpt2_model *m) { return m ? m->max_batch : 0; }
GPT2_API int gpt2_model_max_seq(const gpt2_model *m) { return m ? m->max_seq : 0; }

static gpt2_status gpt2__check_tokens(const gpt2_model *m, const int *tok, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (tok[i] < 0 || tok[i] >= m->cfg.n_vocab)
            return gpt2__fail(GPT2_ERR_ARG, "%s[%zu] = %d is not a token id (vocabulary 0..%d)", what, i, tok[i], m->cfg.n_vocab - 1);
    return GPT2_OK;
}

GPT2_API gpt2_status gpt2_forward(gpt2_model *m, const int *tokens, int B, int T, float *logits) {
    if (!m || !tokens || !logits) return gpt2__fail(GPT2_ERR_ARG, "gpt2_forward: model, tokens and logits must not be NULL");
    if (B < 1 || T < 1) return gpt2__fail(GPT2_ERR_ARG, "gpt2_forward: B = %d and T = %d must be at least 1", B, T);
    if (T > m->max_seq)
        return gpt2__fail(GPT2_ERR_ARG, "gpt2_forward: T = %d tokens exceed max_seq = %d (n_ctx = %d)", T, m->max_seq, m->cfg.n_ctx);
    gpt2_status st = gpt2__check_tokens(m, tokens, (size_t)B * T, "gpt2_forward: tokens");
    if (st) return st;
#if GPT2__CUDA
    if (m->backend == GPT2_BACKEND_CUDA) return gpt2__cuda_forward(m, tokens, B, T, logits);
#endif
    gpt2__seq *seqs = (gpt2__seq *)gpt2__zalloc((size_t)m->max_batch * sizeof *seqs);
    if (!seqs) return gpt2__fail(GPT2_ERR_OOM, "gpt2_forward: out of memory");
    for (int b0 = 0; b0 < B && !st; b0 += m->max_batch) {
        int nb = B - b0 < m->max_batch ? B - b0 : m->max_batch;
        for (int i = 0; i < nb; i++) {
            seqs[i].slot = i; seqs[i].pos = 0; seqs[i].n_tok = T;
            seqs[i].tok = tokens + (size_t)(b0 + i) * T;
        }
        st = gpt2__cpu_run(m, seqs, nb, 1, logits + (size_t)b0 * T * m->cfg.n_vocab);
    }
    GPT2_FREE(seqs);
    return st;
}

/* A request in flight: which KV slot it holds and how much of its prompt has been fed. */
typedef struct gpt2__active { int req, fed; } gpt2__active;

/* Continuous batching over max_batch KV slots: requests wait in order; each step feeds every active
   slot either its next prompt chunk or its last sampled token; a finished request frees its slot at
   once for the next waiting one. Prompt tokens per step are capped so decode steps stay short. */
GPT2_API gpt2_status gpt2_generate(gpt2_model *m, gpt2_request *reqs, int n, gpt2_token_fn on_token, void *user) {
    if (!m) return gpt2__fail(GPT2_ERR_ARG, "gpt2_generate: model is NULL");
    if (n < 0 || (n > 0 && !reqs)) return gpt2__fail(GPT2_ERR_ARG, "gpt2_generate: %d requests at %p", n, (void *)reqs);
    for (int i = 0; i < n; i++) {
        gpt2_request *r = &reqs[i];
        char what[64];
        if (!r->prompt || r->prompt_len < 1)
            return gpt2__fail(GPT2_ERR_ARG, "request %d: the prompt is empty (at least one token, e.g. 50256, is needed)", i);
        if (r->max_new_tokens < 0) return gpt2__fail(GPT2_ERR_ARG, "request %d: max_new_tokens = %d is negative", i, r->max_new_tokens);
        if (r->max_new_tokens > 0 && !r->out) return gpt2__fail(GPT2_ERR_ARG, "request %d: out is NULL", i);
        if ((long)r->prompt_len + r->max_new_tokens > m->max_seq)
            return gpt2__fail(GPT2_ERR_ARG, "request %d: prompt_len %d + max_new_tokens %d exceeds max_seq = %d",
                              i, r->prompt_len, r->max_new_tokens, m->max_seq);
        snprintf(what, sizeof what, "request %d: prompt", i);
        gpt2_status st = gpt2__check_tokens(m, r->prompt, (size_t)r->prompt_len, what);
        if (st) return st;
        r->n_out = 0;
    }
    const int S = m->max_batch, budget = m->prefill_tokens > 0 ? m->prefill_tokens : 2048;
    gpt2__active *slot = (gpt2__active *)gpt2__alloc((size_t)S * sizeof *slot);
    gpt2__seq *seqs = (gpt2__seq *)gpt2__zalloc((size_t)S * sizeof *seqs);
    int *next = (int *)gpt2__alloc((size_t)S * sizeof(int)), *last = (int *)gpt2__alloc((size_t)S * sizeof(int));
    gpt2_status st = GPT2_OK;
    if (!slot || !seqs || !next || !last) st = gpt2__fail(GPT2_ERR_OOM, "gpt2_generate: out of memory");
    int waiting = 0, active = 0;
    for (int s = 0; s < S && slot; s++) slot[s].req = -1;
    while (!st) {
        /* admit waiting requests into free slots (requests with nothing to generate finish at once) */
        for (int s = 0; s < S && waiting < n; s++) {
            if (slot[s].req >= 0) continue;
            while (waiting < n && reqs[waiting].max_new_tokens == 0) waiting++;
            if (waiting == n) break;
            slot[s].req = waiting++; slot[s].fed = 0;
            active++;
        }
        if (!active) break;
        int ns = 0, prompt_tokens = 0;
        for (int s = 0; s < S; s++) {
            if (slot[s].req < 0) continue;
            gpt2_request *r = &reqs[slot[s].req];
            gpt2__seq *q = &seqs[ns];
            q->slot = s;
            q->sampling = r->sampling;
            q->draw = (uint64_t)r->n_out;
            if (slot[s].fed < r->prompt_len) {
                int chunk = r->prompt_len - slot[s].fed;
                if (prompt_tokens > 0 && prompt_tokens + chunk > budget) continue; /* next step */
                if (chunk > budget) chunk = budget;
                q->pos = slot[s].fed; q->n_tok = chunk; q->tok = r->prompt + slot[s].fed;
                q->sample = slot[s].fed + chunk == r->prompt_len;
                prompt_tokens += chunk;
            } else {
                q->pos = slot[s].fed; q->n_tok = 1; q->tok = &last[s]; q->sample = 1;
            }
            ns++;
        }
#if GPT2__CUDA
        if (m->backend == GPT2_BACKEND_CUDA) st = gpt2__cuda_step(m, seqs, ns, next);
        else
#endif
        st = gpt2__cpu_step(m, seqs, ns, next);
        if (st) break;
        for (int i = 0; i < ns; i++) {
            int s = seqs[i].slot;
            slot[s].fed += seqs[i].n_tok;
            if (!seqs[i].sample) continue;
            int ri = slot[s].req;
            gpt2_request *r = &reqs[ri];
            int tok = next[i];
            r->out[r->n_out++] = tok;
            last[s] = tok;
            int stop = on_token && on_token(user, ri, tok);
            if (stop || tok == r->stop_token || r->n_out >= r->max_new_tokens) { slot[s].req = -1; active--; }
        }
    }
    GPT2_FREE(slot); GPT2_FREE(seqs); GPT2_FREE(next); GPT2_FREE(last);
    return st;
}

#endif /* GPT2_IMPLEMENTATION_DONE */
#endif /* GPT2_IMPLEMENTATION */

/*
MIT License

Copyright (c) 2026 the gpt2.cuh authors

Permission is hereby granted, free of charge, to any person obtaining a copy of this software and
associated documentation files (the "Software"), to deal in the Software without restriction, including
without limitation the rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is furnished to do so, subject to the
following conditions:

The above copyright notice and this permission notice shall be included in all copies or substantial
portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT
LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO
EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER
IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE
USE OR OTHER DEALINGS IN THE SOFTWARE.
*/
