/* demo — text generation from the command line with gpt2.cuh.

   ./demo "To be, or not to be"               stream a continuation from the embedded model (weights/)
   ./demo --batch 4 -n 64 "ROMEO:"            four samples in parallel, printed one after another
   ./demo --batch-file prompts.txt -o out.jsonl   many prompts (or JSON Lines with parameters) -> JSON Lines
   ./demo --score FILE                        the text's token count, mean log-probability and perplexity
   ./demo --batch-file texts.jsonl --score    many texts ({"text": ...} per line) scored -> JSON Lines
   mpirun -np 2 ./demo_mpi --batch 1024 ...   the same, sharded across MPI ranks (built with -DGPT2_DEMO_MPI)
   ./demo -h                                  every option

   Plain C as well as CUDA C++: built by nvcc when present (CUDA + CPU backends), else by cc (CPU only).
   DEMO_NO_MAIN, defined before including this file, leaves main out (tests/fuzz/fuzz_batch.c fuzzes the batch-file
   reader that way). */
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
    "  --stop-at-eos         end a sample at <|endoftext|> (or the model's eos_token_id: see generation_config.json)\n"
    "  --stop STR            end a sample once its text holds STR (repeatable): the text shown ends before STR,\n"
    "                        finish_reason \"stop\". \\n \\t \\r \\\\ and \\xHH in STR stand for those bytes\n"
    "  --repetition-penalty F  Hugging Face's (CTRL's): the logits of tokens already in the prompt or the sample are\n"
    "                        divided by F (negative ones multiplied); F > 0, 1: off (default)\n"
    "  --presence-penalty F  OpenAI's: F (-100..100) off the logit of each token generated so far (default 0)\n"
    "  --frequency-penalty F OpenAI's: F (-100..100) off a token's logit for each time it was generated (default 0)\n"
    "  --no-repeat-ngram N   no N-gram of prompt + sample occurs twice (Hugging Face's no_repeat_ngram_size); 0: off\n"
    "  --min-p P             sample among tokens at least P times as likely as the most likely one; 0: off (default)\n"
    "  --typical-p P         locally typical sampling (Hugging Face's typical_p), 0..1; 1: off (default)\n"
    "  --min-new-tokens N    the stop tokens (--stop-at-eos) cannot come before N new tokens (default 0)\n"
    "  --logit-bias ID:V     add V to token ID's logit (repeatable); V = -inf bans the token\n"
    "  --logprobs N          also each generated token's log-probability under the model (its raw distribution: no\n"
    "                        temperature, no penalty) and the N (0..20) most likely tokens at that place: a table\n"
    "                        after each sample on standard output (place, token, log-probability, text, then the\n"
    "                        alternatives); with --batch-file each result carries \"logprobs\": [{\"token\", \"text\",\n"
    "                        \"logprob\", \"top\": [{\"token\", \"text\", \"logprob\"}, ...]}, ...] (a token's text with\n"
    "                        part of a character shows U+FFFD)\n"
    "  -f FILE               read the prompt from FILE (\"-\": standard input); one final newline is dropped\n"
    "  --batch-file FILE     one prompt per line (blank lines skipped), or JSON Lines: {\"prompt\": \"...\"} with\n"
    "                        optional \"max_new_tokens\", \"temperature\", \"top_k\", \"top_p\", \"seed\", \"stop_at_eos\",\n"
    "                        \"repetition_penalty\", \"presence_penalty\", \"frequency_penalty\", \"no_repeat_ngram_size\",\n"
    "                        \"min_p\", \"typical_p\", \"min_new_tokens\", \"stop\" (a string or a list of them),\n"
    "                        \"logit_bias\" ({\"ID\": V, ...}; V may be \"-inf\") and \"logprobs\" (N, or null: none), each\n"
    "                        replacing its option for that line; writes one JSON line per prompt, in order:\n"
    "                        {\"index\", \"prompt\", \"text\", \"tokens\", \"finish_reason\": \"stop\" | \"length\"}\n"
    "  -o FILE               with --batch-file: write the results to FILE (default: standard output)\n"
    "  --backend cpu|cuda    default: cuda when a usable GPU is present, else cpu\n"
    "  --dtype f32|f16|bf16  default: f16 on cuda, f32 on cpu\n"
    "  --spec K              speculation: at most K draft tokens (prompt lookup) a request verifies in a step;\n"
    "                        0: off (default 8; the text is the same either way, only the speed changes)\n"
    "  --stats               print backend, dtype, device, tokens/s (prefill, decode) and drafts kept on stderr\n"
    "  --step-tokens N       prompt tokens one engine step may take (default: the engine's, 4096 on cuda; with --score\n"
    "                        16384: scoring runs faster in bigger steps, for more GPU memory)\n"
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
    "  --logprobs            with --score (no N): also every scored token's id, log-probability and rank (0: the most\n"
    "                        likely token), as \"ids\", \"logprobs\", \"ranks\" (JSON) or one line per token\n"
    "  -h, --help            this text\n"
    "\n"
    "With no prompt, generation starts from <|endoftext|>. Samples and batch-file prompts get seeds S, S+1, ...\n"
    "Words after -- are prompt even when they start with '-'.\n"
    "A generation_config.json in the model directory (Hugging Face's) sets the defaults of what it holds of:\n"
    "temperature, top_k, top_p, min_p, typical_p, repetition_penalty, no_repeat_ngram_size, min_new_tokens,\n"
    "max_new_tokens, do_sample (false: greedy), eos_token_id (a number or a list: what --stop-at-eos stops at) and\n"
    "stop_strings; other keys are ignored, and the options above override it.\n"
#ifdef GPT2_DEMO_MPI
    "demo_mpi: run under mpirun; rank 0 reads the model, prompts and tokenizer, the requests are shared\n"
    "out across the ranks (one GPU each), and rank 0 prints every result, in order, at the end.\n"
#endif
    ;

#define DEMO_MAX_EOS 16   /* most ids generation_config.json's eos_token_id may list */
#define DEMO_MAX_STOP 1024 /* longest stop string, in bytes (the library's limit) */

/* What a request asks for beyond its prompt: the options' values, or a batch-file line's over them. */
typedef struct demo_params {
    int n_new;
    gpt2_sampling sampling;  /* its bias_ids / bias point at the list's owner (demo_args, or the request's job) */
    int stop_at_eos;
    char **stop; int n_stop; /* stop strings */
    int logprobs;            /* alternatives a token, 0..20; -1: no logprobs */
} demo_params;

typedef struct demo_args {
    const char *model_dir;
    demo_params gen;
    int *bias_ids; float *bias;     /* --logit-bias's list (gen.sampling points at it) */
    int eos[DEMO_MAX_EOS], n_eos;   /* what --stop-at-eos stops at: <|endoftext|>, or generation_config.json's eos_token_id */
    unsigned given;          /* the options given, a bit each (DEMO_GIVEN): generation_config.json leaves them be */
    int batch;
    gpt2_backend backend;
    gpt2_dtype dtype;
    const char *prompt_file, *batch_file, *out_file;
    int stats, help;
    int spec;                /* --spec K, or -1: the engine's default */
    int score;               /* --score: score texts instead of generating */
    const char *score_file;  /* --score FILE (NULL with --batch-file) */
    int step_tokens;         /* --step-tokens N (0: not given) */
    int stride, prepend_eos, logprobs; /* logprobs: --score's --logprobs */
    char *prompt;            /* the positional words joined by spaces, or NULL */
} demo_args;

