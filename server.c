/* server.c — an OpenAI-compatible completions server over gpt2.cuh's incremental engine.

   ./server -m DIR --host 127.0.0.1 --port 8080 [--api-key KEY] [--backend cpu|cuda] [--dtype f32|f16|bf16]
            [--max-batch N] [--max-queue N] [--max-body BYTES] [--score-slots N] [--step-tokens N]

   Endpoints (OpenAI's shapes): POST /v1/completions (streaming with Server-Sent Events), GET /v1/models,
   GET /health, POST /tokenize, POST /detokenize, GET /metrics (Prometheus text).

   Threads: one stepping thread owns the model. It runs gpt2_engine_step while any request is queued or in flight,
   and the scoring jobs (echo with logprobs) that HTTP threads hand it when the engine is idle (scoring uses the KV
   slots the engine's requests hold; while a scoring job waits, HTTP threads hold their new requests back, so the
   engine empties), so no other call ever runs on the model beside the engine's work. With --score-slots N the
   scoring jobs run instead on an instance of the model of their own, one at a time, in the HTTP thread that got
   them: beside the engine's steps (separate models run on separate threads at once), waiting for nothing. HTTP
   threads submit requests (gpt2_engine_submit) and cancel them (gpt2_engine_cancel); the engine's callbacks copy
   each token into the request's job under one lock and wake the thread that answers it.
   A request's tokens never depend on what else is in flight, so a seeded request returns what ./demo returns.

   HTTP: GNU libmicrohttpd (Debian's libmicrohttpd-dev), a small, well-kept C library that runs its own threads
   (a thread per connection here, so a handler may block until its request ends), sends a response of unknown
   length chunked from a content-reader callback (how a stream's events go out as the tokens come), and calls the
   reader's free callback when the connection closes, which is how a client that goes away mid-stream cancels its
   request and frees its slot (a client waiting for a whole response is watched on its socket: client_gone).
   JSON: cJSON (Debian's libcjson-dev).

   Build: make server (needs pkg-config, libmicrohttpd and libcjson). */

#define GPT2_IMPLEMENTATION
#include "gpt2.cuh"

#include <microhttpd.h>
#include <cjson/cJSON.h>

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ==== state ================================================================================================== */

#define MAX_STOP 16
#define MAX_CHOICES 128
#define MAX_TOP 20
#define HASH 4096

struct job;

/* One choice: a gpt2_request and the buffers the engine writes, plus the tokens copied as they come. */
typedef struct choice {
    gpt2_request r;
    struct job *job;
    int index, prompt;          /* its index in the response; its prompt */
    long long id;               /* engine id; -1 until submitted */
    int *out; float *lp; int *top_ids; float *top_lp;
    int *toks; int nt;          /* tokens so far (under g.lock) */
    int done, finish, text_len; /* set by on_end */
    struct choice *hnext;       /* the id hash's chain */
} choice;

typedef struct job {
    int refs;                   /* the HTTP side's 1, plus one per choice the engine holds */
    pthread_cond_t cond;
    int n_prompts, n, n_choices, n_done;
    int **prompts; int *prompt_lens;
    choice *ch;
    int max_tokens, echo, logprobs, stream, include_usage;
    char *stops[MAX_STOP]; int n_stop;
    int *bias_ids; float *bias; int n_bias;
    float **plp;                /* echo scoring: [prompt][prompt_len - 1] */
    int **ptop_ids; float **ptop_lp; /* echo scoring's alternatives: [prompt][prompt_len - 1][logprobs] */
    int scored; char score_err[600];
    struct job *score_next;
    long long created; char id[48];
} job;

static struct {
    gpt2_model *m; gpt2_tokenizer *tok; gpt2_engine *e;
    gpt2_model *sm;             /* --score-slots N: the scoring jobs' own instance of the model (NULL: they use m) */
    pthread_mutex_t score_lock; /* one gpt2_score on sm at a time */
    int V, max_seq, eos;
    char model_id[256];
    const char *api_key;
    int max_queue; size_t max_body;
    pthread_mutex_t lock; pthread_cond_t work;
    pthread_cond_t scored;      /* a scoring job finished (held submissions look again) */
    int kick, busy, quit, stopping, failed;
    int pending;                /* choices submitted and not ended */
    job *score_head, *score_tail;
    choice *hash[HASH];
    long long next_job; uint64_t seed_counter;
    /* metrics */
    unsigned long long req_total, req_by_code[6], tokens_total, prompt_tokens_total, steps, cancelled;
    double step_seconds, step_last;
} g;

static const int g_codes[6] = {200, 400, 401, 404, 413, 503};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void count_code(int code) {
    pthread_mutex_lock(&g.lock);
    g.req_total++;
    for (int i = 0; i < 6; i++)
        if (g_codes[i] == code) g.req_by_code[i]++;
    pthread_mutex_unlock(&g.lock);
}

/* ==== jobs: reference counts, the id hash, the engine's callbacks ============================================= */

static void job_free(job *j) {
    for (int i = 0; i < j->n_choices; i++) {
        choice *c = &j->ch[i];
        free(c->out); free(c->lp); free(c->top_ids); free(c->top_lp); free(c->toks);
    }
    for (int p = 0; p < j->n_prompts; p++) {
        free(j->prompts[p]);
        if (j->plp) free(j->plp[p]);
        if (j->ptop_ids) { free(j->ptop_ids[p]); free(j->ptop_lp[p]); }
    }
    free(j->ptop_ids); free(j->ptop_lp);
    for (int s = 0; s < j->n_stop; s++) free(j->stops[s]);
    free(j->prompts); free(j->prompt_lens); free(j->ch); free(j->plp); free(j->bias_ids); free(j->bias);
    pthread_cond_destroy(&j->cond);
    free(j);
}

/* under g.lock */
static void job_release(job *j) {
    if (--j->refs == 0) job_free(j);
}

static void hash_put(choice *c) {
    choice **h = &g.hash[(unsigned long long)c->id % HASH];
    c->hnext = *h;
    *h = c;
}

static choice *hash_find(long long id) {
    for (choice *c = g.hash[(unsigned long long)id % HASH]; c; c = c->hnext)
        if (c->id == id) return c;
    return NULL;
}

static void hash_drop(choice *c) {
    for (choice **h = &g.hash[(unsigned long long)c->id % HASH]; *h; h = &(*h)->hnext)
        if (*h == c) { *h = c->hnext; return; }
}

static int on_token(void *user, long long id, int token) {
    (void)user;
    pthread_mutex_lock(&g.lock);
    choice *c = hash_find(id);
    if (c && c->nt < c->r.max_new_tokens) {
        c->toks[c->nt++] = token;
        pthread_cond_broadcast(&c->job->cond);
    }
    g.tokens_total++;
    pthread_mutex_unlock(&g.lock);
    return 0;
}

/* marks choice c ended (under g.lock) */
static void choice_end(choice *c, int finish, int text_len) {
    job *j = c->job;
    hash_drop(c);
    c->done = 1;
    c->finish = finish;
    c->text_len = text_len;
    if (finish == GPT2_FINISH_CANCELLED) g.cancelled++;
    g.pending--;
    j->n_done++;
    pthread_cond_broadcast(&j->cond);
    job_release(j);
}

static void on_end(void *user, long long id, gpt2_request *r) {
    (void)user; (void)id;
    choice *c = (choice *)r; /* r is the choice's first member */
    pthread_mutex_lock(&g.lock);
    c->nt = r->n_out; /* the tokens are r->out's; toks kept up with them */
    memcpy(c->toks, r->out, (size_t)r->n_out * sizeof(int));
    choice_end(c, r->finish_reason, r->text_len);
    pthread_mutex_unlock(&g.lock);
}

/* cancels every choice of j the engine still holds (under g.lock) */
static void job_cancel(job *j) {
    for (int i = 0; i < j->n_choices; i++)
        if (j->ch[i].id >= 0 && !j->ch[i].done) gpt2_engine_cancel(g.e, j->ch[i].id);
}

/* ==== the stepping thread ====================================================================================== */

/* echo with logprobs > 0: the most likely tokens at each prompt position after the first, from the logits of
   gpt2_forward (what lm-evaluation-harness reads to tell whether a continuation is greedy) */
/* the model that scores: an instance of its own (--score-slots), else the engine's, when the engine is idle */
static gpt2_model *scoring_model(void) { return g.sm ? g.sm : g.m; }

