/* demo — text generation from the command line with gpt2.cuh.

   ./demo "To be, or not to be"               stream a continuation from the embedded model (weights/)
   ./demo --batch 4 -n 64 "ROMEO:"            four samples in parallel, printed one after another
   ./demo --batch-file prompts.txt -o out.jsonl   many prompts (or JSON Lines with parameters) -> JSON Lines
   ./demo --score FILE                        the text's token count, mean log-probability and perplexity
   ./demo --batch-file texts.jsonl --score    many texts ({"text": ...} per line) scored -> JSON Lines
   mpirun -np 2 ./demo_mpi --batch 1024 ...   the same, sharded across MPI ranks (built with -DGPT2_DEMO_MPI)
   ./demo -h                                  every option

   Plain C as well as CUDA C++: built by nvcc when present (CUDA + CPU backends), else by cc (CPU only). */
#define GPT2_IMPLEMENTATION
#include "gpt2.cuh"
#ifdef GPT2_DEMO_MPI
#define GPT2_MPI_IMPLEMENTATION
#include "gpt2_mpi.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>
#if defined(__CUDACC__) && !defined(GPT2_NO_CUDA)
#include <cuda_runtime.h>
#define DEMO_CUDA 1
#else
#define DEMO_CUDA 0
#endif

#define DEMO_EOS 50256 /* <|endoftext|>: GPT-2's end of text, and the start when there is no prompt */

/* ---------------------------------------------------------------- options */

static const char demo_usage[] =
    "usage: demo [options] [prompt...]\n"
    "Generates text with a GPT-2 model, printing the tokens as they are made.\n"
    "\n"
    "  -m DIR                model directory: config.json, model.safetensors, vocab.json, merges.txt\n"
    "                        (default: weights, the embedded model)\n"
    "  -n N                  new tokens per sample (default 128)\n"
    "  --temperature T       sampling temperature; 0: greedy (default 0.8)\n"
    "  --top-k K             sample among the K most likely tokens; 0: all (default 40)\n"
    "  --top-p P             nucleus: among the most likely tokens holding probability P; 1: off (default 1)\n"
    "  --seed S              random seed; sample i uses S + i (default 1337)\n"
    "  --batch N             N samples of the prompt, generated in parallel, printed one after another\n"
    "  --stop-at-eos         end a sample at <|endoftext|>\n"
    "  -f FILE               read the prompt from FILE (\"-\": standard input); one final newline is dropped\n"
    "  --batch-file FILE     one prompt per line (blank lines skipped), or JSON Lines: {\"prompt\": \"...\"} with\n"
    "                        optional \"max_new_tokens\", \"temperature\", \"top_k\", \"top_p\", \"seed\", \"stop_at_eos\";\n"
    "                        writes one JSON line per prompt, in order:\n"
    "                        {\"index\", \"prompt\", \"text\", \"tokens\", \"finish_reason\": \"stop\" | \"length\"}\n"
    "  -o FILE               with --batch-file: write the results to FILE (default: standard output)\n"
    "  --backend cpu|cuda    default: cuda when a usable GPU is present, else cpu\n"
    "  --dtype f32|f16|bf16  default: f16 on cuda, f32 on cpu\n"
    "  --spec K              speculation: at most K draft tokens (prompt lookup) a request verifies in a step;\n"
    "                        0: off (default 8; the text is the same either way, only the speed changes)\n"
    "  --stats               print backend, dtype, device, tokens/s (prefill, decode) and drafts kept on stderr\n"
    "  --score FILE          score FILE (\"-\": standard input) instead of generating: prints its token count, the\n"
    "                        mean log-probability of its tokens after the first, and the perplexity. A text longer\n"
    "                        than the model's context is read in windows of that length, each token scored once\n"
    "                        (Hugging Face's perplexity-of-fixed-length-models recipe). With --batch-file, --score\n"
    "                        takes no FILE: each line is {\"text\": \"...\"}, and each result a JSON line\n"
    "                        {\"index\", \"tokens\", \"sum_logprob\", \"perplexity\"} (perplexity null when nothing\n"
    "                        was scored: an empty text, or one token without --prepend-eos)\n"
    "  --stride N            with --score: windows start every N tokens (default: half the context)\n"
    "  --prepend-eos         with --score: put <|endoftext|> before each text, so its first token is scored too\n"
    "                        (as Hugging Face tools that score from the start of a document do)\n"
    "  --logprobs            with --score: also every scored token's id, log-probability and rank (0: the most\n"
    "                        likely token), as \"ids\", \"logprobs\", \"ranks\" (JSON) or one line per token\n"
    "  -h, --help            this text\n"
    "\n"
    "With no prompt, generation starts from <|endoftext|>. Samples and batch-file prompts get seeds S, S+1, ...\n"
    "Words after -- are prompt even when they start with '-'.\n"
#ifdef GPT2_DEMO_MPI
    "demo_mpi: run under mpirun; rank 0 reads the model, prompts and tokenizer, the requests are shared\n"
    "out across the ranks (one GPU each), and rank 0 prints every result, in order, at the end.\n"
#endif
    ;

typedef struct demo_args {
    const char *model_dir;
    int n_new;
    gpt2_sampling sampling;
    int batch;
    int stop_at_eos;
    gpt2_backend backend;
    gpt2_dtype dtype;
    const char *prompt_file, *batch_file, *out_file;
    int stats, help;
    int spec;                /* --spec K, or -1: the engine's default */
    int score;               /* --score: score texts instead of generating */
    const char *score_file;  /* --score FILE (NULL with --batch-file) */
    int stride, prepend_eos, logprobs;
    char *prompt;            /* the positional words joined by spaces, or NULL */
} demo_args;

/* The one line a usage error prints, kept until main prints it. */
static char demo_error[1024];

static int demo_fail(const char *fmt, ...) GPT2__PRINTF(1, 2);
static int demo_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(demo_error, sizeof demo_error, fmt, ap);
    va_end(ap);
    return 0;
}

static int demo_parse_long(const char *opt, const char *s, long lo, long hi, long *v) {
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (!*s || *end || errno || x < lo || x > hi)
        return demo_fail("%s expects a whole number in %ld..%ld, got \"%s\"", opt, lo, hi, s);
    *v = x;
    return 1;
}

static int demo_parse_float(const char *opt, const char *s, double lo, double hi, float *v) {
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (!*s || *end || errno || !(x >= lo && x <= hi)) return demo_fail("%s expects a number in %g..%g, got \"%s\"", opt, lo, hi, s);
    *v = (float)x;
    return 1;
}