/* The numbers a request takes: batch-file key (and generation_config.json's), option, range (lo itself out when lo_open),
   whole or not. */
enum { DEMO_N_NEW, DEMO_TEMPERATURE, DEMO_TOP_K, DEMO_TOP_P, DEMO_MIN_P, DEMO_TYPICAL_P, DEMO_REPETITION, DEMO_PRESENCE,
       DEMO_FREQUENCY, DEMO_NO_REPEAT, DEMO_MIN_NEW, DEMO_LOGPROBS, DEMO_N_NUMBERS };
#define DEMO_GIVEN(k) (1u << (k))
#define DEMO_GIVEN_STOP (1u << DEMO_N_NUMBERS)
static const struct demo_number { const char *key, *flag; double lo, hi; int whole, lo_open; } demo_numbers[DEMO_N_NUMBERS] = {
    {"max_new_tokens", "-n", 0, 1 << 20, 1, 0},
    {"temperature", "--temperature", 0, 100, 0, 0},
    {"top_k", "--top-k", 0, 1 << 24, 1, 0},
    {"top_p", "--top-p", 0, 1, 0, 0},
    {"min_p", "--min-p", 0, 1, 0, 0},
    {"typical_p", "--typical-p", 0, 1, 0, 0},
    {"repetition_penalty", "--repetition-penalty", 0, 100, 0, 1},
    {"presence_penalty", "--presence-penalty", -100, 100, 0, 0},
    {"frequency_penalty", "--frequency-penalty", -100, 100, 0, 0},
    {"no_repeat_ngram_size", "--no-repeat-ngram", 0, 1 << 20, 1, 0},
    {"min_new_tokens", "--min-new-tokens", 0, 1 << 20, 1, 0},
    {"logprobs", "--logprobs", 0, 20, 1, 0}};

static int demo_number_ok(int k, double v) {
    const struct demo_number *d = &demo_numbers[k];
    return (d->lo_open ? v > d->lo : v >= d->lo) && v <= d->hi && (!d->whole || v == (double)(long)v);
}

/* "a whole number in 0..20", "a number > 0 and <= 100": number k's range, for messages */
static const char *demo_number_range(int k) {
    static char buf[96];
    const struct demo_number *d = &demo_numbers[k];
    if (d->lo_open) snprintf(buf, sizeof buf, "a number > %.15g and <= %.15g", d->lo, d->hi);
    else snprintf(buf, sizeof buf, "a %snumber in %.15g..%.15g", d->whole ? "whole " : "", d->lo, d->hi);
    return buf;
}

static void demo_number_set(demo_params *p, int k, double v) {
    gpt2_sampling *s = &p->sampling;
    switch (k) {
    case DEMO_N_NEW: p->n_new = (int)v; break;
    case DEMO_TEMPERATURE: s->temperature = (float)v; break;
    case DEMO_TOP_K: s->top_k = (int)v; break;
    case DEMO_TOP_P: s->top_p = (float)v; break;
    case DEMO_MIN_P: s->min_p = (float)v; break;
    case DEMO_TYPICAL_P: s->typical_p = (float)v; break;
    case DEMO_REPETITION: s->repetition_penalty = (float)v; break;
    case DEMO_PRESENCE: s->presence_penalty = (float)v; break;
    case DEMO_FREQUENCY: s->frequency_penalty = (float)v; break;
    case DEMO_NO_REPEAT: s->no_repeat_ngram = (int)v; break;
    case DEMO_MIN_NEW: s->min_new_tokens = (int)v; break;
    default: p->logprobs = (int)v; break;
    }
}

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

/* Option s of number k, range-checked, into p */
static int demo_parse_number(int k, const char *s, demo_params *p) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !demo_number_ok(k, v))
        return demo_fail("%s expects %s, got \"%s\"", demo_numbers[k].flag, demo_number_range(k), s);
    demo_number_set(p, k, v);
    return 1;
}

/* Whether a stop string of len bytes is one the library takes; else demo_error says why, after what (its option or key) */
static int demo_stop_ok(const char *what, const char *s, size_t len) {
    if (len == 0) return demo_fail("%s: a stop string cannot be empty", what);
    if (len > DEMO_MAX_STOP) return demo_fail("%s: a stop string is at most %d bytes, this one %zu", what, DEMO_MAX_STOP, len);
    if (memchr(s, 0, len)) return demo_fail("%s: a stop string cannot hold a NUL byte", what);
    return 1;
}

static int demo_hex(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* --stop STR: its escapes (\n \t \r \\ \xHH) made bytes, appended to p's list */
static int demo_add_stop_option(demo_params *p, const char *s) {
    size_t n = strlen(s), o = 0;
    char *out = (char *)malloc(n + 1), **list = (char **)realloc(p->stop, ((size_t)p->n_stop + 1) * sizeof *list);
    if (list) p->stop = list;
    if (!out || !list) { free(out); return demo_fail("out of memory"); }
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\') { out[o++] = s[i]; continue; }
        char c = s[++i];
        int hi = c == 'x' ? demo_hex(s[i + 1]) : -1, lo = hi >= 0 ? demo_hex(s[i + 2]) : -1;
        if (c == 'n') out[o++] = '\n';
        else if (c == 't') out[o++] = '\t';
        else if (c == 'r') out[o++] = '\r';
        else if (c == '\\') out[o++] = '\\';
        else if (lo >= 0 && (hi || lo)) { out[o++] = (char)(hi * 16 + lo); i += 2; }
        else {
            free(out);
            if (!c) return demo_fail("--stop: \"%s\" ends in a lone backslash (\\\\ is one)", s);
            return demo_fail("--stop: \"\\%c\" in \"%s\" is not an escape it knows (\\n \\t \\r \\\\ \\xHH, HH not 00)", c, s);
        }
    }
    out[o] = 0;
    if (!demo_stop_ok("--stop", out, o)) { free(out); return 0; }
    p->stop[p->n_stop++] = out;
    return 1;
}

/* --logit-bias ID:V (V a number, or -inf to ban), appended to a's list; the id is checked against the vocabulary
   once the model is loaded */
