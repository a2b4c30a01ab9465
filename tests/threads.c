/* tests/threads.c — the threading promise, built by make test under ThreadSanitizer (no OpenMP: GCC's libgomp is
   not instrumented, so TSan would report its barriers as races).

   What it checks, each thread with its own model (the embedded one in weights/ and a fixture):
   - separate models run on separate threads at once: every thread's generated tokens and gpt2_score sums
     are bit-identical to the same work done alone before the threads start;
   - one tokenizer is shared read-only by every thread (encode and decode at once give the serial results);
   - the last error is per thread: a thread's failure never shows in another thread's gpt2_last_error();
   - an engine (gpt2_engine_*) takes requests and a cancel from another thread while this one steps it.
   ThreadSanitizer reports any data race and makes the run fail (exitcode 66). Plain C, public API only.

   Usage: tests/threads [threads]   (from the repository root; default 4 threads) */
#define GPT2_IMPLEMENTATION
#define GPT2_NO_CUDA
#include "gpt2.cuh"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 16
#define NEW_TOKENS 12
#define SCORED 24

static const char *const model_dirs[2] = {"weights", "tests/models/f32_bare_buffers"};
static const char *const texts[4] = {"ROMEO:\nBut soft, what light", "First Citizen:\nWe are accounted poor",
                                     "KING RICHARD III:\nNow is the winter", "JULIET:\nO Romeo, Romeo! wherefore"};

/* One thread's work and what it found. */
typedef struct job {
    int index;
    const gpt2_tokenizer *tok;   /* shared by every thread, read only */
    int gen[NEW_TOKENS], n_gen;  /* generated tokens */
    double score;                /* gpt2_score's sum of log-probabilities of SCORED tokens */
    int ids[256], n_ids;         /* the shared tokenizer's encoding of texts[index % 4] */
    char text[1024];             /* and its decoding */
    char error[GPT2_MAX_ERROR + 128];
} job;

static pthread_barrier_t errors_set;

/* Loads model_dirs[index % 2] and generates + scores with it; fills what it found or an error. */
static int job_model_work(job *jb) {
    const char *dir = model_dirs[jb->index % 2];
    gpt2_options o = gpt2_default_options();
    o.backend = GPT2_BACKEND_CPU;
    o.max_batch = 2;
    gpt2_model *m;
    if (gpt2_load(&m, dir, &o)) return snprintf(jb->error, sizeof jb->error, "%s: %s", dir, gpt2_last_error()), 1;
    gpt2_config c = gpt2_model_config(m);
    int prompt[8], seq[SCORED + 1];
    for (int i = 0; i < 8; i++) prompt[i] = (jb->index * 7919 + i * 104729) % c.n_vocab;
    for (int i = 0; i <= SCORED; i++) seq[i] = (jb->index * 31 + i * 7877) % c.n_vocab;
    gpt2_request r;
    memset(&r, 0, sizeof r);
    r.prompt = prompt; r.prompt_len = 8; r.max_new_tokens = NEW_TOKENS; r.stop_token = -1; r.out = jb->gen;
    r.sampling.temperature = 0.9f; r.sampling.top_k = 20; r.sampling.seed = 1000 + (uint64_t)jb->index;
    float lp[SCORED];
    gpt2_score_request sr;
    memset(&sr, 0, sizeof sr);
    sr.tokens = seq; sr.n_tokens = SCORED + 1; sr.n_context = 1; sr.logprobs = lp;
    int fail = gpt2_generate(m, &r, 1, NULL, NULL) || gpt2_score(m, &sr, 1);
    if (fail) snprintf(jb->error, sizeof jb->error, "%s: %s", dir, gpt2_last_error());
    jb->n_gen = r.n_out;
    jb->score = sr.sum_logprob;
    gpt2_free(m);
    return fail;
}

static void job_tokenizer_work(job *jb) {
    const char *t = texts[jb->index % 4];
    jb->n_ids = gpt2_encode(jb->tok, t, strlen(t), jb->ids, 256);
    gpt2_decode(jb->tok, jb->ids, jb->n_ids > 0 && jb->n_ids <= 256 ? jb->n_ids : 0, jb->text, sizeof jb->text);
}

/* The threaded run: even threads fail one call with a message naming them, odd threads never fail; after every
   thread has set its error, each reads its own. Then the model and tokenizer work. */
static void *job_thread(void *arg) {
    job *jb = (job *)arg;
    char name[64];
    gpt2_model *m;
    snprintf(name, sizeof name, "tests/no_such_model_of_thread_%d", jb->index);
    if (jb->index % 2 == 0) gpt2_load(&m, name, NULL);
    pthread_barrier_wait(&errors_set);
    const char *e = gpt2_last_error();
    if (jb->index % 2 == 0 && !strstr(e, name))
        snprintf(jb->error, sizeof jb->error, "thread %d: last error \"%s\" is not its own failure", jb->index, e);
    else if (jb->index % 2 == 1 && *e)
        snprintf(jb->error, sizeof jb->error, "thread %d never failed, yet its last error reads \"%s\"", jb->index, e);
    pthread_barrier_wait(&errors_set);
    if (jb->error[0]) return NULL;
    job_tokenizer_work(jb);
    job_model_work(jb);
    return NULL;
}