/* Reads argv into a; 1 when it is usable, else 0 with demo_error set. Touches no file. */
static int demo_parse_args(int argc, char **argv, demo_args *a) {
    memset(a, 0, sizeof *a);
    a->model_dir = "weights";
    a->n_new = 128;
    a->sampling.temperature = 0.8f;
    a->sampling.top_k = 40;
    a->sampling.top_p = 1.0f;
    a->sampling.seed = 1337;
    a->batch = 1;
    a->spec = -1;
    size_t prompt_len = 0;
    int only_words = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val = NULL;
        char name[64];
        if (only_words || arg[0] != '-' || !arg[1]) {
            size_t n = strlen(arg);
            char *p = (char *)realloc(a->prompt, prompt_len + n + 2);
            if (!p) return demo_fail("out of memory");
            a->prompt = p;
            if (prompt_len) p[prompt_len++] = ' ';
            memcpy(p + prompt_len, arg, n + 1);
            prompt_len += n;
            continue;
        }
        if (!strcmp(arg, "--")) { only_words = 1; continue; }
        /* --name=value or --name value */
        snprintf(name, sizeof name, "%s", arg);
        char *eq = strchr(name, '=');
        if (eq && !strncmp(arg, "--", 2)) { *eq = 0; val = arg + (eq - name) + 1; }
        int flag = !strcmp(name, "-h") || !strcmp(name, "--help") || !strcmp(name, "--stop-at-eos") || !strcmp(name, "--stats") ||
                   !strcmp(name, "--prepend-eos") || !strcmp(name, "--logprobs");
        if (!strcmp(name, "--score")) { /* --score FILE, or a flag before another option or at the end (--batch-file) */
            a->score = 1;
            if (!val && i + 1 < argc && (argv[i + 1][0] != '-' || !strcmp(argv[i + 1], "-"))) val = argv[++i];
            a->score_file = val;
            continue;
        }
        if (flag) {
            if (val) return demo_fail("%s takes no value", name);
            if (!strcmp(name, "-h") || !strcmp(name, "--help")) a->help = 1;
            else if (!strcmp(name, "--stats")) a->stats = 1;
            else if (!strcmp(name, "--prepend-eos")) a->prepend_eos = 1;
            else if (!strcmp(name, "--logprobs")) a->logprobs = 1;
            else a->stop_at_eos = 1;
            continue;
        }
        static const char *const valued[] = {"-m", "-n", "-f", "-o", "--temperature", "--top-k", "--top-p", "--seed",
                                             "--batch", "--backend", "--dtype", "--batch-file", "--spec", "--stride"};
        int known = 0;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++) known |= !strcmp(name, valued[k]);
        if (!known) return demo_fail("unknown option %s (see demo -h)", name);
        if (!val) {
            if (i + 1 >= argc) return demo_fail("%s needs a value (see demo -h)", name);
            val = argv[++i];
        }
        long v;
        if (!strcmp(name, "-m")) a->model_dir = val;
        else if (!strcmp(name, "-f")) a->prompt_file = val;
        else if (!strcmp(name, "-o")) a->out_file = val;
        else if (!strcmp(name, "--batch-file")) a->batch_file = val;
        else if (!strcmp(name, "-n")) { if (!demo_parse_long(name, val, 0, 1 << 20, &v)) return 0; a->n_new = (int)v; }
        else if (!strcmp(name, "--batch")) { if (!demo_parse_long(name, val, 1, 1 << 20, &v)) return 0; a->batch = (int)v; }
        else if (!strcmp(name, "--spec")) { if (!demo_parse_long(name, val, 0, 1024, &v)) return 0; a->spec = (int)v; }
        else if (!strcmp(name, "--stride")) { if (!demo_parse_long(name, val, 1, 1 << 20, &v)) return 0; a->stride = (int)v; }
        else if (!strcmp(name, "--top-k")) { if (!demo_parse_long(name, val, 0, 1 << 24, &v)) return 0; a->sampling.top_k = (int)v; }
        else if (!strcmp(name, "--temperature")) { if (!demo_parse_float(name, val, 0.0, 100.0, &a->sampling.temperature)) return 0; }
        else if (!strcmp(name, "--top-p")) { if (!demo_parse_float(name, val, 0.0, 1.0, &a->sampling.top_p)) return 0; }
        else if (!strcmp(name, "--seed")) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(val, &end, 10);
            if (!*val || *end || errno || val[0] == '-') return demo_fail("--seed expects a whole number >= 0, got \"%s\"", val);
            a->sampling.seed = (uint64_t)s;
        } else if (!strcmp(name, "--backend")) {
            if (!strcmp(val, "cpu")) a->backend = GPT2_BACKEND_CPU;
            else if (!strcmp(val, "cuda")) a->backend = GPT2_BACKEND_CUDA;
            else return demo_fail("--backend expects cpu or cuda, got \"%s\"", val);
        } else if (!strcmp(name, "--dtype")) {
            if (!strcmp(val, "f32")) a->dtype = GPT2_DTYPE_F32;
            else if (!strcmp(val, "f16")) a->dtype = GPT2_DTYPE_F16;
            else if (!strcmp(val, "bf16")) a->dtype = GPT2_DTYPE_BF16;
            else return demo_fail("--dtype expects f32, f16 or bf16, got \"%s\"", val);
        }
    }
    if (a->help) return 1;
    if (a->prompt && a->prompt_file) return demo_fail("give the prompt as words or with -f, not both");
    if (a->batch_file && (a->prompt || a->prompt_file)) return demo_fail("--batch-file takes its prompts from the file: give no prompt and no -f");
    if (a->batch_file && a->batch > 1) return demo_fail("--batch and --batch-file do not go together (each line of the file is a request)");
    if (a->out_file && !a->batch_file) return demo_fail("-o is for --batch-file results (generated text goes to standard output)");
    if ((a->stride || a->prepend_eos || a->logprobs) && !a->score) return demo_fail("--stride, --prepend-eos and --logprobs go with --score");
    if (a->score && !a->batch_file && !a->score_file) return demo_fail("--score needs a FILE (\"-\": standard input), or --batch-file");
    if (a->score && a->batch_file && a->score_file) return demo_fail("--score FILE and --batch-file do not go together (with --batch-file, give --score alone)");
    if (a->score && (a->prompt || a->prompt_file || a->batch > 1)) return demo_fail("--score reads its text from the file: give no prompt, no -f and no --batch");
    return 1;
}

/* ---------------------------------------------------------------- text: files, UTF-8, JSON */