static int demo_add_bias_option(demo_args *a, const char *s) {
    char *end;
    errno = 0;
    long id = strtol(s, &end, 10);
    const char *colon = end;
    double v = 0;
    int ok = end != s && *colon == ':' && !errno && id >= 0 && id < (1L << 30);
    if (ok) {
        v = strtod(colon + 1, &end);
        ok = colon[1] && !*end && v < INFINITY && (v > -INFINITY ? !errno : 1);
    }
    if (!ok) return demo_fail("--logit-bias expects ID:VALUE (a token id, then a number or -inf), got \"%s\"", s);
    const int n = a->gen.sampling.n_bias;
    int *ids = (int *)realloc(a->bias_ids, ((size_t)n + 1) * sizeof(int));
    if (ids) a->bias_ids = ids;
    float *bias = (float *)realloc(a->bias, ((size_t)n + 1) * sizeof(float));
    if (bias) a->bias = bias;
    if (!ids || !bias) return demo_fail("out of memory");
    a->bias_ids[n] = (int)id;
    a->bias[n] = (float)v;
    a->gen.sampling.n_bias = n + 1;
    return 1;
}

static void demo_strings_free(char **s, int n) {
    for (int i = 0; s && i < n; i++) free(s[i]);
    free(s);
}

static void demo_args_free(demo_args *a) {
    free(a->prompt);
    demo_strings_free(a->gen.stop, a->gen.n_stop);
    free(a->bias_ids);
    free(a->bias);
    a->prompt = NULL; a->gen.stop = NULL; a->gen.n_stop = 0; a->bias_ids = NULL; a->bias = NULL;
}

/* Reads argv into a; 1 when it is usable, else 0 with demo_error set. Touches no file. */
static int demo_parse_args(int argc, char **argv, demo_args *a) {
    memset(a, 0, sizeof *a);
    a->model_dir = "weights";
    a->gen.n_new = 128;
    a->gen.sampling.temperature = 0.8f;
    a->gen.sampling.top_k = 40;
    a->gen.sampling.top_p = 1.0f;
    a->gen.sampling.seed = 1337;
    a->gen.logprobs = -1;
    a->eos[0] = DEMO_EOS;
    a->n_eos = 1;
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
                   !strcmp(name, "--prepend-eos");
        if (!strcmp(name, "--score")) { /* --score FILE, or a flag before another option or at the end (--batch-file) */
            a->score = 1;
            if (!val && i + 1 < argc && (argv[i + 1][0] != '-' || !strcmp(argv[i + 1], "-"))) val = argv[++i];
            a->score_file = val;
            continue;
        }
        if (!strcmp(name, "--logprobs")) { /* --logprobs N when generating; alone, --score's flag */
            const char *next = i + 1 < argc ? argv[i + 1] : "", *digit = next + (next[0] == '-' || next[0] == '+');
            if (!val && *digit >= '0' && *digit <= '9') val = argv[++i];
            if (!val) { a->logprobs = 1; continue; }
            if (!demo_parse_number(DEMO_LOGPROBS, val, &a->gen)) return 0;
            a->given |= DEMO_GIVEN(DEMO_LOGPROBS);
            continue;
        }
        if (flag) {
            if (val) return demo_fail("%s takes no value", name);
            if (!strcmp(name, "-h") || !strcmp(name, "--help")) a->help = 1;
            else if (!strcmp(name, "--stats")) a->stats = 1;
            else if (!strcmp(name, "--prepend-eos")) a->prepend_eos = 1;
            else a->gen.stop_at_eos = 1;
            continue;
        }
        static const char *const valued[] = {"-m", "-f", "-o", "--seed", "--batch", "--backend", "--dtype", "--batch-file",
                                             "--spec", "--stride", "--stop", "--logit-bias", "--step-tokens"};
        int known = -1;
        for (int k = 0; k < DEMO_N_NUMBERS; k++) if (!strcmp(name, demo_numbers[k].flag)) known = k;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++) if (!strcmp(name, valued[k])) known = DEMO_N_NUMBERS;
        if (known < 0) return demo_fail("unknown option %s (see demo -h)", name);
        if (!val) {
            if (i + 1 >= argc) return demo_fail("%s needs a value (see demo -h)", name);
            val = argv[++i];
        }
        long v;
        if (known < DEMO_N_NUMBERS) {
            if (!demo_parse_number(known, val, &a->gen)) return 0;
            a->given |= DEMO_GIVEN(known);
        }
        else if (!strcmp(name, "-m")) a->model_dir = val;
        else if (!strcmp(name, "-f")) a->prompt_file = val;
        else if (!strcmp(name, "-o")) a->out_file = val;
        else if (!strcmp(name, "--batch-file")) a->batch_file = val;
        else if (!strcmp(name, "--batch")) { if (!demo_parse_long(name, val, 1, 1 << 20, &v)) return 0; a->batch = (int)v; }
        else if (!strcmp(name, "--spec")) { if (!demo_parse_long(name, val, 0, 1024, &v)) return 0; a->spec = (int)v; }
        else if (!strcmp(name, "--stride")) { if (!demo_parse_long(name, val, 1, 1 << 20, &v)) return 0; a->stride = (int)v; }
        else if (!strcmp(name, "--step-tokens")) { if (!demo_parse_long(name, val, 1, 262144, &v)) return 0; a->step_tokens = (int)v; }
        else if (!strcmp(name, "--stop")) { if (!demo_add_stop_option(&a->gen, val)) return 0; a->given |= DEMO_GIVEN_STOP; }
        else if (!strcmp(name, "--logit-bias")) { if (!demo_add_bias_option(a, val)) return 0; }
        else if (!strcmp(name, "--seed")) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(val, &end, 10);
            if (!*val || *end || errno || val[0] == '-') return demo_fail("--seed expects a whole number >= 0, got \"%s\"", val);
            a->gen.sampling.seed = (uint64_t)s;
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
    a->gen.sampling.bias_ids = a->bias_ids;
    a->gen.sampling.bias = a->bias;
    if (a->help) return 1;
    if (a->prompt && a->prompt_file) return demo_fail("give the prompt as words or with -f, not both");
    if (a->batch_file && (a->prompt || a->prompt_file)) return demo_fail("--batch-file takes its prompts from the file: give no prompt and no -f");
    if (a->batch_file && a->batch > 1) return demo_fail("--batch and --batch-file do not go together (each line of the file is a request)");
    if (a->out_file && !a->batch_file) return demo_fail("-o is for --batch-file results (generated text goes to standard output)");
    if (a->logprobs && !a->score) return demo_fail("--logprobs expects N (0..20 alternatives) when generating; alone it goes with --score");
    if (a->score && a->gen.logprobs >= 0) return demo_fail("--logprobs takes no N with --score (every scored token's is given)");
    if ((a->stride || a->prepend_eos) && !a->score) return demo_fail("--stride and --prepend-eos go with --score");
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

/* Is tok one of r's stop tokens (stop_token, stop_ids)? */
static int demo_is_stop_token(const gpt2_request *r, int tok) {
    if (tok == r->stop_token) return 1;
    for (int k = 0; k < r->n_stop_ids; k++) if (tok == r->stop_ids[k]) return 1;
    return 0;
}

/* Did r end at a stop (a stop token, or one of its stop strings)? */
static int demo_stopped(const gpt2_request *r) {
    return r->finish_reason == GPT2_FINISH_STOP || (r->n_out > 0 && demo_is_stop_token(r, r->out[r->n_out - 1]));
}