static void prompt_alternatives(job *j) {
    const int K = j->logprobs, V = g.V;
    j->ptop_ids = (int **)calloc((size_t)j->n_prompts, sizeof(int *));
    j->ptop_lp = (float **)calloc((size_t)j->n_prompts, sizeof(float *));
    if (!j->ptop_ids || !j->ptop_lp) return;
    for (int p = 0; p < j->n_prompts; p++) {
        const int T = j->prompt_lens[p];
        if (T < 2) continue;
        float *logits = (float *)malloc((size_t)T * V * sizeof(float));
        j->ptop_ids[p] = (int *)malloc((size_t)T * K * sizeof(int));
        j->ptop_lp[p] = (float *)malloc((size_t)T * K * sizeof(float));
        if (!logits || !j->ptop_ids[p] || !j->ptop_lp[p] || gpt2_forward(scoring_model(), j->prompts[p], 1, T, logits) != GPT2_OK) {
            free(logits); free(j->ptop_ids[p]); free(j->ptop_lp[p]);
            j->ptop_ids[p] = NULL; j->ptop_lp[p] = NULL;
            continue;
        }
        for (int t = 0; t + 1 < T; t++) { /* row t predicts token t + 1 */
            const float *l = logits + (size_t)t * V;
            int *ids = j->ptop_ids[p] + (size_t)t * K;
            float *lp = j->ptop_lp[p] + (size_t)t * K;
            float mx = l[0];
            for (int v = 1; v < V; v++) mx = l[v] > mx ? l[v] : mx;
            double sum = 0;
            for (int v = 0; v < V; v++) sum += exp((double)l[v] - mx);
            const double lse = mx + log(sum);
            int n = 0;
            for (int v = 0; v < V; v++) { /* insertion into the K best so far, most likely first (ties: lower id) */
                if (n == K && l[v] <= lp[K - 1]) continue;
                int i = n < K ? n++ : K - 1;
                while (i > 0 && lp[i - 1] < l[v]) { lp[i] = lp[i - 1]; ids[i] = ids[i - 1]; i--; }
                lp[i] = l[v]; ids[i] = v;
            }
            for (int i = 0; i < K; i++) lp[i] = (float)(lp[i] - lse);
        }
        free(logits);
    }
}

static void run_score(job *j) {
    gpt2_score_request *sr = (gpt2_score_request *)calloc((size_t)j->n_prompts, sizeof *sr);
    j->plp = (float **)calloc((size_t)j->n_prompts, sizeof(float *));
    if (!sr || !j->plp) { snprintf(j->score_err, sizeof j->score_err, "out of memory"); free(sr); return; }
    for (int p = 0; p < j->n_prompts; p++) {
        j->plp[p] = (float *)malloc((size_t)j->prompt_lens[p] * sizeof(float));
        if (!j->plp[p]) { snprintf(j->score_err, sizeof j->score_err, "out of memory"); free(sr); return; }
        sr[p].tokens = j->prompts[p]; sr[p].n_tokens = j->prompt_lens[p];
        sr[p].n_context = 1; sr[p].logprobs = j->plp[p];
    }
    if (gpt2_score(scoring_model(), sr, j->n_prompts) != GPT2_OK)
        snprintf(j->score_err, sizeof j->score_err, "%s", gpt2_last_error());
    free(sr);
    if (!j->score_err[0] && j->logprobs > 0) prompt_alternatives(j);
}

/* the engine failed: every request it held ends (the engine is never stepped again, so it writes nothing more) */
static void fail_all(void) {
    for (int h = 0; h < HASH; h++)
        while (g.hash[h]) choice_end(g.hash[h], -1, -1);
}

static void *step_main(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&g.lock);
        while (!g.quit && !g.score_head && !g.kick && !g.busy) pthread_cond_wait(&g.work, &g.lock);
        if (g.quit && !g.busy && !g.score_head && g.pending == 0) { pthread_mutex_unlock(&g.lock); break; }
        g.kick = 0;
        job *sj = g.busy ? NULL : g.score_head; /* only with the engine idle: scoring uses the KV slots */
        if (sj && !(g.score_head = sj->score_next)) g.score_tail = NULL;
        int failed = g.failed;
        pthread_mutex_unlock(&g.lock);
        if (sj) {
            if (failed) snprintf(sj->score_err, sizeof sj->score_err, "the engine failed");
            else run_score(sj);
            pthread_mutex_lock(&g.lock);
            sj->scored = 1;
            pthread_cond_broadcast(&sj->cond);
            pthread_cond_broadcast(&g.scored);
            pthread_mutex_unlock(&g.lock);
            continue;
        }
        if (failed) {
            pthread_mutex_lock(&g.lock);
            fail_all();
            g.busy = 0;
            pthread_mutex_unlock(&g.lock);
            continue;
        }
        int busy = 0;
        double t0 = now_s();
        gpt2_status st = gpt2_engine_step(g.e, &busy);
        double dt = now_s() - t0;
        pthread_mutex_lock(&g.lock);
        g.busy = busy;
        g.steps++; g.step_seconds += dt; g.step_last = dt;
        if (st != GPT2_OK) {
            fprintf(stderr, "server: a step failed: %s\n", gpt2_last_error());
            g.failed = 1;
            fail_all();
            g.busy = 0;
            pthread_cond_broadcast(&g.scored);
        }
        pthread_mutex_unlock(&g.lock);
    }
    return NULL;
}

/* ==== text: UTF-8 clean-up, stop strings =================================================================== */

/* length of the valid UTF-8 sequence at s (n bytes left), 0 when invalid or cut short */
static int utf8_len(const unsigned char *s, size_t n) {
    int k = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 && s[0] >= 0xC2 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3
          : (s[0] & 0xF8) == 0xF0 && s[0] <= 0xF4 ? 4 : 0;
    if (!k || (size_t)k > n) return 0;
    for (int i = 1; i < k; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (k == 3 && ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0))) return 0;
    if (k == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90))) return 0;
    return k;
}

/* s[0..n) as a JSON-safe C string: invalid bytes and NUL become U+FFFD; malloc'd */
static char *utf8_clean(const char *s, size_t n) {
    char *o = (char *)malloc(3 * n + 1), *p = o;
    if (!o) return NULL;
    for (size_t i = 0; i < n;) {
        int k = utf8_len((const unsigned char *)s + i, n - i);
        if (k == 0 || s[i] == 0) { memcpy(p, "\xEF\xBF\xBD", 3); p += 3; i++; continue; }
        memcpy(p, s + i, (size_t)k); p += k; i += (size_t)k;
    }
    *p = 0;
    return o;
}

/* how many bytes of t[0..n) may be shown while more tokens may come: before a stop string found in it, before a
   tail that could start one, and before a UTF-8 character cut short */
static size_t safe_len(const job *j, const char *t, size_t n) {
    size_t L = n;
    for (int s = 0; s < j->n_stop; s++) {
        size_t k = strlen(j->stops[s]);
        for (size_t i = 0; i + k <= L; i++)
            if (!memcmp(t + i, j->stops[s], k)) { L = i; break; }
    }
    size_t hold = 0;
    for (int s = 0; s < j->n_stop; s++) {
        size_t k = strlen(j->stops[s]);
        for (size_t h = k - 1 < L ? k - 1 : L; h > hold; h--)
            if (!memcmp(t + L - h, j->stops[s], h)) { hold = h; break; }
    }
    L -= hold;
    for (size_t b = 1; b <= 3 && b <= L; b++) { /* a lead byte among the last three with its character cut short */
        unsigned char c = (unsigned char)t[L - b];
        if ((c & 0xC0) == 0x80) continue;
        int need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if ((size_t)need > b) L -= b;
        break;
    }
    return L;
}

/* decodes ids[0..n) into a malloc'd buffer; *len its bytes */
static char *decode_all(const int *ids, int n, size_t *len) {
    size_t cap = (size_t)n * 16 + 16;
    char *t = (char *)malloc(cap);
    if (!t) return NULL;
    int k = n ? gpt2_decode(g.tok, ids, n, t, cap) : 0;
    if (k < 0) k = 0;
    if ((size_t)k >= cap) {
        cap = (size_t)k + 1;
        char *u = (char *)realloc(t, cap);
        if (!u) { free(t); return NULL; }
        t = u;
        k = gpt2_decode(g.tok, ids, n, t, cap);
    }
    *len = (size_t)k;
    t[*len] = 0;
    return t;
}

static const char *finish_name(int f) {
    return f == GPT2_FINISH_STOP ? "stop" : f == GPT2_FINISH_LENGTH ? "length" : f == GPT2_FINISH_CANCELLED ? "cancelled" : "error";
}

/* ==== HTTP helpers ============================================================================================= */

typedef struct upload { char *body; size_t len, cap; int too_big; } upload;

static enum MHD_Result send_body(struct MHD_Connection *c, int code, const char *ctype, char *body, const char *retry) {
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) { free(body); return MHD_NO; }
    MHD_add_response_header(r, "Content-Type", ctype);
    if (retry) MHD_add_response_header(r, "Retry-After", retry);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)code, r);
    MHD_destroy_response(r);
    count_code(code);
    return ok;
}

static enum MHD_Result send_json(struct MHD_Connection *c, int code, cJSON *o) {
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) return MHD_NO;
    return send_body(c, code, "application/json", s, NULL);
}

static enum MHD_Result send_error(struct MHD_Connection *c, int code, const char *param, const char *ecode, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    char *clean = utf8_clean(msg, strlen(msg));
    cJSON_AddStringToObject(e, "message", clean ? clean : "error");
    free(clean);
    cJSON_AddStringToObject(e, "type", code == 401 ? "authentication_error" : code == 404 ? "not_found_error"
                                      : code == 503 ? "server_error" : "invalid_request_error");
    if (param) cJSON_AddStringToObject(e, "param", param); else cJSON_AddNullToObject(e, "param");
    if (ecode) cJSON_AddStringToObject(e, "code", ecode); else cJSON_AddNullToObject(e, "code");
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) return MHD_NO;
    return send_body(c, code, "application/json", s, code == 503 ? "1" : NULL);
}