static double demo_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A whole file ("-": standard input) into memory, NUL-terminated. */
static char *demo_read_all(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) { demo_fail("%s: cannot open (%s)", path, strerror(errno)); return NULL; }
    size_t n = 0, cap = 1 << 16;
    char *buf = (char *)malloc(cap);
    for (;;) {
        if (!buf) break;
        if (n + 1 >= cap) {
            char *b = (char *)realloc(buf, cap *= 2);
            if (!b) { free(buf); buf = NULL; break; }
            buf = b;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    int failed = ferror(f);
    if (f != stdin) fclose(f);
    if (!buf) { demo_fail("%s: out of memory", path); return NULL; }
    if (failed) { free(buf); demo_fail("%s: read error", path); return NULL; }
    buf[n] = 0;
    *len = n;
    return buf;
}

/* Length of the well-formed UTF-8 sequence at s (Unicode Table 3-7), given n bytes are there:
   > 0 its length; 0 when it is cut short at the end (more bytes may complete it);
   < 0 minus the length of the ill-formed part (the maximal subpart Python replaces by one U+FFFD). */
static int demo_utf8_seq(const unsigned char *s, size_t n) {
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    int need;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c >= 0xE0 && c <= 0xEF) { need = 2; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { need = 3; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return -1;
    for (int k = 1; k <= need; k++) {
        if ((size_t)k >= n) return 0;
        unsigned char b = s[k];
        if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return -k;
    }
    return need + 1;
}

/* Copies the valid UTF-8 in s[0..n) to out (room for 3n bytes), each ill-formed part as U+FFFD. Unless
   final, stops before a sequence cut short at the end. Returns the bytes of s consumed; *out_len the written. */
static size_t demo_utf8_clean(const char *s, size_t n, int final, char *out, size_t *out_len) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, o = 0;
    while (i < n) {
        int len = demo_utf8_seq(u + i, n - i);
        if (len == 0 && !final) break;
        if (len > 0) { memcpy(out + o, s + i, (size_t)len); o += (size_t)len; i += (size_t)len; continue; }
        memcpy(out + o, "\xEF\xBF\xBD", 3);
        o += 3;
        i += len == 0 ? n - i : (size_t)-len;
    }
    *out_len = o;
    return i;
}

/* Writes s as a JSON string (quoted; s is valid UTF-8). */
static void demo_json_string(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') { fputc('\\', f); fputc(c, f); }
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

/* A request's generated text, as valid UTF-8 (malloc'd, NUL-terminated; *len its length), or NULL.
   The stop token that ended it is not part of the text (it stays in the tokens). */
static char *demo_decode(const gpt2_tokenizer *tok, const gpt2_request *r, size_t *len) {
    int n = r->n_out;
    const int *ids = r->out;
    if (n > 0 && ids[n - 1] == r->stop_token) n--;
    int bytes = gpt2_decode(tok, ids, n, NULL, 0);
    if (bytes < 0) return NULL;
    char *raw = (char *)malloc((size_t)bytes + 1), *clean = (char *)malloc(3 * (size_t)bytes + 1);
    if (!raw || !clean || gpt2_decode(tok, ids, n, raw, (size_t)bytes) != bytes) { free(raw); free(clean); return NULL; }
    demo_utf8_clean(raw, (size_t)bytes, 1, clean, len);
    clean[*len] = 0;
    free(raw);
    return clean;
}

/* ---------------------------------------------------------------- requests: the prompt or the batch file */

/* One request and what the demo keeps for it. */
typedef struct demo_job {
    char *prompt;            /* the prompt text as given (NUL-terminated) */
    size_t prompt_bytes;
    int *ids;                /* the prompt's tokens; [DEMO_EOS] for an empty prompt */
} demo_job;

typedef struct demo_work {
    int n;
    demo_job *jobs;
    gpt2_request *reqs;
    int *out;                /* all outputs, max_new_tokens per request, back to back */
} demo_work;

static void demo_work_free(demo_work *w) {
    for (int i = 0; w->jobs && i < w->n; i++) { free(w->jobs[i].prompt); free(w->jobs[i].ids); }
    free(w->jobs); free(w->reqs); free(w->out);
    memset(w, 0, sizeof *w);
}

/* Adds a request: the prompt text is copied and encoded; the sampling, new-token count and stop token given.
   where: "" or "FILE: " or "FILE:LINE: ", to start error messages. */
static int demo_add(demo_work *w, const gpt2_tokenizer *tok, int max_seq, const char *where,
                    const char *text, size_t len, int n_new, gpt2_sampling sampling, int stop_at_eos) {
    if ((w->n & (w->n - 1)) == 0) { /* grow at powers of two */
        size_t cap = w->n ? 2 * (size_t)w->n : 1;
        demo_job *j = (demo_job *)realloc(w->jobs, cap * sizeof *j);
        if (j) w->jobs = j;
        gpt2_request *r = (gpt2_request *)realloc(w->reqs, cap * sizeof *r);
        if (r) w->reqs = r;
        if (!j || !r) return demo_fail("out of memory for %d requests", w->n + 1);
    }
    demo_job *job = &w->jobs[w->n];
    gpt2_request *req = &w->reqs[w->n];
    memset(job, 0, sizeof *job);
    memset(req, 0, sizeof *req);
    job->prompt = (char *)malloc(len + 1);
    job->ids = (int *)malloc(((size_t)max_seq + 1) * sizeof(int));
    w->n++;
    if (!job->prompt || !job->ids) return demo_fail("out of memory");
    memcpy(job->prompt, text, len);
    job->prompt[len] = 0;
    job->prompt_bytes = len;
    int n_ids = gpt2_encode(tok, text, len, job->ids, max_seq + 1);
    if (n_ids < 0) return demo_fail("%scannot encode the prompt: %s", where, gpt2_last_error());
    if (n_ids == 0) job->ids[n_ids++] = DEMO_EOS;
    if (n_ids >= max_seq)
        return demo_fail("%sthe prompt is %d token%s; the model's context is %d tokens, with room needed for new ones",
                         where, n_ids, n_ids == 1 ? "" : "s", max_seq);
    if (n_ids + n_new > max_seq)
        return demo_fail("%sthe prompt is %d token%s; with %d new ones that exceeds the model's context of %d tokens "
                         "(at most %d new tokens fit)", where, n_ids, n_ids == 1 ? "" : "s", n_new, max_seq, max_seq - n_ids);
    req->prompt = job->ids;
    req->prompt_len = n_ids;
    req->max_new_tokens = n_new;
    req->sampling = sampling;
    req->stop_token = stop_at_eos ? DEMO_EOS : -1;
    return 1;
}

/* Gives every request its output room (after all were added: the arrays have stopped moving). */
static int demo_alloc_outputs(demo_work *w) {
    size_t total = 0;
    for (int i = 0; i < w->n; i++) total += (size_t)w->reqs[i].max_new_tokens;
    w->out = (int *)malloc((total + 1) * sizeof(int));
    if (!w->out) return demo_fail("out of memory for %zu output tokens", total);
    for (int i = 0, o = 0; i < w->n; i++) { w->reqs[i].out = w->out + o; o += w->reqs[i].max_new_tokens; }
    return 1;
}

/* One JSON Lines object: {"prompt": "...", and optional parameters}. */
static int demo_add_json_line(demo_work *w, const gpt2_tokenizer *tok, int max_seq, const demo_args *a, const char *where,
                              const char *file_line, const char *text, size_t len) {
    gpt2__json j = {text, text, text + len, file_line, 0};
    gpt2_sampling s = a->sampling;
    s.seed = a->sampling.seed + (uint64_t)w->n;
    int n_new = a->n_new, stop = a->stop_at_eos, first = 1, r;
    char key[32], *prompt = NULL;
    size_t klen, plen = 0;
    while ((r = gpt2__json_member(&j, &first, key, sizeof key, &klen)) == 1) {
        double v;
        gpt2__json_ws(&j);
        if (!strcmp(key, "prompt")) {
            gpt2__json k = j;
            if (gpt2__json_string(&k, NULL, &plen)) break;
            free(prompt);
            prompt = (char *)malloc(plen + 1);
            if (!prompt) { demo_fail("out of memory"); return 0; }
            gpt2__json_string(&j, prompt, NULL);
            continue;
        }
        if (!strcmp(key, "stop_at_eos")) {
            if (j.end - j.p >= 4 && !memcmp(j.p, "true", 4)) { stop = 1; j.p += 4; continue; }
            if (j.end - j.p >= 5 && !memcmp(j.p, "false", 5)) { stop = 0; j.p += 5; continue; }
            free(prompt);
            return demo_fail("%sstop_at_eos must be true or false", where);
        }
        int known = !strcmp(key, "max_new_tokens") || !strcmp(key, "temperature") || !strcmp(key, "top_k") ||
                    !strcmp(key, "top_p") || !strcmp(key, "seed");
        if (!known) { free(prompt); return demo_fail("%sunknown key \"%s\" (prompt, max_new_tokens, temperature, top_k, top_p, "
                                                     "seed, stop_at_eos)", where, key); }
        if (gpt2__json_number(&j, &v)) break;
        int whole = v == (double)(long long)v;
        if (!strcmp(key, "max_new_tokens") && whole && v >= 0 && v <= (1 << 20)) n_new = (int)v;
        else if (!strcmp(key, "top_k") && whole && v >= 0 && v <= (1 << 24)) s.top_k = (int)v;
        else if (!strcmp(key, "seed") && whole && v >= 0 && v < 9007199254740992.0) s.seed = (uint64_t)v;
        else if (!strcmp(key, "temperature") && v >= 0 && v <= 100) s.temperature = (float)v;
        else if (!strcmp(key, "top_p") && v >= 0 && v <= 1) s.top_p = (float)v;
        else { free(prompt); return demo_fail("%s%s = %g is out of range", where, key, v); }
    }
    if (r != 0) { free(prompt); return demo_fail("%s", gpt2_last_error()); }
    gpt2__json_ws(&j);
    if (j.p != j.end) { free(prompt); return demo_fail("%stext after the JSON object", where); }
    if (!prompt) return demo_fail("%sno \"prompt\"", where);
    int ok = demo_add(w, tok, max_seq, where, prompt, plen, n_new, s, stop);
    free(prompt);
    return ok;
}

/* What the requests are made from, read before the model loads (so a missing file is reported at once):
   the batch file, the -f file (less one final newline) or the prompt words. */
static char *demo_read_input(const demo_args *a, size_t *len) {
    if (a->batch_file) return demo_read_all(a->batch_file, len);
    if (a->score_file) return demo_read_all(a->score_file, len); /* scored as it is, final newline included */
    if (a->prompt_file) {
        char *text = demo_read_all(a->prompt_file, len);
        if (text && *len && text[*len - 1] == '\n') text[--*len] = 0;
        if (text && *len && text[*len - 1] == '\r') text[--*len] = 0;
        return text;
    }
    const char *words = a->prompt ? a->prompt : "";
    char *text = (char *)malloc(strlen(words) + 1);
    if (!text) { demo_fail("out of memory"); return NULL; }
    strcpy(text, words);
    *len = strlen(text);
    return text;
}

/* The requests: --batch copies of the prompt (seeds S, S+1, ...) or one per line of the batch file. */
static int demo_make_work(demo_work *w, const demo_args *a, const gpt2_tokenizer *tok, int max_seq, const char *input, size_t len) {
    memset(w, 0, sizeof *w);
    char where[1104], file_line[1100];
    if (!a->batch_file) {
        where[0] = 0;
        if (a->prompt_file) snprintf(where, sizeof where, "%s: ", strcmp(a->prompt_file, "-") ? a->prompt_file : "standard input");
        for (int i = 0; i < a->batch; i++) {
            gpt2_sampling s = a->sampling;
            s.seed = a->sampling.seed + (uint64_t)i;
            if (!demo_add(w, tok, max_seq, where, input, len, a->n_new, s, a->stop_at_eos)) return 0;
        }
        return demo_alloc_outputs(w);
    }
    const char *p = input, *end = input + len;
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++;
    int jsonl = p < end && *p == '{', ok = 1;
    p = input;
    for (int line = 1; ok && p < end; line++) {
        const char *e = (const char *)memchr(p, '\n', (size_t)(end - p));
        size_t n = e ? (size_t)(e - p) : (size_t)(end - p);
        const char *next = e ? e + 1 : end;
        if (n && p[n - 1] == '\r') n--;
        size_t blank = 0;
        while (blank < n && (p[blank] == ' ' || p[blank] == '\t')) blank++;
        snprintf(file_line, sizeof file_line, "%.1000s:%d", a->batch_file, line);
        snprintf(where, sizeof where, "%s: ", file_line);
        if (blank < n) {
            if (jsonl) ok = demo_add_json_line(w, tok, max_seq, a, where, file_line, p, n);
            else {
                gpt2_sampling s = a->sampling;
                s.seed = a->sampling.seed + (uint64_t)w->n;
                ok = demo_add(w, tok, max_seq, where, p, n, a->n_new, s, a->stop_at_eos);
            }
        }
        p = next;
    }
    if (ok && w->n == 0) return demo_fail("%s: no prompts in the file", a->batch_file);
    return ok && demo_alloc_outputs(w);
}

/* ---------------------------------------------------------------- output: streamed samples, JSON Lines */

#ifndef GPT2_DEMO_MPI /* streaming happens in one process; under MPI rank 0 prints at the end */

/* Sample mode: the sample being shown streams live; the others collect their text until their turn. */
typedef struct demo_stream {
    const gpt2_tokenizer *tok;
    const demo_work *w;
    int shown;               /* the sample printed live; all before it are complete */
    char **text;             /* per sample: decoded bytes so far */
    size_t *len, *cap, *flushed;
    int *done;
    char *scratch;           /* room to clean a piece of text */
    size_t scratch_cap;
    int failed;
    /* timing for --stats: prefill is the first step (every admitted prompt's first token) */
    double t_start, t_prefill_end, t_end;
    long prefill_tokens, first_tokens_seen, decode_tokens;
    int in_prefill;
    int *count;
} demo_stream;

static void demo_show_header(demo_stream *s, int i) {
    const demo_work *w = s->w;
    if (w->n > 1) printf("%s=== sample %d of %d (seed %llu) ===\n", i ? "\n" : "", i + 1, w->n,
                         (unsigned long long)w->reqs[i].sampling.seed);
    fwrite(w->jobs[i].prompt, 1, w->jobs[i].prompt_bytes, stdout);
}

/* Prints what sample i has that is not printed yet (all of it when final). */
static void demo_flush_sample(demo_stream *s, int i, int final) {
    size_t n = s->len[i] - s->flushed[i], out;
    if (n == 0) return;
    if (3 * n + 1 > s->scratch_cap) {
        char *p = (char *)realloc(s->scratch, 3 * n + 1);
        if (!p) { s->failed = 1; return; }
        s->scratch = p;
        s->scratch_cap = 3 * n + 1;
    }
    s->flushed[i] += demo_utf8_clean(s->text[i] + s->flushed[i], n, final, s->scratch, &out);
    fwrite(s->scratch, 1, out, stdout);
}

static int demo_stream_token(void *user, int request, int token) {
    demo_stream *s = (demo_stream *)user;
    const gpt2_request *r = &s->w->reqs[request];
    double now = demo_now();
    /* timing: the prefill ends at the first token of the second round */
    int nth = ++s->count[request];
    if (s->in_prefill && nth > 1) s->in_prefill = 0;
    if (s->in_prefill) { s->prefill_tokens += r->prompt_len; s->first_tokens_seen++; s->t_prefill_end = now; }
    else s->decode_tokens++;
    s->t_end = now;
    /* this token's bytes (none for the stop token: it ends the text) */
    int n = token == r->stop_token ? 0 : gpt2_decode(s->tok, &token, 1, NULL, 0);
    if (n < 0) { s->failed = 1; return 1; }
    if (s->len[request] + (size_t)n + 1 > s->cap[request]) {
        size_t cap = 2 * (s->len[request] + (size_t)n) + 64;
        char *p = (char *)realloc(s->text[request], cap);
        if (!p) { s->failed = 1; return 1; }
        s->text[request] = p;
        s->cap[request] = cap;
    }
    if (n) gpt2_decode(s->tok, &token, 1, s->text[request] + s->len[request], (size_t)n);
    s->len[request] += (size_t)n;
    if (token == r->stop_token || nth >= r->max_new_tokens) s->done[request] = 1;
    /* print the shown sample's new text; when it is complete, move on to the next */
    while (s->shown < s->w->n) {
        demo_flush_sample(s, s->shown, s->done[s->shown]);
        if (!s->done[s->shown]) break;
        putchar('\n');
        if (++s->shown < s->w->n) demo_show_header(s, s->shown);
    }
    fflush(stdout);
    return 0;
}

#endif

/* JSON Lines: one object per request, written in index order as soon as every earlier one is done. */
typedef struct demo_jsonl {
    const gpt2_tokenizer *tok;
    const demo_work *w;
    FILE *f;
    int *done, *count;
    int next;                /* the first request not yet written */
    long tokens;
    double t_start, t_progress;
    int progress, failed;
} demo_jsonl;

static int demo_jsonl_write(demo_jsonl *j, int i) {
    const gpt2_request *r = &j->w->reqs[i];
    size_t plen, tlen;
    char *prompt = (char *)malloc(3 * j->w->jobs[i].prompt_bytes + 1);
    char *text = demo_decode(j->tok, r, &tlen);
    if (!prompt || !text) { free(prompt); free(text); return 0; }
    demo_utf8_clean(j->w->jobs[i].prompt, j->w->jobs[i].prompt_bytes, 1, prompt, &plen);
    fprintf(j->f, "{\"index\": %d, \"prompt\": ", i);
    demo_json_string(j->f, prompt, plen);
    fputs(", \"text\": ", j->f);
    demo_json_string(j->f, text, tlen);
    fputs(", \"tokens\": [", j->f);
    for (int t = 0; t < r->n_out; t++) fprintf(j->f, t ? ", %d" : "%d", r->out[t]);
    fprintf(j->f, "], \"finish_reason\": \"%s\"}\n", r->n_out > 0 && r->out[r->n_out - 1] == r->stop_token ? "stop" : "length");
    free(prompt);
    free(text);
    return 1;
}

#ifndef GPT2_DEMO_MPI

static void demo_progress(demo_jsonl *j, int final) {
    double now = demo_now();
    if (!j->progress || (!final && now - j->t_progress < 0.2)) return;
    j->t_progress = now;
    int done = 0;
    for (int i = 0; i < j->w->n; i++) done += j->done[i];
    double el = now - j->t_start, rate = el > 0 ? j->tokens / el : 0.0;
    int bar = 30, fill = j->w->n ? (int)((long long)bar * done / j->w->n) : bar;
    fprintf(stderr, "\r[%.*s%*s] %d/%d requests, %.0f tokens/s", fill, "##############################", bar - fill, "", done, j->w->n, rate);
    if (done > 0 && done < j->w->n) fprintf(stderr, ", ETA %.0f s", el / done * (j->w->n - done));
    fputs("\033[K", stderr);
    if (final) fputc('\n', stderr);
    fflush(stderr);
}

static int demo_jsonl_token(void *user, int request, int token) {
    demo_jsonl *j = (demo_jsonl *)user;
    const gpt2_request *r = &j->w->reqs[request];
    int nth = ++j->count[request];
    j->tokens++;
    if (token == r->stop_token || nth >= r->max_new_tokens) {
        j->done[request] = 1;
        /* this token is already in out and counted in n_out: the request's output is complete */
        while (j->next < j->w->n && j->done[j->next]) if (!demo_jsonl_write(j, j->next++)) j->failed = 1;
        fflush(j->f);
    }
    demo_progress(j, 0);
    return 0;
}

#endif

/* ---------------------------------------------------------------- stats: backend, device, timing */

static void demo_device_name(const gpt2_model *m, char *out, size_t cap) {
    snprintf(out, cap, "CPU");
    if (gpt2_model_backend(m) == GPT2_BACKEND_CUDA) {
#if DEMO_CUDA
        int dev = 0;
        struct cudaDeviceProp p;
        if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&p, dev) == cudaSuccess)
            snprintf(out, cap, "%.200s (CUDA device %d)", p.name, dev);
        else snprintf(out, cap, "a CUDA device");
#endif
        return;
    }
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (!strncmp(line, "model name", 10) && c) {
            c += 2;
            c[strcspn(c, "\n")] = 0;
            snprintf(out, cap, "%s", c);
            break;
        }
    }
    if (f) fclose(f);
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    size_t n = strlen(out);
    snprintf(out + n, cap - n, ", %d thread%s", threads, threads == 1 ? "" : "s");
}