/* The engine across threads: this thread steps it while another submits requests and cancels the last one. */
typedef struct submitter { gpt2_engine *e; gpt2_request *r; int n; pthread_mutex_t lock; int done; } submitter;
static void *submit_thread(void *arg) {
    submitter *s = (submitter *)arg;
    long long last = -1;
    for (int i = 0; i < s->n; i++) last = gpt2_engine_submit(s->e, &s->r[i]);
    gpt2_engine_cancel(s->e, last);
    pthread_mutex_lock(&s->lock);
    s->done = 1;
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static int engine_across_threads(void) {
    enum { N = 6, NEW = 16 };
    gpt2_options o = gpt2_default_options();
    o.backend = GPT2_BACKEND_CPU;
    o.max_batch = 3;
    gpt2_model *m;
    if (gpt2_load(&m, "weights", &o)) return printf("FAIL engine: %s\n", gpt2_last_error()), 1;
    static int prompt[N][4], want[N][NEW], got[N][NEW];
    gpt2_request a[N], b[N];
    for (int i = 0; i < N; i++) {
        for (int t = 0; t < 4; t++) prompt[i][t] = 100 + 17 * i + t;
        memset(&a[i], 0, sizeof a[i]);
        a[i].prompt = prompt[i]; a[i].prompt_len = 4; a[i].max_new_tokens = NEW; a[i].stop_token = -1;
        a[i].sampling.temperature = 0.8f; a[i].sampling.seed = (uint64_t)i;
        b[i] = a[i];
        a[i].out = want[i]; b[i].out = got[i];
    }
    if (gpt2_generate(m, a, N, NULL, NULL)) return printf("FAIL engine: %s\n", gpt2_last_error()), 1;
    gpt2_engine *e;
    if (gpt2_engine_create(&e, m, NULL)) return printf("FAIL engine: %s\n", gpt2_last_error()), 1;
    submitter sub = {e, b, N, PTHREAD_MUTEX_INITIALIZER, 0};
    pthread_t th;
    pthread_create(&th, NULL, submit_thread, &sub);
    int busy = 1, done = 0, bad = 0;
    while (!done || busy) {
        if (gpt2_engine_step(e, &busy)) { printf("FAIL engine step: %s\n", gpt2_last_error()); bad = 1; break; }
        pthread_mutex_lock(&sub.lock);
        done = sub.done;
        pthread_mutex_unlock(&sub.lock);
    }
    pthread_join(th, NULL);
    gpt2_engine_free(e);
    gpt2_free(m);
    for (int i = 0; i < N && !bad; i++) {
        const int full = i < N - 1; /* the last one was cancelled: whatever it made is a prefix of its own tokens */
        if ((full && b[i].n_out != NEW) || memcmp(got[i], want[i], sizeof(int) * (size_t)b[i].n_out)) {
            printf("FAIL engine: request %d, submitted from another thread, made %d tokens differing from its own\n", i, b[i].n_out);
            bad = 1;
        }
    }
    if (!bad) printf("threads: an engine stepped here while another thread submitted %d requests and cancelled one: their own tokens\n", N);
    return bad;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 4, failed = 0;
    if (n < 2 || n > MAX_THREADS) return fprintf(stderr, "threads: 2..%d\n", MAX_THREADS), 2;
    gpt2_tokenizer *tok;
    if (gpt2_tokenizer_load(&tok, "weights")) return fprintf(stderr, "weights: %s\n", gpt2_last_error()), 1;
    static job want[MAX_THREADS], got[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    for (int i = 0; i < n; i++) { /* alone, one after another */
        want[i].index = got[i].index = i;
        want[i].tok = got[i].tok = tok;
        job_tokenizer_work(&want[i]);
        if (job_model_work(&want[i])) return fprintf(stderr, "serial run: %s\n", want[i].error), 1;
    }
    pthread_barrier_init(&errors_set, NULL, (unsigned)n);
    for (int i = 0; i < n; i++)
        if (pthread_create(&th[i], NULL, job_thread, &got[i])) return fprintf(stderr, "pthread_create failed\n"), 1;
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&errors_set);
    for (int i = 0; i < n; i++) {
        const job *a = &want[i], *b = &got[i];
        int bad = 1;
        if (b->error[0]) printf("FAIL thread %d: %s\n", i, b->error);
        else if (b->n_gen != a->n_gen || memcmp(b->gen, a->gen, sizeof(int) * (size_t)a->n_gen))
            printf("FAIL thread %d (%s): generated tokens differ from the same request run alone\n", i, model_dirs[i % 2]);
        else if (memcmp(&b->score, &a->score, sizeof a->score))
            printf("FAIL thread %d (%s): score %.17g, alone %.17g\n", i, model_dirs[i % 2], b->score, a->score);
        else if (b->n_ids != a->n_ids || memcmp(b->ids, a->ids, sizeof(int) * (size_t)(a->n_ids > 0 ? a->n_ids : 0)) ||
                 strcmp(b->text, a->text))
            printf("FAIL thread %d: the shared tokenizer gave other ids or text than alone\n", i);
        else bad = 0;
        failed += bad;
    }
    gpt2_tokenizer_free(tok);
    printf("threads: %d threads, each its own model (%s, %s), one shared tokenizer: %s\n", n, model_dirs[0], model_dirs[1],
           failed ? "FAILED" : "same results as alone, last errors per thread");
    failed += engine_across_threads();
    return failed ? 1 : 0;
}