/* ==== request parsing ========================================================================================== */

/* err: the message and param of a field's refusal */
typedef struct perr { char msg[512]; const char *param; } perr;

static int bad(perr *e, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->param = param;
    return -1;
}

/* a number field in [lo, hi] (absent or null: *v keeps its default) */
static int get_num(cJSON *o, const char *k, double lo, double hi, double *v, perr *e) {
    cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!x || cJSON_IsNull(x)) return 0;
    if (!cJSON_IsNumber(x) || !(x->valuedouble >= lo && x->valuedouble <= hi))
        return bad(e, k, "'%s' must be a number from %g to %g", k, lo, hi);
    *v = x->valuedouble;
    return 0;
}

static int get_int(cJSON *o, const char *k, double lo, double hi, int *v, perr *e) {
    cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!x || cJSON_IsNull(x)) return 0;
    if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || !(x->valuedouble >= lo && x->valuedouble <= hi))
        return bad(e, k, "'%s' must be an integer from %g to %g", k, lo, hi);
    *v = (int)x->valuedouble;
    return 0;
}

static int get_bool(cJSON *o, const char *k, int *v, perr *e) {
    cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!x || cJSON_IsNull(x)) return 0;
    if (!cJSON_IsBool(x)) return bad(e, k, "'%s' must be true or false", k);
    *v = cJSON_IsTrue(x);
    return 0;
}

/* a list of token ids, all in the vocabulary */
static int is_id_list(cJSON *a) {
    if (!cJSON_IsArray(a) || !cJSON_GetArraySize(a)) return 0;
    for (cJSON *x = a->child; x; x = x->next)
        if (!cJSON_IsNumber(x)) return 0;
    return 1;
}

static int take_ids(cJSON *a, int **ids, int *n, perr *e) {
    *n = cJSON_GetArraySize(a);
    if (*n > g.max_seq) return bad(e, "prompt", "the prompt has %d tokens; this model's context is %d tokens", *n, g.max_seq);
    *ids = (int *)malloc((size_t)*n * sizeof(int));
    if (!*ids) return bad(e, "prompt", "out of memory");
    int i = 0;
    for (cJSON *x = a->child; x; x = x->next, i++) {
        double v = x->valuedouble;
        if (v != floor(v) || v < 0 || v >= g.V) return bad(e, "prompt", "prompt token %g is not a token id (0..%d)", v, g.V - 1);
        (*ids)[i] = (int)v;
    }
    return 0;
}

static int take_text(const char *s, int **ids, int *n, perr *e) {
    size_t len = strlen(s);
    if (len == 0) { /* an empty prompt starts from <|endoftext|>, as ./demo does */
        *ids = (int *)malloc(sizeof(int));
        if (!*ids) return bad(e, "prompt", "out of memory");
        (*ids)[0] = g.eos >= 0 ? g.eos : 0; *n = 1;
        return 0;
    }
    int k = gpt2_encode(g.tok, s, len, NULL, 0);
    if (k < 0) return bad(e, "prompt", "the prompt cannot be encoded: %s", gpt2_last_error());
    if (k > g.max_seq) return bad(e, "prompt", "the prompt has %d tokens; this model's context is %d tokens", k, g.max_seq);
    *ids = (int *)malloc((size_t)(k ? k : 1) * sizeof(int));
    if (!*ids) return bad(e, "prompt", "out of memory");
    *n = gpt2_encode(g.tok, s, len, *ids, k);
    return 0;
}

/* prompt: a string, a list of strings, a list of ids, or a list of id lists */
static int parse_prompts(cJSON *p, job *j, perr *e) {
    if (!p) return bad(e, "prompt", "'prompt' is required");
    int np = cJSON_IsString(p) || is_id_list(p) ? 1 : cJSON_IsArray(p) ? cJSON_GetArraySize(p) : 0;
    if (np < 1 || np > MAX_CHOICES)
        return bad(e, "prompt", "'prompt' must be a string, a list of strings, a list of token ids or a list of such lists");
    j->prompts = (int **)calloc((size_t)np, sizeof(int *));
    j->prompt_lens = (int *)calloc((size_t)np, sizeof(int));
    if (!j->prompts || !j->prompt_lens) return bad(e, "prompt", "out of memory");
    j->n_prompts = np;
    if (cJSON_IsString(p)) return take_text(p->valuestring, &j->prompts[0], &j->prompt_lens[0], e);
    if (is_id_list(p)) return take_ids(p, &j->prompts[0], &j->prompt_lens[0], e);
    int i = 0;
    for (cJSON *x = p->child; x; x = x->next, i++) {
        int r = cJSON_IsString(x) ? take_text(x->valuestring, &j->prompts[i], &j->prompt_lens[i], e)
              : is_id_list(x) ? take_ids(x, &j->prompts[i], &j->prompt_lens[i], e)
              : bad(e, "prompt", "prompt[%d] must be a string or a list of token ids", i);
        if (r) return r;
    }
    return 0;
}

/* the fields of a completions request into j and the sampling base s; 0, or -1 with e set */
static int parse_completion(cJSON *o, job *j, gpt2_sampling *s, uint64_t *seed, int *has_seed, perr *e) {
    double temperature = 1, top_p = 1, min_p = 0, typical_p = 1, rep = 1, pres = 0, freq = 0, seedv = 0;
    int top_k = 0, nrn = 0, min_tokens = 0, ignore_eos = 0;
    cJSON *x;
    j->max_tokens = 16; j->n = 1; j->logprobs = -1;
    if ((x = cJSON_GetObjectItemCaseSensitive(o, "model")) && !cJSON_IsNull(x)) {
        if (!cJSON_IsString(x)) return bad(e, "model", "'model' must be a string");
        if (strcmp(x->valuestring, g.model_id)) { e->param = "model"; snprintf(e->msg, sizeof e->msg, "404"); return -2; }
    }
    if (parse_prompts(cJSON_GetObjectItemCaseSensitive(o, "prompt"), j, e)) return -1;
    if (get_int(o, "max_tokens", 0, g.max_seq, &j->max_tokens, e) || get_int(o, "n", 1, MAX_CHOICES, &j->n, e)
        || get_num(o, "temperature", 0, 2, &temperature, e) || get_num(o, "top_p", 0, 1, &top_p, e)
        || get_int(o, "top_k", 0, 1e9, &top_k, e) || get_num(o, "min_p", 0, 1, &min_p, e)
        || get_num(o, "typical_p", 0, 1, &typical_p, e) || get_num(o, "repetition_penalty", 1e-6, 100, &rep, e)
        || get_num(o, "presence_penalty", -2, 2, &pres, e) || get_num(o, "frequency_penalty", -2, 2, &freq, e)
        || get_int(o, "no_repeat_ngram_size", 0, 1e9, &nrn, e) || get_int(o, "min_tokens", 0, 1e9, &min_tokens, e)
        || get_int(o, "logprobs", 0, MAX_TOP, &j->logprobs, e) || get_bool(o, "echo", &j->echo, e)
        || get_bool(o, "stream", &j->stream, e) || get_bool(o, "ignore_eos", &ignore_eos, e)
        || get_num(o, "seed", -9.2e18, 9.2e18, &seedv, e))
        return -1;
    if ((x = cJSON_GetObjectItemCaseSensitive(o, "best_of")) && !cJSON_IsNull(x) && !(cJSON_IsNumber(x) && x->valueint == j->n))
        return bad(e, "best_of", "'best_of' other than n is not supported");
    if ((x = cJSON_GetObjectItemCaseSensitive(o, "user")) && !cJSON_IsNull(x) && !cJSON_IsString(x))
        return bad(e, "user", "'user' must be a string");
    if ((x = cJSON_GetObjectItemCaseSensitive(o, "stream_options")) && cJSON_IsObject(x)) {
        cJSON *u = cJSON_GetObjectItemCaseSensitive(x, "include_usage");
        j->include_usage = cJSON_IsTrue(u);
    }
    *has_seed = (x = cJSON_GetObjectItemCaseSensitive(o, "seed")) && !cJSON_IsNull(x);
    *seed = (uint64_t)(long long)seedv;
    if ((x = cJSON_GetObjectItemCaseSensitive(o, "stop")) && !cJSON_IsNull(x)) {
        if (cJSON_IsString(x)) {
            if (!*x->valuestring) return bad(e, "stop", "a stop string is empty");
            j->stops[j->n_stop++] = strdup(x->valuestring);
        } else if (cJSON_IsArray(x) && cJSON_GetArraySize(x) <= MAX_STOP) {
            for (cJSON *y = x->child; y; y = y->next) {
                if (!cJSON_IsString(y) || !*y->valuestring) return bad(e, "stop", "'stop' must be a string or a list of up to %d non-empty strings", MAX_STOP);
                j->stops[j->n_stop++] = strdup(y->valuestring);
            }
        } else return bad(e, "stop", "'stop' must be a string or a list of up to %d non-empty strings", MAX_STOP);
    }
    if ((x = cJSON_GetObjectItemCaseSensitive(o, "logit_bias")) && !cJSON_IsNull(x)) {
        if (!cJSON_IsObject(x)) return bad(e, "logit_bias", "'logit_bias' must be an object of token id: bias");
        int n = cJSON_GetArraySize(x);
        j->bias_ids = (int *)malloc((size_t)(n ? n : 1) * sizeof(int));
        j->bias = (float *)malloc((size_t)(n ? n : 1) * sizeof(float));
        if (!j->bias_ids || !j->bias) return bad(e, "logit_bias", "out of memory");
        for (cJSON *y = x->child; y; y = y->next) {
            char *end;
            long id = strtol(y->string, &end, 10);
            if (!*y->string || *end || id < 0 || id >= g.V) return bad(e, "logit_bias", "logit_bias key '%s' is not a token id (0..%d)", y->string, g.V - 1);
            if (!cJSON_IsNumber(y) || !(y->valuedouble >= -100 && y->valuedouble <= 100))
                return bad(e, "logit_bias", "logit_bias values must be numbers from -100 to 100");
            j->bias_ids[j->n_bias] = (int)id; j->bias[j->n_bias++] = (float)y->valuedouble;
        }
    }
    if ((long)j->n * j->n_prompts > MAX_CHOICES) return bad(e, "n", "n x prompts = %d is more than %d choices", j->n * j->n_prompts, MAX_CHOICES);
    for (int p = 0; p < j->n_prompts; p++)
        if ((long)j->prompt_lens[p] + j->max_tokens > g.max_seq)
            return bad(e, "max_tokens", "this model's context is %d tokens; the prompt has %d and max_tokens is %d",
                       g.max_seq, j->prompt_lens[p], j->max_tokens);
    memset(s, 0, sizeof *s);
    s->temperature = (float)temperature; s->top_k = top_k; s->top_p = (float)top_p; s->min_p = (float)min_p;
    s->typical_p = (float)typical_p; s->repetition_penalty = (float)rep; s->presence_penalty = (float)pres;
    s->frequency_penalty = (float)freq; s->no_repeat_ngram = nrn; s->min_new_tokens = min_tokens;
    s->bias_ids = j->bias_ids; s->bias = j->bias; s->n_bias = j->n_bias;
    return ignore_eos ? 1 : 0;
}