/* --stats: speculation's draft tokens fed and kept (gpt2_generate's counts on this process since the model was loaded) */
static void demo_print_spec(const gpt2_model *m, const char *where) {
    if (m->spec <= 0) { fprintf(stderr, "speculation: off\n"); return; }
    fprintf(stderr, "speculation%s: up to %d draft tokens a step; %lld fed, %lld kept (%.0f%%)\n", where, m->spec, m->spec_rows,
            m->spec_kept, m->spec_rows ? 100.0 * (double)m->spec_kept / (double)m->spec_rows : 0.0);
}

static void demo_print_setup(const gpt2_model *m, double load_s, int ranks) {
    char dev[256];
    static const char *const dtypes[] = {"auto", "f32", "f16", "bf16"};
    demo_device_name(m, dev, sizeof dev);
    gpt2_config c = gpt2_model_config(m);
    fprintf(stderr, "model: %d layers, %d heads, %d wide, context %d, vocabulary %d; loaded in %.2f s\n",
            c.n_layer, c.n_head, c.n_embd, c.n_ctx, c.n_vocab, load_s);
    fprintf(stderr, "backend: %s, dtype: %s, device: %s, %d sequences at once%s\n",
            gpt2_model_backend(m) == GPT2_BACKEND_CUDA ? "cuda" : "cpu", dtypes[gpt2_model_dtype(m)], dev,
            gpt2_model_max_batch(m), ranks > 1 ? " per rank" : "");
}