/* A request's generated text, as valid UTF-8 (malloc'd, NUL-terminated; *len its length), or NULL.
   The stop token that ended it is not part of the text (it stays in the tokens); nor is a stop string or what follows. */
static char *demo_decode(const gpt2_tokenizer *tok, const gpt2_request *r, size_t *len) {
    int n = r->n_out;
    const int *ids = r->out;
    if (n > 0 && demo_is_stop_token(r, ids[n - 1])) n--;
    int bytes = gpt2_decode(tok, ids, n, NULL, 0);
    if (bytes < 0) return NULL;
    char *raw = (char *)malloc((size_t)bytes + 1), *clean = (char *)malloc(3 * (size_t)bytes + 1);
    if (!raw || !clean || gpt2_decode(tok, ids, n, raw, (size_t)bytes) != bytes) { free(raw); free(clean); return NULL; }
    if (r->finish_reason == GPT2_FINISH_STOP && r->text_len >= 0 && r->text_len < bytes) bytes = r->text_len;
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
    char **stop; int n_stop; /* its stop strings and logit bias (the request points at them) */
    int *bias_ids; float *bias;
    float *logprobs;         /* with logprobs: [max_new_tokens], and the alternatives [max_new_tokens][top] */
    int *top_ids; float *top_logprobs;
} demo_job;

typedef struct demo_work {
    int n;
    demo_job *jobs;
    gpt2_request *reqs;
    int *out;                /* all outputs, max_new_tokens per request, back to back */
} demo_work;

static void demo_work_free(demo_work *w) {
    for (int i = 0; w->jobs && i < w->n; i++) {
        demo_job *j = &w->jobs[i];
        free(j->prompt); free(j->ids); demo_strings_free(j->stop, j->n_stop); free(j->bias_ids); free(j->bias);
        free(j->logprobs); free(j->top_ids); free(j->top_logprobs);
    }
    free(w->jobs); free(w->reqs); free(w->out);
    memset(w, 0, sizeof *w);
}

/* Adds a request: the prompt text is copied and encoded; p's parameters (their lists copied) given, with eos[0..n_eos)
   as its stop tokens when p->stop_at_eos. where: "" or "FILE: " or "FILE:LINE: ", to start error messages. */