/* ==== responses ================================================================================================ */

/* the text of choice c (its completion, cut at a stop string, after the prompt when echoed); malloc'd raw bytes */
static char *choice_text(const job *j, const choice *c, size_t *len, size_t *prompt_bytes) {
    size_t pl = 0, cl = 0;
    char *pt = j->echo ? decode_all(j->prompts[c->prompt], j->prompt_lens[c->prompt], &pl) : NULL;
    char *ct = decode_all(c->toks, c->nt, &cl);
    if (c->text_len >= 0 && (size_t)c->text_len < cl) cl = (size_t)c->text_len;
    char *t = (char *)malloc(pl + cl + 1);
    if (t) {
        if (pl) memcpy(t, pt, pl);
        if (cl) memcpy(t + pl, ct, cl);
        t[pl + cl] = 0;
    }
    free(pt); free(ct);
    *len = pl + cl; *prompt_bytes = pl;
    return t;
}

static void add_clean(cJSON *o, const char *k, const char *s, size_t n) {
    char *t = utf8_clean(s, n);
    cJSON_AddStringToObject(o, k, t ? t : "");
    free(t);
}

static cJSON *token_string(int id) {
    char b[256];
    int k = gpt2_decode(g.tok, &id, 1, b, sizeof b);
    if (k < 0) k = 0;
    if (k > (int)sizeof b - 1) k = (int)sizeof b - 1;
    char *t = utf8_clean(b, (size_t)k);
    cJSON *s = cJSON_CreateString(t ? t : "");
    free(t);
    return s;
}

static size_t token_bytes(int id) {
    char b[256];
    int k = gpt2_decode(g.tok, &id, 1, b, sizeof b);
    return k > 0 ? (size_t)k : 0;
}

/* the end of the generated tokens ids[from..) that lie in the text before limit, token from starting at offset off:
   those that start before it (whole: those that end by it) */
static int tokens_within(const int *ids, int from, int n, size_t off, size_t limit, int whole) {
    int t = from;
    for (; t < n; t++) {
        size_t k = token_bytes(ids[t]);
        if (whole ? off + k > limit : off >= limit) break;
        off += k;
    }
    return t;
}

/* generated tokens [from, to) into the legacy logprobs arrays of o, token from at text offset off */
static void add_gen_logprobs(cJSON *o, const job *j, const int *ids, const float *lp, const int *tid, const float *tlp,
                             int from, int to, size_t off) {
    cJSON *toks = cJSON_GetObjectItemCaseSensitive(o, "tokens"), *lps = cJSON_GetObjectItemCaseSensitive(o, "token_logprobs");
    cJSON *tops = cJSON_GetObjectItemCaseSensitive(o, "top_logprobs"), *offs = cJSON_GetObjectItemCaseSensitive(o, "text_offset");
    for (int t = from; t < to; t++) {
        cJSON_AddItemToArray(toks, token_string(ids[t]));
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(lp[t]));
        cJSON *d = cJSON_CreateObject();
        for (int k = 0; k < j->logprobs; k++) {
            cJSON *s = token_string(tid[(size_t)t * j->logprobs + k]);
            if (!cJSON_GetObjectItemCaseSensitive(d, s->valuestring))
                cJSON_AddNumberToObject(d, s->valuestring, tlp[(size_t)t * j->logprobs + k]);
            cJSON_Delete(s);
        }
        cJSON_AddItemToArray(tops, d);
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        off += token_bytes(ids[t]);
    }
}

static cJSON *logprobs_object(void) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddArrayToObject(o, "tokens"); cJSON_AddArrayToObject(o, "token_logprobs");
    cJSON_AddArrayToObject(o, "top_logprobs"); cJSON_AddArrayToObject(o, "text_offset");
    return o;
}

/* OpenAI's legacy logprobs: tokens, token_logprobs, top_logprobs, text_offset */
static cJSON *choice_logprobs(const job *j, const choice *c, size_t text_bytes) {
    cJSON *o = logprobs_object();
    cJSON *toks = cJSON_GetObjectItemCaseSensitive(o, "tokens"), *lps = cJSON_GetObjectItemCaseSensitive(o, "token_logprobs");
    cJSON *tops = cJSON_GetObjectItemCaseSensitive(o, "top_logprobs"), *offs = cJSON_GetObjectItemCaseSensitive(o, "text_offset");
    size_t off = 0;
    if (j->echo) {
        const int *p = j->prompts[c->prompt];
        for (int t = 0; t < j->prompt_lens[c->prompt]; t++) {
            cJSON_AddItemToArray(toks, token_string(p[t]));
            if (t == 0) { cJSON_AddItemToArray(lps, cJSON_CreateNull()); cJSON_AddItemToArray(tops, cJSON_CreateNull()); }
            else {
                double lp = j->plp && j->plp[c->prompt] ? j->plp[c->prompt][t - 1] : 0;
                cJSON_AddItemToArray(lps, cJSON_CreateNumber(lp));
                cJSON *d = cJSON_CreateObject();
                const int K = j->logprobs;
                if (K > 0 && j->ptop_ids && j->ptop_ids[c->prompt])
                    for (int k = 0; k < K; k++) {
                        cJSON *s = token_string(j->ptop_ids[c->prompt][(size_t)(t - 1) * K + k]);
                        if (!cJSON_GetObjectItemCaseSensitive(d, s->valuestring))
                            cJSON_AddNumberToObject(d, s->valuestring, j->ptop_lp[c->prompt][(size_t)(t - 1) * K + k]);
                        cJSON_Delete(s);
                    }
                else cJSON_AddNumberToObject(d, cJSON_GetArrayItem(toks, t)->valuestring, lp);
                cJSON_AddItemToArray(tops, d);
            }
            cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
            off += token_bytes(p[t]);
        }
    }
    int to = tokens_within(c->toks, 0, c->nt, off, text_bytes, 0);
    add_gen_logprobs(o, j, c->toks, c->lp, c->top_ids, c->top_lp, 0, to, off);
    return o;
}

static void add_usage(cJSON *o, const job *j) {
    long pt = 0, ct = 0;
    for (int p = 0; p < j->n_prompts; p++) pt += j->prompt_lens[p];
    for (int i = 0; i < j->n_choices; i++) ct += j->ch[i].nt;
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)pt);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)ct);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(pt + ct));
}

static cJSON *chunk_head(const job *j) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "object", "text_completion");
    cJSON_AddNumberToObject(o, "created", (double)j->created);
    cJSON_AddStringToObject(o, "model", g.model_id);
    return o;
}