static void demo_print_rate(const char *what, long tokens, double seconds) {
    fprintf(stderr, "%s: %ld tokens in %.3f s (%.1f tokens/s)\n", what, tokens, seconds, seconds > 0 ? tokens / seconds : 0.0);
}

/* ---------------------------------------------------------------- main */

static int demo_setup_error(const char *what) {
    fprintf(stderr, "demo: %s\n", what);
    return 1;
}

/* A model that did not load; when the default directory could not be read, also where it is looked for. */
static int demo_model_error(const demo_args *a, gpt2_status st) {
    fprintf(stderr, "demo: %s%s\n", gpt2_last_error(), strcmp(a->model_dir, "weights") || st != GPT2_ERR_IO ? "" :
            " (the embedded model is read from ./weights: run the demo from the repository root, or give -m DIR)");
    return 1;
}

/* Everything a run holds, released; a results file that cannot be closed is an error of its own. */
static int demo_finish(int rc, FILE *results, demo_work *w, gpt2_tokenizer *tok, gpt2_model *m, char *input, demo_args *a) {
    if (results && results != stdout && fclose(results) != 0 && rc == 0) rc = demo_setup_error("cannot write the results");
    demo_work_free(w);
    gpt2_tokenizer_free(tok);
    gpt2_free(m);
    free(input);
    free(a->prompt);
    return rc;
}

/* The -o file (or standard output), opened before the model loads; NULL with demo_error set. */
static FILE *demo_open_output(const demo_args *a) {
    if (!a->out_file) return stdout;
    FILE *f = fopen(a->out_file, "w");
    if (!f) demo_fail("%s: cannot write (%s)", a->out_file, strerror(errno));
    return f;
}