static int demo_add(demo_work *w, const gpt2_tokenizer *tok, int max_seq, const char *where, const char *text, size_t len,
                    const demo_params *p, const int *eos, int n_eos) {
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
    if (n_ids + p->n_new > max_seq)
        return demo_fail("%sthe prompt is %d token%s; with %d new ones that exceeds the model's context of %d tokens "
                         "(at most %d new tokens fit)", where, n_ids, n_ids == 1 ? "" : "s", p->n_new, max_seq, max_seq - n_ids);
    req->prompt = job->ids;
    req->prompt_len = n_ids;
    req->max_new_tokens = p->n_new;
    req->sampling = p->sampling;
    req->stop_token = p->stop_at_eos ? eos[0] : -1;
    if (p->stop_at_eos && n_eos > 1) { req->stop_ids = eos + 1; req->n_stop_ids = n_eos - 1; }
    req->text_len = -1;
    /* the lists, copied: the request points at its own */
    const int nb = p->sampling.n_bias, room = p->n_new > 0 ? p->n_new : 1, top = p->logprobs > 0 ? p->logprobs : 0;
    if (nb) {
        job->bias_ids = (int *)malloc((size_t)nb * sizeof(int));
        job->bias = (float *)malloc((size_t)nb * sizeof(float));
        if (!job->bias_ids || !job->bias) return demo_fail("out of memory");
        memcpy(job->bias_ids, p->sampling.bias_ids, (size_t)nb * sizeof(int));
        memcpy(job->bias, p->sampling.bias, (size_t)nb * sizeof(float));
    }
    req->sampling.bias_ids = job->bias_ids;
    req->sampling.bias = job->bias;
    if (p->n_stop) {
        job->stop = (char **)calloc((size_t)p->n_stop, sizeof(char *));
        if (!job->stop) return demo_fail("out of memory");
        for (; job->n_stop < p->n_stop; job->n_stop++) {
            size_t n = strlen(p->stop[job->n_stop]) + 1;
            if (!(job->stop[job->n_stop] = (char *)malloc(n))) return demo_fail("out of memory");
            memcpy(job->stop[job->n_stop], p->stop[job->n_stop], n);
        }
        req->stop_strings = (const char *const *)job->stop;
        req->n_stop_strings = job->n_stop;
        req->tokenizer = tok;
    }
    if (p->logprobs >= 0) {
        job->logprobs = (float *)malloc((size_t)room * sizeof(float));
        job->top_ids = (int *)malloc((size_t)room * (top ? top : 1) * sizeof(int));
        job->top_logprobs = (float *)malloc((size_t)room * (top ? top : 1) * sizeof(float));
        if (!job->logprobs || !job->top_ids || !job->top_logprobs) return demo_fail("out of memory for logprobs");
        req->out_logprobs = job->logprobs;
        req->top_logprobs = top;
        req->out_top_ids = job->top_ids;
        req->out_top_logprobs = job->top_logprobs;
    }
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

/* JSON true or false at the cursor into *v; 0 when it is neither */
static int demo_json_bool(gpt2__json *j, int *v) {
    gpt2__json_ws(j);
    if (j->end - j->p >= 4 && !memcmp(j->p, "true", 4)) { *v = 1; j->p += 4; return 1; }
    if (j->end - j->p >= 5 && !memcmp(j->p, "false", 5)) { *v = 0; j->p += 5; return 1; }
    return 0;
}

/* JSON null at the cursor (then skipped)? */
static int demo_json_null(gpt2__json *j) {
    gpt2__json_ws(j);
    if (j->end - j->p < 4 || memcmp(j->p, "null", 4)) return 0;
    j->p += 4;
    return 1;
}

/* A string or a list of strings (key's value: "stop", "stop_strings"), each a stop string, replacing *list (whose owner
   frees it). where: "FILE:LINE: " or "FILE: ". */
static int demo_json_stop(gpt2__json *j, const char *where, const char *key, char ***list, int *n) {
    char what[1200];
    snprintf(what, sizeof what, "%s%s", where, key);
    demo_strings_free(*list, *n);
    *list = NULL;
    *n = 0;
    gpt2__json_ws(j);
    const int array = j->p < j->end && *j->p == '[';
    if (array) {
        j->p++;
        gpt2__json_ws(j);
        if (j->p < j->end && *j->p == ']') { j->p++; return 1; }
    }
    for (;;) {
        gpt2__json_ws(j);
        if (j->p >= j->end || *j->p != '"') return demo_fail("%s: expected a string or a list of strings", what);
        gpt2__json k = *j;
        size_t len;
        if (gpt2__json_string(&k, NULL, &len)) return demo_fail("%s", gpt2_last_error());
        char *s = (char *)malloc(len + 1), **l = (char **)realloc(*list, ((size_t)*n + 1) * sizeof *l);
        if (l) *list = l;
        if (!s || !l) { free(s); return demo_fail("out of memory"); }
        gpt2__json_string(j, s, NULL);
        s[len] = 0;
        (*list)[(*n)++] = s;
        if (!demo_stop_ok(what, s, len)) return 0;
        if (!array) return 1;
        gpt2__json_ws(j);
        if (j->p < j->end && *j->p == ',') { j->p++; continue; }
        if (j->p < j->end && *j->p == ']') { j->p++; return 1; }
        return demo_fail("%s: expected ',' or ']' in the list", what);
    }
}

/* "logit_bias": {"ID": V, ...} (V a number, or "-inf" to ban), replacing the line's list (*ids, *bias, *n) */
static int demo_json_bias(gpt2__json *j, const char *where, int n_vocab, int **ids, float **bias, int *n) {
    free(*ids); free(*bias);
    *ids = NULL; *bias = NULL; *n = 0;
    gpt2__json_ws(j);
    if (j->p >= j->end || *j->p != '{') return demo_fail("%slogit_bias: expected an object {\"ID\": value, ...}", where);
    int first = 1, r;
    char key[32];
    size_t klen;
    while ((r = gpt2__json_member(j, &first, key, sizeof key, &klen)) == 1) {
        char *end;
        errno = 0;
        long id = strtol(key, &end, 10);
        if (klen >= sizeof key || key[0] < '0' || key[0] > '9' || *end || errno || id >= n_vocab)
            return demo_fail("%slogit_bias: \"%s\" is not a token id (0..%d)", where, klen >= sizeof key ? "(a long key)" : key, n_vocab - 1);
        double v;
        gpt2__json_ws(j);
        if (j->p < j->end && *j->p == '"') {
            char s[8];
            size_t sl;
            gpt2__json k = *j;
            if (gpt2__json_string(&k, NULL, &sl)) return demo_fail("%s", gpt2_last_error());
            if (sl < sizeof s) { gpt2__json_string(j, s, NULL); s[sl] = 0; }
            if (sl >= sizeof s || strcmp(s, "-inf")) return demo_fail("%slogit_bias[\"%s\"]: a number, or \"-inf\" to ban", where, key);
            v = -INFINITY;
        } else {
            if (gpt2__json_number(j, &v)) return demo_fail("%s", gpt2_last_error());
            if (!(fabs(v) <= 1e30)) return demo_fail("%slogit_bias[\"%s\"] = %g: a number in -1e30..1e30, or \"-inf\" to ban", where, key, v);
        }
        int *ni = (int *)realloc(*ids, ((size_t)*n + 1) * sizeof(int));
        if (ni) *ids = ni;
        float *nb = (float *)realloc(*bias, ((size_t)*n + 1) * sizeof(float));
        if (nb) *bias = nb;
        if (!ni || !nb) return demo_fail("out of memory");
        (*ids)[*n] = (int)id;
        (*bias)[(*n)++] = (float)v;
    }
    if (r != 0) return demo_fail("%s", gpt2_last_error());
    return 1;
}

/* One JSON Lines object: {"prompt": "...", and optional parameters, each replacing its option's value}. */
static int demo_add_json_line(demo_work *w, const gpt2_tokenizer *tok, int max_seq, int n_vocab, const demo_args *a,
                              const char *where, const char *file_line, const char *text, size_t len) {
    gpt2__json j = {text, text, text + len, file_line, 0};
    demo_params p = a->gen;
    p.sampling.seed = a->gen.sampling.seed + (uint64_t)w->n;
    char **stop = NULL;      /* the line's own lists, once it gives them */
    int n_stop = 0, *bias_ids = NULL, n_bias = 0, own_stop = 0, own_bias = 0;
    float *bias = NULL;
    int first = 1, r = 0, ok = 1;
    char key[32], *prompt = NULL;
    size_t klen, plen = 0;
    while (ok && (r = gpt2__json_member(&j, &first, key, sizeof key, &klen)) == 1) {
        double v;
        int k = -1;
        gpt2__json_ws(&j);
        if (!strcmp(key, "prompt")) {
            gpt2__json s = j;
            if (gpt2__json_string(&s, NULL, &plen)) { ok = demo_fail("%s", gpt2_last_error()); break; }
            free(prompt);
            prompt = (char *)malloc(plen + 1);
            if (!prompt) { ok = demo_fail("out of memory"); break; }
            gpt2__json_string(&j, prompt, NULL);
            continue;
        }
        if (!strcmp(key, "stop_at_eos")) {
            if (!demo_json_bool(&j, &p.stop_at_eos)) ok = demo_fail("%sstop_at_eos must be true or false", where);
            continue;
        }
        if (!strcmp(key, "stop")) { own_stop = 1; ok = demo_json_stop(&j, where, "stop", &stop, &n_stop); continue; }
        if (!strcmp(key, "logit_bias")) { own_bias = 1; ok = demo_json_bias(&j, where, n_vocab, &bias_ids, &bias, &n_bias); continue; }
        if (!strcmp(key, "logprobs") && demo_json_null(&j)) { p.logprobs = -1; continue; }
        for (int i = 0; i < DEMO_N_NUMBERS; i++) if (!strcmp(key, demo_numbers[i].key)) k = i;
        if (k < 0 && strcmp(key, "seed")) {
            ok = demo_fail("%sunknown key \"%s\" (prompt, max_new_tokens, temperature, top_k, top_p, seed, stop_at_eos, "
                           "repetition_penalty, presence_penalty, frequency_penalty, no_repeat_ngram_size, min_p, typical_p, "
                           "min_new_tokens, stop, logit_bias, logprobs)", where, key);
            break;
        }
        if (gpt2__json_number(&j, &v)) { ok = demo_fail("%s", gpt2_last_error()); break; }
        if (k < 0) { /* seed */
            if (v >= 0 && v < 9007199254740992.0 && v == (double)(long long)v) p.sampling.seed = (uint64_t)v;
            else ok = demo_fail("%sseed = %g is out of range (a whole number in 0..2^53)", where, v);
        } else if (demo_number_ok(k, v)) demo_number_set(&p, k, v);
        else ok = demo_fail("%s%s = %g is out of range (%s)", where, key, v, demo_number_range(k));
    }
    if (ok && r != 0) ok = demo_fail("%s", gpt2_last_error());
    if (ok) { gpt2__json_ws(&j); if (j.p != j.end) ok = demo_fail("%stext after the JSON object", where); }
    if (ok && !prompt) ok = demo_fail("%sno \"prompt\"", where);
    if (own_stop) { p.stop = stop; p.n_stop = n_stop; }
    if (own_bias) { p.sampling.bias_ids = bias_ids; p.sampling.bias = bias; p.sampling.n_bias = n_bias; }
    if (ok) ok = demo_add(w, tok, max_seq, where, prompt, plen, &p, a->eos, a->n_eos);
    free(prompt);
    demo_strings_free(stop, n_stop);
    free(bias_ids);
    free(bias);
    return ok;
}

/* generation_config.json in the model directory (Hugging Face's GenerationConfig): the defaults of the options not
   given, from the keys it holds (the usage lists them; null is as absent, other keys are ignored). No file is no error. */
static int demo_generation_config(demo_args *a) {
    char path[1100], *text;
    size_t len;
    snprintf(path, sizeof path, "%.1000s/generation_config.json", a->model_dir);
    if (access(path, F_OK)) return 1;
    if (gpt2__read_file(path, &text, &len)) return demo_fail("%s", gpt2_last_error());
    gpt2__json j = {text, text, text + len, path, 0};
    demo_params g = a->gen;
    g.stop = NULL;
    g.n_stop = 0;
    unsigned set = 0;
    int first = 1, r = 0, ok = 1, do_sample = -1, eos[DEMO_MAX_EOS], n_eos = 0;
    char key[64];
    size_t klen;
    while (ok && (r = gpt2__json_member(&j, &first, key, sizeof key, &klen)) == 1) {
        int k = -1;
        double v;
        for (int i = 0; i < DEMO_LOGPROBS; i++) if (!strcmp(key, demo_numbers[i].key)) k = i;
        if (demo_json_null(&j)) continue;
        if (k >= 0) {
            if (gpt2__json_number(&j, &v)) ok = demo_fail("%s", gpt2_last_error());
            else if (!demo_number_ok(k, v)) ok = demo_fail("%s: %s = %g is out of range (%s)", path, key, v, demo_number_range(k));
            else { demo_number_set(&g, k, v); set |= DEMO_GIVEN(k); }
        } else if (!strcmp(key, "do_sample")) {
            if (!demo_json_bool(&j, &do_sample)) ok = demo_fail("%s: do_sample must be true or false", path);
        } else if (!strcmp(key, "eos_token_id")) { /* a token id or a list of them */
            gpt2__json_ws(&j);
            const int array = j.p < j.end && *j.p == '[';
            if (array) j.p++;
            for (n_eos = 0;;) {
                gpt2__json_ws(&j);
                if (array && !n_eos && j.p < j.end && *j.p == ']') { j.p++; break; }
                if (gpt2__json_number(&j, &v)) { ok = demo_fail("%s", gpt2_last_error()); break; }
                if (!(v >= 0 && v < (1 << 30) && v == (double)(long)v)) { ok = demo_fail("%s: eos_token_id %g is not a token id", path, v); break; }
                if (n_eos == DEMO_MAX_EOS) { ok = demo_fail("%s: eos_token_id lists more than %d ids", path, DEMO_MAX_EOS); break; }
                eos[n_eos++] = (int)v;
                if (!array) break;
                gpt2__json_ws(&j);
                if (j.p < j.end && *j.p == ',') { j.p++; continue; }
                if (j.p < j.end && *j.p == ']') { j.p++; break; }
                ok = demo_fail("%s: eos_token_id: expected ',' or ']'", path);
                break;
            }
        } else if (!strcmp(key, "stop_strings")) {
            char where[1104];
            snprintf(where, sizeof where, "%s: ", path);
            ok = demo_json_stop(&j, where, "stop_strings", &g.stop, &g.n_stop);
        } else if (gpt2__json_skip(&j)) ok = demo_fail("%s", gpt2_last_error());
    }
    if (ok && r != 0) ok = demo_fail("%s", gpt2_last_error());
    if (ok) { gpt2__json_ws(&j); if (j.p != j.end) ok = demo_fail("%s: text after the JSON object", path); }
    free(text);
    if (!ok) { demo_strings_free(g.stop, g.n_stop); return 0; }
    /* what the file says, where no option said otherwise */
    for (int k = 0; k < DEMO_LOGPROBS; k++) {
        if (!(set & DEMO_GIVEN(k)) || (a->given & DEMO_GIVEN(k))) continue;
        switch (k) {
        case DEMO_N_NEW: a->gen.n_new = g.n_new; break;
        case DEMO_TEMPERATURE: a->gen.sampling.temperature = g.sampling.temperature; break;
        case DEMO_TOP_K: a->gen.sampling.top_k = g.sampling.top_k; break;
        case DEMO_TOP_P: a->gen.sampling.top_p = g.sampling.top_p; break;
        case DEMO_MIN_P: a->gen.sampling.min_p = g.sampling.min_p; break;
        case DEMO_TYPICAL_P: a->gen.sampling.typical_p = g.sampling.typical_p; break;
        case DEMO_REPETITION: a->gen.sampling.repetition_penalty = g.sampling.repetition_penalty; break;
        case DEMO_PRESENCE: a->gen.sampling.presence_penalty = g.sampling.presence_penalty; break;
        case DEMO_FREQUENCY: a->gen.sampling.frequency_penalty = g.sampling.frequency_penalty; break;
        case DEMO_NO_REPEAT: a->gen.sampling.no_repeat_ngram = g.sampling.no_repeat_ngram; break;
        default: a->gen.sampling.min_new_tokens = g.sampling.min_new_tokens; break;
        }
    }
    if (do_sample == 0 && !(a->given & DEMO_GIVEN(DEMO_TEMPERATURE))) a->gen.sampling.temperature = 0.0f;
    if (n_eos) { memcpy(a->eos, eos, (size_t)n_eos * sizeof(int)); a->n_eos = n_eos; }
    if (g.n_stop && !(a->given & DEMO_GIVEN_STOP)) {
        demo_strings_free(a->gen.stop, a->gen.n_stop);
        a->gen.stop = g.stop;
        a->gen.n_stop = g.n_stop;
    } else demo_strings_free(g.stop, g.n_stop);
    return 1;
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

/* The requests: --batch copies of the prompt (seeds S, S+1, ...) or one per line of the batch file. The options'
   token ids (--logit-bias, generation_config.json's eos_token_id) are checked against the vocabulary here. */
static int demo_make_work(demo_work *w, const demo_args *a, const gpt2_tokenizer *tok, int max_seq, int n_vocab,
                          const char *input, size_t len) {
    memset(w, 0, sizeof *w);
    char where[1104], file_line[1100];
    for (int k = 0; k < a->gen.sampling.n_bias; k++)
        if (a->bias_ids[k] >= n_vocab)
            return demo_fail("--logit-bias: %d is not a token id (0..%d)", a->bias_ids[k], n_vocab - 1);
    for (int k = 0; k < a->n_eos; k++)
        if (a->eos[k] >= n_vocab && (k || a->eos[k] != DEMO_EOS))
            return demo_fail("generation_config.json: eos_token_id %d is not a token id (0..%d)", a->eos[k], n_vocab - 1);
    if (!a->batch_file) {
        where[0] = 0;
        if (a->prompt_file) snprintf(where, sizeof where, "%s: ", strcmp(a->prompt_file, "-") ? a->prompt_file : "standard input");
        for (int i = 0; i < a->batch; i++) {
            demo_params p = a->gen;
            p.sampling.seed = a->gen.sampling.seed + (uint64_t)i;
            if (!demo_add(w, tok, max_seq, where, input, len, &p, a->eos, a->n_eos)) return 0;
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
            if (jsonl) ok = demo_add_json_line(w, tok, max_seq, n_vocab, a, where, file_line, p, n);
            else {
                demo_params q = a->gen;
                q.sampling.seed = a->gen.sampling.seed + (uint64_t)w->n;
                ok = demo_add(w, tok, max_seq, where, p, n, &q, a->eos, a->n_eos);
            }
        }
        p = next;
    }
    if (ok && w->n == 0) return demo_fail("%s: no prompts in the file", a->batch_file);
    return ok && demo_alloc_outputs(w);
}

/* ---------------------------------------------------------------- output: streamed samples, JSON Lines */

/* Token id's text as a JSON string (valid UTF-8: part of a character shows U+FFFD) */
static void demo_json_token(FILE *f, const gpt2_tokenizer *tok, int id) {
    char raw[1024], clean[3 * sizeof raw];
    size_t n;
    int b = gpt2_decode(tok, &id, 1, raw, sizeof raw);
    b = b < 0 ? 0 : b > (int)sizeof raw ? (int)sizeof raw : b;
    demo_utf8_clean(raw, (size_t)b, 1, clean, &n);
    demo_json_string(f, clean, n);
}

/* A JSON number, or null for what JSON cannot hold (NaN, infinities) */
static void demo_json_number(FILE *f, const char *fmt, double v) {
    if (v == v && v - v == 0) fprintf(f, fmt, v);
    else fputs("null", f);
}

/* --logprobs without --batch-file: a table after the sample, one line per generated token */
static void demo_print_logprobs(const gpt2_tokenizer *tok, const gpt2_request *r) {
    const int k = r->top_logprobs;
    if (!r->out_logprobs) return;
    printf("--- logprobs: place, token, log-probability, text");
    if (k) printf(" | the %d most likely there: token, text, log-probability", k);
    printf(" ---\n");
    for (int t = 0; t < r->n_out; t++) {
        printf("%5d %6d %10.4f ", t, r->out[t], (double)r->out_logprobs[t]);
        demo_json_token(stdout, tok, r->out[t]);
        for (int a = 0; a < k; a++) {
            printf(a ? ", %d " : "  | %d ", r->out_top_ids[(size_t)t * k + a]);
            demo_json_token(stdout, tok, r->out_top_ids[(size_t)t * k + a]);
            printf(" %.4f", (double)r->out_top_logprobs[(size_t)t * k + a]);
        }
        putchar('\n');
    }
}

#ifndef GPT2_DEMO_MPI /* streaming happens in one process; under MPI rank 0 prints at the end */

/* Sample mode: the sample being shown streams live; the others collect their text until their turn. */
typedef struct demo_stream {
    const gpt2_tokenizer *tok;
    const demo_work *w;
    int shown;               /* the sample printed live; all before it are complete */
    char **text;             /* per sample: decoded bytes so far */
    size_t *len, *cap, *flushed;
    size_t *safe;            /* per sample: bytes no stop string can reach into (all of them without stop strings) */
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

/* Prints what sample i has that is not printed yet: up to where a stop string may still begin, or, when final, all of
   its text (up to the stop string that ended it). */
static void demo_flush_sample(demo_stream *s, int i, int final) {
    const gpt2_request *r = &s->w->reqs[i];
    size_t upto = final ? s->len[i] : s->safe[i], out;
    if (final && r->finish_reason == GPT2_FINISH_STOP && r->text_len >= 0 && (size_t)r->text_len < upto) upto = (size_t)r->text_len;
    if (upto <= s->flushed[i]) return;
    size_t n = upto - s->flushed[i];
    if (3 * n + 1 > s->scratch_cap) {
        char *p = (char *)realloc(s->scratch, 3 * n + 1);
        if (!p) { s->failed = 1; return; }
        s->scratch = p;
        s->scratch_cap = 3 * n + 1;
    }
    s->flushed[i] += demo_utf8_clean(s->text[i] + s->flushed[i], n, final, s->scratch, &out);
    fwrite(s->scratch, 1, out, stdout);
}

/* Sample i is complete: the rest of its text, and its logprobs */
static void demo_finish_sample(demo_stream *s, int i) {
    demo_flush_sample(s, i, 1);
    putchar('\n');
    demo_print_logprobs(s->tok, &s->w->reqs[i]);
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
    /* this token's bytes (none for a stop token: it ends the text) */
    const int stop = demo_is_stop_token(r, token);
    int n = stop ? 0 : gpt2_decode(s->tok, &token, 1, NULL, 0);
    if (n < 0) { s->failed = 1; return 1; }
    if (s->len[request] + (size_t)n + 1 > s->cap[request]) {
        size_t cap = 2 * (s->len[request] + (size_t)n) + 64;
        char *p = (char *)realloc(s->text[request], cap);
        if (!p) { s->failed = 1; return 1; }
        s->text[request] = p;
        s->cap[request] = cap;
    }
    /* a stop string this token completes begins at most its length - 1 bytes before the token's */
    size_t longest = 0;
    for (int k = 0; k < r->n_stop_strings; k++) { size_t l = strlen(r->stop_strings[k]); longest = l > longest ? l : longest; }
    s->safe[request] = !longest ? s->len[request] + (size_t)n : s->len[request] + 1 > longest ? s->len[request] + 1 - longest : 0;
    if (n) gpt2_decode(s->tok, &token, 1, s->text[request] + s->len[request], (size_t)n);
    s->len[request] += (size_t)n;
    /* it ended here unless a stop string may end it instead (the engine says so after this call: finish_reason) */
    if (stop || (nth >= r->max_new_tokens && !r->n_stop_strings)) s->done[request] = 1;
    /* print the shown sample's new text; when it is complete, move on to the next */
    while (s->shown < s->w->n) {
        int i = s->shown;
        s->done[i] |= s->w->reqs[i].finish_reason != GPT2_FINISH_NONE;
        if (!s->done[i]) { demo_flush_sample(s, i, 0); break; }
        demo_finish_sample(s, i);
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
    fprintf(j->f, "], \"finish_reason\": \"%s\"", demo_stopped(r) ? "stop" : "length");
    if (r->out_logprobs) {
        const int k = r->top_logprobs;
        fputs(", \"logprobs\": [", j->f);
        for (int t = 0; t < r->n_out; t++) {
            fprintf(j->f, "%s{\"token\": %d, \"text\": ", t ? ", " : "", r->out[t]);
            demo_json_token(j->f, j->tok, r->out[t]);
            fputs(", \"logprob\": ", j->f);
            demo_json_number(j->f, "%.9g", r->out_logprobs[t]);
            fputs(", \"top\": [", j->f);
            for (int a = 0; a < k; a++) {
                fprintf(j->f, "%s{\"token\": %d, \"text\": ", a ? ", " : "", r->out_top_ids[(size_t)t * k + a]);
                demo_json_token(j->f, j->tok, r->out_top_ids[(size_t)t * k + a]);
                fputs(", \"logprob\": ", j->f);
                demo_json_number(j->f, "%.9g", r->out_top_logprobs[(size_t)t * k + a]);
                fputs("}", j->f);
            }
            fputs("]}", j->f);
        }
        fputs("]", j->f);
    }
    fputs("}\n", j->f);
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
    /* this token is already in out and counted in n_out; the request ends here unless a stop string may end it instead
       (then its finish_reason, set after this call, says so) */
    if (demo_is_stop_token(r, token) || (nth >= r->max_new_tokens && !r->n_stop_strings)) j->done[request] = 1;
    const int first = j->next;
    while (j->next < j->w->n) {
        j->done[j->next] |= j->w->reqs[j->next].finish_reason != GPT2_FINISH_NONE;
        if (!j->done[j->next]) break;
        if (!demo_jsonl_write(j, j->next++)) j->failed = 1;
    }
    if (j->next > first) fflush(j->f);
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
    demo_args_free(a);
    return rc;
}

/* The -o file (or standard output), opened before the model loads; NULL with demo_error set. */
static FILE *demo_open_output(const demo_args *a) {
    if (!a->out_file) return stdout;
    FILE *f = fopen(a->out_file, "w");
    if (!f) demo_fail("%s: cannot write (%s)", a->out_file, strerror(errno));
    return f;
}

/* Scoring's step when --step-tokens is not given: 16 windows of 1024 a step */
#define DEMO_SCORE_STEP 16384

static gpt2_options demo_options(const demo_args *a) {
    gpt2_options o = gpt2_default_options();
    o.backend = a->backend;
    o.dtype = a->dtype;
    o.step_tokens = a->step_tokens ? a->step_tokens : a->score ? DEMO_SCORE_STEP : 0;
    return o;
}


/* ---------------------------------------------------------------- scoring: --score */

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

#ifndef GPT2_DEMO_MPI
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
#else
/* demo_mpi: every text in one gpt2_mpi_score call, which shares the texts out across the ranks (rank 0 passes them,
   the others call demo_score_other); no progress bar between */
static gpt2_status demo_score_all(gpt2_model *m, demo_text *t, int n, demo_bar *b) {
    gpt2_score_request *group = (gpt2_score_request *)malloc((size_t)(n ? n : 1) * sizeof *group);
    int g = 0;
    for (int i = 0; group && i < n; i++) if (t[i].r.n_tokens) group[g++] = t[i].r;
    gpt2_status st = gpt2_mpi_score(MPI_COMM_WORLD, m, group, group ? g : 0);
    for (int i = 0, x = 0; group && !st && i < n; i++)
        if (t[i].r.n_tokens) { t[i].r = group[x++]; b->done += t[i].r.n_scored; }
    free(group);
    return group ? st : GPT2_ERR_OOM;
}

/* demo_mpi --score on ranks other than 0: learn whether rank 0 read its texts, then take a share of them */
static int demo_score_other(gpt2_model *m) {
    int ok = 0;
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return ok ? gpt2_mpi_score(MPI_COMM_WORLD, m, NULL, 0) != GPT2_OK : 1;
}
#endif

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

/* --score: the file's (or each JSON line's) token count, log-probabilities and perplexity; 0 on success */
static int demo_score(const demo_args *a, gpt2_model *m, const gpt2_tokenizer *tok, const char *input, size_t len, FILE *f) {
    demo_text *t = NULL;
    int n = 0, rc = 1;
    int prepared = demo_score_texts(a, tok, input, len, &t, &n);
#ifdef GPT2_DEMO_MPI
    MPI_Bcast(&prepared, 1, MPI_INT, 0, MPI_COMM_WORLD); /* the other ranks wait in demo_score_other */
#endif
    if (!prepared) { demo_setup_error(demo_error); demo_texts_free(t, n); return 1; }
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

#if !defined(GPT2_DEMO_MPI) && !defined(DEMO_NO_MAIN)

int main(int argc, char **argv) {
    demo_args a;
    if (!demo_parse_args(argc, argv, &a)) { fprintf(stderr, "demo: %s\n", demo_error); demo_args_free(&a); return 2; }
    if (a.help) { fputs(demo_usage, stdout); demo_args_free(&a); return 0; }
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
    char *input = a.score || demo_generation_config(&a) ? demo_read_input(&a, &input_len) : NULL;
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
    if (!demo_make_work(&w, &a, tok, gpt2_model_max_seq(m), gpt2_model_config(m).n_vocab, input, input_len)) {
        demo_setup_error(demo_error);
        goto done;
    }
    if (a.stats) demo_print_setup(m, load_s, 1);

    if (!a.batch_file) {
        demo_stream s;
        memset(&s, 0, sizeof s);
        s.tok = tok; s.w = &w; s.in_prefill = 1;
        s.text = (char **)calloc((size_t)w.n, sizeof(char *));
        s.len = (size_t *)calloc((size_t)w.n, sizeof(size_t));
        s.cap = (size_t *)calloc((size_t)w.n, sizeof(size_t));
        s.flushed = (size_t *)calloc((size_t)w.n, sizeof(size_t));
        s.safe = (size_t *)calloc((size_t)w.n, sizeof(size_t));
        s.done = (int *)calloc((size_t)w.n, sizeof(int));
        s.count = (int *)calloc((size_t)w.n, sizeof(int));
        if (!s.text || !s.len || !s.cap || !s.flushed || !s.safe || !s.done || !s.count) demo_setup_error("out of memory");
        else {
            demo_show_header(&s, 0);
            fflush(stdout);
            s.t_start = demo_now();
            gpt2_status st = gpt2_generate(m, w.reqs, w.n, demo_stream_token, &s);
            /* samples that ended early (max_new_tokens 0) or by the engine: print what is left, in order */
            for (; st == GPT2_OK && s.shown < w.n; ) {
                demo_finish_sample(&s, s.shown);
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
        free(s.text); free(s.len); free(s.cap); free(s.flushed); free(s.safe); free(s.done); free(s.count); free(s.scratch);
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

#elif defined(GPT2_DEMO_MPI) && !defined(DEMO_NO_MAIN) /* rank 0 holds the requests; gpt2_mpi_generate shares them out */

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
        demo_args_free(&a);
        MPI_Finalize();
        return help ? 0 : 2;
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
        input = a.score || demo_generation_config(&a) ? demo_read_input(&a, &input_len) : NULL;
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
        else if (!a.score) ok = demo_make_work(&w, &a, tok, gpt2_model_max_seq(m), gpt2_model_config(m).n_vocab, input, input_len);
        if (!ok) demo_setup_error(demo_error);
        else if (a.stats) demo_print_setup(m, demo_now() - t0, ranks);
    }
    if (!demo_mpi_all_ok(ok)) goto done;
    if (a.score) { /* rank 0 reads and prints the texts; every rank scores a share */
        rc = rank == 0 ? demo_score(&a, m, tok, input, input_len, results) : demo_score_other(m);
        goto done;
    }
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
                    demo_print_logprobs(tok, &w.reqs[i]);
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

#endif /* main */