static cJSON *completion_json(const job *j) {
    cJSON *o = chunk_head(j), *chs = cJSON_AddArrayToObject(o, "choices");
    for (int i = 0; i < j->n_choices; i++) {
        const choice *c = &j->ch[i];
        size_t len, pb;
        char *t = choice_text(j, c, &len, &pb);
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "index", c->index);
        add_clean(x, "text", t ? t : "", t ? len : 0);
        if (j->logprobs >= 0) cJSON_AddItemToObject(x, "logprobs", choice_logprobs(j, c, len));
        else cJSON_AddNullToObject(x, "logprobs");
        cJSON_AddStringToObject(x, "finish_reason", finish_name(c->finish));
        cJSON_AddItemToArray(chs, x);
        free(t);
    }
    add_usage(o, j);
    return o;
}

/* ==== streaming =============================================================================================== */

typedef struct stream {
    job *j; int n;              /* its job, and the job's choices */
    char *buf; size_t len, off, cap;
    size_t *sent; int *final_sent; int *snap; int ended;
    size_t prompt_bytes;        /* echo: the prompt's text before each choice's */
    int *tok_sent; size_t *tok_off; /* logprobs: tokens sent by choice, and the text offset after them */
    float *slp; int *stid; float *stlp; /* logprobs: snapshots of a choice's */
    char **text; size_t *tlen, *tcap; int *ndec; /* each choice's text, decoded as its tokens come */
} stream;

static void stream_drop(stream *s) {
    for (int i = 0; s->text && i < s->n; i++) free(s->text[i]);
    free(s->buf); free(s->sent); free(s->final_sent); free(s->snap);
    free(s->tok_sent); free(s->tok_off); free(s->slp); free(s->stid); free(s->stlp);
    free(s->text); free(s->tlen); free(s->tcap); free(s->ndec);
    free(s);
}

/* appends the text of choice i's tokens snap[ndec[i] .. nt) to text[i]; 0, or -1 out of memory */
static int stream_decode(stream *s, int i, int nt) {
    const int from = s->ndec[i];
    size_t need = s->tlen[i] + (size_t)(nt - from) * 8 + 1;
    while (nt > from) {
        if (need > s->tcap[i]) {
            char *b = (char *)realloc(s->text[i], need * 2);
            if (!b) return -1;
            s->text[i] = b; s->tcap[i] = need * 2;
        }
        int k = gpt2_decode(g.tok, s->snap + from, nt - from, s->text[i] + s->tlen[i], s->tcap[i] - s->tlen[i]);
        if (k < 0) return -1;
        if ((size_t)k < s->tcap[i] - s->tlen[i]) { s->tlen[i] += (size_t)k; break; }
        need = s->tlen[i] + (size_t)k + 1;
    }
    s->ndec[i] = nt;
    return 0;
}

static void sbuf_add(stream *s, const char *t, size_t n) {
    if (s->len + n + 1 > s->cap) {
        size_t cap = (s->len + n + 1) * 2;
        char *b = (char *)realloc(s->buf, cap);
        if (!b) return;
        s->buf = b; s->cap = cap;
    }
    memcpy(s->buf + s->len, t, n);
    s->len += n;
}

static void sbuf_event(stream *s, cJSON *o) {
    char *t = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!t) return;
    sbuf_add(s, "data: ", 6);
    sbuf_add(s, t, strlen(t));
    sbuf_add(s, "\n\n", 2);
    free(t);
}

static void stream_event(stream *s, const choice *c, const char *text, size_t n, const char *finish, cJSON *lp) {
    const job *j = s->j;
    cJSON *o = chunk_head(j), *chs = cJSON_AddArrayToObject(o, "choices"), *x = cJSON_CreateObject();
    cJSON_AddNumberToObject(x, "index", c->index);
    add_clean(x, "text", text, n);
    if (lp) cJSON_AddItemToObject(x, "logprobs", lp); else cJSON_AddNullToObject(x, "logprobs");
    if (finish) cJSON_AddStringToObject(x, "finish_reason", finish); else cJSON_AddNullToObject(x, "finish_reason");
    cJSON_AddItemToArray(chs, x);
    sbuf_event(s, o);
}

/* appends the events of what the choices made since the last call; g.lock held on entry and exit (released while
   decoding) */