static gpt2_options demo_options(const demo_args *a) {
    gpt2_options o = gpt2_default_options();
    o.backend = a->backend;
    o.dtype = a->dtype;
    return o;
}


/* ---------------------------------------------------------------- scoring: --score */

#ifndef GPT2_DEMO_MPI /* demo_mpi does not score yet */

#define DEMO_SCORE_PIECE 8192 /* tokens a gpt2_score call takes at most (a longer text goes in pieces): the bar's step */

/* One text to score: its tokens (after <|endoftext|> with --prepend-eos), the request, its outputs. */
typedef struct demo_text {
    int *ids;
    gpt2_score_request r;
} demo_text;

/* The progress bar on stderr (shown only when stderr is a terminal): tokens scored of the total. */
typedef struct demo_bar {
    int on;
    long total, done;
    double t_start, t_shown;
} demo_bar;

static void demo_bar_show(demo_bar *b, int final) {
    double now = demo_now();
    if (!b->on || (!final && now - b->t_shown < 0.2)) return;
    b->t_shown = now;
    double el = now - b->t_start, rate = el > 0 ? b->done / el : 0.0;
    int bar = 30, fill = b->total ? (int)(bar * (double)b->done / (double)b->total) : bar;
    fprintf(stderr, "\r[%.*s%*s] %ld/%ld tokens, %.0f tokens/s", fill, "##############################", bar - fill, "",
            b->done, b->total, rate);
    if (b->done > 0 && b->done < b->total) fprintf(stderr, ", ETA %.0f s", el / (double)b->done * (double)(b->total - b->done));
    fputs("\033[K", stderr);
    if (final) fputc('\n', stderr);
    fflush(stderr);
}

/* Scores r in pieces of about DEMO_SCORE_PIECE tokens, each beginning where a window begins: every token is scored in
   the window it has in one call over the whole text (the windows of a piece starting at window j0 are the text's
   windows j0, j0 + 1, ...; its n_context leaves out what earlier pieces scored). L: the model's max_seq. */
static gpt2_status demo_score_long(gpt2_model *m, gpt2_score_request *r, int L, demo_bar *b) {
    const long n = r->n_tokens, k = r->stride ? r->stride : L / 2, e = k == L;
    const long per = DEMO_SCORE_PIECE / k > 1 ? DEMO_SCORE_PIECE / k : 1; /* windows a piece */
    r->sum_logprob = 0;
    r->n_scored = 0;
    for (long j0 = 0;; j0 += per) {
        const long s = j0 * k, lo = j0 ? L + (j0 - 1) * k + e : 0, first = lo > r->n_context ? lo : r->n_context;
        const long hi = L + (j0 + per - 1) * k + e < n ? L + (j0 + per - 1) * k + e : n;
        if (first >= n) break;
        gpt2_score_request q = *r;
        q.tokens = r->tokens + s; q.n_tokens = (int)(hi - s); q.n_context = (int)(first - s);
        if (r->logprobs) q.logprobs = r->logprobs + (first - r->n_context);
        if (r->ranks) q.ranks = r->ranks + (first - r->n_context);
        gpt2_status st = gpt2_score(m, &q, 1);
        if (st) return st;
        r->sum_logprob += q.sum_logprob;
        r->n_scored += q.n_scored;
        b->done += q.n_tokens - q.n_context;
        demo_bar_show(b, 0);
    }
    return GPT2_OK;
}

/* Scores every text: consecutive short ones together, up to DEMO_SCORE_PIECE tokens a call, longer ones alone in
   pieces. Texts of no tokens are left unscored (n_scored 0). */
static gpt2_status demo_score_all(gpt2_model *m, demo_text *t, int n, demo_bar *b) {
    const int L = gpt2_model_max_seq(m);
    gpt2_score_request *group = (gpt2_score_request *)malloc((size_t)(n ? n : 1) * sizeof *group);
    if (!group) return GPT2_ERR_OOM;
    gpt2_status st = GPT2_OK;
    for (int i = 0; i < n && !st;) {
        if (t[i].r.n_tokens == 0) { i++; continue; }
        if (t[i].r.n_tokens > DEMO_SCORE_PIECE) { st = demo_score_long(m, &t[i].r, L, b); i++; continue; }
        int g = 0, i0 = i;
        long tokens = 0;
        while (i < n && t[i].r.n_tokens <= DEMO_SCORE_PIECE && tokens + t[i].r.n_tokens <= DEMO_SCORE_PIECE) {
            if (t[i].r.n_tokens) { tokens += t[i].r.n_tokens; group[g++] = t[i].r; }
            i++;
        }
        if (!g) { group[g++] = t[i].r; i++; }
        st = gpt2_score(m, group, g);
        for (int k = i0, x = 0; k < i && !st; k++)
            if (t[k].r.n_tokens) { t[k].r = group[x++]; b->done += t[k].r.n_scored; }
        demo_bar_show(b, 0);
    }
    free(group);
    return st;
}

/* A text's tokens (after <|endoftext|> with --prepend-eos) and its request; 0 with demo_error set on failure */
static int demo_text_make(demo_text *t, const gpt2_tokenizer *tok, const demo_args *a, const char *where, const char *text, size_t len) {
    memset(t, 0, sizeof *t);
    t->ids = (int *)malloc((len + 2) * sizeof(int)); /* byte-level BPE: at most a token a byte */
    if (!t->ids) return demo_fail("out of memory");
    int n = a->prepend_eos;
    if (n) t->ids[0] = DEMO_EOS;
    int got = gpt2_encode(tok, text, len, t->ids + n, (int)len + 1);
    if (got < 0) return demo_fail("%scannot encode the text: %s", where, gpt2_last_error());
    n += got;
    t->r.tokens = t->ids; t->r.n_tokens = n; t->r.n_context = n ? 1 : 0; t->r.stride = a->stride;
    if (a->logprobs && n > 1) {
        t->r.logprobs = (float *)malloc((size_t)n * sizeof(float));
        t->r.ranks = (int *)malloc((size_t)n * sizeof(int));
        if (!t->r.logprobs || !t->r.ranks) return demo_fail("out of memory");
    }
    return 1;
}

static void demo_texts_free(demo_text *t, int n) {
    for (int i = 0; t && i < n; i++) { free(t[i].ids); free(t[i].r.logprobs); free(t[i].r.ranks); }
    free(t);
}