static void stream_collect(stream *s) {
    job *j = s->j;
    int all = 1;
    for (int i = 0; i < j->n_choices; i++) {
        choice *c = &j->ch[i];
        if (s->final_sent[i]) continue;
        int nt = c->nt, done = c->done, finish = c->finish, text_len = c->text_len;
        memcpy(s->snap, c->toks, (size_t)nt * sizeof(int));
        const int K = j->logprobs > 0 ? j->logprobs : 0;
        if (j->logprobs >= 0) { /* written before on_token reported each of them, and never again */
            memcpy(s->slp, c->lp, (size_t)nt * sizeof(float));
            memcpy(s->stid, c->top_ids, (size_t)nt * K * sizeof(int));
            memcpy(s->stlp, c->top_lp, (size_t)nt * K * sizeof(float));
        }
        pthread_mutex_unlock(&g.lock);
        const char *t = stream_decode(s, i, nt) ? NULL : s->text[i];
        const size_t len = s->tlen[i];
        if (t) {
            size_t L = done ? (text_len >= 0 && (size_t)text_len < len ? (size_t)text_len : len) : safe_len(j, t, len);
            cJSON *lp = NULL;
            if (j->logprobs >= 0 && (L > s->sent[i] || done)) {
                int to = tokens_within(s->snap, s->tok_sent[i], nt, s->tok_off[i], L, !done);
                lp = logprobs_object();
                add_gen_logprobs(lp, j, s->snap, s->slp, s->stid, s->stlp, s->tok_sent[i], to, s->prompt_bytes + s->tok_off[i]);
                for (int k = s->tok_sent[i]; k < to; k++) s->tok_off[i] += token_bytes(s->snap[k]);
                s->tok_sent[i] = to;
            }
            if (L > s->sent[i]) stream_event(s, c, t + s->sent[i], L - s->sent[i], done ? finish_name(finish) : NULL, lp);
            else if (done) stream_event(s, c, "", 0, finish_name(finish), lp);
            else cJSON_Delete(lp);
            if (L > s->sent[i]) s->sent[i] = L;
        }
        pthread_mutex_lock(&g.lock);
        if (done) s->final_sent[i] = 1; else all = 0;
    }
    if (all) {
        if (j->include_usage) {
            cJSON *o = chunk_head(j);
            cJSON_AddArrayToObject(o, "choices");
            add_usage(o, j);
            sbuf_event(s, o);
        }
        sbuf_add(s, "data: [DONE]\n\n", 14);
        s->ended = 1;
    }
}

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max) {
    (void)pos;
    stream *s = (stream *)cls;
    if (s->off == s->len) {
        s->off = s->len = 0;
        if (s->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        pthread_mutex_lock(&g.lock);
        for (;;) {
            stream_collect(s);
            if (s->len || s->ended) break;
            struct timespec t;
            clock_gettime(CLOCK_REALTIME, &t);
            t.tv_sec += 1;
            if (pthread_cond_timedwait(&s->j->cond, &g.lock, &t) == ETIMEDOUT) { /* an SSE comment keeps the line checked */
                sbuf_add(s, ": keep-alive\n\n", 14);
                break;
            }
        }
        pthread_mutex_unlock(&g.lock);
        if (!s->len) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = s->len - s->off < max ? s->len - s->off : max;
    memcpy(out, s->buf + s->off, n);
    s->off += n;
    return (ssize_t)n;
}

/* Whether the client of a connection that waits for a whole (non-streamed) response has gone: its socket reports a
   hang-up or an error, or reads end-of-file (a client that closed its side; as a proxy would, a half-close counts).
   Bytes of a next request on the same connection leave it standing. The connection's own thread asks (no one else
   reads that socket meanwhile: libmicrohttpd's thread per connection is in the handler). */
static int client_gone(int fd) {
    struct pollfd p = {fd, POLLIN, 0};
#ifdef POLLRDHUP
    p.events |= POLLRDHUP;
#endif
    if (poll(&p, 1, 0) <= 0) return 0;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return 1;
    char c;
    const ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* the connection closed (the stream ended, or the client went away): what the engine still holds is cancelled */
static void stream_free(void *cls) {
    stream *s = (stream *)cls;
    pthread_mutex_lock(&g.lock);
    job_cancel(s->j);
    job_release(s->j);
    pthread_mutex_unlock(&g.lock);
    stream_drop(s);
}

/* ==== endpoints ================================================================================================ */

static enum MHD_Result completions(struct MHD_Connection *conn, const upload *cx) {
    cJSON *o = cJSON_ParseWithLength(cx->body ? cx->body : "", cx->len);
    if (!o || !cJSON_IsObject(o)) { cJSON_Delete(o); return send_error(conn, 400, NULL, "invalid_json", "the body is not a JSON object"); }
    job *j = (job *)calloc(1, sizeof *j);
    if (!j) { cJSON_Delete(o); return send_error(conn, 503, NULL, NULL, "out of memory"); }
    j->refs = 1;
    pthread_cond_init(&j->cond, NULL);
    perr e = {{0}, NULL};
    gpt2_sampling base;
    uint64_t seed = 0;
    int has_seed = 0;
    int rc = parse_completion(o, j, &base, &seed, &has_seed, &e);
    cJSON_Delete(o);
    if (rc == -2) { job_free(j); return send_error(conn, 404, "model", "model_not_found", "the model does not exist (this server serves '%s')", g.model_id); }
    if (rc < 0) { job_free(j); return send_error(conn, 400, e.param, NULL, "%s", e.msg); }
    const int ignore_eos = rc == 1;
    j->n_choices = j->n * j->n_prompts;
    j->ch = (choice *)calloc((size_t)j->n_choices, sizeof(choice));
    int L = j->logprobs > 0 ? j->logprobs : 0, T = j->max_tokens > 0 ? j->max_tokens : 1;
    for (int i = 0; j->ch && i < j->n_choices; i++) {
        choice *c = &j->ch[i];
        c->job = j; c->index = i; c->prompt = i / j->n; c->id = -1; c->text_len = -1;
        c->out = (int *)malloc((size_t)T * sizeof(int)); c->toks = (int *)malloc((size_t)T * sizeof(int));
        c->lp = (float *)malloc((size_t)T * sizeof(float));
        c->top_ids = (int *)malloc((size_t)T * (L ? L : 1) * sizeof(int));
        c->top_lp = (float *)malloc((size_t)T * (L ? L : 1) * sizeof(float));
        if (!c->out || !c->toks || !c->lp || !c->top_ids || !c->top_lp) { free(j->ch[i].out); j->ch[i].out = NULL; break; }
        gpt2_request *r = &c->r;
        r->prompt = j->prompts[c->prompt]; r->prompt_len = j->prompt_lens[c->prompt];
        r->max_new_tokens = j->max_tokens;
        r->sampling = base;
        pthread_mutex_lock(&g.lock);
        r->sampling.seed = has_seed ? seed + (uint64_t)i : (uint64_t)time(NULL) * 6364136223846793005ULL + ++g.seed_counter;
        pthread_mutex_unlock(&g.lock);
        r->stop_token = ignore_eos ? -1 : g.eos;
        r->out = c->out;
        if (j->logprobs >= 0 && j->max_tokens > 0) { /* (echo's prompt logprobs come from gpt2_score) */
            r->out_logprobs = c->lp; r->top_logprobs = L;
            if (L) { r->out_top_ids = c->top_ids; r->out_top_logprobs = c->top_lp; }
        }
        if (j->n_stop) { r->stop_strings = (const char *const *)j->stops; r->n_stop_strings = j->n_stop; r->tokenizer = g.tok; }
    }
    for (int i = 0; j->ch && i < j->n_choices; i++)
        if (!j->ch[i].out) { job_free(j); return send_error(conn, 503, NULL, NULL, "out of memory"); }
    if (!j->ch) { job_free(j); return send_error(conn, 503, NULL, NULL, "out of memory"); }
    pthread_mutex_lock(&g.lock);
    j->created = (long long)time(NULL);
    snprintf(j->id, sizeof j->id, "cmpl-%lld", ++g.next_job);
    int full = g.stopping || g.failed || g.pending + j->n_choices > gpt2_model_max_batch(g.m) + g.max_queue;
    const int stopping = g.stopping || g.failed;
    if (!full) g.pending += j->n_choices; /* held now, so that no one else takes the room */
    pthread_mutex_unlock(&g.lock);
    if (full) {
        job_free(j);
        return send_error(conn, 503, NULL, stopping ? "shutting_down" : "queue_full",
                          stopping ? "the server is shutting down" : "the queue is full; retry later");
    }
    /* echo with logprobs: the prompt's token logprobs first, from gpt2_score: here on the scoring instance
       (--score-slots), else on the stepping thread once the engine is idle */
    if (j->echo && j->logprobs >= 0 && g.sm) {
        pthread_mutex_lock(&g.score_lock);
        run_score(j);
        pthread_mutex_unlock(&g.score_lock);
    } else if (j->echo && j->logprobs >= 0) {
        pthread_mutex_lock(&g.lock);
        if (g.score_tail) g.score_tail->score_next = j; else g.score_head = j;
        g.score_tail = j;
        pthread_cond_signal(&g.work);
        while (!j->scored) pthread_cond_wait(&j->cond, &g.lock);
        pthread_mutex_unlock(&g.lock);
    }
    if (j->score_err[0]) {
        pthread_mutex_lock(&g.lock); g.pending -= j->n_choices; pthread_mutex_unlock(&g.lock);
        job_free(j);
        return send_error(conn, 400, "prompt", NULL, "%s", j->score_err);
    }
    char err[512] = "";
    pthread_mutex_lock(&g.lock);
    /* while scoring jobs wait for the engine to empty, new requests wait for them */
    while (g.score_head && !g.stopping && !g.failed) pthread_cond_wait(&g.scored, &g.lock);
    for (int i = 0; i < j->n_choices; i++) {
        choice *c = &j->ch[i];
        long long id = gpt2_engine_submit(g.e, &c->r);
        if (id < 0) { snprintf(err, sizeof err, "%s", gpt2_last_error()); break; }
        c->id = id;
        hash_put(c);
        j->refs++;
    }
    int submitted = 0;
    for (int i = 0; i < j->n_choices; i++) submitted += j->ch[i].id >= 0;
    g.pending -= j->n_choices - submitted;
    if (err[0]) { job_cancel(j); j->n_done += j->n_choices - submitted; }
    for (int p = 0; p < j->n_prompts && !err[0]; p++) g.prompt_tokens_total += (unsigned long long)j->prompt_lens[p];
    g.kick = 1;
    pthread_cond_signal(&g.work);
    pthread_mutex_unlock(&g.lock);
    if (err[0]) {
        const char *m = strstr(err, ": ");
        pthread_mutex_lock(&g.lock); job_release(j); pthread_mutex_unlock(&g.lock);
        return send_error(conn, 400, NULL, NULL, "%s", m && !strncmp(err, "request ", 8) ? m + 2 : err);
    }
    if (j->stream) {
        stream *s = (stream *)calloc(1, sizeof *s);
        if (s) {
            s->j = j; s->n = j->n_choices;
            s->text = (char **)calloc((size_t)j->n_choices, sizeof(char *));
            s->tlen = (size_t *)calloc((size_t)j->n_choices, sizeof(size_t));
            s->tcap = (size_t *)calloc((size_t)j->n_choices, sizeof(size_t));
            s->ndec = (int *)calloc((size_t)j->n_choices, sizeof(int));
            s->sent = (size_t *)calloc((size_t)j->n_choices, sizeof(size_t));
            s->final_sent = (int *)calloc((size_t)j->n_choices, sizeof(int));
            s->snap = (int *)malloc((size_t)T * sizeof(int));
            s->tok_sent = (int *)calloc((size_t)j->n_choices, sizeof(int));
            s->tok_off = (size_t *)calloc((size_t)j->n_choices, sizeof(size_t));
            s->slp = (float *)malloc((size_t)T * sizeof(float));
            s->stid = (int *)malloc((size_t)T * (L ? L : 1) * sizeof(int));
            s->stlp = (float *)malloc((size_t)T * (L ? L : 1) * sizeof(float));
        }
        if (!s || !s->sent || !s->final_sent || !s->snap || !s->tok_sent || !s->tok_off || !s->slp || !s->stid || !s->stlp
            || !s->text || !s->tlen || !s->tcap || !s->ndec) {
            pthread_mutex_lock(&g.lock); job_cancel(j); job_release(j); pthread_mutex_unlock(&g.lock);
            if (s) stream_drop(s);
            return send_error(conn, 503, NULL, NULL, "out of memory");
        }
        if (j->echo) { /* the prompt's text goes first */
            for (int i = 0; i < j->n_choices; i++) {
                size_t pl;
                char *pt = decode_all(j->prompts[j->ch[i].prompt], j->prompt_lens[j->ch[i].prompt], &pl);
                if (pt) stream_event(s, &j->ch[i], pt, pl, NULL, NULL);
                s->prompt_bytes = pt ? pl : 0;
                free(pt);
            }
        }
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, s, stream_free);
        if (!r) { stream_free(s); return MHD_NO; }
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        enum MHD_Result ok = MHD_queue_response(conn, 200, r);
        MHD_destroy_response(r);
        count_code(200);
        return ok;
    }
    /* a whole response: wait for every choice, looking at the socket every 100 ms; a client that hangs up cancels
       what the engine still holds (its slots free at the next step) and gets no response */
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    const int fd = ci ? ci->connect_fd : -1;
    int gone = 0;
    struct timespec look; /* when the socket is looked at next (the job's condition also wakes at every token) */
    clock_gettime(CLOCK_REALTIME, &look);
    pthread_mutex_lock(&g.lock);
    while (j->n_done < j->n_choices) {
        if (fd < 0 || gone) { pthread_cond_wait(&j->cond, &g.lock); continue; }
        look.tv_nsec += 100000000;
        if (look.tv_nsec >= 1000000000) { look.tv_sec++; look.tv_nsec -= 1000000000; }
        while (j->n_done < j->n_choices && pthread_cond_timedwait(&j->cond, &g.lock, &look) != ETIMEDOUT) {}
        if (j->n_done == j->n_choices) break;
        pthread_mutex_unlock(&g.lock);
        gone = client_gone(fd);
        pthread_mutex_lock(&g.lock);
        if (gone) job_cancel(j);
    }
    pthread_mutex_unlock(&g.lock);
    if (gone) {
        pthread_mutex_lock(&g.lock); job_release(j); pthread_mutex_unlock(&g.lock);
        return MHD_NO;
    }
    int failed = 0;
    for (int i = 0; i < j->n_choices; i++) failed |= j->ch[i].finish < 0;
    enum MHD_Result ok = failed ? send_error(conn, 503, NULL, "engine_failed", "the engine failed; see the server's log")
                                : send_json(conn, 200, completion_json(j));
    pthread_mutex_lock(&g.lock); job_release(j); pthread_mutex_unlock(&g.lock);
    return ok;
}

static enum MHD_Result tokenize(struct MHD_Connection *conn, const upload *cx) {
    cJSON *o = cJSON_ParseWithLength(cx->body ? cx->body : "", cx->len);
    cJSON *p = o ? cJSON_GetObjectItemCaseSensitive(o, "prompt") : NULL;
    if (!p) p = o ? cJSON_GetObjectItemCaseSensitive(o, "content") : NULL;
    if (!o || !cJSON_IsString(p)) { cJSON_Delete(o); return send_error(conn, 400, "prompt", NULL, "the body must be {\"prompt\": \"text\"}"); }
    size_t len = strlen(p->valuestring);
    int n = gpt2_encode(g.tok, p->valuestring, len, NULL, 0);
    int *ids = (int *)malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    if (n < 0 || !ids) { cJSON_Delete(o); free(ids); return send_error(conn, 400, "prompt", NULL, "the prompt cannot be encoded"); }
    gpt2_encode(g.tok, p->valuestring, len, ids, n);
    cJSON_Delete(o);
    cJSON *r = cJSON_CreateObject();
    cJSON_AddItemToObject(r, "tokens", cJSON_CreateIntArray(ids, n));
    free(ids);
    return send_json(conn, 200, r);
}

static enum MHD_Result detokenize(struct MHD_Connection *conn, const upload *cx) {
    cJSON *o = cJSON_ParseWithLength(cx->body ? cx->body : "", cx->len);
    cJSON *t = o ? cJSON_GetObjectItemCaseSensitive(o, "tokens") : NULL;
    if (!o || !cJSON_IsArray(t)) { cJSON_Delete(o); return send_error(conn, 400, "tokens", NULL, "the body must be {\"tokens\": [ids]}"); }
    int n = cJSON_GetArraySize(t), i = 0;
    int *ids = (int *)malloc((size_t)(n ? n : 1) * sizeof(int));
    for (cJSON *x = t->child; ids && x; x = x->next, i++) {
        if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < 0 || x->valuedouble >= g.V) {
            cJSON_Delete(o); free(ids);
            return send_error(conn, 400, "tokens", NULL, "tokens[%d] is not a token id (0..%d)", i, g.V - 1);
        }
        ids[i] = (int)x->valuedouble;
    }
    cJSON_Delete(o);
    size_t len;
    char *s = ids ? decode_all(ids, n, &len) : NULL;
    free(ids);
    if (!s) return send_error(conn, 503, NULL, NULL, "out of memory");
    cJSON *r = cJSON_CreateObject();
    add_clean(r, "prompt", s, len);
    free(s);
    return send_json(conn, 200, r);
}

static enum MHD_Result metrics(struct MHD_Connection *conn) {
    int queued, in_flight;
    gpt2_engine_counts(g.e, &queued, &in_flight);
    char *b = (char *)malloc(4096);
    if (!b) return MHD_NO;
    pthread_mutex_lock(&g.lock);
    int n = snprintf(b, 4096,
        "# HELP gpt2_requests_total HTTP requests answered, by status\n# TYPE gpt2_requests_total counter\n");
    for (int i = 0; i < 6; i++)
        n += snprintf(b + n, 4096 - (size_t)n, "gpt2_requests_total{code=\"%d\"} %llu\n", g_codes[i], g.req_by_code[i]);
    n += snprintf(b + n, 4096 - (size_t)n,
        "# HELP gpt2_tokens_generated_total tokens generated\n# TYPE gpt2_tokens_generated_total counter\n"
        "gpt2_tokens_generated_total %llu\n"
        "# HELP gpt2_prompt_tokens_total prompt tokens submitted\n# TYPE gpt2_prompt_tokens_total counter\n"
        "gpt2_prompt_tokens_total %llu\n"
        "# HELP gpt2_requests_cancelled_total requests cancelled (client gone, shutdown)\n# TYPE gpt2_requests_cancelled_total counter\n"
        "gpt2_requests_cancelled_total %llu\n"
        "# HELP gpt2_queue_depth requests waiting for a slot\n# TYPE gpt2_queue_depth gauge\ngpt2_queue_depth %d\n"
        "# HELP gpt2_requests_in_flight requests in slots\n# TYPE gpt2_requests_in_flight gauge\ngpt2_requests_in_flight %d\n"
        "# HELP gpt2_step_seconds engine steps\n# TYPE gpt2_step_seconds summary\n"
        "gpt2_step_seconds_sum %.6f\ngpt2_step_seconds_count %llu\n"
        "# HELP gpt2_step_seconds_last the last step's time\n# TYPE gpt2_step_seconds_last gauge\ngpt2_step_seconds_last %.6f\n",
        g.tokens_total, g.prompt_tokens_total, g.cancelled, queued, in_flight, g.step_seconds, g.steps, g.step_last);
    pthread_mutex_unlock(&g.lock);
    return send_body(conn, 200, "text/plain; version=0.0.4", b, NULL);
}

static enum MHD_Result models(struct MHD_Connection *conn, const char *url) {
    if (strcmp(url, "/v1/models") && strcmp(url + strlen("/v1/models/"), g.model_id))
        return send_error(conn, 404, "model", "model_not_found", "the model does not exist (this server serves '%s')", g.model_id);
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", g.model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", 0);
    cJSON_AddStringToObject(m, "owned_by", "gpt2.cuh");
    if (strcmp(url, "/v1/models")) return send_json(conn, 200, m);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *d = cJSON_AddArrayToObject(o, "data");
    cJSON_AddItemToArray(d, m);
    return send_json(conn, 200, o);
}