/* The texts of --score: the whole file, or one per JSON line {"text": "..."} of the batch file. */
static int demo_score_texts(const demo_args *a, const gpt2_tokenizer *tok, const char *input, size_t len, demo_text **out, int *n_out) {
    demo_text *t = NULL;
    int n = 0, ok = 1;
    char where[1104];
    if (!a->batch_file) {
        t = (demo_text *)calloc(1, sizeof *t);
        if (!t) return demo_fail("out of memory");
        snprintf(where, sizeof where, "%s: ", strcmp(a->score_file, "-") ? a->score_file : "standard input");
        ok = demo_text_make(t, tok, a, where, input, len);
        *out = t; *n_out = 1;
        return ok;
    }
    const char *p = input, *end = input + len;
    for (int line = 1; ok && p < end; line++) {
        const char *e = (const char *)memchr(p, '\n', (size_t)(end - p));
        size_t m = e ? (size_t)(e - p) : (size_t)(end - p), blank = 0;
        const char *next = e ? e + 1 : end;
        while (blank < m && (p[blank] == ' ' || p[blank] == '\t' || p[blank] == '\r')) blank++;
        if (blank < m) {
            char file_line[1100];
            snprintf(file_line, sizeof file_line, "%.1000s:%d", a->batch_file, line);
            snprintf(where, sizeof where, "%s: ", file_line);
            if ((n & (n - 1)) == 0) {
                demo_text *g = (demo_text *)realloc(t, (n ? 2 * (size_t)n : 1) * sizeof *t);
                if (!g) { ok = demo_fail("out of memory"); break; }
                t = g;
            }
            memset(&t[n], 0, sizeof t[n]);
            gpt2__json j = {p, p, p + m, file_line, 0};
            int first = 1, r;
            char key[32], *text = NULL;
            size_t klen, tlen = 0;
            while (ok && (r = gpt2__json_member(&j, &first, key, sizeof key, &klen)) == 1) {
                gpt2__json_ws(&j);
                if (strcmp(key, "text")) { ok = demo_fail("%sunknown key \"%s\" (a line is {\"text\": \"...\"})", where, key); break; }
                gpt2__json k = j;
                if (gpt2__json_string(&k, NULL, &tlen)) { r = -1; break; }
                free(text);
                text = (char *)malloc(tlen + 1);
                if (!text) { ok = demo_fail("out of memory"); break; }
                gpt2__json_string(&j, text, NULL);
            }
            if (ok && r != 0) ok = demo_fail("%s", gpt2_last_error());
            if (ok) { gpt2__json_ws(&j); if (j.p != j.end) ok = demo_fail("%stext after the JSON object", where); }
            if (ok && !text) ok = demo_fail("%sno \"text\"", where);
            if (ok) ok = demo_text_make(&t[n], tok, a, where, text, tlen);
            n++;
            free(text);
        }
        p = next;
    }
    if (ok && n == 0) ok = demo_fail("%s: no texts in the file", a->batch_file);
    *out = t; *n_out = n;
    return ok;
}

/* A JSON number, or null for what JSON cannot hold (NaN, infinities) */
static void demo_json_number(FILE *f, const char *fmt, double v) {
    if (v == v && v - v == 0) fprintf(f, fmt, v);
    else fputs("null", f);
}

/* --score: the file's (or each JSON line's) token count, log-probabilities and perplexity; 0 on success */
static int demo_score(const demo_args *a, gpt2_model *m, const gpt2_tokenizer *tok, const char *input, size_t len, FILE *f) {
    demo_text *t = NULL;
    int n = 0, rc = 1;
    if (!demo_score_texts(a, tok, input, len, &t, &n)) { demo_setup_error(demo_error); demo_texts_free(t, n); return 1; }
    demo_bar b;
    memset(&b, 0, sizeof b);
    b.on = isatty(2);
    for (int i = 0; i < n; i++) b.total += t[i].r.n_tokens - t[i].r.n_context;
    b.t_start = demo_now();
    gpt2_status st = demo_score_all(m, t, n, &b);
    demo_bar_show(&b, 1);
    double el = demo_now() - b.t_start;
    if (st) { demo_setup_error(st == GPT2_ERR_OOM && !gpt2_last_error()[0] ? "out of memory" : gpt2_last_error()); demo_texts_free(t, n); return 1; }
    for (int i = 0; i < n; i++) {
        const gpt2_score_request *r = &t[i].r;
        const double mean = r->n_scored ? r->sum_logprob / r->n_scored : NAN;
        if (!a->batch_file) {
            for (int k = 0; r->logprobs && k < r->n_scored; k++)
                fprintf(f, "%d\t%d\t%.6f\t%d\n", r->n_context + k, r->tokens[r->n_context + k], r->logprobs[k], r->ranks[k]);
            if (!r->n_scored) fprintf(f, "tokens %d, scored 0: no perplexity (the first token only conditions; --prepend-eos "
                                      "scores it)\n", r->n_tokens);
            else fprintf(f, "tokens %d, scored %d, mean log-probability %.6f, perplexity %.4f\n", r->n_tokens, r->n_scored, mean,
                         exp(-mean));
            continue;
        }
        fprintf(f, "{\"index\": %d, \"tokens\": %d, \"sum_logprob\": ", i, r->n_tokens);
        demo_json_number(f, "%.17g", r->sum_logprob);
        fputs(", \"perplexity\": ", f);
        demo_json_number(f, "%.9g", exp(-mean));
        if (a->logprobs) {
            fputs(", \"ids\": [", f);
            for (int k = 0; k < r->n_scored; k++) fprintf(f, k ? ", %d" : "%d", r->tokens[r->n_context + k]);
            fputs("], \"logprobs\": [", f);
            for (int k = 0; k < r->n_scored; k++) { if (k) fputs(", ", f); demo_json_number(f, "%.9g", r->logprobs[k]); }
            fputs("], \"ranks\": [", f);
            for (int k = 0; k < r->n_scored; k++) fprintf(f, k ? ", %d" : "%d", r->ranks[k]);
            fputs("]", f);
        }
        fputs("}\n", f);
    }
    if (fflush(f) != 0 || ferror(f)) demo_setup_error("cannot write the results");
    else {
        rc = 0;
        if (a->stats) demo_print_rate("scored", b.done, el);
    }
    demo_texts_free(t, n);
    return rc;
}

#endif

#ifndef GPT2_DEMO_MPI