static int authorized(struct MHD_Connection *conn) {
    if (!g.api_key) return 1;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7)) return 0;
    h += 7;
    size_t a = strlen(h), b = strlen(g.api_key);
    unsigned d = a != b;
    for (size_t i = 0; i < a && i < b; i++) d |= (unsigned)(h[i] ^ g.api_key[i]);
    return d == 0;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                              const char *version, const char *data, size_t *upload_size, void **con_cls) {
    (void)cls; (void)version;
    upload *cx = (upload *)*con_cls;
    if (!cx) {
        cx = (upload *)calloc(1, sizeof *cx);
        if (!cx) return MHD_NO;
        *con_cls = cx;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!cx->too_big && cx->len + *upload_size > g.max_body) { cx->too_big = 1; free(cx->body); cx->body = NULL; }
        if (!cx->too_big) {
            if (cx->len + *upload_size + 1 > cx->cap) {
                size_t cap = (cx->len + *upload_size + 1) * 2;
                char *b = (char *)realloc(cx->body, cap);
                if (!b) return MHD_NO;
                cx->body = b; cx->cap = cap;
            }
            memcpy(cx->body + cx->len, data, *upload_size);
            cx->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    const int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (get && !strcmp(url, "/health")) {
        pthread_mutex_lock(&g.lock);
        int ok = !g.failed;
        pthread_mutex_unlock(&g.lock);
        return send_body(conn, ok ? 200 : 503, "application/json", strdup(ok ? "{\"status\":\"ok\"}" : "{\"status\":\"failed\"}"), NULL);
    }
    if (get && !strcmp(url, "/metrics")) return metrics(conn);
    if (cx->too_big) return send_error(conn, 413, NULL, "request_too_large", "the request body is over %zu bytes", g.max_body);
    const int known = !strcmp(url, "/v1/completions") || !strcmp(url, "/tokenize") || !strcmp(url, "/detokenize")
                   || !strncmp(url, "/v1/models", 10);
    if (known && !authorized(conn))
        return send_error(conn, 401, NULL, "invalid_api_key", "a missing or wrong API key (send Authorization: Bearer KEY)");
    if (post && !strcmp(url, "/v1/completions")) return completions(conn, cx);
    if (post && !strcmp(url, "/tokenize")) return tokenize(conn, cx);
    if (post && !strcmp(url, "/detokenize")) return detokenize(conn, cx);
    if (get && (!strcmp(url, "/v1/models") || !strncmp(url, "/v1/models/", 11))) return models(conn, url);
    return send_error(conn, 404, NULL, "not_found", "no route %s %s", method, url);
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls; (void)conn; (void)toe;
    upload *cx = (upload *)*con_cls;
    if (cx) { free(cx->body); free(cx); }
    *con_cls = NULL;
}

/* ==== main ===================================================================================================== */

static void usage(void) {
    fprintf(stderr,
        "usage: server [-m DIR] [--host ADDR] [--port N] [--api-key KEY] [--backend cpu|cuda] [--dtype f32|f16|bf16]\n"
        "              [--max-batch N] [--max-queue N] [--max-body BYTES] [--score-slots N] [--step-tokens N]\n"
        "An OpenAI-compatible completions server (POST /v1/completions, GET /v1/models, GET /health,\n"
        "POST /tokenize, POST /detokenize, GET /metrics).\n"
        "  -m DIR           model directory (default: weights, the embedded model); its name is the model's id\n"
        "  --host ADDR      address to listen on (default 127.0.0.1)\n"
        "  --port N         port (default 8080)\n"
        "  --api-key KEY    require Authorization: Bearer KEY (not on /health and /metrics)\n"
        "  --backend B      cpu or cuda (default: cuda when a usable GPU is present)\n"
        "  --dtype D        f32, f16 or bf16 (default: f16 on cuda, f32 on cpu)\n"
        "  --max-batch N    requests in flight at once (default: the engine's)\n"
        "  --max-queue N    requests waiting beyond those before 503 (default 1024)\n"
        "  --max-body N     largest request body in bytes before 413 (default 1048576)\n"
        "  --score-slots N  score (echo with logprobs) on an instance of the model of its own, N sequences at once:\n"
        "                   scoring then never waits for generation, nor generation for it, for a second copy of\n"
        "                   the weights in memory (default 0: scoring runs on the engine's model when it is idle)\n"
        "  --step-tokens N  prompt tokens one engine step may take, 1..262144 (default: the engine's, 4096 on cuda);\n"
        "                   on cuda more makes long prompts and scoring faster for more GPU memory, never other text\n");
}

int main(int argc, char **argv) {
    const char *dir = "weights", *host = "127.0.0.1";
    int port = 8080, score_slots = 0;
    gpt2_options opt = gpt2_default_options();
    g.max_queue = 1024; g.max_body = 1 << 20;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(); return 0; }
        if (!v) { fprintf(stderr, "server: %s needs a value (or is unknown)\n", a); usage(); return 2; }
        i++;
        if (!strcmp(a, "-m")) dir = v;
        else if (!strcmp(a, "--host")) host = v;
        else if (!strcmp(a, "--port")) port = atoi(v);
        else if (!strcmp(a, "--api-key")) g.api_key = v;
        else if (!strcmp(a, "--max-batch")) opt.max_batch = atoi(v);
        else if (!strcmp(a, "--max-queue")) g.max_queue = atoi(v);
        else if (!strcmp(a, "--max-body")) g.max_body = (size_t)atol(v);
        else if (!strcmp(a, "--score-slots")) score_slots = atoi(v);
        else if (!strcmp(a, "--step-tokens")) {
            opt.step_tokens = atoi(v);
            if (opt.step_tokens < 1) { fprintf(stderr, "server: --step-tokens %s: 1..262144\n", v); return 2; }
        }
        else if (!strcmp(a, "--backend")) {
            if (!strcmp(v, "cpu")) opt.backend = GPT2_BACKEND_CPU;
            else if (!strcmp(v, "cuda")) opt.backend = GPT2_BACKEND_CUDA;
            else { fprintf(stderr, "server: --backend %s: cpu or cuda\n", v); return 2; }
        } else if (!strcmp(a, "--dtype")) {
            if (!strcmp(v, "f32")) opt.dtype = GPT2_DTYPE_F32;
            else if (!strcmp(v, "f16")) opt.dtype = GPT2_DTYPE_F16;
            else if (!strcmp(v, "bf16")) opt.dtype = GPT2_DTYPE_BF16;
            else { fprintf(stderr, "server: --dtype %s: f32, f16 or bf16\n", v); return 2; }
        } else { fprintf(stderr, "server: unknown option %s\n", a); usage(); return 2; }
    }
    if (port < 0 || port > 65535 || opt.max_batch < 0 || g.max_queue < 0 || g.max_body < 1 || score_slots < 0) {
        fprintf(stderr, "server: a bad --port, --max-batch, --max-queue, --max-body or --score-slots\n");
        return 2;
    }
    /* the model's id: the directory's name */
    char path[sizeof g.model_id];
    snprintf(path, sizeof path, "%s", dir);
    size_t pl = strlen(path);
    while (pl > 1 && path[pl - 1] == '/') path[--pl] = 0;
    const char *base = strrchr(path, '/');
    snprintf(g.model_id, sizeof g.model_id, "%s", base ? base + 1 : path);

    /* SIGINT and SIGTERM wait for sigwait below; every thread made from here on inherits the mask */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (gpt2_load(&g.m, dir, &opt) != GPT2_OK || gpt2_tokenizer_load(&g.tok, dir) != GPT2_OK) {
        fprintf(stderr, "server: %s\n", gpt2_last_error());
        return 1;
    }
    if (score_slots > 0) { /* the same weights, backend, dtype and context in an instance for scoring alone */
        gpt2_options so = opt;
        so.backend = gpt2_model_backend(g.m); so.dtype = gpt2_model_dtype(g.m);
        so.max_batch = score_slots; so.max_seq = gpt2_model_max_seq(g.m);
        if (gpt2_load(&g.sm, dir, &so) != GPT2_OK) { fprintf(stderr, "server: --score-slots: %s\n", gpt2_last_error()); return 1; }
        pthread_mutex_init(&g.score_lock, NULL);
    }
    g.V = gpt2_model_config(g.m).n_vocab;
    g.max_seq = gpt2_model_max_seq(g.m);
    g.eos = gpt2_token_id(g.tok, "<|endoftext|>", 13);
    if (g.eos >= g.V) g.eos = -1;
    pthread_mutex_init(&g.lock, NULL);
    pthread_cond_init(&g.work, NULL);
    pthread_cond_init(&g.scored, NULL);
    gpt2_engine_callbacks cb = {on_token, on_end, NULL};
    if (gpt2_engine_create(&g.e, g.m, &cb) != GPT2_OK) { fprintf(stderr, "server: %s\n", gpt2_last_error()); return 1; }
    pthread_t stepper;
    if (pthread_create(&stepper, NULL, step_main, NULL)) { fprintf(stderr, "server: cannot start the stepping thread\n"); return 1; }

    struct sockaddr_in sa4;
    struct sockaddr_in6 sa6;
    struct sockaddr *sa;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC;
    memset(&sa4, 0, sizeof sa4);
    memset(&sa6, 0, sizeof sa6);
    if (inet_pton(AF_INET, host, &sa4.sin_addr) == 1) {
        sa4.sin_family = AF_INET; sa4.sin_port = htons((uint16_t)port); sa = (struct sockaddr *)&sa4;
    } else if (inet_pton(AF_INET6, host, &sa6.sin6_addr) == 1) {
        sa6.sin6_family = AF_INET6; sa6.sin6_port = htons((uint16_t)port); sa = (struct sockaddr *)&sa6;
        flags |= MHD_USE_IPv6;
    } else { fprintf(stderr, "server: --host %s is not an IPv4 or IPv6 address\n", host); return 2; }
    struct MHD_Daemon *d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, handle, NULL,
                                            MHD_OPTION_SOCK_ADDR, sa,
                                            MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
                                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)4096,
                                            MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
                                            MHD_OPTION_END);
    if (!d) { fprintf(stderr, "server: cannot listen on %s:%d: %s\n", host, port, strerror(errno)); return 1; }
    fprintf(stderr, "server: model '%s' (%s, %s, max batch %d%s) on http://%s:%d\n", g.model_id,
            gpt2_model_backend(g.m) == GPT2_BACKEND_CUDA ? "cuda" : "cpu",
            gpt2_model_dtype(g.m) == GPT2_DTYPE_F16 ? "f16" : gpt2_model_dtype(g.m) == GPT2_DTYPE_BF16 ? "bf16" : "f32",
            gpt2_model_max_batch(g.m), g.sm ? ", scoring on an instance of its own" : "", host, port);

    int sig = 0;
    sigwait(&sigs, &sig);
    /* stop accepting; cancel what is queued or in flight (streams end with their finish_reason and [DONE]) */
    fprintf(stderr, "server: signal %d: stopping\n", sig);
    MHD_socket lfd = MHD_quiesce_daemon(d);
    if (lfd != MHD_INVALID_SOCKET) close(lfd);
    pthread_mutex_lock(&g.lock);
    g.stopping = 1;
    for (int h = 0; h < HASH; h++)
        for (choice *c = g.hash[h]; c; c = c->hnext) gpt2_engine_cancel(g.e, c->id);
    g.quit = 1;
    pthread_cond_signal(&g.work);
    pthread_cond_broadcast(&g.scored);
    pthread_mutex_unlock(&g.lock);
    pthread_join(stepper, NULL);
    MHD_stop_daemon(d);
    gpt2_engine_free(g.e);
    gpt2_tokenizer_free(g.tok);
    gpt2_free(g.m);
    if (g.sm) gpt2_free(g.sm);
    return 0;
}