int main(int argc, char **argv) {
    demo_args a;
    if (!demo_parse_args(argc, argv, &a)) { fprintf(stderr, "demo: %s\n", demo_error); free(a.prompt); return 2; }
    if (a.help) { fputs(demo_usage, stdout); free(a.prompt); return 0; }
    double t0 = demo_now();
    gpt2_options opt = demo_options(&a);
    gpt2_model *m = NULL;
    gpt2_status load_st;
    gpt2_tokenizer *tok = NULL;
    demo_work w;
    memset(&w, 0, sizeof w);
    int rc = 1;
    double load_s;
    size_t input_len = 0;
    char *input = demo_read_input(&a, &input_len);
    FILE *results = input ? demo_open_output(&a) : NULL;
    if (!input || !results) { demo_setup_error(demo_error); goto done; }
    load_st = gpt2_load(&m, a.model_dir, &opt);
    if (load_st) { demo_model_error(&a, load_st); goto done; }
    if (a.spec >= 0) m->spec = a.spec;
    load_s = demo_now() - t0;
    if (gpt2_tokenizer_load(&tok, a.model_dir)) { demo_setup_error(gpt2_last_error()); goto done; }
    if (a.score) {
        if (a.stats) demo_print_setup(m, load_s, 1);
        rc = demo_score(&a, m, tok, input, input_len, results);
        goto done;
    }
    if (!demo_make_work(&w, &a, tok, gpt2_model_max_seq(m), input, input_len)) { demo_setup_error(demo_error); goto done; }
    if (a.stats) demo_print_setup(m, load_s, 1);

    if (!a.batch_file) {
        demo_stream s;
        memset(&s, 0, sizeof s);
        s.tok = tok; s.w = &w; s.in_prefill = 1;
        s.text = (char **)calloc((size_t)w.n, sizeof(char *));
        s.len = (size_t *)calloc((size_t)w.n, sizeof(size_t));
        s.cap = (size_t *)calloc((size_t)w.n, sizeof(size_t));
        s.flushed = (size_t *)calloc((size_t)w.n, sizeof(size_t));
        s.done = (int *)calloc((size_t)w.n, sizeof(int));
        s.count = (int *)calloc((size_t)w.n, sizeof(int));
        if (!s.text || !s.len || !s.cap || !s.flushed || !s.done || !s.count) demo_setup_error("out of memory");
        else {
            demo_show_header(&s, 0);
            fflush(stdout);
            s.t_start = demo_now();
            gpt2_status st = gpt2_generate(m, w.reqs, w.n, demo_stream_token, &s);
            /* samples that ended early (max_new_tokens 0) or by the engine: print what is left, in order */
            for (; st == GPT2_OK && s.shown < w.n; ) {
                demo_flush_sample(&s, s.shown, 1);
                putchar('\n');
                if (++s.shown < w.n) demo_show_header(&s, s.shown);
            }
            fflush(stdout);
            if (st) demo_setup_error(gpt2_last_error());
            else if (s.failed) demo_setup_error("out of memory while printing");
            else {
                rc = 0;
                if (a.stats) {
                    if (!s.first_tokens_seen) s.t_prefill_end = s.t_end = demo_now();
                    demo_print_rate("prefill", s.prefill_tokens, s.t_prefill_end - s.t_start);
                    demo_print_rate("decode", s.decode_tokens, s.t_end - s.t_prefill_end);
                    demo_print_spec(m, "");
                }
            }
        }
        for (int i = 0; s.text && i < w.n; i++) free(s.text[i]);
        free(s.text); free(s.len); free(s.cap); free(s.flushed); free(s.done); free(s.count); free(s.scratch);
    } else {
        demo_jsonl j;
        memset(&j, 0, sizeof j);
        j.tok = tok; j.w = &w;
        j.f = results;
        j.done = (int *)calloc((size_t)w.n, sizeof(int));
        j.count = (int *)calloc((size_t)w.n, sizeof(int));
        j.progress = isatty(2);
        if (!j.done || !j.count) demo_setup_error("out of memory");
        else {
            j.t_start = demo_now();
            gpt2_status st = gpt2_generate(m, w.reqs, w.n, demo_jsonl_token, &j);
            /* requests that make no tokens never reach the callback */
            for (; st == GPT2_OK && j.next < w.n; j.next++) if (!demo_jsonl_write(&j, j.next)) j.failed = 1;
            double el = demo_now() - j.t_start;
            if (j.progress) demo_progress(&j, 1);
            if (fflush(j.f) != 0 || ferror(j.f)) j.failed = 1;
            if (st) demo_setup_error(gpt2_last_error());
            else if (j.failed) demo_setup_error(a.out_file ? "cannot write the results" : "cannot write the results to standard output");
            else {
                rc = 0;
                if (a.stats) { demo_print_rate("generated", j.tokens, el); demo_print_spec(m, ""); }
            }
        }
        free(j.done); free(j.count);
    }

done:
    rc = demo_finish(rc, results, &w, tok, m, input, &a);
    return rc;
}

#else /* GPT2_DEMO_MPI: rank 0 holds the requests; gpt2_mpi_generate shares them out */

/* Every rank learns whether rank 0 could go on (its ok), so that nobody waits on a rank that stopped. */
static int demo_mpi_all_ok(int ok) {
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return ok;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    demo_args a;
    /* every rank reads the same argv the same way, so a usage error stops them all without talking */
    if (!demo_parse_args(argc, argv, &a) || a.help) {
        int help = a.help;
        if (rank == 0) { if (help) fputs(demo_usage, stdout); else fprintf(stderr, "demo: %s\n", demo_error); }
        free(a.prompt);
        MPI_Finalize();
        return help ? 0 : 2;
    }
    if (a.score) {
        if (rank == 0) fprintf(stderr, "demo: --score runs in ./demo (one process) for now\n");
        free(a.prompt);
        MPI_Finalize();
        return 2;
    }
    gpt2_options opt = demo_options(&a);
    int local = gpt2_mpi_local_rank(MPI_COMM_WORLD);
#if DEMO_CUDA
    int devices = 0;
    if (a.backend != GPT2_BACKEND_CPU && cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0 && local >= 0)
        opt.device = local % devices;
#endif
    (void)local;
    double t0 = demo_now();
    gpt2_model *m = NULL;
    gpt2_status load_st;
    gpt2_tokenizer *tok = NULL;
    demo_work w;
    memset(&w, 0, sizeof w);
    int rc = 1, ok = 1;
    size_t input_len = 0;
    char *input = NULL;
    FILE *results = NULL;
    if (rank == 0) {
        input = demo_read_input(&a, &input_len);
        results = input ? demo_open_output(&a) : NULL;
        if (!input || !results) { demo_setup_error(demo_error); ok = 0; }
    }
    if (!demo_mpi_all_ok(ok)) goto done;
    load_st = gpt2_mpi_load(MPI_COMM_WORLD, &m, a.model_dir, &opt);
    if (load_st) {
        if (rank == 0) demo_model_error(&a, load_st);
        goto done;
    }
    if (a.spec >= 0) m->spec = a.spec;
    if (rank == 0) {
        if (gpt2_tokenizer_load(&tok, a.model_dir)) ok = demo_fail("%s", gpt2_last_error());
        else ok = demo_make_work(&w, &a, tok, gpt2_model_max_seq(m), input, input_len);
        if (!ok) demo_setup_error(demo_error);
        else if (a.stats) demo_print_setup(m, demo_now() - t0, ranks);
    }
    if (!demo_mpi_all_ok(ok)) goto done;
    {
        double t_start = demo_now();
        gpt2_status st = gpt2_mpi_generate(MPI_COMM_WORLD, m, w.reqs, w.n, NULL, NULL);
        double el = demo_now() - t_start;
        if (st) { if (rank == 0) demo_setup_error(gpt2_last_error()); goto done; }
        rc = 0;
        if (rank == 0) {
            long tokens = 0;
            if (!a.batch_file) {
                for (int i = 0; i < w.n && !rc; i++) {
                    size_t len;
                    char *text = demo_decode(tok, &w.reqs[i], &len);
                    if (!text) { rc = demo_setup_error(gpt2_last_error()); break; }
                    if (w.n > 1) printf("%s=== sample %d of %d (seed %llu) ===\n", i ? "\n" : "", i + 1, w.n,
                                        (unsigned long long)w.reqs[i].sampling.seed);
                    fwrite(w.jobs[i].prompt, 1, w.jobs[i].prompt_bytes, stdout);
                    fwrite(text, 1, len, stdout);
                    putchar('\n');
                    free(text);
                }
            } else {
                demo_jsonl j;
                memset(&j, 0, sizeof j);
                j.tok = tok; j.w = &w;
                j.f = results;
                for (int i = 0; i < w.n && !rc; i++) if (!demo_jsonl_write(&j, i)) rc = demo_setup_error("out of memory");
                if ((fflush(j.f) != 0 || ferror(j.f)) && !rc) rc = demo_setup_error("cannot write the results");
            }
            fflush(stdout);
            for (int i = 0; i < w.n; i++) tokens += w.reqs[i].n_out;
            if (a.stats && !rc) {
                char what[64];
                snprintf(what, sizeof what, "generated on %d rank%s", ranks, ranks == 1 ? "" : "s");
                demo_print_rate(what, tokens, el);
                demo_print_spec(m, " (rank 0's requests)");
            }
        }
    }

done:
    rc = demo_finish(rc, results, &w, tok, m, input, &a);
    MPI_Finalize();
    return rc;
}

#endif /* GPT2_DEMO_MPI */
