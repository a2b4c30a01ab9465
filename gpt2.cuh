/* gpt2.cuh — GPT-2 inference in one file: CPU reference backend and CUDA backend.  [GPT2:MANUAL]
   Version: GPT2_VERSION (below the manual).

   Do this:
       #define GPT2_IMPLEMENTATION
   before you include this file in *one* C or C++ (or CUDA) file to create the implementation.
   Every other file includes it plainly and sees only the API below.

   Build:
       nvcc -x cu -O3 -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_80,code=sm_80 \
            -Xcompiler -fopenmp app.c -lcublasLt -lcublas -lgomp     (CUDA + CPU backends)
       cc -O3 -fopenmp -x c -DGPT2_NO_CUDA app.c -lm                  (CPU backend only, plain C99)
   The CUDA backend exists when the implementation is compiled by nvcc (__CUDACC__) and
   GPT2_NO_CUDA is not defined; a GPU older than the oldest target built for is refused with a
   reason (tested on sm_90; the Makefile builds sm_80 and sm_90a, whose wgmma the prompt attention uses at head
   size 64: a plain sm_90 build runs it on mma.sync, the same bits).
   OpenMP threads the CPU backend (optional: one thread without -fopenmp).
   Batch sharding across GPUs and nodes with MPI: gpt2_mpi.h, beside this file.

   Configuration macros (define before the implementation include; defaults in [GPT2:CONFIG]):
       GPT2_NO_CUDA           leave the CUDA backend out even under nvcc
       GPT2_NO_CLONES         no AVX2 + FMA and AVX-512 builds of the CPU backend's products and attention beside
                              the baseline one (x86-64 Linux, glibc, GCC/Clang: the CPU picks one at load; their fused
                              multiply-adds round the last bits differently). Off by itself under ThreadSanitizer
       GPT2_MALLOC(n), GPT2_CALLOC(n,s), GPT2_FREE(p)   host allocator (default: stdlib)
       GPT2_MAX_ERROR         length of the error message buffer (default 512)
       GPT2_MAX_TEXT_FILE     largest config.json / vocab.json / merges.txt read (default 256 MB)
       GPT2_GEMM_REF_ROWS     CUDA: decode rows of a weight compute what the cuBLASLt algorithm picked for this
                              many rows computes (any tile of its class, whatever the step's rows), so a
                              request's output never depends on its batch (default 128)
       GPT2_GEMM_PROMPT_ROWS  CUDA: the same for prompt rows (default 4096), whatever options.step_tokens is
       GPT2_SPLIT_MIN_K       CUDA: decode rows of the two linear layers that feed the residual (attention
                              projection, MLP projection) split K into up to 4 fixed pieces of at least this
                              many (default 384; a large value turns split-K off)
       GPT2_SPEC_TOKENS       gpt2_generate: most draft tokens (prompt lookup) a decoding request verifies in one
                              step, beside its last token (default 8; 0: no speculation). The output is the same
                              token for token either way; only the tokens a step yields change
       GPT2_ATT_SMS           CUDA: SMs a decode step of many rows at long contexts keeps for its attention, the
                              rest running its other kernels beside it (CUDA green contexts; default 56 on a GPU
                              of under 4 TB/s memory bandwidth such as the H100, 64 from it such as the H200;
                              0: no SM split, every kernel on every SM)
       GPT2_CTL_INTS          CUDA: room for one request's lists on the GPU, 2 ints a logit-bias entry and 1 a stop
                              id (default 4096; a request beyond it is refused)

   Sections (search for the tag, e.g. "[GPT2:OP_FEW_ROW"):
       [GPT2:MANUAL] this text          [GPT2:API] public API          [GPT2:CONFIG] every tuning knob
       [GPT2:UTIL] errors, files, JSON  [GPT2:MODEL] model + loader    [GPT2:TOKENIZER] byte-level BPE
       [GPT2:SAMPLER] sampling rule     [GPT2:CPU] CPU reference backend
       [GPT2:ENGINE] load, forward, generate, score (calls the CPU backend above, the CUDA backend below)
       CUDA backend: [GPT2:CUDA] overview  [GPT2:CUDA_PRIM] GPU primitives  [GPT2:CUDA_STATE] state, lanes, launch
         one per operation, kernel + launcher + capability check together, in forward order:
         [GPT2:OP_LN] embedding, residual + layer norm   [GPT2:OP_ACT]    [GPT2:OP_GEMM] cuBLASLt products
         [GPT2:OP_FEW_ROW] few-row products, ln_fold     [GPT2:OP_LINEAR] a linear layer, split-K
         [GPT2:OP_ATTN_DECODE]   [GPT2:OP_ATTN_PREFILL]   [GPT2:OP_ATTN] a layer's attention   [GPT2:OP_SAMPLE]
         [GPT2:PATHS] every path choice   [GPT2:FORWARD] a forward pass   [GPT2:PARTS] two-part mode
         [GPT2:STEP] step + graphs   [GPT2:CUDA_INIT]
       [GPT2:LICENSE]

   Models: a Hugging Face GPT2LMHeadModel directory as published: config.json + model.safetensors, its shards
   (model-0000K-of-0000N.safetensors + model.safetensors.index.json), or pytorch_model.bin (zip format, torch 1.6+;
   also sharded with its index), read as data by a restricted reader that executes nothing. F32/F16/BF16 tensors,
   either key layout. config.json's activation_function (gelu_new, gelu_pytorch_tanh, gelu_fast, gelu, quick_gelu,
   relu), n_inner, scale_attn_weights, scale_attn_by_inverse_layer_idx and tie_word_embeddings (false: lm_head.weight
   is its own matrix) are honoured on both backends (on the GPU an activation other than the tanh GELU runs as its
   own pass after the prompt rows' product, with the same bits rule). Whatever the loader cannot run it
   refuses, naming the field or file (a tied head beside a differing lm_head.weight, cross-attention, a legacy
   torch file, TensorFlow or Flax weights alone).
   The files are mapped while gpt2_load runs; the CUDA backend uploads its bytes (through 64 MB of pinned host
   buffers, freed after) and keeps the weights on the GPU only, the CPU backend converts them into a copy it keeps,
   in options.dtype (F32 by default; F16 and BF16 halve its memory and a decode step's reads: weights and KV cache in
   that dtype, arithmetic in float32).
   Tokenizer: vocab.json + merges.txt (or encoder.json + vocab.bpe), else tokenizer.json (byte-level BPE), byte-exact
   with tiktoken; added tokens (tokenizer.json's, or added_tokens.json) decode to their text, and gpt2_token_id finds
   a special token's id to put in a prompt.

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

   Threads: a model serves one call at a time; separate models run on separate threads at once; a tokenizer may
   be shared by any number of threads (encode and decode only read it). The last error is per thread.

   License: MIT, at the end of this file ([GPT2:LICENSE]).
*/

#ifndef GPT2_CUH
#define GPT2_CUH
#define GPT2_VERSION "0.9.0"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define GPT2_API extern "C"
#else
#define GPT2_API extern
#endif

/* == [GPT2:API] == public API =================================================================================== */

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
    int step_tokens;        /* prompt tokens one engine step may take (gpt2_generate's prompts; on the GPU gpt2_score's
                               windows too); 0: 4096 on the GPU, 2048 on the CPU. More: faster scoring and long
                               prompts for more GPU memory (the step's activations) */
} gpt2_options;
GPT2_API gpt2_options gpt2_default_options(void);

typedef struct gpt2_config { int n_layer, n_head, n_embd, n_ctx, n_vocab; float ln_eps; } gpt2_config;
typedef struct gpt2_model gpt2_model;
/* path: a model directory (config.json + model.safetensors, its shards with their index, or pytorch_model.bin), or
   one such weights file or index (config then from config.json beside it). opt may be NULL. */
GPT2_API gpt2_status gpt2_load(gpt2_model **model, const char *path, const gpt2_options *opt);
GPT2_API void        gpt2_free(gpt2_model *model);
GPT2_API gpt2_config gpt2_model_config(const gpt2_model *model);
/* logits for every position: tokens [B][T] -> logits [B][T][n_vocab], float32, host memory */
GPT2_API gpt2_status gpt2_forward(gpt2_model *model, const int *tokens, int B, int T, float *logits);

typedef struct gpt2_tokenizer gpt2_tokenizer;
/* path: a directory holding vocab.json + merges.txt (or encoder.json + vocab.bpe), else Hugging Face's
   tokenizer.json (a byte-level BPE). Added tokens (tokenizer.json's added_tokens, else added_tokens.json)
   decode to their text. */
GPT2_API gpt2_status gpt2_tokenizer_load(gpt2_tokenizer **tok, const char *path);
GPT2_API void gpt2_tokenizer_free(gpt2_tokenizer *tok);
/* both return the full count (ids or bytes) even when it exceeds cap (then cap are written); -1 on error */
GPT2_API int gpt2_encode(const gpt2_tokenizer *tok, const char *text, size_t len, int *ids, int cap);
GPT2_API int gpt2_decode(const gpt2_tokenizer *tok, const int *ids, int n, char *out, size_t cap);
/* gpt2_encode reads all text as ordinary text: "<|endoftext|>" in it becomes 7 tokens, never 50256, and an
   added token's string ("<|im_start|>") its pieces too, so no text smuggles a control token in. To put a
   special token in a prompt, write its id into the prompt yourself:
       ids[0] = gpt2_token_id(tok, "<|im_start|>", 12); n = 1 + gpt2_encode(tok, "user\n", 5, ids + 1, cap - 1);
   gpt2_token_id: the id of the token whose text is text[0 .. len) exactly (an added token, else a token of
   the vocabulary: "<|endoftext|>" is 50256 in GPT-2's), or -1 when no token has that text. */
GPT2_API int gpt2_token_id(const gpt2_tokenizer *tok, const char *text, size_t len);

/* temperature <= 0: greedy; top_k <= 0: no limit; top_p <= 0 or >= 1: no nucleus cut.
   A zero-filled struct therefore means plain greedy decoding: every field below is off at 0. */
typedef struct gpt2_sampling {
    float temperature; int top_k; float top_p; uint64_t seed;
    float min_p;              /* keep tokens whose probability >= min_p x the most likely token's; 0: off */
    float typical_p;          /* locally typical sampling, as Hugging Face's typical_p; 0 or >= 1: off */
    float repetition_penalty; /* Hugging Face / CTRL: the logit of every token already in the prompt or the
                                 output is divided by it when positive, multiplied when negative; 0 or 1: off */
    float presence_penalty;   /* OpenAI: subtracted once from the logit of each token already generated */
    float frequency_penalty;  /* OpenAI: subtracted from a token's logit once per time it was generated */
    int no_repeat_ngram;      /* Hugging Face no_repeat_ngram_size: no n-gram of prompt + output occurs twice; 0: off */
    int min_new_tokens;       /* the stop tokens are banned until this many tokens were generated */
    const int *bias_ids; const float *bias; int n_bias;  /* added to those tokens' logits; -INFINITY bans */
} gpt2_sampling;
/* Order, as in Hugging Face's generate: bias, repetition_penalty, presence/frequency, no_repeat_ngram,
   min_new_tokens; then greedy takes the argmax, or sampling applies temperature, top_k, top_p, min_p,
   typical_p and draws. */

/* why a request ended (gpt2_request.finish_reason) */
typedef enum gpt2_finish { GPT2_FINISH_NONE = 0, GPT2_FINISH_LENGTH, GPT2_FINISH_STOP, GPT2_FINISH_CALLBACK,
                           GPT2_FINISH_CANCELLED } gpt2_finish;

typedef struct gpt2_request {
    const int *prompt; int prompt_len;
    int max_new_tokens;
    gpt2_sampling sampling;
    int stop_token;         /* generation ends after this token is emitted; -1: never */
    int *out;               /* caller's buffer with room for max_new_tokens */
    int n_out;              /* set by gpt2_generate */
    const int *stop_ids; int n_stop_ids;  /* more tokens that end generation, like stop_token */
    float *out_logprobs;    /* optional [max_new_tokens]: each generated token's log-probability under the
                               model (log-softmax of its raw logits: temperature 1, before any penalty) */
    int top_logprobs;       /* 0..20: also the most likely alternatives at each step, with */
    int *out_top_ids; float *out_top_logprobs;  /* [max_new_tokens][top_logprobs], most likely first; entries
                                                   from n_out on are not the request's (a draft that did not stand
                                                   may have written there, in all three) */
    /* Stop strings (OpenAI's "stop"): generation ends once the output, decoded with tokenizer, contains one of
       them (bytes: a string may span tokens and end inside a UTF-8 character). out then ends with the token that
       completed it, and text_len says how many bytes of gpt2_decode(out, n_out) come before it: the text to show. */
    const char *const *stop_strings; int n_stop_strings;
    const gpt2_tokenizer *tokenizer;
    int finish_reason;      /* set by gpt2_generate: a gpt2_finish */
    int text_len;           /* set by gpt2_generate: with a stop string found, its byte offset in the output's text;
                               else -1 */
} gpt2_request;
/* called for each new token in order per request; return nonzero to end that request */
typedef int (*gpt2_token_fn)(void *user, int request, int token);
GPT2_API gpt2_status gpt2_generate(gpt2_model *model, gpt2_request *reqs, int n, gpt2_token_fn on_token, void *user);

/* The incremental engine (what gpt2_generate loops over): requests join a running batch at the next step, from any
   thread. One thread steps it; the callbacks run on that thread, inside gpt2_engine_step. A request's buffers are
   the caller's and are written until on_end reports it; its tokens never depend on what else is in flight or when
   it arrived. One engine per model at a time, and no other call on that model while it has work (gpt2_forward,
   gpt2_score and gpt2_generate refuse, GPT2_ERR_ARG, while its requests hold the model's KV slots). */
typedef struct gpt2_engine gpt2_engine;
typedef struct gpt2_engine_callbacks {
    int (*on_token)(void *user, long long id, int token);            /* each new token; nonzero ends the request */
    void (*on_end)(void *user, long long id, gpt2_request *request);  /* it ended: request->finish_reason says why */
    void *user;
} gpt2_engine_callbacks;
GPT2_API gpt2_status gpt2_engine_create(gpt2_engine **engine, gpt2_model *model, const gpt2_engine_callbacks *cb);
GPT2_API void        gpt2_engine_free(gpt2_engine *engine);  /* requests still queued or in flight are dropped */
/* any thread: checks the request (as gpt2_generate does) and queues it; its id (0, 1, ...), or -1 and the reason */
GPT2_API long long   gpt2_engine_submit(gpt2_engine *engine, gpt2_request *request);
/* any thread: the request ends at the next step with GPT2_FINISH_CANCELLED; 0 when no such request is queued or
   in flight */
GPT2_API int         gpt2_engine_cancel(gpt2_engine *engine, long long id);
/* the stepping thread: admits queued requests and runs one step; *busy (may be NULL): work remains */
GPT2_API gpt2_status gpt2_engine_step(gpt2_engine *engine, int *busy);
/* any thread: requests waiting for a slot, and in slots */
GPT2_API void        gpt2_engine_counts(gpt2_engine *engine, int *queued, int *in_flight);

/* Scoring: the log-probability of every token of a text under the model, and its rank.
   Token t (n_context <= t < n_tokens) is predicted from tokens[s..t), where L is the model's max_seq
   (gpt2_model_max_seq) and
       s = stride * max(0, ceil((t + 1 - L) / stride)):
   a text longer than L is read in windows of L tokens starting every stride tokens, and each token is scored
   once, in the first window that holds it (Hugging Face's "Perplexity of fixed-length models" recipe: its
   max_length is L, its stride this stride). With stride = L the first token of each later window would have
   no context there, so tokens t = L, 2L, ... are predicted from the window before, tokens[t - L..t).
   A token's log-probability depends only on the tokens of its window: never on the other requests of the
   call, their order or their number.
   The first n_context tokens only condition; n_context >= 1 because the first token has no prediction
   (Hugging Face tools that score it prepend <|endoftext|>, 50256 in GPT-2's vocabulary, and pass
   n_context = 1). A text of n_context tokens (one token with n_context 1, say) scores nothing: n_scored 0,
   sum_logprob 0, perplexity undefined. A text of no tokens is an error.
   The logits are never copied out: each row is reduced to the scored token's log-softmax (the sum over the
   vocabulary in double) and its rank, a bounded number of rows at a time; on the GPU in F16/BF16 with code built
   for sm_90a, inside the logits product, tile by tile (fp32 sums over 256 logits, then double). A rank counts the
   other tokens whose logit exceeds the target's: where two logits are within rounding of each other, GPU forms
   may count one differently. */
typedef struct gpt2_score_request {
    const int *tokens; int n_tokens;
    int n_context;          /* tokens before it only condition; at least 1 */
    int stride;             /* 1..L; 0: L / 2 */
    float *logprobs;        /* optional out [n_tokens - n_context]: log p(tokens[t] | its window), t = n_context.. */
    int *ranks;             /* optional out [n_tokens - n_context]: tokens with a higher logit (0: the argmax) */
    double sum_logprob;     /* out: perplexity = exp(-sum_logprob / n_scored) */
    int n_scored;           /* out: n_tokens - n_context */
} gpt2_score_request;
/* Scores n requests in one call, batched like prompts. GPT2_ERR_ARG names the request and field
   ("reqs[3].n_context = 0 ...") and nothing is written; the outputs are complete only when GPT2_OK. */
GPT2_API gpt2_status gpt2_score(gpt2_model *model, gpt2_score_request *reqs, int n);

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

/* == [GPT2:CONFIG] == configuration: every tuning knob in one place (those under #ifndef may be defined first) == */

/* The user's macros (listed in [GPT2:MANUAL]) */

#ifndef GPT2_MALLOC
#define GPT2_MALLOC(n) malloc(n)
#define GPT2_CALLOC(n, s) calloc((n), (s))
#define GPT2_FREE(p) free(p)
#endif
#ifndef GPT2_MAX_ERROR
#define GPT2_MAX_ERROR 512
#endif
#ifndef GPT2_MAX_TEXT_FILE
#define GPT2_MAX_TEXT_FILE (256L << 20) /* config.json, vocab.json, merges.txt: larger is an error */
#endif
#ifndef GPT2_GEMM_REF_ROWS
#define GPT2_GEMM_REF_ROWS 128 /* CUDA: decode rows compute as the cuBLASLt algorithm picked for this many rows */
#endif
#ifndef GPT2_GEMM_PROMPT_ROWS
#define GPT2_GEMM_PROMPT_ROWS 4096 /* CUDA: prompt rows compute as the algorithm picked for this many rows computes,
                                      whatever options.step_tokens is (so that it changes no bit) */
#endif
#ifndef GPT2_SPLIT_MIN_K
#define GPT2_SPLIT_MIN_K 384 /* CUDA: least K per piece when decode rows of a residual-feeding layer split K */
#endif
#ifndef GPT2_SPEC_TOKENS
#define GPT2_SPEC_TOKENS 8 /* gpt2_generate: most draft tokens a decoding request verifies in a step (0: none) */
#endif

/* The CUDA backend's internal knobs (GPT2__*: not a stable interface; tests and bench builds set some). Each one's
   use is described where it is used; search for its name. */

/* gpt2_score on the CPU backend: at most GPT2__SCORE_ROWS rows whose logits are reduced in a step (it holds their
   logits, GPT2__SCORE_ROWS x n_vocab floats, at once) and at most GPT2__SCORE_FEED context rows (rows no token is
   scored from: they only store their K and V). Neither changes a result: only the memory and the step sizes. (The
   CUDA backend's steps are its prompt steps, gpt2__cuda_score.) */
#define GPT2__SCORE_ROWS 256
#define GPT2__SCORE_FEED 1024

/* sampler, graphs, cuBLASLt plans */
#define GPT2__SAMPLE_THREADS 1024
#define GPT2__PAGE 4096            /* candidates the sampler sorts at once in shared memory */
#ifndef GPT2_CTL_INTS
#define GPT2_CTL_INTS 4096         /* a sequence's lists on the GPU: 2 ints a bias entry, 1 a stop id (gpt2__cuda_controls) */
#endif
#define GPT2__ARGMAX_LD 4          /* 16-byte loads per thread in flight in the sampler's argmax */
#define GPT2__MAX_GRAPHS 16
#define GPT2__MAX_GEMMS 256
#define GPT2__SCORE_ROW_BYTES 16   /* gpt2_score's staging a fed row: its log-probability (double), rank and target (int) */

/* decode attention */
#ifndef GPT2__SPAN_LEN
#define GPT2__SPAN_LEN 256         /* keys per span: a block of decode attention covers one span of a row's keys */
#endif
#define GPT2__ATT_PREFETCH (16 << 20) /* decode attention prefetches the cache into L2 up to this many bytes */
#ifndef GPT2__ATT_TMA
#define GPT2__ATT_TMA 1            /* gpt2__attn_stream_kernel reads the caches with TMA where it can */
#endif
#ifndef GPT2__AMMA_NS
#define GPT2__AMMA_NS 3            /* gpt2__attn_stream_kernel: chunks in flight per warp (2 or 3) */
#endif
#ifndef GPT2__AMMA_WB
#define GPT2__AMMA_WB 2            /* gpt2__attn_stream_kernel: warps per block */
#endif

/* prompt attention */
#ifndef GPT2__FQ
#define GPT2__FQ 64                /* query rows per prefill tile: a warp per 16 */
#endif
#define GPT2__FK 64                /* keys per step of a prefill tile */
#define GPT2__F32_NT 256           /* threads of gpt2__attn_prefill32_kernel */

/* few-row products (gpt2__few_row_kernel, F16/BF16; gpt2__few_row32_kernel, F32) */
#define GPT2__FEW_ROW_MAX 16       /* most decode rows a few-row product takes */
#ifndef GPT2__FEW_ROW_NW
#define GPT2__FEW_ROW_NW 1         /* warps per block, 8 output columns each */
#endif
#ifndef GPT2__FEW_ROW_NW_WIDE
#define GPT2__FEW_ROW_NW_WIDE 2    /* warps per block in products that still have two blocks an SM at this many
                                      (gpt2__few_row_go) */
#endif
#ifndef GPT2__FEW_ROW_KC
#define GPT2__FEW_ROW_KC 128       /* K per ring stage */
#endif
#ifndef GPT2__FEW_ROW_ST
#define GPT2__FEW_ROW_ST 10        /* ring stages */
#endif
#ifndef GPT2__FEW_ROW_ST_SHORT
#define GPT2__FEW_ROW_ST_SHORT 5   /* ring stages in products of several rows whose blocks would not all fit on the GPU
                                      at once with GPT2__FEW_ROW_ST (gpt2__few_row_go: a step verifying a draft) */
#endif
#ifndef GPT2__FEW_ROW_SMEM_MAX
#define GPT2__FEW_ROW_SMEM_MAX (160 << 10) /* most shared memory a few-row block may take */
#endif
#ifndef GPT2__FEW_ROW32_ST
#define GPT2__FEW_ROW32_ST 24      /* F32: ring chunks at 32 columns a warp (2.5 KB each; 24 leave 1558M's 16-row
                                      products exactly GPT2__FEW_ROW_SMEM_MAX); at 16 columns twice as many */
#endif
#ifndef GPT2__FEW_ROW32_G
#define GPT2__FEW_ROW32_G 4        /* F32: chunks consumed a wait at 32 columns, a divisor of GPT2__FEW_ROW32_ST; at 16
                                      twice as many */
#endif
#ifndef GPT2__FEW_ROW32_NARROW
#define GPT2__FEW_ROW32_NARROW 5   /* F32: products of fewer than sms * this / 4 blocks at 32 columns run 16 a warp
                                      (gpt2__few_row32_cols) */
#endif
#define GPT2__FEW_ROW32_KC 16      /* F32: K per ring chunk */

/* the layer norm folded into the product that reads it (ln_fold) */
#ifndef GPT2__LN_FOLD_ROWS
#define GPT2__LN_FOLD_ROWS 2       /* most decode rows whose residual + layer norm the next product computes */
#endif
#ifndef GPT2__LN_FOLD_MAX_C
#define GPT2__LN_FOLD_MAX_C 4096   /* widest n_embd it serves */
#endif
#ifndef GPT2__LN_FOLD_NW
#define GPT2__LN_FOLD_NW 8         /* warps per block: a thread per thread of gpt2__residual_ln_kernel */
#endif
#ifndef GPT2__LN_FOLD_ST
#define GPT2__LN_FOLD_ST 10        /* ring stages */
#endif
#ifndef GPT2__LN_FOLD_FIT_C
#define GPT2__LN_FOLD_FIT_C 1024   /* from this width on, the FIT form's ring has as many stages as K has chunks where
                                      that is fewer (gpt2__ln_fold_stages) */
#endif

/* the two-part throughput mode and its green contexts */
#ifndef GPT2__MAX_PARTS
#define GPT2__MAX_PARTS 2          /* most parts a decode step runs as at once (gpt2__cuda_parts; streams made) */
#endif
#ifndef GPT2__PARTS
#define GPT2__PARTS 2              /* parts a step runs as by default, at most */
#endif
#ifndef GPT2__PART_ROWS
#define GPT2__PART_ROWS 256        /* least rows of a part */
#endif
#ifndef GPT2__ATT_SMS
#ifdef GPT2_ATT_SMS
#define GPT2__ATT_SMS GPT2_ATT_SMS
#else
#define GPT2__ATT_SMS -1           /* SMs kept for decode attention in a green step (gpt2__green_make; 0: no green
                                      contexts; -1: by the GPU's memory bandwidth, gpt2__att_sms_default) */
#endif
#endif
#ifndef GPT2__GREEN_CTX
#define GPT2__GREEN_CTX 8          /* a step of parts runs green when its rows' mean context is at least n_embd / this */
#endif

/* weight upload */
#ifndef GPT2__UP_CHUNK
#define GPT2__UP_CHUNK ((size_t)32 << 20) /* bytes of each of the two pinned staging buffers */
#endif
#ifndef GPT2__UP_THREADS
#define GPT2__UP_THREADS 8         /* most OpenMP threads filling them */
#endif

/* the CPU backend's products (gpt2__cpu_product) */
#define GPT2__PANEL 16             /* output columns of a packed weight panel: one AVX-512 vector of float32 */
#define GPT2__PANEL_GROUP 4        /* panels of a task: its weights are read from memory once for all its rows */
#define GPT2__ATT_ROWS 16          /* CPU: most rows of a sequence an attention task serves (gpt2__attn) */
#define GPT2__CPU_FEW_ROWS 16      /* F16/BF16 products of at most this many rows read the panels as they are (more:
                                      converted to float32 first, once per task) */

/* the engine */
#define GPT2__SPEC_ROWS 16         /* most rows of a step that verifies drafts (a few-row product's rows: one pass over
                                      the weights serves them all) */

/* == [GPT2:UTIL] == utilities: platform macros, errors, allocation, files, a small JSON reader ================== */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <math.h>
#include <errno.h>
#include <sys/types.h>
#include <sys/stat.h>
#if !defined(_WIN32)
#include <unistd.h>
#else /* GlobalMemoryStatusEx (gpt2__host_memory), with as little of <windows.h> as it needs (a program that needs
         all of it includes it before this file) */
#if !defined(WIN32_LEAN_AND_MEAN)
#define WIN32_LEAN_AND_MEAN
#define GPT2__UNDEF_LEAN
#endif
#if !defined(NOMINMAX)
#define NOMINMAX
#define GPT2__UNDEF_NOMINMAX
#endif
#include <windows.h>
#if defined(GPT2__UNDEF_LEAN)
#undef WIN32_LEAN_AND_MEAN
#undef GPT2__UNDEF_LEAN
#endif
#if defined(GPT2__UNDEF_NOMINMAX)
#undef NOMINMAX
#undef GPT2__UNDEF_NOMINMAX
#endif
#endif
#ifdef _OPENMP
#include <omp.h>
#if defined(_MSC_VER) && !defined(__clang__)
#define GPT2__OMP(...) __pragma(__VA_ARGS__)
#else
#define GPT2__OMP(...) _Pragma(#__VA_ARGS__) /* an OpenMP pragma, gone without -fopenmp (no -Wunknown-pragmas) */
#endif
#else
#define GPT2__OMP(...)
#endif
/* The CPU backend's products also in AVX2 + FMA and AVX-512 builds beside the baseline one (target attributes, GCC
   and Clang, nvcc's host code included; -DGPT2_NO_CLONES: off), the CPU picking one at load (gpt2__cpu_isa). Their
   multiply-adds fuse, so their last bits differ from the baseline's; one process runs one build throughout. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GPT2__TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) && !defined(GPT2__TSAN)
#define GPT2__TSAN 1
#endif
/* Left out, as the load-time clones they replace were, under ThreadSanitizer (its builds test the threading, in the
   baseline build) and outside x86-64 Linux with glibc. */
#if defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__) && defined(__GNUC__) && !defined(GPT2_NO_CLONES) && \
    !defined(GPT2__TSAN)
#define GPT2__CPU_VARIANTS 1
#else
#define GPT2__CPU_VARIANTS 0
#endif
/* Fused multiply-adds in the functions marked with these (GCC: an attribute before the function; Clang: a pragma
   opening its body), whatever -ffp-contract the file is built with */
#if defined(__clang__)
#define GPT2__FUSE
#define GPT2__FUSE_BODY _Pragma("clang fp contract(fast)")
#else
#define GPT2__FUSE __attribute__((optimize("fp-contract=fast")))
#define GPT2__FUSE_BODY
#endif
/* No fused multiply-adds in the host functions marked with these (GCC: an attribute before the function; Clang: a
   pragma opening its body). Where the target has them (aarch64; x86-64 built with -march=native) the compilers fuse
   some multiply-adds and not others: a one-row and a many-row form of the head's product once rounded differently,
   so a row's logits depended on how many rows ran beside it, and gpt2__sample's logit * (1 / T) - max would not round
   as the GPU's sampler does. The products and attention, the same code for every row, may fuse. */
#if defined(__clang__)
#define GPT2__NO_CONTRACT
#define GPT2__NO_CONTRACT_BODY _Pragma("clang fp contract(off)")
#elif defined(__GNUC__)
#define GPT2__NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#define GPT2__NO_CONTRACT_BODY
#else
#define GPT2__NO_CONTRACT
#define GPT2__NO_CONTRACT_BODY
#endif

#if defined(__cplusplus)
#define GPT2__TLS thread_local
#elif defined(_MSC_VER)
#define GPT2__TLS __declspec(thread)
#elif defined(__GNUC__) && (!defined(__STDC_VERSION__) || __STDC_VERSION__ < 201112L)
#define GPT2__TLS __thread /* C99 has no _Thread_local: GCC's and Clang's own keyword, no -Wpedantic warning */
#else
#define GPT2__TLS _Thread_local
#endif

#if defined(__MINGW32__) && defined(__MINGW_PRINTF_FORMAT)
/* MinGW: the checker for the vsnprintf <stdio.h> chose, gnu_printf for MinGW's own (C99: %zu), not msvcrt's ms_printf */
#define GPT2__PRINTF(a, b) __attribute__((format(__MINGW_PRINTF_FORMAT, a, b)))
#elif defined(__GNUC__)
#define GPT2__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define GPT2__PRINTF(a, b)
#endif

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
    if ((unsigned long)n > (unsigned long)GPT2_MAX_TEXT_FILE) {
        fclose(f);
        return gpt2__fail(GPT2_ERR_FORMAT, "%s: %ld bytes is over the %ld-byte limit for a text file (GPT2_MAX_TEXT_FILE)",
                          path, n, (long)GPT2_MAX_TEXT_FILE);
    }
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

/* ---- a small JSON reader */

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

/* == [GPT2:MODEL] == the model (config, weights, state) and its loader (config.json + checkpoint files) ========= */

#if GPT2__CUDA
#define GPT2__HD __host__ __device__
#else
#define GPT2__HD
#endif

/* config.json's switches that change the computation, each 0 for GPT-2's own choice. activation_function's names
   (Hugging Face's ACT2FN): gelu_new, gelu_pytorch_tanh and gelu_fast are one formula (the tanh form, with constants
   equal in float32); gelu is the exact erf form. */
enum { GPT2__ACT_NONE = -1, GPT2__ACT_GELU_TANH = 0, GPT2__ACT_GELU_ERF, GPT2__ACT_QUICK_GELU, GPT2__ACT_RELU }; /* NONE: no activation (a product's epilogue) */
typedef struct gpt2__arch {
    int act;                         /* the MLP's activation: GPT2__ACT_* */
    int attn_unscaled;               /* scale_attn_weights false: scores not divided by sqrt(head size) */
    int attn_by_layer;               /* scale_attn_by_inverse_layer_idx: layer l's scores also divided by l + 1 */
    int untied;                      /* tie_word_embeddings false: logits from lm_head.weight, not wte */
} gpt2__arch;

/* One transformer block's weights on the host (the CPU backend's; NULL under the CUDA backend, which keeps its
   weights on the GPU only). GPT-2's Conv1D stores [in][out]; the CPU backend keeps each product's matrix packed in
   panels of GPT2__PANEL output columns, in the model's dtype (gpt2__panel_at says where an element lies), and the
   vectors float32. */
typedef struct gpt2__layer {
    float *ln1_w, *ln1_b;            /* [C] */
    void *qkv_w; float *qkv_b;       /* [C][3C] packed, [3C]: q | k | v along the output */
    void *attn_proj_w; float *attn_proj_b; /* [C][C] packed, [C] */
    float *ln2_w, *ln2_b;            /* [C] */
    void *fc_w; float *fc_b;         /* [C][F] packed, [F]   (F = n_inner, 4C in every published model) */
    void *fc_proj_w; float *fc_proj_b; /* [F][C] packed, [C] */
} gpt2__layer;

typedef struct gpt2__weights {
    void *wte;                       /* [V][C] stored as the packed [C][V] of the head's product (the embedding reads a
                                        token's row out of it) */
    void *lm_head;                   /* the same for the output projection: wte itself when tied */
    float *wpe;                      /* [n_ctx][C] */
    gpt2__layer *layers;             /* [n_layer] */
    float *lnf_w, *lnf_b;            /* [C] */
    void *arena;                     /* one allocation holding every tensor above */
    size_t bytes;                    /* its size */
} gpt2__weights;

/* The CPU backend's state: the KV cache, V as [n_layer][max_batch][max_seq][C], K transposed per head as
   [n_layer][max_batch][n_head][head size][max_seq] (a key's elements max_seq apart, so that the scores of
   consecutive keys are one vector operation per element: gpt2__cpu_run). */
struct gpt2__product;
struct gpt2__attn;
typedef struct gpt2__cpu {
    void *k_cache, *v_cache;         /* elements of the model's dtype */
    /* the builds of the products and the attention for this CPU (gpt2__cpu_isa) */
    void (*tasks)(const struct gpt2__product *, long, long, float *);
    void (*attn)(const struct gpt2__attn *, long, float *);
} gpt2__cpu;

struct gpt2_model {
    gpt2_config cfg;
    int n_inner;                     /* MLP width: config's n_inner, else 4 * n_embd */
    gpt2__arch arch;                 /* the activation and attention switches of config.json */
    gpt2_backend backend;            /* resolved: CPU or CUDA */
    gpt2_dtype dtype;                /* resolved */
    int device;
    int max_batch, max_seq;
    int prefill_tokens;              /* prompt tokens one engine step may feed (options.step_tokens; 0: the backend's) */
    int no_hold;                     /* gpt2_generate: an idle engine's admitted requests decode as their prompts end (bench) */
    int spec;                        /* gpt2_generate: most draft tokens a request verifies in a step (GPT2_SPEC_TOKENS;
                                        tests and bench change it) */
    long long spec_rows, spec_kept;  /* draft rows fed, and those whose token stood (counted since load) */
    int engine_work;                 /* an engine on it holds KV slots or a step in flight (gpt2_engine_step sets it):
                                        gpt2_forward, gpt2_score and gpt2_generate refuse to run then */
    gpt2__weights w;                 /* host weights (CPU backend; the CUDA backend keeps its weights on the GPU only) */
    gpt2__cpu cpu;
    void *cuda;                      /* gpt2__cuda_state *, owned by the CUDA backend */
};

/* One sequence's work in a batched step (engine -> backend): feed n_tok tokens at positions
   pos..pos+n_tok-1 of KV slot `slot` (writing their K and V there); then, when `sample` is set,
   sample the next token from the last fed position's logits as the draw-th token of a request
   with these sampling parameters (a prompt fed in chunks samples only after its last chunk). */
typedef struct gpt2__seq {
    int slot, pos, n_tok;
    int prompt;            /* the tokens are prompt tokens (the CUDA backend runs them as prompt rows) */
    const int *tok;
    int sample;
    gpt2_sampling sampling;
    uint64_t draw;
    int spec;              /* gpt2_generate: a draft token's row (its sequence's rows are consecutive entries) */
    gpt2_request *req;     /* gpt2_generate, a sampled row: its request (the penalties read its prompt and output, the
                              logprobs go to its buffers at index draw) */
    const int *extra; int n_extra;  /* draft tokens fed before this row: generated after req->out[0 .. n_out) */
} gpt2__seq;

/* ---- loader: config.json + model.safetensors */

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

/* float32 to F16 and to BF16, rounding to nearest even (NaN stays NaN; beyond F16's range: infinity) */
static uint16_t gpt2__f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000, e = (u >> 23) & 0xFF, man = u & 0x7FFFFF;
    if (e == 0xFF) return (uint16_t)(sign | 0x7C00 | (man ? 0x200 : 0));
    if (e < 102) return (uint16_t)sign; /* under half of F16's least subnormal */
    if (e < 113) { /* an F16 subnormal: 24 - (e - 102) bits of the 1.man significand go */
        const uint32_t sig = man | 0x800000, sh = 126 - e, h = sig >> sh, rem = sig & ((1u << sh) - 1), half = 1u << (sh - 1);
        return (uint16_t)(sign | (h + (rem > half || (rem == half && (h & 1)))));
    }
    uint32_t h = ((e - 112) << 10) | (man >> 13), rem = man & 0x1FFF;
    h += rem > 0x1000 || (rem == 0x1000 && (h & 1)); /* a carry into the exponent is right, up to infinity */
    return (uint16_t)(sign | (h > 0x7C00 ? 0x7C00 : h));
}
static uint16_t gpt2__f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7FFFFFFF) > 0x7F800000) return (uint16_t)((u >> 16) | 0x40); /* NaN */
    return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

/* Reads the model's config.json. Keys are HF's GPT2Config names; absent keys take HF's defaults. */
static gpt2_status gpt2__parse_config(const char *text, size_t len, const char *file, gpt2_config *cfg, int *n_inner,
                                      gpt2__arch *arch) {
    gpt2__json j = {text, text, text + len, file, 0};
    double n_layer = -1, n_head = -1, n_embd = -1, n_pos = -1, n_ctx = -1, vocab = -1, eps = 1e-5, inner = -1;
    int first = 1, r;
    char key[64];
    size_t klen;
    gpt2_status st;
    memset(arch, 0, sizeof *arch);
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
            static const struct { const char *name; int act; } acts[] = {
                {"gelu_new", GPT2__ACT_GELU_TANH}, {"gelu_pytorch_tanh", GPT2__ACT_GELU_TANH}, {"gelu_fast", GPT2__ACT_GELU_TANH},
                {"gelu", GPT2__ACT_GELU_ERF}, {"quick_gelu", GPT2__ACT_QUICK_GELU}, {"relu", GPT2__ACT_RELU}};
            size_t a = 0;
            while (a < sizeof acts / sizeof acts[0] && strcmp(act, acts[a].name)) a++;
            if (a == sizeof acts / sizeof acts[0])
                return gpt2__fail(GPT2_ERR_FORMAT, "%s: activation_function \"%s\" is not supported (expected gelu_new, "
                                  "gelu_pytorch_tanh, gelu_fast, gelu, quick_gelu or relu)", file, act);
            arch->act = acts[a].act;
            continue;
        }
        /* switches that change the computation: read as booleans, never ignored */
        int *flag = !strcmp(key, "scale_attn_weights") ? &arch->attn_unscaled : !strcmp(key, "tie_word_embeddings") ? &arch->untied
                  : !strcmp(key, "scale_attn_by_inverse_layer_idx") ? &arch->attn_by_layer : NULL;
        if (flag || !strcmp(key, "add_cross_attention")) {
            gpt2__json_ws(&j);
            int t = j.end - j.p >= 4 && !memcmp(j.p, "true", 4), f = j.end - j.p >= 5 && !memcmp(j.p, "false", 5);
            if (!t && !f) return gpt2__fail(GPT2_ERR_FORMAT, "%s: %s is not true or false", file, key);
            j.p += t ? 4 : 5;
            if (!flag && t) return gpt2__fail(GPT2_ERR_FORMAT, "%s: add_cross_attention = true is not supported", file);
            if (flag) *flag = flag == &arch->attn_by_layer ? t : f; /* the two others are on by default: set when false */
            continue;
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

/* Each expected tensor: name (without the optional "transformer." prefix), shape, where its bytes lie in the
   file and in which dtype ('F' F32, 'H' F16, 'B' BF16), and its destination on the host (CPU backend only: the CUDA
   backend uploads the file's bytes as they are and converts them on the GPU): float32 as it is (pack 0), or packed
   in panels in dst_dtype, a Conv1D matrix [in][out] (pack 'C') or a [out][in] one (pack 'T': the head). */
typedef struct gpt2__slot {
    char name[48];
    int ndim;
    size_t shape[2];
    void *dst;
    char pack, dst_dtype;
    const unsigned char *src;
    char dtype;
    int found;
    int optional;          /* may be absent (lm_head.weight beside a tied head) */
} gpt2__slot;

/* The slots' order: wte, wpe, then each layer's twelve tensors in this order, then ln_f's weight and bias. */
enum { GPT2__T_LN1_W, GPT2__T_LN1_B, GPT2__T_QKV_W, GPT2__T_QKV_B, GPT2__T_PROJ_W, GPT2__T_PROJ_B, GPT2__T_LN2_W,
       GPT2__T_LN2_B, GPT2__T_FC_W, GPT2__T_FC_B, GPT2__T_FCP_W, GPT2__T_FCP_B, GPT2__T_PER_LAYER };
#define GPT2__SLOT_WTE 0
#define GPT2__SLOT_WPE 1
#define GPT2__SLOT_LAYER(l, t) (2 + (size_t)(l) * GPT2__T_PER_LAYER + (t))
#define GPT2__SLOT_LNF(L) GPT2__SLOT_LAYER(L, 0)

static void gpt2__slot_set(gpt2__slot *s, const char *name, int ndim, size_t d0, size_t d1, void *dst) {
    snprintf(s->name, sizeof s->name, "%s", name);
    s->ndim = ndim; s->shape[0] = d0; s->shape[1] = d1; s->dst = dst; s->src = NULL; s->dtype = 0; s->found = 0; s->optional = 0;
    s->pack = 0; s->dst_dtype = 'F';
}

/* The CPU backend's packed matrices: the product out = in [N][I] @ W [I][O] reads W in panels of GPT2__PANEL output
   columns, [O / GPT2__PANEL][I][GPT2__PANEL] (O rounded up, the last panel's extra columns zero), so that a step of
   its inner loop reads one contiguous run. Element (i, o)'s index: */
static size_t gpt2__panel_at(size_t I, size_t i, size_t o) {
    return (o / GPT2__PANEL * I + i) * GPT2__PANEL + o % GPT2__PANEL;
}
/* bytes of a slot's host copy (pack: 0 float32 as it is; 'C' [d0 = in][d1 = out]; 'T' [d0 = out][d1 = in]) */
static size_t gpt2__host_bytes(int pack, size_t d0, size_t d1, size_t esize) {
    const size_t P = GPT2__PANEL;
    size_t b = !pack ? d0 * d1 * 4 : pack == 'C' ? d0 * ((d1 + P - 1) / P * P) * esize : (d0 + P - 1) / P * P * d1 * esize;
    return (b + 63) / 64 * 64; /* each tensor 64-byte aligned within the arena */
}

/* Lists the tensors a checkpoint must provide and, when host is set (the CPU backend), lays out their host copies
   in one arena (the products' matrices packed in the model's dtype, the rest float32). A file of file_len bytes must
   hold at least 2 bytes per parameter: checked before anything is allocated. */
static gpt2_status gpt2__weights_layout(gpt2_model *m, size_t file_len, const char *file, int host, gpt2__slot **slots_out,
                                        int *n_slots) {
    size_t L = (size_t)m->cfg.n_layer, C = (size_t)m->cfg.n_embd, V = (size_t)m->cfg.n_vocab;
    size_t P = (size_t)m->cfg.n_ctx, F = (size_t)m->n_inner;
    /* all factors are bounded by the config checks, so these products fit in 64 bits */
    size_t per_layer = 2 * C + C * 3 * C + 3 * C + C * C + C + 2 * C + C * F + F + F * C + C;
    size_t total = V * C + P * C + L * per_layer + 2 * C + (m->arch.untied ? V * C : 0);
    if (total > file_len / 2)
        return gpt2__fail(GPT2_ERR_FORMAT, "%s: the config describes %zu parameters (at least %zu bytes), the file has %zu bytes",
                          file, total, 2 * total, file_len);
    gpt2__weights *w = &m->w;
    w->layers = (gpt2__layer *)gpt2__zalloc(L * sizeof(gpt2__layer));
    gpt2__slot *s = (gpt2__slot *)gpt2__zalloc((L * GPT2__T_PER_LAYER + 5) * sizeof(gpt2__slot));
    if (!w->layers || !s) {
        GPT2_FREE(s);
        return gpt2__fail(GPT2_ERR_OOM, "cannot allocate the weights' tables");
    }
    const char dt = m->dtype == GPT2_DTYPE_F16 ? 'H' : m->dtype == GPT2_DTYPE_BF16 ? 'B' : 'F';
    const size_t es = dt == 'F' ? 4 : 2;
    size_t at = 0;
    int n = 0;
    char name[48];
    /* on the host, pass 0 adds up the arena's bytes and pass 1 places each tensor in it */
    for (int pass = host ? 0 : 1; pass < 2; pass++) {
        if (pass == 1 && host) {
            w->arena = gpt2__alloc(at);
            if (!w->arena) {
                GPT2_FREE(s);
                return gpt2__fail(GPT2_ERR_OOM, "cannot allocate %zu MB for the weights", at >> 20);
            }
            w->bytes = at;
        }
        at = 0;
        n = 0;
#define GPT2__TAKE(field, type, pk, nm, nd, d0, d1)                                                                    \
    do {                                                                                                            \
        field = (type)(pass && host ? (void *)((char *)w->arena + at) : NULL);                                      \
        gpt2__slot_set(&s[n], nm, nd, d0, d1, (void *)field);                                                       \
        s[n].pack = (char)(pk); s[n++].dst_dtype = (pk) ? dt : 'F';                                                  \
        at += gpt2__host_bytes(pk, d0, d1, es);                                                                     \
    } while (0)
        GPT2__TAKE(w->wte, void *, 'T', "wte.weight", 2, V, C);
        GPT2__TAKE(w->wpe, float *, 0, "wpe.weight", 2, P, C);
        for (size_t l = 0; l < L; l++) {
            gpt2__layer *y = &w->layers[l];
            struct { float **f; void **m; const char *suffix; int nd; size_t d0, d1; } t[GPT2__T_PER_LAYER] = { /* the enum's order */
                {&y->ln1_w, NULL, "ln_1.weight", 1, C, 1}, {&y->ln1_b, NULL, "ln_1.bias", 1, C, 1},
                {NULL, &y->qkv_w, "attn.c_attn.weight", 2, C, 3 * C}, {&y->qkv_b, NULL, "attn.c_attn.bias", 1, 3 * C, 1},
                {NULL, &y->attn_proj_w, "attn.c_proj.weight", 2, C, C}, {&y->attn_proj_b, NULL, "attn.c_proj.bias", 1, C, 1},
                {&y->ln2_w, NULL, "ln_2.weight", 1, C, 1}, {&y->ln2_b, NULL, "ln_2.bias", 1, C, 1},
                {NULL, &y->fc_w, "mlp.c_fc.weight", 2, C, F}, {&y->fc_b, NULL, "mlp.c_fc.bias", 1, F, 1},
                {NULL, &y->fc_proj_w, "mlp.c_proj.weight", 2, F, C}, {&y->fc_proj_b, NULL, "mlp.c_proj.bias", 1, C, 1}};
            for (int i = 0; i < GPT2__T_PER_LAYER; i++) {
                snprintf(name, sizeof name, "h.%zu.%s", l, t[i].suffix);
                if (t[i].f) GPT2__TAKE(*t[i].f, float *, 0, name, t[i].nd, t[i].d0, t[i].d1);
                else GPT2__TAKE(*t[i].m, void *, 'C', name, t[i].nd, t[i].d0, t[i].d1);
            }
        }
        GPT2__TAKE(w->lnf_w, float *, 0, "ln_f.weight", 1, C, 1);
        GPT2__TAKE(w->lnf_b, float *, 0, "ln_f.bias", 1, C, 1);
        if (m->arch.untied) GPT2__TAKE(w->lm_head, void *, 'T', "lm_head.weight", 2, V, C); /* the slot after ln_f's two */
        else { /* tied: a file's lm_head.weight must equal wte (Hugging Face versions disagree on which one a differing
                  copy replaces), so it is read, to be compared, and not kept */
            w->lm_head = w->wte;
            gpt2__slot_set(&s[n], "lm_head.weight", 2, V, C, NULL);
            s[n++].optional = 1;
        }
#undef GPT2__TAKE
    }
    *slots_out = s;
    *n_slots = n;
    return GPT2_OK;
}

/* Tensors a checkpoint may carry that the model does not use: the causal-mask buffers
   (h.N.attn.bias / h.N.attn.masked_bias, matched as whole names) and lm_head.weight when the head is tied (Hugging
   Face then ties it to wte whatever the file holds; an untied head has a slot of its own, found before this). */
static int gpt2__ignored_tensor(const char *name) {
    if (!strcmp(name, "lm_head.weight")) return 1;
    if (strncmp(name, "h.", 2)) return 0;
    const char *p = name + 2;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') p++;
    return !strcmp(p, ".attn.bias") || !strcmp(p, ".attn.masked_bias");
}

/* Parses a safetensors image (8-byte little-endian header length, JSON header, data) and finds every expected
   tensor's bytes and dtype for its slot. Every offset and size is checked against the file. */
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
        s->src = body + (size_t)off[0];
        s->dtype = esize == 4 ? 'F' : dtype[0] == 'B' ? 'B' : 'H';
        s->found = 1;
    }
    if (r < 0) return GPT2_ERR_FORMAT;
    for (int i = 0; i < n_slots; i++)
        if (!slots[i].found && !slots[i].optional) return gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\" is missing", file, slots[i].name);
    return GPT2_OK;
}

/* Element i of a slot's tensor as float32 */
static float gpt2__slot_value(const gpt2__slot *s, size_t i) {
    const unsigned char *b = s->src + i * (s->dtype == 'F' ? 4 : 2);
    if (s->dtype == 'F') { float f; memcpy(&f, b, 4); return f; }
    uint16_t h = (uint16_t)(b[0] | (b[1] << 8));
    return s->dtype == 'B' ? gpt2__bf16_to_f32(h) : gpt2__f16_to_f32(h);
}

/* A tied head with an lm_head.weight in the file: it must hold wte's values. Hugging Face's versions disagree on
   which of two differing matrices a tied model runs, so such a file is refused rather than guessed. */
static gpt2_status gpt2__tied_head_check(const gpt2__slot *slots, int n_slots, const char *file) {
    const gpt2__slot *wte = &slots[GPT2__SLOT_WTE], *head = &slots[n_slots - 1];
    if (!head->optional || !head->found) return GPT2_OK;
    const size_t count = wte->shape[0] * wte->shape[1];
    int same = head->dtype == wte->dtype && !memcmp(head->src, wte->src, count * (wte->dtype == 'F' ? 4 : 2));
    for (size_t i = 0; !same && i < count; i++)
        if (gpt2__slot_value(head, i) != gpt2__slot_value(wte, i))
            return gpt2__fail(GPT2_ERR_FORMAT, "%s: lm_head.weight differs from wte.weight (element %zu) but the head is tied "
                              "(tie_word_embeddings true or absent in config.json): set tie_word_embeddings false to run "
                              "lm_head.weight as its own matrix, or leave it out of the file", file, i);
    return GPT2_OK;
}

/* The CPU backend's weights: every slot's tensor converted into its place in the arena (float32, or packed in
   panels in the model's dtype: gpt2__panel_at), in parallel (the threads also take the arena's first page faults).
   An F16 or BF16 value kept in its own dtype is copied as it is; any other goes through float32, rounded to nearest
   even. (gpt2__ckpt_to_host calls it slot by slot.) */
static void gpt2__slot_to_host(const gpt2__slot *s) {
    if (!s->dst) return; /* read only to be checked */
    const size_t d0 = s->shape[0], d1 = s->shape[1], P = GPT2__PANEL;
    const size_t in = s->pack == 'T' ? d1 : d0, out = s->pack == 'T' ? d0 : d1, esize = s->dst_dtype == 'F' ? 4 : 2;
    const unsigned char *src = s->src;
    const char dt = s->dtype, to = s->dst_dtype, pack = s->pack;
    if (pack && out % P) /* the last panel's columns past the matrix: zero */
        memset((char *)s->dst + (out / P * in * P) * esize, 0, in * P * esize);
    GPT2__OMP(omp parallel for schedule(static) if (d0 * d1 > 100000))
    for (long long r = 0; r < (long long)d0; r++)
        for (size_t c = 0; c < d1; c++) {
            const size_t i = (size_t)r * d1 + c, at = !pack ? i : pack == 'C' ? gpt2__panel_at(in, r, c) : gpt2__panel_at(in, c, r);
            const unsigned char *b = src + i * (dt == 'F' ? 4 : 2); /* little-endian, as the format itself */
            uint16_t h = (uint16_t)(b[0] | (b[1] << 8));
            float f;
            if (dt == 'F') memcpy(&f, b, 4);
            else f = dt == 'B' ? gpt2__bf16_to_f32(h) : gpt2__f16_to_f32(h);
            if (to == 'F') memcpy((float *)s->dst + at, &f, 4);
            else ((uint16_t *)s->dst)[at] = dt == to ? h : to == 'H' ? gpt2__f32_to_f16(f) : gpt2__f32_to_bf16(f);
        }
}

/* ---- checkpoint files: model.safetensors, its shards, pytorch_model.bin (a restricted reader) */

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

/* ---------------------------------------------------------------- loader: PyTorch's zip checkpoints (pytorch_model.bin) */

/* torch.save (since 1.6) writes a zip whose entries are stored, not compressed: ARCHIVE/data.pkl (a pickle of
   the state dict), ARCHIVE/data/KEY (each storage's raw bytes), ARCHIVE/byteorder, ARCHIVE/version and a few
   more. The reader below parses the zip's central directory, checks every local header against it, and reads
   data.pkl with a restricted unpickler: it knows only the opcodes and globals PyTorch writes for a state dict,
   builds plain values from them, and never calls or imports anything. Every count it reads is bounded. */

#define GPT2__ZIP_MAX_ENTRIES 65536
#define GPT2__PK_MAX_PICKLE ((size_t)64 << 20) /* data.pkl: a 48-layer model's is about 100 KB */
#define GPT2__PK_MAX_OBJECTS (1 << 21)
#define GPT2__PK_MAX_MEMO (1 << 20)
#define GPT2__PK_MAX_STACK (1 << 16)
#define GPT2__PK_MAX_MARKS 64
#define GPT2__PK_MAX_DEPTH 32
#define GPT2__PK_MAX_STRING 65536
#define GPT2__PK_MAX_TENSORS 65536

static uint64_t gpt2__le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* One zip entry: its name (in the central directory, not NUL-terminated) and where its bytes lie. */
typedef struct gpt2__zip_entry {
    const char *name;
    size_t name_len, header, data, size;
} gpt2__zip_entry;

static int gpt2__zip_by_offset(const void *a, const void *b) {
    size_t x = ((const gpt2__zip_entry *)a)->header, y = ((const gpt2__zip_entry *)b)->header;
    return x < y ? -1 : x > y;
}

static int gpt2__name_cmp(const char *a, size_t an, const char *b, size_t bn) {
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : an < bn ? -1 : an > bn;
}

static int gpt2__zip_by_name(const void *a, const void *b) {
    const gpt2__zip_entry *x = (const gpt2__zip_entry *)a, *y = (const gpt2__zip_entry *)b;
    return gpt2__name_cmp(x->name, x->name_len, y->name, y->name_len);
}

/* The entry named name (len n) in entries sorted by name, or NULL. */
static const gpt2__zip_entry *gpt2__zip_find(const gpt2__zip_entry *e, int n_entries, const char *name, size_t n) {
    int lo = 0, hi = n_entries;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = gpt2__name_cmp(e[mid].name, e[mid].name_len, name, n);
        if (!c) return &e[mid];
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return NULL;
}

/* The zip64 extended-information extra field (id 1) holds, in this order, the 64-bit value of each of the
   uncompressed size, compressed size and header offset whose 32-bit field is 0xFFFFFFFF. Returns 0 when the
   extra fields are malformed or a needed value is absent. */
static int gpt2__zip64_extra(const unsigned char *x, size_t xlen, uint64_t *usize, uint64_t *csize, uint64_t *off) {
    uint64_t *want[3] = {usize, csize, off};
    int need = 0;
    for (int i = 0; i < 3; i++) need |= want[i] && *want[i] == 0xFFFFFFFFu;
    while (xlen >= 4) {
        size_t id = (size_t)gpt2__le(x, 2), n = (size_t)gpt2__le(x + 2, 2);
        if (n > xlen - 4) return 0;
        if (id == 1) {
            const unsigned char *p = x + 4;
            size_t left = n;
            for (int i = 0; i < 3; i++) {
                if (!want[i] || *want[i] != 0xFFFFFFFFu) continue;
                if (left < 8) return 0;
                *want[i] = gpt2__le(p, 8);
                p += 8;
                left -= 8;
            }
            need = 0;
        }
        x += 4 + n;
        xlen -= 4 + n;
    }
    return xlen == 0 && !need;
}

/* Parses a zip's central directory into *entries (sorted by name; the caller frees). Every entry must be
   stored (method 0), unencrypted, agree with its local header (name, method, sizes) and lie, with its local
   header, inside the file before the central directory, without overlapping another entry. */
static gpt2_status gpt2__zip_read(const unsigned char *data, size_t len, const char *file, gpt2__zip_entry **entries,
                                  int *n_entries) {
    *entries = NULL;
    *n_entries = 0;
    if (len < 22) return gpt2__fail(GPT2_ERR_FORMAT, "%s: %zu bytes is too short for a zip file", file, len);
    size_t eocd = 0;
    int found = 0;
    for (size_t i = len - 22;; i--) {
        if (gpt2__le(data + i, 4) == 0x06054b50u && i + 22 + gpt2__le(data + i + 20, 2) == len) { eocd = i; found = 1; break; }
        if (i == 0 || len - 22 - i >= 65535) break;
    }
    if (!found) return gpt2__fail(GPT2_ERR_FORMAT, "%s: no zip end-of-central-directory record (the file is truncated or not a zip)", file);
    const unsigned char *e = data + eocd;
    uint64_t count = gpt2__le(e + 10, 2), cd_size = gpt2__le(e + 12, 4), cd_off = gpt2__le(e + 16, 4);
    uint64_t disks = gpt2__le(e + 4, 2) | gpt2__le(e + 6, 2), limit = eocd;
    if (eocd >= 20 && gpt2__le(e - 20, 4) == 0x07064b50u) { /* zip64: the locator, then the zip64 record it points at */
        uint64_t z = gpt2__le(e - 12, 8);
        if (gpt2__le(e - 16, 4) != 0 || gpt2__le(e - 4, 4) > 1 || eocd - 20 < 56 || z > eocd - 20 - 56 ||
            gpt2__le(data + z, 4) != 0x06064b50u)
            return gpt2__fail(GPT2_ERR_FORMAT, "%s: bad zip64 end-of-central-directory locator", file);
        const unsigned char *z64 = data + z;
        disks = gpt2__le(z64 + 16, 4) | gpt2__le(z64 + 20, 4);
        count = gpt2__le(z64 + 32, 8);
        cd_size = gpt2__le(z64 + 40, 8);
        cd_off = gpt2__le(z64 + 48, 8);
        limit = z;
    } else if (count == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_off == 0xFFFFFFFFu) {
        return gpt2__fail(GPT2_ERR_FORMAT, "%s: the zip needs a zip64 record and has none", file);
    }
    if (disks) return gpt2__fail(GPT2_ERR_FORMAT, "%s: a zip split over several disks is not supported", file);
    if (count == 0 || count > GPT2__ZIP_MAX_ENTRIES)
        return gpt2__fail(GPT2_ERR_FORMAT, "%s: the zip has %llu entries (expected 1..%d)", file, (unsigned long long)count,
                          GPT2__ZIP_MAX_ENTRIES);
    if (cd_off > limit || cd_size > limit - cd_off)
        return gpt2__fail(GPT2_ERR_FORMAT, "%s: the zip's central directory [%llu, +%llu) lies outside the file", file,
                          (unsigned long long)cd_off, (unsigned long long)cd_size);
    gpt2__zip_entry *t = (gpt2__zip_entry *)gpt2__zalloc((size_t)count * sizeof *t);
    if (!t) return gpt2__fail(GPT2_ERR_OOM, "%s: cannot allocate the zip directory", file);
    const unsigned char *p = data + cd_off, *end = p + cd_size;
    gpt2_status st = GPT2_OK;
    for (uint64_t i = 0; i < count && !st; i++) {
        if (end - p < 46 || gpt2__le(p, 4) != 0x02014b50u) {
            st = gpt2__fail(GPT2_ERR_FORMAT, "%s: zip central directory entry %llu is malformed", file, (unsigned long long)i);
            break;
        }
        size_t flags = (size_t)gpt2__le(p + 8, 2), method = (size_t)gpt2__le(p + 10, 2);
        uint64_t csize = gpt2__le(p + 20, 4), usize = gpt2__le(p + 24, 4), off = gpt2__le(p + 42, 4);
        size_t nlen = (size_t)gpt2__le(p + 28, 2), xlen = (size_t)gpt2__le(p + 30, 2), clen = (size_t)gpt2__le(p + 32, 2);
        size_t disk = (size_t)gpt2__le(p + 34, 2);
        if ((size_t)(end - p) - 46 < nlen + xlen + clen) {
            st = gpt2__fail(GPT2_ERR_FORMAT, "%s: zip central directory entry %llu runs past the directory", file, (unsigned long long)i);
            break;
        }
        const char *name = (const char *)p + 46;
        int nm = nlen > 200 ? 200 : (int)nlen;
        if (!nlen || memchr(name, 0, nlen)) {
            st = gpt2__fail(GPT2_ERR_FORMAT, "%s: zip entry %llu has an empty or malformed name", file, (unsigned long long)i);
            break;
        }
        if (!gpt2__zip64_extra(p + 46 + nlen, xlen, &usize, &csize, &off) || (disk != 0 && disk != 0xFFFF)) {
            st = gpt2__fail(GPT2_ERR_FORMAT, "%s: zip entry \"%.*s\" has a malformed extra field", file, nm, name);
            break;
        }
        if (flags & 1) { st = gpt2__fail(GPT2_ERR_FORMAT, "%s: zip entry \"%.*s\" is encrypted", file, nm, name); break; }
        if (method != 0) {
            st = gpt2__fail(GPT2_ERR_FORMAT, "%s: zip entry \"%.*s\" is compressed (method %zu); torch.save stores entries "
                                             "uncompressed", file, nm, name, method);
            break;
        }
        if (csize != usize) {
            st = gpt2__fail(GPT2_ERR_FORMAT, "%s: zip entry \"%.*s\" is stored with %llu bytes but says it holds %llu", file, nm,
                            name, (unsigned long long)csize, (unsigned long long)usize);
            break;
        }
        /* the local header: where the data starts, and the same name, method and sizes */
        if (off > cd_off || cd_off - off < 30 || gpt2__le(data + off, 4) != 0x04034b50u) {
            st = gpt2__fail(GPT2_ERR_FORMAT, "%s: zip entry \"%.*s\": no local header at offset %llu", file, nm, name,
                            (unsigned long long)off);
            break;
        }
        const unsigned char *h = data + off;
        size_t lflags = (size_t)gpt2__le(h + 6, 2), lmethod = (size_t)gpt2__le(h + 8, 2);
        uint64_t lcsize = gpt2__le(h + 18, 4), lusize = gpt2__le(h + 22, 4);
        size_t lnlen = (size_t)gpt2__le(h + 26, 2), lxlen = (size_t)gpt2__le(h + 28, 2);
        uint64_t at = off + 30 + lnlen + lxlen;
        if (at > cd_off || usize > cd_off - at) {
            st = gpt2__fail(GPT2_ERR_FORMAT, "%s: zip entry \"%.*s\" of %llu bytes at offset %llu runs past the entries' "
                                             "area (%llu bytes)", file, nm, name, (unsigned long long)usize,
                            (unsigned long long)off, (unsigned long long)cd_off);
            break;
        }
        int sizes_ok = lcsize == 0 && lusize == 0 && (lflags & 8); /* sizes in a data descriptor after the data */
        if (!sizes_ok) {
            if (!gpt2__zip64_extra(h + 30 + lnlen, lxlen, &lusize, &lcsize, NULL)) lusize = lcsize = 0xFFFFFFFFu + (uint64_t)1;
            sizes_ok = lcsize == usize && lusize == usize;
        }
        if (lnlen != nlen || memcmp(h + 30, name, nlen) || lmethod != method || !sizes_ok) {
            st = gpt2__fail(GPT2_ERR_FORMAT, "%s: zip entry \"%.*s\": its local header disagrees with the central directory "
                                             "(name, method or size)", file, nm, name);
            break;
        }
        t[i].name = name;
        t[i].name_len = nlen;
        t[i].header = (size_t)off;
        t[i].data = (size_t)at;
        t[i].size = (size_t)usize;
        p += 46 + nlen + xlen + clen;
    }
    if (!st && p != end) st = gpt2__fail(GPT2_ERR_FORMAT, "%s: the zip's central directory size disagrees with its entries", file);
    if (!st) {
        qsort(t, (size_t)count, sizeof *t, gpt2__zip_by_offset);
        for (uint64_t i = 0; i + 1 < count && !st; i++)
            if (t[i].data + t[i].size > t[i + 1].header)
                st = gpt2__fail(GPT2_ERR_FORMAT, "%s: zip entries \"%.*s\" and \"%.*s\" overlap", file,
                                t[i].name_len > 200 ? 200 : (int)t[i].name_len, t[i].name,
                                t[i + 1].name_len > 200 ? 200 : (int)t[i + 1].name_len, t[i + 1].name);
    }
    if (!st) {
        qsort(t, (size_t)count, sizeof *t, gpt2__zip_by_name);
        for (uint64_t i = 0; i + 1 < count && !st; i++)
            if (!gpt2__zip_by_name(&t[i], &t[i + 1]))
                st = gpt2__fail(GPT2_ERR_FORMAT, "%s: zip entry \"%.*s\" appears twice", file,
                                t[i].name_len > 200 ? 200 : (int)t[i].name_len, t[i].name);
    }
    if (st) { GPT2_FREE(t); return st; }
    *entries = t;
    *n_entries = (int)count;
    return GPT2_OK;
}

/* The restricted unpickler's values. Containers hold object indices; nothing is ever called. */
enum { GPT2__PK_NONE, GPT2__PK_BOOL, GPT2__PK_INT, GPT2__PK_STR, GPT2__PK_TUPLE, GPT2__PK_LIST, GPT2__PK_DICT,
       GPT2__PK_GLOBAL, GPT2__PK_STORAGE, GPT2__PK_TENSOR };
/* the globals a state dict names: OrderedDict, the tensor and parameter rebuilders, then the storage types */
enum { GPT2__PK_ORDERED_DICT = 1, GPT2__PK_REBUILD_TENSOR, GPT2__PK_REBUILD_PARAMETER, GPT2__PK_STORAGE_TYPE };

/* Storage types by name: dtype for the slots ('F', 'H', 'B'; 0: a dtype the model cannot use, allowed for the
   tensors it ignores, such as the causal-mask buffers older transformers saved as bool or uint8). */
static const struct { const char *name, *dtype_name; char dtype; unsigned char esize; } gpt2__pt_storages[] = {
    {"FloatStorage", "float32", 'F', 4}, {"HalfStorage", "float16", 'H', 2}, {"BFloat16Storage", "bfloat16", 'B', 2},
    {"DoubleStorage", "float64", 0, 8}, {"LongStorage", "int64", 0, 8},      {"IntStorage", "int32", 0, 4},
    {"ShortStorage", "int16", 0, 2},    {"CharStorage", "int8", 0, 1},       {"ByteStorage", "uint8", 0, 1},
    {"BoolStorage", "bool", 0, 1}};
#define GPT2__PT_N_STORAGES ((int)(sizeof gpt2__pt_storages / sizeof gpt2__pt_storages[0]))

typedef struct gpt2__pk_obj {
    unsigned char type, sub; /* sub: a global's id; a storage's type index; 1 for a dict made by OrderedDict() */
    unsigned short depth;    /* nesting of containers, bounded */
    int n, cap, *items;      /* tuple, list: n items; dict: n pairs as key, value, key, value, ... */
    int64_t i;               /* int, bool; storage: element count; tensor: index in the tensor table */
    const unsigned char *s;  /* str (UTF-8, not NUL-terminated) or a storage's key */
    size_t slen;
} gpt2__pk_obj;

/* A tensor as _rebuild_tensor_v2 describes it: a view of a storage, row-major when contiguous is set. */
typedef struct gpt2__pk_tensor {
    int storage, ndim, contiguous;
    int64_t offset, numel, shape[8];
} gpt2__pk_tensor;

typedef struct gpt2__pk {
    const unsigned char *d;
    size_t len, pos, op; /* op: the offset of the opcode being read, for messages */
    const char *file;
    gpt2__pk_obj *obj;
    int n_obj, cap_obj;
    int stack[GPT2__PK_MAX_STACK], sp;
    int marks[GPT2__PK_MAX_MARKS], n_marks;
    int *memo;
    size_t n_memo, n_memoized; /* the memo's size; how many of its entries are set (MEMOIZE's next index) */
    gpt2__pk_tensor *t;
    int n_t, cap_t;
    gpt2_status new_failed; /* why gpt2__pk_new last returned -1 */
} gpt2__pk;

static gpt2_status gpt2__pk_err(gpt2__pk *u, const char *fmt, ...) GPT2__PRINTF(2, 3);
static gpt2_status gpt2__pk_err(gpt2__pk *u, const char *fmt, ...) {
    char what[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return gpt2__fail(GPT2_ERR_FORMAT, "%s: data.pkl at byte %zu: %s", u->file, u->op, what);
}

/* Grows *p (an array of *cap elements of size esz) to hold at least need, doubling, up to max. */
static int gpt2__grow(void **p, int *cap, int need, int max, size_t esz) {
    if (need <= *cap) return 1;
    if (need > max) return 0;
    int c = *cap ? *cap : 8;
    while (c < need) c = c > max / 2 ? max : 2 * c;
    void *q = gpt2__alloc((size_t)c * esz);
    if (!q) return 0;
    if (*cap) memcpy(q, *p, (size_t)*cap * esz);
    GPT2_FREE(*p);
    *p = q;
    *cap = c;
    return 1;
}

/* A new object of the given type: its index, or -1 after recording why. */
static int gpt2__pk_new(gpt2__pk *u, int type) {
    if (!gpt2__grow((void **)&u->obj, &u->cap_obj, u->n_obj + 1, GPT2__PK_MAX_OBJECTS, sizeof(gpt2__pk_obj))) {
        u->new_failed = u->n_obj + 1 > GPT2__PK_MAX_OBJECTS ? gpt2__pk_err(u, "more than %d objects", GPT2__PK_MAX_OBJECTS)
                                                            : gpt2__fail(GPT2_ERR_OOM, "%s: cannot allocate the unpickler's objects", u->file);
        return -1;
    }
    gpt2__pk_obj *o = &u->obj[u->n_obj];
    memset(o, 0, sizeof *o);
    o->type = (unsigned char)type;
    return u->n_obj++;
}

static gpt2_status gpt2__pk_push(gpt2__pk *u, int k) {
    if (k < 0) return u->new_failed;
    if (u->sp >= GPT2__PK_MAX_STACK) return gpt2__pk_err(u, "the stack is deeper than %d", GPT2__PK_MAX_STACK);
    u->stack[u->sp++] = k;
    return GPT2_OK;
}

/* How many values lie above the innermost mark (the only ones an opcode may pop). */
static int gpt2__pk_avail(const gpt2__pk *u) { return u->sp - (u->n_marks ? u->marks[u->n_marks - 1] : 0); }

/* Appends n object indices to container c, keeping its nesting depth bounded. */
static gpt2_status gpt2__pk_append(gpt2__pk *u, int c, const int *items, int n) {
    gpt2__pk_obj *o = &u->obj[c];
    if (!gpt2__grow((void **)&o->items, &o->cap, o->n + n, INT32_MAX / 2, sizeof(int)))
        return gpt2__fail(GPT2_ERR_OOM, "%s: cannot allocate the unpickler's containers", u->file);
    for (int k = 0; k < n; k++) {
        o->items[o->n++] = items[k];
        int d = u->obj[items[k]].depth + 1;
        if (d > o->depth) o->depth = (unsigned short)(d > GPT2__PK_MAX_DEPTH + 1 ? GPT2__PK_MAX_DEPTH + 1 : d);
    }
    if (o->depth > GPT2__PK_MAX_DEPTH) return gpt2__pk_err(u, "values nested more than %d deep", GPT2__PK_MAX_DEPTH);
    return GPT2_OK;
}

/* A tuple of the top n values (which are popped). */
static gpt2_status gpt2__pk_tuple(gpt2__pk *u, int n) {
    if (gpt2__pk_avail(u) < n) return gpt2__pk_err(u, "stack underflow");
    int k = gpt2__pk_new(u, GPT2__PK_TUPLE);
    if (k < 0) return gpt2__pk_push(u, k);
    u->sp -= n;
    gpt2_status st = gpt2__pk_append(u, k, u->stack + u->sp, n);
    return st ? st : gpt2__pk_push(u, k);
}

static int gpt2__pk_is_int(const gpt2__pk *u, int k) { return u->obj[k].type == GPT2__PK_INT; }

/* Names an opcode PyTorch does not write, for the message refusing it. */
static const char *gpt2__pk_opname(int op) {
    static const struct { unsigned char op; const char *name; } names[] = {
        {0x81, "NEWOBJ"}, {0x92, "NEWOBJ_EX"}, {'i', "INST"}, {'o', "OBJ"}, {'P', "PERSID"},
        {'G', "BINFLOAT"}, {'F', "FLOAT"}, {'I', "INT"}, {'L', "LONG"}, {0x8b, "LONG4"}, {'S', "STRING"},
        {'T', "BINSTRING"}, {'U', "SHORT_BINSTRING"}, {'V', "UNICODE"}, {'B', "BINBYTES"}, {'C', "SHORT_BINBYTES"},
        {0x8e, "BINBYTES8"}, {0x8d, "BINUNICODE8"}, {0x96, "BYTEARRAY8"}, {0x82, "EXT1"}, {0x83, "EXT2"}, {0x84, "EXT4"},
        {'0', "POP"}, {'1', "POP_MARK"}, {'2', "DUP"}, {'g', "GET"}, {'p', "PUT"}, {'d', "DICT"}, {'l', "LIST"},
        {0x8f, "EMPTY_SET"}, {0x90, "ADDITEMS"}, {0x91, "FROZENSET"}, {0x97, "NEXT_BUFFER"}, {0x98, "READONLY_BUFFER"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].op == op) return names[i].name;
    return "unknown";
}

/* Pushes the global module.name, if it is one a state dict uses (GLOBAL reads the two names from the opcode's
   text, STACK_GLOBAL, protocol 4's form, pops them as strings). */
static gpt2_status gpt2__pk_global(gpt2__pk *u, int from_stack) {
    const char *lines[2];
    size_t lens[2];
    for (int l = 0; l < 2; l++) {
        if (from_stack) {
            if (gpt2__pk_avail(u) < 2 - l) return gpt2__pk_err(u, "stack underflow");
            const gpt2__pk_obj *o = &u->obj[u->stack[u->sp - 2 + l]];
            if (o->type != GPT2__PK_STR) return gpt2__pk_err(u, "STACK_GLOBAL with names that are not strings");
            lines[l] = (const char *)o->s;
            lens[l] = o->slen;
            continue;
        }
        const unsigned char *nl = (const unsigned char *)memchr(u->d + u->pos, '\n', u->len - u->pos < 256 ? u->len - u->pos : 256);
        if (!nl) return gpt2__pk_err(u, "GLOBAL without a newline-terminated name within 256 bytes");
        lines[l] = (const char *)u->d + u->pos;
        lens[l] = (size_t)(nl - (u->d + u->pos));
        u->pos += lens[l] + 1;
    }
    if (from_stack) u->sp -= 2;
    int id = 0;
#define GPT2__IS(l, s) (lens[l] == sizeof(s) - 1 && !memcmp(lines[l], s, sizeof(s) - 1))
    if (GPT2__IS(0, "collections") && GPT2__IS(1, "OrderedDict")) id = GPT2__PK_ORDERED_DICT;
    else if (GPT2__IS(0, "torch._utils") && GPT2__IS(1, "_rebuild_tensor_v2")) id = GPT2__PK_REBUILD_TENSOR;
    else if (GPT2__IS(0, "torch._utils") && GPT2__IS(1, "_rebuild_parameter")) id = GPT2__PK_REBUILD_PARAMETER;
    else if (GPT2__IS(0, "torch"))
        for (int s = 0; s < GPT2__PT_N_STORAGES && !id; s++)
            if (lens[1] == strlen(gpt2__pt_storages[s].name) && !memcmp(lines[1], gpt2__pt_storages[s].name, lens[1]))
                id = GPT2__PK_STORAGE_TYPE + s;
#undef GPT2__IS
    if (!id) {
        char shown[2][64];
        for (int l = 0; l < 2; l++) { /* printable ASCII only, cut at 60 bytes */
            size_t n = 0;
            for (size_t i = 0; i < lens[l] && n < 60; i++) shown[l][n++] = lines[l][i] >= 0x20 && lines[l][i] < 0x7f ? lines[l][i] : '?';
            shown[l][n] = 0;
        }
        return gpt2__pk_err(u, "global %s.%s is not allowed (a state dict names only collections.OrderedDict, "
                               "torch._utils._rebuild_tensor_v2 and torch's storage types)", shown[0], shown[1]);
    }
    int k = gpt2__pk_new(u, GPT2__PK_GLOBAL);
    if (k >= 0) u->obj[k].sub = (unsigned char)id;
    return gpt2__pk_push(u, k);
}

/* BINPERSID: ('storage', storage type, key, location, numel) names the storage in entry data/KEY. */
static gpt2_status gpt2__pk_persid(gpt2__pk *u) {
    if (gpt2__pk_avail(u) < 1) return gpt2__pk_err(u, "stack underflow");
    const gpt2__pk_obj *pid = &u->obj[u->stack[--u->sp]];
    if (pid->type != GPT2__PK_TUPLE || pid->n != 5) return gpt2__pk_err(u, "a persistent id that is not a 5-tuple");
    const gpt2__pk_obj *tag = &u->obj[pid->items[0]], *type = &u->obj[pid->items[1]], *key = &u->obj[pid->items[2]];
    const gpt2__pk_obj *loc = &u->obj[pid->items[3]], *numel = &u->obj[pid->items[4]];
    if (tag->type != GPT2__PK_STR || tag->slen != 7 || memcmp(tag->s, "storage", 7))
        return gpt2__pk_err(u, "a persistent id that is not a storage");
    if (type->type != GPT2__PK_GLOBAL || type->sub < GPT2__PK_STORAGE_TYPE)
        return gpt2__pk_err(u, "a storage whose type is not one of torch's storage types");
    if (key->type != GPT2__PK_STR || key->slen == 0 || key->slen > 64 || memchr(key->s, 0, key->slen) ||
        loc->type != GPT2__PK_STR || numel->type != GPT2__PK_INT || numel->i < 0)
        return gpt2__pk_err(u, "a storage with a malformed key, location or size");
    gpt2__pk_obj storage; /* (copied before gpt2__pk_new may move the objects) */
    memset(&storage, 0, sizeof storage);
    storage.type = GPT2__PK_STORAGE;
    storage.sub = (unsigned char)(type->sub - GPT2__PK_STORAGE_TYPE);
    storage.s = key->s;
    storage.slen = key->slen;
    storage.i = numel->i;
    int k = gpt2__pk_new(u, GPT2__PK_STORAGE);
    if (k >= 0) u->obj[k] = storage;
    return gpt2__pk_push(u, k);
}

/* _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata]) */
static gpt2_status gpt2__pk_rebuild_tensor(gpt2__pk *u, const gpt2__pk_obj *args) {
    if (args->n != 6 && args->n != 7) return gpt2__pk_err(u, "_rebuild_tensor_v2 with %d arguments (expected 6 or 7)", args->n);
    const int *a = args->items;
    const gpt2__pk_obj *size = &u->obj[a[2]], *stride = &u->obj[a[3]];
    if (u->obj[a[0]].type != GPT2__PK_STORAGE || !gpt2__pk_is_int(u, a[1]) || u->obj[a[1]].i < 0 ||
        size->type != GPT2__PK_TUPLE || stride->type != GPT2__PK_TUPLE || size->n != stride->n || size->n > 8 ||
        u->obj[a[4]].type != GPT2__PK_BOOL)
        return gpt2__pk_err(u, "_rebuild_tensor_v2 with malformed arguments (storage, offset, size, stride, requires_grad)");
    if (u->n_t >= GPT2__PK_MAX_TENSORS) return gpt2__pk_err(u, "more than %d tensors", GPT2__PK_MAX_TENSORS);
    if (!gpt2__grow((void **)&u->t, &u->cap_t, u->n_t + 1, GPT2__PK_MAX_TENSORS, sizeof(gpt2__pk_tensor)))
        return gpt2__fail(GPT2_ERR_OOM, "%s: cannot allocate the tensor table", u->file);
    gpt2__pk_tensor *t = &u->t[u->n_t];
    memset(t, 0, sizeof *t);
    t->storage = a[0];
    t->offset = u->obj[a[1]].i;
    t->ndim = size->n;
    t->numel = 1;
    t->contiguous = 1;
    int64_t expect = 1;
    for (int d = size->n - 1; d >= 0; d--) {
        const gpt2__pk_obj *n = &u->obj[size->items[d]], *s = &u->obj[stride->items[d]];
        if (n->type != GPT2__PK_INT || s->type != GPT2__PK_INT || n->i < 0 || n->i > ((int64_t)1 << 40))
            return gpt2__pk_err(u, "a tensor's size or stride is not a small non-negative integer");
        t->shape[d] = n->i;
        if (n->i != 1 && s->i != expect) t->contiguous = 0; /* as torch's is_contiguous: size-1 dims have any stride */
        if (expect > ((int64_t)1 << 40) || (t->numel && t->numel > ((int64_t)1 << 40))) /* products stay below 2^80 */
            return gpt2__pk_err(u, "a tensor of more than 2^40 elements");
        expect *= n->i;
        t->numel *= n->i;
    }
    if (t->numel > ((int64_t)1 << 40)) return gpt2__pk_err(u, "a tensor of more than 2^40 elements");
    int k = gpt2__pk_new(u, GPT2__PK_TENSOR);
    if (k >= 0) u->obj[k].i = u->n_t++;
    return gpt2__pk_push(u, k);
}

static gpt2_status gpt2__pk_reduce(gpt2__pk *u) {
    if (gpt2__pk_avail(u) < 2) return gpt2__pk_err(u, "stack underflow");
    const gpt2__pk_obj *args = &u->obj[u->stack[u->sp - 1]], *f = &u->obj[u->stack[u->sp - 2]];
    u->sp -= 2;
    if (f->type != GPT2__PK_GLOBAL) return gpt2__pk_err(u, "REDUCE on a value that is not a global");
    if (args->type != GPT2__PK_TUPLE) return gpt2__pk_err(u, "REDUCE with arguments that are not a tuple");
    if (f->sub == GPT2__PK_ORDERED_DICT) {
        if (args->n != 0) return gpt2__pk_err(u, "OrderedDict called with arguments");
        int k = gpt2__pk_new(u, GPT2__PK_DICT);
        if (k >= 0) u->obj[k].sub = 1;
        return gpt2__pk_push(u, k);
    }
    if (f->sub == GPT2__PK_REBUILD_TENSOR) return gpt2__pk_rebuild_tensor(u, args);
    if (f->sub == GPT2__PK_REBUILD_PARAMETER) { /* _rebuild_parameter(data, requires_grad, backward_hooks) */
        if (args->n != 3 || u->obj[args->items[0]].type != GPT2__PK_TENSOR || u->obj[args->items[1]].type != GPT2__PK_BOOL)
            return gpt2__pk_err(u, "_rebuild_parameter with malformed arguments");
        return gpt2__pk_push(u, args->items[0]);
    }
    return gpt2__pk_err(u, "REDUCE calls torch.%s, which is a storage type, not a function", gpt2__pt_storages[f->sub - GPT2__PK_STORAGE_TYPE].name);
}

/* Runs data.pkl; on success *result is the state dict's object (a dict). */
static gpt2_status gpt2__pk_run(gpt2__pk *u, int *result) {
    gpt2_status st = GPT2_OK;
    for (;;) {
        if (u->pos >= u->len) return gpt2__fail(GPT2_ERR_FORMAT, "%s: data.pkl ends without STOP (truncated)", u->file);
        u->op = u->pos;
        int op = u->d[u->pos++];
        size_t left = u->len - u->pos;
        uint64_t n = 0;
        int k;
        switch (op) {
        case 0x80: /* PROTO */
            if (left < 1 || u->d[u->pos] > 5) return gpt2__pk_err(u, "bad PROTO");
            u->pos++;
            break;
        case 0x95: /* FRAME: a length hint */
            if (left < 8 || gpt2__le(u->d + u->pos, 8) > left - 8) return gpt2__pk_err(u, "FRAME past the end");
            u->pos += 8;
            break;
        case '(': /* MARK */
            if (u->n_marks >= GPT2__PK_MAX_MARKS) return gpt2__pk_err(u, "marks nested more than %d deep", GPT2__PK_MAX_MARKS);
            u->marks[u->n_marks++] = u->sp;
            break;
        case '}': st = gpt2__pk_push(u, gpt2__pk_new(u, GPT2__PK_DICT)); break;
        case ']': st = gpt2__pk_push(u, gpt2__pk_new(u, GPT2__PK_LIST)); break;
        case ')': st = gpt2__pk_push(u, gpt2__pk_new(u, GPT2__PK_TUPLE)); break;
        case 'N': st = gpt2__pk_push(u, gpt2__pk_new(u, GPT2__PK_NONE)); break;
        case 0x88: case 0x89: /* NEWTRUE, NEWFALSE */
            if ((k = gpt2__pk_new(u, GPT2__PK_BOOL)) >= 0) u->obj[k].i = op == 0x88;
            st = gpt2__pk_push(u, k);
            break;
        case 'X': case 0x8c: { /* BINUNICODE (4-byte length), SHORT_BINUNICODE (1-byte length) */
            int w = op == 'X' ? 4 : 1;
            if (left < (size_t)w) return gpt2__pk_err(u, "string length past the end");
            n = gpt2__le(u->d + u->pos, w);
            if (n > GPT2__PK_MAX_STRING) return gpt2__pk_err(u, "a string of %llu bytes (the limit is %d)", (unsigned long long)n, GPT2__PK_MAX_STRING);
            if (n > left - (size_t)w) return gpt2__pk_err(u, "a string of %llu bytes runs past the end", (unsigned long long)n);
            if ((k = gpt2__pk_new(u, GPT2__PK_STR)) >= 0) { u->obj[k].s = u->d + u->pos + w; u->obj[k].slen = (size_t)n; }
            u->pos += (size_t)w + (size_t)n;
            st = gpt2__pk_push(u, k);
            break;
        }
        case 'J': case 'K': case 'M': { /* BININT (int32), BININT1 (uint8), BININT2 (uint16) */
            int w = op == 'J' ? 4 : op == 'K' ? 1 : 2;
            if (left < (size_t)w) return gpt2__pk_err(u, "integer past the end");
            if ((k = gpt2__pk_new(u, GPT2__PK_INT)) >= 0)
                u->obj[k].i = op == 'J' ? (int64_t)(int32_t)(uint32_t)gpt2__le(u->d + u->pos, 4) : (int64_t)gpt2__le(u->d + u->pos, w);
            u->pos += (size_t)w;
            st = gpt2__pk_push(u, k);
            break;
        }
        case 0x8a: { /* LONG1: n bytes, little-endian two's complement; up to 8 here */
            if (left < 1 || (n = u->d[u->pos]) > left - 1) return gpt2__pk_err(u, "LONG1 past the end");
            if (n > 8) return gpt2__pk_err(u, "an integer of %u bytes (at most 8 are read)", (unsigned)n);
            uint64_t v = n ? gpt2__le(u->d + u->pos + 1, (int)n) : 0;
            if (n && n < 8 && (u->d[u->pos + n] & 0x80)) v |= ~(uint64_t)0 << (8 * n); /* sign-extend */
            if ((k = gpt2__pk_new(u, GPT2__PK_INT)) >= 0) u->obj[k].i = (int64_t)v;
            u->pos += 1 + (size_t)n;
            st = gpt2__pk_push(u, k);
            break;
        }
        case 't': /* TUPLE: everything above the mark */
            if (!u->n_marks) return gpt2__pk_err(u, "TUPLE without a MARK");
            k = gpt2__pk_avail(u);
            u->n_marks--;
            st = gpt2__pk_tuple(u, k);
            break;
        case 0x85: case 0x86: case 0x87: st = gpt2__pk_tuple(u, op - 0x84); break; /* TUPLE1..3 */
        case 'q': case 'r': case 0x94: { /* BINPUT (1-byte index), LONG_BINPUT (4-byte), MEMOIZE (the next index) */
            int w = op == 'q' ? 1 : op == 'r' ? 4 : 0;
            if (left < (size_t)w) return gpt2__pk_err(u, "memo index past the end");
            n = w ? gpt2__le(u->d + u->pos, w) : u->n_memoized;
            u->pos += (size_t)w;
            if (n >= GPT2__PK_MAX_MEMO || n >= u->len)
                return gpt2__pk_err(u, "memo index %llu is over the limit (%d, and the pickle's size)", (unsigned long long)n, GPT2__PK_MAX_MEMO);
            if (gpt2__pk_avail(u) < 1) return gpt2__pk_err(u, "memoizing an empty stack");
            if (n >= u->n_memo) {
                int cap = (int)u->n_memo;
                if (!gpt2__grow((void **)&u->memo, &cap, (int)n + 1, GPT2__PK_MAX_MEMO, sizeof(int)))
                    return gpt2__fail(GPT2_ERR_OOM, "%s: cannot allocate the unpickler's memo", u->file);
                for (size_t i = u->n_memo; i < (size_t)cap; i++) u->memo[i] = -1;
                u->n_memo = (size_t)cap;
            }
            u->n_memoized += u->memo[n] < 0;
            u->memo[n] = u->stack[u->sp - 1];
            break;
        }
        case 'h': case 'j': { /* BINGET, LONG_BINGET */
            int w = op == 'h' ? 1 : 4;
            if (left < (size_t)w) return gpt2__pk_err(u, "memo index past the end");
            n = gpt2__le(u->d + u->pos, w);
            u->pos += (size_t)w;
            if (n >= u->n_memo || u->memo[n] < 0) return gpt2__pk_err(u, "memo index %llu was never set", (unsigned long long)n);
            st = gpt2__pk_push(u, u->memo[n]);
            break;
        }
        case 'u': case 'e': { /* SETITEMS (key, value pairs), APPENDS: the values above the mark into the container below it */
            if (!u->n_marks) return gpt2__pk_err(u, "%s without a MARK", op == 'u' ? "SETITEMS" : "APPENDS");
            int base = u->marks[--u->n_marks];
            k = u->sp - base;
            if (base < 1 || (u->n_marks && base - 1 < u->marks[u->n_marks - 1])) return gpt2__pk_err(u, "stack underflow");
            gpt2__pk_obj *c = &u->obj[u->stack[base - 1]];
            if (c->type != (op == 'u' ? GPT2__PK_DICT : GPT2__PK_LIST))
                return gpt2__pk_err(u, "%s on a value that is not a %s", op == 'u' ? "SETITEMS" : "APPENDS", op == 'u' ? "dict" : "list");
            if (op == 'u' && (k & 1)) return gpt2__pk_err(u, "SETITEMS with a key and no value");
            st = gpt2__pk_append(u, u->stack[base - 1], u->stack + base, k);
            u->sp = base;
            break;
        }
        case 's': case 'a': { /* SETITEM (key, value), APPEND (value) */
            int m = op == 's' ? 2 : 1;
            if (gpt2__pk_avail(u) < m + 1) return gpt2__pk_err(u, "stack underflow");
            int c = u->stack[u->sp - m - 1];
            if (u->obj[c].type != (op == 's' ? GPT2__PK_DICT : GPT2__PK_LIST))
                return gpt2__pk_err(u, "%s on a value that is not a %s", op == 's' ? "SETITEM" : "APPEND", op == 's' ? "dict" : "list");
            st = gpt2__pk_append(u, c, u->stack + u->sp - m, m);
            u->sp -= m;
            break;
        }
        case 'b': { /* BUILD: only an OrderedDict's own attributes (a state dict's _metadata), which are not needed */
            if (gpt2__pk_avail(u) < 2) return gpt2__pk_err(u, "stack underflow");
            const gpt2__pk_obj *state = &u->obj[u->stack[u->sp - 1]], *target = &u->obj[u->stack[u->sp - 2]];
            if (target->type != GPT2__PK_DICT || target->sub != 1 || state->type != GPT2__PK_DICT)
                return gpt2__pk_err(u, "BUILD on something other than an OrderedDict's attributes");
            u->sp--;
            break;
        }
        case 'c': case 0x93: st = gpt2__pk_global(u, op == 0x93); break; /* GLOBAL, STACK_GLOBAL */
        case 'Q': st = gpt2__pk_persid(u); break;
        case 'R': st = gpt2__pk_reduce(u); break;
        case '.': /* STOP */
            if (u->n_marks || u->sp != 1) return gpt2__pk_err(u, "STOP with %d values and %d marks left (expected one value)", u->sp, u->n_marks);
            if (u->obj[u->stack[0]].type != GPT2__PK_DICT) return gpt2__pk_err(u, "the pickle holds no dict (not a state dict)");
            *result = u->stack[0];
            return GPT2_OK;
        default:
            return gpt2__pk_err(u, "opcode 0x%02X (%s) is not one PyTorch writes for a state dict", op, gpt2__pk_opname(op));
        }
        if (st) return st;
    }
}

static void gpt2__pk_free(gpt2__pk *u) {
    for (int i = 0; i < u->n_obj; i++) GPT2_FREE(u->obj[i].items);
    GPT2_FREE(u->obj);
    GPT2_FREE(u->memo);
    GPT2_FREE(u->t);
}

/* A PyTorch checkpoint opened: its entries, its unpickled state dict, and the archive's name prefix. */
typedef struct gpt2__pt {
    const unsigned char *data;
    const char *file;
    gpt2__zip_entry *e;
    int n_e;
    const char *prefix; /* "ARCHIVE/" (not NUL-terminated) */
    size_t prefix_len;
    gpt2__pk *u;
    int dict; /* the state dict's object */
} gpt2__pt;

static int gpt2__pt_count(const gpt2__pt *pt) { return pt->u->obj[pt->dict].n / 2; }

static void gpt2__pt_close(gpt2__pt *pt) {
    if (pt->u) gpt2__pk_free(pt->u);
    GPT2_FREE(pt->u);
    GPT2_FREE(pt->e);
    memset(pt, 0, sizeof *pt);
}

static gpt2_status gpt2__pt_open(gpt2__pt *pt, const unsigned char *data, size_t len, const char *file) {
    memset(pt, 0, sizeof *pt);
    pt->data = data;
    pt->file = file;
    if (len >= 2 && data[0] == 0x80 && data[1] <= 5)
        return gpt2__fail(GPT2_ERR_FORMAT, "%s: saved by torch < 1.6 (legacy format): re-save with torch.save(..., "
                                           "_use_new_zipfile_serialization=True) or convert to safetensors", file);
    if (len < 4 || gpt2__le(data, 4) != 0x04034b50u)
        return gpt2__fail(GPT2_ERR_FORMAT, "%s: not a PyTorch checkpoint (torch.save writes a zip file; this does not start as one)", file);
    gpt2_status st = gpt2__zip_read(data, len, file, &pt->e, &pt->n_e);
    if (st) return st;
    /* the one ARCHIVE/data.pkl */
    const gpt2__zip_entry *pkl = NULL;
    for (int i = 0; i < pt->n_e; i++) {
        const gpt2__zip_entry *e = &pt->e[i];
        const char *slash = (const char *)memchr(e->name, '/', e->name_len);
        if (!slash || (size_t)(slash - e->name) + 9 != e->name_len || memcmp(slash, "/data.pkl", 9)) continue;
        if (pkl) { st = gpt2__fail(GPT2_ERR_FORMAT, "%s: the zip holds two data.pkl entries", file); break; }
        pkl = e;
    }
    if (!st && !pkl) st = gpt2__fail(GPT2_ERR_FORMAT, "%s: a zip without ARCHIVE/data.pkl (not a torch.save checkpoint)", file);
    if (st) { gpt2__pt_close(pt); return st; }
    pt->prefix = pkl->name;
    pt->prefix_len = pkl->name_len - 8;
    /* byteorder, when present, must be little */
    char bo[64];
    if ((size_t)snprintf(bo, sizeof bo, "%.*sbyteorder", (int)pt->prefix_len, pt->prefix) < sizeof bo) {
        const gpt2__zip_entry *b = gpt2__zip_find(pt->e, pt->n_e, bo, strlen(bo));
        if (b && !((b->size == 6 || (b->size == 7 && data[b->data + 6] == '\n')) && !memcmp(data + b->data, "little", 6))) {
            gpt2__pt_close(pt);
            return gpt2__fail(GPT2_ERR_FORMAT, "%s: saved with byteorder other than \"little\" (big-endian tensors are not supported)", file);
        }
    }
    if (pkl->size > GPT2__PK_MAX_PICKLE) {
        gpt2__pt_close(pt);
        return gpt2__fail(GPT2_ERR_FORMAT, "%s: data.pkl is %zu bytes, over the %zu-byte limit", file, pkl->size, GPT2__PK_MAX_PICKLE);
    }
    pt->u = (gpt2__pk *)gpt2__zalloc(sizeof *pt->u);
    if (!pt->u) { gpt2__pt_close(pt); return gpt2__fail(GPT2_ERR_OOM, "%s: cannot allocate the unpickler", file); }
    pt->u->d = data + pkl->data;
    pt->u->len = pkl->size;
    pt->u->file = file;
    st = gpt2__pk_run(pt->u, &pt->dict);
    if (!st && gpt2__pt_count(pt) > GPT2__PK_MAX_TENSORS)
        st = gpt2__fail(GPT2_ERR_FORMAT, "%s: the state dict has %d entries (the limit is %d)", file, gpt2__pt_count(pt), GPT2__PK_MAX_TENSORS);
    if (st) { gpt2__pt_close(pt); return st; }
    return GPT2_OK;
}

/* The state dict's k-th pair: its name into name[256] (NUL-terminated) and its tensor. */
static gpt2_status gpt2__pt_item(const gpt2__pt *pt, int k, char *name, const gpt2__pk_tensor **t) {
    const gpt2__pk *u = pt->u;
    const gpt2__pk_obj *d = &u->obj[pt->dict];
    const gpt2__pk_obj *key = &u->obj[d->items[2 * k]], *v = &u->obj[d->items[2 * k + 1]];
    if (key->type != GPT2__PK_STR) return gpt2__fail(GPT2_ERR_FORMAT, "%s: the state dict's key %d is not a string", pt->file, k);
    if (key->slen >= 256 || memchr(key->s, 0, key->slen))
        return gpt2__fail(GPT2_ERR_FORMAT, "%s: the state dict's key %d (%zu bytes) is not a tensor name", pt->file, k, key->slen);
    memcpy(name, key->s, key->slen);
    name[key->slen] = 0;
    if (v->type != GPT2__PK_TENSOR) return gpt2__fail(GPT2_ERR_FORMAT, "%s: the state dict's \"%s\" is not a tensor", pt->file, name);
    *t = &u->t[v->i];
    return GPT2_OK;
}

/* Checks one tensor against its storage's entry (named, sized and in bounds, row-major) and returns where its
   bytes start and the storage type's index. */
static gpt2_status gpt2__pt_locate(const gpt2__pt *pt, const char *name, const gpt2__pk_tensor *t, const unsigned char **src,
                                   int *type) {
    const gpt2__pk_obj *s = &pt->u->obj[t->storage];
    char entry[160];
    snprintf(entry, sizeof entry, "%.*sdata/%.*s", (int)pt->prefix_len, pt->prefix, (int)s->slen, (const char *)s->s);
    const gpt2__zip_entry *e = gpt2__zip_find(pt->e, pt->n_e, entry, strlen(entry));
    if (!e) return gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\": its storage's entry %s is missing", pt->file, name, entry);
    size_t esize = gpt2__pt_storages[s->sub].esize, bytes;
    if (!gpt2__mul_ok((size_t)s->i, esize, &bytes) || bytes != e->size)
        return gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\": entry %s holds %zu bytes, the pickle says %lld elements of %zu bytes",
                          pt->file, name, entry, e->size, (long long)s->i, esize);
    if (!t->contiguous)
        return gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\" is not contiguous (its strides are not row-major); "
                                           "save tensor.contiguous()", pt->file, name);
    if (t->offset > s->i || t->numel > s->i - t->offset)
        return gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\": elements [%lld, +%lld) lie outside its storage of %lld elements",
                          pt->file, name, (long long)t->offset, (long long)t->numel, (long long)s->i);
    *src = pt->data + e->data + (size_t)t->offset * esize;
    *type = s->sub;
    return GPT2_OK;
}

/* As gpt2__read_safetensors, for a checkpoint saved by torch.save (PyTorch's zip format): fills every slot's
   src, dtype and found from the state dict; names may carry the "transformer." prefix; the ignored tensors
   (causal-mask buffers, lm_head.weight) may have any dtype; every tensor of a slot must have its exact shape. */
static gpt2_status gpt2__read_pytorch_zip(const unsigned char *data, size_t len, const char *file, gpt2__slot *slots, int n_slots) {
    gpt2__pt pt;
    gpt2_status st = gpt2__pt_open(&pt, data, len, file);
    if (st) return st;
    char name[256];
    for (int k = 0, n = gpt2__pt_count(&pt); k < n && !st; k++) {
        const gpt2__pk_tensor *t = NULL;
        const unsigned char *src = NULL;
        int type = 0;
        if ((st = gpt2__pt_item(&pt, k, name, &t)) || (st = gpt2__pt_locate(&pt, name, t, &src, &type))) break;
        const char *key = strncmp(name, "transformer.", 12) ? name : name + 12;
        gpt2__slot *s = NULL;
        for (int i = 0; i < n_slots && !s; i++) if (!strcmp(slots[i].name, key)) s = &slots[i];
        if (!s) {
            if (!gpt2__ignored_tensor(key))
                st = gpt2__fail(GPT2_ERR_FORMAT, "%s: unexpected tensor \"%s\" (not part of a GPT-2 model with this config)", file, name);
            continue;
        }
        if (s->found) { st = gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\" appears twice", file, name); break; }
        if (!gpt2__pt_storages[type].dtype) {
            st = gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\" has dtype %s (expected float32, float16 or bfloat16)", file, name,
                            gpt2__pt_storages[type].dtype_name);
            break;
        }
        int shape_ok = t->ndim == s->ndim;
        for (int d = 0; shape_ok && d < t->ndim; d++) shape_ok = (uint64_t)t->shape[d] == (uint64_t)s->shape[d];
        if (!shape_ok) {
            char got[96] = "";
            size_t at = 0;
            for (int d = 0; d < t->ndim && at < sizeof got; d++) {
                int w = snprintf(got + at, sizeof got - at, d ? ", %lld" : "%lld", (long long)t->shape[d]);
                at = w < 0 ? sizeof got : at + (size_t)w;
            }
            if (s->ndim == 1)
                st = gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\" has shape [%s], expected [%zu] from config.json", file, name, got, s->shape[0]);
            else
                st = gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\" has shape [%s], expected [%zu, %zu] from config.json", file,
                                name, got, s->shape[0], s->shape[1]);
            break;
        }
        s->src = src;
        s->dtype = gpt2__pt_storages[type].dtype;
        s->found = 1;
    }
    gpt2__pt_close(&pt);
    if (st) return st;
    for (int i = 0; i < n_slots; i++)
        if (!slots[i].found && !slots[i].optional) return gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\" is missing", file, slots[i].name);
    return GPT2_OK;
}

/* ---------------------------------------------------------------- loader: a model's checkpoint files */

/* A growable list of tensor names (each allocated). */
typedef struct gpt2__names { char **v; int n, cap; } gpt2__names;

static void gpt2__names_free(gpt2__names *l) {
    for (int i = 0; i < l->n; i++) GPT2_FREE(l->v[i]);
    GPT2_FREE(l->v);
    memset(l, 0, sizeof *l);
}

static gpt2_status gpt2__names_add(gpt2__names *l, const char *s) {
    size_t n = strlen(s);
    char *c = (char *)gpt2__alloc(n + 1);
    if (!c || !gpt2__grow((void **)&l->v, &l->cap, l->n + 1, INT32_MAX / 2, sizeof(char *))) {
        GPT2_FREE(c);
        return gpt2__fail(GPT2_ERR_OOM, "cannot allocate a list of tensor names");
    }
    memcpy(c, s, n + 1);
    l->v[l->n++] = c;
    return GPT2_OK;
}

/* The tensor names a safetensors header lists (its entries are checked later, by gpt2__read_safetensors). */
static gpt2_status gpt2__safetensors_names(const unsigned char *data, size_t len, const char *file, gpt2__names *out) {
    if (len < 8) return gpt2__fail(GPT2_ERR_FORMAT, "%s: file is %zu bytes, too short for a safetensors header", file, len);
    uint64_t hlen = gpt2__le(data, 8);
    if (hlen > len - 8 || hlen > ((uint64_t)100 << 20))
        return gpt2__fail(GPT2_ERR_FORMAT, "%s: header length %llu exceeds the file size %zu or the 100 MB limit", file,
                          (unsigned long long)hlen, len);
    gpt2__json j = {(const char *)data + 8, (const char *)data + 8, (const char *)data + 8 + hlen, file, 0};
    int first = 1, r;
    char name[256];
    size_t nlen;
    gpt2_status st;
    while ((r = gpt2__json_member(&j, &first, name, sizeof name, &nlen)) == 1) {
        if (nlen >= sizeof name || strlen(name) != nlen)
            return gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor name of %zu bytes is too long or holds a NUL", file, nlen);
        if ((st = gpt2__json_skip(&j))) return st;
        if (out->n >= GPT2__PK_MAX_TENSORS) return gpt2__fail(GPT2_ERR_FORMAT, "%s: more than %d tensors", file, GPT2__PK_MAX_TENSORS);
        if (strcmp(name, "__metadata__") && (st = gpt2__names_add(out, name))) return st;
    }
    return r < 0 ? GPT2_ERR_FORMAT : GPT2_OK;
}

static gpt2_status gpt2__pytorch_names(const unsigned char *data, size_t len, const char *file, gpt2__names *out) {
    gpt2__pt pt;
    gpt2_status st = gpt2__pt_open(&pt, data, len, file);
    char name[256];
    const gpt2__pk_tensor *t = NULL;
    for (int k = 0, n = st ? 0 : gpt2__pt_count(&pt); k < n && !st; k++)
        if (!(st = gpt2__pt_item(&pt, k, name, &t))) st = gpt2__names_add(out, name);
    gpt2__pt_close(&pt);
    return st;
}

/* One file of a checkpoint, mapped; fmt 'S' safetensors, 'P' PyTorch zip. */
typedef struct gpt2__ckpt_file {
    char *path;
    unsigned char *data;
    size_t len;
    int mapped; /* as gpt2__map_file says; -1: memory the caller owns */
    char fmt;
} gpt2__ckpt_file;

/* A model's weights: one file, or the shards an index's weight_map names (sorted by tensor name here). */
typedef struct gpt2__ckpt {
    char name[4096]; /* the file or the index, for messages */
    gpt2__ckpt_file *files;
    int n_files, sharded;
    char **wm_name; /* the weight_map: tensor name -> index into files */
    int *wm_file, n_wm;
} gpt2__ckpt;

/* The CPU backend's copy of every slot (gpt2__slot_to_host), the file's pages of each tensor let go of once it is
   converted where the file is mapped: the process's peak memory is then about its copy, not the copy and the file. */
static void gpt2__ckpt_to_host(const gpt2__ckpt *ck, const gpt2__slot *slots, int n_slots) {
    for (int k = 0; k < n_slots; k++) {
        const gpt2__slot *s = &slots[k];
        gpt2__slot_to_host(s);
#if defined(MADV_DONTNEED)
        const size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = s->shape[0] * s->shape[1] * (s->dtype == 'F' ? 4 : 2);
        for (int i = 0; s->dst && s->src && page && i < ck->n_files; i++) {
            const gpt2__ckpt_file *f = &ck->files[i];
            if (f->mapped != 1 || s->src < f->data || s->src + bytes > f->data + f->len) continue;
            const uintptr_t a = ((uintptr_t)s->src + page - 1) / page * page, b = ((uintptr_t)s->src + bytes) / page * page;
            if (b > a) madvise((void *)a, b - a, MADV_DONTNEED); /* read-only file pages: a later read maps them again */
        }
#else
        (void)ck;
#endif
    }
}

static void gpt2__ckpt_close(gpt2__ckpt *ck) {
    for (int i = 0; i < ck->n_files; i++) {
        gpt2__ckpt_file *f = &ck->files[i];
        if (f->data && f->mapped >= 0) gpt2__unmap_file(f->data, f->len, f->mapped);
        GPT2_FREE(f->path);
    }
    for (int i = 0; i < ck->n_wm; i++) GPT2_FREE(ck->wm_name[i]);
    GPT2_FREE(ck->files);
    GPT2_FREE(ck->wm_name);
    GPT2_FREE(ck->wm_file);
    memset(ck, 0, sizeof *ck);
}

/* Total bytes of the checkpoint's files (the loader's check that the file can hold the config's parameters). */
static size_t gpt2__ckpt_bytes(const gpt2__ckpt *ck) {
    size_t total = 0;
    for (int i = 0; i < ck->n_files; i++) total = ck->files[i].len > (size_t)-1 - total ? (size_t)-1 : total + ck->files[i].len;
    return total;
}

static int gpt2__ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* A checkpoint of one image already in memory (not owned: gpt2_mpi_load's received bytes, a fuzzer's input). */
static gpt2_status gpt2__ckpt_memory(gpt2__ckpt *ck, const unsigned char *data, size_t len, const char *name, char fmt) {
    memset(ck, 0, sizeof *ck);
    snprintf(ck->name, sizeof ck->name, "%s", name);
    ck->files = (gpt2__ckpt_file *)gpt2__zalloc(sizeof *ck->files);
    if (!ck->files) return gpt2__fail(GPT2_ERR_OOM, "cannot allocate the checkpoint");
    ck->n_files = 1;
    ck->files[0].data = (unsigned char *)data;
    ck->files[0].len = len;
    ck->files[0].mapped = -1;
    ck->files[0].fmt = fmt;
    return GPT2_OK;
}

/* Maps path as the checkpoint's next file. */
static gpt2_status gpt2__ckpt_add(gpt2__ckpt *ck, const char *path, char fmt) {
    gpt2__ckpt_file *f = &ck->files[ck->n_files];
    size_t n = strlen(path);
    f->path = (char *)gpt2__alloc(n + 1);
    if (!f->path) return gpt2__fail(GPT2_ERR_OOM, "cannot allocate a file name");
    memcpy(f->path, path, n + 1);
    f->fmt = fmt;
    ck->n_files++;
    return gpt2__map_file(path, &f->data, &f->len, &f->mapped);
}

/* qsort / bsearch comparators: over an array of strings, and over an array of pointers to strings */
static int gpt2__str_cmp(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }
static int gpt2__str_ptr_cmp(const void *a, const void *b) { return strcmp(**(char *const *const *)a, **(char *const *const *)b); }

/* Checks a shard's file name from an index: a plain name in the index's directory. */
static int gpt2__plain_file_name(const char *s) {
    return *s && !strchr(s, '/') && !strchr(s, '\\') && !strchr(s, ':') && !strstr(s, "..");
}

/* Shards named NAME-0000K-of-0000N.EXT (save_pretrained's names): when every shard is so named, with one NAME,
   N and EXT, the weight_map must name all N of them. A name "NAME-K-of-N.EXT" is split as prefix "NAME-",
   K, and the tail "-of-N.EXT". */
static int gpt2__shard_name(const char *base, size_t *k_at, size_t *k_len, long *k, long *n) {
    const char *of = strstr(base, "-of-"), *p;
    if (!of) return 0;
    char *end;
    *n = strtol(of + 4, &end, 10);
    if (end == of + 4 || *end != '.' || *n < 1 || *n > 99999) return 0;
    for (p = of; p > base && p[-1] >= '0' && p[-1] <= '9'; p--) {}
    if (p == of || p == base || p[-1] != '-' || of - p > 6) return 0;
    *k = strtol(p, NULL, 10);
    *k_at = (size_t)(p - base);
    *k_len = (size_t)(of - p);
    return 1;
}

static gpt2_status gpt2__shard_series(const gpt2__ckpt *ck) {
    const char *first = strrchr(ck->files[0].path, '/') + 1;
    size_t at0, len0;
    long k, n0, n;
    if (!gpt2__shard_name(first, &at0, &len0, &k, &n0)) return GPT2_OK;
    unsigned char *have = (unsigned char *)gpt2__zalloc((size_t)n0 + 1);
    if (!have) return gpt2__fail(GPT2_ERR_OOM, "cannot allocate the shards' list");
    int series = 1;
    for (int f = 0; f < ck->n_files && series; f++) {
        const char *b = strrchr(ck->files[f].path, '/') + 1;
        size_t at, len;
        series = gpt2__shard_name(b, &at, &len, &k, &n) && n == n0 && at == at0 && !strncmp(b, first, at) &&
                 !strcmp(b + at + len, first + at0 + len0);
        if (series && (k < 1 || k > n0)) {
            GPT2_FREE(have);
            return gpt2__fail(GPT2_ERR_FORMAT, "%s: the weight_map names shard %s, numbered outside 1..%ld", ck->name, b, n0);
        }
        if (series) have[k] = 1;
    }
    long missing = 0;
    for (long i = 1; series && i <= n0 && !missing; i++) if (!have[i]) missing = i;
    GPT2_FREE(have);
    if (missing)
        return gpt2__fail(GPT2_ERR_FORMAT, "%s: the weight_map names no tensor in shard %ld of %ld (%.*s%0*ld%s)", ck->name, missing, n0,
                          (int)at0, first, (int)len0, missing, first + at0 + len0);
    return GPT2_OK;
}

/* Reads an index ({"metadata": ..., "weight_map": {tensor: shard}}) and maps each shard it names once. */
static gpt2_status gpt2__ckpt_index(gpt2__ckpt *ck, const char *index_path, const char *dir, char fmt) {
    char *text;
    size_t len;
    gpt2_status st = gpt2__read_file(index_path, &text, &len);
    if (st) return st;
    snprintf(ck->name, sizeof ck->name, "%s", index_path);
    ck->sharded = 1;
    gpt2__names names, shards;
    memset(&names, 0, sizeof names);
    memset(&shards, 0, sizeof shards);
    gpt2__json j = {text, text, text + len, ck->name, 0};
    int first = 1, r = 0, have_map = 0;
    char key[256], shard[256];
    size_t klen;
    while (!st && (r = gpt2__json_member(&j, &first, key, sizeof key, &klen)) == 1) {
        if (klen >= sizeof key || strcmp(key, "weight_map")) { st = gpt2__json_skip(&j); continue; }
        have_map = 1;
        int f2 = 1, r2 = 0;
        while (!st && (r2 = gpt2__json_member(&j, &f2, key, sizeof key, &klen)) == 1) {
            size_t sn;
            gpt2__json k = j;
            if (klen >= sizeof key || strlen(key) != klen) {
                st = gpt2__fail(GPT2_ERR_FORMAT, "%s: a weight_map tensor name of %zu bytes is too long or holds a NUL", ck->name, klen);
            } else if ((st = gpt2__json_string(&k, NULL, &sn))) {
            } else if (sn >= sizeof shard) {
                st = gpt2__fail(GPT2_ERR_FORMAT, "%s: the weight_map's shard for \"%s\" is a name of %zu bytes", ck->name, key, sn);
            } else {
                gpt2__json_string(&j, shard, NULL);
                shard[sn] = 0;
                if (strlen(shard) != sn || !gpt2__plain_file_name(shard))
                    st = gpt2__fail(GPT2_ERR_FORMAT, "%s: the weight_map puts \"%s\" in \"%s\", which is not a plain file name "
                                                     "in the index's directory", ck->name, key, shard);
                else if (names.n >= GPT2__PK_MAX_TENSORS)
                    st = gpt2__fail(GPT2_ERR_FORMAT, "%s: the weight_map names more than %d tensors", ck->name, GPT2__PK_MAX_TENSORS);
                else if (!(st = gpt2__names_add(&names, key)))
                    st = gpt2__names_add(&shards, shard);
            }
        }
        if (!st && r2 < 0) st = GPT2_ERR_FORMAT;
    }
    if (!st && r < 0) st = GPT2_ERR_FORMAT;
    GPT2_FREE(text);
    if (!st && (!have_map || !names.n)) st = gpt2__fail(GPT2_ERR_FORMAT, "%s: no weight_map (or an empty one)", ck->name);
    /* sort the tensors by name (refusing a name given twice); number the distinct shards */
    int n = names.n;
    char ***by_name = NULL, ***by_shard = NULL;
    if (!st) {
        by_name = (char ***)gpt2__alloc((size_t)n * sizeof *by_name);
        by_shard = (char ***)gpt2__alloc((size_t)n * sizeof *by_shard);
        ck->wm_name = (char **)gpt2__zalloc((size_t)n * sizeof(char *));
        ck->wm_file = (int *)gpt2__alloc((size_t)n * sizeof(int));
        ck->files = (gpt2__ckpt_file *)gpt2__zalloc((size_t)n * sizeof *ck->files);
        if (!by_name || !by_shard || !ck->wm_name || !ck->wm_file || !ck->files) st = gpt2__fail(GPT2_ERR_OOM, "cannot allocate the weight_map");
    }
    if (!st) {
        for (int i = 0; i < n; i++) { by_name[i] = &names.v[i]; by_shard[i] = &shards.v[i]; }
        qsort(by_name, (size_t)n, sizeof *by_name, gpt2__str_ptr_cmp);
        qsort(by_shard, (size_t)n, sizeof *by_shard, gpt2__str_ptr_cmp);
        for (int i = 0; i + 1 < n && !st; i++)
            if (!strcmp(*by_name[i], *by_name[i + 1]))
                st = gpt2__fail(GPT2_ERR_FORMAT, "%s: the weight_map names \"%s\" twice", ck->name, *by_name[i]);
    }
    /* the shards, each mapped once; shard_of[i]: the file of names.v[i] */
    int *shard_of = st ? NULL : (int *)gpt2__alloc((size_t)n * sizeof(int));
    if (!st && !shard_of) st = gpt2__fail(GPT2_ERR_OOM, "cannot allocate the weight_map");
    char path[4096];
    for (int i = 0; i < n && !st; i++) {
        if (i == 0 || strcmp(*by_shard[i], *by_shard[i - 1])) {
            if (!gpt2__join(path, sizeof path, dir, *by_shard[i])) { st = gpt2__fail(GPT2_ERR_ARG, "%s: path is too long", dir); break; }
            if ((st = gpt2__ckpt_add(ck, path, fmt))) {
                char why[GPT2_MAX_ERROR];
                snprintf(why, sizeof why, "%s", gpt2__error);
                st = gpt2__fail(st, "%s: shard \"%s\" of the weight_map: %s", ck->name, *by_shard[i], why);
                break;
            }
        }
        shard_of[by_shard[i] - shards.v] = ck->n_files - 1;
    }
    if (!st) st = gpt2__shard_series(ck);
    if (!st) {
        for (int i = 0; i < n; i++) {
            int at = (int)(by_name[i] - names.v);
            ck->wm_name[i] = names.v[at];
            ck->wm_file[i] = shard_of[at];
            names.v[at] = NULL;
        }
        ck->n_wm = n;
    }
    GPT2_FREE(shard_of);
    GPT2_FREE(by_name);
    GPT2_FREE(by_shard);
    for (int i = 0; i < names.n; i++) GPT2_FREE(names.v[i]);
    GPT2_FREE(names.v);
    gpt2__names_free(&shards);
    return st;
}

/* Opens a model's weights: path is a directory, a .safetensors / .bin file, or an index (*.index.json).
   In a directory, the first of model.safetensors, model.safetensors.index.json, pytorch_model.bin,
   pytorch_model.bin.index.json that exists. */
static gpt2_status gpt2__ckpt_open(gpt2__ckpt *ck, const char *path) {
    memset(ck, 0, sizeof *ck);
    static const struct { const char *name; char fmt; int index; } layout[] = {
        {"model.safetensors", 'S', 0}, {"model.safetensors.index.json", 'S', 1},
        {"pytorch_model.bin", 'P', 0}, {"pytorch_model.bin.index.json", 'P', 1}};
    char file[4096], dir[4096];
    char fmt = 0;
    int index = 0;
    struct stat sb;
    if (strlen(path) + 40 >= sizeof file) return gpt2__fail(GPT2_ERR_ARG, "%s: path is too long", path);
    if (gpt2__is_dir(path)) {
        snprintf(dir, sizeof dir, "%s", path);
        for (size_t i = 0; i < sizeof layout / sizeof layout[0] && !fmt; i++) {
            gpt2__join(file, sizeof file, path, layout[i].name);
            if (stat(file, &sb) == 0) { fmt = layout[i].fmt; index = layout[i].index; }
        }
        if (!fmt) {
            const char *other = NULL;
            gpt2__join(file, sizeof file, path, "tf_model.h5");
            if (stat(file, &sb) == 0) other = "tf_model.h5 (TensorFlow)";
            gpt2__join(file, sizeof file, path, "flax_model.msgpack");
            if (!other && stat(file, &sb) == 0) other = "flax_model.msgpack (Flax)";
            if (other)
                return gpt2__fail(GPT2_ERR_IO, "%s: holds %s weights only; gpt2.cuh reads model.safetensors or pytorch_model.bin: "
                                               "convert with transformers (from_pretrained(dir, from_%s=True)."
                                               "save_pretrained(dir, safe_serialization=True))", path, other, other[0] == 't' ? "tf" : "flax");
            return gpt2__fail(GPT2_ERR_IO, "%s: no model.safetensors, model.safetensors.index.json, pytorch_model.bin or "
                                           "pytorch_model.bin.index.json", path);
        }
    } else {
        snprintf(file, sizeof file, "%s", path);
        const char *slash = strrchr(path, '/');
        if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
        else snprintf(dir, sizeof dir, ".");
        index = gpt2__ends_with(path, ".index.json");
        if (index) fmt = strstr(slash ? slash : path, ".safetensors") ? 'S' : 'P';
        else if (gpt2__ends_with(path, ".safetensors")) fmt = 'S';
        else if (gpt2__ends_with(path, ".bin") || gpt2__ends_with(path, ".pt") || gpt2__ends_with(path, ".pth")) fmt = 'P';
        else { /* sniff: a zip is torch.save's, a pickle torch's legacy format, anything else safetensors */
            unsigned char head[4] = {0};
            FILE *f = fopen(path, "rb");
            size_t got = f ? fread(head, 1, 4, f) : 0;
            if (f) fclose(f);
            fmt = (got == 4 && gpt2__le(head, 4) == 0x04034b50u) || (got >= 1 && head[0] == 0x80) ? 'P' : 'S';
        }
    }
    gpt2_status st;
    if (index) st = gpt2__ckpt_index(ck, file, dir, fmt);
    else {
        snprintf(ck->name, sizeof ck->name, "%s", file);
        ck->files = (gpt2__ckpt_file *)gpt2__zalloc(sizeof *ck->files);
        st = ck->files ? gpt2__ckpt_add(ck, file, fmt) : gpt2__fail(GPT2_ERR_OOM, "cannot allocate the checkpoint");
    }
    if (st) gpt2__ckpt_close(ck);
    return st;
}

static gpt2_status gpt2__ckpt_read_file(const gpt2__ckpt_file *f, const char *name, gpt2__slot *slots, int n_slots) {
    return f->fmt == 'P' ? gpt2__read_pytorch_zip(f->data, f->len, name, slots, n_slots)
                         : gpt2__read_safetensors(f->data, f->len, name, slots, n_slots);
}

/* Fills every slot from the checkpoint. Sharded: every tensor a shard holds is in the weight_map under that
   shard, every weight_map entry is in its shard, no tensor is in two shards, and each slot's tensor is found
   exactly once, in the shard the weight_map names; then each shard is read for its own slots. */
static gpt2_status gpt2__ckpt_read(gpt2__ckpt *ck, gpt2__slot *slots, int n_slots) {
    if (!ck->sharded) return gpt2__ckpt_read_file(&ck->files[0], ck->files[0].path ? ck->files[0].path : ck->name, slots, n_slots);
    gpt2_status st = GPT2_OK;
    int *seen = (int *)gpt2__alloc((size_t)ck->n_wm * sizeof(int));
    int *slot_wm = (int *)gpt2__alloc((size_t)n_slots * sizeof(int));
    gpt2__slot *sub = (gpt2__slot *)gpt2__alloc((size_t)n_slots * sizeof(gpt2__slot));
    int *sub_of = (int *)gpt2__alloc((size_t)n_slots * sizeof(int));
    if (!seen || !slot_wm || !sub || !sub_of) st = gpt2__fail(GPT2_ERR_OOM, "cannot allocate the shards' bookkeeping");
    for (int i = 0; !st && i < ck->n_wm; i++) seen[i] = -1;
    for (int f = 0; f < ck->n_files && !st; f++) {
        const gpt2__ckpt_file *cf = &ck->files[f];
        gpt2__names names;
        memset(&names, 0, sizeof names);
        st = cf->fmt == 'P' ? gpt2__pytorch_names(cf->data, cf->len, cf->path, &names)
                            : gpt2__safetensors_names(cf->data, cf->len, cf->path, &names);
        for (int k = 0; k < names.n && !st; k++) {
            const char *key = names.v[k];
            char *const *hit = (char *const *)bsearch(&key, ck->wm_name, (size_t)ck->n_wm, sizeof(char *), gpt2__str_cmp);
            int w = hit ? (int)(hit - ck->wm_name) : -1;
            if (w < 0)
                st = gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\" is not in the weight_map of %s", cf->path, key, ck->name);
            else if (seen[w] == f)
                st = gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\" appears twice", cf->path, key);
            else if (seen[w] >= 0)
                st = gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\" is in both %s and %s", ck->name, key, ck->files[seen[w]].path, cf->path);
            else if (ck->wm_file[w] != f)
                st = gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\" is in %s, but the weight_map puts it in %s", ck->name, key,
                                cf->path, ck->files[ck->wm_file[w]].path);
            else seen[w] = f;
        }
        gpt2__names_free(&names);
    }
    for (int i = 0; i < ck->n_wm && !st; i++)
        if (seen[i] < 0)
            st = gpt2__fail(GPT2_ERR_FORMAT, "%s: the weight_map puts \"%s\" in %s, which does not hold it", ck->name, ck->wm_name[i],
                            ck->files[ck->wm_file[i]].path);
    /* each slot's entry in the weight_map (with or without the "transformer." prefix), exactly one */
    for (int s = 0; s < n_slots && !st; s++) slot_wm[s] = -1;
    for (int i = 0; i < ck->n_wm && !st; i++) {
        const char *key = strncmp(ck->wm_name[i], "transformer.", 12) ? ck->wm_name[i] : ck->wm_name[i] + 12;
        for (int s = 0; s < n_slots; s++) {
            if (strcmp(slots[s].name, key)) continue;
            if (slot_wm[s] >= 0)
                st = gpt2__fail(GPT2_ERR_FORMAT, "%s: the weight_map names tensor \"%s\" twice (as \"%s\" and \"%s\")", ck->name,
                                slots[s].name, ck->wm_name[slot_wm[s]], ck->wm_name[i]);
            slot_wm[s] = i;
            break;
        }
    }
    for (int s = 0; s < n_slots && !st; s++)
        if (slot_wm[s] < 0 && !slots[s].optional) st = gpt2__fail(GPT2_ERR_FORMAT, "%s: tensor \"%s\" is missing (not in the weight_map)", ck->name, slots[s].name);
    /* each shard read for its own slots: the reader checks their shapes and dtypes, and that it finds them all */
    for (int f = 0; f < ck->n_files && !st; f++) {
        int n = 0;
        for (int s = 0; s < n_slots; s++)
            if (slot_wm[s] >= 0 && ck->wm_file[slot_wm[s]] == f) { sub[n] = slots[s]; sub_of[n++] = s; }
        st = gpt2__ckpt_read_file(&ck->files[f], ck->files[f].path, sub, n);
        for (int k = 0; k < n && !st; k++) slots[sub_of[k]] = sub[k];
    }
    GPT2_FREE(seen);
    GPT2_FREE(slot_wm);
    GPT2_FREE(sub);
    GPT2_FREE(sub_of);
    return st;
}

/* == [GPT2:TOKENIZER] == tokenizer: GPT-2 byte-level BPE ======================================================== */

/* GPT-2's tokenizer, byte-exact with tiktoken's encode_ordinary and HF tokenizers' ByteLevel BPE.

   encode: text -> pieces -> tokens.
   1. Pre-tokenizer: the text is cut into pieces by GPT-2's regular expression
          's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
      written out by hand in gpt2__tok_next_piece (the alternatives are tried in order at each
      position, as a backtracking regex engine does). Letters, numbers and whitespace come from
      the Unicode tables below.
   2. Each piece is BPE-merged on its own: start from one token per byte and repeatedly merge the
      adjacent pair with the lowest merge rank (merges.txt line order; ties: leftmost first).
   All text is ordinary text: "<|endoftext|>" in the input is seven tokens, not 50256.

   Invalid UTF-8 never fails: a byte that does not begin a well-formed UTF-8 sequence (Unicode's
   Table 3-7: no overlong forms, no surrogates, nothing above U+10FFFF, no truncated sequences) is
   a character of its own, of the class "other" (neither letter, number nor whitespace), so it
   joins a run of punctuation like any symbol. BPE works on bytes, so every byte string encodes
   and decode(encode(bytes)) == bytes for all input.

   decode: each id's bytes, concatenated (vocab.json stores token bytes in GPT-2's printable byte
   alphabet: bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF stand for themselves, the other 68 bytes
   for U+0100..U+0143 in byte order). */

/* BEGIN Unicode tables: generated by tools/gen_unicode_tables.py, do not edit */
/* Unicode 16.0.0, the version tiktoken's regex crate and HF tokenizers' Oniguruma use */
/* \p{L}: general categories Lu Ll Lt Lm Lo: 677 ranges [lo, hi] of code points, sorted */
static const uint32_t gpt2__tok_letters[][2] = {
    {0x00041, 0x0005A}, {0x00061, 0x0007A}, {0x000AA, 0x000AA}, {0x000B5, 0x000B5}, {0x000BA, 0x000BA}, {0x000C0, 0x000D6},
    {0x000D8, 0x000F6}, {0x000F8, 0x002C1}, {0x002C6, 0x002D1}, {0x002E0, 0x002E4}, {0x002EC, 0x002EC}, {0x002EE, 0x002EE},
    {0x00370, 0x00374}, {0x00376, 0x00377}, {0x0037A, 0x0037D}, {0x0037F, 0x0037F}, {0x00386, 0x00386}, {0x00388, 0x0038A},
    {0x0038C, 0x0038C}, {0x0038E, 0x003A1}, {0x003A3, 0x003F5}, {0x003F7, 0x00481}, {0x0048A, 0x0052F}, {0x00531, 0x00556},
    {0x00559, 0x00559}, {0x00560, 0x00588}, {0x005D0, 0x005EA}, {0x005EF, 0x005F2}, {0x00620, 0x0064A}, {0x0066E, 0x0066F},
    {0x00671, 0x006D3}, {0x006D5, 0x006D5}, {0x006E5, 0x006E6}, {0x006EE, 0x006EF}, {0x006FA, 0x006FC}, {0x006FF, 0x006FF},
    {0x00710, 0x00710}, {0x00712, 0x0072F}, {0x0074D, 0x007A5}, {0x007B1, 0x007B1}, {0x007CA, 0x007EA}, {0x007F4, 0x007F5},
    {0x007FA, 0x007FA}, {0x00800, 0x00815}, {0x0081A, 0x0081A}, {0x00824, 0x00824}, {0x00828, 0x00828}, {0x00840, 0x00858},
    {0x00860, 0x0086A}, {0x00870, 0x00887}, {0x00889, 0x0088E}, {0x008A0, 0x008C9}, {0x00904, 0x00939}, {0x0093D, 0x0093D},
    {0x00950, 0x00950}, {0x00958, 0x00961}, {0x00971, 0x00980}, {0x00985, 0x0098C}, {0x0098F, 0x00990}, {0x00993, 0x009A8},
    {0x009AA, 0x009B0}, {0x009B2, 0x009B2}, {0x009B6, 0x009B9}, {0x009BD, 0x009BD}, {0x009CE, 0x009CE}, {0x009DC, 0x009DD},
    {0x009DF, 0x009E1}, {0x009F0, 0x009F1}, {0x009FC, 0x009FC}, {0x00A05, 0x00A0A}, {0x00A0F, 0x00A10}, {0x00A13, 0x00A28},
    {0x00A2A, 0x00A30}, {0x00A32, 0x00A33}, {0x00A35, 0x00A36}, {0x00A38, 0x00A39}, {0x00A59, 0x00A5C}, {0x00A5E, 0x00A5E},
    {0x00A72, 0x00A74}, {0x00A85, 0x00A8D}, {0x00A8F, 0x00A91}, {0x00A93, 0x00AA8}, {0x00AAA, 0x00AB0}, {0x00AB2, 0x00AB3},
    {0x00AB5, 0x00AB9}, {0x00ABD, 0x00ABD}, {0x00AD0, 0x00AD0}, {0x00AE0, 0x00AE1}, {0x00AF9, 0x00AF9}, {0x00B05, 0x00B0C},
    {0x00B0F, 0x00B10}, {0x00B13, 0x00B28}, {0x00B2A, 0x00B30}, {0x00B32, 0x00B33}, {0x00B35, 0x00B39}, {0x00B3D, 0x00B3D},
    {0x00B5C, 0x00B5D}, {0x00B5F, 0x00B61}, {0x00B71, 0x00B71}, {0x00B83, 0x00B83}, {0x00B85, 0x00B8A}, {0x00B8E, 0x00B90},
    {0x00B92, 0x00B95}, {0x00B99, 0x00B9A}, {0x00B9C, 0x00B9C}, {0x00B9E, 0x00B9F}, {0x00BA3, 0x00BA4}, {0x00BA8, 0x00BAA},
    {0x00BAE, 0x00BB9}, {0x00BD0, 0x00BD0}, {0x00C05, 0x00C0C}, {0x00C0E, 0x00C10}, {0x00C12, 0x00C28}, {0x00C2A, 0x00C39},
    {0x00C3D, 0x00C3D}, {0x00C58, 0x00C5A}, {0x00C5D, 0x00C5D}, {0x00C60, 0x00C61}, {0x00C80, 0x00C80}, {0x00C85, 0x00C8C},
    {0x00C8E, 0x00C90}, {0x00C92, 0x00CA8}, {0x00CAA, 0x00CB3}, {0x00CB5, 0x00CB9}, {0x00CBD, 0x00CBD}, {0x00CDD, 0x00CDE},
    {0x00CE0, 0x00CE1}, {0x00CF1, 0x00CF2}, {0x00D04, 0x00D0C}, {0x00D0E, 0x00D10}, {0x00D12, 0x00D3A}, {0x00D3D, 0x00D3D},
    {0x00D4E, 0x00D4E}, {0x00D54, 0x00D56}, {0x00D5F, 0x00D61}, {0x00D7A, 0x00D7F}, {0x00D85, 0x00D96}, {0x00D9A, 0x00DB1},
    {0x00DB3, 0x00DBB}, {0x00DBD, 0x00DBD}, {0x00DC0, 0x00DC6}, {0x00E01, 0x00E30}, {0x00E32, 0x00E33}, {0x00E40, 0x00E46},
    {0x00E81, 0x00E82}, {0x00E84, 0x00E84}, {0x00E86, 0x00E8A}, {0x00E8C, 0x00EA3}, {0x00EA5, 0x00EA5}, {0x00EA7, 0x00EB0},
    {0x00EB2, 0x00EB3}, {0x00EBD, 0x00EBD}, {0x00EC0, 0x00EC4}, {0x00EC6, 0x00EC6}, {0x00EDC, 0x00EDF}, {0x00F00, 0x00F00},
    {0x00F40, 0x00F47}, {0x00F49, 0x00F6C}, {0x00F88, 0x00F8C}, {0x01000, 0x0102A}, {0x0103F, 0x0103F}, {0x01050, 0x01055},
    {0x0105A, 0x0105D}, {0x01061, 0x01061}, {0x01065, 0x01066}, {0x0106E, 0x01070}, {0x01075, 0x01081}, {0x0108E, 0x0108E},
    {0x010A0, 0x010C5}, {0x010C7, 0x010C7}, {0x010CD, 0x010CD}, {0x010D0, 0x010FA}, {0x010FC, 0x01248}, {0x0124A, 0x0124D},
    {0x01250, 0x01256}, {0x01258, 0x01258}, {0x0125A, 0x0125D}, {0x01260, 0x01288}, {0x0128A, 0x0128D}, {0x01290, 0x012B0},
    {0x012B2, 0x012B5}, {0x012B8, 0x012BE}, {0x012C0, 0x012C0}, {0x012C2, 0x012C5}, {0x012C8, 0x012D6}, {0x012D8, 0x01310},
    {0x01312, 0x01315}, {0x01318, 0x0135A}, {0x01380, 0x0138F}, {0x013A0, 0x013F5}, {0x013F8, 0x013FD}, {0x01401, 0x0166C},
    {0x0166F, 0x0167F}, {0x01681, 0x0169A}, {0x016A0, 0x016EA}, {0x016F1, 0x016F8}, {0x01700, 0x01711}, {0x0171F, 0x01731},
    {0x01740, 0x01751}, {0x01760, 0x0176C}, {0x0176E, 0x01770}, {0x01780, 0x017B3}, {0x017D7, 0x017D7}, {0x017DC, 0x017DC},
    {0x01820, 0x01878}, {0x01880, 0x01884}, {0x01887, 0x018A8}, {0x018AA, 0x018AA}, {0x018B0, 0x018F5}, {0x01900, 0x0191E},
    {0x01950, 0x0196D}, {0x01970, 0x01974}, {0x01980, 0x019AB}, {0x019B0, 0x019C9}, {0x01A00, 0x01A16}, {0x01A20, 0x01A54},
    {0x01AA7, 0x01AA7}, {0x01B05, 0x01B33}, {0x01B45, 0x01B4C}, {0x01B83, 0x01BA0}, {0x01BAE, 0x01BAF}, {0x01BBA, 0x01BE5},
    {0x01C00, 0x01C23}, {0x01C4D, 0x01C4F}, {0x01C5A, 0x01C7D}, {0x01C80, 0x01C8A}, {0x01C90, 0x01CBA}, {0x01CBD, 0x01CBF},
    {0x01CE9, 0x01CEC}, {0x01CEE, 0x01CF3}, {0x01CF5, 0x01CF6}, {0x01CFA, 0x01CFA}, {0x01D00, 0x01DBF}, {0x01E00, 0x01F15},
    {0x01F18, 0x01F1D}, {0x01F20, 0x01F45}, {0x01F48, 0x01F4D}, {0x01F50, 0x01F57}, {0x01F59, 0x01F59}, {0x01F5B, 0x01F5B},
    {0x01F5D, 0x01F5D}, {0x01F5F, 0x01F7D}, {0x01F80, 0x01FB4}, {0x01FB6, 0x01FBC}, {0x01FBE, 0x01FBE}, {0x01FC2, 0x01FC4},
    {0x01FC6, 0x01FCC}, {0x01FD0, 0x01FD3}, {0x01FD6, 0x01FDB}, {0x01FE0, 0x01FEC}, {0x01FF2, 0x01FF4}, {0x01FF6, 0x01FFC},
    {0x02071, 0x02071}, {0x0207F, 0x0207F}, {0x02090, 0x0209C}, {0x02102, 0x02102}, {0x02107, 0x02107}, {0x0210A, 0x02113},
    {0x02115, 0x02115}, {0x02119, 0x0211D}, {0x02124, 0x02124}, {0x02126, 0x02126}, {0x02128, 0x02128}, {0x0212A, 0x0212D},
    {0x0212F, 0x02139}, {0x0213C, 0x0213F}, {0x02145, 0x02149}, {0x0214E, 0x0214E}, {0x02183, 0x02184}, {0x02C00, 0x02CE4},
    {0x02CEB, 0x02CEE}, {0x02CF2, 0x02CF3}, {0x02D00, 0x02D25}, {0x02D27, 0x02D27}, {0x02D2D, 0x02D2D}, {0x02D30, 0x02D67},
    {0x02D6F, 0x02D6F}, {0x02D80, 0x02D96}, {0x02DA0, 0x02DA6}, {0x02DA8, 0x02DAE}, {0x02DB0, 0x02DB6}, {0x02DB8, 0x02DBE},
    {0x02DC0, 0x02DC6}, {0x02DC8, 0x02DCE}, {0x02DD0, 0x02DD6}, {0x02DD8, 0x02DDE}, {0x02E2F, 0x02E2F}, {0x03005, 0x03006},
    {0x03031, 0x03035}, {0x0303B, 0x0303C}, {0x03041, 0x03096}, {0x0309D, 0x0309F}, {0x030A1, 0x030FA}, {0x030FC, 0x030FF},
    {0x03105, 0x0312F}, {0x03131, 0x0318E}, {0x031A0, 0x031BF}, {0x031F0, 0x031FF}, {0x03400, 0x04DBF}, {0x04E00, 0x0A48C},
    {0x0A4D0, 0x0A4FD}, {0x0A500, 0x0A60C}, {0x0A610, 0x0A61F}, {0x0A62A, 0x0A62B}, {0x0A640, 0x0A66E}, {0x0A67F, 0x0A69D},
    {0x0A6A0, 0x0A6E5}, {0x0A717, 0x0A71F}, {0x0A722, 0x0A788}, {0x0A78B, 0x0A7CD}, {0x0A7D0, 0x0A7D1}, {0x0A7D3, 0x0A7D3},
    {0x0A7D5, 0x0A7DC}, {0x0A7F2, 0x0A801}, {0x0A803, 0x0A805}, {0x0A807, 0x0A80A}, {0x0A80C, 0x0A822}, {0x0A840, 0x0A873},
    {0x0A882, 0x0A8B3}, {0x0A8F2, 0x0A8F7}, {0x0A8FB, 0x0A8FB}, {0x0A8FD, 0x0A8FE}, {0x0A90A, 0x0A925}, {0x0A930, 0x0A946},
    {0x0A960, 0x0A97C}, {0x0A984, 0x0A9B2}, {0x0A9CF, 0x0A9CF}, {0x0A9E0, 0x0A9E4}, {0x0A9E6, 0x0A9EF}, {0x0A9FA, 0x0A9FE},
    {0x0AA00, 0x0AA28}, {0x0AA40, 0x0AA42}, {0x0AA44, 0x0AA4B}, {0x0AA60, 0x0AA76}, {0x0AA7A, 0x0AA7A}, {0x0AA7E, 0x0AAAF},
    {0x0AAB1, 0x0AAB1}, {0x0AAB5, 0x0AAB6}, {0x0AAB9, 0x0AABD}, {0x0AAC0, 0x0AAC0}, {0x0AAC2, 0x0AAC2}, {0x0AADB, 0x0AADD},
    {0x0AAE0, 0x0AAEA}, {0x0AAF2, 0x0AAF4}, {0x0AB01, 0x0AB06}, {0x0AB09, 0x0AB0E}, {0x0AB11, 0x0AB16}, {0x0AB20, 0x0AB26},
    {0x0AB28, 0x0AB2E}, {0x0AB30, 0x0AB5A}, {0x0AB5C, 0x0AB69}, {0x0AB70, 0x0ABE2}, {0x0AC00, 0x0D7A3}, {0x0D7B0, 0x0D7C6},
    {0x0D7CB, 0x0D7FB}, {0x0F900, 0x0FA6D}, {0x0FA70, 0x0FAD9}, {0x0FB00, 0x0FB06}, {0x0FB13, 0x0FB17}, {0x0FB1D, 0x0FB1D},
    {0x0FB1F, 0x0FB28}, {0x0FB2A, 0x0FB36}, {0x0FB38, 0x0FB3C}, {0x0FB3E, 0x0FB3E}, {0x0FB40, 0x0FB41}, {0x0FB43, 0x0FB44},
    {0x0FB46, 0x0FBB1}, {0x0FBD3, 0x0FD3D}, {0x0FD50, 0x0FD8F}, {0x0FD92, 0x0FDC7}, {0x0FDF0, 0x0FDFB}, {0x0FE70, 0x0FE74},
    {0x0FE76, 0x0FEFC}, {0x0FF21, 0x0FF3A}, {0x0FF41, 0x0FF5A}, {0x0FF66, 0x0FFBE}, {0x0FFC2, 0x0FFC7}, {0x0FFCA, 0x0FFCF},
    {0x0FFD2, 0x0FFD7}, {0x0FFDA, 0x0FFDC}, {0x10000, 0x1000B}, {0x1000D, 0x10026}, {0x10028, 0x1003A}, {0x1003C, 0x1003D},
    {0x1003F, 0x1004D}, {0x10050, 0x1005D}, {0x10080, 0x100FA}, {0x10280, 0x1029C}, {0x102A0, 0x102D0}, {0x10300, 0x1031F},
    {0x1032D, 0x10340}, {0x10342, 0x10349}, {0x10350, 0x10375}, {0x10380, 0x1039D}, {0x103A0, 0x103C3}, {0x103C8, 0x103CF},
    {0x10400, 0x1049D}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10500, 0x10527}, {0x10530, 0x10563}, {0x10570, 0x1057A},
    {0x1057C, 0x1058A}, {0x1058C, 0x10592}, {0x10594, 0x10595}, {0x10597, 0x105A1}, {0x105A3, 0x105B1}, {0x105B3, 0x105B9},
    {0x105BB, 0x105BC}, {0x105C0, 0x105F3}, {0x10600, 0x10736}, {0x10740, 0x10755}, {0x10760, 0x10767}, {0x10780, 0x10785},
    {0x10787, 0x107B0}, {0x107B2, 0x107BA}, {0x10800, 0x10805}, {0x10808, 0x10808}, {0x1080A, 0x10835}, {0x10837, 0x10838},
    {0x1083C, 0x1083C}, {0x1083F, 0x10855}, {0x10860, 0x10876}, {0x10880, 0x1089E}, {0x108E0, 0x108F2}, {0x108F4, 0x108F5},
    {0x10900, 0x10915}, {0x10920, 0x10939}, {0x10980, 0x109B7}, {0x109BE, 0x109BF}, {0x10A00, 0x10A00}, {0x10A10, 0x10A13},
    {0x10A15, 0x10A17}, {0x10A19, 0x10A35}, {0x10A60, 0x10A7C}, {0x10A80, 0x10A9C}, {0x10AC0, 0x10AC7}, {0x10AC9, 0x10AE4},
    {0x10B00, 0x10B35}, {0x10B40, 0x10B55}, {0x10B60, 0x10B72}, {0x10B80, 0x10B91}, {0x10C00, 0x10C48}, {0x10C80, 0x10CB2},
    {0x10CC0, 0x10CF2}, {0x10D00, 0x10D23}, {0x10D4A, 0x10D65}, {0x10D6F, 0x10D85}, {0x10E80, 0x10EA9}, {0x10EB0, 0x10EB1},
    {0x10EC2, 0x10EC4}, {0x10F00, 0x10F1C}, {0x10F27, 0x10F27}, {0x10F30, 0x10F45}, {0x10F70, 0x10F81}, {0x10FB0, 0x10FC4},
    {0x10FE0, 0x10FF6}, {0x11003, 0x11037}, {0x11071, 0x11072}, {0x11075, 0x11075}, {0x11083, 0x110AF}, {0x110D0, 0x110E8},
    {0x11103, 0x11126}, {0x11144, 0x11144}, {0x11147, 0x11147}, {0x11150, 0x11172}, {0x11176, 0x11176}, {0x11183, 0x111B2},
    {0x111C1, 0x111C4}, {0x111DA, 0x111DA}, {0x111DC, 0x111DC}, {0x11200, 0x11211}, {0x11213, 0x1122B}, {0x1123F, 0x11240},
    {0x11280, 0x11286}, {0x11288, 0x11288}, {0x1128A, 0x1128D}, {0x1128F, 0x1129D}, {0x1129F, 0x112A8}, {0x112B0, 0x112DE},
    {0x11305, 0x1130C}, {0x1130F, 0x11310}, {0x11313, 0x11328}, {0x1132A, 0x11330}, {0x11332, 0x11333}, {0x11335, 0x11339},
    {0x1133D, 0x1133D}, {0x11350, 0x11350}, {0x1135D, 0x11361}, {0x11380, 0x11389}, {0x1138B, 0x1138B}, {0x1138E, 0x1138E},
    {0x11390, 0x113B5}, {0x113B7, 0x113B7}, {0x113D1, 0x113D1}, {0x113D3, 0x113D3}, {0x11400, 0x11434}, {0x11447, 0x1144A},
    {0x1145F, 0x11461}, {0x11480, 0x114AF}, {0x114C4, 0x114C5}, {0x114C7, 0x114C7}, {0x11580, 0x115AE}, {0x115D8, 0x115DB},
    {0x11600, 0x1162F}, {0x11644, 0x11644}, {0x11680, 0x116AA}, {0x116B8, 0x116B8}, {0x11700, 0x1171A}, {0x11740, 0x11746},
    {0x11800, 0x1182B}, {0x118A0, 0x118DF}, {0x118FF, 0x11906}, {0x11909, 0x11909}, {0x1190C, 0x11913}, {0x11915, 0x11916},
    {0x11918, 0x1192F}, {0x1193F, 0x1193F}, {0x11941, 0x11941}, {0x119A0, 0x119A7}, {0x119AA, 0x119D0}, {0x119E1, 0x119E1},
    {0x119E3, 0x119E3}, {0x11A00, 0x11A00}, {0x11A0B, 0x11A32}, {0x11A3A, 0x11A3A}, {0x11A50, 0x11A50}, {0x11A5C, 0x11A89},
    {0x11A9D, 0x11A9D}, {0x11AB0, 0x11AF8}, {0x11BC0, 0x11BE0}, {0x11C00, 0x11C08}, {0x11C0A, 0x11C2E}, {0x11C40, 0x11C40},
    {0x11C72, 0x11C8F}, {0x11D00, 0x11D06}, {0x11D08, 0x11D09}, {0x11D0B, 0x11D30}, {0x11D46, 0x11D46}, {0x11D60, 0x11D65},
    {0x11D67, 0x11D68}, {0x11D6A, 0x11D89}, {0x11D98, 0x11D98}, {0x11EE0, 0x11EF2}, {0x11F02, 0x11F02}, {0x11F04, 0x11F10},
    {0x11F12, 0x11F33}, {0x11FB0, 0x11FB0}, {0x12000, 0x12399}, {0x12480, 0x12543}, {0x12F90, 0x12FF0}, {0x13000, 0x1342F},
    {0x13441, 0x13446}, {0x13460, 0x143FA}, {0x14400, 0x14646}, {0x16100, 0x1611D}, {0x16800, 0x16A38}, {0x16A40, 0x16A5E},
    {0x16A70, 0x16ABE}, {0x16AD0, 0x16AED}, {0x16B00, 0x16B2F}, {0x16B40, 0x16B43}, {0x16B63, 0x16B77}, {0x16B7D, 0x16B8F},
    {0x16D40, 0x16D6C}, {0x16E40, 0x16E7F}, {0x16F00, 0x16F4A}, {0x16F50, 0x16F50}, {0x16F93, 0x16F9F}, {0x16FE0, 0x16FE1},
    {0x16FE3, 0x16FE3}, {0x17000, 0x187F7}, {0x18800, 0x18CD5}, {0x18CFF, 0x18D08}, {0x1AFF0, 0x1AFF3}, {0x1AFF5, 0x1AFFB},
    {0x1AFFD, 0x1AFFE}, {0x1B000, 0x1B122}, {0x1B132, 0x1B132}, {0x1B150, 0x1B152}, {0x1B155, 0x1B155}, {0x1B164, 0x1B167},
    {0x1B170, 0x1B2FB}, {0x1BC00, 0x1BC6A}, {0x1BC70, 0x1BC7C}, {0x1BC80, 0x1BC88}, {0x1BC90, 0x1BC99}, {0x1D400, 0x1D454},
    {0x1D456, 0x1D49C}, {0x1D49E, 0x1D49F}, {0x1D4A2, 0x1D4A2}, {0x1D4A5, 0x1D4A6}, {0x1D4A9, 0x1D4AC}, {0x1D4AE, 0x1D4B9},
    {0x1D4BB, 0x1D4BB}, {0x1D4BD, 0x1D4C3}, {0x1D4C5, 0x1D505}, {0x1D507, 0x1D50A}, {0x1D50D, 0x1D514}, {0x1D516, 0x1D51C},
    {0x1D51E, 0x1D539}, {0x1D53B, 0x1D53E}, {0x1D540, 0x1D544}, {0x1D546, 0x1D546}, {0x1D54A, 0x1D550}, {0x1D552, 0x1D6A5},
    {0x1D6A8, 0x1D6C0}, {0x1D6C2, 0x1D6DA}, {0x1D6DC, 0x1D6FA}, {0x1D6FC, 0x1D714}, {0x1D716, 0x1D734}, {0x1D736, 0x1D74E},
    {0x1D750, 0x1D76E}, {0x1D770, 0x1D788}, {0x1D78A, 0x1D7A8}, {0x1D7AA, 0x1D7C2}, {0x1D7C4, 0x1D7CB}, {0x1DF00, 0x1DF1E},
    {0x1DF25, 0x1DF2A}, {0x1E030, 0x1E06D}, {0x1E100, 0x1E12C}, {0x1E137, 0x1E13D}, {0x1E14E, 0x1E14E}, {0x1E290, 0x1E2AD},
    {0x1E2C0, 0x1E2EB}, {0x1E4D0, 0x1E4EB}, {0x1E5D0, 0x1E5ED}, {0x1E5F0, 0x1E5F0}, {0x1E7E0, 0x1E7E6}, {0x1E7E8, 0x1E7EB},
    {0x1E7ED, 0x1E7EE}, {0x1E7F0, 0x1E7FE}, {0x1E800, 0x1E8C4}, {0x1E900, 0x1E943}, {0x1E94B, 0x1E94B}, {0x1EE00, 0x1EE03},
    {0x1EE05, 0x1EE1F}, {0x1EE21, 0x1EE22}, {0x1EE24, 0x1EE24}, {0x1EE27, 0x1EE27}, {0x1EE29, 0x1EE32}, {0x1EE34, 0x1EE37},
    {0x1EE39, 0x1EE39}, {0x1EE3B, 0x1EE3B}, {0x1EE42, 0x1EE42}, {0x1EE47, 0x1EE47}, {0x1EE49, 0x1EE49}, {0x1EE4B, 0x1EE4B},
    {0x1EE4D, 0x1EE4F}, {0x1EE51, 0x1EE52}, {0x1EE54, 0x1EE54}, {0x1EE57, 0x1EE57}, {0x1EE59, 0x1EE59}, {0x1EE5B, 0x1EE5B},
    {0x1EE5D, 0x1EE5D}, {0x1EE5F, 0x1EE5F}, {0x1EE61, 0x1EE62}, {0x1EE64, 0x1EE64}, {0x1EE67, 0x1EE6A}, {0x1EE6C, 0x1EE72},
    {0x1EE74, 0x1EE77}, {0x1EE79, 0x1EE7C}, {0x1EE7E, 0x1EE7E}, {0x1EE80, 0x1EE89}, {0x1EE8B, 0x1EE9B}, {0x1EEA1, 0x1EEA3},
    {0x1EEA5, 0x1EEA9}, {0x1EEAB, 0x1EEBB}, {0x20000, 0x2A6DF}, {0x2A700, 0x2B739}, {0x2B740, 0x2B81D}, {0x2B820, 0x2CEA1},
    {0x2CEB0, 0x2EBE0}, {0x2EBF0, 0x2EE5D}, {0x2F800, 0x2FA1D}, {0x30000, 0x3134A}, {0x31350, 0x323AF},
};
/* \p{N}: general categories Nd Nl No: 144 ranges [lo, hi] of code points, sorted */
static const uint32_t gpt2__tok_numbers[][2] = {
    {0x00030, 0x00039}, {0x000B2, 0x000B3}, {0x000B9, 0x000B9}, {0x000BC, 0x000BE}, {0x00660, 0x00669}, {0x006F0, 0x006F9},
    {0x007C0, 0x007C9}, {0x00966, 0x0096F}, {0x009E6, 0x009EF}, {0x009F4, 0x009F9}, {0x00A66, 0x00A6F}, {0x00AE6, 0x00AEF},
    {0x00B66, 0x00B6F}, {0x00B72, 0x00B77}, {0x00BE6, 0x00BF2}, {0x00C66, 0x00C6F}, {0x00C78, 0x00C7E}, {0x00CE6, 0x00CEF},
    {0x00D58, 0x00D5E}, {0x00D66, 0x00D78}, {0x00DE6, 0x00DEF}, {0x00E50, 0x00E59}, {0x00ED0, 0x00ED9}, {0x00F20, 0x00F33},
    {0x01040, 0x01049}, {0x01090, 0x01099}, {0x01369, 0x0137C}, {0x016EE, 0x016F0}, {0x017E0, 0x017E9}, {0x017F0, 0x017F9},
    {0x01810, 0x01819}, {0x01946, 0x0194F}, {0x019D0, 0x019DA}, {0x01A80, 0x01A89}, {0x01A90, 0x01A99}, {0x01B50, 0x01B59},
    {0x01BB0, 0x01BB9}, {0x01C40, 0x01C49}, {0x01C50, 0x01C59}, {0x02070, 0x02070}, {0x02074, 0x02079}, {0x02080, 0x02089},
    {0x02150, 0x02182}, {0x02185, 0x02189}, {0x02460, 0x0249B}, {0x024EA, 0x024FF}, {0x02776, 0x02793}, {0x02CFD, 0x02CFD},
    {0x03007, 0x03007}, {0x03021, 0x03029}, {0x03038, 0x0303A}, {0x03192, 0x03195}, {0x03220, 0x03229}, {0x03248, 0x0324F},
    {0x03251, 0x0325F}, {0x03280, 0x03289}, {0x032B1, 0x032BF}, {0x0A620, 0x0A629}, {0x0A6E6, 0x0A6EF}, {0x0A830, 0x0A835},
    {0x0A8D0, 0x0A8D9}, {0x0A900, 0x0A909}, {0x0A9D0, 0x0A9D9}, {0x0A9F0, 0x0A9F9}, {0x0AA50, 0x0AA59}, {0x0ABF0, 0x0ABF9},
    {0x0FF10, 0x0FF19}, {0x10107, 0x10133}, {0x10140, 0x10178}, {0x1018A, 0x1018B}, {0x102E1, 0x102FB}, {0x10320, 0x10323},
    {0x10341, 0x10341}, {0x1034A, 0x1034A}, {0x103D1, 0x103D5}, {0x104A0, 0x104A9}, {0x10858, 0x1085F}, {0x10879, 0x1087F},
    {0x108A7, 0x108AF}, {0x108FB, 0x108FF}, {0x10916, 0x1091B}, {0x109BC, 0x109BD}, {0x109C0, 0x109CF}, {0x109D2, 0x109FF},
    {0x10A40, 0x10A48}, {0x10A7D, 0x10A7E}, {0x10A9D, 0x10A9F}, {0x10AEB, 0x10AEF}, {0x10B58, 0x10B5F}, {0x10B78, 0x10B7F},
    {0x10BA9, 0x10BAF}, {0x10CFA, 0x10CFF}, {0x10D30, 0x10D39}, {0x10D40, 0x10D49}, {0x10E60, 0x10E7E}, {0x10F1D, 0x10F26},
    {0x10F51, 0x10F54}, {0x10FC5, 0x10FCB}, {0x11052, 0x1106F}, {0x110F0, 0x110F9}, {0x11136, 0x1113F}, {0x111D0, 0x111D9},
    {0x111E1, 0x111F4}, {0x112F0, 0x112F9}, {0x11450, 0x11459}, {0x114D0, 0x114D9}, {0x11650, 0x11659}, {0x116C0, 0x116C9},
    {0x116D0, 0x116E3}, {0x11730, 0x1173B}, {0x118E0, 0x118F2}, {0x11950, 0x11959}, {0x11BF0, 0x11BF9}, {0x11C50, 0x11C6C},
    {0x11D50, 0x11D59}, {0x11DA0, 0x11DA9}, {0x11F50, 0x11F59}, {0x11FC0, 0x11FD4}, {0x12400, 0x1246E}, {0x16130, 0x16139},
    {0x16A60, 0x16A69}, {0x16AC0, 0x16AC9}, {0x16B50, 0x16B59}, {0x16B5B, 0x16B61}, {0x16D70, 0x16D79}, {0x16E80, 0x16E96},
    {0x1CCF0, 0x1CCF9}, {0x1D2C0, 0x1D2D3}, {0x1D2E0, 0x1D2F3}, {0x1D360, 0x1D378}, {0x1D7CE, 0x1D7FF}, {0x1E140, 0x1E149},
    {0x1E2F0, 0x1E2F9}, {0x1E4F0, 0x1E4F9}, {0x1E5F1, 0x1E5FA}, {0x1E8C7, 0x1E8CF}, {0x1E950, 0x1E959}, {0x1EC71, 0x1ECAB},
    {0x1ECAD, 0x1ECAF}, {0x1ECB1, 0x1ECB4}, {0x1ED01, 0x1ED2D}, {0x1ED2F, 0x1ED3D}, {0x1F100, 0x1F10C}, {0x1FBF0, 0x1FBF9},
};
/* \s: the White_Space property: 10 ranges [lo, hi] of code points, sorted */
static const uint32_t gpt2__tok_spaces[][2] = {
    {0x00009, 0x0000D}, {0x00020, 0x00020}, {0x00085, 0x00085}, {0x000A0, 0x000A0}, {0x01680, 0x01680}, {0x02000, 0x0200A},
    {0x02028, 0x02029}, {0x0202F, 0x0202F}, {0x0205F, 0x0205F}, {0x03000, 0x03000},
};
/* END Unicode tables */

/* a code point's class for the pre-tokenizer */
enum { GPT2__TOK_OTHER = 0, GPT2__TOK_LETTER, GPT2__TOK_NUMBER, GPT2__TOK_SPACE };

static int gpt2__tok_in(const uint32_t (*table)[2], size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < table[mid][0]) hi = mid;
        else if (cp > table[mid][1]) lo = mid + 1;
        else return 1;
    }
    return 0;
}

static int gpt2__tok_class(uint32_t cp) {
    if (cp < 0x80) {
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return GPT2__TOK_LETTER;
        if (cp >= '0' && cp <= '9') return GPT2__TOK_NUMBER;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return GPT2__TOK_SPACE;
        return GPT2__TOK_OTHER;
    }
    if (gpt2__tok_in(gpt2__tok_letters, sizeof gpt2__tok_letters / sizeof gpt2__tok_letters[0], cp)) return GPT2__TOK_LETTER;
    if (gpt2__tok_in(gpt2__tok_numbers, sizeof gpt2__tok_numbers / sizeof gpt2__tok_numbers[0], cp)) return GPT2__TOK_NUMBER;
    if (gpt2__tok_in(gpt2__tok_spaces, sizeof gpt2__tok_spaces / sizeof gpt2__tok_spaces[0], cp)) return GPT2__TOK_SPACE;
    return GPT2__TOK_OTHER;
}

/* Decodes the well-formed UTF-8 sequence at s[0..n) into *cp and returns its length; 0 when s
   does not begin one (the caller then takes the single byte as an "other" character). */
static size_t gpt2__tok_utf8(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned char c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    size_t len;
    uint32_t v;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1Fu; }
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3; v = c & 0x0Fu;
        if (c == 0xE0) lo = 0xA0;       /* no overlong forms */
        if (c == 0xED) hi = 0x9F;       /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4; v = c & 0x07u;
        if (c == 0xF0) lo = 0x90;       /* no overlong forms */
        if (c == 0xF4) hi = 0x8F;       /* nothing above U+10FFFF */
    } else return 0;
    if (n < len || s[1] < lo || s[1] > hi) return 0;
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[k] & 0x3Fu);
    }
    *cp = v;
    return len;
}

/* the class of the character at s[i] (i < n); its length in *len */
static int gpt2__tok_char(const unsigned char *s, size_t n, size_t i, size_t *len) {
    uint32_t cp;
    size_t l = gpt2__tok_utf8(s + i, n - i, &cp);
    if (!l) { *len = 1; return GPT2__TOK_OTHER; }
    *len = l;
    return gpt2__tok_class(cp);
}

/* end of the run of characters of class cls that starts at i */
static size_t gpt2__tok_run(const unsigned char *s, size_t n, size_t i, int cls) {
    size_t len;
    while (i < n && gpt2__tok_char(s, n, i, &len) == cls) i += len;
    return i;
}

/* The pre-tokenizer: returns the end of the piece that starts at s[i] (i < n). */
static size_t gpt2__tok_next_piece(const unsigned char *s, size_t n, size_t i) {
    /* 's 't 're 've 'm 'll 'd  (ASCII apostrophe, lower case only, as in the regex) */
    if (s[i] == '\'' && i + 1 < n) {
        unsigned char a = s[i + 1];
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
        if (i + 2 < n) {
            unsigned char b = s[i + 2];
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
        }
    }
    size_t len;
    int cls = gpt2__tok_char(s, n, i, &len);
    /*  ?\p{L}+   ?\p{N}+   ?[^\s\p{L}\p{N}]+  : a space (U+0020 only) joins the run after it */
    if (s[i] == ' ' && i + 1 < n) {
        int next = gpt2__tok_char(s, n, i + 1, &len);
        if (next != GPT2__TOK_SPACE) return gpt2__tok_run(s, n, i + 1, next);
    }
    if (cls != GPT2__TOK_SPACE) return gpt2__tok_run(s, n, i, cls);
    /* \s+(?!\S) then \s+ : a whitespace run at the end of the text is one piece; one followed by
       more text leaves its last character to start the next piece (" word" takes the space),
       unless the run is a single character, which is then a piece of its own */
    size_t last = i, j = i;
    while (j < n && gpt2__tok_char(s, n, j, &len) == GPT2__TOK_SPACE) { last = j; j += len; }
    if (j == n || last == i) return j;
    return last;
}

/* ---- vocabulary and merges */

/* a merge rule: the pair (left, right) of token ids becomes token `merged` at priority `rank` */
typedef struct gpt2__tok_merge { int left, right, rank, merged; } gpt2__tok_merge;

struct gpt2_tokenizer {
    int n_vocab;
    size_t *tok_off;             /* [n_vocab + 1]: token id's bytes are bytes[tok_off[id] .. tok_off[id + 1]) */
    unsigned char *bytes;
    int byte_token[256];         /* the token of each single byte */
    int *vocab_slots;            /* open addressing, token bytes -> id; -1: empty */
    size_t vocab_mask;
    gpt2__tok_merge *merge_slots; /* open addressing, (left, right) -> merge; left -1: empty */
    size_t merge_mask;
    int n_merges;
    int n_added;                 /* added tokens (tokenizer.json's added_tokens or added_tokens.json), by increasing id */
    int *added_id;               /* [n_added] */
    size_t *added_off;           /* [n_added + 1]: added token k's text is added_bytes[added_off[k] .. added_off[k + 1]) */
    unsigned char *added_bytes;
};

static uint32_t gpt2__tok_hash_bytes(const unsigned char *p, size_t n) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t k = 0; k < n; k++) h = (h ^ p[k]) * 16777619u;
    return h;
}

static uint32_t gpt2__tok_hash_pair(int a, int b) {
    uint32_t h = (uint32_t)a * 0x9E3779B1u ^ ((uint32_t)b + 0x7F4A7C15u) * 0x85EBCA77u;
    h ^= h >> 15; h *= 0x2C1B3C6Du; h ^= h >> 13;
    return h;
}

/* the id of the token with these bytes, or -1 */
static int gpt2__tok_find(const gpt2_tokenizer *t, const unsigned char *p, size_t n) {
    size_t k = gpt2__tok_hash_bytes(p, n) & t->vocab_mask;
    for (;; k = (k + 1) & t->vocab_mask) {
        int id = t->vocab_slots[k];
        if (id < 0) return -1;
        size_t len = t->tok_off[id + 1] - t->tok_off[id];
        if (len == n && !memcmp(t->bytes + t->tok_off[id], p, n)) return id;
    }
}

static const gpt2__tok_merge *gpt2__tok_find_merge(const gpt2_tokenizer *t, int left, int right) {
    size_t k = gpt2__tok_hash_pair(left, right) & t->merge_mask;
    for (;; k = (k + 1) & t->merge_mask) {
        const gpt2__tok_merge *m = &t->merge_slots[k];
        if (m->left < 0) return NULL;
        if (m->left == left && m->right == right) return m;
    }
}

/* a hash table size: a power of two at least twice n */
static size_t gpt2__tok_table_size(size_t n) {
    size_t s = 16;
    while (s < 2 * n) s *= 2;
    return s;
}

/* GPT-2's byte alphabet, reversed: the byte that code point cp stands for, or -1 */
static int gpt2__tok_unmap_char(uint32_t cp) {
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)) return (int)cp;
    if (cp >= 0x100 && cp < 0x100 + 68) {
        int k = (int)(cp - 0x100); /* the k-th byte (in order) that is not printable */
        for (int b = 0; b < 256; b++) {
            int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
            if (!printable && k-- == 0) return b;
        }
    }
    return -1;
}

/* Converts a token as spelled in vocab.json / merges.txt (UTF-8 in GPT-2's byte alphabet) into
   its bytes, in place (never longer); returns the byte count, or -1 when a character is not in
   the alphabet or the text is not UTF-8. */
static long gpt2__tok_unmap(unsigned char *s, size_t n) {
    size_t i = 0, k = 0;
    while (i < n) {
        uint32_t cp;
        size_t len = gpt2__tok_utf8(s + i, n - i, &cp);
        int b = len ? gpt2__tok_unmap_char(cp) : -1;
        if (b < 0) return -1;
        s[k++] = (unsigned char)b;
        i += len;
    }
    return (long)k;
}

/* for error messages: the token's spelling, at most 40 bytes of it */
#define GPT2__TOK_SHOW(len) ((int)((len) > 40 ? 40 : (len)))

/* vocab.json as read, before indexing: the tokens' bytes in file order and their ids */
typedef struct gpt2__tok_list {
    unsigned char *bytes; size_t n_bytes, bytes_cap;
    size_t *off;          /* [n + 1]: entry e's bytes are bytes[off[e] .. off[e + 1]) */
    int *ids;             /* [n] */
    size_t n, cap;
    char *key; size_t key_cap; /* the JSON key being read */
} gpt2__tok_list;

static void gpt2__tok_list_free(gpt2__tok_list *l) {
    GPT2_FREE(l->bytes); GPT2_FREE(l->off); GPT2_FREE(l->ids); GPT2_FREE(l->key);
}

/* room for one more entry of up to extra bytes */
static int gpt2__tok_list_grow(gpt2__tok_list *l, size_t extra) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 1024;
        size_t *off = (size_t *)gpt2__alloc((cap + 1) * sizeof *off);
        int *ids = (int *)gpt2__alloc(cap * sizeof *ids);
        if (!off || !ids) { GPT2_FREE(off); GPT2_FREE(ids); return 0; }
        off[0] = 0;
        if (l->n) { memcpy(off, l->off, (l->n + 1) * sizeof *off); memcpy(ids, l->ids, l->n * sizeof *ids); }
        GPT2_FREE(l->off); GPT2_FREE(l->ids);
        l->off = off; l->ids = ids; l->cap = cap;
    }
    if (!l->bytes || l->n_bytes + extra > l->bytes_cap) {
        size_t cap = l->bytes_cap ? l->bytes_cap : 1 << 16;
        while (l->n_bytes + extra > cap) cap *= 2;
        unsigned char *b = (unsigned char *)gpt2__alloc(cap);
        if (!b) return 0;
        if (l->n_bytes) memcpy(b, l->bytes, l->n_bytes);
        GPT2_FREE(l->bytes);
        l->bytes = b; l->bytes_cap = cap;
    }
    return 1;
}

/* Parses vocab.json, {"token": id, ...}, into l (which the caller frees, also on failure). */
static gpt2_status gpt2__tok_parse_vocab(gpt2__tok_list *l, const char *path, const char *data, size_t len) {
    gpt2__json j;
    j.start = data; j.p = data; j.end = data + len; j.file = path; j.depth = 0;
    int first = 1;
    for (;;) {
        gpt2__json at = j;
        int at_first = first;
        size_t klen = 0;
        int r = gpt2__json_member(&j, &first, l->key, l->key_cap, &klen);
        if (r == 1 && klen >= l->key_cap) { /* a key longer than the buffer: grow it and read again */
            GPT2_FREE(l->key);
            l->key_cap = klen + 1;
            l->key = (char *)gpt2__alloc(l->key_cap);
            if (!l->key) { l->key_cap = 0; return gpt2__fail(GPT2_ERR_OOM, "%s: out of memory", path); }
            j = at; first = at_first;
            r = gpt2__json_member(&j, &first, l->key, l->key_cap, &klen);
        }
        if (r < 0) return GPT2_ERR_FORMAT;
        if (r == 0) break;
        if (klen == 0) return gpt2__fail(GPT2_ERR_FORMAT, "%s: entry %zu is an empty token", path, l->n);
        if (!gpt2__tok_list_grow(l, klen)) return gpt2__fail(GPT2_ERR_OOM, "%s: out of memory", path);
        unsigned char *b = l->bytes + l->n_bytes;
        memcpy(b, l->key, klen);
        long blen = gpt2__tok_unmap(b, klen);
        if (blen <= 0)
            return gpt2__fail(GPT2_ERR_FORMAT, "%s: token \"%.*s\" (entry %zu) is not spelled in GPT-2's byte alphabet",
                              path, GPT2__TOK_SHOW(klen), l->key, l->n);
        gpt2__json_ws(&j);
        const char *vp = j.p;
        double v = -1;
        if (j.p >= j.end || !((*j.p >= '0' && *j.p <= '9') || *j.p == '-') || gpt2__json_number(&j, &v) ||
            !(v >= 0 && v < 16777216.0) || v != (double)(int)v)
            return gpt2__fail(GPT2_ERR_FORMAT, "%s: byte %ld: token \"%.*s\" should map to an integer id in [0, 2^24), not \"%.*s\"",
                              path, (long)(vp - data), GPT2__TOK_SHOW(klen), l->key, vp < j.end ? 12 : 0, vp);
        l->ids[l->n] = (int)v;
        l->n_bytes += (size_t)blen;
        l->off[++l->n] = l->n_bytes;
    }
    gpt2__json_ws(&j);
    if (j.p != j.end) return gpt2__json_err(&j, "text after the vocabulary object");
    if (l->n == 0) return gpt2__fail(GPT2_ERR_FORMAT, "%s: the vocabulary is empty", path);
    return GPT2_OK;
}

/* Fills t's vocabulary from the parsed list: token bytes in id order (ids must be 0..n-1, each
   once), the bytes -> id table (no two ids with the same bytes) and the 256 byte tokens. */
static gpt2_status gpt2__tok_index_vocab(gpt2_tokenizer *t, const char *path, const gpt2__tok_list *l) {
    size_t n = l->n, size = gpt2__tok_table_size(n);
    int *entry = (int *)gpt2__alloc(n * sizeof *entry); /* id -> its entry in file order */
    t->tok_off = (size_t *)gpt2__alloc((n + 1) * sizeof *t->tok_off);
    t->bytes = (unsigned char *)gpt2__alloc(l->n_bytes);
    t->vocab_slots = (int *)gpt2__alloc(size * sizeof *t->vocab_slots);
    if (!entry || !t->tok_off || !t->bytes || !t->vocab_slots) {
        GPT2_FREE(entry);
        return gpt2__fail(GPT2_ERR_OOM, "%s: out of memory", path);
    }
    t->n_vocab = (int)n;
    for (size_t e = 0; e < n; e++) entry[e] = -1;
    for (size_t e = 0; e < n; e++) {
        int id = l->ids[e];
        if ((size_t)id >= n || entry[id] >= 0) {
            size_t len = l->off[e + 1] - l->off[e];
            if ((size_t)id >= n)
                gpt2__fail(GPT2_ERR_FORMAT, "%s: entry %zu has id %d, but %zu tokens need ids 0..%zu", path, e, id, n, n - 1);
            else
                gpt2__fail(GPT2_ERR_FORMAT, "%s: id %d is given to entry %d and again to entry %zu (\"%.*s\")",
                           path, id, entry[id], e, GPT2__TOK_SHOW(len), (const char *)l->bytes + l->off[e]);
            GPT2_FREE(entry);
            return GPT2_ERR_FORMAT;
        }
        entry[id] = (int)e;
    }
    t->tok_off[0] = 0;
    for (size_t id = 0; id < n; id++) {
        size_t e = (size_t)entry[id], len = l->off[e + 1] - l->off[e];
        memcpy(t->bytes + t->tok_off[id], l->bytes + l->off[e], len);
        t->tok_off[id + 1] = t->tok_off[id] + len;
    }
    GPT2_FREE(entry);

    t->vocab_mask = size - 1;
    for (size_t k = 0; k < size; k++) t->vocab_slots[k] = -1;
    for (int id = 0; id < (int)n; id++) {
        const unsigned char *p = t->bytes + t->tok_off[id];
        size_t len = t->tok_off[id + 1] - t->tok_off[id];
        int other = gpt2__tok_find(t, p, len);
        if (other >= 0)
            return gpt2__fail(GPT2_ERR_FORMAT, "%s: ids %d and %d are the same token (\"%.*s\")",
                              path, other, id, GPT2__TOK_SHOW(len), (const char *)p);
        size_t k = gpt2__tok_hash_bytes(p, len) & t->vocab_mask;
        while (t->vocab_slots[k] >= 0) k = (k + 1) & t->vocab_mask;
        t->vocab_slots[k] = id;
    }
    for (int b = 0; b < 256; b++) {
        unsigned char c = (unsigned char)b;
        t->byte_token[b] = gpt2__tok_find(t, &c, 1);
        if (t->byte_token[b] < 0)
            return gpt2__fail(GPT2_ERR_FORMAT, "%s: no token for the byte 0x%02X (a byte-level vocabulary has all 256)", path, b);
    }
    return GPT2_OK;
}

static gpt2_status gpt2__tok_load_vocab(gpt2_tokenizer *t, const char *path) {
    char *data;
    size_t len;
    gpt2_status st = gpt2__read_file(path, &data, &len);
    if (st) return st;
    gpt2__tok_list l;
    memset(&l, 0, sizeof l);
    l.key_cap = 256;
    l.key = (char *)gpt2__alloc(l.key_cap);
    if (!l.key) st = gpt2__fail(GPT2_ERR_OOM, "%s: out of memory", path);
    if (!st) st = gpt2__tok_parse_vocab(&l, path, data, len);
    if (!st) st = gpt2__tok_index_vocab(t, path, &l);
    gpt2__tok_list_free(&l);
    GPT2_FREE(data);
    return st;
}

/* merges.txt: an optional "#version" first line, then one merge per line, "left right" (two
   tokens of the vocabulary, one space apart), highest priority first; blank lines are skipped.
   The text is data[0 .. len), freed here; header: whether a "#version" first line is skipped. */
static gpt2_status gpt2__tok_parse_merges(gpt2_tokenizer *t, const char *path, char *data, size_t len, int header) {
    gpt2_status st = GPT2_OK;
    size_t lines = 1;
    for (size_t k = 0; k < len; k++) lines += data[k] == '\n';
    if (lines > (size_t)1 << 28) { GPT2_FREE(data); return gpt2__fail(GPT2_ERR_FORMAT, "%s: %zu lines is too many merges", path, lines); }
    size_t size = gpt2__tok_table_size(lines);
    t->merge_slots = (gpt2__tok_merge *)gpt2__alloc(size * sizeof *t->merge_slots);
    unsigned char *buf = (unsigned char *)gpt2__alloc(len + 1);
    if (!t->merge_slots || !buf) { GPT2_FREE(data); GPT2_FREE(buf); return gpt2__fail(GPT2_ERR_OOM, "%s: out of memory", path); }
    t->merge_mask = size - 1;
    for (size_t k = 0; k < size; k++) t->merge_slots[k].left = -1;

    size_t line_no = 0;
    for (char *line = data; line < data + len; ) {
        char *eol = (char *)memchr(line, '\n', (size_t)(data + len - line));
        if (!eol) eol = data + len;
        char *next = eol + 1;
        line_no++;
        if (eol > line && eol[-1] == '\r') eol--;
        size_t n = (size_t)(eol - line);
        int blank = 1;
        for (size_t k = 0; k < n; k++) if (line[k] != ' ' && line[k] != '\t') blank = 0;
        if (blank || (header && line_no == 1 && n >= 8 && !memcmp(line, "#version", 8))) { line = next; continue; }
        const char *sp = (const char *)memchr(line, ' ', n);
        size_t nl = sp ? (size_t)(sp - line) : 0, nr = sp ? n - nl - 1 : 0;
        if (!sp || nl == 0 || nr == 0 || memchr(sp + 1, ' ', nr)) {
            st = gpt2__fail(GPT2_ERR_FORMAT, "%s line %zu: expected two tokens separated by one space, got \"%.*s\"",
                            path, line_no, GPT2__TOK_SHOW(n), line);
            goto done;
        }
        int id[3];
        const char *spelled[2] = { line, sp + 1 };
        size_t spelled_len[2] = { nl, nr };
        memcpy(buf, line, nl);
        memcpy(buf + nl, sp + 1, nr);
        long bl = gpt2__tok_unmap(buf, nl), br = bl >= 0 ? gpt2__tok_unmap(buf + nl, nr) : -1;
        if (bl < 0 || br < 0) {
            int side = bl < 0 ? 0 : 1;
            st = gpt2__fail(GPT2_ERR_FORMAT, "%s line %zu: token \"%.*s\" is not spelled in GPT-2's byte alphabet",
                            path, line_no, GPT2__TOK_SHOW(spelled_len[side]), spelled[side]);
            goto done;
        }
        memmove(buf + bl, buf + nl, (size_t)br);
        id[0] = gpt2__tok_find(t, buf, (size_t)bl);
        id[1] = gpt2__tok_find(t, buf + bl, (size_t)br);
        id[2] = gpt2__tok_find(t, buf, (size_t)(bl + br));
        for (int s = 0; s < 2; s++)
            if (id[s] < 0) {
                st = gpt2__fail(GPT2_ERR_FORMAT, "%s line %zu: token \"%.*s\" is not in the vocabulary",
                                path, line_no, GPT2__TOK_SHOW(spelled_len[s]), spelled[s]);
                goto done;
            }
        if (id[2] < 0) {
            st = gpt2__fail(GPT2_ERR_FORMAT, "%s line %zu: the merged token \"%.*s%.*s\" is not in the vocabulary",
                            path, line_no, GPT2__TOK_SHOW(nl), line, GPT2__TOK_SHOW(nr), sp + 1);
            goto done;
        }
        size_t k = gpt2__tok_hash_pair(id[0], id[1]) & t->merge_mask;
        while (t->merge_slots[k].left >= 0) {
            gpt2__tok_merge *m = &t->merge_slots[k];
            if (m->left == id[0] && m->right == id[1]) {
                st = gpt2__fail(GPT2_ERR_FORMAT, "%s line %zu: the merge \"%.*s\" repeats merge %d",
                                path, line_no, GPT2__TOK_SHOW(n), line, m->rank + 1);
                goto done;
            }
            k = (k + 1) & t->merge_mask;
        }
        t->merge_slots[k].left = id[0];
        t->merge_slots[k].right = id[1];
        t->merge_slots[k].merged = id[2];
        t->merge_slots[k].rank = t->n_merges++;
        line = next;
    }
done:
    GPT2_FREE(data);
    GPT2_FREE(buf);
    return st;
}

GPT2_API void gpt2_tokenizer_free(gpt2_tokenizer *tok) {
    if (!tok) return;
    GPT2_FREE(tok->tok_off);
    GPT2_FREE(tok->bytes);
    GPT2_FREE(tok->vocab_slots);
    GPT2_FREE(tok->merge_slots);
    GPT2_FREE(tok->added_id);
    GPT2_FREE(tok->added_off);
    GPT2_FREE(tok->added_bytes);
    GPT2_FREE(tok);
}

static int gpt2__tok_is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* ---- tokenizer.json (Hugging Face's tokenizers) and added tokens

   A directory without vocab.json + merges.txt may hold tokenizer.json instead. Its "model" (type
   BPE) carries the same vocabulary object as vocab.json, handed to the vocab.json parser as it
   stands, and the merges, as "left right" strings or ["left", "right"] pairs, written out as
   merges.txt lines for the merges parser (merge N is line N in its messages). A field that would
   make Hugging Face normalise, split or decode text other than GPT-2's way is refused by name.

   Added tokens (tokenizer.json's "added_tokens", else added_tokens.json {"text": id} beside
   vocab.json) decode to their text. Encoding never yields them: gpt2_encode reads every string as
   ordinary text, and a caller puts a special token in a prompt by its id (gpt2_token_id). */

/* merges.txt: reads the file, then parses it (the parser frees the text) */
static gpt2_status gpt2__tok_load_merges(gpt2_tokenizer *t, const char *path) {
    char *data;
    size_t len;
    gpt2_status st = gpt2__read_file(path, &data, &len);
    if (st) return st;
    return gpt2__tok_parse_merges(t, path, data, len, 1);
}

/* One pass over the object at obj's cursor (which ends past it): value[k] spans the JSON text of
   member names[k] (p .. end), p NULL when absent; the first of repeated names counts. */
static gpt2_status gpt2__tok_json_members(gpt2__json *obj, const char *const *names, int n, gpt2__json *value) {
    char key[32];
    size_t klen;
    int first = 1, r;
    for (int k = 0; k < n; k++) { value[k] = *obj; value[k].p = NULL; }
    while ((r = gpt2__json_member(obj, &first, key, sizeof key, &klen)) == 1) {
        gpt2__json_ws(obj);
        const char *at = obj->p;
        if (gpt2__json_skip(obj)) return GPT2_ERR_FORMAT;
        for (int k = 0; k < n; k++)
            if (!value[k].p && klen == strlen(names[k]) && !memcmp(key, names[k], klen)) { value[k].p = at; value[k].end = obj->p; }
    }
    return r < 0 ? GPT2_ERR_FORMAT : GPT2_OK;
}

/* whether v's JSON text (absent: "-") is one of accept's '|'-separated texts */
static int gpt2__tok_json_accept(const gpt2__json *v, const char *accept) {
    const char *text = v->p ? v->p : "-";
    size_t n = v->p ? (size_t)(v->end - v->p) : 1;
    for (const char *a = accept;;) {
        const char *bar = strchr(a, '|');
        size_t an = bar ? (size_t)(bar - a) : strlen(a);
        if (an == n && !memcmp(a, text, n)) return 1;
        if (!bar) return 0;
        a = bar + 1;
    }
}

static gpt2_status gpt2__tok_json_refuse(const char *path, const char *field, const gpt2__json *v, const char *why) {
    size_t n = v->p ? (size_t)(v->end - v->p) : 6;
    return gpt2__fail(GPT2_ERR_FORMAT, "%s: %s is %.*s: %s", path, field, GPT2__TOK_SHOW(n), v->p ? v->p : "absent", why);
}

/* an id: a JSON integer in [0, 2^24), as vocab.json's */
static int gpt2__tok_json_id(const gpt2__json *v, int *id) {
    if (!v->p || !((*v->p >= '0' && *v->p <= '9') || *v->p == '-')) return 0;
    gpt2__json j = *v;
    double x;
    if (gpt2__json_number(&j, &x) || j.p != v->end || !(x >= 0 && x < 16777216.0) || x != (double)(int)x) return 0;
    *id = (int)x;
    return 1;
}

/* Appends one added token to l: content (a JSON string, decoded) and id; what names the entry in messages. */
static gpt2_status gpt2__tok_list_add(gpt2__tok_list *l, const char *path, const char *what, size_t e,
                                      const gpt2__json *content, const gpt2__json *id) {
    int v;
    if (!gpt2__tok_json_id(id, &v)) {
        size_t n = id->p ? (size_t)(id->end - id->p) : 6;
        return gpt2__fail(GPT2_ERR_FORMAT, "%s: %s %zu has id %.*s; an integer in [0, 2^24) is needed",
                          path, what, e, GPT2__TOK_SHOW(n), id->p ? id->p : "absent");
    }
    if (!content->p || *content->p != '"')
        return gpt2__fail(GPT2_ERR_FORMAT, "%s: %s %zu (id %d) has no text string", path, what, e, v);
    size_t n, raw = (size_t)(content->end - content->p);
    if (!gpt2__tok_list_grow(l, raw)) return gpt2__fail(GPT2_ERR_OOM, "%s: out of memory", path);
    gpt2__json j = *content;
    if (gpt2__json_string(&j, (char *)l->bytes + l->n_bytes, &n)) return GPT2_ERR_FORMAT;
    l->ids[l->n] = v;
    l->n_bytes += n;
    l->off[++l->n] = l->n_bytes;
    return GPT2_OK;
}

typedef struct gpt2__tok_by_id { int id, entry; } gpt2__tok_by_id;

static int gpt2__tok_by_id_cmp(const void *a, const void *b) {
    int x = ((const gpt2__tok_by_id *)a)->id, y = ((const gpt2__tok_by_id *)b)->id;
    return (x > y) - (x < y);
}

/* Fills t's added tokens from the list, by increasing id: no id twice, and an id of the vocabulary only
   with that token's text (Hugging Face would decode the added text, and encoding would no longer round-trip). */
static gpt2_status gpt2__tok_index_added(gpt2_tokenizer *t, const char *path, const gpt2__tok_list *l) {
    size_t n = l->n;
    if (n == 0) return GPT2_OK;
    gpt2__tok_by_id *order = (gpt2__tok_by_id *)gpt2__alloc(n * sizeof *order);
    t->added_id = (int *)gpt2__alloc(n * sizeof *t->added_id);
    t->added_off = (size_t *)gpt2__alloc((n + 1) * sizeof *t->added_off);
    t->added_bytes = (unsigned char *)gpt2__alloc(l->n_bytes);
    if (!order || !t->added_id || !t->added_off || !t->added_bytes) {
        GPT2_FREE(order);
        return gpt2__fail(GPT2_ERR_OOM, "%s: out of memory", path);
    }
    for (size_t e = 0; e < n; e++) { order[e].id = l->ids[e]; order[e].entry = (int)e; }
    qsort(order, n, sizeof *order, gpt2__tok_by_id_cmp);
    t->added_off[0] = 0;
    for (size_t k = 0; k < n; k++) {
        size_t e = (size_t)order[k].entry, len = l->off[e + 1] - l->off[e];
        if (k && order[k].id == order[k - 1].id) {
            size_t f = (size_t)order[k - 1].entry, flen = l->off[f + 1] - l->off[f];
            gpt2__fail(GPT2_ERR_FORMAT, "%s: id %d is given to the added tokens \"%.*s\" and \"%.*s\"", path, order[k].id,
                       GPT2__TOK_SHOW(flen), (const char *)l->bytes + l->off[f], GPT2__TOK_SHOW(len), (const char *)l->bytes + l->off[e]);
            GPT2_FREE(order);
            return GPT2_ERR_FORMAT;
        }
        const unsigned char *text = l->bytes + l->off[e];
        int id = order[k].id;
        size_t vlen = id < t->n_vocab ? t->tok_off[id + 1] - t->tok_off[id] : 0;
        if (id < t->n_vocab && (vlen != len || memcmp(t->bytes + t->tok_off[id], text, len))) {
            gpt2__fail(GPT2_ERR_FORMAT, "%s: the added token \"%.*s\" has id %d, which is the vocabulary's \"%.*s\"", path,
                       GPT2__TOK_SHOW(len), (const char *)text, id, GPT2__TOK_SHOW(vlen), (const char *)t->bytes + t->tok_off[id]);
            GPT2_FREE(order);
            return GPT2_ERR_FORMAT;
        }
        memcpy(t->added_bytes + t->added_off[k], text, len);
        t->added_off[k + 1] = t->added_off[k] + len;
        t->added_id[k] = id;
    }
    t->n_added = (int)n;
    GPT2_FREE(order);
    return GPT2_OK;
}

/* tokenizer.json's "added_tokens": [{"id": 50257, "content": "<|im_start|>", ...}, ...] */
static gpt2_status gpt2__tok_json_added(gpt2_tokenizer *t, const char *path, const gpt2__json *added) {
    if (*added->p != '[') return gpt2__tok_json_refuse(path, "added_tokens", added, "a list of {\"id\", \"content\"} objects is needed");
    static const char *const names[] = { "id", "content" };
    gpt2__tok_list l;
    memset(&l, 0, sizeof l);
    gpt2__json j = *added;
    gpt2_status st = GPT2_OK;
    j.p++;
    gpt2__json_ws(&j);
    if (j.p < j.end && *j.p == ']') j.p = j.end;
    for (size_t e = 0; !st && j.p < j.end; e++) {
        gpt2__json_ws(&j);
        gpt2__json f[2];
        if (j.p >= j.end || *j.p != '{') st = gpt2__fail(GPT2_ERR_FORMAT, "%s: added_tokens[%zu] is not an object", path, e);
        if (!st) st = gpt2__tok_json_members(&j, names, 2, f);
        if (!st) st = gpt2__tok_list_add(&l, path, "added token", e, &f[1], &f[0]);
        gpt2__json_ws(&j);
        if (!st && j.p < j.end && *j.p == ',') j.p++;
        else if (!st && j.p < j.end && *j.p == ']') j.p = j.end;
        else if (!st) st = gpt2__json_err(&j, "expected ',' or ']' in added_tokens");
    }
    if (!st) st = gpt2__tok_index_added(t, path, &l);
    gpt2__tok_list_free(&l);
    return st;
}

/* added_tokens.json: {"<|im_start|>": 50257, ...} (the text as it is, not in GPT-2's byte alphabet) */
static gpt2_status gpt2__tok_load_added_json(gpt2_tokenizer *t, const char *path) {
    char *data;
    size_t len;
    gpt2_status st = gpt2__read_file(path, &data, &len);
    if (st) return st;
    gpt2__tok_list l;
    memset(&l, 0, sizeof l);
    gpt2__json j;
    j.start = data; j.p = data; j.end = data + len; j.file = path; j.depth = 0;
    gpt2__json_ws(&j);
    int open = j.p < j.end && *j.p == '{';
    if (open) { j.p++; gpt2__json_ws(&j); }
    else st = gpt2__json_err(&j, "expected an object");
    if (open && j.p < j.end && *j.p == '}') { j.p++; open = 0; }
    for (size_t e = 0; !st && open; e++) {
        gpt2__json key = j, id = j;
        gpt2__json_ws(&j);
        key.p = j.p;
        if (gpt2__json_string(&j, NULL, NULL)) { st = GPT2_ERR_FORMAT; break; }
        key.end = j.p;
        gpt2__json_ws(&j);
        if (j.p >= j.end || *j.p != ':') { st = gpt2__json_err(&j, "expected ':'"); break; }
        j.p++;
        gpt2__json_ws(&j);
        id.p = j.p;
        if (gpt2__json_skip(&j)) { st = GPT2_ERR_FORMAT; break; }
        id.end = j.p;
        st = gpt2__tok_list_add(&l, path, "entry", e, &key, &id);
        gpt2__json_ws(&j);
        if (!st && j.p < j.end && (*j.p == ',' || *j.p == '}')) open = *j.p++ == ',';
        else if (!st) st = gpt2__json_err(&j, "expected ',' or '}'");
    }
    gpt2__json_ws(&j);
    if (!st && j.p != j.end) st = gpt2__json_err(&j, "text after the object");
    if (!st) st = gpt2__tok_index_added(t, path, &l);
    gpt2__tok_list_free(&l);
    GPT2_FREE(data);
    return st;
}

/* tokenizer.json's model.merges as merges.txt lines, then the merges parser over them */
static gpt2_status gpt2__tok_json_merges(gpt2_tokenizer *t, const char *path, const char *label, const gpt2__json *merges) {
    if (merges->p && *merges->p != '[')
        return gpt2__tok_json_refuse(path, "model.merges", merges, "a list of merges is needed");
    /* each merge's line is shorter than its JSON text, so the lines fit in the JSON's length */
    size_t cap = merges->p ? (size_t)(merges->end - merges->p) : 1, k = 0;
    char *text = (char *)gpt2__alloc(cap);
    if (!text) return gpt2__fail(GPT2_ERR_OOM, "%s: out of memory", path);
    gpt2__json j = *merges;
    gpt2_status st = GPT2_OK;
    if (merges->p) {
        j.p++;
        gpt2__json_ws(&j);
        if (j.p < j.end && *j.p == ']') j.p = j.end;
    }
    for (size_t e = 0; merges->p && !st && j.p < j.end; e++) {
        gpt2__json_ws(&j);
        int pair = j.p < j.end && *j.p == '[';
        if (pair) j.p++;
        for (int side = 0; !st && side <= pair; side++) {
            gpt2__json_ws(&j);
            if (side && j.p < j.end && *j.p == ',') { j.p++; gpt2__json_ws(&j); }
            else if (side) { st = gpt2__json_err(&j, "expected ',' in a merge pair"); break; }
            char *at = text + k;
            size_t n;
            if (j.p >= j.end || *j.p != '"') {
                st = gpt2__fail(GPT2_ERR_FORMAT, "%s: model.merges[%zu] is neither \"left right\" nor [\"left\", \"right\"]", path, e);
                break;
            }
            if (gpt2__json_string(&j, at, &n)) { st = GPT2_ERR_FORMAT; break; }
            int blank = 1, bad = n == 0;
            for (size_t c = 0; c < n; c++) {
                bad |= at[c] == '\n' || at[c] == '\r' || at[c] == '\t' || (pair && at[c] == ' ');
                blank &= at[c] == ' ';
            }
            if (bad || blank) {
                st = gpt2__fail(GPT2_ERR_FORMAT, "%s: model.merges[%zu]: \"%.*s\" is not %s", path, e, GPT2__TOK_SHOW(n), at,
                                pair ? "a token in GPT-2's byte alphabet" : "two tokens separated by one space");
                break;
            }
            k += n;
            text[k++] = side == pair ? '\n' : ' ';
        }
        if (st) break;
        gpt2__json_ws(&j);
        if (pair && j.p < j.end && *j.p == ']') { j.p++; gpt2__json_ws(&j); }
        else if (pair) { st = gpt2__json_err(&j, "expected ']' after a merge pair"); break; }
        if (j.p < j.end && *j.p == ',') j.p++;
        else if (j.p < j.end && *j.p == ']') j.p = j.end;
        else st = gpt2__json_err(&j, "expected ',' or ']' in model.merges");
    }
    if (st) { GPT2_FREE(text); return st; }
    return gpt2__tok_parse_merges(t, label, text, k, 0);
}

/* tokenizer.json's BPE: top holds the values of "model", "normalizer", "pre_tokenizer", "decoder" */
static gpt2_status gpt2__tok_json_bpe(gpt2_tokenizer *t, const char *path, const gpt2__json *top) {
    static const char *const model_names[] = { "type", "vocab", "merges", "dropout", "continuing_subword_prefix",
                                               "end_of_word_suffix", "ignore_merges" };
    static const char *const pre_names[] = { "type", "add_prefix_space", "use_regex" };
    static const char *const decoder_names[] = { "type" };
    static const char *const object_names[] = { "model", "pre_tokenizer", "decoder" };
    static const char *const *const member_names[] = { model_names, pre_names, decoder_names };
    static const int n_members[] = { 7, 3, 1 };
    gpt2__json fields[3][7];
    for (int o = 0; o < 3; o++) {
        const gpt2__json *v = &top[o == 0 ? 0 : o + 1];
        if (!v->p || *v->p != '{')
            return gpt2__tok_json_refuse(path, object_names[o], v, o == 0 ? "a BPE model is needed"
                                         : o == 1 ? "GPT-2's ByteLevel pre-tokenizer is needed" : "GPT-2's ByteLevel decoder is needed");
        gpt2__json obj = *v;
        if (gpt2__tok_json_members(&obj, member_names[o], n_members[o], fields[o])) return GPT2_ERR_FORMAT;
    }
    /* what each field may be ("-": absent), and why anything else is refused */
    struct { const char *name; const gpt2__json *v; const char *accept, *why; } rules[] = {
        { "model.type", &fields[0][0], "\"BPE\"", "only byte-level BPE models are read" },
        { "model.dropout", &fields[0][3], "-|null", "BPE dropout makes the tokens random" },
        { "model.continuing_subword_prefix", &fields[0][4], "-|null|\"\"", "GPT-2's BPE marks no subwords" },
        { "model.end_of_word_suffix", &fields[0][5], "-|null|\"\"", "GPT-2's BPE marks no word ends" },
        { "model.ignore_merges", &fields[0][6], "-|false", "words found in the vocabulary would skip the merges" },
        { "normalizer", &top[1], "-|null", "a normalizer would change the text before BPE" },
        { "pre_tokenizer.type", &fields[1][0], "\"ByteLevel\"", "GPT-2's ByteLevel pre-tokenizer is needed" },
        { "pre_tokenizer.add_prefix_space", &fields[1][1], "false", "a space would be put before the text" },
        { "pre_tokenizer.use_regex", &fields[1][2], "-|true", "the text would not be split GPT-2's way" },
        { "decoder.type", &fields[2][0], "\"ByteLevel\"", "GPT-2's ByteLevel decoder is needed" },
    };
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++)
        if (!gpt2__tok_json_accept(rules[r].v, rules[r].accept)) return gpt2__tok_json_refuse(path, rules[r].name, rules[r].v, rules[r].why);

    const gpt2__json *vocab = &fields[0][1];
    if (!vocab->p || *vocab->p != '{') return gpt2__tok_json_refuse(path, "model.vocab", vocab, "the vocabulary object is needed");
    size_t label_cap = strlen(path) + 16;
    char *label = (char *)gpt2__alloc(label_cap);
    gpt2__tok_list l;
    memset(&l, 0, sizeof l);
    l.key_cap = 256;
    l.key = (char *)gpt2__alloc(l.key_cap);
    gpt2_status st = !label || !l.key ? gpt2__fail(GPT2_ERR_OOM, "%s: out of memory", path) : GPT2_OK;
    if (!st) snprintf(label, label_cap, "%s model.vocab", path);
    if (!st) st = gpt2__tok_parse_vocab(&l, label, vocab->p, (size_t)(vocab->end - vocab->p));
    if (!st) st = gpt2__tok_index_vocab(t, label, &l);
    gpt2__tok_list_free(&l);
    if (!st) snprintf(label, label_cap, "%s model.merges", path);
    if (!st) st = gpt2__tok_json_merges(t, path, label, &fields[0][2]);
    GPT2_FREE(label);
    return st;
}

/* tokenizer.json: its BPE (when bpe) and its added tokens */
static gpt2_status gpt2__tok_load_json(gpt2_tokenizer *t, const char *path, int bpe) {
    static const char *const names[] = { "model", "normalizer", "pre_tokenizer", "decoder", "added_tokens" };
    char *data;
    size_t len;
    gpt2_status st = gpt2__read_file(path, &data, &len);
    if (st) return st;
    gpt2__json j, top[5];
    j.start = data; j.p = data; j.end = data + len; j.file = path; j.depth = 0;
    st = gpt2__tok_json_members(&j, names, 5, top);
    gpt2__json_ws(&j);
    if (!st && j.p != j.end) st = gpt2__json_err(&j, "text after the object");
    if (!st && bpe) st = gpt2__tok_json_bpe(t, path, top);
    if (!st && !gpt2__tok_json_accept(&top[4], "-|null")) st = gpt2__tok_json_added(t, path, &top[4]);
    GPT2_FREE(data);
    return st;
}

/* Beside vocab.json + merges.txt: added tokens from added_tokens.json, else from tokenizer.json's
   added_tokens (only that field of it is read), else none. */
static gpt2_status gpt2__tok_load_added(gpt2_tokenizer *t, const char *dir, const char *json) {
    size_t cap = strlen(dir) + sizeof "/added_tokens.json";
    char *added = (char *)gpt2__alloc(cap);
    if (!added) return gpt2__fail(GPT2_ERR_OOM, "gpt2_tokenizer_load: out of memory");
    gpt2_status st = GPT2_OK;
    if (gpt2__join(added, cap, dir, "added_tokens.json") && gpt2__tok_is_file(added)) st = gpt2__tok_load_added_json(t, added);
    else if (gpt2__tok_is_file(json)) st = gpt2__tok_load_json(t, json, 0);
    GPT2_FREE(added);
    return st;
}

/* the text of token id (the vocabulary's, else an added token's), or NULL when no token has this id */
static const unsigned char *gpt2__tok_text(const gpt2_tokenizer *t, int id, size_t *len) {
    if (id >= 0 && id < t->n_vocab) {
        *len = t->tok_off[id + 1] - t->tok_off[id];
        return t->bytes + t->tok_off[id];
    }
    int lo = 0, hi = t->n_added;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (t->added_id[mid] < id) lo = mid + 1; else hi = mid;
    }
    if (lo < t->n_added && t->added_id[lo] == id) {
        *len = t->added_off[lo + 1] - t->added_off[lo];
        return t->added_bytes + t->added_off[lo];
    }
    return NULL;
}

/* gpt2_decode's reason for an id no token has */
static void gpt2__tok_no_id(const gpt2_tokenizer *t, int id, int k) {
    if (t->n_added)
        gpt2__fail(GPT2_ERR_ARG, "gpt2_decode: id %d at position %d is outside the vocabulary [0, %d) and is no added token's (%d added, ids %d..%d)",
                   id, k, t->n_vocab, t->n_added, t->added_id[0], t->added_id[t->n_added - 1]);
    else
        gpt2__fail(GPT2_ERR_ARG, "gpt2_decode: id %d at position %d is outside the vocabulary [0, %d)", id, k, t->n_vocab);
}

GPT2_API int gpt2_token_id(const gpt2_tokenizer *tok, const char *text, size_t len) {
    if (!tok) { gpt2__fail(GPT2_ERR_ARG, "gpt2_token_id: tok is NULL"); return -1; }
    if (!text) { gpt2__fail(GPT2_ERR_ARG, "gpt2_token_id: text is NULL"); return -1; }
    for (int k = 0; k < tok->n_added; k++)
        if (tok->added_off[k + 1] - tok->added_off[k] == len && (!len || !memcmp(tok->added_bytes + tok->added_off[k], text, len)))
            return tok->added_id[k];
    int id = len ? gpt2__tok_find(tok, (const unsigned char *)text, len) : -1;
    if (id < 0) gpt2__fail(GPT2_ERR_ARG, "gpt2_token_id: \"%.*s\" is the text of no token", GPT2__TOK_SHOW(len), text);
    return id;
}

GPT2_API gpt2_status gpt2_tokenizer_load(gpt2_tokenizer **tok, const char *path) {
    if (!tok) return gpt2__fail(GPT2_ERR_ARG, "gpt2_tokenizer_load: tok is NULL");
    *tok = NULL;
    if (!path) return gpt2__fail(GPT2_ERR_ARG, "gpt2_tokenizer_load: path is NULL");
    if (!gpt2__is_dir(path))
        return gpt2__fail(GPT2_ERR_IO, "%s: not a directory (expected one holding vocab.json + merges.txt)", path);
    /* Hugging Face's names first, then the original release's (encoder.json + vocab.bpe) */
    static const char *const names[2][2] = { { "vocab.json", "merges.txt" }, { "encoder.json", "vocab.bpe" } };
    char vocab[4096], merges[4096];
    int pick = -1;
    for (int k = 0; k < 2 && pick < 0; k++) {
        if (!gpt2__join(vocab, sizeof vocab, path, names[k][0]) || !gpt2__join(merges, sizeof merges, path, names[k][1]))
            return gpt2__fail(GPT2_ERR_ARG, "%s: path too long", path);
        if (gpt2__tok_is_file(vocab)) pick = k;
    }
    char json[4096];
    if (!gpt2__join(json, sizeof json, path, "tokenizer.json")) return gpt2__fail(GPT2_ERR_ARG, "%s: path too long", path);
    if (pick < 0 && !gpt2__tok_is_file(json))
        return gpt2__fail(GPT2_ERR_IO, "%s: found neither vocab.json + merges.txt, encoder.json + vocab.bpe nor tokenizer.json", path);
    gpt2_tokenizer *t = (gpt2_tokenizer *)gpt2__zalloc(sizeof *t);
    if (!t) return gpt2__fail(GPT2_ERR_OOM, "gpt2_tokenizer_load: out of memory");
    gpt2_status st = pick < 0 ? gpt2__tok_load_json(t, json, 1) : gpt2__tok_load_vocab(t, vocab);
    if (!st && pick >= 0) st = gpt2__tok_load_merges(t, merges);
    if (!st && pick >= 0) st = gpt2__tok_load_added(t, path, json);
    if (st) { gpt2_tokenizer_free(t); return st; }
    *tok = t;
    return GPT2_OK;
}

/* ---- encode */

/* A candidate merge in the BPE heap: symbols at byte positions left and right (adjacent when it
   was pushed) holding tokens left_id and right_id. It is stale once either symbol changed. */
typedef struct gpt2__tok_cand { int rank, left, right, left_id, right_id, merged; } gpt2__tok_cand;

/* scratch for one piece of up to cap bytes: symbols are indexed by their first byte's position */
typedef struct gpt2__tok_work {
    size_t cap;
    int *id;                 /* token of the symbol starting here; -1: merged into its left neighbour */
    int *next, *prev;        /* neighbours (positions); -1 at the ends */
    gpt2__tok_cand *heap;    /* room for 3 * cap: the first pairs plus two new ones per merge */
} gpt2__tok_work;

static void gpt2__tok_work_free(gpt2__tok_work *w) {
    GPT2_FREE(w->id); GPT2_FREE(w->next); GPT2_FREE(w->prev); GPT2_FREE(w->heap);
    w->id = w->next = w->prev = NULL; w->heap = NULL; w->cap = 0;
}

static int gpt2__tok_work_reserve(gpt2__tok_work *w, size_t n) {
    if (n <= w->cap) return 1;
    size_t cap = w->cap ? w->cap : 256, bytes;
    while (cap < n) cap *= 2;
    gpt2__tok_work_free(w);
    if (cap > (size_t)0x7FFFFFFF / 3 || !gpt2__mul_ok(3 * cap, sizeof *w->heap, &bytes)) return 0;
    w->id = (int *)gpt2__alloc(cap * sizeof(int));
    w->next = (int *)gpt2__alloc(cap * sizeof(int));
    w->prev = (int *)gpt2__alloc(cap * sizeof(int));
    w->heap = (gpt2__tok_cand *)gpt2__alloc(bytes);
    if (!w->id || !w->next || !w->prev || !w->heap) { gpt2__tok_work_free(w); return 0; }
    w->cap = cap;
    return 1;
}

static int gpt2__tok_cand_less(const gpt2__tok_cand *a, const gpt2__tok_cand *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

/* pushes the pair starting at symbol `left` when a merge rule exists for it */
static void gpt2__tok_push(const gpt2_tokenizer *t, gpt2__tok_work *w, int *n_heap, int left) {
    int right = left >= 0 ? w->next[left] : -1;
    if (right < 0) return;
    const gpt2__tok_merge *m = gpt2__tok_find_merge(t, w->id[left], w->id[right]);
    if (!m) return;
    gpt2__tok_cand c;
    c.rank = m->rank; c.left = left; c.right = right;
    c.left_id = w->id[left]; c.right_id = w->id[right]; c.merged = m->merged;
    int k = (*n_heap)++;
    while (k > 0 && gpt2__tok_cand_less(&c, &w->heap[(k - 1) / 2])) { w->heap[k] = w->heap[(k - 1) / 2]; k = (k - 1) / 2; }
    w->heap[k] = c;
}

static gpt2__tok_cand gpt2__tok_pop(gpt2__tok_work *w, int *n_heap) {
    gpt2__tok_cand top = w->heap[0], last = w->heap[--*n_heap];
    int n = *n_heap, k = 0;
    for (;;) {
        int c = 2 * k + 1;
        if (c >= n) break;
        if (c + 1 < n && gpt2__tok_cand_less(&w->heap[c + 1], &w->heap[c])) c++;
        if (!gpt2__tok_cand_less(&w->heap[c], &last)) break;
        w->heap[k] = w->heap[c];
        k = c;
    }
    if (n > 0) w->heap[k] = last;
    return top;
}

/* BPE on one piece s[0..n) (n <= w->cap): applies the lowest-ranked merge present, leftmost
   first, until none applies; then appends the symbols' tokens to ids (those below cap). */
static void gpt2__tok_bpe(const gpt2_tokenizer *t, gpt2__tok_work *w, const unsigned char *s, int n,
                          int *ids, int cap, long long *count) {
    int n_heap = 0;
    for (int k = 0; k < n; k++) {
        w->id[k] = t->byte_token[s[k]];
        w->prev[k] = k - 1;
        w->next[k] = k + 1 < n ? k + 1 : -1;
    }
    for (int k = 0; k + 1 < n; k++) gpt2__tok_push(t, w, &n_heap, k);
    while (n_heap > 0) {
        gpt2__tok_cand c = gpt2__tok_pop(w, &n_heap);
        if (w->id[c.left] != c.left_id || w->next[c.left] != c.right || w->id[c.right] != c.right_id) continue;
        w->id[c.left] = c.merged;
        w->id[c.right] = -1;
        w->next[c.left] = w->next[c.right];
        if (w->next[c.left] >= 0) w->prev[w->next[c.left]] = c.left;
        gpt2__tok_push(t, w, &n_heap, w->prev[c.left]);
        gpt2__tok_push(t, w, &n_heap, c.left);
    }
    for (int k = 0; k >= 0; k = w->next[k]) {
        if (*count < cap) ids[*count] = w->id[k];
        ++*count;
    }
}

/* Writes min(count, cap) ids and returns count, the number of tokens of the whole text; ids may
   be NULL when cap is 0 (to size a buffer). -1 on bad arguments, out of memory, or a count above
   INT_MAX. */
GPT2_API int gpt2_encode(const gpt2_tokenizer *tok, const char *text, size_t len, int *ids, int cap) {
    if (!tok) { gpt2__fail(GPT2_ERR_ARG, "gpt2_encode: tok is NULL"); return -1; }
    if (!text && len) { gpt2__fail(GPT2_ERR_ARG, "gpt2_encode: text is NULL but len is %zu", len); return -1; }
    if (cap < 0 || (!ids && cap > 0)) { gpt2__fail(GPT2_ERR_ARG, "gpt2_encode: ids %s with cap %d", ids ? "given" : "NULL", cap); return -1; }
    const unsigned char *s = (const unsigned char *)text;
    gpt2__tok_work w;
    memset(&w, 0, sizeof w);
    long long count = 0;
    for (size_t i = 0; i < len; ) {
        size_t end = gpt2__tok_next_piece(s, len, i);
        if (!gpt2__tok_work_reserve(&w, end - i)) {
            gpt2__tok_work_free(&w);
            gpt2__fail(GPT2_ERR_OOM, "gpt2_encode: out of memory for a piece of %zu bytes at byte %zu", end - i, i);
            return -1;
        }
        gpt2__tok_bpe(tok, &w, s + i, (int)(end - i), ids, cap, &count);
        if (count > 0x7FFFFFFF) {
            gpt2__tok_work_free(&w);
            gpt2__fail(GPT2_ERR_ARG, "gpt2_encode: more than INT_MAX tokens");
            return -1;
        }
        i = end;
    }
    gpt2__tok_work_free(&w);
    return (int)count;
}

/* ---- decode */

/* Writes the first min(total, cap) bytes of the ids' text and returns total, its full length;
   a NUL follows the text only when total < cap (so the text is a C string exactly when the
   return value is below cap). out may be NULL when cap is 0. An id outside the vocabulary
   fails the call (-1) before anything is written. */
GPT2_API int gpt2_decode(const gpt2_tokenizer *tok, const int *ids, int n, char *out, size_t cap) {
    if (!tok) { gpt2__fail(GPT2_ERR_ARG, "gpt2_decode: tok is NULL"); return -1; }
    if (n < 0 || (!ids && n > 0)) { gpt2__fail(GPT2_ERR_ARG, "gpt2_decode: %d ids at %p", n, (const void *)ids); return -1; }
    if (!out && cap) { gpt2__fail(GPT2_ERR_ARG, "gpt2_decode: out is NULL but cap is %zu", cap); return -1; }
    size_t total = 0;
    for (int k = 0; k < n; k++) {
        size_t len;
        if (!gpt2__tok_text(tok, ids[k], &len)) { gpt2__tok_no_id(tok, ids[k], k); return -1; }
        total += len;
        if (total > 0x7FFFFFFF) { gpt2__fail(GPT2_ERR_ARG, "gpt2_decode: the text is longer than INT_MAX bytes"); return -1; }
    }
    size_t at = 0;
    for (int k = 0; k < n && at < cap; k++) {
        size_t l;
        const unsigned char *p = gpt2__tok_text(tok, ids[k], &l);
        if (l > cap - at) l = cap - at;
        memcpy(out + at, p, l);
        at += l;
    }
    if (total < cap) out[total] = 0;
    return (int)total;
}

/* == [GPT2:SAMPLER] == sampler (shared by both backends) ======================================================== */

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
   3. p = exp(z - max z), computed in double and rounded to float; with 0 < top_p < 1, candidates sorted by p descending (ties: lower
      index first) are cut to the shortest prefix whose sum reaches top_p * (sum over candidates).
   4. u = gpt2__uniform(seed, draw); walk the kept candidates (index order when neither cut applies,
      else the sorted order), summing p in double; pick the first where the sum exceeds u * total. */
static int gpt2__sample_greedy(const float *logits, int V) {
    int best = 0;
    for (int i = 1; i < V; i++) if (logits[i] > logits[best] || (logits[best] != logits[best] && logits[i] == logits[i])) best = i;
    return best;
}

typedef struct gpt2__cand { float p; int id; } gpt2__cand;

static int gpt2__cand_cmp(const void *a, const void *b) {
    const gpt2__cand *x = (const gpt2__cand *)a, *y = (const gpt2__cand *)b;
    if (x->p > y->p) return -1;
    if (x->p < y->p) return 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* ---- processors: what the row's logits go through before the draw (both backends' rule; the CPU's code) */

/* Does the request use anything that reads its logits beyond temperature, top_k and top_p? */
static int gpt2__processed(const gpt2_request *r) {
    const gpt2_sampling *s = &r->sampling;
    return s->n_bias > 0 || (s->repetition_penalty > 0.0f && s->repetition_penalty != 1.0f) || s->presence_penalty != 0.0f ||
           s->frequency_penalty != 0.0f || s->no_repeat_ngram > 0 || s->min_new_tokens > 0;
}

static int gpt2__int_cmp(const void *a, const void *b) { int x = *(const int *)a, y = *(const int *)b; return (x > y) - (x < y); }

/* z [V] := a sampled row's logits after the processors, in Hugging Face's order:
   bias (z[id] += bias), repetition_penalty over the prompt and the output (each distinct token once: z / penalty
   when z > 0, z * penalty otherwise), presence and frequency over the output (z -= presence + frequency x count),
   no_repeat_ngram (every token that would complete an n-gram already in prompt + output is banned), then the stop
   tokens banned while fewer than min_new_tokens were generated. ctx: room for prompt_len + n_out + n_extra ints. */
GPT2__NO_CONTRACT static void gpt2__process(float *z, int V, const gpt2__seq *q, int *ctx) {
    GPT2__NO_CONTRACT_BODY
    const gpt2_request *r = q->req;
    const gpt2_sampling *s = &r->sampling;
    const int np = r->prompt_len, ng = r->n_out + q->n_extra, nh = np + ng;
    for (int i = 0; i < s->n_bias; i++) z[s->bias_ids[i]] += s->bias[i];
    /* the context: prompt, output, drafts before this row */
    memcpy(ctx, r->prompt, (size_t)np * sizeof(int));
    if (r->n_out) memcpy(ctx + np, r->out, (size_t)r->n_out * sizeof(int));
    if (q->n_extra) memcpy(ctx + np + r->n_out, q->extra, (size_t)q->n_extra * sizeof(int));
    const float rp = s->repetition_penalty;
    if (rp > 0.0f && rp != 1.0f) {
        int *sorted = ctx + nh; /* the caller's room holds two contexts */
        memcpy(sorted, ctx, (size_t)nh * sizeof(int));
        qsort(sorted, (size_t)nh, sizeof(int), gpt2__int_cmp);
        for (int i = 0; i < nh; i++)
            if (!i || sorted[i] != sorted[i - 1]) {
                float *v = &z[sorted[i]];
                *v = *v > 0.0f ? *v / rp : *v * rp;
            }
    }
    if (s->presence_penalty != 0.0f || s->frequency_penalty != 0.0f) {
        int *sorted = ctx + nh;
        memcpy(sorted, ctx + np, (size_t)ng * sizeof(int));
        qsort(sorted, (size_t)ng, sizeof(int), gpt2__int_cmp);
        for (int i = 0, c; i < ng; i += c) {
            for (c = 1; i + c < ng && sorted[i + c] == sorted[i]; c++) {}
            float *v = &z[sorted[i]];
            *v -= s->presence_penalty + s->frequency_penalty * (float)c;
        }
    }
    if (s->no_repeat_ngram > 0 && nh + 1 >= s->no_repeat_ngram) {
        const int g = s->no_repeat_ngram - 1; /* the last g tokens, and every earlier n-gram starting with them */
        for (int i = 0; i + g < nh; i++) {
            int e = 0;
            while (e < g && ctx[i + e] == ctx[nh - g + e]) e++;
            if (e == g) z[ctx[i + g]] = -INFINITY;
        }
    }
    if (ng < s->min_new_tokens) {
        if (r->stop_token >= 0 && r->stop_token < V) z[r->stop_token] = -INFINITY;
        for (int i = 0; i < r->n_stop_ids; i++) z[r->stop_ids[i]] = -INFINITY;
    }
}

/* A sampled row's logprobs from its raw logits l [V] (temperature 1, before any processor), in double: the chosen
   token's log-softmax into out_logprobs[draw], the top_logprobs most likely tokens (ties: lower index) into
   out_top_ids / out_top_logprobs [draw][top_logprobs], most likely first. */
static void gpt2__logprobs(const float *l, int V, const gpt2__seq *q, int token) {
    gpt2_request *r = q->req;
    float mx = -INFINITY;
    for (int v = 0; v < V; v++) mx = l[v] > mx ? l[v] : mx;
    double sum = 0.0;
    for (int v = 0; v < V; v++) sum += exp((double)l[v] - mx);
    const double lse = mx + log(sum);
    if (r->out_logprobs) r->out_logprobs[q->draw] = (float)(l[token] - lse);
    const int k = r->top_logprobs;
    if (k <= 0) return;
    int *ids = r->out_top_ids + (size_t)q->draw * k;
    float *lps = r->out_top_logprobs + (size_t)q->draw * k;
    for (int j = 0; j < k; j++) { /* the j-th largest: larger than every kept one's successor (k <= 20 passes) */
        int best = -1;
        for (int v = 0; v < V; v++) {
            if (j && (l[v] > l[ids[j - 1]] || (l[v] == l[ids[j - 1]] && v <= ids[j - 1]))) continue;
            if (best < 0 || l[v] > l[best]) best = v;
        }
        ids[j] = best < 0 ? 0 : best;
        lps[j] = best < 0 ? -INFINITY : (float)(l[best] - lse);
    }
}

/* min_p: keeps, in their order, the candidates whose p is at least min_p x the largest p (Hugging Face's MinPLogitsWarper:
   a probability ratio, so p unnormalised does); returns how many */
static int gpt2__cut_min_p(gpt2__cand *c, int n, float min_p) {
    float pmax = 0.0f;
    for (int i = 0; i < n; i++) pmax = c[i].p > pmax ? c[i].p : pmax;
    const float floor_p = min_p * pmax;
    int k = 0;
    for (int i = 0; i < n; i++) if (c[i].p >= floor_p) c[k++] = c[i];
    return k ? k : n;
}

/* typical_p (Hugging Face's TypicalLogitsWarper): q = p / sum p, H = -sum q log q; a candidate's distance is
   |-log q - H|. Sorted by distance (ties: lower index), the kept set reaches the first position where the cumulative
   q is not below typical_p and holds every candidate not farther than that one. Kept in their order; returns how
   many. */
typedef struct gpt2__typ { double dist; float p; int id; } gpt2__typ;
static int gpt2__typ_cmp(const void *a, const void *b) {
    const gpt2__typ *x = (const gpt2__typ *)a, *y = (const gpt2__typ *)b;
    if (x->dist < y->dist) return -1;
    if (x->dist > y->dist) return 1;
    return (x->id > y->id) - (x->id < y->id);
}
static double gpt2__typ_dist(float p, double total, double ent) {
    return p > 0.0f ? fabs(-log(p / total) - ent) : INFINITY;
}
GPT2__NO_CONTRACT static int gpt2__cut_typical(gpt2__cand *c, int n, float typical_p) {
    GPT2__NO_CONTRACT_BODY
    double total = 0.0, ent = 0.0;
    for (int i = 0; i < n; i++) total += c[i].p;
    if (!(total > 0.0)) return n;
    for (int i = 0; i < n; i++) if (c[i].p > 0.0f) { double q = c[i].p / total; ent -= q * log(q); }
    gpt2__typ *d = (gpt2__typ *)gpt2__alloc((size_t)n * sizeof *d);
    if (!d) return n; /* no memory for the cut: the draw goes over every candidate */
    for (int i = 0; i < n; i++) { d[i].dist = gpt2__typ_dist(c[i].p, total, ent); d[i].p = c[i].p; d[i].id = c[i].id; }
    qsort(d, (size_t)n, sizeof *d, gpt2__typ_cmp);
    double cum = 0.0;
    int last = 0;
    while (last < n - 1 && (cum += d[last].p / total) < (double)typical_p) last++;
    const double limit = d[last].dist;
    GPT2_FREE(d);
    int k = 0;
    for (int i = 0; i < n; i++) if (gpt2__typ_dist(c[i].p, total, ent) <= limit) c[k++] = c[i];
    return k ? k : n;
}

/* scratch: room for V candidates */
GPT2__NO_CONTRACT static int gpt2__sample(const float *logits, int V, const gpt2_sampling *s, uint64_t draw, gpt2__cand *scratch) {
    GPT2__NO_CONTRACT_BODY
    if (!(s->temperature > 0.0f)) return gpt2__sample_greedy(logits, V);
    float inv_t = 1.0f / s->temperature;
    int cut_k = s->top_k > 0 && s->top_k < V;
    int cut_p = s->top_p > 0.0f && s->top_p < 1.0f;
    float zmax = -INFINITY;
    for (int i = 0; i < V; i++) if (logits[i] * inv_t > zmax) zmax = logits[i] * inv_t;
    int n = V;
    for (int i = 0; i < V; i++) {
        float z = logits[i] * inv_t - zmax;  /* float multiply, float subtract: the GPU rounds the same */
        scratch[i].p = z == z ? (float)exp((double)z) : 0.0f; /* a NaN logit (NaN weights) is never drawn */
        scratch[i].id = i;
    }
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
    if (s->min_p > 0.0f) n = gpt2__cut_min_p(scratch, n, s->min_p);
    if (s->typical_p > 0.0f && s->typical_p < 1.0f) n = gpt2__cut_typical(scratch, n, s->typical_p);
    double total = 0.0;
    for (int i = 0; i < n; i++) total += scratch[i].p;
    double target = gpt2__uniform(s->seed, draw) * total, cum = 0.0;
    for (int i = 0; i < n; i++) {
        cum += scratch[i].p;
        if (cum > target) return scratch[i].id;
    }
    return scratch[n - 1].id;
}

/* ---- gpt2_score's windows (both backends): which tokens a window feeds and which it scores */

/* One window of a request: tokens[s .. s + n_in) fed at positions 0 .. n_in - 1 of a KV slot; rows first .. n_in - 1
   (window positions) are scored, row p predicting tokens[s + p + 1]; fed counts the rows fed so far. */
typedef struct gpt2__score_win { int req, s, n_in, first, fed, slot; } gpt2__score_win;

/* The windows of every request, in order (request, then window): the cursor (req, j) moves to the next window that
   scores something. Window j starts at s = j * k and scores the tokens t in [lo, hi), t >= n_context:
       lo = j ? L + (j - 1) * k + e : 0,   hi = min(L + j * k + e, n_tokens),
   e = 1 when k = L (token j L is then scored in window j - 1, whose L tokens all precede it), else 0. That is the
   rule s = k * max(0, ceil((t + 1 - L) / k)): for t in [lo, hi), ceil((t + 1 - L) / k) = j. A window feeds the tokens
   up to the one before its last scored token: at most L - 1 + e <= L positions. */
typedef struct gpt2__score_cursor { int req; long j; } gpt2__score_cursor;

static int gpt2__score_next(const gpt2_score_request *reqs, int n, int L, gpt2__score_cursor *c, gpt2__score_win *w) {
    while (c->req < n) {
        const gpt2_score_request *r = &reqs[c->req];
        const long N = r->n_tokens, k = r->stride ? r->stride : L / 2, e = k == L;
        if (c->j == 0 && r->n_context >= L + e) c->j = (r->n_context - L - e) / k + 1; /* windows before n_context */
        const long j = c->j, lo0 = j ? L + (j - 1) * k + e : 0;
        if (lo0 >= N) { c->req++; c->j = 0; continue; }
        const long hi = L + j * k + e < N ? L + j * k + e : N, lo = lo0 > r->n_context ? lo0 : r->n_context, s = j * k;
        c->j++;
        if (lo >= hi) continue;
        w->req = c->req; w->s = (int)s; w->n_in = (int)(hi - 1 - s); w->first = (int)(lo - 1 - s);
        w->fed = 0; w->slot = -1;
        return 1;
    }
    return 0;
}

/* == [GPT2:CPU] == CPU backend: plain C forward with KV cache, arithmetic in fp32 (the reference) =============== */

#if defined(__GNUC__)
/* GNU C's vectors (GCC, Clang): a panel's 16 float32, and 16 F16/BF16 bit patterns widened to 32 bits */
typedef float gpt2__vf __attribute__((vector_size(GPT2__PANEL * 4)));
typedef uint16_t gpt2__vh __attribute__((vector_size(GPT2__PANEL * 2)));
typedef uint32_t gpt2__vu __attribute__((vector_size(GPT2__PANEL * 4)));
typedef int32_t gpt2__vi __attribute__((vector_size(GPT2__PANEL * 4)));

/* *zp := e^z of its 16 float32, within ~2 ulp of expf (z clamped to [-87, 88], where e^z is normal and finite): z = n ln 2 + r,
   |r| <= ln 2 / 2 (ln 2 in two parts, Cody and Waite), e^r by Cephes' expf polynomial, 2^n from its exponent bits */
static void gpt2__cpu_vexp(gpt2__vf *zp) {
    gpt2__vf z = *zp;
    const gpt2__vf zero = {0}, lo = zero - 87.0f, hi = zero + 88.0f;
    gpt2__vi m = z < lo;
    z = (gpt2__vf)(((gpt2__vi)z & ~m) | ((gpt2__vi)lo & m));
    m = z > hi;
    z = (gpt2__vf)(((gpt2__vi)z & ~m) | ((gpt2__vi)hi & m));
    const gpt2__vf t = z * 1.44269504088896341f + 12582912.0f; /* 1.5 * 2^23 + n: n = round(z / ln 2), its low bits */
    const gpt2__vf n = t - 12582912.0f;
    gpt2__vf r = z - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    gpt2__vf q = r * 1.9875691500e-4f + 1.3981999507e-3f;
    q = q * r + 8.3334519073e-3f;
    q = q * r + 4.1665795894e-2f;
    q = q * r + 1.6666665459e-1f;
    q = q * r + 5.0000001201e-1f;
    q = q * (r * r) + r + 1.0f;
    const gpt2__vi e = ((gpt2__vi)t - 0x4B400000 + 127) << 23;
    *zp = q * (gpt2__vf)e;
}
#endif

/* The MLP's activation, in place, as Hugging Face's ACT2FN computes it:
   GPT2__ACT_GELU_TANH  gelu_new: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
   GPT2__ACT_GELU_ERF   gelu: 0.5 x (1 + erf(x / sqrt(2)))
   GPT2__ACT_QUICK_GELU quick_gelu: x sigmoid(1.702 x)
   GPT2__ACT_RELU       relu: max(x, 0)
   The tanh form is computed as x sigmoid(2u) (0.5 (1 + tanh u) = 1 / (1 + e^(-2u)), exactly), so both sigmoid forms are
   x / (1 + e^(-z)): with GNU C's vectors, 16 at a time by gpt2__cpu_vexp (a tail as a padded vector, so that every
   element's bits are those of its value alone). One thread's: the products run it on the outputs each computed. */
static void gpt2__cpu_activation(float *x, size_t n, int act) {
    size_t i = 0;
#if defined(__GNUC__)
    if (act == GPT2__ACT_GELU_TANH || act == GPT2__ACT_QUICK_GELU)
        for (; i < n; i += GPT2__PANEL) {
            const size_t k = n - i < GPT2__PANEL ? n - i : GPT2__PANEL;
            gpt2__vf v = {0};
            memcpy(&v, x + i, k * sizeof(float));
            gpt2__vf e = act == GPT2__ACT_GELU_TANH ? -1.5957691216057308f * (v + 0.044715f * v * v * v) : -1.702f * v;
            gpt2__cpu_vexp(&e);
            v = v / (1.0f + e);
            memcpy(x + i, &v, k * sizeof(float));
        }
#endif
    for (; i < n; i++) {
        const float v = x[i];
        if (act == GPT2__ACT_GELU_TANH) x[i] = v / (1.0f + expf(-1.5957691216057308f * (v + 0.044715f * v * v * v)));
        else if (act == GPT2__ACT_GELU_ERF) x[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
        else if (act == GPT2__ACT_QUICK_GELU) x[i] = v / (1.0f + expf(-1.702f * v));
        else x[i] = v > 0.0f ? v : 0.0f;
    }
}

/* ---- the products: out [N][O] = in [N][I] @ W [I][O] + b [O] (b may be NULL), W packed in panels (gpt2__panel_at)
   in the model's dtype, arithmetic in float32.
   Each output is b (or 0), then + in[i] * W[i] for i in order: one expression for every output, however the work is
   cut, so that its bits never depend on the row count, the tiling or the threads (a request's tokens never depend on
   its batch). The products of one process all run one instruction set's build of gpt2__cpu_tasks (picked at load:
   gpt2__cpu_isa), whose multiply-adds fuse where the set has them: bits differ between builds, never within one.
   The work is cut into tasks: a group of GPT2__PANEL_GROUP panels (its weights read from memory once, then from the
   cache) times a run of rows; each thread takes a run of tasks. A task computes register tiles of rows × panels,
   each tile's sums kept in registers across the whole of I. Three tiles:
     many rows      the widest the registers hold (MR × NP); from F16/BF16 the group's panels are first converted to
                    float32 in the thread's scratch, once for all the task's rows
     a few rows     (up to GPT2__CPU_FEW_ROWS in F16/BF16; up to MRF in F32) MRF × NPF, reading the panels as they are
                    (memory-bound: half the bytes), converting in registers
     one row        1 × NP1: a decode step's row, NP1 panels' sums in flight
   A tile's rows past the task's last row and panels past the matrix's last repeat its last, their sums not stored. */
typedef struct gpt2__product {
    float *out;
    const float *in;
    const void *w;
    const float *b;
    int N, I, O, n_panels;
    char dtype;                /* the panels' dtype: 'F', 'H' (F16), 'B' (BF16) */
    int act;                   /* GPT2__ACT_*: the activation of each output, by the thread that computed it */
    int n_rc, rows_per_task;   /* tasks: n_groups × n_rc, each of rows_per_task rows (the last fewer) */
    float *scratch;            /* GPT2__PANEL_GROUP panels of I float32 per thread (F16/BF16 with many rows) */
} gpt2__product;

/* the model's dtype as the slots name it: 'F' F32, 'H' F16, 'B' BF16 */
static char gpt2__cpu_dtype(const gpt2_model *m) {
    return m->dtype == GPT2_DTYPE_F16 ? 'H' : m->dtype == GPT2_DTYPE_BF16 ? 'B' : 'F';
}
/* element i of a weight array in that dtype, as float32 */
static float gpt2__cpu_weight(const void *w, char dtype, size_t i) {
    const uint16_t *h = (const uint16_t *)w;
    return dtype == 'F' ? ((const float *)w)[i] : dtype == 'H' ? gpt2__f16_to_f32(h[i]) : gpt2__bf16_to_f32(h[i]);
}

#if defined(__GNUC__)
/* v = 16 float32 from p (F32, F16 or BF16 bits at p; any alignment). F16: the bits below the sign, moved to float32's
   places and multiplied by 2^112, are the value (normal or subnormal, exactly); exponent 31 becomes 255 (inf, NaN). */
#define GPT2__VLOAD_F(v, p) memcpy(&(v), (p), sizeof(gpt2__vf))
#define GPT2__VLOAD_B(v, p)                                                                                         \
    do {                                                                                                            \
        gpt2__vh h_;                                                                                                \
        memcpy(&h_, (p), sizeof h_);                                                                                \
        gpt2__vu u_ = __builtin_convertvector(h_, gpt2__vu) << 16;                                                  \
        memcpy(&(v), &u_, sizeof u_);                                                                               \
    } while (0)
#define GPT2__VLOAD_H(v, p)                                                                                         \
    do {                                                                                                            \
        gpt2__vh h_;                                                                                                \
        memcpy(&h_, (p), sizeof h_);                                                                                \
        gpt2__vu u_ = __builtin_convertvector(h_, gpt2__vu);                                                        \
        gpt2__vu m_ = ((u_ & 0x7FFFu) << 13) | ((gpt2__vu)((u_ & 0x7C00u) == 0x7C00u) & 0x7F800000u);              \
        gpt2__vf f_;                                                                                                \
        memcpy(&f_, &m_, sizeof m_);                                                                                \
        f_ *= 5192296858534827628530496329220096.0f; /* 2^112 */                                                    \
        memcpy(&m_, &f_, sizeof m_);                                                                                \
        m_ |= (u_ & 0x8000u) << 16;                                                                                 \
        memcpy(&(v), &m_, sizeof m_);                                                                               \
    } while (0)
/* The same widening by the F16C and AVX-512 builds' conversion instructions (exact, as above; a NaN may come out
   quiet): a decode step's products in F16 read their weights through it, so it is their inner loop */
#if GPT2__CPU_VARIANTS
#include <immintrin.h>
#define GPT2__VLOAD_H_F16C(v, p)                                                                                    \
    do {                                                                                                            \
        const __m256 lo_ = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p)));                     \
        const __m256 hi_ = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p) + 1));                 \
        memcpy(&(v), &lo_, sizeof lo_);                                                                             \
        memcpy((char *)&(v) + sizeof lo_, &hi_, sizeof hi_);                                                        \
    } while (0)
/* (the zero-masked form of the AVX-512 one: GCC 12 warns that the plain form's pass-through is uninitialised) */
#define GPT2__VLOAD_H_512(v, p)                                                                                     \
    do {                                                                                                            \
        const __m256i h_ = _mm256_loadu_si256((const __m256i *)(const void *)(p));                                  \
        const __m512 f_ = _mm512_maskz_cvtph_ps((__mmask16)0xFFFF, h_);                                             \
        memcpy(&(v), &f_, sizeof f_);                                                                               \
    } while (0)
#endif

/* One tile: rows r0 .. r0 + nr - 1 (nr <= MR) of in × panels q0 .. q0 + nq - 1 (nq <= NP) of w (ES bytes an element,
   read by LOAD), into out. */
#define GPT2__TILE(MR, NP, LOAD, ES)                                                                                \
    do {                                                                                                            \
        gpt2__vf acc_[MR][NP];                                                                                      \
        const float *a_[MR];                                                                                        \
        const unsigned char *w_[NP];                                                                                \
        for (int r_ = 0; r_ < (MR); r_++) a_[r_] = p->in + (size_t)(r0 + (r_ < nr ? r_ : nr - 1)) * I;              \
        for (int q_ = 0; q_ < (NP); q_++) {                                                                         \
            const int pq_ = q0 + (q_ < nq ? q_ : nq - 1), c_ = pq_ * GPT2__PANEL, n_ = O - c_ < GPT2__PANEL ? O - c_ \
                                                                                                 : GPT2__PANEL;     \
            w_[q_] = wb + (size_t)(pq_ - g0) * I * GPT2__PANEL * (ES);                                             \
            gpt2__vf b_;                                                                                            \
            memset(&b_, 0, sizeof b_);                                                                              \
            if (p->b) memcpy(&b_, p->b + c_, (size_t)n_ * sizeof(float));                                           \
            for (int r_ = 0; r_ < (MR); r_++) acc_[r_][q_] = b_;                                                    \
        }                                                                                                           \
        for (int k_ = 0; k_ < I; k_++) {                                                                            \
            gpt2__vf wv_[NP];                                                                                       \
            for (int q_ = 0; q_ < (NP); q_++) LOAD(wv_[q_], w_[q_] + (size_t)k_ * GPT2__PANEL * (ES));              \
            for (int r_ = 0; r_ < (MR); r_++) {                                                                     \
                const float s_ = a_[r_][k_];                                                                        \
                for (int q_ = 0; q_ < (NP); q_++) acc_[r_][q_] += s_ * wv_[q_];                                     \
            }                                                                                                       \
        }                                                                                                           \
        for (int r_ = 0; r_ < nr; r_++)                                                                             \
            for (int q_ = 0; q_ < nq; q_++) {                                                                       \
                const int c_ = (q0 + q_) * GPT2__PANEL, n_ = O - c_ < GPT2__PANEL ? O - c_ : GPT2__PANEL;           \
                memcpy(p->out + (size_t)(r0 + r_) * O + c_, &acc_[r_][q_], (size_t)n_ * sizeof(float));             \
            }                                                                                                       \
    } while (0)

/* The tasks t0 .. t1 - 1 of a product, in one instruction set's build: tiles MR × NP (many rows), MRF × NPF (a few)
   and 1 × NP1 (one). */
#define GPT2__CPU_TASKS(name, ATTR, BODY, LOADH, MR, NP, MRF, NPF, NP1)                                                    \
    ATTR static void name(const gpt2__product *p, long t0, long t1, float *scratch) {                               \
        BODY                                                                                                        \
        const int I = p->I, O = p->O;                                                                               \
        for (long t = t0; t < t1; t++) {                                                                            \
            const int g0 = (int)(t / p->n_rc) * GPT2__PANEL_GROUP, rs = (int)(t % p->n_rc) * p->rows_per_task;      \
            const int ng = p->n_panels - g0 < GPT2__PANEL_GROUP ? p->n_panels - g0 : GPT2__PANEL_GROUP;             \
            const int re = p->N - rs < p->rows_per_task ? p->N - rs : p->rows_per_task;                             \
            const int es = p->dtype == 'F' ? 4 : 2;                                                                 \
            const unsigned char *wb = (const unsigned char *)p->w + (size_t)g0 * I * GPT2__PANEL * es;              \
            if (re == 1)                                                                                            \
                for (int r0 = rs, nr = 1, q0 = g0; q0 < g0 + ng; q0 += (NP1)) {                                    \
                    const int nq = g0 + ng - q0 < (NP1) ? g0 + ng - q0 : (NP1);                                     \
                    if (p->dtype == 'F') GPT2__TILE(1, NP1, GPT2__VLOAD_F, 4);                                      \
                    else if (p->dtype == 'H') GPT2__TILE(1, NP1, LOADH, 2);                                          \
                    else GPT2__TILE(1, NP1, GPT2__VLOAD_B, 2);                                                      \
                }                                                                                                   \
            else if (p->dtype == 'F' && re <= (MRF))                                                                \
                for (int r0 = rs, nr = re, q0 = g0; q0 < g0 + ng; q0 += (NPF)) {                                   \
                    const int nq = g0 + ng - q0 < (NPF) ? g0 + ng - q0 : (NPF);                                     \
                    GPT2__TILE(MRF, NPF, GPT2__VLOAD_F, 4);                                                         \
                }                                                                                                   \
            else if (p->dtype == 'F' || p->N > GPT2__CPU_FEW_ROWS) {                                                \
                if (p->dtype != 'F') { /* the group's panels to float32, in the thread's scratch */                 \
                    const size_t n = (size_t)ng * I * GPT2__PANEL;                                                  \
                    for (size_t i = 0; i < n; i += GPT2__PANEL) {                                                   \
                        gpt2__vf v;                                                                                 \
                        if (p->dtype == 'H') LOADH(v, wb + i * 2);                                                  \
                        else GPT2__VLOAD_B(v, wb + i * 2);                                                          \
                        memcpy(scratch + i, &v, sizeof v);                                                          \
                    }                                                                                               \
                    wb = (const unsigned char *)scratch;                                                            \
                }                                                                                                   \
                for (int q0 = g0; q0 < g0 + ng; q0 += (NP)) {                                                       \
                    const int nq = g0 + ng - q0 < (NP) ? g0 + ng - q0 : (NP);                                       \
                    for (int r0 = rs; r0 < rs + re; r0 += (MR)) {                                                   \
                        const int nr = rs + re - r0 < (MR) ? rs + re - r0 : (MR);                                   \
                        GPT2__TILE(MR, NP, GPT2__VLOAD_F, 4);                                                       \
                    }                                                                                               \
                }                                                                                                   \
            } else                                                                                                  \
                for (int q0 = g0; q0 < g0 + ng; q0 += (NPF)) {                                                      \
                    const int nq = g0 + ng - q0 < (NPF) ? g0 + ng - q0 : (NPF);                                     \
                    for (int r0 = rs; r0 < rs + re; r0 += (MRF)) {                                                  \
                        const int nr = rs + re - r0 < (MRF) ? rs + re - r0 : (MRF);                                 \
                        if (p->dtype == 'H') GPT2__TILE(MRF, NPF, LOADH, 2);                                        \
                        else GPT2__TILE(MRF, NPF, GPT2__VLOAD_B, 2);                                                \
                    }                                                                                               \
                }                                                                                                   \
            if (p->act != GPT2__ACT_NONE) {                                                                         \
                const int c0 = g0 * GPT2__PANEL, nc = O - c0 < ng * GPT2__PANEL ? O - c0 : ng * GPT2__PANEL;        \
                for (int r = rs; r < rs + re; r++) gpt2__cpu_activation(p->out + (size_t)r * O + c0, (size_t)nc, p->act); \
            }                                                                                                       \
        }                                                                                                           \
    }

GPT2__CPU_TASKS(gpt2__cpu_tasks_base, , , GPT2__VLOAD_H, 2, 1, 2, 1, 1)
#if GPT2__CPU_VARIANTS
GPT2__CPU_TASKS(gpt2__cpu_tasks_avx2, __attribute__((target("avx2,fma,f16c"))) GPT2__FUSE, GPT2__FUSE_BODY, GPT2__VLOAD_H_F16C, 6, 1, 2,
                2, 2)
GPT2__CPU_TASKS(gpt2__cpu_tasks_avx512, __attribute__((target("avx2,fma,f16c,avx512f"))) GPT2__FUSE, GPT2__FUSE_BODY, GPT2__VLOAD_H_512, 6, 4,
                4, 2, 4)
#endif
#undef GPT2__TILE
#undef GPT2__CPU_TASKS

#else /* no GNU C vectors: the same sums, one output at a time */
static void gpt2__cpu_tasks_base(const gpt2__product *p, long t0, long t1, float *scratch) {
    (void)scratch;
    for (long t = t0; t < t1; t++) {
        const int c0 = (int)(t / p->n_rc) * GPT2__PANEL_GROUP * GPT2__PANEL, rs = (int)(t % p->n_rc) * p->rows_per_task;
        const int c1 = p->O - c0 < GPT2__PANEL_GROUP * GPT2__PANEL ? p->O : c0 + GPT2__PANEL_GROUP * GPT2__PANEL;
        const int re = p->N - rs < p->rows_per_task ? p->N : rs + p->rows_per_task;
        for (int r = rs; r < re; r++)
            for (int c = c0; c < c1; c++) {
                float s = p->b ? p->b[c] : 0.0f;
                for (int k = 0; k < p->I; k++)
                    s += p->in[(size_t)r * p->I + k] * gpt2__cpu_weight(p->w, p->dtype, gpt2__panel_at(p->I, k, c));
                p->out[(size_t)r * p->O + c] = s;
            }
        if (p->act != GPT2__ACT_NONE)
            for (int r = rs; r < re; r++) gpt2__cpu_activation(p->out + (size_t)r * p->O + c0, (size_t)(c1 - c0), p->act);
    }
}
#endif

/* out [N][O] = act(in [N][I] @ w [I][O] + b) (b may be NULL; act GPT2__ACT_NONE: none): w packed in panels in the
   model's dtype. scratch: gpt2__cpu_scratch_floats(m, I) floats. */
static void gpt2__cpu_product(const gpt2_model *m, float *out, const float *in, const void *w, const float *b, int N, int I,
                              int O, int act, float *scratch) {
    gpt2__product p;
    p.out = out; p.in = in; p.w = w; p.b = b; p.N = N; p.I = I; p.O = O; p.act = act;
    p.n_panels = (O + GPT2__PANEL - 1) / GPT2__PANEL;
    p.dtype = gpt2__cpu_dtype(m);
    p.scratch = scratch;
    int nthreads = 1;
#ifdef _OPENMP
    nthreads = omp_get_max_threads();
#endif
    /* all the rows in one task, unless that leaves fewer than 4 tasks a thread: then runs of 12 rows or more (whole
       tiles of every build) */
    const long n_groups = (p.n_panels + GPT2__PANEL_GROUP - 1) / GPT2__PANEL_GROUP;
    p.n_rc = 1;
    p.rows_per_task = N;
    if (N >= 24 && n_groups < 4L * nthreads) {
        int n_rc = (int)((4L * nthreads + n_groups - 1) / n_groups), most = N / 12;
        n_rc = n_rc < most ? n_rc : most;
        p.rows_per_task = ((N + n_rc - 1) / n_rc + 11) / 12 * 12;
        p.n_rc = (N + p.rows_per_task - 1) / p.rows_per_task;
    }
    const long n_tasks = n_groups * p.n_rc;
    void (*tasks)(const gpt2__product *, long, long, float *) = m->cpu.tasks;
    GPT2__OMP(omp parallel if ((double)(N + 16) * I * O > 4e6))
    {
        int t = 0, nt = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        nt = omp_get_num_threads();
#endif
        tasks(&p, n_tasks * t / nt, n_tasks * (t + 1) / nt, scratch + (size_t)t * GPT2__PANEL_GROUP * GPT2__PANEL * I);
    }
}

/* ---- attention: each row (position p of its sequence) attends to positions 0 .. p of its KV slot, head by head.
   Work in tasks of a block of up to GPT2__ATT_ROWS consecutive rows of one sequence and one head (the block's keys
   and values stay in the cache for its rows). Each row computes as alone, reading the cache in its dtype (F16/BF16
   widened in registers, exactly): scores q·k over i in order, scaled, softmax (max, exp, the sum in order), then
   out = sum over j in order of (e_j / sum) v_j. */
typedef struct gpt2__attn_task { int row0, n_rows, head, slot; } gpt2__attn_task;
typedef struct gpt2__attn {
    const float *qkv;          /* [N][3C] */
    float *out;                /* [N][C] */
    const int *row_pos;        /* each row's position */
    const void *kt, *v;        /* this layer's caches (gpt2__cpu_kt, gpt2__cpu_kv) */
    int C, H, max_seq;
    float scale;
    char dtype;                /* the caches' dtype: 'F', 'H', 'B' */
    const gpt2__attn_task *tasks;
} gpt2__attn;

#if defined(__GNUC__)
/* One row's scores and weighted values from a cache of ES-byte elements read by LOAD (16 at a time): sc [0, n) :=
   q · key j (the sum over i in order, however the loops run); after the softmax (sc then holds e_j / sum),
   o [0, hd) := sum of sc[j] v_j, 4 vectors of o in flight. Where 16 do not fit (the last keys, a head size not a
   multiple of 16), the same sums one element at a time. */
/* acc[0 .. 3] += s times the nv_ vectors at p (a 4th past the last repeats it, its sum not stored) */
#define GPT2__ATTN_FMA4(acc, s, p, LOAD, ES)                                                                        \
    for (int v_ = 0; v_ < 4; v_++) {                                                                                \
        gpt2__vf x_;                                                                                                \
        LOAD(x_, (p) + (size_t)(v_ < nv_ ? v_ : nv_ - 1) * GPT2__PANEL * (ES));                                    \
        acc[v_] += (s) * x_;                                                                                        \
    }
#define GPT2__ATTN_SCORES(LOAD, ES)                                                                                 \
    do {                                                                                                            \
        const int n16_ = n / GPT2__PANEL * GPT2__PANEL;                                                             \
        if (k->n_rows == 1) /* 4 vectors of keys at a time, their sums in registers */                              \
            for (int j_ = 0, nv_; (nv_ = (n16_ - j_) / GPT2__PANEL < 4 ? (n16_ - j_) / GPT2__PANEL : 4) > 0;        \
                 j_ += nv_ * GPT2__PANEL) {                                                                         \
                gpt2__vf s_[4] = {{0}, {0}, {0}, {0}};                                                              \
                for (int i_ = 0; i_ < hd; i_++)                                                                     \
                    GPT2__ATTN_FMA4(s_, q[i_], kt + ((size_t)i_ * ms + j_) * (ES), LOAD, ES);                       \
                memcpy(sc + j_, s_, (size_t)nv_ * sizeof(gpt2__vf));                                                \
            }                                                                                                       \
        else { /* a block's rows: each row of the transposed keys in turn (they stay in the cache for the block) */ \
            for (int j_ = 0; j_ < n16_; j_++) sc[j_] = 0.0f;                                                        \
            for (int i_ = 0; i_ < hd; i_++) {                                                                       \
                const unsigned char *kr_ = kt + (size_t)i_ * ms * (ES);                                             \
                for (int j_ = 0; j_ < n16_; j_ += GPT2__PANEL) {                                                    \
                    gpt2__vf k_, s_;                                                                                \
                    LOAD(k_, kr_ + (size_t)j_ * (ES));                                                              \
                    memcpy(&s_, sc + j_, sizeof s_);                                                                \
                    s_ += q[i_] * k_;                                                                               \
                    memcpy(sc + j_, &s_, sizeof s_);                                                                \
                }                                                                                                   \
            }                                                                                                       \
        }                                                                                                           \
        for (int j_ = n16_; j_ < n; j_++) {                                                                         \
            float s_ = 0.0f;                                                                                        \
            for (int i_ = 0; i_ < hd; i_++) s_ += q[i_] * gpt2__cpu_weight(kt, a->dtype, (size_t)i_ * ms + j_);    \
            sc[j_] = s_;                                                                                            \
        }                                                                                                           \
    } while (0)
#define GPT2__ATTN_VALUES(LOAD, ES)                                                                                 \
    do {                                                                                                            \
        const int nv_all_ = hd / GPT2__PANEL;                                                                       \
        for (int c_ = 0; c_ < nv_all_; c_ += 4) {                                                                   \
            const int nv_ = nv_all_ - c_ < 4 ? nv_all_ - c_ : 4;                                                    \
            gpt2__vf o_[4] = {{0}, {0}, {0}, {0}};                                                                  \
            for (int j_ = 0; j_ < n; j_++)                                                                          \
                GPT2__ATTN_FMA4(o_, sc[j_], v + ((size_t)j_ * C + (size_t)c_ * GPT2__PANEL) * (ES), LOAD, ES);      \
            memcpy(o + (size_t)c_ * GPT2__PANEL, o_, (size_t)nv_ * sizeof(gpt2__vf));                               \
        }                                                                                                           \
        for (int i_ = nv_all_ * GPT2__PANEL; i_ < hd; i_++) {                                                      \
            float s_ = 0.0f;                                                                                        \
            for (int j_ = 0; j_ < n; j_++) s_ += sc[j_] * gpt2__cpu_weight(v, a->dtype, (size_t)j_ * C + i_);     \
            o[i_] = s_;                                                                                             \
        }                                                                                                           \
    } while (0)
#define GPT2__ATTN_DTYPE(WHAT, LOADH)                                                                               \
    do {                                                                                                            \
        if (a->dtype == 'F') WHAT(GPT2__VLOAD_F, 4);                                                                \
        else if (a->dtype == 'H') WHAT(LOADH, 2);                                                                   \
        else WHAT(GPT2__VLOAD_B, 2);                                                                                \
    } while (0)
#else
#define GPT2__ATTN_DTYPE(WHAT, LOADH) WHAT()
#define GPT2__ATTN_SCORES()                                                                                         \
    for (int j_ = 0; j_ < n; j_++) sc[j_] = 0.0f;                                                                   \
    for (int i_ = 0; i_ < hd; i_++)                                                                                 \
        for (int j_ = 0; j_ < n; j_++) sc[j_] += q[i_] * gpt2__cpu_weight(kt, a->dtype, (size_t)i_ * ms + j_);
#define GPT2__ATTN_VALUES()                                                                                         \
    for (int i_ = 0; i_ < hd; i_++) {                                                                               \
        float s_ = 0.0f;                                                                                            \
        for (int j_ = 0; j_ < n; j_++) s_ += sc[j_] * gpt2__cpu_weight(v, a->dtype, (size_t)j_ * C + i_);         \
        o[i_] = s_;                                                                                                 \
    }
#endif

/* Task t; sc: scratch of max_seq floats */
#define GPT2__CPU_ATTN(name, ATTR, BODY, LOADH)                                                                     \
    ATTR static void name(const gpt2__attn *a, long t, float *sc) {                                                 \
        BODY                                                                                                        \
        const gpt2__attn_task *k = &a->tasks[t];                                                                    \
        const int C = a->C, hd = C / a->H;                                                                          \
        const size_t ms = (size_t)a->max_seq, es = a->dtype == 'F' ? 4 : 2;                                         \
        const unsigned char *kt = (const unsigned char *)a->kt + ((size_t)k->slot * a->H + k->head) * hd * ms * es; \
        const unsigned char *v = (const unsigned char *)a->v + ((size_t)k->slot * ms * C + (size_t)k->head * hd) * es; \
        for (int r = k->row0; r < k->row0 + k->n_rows; r++) {                                                       \
            const int n = a->row_pos[r] + 1;                                                                        \
            const float *q = a->qkv + (size_t)r * 3 * C + (size_t)k->head * hd;                                      \
            float *o = a->out + (size_t)r * C + (size_t)k->head * hd;                                               \
            GPT2__ATTN_DTYPE(GPT2__ATTN_SCORES, LOADH);                                                             \
            float mx = -INFINITY, sum = 0.0f;                                                                       \
            for (int j = 0; j < n; j++) sc[j] *= a->scale;                                                          \
            for (int j = 0; j < n; j++) mx = sc[j] > mx ? sc[j] : mx;                                               \
            for (int j = 0; j < n; j++) { sc[j] = expf(sc[j] - mx); sum += sc[j]; }                                 \
            for (int j = 0; j < n; j++) sc[j] /= sum;                                                               \
            GPT2__ATTN_DTYPE(GPT2__ATTN_VALUES, LOADH);                                                             \
        }                                                                                                           \
    }
GPT2__CPU_ATTN(gpt2__cpu_attn_base, , , GPT2__VLOAD_H)
#if GPT2__CPU_VARIANTS
GPT2__CPU_ATTN(gpt2__cpu_attn_avx2, __attribute__((target("avx2,fma,f16c"))) GPT2__FUSE, GPT2__FUSE_BODY, GPT2__VLOAD_H_F16C)
GPT2__CPU_ATTN(gpt2__cpu_attn_avx512, __attribute__((target("avx2,fma,f16c,avx512f"))) GPT2__FUSE, GPT2__FUSE_BODY, GPT2__VLOAD_H_512)
#endif
#undef GPT2__CPU_ATTN
#undef GPT2__ATTN_DTYPE
#undef GPT2__ATTN_SCORES
#undef GPT2__ATTN_FMA4
#undef GPT2__ATTN_VALUES

/* out [N][C] = layer_norm(in [N][C]) * g + b, statistics in double (HF: torch.nn.LayerNorm, biased variance) */
static void gpt2__cpu_layernorm(float *out, const float *in, const float *g, const float *b, int N, int C, float eps) {
    GPT2__OMP(omp parallel for schedule(static) if ((double)N * C > 1e5))
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

/* Element indices in the caches (elements of the model's dtype): V's row of a position, and head h's keys in the
   transposed K cache (element i of the key at position pos at [i * max_seq + pos]) */
static size_t gpt2__cpu_kv(const gpt2_model *m, int layer, int slot, int pos) {
    return (((size_t)layer * m->max_batch + slot) * m->max_seq + pos) * (size_t)m->cfg.n_embd;
}
static size_t gpt2__cpu_kt(const gpt2_model *m, int layer, int slot, int h) {
    const size_t H = (size_t)m->cfg.n_head, hd = (size_t)m->cfg.n_embd / H;
    return (((size_t)layer * m->max_batch + slot) * H + h) * hd * m->max_seq;
}
/* element i of a cache := v (in the model's dtype) */
static void gpt2__cpu_put(void *cache, char dtype, size_t i, float v) {
    if (dtype == 'F') ((float *)cache)[i] = v;
    else ((uint16_t *)cache)[i] = dtype == 'H' ? gpt2__f32_to_f16(v) : gpt2__f32_to_bf16(v);
}

static void gpt2__cpu_free(gpt2_model *m) {
    GPT2_FREE(m->cpu.k_cache);
    GPT2_FREE(m->cpu.v_cache);
    m->cpu.k_cache = m->cpu.v_cache = NULL;
}

/* Physical memory in bytes (total, and free now), 0 where the system does not say. */
static void gpt2__host_memory(double *total, double *avail) {
    *total = *avail = 0.0;
#if defined(_WIN32)
    MEMORYSTATUSEX ms;
    ms.dwLength = sizeof ms;
    if (GlobalMemoryStatusEx(&ms)) {
        *total = (double)ms.ullTotalPhys;
        *avail = (double)ms.ullAvailPhys;
    }
#elif defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) *total = (double)pages * page;
#if defined(_SC_AVPHYS_PAGES)
    long av = sysconf(_SC_AVPHYS_PAGES);
    if (av > 0 && page > 0) *avail = (double)av * page;
#endif
#endif
}

/* The products' and the attention's build for this CPU: AVX-512 (with FMA), else AVX2 + FMA, else the baseline. */
static void gpt2__cpu_isa(gpt2__cpu *c) {
    c->tasks = gpt2__cpu_tasks_base;
    c->attn = gpt2__cpu_attn_base;
#if GPT2__CPU_VARIANTS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma")) { /* (F16C came before AVX2, so with it) */
        c->tasks = gpt2__cpu_tasks_avx512;
        c->attn = gpt2__cpu_attn_avx512;
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        c->tasks = gpt2__cpu_tasks_avx2;
        c->attn = gpt2__cpu_attn_avx2;
    }
#endif
}

static gpt2_status gpt2__cpu_init(gpt2_model *m) {
    /* K and V: 2 x n_layer x max_batch x max_seq x n_embd elements of the model's dtype, which must fit in this
       machine's memory beside the weights (with overcommit, malloc alone would promise it and the process die later) */
    size_t n, bytes;
    double total, avail;
    const size_t es = m->dtype == GPT2_DTYPE_F32 ? 4 : 2;
    int ok = gpt2__mul_ok((size_t)m->cfg.n_layer * m->cfg.n_embd, (size_t)m->max_batch * m->max_seq, &n) &&
             gpt2__mul_ok(n, 2 * es, &bytes);
    gpt2__host_memory(&total, &avail);
    if (!ok || (total > 0 && (double)bytes + (double)m->w.bytes > total))
        return gpt2__fail(GPT2_ERR_OOM, "the KV cache for %d sequences of %d tokens needs %.0f MB (weights %.0f MB more); "
                          "this machine has %.0f MB, %.0f MB free: lower max_batch or max_seq",
                          m->max_batch, m->max_seq, ok ? bytes / 1048576.0 : 1e300, m->w.bytes / 1048576.0,
                          total / 1048576.0, avail / 1048576.0);
    gpt2__cpu_isa(&m->cpu);
    m->cpu.k_cache = gpt2__alloc(n * es);
    m->cpu.v_cache = gpt2__alloc(n * es);
    if (!m->cpu.k_cache || !m->cpu.v_cache) {
        gpt2__cpu_free(m);
        return gpt2__fail(GPT2_ERR_OOM, "cannot allocate the KV cache: %zu MB for %d sequences of %d tokens",
                          bytes >> 20, m->max_batch, m->max_seq);
    }
    return GPT2_OK;
}

/* The forward pass over a ragged batch: seqs[s] feeds seqs[s].n_tok tokens at positions seqs[s].pos..
   into KV slot seqs[s].slot. Row r of the activations is token r of the concatenation.
   logits: with all_rows, [N][V] for every fed token; else [n][V] for each sequence's last token.
   Matches HF GPT2LMHeadModel.forward (pre-LN blocks; the activation, attention scale and head config.json names). */
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
    /* activations: x, ln, attention out [N][C]; qkv [N][3C]; fc [N][F]; attention scores per thread; the products'
       scratch (F16/BF16: a group of panels per thread, in float32) */
    const size_t qkv_n = (size_t)3 * N * C;
    const size_t scratch_n = m->dtype == GPT2_DTYPE_F32 ? 0 : (size_t)nthreads * GPT2__PANEL_GROUP * GPT2__PANEL * (F > C ? F : C);
    const size_t att_n = (size_t)nthreads * maxT;
    size_t need = (size_t)N * (3 * C + F) + qkv_n + att_n + scratch_n;
    float *buf = (float *)gpt2__alloc(need * sizeof(float));
    int *row_seq = (int *)gpt2__alloc((size_t)N * sizeof(int));
    if (!buf || !row_seq) {
        GPT2_FREE(buf); GPT2_FREE(row_seq);
        return gpt2__fail(GPT2_ERR_OOM, "CPU forward: cannot allocate %zu MB of activations", need * 4 >> 20);
    }
    float *x = buf, *ln = x + (size_t)N * C, *att = ln + (size_t)N * C, *qkv = att + (size_t)N * C;
    float *fc = qkv + qkv_n, *scores = fc + (size_t)N * F, *scratch = scores + att_n;
    const gpt2__weights *w = &m->w;
    for (int s = 0, r = 0; s < n; s++)
        for (int t = 0; t < seqs[s].n_tok; t++, r++) {
            row_seq[r] = s;
            const float *pe = w->wpe + (size_t)(seqs[s].pos + t) * C;
            for (int i = 0; i < C; i++) /* wte's row of the token: a column of the head's packed panels */
                x[(size_t)r * C + i] = gpt2__cpu_weight(w->wte, gpt2__cpu_dtype(m), gpt2__panel_at((size_t)C, i, seqs[s].tok[t])) + pe[i];
        }
    int *row_pos = (int *)gpt2__alloc((size_t)N * sizeof(int));
    gpt2__attn_task *tasks = (gpt2__attn_task *)gpt2__alloc((size_t)(N + n) * H * sizeof(gpt2__attn_task));
    if (!row_pos || !tasks) {
        GPT2_FREE(buf); GPT2_FREE(row_seq); GPT2_FREE(row_pos); GPT2_FREE(tasks);
        return gpt2__fail(GPT2_ERR_OOM, "CPU forward: out of memory");
    }
    const char dt = gpt2__cpu_dtype(m);
    for (int s = 0, r = 0; s < n; s++)
        for (int t = 0; t < seqs[s].n_tok; t++, r++) row_pos[r] = seqs[s].pos + t;
    for (int l = 0; l < cf->n_layer; l++) {
        const gpt2__layer *y = &w->layers[l];
        /* the scores' scale: 1 / sqrt(head size) unless scale_attn_weights is false, over l + 1 with
           scale_attn_by_inverse_layer_idx */
        float scale = m->arch.attn_unscaled ? 1.0f : 1.0f / sqrtf((float)hd);
        if (m->arch.attn_by_layer) scale /= (float)(l + 1);
        gpt2__cpu_layernorm(ln, x, y->ln1_w, y->ln1_b, N, C, cf->ln_eps);
        gpt2__cpu_product(m, qkv, ln, y->qkv_w, y->qkv_b, N, C, 3 * C, GPT2__ACT_NONE, scratch);
        /* K and V of every fed row into the cache, a head per thread (even for one row: each of its K elements is a
           cache line of its own, so the threads' misses overlap): K transposed, element i of every row in turn, so
           that the consecutive rows of a sequence write consecutive elements */
        GPT2__OMP(omp parallel for schedule(static))
        for (int h = 0; h < H; h++) {
            for (int i = 0; i < hd; i++)
                for (int r = 0; r < N; r++)
                    gpt2__cpu_put(m->cpu.k_cache, dt, gpt2__cpu_kt(m, l, seqs[row_seq[r]].slot, h) + (size_t)i * m->max_seq + row_pos[r],
                                  qkv[(size_t)r * 3 * C + C + h * hd + i]);
            for (int r = 0; r < N; r++) {
                const size_t at = gpt2__cpu_kv(m, l, seqs[row_seq[r]].slot, row_pos[r]) + (size_t)h * hd;
                for (int i = 0; i < hd; i++) gpt2__cpu_put(m->cpu.v_cache, dt, at + i, qkv[(size_t)r * 3 * C + 2 * C + h * hd + i]);
            }
        }
        /* the last layer's rows after the K/V store serve only the logits: without all_rows, each sequence's last
           row goes on alone, row s of the compacted rows being sequence s's (its fed row is at or after s); every
           computation below is per row, so each keeps its bits */
        if (l + 1 == cf->n_layer && !all_rows) {
            for (int s = 0, r = 0; s < n; s++) {
                r += seqs[s].n_tok;
                const int src = r - 1;
                if (src != s) {
                    memcpy(x + (size_t)s * C, x + (size_t)src * C, (size_t)C * sizeof(float));
                    memcpy(qkv + (size_t)s * 3 * C, qkv + (size_t)src * 3 * C, (size_t)3 * C * sizeof(float));
                }
                row_seq[s] = s;
                row_pos[s] = row_pos[src];
            }
            N = n;
        }
        /* causal attention, in tasks of a block of a sequence's rows and a head (gpt2__attn) */
        long n_tasks = 0;
        for (int r = 0; r < N;) {
            int e = r + 1;
            while (e < N && row_seq[e] == row_seq[r] && e - r < GPT2__ATT_ROWS) e++;
            for (int h = 0; h < H; h++) {
                gpt2__attn_task *t = &tasks[n_tasks++];
                t->row0 = r; t->n_rows = e - r; t->head = h; t->slot = seqs[row_seq[r]].slot;
            }
            r = e;
        }
        gpt2__attn at;
        at.qkv = qkv; at.out = att; at.row_pos = row_pos; at.C = C; at.H = H; at.max_seq = m->max_seq;
        at.scale = scale; at.dtype = dt; at.tasks = tasks;
        at.kt = (const char *)m->cpu.k_cache + gpt2__cpu_kt(m, l, 0, 0) * (dt == 'F' ? 4 : 2);
        at.v = (const char *)m->cpu.v_cache + gpt2__cpu_kv(m, l, 0, 0) * (dt == 'F' ? 4 : 2);
        GPT2__OMP(omp parallel for schedule(dynamic, 1) if ((double)N * maxT * C > 1e5))
        for (long t = 0; t < n_tasks; t++) {
            int tid = 0;
#ifdef _OPENMP
            tid = omp_get_thread_num();
#endif
            m->cpu.attn(&at, t, scores + (size_t)tid * maxT);
        }
        gpt2__cpu_product(m, ln, att, y->attn_proj_w, y->attn_proj_b, N, C, C, GPT2__ACT_NONE, scratch);
        for (size_t i = 0; i < (size_t)N * C; i++) x[i] += ln[i];
        gpt2__cpu_layernorm(ln, x, y->ln2_w, y->ln2_b, N, C, cf->ln_eps);
        gpt2__cpu_product(m, fc, ln, y->fc_w, y->fc_b, N, C, F, m->arch.act, scratch);
        gpt2__cpu_product(m, ln, fc, y->fc_proj_w, y->fc_proj_b, N, F, C, GPT2__ACT_NONE, scratch);
        for (size_t i = 0; i < (size_t)N * C; i++) x[i] += ln[i];
    }
    /* final layer norm of the rows whose logits are wanted (all of them now), then logits = row @ wte^T */
    const int n_out = N;
    gpt2__cpu_layernorm(ln, x, w->lnf_w, w->lnf_b, n_out, C, cf->ln_eps);
    gpt2__cpu_product(m, logits, ln, w->lm_head, NULL, n_out, C, V, GPT2__ACT_NONE, scratch);
    GPT2_FREE(buf); GPT2_FREE(row_seq); GPT2_FREE(row_pos); GPT2_FREE(tasks);
    return GPT2_OK;
}

/* One engine step on the CPU: the forward pass, then each sequence samples from its last logits. */
/* One engine step on the CPU: the forward pass, then each sequence samples from its last logits (after its request's
   processors, on a copy), and writes its logprobs when asked. */
static gpt2_status gpt2__cpu_step(gpt2_model *m, const gpt2__seq *seqs, int n, int *next) {
    int V = m->cfg.n_vocab;
    float *logits = (float *)gpt2__alloc((size_t)n * V * sizeof(float)), *z = (float *)gpt2__alloc((size_t)V * sizeof(float));
    gpt2__cand *scratch = (gpt2__cand *)gpt2__alloc((size_t)V * sizeof(gpt2__cand));
    int *ctx = (int *)gpt2__alloc((size_t)2 * (m->max_seq + GPT2__SPEC_ROWS + 1) * sizeof(int));
    if (!logits || !z || !scratch || !ctx) {
        GPT2_FREE(logits); GPT2_FREE(z); GPT2_FREE(scratch); GPT2_FREE(ctx);
        return gpt2__fail(GPT2_ERR_OOM, "CPU step: out of memory");
    }
    gpt2_status st = gpt2__cpu_run(m, seqs, n, 0, logits);
    for (int s = 0; st == GPT2_OK && s < n; s++) {
        const gpt2__seq *q = &seqs[s];
        const float *row = logits + (size_t)s * V;
        next[s] = -1;
        if (!q->sample) continue;
        if (q->req && gpt2__processed(q->req)) {
            memcpy(z, row, (size_t)V * sizeof(float));
            gpt2__process(z, V, q, ctx);
            next[s] = gpt2__sample(z, V, &q->sampling, q->draw, scratch);
        } else next[s] = gpt2__sample(row, V, &q->sampling, q->draw, scratch);
        if (q->req && (q->req->out_logprobs || q->req->top_logprobs > 0)) gpt2__logprobs(row, V, q, next[s]);
    }
    GPT2_FREE(logits); GPT2_FREE(z); GPT2_FREE(scratch); GPT2_FREE(ctx);
    return st;
}

/* == [GPT2:ENGINE] == engine: load, forward, generate, score (into the CPU backend above, CUDA below) =========== */

#if GPT2__CUDA
/* The CUDA backend's entry points ([GPT2:STEP], [GPT2:CUDA_INIT]) */
static int gpt2__cuda_usable(int device, char *why, size_t cap);
static gpt2_status gpt2__cuda_init(gpt2_model *m, const gpt2__slot *slots);
static void gpt2__cuda_free(gpt2_model *m);
static gpt2_status gpt2__cuda_forward(gpt2_model *m, const int *tokens, int B, int T, float *logits);
static gpt2_status gpt2__cuda_launch(gpt2_model *m, const gpt2__seq *seqs, int n, int feed);
static gpt2_status gpt2__cuda_collect(gpt2_model *m, int *next);
static void gpt2__cuda_forget(gpt2_model *m, const gpt2_request *r);
static void gpt2__cuda_drain(gpt2_model *m);
static gpt2_status gpt2__cuda_score(gpt2_model *m, gpt2_score_request *reqs, int n);
static int gpt2__cuda_lookahead(const gpt2_model *m);
#endif

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

/* Builds a model from a config.json text and a checkpoint's files (gpt2_load opens them; gpt2_mpi_load
   broadcasts one safetensors image). cfg_name only labels error messages. */
static gpt2_status gpt2__load_ckpt(gpt2_model **out, const char *cfg_text, size_t cfg_len, const char *cfg_name,
                                   gpt2__ckpt *ck, const gpt2_options *opt_in) {
    gpt2_options opt = opt_in ? *opt_in : gpt2_default_options();
    if (opt.backend != GPT2_BACKEND_AUTO && opt.backend != GPT2_BACKEND_CPU && opt.backend != GPT2_BACKEND_CUDA)
        return gpt2__fail(GPT2_ERR_ARG, "options.backend = %d is not a gpt2_backend", (int)opt.backend);
    if (opt.dtype < GPT2_DTYPE_AUTO || opt.dtype > GPT2_DTYPE_BF16)
        return gpt2__fail(GPT2_ERR_ARG, "options.dtype = %d is not a gpt2_dtype", (int)opt.dtype);
    if (opt.max_batch < 0 || opt.max_batch > 65536)
        return gpt2__fail(GPT2_ERR_ARG, "options.max_batch = %d is out of range (0..65536)", opt.max_batch);
    if (opt.step_tokens < 0 || opt.step_tokens > 262144)
        return gpt2__fail(GPT2_ERR_ARG, "options.step_tokens = %d is out of range (0..262144)", opt.step_tokens);
    gpt2_model *m = (gpt2_model *)gpt2__zalloc(sizeof *m);
    if (!m) return gpt2__fail(GPT2_ERR_OOM, "cannot allocate the model");
    gpt2_status st = gpt2__parse_config(cfg_text, cfg_len, cfg_name, &m->cfg, &m->n_inner, &m->arch);
    if (st) { gpt2_free(m); return st; }
    if (opt.max_seq < 0 || opt.max_seq > m->cfg.n_ctx) {
        int n_ctx = m->cfg.n_ctx;
        gpt2_free(m);
        return gpt2__fail(GPT2_ERR_ARG, "options.max_seq = %d is out of range (0..n_ctx = %d)", opt.max_seq, n_ctx);
    }
    m->max_seq = opt.max_seq ? opt.max_seq : m->cfg.n_ctx;
    m->prefill_tokens = opt.step_tokens;
    m->spec = GPT2_SPEC_TOKENS > 0 ? GPT2_SPEC_TOKENS : 0;
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
    gpt2__slot *slots = NULL;
    int n_slots = 0;
    const int host = m->backend == GPT2_BACKEND_CPU;
    st = gpt2__weights_layout(m, gpt2__ckpt_bytes(ck), ck->name, host, &slots, &n_slots);
    if (st) { GPT2_FREE(slots); gpt2_free(m); return st; }
    st = gpt2__ckpt_read(ck, slots, n_slots);
    if (!st) st = gpt2__tied_head_check(slots, n_slots, ck->name);
    if (st) { GPT2_FREE(slots); gpt2_free(m); return st; }
    m->max_batch = opt.max_batch;
    if (host) {
        gpt2__ckpt_to_host(ck, slots, n_slots);
        if (!m->max_batch) m->max_batch = gpt2__cpu_default_batch(m);
        st = gpt2__cpu_init(m);
    }
#if GPT2__CUDA
    else st = gpt2__cuda_init(m, slots); /* uploads the file's bytes; chooses max_batch when 0 */
#endif
    GPT2_FREE(slots);
    if (st) { gpt2_free(m); return st; }
    *out = m;
    return GPT2_OK;
}

/* gpt2__load_ckpt for one safetensors image held in memory (st_name labels error messages): gpt2_mpi_load's ranks,
   the tests and the fuzzers load through it (so a program without them does not call it). */
#if defined(__GNUC__)
__attribute__((unused))
#endif
static gpt2_status gpt2__load_memory(gpt2_model **out, const char *cfg_text, size_t cfg_len, const char *cfg_name,
                                     const unsigned char *st_data, size_t st_len, const char *st_name,
                                     const gpt2_options *opt) {
    gpt2__ckpt ck;
    gpt2_status st = gpt2__ckpt_memory(&ck, st_data, st_len, st_name, 'S');
    if (!st) st = gpt2__load_ckpt(out, cfg_text, cfg_len, cfg_name, &ck, opt);
    gpt2__ckpt_close(&ck);
    return st;
}


/* The two files of a model: path is a directory holding config.json + model.safetensors, or the
   .safetensors file itself with config.json beside it. The caller checks path fits (cap - 16). */
static void gpt2__model_paths(const char *path, int is_dir, char *cfg_path, char *st_path, size_t cap) {
    if (is_dir) {
        snprintf(cfg_path, cap, "%s/config.json", path);
        snprintf(st_path, cap, "%s/model.safetensors", path);
        return;
    }
    const char *slash = strrchr(path, '/');
#if defined(_WIN32)
    const char *backslash = strrchr(path, '\\');
    if (backslash && (!slash || backslash > slash)) slash = backslash;
#endif
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
    gpt2__ckpt ck;
    st = gpt2__ckpt_open(&ck, path);
    if (st) { GPT2_FREE(cfg_text); return st; }
    st = gpt2__load_ckpt(model, cfg_text, cfg_len, cfg_path, &ck, opt);
    gpt2__ckpt_close(&ck);
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

/* The calls that use the model's KV slots refuse while an engine's requests hold them (their caches would be
   overwritten): a status, not a corrupted request. */
static gpt2_status gpt2__no_engine_work(const gpt2_model *m, const char *fn) {
    return m->engine_work ? gpt2__fail(GPT2_ERR_ARG, "%s: an engine on this model has requests in flight (step it until it "
                                                     "is idle, or free it, first)", fn)
                          : GPT2_OK;
}

GPT2_API gpt2_status gpt2_forward(gpt2_model *m, const int *tokens, int B, int T, float *logits) {
    if (!m || !tokens || !logits) return gpt2__fail(GPT2_ERR_ARG, "gpt2_forward: model, tokens and logits must not be NULL");
    if (gpt2__no_engine_work(m, "gpt2_forward")) return GPT2_ERR_ARG;
    if (B < 1 || T < 1) return gpt2__fail(GPT2_ERR_ARG, "gpt2_forward: B = %d and T = %d must be at least 1", B, T);
    if (T > m->max_seq)
        return gpt2__fail(GPT2_ERR_ARG, "gpt2_forward: T = %d tokens exceed max_seq = %d (n_ctx = %d)", T, m->max_seq, m->cfg.n_ctx);
    gpt2_status st = gpt2__check_tokens(m, tokens, (size_t)B * T, "gpt2_forward: tokens");
    if (st) return st;
#if GPT2__CUDA
    if (m->backend == GPT2_BACKEND_CUDA) return gpt2__cuda_forward(m, tokens, B, T, logits);
#endif
    /* at most max_batch sequences and about 16k rows per pass (bounds the activations and row indices) */
    int per = 16384 / T > 1 ? 16384 / T : 1;
    if (per > m->max_batch) per = m->max_batch;
    gpt2__seq *seqs = (gpt2__seq *)gpt2__zalloc((size_t)per * sizeof *seqs);
    if (!seqs) return gpt2__fail(GPT2_ERR_OOM, "gpt2_forward: out of memory");
    for (int b0 = 0; b0 < B && !st; b0 += per) {
        int nb = B - b0 < per ? B - b0 : per;
        for (int i = 0; i < nb; i++) {
            seqs[i].slot = i; seqs[i].pos = 0; seqs[i].n_tok = T;
            seqs[i].tok = tokens + (size_t)(b0 + i) * T;
        }
        st = gpt2__cpu_run(m, seqs, nb, 1, logits + (size_t)b0 * T * m->cfg.n_vocab);
    }
    GPT2_FREE(seqs);
    return st;
}

/* Is tok one of the request's stop tokens (stop_token, stop_ids)? */
static int gpt2__stop_token(const gpt2_request *r, int tok) {
    if (tok == r->stop_token) return 1;
    for (int k = 0; k < r->n_stop_ids; k++) if (tok == r->stop_ids[k]) return 1;
    return 0;
}

/* Stop strings: the last bytes of a request's decoded output (as many as a match could still need, plus the newest
   token's), and the output offset of buf[0]. */
typedef struct gpt2__tail { char *buf; int n, cap; long base; } gpt2__tail;

/* Appends tok's bytes to the request's tail and looks for its stop strings in every place that ends within them
   (earlier places were looked at before). The first such place sets r->text_len and *found. */
static gpt2_status gpt2__stop_strings_feed(gpt2_request *r, int ri, int tok, gpt2__tail *t, int *found) {
    int longest = 0;
    for (int k = 0; k < r->n_stop_strings; k++) { int l = (int)strlen(r->stop_strings[k]); longest = l > longest ? l : longest; }
    const int nb = gpt2_decode(r->tokenizer, &tok, 1, NULL, 0);
    if (nb < 0) return gpt2__fail(GPT2_ERR_ARG, "request %d: token %d is not in the tokenizer given for its stop strings", ri, tok);
    if (t->n + nb > t->cap) {
        int cap = t->n + nb + 256;
        char *b = (char *)GPT2_MALLOC((size_t)cap);
        if (!b) return gpt2__fail(GPT2_ERR_OOM, "gpt2_generate: out of memory for stop strings");
        if (t->n) memcpy(b, t->buf, (size_t)t->n);
        GPT2_FREE(t->buf);
        t->buf = b; t->cap = cap;
    }
    gpt2_decode(r->tokenizer, &tok, 1, t->buf + t->n, (size_t)nb);
    const int old = t->n;
    t->n += nb;
    long at = -1;
    for (int k = 0; k < r->n_stop_strings; k++) {
        const char *str = r->stop_strings[k];
        const int l = (int)strlen(str);
        for (int p = old - l + 1 > 0 ? old - l + 1 : 0; p + l <= t->n; p++)
            if (!memcmp(t->buf + p, str, (size_t)l)) { if (at < 0 || t->base + p < at) at = t->base + p; break; }
    }
    if (at >= 0) { r->text_len = (int)at; *found = 1; return GPT2_OK; }
    const int keep = longest - 1 < t->n ? longest - 1 : t->n; /* a later match starts at most longest - 1 bytes back */
    memmove(t->buf, t->buf + t->n - keep, (size_t)keep);
    t->base += t->n - keep;
    t->n = keep;
    return GPT2_OK;
}

/* The controls of request i (gpt2_sampling's processors and warpers, stop ids and strings, logprobs): each value in
   range, each list where its count says, and within what the CUDA backend's sampler holds. */
static gpt2_status gpt2__check_controls(const gpt2_model *m, const gpt2_request *r, int i) {
    const gpt2_sampling *s = &r->sampling;
    const int V = m->cfg.n_vocab;
    struct { const char *name; float v; int ok; } f[] = {
        {"temperature", s->temperature, s->temperature == s->temperature},
        {"top_p", s->top_p, s->top_p == s->top_p},
        {"min_p", s->min_p, s->min_p >= 0.0f && s->min_p <= 1.0f},
        {"typical_p", s->typical_p, s->typical_p >= 0.0f},
        {"repetition_penalty", s->repetition_penalty, s->repetition_penalty >= 0.0f && s->repetition_penalty < INFINITY},
        {"presence_penalty", s->presence_penalty, s->presence_penalty > -INFINITY && s->presence_penalty < INFINITY},
        {"frequency_penalty", s->frequency_penalty, s->frequency_penalty > -INFINITY && s->frequency_penalty < INFINITY}};
    for (size_t k = 0; k < sizeof f / sizeof f[0]; k++)
        if (!f[k].ok) return gpt2__fail(GPT2_ERR_ARG, "request %d: sampling.%s = %g is out of range", i, f[k].name, (double)f[k].v);
    if (s->no_repeat_ngram < 0) return gpt2__fail(GPT2_ERR_ARG, "request %d: sampling.no_repeat_ngram = %d is negative", i, s->no_repeat_ngram);
    if (s->min_new_tokens < 0) return gpt2__fail(GPT2_ERR_ARG, "request %d: sampling.min_new_tokens = %d is negative", i, s->min_new_tokens);
    if (s->n_bias < 0 || (s->n_bias > 0 && (!s->bias_ids || !s->bias)))
        return gpt2__fail(GPT2_ERR_ARG, "request %d: sampling.n_bias = %d with bias_ids %s and bias %s", i, s->n_bias,
                          s->bias_ids ? "set" : "NULL", s->bias ? "set" : "NULL");
    for (int k = 0; k < s->n_bias; k++) {
        if (s->bias_ids[k] < 0 || s->bias_ids[k] >= V)
            return gpt2__fail(GPT2_ERR_ARG, "request %d: sampling.bias_ids[%d] = %d is not a token id (0..%d)", i, k, s->bias_ids[k], V - 1);
        if (!(s->bias[k] < INFINITY)) /* NaN and +inf; -inf bans */
            return gpt2__fail(GPT2_ERR_ARG, "request %d: sampling.bias[%d] = %g (a finite value, or -INFINITY to ban)", i, k, (double)s->bias[k]);
    }
    if (r->n_stop_ids < 0 || (r->n_stop_ids > 0 && !r->stop_ids))
        return gpt2__fail(GPT2_ERR_ARG, "request %d: n_stop_ids = %d with stop_ids %s", i, r->n_stop_ids, r->stop_ids ? "set" : "NULL");
    for (int k = 0; k < r->n_stop_ids; k++)
        if (r->stop_ids[k] < 0 || r->stop_ids[k] >= V)
            return gpt2__fail(GPT2_ERR_ARG, "request %d: stop_ids[%d] = %d is not a token id (0..%d)", i, k, r->stop_ids[k], V - 1);
    if (r->top_logprobs < 0 || r->top_logprobs > 20)
        return gpt2__fail(GPT2_ERR_ARG, "request %d: top_logprobs = %d is out of range (0..20)", i, r->top_logprobs);
    if (r->top_logprobs > 0 && r->max_new_tokens > 0 && (!r->out_top_ids || !r->out_top_logprobs))
        return gpt2__fail(GPT2_ERR_ARG, "request %d: top_logprobs = %d needs out_top_ids and out_top_logprobs", i, r->top_logprobs);
    if (r->n_stop_strings < 0 || (r->n_stop_strings > 0 && (!r->stop_strings || !r->tokenizer)))
        return gpt2__fail(GPT2_ERR_ARG, "request %d: n_stop_strings = %d needs stop_strings and the tokenizer", i, r->n_stop_strings);
    for (int k = 0; k < r->n_stop_strings; k++)
        if (!r->stop_strings[k] || !r->stop_strings[k][0] || strlen(r->stop_strings[k]) > 1024)
            return gpt2__fail(GPT2_ERR_ARG, "request %d: stop_strings[%d] is %s (1..1024 bytes)", i, k,
                              !r->stop_strings[k] ? "NULL" : !r->stop_strings[k][0] ? "empty" : "too long");
    if (m->backend == GPT2_BACKEND_CUDA) {
        if (s->typical_p > 0.0f && s->typical_p < 1.0f && V > (1 << 17))
            return gpt2__fail(GPT2_ERR_DEVICE, "request %d: sampling.typical_p on the CUDA backend needs at most 131072 ids "
                              "(the model has %d; the CPU backend runs it)", i, V);
        if (gpt2__processed(r) && 2 * s->n_bias + r->n_stop_ids + 1 > GPT2_CTL_INTS)
            return gpt2__fail(GPT2_ERR_ARG, "request %d: n_bias = %d and n_stop_ids = %d exceed the CUDA backend's lists "
                              "(2 n_bias + n_stop_ids < GPT2_CTL_INTS = %d; define it larger)", i, s->n_bias, r->n_stop_ids, GPT2_CTL_INTS);
        if (gpt2__processed(r) && m->max_seq > 2 * GPT2__PAGE)
            return gpt2__fail(GPT2_ERR_ARG, "request %d: the CUDA backend's processors take histories of at most %d tokens "
                              "(max_seq = %d)", i, 2 * GPT2__PAGE, m->max_seq);
    }
    return GPT2_OK;
}

/* ---- the incremental engine (gpt2_engine_*), and gpt2_generate as a loop over it */

#if defined(_WIN32)
typedef SRWLOCK gpt2__mutex;
static void gpt2__mutex_init(gpt2__mutex *x) { InitializeSRWLock(x); }
static void gpt2__mutex_lock(gpt2__mutex *x) { AcquireSRWLockExclusive(x); }
static void gpt2__mutex_unlock(gpt2__mutex *x) { ReleaseSRWLockExclusive(x); }
static void gpt2__mutex_free(gpt2__mutex *x) { (void)x; }
#else
#include <pthread.h>
typedef pthread_mutex_t gpt2__mutex;
static void gpt2__mutex_init(gpt2__mutex *x) { pthread_mutex_init(x, NULL); }
static void gpt2__mutex_lock(gpt2__mutex *x) { pthread_mutex_lock(x); }
static void gpt2__mutex_unlock(gpt2__mutex *x) { pthread_mutex_unlock(x); }
static void gpt2__mutex_free(gpt2__mutex *x) { pthread_mutex_destroy(x); }
#endif

/* A submitted request: the caller's struct (its buffers are written until it ends), its id, a cancel flag. */
typedef struct gpt2__entry { gpt2_request *r; long long id; int cancelled; } gpt2__entry;

/* A request in flight: which KV slot it holds (e: NULL when the slot is free), how much of it has been fed, and its
   speculation: kk, the most draft tokens it feeds next (+2 after a draft that stood whole, -1 after one that did
   not); miss, its drafts in a row of which no token stood; cool, steps left before it drafts again (2^miss - 1, at
   most 31); nk and kept, this step's draft tokens and how many stood. */
typedef struct gpt2__active { gpt2__entry *e; int fed, kk, miss, cool, nk, kept; } gpt2__active;

struct gpt2_engine {
    gpt2_model *m;
    gpt2_engine_callbacks cb;
    gpt2__mutex lock;            /* guards the queue, next_id and the entries' cancel flags */
    gpt2__entry **queue;         /* waiting requests [q_head, q_tail), in order of submission */
    int q_head, q_tail, q_cap;
    long long next_id;
    int in_flight;               /* requests in slots (read by gpt2_engine_counts under the lock) */
    /* the stepping thread's state */
    int S, budget, K, cap, lookahead;
    gpt2__active *slot;
    gpt2__seq *seqs, *ahead;     /* this step's rows, and a lookahead step's */
    int *next, *last, *draft;    /* sampled tokens of a step's rows; each slot's last token; each slot's drafts */
    gpt2__tail *tails;           /* each slot's stop-string tail */
    int active, ns, flying, hold, drafted, na, admit;
    gpt2_status failed;          /* a step's failure: the engine runs no more steps */
};

/* Speculation by prompt lookup: up to k tokens that followed the latest earlier occurrence of the last g tokens of
   request r's context (its prompt, then what it has generated), g = 3, else 2; into d, their count returned (0: none) */
static int gpt2__draft(const gpt2_request *r, int k, int *d) {
    const int L = r->prompt_len + r->n_out;
#define GPT2__CTX(i) ((i) < r->prompt_len ? r->prompt[i] : r->out[(i) - r->prompt_len])
    for (int g = 3; g >= 2; g--)
        for (int j = L - g - 1; j >= 0; j--) {
            int e = 0;
            while (e < g && GPT2__CTX(j + e) == GPT2__CTX(L - g + e)) e++;
            if (e < g) continue;
            int n = L - (j + g);
            if (n > k) n = k;
            for (int i = 0; i < n; i++) d[i] = GPT2__CTX(j + g + i);
            return n;
        }
#undef GPT2__CTX
    return 0;
}

/* Checks request r (i names it in messages) and resets its outputs. */
static gpt2_status gpt2__check_request(const gpt2_model *m, gpt2_request *r, long long i) {
    char what[64];
    if (!r) return gpt2__fail(GPT2_ERR_ARG, "request %lld is NULL", i);
    if (!r->prompt || r->prompt_len < 1)
        return gpt2__fail(GPT2_ERR_ARG, "request %lld: the prompt is empty (at least one token, e.g. 50256, is needed)", i);
    if (r->max_new_tokens < 0) return gpt2__fail(GPT2_ERR_ARG, "request %lld: max_new_tokens = %d is negative", i, r->max_new_tokens);
    if (r->max_new_tokens > 0 && !r->out) return gpt2__fail(GPT2_ERR_ARG, "request %lld: out is NULL", i);
    if ((long)r->prompt_len + r->max_new_tokens > m->max_seq)
        return gpt2__fail(GPT2_ERR_ARG, "request %lld: prompt_len %d + max_new_tokens %d exceeds max_seq = %d",
                          i, r->prompt_len, r->max_new_tokens, m->max_seq);
    snprintf(what, sizeof what, "request %lld: prompt", i);
    gpt2_status st = gpt2__check_tokens(m, r->prompt, (size_t)r->prompt_len, what);
    if (!st) st = gpt2__check_controls(m, r, (int)i);
    if (st) return st;
    r->n_out = 0;
    r->finish_reason = GPT2_FINISH_NONE;
    r->text_len = -1;
    return GPT2_OK;
}

GPT2_API gpt2_status gpt2_engine_create(gpt2_engine **out, gpt2_model *m, const gpt2_engine_callbacks *cb) {
    if (!out) return gpt2__fail(GPT2_ERR_ARG, "gpt2_engine_create: engine is NULL");
    *out = NULL;
    if (!m) return gpt2__fail(GPT2_ERR_ARG, "gpt2_engine_create: model is NULL");
    gpt2_engine *e = (gpt2_engine *)gpt2__zalloc(sizeof *e);
    if (!e) return gpt2__fail(GPT2_ERR_OOM, "gpt2_engine_create: out of memory");
    e->m = m;
    if (cb) e->cb = *cb;
    gpt2__mutex_init(&e->lock);
    e->S = m->max_batch;
    e->budget = m->prefill_tokens > 0 ? m->prefill_tokens : 2048;
    e->K = m->spec > 0 ? m->spec : 0;
    e->cap = e->S + (e->K ? GPT2__SPEC_ROWS : 0); /* a step's entries at most */
    e->slot = (gpt2__active *)gpt2__zalloc((size_t)e->S * sizeof *e->slot);
    e->seqs = (gpt2__seq *)gpt2__zalloc((size_t)e->cap * sizeof *e->seqs);
    e->ahead = (gpt2__seq *)gpt2__zalloc((size_t)e->cap * sizeof *e->ahead);
    e->next = (int *)gpt2__alloc((size_t)e->cap * sizeof(int));
    e->last = (int *)gpt2__alloc((size_t)e->S * sizeof(int));
    e->draft = e->K ? (int *)gpt2__alloc((size_t)e->S * e->K * sizeof(int)) : NULL;
    e->tails = (gpt2__tail *)gpt2__zalloc((size_t)e->S * sizeof *e->tails);
    e->q_cap = 64;
    e->queue = (gpt2__entry **)gpt2__alloc((size_t)e->q_cap * sizeof *e->queue);
    if (!e->slot || !e->seqs || !e->ahead || !e->next || !e->last || (e->K && !e->draft) || !e->tails || !e->queue) {
        gpt2_engine_free(e);
        return gpt2__fail(GPT2_ERR_OOM, "gpt2_engine_create: out of memory");
    }
#if GPT2__CUDA
    e->lookahead = m->backend == GPT2_BACKEND_CUDA && gpt2__cuda_lookahead(m);
#endif
    *out = e;
    return GPT2_OK;
}

GPT2_API void gpt2_engine_free(gpt2_engine *e) {
    if (!e) return;
#if GPT2__CUDA
    if (e->m->backend == GPT2_BACKEND_CUDA) gpt2__cuda_drain(e->m);
#endif
    e->m->engine_work = 0;
    for (int s = 0; s < e->S && e->slot; s++) GPT2_FREE(e->slot[s].e);
    for (int i = e->q_head; i < e->q_tail; i++) GPT2_FREE(e->queue[i]);
    for (int s = 0; s < e->S && e->tails; s++) GPT2_FREE(e->tails[s].buf);
    gpt2__mutex_free(&e->lock);
    GPT2_FREE(e->slot); GPT2_FREE(e->seqs); GPT2_FREE(e->ahead); GPT2_FREE(e->next); GPT2_FREE(e->last);
    GPT2_FREE(e->draft); GPT2_FREE(e->tails); GPT2_FREE(e->queue);
    GPT2_FREE(e);
}

GPT2_API long long gpt2_engine_submit(gpt2_engine *e, gpt2_request *r) {
    if (!e) { gpt2__fail(GPT2_ERR_ARG, "gpt2_engine_submit: engine is NULL"); return -1; }
    gpt2__mutex_lock(&e->lock);
    const long long id = e->next_id;
    gpt2_status st = gpt2__check_request(e->m, r, id);
    gpt2__entry *x = st ? NULL : (gpt2__entry *)gpt2__zalloc(sizeof *x);
    if (!st && !x) st = gpt2__fail(GPT2_ERR_OOM, "gpt2_engine_submit: out of memory");
    if (!st && e->q_tail == e->q_cap) { /* room at the end: move the waiting entries down, else grow */
        if (e->q_head > 0) {
            memmove(e->queue, e->queue + e->q_head, (size_t)(e->q_tail - e->q_head) * sizeof *e->queue);
            e->q_tail -= e->q_head;
            e->q_head = 0;
        } else {
            gpt2__entry **q = (gpt2__entry **)GPT2_MALLOC((size_t)e->q_cap * 2 * sizeof *q);
            if (!q) st = gpt2__fail(GPT2_ERR_OOM, "gpt2_engine_submit: out of memory");
            else {
                memcpy(q, e->queue, (size_t)e->q_tail * sizeof *q);
                GPT2_FREE(e->queue);
                e->queue = q;
                e->q_cap *= 2;
            }
        }
    }
    if (!st) {
        x->r = r; x->id = id;
        e->queue[e->q_tail++] = x;
        e->next_id++;
    } else GPT2_FREE(x);
    gpt2__mutex_unlock(&e->lock);
    return st ? -1 : id;
}

GPT2_API int gpt2_engine_cancel(gpt2_engine *e, long long id) {
    int found = 0;
    if (!e) return 0;
    gpt2__mutex_lock(&e->lock);
    for (int i = e->q_head; i < e->q_tail && !found; i++)
        if (e->queue[i]->id == id) found = e->queue[i]->cancelled = 1;
    for (int s = 0; s < e->S && !found; s++)
        if (e->slot[s].e && e->slot[s].e->id == id) found = e->slot[s].e->cancelled = 1;
    gpt2__mutex_unlock(&e->lock);
    return found;
}

GPT2_API void gpt2_engine_counts(gpt2_engine *e, int *queued, int *in_flight) {
    int q = 0, f = 0;
    if (e) {
        gpt2__mutex_lock(&e->lock);
        q = e->q_tail - e->q_head;
        f = e->in_flight;
        gpt2__mutex_unlock(&e->lock);
    }
    if (queued) *queued = q;
    if (in_flight) *in_flight = f;
}

/* Ends the request in slot s (or, slot -1, the waiting entry x) with reason: on_end, then the entry is freed. */
static void gpt2__engine_end(gpt2_engine *e, int s, gpt2__entry *x, int reason) {
    x->r->finish_reason = reason;
#if GPT2__CUDA
    /* a step in flight (lookahead) may hold a row of it: that row no longer writes into the request */
    if (e->m->backend == GPT2_BACKEND_CUDA) gpt2__cuda_forget(e->m, x->r);
#endif
    if (s >= 0) {
        gpt2__mutex_lock(&e->lock);
        e->slot[s].e = NULL;
        e->in_flight--;
        gpt2__mutex_unlock(&e->lock);
        e->active--;
    }
    if (e->cb.on_end) e->cb.on_end(e->cb.user, x->id, x->r);
    GPT2_FREE(x);
}

/* One step of continuous batching over max_batch KV slots: requests wait in order of submission; each step feeds
   every active slot either its next prompt chunk or its last sampled token; a finished request frees its slot at
   once for the next waiting one. Prompt tokens per step are capped so decode steps stay short.
   Requests admitted into an idle engine (none decoding) hold their decode rows until every admitted
   prompt is fed: no one waits on those steps, and the decode steps that follow carry every row (pure decode steps
   replay a CUDA graph and run in parts; a step that also feeds prompts does neither).
   Speculation (m->spec > 0, at most GPT2__SPEC_ROWS / 2 requests decoding and no prompt being fed): a request whose
   context repeats its last tokens (gpt2__draft) also feeds the tokens that followed there, each a decode row of its
   own at the next position, sampled as the draw it would be. Row j's token stands only if every row before it stood
   and the token it fed is the one sampled before it: then its logits are those a step of its own would have computed
   (a row computes the same in any batch), so the output is the same, token for token, as without speculation.
   A request's tokens depend only on its own prompt, parameters and seed: never on what else is in flight, or when
   it arrived. */
GPT2_API gpt2_status gpt2_engine_step(gpt2_engine *e, int *busy) {
    if (busy) *busy = 0;
    if (!e) return gpt2__fail(GPT2_ERR_ARG, "gpt2_engine_step: engine is NULL");
    if (e->failed) return gpt2__fail(e->failed, "gpt2_engine_step: an earlier step failed; free the engine");
    gpt2_model *m = e->m;
    const int S = e->S, K = e->K, budget = e->budget;
    gpt2__active *slot = e->slot;
    int *next = e->next, *last = e->last, *draft = e->draft;
    gpt2_status st = GPT2_OK;
    /* cancelled requests end first (a cancelled one in a lookahead step leaves a dead row, as a stopped one does) */
    for (int s = 0; s < S; s++) {
        gpt2__mutex_lock(&e->lock);
        gpt2__entry *x = slot[s].e && slot[s].e->cancelled ? slot[s].e : NULL;
        gpt2__mutex_unlock(&e->lock);
        if (x) gpt2__engine_end(e, s, x, GPT2_FINISH_CANCELLED);
    }
    /* admit waiting requests into free slots (requests with nothing to generate, or cancelled, finish at once).
       Slots are refilled in groups of at least S/16 (or whatever is left to wait): a step that feeds
       prompts cannot replay the decode graph, so refilling one slot per step would make most steps
       slow ones, while a few idle slots for a few steps cost little. */
    for (;;) {
        gpt2__mutex_lock(&e->lock);
        gpt2__entry *x = e->q_head < e->q_tail && (e->queue[e->q_head]->r->max_new_tokens == 0 || e->queue[e->q_head]->cancelled)
                       ? e->queue[e->q_head++] : NULL;
        gpt2__mutex_unlock(&e->lock);
        if (!x) break;
        gpt2__engine_end(e, -1, x, x->cancelled ? GPT2_FINISH_CANCELLED : GPT2_FINISH_LENGTH);
    }
    gpt2__mutex_lock(&e->lock);
    const int waiting = e->q_tail - e->q_head;
    gpt2__mutex_unlock(&e->lock);
    int group = S / 16 > 1 ? S / 16 : 1;
    if (waiting < group) group = waiting;
    e->admit = waiting > 0 && (S - e->active >= group || !e->active);
    if (!e->flying) {
        if (e->admit && !e->active) e->hold = !m->no_hold; /* an idle engine: prompts first (the rows' outputs do not change) */
        for (int s = 0; s < S && e->admit; s++) {
            if (slot[s].e) continue;
            gpt2__mutex_lock(&e->lock);
            gpt2__entry *x = e->q_head < e->q_tail ? e->queue[e->q_head] : NULL;
            if (x && (x->r->max_new_tokens == 0 || x->cancelled)) x = NULL; /* left for the next step's sweep */
            if (x) { e->q_head++; slot[s].e = x; e->in_flight++; }
            gpt2__mutex_unlock(&e->lock);
            if (!x) break;
            slot[s].fed = 0; slot[s].miss = slot[s].cool = slot[s].nk = 0;
            e->tails[s].n = 0; e->tails[s].base = 0;
            slot[s].kk = K < 4 ? K : 4;
            e->active++;
        }
        if (!e->active) {
#if GPT2__CUDA
            if (m->backend == GPT2_BACKEND_CUDA) gpt2__cuda_drain(m);
#endif
            m->engine_work = 0;
            gpt2__mutex_lock(&e->lock);
            if (busy) *busy = e->q_head < e->q_tail;
            gpt2__mutex_unlock(&e->lock);
            return GPT2_OK;
        }
        gpt2__seq *seqs = e->seqs;
        int ns = 0, prompt_tokens = 0;
        if (e->hold) {
            e->hold = 0;
            for (int s = 0; s < S && !e->hold; s++) e->hold = slot[s].e && slot[s].fed < slot[s].e->r->prompt_len;
        }
        /* speculation: only in a step of few decode rows and no prompt rows; room: the draft rows it may add */
        int room = K && !e->hold ? GPT2__SPEC_ROWS : 0;
        for (int s = 0; s < S && room > 0; s++)
            if (slot[s].e) room = slot[s].fed < slot[s].e->r->prompt_len ? 0 : room - 1;
        if (room < GPT2__SPEC_ROWS / 2) room = 0;
        e->drafted = 0;
        for (int s = 0; s < S; s++) {
            if (!slot[s].e) continue;
            gpt2_request *r = slot[s].e->r;
            if (e->hold && slot[s].fed >= r->prompt_len) continue; /* its decode waits for the others' prompts */
            gpt2__seq *q = &seqs[ns];
            q->slot = s;
            q->sampling = r->sampling;
            q->draw = (uint64_t)r->n_out;
            q->req = r; q->extra = NULL; q->n_extra = 0;
            if (slot[s].fed < r->prompt_len) {
                int chunk = r->prompt_len - slot[s].fed;
                if (prompt_tokens > 0 && prompt_tokens + chunk > budget) continue; /* next step */
                if (chunk > budget) chunk = budget;
                q->pos = slot[s].fed; q->n_tok = chunk; q->tok = r->prompt + slot[s].fed;
                q->sample = slot[s].fed + chunk == r->prompt_len;
                q->prompt = 1;
                prompt_tokens += chunk;
            } else {
                q->pos = slot[s].fed; q->n_tok = 1; q->tok = &last[s]; q->sample = 1; q->prompt = 0;
                int k = slot[s].kk < room ? slot[s].kk : room, nk = 0;
                if (k > r->max_new_tokens - r->n_out - 1) k = r->max_new_tokens - r->n_out - 1;
                if (slot[s].cool > 0) slot[s].cool--;
                else if (k > 0 && r->sampling.no_repeat_ngram <= 0) nk = gpt2__draft(r, k, draft + (size_t)s * K);
                /* (no drafts under no_repeat_ngram: prompt lookup proposes exactly the n-grams it bans) */
                slot[s].nk = nk;
                slot[s].kept = 0;
                for (int j = 1; j <= nk; j++) {
                    gpt2__seq *d = &seqs[ns + j];
                    *d = *q;
                    d->pos = q->pos + j; d->tok = draft + (size_t)s * K + j - 1; d->draw = q->draw + (uint64_t)j; d->spec = j;
                    d->extra = draft + (size_t)s * K; d->n_extra = j;
                }
                room -= nk;
                e->drafted += nk;
                m->spec_rows += nk;
                ns += nk;
            }
            q->spec = 0;
            ns++;
        }
        e->ns = ns;
#if GPT2__CUDA
        if (m->backend == GPT2_BACKEND_CUDA) st = gpt2__cuda_launch(m, seqs, ns, 0);
        else
#endif
        st = gpt2__cpu_step(m, seqs, ns, next);
        if (st) return e->failed = st;
        e->flying = 1;
    }
    gpt2__seq *seqs = e->seqs;
    const int ns = e->ns;
    /* Lookahead (CUDA): while the device runs a decode step after which no request is due to end and no waiting
       request would be admitted, the next decode step goes out at once, its tokens read on the device from this
       step's picks; the host takes in this step's tokens meanwhile. A request that this step ends anyway (a stop,
       the callback, a cancel) leaves a dead row in the next: that row's token is dropped, and its slot's cache past
       the request's end is never read. Each row computes what it would in a step of its own. */
    int na = 0;
    if (e->lookahead && !e->admit && !e->drafted) {
        na = ns;
        for (int i = 0; i < ns && na; i++) {
            const gpt2__seq *q = &seqs[i];
            const gpt2_request *r = slot[q->slot].e ? slot[q->slot].e->r : NULL;
            if (!r || q->prompt || q->n_tok != 1 || !q->sample || r->n_out + 2 > r->max_new_tokens) na = 0;
            /* no lookahead where the next step would draft (as far as the tokens known so far tell) */
            int d1;
            if (na && K && ns <= GPT2__SPEC_ROWS / 2 && !slot[q->slot].cool && gpt2__draft(r, 1, &d1)) na = 0;
        }
        for (int i = 0; i < na; i++) {
            e->ahead[i] = seqs[i];
            e->ahead[i].pos++;
            e->ahead[i].draw++;
            e->ahead[i].tok = NULL;
        }
#if GPT2__CUDA
        if (na && (st = gpt2__cuda_launch(m, e->ahead, na, 1))) return e->failed = st;
#endif
    }
#if GPT2__CUDA
    if (m->backend == GPT2_BACKEND_CUDA && (st = gpt2__cuda_collect(m, next))) return e->failed = st;
#endif
    for (int i = 0; i < ns && !st; i++) {
        int s = seqs[i].slot;
        if (!slot[s].e) continue; /* a dead row of a lookahead step, or a draft after its request ended */
        if (seqs[i].spec) {
            /* a draft token's row stands if every row before it stood and it fed the token sampled before it */
            if (seqs[i].pos != slot[s].fed || *seqs[i].tok != last[s]) continue;
            slot[s].kept++;
            m->spec_kept++;
        }
        slot[s].fed += seqs[i].n_tok;
        if (!seqs[i].sample) continue;
        gpt2__entry *x = slot[s].e;
        gpt2_request *r = x->r;
        int tok = next[i];
        r->out[r->n_out++] = tok;
        last[s] = tok;
        int stop = e->cb.on_token && e->cb.on_token(e->cb.user, x->id, tok), reason = gpt2__stop_token(r, tok) ? GPT2_FINISH_STOP : 0;
        if (!reason && r->n_stop_strings > 0) {
            int found = 0;
            if ((st = gpt2__stop_strings_feed(r, (int)x->id, tok, &e->tails[s], &found))) break;
            if (found) reason = GPT2_FINISH_STOP;
        }
        if (!reason) reason = stop ? GPT2_FINISH_CALLBACK : r->n_out >= r->max_new_tokens ? GPT2_FINISH_LENGTH : 0;
        if (reason) gpt2__engine_end(e, s, x, reason);
    }
    if (st) return e->failed = st;
    /* each request that drafted: its next draft's length, and its pause after drafts of which nothing stood */
    for (int i = 0; e->drafted && i < ns; i++) {
        gpt2__active *a = &slot[seqs[i].slot];
        if (seqs[i].spec != 1 || !a->e) continue;
        a->kk = a->kept == a->nk ? (a->kk + 2 < K ? a->kk + 2 : K) : a->kk > 1 ? a->kk - 1 : 1;
        a->miss = a->kept ? 0 : a->miss + 1;
        a->cool = a->kept ? 0 : (1 << (a->miss < 5 ? a->miss : 5)) - 1;
    }
    if (na) { gpt2__seq *t = e->seqs; e->seqs = e->ahead; e->ahead = t; e->ns = na; }
    else e->flying = 0;
    m->engine_work = e->flying || e->active > 0;
    if (busy) {
        gpt2__mutex_lock(&e->lock);
        *busy = e->flying || e->active > 0 || e->q_head < e->q_tail;
        gpt2__mutex_unlock(&e->lock);
    }
    return GPT2_OK;
}

/* gpt2_generate: an engine over the requests, stepped until every one has ended */
typedef struct gpt2__generate_ctx { gpt2_token_fn on_token; void *user; } gpt2__generate_ctx;
static int gpt2__generate_token(void *user, long long id, int token) {
    const gpt2__generate_ctx *c = (const gpt2__generate_ctx *)user;
    return c->on_token && c->on_token(c->user, (int)id, token);
}

GPT2_API gpt2_status gpt2_generate(gpt2_model *m, gpt2_request *reqs, int n, gpt2_token_fn on_token, void *user) {
    if (!m) return gpt2__fail(GPT2_ERR_ARG, "gpt2_generate: model is NULL");
    if (gpt2__no_engine_work(m, "gpt2_generate")) return GPT2_ERR_ARG;
    if (n < 0 || (n > 0 && !reqs)) return gpt2__fail(GPT2_ERR_ARG, "gpt2_generate: %d requests at %p", n, (void *)reqs);
    for (int i = 0; i < n; i++) { /* every request checked before any runs */
        gpt2_status st = gpt2__check_request(m, &reqs[i], i);
        if (st) return st;
    }
    gpt2__generate_ctx c = {on_token, user};
    gpt2_engine_callbacks cb = {gpt2__generate_token, NULL, &c};
    gpt2_engine *e;
    gpt2_status st = gpt2_engine_create(&e, m, &cb);
    for (int i = 0; i < n && !st; i++)
        if (gpt2_engine_submit(e, &reqs[i]) < 0) st = GPT2_ERR_OOM; /* checked above: only memory can fail */
    int busy = 1;
    while (!st && busy) st = gpt2_engine_step(e, &busy);
    gpt2_engine_free(e);
    return st;
}

/* ---- scoring (gpt2_score) */


/* Row r of logits [n][V]: lp[r] = logits[r][targets[r]] - log(sum over v of exp(logits[r][v])), the sum in double from
   the row's largest logit, and rank[r] = the entries v with logits[r][v] > logits[r][targets[r]]. Each row alone, in
   vocabulary order, so a row's results have the same bits whatever rows are reduced beside it. The reference for the
   CUDA backend's reduction. */
static void gpt2__score_rows(const float *logits, int n, int V, const int *targets, double *lp, int *rank) {
    GPT2__OMP(omp parallel for schedule(static) if ((double)n * V > 1e5))
    for (int r = 0; r < n; r++) {
        const float *l = logits + (size_t)r * V, lt = l[targets[r]];
        float mx = -INFINITY;
        for (int v = 0; v < V; v++)
            if (l[v] > mx) mx = l[v];
        double sum = 0.0;
        int above = 0;
        for (int v = 0; v < V; v++) {
            sum += exp((double)l[v] - mx);
            above += l[v] > lt;
        }
        lp[r] = (double)lt - (mx + log(sum));
        rank[r] = above;
    }
}

/* A backend's part of gpt2_score: feed seqs as a step feeds prompts (each sequence's tokens at positions pos.. of its
   KV slot, K and V stored, the positions continuing what the slot holds), then, when targets is set, reduce the
   logits of every fed row r (rows in the order of the concatenation) to lp[r] and rank[r] as gpt2__score_rows does.
   targets NULL: the rows only condition later ones and nothing comes back. At most GPT2__SCORE_ROWS sequences; at
   most GPT2__SCORE_ROWS rows with targets, GPT2__SCORE_FEED without. */
typedef gpt2_status (*gpt2__score_fn)(gpt2_model *m, const gpt2__seq *seqs, int n, const int *targets, double *lp,
                                      int *rank, float *logits);

/* The CPU backend: gpt2__cpu_run over the rows (logits: GPT2__SCORE_ROWS x n_vocab floats of scratch), then the
   reduction on the host. Context rows run without all_rows: their last layer is skipped but for one row a sequence. */
static gpt2_status gpt2__cpu_score(gpt2_model *m, const gpt2__seq *seqs, int n, const int *targets, double *lp, int *rank,
                                   float *logits) {
    gpt2_status st = gpt2__cpu_run(m, seqs, n, targets != NULL, logits);
    if (st || !targets) return st;
    int rows = 0;
    for (int s = 0; s < n; s++) rows += seqs[s].n_tok;
    gpt2__score_rows(logits, rows, m->cfg.n_vocab, targets, lp, rank);
    return GPT2_OK;
}

static gpt2_status gpt2__score_check(const gpt2_model *m, const gpt2_score_request *reqs, int n) {
    if (!m) return gpt2__fail(GPT2_ERR_ARG, "gpt2_score: model is NULL");
    if (n < 0 || (n > 0 && !reqs)) return gpt2__fail(GPT2_ERR_ARG, "gpt2_score: %d requests at %p", n, (const void *)reqs);
    const int L = m->max_seq;
    if (L < 2 && n > 0)
        return gpt2__fail(GPT2_ERR_ARG, "gpt2_score: max_seq = %d: a window must hold a token and the one it predicts", L);
    for (int i = 0; i < n; i++) {
        const gpt2_score_request *r = &reqs[i];
        char what[64];
        if (r->n_tokens < 1)
            return gpt2__fail(GPT2_ERR_ARG, "gpt2_score: reqs[%d].n_tokens = %d: a text needs at least one token (prepend "
                              "<|endoftext|> to score from the start of an empty text)", i, r->n_tokens);
        if (!r->tokens) return gpt2__fail(GPT2_ERR_ARG, "gpt2_score: reqs[%d].tokens is NULL (n_tokens = %d)", i, r->n_tokens);
        if (r->n_context < 1 || r->n_context > r->n_tokens)
            return gpt2__fail(GPT2_ERR_ARG, "gpt2_score: reqs[%d].n_context = %d is out of range (1..n_tokens = %d: the first "
                              "token has no prediction)", i, r->n_context, r->n_tokens);
        if (r->stride < 0 || r->stride > L)
            return gpt2__fail(GPT2_ERR_ARG, "gpt2_score: reqs[%d].stride = %d is out of range (1..max_seq = %d; 0: %d)", i,
                              r->stride, L, L / 2);
        snprintf(what, sizeof what, "gpt2_score: reqs[%d].tokens", i);
        gpt2_status st = gpt2__check_tokens(m, r->tokens, (size_t)r->n_tokens, what);
        if (st) return st;
    }
    return GPT2_OK;
}

/* Windows go through the KV slots as prompts do: every step, free slots take the next windows; a step feeds either
   context rows (while any window has some left: up to GPT2__SCORE_FEED of them) or scored rows (up to
   GPT2__SCORE_ROWS), the oldest windows first, a window's rows split across steps where the budget ends (its
   positions continue in its slot). So a request's tokens are reduced in order, and its sum_logprob adds them in
   order, whatever else the call holds. Memory, whatever the number and length of the texts (CPU backend): the
   logits of GPT2__SCORE_ROWS rows (x n_vocab x 4 bytes: 51.5 MB at GPT-2's 50257) plus gpt2__cpu_run's activations
   for GPT2__SCORE_FEED rows (x (6 n_embd + n_inner) x 4 bytes: 31.5 MB at 124M, 65.5 MB at 1558M) plus 16 bytes a row
   and the KV cache the model already holds. */
GPT2_API gpt2_status gpt2_score(gpt2_model *m, gpt2_score_request *reqs, int n) {
    gpt2_status st = gpt2__score_check(m, reqs, n);
    if (st || (st = gpt2__no_engine_work(m, "gpt2_score"))) return st;
    for (int i = 0; i < n; i++) { reqs[i].sum_logprob = 0.0; reqs[i].n_scored = 0; }
    gpt2__score_fn feed = gpt2__cpu_score;
#if GPT2__CUDA
    if (m->backend == GPT2_BACKEND_CUDA) return gpt2__cuda_score(m, reqs, n);
#endif
    const int L = m->max_seq, V = m->cfg.n_vocab, R = GPT2__SCORE_ROWS;
    const int S = m->max_batch < R ? m->max_batch : R;
    gpt2__score_win *win = (gpt2__score_win *)gpt2__alloc((size_t)S * sizeof *win);
    gpt2__seq *seqs = (gpt2__seq *)gpt2__zalloc((size_t)S * sizeof *seqs);
    int *age = (int *)gpt2__alloc((size_t)S * sizeof(int)), *in_seq = (int *)gpt2__alloc((size_t)S * sizeof(int));
    int *targets = (int *)gpt2__alloc((size_t)R * sizeof(int)), *rank = (int *)gpt2__alloc((size_t)R * sizeof(int));
    double *lp = (double *)gpt2__alloc((size_t)R * sizeof(double));
    float *logits = (float *)gpt2__alloc((size_t)R * V * sizeof(float));
    if (!win || !seqs || !age || !in_seq || !targets || !rank || !lp || !logits)
        st = gpt2__fail(GPT2_ERR_OOM, "gpt2_score: cannot allocate %zu MB of logits for %d rows", (size_t)R * V * 4 >> 20, R);
    gpt2__score_cursor cur = {0, 0};
    int n_act = 0, more = 1; /* age[0..n_act): the active windows' slots, oldest first */
    for (int s = 0; s < S && !st; s++) win[s].slot = -1;
    while (!st) {
        for (int s = 0; s < S && more; s++) {
            if (win[s].slot >= 0) continue;
            more = gpt2__score_next(reqs, n, L, &cur, &win[s]);
            if (more) { win[s].slot = s; age[n_act++] = s; }
        }
        if (!n_act) break;
        int ctx = 0, ns = 0, rows = 0;
        for (int a = 0; a < n_act && !ctx; a++) ctx = win[age[a]].fed < win[age[a]].first;
        const int budget = ctx ? GPT2__SCORE_FEED : R;
        for (int a = 0; a < n_act && rows < budget; a++) {
            gpt2__score_win *w = &win[age[a]];
            const int end = ctx ? w->first : w->n_in, take = end - w->fed < budget - rows ? end - w->fed : budget - rows;
            if (take <= 0) continue;
            const int *tok = reqs[w->req].tokens + w->s;
            gpt2__seq *q = &seqs[ns];
            q->slot = w->slot; q->pos = w->fed; q->n_tok = take; q->tok = tok + w->fed; q->prompt = 1;
            for (int p = 0; p < take && !ctx; p++) targets[rows + p] = tok[w->fed + p + 1];
            in_seq[ns++] = age[a];
            rows += take;
        }
        st = feed(m, seqs, ns, ctx ? NULL : targets, lp, rank, logits);
        if (st) break;
        for (int i = 0, row = 0; i < ns; i++) {
            gpt2__score_win *w = &win[in_seq[i]];
            gpt2_score_request *r = &reqs[w->req];
            for (int p = 0; p < seqs[i].n_tok && !ctx; p++, row++) {
                const int o = w->s + w->fed + p + 1 - r->n_context; /* the scored token's index in the outputs */
                if (r->logprobs) r->logprobs[o] = (float)lp[row];
                if (r->ranks) r->ranks[o] = rank[row];
                r->sum_logprob += lp[row];
                r->n_scored++;
            }
            w->fed += seqs[i].n_tok;
        }
        int kept = 0; /* finished windows free their slots */
        for (int a = 0; a < n_act; a++) {
            gpt2__score_win *w = &win[age[a]];
            if (w->fed == w->n_in) w->slot = -1;
            else age[kept++] = age[a];
        }
        n_act = kept;
    }
    GPT2_FREE(win); GPT2_FREE(seqs); GPT2_FREE(age); GPT2_FREE(in_seq);
    GPT2_FREE(targets); GPT2_FREE(rank); GPT2_FREE(lp); GPT2_FREE(logits);
    return st;
}

/* == [GPT2:CUDA] == CUDA backend: overview, error checks ======================================================== */

#if GPT2__CUDA

#include <cuda.h> /* green contexts' types (CUDA 12.5+); the calls go through the runtime's driver entry points (no -lcuda) */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cublasLt.h>

/* How the GPU holds a model (T is the activation/weight type: float, __half or __nv_bfloat16):
   - weights in T, matrices transposed at upload to [out][in] so every GEMM is cuBLASLt's "TN" form
     (D[out][rows] = W^T x X, K contiguous for both operands); biases in T; layer-norm weights fp32
   - residual stream x fp32 [rows][C]; the other activations in T; logits fp32
   - KV cache [n_layer][max_batch][n_head][max_seq][head_dim] in T for K and for V: one head of one
     sequence is a contiguous [pos][head_dim] block, so decode attention reads it with 16-byte loads
     that are coalesced across lanes
   - a step's rows: prompt rows first, then decode rows; each kind runs its linear layers with one class of
     cuBLASLt algorithm (gpt2__linear, gpt2__gemm_run), so a row's result never depends on the batch it shares;
     decode rows of the two projections into the residual split K into a fixed number of fp32 pieces per shape
     (gpt2__decode_pieces), which the residual + layer-norm kernel adds in order
   - attention: prompt chunks go to a flash-style kernel in 64-row tiles (head size 32/64/128, sm_80+: on the
     tensor cores in F16/BF16, on the CUDA cores in F32; longest tiles of every head first while the step's K/V
     fit in half of L2; it stores its tile's K and V and reads the keys fed in the same step from qkv), every other row
     to a row kernel over the sequence in fixed 256-key spans (which also stores a decode row's own K
     and V), again whatever the batch: with head size 64 in F16/BF16 on the tensor cores, in 32-key chunks
     merged in a fixed order, by gpt2__attn_mma_kernel (few rows) or gpt2__attn_stream_kernel (many), the same
     bits; else gpt2__attn_kernel; only without the tiled kernel (other head sizes, GPUs before sm_80) does a
     separate pass store K and V first
   - a step's per-row and per-sequence inputs (tokens, positions, slots, sampling parameters) live in one
     device blob, copied from pinned memory (two staging blobs in turn); the pure-decode step is a CUDA graph
     replayed per batch size; only the sampled ids come back to the host, and gpt2_generate launches the next
     decode step before reading them (its tokens are read on the GPU: gpt2__cuda_launch with feed)
   - decode products of at most 16 rows run on gpt2__few_row_kernel (F32: gpt2__few_row32_kernel) where
     gpt2__few_row_check found it to give cuBLASLt's bits (it adds K in 16-wide MMA slices in order, as the pinned
     algorithm does; F32's in one fused multiply-add chain, as its pinned class without a split of K does), so
     batch invariance holds either way; decode rows take their activation from gpt2__act (bias into T, then the activation),
     never from cuBLASLt's epilogue, whose rounding no formula reproduced (gpt2__decode_lt)
   - on sm_90+ the kernels that follow a product start as programmatic dependent launches (gpt2__launch,
     gpt2__pdl_wait), and products, residual + LN and decode attention let the next kernel launch as soon as
     they start, before their own wait (gpt2__pdl_enter), so a batch-1 step's kernels launch as far ahead as
     the SMs have room: a few-row product streams its weights while the kernels before it finish; every load that does not
     depend on the kernels before (weights, LN gain and shift, biases, a few rows' cached K/V into shared
     memory or L2) is issued before the wait
   - a step of at most 2 decode rows (gpt2__ln_fold_use) runs no separate residual + LN inside a layer: the
     product that reads it (qkv, the MLP's first) computes it in 256-thread blocks that play
     gpt2__residual_ln_kernel's threads in its order (gpt2__ln_fold_row), so the bits are the same
   - a pure decode step of at least 2 x 256 rows runs as two parts, each the whole forward of its rows on its
     own stream (gpt2__cuda_parts), so one part's kernels fill the other's tails; the same bits. Where the rows'
     mean context is long, it is a green step: each part's decode attention runs on SMs of its own (CUDA green
     contexts, gpt2__green_make) beside the other part's products
   Words: few-row (a decode product of at most 16 rows on our own kernel), ln_fold (residual + layer norm inside
   the product that reads it; lnf is only the final layer norm), split-K pieces (a product's K in fp32 partial
   sums), span (one decode-attention block's share of a row's keys), parts and green steps (above).
   docs/ARCHITECTURE.md lists every path with when it runs, its switch, its measured gain and the test that pins it. */

/* Every CUDA and cuBLASLt call is checked; a failure returns GPT2_ERR_DEVICE with the call, file and line. */
#define GPT2__CU(call)                                                                                     \
    do {                                                                                                   \
        cudaError_t e_ = (call);                                                                           \
        if (e_ != cudaSuccess)                                                                             \
            return gpt2__fail(GPT2_ERR_DEVICE, "%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
    } while (0)
#define GPT2__LT(call)                                                                                     \
    do {                                                                                                   \
        cublasStatus_t s_ = (call);                                                                        \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                                   \
            return gpt2__fail(GPT2_ERR_DEVICE, "%s:%d: %s: %s", __FILE__, __LINE__, #call, cublasLtGetStatusString(s_)); \
    } while (0)
/* after each kernel launch */
#define GPT2__LAUNCHED() GPT2__CU(cudaGetLastError())

/* the oldest GPU this build runs on: the lowest entry of nvcc's -gencode list */
#ifdef __CUDA_ARCH_LIST__
static constexpr int gpt2__arch_list[] = {__CUDA_ARCH_LIST__};
static constexpr int gpt2__min_arch_of(int i, int n) {
    return i == n - 1 ? gpt2__arch_list[i]
                      : (gpt2__arch_list[i] < gpt2__min_arch_of(i + 1, n) ? gpt2__arch_list[i] : gpt2__min_arch_of(i + 1, n));
}
#define GPT2__MIN_ARCH (gpt2__min_arch_of(0, (int)(sizeof gpt2__arch_list / sizeof gpt2__arch_list[0])) / 10)
#else
#define GPT2__MIN_ARCH 70
#endif

/* == [GPT2:CUDA_PRIM] == GPU primitives: element types, PDL, cp.async, TMA, mma / ldmatrix / wgmma wrappers ===== */

/* a linear layer's epilogue: none, + bias, + bias then the model's activation (the MLP's first product) */
enum { GPT2__EPI_NONE = 0, GPT2__EPI_BIAS = 1, GPT2__EPI_BIAS_ACT = 2 };

static __device__ __forceinline__ float gpt2__f(float x) { return x; }
static __device__ __forceinline__ float gpt2__f(__half x) { return __half2float(x); }
static __device__ __forceinline__ float gpt2__f(__nv_bfloat16 x) { return __bfloat162float(x); }
static __device__ __forceinline__ void gpt2__put(float *p, float v) { *p = v; }
static __device__ __forceinline__ void gpt2__put(__half *p, float v) { *p = __float2half_rn(v); }
static __device__ __forceinline__ void gpt2__put(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }

template <typename T> struct gpt2__cuda_type;
template <> struct gpt2__cuda_type<float> { static constexpr cudaDataType_t id = CUDA_R_32F; };
template <> struct gpt2__cuda_type<__half> { static constexpr cudaDataType_t id = CUDA_R_16F; };
template <> struct gpt2__cuda_type<__nv_bfloat16> { static constexpr cudaDataType_t id = CUDA_R_16BF; };

/* VE elements from p into f: one 16-byte load when a chunk is 16 bytes (p then 16-byte aligned), else VE loads */
template <typename T, int VE>
static __device__ __forceinline__ void gpt2__load_chunk(const T *p, float *f) {
    if (VE * sizeof(T) == 16) {
        uint4 u = *(const uint4 *)p;
        const T *e = (const T *)&u;
#pragma unroll
        for (int i = 0; i < VE; i++) f[i] = gpt2__f(e[i]);
    } else {
#pragma unroll
        for (int i = 0; i < VE; i++) f[i] = gpt2__f(p[i]);
    }
}

/* sum of v over the block (blockDim.x a multiple of 32, at most 1024), the same order every time; sh: 32 floats */
static __device__ float gpt2__block_sum(float v, float *sh) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh[w] = v;
    __syncthreads();
    float s = 0.0f;
    for (int i = 0; i < nw; i++) s += sh[i];
    return s;
}

/* Programmatic dependent launch (sm_90+): a kernel launched with gpt2__launch(pdl = 1) may start while the kernel
   before it in the stream finishes; it waits here, before touching memory, until that kernel is done and its writes
   are visible. Launched plainly, or below sm_90, this returns at once. */
static __device__ __forceinline__ void gpt2__pdl_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
/* Lets the kernel after this one (launched with PDL) start now: its blocks become resident as room frees up and do
   what needs no input (gpt2__few_row_kernel: stream its weights) until their gpt2__pdl_wait, which still waits for
   this whole kernel (and so for every kernel before it). The dependent launches once every block of this kernel
   has called it or exited, so all of this kernel's blocks are resident by then: the dependents' waiting blocks
   cannot keep it from running. */
static __device__ __forceinline__ void gpt2__pdl_trigger(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
/* A kernel's entry into its dependent work: the trigger first, then the wait, so that the next kernel launches while
   this one still waits for the one before. A batch-1 step's kernels then launch as far ahead as the SMs have room
   for, and a product's weights stream while the kernels before it finish. Only what needs no kernel's output may
   come before it (weights, constants, cached K/V of earlier steps: the step's first kernel is never a dependent
   launch, so no step's work starts before the last step's sampler is done). */
static __device__ __forceinline__ void gpt2__pdl_enter(void) {
    gpt2__pdl_trigger();
    gpt2__pdl_wait();
}

/* 4 elements at p (8- or 16-byte aligned) as fp32; and back, rounded to T */
static __device__ __forceinline__ float4 gpt2__ld4(const float *p) { return *(const float4 *)p; }
static __device__ __forceinline__ float4 gpt2__ld4(const __half *p) {
    const uint2 u = *(const uint2 *)p;
    const float2 a = __half22float2(*(const __half2 *)&u.x), b = __half22float2(*(const __half2 *)&u.y);
    return make_float4(a.x, a.y, b.x, b.y);
}
static __device__ __forceinline__ float4 gpt2__ld4(const __nv_bfloat16 *p) {
    const uint2 u = *(const uint2 *)p;
    const float2 a = __bfloat1622float2(*(const __nv_bfloat162 *)&u.x), b = __bfloat1622float2(*(const __nv_bfloat162 *)&u.y);
    return make_float4(a.x, a.y, b.x, b.y);
}
static __device__ __forceinline__ void gpt2__st4(float *p, float4 v) { *(float4 *)p = v; }
static __device__ __forceinline__ void gpt2__st4(__half *p, float4 v) {
    __half2 h[2] = {__floats2half2_rn(v.x, v.y), __floats2half2_rn(v.z, v.w)};
    *(uint2 *)p = *(const uint2 *)h;
}
static __device__ __forceinline__ void gpt2__st4(__nv_bfloat16 *p, float4 v) {
    __nv_bfloat162 h[2] = {__floats2bfloat162_rn(v.x, v.y), __floats2bfloat162_rn(v.z, v.w)};
    *(uint2 *)p = *(const uint2 *)h;
}
static __device__ __forceinline__ float4 gpt2__add4(float4 a, float4 b) { return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }

/* 16 bytes global -> shared, asynchronously (sm_80+); zeros when !ok */
static __device__ __forceinline__ void gpt2__cp16(void *dst, const void *src, bool ok) {
#if __CUDA_ARCH__ >= 800
    unsigned a = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(a), "l"(src), "r"(ok ? 16 : 0));
#else /* a plain copy on older GPUs */
    *(uint4 *)dst = ok ? *(const uint4 *)src : make_uint4(0, 0, 0, 0);
#endif
}
/* ... with an L2 policy: a stream read once a step marked to leave L2 first, so that it does not push out what the
   step reads again. Decode attention of many rows reads the KV cache so (the weights both parts read and the
   activations stay). No kernel here issues wgmma and these copies together: a kernel that did stopped on an illegal
   instruction at such a copy (cause not found). */

static __device__ __forceinline__ uint64_t gpt2__evict_first(void) {
    uint64_t pol = 0;
#if __CUDA_ARCH__ >= 800
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
#endif
    return pol;
}
static __device__ __forceinline__ void gpt2__cp16_pol(void *dst, const void *src, bool ok, uint64_t pol) {
#if __CUDA_ARCH__ >= 800
    unsigned a = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(a), "l"(src), "r"(ok ? 16 : 0), "l"(pol));
#else
    (void)pol;
    gpt2__cp16(dst, src, ok);
#endif
}

static __device__ __forceinline__ void gpt2__cp_commit(void) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N> static __device__ __forceinline__ void gpt2__cp_wait(void) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

/* A TMA tensor map (CUtensorMap's 128 opaque bytes), passed to kernels as a __grid_constant__ parameter. */
typedef struct gpt2__tmap { alignas(64) unsigned long long w[16]; } gpt2__tmap;

/* The Hopper bulk-copy pieces of gpt2__attn_stream_kernel's TMA form and scoring's fused product: a transaction
   barrier in shared memory (a phase ends once `arrivals` threads arrived and the bytes expected came), and a 2-D or
   3-D box of a tensor map copied into shared memory, its bytes counted on such a barrier. */
static __device__ __forceinline__ void gpt2__mbar_init(uint64_t *bar, unsigned arrivals) {
#if __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"((unsigned)__cvta_generic_to_shared(bar)), "r"(arrivals));
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
static __device__ __forceinline__ void gpt2__mbar_expect(uint64_t *bar, unsigned bytes) {
#if __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"((unsigned)__cvta_generic_to_shared(bar)), "r"(bytes)
                 : "memory");
#endif
}
static __device__ __forceinline__ void gpt2__mbar_wait(uint64_t *bar, unsigned parity) {
#if __CUDA_ARCH__ >= 900
    unsigned done = 0;
    while (!done)
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"((unsigned)__cvta_generic_to_shared(bar)), "r"(parity) : "memory");
#endif
}
static __device__ __forceinline__ void gpt2__mbar_arrive(uint64_t *bar) {
#if __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"((unsigned)__cvta_generic_to_shared(bar)) : "memory");
#endif
}
static __device__ __forceinline__ void gpt2__tma2(void *dst, const gpt2__tmap *map, int x, int y, uint64_t *bar) {
#if __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"((uint64_t)map), "r"(x), "r"(y),
                 "r"((unsigned)__cvta_generic_to_shared(bar)) : "memory");
#endif
}
static __device__ __forceinline__ void gpt2__tma3(void *dst, const gpt2__tmap *map, int x, int y, int z, uint64_t *bar, uint64_t pol) {
#if __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"((uint64_t)map), "r"(x),
                 "r"(y), "r"(z), "r"((unsigned)__cvta_generic_to_shared(bar)), "l"(pol) : "memory");
#endif
}
/* this thread's shared-memory writes before the async proxy's (a TMA copy into the same bytes) */
static __device__ __forceinline__ void gpt2__fence_async_smem(void) {
#if __CUDA_ARCH__ >= 900
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

/* an int from global memory by the read-only path, as an asm volatile load that the front end keeps in program order
   (ptxas may still sink a load past a branch that does not use it: gpt2__attn_stream_kernel's early return tests
   the slot for that reason) */
static __device__ __forceinline__ int gpt2__ld_now(const int *p) {
    int v;
    asm volatile("ld.global.nc.b32 %0, [%1];\n" : "=r"(v) : "l"(p));
    return v;
}

/* Tensor-core building blocks (sm_80+): the m16n8k16 MMA with fp32 accumulators, ldmatrix, cp.async; and 2^x in one
   MUFU instruction (denormal results flush to zero: far below what a probability rounded to T keeps). */
static __device__ __forceinline__ float gpt2__ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
static __device__ __forceinline__ void gpt2__mma(float *d, const uint32_t *a, uint32_t b0, uint32_t b1, __half) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ void gpt2__mma(float *d, const uint32_t *a, uint32_t b0, uint32_t b1, __nv_bfloat16) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ void gpt2__ldsm4(uint32_t *r, const void *p) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
static __device__ __forceinline__ void gpt2__ldsm4_t(uint32_t *r, const void *p) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
/* two floats -> a packed pair of T (the first in the low half), and back to the sum of the rounded pair */
static __device__ __forceinline__ uint32_t gpt2__pack2(float a, float b, float *sum, __half) {
    __half2 v = __floats2half2_rn(a, b);
    float2 f = __half22float2(v);
    *sum += f.x + f.y;
    return *(uint32_t *)&v;
}
static __device__ __forceinline__ uint32_t gpt2__pack2(float a, float b, float *sum, __nv_bfloat16) {
    __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
    float2 f = __bfloat1622float2(v);
    *sum += f.x + f.y;
    return *(uint32_t *)&v;
}

/* Warpgroup MMA (wgmma, sm_90a: code built for arch=compute_90a only, __CUDA_ARCH_FEAT_SM90_ALL) for the prefill
   kernel: D (m64n64, fp32, the four warps' 16-row slices, each laid out as mma.sync's m16n8 accumulators per 8
   columns: d[4j + i] = that kernel's s[j][i]) (+)= A (m64k16 from registers, each warp's 16 rows as mma.sync's A
   fragment) x B (k16n64 in shared memory, 128-byte swizzle, by descriptor). TB 0: B's K dimension contiguous (a
   key's dims, for S = Q K^T), 1: its N dimension (V's dims, for O = P V). */
static __device__ __forceinline__ uint64_t gpt2__wg_desc(const void *p) {
    const uint64_t a = (uint32_t)__cvta_generic_to_shared(p);
    /* start >> 4; leading byte offset 16 (unused at these shapes); stride byte offset 1024 (8 rows of 128 bytes);
       layout 1: the 128-byte swizzle */
    return ((a & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GPT2__WG 1
template <int N> static __device__ __forceinline__ void gpt2__wg_keep(float (&d)[N]) { /* the compiler must not move d across the wait */
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}
/* the instruction for element type TY (f16, bf16): d's 32 registers, a's 4, b's descriptor, scale_d, TB */
#define GPT2__WG_MMA(TY)                                                                                               \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                                          \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, %38;\n}\n" \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                                                                                               \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d), "n"(TB) : "memory")
template <int TB>
static __device__ __forceinline__ void gpt2__wg_mma(float (&d)[32], const uint32_t *a, uint64_t b, int scale_d, __half) { GPT2__WG_MMA("f16"); }
template <int TB>
static __device__ __forceinline__ void gpt2__wg_mma(float (&d)[32], const uint32_t *a, uint64_t b, int scale_d, __nv_bfloat16) { GPT2__WG_MMA("bf16"); }
#undef GPT2__WG_MMA
/* D (m64n256, fp32: d[4j + i] the m16n8 accumulators of columns 8j.., as above) (+)= A (m64k16) x B (k16n256), both
   from shared memory by descriptor, K contiguous in each (128-byte swizzle): gpt2__score_gemm_kernel's product */
#define GPT2__WG_MMA256(TY)                                                                                            \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                                        \
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32." TY "." TY " {"                                          \
                 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31," \
                 "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63," \
                 "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95," \
                 "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127" \
                 "}, %128, %129, p, 1, 1, 0, 0;\n}\n"                                                            \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
                 "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
                 "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
                 "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
                 "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
                 "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
                 "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
                 "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127]) \
                 : "l"(a), "l"(b), "r"(scale_d) : "memory")
static __device__ __forceinline__ void gpt2__wg_mma256(float (&d)[128], uint64_t a, uint64_t b, int scale_d, __half) { GPT2__WG_MMA256("f16"); }
static __device__ __forceinline__ void gpt2__wg_mma256(float (&d)[128], uint64_t a, uint64_t b, int scale_d, __nv_bfloat16) { GPT2__WG_MMA256("bf16"); }
#undef GPT2__WG_MMA256
/* the registers a wgmma reads ready before it; the products issued since the last commit made one group; wait until
   at most N groups are in flight */
static __device__ __forceinline__ void gpt2__wg_fence(void) { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
static __device__ __forceinline__ void gpt2__wg_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> static __device__ __forceinline__ void gpt2__wg_wait(void) { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
/* one group of four k16 steps, issued, committed and waited for */
template <int TB, typename T>
static __device__ __forceinline__ void gpt2__wg_4(float (&d)[32], const uint32_t (*a)[4], const T *b, int step_bytes, int first) {
    gpt2__wg_keep(d);
    gpt2__wg_fence();
#pragma unroll
    for (int k = 0; k < 4; k++) gpt2__wg_mma<TB>(d, a[k], gpt2__wg_desc((const char *)b + k * step_bytes), !(first && k == 0), T());
    gpt2__wg_commit();
    gpt2__wg_wait<0>();
    gpt2__wg_keep(d);
}
#else
#define GPT2__WG 0
#endif

/* == [GPT2:CUDA_STATE] == CUDA backend state, the step blob, a run's lane and paths, the launch helper ========== */

/* A tile of up to 64 consecutive fed rows of one sequence (positions pos0..pos0+n-1 of slot `slot`). */
typedef struct gpt2__tile { int row0, n, slot, pos0, first; } gpt2__tile; /* first: position of the run's first row */

/* A sequence's sampling request as the sampler kernel reads it. */
/* A sampled row's logprobs as the sampler leaves them for the host (gpt2__logprobs' values): the chosen token's, and
   the top alternatives' ids and values, most likely first */
typedef struct gpt2__lp_rec { float lp; int ids[20]; float lps[20]; } gpt2__lp_rec;

typedef struct gpt2__pick {
    float temperature, top_p;
    int top_k, sample;
    uint64_t seed, draw;
    int *out; /* where the host reads the id (its pinned staging blob, mapped; NULL: none), so no copy follows the step */
    float min_p;
    /* the processors (gpt2__process's rule; proc 0: none): the row's history is hist[0 .. pos], its fed position, the
       first n_prompt of them the prompt; ctl holds n_bias (id, bias bits) pairs sorted by id (in list order among
       equal ids), then n_stop stop ids (stop_token first when set) */
    int proc, pos, n_prompt, no_repeat, min_new, n_bias, n_stop;
    float rep_penalty, presence, frequency;
    const int *hist, *ctl;
    /* logprobs (rec NULL: none): the raw row is kept in stash [ldv] for the chosen token's; top alternatives */
    gpt2__lp_rec *rec;
    float *stash;
    int top;
    float typical_p;
} gpt2__pick;

/* What a pure decode step's sampler leaves in the device blob for the fed step after it, which then needs no copy
   (gpt2__cuda_launch): each row's position + 1, its token -1 - row (the id sampled now), its draw + 1, and its id's
   address in the other staging blob (blob_bytes on). pos NULL: nothing (other steps; a copy always follows them). */
typedef struct gpt2__advance { int *pos, *tok; const char *lo; long long blob_bytes; } gpt2__advance;

typedef struct gpt2__cuda_layer {
    void *qkv_w, *qkv_b, *proj_w, *proj_b, *fc_w, *fc_b, *fcp_w, *fcp_b; /* T; matrices [out][in] */
    float *ln1_w, *ln1_b, *ln2_w, *ln2_b;
} gpt2__cuda_layer;

/* A cuBLASLt plan for D[O][N] = W[O][I] x X[N][I]^T (+ bias, + the tanh GELU), found once per shape. */
typedef struct gpt2__gemm {
    int O, N, I, epi, out_f32, ldd, ref, pieces;
    int how;                       /* 0: the reference algorithm, 1: a candidate of its class, 2: N's own (not invariant) */
    cudaDataType_t dt;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
} gpt2__gemm;

/* Where a step's inputs sit in the metadata blob (host staging and device copy share the layout). */
typedef struct gpt2__cuda_meta {
    int *tok, *pos, *slot;   /* per fed row [N] */
    int *att_rows;           /* [n_att]: the rows gpt2__attn_kernel serves */
    int *out_row;            /* per output row [n_out]: which fed row it reads */
    int *gat, *outc;         /* [n_out] when n_gat: the last layer's compacted rows (which fed row compact row j is)
                                and output row o's compacted row (gpt2__cuda_run_t) */
    gpt2__tile *tiles;       /* [n_tiles]: the prompt chunks gpt2__attn_prefill_kernel serves (room for N) */
    gpt2__pick *picks;       /* per sequence [n] */
    int *next;               /* per sequence [n]: the sampled token */
    gpt2__lp_rec *recs;      /* per sequence [n]: its logprobs, where asked (gpt2__pick.rec) */
    size_t bytes;            /* what the host copies over: everything but next */
    int n_att, n_tiles;      /* host values, set by gpt2__plan_attention */
    int n_gat, gat_P;        /* host values: the last layer runs on n_gat compacted rows, gat_P of them prompt rows
                                (0: on every fed row) */
    long tile_keys;          /* host value: keys the prompt tiles' sequences hold, each sequence once */
} gpt2__cuda_meta;

typedef struct gpt2__cuda_graph { int n, np, green_step, att_short, dup, dup_seqs; cudaGraphExec_t exec; unsigned long long used; } gpt2__cuda_graph;

typedef struct gpt2__cuda_state {
    int device, sms;
    size_t sm_smem;                     /* shared memory of an SM (bytes) */
    cudaStream_t stream;
    cublasLtHandle_t lt;
    void *lt_ws;
    size_t lt_ws_size;
    gpt2__gemm gemm[GPT2__MAX_GEMMS];
    int n_gemm, gemm_next;
    size_t esize;                       /* bytes per element of T */
    void *warena;                       /* every weight, 256-byte aligned */
    void *wte, *wpe;
    void *lm_head;                      /* [ldv][C]: the logits' matrix, wte itself when the head is tied */
    float *lnf_w, *lnf_b;
    gpt2__cuda_layer *layers;           /* host array of device pointers */
    int mlp_act;                        /* the MLP's activation (GPT2__ACT_*) */
    int *hist;                          /* [max_batch][max_seq]: each slot's tokens by position (the embedding writes them) */
    int *ctl;                           /* [max_batch][GPT2_CTL_INTS]: each slot's bias and stop lists (gpt2__cuda_controls) */
    int *ctl_host;                      /* [GPT2_CTL_INTS]: one list's staging */
    void *k_cache, *v_cache;
    int max_rows;                       /* fed rows per step the workspace holds */
    void *act;                          /* activations and logits, one allocation */
    float *x, *logits, *part;
    int ldv;                            /* n_vocab rounded up to 8: logits row stride and the logits GEMM's M
                                           (wte holds ldv rows, the last ones zero) */
    int logit_rows;                     /* rows the logits buffer holds */
    void *ln, *qkv, *att, *proj, *fc;
    size_t part_floats;
    unsigned *att_count;                /* [max_rows][H] span counters of gpt2__attn_kernel, zero between launches */
    void *d_meta, *h_meta[2];           /* device blob; two pinned host staging blobs, used in turn (gpt2__cuda_launch,
                                           gpt2__cuda_score) */
    char *h_meta_dev;                   /* h_meta[0] as the device addresses it (mapped); NULL: ids come back by a copy */
    size_t meta_bytes;
    int stage;                          /* the staging blob of the step launched last */
    int flying;                         /* steps launched and not yet collected: 0, 1 or 2 */
    int fly_n[2];                       /* per staging blob: its step's sequences */
    int *fly_next[2];                   /* per blob: where its step's sampled ids land (pinned) */
    gpt2__lp_rec *fly_recs[2];          /* per blob: its rows' logprobs (pinned) */
    gpt2_request **fly_req[2];          /* per blob [max_rows]: the request of a row with logprobs (NULL: none) */
    uint64_t *fly_draw[2];              /* per blob [max_rows]: the row's draw (its index in the request's outputs) */
    float *stash;                       /* [stash_rows][ldv]: raw logits of a step's rows with logprobs */
    int stash_rows;
    cudaEvent_t fly_done[2];            /* per blob: recorded once its step's ids are back (gpt2_score's: its results) */
    void *score_d, *score_h;            /* gpt2_score's rows, per staging blob [max_rows]: log-probabilities (double),
                                           ranks and target ids (int); on the device, and pinned on the host */
    int feed_n;                         /* the last launched step's sequences when it was pure decode, else -1 */
    int lookahead;                      /* gpt2_generate may launch a step before reading the one before (tests: off) */
    gpt2__cuda_graph graphs[GPT2__MAX_GRAPHS];
    unsigned long long tick;
    int use_graphs;                     /* tests turn it off to compare replay with eager */
    int flash;                          /* gpt2__attn_prefill_kernel serves prompt chunks */
    int flash_wg;                       /* ... its products on wgmma (head size 64, code built for sm_90a) */
    int score_fused;                    /* gpt2_score's logits product reduces its own tiles (gpt2__score_gemm_kernel) */
    unsigned long long score_map[16];   /* ... the head's tensor map for it */
    int pdl;                            /* sm_90+: kernels that follow a kernel use programmatic dependent launch */
    int few_row;                        /* decode products of <= GPT2__FEW_ROW_MAX rows go to gpt2__few_row_kernel where verified
                                           (tests turn it off to compare) */
    int few_row_n;                      /* verified products: O, I, pieces, epilogue, out_f32 (gpt2__few_row_check) */
    int few_row_ok[5][5];
    char few_row_miss[160];             /* the first product the check kept off the kernel, and how far they disagreed */
    int ln_fold;                        /* steps of <= GPT2__LN_FOLD_ROWS decode rows fold residual + LN into the next product
                                           (gpt2__ln_fold; tests turn it off to compare) */
    float *x2;                          /* [GPT2__LN_FOLD_ROWS][C]: the residual's other buffer on that path */
    int gather;                         /* a step whose prompt rows need logits only at each prompt's last row runs its
                                           last layer after attention on its output rows alone, when that drops at
                                           least this many rows (gpt2__cuda_run_t; 0: never; tests change it) */
    int ln_fold_smem;                   /* shared memory a block may have on this GPU (that path's limit) */
    int ln_fold_fit;                    /* ... with the FIT form's ring (gpt2__ln_fold_stages; on by default: tests and
                                           bench turn it off before the first step) */
    int part_rows, parts;               /* decode steps run as up to `parts` parts of at least part_rows rows at once
                                           (gpt2__cuda_parts; part_rows 0: never; tests and bench_gpt2 change them) */
    cudaStream_t pstream[GPT2__MAX_PARTS]; /* part i > 0's stream, */
    void *plt_ws[GPT2__MAX_PARTS];      /* its cuBLASLt workspace, */
    cudaEvent_t fork, pjoin[GPT2__MAX_PARTS]; /* and the events that tie the parts to the step */
    int parts_last;                     /* parts of the step launched last (1: one run) */
    int att_sms;                        /* SMs asked for decode attention in a step of parts (gpt2__green_make; 0: none) */
    int green_sms;                      /* SMs the attention set got (0: no green contexts made, */
    const char *green_why;              /* and why) */
    int green_ctx;                      /* a step of parts runs green (its attention on SMs of its own) when its rows'
                                           mean context >= n_embd / green_ctx (0: never) */
    int green_step;                     /* the step launched last runs green, */
    int att_short;                      /* or is of parts at contexts too short to run green */
    int dup_step;                       /* the step launched last has several decode rows of one sequence (a draft to
                                           verify: gpt2_generate's speculation), one sequence entry each, */
    int dup_seqs;                       /* of that many sequences */
    void *green[2];                     /* the green contexts (CUgreenCtx): decode attention's SMs, and the rest for every other kernel */
    cudaStream_t gstream[2][GPT2__MAX_PARTS]; /* part i's stream in each set, */
    cudaEvent_t att_go[GPT2__MAX_PARTS], att_done[GPT2__MAX_PARTS]; /* and the events between them */
    int att_mma;                        /* decode attention on the tensor cores (gpt2__attn_mma_kernel for few rows,
                                           gpt2__attn_stream_kernel for many; fixed at init: a row's bits never depend
                                           on which); 0: gpt2__attn_kernel (head size not 64, F32, before sm_80) */
    int att_many;                       /* tests: decode attention takes its many-rows path whatever the rows */
    int att_ns;                         /* gpt2__attn_stream_kernel's stages a warp (2 or 3; bits the same) */
    int att_tma;                        /* gpt2__attn_stream_kernel in its TMA form where kv_tma (bits the same) */
    int kv_tma;                         /* the caches' tensor maps are made: */
    unsigned long long kv_map[2][16];   /* K's and V's (gpt2__kv_maps; CUtensorMap's bytes) */
    int att_stage, att_stage_smem;      /* decode attention of few rows stages their cached K/V in shared memory
                                           before its PDL wait (gpt2__attn_kernel STG; 0: off, tests and bench), up to
                                           att_stage_smem bytes a block */
    int prefill_order;                  /* gpt2__attn_prefill_kernel's block order: 1 heads inner, 0 tiles inner, -1 heads
                                           inner when the tiles' sequences' K/V fit in half of L2 */
    size_t l2_bytes;                    /* the GPU's L2 cache */
} gpt2__cuda_state;

/* What one forward run launches into, passed to every launcher under gpt2__cuda_run_t: its stream, whether its
   kernels launch as programmatic dependents, its row-indexed buffers and its cuBLASLt workspace. gpt2__lane_of gives
   the whole step's (S's own); a part of a step of parts has its own slice of each and its own stream
   (gpt2__cuda_parts), and in a green step an attention stream of its own. */
typedef struct gpt2__lane {
    cudaStream_t stream;
    int pdl;
    float *x, *logits, *part;           /* fp32 [rows][C], [rows][ldv], split-K pieces and attention span partials */
    void *ln, *qkv, *att, *proj, *fc;   /* T [rows][C], [rows][3C], [rows][C], [rows][C], [rows][n_inner] */
    void *lt_ws;                        /* cuBLASLt workspace of S->lt_ws_size bytes */
    unsigned *att_count;                /* decode attention's span counters [rows][H] */
    int part_i;                         /* its index in a step of parts (-1: the whole step) */
    cudaStream_t att_stream;            /* a part of a green step: where its attention runs (NULL: stream) */
    cudaStream_t tail_stream;           /* ... and for its last part, where its work after the last attention goes */
} gpt2__lane;
static gpt2__lane gpt2__lane_of(const gpt2__cuda_state *S) {
    gpt2__lane L = {S->stream, S->pdl, S->x, S->logits, S->part, S->ln, S->qkv, S->att, S->proj, S->fc, S->lt_ws, S->att_count,
                    -1, NULL, NULL};
    return L;
}

/* Decode attention's kernels (gpt2__paths.att) */
enum { GPT2__ATT_CORE, GPT2__ATT_CORE_STAGED, GPT2__ATT_MMA, GPT2__ATT_MMA_STAGED, GPT2__ATT_STREAM };

/* The paths one forward run takes: all decided by gpt2__paths_of ([GPT2:PATHS]), read by the run and its launchers. */
typedef struct gpt2__paths {
    int few_row[5];      /* decode rows of each product on the few-row kernel (else cuBLASLt), in gpt2__few_row_products'
                            order: qkv, proj, fc, fc-proj, logits */
    int ln_fold;         /* each residual + layer norm inside the product that reads it (gpt2__ln_fold_run) */
    int gather;          /* the last layer after attention on the output rows alone (gpt2__gather_kernel) */
    int kv_first;        /* gpt2__kv_store_kernel stores every fed row's K and V before attention (else each attention
                            kernel stores those of the rows it serves) */
    int att;             /* decode attention's kernel (GPT2__ATT_*) */
    int att_prefetch;    /* ... prefetching the rows' caches into L2 */
    int att_ns, att_tma; /* gpt2__attn_stream_kernel's ring stages a warp, and its TMA form */
    int heads_inner;     /* gpt2__attn_prefill_kernel's block order: heads inner (else tiles inner) */
} gpt2__paths;

static size_t gpt2__align256(size_t n) { return (n + 255) & ~(size_t)255; }

/* blob layout: tok, pos, slot, att_rows [N] | out_row, gat, outc [n_out] | (16-aligned) tiles [N] | picks [n] | next [n] |
   recs [n] */
static size_t gpt2__meta_tiles_at(int N, int n_out) { return ((size_t)(4 * N + 3 * n_out) * sizeof(int) + 15) & ~(size_t)15; }
static size_t gpt2__meta_size(int N, int n_out, int n) {
    return gpt2__meta_tiles_at(N, n_out) + (((size_t)N * sizeof(gpt2__tile) + 15) & ~(size_t)15) +
           (size_t)n * (sizeof(gpt2__pick) + sizeof(int) + sizeof(gpt2__lp_rec));
}
static gpt2__cuda_meta gpt2__meta_at(void *base, int N, int n_out, int n) {
    gpt2__cuda_meta d;
    char *b = (char *)base;
    d.tok = (int *)b;
    d.pos = d.tok + N;
    d.slot = d.pos + N;
    d.att_rows = d.slot + N;
    d.out_row = d.att_rows + N;
    d.gat = d.out_row + n_out;
    d.outc = d.gat + n_out;
    d.tiles = (gpt2__tile *)(b + gpt2__meta_tiles_at(N, n_out));
    d.picks = (gpt2__pick *)((char *)d.tiles + (((size_t)N * sizeof(gpt2__tile) + 15) & ~(size_t)15)); /* 16-byte aligned */
    d.next = (int *)(d.picks + n);
    d.recs = (gpt2__lp_rec *)(d.next + n);
    d.bytes = (size_t)((char *)d.next - b);
    d.n_att = N;
    d.n_tiles = 0;
    d.n_gat = d.gat_P = 0;
    return d;
}

/* longest key range first, so the last wave of prefill blocks is short */
static int gpt2__tile_cmp(const void *a, const void *b) {
    const gpt2__tile *x = (const gpt2__tile *)a, *y = (const gpt2__tile *)b;
    return (y->pos0 + y->n) - (x->pos0 + x->n);
}

/* kernel<<<grid, block, smem, st>>>(args); with pdl, as a programmatic dependent launch (the kernel starts with
   gpt2__pdl_wait): it may be scheduled while the kernel before it drains, which hides a launch gap per kernel in a
   replayed decode step. Only after another kernel in the stream (not after a copy). */
template <typename... P, typename... A>
static gpt2_status gpt2__launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t st, int pdl, A... args) {
    if (!pdl) {
        kernel<<<grid, block, smem, st>>>(args...);
        GPT2__LAUNCHED();
        return GPT2_OK;
    }
    cudaLaunchAttribute at;
    at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid; cfg.blockDim = block; cfg.dynamicSmemBytes = smem; cfg.stream = st; cfg.attrs = &at; cfg.numAttrs = 1;
    GPT2__CU(cudaLaunchKernelEx(&cfg, kernel, (P)args...));
    return GPT2_OK;
}

/* == [GPT2:OP_LN] == embedding and residual add + layer norm (kernel, launcher) ================================= */

/* What joins row r of the residual stream: rows r < P take add[r] (T, the layer's bias included), then add2[r]
   when set; with part set, rows r >= P take the fp32 pieces of a K-split product, ((part[0][r-P] + part[1][r-P]) +
   ...) + bias, piece k at part + k*stride (gpt2__linear with part). defer: rows r < P are normalised with add[r]
   joined but x keeps its old value, for the layer's second pass to join add[r] again (the same fp32 sum, so the
   same bits) and then add2[r]: a prompt row moves 8 + 14 bytes an element over a layer's two passes instead of
   12 + 12. For the embedding (tok set), feed names where a negative token id comes from:
   tok[r] = -1 - j is feed[j], the token the previous step sampled for its sequence j, still on the GPU. */
template <typename T> struct gpt2__resid {
    const T *add;
    const float *part;
    const T *bias;
    size_t stride;
    int pieces, P;
    const int *feed;
    const T *add2;
    int defer;
    int *hist;          /* the embedding: each row's token into hist [slot][hist_ld] at its position (the sampler's
                           processors read it); NULL: not kept */
    const int *slot;
    int hist_ld;
};

/* Element i of prompt row r of the residual stream with what ad joins to it: x[r][i] + add[r][i] (+ add2[r][i]) */
template <typename T>
static __device__ __forceinline__ float gpt2__deferred(const float *xr, const gpt2__resid<T> &ad, int r, int C, int i) {
    float v = xr[i] + gpt2__f(ad.add[(size_t)r * C + i]);
    if (ad.add2) v += gpt2__f(ad.add2[(size_t)r * C + i]);
    return v;
}

/* Residual add (or embedding) fused with layer norm. x: fp32 residual stream [N][C]; out: T [n_out][C].
   Output row o normalises row r = rows ? rows[o] : o of x after updating it:
     tok != NULL:            x[r] = wte[t] + wpe[pos[r]]           (token + position embedding; t = tok[r], or
                                                                    ad.feed[-1 - tok[r]] when negative)
     ad.add or ad.part set:  x[r] += what gpt2__resid names          (residual; with ad.defer, prompt rows'
                                                                    new value is normalised but not stored)
   then out[o] = (x[r] - mean) / sqrt(var + eps) * g + b, mean and biased variance in fp32 (two passes).
   Grid: n_out blocks of 256 threads (EARLY: at most GPT2__FEW_ROW_MAX of them, see below). E > 0 (C a multiple of 4, at most 1024 E): thread t holds the 4-element chunks
   t + 256 j, j < E, in registers, every load of a row issued before the first use (a row is latency-bound when
   a step has few rows); E == 0: any C, one element at a time. The kernel is chosen by C alone (gpt2__residual_ln),
   so every row of a model computes alike. Matches gpt2__cpu_layernorm and the embedding/residual loops of
   gpt2__cpu_run. */
template <typename T, int E, bool EARLY>
__global__ void __launch_bounds__(256) gpt2__residual_ln_kernel(float *__restrict__ x, gpt2__resid<T> ad, const int *rows,
                                                                  const int *tok, const int *pos, const T *wte, const T *wpe,
                                                                  const float *g, const float *b, T *out, int C, float eps) {
    __shared__ float sh[32];
    const int o = blockIdx.x, r = rows ? rows[o] : o;
    float *xr = x + (size_t)r * C;
    const int mode = tok ? 0 : ad.part && r >= ad.P ? 1 : ad.add ? 2 : 3; /* embedding, pieces, add, none */
    const int keep = mode == 2 && ad.defer, store = mode != 3 && !keep;   /* keep: x as it was (gpt2__resid) */
    const int nc = C >> 2;
    /* EARLY (few rows: a latency-bound step): the weights this row needs (gain, shift, a projection's bias) do not
       depend on the kernel before, so they are loaded while it finishes; else where used (fewer registers) */
    float4 gg[E > 0 ? E : 1], bb[E > 0 ? E : 1], bi[E > 0 ? E : 1];
    if constexpr (E > 0 && EARLY)
#pragma unroll
        for (int j = 0; j < E; j++) {
            const int c = 4 * (threadIdx.x + 256 * j);
            if (c >= 4 * nc) continue;
            gg[j] = gpt2__ld4(g + c);
            bb[j] = gpt2__ld4(b + c);
            if (mode == 1) bi[j] = gpt2__ld4(ad.bias + c);
        }
    gpt2__pdl_enter();
    const int t = mode == 0 ? (tok[r] < 0 ? ad.feed[-1 - tok[r]] : tok[r]) : 0;
    if (mode == 0 && ad.hist && threadIdx.x == 0) ad.hist[(size_t)ad.slot[r] * ad.hist_ld + pos[r]] = t;
    float sum = 0.0f;
    if (E == 0) {
        for (int i = threadIdx.x; i < C; i += blockDim.x) {
            float v = xr[i];
            if (mode == 0) v = gpt2__f(wte[(size_t)t * C + i]) + gpt2__f(wpe[(size_t)pos[r] * C + i]);
            else if (mode == 1) {
                const float *pr = ad.part + (size_t)(r - ad.P) * C + i;
                float a = pr[0];
                for (int k = 1; k < ad.pieces; k++) a += pr[k * ad.stride];
                v += a + gpt2__f(ad.bias[i]);
            } else if (mode == 2) v = gpt2__deferred(xr, ad, r, C, i);
            if (store) xr[i] = v;
            sum += v;
        }
        const float mean = gpt2__block_sum(sum, sh) / (float)C;
        float ss = 0.0f;
        for (int i = threadIdx.x; i < C; i += blockDim.x) {
            const float v = keep ? gpt2__deferred(xr, ad, r, C, i) : xr[i];
            const float d = v - mean;
            ss += d * d;
        }
        const float rstd = rsqrtf(gpt2__block_sum(ss, sh) / (float)C + eps);
        T *yr = out + (size_t)o * C;
        for (int i = threadIdx.x; i < C; i += blockDim.x) {
            const float v = keep ? gpt2__deferred(xr, ad, r, C, i) : xr[i];
            gpt2__put(yr + i, (v - mean) * rstd * g[i] + b[i]);
        }
        return;
    }
    if constexpr (E > 0) { /* (E == 0 returned above) */
        float4 v[E > 0 ? E : 1];
#pragma unroll
        for (int j = 0; j < E; j++) {
            const int c = 4 * (threadIdx.x + 256 * j);
            v[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (c >= 4 * nc) continue;
            if (mode == 0) { v[j] = gpt2__add4(gpt2__ld4(wte + (size_t)t * C + c), gpt2__ld4(wpe + (size_t)pos[r] * C + c)); continue; }
            const float4 xv = gpt2__ld4(xr + c);
            if (mode == 1) {
                const float *pr = ad.part + (size_t)(r - ad.P) * C + c;
                float4 a = gpt2__ld4(pr);
#pragma unroll
                for (int k = 1; k < 4; k++)
                    if (k < ad.pieces) a = gpt2__add4(a, gpt2__ld4(pr + k * ad.stride));
                v[j] = gpt2__add4(xv, gpt2__add4(a, EARLY ? bi[j] : gpt2__ld4(ad.bias + c)));
            } else if (mode == 2) {
                v[j] = gpt2__add4(xv, gpt2__ld4(ad.add + (size_t)r * C + c));
                if (ad.add2) v[j] = gpt2__add4(v[j], gpt2__ld4(ad.add2 + (size_t)r * C + c));
            } else v[j] = xv;
        }
#pragma unroll
        for (int j = 0; j < E; j++) {
            const int c = 4 * (threadIdx.x + 256 * j);
            if (c >= 4 * nc) continue;
            if (store) gpt2__st4(xr + c, v[j]);
            sum += v[j].x; sum += v[j].y; sum += v[j].z; sum += v[j].w;
        }
        const float mean = gpt2__block_sum(sum, sh) / (float)C;
        float ss = 0.0f;
#pragma unroll
        for (int j = 0; j < E; j++) {
            if (4 * (threadIdx.x + 256 * j) >= 4 * nc) continue;
            const float dx = v[j].x - mean, dy = v[j].y - mean, dz = v[j].z - mean, dw = v[j].w - mean;
            ss += dx * dx; ss += dy * dy; ss += dz * dz; ss += dw * dw;
        }
        const float rstd = rsqrtf(gpt2__block_sum(ss, sh) / (float)C + eps);
        T *yr = out + (size_t)o * C;
#pragma unroll
        for (int j = 0; j < E; j++) {
            const int c = 4 * (threadIdx.x + 256 * j);
            if (c >= 4 * nc) continue;
            const float4 G = EARLY ? gg[j] : gpt2__ld4(g + c), B = EARLY ? bb[j] : gpt2__ld4(b + c);
            gpt2__st4(yr + c, make_float4((v[j].x - mean) * rstd * G.x + B.x, (v[j].y - mean) * rstd * G.y + B.y,
                                          (v[j].z - mean) * rstd * G.z + B.z, (v[j].w - mean) * rstd * G.w + B.w));
        }
    }
}

/* gpt2__residual_ln_kernel over n output rows, its form chosen by C alone; pdl as gpt2__launch */
template <typename T>
static gpt2_status gpt2__residual_ln(cudaStream_t st, int n, float *x, gpt2__resid<T> ad, const int *rows, const int *tok,
                                     const int *pos, const T *wte, const T *wpe, const float *g, const float *b, T *out, int C,
                                     float eps, int pdl) {
    if (n < 1) return GPT2_OK;
    void (*k)(float *, gpt2__resid<T>, const int *, const int *, const int *, const T *, const T *, const float *, const float *,
              T *, int, float) = n <= GPT2__FEW_ROW_MAX ? (C % 4 == 0 && C <= 1024   ? gpt2__residual_ln_kernel<T, 1, true>
                                                       : C % 4 == 0 && C <= 2048 ? gpt2__residual_ln_kernel<T, 2, true>
                                                       : C % 4 == 0 && C <= 4096 ? gpt2__residual_ln_kernel<T, 4, true>
                                                                                 : gpt2__residual_ln_kernel<T, 0, true>)
                                                    : (C % 4 == 0 && C <= 1024   ? gpt2__residual_ln_kernel<T, 1, false>
                                                       : C % 4 == 0 && C <= 2048 ? gpt2__residual_ln_kernel<T, 2, false>
                                                       : C % 4 == 0 && C <= 4096 ? gpt2__residual_ln_kernel<T, 4, false>
                                                                                 : gpt2__residual_ln_kernel<T, 0, false>);
    return gpt2__launch(k, dim3((unsigned)n), dim3(256), 0, st, pdl, x, ad, rows, tok, pos, wte, wpe, g, b, out, C, eps);
}

/* == [GPT2:OP_ACT] == the MLP's activation after a product ====================================================== */

/* The activation act (GPT2__ACT_*: gpt2__cpu_activation's formulas; the CPU's rounding differs within the tolerances)
   of a value already rounded to T, in fp32, every operation rounded as written (no fused multiply-add), so each
   kernel that calls it gives the same bits: the decode rows' activation (gpt2__linear). GPT2__ACT_NONE: v. */
static __device__ __forceinline__ float gpt2__act(float v, int act) {
    switch (act) {
    case GPT2__ACT_GELU_TANH: {
        const float v3 = __fmul_rn(__fmul_rn(v, v), v);
        const float u = __fmul_rn(0.7978845608028654f, __fadd_rn(v, __fmul_rn(0.044715f, v3)));
        return __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, tanhf(u)));
    }
    case GPT2__ACT_GELU_ERF: return __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, erff(__fmul_rn(v, 0.70710678118654752f))));
    case GPT2__ACT_QUICK_GELU: return __fdiv_rn(v, __fadd_rn(1.0f, expf(__fmul_rn(-1.702f, v))));
    case GPT2__ACT_RELU: return v > 0.0f ? v : 0.0f;
    default: return v;
    }
}

/* x [n] in T := gpt2__act(x, act), in place: rows of the MLP's first product that cuBLASLt computed with the bias
   alone (rows contiguous; in every dtype): every decode row, and the prompt rows of a model whose activation is not
   cuBLASLt's GELU epilogue (the tanh form). 16 bytes of elements per thread and step when x is 16-byte aligned and
   n a multiple of their count, else one; grid-stride. */
template <typename T>
__global__ void gpt2__act_kernel(T *x, size_t n, int act) {
    gpt2__pdl_enter();
    const size_t stride = (size_t)gridDim.x * blockDim.x, t0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    constexpr int E = 16 / sizeof(T);
    if (n % E == 0 && ((uintptr_t)x & 15) == 0) {
        for (size_t i = t0; i < n / E; i += stride) {
            uint4 u = ((const uint4 *)x)[i];
            T *e = (T *)&u;
#pragma unroll
            for (int k = 0; k < E; k++) gpt2__put(e + k, gpt2__act(gpt2__f(e[k]), act));
            ((uint4 *)x)[i] = u;
        }
        return;
    }
    for (size_t i = t0; i < n; i += stride) gpt2__put(x + i, gpt2__act(gpt2__f(x[i]), act));
}
template <typename T>
static gpt2_status gpt2__act_run(cudaStream_t st, int pdl, int sms, T *x, size_t elems, int act) {
    const size_t want = elems / 8 / 256 + 1, most = (size_t)sms * 8;
    return gpt2__launch(gpt2__act_kernel<T>, dim3((unsigned)(want < most ? want : most)), dim3(256), 0, st, pdl, x, elems, act);
}

/* == [GPT2:OP_GEMM] == products on cuBLASLt (pinned algorithm classes) ========================================== */

/* A layout as `count` matrices `stride` elements apart (count 1: left as is). */
static cublasStatus_t gpt2__lt_batch(cublasLtMatrixLayout_t l, int count, int64_t stride) {
    if (count <= 1) return CUBLAS_STATUS_SUCCESS;
    cublasStatus_t s = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
    return s != CUBLAS_STATUS_SUCCESS ? s : cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
}

/* What an algorithm computes per output element, as far as it shows: cuBLASLt kernels of one algorithm id with the same
   split of K (none, or the same count and reduction) add the products in the same order whatever their tile, and give
   bit-identical results (on the H100 every such pair of the published shapes was identical, every pair with a
   different split differed; test cuda_gemm_rows_are_batch_invariant checks it on the device it runs on). */
static void gpt2__algo_class(const cublasLtMatmulAlgo_t *a, int cls[4]) {
    const cublasLtMatmulAlgoConfigAttributes_t at[4] = {CUBLASLT_ALGO_CONFIG_ID, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                                        CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION};
    for (int i = 0; i < 4; i++) {
        size_t n = 0;
        cls[i] = -1;
        cublasLtMatmulAlgoConfigGetAttribute(a, at[i], &cls[i], sizeof cls[i], &n);
    }
}

/* D [N][O] (T, or fp32 with out_f32; rows ldd apart, 0: O) = X [N][I] @ W^T, W stored [O][I]; + bias [O]; then with
   GPT2__EPI_BIAS_ACT cuBLASLt's GELU (the tanh form; gpt2__linear runs other activations after it), through cuBLASLt. fp32 accumulation (CUBLAS_COMPUTE_32F:
   no TF32 in F32 mode). Whatever N, the arithmetic is that of the algorithm cuBLASLt picks for `ref` rows of this
   shape (see below). With pieces > 1 (I a multiple of 8 * pieces; no epilogue, out_f32): one batched product per
   piece of K, D [k][N][ldd] = X[:, k*I/s .. (k+1)*I/s) @ W[:, same]^T, k < s, each piece with the arithmetic above.
   Plans are cached by shape, N, ref and pieces. */
static gpt2_status gpt2__gemm_run(gpt2__cuda_state *S, const gpt2__lane *L, cudaDataType_t dt, void *D, const void *W, const void *X,
                                  const void *bias, int O, int N, int I, int epi, int out_f32, int ldd, int ref, int pieces) {
    if (ldd < O) ldd = O;
    if (pieces < 1) pieces = 1;
    gpt2__gemm *g = NULL;
    for (int i = 0; i < S->n_gemm && !g; i++) {
        gpt2__gemm *c = &S->gemm[i];
        if (c->O == O && c->N == N && c->I == I && c->epi == epi && c->out_f32 == out_f32 && c->dt == dt && c->ldd == ldd &&
            c->ref == ref && c->pieces == pieces)
            g = c;
    }
    if (!g) {
        if (S->n_gemm < GPT2__MAX_GEMMS) g = &S->gemm[S->n_gemm++];
        else {
            g = &S->gemm[S->gemm_next];
            S->gemm_next = (S->gemm_next + 1) % GPT2__MAX_GEMMS;
            cublasLtMatmulDescDestroy(g->desc);
            cublasLtMatrixLayoutDestroy(g->a); cublasLtMatrixLayoutDestroy(g->b); cublasLtMatrixLayoutDestroy(g->d);
        }
        memset(g, 0, sizeof *g);
        g->O = -1; /* not usable until complete */
        cublasOperation_t opT = CUBLAS_OP_T;
        cublasLtEpilogue_t ep = epi == GPT2__EPI_BIAS ? CUBLASLT_EPILOGUE_BIAS
                              : epi == GPT2__EPI_BIAS_ACT ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
        GPT2__LT(cublasLtMatmulDescCreate(&g->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        GPT2__LT(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof opT));
        GPT2__LT(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
        const int Ik = I / pieces; /* K per piece */
        GPT2__LT(cublasLtMatrixLayoutCreate(&g->a, dt, (uint64_t)Ik, (uint64_t)O, (int64_t)I));
        GPT2__LT(cublasLtMatrixLayoutCreate(&g->b, dt, (uint64_t)Ik, (uint64_t)N, (int64_t)I));
        GPT2__LT(cublasLtMatrixLayoutCreate(&g->d, out_f32 ? CUDA_R_32F : dt, (uint64_t)O, (uint64_t)N, (int64_t)ldd));
        GPT2__LT(gpt2__lt_batch(g->a, pieces, Ik));
        GPT2__LT(gpt2__lt_batch(g->b, pieces, Ik));
        GPT2__LT(gpt2__lt_batch(g->d, pieces, (int64_t)N * ldd));
        /* One arithmetic per weight shape and kind of row, whatever the row count N. Different kernels can round
           differently, so a free per-N choice would make a row's result depend on how many other rows share its
           step (and a request's tokens must not depend on its batch). The reference is
           the heuristic's pick for ref rows; for N rows the heuristic's best candidate of the same class
           (gpt2__algo_class: bit-identical results, any tile) runs, else the reference itself. */
        const int N_REF = ref;
        cublasLtMatmulPreference_t pref;
        GPT2__LT(cublasLtMatmulPreferenceCreate(&pref));
        cublasLtMatmulHeuristicResult_t res;
        int found = 0, how = 0;
        cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                &S->lt_ws_size, sizeof S->lt_ws_size);
        cublasLtMatrixLayout_t b_ref = NULL, d_ref = NULL;
        if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&b_ref, dt, (uint64_t)Ik, (uint64_t)N_REF, (int64_t)I);
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatrixLayoutCreate(&d_ref, out_f32 ? CUDA_R_32F : dt, (uint64_t)O, (uint64_t)N_REF, (int64_t)ldd);
        if (s == CUBLAS_STATUS_SUCCESS) s = gpt2__lt_batch(b_ref, pieces, Ik);
        if (s == CUBLAS_STATUS_SUCCESS) s = gpt2__lt_batch(d_ref, pieces, (int64_t)N_REF * ldd);
        /* the reference: the heuristic's first pick for ref rows that does not split K (its workspace would grow
           with N), else its first pick */
        cublasLtMatmulHeuristicResult_t cand[8];
        int nc = 0, rc[4], cc[4];
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatmulAlgoGetHeuristic(S->lt, g->desc, g->a, b_ref, d_ref, d_ref, pref, 8, cand, &nc);
        if (s == CUBLAS_STATUS_SUCCESS && nc > 0) {
            found = 1;
            res = cand[0];
            int whole = 0;
            for (int i = 0; i < nc && !whole; i++) {
                gpt2__algo_class(&cand[i].algo, cc);
                if (cc[1] <= 1) { res = cand[i]; whole = 1; }
            }
            /* none: the first pick with its split of K taken out, where cuBLASLt accepts that (F32 at 124M-774M:
               qkv's and the MLP's first class split K; without the split gpt2__few_row32_kernel can reproduce them) */
            if (!whole) {
                cublasLtMatmulHeuristicResult_t one = cand[0], chk1;
                const int k1 = 1;
                const cublasLtReductionScheme_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
                if (cublasLtMatmulAlgoConfigSetAttribute(&one.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &k1, sizeof k1) == CUBLAS_STATUS_SUCCESS &&
                    cublasLtMatmulAlgoConfigSetAttribute(&one.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &none, sizeof none) == CUBLAS_STATUS_SUCCESS &&
                    cublasLtMatmulAlgoCheck(S->lt, g->desc, g->a, b_ref, d_ref, d_ref, &one.algo, &chk1) == CUBLAS_STATUS_SUCCESS) {
                    one.workspaceSize = chk1.workspaceSize;
                    res = one;
                }
            }
            gpt2__algo_class(&res.algo, rc);
            cublasLtMatmulHeuristicResult_t chk;
            const int ref_ok = cublasLtMatmulAlgoCheck(S->lt, g->desc, g->a, g->b, g->d, g->d, &res.algo, &chk) == CUBLAS_STATUS_SUCCESS &&
                               chk.workspaceSize <= S->lt_ws_size;
            /* for N rows: the heuristic's best of the reference's class, else the reference */
            found = 0;
            if (N != N_REF && cublasLtMatmulAlgoGetHeuristic(S->lt, g->desc, g->a, g->b, g->d, g->d, pref, 8, cand, &nc) == CUBLAS_STATUS_SUCCESS)
                for (int i = 0; i < nc && !found; i++) {
                    gpt2__algo_class(&cand[i].algo, cc);
                    if (!memcmp(rc, cc, sizeof rc) && cand[i].workspaceSize <= S->lt_ws_size) { res = cand[i]; how = 1; found = 1; }
                }
            if (!found) found = ref_ok; /* else this N needs its own algorithm */
        }
        if (s == CUBLAS_STATUS_SUCCESS && !found) {
            how = 2;
            s = cublasLtMatmulAlgoGetHeuristic(S->lt, g->desc, g->a, g->b, g->d, g->d, pref, 1, &res, &found);
        }
        if (b_ref) cublasLtMatrixLayoutDestroy(b_ref);
        if (d_ref) cublasLtMatrixLayoutDestroy(d_ref);
        cublasLtMatmulPreferenceDestroy(pref);
        if (s != CUBLAS_STATUS_SUCCESS || !found)
            return gpt2__fail(GPT2_ERR_DEVICE, "%s:%d: cuBLASLt has no algorithm for %d x %d x %d (epilogue %d): %s",
                              __FILE__, __LINE__, O, N, I, epi, cublasLtGetStatusString(s));
        g->algo = res.algo;
        g->O = O; g->N = N; g->I = I; g->epi = epi; g->out_f32 = out_f32; g->dt = dt; g->ldd = ldd; g->ref = ref; g->how = how;
        g->pieces = pieces;
    }
    if (epi != GPT2__EPI_NONE)
        GPT2__LT(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    const float one = 1.0f, zero = 0.0f;
    GPT2__LT(cublasLtMatmul(S->lt, g->desc, &one, W, g->a, X, g->b, &zero, D, g->d, D, g->d, &g->algo,
                            L->lt_ws, S->lt_ws_size, L->stream));
    return GPT2_OK;
}

/* == [GPT2:OP_FEW_ROW] == few-row products (decode rows <= 16), with the layer norm folded in (ln_fold) ========= */

/* The residual add + layer norm that gpt2__few_row_kernel applies to its own input when LNE > 0 (few decode rows, no
   prompt rows: gpt2__cuda_run_t), instead of a gpt2__residual_ln_kernel launch before it: X row r is that kernel's
   output for x[r] + ((part[0][r] + part[1][r]) + ...) + bias, gain g, shift b. Block (0, 0) writes the updated rows
   to xo, the other of two buffers (every block reads x). */
template <typename T> struct gpt2__ln_fold {
    const float *x;
    float *xo;
    const float *part;
    size_t stride;
    int pieces;
    const T *bias;
    const float *g, *b;
    float eps;
};

/* The block's sum of the V partial sums a thread holds, one per thread of gpt2__residual_ln_kernel it plays (thread t
   plays t + 32 NW k), in gpt2__block_sum's order: a butterfly within each played warp, then the eight warps in order. */
template <int NW, int V>
static __device__ __forceinline__ float gpt2__ln_fold_sum(float (&p)[V], float *sh) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
    for (int k = 0; k < V; k++)
        for (int o = 16; o; o >>= 1) p[k] += __shfl_xor_sync(0xffffffffu, p[k], o);
    __syncthreads();
    if (lane == 0)
#pragma unroll
        for (int k = 0; k < V; k++) sh[w + NW * k] = p[k];
    __syncthreads();
    float tot = 0.0f;
    for (int i = 0; i < 8; i++) tot += sh[i];
    return tot;
}

/* One row of gpt2__residual_ln_kernel<T, E> (mode pieces) by a block of NT = 32 NW threads, each playing V = 256 / NT
   of that kernel's 256 threads (thread t plays t + NT k): every partial sum, butterfly and the sum over the eight
   warps run in that kernel's order, so y (T [C], here shared memory) is its output bit for bit. G, B, BI: this
   thread's gain, shift and bias chunks, loaded before the PDL wait. sh: 8 floats. */
template <typename T, int NW, int E>
static __device__ __forceinline__ void gpt2__ln_fold_row(const gpt2__ln_fold<T> &a, int r, int C, T *y, bool write,
                                                         const float4 (&G)[256 / (32 * NW)][E], const float4 (&B)[256 / (32 * NW)][E],
                                                         const float4 (&BI)[256 / (32 * NW)][E], float *sh) {
    constexpr int NT = 32 * NW, V = 256 / NT;
    const int t = threadIdx.x;
    const float *xr = a.x + (size_t)r * C, *pr = a.part + (size_t)r * C;
    float4 v[V][E], pp[V][E][4];
    /* every load of the row issued before the first add: chunks past C and pieces past a.pieces reload chunk 0 and
       piece 0, unused */
#pragma unroll
    for (int k = 0; k < V; k++)
#pragma unroll
        for (int j = 0; j < E; j++) {
            const int c = 4 * (t + NT * k + 256 * j), cc = c < C ? c : 0;
            v[k][j] = gpt2__ld4(xr + cc);
#pragma unroll
            for (int q = 0; q < 4; q++) pp[k][j][q] = gpt2__ld4(pr + cc + (q < a.pieces ? q : 0) * a.stride);
        }
#pragma unroll
    for (int k = 0; k < V; k++)
#pragma unroll
        for (int j = 0; j < E; j++) {
            if (4 * (t + NT * k + 256 * j) >= C) { v[k][j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f); continue; }
            float4 s = pp[k][j][0];
#pragma unroll
            for (int q = 1; q < 4; q++)
                if (q < a.pieces) s = gpt2__add4(s, pp[k][j][q]);
            v[k][j] = gpt2__add4(v[k][j], gpt2__add4(s, BI[k][j]));
        }
    float sum[V], ss[V];
#pragma unroll
    for (int k = 0; k < V; k++) {
        sum[k] = 0.0f;
#pragma unroll
        for (int j = 0; j < E; j++) {
            const int c = 4 * (t + NT * k + 256 * j);
            if (c >= C) continue;
            if (write) gpt2__st4(a.xo + (size_t)r * C + c, v[k][j]);
            sum[k] += v[k][j].x; sum[k] += v[k][j].y; sum[k] += v[k][j].z; sum[k] += v[k][j].w;
        }
    }
    const float mean = gpt2__ln_fold_sum<NW, V>(sum, sh) / (float)C;
#pragma unroll
    for (int k = 0; k < V; k++) {
        ss[k] = 0.0f;
#pragma unroll
        for (int j = 0; j < E; j++) {
            if (4 * (t + NT * k + 256 * j) >= C) continue;
            const float dx = v[k][j].x - mean, dy = v[k][j].y - mean, dz = v[k][j].z - mean, dw = v[k][j].w - mean;
            ss[k] += dx * dx; ss[k] += dy * dy; ss[k] += dz * dz; ss[k] += dw * dw;
        }
    }
    const float rstd = rsqrtf(gpt2__ln_fold_sum<NW, V>(ss, sh) / (float)C + a.eps);
#pragma unroll
    for (int k = 0; k < V; k++)
#pragma unroll
        for (int j = 0; j < E; j++) {
            const int c = 4 * (t + NT * k + 256 * j);
            if (c >= C) continue;
            const float4 g = G[k][j], b = B[k][j];
            gpt2__st4(y + c, make_float4((v[k][j].x - mean) * rstd * g.x + b.x, (v[k][j].y - mean) * rstd * g.y + b.y,
                                         (v[k][j].z - mean) * rstd * g.z + b.z, (v[k][j].w - mean) * rstd * g.w + b.w));
        }
}
/* This thread's chunks of the LN's gain, shift and the residual's bias, as gpt2__ln_fold_row takes them (G, B, BI):
   loaded before the PDL wait, since they never depend on the kernel before. A block of 32 NW threads, width C. */
template <typename T, int NW, int E>
static __device__ __forceinline__ void gpt2__ln_fold_params(const gpt2__ln_fold<T> &a, int C, float4 (&G)[256 / (32 * NW)][E],
                                                            float4 (&B)[256 / (32 * NW)][E], float4 (&BI)[256 / (32 * NW)][E]) {
    const int t = threadIdx.x;
#pragma unroll
    for (int k = 0; k < 256 / (32 * NW); k++)
#pragma unroll
        for (int j = 0; j < E; j++) {
            const int c = 4 * (t + 32 * NW * k + 256 * j);
            if (c >= C) continue;
            G[k][j] = gpt2__ld4(a.g + c);
            B[k][j] = gpt2__ld4(a.b + c);
            BI[k][j] = gpt2__ld4(a.bias + c);
        }
}

/* The ring stages of an LN-folded product of width C in its FIT form: GPT2__LN_FOLD_ST, or from width GPT2__LN_FOLD_FIT_C on
   just as many as K has chunks where that is fewer (all of them are issued before the PDL wait either way; the block
   then leaves the SM more room for the kernels beside it). At width 768 fewer stages were slower on the H100, hence
   GPT2__LN_FOLD_FIT_C. On by default (gpt2__cuda_state.ln_fold_fit). */

static __host__ __device__ int gpt2__ln_fold_stages(int C) {
    const int nch = (C + GPT2__FEW_ROW_KC - 1) / GPT2__FEW_ROW_KC;
    return C >= GPT2__LN_FOLD_FIT_C && nch < GPT2__LN_FOLD_ST ? nch : GPT2__LN_FOLD_ST;
}

/* Decode rows of a linear layer, few of them (n <= GPT2__FEW_ROW_MAX), on the tensor cores, computing what cuBLASLt's
   pinned algorithm computes for them, bit for bit where gpt2__few_row_check finds it so. On the H100 cuBLASLt's
   kernels add each 16-wide slice of K in one MMA, the slices in order, into an fp32 accumulator
   that starts at 0; this kernel does the same, so a row's result does not depend on which of the two ran it.
   D = X [n][ld I] @ W^T over piece p of K (Ik = I / pieces elements from p*Ik), W [O][I]; as gpt2__gemm_run:
   out_f32: D [p][n][ldd] fp32, the sums alone; else D [n][ldd] in T, sum + bias (T) in fp32, rounded once, and with
   act, gpt2__act of that, rounded again (what cuBLASLt with the bias and gpt2__act_kernel give).
   Ik a multiple of 16, O of 8, rows 16-byte aligned.
   Grid: (O / (8 NW) rounded up, pieces); block: NW warps, warp w owning columns o0+8w..+7: one m16n8k16 chain
   over K, whose step time (not the weight reads) bounds a one-row product, so a step is two ldmatrix and two MMAs
   per 32 of K (R16 false, n <= 8: one ldmatrix of X feeds two slices; R16: one per slice). All blocks of a GPT-2 product fit on the GPU at once;
   each streams its 8 NW rows of W (L2 evict-first) in slices of KC through a ring of ST cp.async stages, the first ST-1 issued
   before the PDL wait (weights never depend on the kernel before, so they stream while it finishes), then lets
   the next kernel launch, then reads X's n rows. Tuned on the H100.
   LNE > 0 (gpt2__ln_fold_run: NW 8, one piece, n <= GPT2__LN_FOLD_ROWS, X unused): X's rows are instead the layer norm of
   the residual rows ln_fold names, computed by the block into shared memory (gpt2__ln_fold_row; LNE chunks per thread as
   gpt2__residual_ln_kernel's E), with the LN's gain, shift and bias loaded before the PDL wait. FIT (with
   gpt2__cuda_state.ln_fold_fit, where gpt2__ln_fold_stages is fewer than ST): a ring of that many stages, a form of its own
   so that the other products' code stays as it was (a ring sized at run time in every LN-folded product was slower). */

template <typename T, bool R16, int NW = GPT2__FEW_ROW_NW, int KC = GPT2__FEW_ROW_KC, int ST = GPT2__FEW_ROW_ST, int LNE = 0, bool FIT = false>
__global__ void __launch_bounds__(32 * NW) gpt2__few_row_kernel(const T *__restrict__ W, const T *__restrict__ X, void *__restrict__ D,
                                                                const T *__restrict__ bias, int O, int n, int I, int Ik, int ldd, int out_f32,
                                                                int act, gpt2__ln_fold<T> ln_fold) {
#if __CUDA_ARCH__ >= 800
    constexpr int LDW = KC + 8, COLS = 8 * NW, PER = KC / 32; /* PER: 16-byte copies per thread per stage */
    static_assert(KC % 32 == 0, "a stage holds whole pairs of 16-wide slices");
    extern __shared__ __align__(16) unsigned char gpt2__few_row_sh[];
    const int LDX = ((Ik + 31) & ~31) + 8, tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    /* the ring, then X's n rows; chunk c goes to stage c % ST, so a K of nch < ST chunks needs only nch stages
       (FIT: the LN-folded form's ring of gpt2__ln_fold_stages) */
    T *Ws = (T *)gpt2__few_row_sh, *Xs = Ws + (FIT ? gpt2__ln_fold_stages(Ik) : ST) * COLS * LDW;
    const int o0 = blockIdx.x * COLS, piece = blockIdx.y, nch = (Ik + KC - 1) / KC;
    const T *Wp = W + (size_t)piece * Ik, *Xp = X + (size_t)piece * Ik;
    /* this thread's copies of each stage: W row o0 + cr[e], K offset cq[e] within the stage */
    const T *src[PER];
    int dst[PER], cq[PER];
    bool rok[PER];
#pragma unroll
    for (int e = 0; e < PER; e++) {
        const int i = tid + e * 32 * NW, r = i / (KC / 8);
        cq[e] = (i % (KC / 8)) * 8;
        rok[e] = o0 + r < O;
        src[e] = Wp + (rok[e] ? (size_t)(o0 + r) * I : 0) + cq[e];
        dst[e] = r * LDW + cq[e];
    }
    /* the weights stream with L2's evict-first policy: the KV cache and activations of a batch-1 step stay */
    const uint64_t skpol = gpt2__evict_first();
#define GPT2__FEW_ROW_ISSUE(c)                                                                         \
    do {                                                                                          \
        if ((c) < nch) {                                                                          \
            T *s_ = Ws + ((c) % ST) * COLS * LDW;                                                 \
            _Pragma("unroll") for (int e_ = 0; e_ < PER; e_++) {                                  \
                const bool ok_ = rok[e_] && (c) * KC + cq[e_] < Ik;                               \
                gpt2__cp16_pol(s_ + dst[e_], ok_ ? src[e_] + (size_t)(c) * KC : W, ok_, skpol);  \
            }                                                                                     \
        }                                                                                         \
        gpt2__cp_commit();                                                                        \
    } while (0)
    for (int c = 0; c < ST - 1; c++) GPT2__FEW_ROW_ISSUE(c);
    /* the epilogue's bias, also before the wait (it would otherwise be a memory round trip after the chain) */
    const int g = lane >> 2, col = o0 + w * 8 + 2 * (lane & 3);
    float b0 = 0.0f, b1 = 0.0f;
    if (bias && !out_f32 && col < O) { b0 = gpt2__f(bias[col]); b1 = gpt2__f(bias[col + 1]); }
    /* LNE > 0: X is the layer norm of the residual rows, computed here (gpt2__ln_fold_row; Ik == I == C) */
    constexpr int LV = 256 / (32 * NW), LE = LNE > 0 ? LNE : 1;
    float4 lg[LV][LE], lb[LV][LE], lbi[LV][LE];
    if constexpr (LNE > 0) gpt2__ln_fold_params<T, NW, LE>(ln_fold, Ik, lg, lb, lbi);
    gpt2__pdl_enter();
    if constexpr (LNE > 0) {
        static_assert(256 % (32 * NW) == 0, "threads play whole warps of gpt2__residual_ln_kernel");
        __shared__ float lsh[8];
        for (int r = 0; r < n; r++)
            gpt2__ln_fold_row<T, NW, LE>(ln_fold, r, Ik, Xs + r * LDX, blockIdx.x == 0 && blockIdx.y == 0, lg, lb, lbi, lsh);
        __syncthreads();
    } else
    /* X's n rows into shared memory, four 16-byte loads in flight per thread (the MMAs' rows n..15 read row 0: an
       MMA row depends on its own operand row alone, and those rows' results are never stored) */
    for (int i0 = tid; i0 < n * (Ik / 8); i0 += 4 * 32 * NW) {
        uint4 v[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int i = i0 + j * 32 * NW, r = i / (Ik / 8), q = (i % (Ik / 8)) * 8;
            if (i < n * (Ik / 8)) v[j] = *(const uint4 *)(Xp + (size_t)r * I + q);
        }
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int i = i0 + j * 32 * NW, r = i / (Ik / 8), q = (i % (Ik / 8)) * 8;
            if (i < n * (Ik / 8)) *(uint4 *)(Xs + r * LDX + q) = v[j];
        }
    }
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    /* ldmatrix row addresses: W rows w*8 + (lane & 7), 8 K apart per matrix; X rows (lane & 7) (+ 8) */
    const int wrow = (w * 8 + (lane & 7)) * LDW + 8 * (lane >> 3);
    const int xr = R16 ? (lane & 7) + 8 * ((lane >> 3) & 1) : lane & 7; /* rows past n read row 0: results unused */
    const int xrow = (xr < n ? xr : 0) * LDX + 8 * (R16 ? lane >> 4 : lane >> 3);
    for (int c = 0; c < nch; c++) {
        gpt2__cp_wait<ST - 2>();
        if (NW == 1) __syncwarp(); else __syncthreads();
        GPT2__FEW_ROW_ISSUE(c + ST - 1);
        const T *Wc = Ws + (c % ST) * COLS * LDW + wrow, *Xc = Xs + xrow + c * KC;
        const int kn = Ik - c * KC; /* K left, a multiple of 16 */
#pragma unroll
        for (int kk = 0; kk < KC; kk += 32) /* two 16-wide slices: one ldmatrix of W, one or two of X */
            if (kk < kn) {
                uint32_t b[4], a0[4], a1[4];
                gpt2__ldsm4(b, Wc + kk);
                if (R16) {
                    gpt2__ldsm4(a0, Xc + kk);
                    if (kk + 16 < kn) gpt2__ldsm4(a1, Xc + kk + 16);
                } else {
                    uint32_t xa[4];
                    gpt2__ldsm4(xa, Xc + kk);
                    a0[0] = xa[0]; a0[2] = xa[1]; a1[0] = xa[2]; a1[2] = xa[3];
                    a0[1] = a0[3] = a1[1] = a1[3] = 0u;
                }
                gpt2__mma(acc, a0, b[0], b[1], T());
                if (kk + 16 < kn) gpt2__mma(acc, a1, b[2], b[3], T());
            }
    }
#undef GPT2__FEW_ROW_ISSUE
    gpt2__cp_wait<0>();
    if (col >= O) return; /* the whole warp: O is a multiple of 8 */
    for (int hh = 0; hh < 2; hh++) {
        const int r = g + 8 * hh;
        if (r >= n) break;
        float v0 = acc[2 * hh], v1 = acc[2 * hh + 1];
        if (out_f32) {
            *(float2 *)((float *)D + ((size_t)piece * n + r) * ldd + col) = make_float2(v0, v1);
        } else {
            if (bias) { v0 += b0; v1 += b1; }
            T *o = (T *)D + (size_t)r * ldd + col;
            gpt2__put(o, v0);
            gpt2__put(o + 1, v1);
            if (act != GPT2__ACT_NONE) { gpt2__put(o, gpt2__act(gpt2__f(o[0]), act)); gpt2__put(o + 1, gpt2__act(gpt2__f(o[1]), act)); }
        }
    }
#endif
}

/* Decode products of at most GPT2__FEW_ROW_MAX rows in F32 on the CUDA cores, with the bits of cuBLASLt's F32 decode
   class where that class adds K in one fused multiply-add chain per output, in order (no split of K inside
   cuBLASLt, which gpt2__gemm_run's reference avoids: on the H100 every F32 decode product of the published
   shapes; gpt2__few_row_check keeps a product on this kernel only where every output bit agrees). D = X [n][I] @ W^T
   per piece of K as
   gpt2__gemm_run: piece p of `gridDim.y` covers [p Ik, (p+1) Ik) into D + p n ldd (fp32, no bias: out_f32), or one
   piece + bias (fp32 add after the chain) then gpt2__act(act), as every F32 decode row applies it.
   Grid: (ceil(O / COLS), pieces); block: one warp, lane l the output column COLS blockIdx.x + l (COLS 32, or 16
   where a product has few blocks, gpt2__few_row32_cols: lanes 16..31 then repeat lanes 0..15 and store nothing), its chain
   over k in order with one accumulator per row (NR rows at most, n at run time). W's COLS rows stream through shared
   memory in chunks of 16 k (cp.async, a ring of ST = GPT2__FEW_ROW32_ST * 32 / COLS chunks, 60 KB either way; [COLS][16 + 4]
   floats each, so a lane's 16-byte reads of its own row are free of bank conflicts), the first ST - G issued before
   the PDL wait; X's n rows of the piece follow into shared memory after it. The warp waits once for every G =
   GPT2__FEW_ROW32_G * 32 / COLS chunks (one wait a chunk spent more on waiting than the chain's 16 fma took).
   Ik a multiple of 16 (gpt2__few_row32_fits). */

template <int NR, int COLS>
__global__ void __launch_bounds__(32) gpt2__few_row32_kernel(const float *__restrict__ W, const float *__restrict__ X, float *__restrict__ D,
                                                             const float *__restrict__ bias, int O, int n, int I, int Ik, int ldd, int act) {
    extern __shared__ __align__(16) float gpt2__few_row32_sh[];
    constexpr int KC = GPT2__FEW_ROW32_KC, ST = GPT2__FEW_ROW32_ST * 32 / COLS, G = GPT2__FEW_ROW32_G * 32 / COLS, LD = KC + 4;
    static_assert(ST % G == 0 && ST > G, "GPT2__FEW_ROW32_G divides GPT2__FEW_ROW32_ST");
    static_assert(COLS == 32 || COLS == 16, "32 or 16 columns a warp");
    float *ring = gpt2__few_row32_sh, *xs = ring + ST * COLS * LD; /* xs: [n][Ik] */
    const int lane = threadIdx.x, c0 = blockIdx.x * COLS, p = blockIdx.y, nch = Ik / KC;
    const float *wp = W + (size_t)p * Ik;
    /* chunk c into ring slot c % ST: COLS rows x 16 k, 4 COLS copies of 16 bytes, COLS / 8 a lane (row lane / 4 + 8 i,
       quarter lane % 4) */
    auto issue = [&](int c) {
        float *dst = ring + (c % ST) * COLS * LD;
#pragma unroll
        for (int i = 0; i < COLS / 8; i++) {
            const int r = (lane >> 2) + 8 * i, q = (lane & 3) * 4;
            const bool ok = c0 + r < O;
            gpt2__cp16(dst + r * LD + q, wp + (size_t)(ok ? c0 + r : 0) * I + (size_t)c * KC + q, ok);
        }
    };
    for (int c = 0; c < ST - G; c++) {
        if (c < nch) issue(c);
        gpt2__cp_commit();
    }
    gpt2__pdl_enter();
    for (int i = lane * 4; i < n * Ik; i += 32 * 4) {
        const int r = i / Ik, k = i % Ik;
        *(float4 *)(xs + i) = *(const float4 *)(X + (size_t)r * I + (size_t)p * Ik + k);
    }
    float acc[NR];
#pragma unroll
    for (int r = 0; r < NR; r++) acc[r] = 0.0f;
    /* G chunks a wait: chunks c + ST - G .. c + ST - 1 refill the slots that the G chunks before c left */
    for (int c = 0; c < nch; c += G) {
#pragma unroll
        for (int j = 0; j < G; j++) {
            if (c + ST - G + j < nch) issue(c + ST - G + j);
            gpt2__cp_commit();
        }
        if (c + G <= nch) gpt2__cp_wait<ST - G>();
        else gpt2__cp_wait<0>();
        __syncwarp();
#pragma unroll
        for (int j = 0; j < G; j++) {
            if (c + j >= nch) break;
            const float *wr = ring + ((c + j) % ST) * COLS * LD + (lane % COLS) * LD;
            const float *xr = xs + (c + j) * KC;
#pragma unroll
            for (int k = 0; k < KC; k += 4) {
                const float4 w = *(const float4 *)(wr + k);
#pragma unroll
                for (int r = 0; r < NR; r++) {
                    if (r < n) {
                        const float4 x = *(const float4 *)(xr + (size_t)r * Ik + k);
                        acc[r] = fmaf(x.x, w.x, acc[r]);
                        acc[r] = fmaf(x.y, w.y, acc[r]);
                        acc[r] = fmaf(x.z, w.z, acc[r]);
                        acc[r] = fmaf(x.w, w.w, acc[r]);
                    }
                }
            }
        }
        __syncwarp(); /* every lane past these slots before a later issue refills them */
    }
    const int col = c0 + lane;
    if (lane >= COLS || col >= O) return;
#pragma unroll
    for (int r = 0; r < NR; r++) {
        if (r >= n) break;
        if (bias) {
            float v = acc[r] + bias[col];
            v = gpt2__act(v, act);
            D[(size_t)r * ldd + col] = v;
        } else D[((size_t)p * n + r) * ldd + col] = acc[r];
    }
}

/* gpt2__few_row_kernel's shared memory (bytes): n rows of X's piece of K and a W ring of st stages */

static size_t gpt2__few_row_smem(int n, int Ik, size_t es, int nw = GPT2__FEW_ROW_NW, int kc = GPT2__FEW_ROW_KC, int st = GPT2__FEW_ROW_ST) {
    return ((size_t)st * 8 * nw * (kc + 8) + (size_t)n * (((Ik + 31) & ~31) + 8)) * es;
}
/* Whether gpt2__few_row_kernel can take this product (its shape; whether it computes cuBLASLt's bits is
   gpt2__few_row_check's question). */
static int gpt2__few_row_fits(int O, int n, int I, int pieces, size_t es) {
    return es == 2 && n >= 1 && n <= GPT2__FEW_ROW_MAX && O % 8 == 0 && pieces >= 1 && I % pieces == 0 && (I / pieces) % 16 == 0 &&
           gpt2__few_row_smem(GPT2__FEW_ROW_MAX, I / pieces, es) <= GPT2__FEW_ROW_SMEM_MAX;
}
/* Raises gpt2__few_row_kernel<T>'s shared-memory limit; 0 when it cannot run here (built without sm_80+ code). */
template <typename T, int NW = GPT2__FEW_ROW_NW, int KC = GPT2__FEW_ROW_KC, int ST = GPT2__FEW_ROW_ST>
static int gpt2__few_row_enable(void) {
    cudaFuncAttributes fa;
    return cudaFuncSetAttribute(gpt2__few_row_kernel<T, false, NW, KC, ST>, cudaFuncAttributeMaxDynamicSharedMemorySize, GPT2__FEW_ROW_SMEM_MAX) == cudaSuccess &&
           cudaFuncSetAttribute(gpt2__few_row_kernel<T, true, NW, KC, ST>, cudaFuncAttributeMaxDynamicSharedMemorySize, GPT2__FEW_ROW_SMEM_MAX) == cudaSuccess &&
           cudaFuncGetAttributes(&fa, gpt2__few_row_kernel<T, false, NW, KC, ST>) == cudaSuccess && fa.ptxVersion >= 80;
}
/* The product of gpt2__gemm_run (n rows; epilogue bias when bias is set and not out_f32, else none; T half or
   bfloat16) by gpt2__few_row_kernel, then gpt2__act(act); pdl as gpt2__launch. */
template <typename T, int NW = GPT2__FEW_ROW_NW, int KC = GPT2__FEW_ROW_KC, int ST = GPT2__FEW_ROW_ST>
static gpt2_status gpt2__few_row_run(cudaStream_t st, int pdl, void *D, const T *W, const T *X, const T *bias, int O, int n,
                                     int I, int out_f32, int ldd, int pieces, int act = GPT2__ACT_NONE) {
    if (ldd < O) ldd = O;
    const int Ik = I / pieces;
    return gpt2__launch(n > 8 ? gpt2__few_row_kernel<T, true, NW, KC, ST> : gpt2__few_row_kernel<T, false, NW, KC, ST>,
                        dim3((unsigned)((O + 8 * NW - 1) / (8 * NW)), (unsigned)pieces), dim3(32 * NW),
                        gpt2__few_row_smem(n, Ik, sizeof(T), NW, KC, ST), st, pdl, W, X, D, out_f32 ? (const T *)NULL : bias, O, n, I, Ik, ldd,
                        out_f32, out_f32 ? (int)GPT2__ACT_NONE : act, gpt2__ln_fold<T>{});
}

/* gpt2__few_row_run with GPT2__FEW_ROW_NW warps a block, or GPT2__FEW_ROW_NW_WIDE where the product still has two blocks an SM
   at that many (columns / 8 / NW_WIDE blocks per piece). Each warp's chain is the same either way, so are the bits. */
template <typename T>
static gpt2_status gpt2__few_row_go(const gpt2__cuda_state *S, cudaStream_t st, int pdl, void *D, const T *W, const T *X,
                                    const T *bias, int O, int n, int I, int out_f32, int ldd, int pieces, int act) {
    const bool wide = (long long)(O / (8 * GPT2__FEW_ROW_NW_WIDE)) * pieces >= 2LL * S->sms &&
                      gpt2__few_row_smem(GPT2__FEW_ROW_MAX, I / pieces, sizeof(T), GPT2__FEW_ROW_NW_WIDE) <= GPT2__FEW_ROW_SMEM_MAX;
    const int nw = wide ? GPT2__FEW_ROW_NW_WIDE : GPT2__FEW_ROW_NW;
    /* the X rows' shared memory beside a full ring leaves too few blocks an SM for all of them at once (1558M from 6
       rows): GPT2__FEW_ROW_ST_SHORT stages (the same chains, so the same bits) */
    const long long blocks = (long long)((O + 8 * nw - 1) / (8 * nw)) * pieces;
    const size_t per = gpt2__few_row_smem(n, I / pieces, sizeof(T), nw) + 1024;
    const bool shortr = n > 1 && S->sm_smem > 0 && blocks > (long long)(S->sm_smem / per) * S->sms;
    if (wide)
        return shortr ? gpt2__few_row_run<T, GPT2__FEW_ROW_NW_WIDE, GPT2__FEW_ROW_KC, GPT2__FEW_ROW_ST_SHORT>(st, pdl, D, W, X, bias, O, n, I, out_f32, ldd,
                                                                                              pieces, act)
                      : gpt2__few_row_run<T, GPT2__FEW_ROW_NW_WIDE>(st, pdl, D, W, X, bias, O, n, I, out_f32, ldd, pieces, act);
    return shortr ? gpt2__few_row_run<T, GPT2__FEW_ROW_NW, GPT2__FEW_ROW_KC, GPT2__FEW_ROW_ST_SHORT>(st, pdl, D, W, X, bias, O, n, I, out_f32, ldd, pieces,
                                                                                    act)
                  : gpt2__few_row_run<T>(st, pdl, D, W, X, bias, O, n, I, out_f32, ldd, pieces, act);
}

/* gpt2__few_row32_kernel (F32): its shared memory, whether it takes a product's shape, its limit raised (0: it cannot
   run here), and the product of gpt2__gemm_run by it (bias set: one piece, + bias, then gpt2__act(act); else fp32
   pieces); pdl as gpt2__launch. */
static size_t gpt2__few_row32_smem(int n, int Ik) { return ((size_t)GPT2__FEW_ROW32_ST * 32 * (GPT2__FEW_ROW32_KC + 4) + (size_t)n * Ik) * sizeof(float); }
static int gpt2__few_row32_fits(int O, int n, int I, int pieces) {
    return O >= 1 && n >= 1 && n <= GPT2__FEW_ROW_MAX && pieces >= 1 && I % pieces == 0 && (I / pieces) % GPT2__FEW_ROW32_KC == 0 &&
           I % 4 == 0 && gpt2__few_row32_smem(GPT2__FEW_ROW_MAX, I / pieces) <= GPT2__FEW_ROW_SMEM_MAX;
}
template <int COLS> static int gpt2__few_row32_enable_c(void) {
    return cudaFuncSetAttribute(gpt2__few_row32_kernel<1, COLS>, cudaFuncAttributeMaxDynamicSharedMemorySize, GPT2__FEW_ROW_SMEM_MAX) == cudaSuccess &&
           cudaFuncSetAttribute(gpt2__few_row32_kernel<4, COLS>, cudaFuncAttributeMaxDynamicSharedMemorySize, GPT2__FEW_ROW_SMEM_MAX) == cudaSuccess &&
           cudaFuncSetAttribute(gpt2__few_row32_kernel<GPT2__FEW_ROW_MAX, COLS>, cudaFuncAttributeMaxDynamicSharedMemorySize, GPT2__FEW_ROW_SMEM_MAX) == cudaSuccess;
}
static int gpt2__few_row32_enable(void) { return gpt2__few_row32_enable_c<32>() && gpt2__few_row32_enable_c<16>(); }
/* Columns a warp for a product of O columns in `pieces` pieces on a GPU of sms SMs: 16 where 32 would make fewer
   blocks than 5/4 of the SM count (then twice the warps stream the weights; each column's chain, so its bits, is
   the same either way), else 32 */
static int gpt2__few_row32_cols(int O, int pieces, int sms) {
    return 4 * (long long)((O + 31) / 32) * pieces < (long long)sms * GPT2__FEW_ROW32_NARROW ? 16 : 32;
}
static gpt2_status gpt2__few_row32_run(cudaStream_t st, int pdl, void *D, const float *W, const float *X, const float *bias, int O, int n,
                                       int I, int ldd, int pieces, int act, int cols) {
    if (ldd < O) ldd = O;
    const int Ik = I / pieces;
    void (*k)(const float *, const float *, float *, const float *, int, int, int, int, int, int) =
        cols == 16 ? (n <= 1 ? gpt2__few_row32_kernel<1, 16> : n <= 4 ? gpt2__few_row32_kernel<4, 16> : gpt2__few_row32_kernel<GPT2__FEW_ROW_MAX, 16>)
                   : (n <= 1 ? gpt2__few_row32_kernel<1, 32> : n <= 4 ? gpt2__few_row32_kernel<4, 32> : gpt2__few_row32_kernel<GPT2__FEW_ROW_MAX, 32>);
    cols = cols == 16 ? 16 : 32;
    return gpt2__launch(k, dim3((unsigned)((O + cols - 1) / cols), (unsigned)pieces), dim3(32), gpt2__few_row32_smem(n, Ik), st, pdl, W, X,
                        (float *)D, bias, O, n, I, Ik, ldd, act);
}

/* gpt2__few_row_kernel with its own residual + layer norm (gpt2__ln_fold): GPT2__LN_FOLD_NW warps a block, so that a block
   has enough threads to load a row at once; E by C as gpt2__residual_ln. */
/* Raises the kernel's dynamic shared-memory limit to all a block may have on this GPU less its static part; that
   limit, or 0 when it cannot run here */
template <typename T, int E, bool FIT>
static int gpt2__ln_fold_enable_e(int optin) {
    cudaFuncAttributes fa;
    void (*k)(const T *, const T *, void *, const T *, int, int, int, int, int, int, int, gpt2__ln_fold<T>) =
        gpt2__few_row_kernel<T, false, GPT2__LN_FOLD_NW, GPT2__FEW_ROW_KC, GPT2__LN_FOLD_ST, E, FIT>;
    if (cudaFuncGetAttributes(&fa, k) != cudaSuccess || fa.ptxVersion < 80 || (int)fa.sharedSizeBytes >= optin) return 0;
    const int smem = optin - (int)fa.sharedSizeBytes;
    return cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) == cudaSuccess ? smem : 0;
}
/* Sets S->ln_fold_smem, the dynamic shared memory every form may use; 0 when they cannot run here. */
template <typename T>
static int gpt2__ln_fold_enable(gpt2__cuda_state *S) {
    int optin = 0;
    if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, S->device) != cudaSuccess) optin = 0;
    int lim[6] = {gpt2__ln_fold_enable_e<T, 1, false>(optin), gpt2__ln_fold_enable_e<T, 2, false>(optin), gpt2__ln_fold_enable_e<T, 4, false>(optin),
                  gpt2__ln_fold_enable_e<T, 1, true>(optin),  gpt2__ln_fold_enable_e<T, 2, true>(optin),  gpt2__ln_fold_enable_e<T, 4, true>(optin)};
    cudaGetLastError();
    S->ln_fold_smem = lim[0];
    for (int i = 1; i < 6; i++) if (lim[i] < S->ln_fold_smem) S->ln_fold_smem = lim[i];
    return S->ln_fold_smem > 0;
}
/* The ring stages of the LN-folded products of width C as S runs them */
static int gpt2__ln_fold_ring(const gpt2__cuda_state *S, int C) { return S->ln_fold_fit ? gpt2__ln_fold_stages(C) : GPT2__LN_FOLD_ST; }
/* D [n][O] (T) = LN(residual rows) @ W^T + bias (then gpt2__act(act)), the residual rows updated into ln_fold.xo */
template <typename T>
static gpt2_status gpt2__ln_fold_run(gpt2__cuda_state *S, const gpt2__lane *L, void *D, const void *W, const void *bias, int O, int n, int C, int act,
                                     gpt2__ln_fold<T> ln_fold) {
    if constexpr (sizeof(T) != 2) return gpt2__fail(GPT2_ERR_ARG, "%s:%d: gpt2__ln_fold has no F32 form", __FILE__, __LINE__);
    else {
    const int st = gpt2__ln_fold_ring(S, C);
    const bool fit = st < GPT2__LN_FOLD_ST;
    void (*k)(const T *, const T *, void *, const T *, int, int, int, int, int, int, int, gpt2__ln_fold<T>) =
        C <= 1024 ? (fit ? gpt2__few_row_kernel<T, false, GPT2__LN_FOLD_NW, GPT2__FEW_ROW_KC, GPT2__LN_FOLD_ST, 1, true>
                         : gpt2__few_row_kernel<T, false, GPT2__LN_FOLD_NW, GPT2__FEW_ROW_KC, GPT2__LN_FOLD_ST, 1>)
        : C <= 2048 ? (fit ? gpt2__few_row_kernel<T, false, GPT2__LN_FOLD_NW, GPT2__FEW_ROW_KC, GPT2__LN_FOLD_ST, 2, true>
                           : gpt2__few_row_kernel<T, false, GPT2__LN_FOLD_NW, GPT2__FEW_ROW_KC, GPT2__LN_FOLD_ST, 2>)
                    : (fit ? gpt2__few_row_kernel<T, false, GPT2__LN_FOLD_NW, GPT2__FEW_ROW_KC, GPT2__LN_FOLD_ST, 4, true>
                           : gpt2__few_row_kernel<T, false, GPT2__LN_FOLD_NW, GPT2__FEW_ROW_KC, GPT2__LN_FOLD_ST, 4>);
    if (C > 4096) return gpt2__fail(GPT2_ERR_ARG, "%s:%d: gpt2__ln_fold over width %d", __FILE__, __LINE__, C);
    return gpt2__launch(k, dim3((unsigned)((O + 8 * GPT2__LN_FOLD_NW - 1) / (8 * GPT2__LN_FOLD_NW)), 1u), dim3(32 * GPT2__LN_FOLD_NW),
                        gpt2__few_row_smem(n, C, sizeof(T), GPT2__LN_FOLD_NW, GPT2__FEW_ROW_KC, st), L->stream, L->pdl, (const T *)W, (const T *)NULL, D,
                        (const T *)bias, O, n, C, C, O, 0, act, ln_fold);
    }
}

/* Whether gpt2__few_row_kernel serves this decode product of n rows (gpt2__few_row_check verified it). */
static int gpt2__few_row_use(const gpt2__cuda_state *S, int O, int n, int I, int sp, int epi, int f32) {
    if (!S->few_row || n < 1 || n > GPT2__FEW_ROW_MAX) return 0;
    for (int i = 0; i < S->few_row_n; i++) {
        const int *e = S->few_row_ok[i];
        if (e[0] == O && e[1] == I && e[2] == sp && e[3] == epi && e[4] == f32) return 1;
    }
    return 0;
}

/* Whether a step of N fed rows, P of them prompt rows, takes the gpt2__ln_fold path (gpt2__cuda_run_t): few decode rows
   alone, both products that read a layer norm verified on the few-row kernel, and the block's shared memory fits. */
static int gpt2__ln_fold_use(const gpt2__cuda_state *S, const gpt2_model *m, int N, int P) {
    const int C = m->cfg.n_embd, F = m->n_inner;
    return S->ln_fold && S->esize == 2 && P == 0 && N >= 1 && N <= GPT2__LN_FOLD_ROWS && C % 4 == 0 && C <= GPT2__LN_FOLD_MAX_C &&
           gpt2__few_row_use(S, 3 * C, N, C, 1, GPT2__EPI_BIAS, 0) && gpt2__few_row_use(S, F, N, C, 1, GPT2__EPI_BIAS_ACT, 0) &&
           gpt2__few_row_smem(N, C, S->esize, GPT2__LN_FOLD_NW, GPT2__FEW_ROW_KC, gpt2__ln_fold_ring(S, C)) <= (size_t)S->ln_fold_smem;
}

/* == [GPT2:OP_LINEAR] == a linear layer: prompt and decode rows' products, split-K, the few-row bit check ======= */

/* How many pieces decode rows of a layer with this K split it into (gpt2__linear with part): a fixed count per
   shape, never per step, so a row computes the same in any step. Up to 4 pieces of at least GPT2_SPLIT_MIN_K, each
   a multiple of 8 elements (16-byte aligned). A projection into the residual has few output columns
   (n_embd), so at few rows its product covers few SMs; the pieces multiply them. */
static int gpt2__decode_pieces(int I) {
    for (int s = 4; s > 1; s--)
        if (I % (8 * s) == 0 && I / s >= GPT2_SPLIT_MIN_K) return s;
    return 1;
}

/* Decode rows of a linear layer through cuBLASLt (gpt2__gemm_run, the algorithm pinned for GPT2_GEMM_REF_ROWS rows).
   The activation of the MLP's first product is not cuBLASLt's epilogue but the bias alone and then gpt2__act_kernel:
   gpt2__few_row_kernel computes exactly that for few rows, while cuBLASLt's GELU rounds differently from any formula
   found, and a row must compute alike at any row count. */
template <typename T>
static gpt2_status gpt2__decode_lt(gpt2__cuda_state *S, const gpt2__lane *L, void *D, const void *W, const void *X, const void *bias, int O, int n,
                                   int I, int epi, int out_f32, int ldd, int sp) {
    if (epi == GPT2__EPI_BIAS_ACT && out_f32) /* cuBLASLt's epilogue would be the tanh GELU whatever S->mlp_act is */
        return gpt2__fail(GPT2_ERR_ARG, "%s:%d: decode activation into float32 rows", __FILE__, __LINE__);
    const int own_act = epi == GPT2__EPI_BIAS_ACT;
    gpt2_status st = gpt2__gemm_run(S, L, gpt2__cuda_type<T>::id, D, W, X, bias, O, n, I, own_act ? GPT2__EPI_BIAS : epi, out_f32, ldd,
                                    GPT2_GEMM_REF_ROWS, sp);
    if (st || !own_act || n < 1) return st;
    if (ldd > O) return gpt2__fail(GPT2_ERR_ARG, "%s:%d: decode activation over rows %d apart, %d wide", __FILE__, __LINE__, ldd, O);
    return gpt2__act_run<T>(L->stream, L->pdl, S->sms, (T *)D, (size_t)n * O, S->mlp_act);
}

/* A linear layer over N fed rows, the first P of them prompt rows: D [N][O] = X [N][I] @ W^T (+ bias, + activation), as
   gpt2__gemm_run. Each kind of row has its own reference cuBLASLt algorithm (any tile of its class runs: the same
   arithmetic), so a row computes the same in any step:
     prompt rows: the algorithm picked for a prompt step of GPT2_GEMM_PROMPT_ROWS rows;
     decode rows (and every logits row): the one picked for GPT2_GEMM_REF_ROWS rows (gpt2__decode_lt), or for at
     most GPT2__FEW_ROW_MAX of them gpt2__few_row_kernel where gpt2__few_row_check found it to give the same bits.
   With part (a layer feeding the residual, epilogue bias), decode rows instead leave gpt2__decode_pieces(I) fp32
   pieces part [k][N-P][O] without the bias, for gpt2__residual_ln_kernel to add up (gpt2__resid). few: the decode
   rows go to the few-row kernel (gpt2__paths.few_row: gpt2__few_row_use said it serves this product). */
template <typename T>
static gpt2_status gpt2__linear(gpt2__cuda_state *S, const gpt2__lane *L, int few, void *D, const void *W, const void *X, const void *bias,
                                int O, int N, int P, int I, int epi, int out_f32, int ldd, float *part) {
    const cudaDataType_t dt = gpt2__cuda_type<T>::id;
    if (ldd < O) ldd = O;
    gpt2_status st;
    /* prompt rows: cuBLASLt's GELU epilogue is the tanh form; another activation follows the bias epilogue */
    const int lt_act = epi == GPT2__EPI_BIAS_ACT && S->mlp_act != GPT2__ACT_GELU_TANH;
    if (P > 0 && (st = gpt2__gemm_run(S, L, dt, D, W, X, bias, O, P, I, lt_act ? GPT2__EPI_BIAS : epi, out_f32, ldd, GPT2_GEMM_PROMPT_ROWS, 1)))
        return st;
    if (P > 0 && lt_act) {
        if (out_f32 || ldd != O) return gpt2__fail(GPT2_ERR_ARG, "%s:%d: prompt activation over rows %d apart, %d wide", __FILE__, __LINE__, ldd, O);
        if ((st = gpt2__act_run<T>(L->stream, L->pdl, S->sms, (T *)D, (size_t)P * O, S->mlp_act))) return st;
    }
    if (N <= P) return GPT2_OK;
    const T *Xd = (const T *)X + (size_t)P * I;
    const int nd = N - P, sp = part ? gpt2__decode_pieces(I) : 1;
    if (part) epi = GPT2__EPI_NONE, out_f32 = 1, D = part, bias = NULL, ldd = O;
    else D = (char *)D + (size_t)P * ldd * (out_f32 ? sizeof(float) : sizeof(T));
    if constexpr (sizeof(T) == 2) {
        if (few)
            return gpt2__few_row_go<T>(S, L->stream, L->pdl, D, (const T *)W, Xd, (const T *)bias, O, nd, I, out_f32, ldd, sp,
                                       epi == GPT2__EPI_BIAS_ACT ? S->mlp_act : GPT2__ACT_NONE);
    } else if (few)
        return gpt2__few_row32_run(L->stream, L->pdl, D, (const float *)W, (const float *)Xd, (const float *)bias, O, nd, I, ldd, sp,
                              epi == GPT2__EPI_BIAS_ACT ? S->mlp_act : GPT2__ACT_NONE, gpt2__few_row32_cols(O, sp, S->sms));
    return gpt2__decode_lt<T>(S, L, D, W, Xd, bias, O, nd, I, epi, out_f32, ldd, sp);
}

/* A model's five decode products as gpt2__few_row_check runs them (qkv with bias; the attention projection in K
   pieces, fp32; the MLP's first product with bias and activation; its second in K pieces, fp32; the logits, fp32), on
   layer 0's weights and lm_head. */
typedef struct gpt2__few_row_product { const char *name; int O, I, sp, epi, f32; const void *W, *b; } gpt2__few_row_product;
static void gpt2__few_row_products(const gpt2_model *m, const gpt2__cuda_state *S, gpt2__few_row_product pr[5]) {
    const int C = m->cfg.n_embd, F = m->n_inner;
    const gpt2__cuda_layer *y = &S->layers[0];
    pr[0] = gpt2__few_row_product{"qkv", 3 * C, C, 1, GPT2__EPI_BIAS, 0, y->qkv_w, y->qkv_b};
    pr[1] = gpt2__few_row_product{"proj", C, C, gpt2__decode_pieces(C), GPT2__EPI_NONE, 1, y->proj_w, NULL};
    pr[2] = gpt2__few_row_product{"fc", F, C, 1, GPT2__EPI_BIAS_ACT, 0, y->fc_w, y->fc_b};
    pr[3] = gpt2__few_row_product{"fcproj", C, F, gpt2__decode_pieces(F), GPT2__EPI_NONE, 1, y->fcp_w, NULL};
    pr[4] = gpt2__few_row_product{"logits", S->ldv, C, 1, GPT2__EPI_NONE, 1, S->lm_head, NULL};
}

/* Which decode products gpt2__few_row_kernel may serve: for each of the model's (gpt2__few_row_products), it and
   gpt2__decode_lt run on the same weights (layer 0, lm_head) and random rows, 1 and GPT2__FEW_ROW_MAX of them; only a product
   whose every output bit agrees is listed in S->few_row_ok. In F32 the kernel is gpt2__few_row32_kernel. Nothing is listed
   below sm_80 or when a product does not fit. */
template <typename T>
static gpt2_status gpt2__few_row_check(gpt2_model *m, gpt2__cuda_state *S) {
    S->few_row_n = 0;
    S->few_row_miss[0] = 0;
    bool on;
    if constexpr (sizeof(T) == 2)
        on = S->few_row && gpt2__few_row_enable<T>() && gpt2__few_row_enable<T, GPT2__FEW_ROW_NW_WIDE>() &&
             gpt2__few_row_enable<T, GPT2__FEW_ROW_NW, GPT2__FEW_ROW_KC, GPT2__FEW_ROW_ST_SHORT>() &&
             gpt2__few_row_enable<T, GPT2__FEW_ROW_NW_WIDE, GPT2__FEW_ROW_KC, GPT2__FEW_ROW_ST_SHORT>();
    else on = S->few_row && gpt2__few_row32_enable();
    if (!on) { cudaGetLastError(); return GPT2_OK; }
    const int C = m->cfg.n_embd, F = m->n_inner, R = GPT2__FEW_ROW_MAX;
    const gpt2__lane L = gpt2__lane_of(S);
    gpt2__few_row_product pr[5];
    gpt2__few_row_products(m, S, pr);
    const int Imax = C > F ? C : F;
    size_t dmax = 0;
    for (int k = 0; k < 5; k++) {
        const size_t b = (size_t)pr[k].sp * R * pr[k].O * 4;
        if (b > dmax) dmax = b;
    }
    T *hx = (T *)malloc((size_t)R * Imax * sizeof(T));
    unsigned char *h1 = (unsigned char *)malloc(dmax), *h2 = (unsigned char *)malloc(dmax);
    void *dx = NULL, *d1 = NULL, *d2 = NULL;
    gpt2_status st = GPT2_OK;
    if (!hx || !h1 || !h2) st = gpt2__fail(GPT2_ERR_OOM, "cannot allocate %zu bytes for the few-row product check", dmax);
    uint32_t r = 12345u;
    for (size_t i = 0; !st && i < (size_t)R * Imax; i++) {
        r = r * 1664525u + 1013904223u;
        hx[i] = (T)(4.0f * ((float)(r >> 8) / 16777216.0f - 0.5f));
    }
    /* the rows go up on S->stream, which the check's products run on: a plain cudaMemcpy from pageable memory may
       return before its DMA lands, and S->stream (non-blocking) does not wait for the legacy stream it runs on, so
       the reference could read the rows half-written and the check keep a product off the kernel for no reason */
    if (!st && (cudaMalloc(&dx, (size_t)R * Imax * sizeof(T)) != cudaSuccess || cudaMalloc(&d1, dmax) != cudaSuccess ||
                cudaMalloc(&d2, dmax) != cudaSuccess ||
                cudaMemcpyAsync(dx, hx, (size_t)R * Imax * sizeof(T), cudaMemcpyHostToDevice, S->stream) != cudaSuccess))
        st = gpt2__fail(GPT2_ERR_DEVICE, "%s:%d: the few-row product check could not allocate or copy", __FILE__, __LINE__);
    for (int k = 0; k < 5 && !st; k++) {
        const int O = pr[k].O, I = pr[k].I, sp = pr[k].sp;
        if (sizeof(T) == 2 ? !gpt2__few_row_fits(O, R, I, sp, sizeof(T)) : !gpt2__few_row32_fits(O, R, I, sp)) continue;
        int same = 1;
        for (int n = 1; n <= R && same && !st; n += R - 1) {
            const size_t bytes = (size_t)sp * n * O * (pr[k].f32 ? 4 : sizeof(T));
            if (cudaMemsetAsync(d1, 0, bytes, S->stream) != cudaSuccess || cudaMemsetAsync(d2, 0xff, bytes, S->stream) != cudaSuccess)
                st = gpt2__fail(GPT2_ERR_DEVICE, "%s:%d: cudaMemsetAsync failed", __FILE__, __LINE__);
            if (!st) st = gpt2__decode_lt<T>(S, &L, d1, pr[k].W, dx, pr[k].b, O, n, I, pr[k].epi, pr[k].f32, O, sp);
            if constexpr (sizeof(T) == 2) {
                if (!st) st = gpt2__few_row_go<T>(S, S->stream, 0, d2, (const T *)pr[k].W, (const T *)dx, (const T *)pr[k].b, O, n, I,
                                                  pr[k].f32, O, sp, pr[k].epi == GPT2__EPI_BIAS_ACT ? S->mlp_act : GPT2__ACT_NONE);
            } else if (!st)
                st = gpt2__few_row32_run(S->stream, 0, d2, (const float *)pr[k].W, (const float *)dx, pr[k].f32 ? NULL : (const float *)pr[k].b,
                                    O, n, I, O, sp, pr[k].epi == GPT2__EPI_BIAS_ACT ? S->mlp_act : GPT2__ACT_NONE, gpt2__few_row32_cols(O, sp, S->sms));
            if (!st && (cudaStreamSynchronize(S->stream) != cudaSuccess || cudaMemcpy(h1, d1, bytes, cudaMemcpyDeviceToHost) != cudaSuccess ||
                        cudaMemcpy(h2, d2, bytes, cudaMemcpyDeviceToHost) != cudaSuccess))
                st = gpt2__fail(GPT2_ERR_DEVICE, "%s:%d: the few-row product check failed: %s", __FILE__, __LINE__,
                                cudaGetErrorString(cudaGetLastError()));
            if (!st) same = !memcmp(h1, h2, bytes);
            if (!st && !same && !S->few_row_miss[0]) {
                size_t words = bytes / 4, diff = 0;
                for (size_t i = 0; i < words; i++) diff += memcmp(h1 + 4 * i, h2 + 4 * i, 4) != 0;
                snprintf(S->few_row_miss, sizeof S->few_row_miss, "%dx%d in %d pieces at %d rows: %zu of %zu words differ", O, I, sp, n, diff, words);
            }
        }
        if (!st && same) {
            int *e = S->few_row_ok[S->few_row_n++];
            e[0] = O; e[1] = I; e[2] = sp; e[3] = pr[k].epi; e[4] = pr[k].f32;
        }
    }
    cudaFree(dx); cudaFree(d1); cudaFree(d2);
    free(hx); free(h1); free(h2);
    return st;
}

/* == [GPT2:OP_ATTN_DECODE] == decode attention: K/V store, row kernels (CUDA cores, mma, streamed) ============== */

/* K and V of every fed row into this layer's cache (only where the tiled prefill kernel does not serve: F32, GPUs
   before sm_80; gpt2__attention). qkv: [N][3C] (q | k | v); kc, vc: [max_batch][H][max_seq][hd].
   Row r goes to slot row_slot[r], position row_pos[r]; VE elements (16 bytes when hd allows) per thread and step.
   Grid-stride over N*C/VE chunks. Matches the cache writes of gpt2__cpu_run (there laid out [slot][pos][C]). */
template <typename T, int VE>
__global__ void gpt2__kv_store_kernel(const T *qkv, T *kc, T *vc, const int *row_slot, const int *row_pos,
                                      int N, int C, int H, int hd, int max_seq) {
    const int cpr = C / VE;
    const size_t n = (size_t)N * cpr;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const int r = (int)(i / cpr), e = (int)(i % cpr) * VE, h = e / hd, d = e % hd;
        const size_t dst = (((size_t)row_slot[r] * H + h) * max_seq + row_pos[r]) * hd + d;
        const T *src = qkv + (size_t)r * 3 * C + C + e;
        if (VE * sizeof(T) == 16) {
            *(uint4 *)(kc + dst) = *(const uint4 *)src;
            *(uint4 *)(vc + dst) = *(const uint4 *)(src + C);
        } else {
            for (int k = 0; k < VE; k++) { kc[dst + k] = src[k]; vc[dst + k] = src[C + k]; }
        }
    }
}

/* A decode-attention work item: row r = rows[z] at position p against keys [k0, k1) (span sp of span_len keys),
   head h, whose cached keys and values are kh, vh ([max_seq][hd] in the row's slot). false: the span starts past p,
   nothing to do. Shared by gpt2__attn_kernel and gpt2__attn_mma_kernel; gpt2__attn_stream_kernel finds the same
   item with its loads in another order. */
template <typename T> struct gpt2__dec { int r, p, k0, k1, slot; T *kh, *vh; };
template <typename T>
static __device__ __forceinline__ bool gpt2__dec_at(gpt2__dec<T> &d, int sp, int h, int z, const int *rows, const int *row_slot,
                                                    const int *row_pos, T *kc, T *vc, int H, int max_seq, int hd, int span_len) {
    d.r = rows[z];
    d.p = row_pos[d.r];
    d.k0 = sp * span_len;
    if (d.k0 > d.p) return false;
    d.k1 = min(d.k0 + span_len, d.p + 1);
    d.slot = row_slot[d.r];
    const size_t head = ((size_t)d.slot * H + h) * max_seq * hd;
    d.kh = kc + head;
    d.vh = vc + head;
    return true;
}

/* Block-wide, once a span's record is written: whether this block is the last of the `live` spans of its (row,
   head) to finish (counter *cnt, which the last one resets to zero); that one then reads the others' records. */
static __device__ __forceinline__ bool gpt2__span_last(unsigned *cnt, int live) {
    __shared__ int last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        last = atomicAdd(cnt, 1u) == (unsigned)live - 1;
        if (last) *cnt = 0;
    }
    __syncthreads();
    const bool mine = last;
    if (mine) __threadfence();
    return mine;
}

/* Causal attention of one query row against its slot's cached keys, in spans along the sequence.
   qkv: [N][3C]; kc, vc: this layer's cache [max_batch][H][max_seq][hd]; row r (position p = row_pos[r]) attends to
   positions 0..p of slot row_slot[r].
   Grid: (n_span, H, n_rows); block: 128 threads. Block (s, h, z) serves row r = rows[z] and covers keys
   [s*span_len, min((s+1)*span_len, p+1)).
   Lanes work in groups of lpk (a power of two <= 32): a group takes U keys at a time, each lane holding up to MAXC
   chunks of VE elements of q, k, v (16-byte loads when VE*sizeof(T) == 16; a warp then reads 32/lpk consecutive
   keys, contiguous in memory), and keeps its own online-softmax state (max m, sum l, output acc) in fp32.
   The groups are merged through shared memory ((128/lpk)*(hd+2) floats). With one live span (n_span == 1, or
   p < span_len) the block writes out[r][h*hd..] = softmax(q k^T / sqrt(hd)) v; otherwise it writes its unnormalised (acc[hd], m, l) to
   part[z][h][s][hd+2], and the last live span of (z, h) to finish (counter count[z*H+h], zero between launches)
   merges the live spans s <= p/span_len in order: out = sum_s acc_s 2^(m_s-M) / sum_s l_s 2^(m_s-M), M = max m_s.
   With store set, row r's own key and value (position p) are read from qkv and written to the cache here (the
   caller then skips gpt2__kv_store_kernel for these rows). STG (store set, few rows): the block's cached keys and
   values before p come into shared memory (2 * span_len * hd of T after the merge buffers) before the PDL wait,
   and the loop reads them there. Scores are kept in log2 units
   (scale_log2 = log2(e)/sqrt(hd)).
   Matches the attention loop of gpt2__cpu_run. */
template <typename T, int VE, int MAXC, bool STG>
__global__ void __launch_bounds__(128) gpt2__attn_kernel(const T *__restrict__ qkv, T *__restrict__ kc,
                                                           T *__restrict__ vc, T *__restrict__ out,
                                                           float *__restrict__ part, const int *__restrict__ rows,
                                                           const int *__restrict__ row_slot,
                                                           const int *__restrict__ row_pos, int C, int H, int hd,
                                                           int max_seq, int span_len, int n_span, int lpk,
                                                           float scale_log2, unsigned *__restrict__ count, int store,
                                                           int prefetch) {
    extern __shared__ float gpt2__attn_sh[];
    const int sp = blockIdx.x, h = blockIdx.y, z = blockIdx.z;
    gpt2__dec<T> it;
    if (!gpt2__dec_at(it, sp, h, z, rows, row_slot, row_pos, kc, vc, H, max_seq, hd, span_len)) return;
    const int r = it.r, p = it.p, k0 = it.k0, k1 = it.k1;
    T *kh = it.kh, *vh = it.vh;
    const int G = blockDim.x / lpk; /* groups of lpk lanes */
    /* STG (few rows, each its sequence's only new row: store set): the keys and values before position p, written
       by earlier steps, into shared memory while the kernel before finishes (16-byte copies; the loop below then
       reads them there, in the same order: the same bits) */
    T *sk = (T *)(gpt2__attn_sh + (size_t)G * hd + 2 * G), *sv = sk + (size_t)span_len * hd;
    if (STG) {
        const int cpk = hd * (int)sizeof(T) / 16, n = (min(k1, p) - k0) * cpk; /* 16-byte chunks per key, in all */
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            const size_t at = (size_t)(i / cpk) * hd + (size_t)(i % cpk) * (16 / sizeof(T));
            gpt2__cp16(sk + at, kh + (size_t)k0 * hd + at, true);
            gpt2__cp16(sv + at, vh + (size_t)k0 * hd + at, true);
        }
        gpt2__cp_commit();
    }
    /* the keys and values before position p were written by earlier steps: while the kernel before finishes, bring
       them into L2 (few rows: the step is latency-bound; the host sets prefetch only when they fit in L2 easily) */
    else if (prefetch) {
        const int per = (hd * (int)sizeof(T) + 127) / 128, n = (min(k1, p) - k0) * per; /* 128-byte lines per key */
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            const size_t at = (size_t)(k0 + i / per) * hd + (size_t)(i % per) * (128 / sizeof(T));
            asm volatile("prefetch.global.L2 [%0];" ::"l"(kh + at));
            asm volatile("prefetch.global.L2 [%0];" ::"l"(vh + at));
        }
    }
    gpt2__pdl_enter();
    const int nc = hd / VE, gl = threadIdx.x & (lpk - 1), g = threadIdx.x / lpk;
    const T *q = qkv + (size_t)r * 3 * C + (size_t)h * hd, *kn = q + C, *vn = q + 2 * C;
    if (STG) {
        gpt2__cp_wait<0>();
        __syncthreads();
    }
    /* store: this row's own key and value come from qkv, and the block holding position p puts them in the cache */
    if (store && p < k1)
        for (int e = threadIdx.x; e < hd; e += blockDim.x) { kh[(size_t)p * hd + e] = kn[e]; vh[(size_t)p * hd + e] = vn[e]; }
    float qf[MAXC][VE], acc[MAXC][VE];
#pragma unroll
    for (int c = 0; c < MAXC; c++) {
        int ci = gl + c * lpk;
        if (ci < nc) gpt2__load_chunk<T, VE>(q + ci * VE, qf[c]);
        else {
#pragma unroll
            for (int e = 0; e < VE; e++) qf[c][e] = 0.0f;
        }
#pragma unroll
        for (int e = 0; e < VE; e++) acc[c][e] = 0.0f;
    }
    /* U keys per group per iteration, all loads issued before any use: more bytes in flight per lane. Keys and
       values stay in T until used (half the registers of fp32 copies: more blocks per SM, more loads in flight). */
    constexpr int U = MAXC == 1 ? 4 : 1;
    float m = -INFINITY, l = 0.0f;
    for (int jb = k0; jb < k1; jb += U * G) {
        T kr[U][MAXC][VE], vr[U][MAXC][VE];
        float s[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int j = jb + u * G + g;
#pragma unroll
            for (int c = 0; c < MAXC; c++) {
                int ci = gl + c * lpk;
                const bool ok = j < k1 && ci < nc, own = store && j == p;
                const T *kp = (own ? kn : STG ? sk + (size_t)(j - k0) * hd : kh + (size_t)j * hd) + ci * VE;
                const T *vp = (own ? vn : STG ? sv + (size_t)(j - k0) * hd : vh + (size_t)j * hd) + ci * VE;
                if (VE * sizeof(T) == 16) {
                    const uint4 zero = make_uint4(0, 0, 0, 0);
                    *(uint4 *)kr[u][c] = ok ? *(const uint4 *)kp : zero;
                    *(uint4 *)vr[u][c] = ok ? *(const uint4 *)vp : zero;
                } else {
#pragma unroll
                    for (int e = 0; e < VE; e++) {
                        kr[u][c][e] = ok ? kp[e] : T(0.0f);
                        vr[u][c][e] = ok ? vp[e] : T(0.0f);
                    }
                }
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            float d = 0.0f;
#pragma unroll
            for (int c = 0; c < MAXC; c++)
#pragma unroll
                for (int e = 0; e < VE; e++) d += qf[c][e] * gpt2__f(kr[u][c][e]);
            s[u] = d;
        }
        for (int o = lpk >> 1; o; o >>= 1)
#pragma unroll
            for (int u = 0; u < U; u++) s[u] += __shfl_xor_sync(0xffffffffu, s[u], o);
        float mn = m;
#pragma unroll
        for (int u = 0; u < U; u++) {
            s[u] = jb + u * G + g < k1 ? s[u] * scale_log2 : -INFINITY;
            mn = fmaxf(mn, s[u]);
        }
        if (mn == -INFINITY) continue; /* no live key for this group in this iteration */
        const float a = exp2f(m - mn);
        l *= a;
#pragma unroll
        for (int c = 0; c < MAXC; c++)
#pragma unroll
            for (int e = 0; e < VE; e++) acc[c][e] *= a;
#pragma unroll
        for (int u = 0; u < U; u++) {
            const float pj = exp2f(s[u] - mn);
            l += pj;
#pragma unroll
            for (int c = 0; c < MAXC; c++)
#pragma unroll
                for (int e = 0; e < VE; e++) acc[c][e] += pj * gpt2__f(vr[u][c][e]);
        }
        m = mn;
    }
    /* merge the groups: shared [G][hd] accumulators, then [G] maxima, then [G] sums */
    float *sh_o = gpt2__attn_sh, *sh_m = sh_o + (size_t)G * hd, *sh_l = sh_m + G;
#pragma unroll
    for (int c = 0; c < MAXC; c++) {
        int ci = gl + c * lpk;
        if (ci < nc)
#pragma unroll
            for (int e = 0; e < VE; e++) sh_o[g * hd + ci * VE + e] = acc[c][e];
    }
    if (gl == 0) { sh_m[g] = m; sh_l[g] = l; }
    __syncthreads();
    float M = -INFINITY;
    for (int i = 0; i < G; i++) M = fmaxf(M, sh_m[i]);
    float L = 0.0f;
    for (int i = 0; i < G; i++) L += sh_l[i] * exp2f(sh_m[i] - M);
    /* one live span (n_span == 1, or p < span_len): the merge below would give o / L bit for bit, so write it */
    const bool alone = n_span == 1 || p < span_len;
    for (int dd = threadIdx.x; dd < hd; dd += blockDim.x) {
        float o = 0.0f;
        for (int i = 0; i < G; i++) o += sh_o[i * hd + dd] * exp2f(sh_m[i] - M);
        if (alone) gpt2__put(out + (size_t)r * C + (size_t)h * hd + dd, o / L);
        else part[(((size_t)z * H + h) * n_span + sp) * (hd + 2) + dd] = o;
    }
    if (alone) return;
    if (threadIdx.x == 0) {
        float *pm = part + (((size_t)z * H + h) * n_span + sp) * (hd + 2) + hd;
        pm[0] = M; pm[1] = L;
    }
    /* the last live span of (row, head) to finish merges them all, in span order (counter reset by it) */
    const int live = p / span_len + 1;
    if (!gpt2__span_last(&count[z * H + h], live)) return;
    const float *ph = part + ((size_t)z * H + h) * n_span * (hd + 2);
    M = -INFINITY;
    for (int s = 0; s < live; s++) M = fmaxf(M, __ldcg(ph + s * (hd + 2) + hd));
    L = 0.0f;
    for (int s = 0; s < live; s++) L += __ldcg(ph + s * (hd + 2) + hd + 1) * exp2f(__ldcg(ph + s * (hd + 2) + hd) - M);
    for (int dd = threadIdx.x; dd < hd; dd += blockDim.x) {
        float o = 0.0f;
        for (int s = 0; s < live; s++) o += __ldcg(ph + s * (hd + 2) + dd) * exp2f(__ldcg(ph + s * (hd + 2) + hd) - M);
        gpt2__put(out + (size_t)r * C + (size_t)h * hd + dd, o / L);
    }
}

/* Decode attention on the tensor cores (head size 64, fp16/bf16; what gpt2__attention runs for decode rows when the
   tiled prefill kernel is on). Its arithmetic, the same bits in both kernels below whatever the
   batch: a span's keys [k0, k1) (span_len 256) in 8 chunks of 32 (chunk c: keys k0 + 32c ..), each chunk alone:
   S = q K^T by mma m16n8k16 with q as row 0 of the A operand (rows 1..15 zero; their results are never read) and K
   as the B operand (lane g = lane/4, t = lane%4 holds key 8i+g's dims 16t..16t+15; k-step s takes dims 16t+4s..+3,
   the same permutation for q), m = max S (log2 units, scale_log2 = log2(e)/sqrt(64), keys past k1 at -inf),
   P = 2^(S-m) rounded to T, l = sum of the rounded P, O = P V by mma with P reused from S's registers as the A
   operand and V as the B operand (lane holds dims 8g..8g+7 of its four keys of a 16-key k-step; output column g of
   n-tile nt is dim 8g+nt, so lane t of row 0 ends with dims 16t..16t+15). The 8 chunk records then merge in
   order: M = max m_c, w_c = 2^(m_c - M), L = sum l_c w_c, O = sum O_c w_c; one live span writes O / L, else
   (O, M, L) goes to part[z][h][span][66] and the last live span merges them as gpt2__attn_kernel does.
   A row's own key and value (position p) come from qkv, and go into the cache here.
   Matches the attention loop of gpt2__cpu_run (P rounded to T as in gpt2__attn_prefill_kernel). */
template <typename T>
static __device__ __forceinline__ uint4 gpt2__ld16(const T *p, bool ok) {
    return ok ? *(const uint4 *)p : make_uint4(0, 0, 0, 0);
}

/* One chunk from its operands: kr[i] = lane's 32 bytes of key kb+8i+g, vr[s][u] = lane's 16 bytes of key
   kb + 16s + 8(u>>1) + 2t + (u&1); o (row 0: lanes 0..3), m and l (every lane of the quad) out. */
template <typename T>
static __device__ __forceinline__ void gpt2__amma_chunk(const uint32_t *qa, const uint4 (*kr)[2], const uint4 (*vr)[4], int kb,
                                                        int k1, float scale_log2, float (*o)[4], float &m, float &l) {
    const int t = threadIdx.x & 3;
    float s[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
        const uint32_t w[8] = {kr[i][0].x, kr[i][0].y, kr[i][0].z, kr[i][0].w, kr[i][1].x, kr[i][1].y, kr[i][1].z, kr[i][1].w};
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            const uint32_t a[4] = {qa[2 * ks], 0u, qa[2 * ks + 1], 0u};
            gpt2__mma(s[i], a, w[2 * ks], w[2 * ks + 1], T());
        }
    }
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int j = kb + 8 * i + 2 * t + e;
            s[i][e] = j < k1 ? s[i][e] * scale_log2 : -INFINITY;
            mx = fmaxf(mx, s[i][e]);
        }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    m = mx;
    l = 0.0f;
#pragma unroll
    for (int nt = 0; nt < 8; nt++) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
#pragma unroll
    for (int s2 = 0; s2 < 2; s2++) {
        uint32_t pa[4];
        pa[0] = gpt2__pack2(gpt2__ex2(s[2 * s2][0] - mx), gpt2__ex2(s[2 * s2][1] - mx), &l, T());
        pa[2] = gpt2__pack2(gpt2__ex2(s[2 * s2 + 1][0] - mx), gpt2__ex2(s[2 * s2 + 1][1] - mx), &l, T());
        pa[1] = pa[3] = 0u;
        const uint4 *v = vr[s2];
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
            const unsigned sel = (nt & 1) ? 0x7632u : 0x5410u;
            const uint32_t w0 = ((const uint32_t *)&v[0])[nt >> 1], w1 = ((const uint32_t *)&v[1])[nt >> 1];
            const uint32_t w2 = ((const uint32_t *)&v[2])[nt >> 1], w3 = ((const uint32_t *)&v[3])[nt >> 1];
            gpt2__mma(o[nt], pa, __byte_perm(w0, w1, sel), __byte_perm(w2, w3, sel), T());
        }
    }
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
}

/* the chunk's row 0 into a record: o_rec[64] (dims), m, l (lanes 0..3 of the warp write) */
static __device__ __forceinline__ void gpt2__amma_keep(const float (*o)[4], float m, float l, float *o_rec, float *m_rec, float *l_rec) {
    const int lane = threadIdx.x & 31, t = lane & 3;
    if (lane < 4) {
#pragma unroll
        for (int nt = 0; nt < 8; nt++) { o_rec[16 * t + nt] = o[nt][0]; o_rec[16 * t + 8 + nt] = o[nt][1]; }
        if (t == 0) { *m_rec = m; *l_rec = l; }
    }
}

/* 16 bytes of shared memory at p (16-byte aligned) as one ld.shared.v4, written out in PTX: a C-level float4 load
   is the compiler's to split. volatile with a memory clobber, so it stays after the
   barrier that publishes what it reads. */
static __device__ __forceinline__ float4 gpt2__lds4(const float *p) {
    float4 v;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"((unsigned)__cvta_generic_to_shared(p))
                 : "memory");
    return v;
}
/* the span's 8 chunk records merged in order, for dim dd: L and O (unnormalised), M. sh_m and sh_l are 16-byte
   aligned shared memory; they are read as four ld.shared.v4 in PTX of our own, because nvcc 13.0 emitted the C
   loads of this merge differently from one build to the next (a plain loop) and, as explicit float4 loads,
   differently with unrelated code added elsewhere in the file */
static __device__ __forceinline__ void gpt2__amma_merge(const float *sh_o, const float *sh_m, const float *sh_l, int dd, float &M,
                                                        float &L, float &O) {
    const float4 ma = gpt2__lds4(sh_m), mb = gpt2__lds4(sh_m + 4);
    const float4 la = gpt2__lds4(sh_l), lb = gpt2__lds4(sh_l + 4);
    const float m[8] = {ma.x, ma.y, ma.z, ma.w, mb.x, mb.y, mb.z, mb.w}, l[8] = {la.x, la.y, la.z, la.w, lb.x, lb.y, lb.z, lb.w};
    M = -INFINITY;
#pragma unroll
    for (int i = 0; i < 8; i++) M = fmaxf(M, m[i]);
    L = 0.0f;
    O = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const float w = gpt2__ex2(m[i] - M);
        L += l[i] * w;
        O += sh_o[i * 64 + dd] * w;
    }
}

/* the live spans of (row z, head h) merged in order, for dim dd (part: [z][h][span][66]) */
static __device__ __forceinline__ float gpt2__amma_spans(const float *ph, int live, int dd) {
    float M = -INFINITY;
    for (int s = 0; s < live; s++) M = fmaxf(M, __ldcg(ph + s * 66 + 64));
    float L = 0.0f;
    for (int s = 0; s < live; s++) L += __ldcg(ph + s * 66 + 65) * exp2f(__ldcg(ph + s * 66 + 64) - M);
    float o2 = 0.0f;
    for (int s = 0; s < live; s++) o2 += __ldcg(ph + s * 66 + dd) * exp2f(__ldcg(ph + s * 66 + 64) - M);
    return o2 / L;
}

/* q of row r, head h as the A operand's row 0 (lanes 0..3; zeros elsewhere) */
template <typename T>
static __device__ __forceinline__ void gpt2__amma_q(const T *q, uint32_t *qa) {
    const int lane = threadIdx.x & 31, t = lane & 3;
    const uint4 a = gpt2__ld16(q + 16 * t, lane < 4), b = gpt2__ld16(q + 16 * t + 8, lane < 4);
    qa[0] = a.x; qa[1] = a.y; qa[2] = a.z; qa[3] = a.w; qa[4] = b.x; qa[5] = b.y; qa[6] = b.z; qa[7] = b.w;
}

/* Few rows (their cache fits in L2 easily): grid (n_span, H, n_rows), block 256 threads = 8 warps, warp w the span's
   chunk w, its operands straight into registers. STG: the cached keys and values before p come into shared memory
   (2 * 256 * 64 of T after the 8 records) before the PDL wait, while the kernel before finishes, and are read there;
   else prefetch sets an L2 prefetch of them. Then the records merge through shared memory. Tuned on the H100.
   dup (a step verifying a draft: several rows of one sequence, consecutive rows at consecutive positions pf..): the
   keys from pf on are this step's, read from their rows of qkv (a row stores only its own into the cache), the
   cached ones before pf staged as usual; the same values, so the same bits. */
template <typename T, bool STG>
__global__ void __launch_bounds__(256) gpt2__attn_mma_kernel(const T *__restrict__ qkv, T *__restrict__ kc, T *__restrict__ vc,
                                                               T *__restrict__ out, float *__restrict__ part,
                                                               const int *__restrict__ rows, const int *__restrict__ row_slot,
                                                               const int *__restrict__ row_pos, int C, int H, int max_seq,
                                                               int span_len, int n_span, float scale_log2,
                                                               unsigned *__restrict__ count, int store, int prefetch, int dup) {
#if __CUDA_ARCH__ >= 800
    constexpr int HD = 64;
    extern __shared__ float gpt2__amma_sh[];
    const int sp = blockIdx.x, h = blockIdx.y, z = blockIdx.z;
    gpt2__dec<T> it;
    if (!gpt2__dec_at(it, sp, h, z, rows, row_slot, row_pos, kc, vc, H, max_seq, HD, span_len)) return;
    const int r = it.r, p = it.p, k0 = it.k0, k1 = it.k1;
    /* pf: the first of this step's keys (dup: the rows before r of its sequence; else p, this row's own) */
    int pf = p;
    if (dup)
        for (int rr = r - 1; rr >= 0 && row_slot[rr] == it.slot && row_pos[rr] == pf - 1; rr--) pf--;
    T *kh = it.kh, *vh = it.vh;
    float *sh_o = gpt2__amma_sh, *sh_m = sh_o + 8 * HD, *sh_l = sh_m + 8;
    T *sk = (T *)(sh_l + 8), *sv = sk + (size_t)span_len * HD;
    if (STG) {
        const int n = (min(k1, pf) - k0) * (HD * (int)sizeof(T) / 16);
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            gpt2__cp16(sk + (size_t)i * 8, kh + (size_t)k0 * HD + (size_t)i * 8, true);
            gpt2__cp16(sv + (size_t)i * 8, vh + (size_t)k0 * HD + (size_t)i * 8, true);
        }
        gpt2__cp_commit();
    } else if (prefetch) {
        const int n = (min(k1, p) - k0) * (HD * (int)sizeof(T) / 128);
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            asm volatile("prefetch.global.L2 [%0];" ::"l"(kh + (size_t)k0 * HD + (size_t)i * 64));
            asm volatile("prefetch.global.L2 [%0];" ::"l"(vh + (size_t)k0 * HD + (size_t)i * 64));
        }
    }
    gpt2__pdl_enter();
    const T *q = qkv + (size_t)r * 3 * C + (size_t)h * HD, *kn = q + C, *vn = q + 2 * C;
    /* this row's own key and value (position p) into the cache; the chunks read them from qkv */
    if (store && p < k1 && threadIdx.x < 16) {
        const int c = threadIdx.x & 7;
        *(uint4 *)((threadIdx.x < 8 ? kh : vh) + (size_t)p * HD + c * 8) = *(const uint4 *)((threadIdx.x < 8 ? kn : vn) + c * 8);
    }
    if (STG) {
        gpt2__cp_wait<0>();
        __syncthreads();
    }
    /* keys from own on come from qkv: key j from row r - (p - j) (3 C apart) */
    const int own = store ? pf : INT_MAX;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const T *kb_ = STG ? sk : kh, *vb_ = STG ? sv : vh;
    const int kbase = STG ? k0 : 0, kb = k0 + 32 * warp;
    float o[8][4], m = -INFINITY, l = 0.0f;
    if (kb < k1) {
        uint32_t qa[8];
        gpt2__amma_q(q, qa);
        uint4 kr[4][2], vr[2][4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int j = kb + 8 * i + g;
            const T *src = (j >= own ? kn - (ptrdiff_t)(p - j) * 3 * C : kb_ + (size_t)(j - kbase) * HD) + 16 * t;
            kr[i][0] = gpt2__ld16(src, j < k1);
            kr[i][1] = gpt2__ld16(src + 8, j < k1);
        }
#pragma unroll
        for (int s2 = 0; s2 < 2; s2++)
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int j = kb + 16 * s2 + 8 * (u >> 1) + 2 * t + (u & 1);
                vr[s2][u] = gpt2__ld16((j >= own ? vn - (ptrdiff_t)(p - j) * 3 * C : vb_ + (size_t)(j - kbase) * HD) + 8 * g, j < k1);
            }
        gpt2__amma_chunk<T>(qa, kr, vr, kb, k1, scale_log2, o, m, l);
    } else {
#pragma unroll
        for (int nt = 0; nt < 8; nt++) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
    }
    gpt2__amma_keep(o, m, l, sh_o + warp * HD, sh_m + warp, sh_l + warp);
    __syncthreads();
    const bool alone = n_span == 1 || p < span_len;
    if (threadIdx.x < HD) {
        float M, L, O;
        gpt2__amma_merge(sh_o, sh_m, sh_l, threadIdx.x, M, L, O);
        if (alone) gpt2__put(out + (size_t)r * C + (size_t)h * HD + threadIdx.x, O / L);
        else {
            float *pp = part + (((size_t)z * H + h) * n_span + sp) * (HD + 2);
            pp[threadIdx.x] = O;
            if (threadIdx.x == 0) { pp[HD] = M; pp[HD + 1] = L; }
        }
    }
    if (alone) return;
    const int live = p / span_len + 1;
    if (!gpt2__span_last(&count[z * H + h], live)) return;
    const float *ph = part + ((size_t)z * H + h) * n_span * (HD + 2);
    if (threadIdx.x < HD) gpt2__put(out + (size_t)r * C + (size_t)h * HD + threadIdx.x, gpt2__amma_spans(ph, live, threadIdx.x));
#endif
}

/* Many rows: a warp per (row, head, span) item (item = blockIdx.x * WB + warp; span fastest, then head, then row),
   block 32 WB threads. The warp streams its chunks through its ring of NS stages in shared memory (stage: 32 K rows
   then 32 V rows of 64, the 16-byte piece c of row j at c ^ (j & 7), so the operand reads are free of bank
   conflicts), computes each as gpt2__amma_chunk, keeps the 8 records in shared memory and merges them (lane: dims
   lane and lane + 32). A chunk arrives by cp.async (16 bytes a lane; zeros past the span's last key; the row's own
   key and value from qkv), or, in the TMA form (sm_90; kmap, vmap: the caches as [L max_batch H][max_seq][64]
   planes, plane0 this layer's first), a whole chunk of 32 keys as two 32 x 64 boxes that one lane copies onto the
   stage's transaction barrier, laid out as above by the tensor maps' 128-byte swizzle; the row's own key and value
   (which the warp stores into the cache as it starts) then go over the box's row from registers, and the span's
   last, partial chunk still comes by cp.async (a box would read its keys past the last). The TMA form takes the
   cp.async form's address arithmetic (~290 of its ~600 instructions a chunk) out of the kernel, so a green step's
   attention set can be smaller.
   Shared memory: WB * NS stages (the first at offset 0, 1024-byte aligned as the swizzle wants), then WB (8 * 64 +
   16) floats of records, then WB * NS barriers. The cached keys and values are read with L2's evict-first policy
   (read once per step; the step's weights and activations stay). */
template <typename T, int NS, int WB, bool TMA>
__global__ void __launch_bounds__(32 * WB) gpt2__attn_stream_kernel(const T *__restrict__ qkv, T *__restrict__ kc, T *__restrict__ vc,
                                                                  T *__restrict__ out, float *__restrict__ part,
                                                                  const int *__restrict__ rows, const int *__restrict__ row_slot,
                                                                  const int *__restrict__ row_pos, int C, int H, int max_seq,
                                                                  int span_len, int n_span, int n_items, float scale_log2,
                                                                  unsigned *__restrict__ count, int store,
                                                                  const __grid_constant__ gpt2__tmap kmap,
                                                                  const __grid_constant__ gpt2__tmap vmap, int plane0) {
#if __CUDA_ARCH__ >= 800
    constexpr int HD = 64, STAGE = 2 * 32 * HD; /* elements: K rows then V rows; 16-byte piece c of key j at c ^ (j & 7) */
    extern __shared__ float gpt2__amma_sh[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int item = blockIdx.x * WB + warp;
    T *ring = (T *)gpt2__amma_sh + (size_t)warp * NS * STAGE;
    float *rec = (float *)((T *)gpt2__amma_sh + (size_t)WB * NS * STAGE) + warp * (8 * HD + 16);
    uint64_t *bars = (uint64_t *)((float *)((T *)gpt2__amma_sh + (size_t)WB * NS * STAGE) + WB * (8 * HD + 16)) + warp * NS;
    if (TMA && lane == 0)
        for (int i = 0; i < NS; i++) gpt2__mbar_init(bars + i, 1);
    gpt2__pdl_enter();
    if (item >= n_items) return;
    const int sp = item % n_span, h = (item / n_span) % H, z = item / (n_span * H);
    /* gpt2__dec_at's item in two round trips (the row, then its position and slot at once: loads the compiler
       may not sink past the early return), then the first chunks on their way before anything else (q, the own
       key and value) is read */
    const int r = rows[z];
    const int p = gpt2__ld_now(row_pos + r), slot = gpt2__ld_now(row_slot + r);
    const T *q = qkv + (size_t)r * 3 * C + (size_t)h * HD, *kn = q + C, *vn = q + 2 * C;
    const int k0 = sp * span_len;
    if (k0 > p || slot < 0) return; /* slot < 0 never: it keeps the slot's load before this branch */
    const int k1 = min(k0 + span_len, p + 1), nch = (k1 - k0 + 31) / 32, plane = plane0 + slot * H + h;
    T *kh = kc + ((size_t)slot * H + h) * max_seq * HD, *vh = vc + ((size_t)slot * H + h) * max_seq * HD;
    const int own = store ? p : -1;
    __syncwarp(); /* the barriers' initialisation */
    /* chunk c into stage c % NS: 32 keys x 8 pieces of 16 bytes, K and V; lane takes pieces lane, lane+32, ...; read
       with L2's evict-first policy (each row's cache is read once a step) */
    const uint64_t pol = gpt2__evict_first();
    auto issue = [&](int c) {
        T *st = ring + (size_t)(c % NS) * STAGE;
        const int kb = k0 + 32 * c;
        if (TMA && kb + 32 <= k1) {
            if (lane == 0) {
                gpt2__mbar_expect(bars + c % NS, (unsigned)(STAGE * sizeof(T)));
                gpt2__tma3(st, &kmap, 0, kb, plane, bars + c % NS, pol);
                gpt2__tma3(st + 32 * HD, &vmap, 0, kb, plane, bars + c % NS, pol);
            }
        } else {
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const int piece = lane + 32 * i, key = piece >> 3, col = (piece & 7) * 8, j = kb + key;
                const int at = key * HD + (((piece & 7) ^ (key & 7)) * 8);
                const bool ok = j < k1;
                const T *ks = j == own ? kn + col : kh + (size_t)(ok ? j : k0) * HD + col;
                const T *vs = j == own ? vn + col : vh + (size_t)(ok ? j : k0) * HD + col;
                gpt2__cp16_pol(st + at, ks, ok, pol);
                gpt2__cp16_pol(st + 32 * HD + at, vs, ok, pol);
            }
            gpt2__cp_commit();
        }
    };
#pragma unroll
    for (int c = 0; c < NS - 1; c++) {
        if (c < nch) issue(c);
        else if (!TMA) gpt2__cp_commit();
    }
    /* lane < 16: piece lane & 7 of the own key (lane < 8) or value, into the cache; the box over its position may
       read the cache before or after this store: that row is overwritten from registers below either way */
    uint4 ownv = make_uint4(0, 0, 0, 0);
    if (store && p < k1 && lane < 16) {
        ownv = *(const uint4 *)((lane < 8 ? kn : vn) + (lane & 7) * 8);
        *(uint4 *)((lane < 8 ? kh : vh) + (size_t)p * HD + (lane & 7) * 8) = ownv;
    }
    uint32_t qa[8];
    gpt2__amma_q(q, qa);
    for (int c = 0; c < 8; c++) {
        float o[8][4], m = -INFINITY, l = 0.0f;
        if (c < nch) {
            if (c + NS - 1 < nch) issue(c + NS - 1);
            else if (!TMA) gpt2__cp_commit();
            T *st = ring + (size_t)(c % NS) * STAGE;
            const int kb = k0 + 32 * c;
            if (TMA && kb + 32 <= k1) {
                /* the box holds the cache as it is: the own key and value from registers */
                gpt2__mbar_wait(bars + c % NS, (unsigned)(c / NS) & 1u);
                if (own >= kb && own < kb + 32) {
                    if (lane < 16) {
                        const int key = own - kb, pc = lane & 7;
                        *(uint4 *)(st + (lane < 8 ? 0 : 32 * HD) + key * HD + ((pc ^ (key & 7)) * 8)) = ownv;
                    }
                    gpt2__fence_async_smem(); /* before a later copy into this stage */
                }
            } else if (TMA)
                gpt2__cp_wait<0>(); /* the span's last, partial chunk: the only cp.async group */
            else
                gpt2__cp_wait<NS - 1>();
            __syncwarp();
            uint4 kr[4][2], vr[2][4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const T *src = st + (8 * i + g) * HD;
                kr[i][0] = *(const uint4 *)(src + ((2 * t) ^ g) * 8);
                kr[i][1] = *(const uint4 *)(src + ((2 * t + 1) ^ g) * 8);
            }
#pragma unroll
            for (int s2 = 0; s2 < 2; s2++)
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    const int kv = 16 * s2 + 8 * (u >> 1) + 2 * t + (u & 1);
                    vr[s2][u] = *(const uint4 *)(st + (32 + kv) * HD + ((g ^ (kv & 7)) * 8));
                }
            gpt2__amma_chunk<T>(qa, kr, vr, k0 + 32 * c, k1, scale_log2, o, m, l);
            __syncwarp(); /* every lane has read the stage before it is refilled */
        } else {
#pragma unroll
            for (int nt = 0; nt < 8; nt++) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
        }
        gpt2__amma_keep(o, m, l, rec + c * HD, rec + 8 * HD + c, rec + 8 * HD + 8 + c);
    }
    __syncwarp();
    const bool alone = n_span == 1 || p < span_len;
    float M[2], L[2], O[2];
#pragma unroll
    for (int e = 0; e < 2; e++) gpt2__amma_merge(rec, rec + 8 * HD, rec + 8 * HD + 8, lane + 32 * e, M[e], L[e], O[e]);
    if (alone) {
#pragma unroll
        for (int e = 0; e < 2; e++) gpt2__put(out + (size_t)r * C + (size_t)h * HD + lane + 32 * e, O[e] / L[e]);
        return;
    }
    float *pp = part + (((size_t)z * H + h) * n_span + sp) * (HD + 2);
#pragma unroll
    for (int e = 0; e < 2; e++) pp[lane + 32 * e] = O[e];
    if (lane == 0) { pp[HD] = M[0]; pp[HD + 1] = L[0]; }
    const int live = p / span_len + 1;
    __threadfence();
    __syncwarp();
    int last = 0;
    if (lane == 0) {
        last = atomicAdd(&count[z * H + h], 1u) == (unsigned)live - 1;
        if (last) count[z * H + h] = 0;
    }
    last = __shfl_sync(0xffffffffu, last, 0);
    if (!last) return;
    __threadfence();
    const float *ph = part + ((size_t)z * H + h) * n_span * (HD + 2);
#pragma unroll
    for (int e = 0; e < 2; e++) gpt2__put(out + (size_t)r * C + (size_t)h * HD + lane + 32 * e, gpt2__amma_spans(ph, live, lane + 32 * e));
#endif
}

/* Raises the shared-memory limit of gpt2__attn_kernel's staging forms (T's 16-byte lanes) to all a block may have
   on this GPU; sets S->att_stage_smem to it, 0 when that fails (no staging then) */
template <typename T>
static void gpt2__attn_stage_enable(gpt2__cuda_state *S) {
    int optin = 0;
    if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, S->device) != cudaSuccess) optin = 0;
    const int ok = optin > 0 &&
                   cudaFuncSetAttribute(gpt2__attn_kernel<T, 16 / sizeof(T), 1, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        optin - 1024) == cudaSuccess &&
                   cudaFuncSetAttribute(gpt2__attn_kernel<T, 16 / sizeof(T), 4, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        optin - 1024) == cudaSuccess;
    cudaGetLastError();
    S->att_stage_smem = ok ? optin - 1024 : 0;
}

/* gpt2__attn_stream_kernel's shared memory at ns stages a warp: stages, records, barriers */
template <typename T>
static size_t gpt2__ring_smem(int ns) {
    return GPT2__AMMA_WB * ((size_t)ns * 2 * 32 * 64 * sizeof(T) + (8 * 64 + 16) * sizeof(float) + (size_t)ns * sizeof(uint64_t));
}

/* Whether the tensor-core decode attention runs here (T's kernels built for sm_80+, their shared memory granted):
   gpt2__attn_mma_kernel's staging form gets S->att_stage_smem, gpt2__attn_stream_kernel its ring. */
template <typename T>
static int gpt2__attn_mma_enable(gpt2__cuda_state *S) {
    cudaFuncAttributes fa;
    const int ring = (int)gpt2__ring_smem<T>(3);
    const int ok = S->att_stage_smem > 0 &&
                   cudaFuncSetAttribute(gpt2__attn_mma_kernel<T, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        S->att_stage_smem) == cudaSuccess &&
                   cudaFuncSetAttribute(gpt2__attn_stream_kernel<T, 3, GPT2__AMMA_WB, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        ring) == cudaSuccess &&
                   cudaFuncSetAttribute(gpt2__attn_stream_kernel<T, 3, GPT2__AMMA_WB, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        ring) == cudaSuccess &&
                   cudaFuncGetAttributes(&fa, gpt2__attn_mma_kernel<T, false>) == cudaSuccess && fa.ptxVersion >= 80;
    cudaGetLastError();
    return ok;
}

/* A TMA tensor map of a row-major T array (T 16-bit) of rank 2 or 3, its innermost dimension dims[0] (strides: the
   byte strides of the outer ones, multiples of 16), read in boxes of box[] elements with the 128-byte swizzle (box[0]
   * 2 bytes at most 128); elements past dims read as zero. 0 where the driver does not encode tensor maps. */
static int gpt2__tmap_encode(gpt2__tmap *map, gpt2_dtype dt, unsigned rank, const void *base, const unsigned long long *dims,
                             const unsigned long long *strides, const unsigned *box) {
#if CUDART_VERSION >= 12000
    typedef CUresult (*enc_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *, const cuuint64_t *,
                               const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                               CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
    void *f = NULL;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || !f) {
        cudaGetLastError();
        return 0;
    }
    cuuint64_t d[3], st[2];
    cuuint32_t b[3], one[3] = {1, 1, 1};
    for (unsigned i = 0; i < rank; i++) { d[i] = dims[i]; b[i] = box[i]; if (i + 1 < rank) st[i] = strides[i]; }
    return ((enc_fn)f)((CUtensorMap *)map, dt == GPT2_DTYPE_F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank,
                       (void *)base, d, st, b, one, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                       CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
#else
    (void)map; (void)dt; (void)rank; (void)base; (void)dims; (void)strides; (void)box;
    return 0;
#endif
}

/* TMA tensor maps of the K and V caches for gpt2__attn_stream_kernel's TMA form (S->kv_tma): each cache as
   L * max_batch * H planes of [max_seq][64] T, read in boxes of 32 x 64 with the 128-byte swizzle. Only where the
   kernel's TMA form was built for sm_90+ and runs on such a GPU, and the driver encodes tensor maps; else the
   cp.async form runs (the same bits). */
template <typename T>
static void gpt2__kv_maps(gpt2_model *m, gpt2__cuda_state *S) {
    S->kv_tma = 0;
    const int C = m->cfg.n_embd, H = m->cfg.n_head;
    cudaFuncAttributes fa;
    if (C != 64 * H || cudaFuncGetAttributes(&fa, gpt2__attn_stream_kernel<T, 2, GPT2__AMMA_WB, true>) != cudaSuccess ||
        fa.binaryVersion < 90 || fa.ptxVersion < 90) {
        cudaGetLastError();
        return;
    }
    const unsigned long long dims[3] = {64, (unsigned long long)m->max_seq, (unsigned long long)m->cfg.n_layer * m->max_batch * H};
    const unsigned long long strides[2] = {64 * sizeof(T), (unsigned long long)m->max_seq * 64 * sizeof(T)};
    const unsigned box[3] = {64, 32, 1};
    void *base[2] = {S->k_cache, S->v_cache};
    for (int k = 0; k < 2; k++) {
        gpt2__tmap map;
        if (!gpt2__tmap_encode(&map, m->dtype, 3, base[k], dims, strides, box)) return;
        memcpy(S->kv_map[k], &map, sizeof map);
    }
    S->kv_tma = 1;
}

/* Shared memory of gpt2__attn_mma_kernel's block: the merge records, and with staging a span's K and V */
static size_t gpt2__attn_mma_smem(int staged, size_t es) {
    return 8 * 66 * sizeof(float) + (staged ? 2 * (size_t)GPT2__SPAN_LEN * 64 * es : 0);
}

/* Decode attention on the tensor cores over the rows planned in d (n_span spans of 256 keys), as p->att says: few
   rows gpt2__attn_mma_kernel (GPT2__ATT_MMA, or _STAGED), many gpt2__attn_stream_kernel. The same bits either way. */
template <typename T>
static gpt2_status gpt2__attn_mma_launch(gpt2__cuda_state *S, const gpt2__lane *L, const gpt2__paths *p, const gpt2_model *m, int l,
                                         T *kc, T *vc, const gpt2__cuda_meta *d, int n_span, int span_len, float scale_log2) {
    const int C = m->cfg.n_embd, H = m->cfg.n_head, store = !p->kv_first;
    if (p->att != GPT2__ATT_STREAM) {
        const dim3 grid((unsigned)n_span, (unsigned)H, (unsigned)d->n_att);
        if (p->att == GPT2__ATT_MMA_STAGED)
            return gpt2__launch(gpt2__attn_mma_kernel<T, true>, grid, dim3(256), gpt2__attn_mma_smem(1, sizeof(T)), L->stream, L->pdl,
                                (const T *)L->qkv, kc, vc, (T *)L->att, L->part, (const int *)d->att_rows, (const int *)d->slot,
                                (const int *)d->pos, C, H, m->max_seq, span_len, n_span, scale_log2, L->att_count, store, 1, S->dup_step);
        return gpt2__launch(gpt2__attn_mma_kernel<T, false>, grid, dim3(256), gpt2__attn_mma_smem(0, sizeof(T)), L->stream, L->pdl,
                            (const T *)L->qkv, kc, vc, (T *)L->att, L->part, (const int *)d->att_rows, (const int *)d->slot,
                            (const int *)d->pos, C, H, m->max_seq, span_len, n_span, scale_log2, L->att_count, store, 1, S->dup_step);
    }
    const int n_items = d->n_att * H * n_span, ns = p->att_ns, tma = p->att_tma;
    gpt2__tmap km, vm;
    memcpy(&km, S->kv_map[0], sizeof km);
    memcpy(&vm, S->kv_map[1], sizeof vm);
    return gpt2__launch(ns == 2 ? (tma ? gpt2__attn_stream_kernel<T, 2, GPT2__AMMA_WB, true> : gpt2__attn_stream_kernel<T, 2, GPT2__AMMA_WB, false>)
                                : (tma ? gpt2__attn_stream_kernel<T, 3, GPT2__AMMA_WB, true> : gpt2__attn_stream_kernel<T, 3, GPT2__AMMA_WB, false>),
                        dim3((unsigned)((n_items + GPT2__AMMA_WB - 1) / GPT2__AMMA_WB)),
                        dim3(32 * GPT2__AMMA_WB), gpt2__ring_smem<T>(ns), L->stream, L->pdl, (const T *)L->qkv, kc, vc, (T *)L->att,
                        L->part, (const int *)d->att_rows, (const int *)d->slot, (const int *)d->pos, C, H, m->max_seq, span_len,
                        n_span, n_items, scale_log2, L->att_count, store, km, vm, l * m->max_batch * H);
}

/* Whether the decode rows' caches (every row's max_seq keys; a step verifying drafts: every sequence's) fit
   GPT2__ATT_PREFETCH bytes, so that decode attention takes its few-rows path and prefetches them into L2 */
static int gpt2__att_prefetch(const gpt2__cuda_state *S, const gpt2_model *m, const gpt2__cuda_meta *d, size_t es) {
    const int rows = S->dup_step ? S->dup_seqs : d->n_att;
    return !S->att_many && (double)rows * 2.0 * m->max_seq * m->cfg.n_embd * es <= GPT2__ATT_PREFETCH;
}
/* Whether a step verifying drafts (S->dup_step) runs its decode attention on gpt2__attn_mma_kernel, which reads this
   step's keys from qkv; elsewhere gpt2__kv_store_kernel stores every row's K and V first */
static int gpt2__att_dup_mma(const gpt2__cuda_state *S, const gpt2_model *m, const gpt2__cuda_meta *d) {
    return S->esize == 2 && S->att_mma && m->cfg.n_embd == 64 * m->cfg.n_head && GPT2__SPAN_LEN == 256 &&
           gpt2__att_prefetch(S, m, d, S->esize);
}

/* gpt2__attn_kernel's form for head size hd in elements of es bytes, as gpt2__attention instantiates it: VE elements a
   lane (16 bytes where hd allows), at most MAXC chunks a lane; lpk lanes a key; its shared memory (staged: a span's K
   and V too) */
static void gpt2__attn_core_form(int hd, size_t es, int *VE, int *MAXC) {
    const int ve = (int)(16 / es);
    if (hd % ve == 0) *VE = ve, *MAXC = hd / ve <= 32 ? 1 : 4;
    else *VE = 1, *MAXC = hd <= 32 ? 1 : 8;
}
static int gpt2__attn_core_lpk(int hd, int VE, int MAXC) {
    int lpk = 1;
    while (lpk * MAXC < hd / VE) lpk <<= 1;
    return lpk;
}
static size_t gpt2__attn_core_smem(int hd, int VE, int MAXC, size_t es, int staged) {
    const int G = 128 / gpt2__attn_core_lpk(hd, VE, MAXC);
    return ((size_t)G * hd + 2 * G) * sizeof(float) + (staged ? 2 * (size_t)GPT2__SPAN_LEN * hd * es : 0);
}

/* Decode attention for layer l over the rows planned in d, on the kernel p->att names: the tensor-core kernels
   (gpt2__attn_mma_launch) or gpt2__attn_kernel (GPT2__ATT_CORE, or _STAGED: a span's cached K/V in shared memory
   before its PDL wait), in spans along the sequence (the last span of a row merges them).
   Spans are GPT2__SPAN_LEN keys whatever the batch: a row computes the same in any batch, graph or eager. */
template <typename T, int VE, int MAXC>
static gpt2_status gpt2__attn_launch(gpt2__cuda_state *S, const gpt2__lane *L, const gpt2__paths *p, const gpt2_model *m, int l, T *kc,
                                     T *vc, const gpt2__cuda_meta *d, int n_span, int span_len, float scale_log2) {
    const int C = m->cfg.n_embd, H = m->cfg.n_head, hd = C / H, lpk = gpt2__attn_core_lpk(hd, VE, MAXC);
    const int store = !p->kv_first, prefetch = p->att_prefetch;
    dim3 grid((unsigned)n_span, (unsigned)H, (unsigned)d->n_att);
    if constexpr (sizeof(T) == 2)
        if (p->att >= GPT2__ATT_MMA) return gpt2__attn_mma_launch<T>(S, L, p, m, l, kc, vc, d, n_span, span_len, scale_log2);
    if (p->att == GPT2__ATT_CORE_STAGED)
        return gpt2__launch(gpt2__attn_kernel<T, VE, MAXC, VE * sizeof(T) == 16 /* only 16-byte lanes stage */>, grid,
                            dim3(128), gpt2__attn_core_smem(hd, VE, MAXC, sizeof(T), 1), L->stream, L->pdl,
                            (const T *)L->qkv, kc, vc, (T *)L->att, L->part, (const int *)d->att_rows, (const int *)d->slot,
                            (const int *)d->pos, C, H, hd, m->max_seq, span_len, n_span, lpk, scale_log2, L->att_count, store,
                            prefetch);
    return gpt2__launch(gpt2__attn_kernel<T, VE, MAXC, false>, grid, dim3(128), gpt2__attn_core_smem(hd, VE, MAXC, sizeof(T), 0),
                        L->stream, L->pdl, (const T *)L->qkv, kc, vc,
                        (T *)L->att, L->part, (const int *)d->att_rows, (const int *)d->slot, (const int *)d->pos, C, H, hd,
                        m->max_seq, span_len, n_span, lpk, scale_log2, L->att_count, store, prefetch);
}

/* gpt2__kv_store_kernel over N rows, 16-byte chunks when the head size allows */
template <typename T>
static gpt2_status gpt2__kv_store(cudaStream_t st, int sms, const T *qkv, T *kc, T *vc, const int *slot, const int *pos, int N,
                                  int C, int H, int max_seq) {
    const int hd = C / H, VE = 16 / (int)sizeof(T);
    if (N < 1) return GPT2_OK;
    const size_t chunks = (size_t)N * C / (hd % VE == 0 ? VE : 1);
    const int blocks = (int)((chunks + 255) / 256 < (size_t)8 * sms ? (chunks + 255) / 256 : (size_t)8 * sms);
    if (hd % VE == 0) gpt2__kv_store_kernel<T, 16 / sizeof(T)><<<blocks, 256, 0, st>>>(qkv, kc, vc, slot, pos, N, C, H, hd, max_seq);
    else gpt2__kv_store_kernel<T, 1><<<blocks, 256, 0, st>>>(qkv, kc, vc, slot, pos, N, C, H, hd, max_seq);
    GPT2__LAUNCHED();
    return GPT2_OK;
}

/* == [GPT2:OP_ATTN_PREFILL] == prompt attention: tiled flash kernels (tensor cores / F32), tile plan, launchers = */

/* Shared memory of gpt2__attn_prefill_kernel (bytes): the Q tile, and K and V tiles twice (double buffered) */
template <typename T, int HD>
static constexpr size_t gpt2__prefill_smem() { return (size_t)(GPT2__FQ + 4 * GPT2__FK) * (HD + 8) * sizeof(T); }

/* Causal attention for prompt chunks, flash style on the tensor cores (fp16/bf16, head size HD in {32, 64, 128}); no
   score matrix leaves the registers. Grid: n_tiles * H blocks, one per tile and head (gpt2__plan_attention sorts the
   tiles longest first; the GPU starts blocks in order). heads_inner: block b serves tile b / H, head b % H, so the
   longest tiles of every head start before any shorter one (the last wave is short; for steps whose prompt K/V fit
   in half of L2: gpt2__prefill_heads_inner); else tile b % n_tiles, head b / n_tiles: a head's tiles together, their
   K/V shared in L2 while they run.
   Block: 2 FQ threads = FQ / 16 warps (4 at FQ 64, 4 blocks per SM), warp w owning query rows 16w..16w+15 of the
   tile (lane: rows g = lane/4 and g+8, columns 2(lane%4)+{0,1} of each 8-wide MMA tile).
   The tile's Q and the first keys arrive by cp.async in one group; every copy is 16 bytes, thread tid always the
   same column chunk of the same rows. Per step of 64 keys (this layer's cache [slot][h][pos][HD], or qkv for keys
   fed in this step; cp.async double buffered; a warp skips keys past its last query): the tile's own rows among
   the keys go from shared memory into the cache (for later steps), then S = Q K^T (mma m16n8k16, fp32) -> online
   softmax per row in fp32 (log2 units; key <= query position) -> P rounded to T, reused in registers as the A
   operand -> O = O * correction + P V (fp32 registers). out[row][h*HD..] = O / l, l the sum of the rounded P.
   Matches the attention loop of gpt2__cpu_run. Tuned on the H100.
   Built for sm_90a at HD 64 (WG), both products are one wgmma group each for a warpgroup (gpt2__wg_4), K and V
   staged in the 128-byte swizzle that wgmma reads, a warp taking every step its warpgroup takes: the same bits as
   the mma.sync form, in less time. */
template <typename T, int HD>
__global__ void __launch_bounds__(2 * GPT2__FQ, HD <= 64 ? 256 / GPT2__FQ : 1) gpt2__attn_prefill_kernel(const T *__restrict__ qkv, T *__restrict__ kc,
                                                                   T *__restrict__ vc, T *__restrict__ out,
                                                                   const gpt2__tile *__restrict__ tiles, int C, int H,
                                                                   int max_seq, float scale_log2, int heads_inner) {
#if __CUDA_ARCH__ >= 800
    constexpr int LD = HD + 8, CH = 8, NT = HD / 8, KK = HD / 16;
    /* WG: S and O by wgmma (built for sm_90a), the K and V stages first, 1024-byte aligned, rows of HD with the
       128-byte swizzle (16-byte chunk q of row r at chunk q ^ (r & 7)); else by mma.sync, rows of LD */
    constexpr bool WG = GPT2__WG && HD == 64 && GPT2__FQ % 64 == 0 && GPT2__FK == 64;
    constexpr int KLD = WG ? HD : LD;
    static_assert(!WG || 1024 + (4 * GPT2__FK * HD + GPT2__FQ * LD) * sizeof(T) <= (GPT2__FQ + 4 * GPT2__FK) * LD * sizeof(T),
                  "gpt2__prefill_smem holds the aligned stages");
    extern __shared__ __align__(16) unsigned char gpt2__prefill_sh[];
    T *Ks = WG ? (T *)(((uintptr_t)gpt2__prefill_sh + 1023) & ~(uintptr_t)1023) : (T *)gpt2__prefill_sh + GPT2__FQ * LD;
    T *Vs = Ks + 2 * GPT2__FK * KLD, *Qs = WG ? Vs + 2 * GPT2__FK * KLD : (T *)gpt2__prefill_sh;
    const int n_tiles = (int)(gridDim.x / H), tile = heads_inner ? blockIdx.x / H : blockIdx.x % n_tiles;
    const gpt2__tile tl = tiles[tile];
    const int h = heads_inner ? blockIdx.x % H : blockIdx.x / n_tiles, tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const size_t head = ((size_t)tl.slot * H + h) * max_seq * HD;
    const int kend = tl.pos0 + tl.n, nsteps = (kend + GPT2__FK - 1) / GPT2__FK;
    /* thread tid moves the 16-byte chunk c of rows jr, jr + RPI, ... of every tile it copies */
    constexpr int NTH = 2 * GPT2__FQ, CPR = HD / CH, RPI = NTH / CPR;
    const int jr = tid / CPR, c = tid % CPR;
    static_assert(!WG || RPI % 8 == 0, "a thread's rows share their swizzle");
    const int kcol = WG ? (c ^ (jr & 7)) * CH : c * CH; /* where chunk c of the thread's rows sits in a K/V stage */
    T *kcb = kc + head + c * CH, *vcb = vc + head + c * CH;     /* + key * HD: a cached key */
    const T *qb = qkv + (size_t)h * HD + c * CH;                   /* + row * 3C: a fed row's q (k at + C, v at + 2C) */
    /* keys [step*64, +64) into buffer bf: positions before the run's first row from the cache, the run's own (this
       step's, which other blocks are storing meanwhile) from qkv; past kend zero-filled */
    auto load_kv = [&](int step, int bf) {
        T *kd = Ks + (bf * GPT2__FK + jr) * KLD + kcol, *vd = Vs + (bf * GPT2__FK + jr) * KLD + kcol;
        const int k0 = step * GPT2__FK;
        /* a step's keys all live and all from one source (the usual case): a pointer and a fixed stride */
        if (k0 + GPT2__FK <= kend && (k0 + GPT2__FK <= tl.first || k0 >= tl.first)) {
            const bool fed = k0 >= tl.first;
            const size_t stride = fed ? (size_t)3 * C : (size_t)HD;
            const T *ks = fed ? qb + (size_t)(tl.row0 - tl.pos0 + k0 + jr) * 3 * C + C : kcb + (size_t)(k0 + jr) * HD;
            const T *vs = fed ? ks + C : vcb + (size_t)(k0 + jr) * HD;
#pragma unroll
            for (int it = 0; it < GPT2__FK / RPI; it++) {
                gpt2__cp16(kd + it * RPI * KLD, ks + it * RPI * stride, true);
                gpt2__cp16(vd + it * RPI * KLD, vs + it * RPI * stride, true);
            }
            return;
        }
#pragma unroll
        for (int it = 0; it < GPT2__FK / RPI; it++) {
            const int kp = k0 + jr + it * RPI;
            const bool ok = kp < kend;
            const int key = ok ? kp : 0;
            const T *ks = kcb + (size_t)key * HD, *vs = vcb + (size_t)key * HD;
            if (key >= tl.first) {
                ks = qb + (size_t)(tl.row0 - tl.pos0 + key) * 3 * C + C;
                vs = ks + C;
            }
            gpt2__cp16(kd + it * RPI * KLD, ks, ok);
            gpt2__cp16(vd + it * RPI * KLD, vs, ok);
        }
    };
    /* the tile's Q (rows past the tile zero) and the first keys: one cp.async group */
#pragma unroll
    for (int it = 0; it < GPT2__FQ / RPI; it++) {
        const int rr = jr + it * RPI;
        gpt2__cp16(Qs + rr * LD + c * CH, qb + (size_t)(tl.row0 + (rr < tl.n ? rr : 0)) * 3 * C, rr < tl.n);
    }
    load_kv(0, 0);
    gpt2__cp_commit();
    const bool warp_live = w * 16 < tl.n;
    const bool live0 = w * 16 + g < tl.n, live1 = w * 16 + g + 8 < tl.n;
    const int qpos0 = tl.pos0 + w * 16 + g, qpos1 = qpos0 + 8;
    const int warp_last = tl.pos0 + min(w * 16 + 15, tl.n - 1);
    /* WG: a warpgroup (warps 4g..4g+3, rows 64g..64g+63) takes a step while any of its rows needs it */
    const bool wg_live = (w >> 2) * 64 < tl.n;
    const int wg_last = tl.pos0 + min((w >> 2) * 64 + 63, tl.n - 1);
    float o[NT][4], m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
#pragma unroll
    for (int d = 0; d < NT; d++) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
    uint32_t qf[KK][4] = {}; /* defined on every path: set at the first step only, it must keep its registers */
    for (int st = 0; st < nsteps; st++) {
        if (st + 1 < nsteps) { load_kv(st + 1, (st + 1) & 1); gpt2__cp_commit(); gpt2__cp_wait<1>(); }
        else gpt2__cp_wait<0>();
        if constexpr (WG) gpt2__fence_async_smem(); /* the copies before wgmma reads them */
        __syncthreads();
        const int k0 = st * GPT2__FK;
        /* the tile's own rows among these keys (the last step or two) go from shared memory into the cache, for
           later steps: stores alone, no load on the way */
        if (k0 + GPT2__FK > tl.pos0) {
            const T *kb = Ks + ((st & 1) * GPT2__FK + jr) * KLD + kcol, *vb = Vs + ((st & 1) * GPT2__FK + jr) * KLD + kcol;
#pragma unroll
            for (int it = 0; it < GPT2__FK / RPI; it++) {
                const int kp = k0 + jr + it * RPI;
                if (kp >= tl.pos0 && kp < kend) {
                    *(uint4 *)(kcb + (size_t)kp * HD) = *(const uint4 *)(kb + it * RPI * KLD);
                    *(uint4 *)(vcb + (size_t)kp * HD) = *(const uint4 *)(vb + it * RPI * KLD);
                }
            }
        }
        if (st == 0 && (WG || warp_live))
#pragma unroll
            for (int kk = 0; kk < KK; kk++)
                gpt2__ldsm4(qf[kk], Qs + (w * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * LD + kk * 16 + (lane >> 4) * 8);
        /* with wgmma a warp takes every step its warpgroup takes (the four issue together); keys past a warp's rows
           are masked */
        if (WG ? wg_live && k0 <= wg_last : warp_live && k0 <= warp_last) {
            const T *Kb = Ks + (st & 1) * GPT2__FK * KLD, *Vb = Vs + (st & 1) * GPT2__FK * KLD;
            float s[8][4];
            if constexpr (WG) {
#if GPT2__WG
                gpt2__wg_4<0>(reinterpret_cast<float (&)[32]>(s), qf, Kb, 32, 1); /* k16 steps 32 bytes apart in a row */
#endif
            } else {
#pragma unroll
                for (int j = 0; j < 8; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
                for (int kk = 0; kk < KK; kk++)
#pragma unroll
                    for (int jp = 0; jp < 4; jp++) {
                        uint32_t b[4];
                        gpt2__ldsm4(b, Kb + (jp * 16 + (lane >> 4) * 8 + (lane & 7)) * LD + kk * 16 + ((lane >> 3) & 1) * 8);
                        gpt2__mma(s[2 * jp], qf[kk], b[0], b[1], T());
                        gpt2__mma(s[2 * jp + 1], qf[kk], b[2], b[3], T());
                    }
            }
            /* raw scores: the scale goes into the exponent (one FFMA per score), the max commutes with it */
            float mx0 = -INFINITY, mx1 = -INFINITY;
            if (k0 + GPT2__FK - 1 > tl.pos0 + w * 16) { /* a step on the diagonal (or past the tile): mask */
#pragma unroll
                for (int j = 0; j < 8; j++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const int key = k0 + j * 8 + t * 2 + e;
                        s[j][e] = live0 && key <= qpos0 ? s[j][e] : -INFINITY;
                        s[j][2 + e] = live1 && key <= qpos1 ? s[j][2 + e] : -INFINITY;
                        mx0 = fmaxf(mx0, s[j][e]);
                        mx1 = fmaxf(mx1, s[j][2 + e]);
                    }
            } else { /* every key precedes every query of this warp (rows past the tile are never written) */
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    mx0 = fmaxf(mx0, fmaxf(s[j][0], s[j][1]));
                    mx1 = fmaxf(mx1, fmaxf(s[j][2], s[j][3]));
                }
            }
            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
            const float mn0 = fmaxf(m0, mx0 * scale_log2), mn1 = fmaxf(m1, mx1 * scale_log2);
            /* a row with no live key yet keeps o = l = 0: any finite base gives exp2(-inf) = 0 */
            const float b0 = mn0 != -INFINITY ? mn0 : 0.0f, b1 = mn1 != -INFINITY ? mn1 : 0.0f;
            const float c0 = gpt2__ex2(m0 - b0), c1 = gpt2__ex2(m1 - b1);
            uint32_t pa[4][4];
            float rs0 = 0.0f, rs1 = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const uint32_t lo = gpt2__pack2(gpt2__ex2(fmaf(s[j][0], scale_log2, -b0)), gpt2__ex2(fmaf(s[j][1], scale_log2, -b0)), &rs0, T());
                const uint32_t hi = gpt2__pack2(gpt2__ex2(fmaf(s[j][2], scale_log2, -b1)), gpt2__ex2(fmaf(s[j][3], scale_log2, -b1)), &rs1, T());
                pa[j >> 1][(j & 1) * 2] = lo;
                pa[j >> 1][(j & 1) * 2 + 1] = hi;
            }
            l0 = l0 * c0 + rs0;
            l1 = l1 * c1 + rs1;
            m0 = mn0;
            m1 = mn1;
#pragma unroll
            for (int d = 0; d < NT; d++) { o[d][0] *= c0; o[d][1] *= c0; o[d][2] *= c1; o[d][3] *= c1; }
            if constexpr (WG) {
#if GPT2__WG
                gpt2__wg_4<1>(reinterpret_cast<float (&)[32]>(o), pa, Vb, 16 * HD * (int)sizeof(T), 0); /* 16 keys a k16 step */
#endif
            } else {
#pragma unroll
                for (int kb = 0; kb < 4; kb++)
#pragma unroll
                    for (int dp = 0; dp < NT / 2; dp++) {
                        uint32_t b[4];
                        gpt2__ldsm4_t(b, Vb + (kb * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * LD + dp * 16 + (lane >> 4) * 8);
                        gpt2__mma(o[2 * dp], pa[kb], b[0], b[1], T());
                        gpt2__mma(o[2 * dp + 1], pa[kb], b[2], b[3], T());
                    }
            }
        }
        __syncthreads();
    }
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    float dummy = 0.0f;
    if (live0) {
        const float inv = 1.0f / l0;
        uint32_t *row = (uint32_t *)(out + (size_t)(tl.row0 + w * 16 + g) * C + (size_t)h * HD);
#pragma unroll
        for (int d = 0; d < NT; d++) row[d * 4 + t] = gpt2__pack2(o[d][0] * inv, o[d][1] * inv, &dummy, T());
    }
    if (live1) {
        const float inv = 1.0f / l1;
        uint32_t *row = (uint32_t *)(out + (size_t)(tl.row0 + w * 16 + g + 8) * C + (size_t)h * HD);
#pragma unroll
        for (int d = 0; d < NT; d++) row[d * 4 + t] = gpt2__pack2(o[d][2] * inv, o[d][3] * inv, &dummy, T());
    }
#endif
}

/* Causal attention for prompt chunks in F32, flash style on the CUDA cores (fp32 FMAs: no TF32, whose rounding is not F32's), head size HD
   in {32, 64, 128}: gpt2__attn_prefill_kernel's F32 counterpart, with its tiles (gpt2__plan_attention), its key
   sources (the cache before the run's first row, qkv for the run's own rows) and its store of the tile's own K and
   V into the cache; no score matrix leaves the block.
   Grid: n_tiles * H blocks, as gpt2__attn_prefill_kernel's (heads_inner the same). Block: 256 threads; thread
   (ty, tx) = (tid / 16, tid % 16) owns query rows ty + 16a of the tile (a < FQ / 16), and in each step of 64 keys the
   scores of keys tx + 16b (b < 4) and the output dims tx * HD/16 .. + HD/16 - 1.
   Shared memory (gpt2__prefill32_smem): Q [FQ][HD + 4], K [2][64][HD + 4], V [2][64][HD] (cp.async, double
   buffered), P [FQ][64 + 4]. Per step: S = Q K^T (fp32 FMAs over the dims in order) -> online softmax per row
   (log2 units, key <= query position; the row's max and partial sums over its 16 threads by butterflies) -> P ->
   O = O * correction + P V (FMAs over the keys in order). out[row][h*HD..] = O / l.
   A row's arithmetic involves only its own query and the keys (which 64-key step a key falls in is fixed by its
   position), never the tile's other rows, so a prompt row gives the same bits however its prompt is chunked.
   Matches the attention loop of gpt2__cpu_run. */

template <int HD>
static constexpr size_t gpt2__prefill32_smem() {
    return ((size_t)GPT2__FQ * (HD + 4) + 2 * GPT2__FK * (HD + 4) + 2 * GPT2__FK * HD + (size_t)GPT2__FQ * (GPT2__FK + 4)) * sizeof(float);
}
template <int HD>
__global__ void __launch_bounds__(GPT2__F32_NT, HD <= 64 ? 2 : 1) gpt2__attn_prefill32_kernel(const float *__restrict__ qkv, float *__restrict__ kc,
                                                                       float *__restrict__ vc, float *__restrict__ out,
                                                                       const gpt2__tile *__restrict__ tiles, int C, int H,
                                                                       int max_seq, float scale_log2, int heads_inner) {
    constexpr int LD = HD + 4, PLD = GPT2__FK + 4, RQ = GPT2__FQ / 16, DPT = HD / 16;
    constexpr int CPR = HD / 4, RPI = GPT2__F32_NT / CPR; /* 16-byte chunks per row; rows a pass of the block copies */
    static_assert(GPT2__FK == 64 && GPT2__FQ % 16 == 0 && HD % 16 == 0 && GPT2__FK % RPI == 0 && GPT2__FQ % RPI == 0, "tile shapes");
    extern __shared__ __align__(16) float gpt2__p32_sh[];
    float *Qs = gpt2__p32_sh, *Ks = Qs + GPT2__FQ * LD, *Vs = Ks + 2 * GPT2__FK * LD, *Ps = Vs + 2 * GPT2__FK * HD;
    const int n_tiles = (int)(gridDim.x / H), tile = heads_inner ? blockIdx.x / H : blockIdx.x % n_tiles;
    const gpt2__tile tl = tiles[tile];
    const int h = heads_inner ? blockIdx.x % H : blockIdx.x / n_tiles, tid = threadIdx.x, ty = tid >> 4, tx = tid & 15;
    const size_t head = ((size_t)tl.slot * H + h) * max_seq * HD;
    const int kend = tl.pos0 + tl.n, nsteps = (kend + GPT2__FK - 1) / GPT2__FK;
    const int jr = tid / CPR, c4 = (tid % CPR) * 4; /* the thread copies chunk c4 of rows jr, jr + RPI, ... */
    float *kcb = kc + head + c4, *vcb = vc + head + c4;          /* + key * HD: a cached key */
    const float *qb = qkv + (size_t)h * HD + c4;                 /* + row * 3C: a fed row's q (k at + C, v at + 2C) */
    /* keys [step*64, +64) into buffer bf: before the run's first row from the cache, the run's own from qkv (other
       blocks store them meanwhile); past kend zeros */
    auto load_kv = [&](int step, int bf) {
        const int k0 = step * GPT2__FK;
#pragma unroll
        for (int it = 0; it < GPT2__FK / RPI; it++) {
            const int j = jr + it * RPI, kp = k0 + j, key = kp < kend ? kp : 0;
            const float *ks = key >= tl.first ? qb + (size_t)(tl.row0 - tl.pos0 + key) * 3 * C + C : kcb + (size_t)key * HD;
            const float *vs = key >= tl.first ? ks + C : vcb + (size_t)key * HD;
            gpt2__cp16(Ks + (bf * GPT2__FK + j) * LD + c4, ks, kp < kend);
            gpt2__cp16(Vs + (bf * GPT2__FK + j) * HD + c4, vs, kp < kend);
        }
    };
#pragma unroll
    for (int it = 0; it < GPT2__FQ / RPI; it++) {
        const int rr = jr + it * RPI;
        gpt2__cp16(Qs + rr * LD + c4, qb + (size_t)(tl.row0 + (rr < tl.n ? rr : 0)) * 3 * C, rr < tl.n);
    }
    load_kv(0, 0);
    gpt2__cp_commit();
    float o[RQ][DPT], m[RQ], l[RQ];
#pragma unroll
    for (int a = 0; a < RQ; a++) {
        m[a] = -INFINITY;
        l[a] = 0.0f;
#pragma unroll
        for (int e = 0; e < DPT; e++) o[a][e] = 0.0f;
    }
    for (int st = 0; st < nsteps; st++) {
        if (st + 1 < nsteps) { load_kv(st + 1, (st + 1) & 1); gpt2__cp_commit(); gpt2__cp_wait<1>(); }
        else gpt2__cp_wait<0>();
        __syncthreads();
        const int k0 = st * GPT2__FK;
        const float *Kb = Ks + (st & 1) * GPT2__FK * LD, *Vb = Vs + (st & 1) * GPT2__FK * HD;
        /* the tile's own rows among these keys go from shared memory into the cache, for later steps */
        if (k0 + GPT2__FK > tl.pos0)
#pragma unroll
            for (int it = 0; it < GPT2__FK / RPI; it++) {
                const int j = jr + it * RPI, kp = k0 + j;
                if (kp >= tl.pos0 && kp < kend) {
                    *(float4 *)(kcb + (size_t)kp * HD) = *(const float4 *)(Kb + j * LD + c4);
                    *(float4 *)(vcb + (size_t)kp * HD) = *(const float4 *)(Vb + j * HD + c4);
                }
            }
        /* S = Q K^T: score (a, b) is row ty + 16a against key tx + 16b, its dims added in order */
        float s[RQ][4];
#pragma unroll
        for (int a = 0; a < RQ; a++) s[a][0] = s[a][1] = s[a][2] = s[a][3] = 0.0f;
#pragma unroll 4
        for (int d = 0; d < HD; d += 4) {
            float4 q[RQ], k[4];
#pragma unroll
            for (int a = 0; a < RQ; a++) q[a] = *(const float4 *)(Qs + (ty + 16 * a) * LD + d);
#pragma unroll
            for (int b = 0; b < 4; b++) k[b] = *(const float4 *)(Kb + (tx + 16 * b) * LD + d);
#pragma unroll
            for (int a = 0; a < RQ; a++)
#pragma unroll
                for (int b = 0; b < 4; b++) {
                    s[a][b] = fmaf(q[a].x, k[b].x, s[a][b]);
                    s[a][b] = fmaf(q[a].y, k[b].y, s[a][b]);
                    s[a][b] = fmaf(q[a].z, k[b].z, s[a][b]);
                    s[a][b] = fmaf(q[a].w, k[b].w, s[a][b]);
                }
        }
        /* online softmax per row: the max over the row's 16 threads, P into shared memory, the corrections */
#pragma unroll
        for (int a = 0; a < RQ; a++) {
            const int i = ty + 16 * a, qpos = tl.pos0 + i;
            float mx = -INFINITY;
#pragma unroll
            for (int b = 0; b < 4; b++) {
                if (!(i < tl.n && k0 + tx + 16 * b <= qpos)) s[a][b] = -INFINITY;
                mx = fmaxf(mx, s[a][b]);
            }
#pragma unroll
            for (int x = 1; x < 16; x <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, x));
            const float mn = fmaxf(m[a], mx * scale_log2);
            const float base = mn != -INFINITY ? mn : 0.0f; /* a row with no live key yet keeps o = l = 0 */
            const float corr = exp2f(m[a] - base);
            float rs = 0.0f;
#pragma unroll
            for (int b = 0; b < 4; b++) {
                const float p = exp2f(fmaf(s[a][b], scale_log2, -base));
                rs += p;
                Ps[i * PLD + tx + 16 * b] = p;
            }
            l[a] = l[a] * corr + rs;
            m[a] = mn;
#pragma unroll
            for (int e = 0; e < DPT; e++) o[a][e] *= corr;
        }
        __syncthreads();
        /* O += P V: dims tx * DPT .. of rows ty + 16a, the keys added in order */
#pragma unroll 2
        for (int j = 0; j < GPT2__FK; j += 4) {
            float4 p[RQ];
#pragma unroll
            for (int a = 0; a < RQ; a++) p[a] = *(const float4 *)(Ps + (ty + 16 * a) * PLD + j);
#pragma unroll
            for (int jj = 0; jj < 4; jj++) {
                float v[DPT];
#pragma unroll
                for (int e = 0; e < DPT; e += 2) *(float2 *)&v[e] = *(const float2 *)(Vb + (j + jj) * HD + tx * DPT + e);
#pragma unroll
                for (int a = 0; a < RQ; a++) {
                    const float pj = jj == 0 ? p[a].x : jj == 1 ? p[a].y : jj == 2 ? p[a].z : p[a].w;
#pragma unroll
                    for (int e = 0; e < DPT; e++) o[a][e] = fmaf(pj, v[e], o[a][e]);
                }
            }
        }
        __syncthreads(); /* before the next step's copies and P overwrite what this one read */
    }
#pragma unroll
    for (int a = 0; a < RQ; a++) {
        float la = l[a];
#pragma unroll
        for (int x = 1; x < 16; x <<= 1) la += __shfl_xor_sync(0xffffffffu, la, x);
        const int i = ty + 16 * a;
        if (i < tl.n) {
            const float inv = 1.0f / la;
            float *row = out + (size_t)(tl.row0 + i) * C + (size_t)h * HD + tx * DPT;
#pragma unroll
            for (int e = 0; e < DPT; e += 2) *(float2 *)(row + e) = make_float2(o[a][e] * inv, o[a][e + 1] * inv);
        }
    }
}

/* Which attention kernel serves which fed row: a run of rows of one sequence (same slot, consecutive positions)
   longer than one goes to the tiled prefill kernel in tiles of 64 when `flash`; every other row (decode rows, or
   all rows without flash) to the row kernel. Fills h's att_rows, tiles and counts from its slot and pos. */
static void gpt2__plan_attention(gpt2__cuda_meta *h, int N, int flash) {
    h->n_att = h->n_tiles = 0;
    h->tile_keys = 0;
    for (int r = 0; r < N;) {
        int e = r + 1;
        while (e < N && h->slot[e] == h->slot[r] && h->pos[e] == h->pos[e - 1] + 1) e++;
        if (flash && e - r > 1) h->tile_keys += h->pos[e - 1] + 1;
        if (flash && e - r > 1)
            for (int t = r; t < e; t += GPT2__FQ) {
                gpt2__tile *ti = &h->tiles[h->n_tiles++];
                ti->row0 = t; ti->n = e - t < GPT2__FQ ? e - t : GPT2__FQ; ti->slot = h->slot[r]; ti->pos0 = h->pos[t];
                ti->first = h->pos[r];
            }
        else
            for (int t = r; t < e; t++) h->att_rows[h->n_att++] = t;
        r = e;
    }
    qsort(h->tiles, (size_t)h->n_tiles, sizeof *h->tiles, gpt2__tile_cmp);
}

/* The tiled prefill kernels' block order: S->prefill_order when set (tests, bench), else heads inner while the
   step's prompt K/V (elements of es bytes) fit in half of L2 (with every head's tiles at once, the K/V share L2 with
   the Q reads and the output and cache writes streaming through it: beyond that, tiles inner was faster) */
static int gpt2__prefill_heads_inner(const gpt2__cuda_state *S, const gpt2__cuda_meta *d, int C, size_t es) {
    return S->prefill_order >= 0 ? S->prefill_order : 2.0 * (double)d->tile_keys * C * es <= 0.5 * (double)S->l2_bytes;
}
template <typename T, int HD>
static gpt2_status gpt2__prefill_launch(const gpt2__lane *L, const gpt2_model *m, T *kc, T *vc, const gpt2__cuda_meta *d, float scale_log2,
                                        int heads_inner) {
    const int C = m->cfg.n_embd, H = m->cfg.n_head;
    gpt2__attn_prefill_kernel<T, HD><<<dim3((unsigned)d->n_tiles * (unsigned)H), 2 * GPT2__FQ, gpt2__prefill_smem<T, HD>(), L->stream>>>(
        (const T *)L->qkv, kc, vc, (T *)L->att, d->tiles, C, H, m->max_seq, scale_log2, heads_inner);
    GPT2__LAUNCHED();
    return GPT2_OK;
}

/* Whether the tiled prefill kernel serves this dtype and head size on this GPU; raises its shared-memory limit. */
template <typename T, int HD>
static int gpt2__prefill_enable(void) {
    cudaFuncAttributes fa; /* the kernel is empty unless the code that runs was built for sm_80+ */
    return cudaFuncSetAttribute(gpt2__attn_prefill_kernel<T, HD>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)gpt2__prefill_smem<T, HD>()) == cudaSuccess &&
           cudaFuncGetAttributes(&fa, gpt2__attn_prefill_kernel<T, HD>) == cudaSuccess && fa.ptxVersion >= 80;
}
template <int HD>
static int gpt2__prefill32_enable(void) {
    return cudaFuncSetAttribute(gpt2__attn_prefill32_kernel<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)gpt2__prefill32_smem<HD>()) == cudaSuccess;
}
static int gpt2__prefill_usable(gpt2_dtype dt, int hd, int device) {
    cudaDeviceProp pr;
    if (cudaGetDeviceProperties(&pr, device) != cudaSuccess || pr.major < 8) return 0;
    int ok = 0;
    if (dt == GPT2_DTYPE_F32)
        ok = hd == 32 ? gpt2__prefill32_enable<32>() : hd == 64 ? gpt2__prefill32_enable<64>()
           : hd == 128 ? gpt2__prefill32_enable<128>() : 0;
    else if (dt == GPT2_DTYPE_F16)
        ok = hd == 32 ? gpt2__prefill_enable<__half, 32>() : hd == 64 ? gpt2__prefill_enable<__half, 64>()
           : hd == 128 ? gpt2__prefill_enable<__half, 128>() : 0;
    else
        ok = hd == 32 ? gpt2__prefill_enable<__nv_bfloat16, 32>() : hd == 64 ? gpt2__prefill_enable<__nv_bfloat16, 64>()
           : hd == 128 ? gpt2__prefill_enable<__nv_bfloat16, 128>() : 0;
    cudaGetLastError();
    return ok;
}

template <int HD>
static gpt2_status gpt2__prefill32_launch(const gpt2__lane *L, const gpt2_model *m, float *kc, float *vc, const gpt2__cuda_meta *d,
                                          float scale_log2, int heads_inner) {
    const int C = m->cfg.n_embd, H = m->cfg.n_head;
    gpt2__attn_prefill32_kernel<HD><<<dim3((unsigned)d->n_tiles * (unsigned)H), GPT2__F32_NT, gpt2__prefill32_smem<HD>(), L->stream>>>(
        (const float *)L->qkv, kc, vc, (float *)L->att, d->tiles, C, H, m->max_seq, scale_log2, heads_inner);
    GPT2__LAUNCHED();
    return GPT2_OK;
}
static gpt2_status gpt2__prefill(const gpt2__lane *L, const gpt2__paths *p, const gpt2_model *m, float *kc, float *vc, const gpt2__cuda_meta *d,
                                 float scale_log2) {
    const int hd = m->cfg.n_embd / m->cfg.n_head, hi = p->heads_inner;
    return hd == 32 ? gpt2__prefill32_launch<32>(L, m, kc, vc, d, scale_log2, hi) : hd == 64 ? gpt2__prefill32_launch<64>(L, m, kc, vc, d, scale_log2, hi)
                    : gpt2__prefill32_launch<128>(L, m, kc, vc, d, scale_log2, hi);
}
template <typename T>
static gpt2_status gpt2__prefill(const gpt2__lane *L, const gpt2__paths *p, const gpt2_model *m, T *kc, T *vc, const gpt2__cuda_meta *d,
                                 float scale_log2) {
    const int hd = m->cfg.n_embd / m->cfg.n_head, hi = p->heads_inner;
    return hd == 32 ? gpt2__prefill_launch<T, 32>(L, m, kc, vc, d, scale_log2, hi) : hd == 64 ? gpt2__prefill_launch<T, 64>(L, m, kc, vc, d, scale_log2, hi)
                    : gpt2__prefill_launch<T, 128>(L, m, kc, vc, d, scale_log2, hi);
}

/* Layer l's attention scores' scale in log2 units: log2(e) / sqrt(head size) (none with scale_attn_weights false),
   and / (l + 1) with scale_attn_by_inverse_layer_idx, as gpt2__cpu_forward's */
static float gpt2__attn_scale_log2(const gpt2_model *m, int l) {
    float s = 1.4426950408889634f;
    if (!m->arch.attn_unscaled) s /= sqrtf((float)(m->cfg.n_embd / m->cfg.n_head));
    if (m->arch.attn_by_layer) s /= (float)(l + 1);
    return s;
}

/* == [GPT2:OP_ATTN] == a layer's attention: K/V store, prompt tiles, decode kernels, green-step streams ========= */

/* Layer l's attention step over the N fed rows planned in d, on the kernels p names (gpt2__paths_of): K and V of the
   rows into the cache, then the kernels. Usually each kernel stores the K and V of the rows it serves: a tile's rows
   (gpt2__attn_prefill_kernel, which reads the keys fed in this step from qkv), a row that is the only new row of its
   sequence (the decode kernels, which read its own key from qkv). With p->kv_first (no tiled prefill kernel: F32 before
   sm_80; or drafts to verify off the tensor-core kernel) gpt2__kv_store_kernel stores every row's first. */
template <typename T>
static gpt2_status gpt2__attention(gpt2__cuda_state *S, gpt2__lane *L, const gpt2__paths *p, const gpt2_model *m, int l,
                                   const gpt2__cuda_meta *d, int N_fed) {
    const int C = m->cfg.n_embd, H = m->cfg.n_head, hd = C / H, N = d->n_att;
    const size_t per_layer = (size_t)m->max_batch * m->max_seq * C;
    T *kc = (T *)S->k_cache + (size_t)l * per_layer, *vc = (T *)S->v_cache + (size_t)l * per_layer;
    const int n_kv = p->kv_first ? N_fed : 0;
    gpt2_status st = GPT2_OK;
    if (n_kv > 0 && (st = gpt2__kv_store<T>(L->stream, S->sms, (const T *)L->qkv, kc, vc, d->slot, d->pos, n_kv, C, H, m->max_seq)))
        return st;
    const float scale_log2 = gpt2__attn_scale_log2(m, l);
    if (d->n_tiles > 0 && (st = gpt2__prefill(L, p, m, kc, vc, d, scale_log2))) return st;
    if (N < 1) return GPT2_OK;
    /* in a green step (gpt2__cuda_parts) the part's attention runs in its stream of the attention set, between two
       events; no programmatic launch across them */
    gpt2__lane A = *L;
    const int i = L->part_i;
    if (L->att_stream) {
        GPT2__CU(cudaEventRecord(S->att_go[i], L->stream));
        GPT2__CU(cudaStreamWaitEvent(L->att_stream, S->att_go[i], 0));
        A.stream = L->att_stream;
        A.pdl = 0;
    }
    /* spans of a fixed length, so a row's result never depends on how many rows share the step */
    const int span_len = GPT2__SPAN_LEN, n_span = (m->max_seq + span_len - 1) / span_len;
    /* the form gpt2__attn_core_form names (the path chooser sized its shared memory by it) */
    int ve, maxc;
    gpt2__attn_core_form(hd, sizeof(T), &ve, &maxc);
    if (ve > 1 && maxc == 1) st = gpt2__attn_launch<T, 16 / sizeof(T), 1>(S, &A, p, m, l, kc, vc, d, n_span, span_len, scale_log2);
    else if (ve > 1) st = gpt2__attn_launch<T, 16 / sizeof(T), 4>(S, &A, p, m, l, kc, vc, d, n_span, span_len, scale_log2);
    else if (maxc == 1) st = gpt2__attn_launch<T, 1, 1>(S, &A, p, m, l, kc, vc, d, n_span, span_len, scale_log2);
    else st = gpt2__attn_launch<T, 1, 8>(S, &A, p, m, l, kc, vc, d, n_span, span_len, scale_log2);
    if (!st && L->att_stream) {
        /* the run's lane moves on: the last part's work after its last attention goes on in tail_stream, over every SM */
        if (L->tail_stream && l + 1 == m->cfg.n_layer) L->stream = L->tail_stream;
        GPT2__CU(cudaEventRecord(S->att_done[i], L->att_stream));
        GPT2__CU(cudaStreamWaitEvent(L->stream, S->att_done[i], 0));
    }
    return st;
}

/* The head sizes gpt2__attention handles (init refuses others) */
static int gpt2__cuda_head_ok(int hd, size_t esize) {
    int VE = (int)(16 / esize);
    return hd % VE == 0 ? hd / VE <= 4 * 32 : hd <= 8 * 32;
}

/* == [GPT2:OP_SAMPLE] == sampling on the GPU (kernel, launcher) ================================================= */

/* The sampler's id for one row: into next (the device's, which a fed step reads) and straight into the host's
   staging blob (pk.out): a copy after the step would hold the next step back. */
static __device__ __forceinline__ void gpt2__put_id(int *next, int row, const gpt2__pick &pk, int id, double lse = 0.0) {
    if (pk.rec && id >= 0) pk.rec->lp = (float)((double)pk.stash[id] - lse);
    next[row] = id;
    if (pk.out) {
        *(volatile int *)pk.out = id;
        __threadfence_system();
    }
}

/* A candidate's sort key: p's bits above, ~id below, so keys in descending order are p descending, ties by
   lower index first (the order of gpt2__cand_cmp). Keys are unique, and every real key is above 0. */
static __device__ __forceinline__ unsigned long long gpt2__key(const float *p, int i) {
    return ((unsigned long long)__float_as_uint(p[i]) << 32) | (unsigned long long)(0xFFFFFFFFu - (unsigned)i);
}
static __device__ __forceinline__ float gpt2__key_p(unsigned long long k) { return __uint_as_float((unsigned)(k >> 32)); }
static __device__ __forceinline__ int gpt2__key_id(unsigned long long k) { return (int)(0xFFFFFFFFu - (unsigned)k); }

/* Shared state of one sampler block. */
typedef struct gpt2__sample_sh {
    unsigned long long keys[GPT2__PAGE];
    unsigned int hist[256];
    unsigned long long prefix, mask;
    int remaining, count, found;
    float red_v[32];
    int red_i[32];
    double red_d[32], lse;
    unsigned long long red_k[32];
    double t_total, t_ent, t_limit;     /* typical_p's cut (gpt2__typical_limit) */
    unsigned long long t_kmin;
    int t_n;
} gpt2__sample_sh;

/* The keys of candidates in descending p (gpt2__key), and in ascending typical_p distance (gpt2__typ_key) */
struct gpt2__p_key {
    const float *p;
    __device__ unsigned long long operator()(int i) const { return gpt2__key(p, i); }
};
/* typical_p's distance of a candidate of probability p, gpt2__typ_dist's arithmetic: |-log(p / total) - ent|, infinite
   for p = 0 */
static __device__ __forceinline__ double gpt2__typ_dist_d(float p, double total, double ent) {
    return p > 0.0f ? fabs(__dsub_rn(-log(__ddiv_rn((double)p, total)), ent)) : (double)INFINITY;
}
/* A candidate is key(p, i) >= kmin (the cut's last key; 0: every id) and p >= floor_p. Its key: the distance's bits
   with the low 17 dropped, then the index (vocabularies of at most 2^17 ids), all inverted so that the nearest is the
   largest, less 1 (the first page's bound ~0 excludes itself: distance 0 at index 0 must stay below it); 0 for any
   other id. Distances equal in their top 47 bits come in index order (the CPU orders them by the full double). */
struct gpt2__typ_key {
    const float *p;
    double total, ent;
    unsigned long long kmin;
    float floor_p;
    __device__ unsigned long long operator()(int i) const {
        if (!(gpt2__key(p, i) >= kmin && p[i] >= floor_p)) return 0;
        const unsigned long long b = (unsigned long long)__double_as_longlong(gpt2__typ_dist_d(p[i], total, ent));
        return ~((b & ~0x1FFFFull) | (unsigned long long)i) - 1;
    }
};

/* The cnt largest keys of ids 0..V-1 (key(i)) below `bound`, sorted descending into sh->keys[0..cnt) (cnt <=
   GPT2__PAGE, and at least cnt keys lie below bound): a radix select, 8 bits at a time, finds the cnt-th largest key,
   the keys at or above it are gathered, and a bitonic sort orders them. Called by the whole block. */
template <typename K>
static __device__ void gpt2__page_extract(K key, int V, unsigned long long bound, int cnt, gpt2__sample_sh *sh) {
    const int tid = threadIdx.x, nt = blockDim.x;
    if (tid == 0) { sh->prefix = 0; sh->mask = 0; sh->remaining = cnt; sh->count = 0; }
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (int i = tid; i < 256; i += nt) sh->hist[i] = 0;
        __syncthreads();
        const unsigned long long prefix = sh->prefix, mask = sh->mask;
        for (int i = tid; i < V; i += nt) {
            unsigned long long k = key(i);
            if (k < bound && (k & mask) == prefix) atomicAdd(&sh->hist[(k >> shift) & 255], 1u);
        }
        __syncthreads();
        if (tid == 0) {
            int rem = sh->remaining, d = 255;
            for (; d > 0; d--) {
                if ((int)sh->hist[d] >= rem) break;
                rem -= (int)sh->hist[d];
            }
            sh->remaining = rem;
            sh->prefix |= (unsigned long long)d << shift;
            sh->mask |= 255ull << shift;
        }
        __syncthreads();
    }
    const unsigned long long threshold = sh->prefix;
    for (int i = tid; i < V; i += nt) {
        unsigned long long k = key(i);
        if (k < bound && k >= threshold) {
            int at = atomicAdd(&sh->count, 1);
            if (at < cnt) sh->keys[at] = k;
        }
    }
    int n2 = 1;
    while (n2 < cnt) n2 <<= 1;
    for (int i = cnt + tid; i < n2; i += nt) sh->keys[i] = 0;
    __syncthreads();
    for (int k = 2; k <= n2; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int i = tid; i < n2; i += nt) {
                int ixj = i ^ j;
                if (ixj > i) {
                    unsigned long long a = sh->keys[i], b = sh->keys[ixj];
                    if ((i & k) == 0 ? a < b : a > b) { sh->keys[i] = b; sh->keys[ixj] = a; }
                }
            }
            __syncthreads();
        }
}

/* A logit's bits as an unsigned key in the order of the values (NaN aside; -0 as +0, equal as the CPU compares
   them), below the index's: gpt2__lp_prelude's top alternatives, ties by lower index first */
static __device__ __forceinline__ unsigned long long gpt2__logit_key(float v, int i) {
    const unsigned u = v == 0.0f ? 0u : __float_as_uint(v), o = u & 0x80000000u ? ~u : u | 0x80000000u;
    return ((unsigned long long)o << 32) | (unsigned long long)(0xFFFFFFFFu - (unsigned)i);
}

/* gpt2__logprobs' values from a sampled row's raw logits l [V], by the whole block, before anything changes them:
   l kept in pk.stash (the chosen token's value once it is known, gpt2__put_id), the log-sum-exp into sh->lse (the
   sum of exp(l - max) in double, over a block's tree: equal to the CPU's within double rounding), and the pk.top
   largest logits, most likely first (ties: lower index), with their log-probabilities into pk.rec. */
static __device__ void gpt2__lp_prelude(const float *l, int V, const gpt2__pick &pk, gpt2__sample_sh *sh) {
    const int tid = threadIdx.x, nt = blockDim.x, lane = tid & 31, w = tid >> 5, nw = nt >> 5;
    float mx = -INFINITY;
    for (int i = tid; i < V; i += nt) {
        const float v = l[i];
        pk.stash[i] = v;
        mx = v > mx ? v : mx;
    }
    for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    if (lane == 0) sh->red_v[w] = mx;
    __syncthreads();
    for (int i = 0; i < nw; i++) mx = fmaxf(mx, sh->red_v[i]);
    double sum = 0.0;
    for (int i = tid; i < V; i += nt) sum += exp((double)l[i] - (double)mx);
    for (int o = 16; o; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) sh->red_d[w] = sum;
    __syncthreads();
    if (tid == 0) {
        double t = 0.0;
        for (int i = 0; i < nw; i++) t += sh->red_d[i];
        sh->lse = (double)mx + log(t);
    }
    __syncthreads();
    unsigned long long bound = ~0ull;
    for (int j = 0; j < pk.top; j++) {
        unsigned long long best = 0;
        for (int i = tid; i < V; i += nt) {
            const unsigned long long k = gpt2__logit_key(l[i], i);
            if (k < bound && k > best) best = k;
        }
        for (int o = 16; o; o >>= 1) {
            const unsigned long long b = __shfl_xor_sync(0xffffffffu, best, o);
            best = b > best ? b : best;
        }
        if (lane == 0) sh->red_k[w] = best;
        __syncthreads();
        for (int i = 0; i < nw; i++) best = sh->red_k[i] > best ? sh->red_k[i] : best;
        if (tid == 0) {
            const int id = best ? (int)(0xFFFFFFFFu - (unsigned)best) : 0;
            pk.rec->ids[j] = id;
            pk.rec->lps[j] = best ? (float)((double)l[id] - sh->lse) : -INFINITY;
        }
        bound = best;
        __syncthreads();
    }
}

/* Sorts a[0 .. n) ascending in shared memory (n2: n rounded up to a power of two; a[n .. n2) are filled with
   INT_MAX here). Called by the whole block. */
static __device__ void gpt2__block_sort(int *a, int n, int n2) {
    const int tid = threadIdx.x, nt = blockDim.x;
    for (int i = n + tid; i < n2; i += nt) a[i] = 0x7FFFFFFF;
    __syncthreads();
    for (int k = 2; k <= n2; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int i = tid; i < n2; i += nt) {
                const int ixj = i ^ j;
                if (ixj > i && ((i & k) == 0 ? a[i] > a[ixj] : a[i] < a[ixj])) { const int t = a[i]; a[i] = a[ixj]; a[ixj] = t; }
            }
            __syncthreads();
        }
}

/* The processors of gpt2__process, on a sampled row's logits z [V] in place, by the whole block, with the same
   arithmetic (each value rounded as written): bias (the entries of one id added in list order by one thread),
   repetition_penalty once per distinct token of the history, presence and frequency over the generated part (each
   token's count from a sorted copy), no_repeat_ngram's bans, and the stop tokens banned before min_new tokens. The
   history is the slot's tokens at positions 0 .. pk.pos, the drafts fed before this row included. The sorted copies
   live in sh->keys (room for 2 GPT2__PAGE ints: the CUDA backend refuses processors beyond that many positions). */
static __device__ void gpt2__process_row(float *z, int V, const gpt2__pick &pk, gpt2__sample_sh *sh) {
    const int tid = threadIdx.x, nt = blockDim.x;
    const int nh = pk.pos + 1, np = pk.n_prompt < nh ? pk.n_prompt : nh, ng = nh - np;
    const int *ctx = pk.hist, *bl = pk.ctl;
    for (int k = tid; k < pk.n_bias; k += nt) {
        const int id = bl[2 * k];
        if (k > 0 && bl[2 * k - 2] == id) continue;
        float v = z[id];
        for (int j = k; j < pk.n_bias && bl[2 * j] == id; j++) v = __fadd_rn(v, __int_as_float(bl[2 * j + 1]));
        z[id] = v;
    }
    __syncthreads();
    int *srt = (int *)sh->keys;
    const float rp = pk.rep_penalty;
    if (rp > 0.0f && rp != 1.0f) {
        int n2 = 1;
        while (n2 < nh) n2 <<= 1;
        for (int i = tid; i < nh; i += nt) srt[i] = ctx[i];
        gpt2__block_sort(srt, nh, n2);
        for (int i = tid; i < nh; i += nt)
            if (!i || srt[i] != srt[i - 1]) {
                const float v = z[srt[i]];
                z[srt[i]] = v > 0.0f ? __fdiv_rn(v, rp) : __fmul_rn(v, rp);
            }
        __syncthreads();
    }
    if ((pk.presence != 0.0f || pk.frequency != 0.0f) && ng > 0) {
        int n2 = 1;
        while (n2 < ng) n2 <<= 1;
        for (int i = tid; i < ng; i += nt) srt[i] = ctx[np + i];
        gpt2__block_sort(srt, ng, n2);
        for (int i = tid; i < ng; i += nt)
            if (!i || srt[i] != srt[i - 1]) {
                int c = 1;
                while (i + c < ng && srt[i + c] == srt[i]) c++;
                z[srt[i]] = __fsub_rn(z[srt[i]], __fadd_rn(pk.presence, __fmul_rn(pk.frequency, (float)c)));
            }
        __syncthreads();
    }
    if (pk.no_repeat > 0 && nh + 1 >= pk.no_repeat) {
        const int g = pk.no_repeat - 1;
        for (int i = tid; i + g < nh; i += nt) {
            int e = 0;
            while (e < g && ctx[i + e] == ctx[nh - g + e]) e++;
            if (e == g) z[ctx[i + g]] = -INFINITY;
        }
    }
    if (ng < pk.min_new)
        for (int k = tid; k < pk.n_stop; k += nt) z[bl[2 * pk.n_bias + k]] = -INFINITY;
    __syncthreads();
}

/* typical_p's cut (gpt2__cut_typical's rule) over a sampled row's candidates (gpt2__typ_key: key(p, i) >= kmin and p
   >= floor_p), n_c of them and their p summing to total, both on thread 0, in candidate order (by_index: index order,
   else descending p), by the whole block: the entropy summed on thread 0 in candidate order (each q log q computed by
   the block first), then the candidates streamed in pages by ascending distance, thread 0 adding their shares until
   they reach typical_p. Leaves in sh the limit (a candidate is kept when its distance is at most that), the total and
   the entropy its distances use; the limit is a NaN where nothing is cut (total 0). */
static __device__ __noinline__ void gpt2__typical_limit(const float *p, int V, unsigned long long kmin, float floor_p, int n_c, int by_index,
                                           double total, float typical_p, gpt2__sample_sh *sh) {
    const int tid = threadIdx.x, nt = blockDim.x;
    __syncthreads();
    if (tid == 0) { sh->t_total = total; sh->t_n = n_c; sh->t_ent = 0.0; sh->t_limit = __longlong_as_double(0x7FF8000000000000ll); }
    __syncthreads();
    total = sh->t_total;
    n_c = sh->t_n;
    if (!(total > 0.0) || n_c < 1) return;
    double *e = (double *)sh->keys, ent = 0.0;
    unsigned long long bound = ~0ull;
    for (int c0 = 0; c0 < (by_index ? V : n_c); c0 += GPT2__PAGE) {
        const int cn = min(GPT2__PAGE, (by_index ? V : n_c) - c0);
        __syncthreads();
        if (!by_index) gpt2__page_extract(gpt2__p_key{p}, V, bound, cn, sh);
        __syncthreads();
        if (!by_index) bound = sh->keys[cn - 1];
        __syncthreads();
        for (int j = tid; j < cn; j += nt) {
            const float pj = by_index ? p[c0 + j] : gpt2__key_p(sh->keys[j]);
            const double q = __ddiv_rn((double)pj, total);
            e[j] = (!by_index || pj >= floor_p) && pj > 0.0f ? __dmul_rn(q, log(q)) : 0.0;
        }
        __syncthreads();
        if (tid == 0) for (int j = 0; j < cn; j++) ent = __dsub_rn(ent, e[j]); /* ent - 0 is ent */
    }
    if (tid == 0) sh->t_ent = ent;
    __syncthreads();
    const gpt2__typ_key near = {p, total, sh->t_ent, kmin, floor_p};
    double cum = 0.0;
    int last = -1;
    bound = ~0ull;
    for (int start = 0; start < n_c; start += GPT2__PAGE) {
        const int cnt = min(GPT2__PAGE, n_c - start);
        __syncthreads();
        gpt2__page_extract(near, V, bound, cnt, sh);
        __syncthreads();
        if (tid == 0) {
            for (int j = 0; j < cnt && last < 0; j++) {
                const int id = (int)(~(sh->keys[j] + 1) & 0x1FFFFull);
                if (start + j == n_c - 1) { last = id; break; }
                cum = __dadd_rn(cum, __ddiv_rn((double)p[id], total));
                if (cum >= (double)typical_p) last = id;
            }
            sh->found = last;
        }
        bound = sh->keys[cnt - 1];
        __syncthreads();
        if (sh->found >= 0) break;
    }
    if (tid == 0) sh->t_limit = gpt2__typ_dist_d(p[sh->found], total, sh->t_ent);
    __syncthreads();
}
/* Whether typical_p's cut (gpt2__typical_limit, its limit a NaN: no cut) keeps a candidate of probability pj */
static __device__ __forceinline__ bool gpt2__typ_kept(float pj, const gpt2__sample_sh *sh) {
    return !(sh->t_limit == sh->t_limit) || gpt2__typ_dist_d(pj, sh->t_total, sh->t_ent) <= sh->t_limit;
}

/* Steps 4-5 of gpt2__sample_kernel for a sampled row whose p [V] are set: the cuts (top_k, top_p, min_p; with TYPICAL
   typical_p's too) and the draw u, the id into next[row]. Called by the whole block. The typical_p form is a call of
   its own (gpt2__sample_cut_typical), so that the other rows' code keeps its registers (pk by value: a reference
   would hold the kernel's copy in local memory). */
template <bool TYPICAL>
static __device__ __forceinline__ void gpt2__sample_cut(float *p, int V, const gpt2__pick pk, int *next, int row, int cut_k, int cut_p,
                                                        float floor_p, double u, gpt2__sample_sh *sh) {
    double total = 0.0, cum = 0.0; /* meaningful on thread 0 */
    const int tid = threadIdx.x, nt = blockDim.x;
    if (TYPICAL && tid == 0) sh->t_limit = __longlong_as_double(0x7FF8000000000000ll); /* no cut yet (gpt2__typ_kept) */
    if (!cut_k && !cut_p) {
        /* 4. no cut (min_p at most: a filter in index order): walk all V in index order; thread 0 sums pages staged
           in shared memory. With typical_p, pass 0 runs again over the candidates its cut keeps (the others staged
           as -1, below any floor). */
        float *stage = (float *)sh->keys;
        const int SP = (int)(sizeof sh->keys / sizeof(float));
        int n_c = 0, typ = TYPICAL; /* the candidates (thread 0), and typical_p's cut still to make */
        for (int pass = 0; pass < 2; pass++) {
            __syncthreads();
            if (tid == 0) sh->found = -1;
            const double target = u * total;
            for (int c0 = 0; c0 < V; c0 += SP) {
                const int cn = min(SP, V - c0);
                __syncthreads();
                for (int i = tid; i < cn; i += nt) stage[i] = !TYPICAL || gpt2__typ_kept(p[c0 + i], sh) ? p[c0 + i] : -1.0f;
                __syncthreads();
                if (tid == 0) {
                    if (pass == 0) { for (int i = 0; i < cn; i++) if (stage[i] >= floor_p) total += stage[i], n_c += TYPICAL; }
                    else for (int i = 0; i < cn; i++) {
                        if (!(stage[i] >= floor_p)) continue;
                        cum += stage[i];
                        if (cum > target) { sh->found = c0 + i; break; }
                    }
                }
                __syncthreads();
                if (sh->found >= 0) break;
            }
            if (TYPICAL && pass == 0 && typ) {
                gpt2__typical_limit(p, V, 0, floor_p, n_c, 1, total, pk.typical_p, sh);
                typ = 0;
                if (sh->t_limit == sh->t_limit) { total = 0.0; pass = -1; } /* pass 0 again, over the kept */
            }
        }
        if (tid == 0) {
            int last = V - 1; /* the last kept candidate */
            while (last > 0 && !(p[last] >= floor_p && (!TYPICAL || gpt2__typ_kept(p[last], sh)))) last--;
            gpt2__put_id(next, row, pk, sh->found >= 0 ? sh->found : last, sh->lse);
        }
        return;
    }
    /* 4. with a cut: candidates in descending (p, -id) order, page by page */
    /* passes: 0 the candidates' total, 1 the top_p prefix and min_p's, 2 with typical_p the total of what its cut
       keeps (gpt2__typical_limit, made between 1 and 2), 3 the draw */
    const int n0 = cut_k ? pk.top_k : V;
    int single = n0 <= GPT2__PAGE;
    if (single) gpt2__page_extract(gpt2__p_key{p}, V, ~0ull, n0, sh);
    int n = n0, last_id = 0;
    unsigned long long kmin = 0; /* the last candidate's key (thread 0) */
    for (int pass = 0; pass < 4; pass++) {
        if (pass == 1 && !cut_p && !(floor_p > 0.0f)) continue;
        if (pass == 2) {
            if (!TYPICAL) continue;
            if (tid == 0) sh->t_kmin = kmin;
            __syncthreads();
            gpt2__typical_limit(p, V, sh->t_kmin, floor_p, n, 0, total, pk.typical_p, sh);
            single = 0; /* sh->keys held other keys since */
            if (!(sh->t_limit == sh->t_limit)) continue;
            if (tid == 0) total = 0.0;
        }
        const double target = pass == 1 ? (double)pk.top_p * total : u * total;
        __syncthreads();
        if (tid == 0) { cum = 0.0; sh->found = -1; }
        unsigned long long bound = ~0ull;
        for (int start = 0; start < n; start += GPT2__PAGE) {
            const int cnt = min(GPT2__PAGE, n - start);
            __syncthreads();
            if (!single) gpt2__page_extract(gpt2__p_key{p}, V, bound, cnt, sh);
            __syncthreads();
            if (tid == 0) {
                for (int j = 0; j < cnt; j++) {
                    const double pj = gpt2__key_p(sh->keys[j]);
                    if (pass == 0) { total += pj; if (TYPICAL) kmin = sh->keys[j]; continue; }
                    /* pass 1: the top_p prefix, then min_p's (the candidates come in descending p) */
                    if (pass == 1 && !(gpt2__key_p(sh->keys[j]) >= floor_p)) { sh->found = start + j; break; }
                    if (TYPICAL && pass >= 2 && !gpt2__typ_kept(gpt2__key_p(sh->keys[j]), sh)) continue;
                    if (TYPICAL && pass == 2) { total += pj; continue; }
                    cum += pj;
                    last_id = gpt2__key_id(sh->keys[j]);
                    if (TYPICAL && pass == 1) kmin = sh->keys[j];
                    if (pass == 1 && cut_p && cum >= target) { sh->found = start + j + 1; break; }
                    if (pass == 3 && cum > target) { sh->found = last_id; break; }
                }
            }
            bound = sh->keys[cnt - 1];
            __syncthreads();
            if (sh->found >= 0) break;
        }
        if (pass == 1) {
            /* the nucleus: the CPU's new total is the same sum over the kept prefix, i.e. cum */
            if (sh->found >= 0) n = sh->found;
            if (tid == 0) total = cum;
        }
    }
    if (tid == 0) gpt2__put_id(next, row, pk, sh->found >= 0 ? sh->found : last_id, sh->lse);
}
static __device__ __noinline__ void gpt2__sample_cut_typical(float *p, int V, const gpt2__pick pk, int *next, int row, int cut_k,
                                                             int cut_p, float floor_p, double u, gpt2__sample_sh *sh) {
    gpt2__sample_cut<true>(p, V, pk, next, row, cut_k, cut_p, floor_p, u, sh);
}

/* gpt2__sample_kernel's blocks an SM for its launch bounds: sm_75 holds at most 1024 threads an SM (ptxas warned at 2) */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define GPT2__SAMPLE_MINB 1
#else
#define GPT2__SAMPLE_MINB 2
#endif
/* The sampling rule of gpt2__sample, step for step. logits: [n][ld] fp32 (a sampled row is overwritten with its
   p values); picks: [n]; next: [n] (-1 where sample is 0). Grid: one block of GPT2__SAMPLE_THREADS per row from row0.
   Exactness: z and p are computed as the CPU does (no fused multiply-add; p = exp rounded to float), and every
   double sum runs in the CPU's order on one thread, so both backends pick the same token from the same logits.
   Candidates sorted by p are streamed in pages of GPT2__PAGE keys (each page a radix select + bitonic sort); with
   a cut of at most GPT2__PAGE candidates (top_k <= 4096) one page holds them all. */
__global__ void __launch_bounds__(GPT2__SAMPLE_THREADS, GPT2__SAMPLE_MINB) gpt2__sample_kernel(float *logits, int V, int ld, const gpt2__pick *picks, int *next,
                                                                                gpt2__advance adv, int row0) {
    __shared__ gpt2__sample_sh sh;
    gpt2__pdl_wait();
    const int row = row0 + (int)blockIdx.x, tid = threadIdx.x, nt = blockDim.x, lane = tid & 31, w = tid >> 5, nw = nt >> 5;
    const gpt2__pick pk = picks[row];
    if (adv.pos) {
        __syncthreads(); /* every thread holds its pick before thread 0 rewrites it */
        if (tid == 0) {
            gpt2__pick *o = (gpt2__pick *)picks + row;
            adv.pos[row]++;
            adv.tok[row] = -1 - row;
            o->draw = pk.draw + 1;
            o->pos = pk.pos + 1;
            if (pk.out) o->out = (int *)((const char *)pk.out + ((const char *)pk.out < adv.lo + adv.blob_bytes ? adv.blob_bytes : -adv.blob_bytes));
            if (pk.rec && pk.out)
                o->rec = (gpt2__lp_rec *)((char *)pk.rec + ((const char *)pk.rec < adv.lo + adv.blob_bytes ? adv.blob_bytes : -adv.blob_bytes));
        }
    }
    float *p = logits + (size_t)row * ld;
    if (!pk.sample) { if (tid == 0) gpt2__put_id(next, row, pk, -1); return; }
    if (pk.rec) gpt2__lp_prelude(p, V, pk, &sh);
    if (pk.proc) gpt2__process_row(p, V, pk, &sh);
    if (!(pk.temperature > 0.0f)) {
        /* 1. argmax, lowest index among ties */
        float bv = -INFINITY;
        int bi = 0x7FFFFFFF;
        if (((uintptr_t)p & 15) == 0) {
            /* 16-byte loads, GPT2__ARGMAX_LD of them in flight per thread before any compare (one row is latency-bound) */
            const int n4 = V / 4;
            for (int i0 = tid; i0 < n4; i0 += GPT2__ARGMAX_LD * nt) {
                float4 q[GPT2__ARGMAX_LD];
#pragma unroll
                for (int u = 0; u < GPT2__ARGMAX_LD; u++)
                    if (i0 + u * nt < n4) q[u] = ((const float4 *)p)[i0 + u * nt];
#pragma unroll
                for (int u = 0; u < GPT2__ARGMAX_LD; u++) {
                    const int i = 4 * (i0 + u * nt);
                    if (i0 + u * nt >= n4) break;
                    if (q[u].x > bv) { bv = q[u].x; bi = i; }
                    if (q[u].y > bv) { bv = q[u].y; bi = i + 1; }
                    if (q[u].z > bv) { bv = q[u].z; bi = i + 2; }
                    if (q[u].w > bv) { bv = q[u].w; bi = i + 3; }
                }
            }
            for (int i = 4 * n4 + tid; i < V; i += nt) if (p[i] > bv) { bv = p[i]; bi = i; }
        } else
            for (int i = tid; i < V; i += nt) if (p[i] > bv) { bv = p[i]; bi = i; }
        for (int o = 16; o; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ov > bv || (ov == bv && oi < bi)) { bv = ov; bi = oi; }
        }
        if (lane == 0) { sh.red_v[w] = bv; sh.red_i[w] = bi; }
        __syncthreads();
        if (tid == 0) {
            for (int i = 1; i < nw; i++)
                if (sh.red_v[i] > bv || (sh.red_v[i] == bv && sh.red_i[i] < bi)) { bv = sh.red_v[i]; bi = sh.red_i[i]; }
            gpt2__put_id(next, row, pk, bi == 0x7FFFFFFF ? 0 : bi, sh.lse);
        }
        return;
    }
    /* 2-3. z = logit / T, p = exp(z - max z) rounded to float */
    const float inv_t = __fdiv_rn(1.0f, pk.temperature);
    float zmax = -INFINITY;
    for (int i = tid; i < V; i += nt) zmax = fmaxf(zmax, __fmul_rn(p[i], inv_t));
    for (int o = 16; o; o >>= 1) zmax = fmaxf(zmax, __shfl_xor_sync(0xffffffffu, zmax, o));
    if (lane == 0) sh.red_v[w] = zmax;
    __syncthreads();
    for (int i = 0; i < nw; i++) zmax = fmaxf(zmax, sh.red_v[i]);
    for (int i = tid; i < V; i += nt) {
        const float z = __fsub_rn(__fmul_rn(p[i], inv_t), zmax);
        p[i] = z == z ? (float)exp((double)z) : 0.0f; /* a NaN logit is never drawn, as on the CPU */
    }
    __syncthreads();
    const int cut_k = pk.top_k > 0 && pk.top_k < V, cut_p = pk.top_p > 0.0f && pk.top_p < 1.0f;
    /* min_p keeps p >= min_p x the largest p, which is exp(0) = 1 wherever zmax is finite */
    const float floor_p = pk.min_p > 0.0f ? __fmul_rn(pk.min_p, zmax > -INFINITY && zmax < INFINITY ? 1.0f : 0.0f) : 0.0f;
    const double u = gpt2__uniform(pk.seed, pk.draw);
    if (pk.typical_p > 0.0f && pk.typical_p < 1.0f) gpt2__sample_cut_typical(p, V, pk, next, row, cut_k, cut_p, floor_p, u, &sh);
    else gpt2__sample_cut<false>(p, V, pk, next, row, cut_k, cut_p, floor_p, u, &sh);
}

/* Sampling of rows [row0, row0 + rows) of a step of N fed rows (P prompt rows) and n sequences, into d->next, in st
   (after a kernel when pdl). A pure decode step's sampler also advances the blob for the fed step after it. */
static gpt2_status gpt2__cuda_sample(gpt2_model *m, const gpt2__cuda_meta *d, int N, int P, int n, int row0, int rows,
                                     cudaStream_t st, int pdl) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    gpt2__advance adv = {NULL, NULL, NULL, 0};
    if (P == 0 && N == n && S->h_meta_dev) adv = {d->pos, d->tok, S->h_meta_dev, (long long)S->meta_bytes};
    return gpt2__launch(gpt2__sample_kernel, dim3((unsigned)rows), dim3(GPT2__SAMPLE_THREADS), 0, st, pdl, S->logits,
                        m->cfg.n_vocab, S->ldv, (const gpt2__pick *)d->picks, d->next, adv, row0);
}

/* == [GPT2:PATHS] == which paths a step takes: every choice in one place ======================================== */

/* How many parts a step of N fed rows, P of them prompt rows, runs as (gpt2__cuda_parts; 1: one run). Only pure
   decode steps (P == 0: every row its sequence's only row, att_rows and out_row the identity), as many parts as
   have part_rows rows each, up to `parts`: each part reads every weight, which costs nothing only where a part's
   products are bound by the tensor cores rather than by their weight reads (~256 rows and more on the H100).
   Part i starts at row gpt2__part_at(N, np, i). */
static int gpt2__parts_of(const gpt2__cuda_state *S, int N, int P) {
    if (S->part_rows <= 0 || P != 0) return 1;
    int np = N / S->part_rows;
    if (np > S->parts) np = S->parts;
    if (np > GPT2__MAX_PARTS) np = GPT2__MAX_PARTS;
    return np < 1 || N / np < 8 ? 1 : np;
}
static int gpt2__part_at(int N, int np, int i) { return i >= np ? N : i * ((N / np) & ~7); }

/* A step's own choices, made before its runs' (gpt2__cuda_launch): how many parts it runs as (gpt2__cuda_parts), whether
   they run green (their attention on SMs of its own: where the K/V reads outweigh the products, long contexts) or at
   contexts too short for that, and whether its last layer may run on the output rows alone (gather: when that drops
   at least S->gather prompt rows). N fed rows at positions pos, P of them prompt rows, of n sequences; dup: drafts to
   verify (several decode rows of one sequence). */
typedef struct gpt2__step_paths { int np, green, att_short, gather; } gpt2__step_paths;
static gpt2__step_paths gpt2__step_paths_of(const gpt2__cuda_state *S, const gpt2_model *m, const int *pos, int N, int P, int n, int dup) {
    gpt2__step_paths q;
    q.np = dup ? 1 : gpt2__parts_of(S, N, P);
    long long keys = 0;
    for (int r = 0; q.np > 1 && r < N; r++) keys += pos[r] + 1;
    const int longer = S->green_ctx > 0 && keys * S->green_ctx >= (long long)N * m->cfg.n_embd;
    q.green = q.np > 1 && S->green_sms > 0 && longer;
    q.att_short = q.np > 1 && !longer && S->green_ctx > 0;
    q.gather = S->gather > 0 && P - (n - (N - P)) >= S->gather;
    return q;
}

/* Every choice among the kernels of one forward run (gpt2__cuda_run_t) of N fed rows, P of them prompt rows, n_out
   output rows (all_rows: every row's logits), as planned in d, in lane L: from the model, the GPU (what init found it
   can run and verified: S->flash, att_mma, kv_tma, the few-row bit check, shared-memory limits) and the switches tests
   and bench turn (S->few_row, ln_fold, gather, att_mma, att_stage, att_many, att_tma, att_ns, prefill_order). Paths
   that must give a row the same bits as another are pinned by the tests named in docs/ARCHITECTURE.md. */
static gpt2__paths gpt2__paths_of(const gpt2__cuda_state *S, const gpt2_model *m, const gpt2__cuda_meta *d, int N, int P, int n_out,
                                  int all_rows, const gpt2__lane *L) {
    gpt2__paths p;
    memset(&p, 0, sizeof p);
    const int C = m->cfg.n_embd, hd = C / m->cfg.n_head;
    const size_t es = S->esize;
    /* products: decode rows on the few-row kernel where its bits were verified for the shape */
    if (S->few_row) {
        gpt2__few_row_product pr[5];
        gpt2__few_row_products(m, S, pr);
        for (int k = 0; k < 5; k++) p.few_row[k] = gpt2__few_row_use(S, pr[k].O, k == 4 ? n_out : N - P, pr[k].I, pr[k].sp, pr[k].epi, pr[k].f32);
    }
    p.ln_fold = gpt2__ln_fold_use(S, m, N, P);
    p.gather = d->n_gat > 0 && !all_rows && !p.ln_fold;
    /* with the tiled prefill kernel every attention kernel stores its rows' K and V; a step verifying drafts (a row
       reads the K and V of the rows before it) only where gpt2__attn_mma_kernel serves it */
    p.kv_first = !(S->flash && (!S->dup_step || gpt2__att_dup_mma(S, m, d)));
    /* decode attention: tensor cores for head size 64 in F16/BF16 (few rows whose caches fit GPT2__ATT_PREFETCH bytes:
       gpt2__attn_mma_kernel, prefetching them into L2; more: gpt2__attn_stream_kernel), else the CUDA-core kernel;
       a few rows' span of K/V staged in shared memory when each row is its sequence's only new row and it fits */
    p.att_prefetch = gpt2__att_prefetch(S, m, d, es);
    const int stage = !p.kv_first && S->att_stage && p.att_prefetch;
    if (es == 2 && S->att_mma && hd == 64 && GPT2__SPAN_LEN == 256)
        p.att = !p.att_prefetch ? GPT2__ATT_STREAM
              : stage && gpt2__attn_mma_smem(1, es) <= (size_t)S->att_stage_smem ? GPT2__ATT_MMA_STAGED : GPT2__ATT_MMA;
    else {
        int VE, MAXC;
        gpt2__attn_core_form(hd, es, &VE, &MAXC);
        p.att = stage && VE * es == 16 && gpt2__attn_core_smem(hd, VE, MAXC, es, 1) <= (size_t)S->att_stage_smem ? GPT2__ATT_CORE_STAGED
                                                                                                               : GPT2__ATT_CORE;
    }
    /* the streamed kernel: 2 ring stages a warp (more warps an SM) in a step of parts, green (its attention has fewer
       SMs) or at short contexts; else S->att_ns */
    p.att_ns = L->att_stream || S->att_short || S->att_ns == 2 ? 2 : 3;
    p.att_tma = S->kv_tma && S->att_tma;
    p.heads_inner = gpt2__prefill_heads_inner(S, d, C, es);
    return p;
}

/* == [GPT2:FORWARD] == one forward pass over a step's rows ====================================================== */

/* The compacted last layer (gpt2__cuda_run_t with d->n_gat): compact row j takes fed row gat[j] of the fp32 residual
   x [N][C] and of the attention output att [N][C], into xs [n][C] and as [n][C]. Grid: n blocks of 256 threads. A copy,
   so the rows after it compute what they would have in place. */
template <typename T>
__global__ void __launch_bounds__(256) gpt2__gather_kernel(const float *__restrict__ x, const T *__restrict__ att,
                                                           const int *gat, float *__restrict__ xs, T *__restrict__ as, int C) {
    gpt2__pdl_enter();
    const size_t j = blockIdx.x, r = (size_t)gat[j];
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
        xs[j * C + i] = x[r * C + i];
        as[j * C + i] = att[r * C + i];
    }
}

/* The forward pass on the GPU over the rows described by d (uploaded): N fed rows, the first P of them prompt rows
   (gpt2__linear); logits [n_out][V] fp32 into lane L's logits for the rows d->out_row (all rows in order when
   all_rows). Same computation as gpt2__cpu_run. Without head, it stops at the final layer norm: the n_out rows in
   L's ln (the scorer's logits follow in chunks, gpt2__cuda_score). L is the run's own copy: in a green step its
   stream moves on after the last layer's attention (gpt2__attention). */
template <typename T>
static gpt2_status gpt2__cuda_run_t(gpt2_model *m, gpt2__cuda_state *S, gpt2__lane L, const gpt2__cuda_meta *d, int N, int P,
                                    int n_out, int all_rows, int head) {
    const gpt2_config *cf = &m->cfg;
    const int C = cf->n_embd, F = m->n_inner, NL = cf->n_layer;
    T *ln = (T *)L.ln, *qkv = (T *)L.qkv, *att = (T *)L.att, *proj = (T *)L.proj, *fc = (T *)L.fc;
    gpt2_status st;
    const gpt2__resid<T> emb = {NULL, NULL, NULL, 0, 1, 0, d->next, NULL, 0, S->hist, d->slot, m->max_seq};
    if ((st = gpt2__residual_ln<T>(L.stream, N, L.x, emb, NULL, d->tok, d->pos, (const T *)S->wte, (const T *)S->wpe,
                                   S->layers[0].ln1_w, S->layers[0].ln1_b, ln, C, cf->ln_eps, 0)))
        return st;
    /* decode rows of the two projections into the residual come as K pieces (gpt2__linear with part) */
    gpt2__resid<T> ad = {proj, L.part, NULL, (size_t)(N - P) * C, 1, P, NULL, NULL, 0, NULL, NULL, 0};
    /* a step of at most GPT2__LN_FOLD_ROWS decode rows leaves each residual + LN inside a layer to the product that reads
       it (gpt2__ln_fold: the same bits, one kernel fewer); the residual then alternates between x (read by the MLP's
       first product) and x2 (read by the next layer's qkv, and by the final norm) */
    const gpt2__paths p = gpt2__paths_of(S, m, d, N, P, n_out, all_rows, &L);
    const int fuse = p.ln_fold;
    for (int l = 0; l < NL; l++) {
        const gpt2__cuda_layer *y = &S->layers[l];
        if (fuse && l > 0) {
            const gpt2__ln_fold<T> f = {S->x2, L.x, L.part, ad.stride, gpt2__decode_pieces(F), (const T *)S->layers[l - 1].fcp_b,
                                    y->ln1_w, y->ln1_b, cf->ln_eps};
            st = gpt2__ln_fold_run<T>(S, &L, qkv, y->qkv_w, y->qkv_b, 3 * C, N, C, GPT2__ACT_NONE, f);
        } else st = gpt2__linear<T>(S, &L, p.few_row[0], qkv, y->qkv_w, ln, y->qkv_b, 3 * C, N, P, C, GPT2__EPI_BIAS, 0, 0, NULL);
        if (st) return st;
        if ((st = gpt2__attention<T>(S, &L, &p, m, l, d, N))) return st;
        /* The last layer's rows after attention serve only the logits: with d->n_gat (a step of prompt rows, not
           all_rows), only the output rows go on, compacted: each prompt's last row, then the decode rows (their
           K and V of every row are in the cache by now). A row computes the same with fewer rows beside it (the
           products' classes, gpt2__linear), so the logits keep their bits. x's copy goes into qkv, free once the
           attention is done (N >= n rows of 3C elements of T hold n rows of C floats); att's into ln. */
        const int last = l + 1 == NL, gat = last && p.gather;
        const int Nl = gat ? d->n_gat : N, Pl = gat ? d->gat_P : P;
        float *xl = gat ? (float *)L.qkv : L.x;
        const T *al = gat ? ln : att;
        if (gat) {
            if ((st = gpt2__launch(gpt2__gather_kernel<T>, dim3((unsigned)Nl), dim3(256), 0, L.stream, L.pdl, (const float *)L.x,
                                   (const T *)att, (const int *)d->gat, xl, ln, C)))
                return st;
            ad.P = Pl; /* (the decode rows' pieces are where they were: N - P = Nl - Pl rows) */
        }
        if ((st = gpt2__linear<T>(S, &L, p.few_row[1], proj, y->proj_w, al, y->proj_b, C, Nl, Pl, C, GPT2__EPI_BIAS, 0, 0, L.part))) return st;
        ad.bias = (const T *)y->proj_b;
        ad.pieces = gpt2__decode_pieces(C);
        if (fuse) {
            const gpt2__ln_fold<T> f = {L.x, S->x2, L.part, ad.stride, ad.pieces, ad.bias, y->ln2_w, y->ln2_b, cf->ln_eps};
            st = gpt2__ln_fold_run<T>(S, &L, fc, y->fc_w, y->fc_b, F, N, C, S->mlp_act, f);
        } else {
            /* prompt rows' x stays: the proj output joins it again in the layer's second pass (gpt2__resid) */
            ad.defer = 1;
            st = gpt2__residual_ln<T>(L.stream, Nl, xl, ad, NULL, NULL, NULL, NULL, NULL, y->ln2_w, y->ln2_b, ln, C, cf->ln_eps, L.pdl);
            ad.defer = 0;
            if (!st) st = gpt2__linear<T>(S, &L, p.few_row[2], fc, y->fc_w, ln, y->fc_b, F, Nl, Pl, C, GPT2__EPI_BIAS_ACT, 0, 0, NULL);
        }
        if (st) return st;
        /* prompt rows into att (free once the proj product has read it): proj's output joins them again below */
        if ((st = gpt2__linear<T>(S, &L, p.few_row[3], att, y->fcp_w, fc, y->fcp_b, C, Nl, Pl, F, GPT2__EPI_BIAS, 0, 0, L.part))) return st;
        ad.bias = (const T *)y->fcp_b;
        ad.pieces = gpt2__decode_pieces(F);
        if (fuse && !last) continue;
        ad.add2 = att;
        st = gpt2__residual_ln<T>(L.stream, last ? n_out : N, fuse ? S->x2 : xl, ad, last && !all_rows ? (gat ? d->outc : d->out_row) : NULL, NULL,
                                  NULL, NULL, NULL, last ? S->lnf_w : S->layers[l + 1].ln1_w, last ? S->lnf_b : S->layers[l + 1].ln1_b,
                                  ln, C, cf->ln_eps, L.pdl);
        ad.add2 = NULL;
        if (st) return st;
    }
    if (!head) return GPT2_OK;
    return gpt2__linear<T>(S, &L, p.few_row[4], L.logits, S->lm_head, ln, NULL, S->ldv, n_out, 0, C, GPT2__EPI_NONE, 1, S->ldv, NULL);
}

static gpt2_status gpt2__cuda_run(gpt2_model *m, const gpt2__lane *L, const gpt2__cuda_meta *d, int N, int P, int n_out, int all_rows,
                                  int head = 1) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    if (m->dtype == GPT2_DTYPE_F16) return gpt2__cuda_run_t<__half>(m, S, *L, d, N, P, n_out, all_rows, head);
    if (m->dtype == GPT2_DTYPE_BF16) return gpt2__cuda_run_t<__nv_bfloat16>(m, S, *L, d, N, P, n_out, all_rows, head);
    return gpt2__cuda_run_t<float>(m, S, *L, d, N, P, n_out, all_rows, head);
}

/* == [GPT2:PARTS] == the two-part throughput mode (streams, green contexts) ===================================== */

/* Waits for every stream the engine launches into. */
static void gpt2__cuda_sync(gpt2__cuda_state *S) {
    if (S->stream) cudaStreamSynchronize(S->stream);
    for (int i = 0; i < GPT2__MAX_PARTS; i++) {
        if (S->pstream[i]) cudaStreamSynchronize(S->pstream[i]);
        for (int k = 0; k < 2; k++) if (S->gstream[k][i]) cudaStreamSynchronize(S->gstream[k][i]);
    }
}

/* The attention set's size: GPT2__ATT_SMS, or when that is -1 56 SMs on a GPU of under 4 TB/s of memory bandwidth,
   64 from it: the best counts measured, with the TMA reads, on an H100 (3.35 TB/s) and an H200 (4.9 TB/s). The
   bandwidth is the memory clock's (double data rate) times the bus. */
static int gpt2__att_sms_default(int device) {
    int khz = 0, bits = 0;
    if (GPT2__ATT_SMS >= 0) return GPT2__ATT_SMS;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess) {
        cudaGetLastError();
        return 56;
    }
    return 2.0 * khz * 1e3 * (bits / 8) >= 4e12 ? 64 : 56;
}

/* A step of parts can keep decode attention to SMs of its own: a CUDA green context of `want` SMs (rounded as the
   driver divides them: multiples of 8 on the H100) for each part's attention, another of the remaining SMs for every
   other kernel of the parts. Without it a part's products wait for SMs that the other part's small attention
   blocks keep taking (a cuBLASLt tile wants a whole SM), so the parts mostly fill each other's tails; with it one
   part's products run beside the other part's attention. The driver calls go through the
   runtime's entry points, so nothing links libcuda. want 0 (or a driver without green contexts, or a GPU too small
   to divide) leaves the parts on S->pstream over the whole GPU. Drops the graphs captured before. Returns 1 when
   the green contexts were made. */
static int gpt2__green_make(gpt2__cuda_state *S, int want) {
    for (int i = 0; i < GPT2__MAX_GRAPHS; i++)
        if (S->graphs[i].exec) { cudaGraphExecDestroy(S->graphs[i].exec); S->graphs[i].exec = NULL; }
    if (S->green_sms) {
        gpt2__cuda_sync(S);
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < GPT2__MAX_PARTS; i++)
                if (S->gstream[k][i]) { cudaStreamDestroy(S->gstream[k][i]); S->gstream[k][i] = NULL; }
    }
#if CUDART_VERSION >= 12050
    typedef CUresult (*dev_fn)(CUdevice *, int);
    typedef CUresult (*res_fn)(CUdevice, CUdevResource *, CUdevResourceType);
    typedef CUresult (*split_fn)(CUdevResource *, unsigned *, const CUdevResource *, CUdevResource *, unsigned, unsigned);
    typedef CUresult (*desc_fn)(CUdevResourceDesc *, CUdevResource *, unsigned);
    typedef CUresult (*make_fn)(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned);
    typedef CUresult (*stream_fn)(CUstream *, CUgreenCtx, unsigned, int);
    typedef CUresult (*drop_fn)(CUgreenCtx);
    void *f[7] = {NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    const char *names[7] = {"cuDeviceGetDevResource", "cuDevSmResourceSplitByCount", "cuDevResourceGenerateDesc",
                            "cuGreenCtxCreate", "cuGreenCtxStreamCreate", "cuGreenCtxDestroy", "cuDeviceGet"};
    for (int k = 0; k < 7; k++) {
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion(names[k], &f[k], CUDA_VERSION, cudaEnableDefault, &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            f[k] = NULL;
    }
    cudaGetLastError();
    if (S->green_sms && f[5])
        for (int k = 0; k < 2; k++) ((drop_fn)f[5])((CUgreenCtx)S->green[k]);
    S->green_sms = 0;
    S->green_why = want <= 0 ? "not asked" : "the driver has no green contexts";
    CUdevice dev;
    if (want <= 0 || !f[0] || !f[1] || !f[2] || !f[3] || !f[4] || !f[6] || ((dev_fn)f[6])(&dev, S->device)) return 0;
    CUdevResource all, set[2];
    unsigned groups = 1;
    S->green_why = "the GPU's SMs could not be split so";
    if (((res_fn)f[0])(dev, &all, CU_DEV_RESOURCE_TYPE_SM) || (int)all.sm.smCount < want + 8 ||
        ((split_fn)f[1])(&set[0], &groups, &all, &set[1], 0, (unsigned)want) || groups != 1 || set[1].sm.smCount < 8)
        return 0;
    S->green_why = "green context or stream creation failed";
    int made = 0;
    for (int k = 0; k < 2; k++) {
        CUdevResourceDesc desc;
        if (((desc_fn)f[2])(&desc, &set[k], 1) || ((make_fn)f[3])((CUgreenCtx *)&S->green[k], desc, dev, CU_GREEN_CTX_DEFAULT_STREAM))
            break;
        made++;
        for (int i = 0; i < GPT2__MAX_PARTS; i++) {
            CUstream st = NULL;
            if (((stream_fn)f[4])(&st, (CUgreenCtx)S->green[k], CU_STREAM_NON_BLOCKING, 0)) { made = -1; break; }
            S->gstream[k][i] = (cudaStream_t)st;
        }
        if (made < 0) break;
    }
    if (made != 2) {
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < GPT2__MAX_PARTS; i++)
                if (S->gstream[k][i]) { cudaStreamDestroy(S->gstream[k][i]); S->gstream[k][i] = NULL; }
        for (int k = 0; k < (made < 0 ? 2 : made); k++) if (f[5]) ((drop_fn)f[5])((CUgreenCtx)S->green[k]);
        cudaGetLastError();
        return 0;
    }
    S->green_sms = (int)set[0].sm.smCount;
    S->green_why = NULL;
    return 1;
#else
    S->green_sms = 0;
    S->green_why = want <= 0 ? "not asked" : "built with CUDA before 12.5 (no green contexts)";
    return 0;
#endif
}

/* A pure decode step of N rows as np independent parts (gpt2__part_at), part 0 on S->stream and part i on
   S->pstream[i] (a green step, S->green_step: every part in its stream of the products' set, its attention in its
   stream of the attention set, gpt2__attention; the last part's work after its last attention back in S->stream,
   and each part samples its own rows), each the whole forward of its rows (gpt2__cuda_run_t in a lane of its
   own: its own slice of every row-indexed buffer, its own cuBLASLt workspace). A row computes what it computes in one run of all N rows (every decode kernel's
   arithmetic per row is independent of the rows beside it; test cuda_parts_match_whole), but the parts overlap on
   the GPU: one part's attention, bound by memory (the KV cache), can run beside another's products, bound by the
   tensor cores, where one run of N rows does them in turn, and one part's kernels fill another's tails. Forked
   from and joined into S->stream, also inside a graph capture. The host wrote out_row and att_rows of each part
   relative to its first row (gpt2__cuda_launch). */
static gpt2_status gpt2__cuda_parts(gpt2_model *m, const gpt2__cuda_meta *d, int N, int np) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    const size_t C = (size_t)m->cfg.n_embd, F = (size_t)m->n_inner, H = (size_t)m->cfg.n_head, es = S->esize;
    const size_t part_per_row = S->part_floats / (size_t)S->max_rows;
    /* green (gpt2__green_make): every part in its stream of the products' set, its attention in the attention set's */
    const int green = S->green_step && S->green_sms > 0;
    GPT2__CU(cudaEventRecord(S->fork, S->stream));
    const gpt2__lane whole = gpt2__lane_of(S);
    for (int i = 0; i < np; i++) {
        const int r0 = gpt2__part_at(N, np, i), n = gpt2__part_at(N, np, i + 1) - r0;
        const size_t r = (size_t)r0;
        gpt2__cuda_meta dp = *d;
        dp.tok += r0; dp.pos += r0; dp.slot += r0; dp.att_rows += r0; dp.out_row += r0; dp.picks += r0;
        dp.n_att = n; /* dp.next stays: a fed token -1 - j names the step-wide row j */
        gpt2__lane part = whole;
        if (i > 0) {
            part.x += r * C; part.logits += r * (size_t)S->ldv; part.part += r * part_per_row;
            part.ln = (char *)part.ln + r * C * es; part.att = (char *)part.att + r * C * es;
            part.proj = (char *)part.proj + r * C * es; part.qkv = (char *)part.qkv + r * 3 * C * es;
            part.fc = (char *)part.fc + r * F * es; part.att_count += r * H;
            part.lt_ws = S->plt_ws[i]; part.stream = S->pstream[i];
        }
        if (green) part.stream = S->gstream[1][i];
        if (i > 0 || green) GPT2__CU(cudaStreamWaitEvent(part.stream, S->fork, 0));
        part.part_i = i;
        part.att_stream = green ? S->gstream[0][i] : NULL;
        /* green: the last part's work after its last attention runs in the step's stream on every SM (nothing is
           left to run beside it); each part samples its own rows, the first ones while the last part's attention runs */
        part.tail_stream = green && i + 1 == np ? whole.stream : NULL;
        gpt2_status st = gpt2__cuda_run(m, &part, &dp, n, 0, n, 0);
        const cudaStream_t end = part.tail_stream ? part.tail_stream : part.stream;
        if (!st && green) st = gpt2__cuda_sample(m, d, N, 0, N, r0, n, end, 0); /* the step-wide rows r0.. */
        if (st) return st;
    }
    for (int i = green ? 0 : 1; i < np; i++) {
        GPT2__CU(cudaEventRecord(S->pjoin[i], green ? S->gstream[1][i] : S->pstream[i]));
        GPT2__CU(cudaStreamWaitEvent(S->stream, S->pjoin[i], 0));
    }
    return GPT2_OK;
}

/* == [GPT2:STEP] == the step, its CUDA graphs, and the engine's entry points ==================================== */

/* One step's device work, in stream order: forward, then sampling into d->next. d: the step's inputs on the device
   (d_meta, already copied over; n_att and n_tiles as planned on the host). */
static gpt2_status gpt2__cuda_step_body(gpt2_model *m, const gpt2__cuda_meta *d, int N, int P, int n, int np) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    gpt2_status st;
    if (np > 1 && S->green_step) return gpt2__cuda_parts(m, d, N, np); /* it samples too */
    const gpt2__lane L = gpt2__lane_of(S);
    if ((st = np > 1 ? gpt2__cuda_parts(m, d, N, np) : gpt2__cuda_run(m, &L, d, N, P, n, 0))) return st;
    return gpt2__cuda_sample(m, d, N, P, n, 0, n, S->stream, np > 1 ? 0 : S->pdl);
}

/* The pure-decode step of n sequences (in np parts: gpt2__cuda_parts) as a CUDA graph, captured on first use and
   kept (least recently used goes when GPT2__MAX_GRAPHS are held). */
static gpt2_status gpt2__cuda_decode_graph(gpt2_model *m, const gpt2__cuda_meta *d, int n, int np) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    gpt2__cuda_graph *hit = NULL, *victim = &S->graphs[0];
    for (int i = 0; i < GPT2__MAX_GRAPHS && !hit; i++) {
        gpt2__cuda_graph *g = &S->graphs[i];
        if (g->exec && g->n == n && g->np == np && g->green_step == S->green_step && g->att_short == S->att_short &&
            g->dup == S->dup_step && g->dup_seqs == S->dup_seqs)
            hit = g;
        if (!g->exec ? victim->exec != NULL : (victim->exec && g->used < victim->used)) victim = g;
    }
    if (!hit) {
        if (victim->exec) { cudaGraphExecDestroy(victim->exec); victim->exec = NULL; }
        GPT2__CU(cudaStreamBeginCapture(S->stream, cudaStreamCaptureModeThreadLocal));
        gpt2_status st = gpt2__cuda_step_body(m, d, n, 0, n, np);
        cudaGraph_t graph = NULL;
        cudaError_t e = cudaStreamEndCapture(S->stream, &graph);
        if (st) { if (graph) cudaGraphDestroy(graph); return st; }
        if (e != cudaSuccess) {
            if (graph) cudaGraphDestroy(graph);
            return gpt2__fail(GPT2_ERR_DEVICE, "%s:%d: cudaStreamEndCapture: %s", __FILE__, __LINE__, cudaGetErrorString(e));
        }
        e = cudaGraphInstantiate(&victim->exec, graph, 0);
        cudaGraphDestroy(graph);
        if (e != cudaSuccess) {
            victim->exec = NULL;
            return gpt2__fail(GPT2_ERR_DEVICE, "%s:%d: cudaGraphInstantiate: %s", __FILE__, __LINE__, cudaGetErrorString(e));
        }
        victim->n = n;
        victim->np = np;
        victim->green_step = S->green_step;
        victim->att_short = S->att_short; /* a step of parts without green contexts: its attention's stages */
        victim->dup = S->dup_step;
        victim->dup_seqs = S->dup_seqs; /* a draft step's attention path depends on how many sequences its rows are */
        hit = victim;
    }
    hit->used = ++S->tick;
    GPT2__CU(cudaGraphLaunch(hit->exec, S->stream));
    return GPT2_OK;
}

static gpt2_status gpt2__cuda_forward(gpt2_model *m, const int *tokens, int B, int T, float *logits) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    const size_t V = (size_t)m->cfg.n_vocab;
    GPT2__CU(cudaSetDevice(S->device));
    S->dup_step = 0;
    int per = (S->max_rows < S->logit_rows ? S->max_rows : S->logit_rows) / T;
    if (per > m->max_batch) per = m->max_batch;
    if (per < 1) per = 1;
    for (int b0 = 0; b0 < B; b0 += per) {
        const int nb = B - b0 < per ? B - b0 : per, N = nb * T;
        gpt2__cuda_meta h = gpt2__meta_at(S->h_meta[0], N, N, 0), d = gpt2__meta_at(S->d_meta, N, N, 0);
        for (int r = 0; r < N; r++) {
            h.tok[r] = tokens[(size_t)b0 * T + r];
            h.pos[r] = r % T;
            h.slot[r] = r / T;
            h.out_row[r] = r;
        }
        gpt2__plan_attention(&h, N, S->flash);
        d.n_att = h.n_att;
        d.n_tiles = h.n_tiles; d.tile_keys = h.tile_keys;
        GPT2__CU(cudaMemcpyAsync(S->d_meta, S->h_meta[0], h.bytes, cudaMemcpyHostToDevice, S->stream));
        const gpt2__lane L = gpt2__lane_of(S);
        gpt2_status st = gpt2__cuda_run(m, &L, &d, N, N, N, 1);
        if (st) { cudaStreamSynchronize(S->stream); return st; }
        GPT2__CU(cudaMemcpy2DAsync(logits + (size_t)b0 * T * V, V * sizeof(float), S->logits, (size_t)S->ldv * sizeof(float),
                                   V * sizeof(float), (size_t)N, cudaMemcpyDeviceToHost, S->stream));
        GPT2__CU(cudaStreamSynchronize(S->stream));
    }
    return GPT2_OK;
}

/* ---- scoring on the GPU: windows batched like prompts, the logits in chunks of rows reduced on the device */

/* Row b of logits [n][ld] (fp32, V used; ld a multiple of 4) against its target id targets[b]: lp[b] = logit[target] -
   log-sum-exp over V and rank[b] = how many logits exceed the target's (gpt2__score_rows' rule), in one read of the
   row: each thread keeps its running max and its sum of exp(l - max) in double (each term in float: within 1e-7 of
   the CPU's double terms), rescaled when the max grows, and the block combines them. Grid: n blocks of 256 threads. */
static __device__ __forceinline__ void gpt2__lse_add(float x, float &m, double &s) {
    if (x > m) { s = (m == -INFINITY ? 0.0 : s * exp((double)m - (double)x)) + 1.0; m = x; }
    else if (x > -INFINITY || x != x) s += (double)expf(x - m);
}
__global__ void __launch_bounds__(256) gpt2__score_kernel(const float *__restrict__ logits, int V, int ld, const int *__restrict__ targets,
                                                          double *__restrict__ lp, int *__restrict__ rank) {
    __shared__ float red_f[8];
    __shared__ double red_d[8];
    __shared__ int red_i[8];
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const float *l = logits + (size_t)blockIdx.x * ld;
    const float lt = l[targets[blockIdx.x]];
    float mx = -INFINITY;
    double sum = 0.0;
    int above = 0;
    const int V4 = V / 4;
    for (int i = tid; i < V4; i += 256) {
        const float4 v = ((const float4 *)l)[i];
        gpt2__lse_add(v.x, mx, sum); gpt2__lse_add(v.y, mx, sum); gpt2__lse_add(v.z, mx, sum); gpt2__lse_add(v.w, mx, sum);
        above += (v.x > lt) + (v.y > lt) + (v.z > lt) + (v.w > lt);
    }
    for (int i = 4 * V4 + tid; i < V; i += 256) { gpt2__lse_add(l[i], mx, sum); above += l[i] > lt; }
    /* the block's max, then each thread's sum moved to it */
    float bm = mx;
    for (int o = 16; o; o >>= 1) bm = fmaxf(bm, __shfl_xor_sync(0xffffffffu, bm, o));
    if (lane == 0) red_f[w] = bm;
    __syncthreads();
    for (int i = 0; i < 8; i++) bm = fmaxf(bm, red_f[i]);
    sum = mx == -INFINITY ? 0.0 * sum /* 0, or a NaN kept */ : sum * exp((double)mx - (double)bm);
    for (int o = 16; o; o >>= 1) {
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
        above += __shfl_xor_sync(0xffffffffu, above, o);
    }
    if (lane == 0) { red_d[w] = sum; red_i[w] = above; }
    __syncthreads();
    if (tid == 0) {
        sum = 0.0;
        above = 0;
        for (int i = 0; i < 8; i++) { sum += red_d[i]; above += red_i[i]; }
        lp[blockIdx.x] = (double)lt - ((double)bm + log(sum));
        rank[blockIdx.x] = above;
    }
}

/* Scoring's fused form (F16/BF16, built for sm_90a): the logits never reach memory. For n scored rows (their final
   layer norm ln [n][C], T; C a multiple of 8) against the head W [V][C]:
   gpt2__score_target_kernel: tl[r] = ln[r] . W[targets[r]] in fp32 (the target's logit, one dot product a row; lanes
   take 8 elements each, summed in lane order), and cnt[r] = 0. Grid: ceil(n / 8) blocks of 8 warps, a warp a row.
   gpt2__score_gemm_kernel: the product ln W^T in tiles of 64 rows x 256 columns, each tile reduced where it is made
   (gpt2__score_tile): for each of its rows the largest logit m and the sum of exp(l - m) over its columns (fp32,
   each thread's 64 in order, then across the 4 threads sharing the row), kept in part[r][tile column]; and how many
   of its logits exceed tl[r] (the target's own column excluded), added to cnt[r]. Persistent: one block an SM walks
   the tiles, the rows of a column of tiles before the next column (the head's 256 rows are read from memory once,
   the rows' ln stays in L2). A block: a producer warpgroup, one thread of which moves 64-wide K slices of a tile's
   rows and head rows by TMA (128-byte swizzle) into a ring of 5 stages, and two consumer warpgroups that take the
   block's tiles in turn (one m64n256k16 wgmma a k16 step, both operands from shared memory; a stage freed once its
   products are waited for) and take turns at the products too, so that one's reduction runs beside the other's
   products (named barriers). Elements past n rows, C or V read as zeros; columns past V are left out of both
   reductions. The reduction matches gpt2__score_kernel's to within fp32 rounding of each tile's sum.
   gpt2__score_finish_kernel: lp[r] = tl[r] - log-sum-exp from the row's tile pairs (in double, lanes in order) and
   rank[r] = cnt[r], gpt2__score_kernel's rule. Grid: as the first. */
#define GPT2__SC_BM 64
#define GPT2__SC_BN 256
#define GPT2__SC_BK 64
#define GPT2__SC_ST 5
static size_t gpt2__score_smem(void) { return 1024 + (size_t)GPT2__SC_ST * (GPT2__SC_BM + GPT2__SC_BN) * GPT2__SC_BK * 2 + 2 * GPT2__SC_ST * 8; }

template <typename T>
__global__ void __launch_bounds__(256) gpt2__score_target_kernel(const T *__restrict__ ln, const T *__restrict__ W, int n, int C,
                                                                 const int *__restrict__ targets, float *__restrict__ tl, int *__restrict__ cnt) {
    const int r = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (r >= n) return;
    const T *a = ln + (size_t)r * C, *b = W + (size_t)targets[r] * C;
    float s = 0.0f;
    for (int k = lane * 8; k < C; k += 256) {
        float x[8], y[8];
        gpt2__load_chunk<T, 8>(a + k, x);
        gpt2__load_chunk<T, 8>(b + k, y);
#pragma unroll
        for (int i = 0; i < 8; i++) s = fmaf(x[i], y[i], s);
    }
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) { tl[r] = s; cnt[r] = 0; }
}

/* one tile's reduction by a consumer warpgroup: its thread holds rows r0 and r0 + 8, columns c + 8j + {0, 1}
   (d[4j + 2h + e]); WHOLE: every column of the tile is below V */
template <bool WHOLE>
static __device__ __forceinline__ void gpt2__score_tile(const float (&d)[128], int r0, int c, int n, int V, int nt, int nt_n, const int *__restrict__ targets,
                                                        const float *__restrict__ tl, float2 *__restrict__ part, int *__restrict__ cnt) {
    const float L2E = 1.4426950408889634f;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int row = r0 + 8 * h;
        const bool live = row < n;
        const float lt = live ? tl[row] : 0.0f;
        const int tg = live ? targets[row] : -1;
        float mx = -INFINITY;
#pragma unroll
        for (int j = 0; j < 32; j++)
#pragma unroll
            for (int e = 0; e < 2; e++)
                if (WHOLE || c + 8 * j + e < V) mx = fmaxf(mx, d[4 * j + 2 * h + e]);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        float sum = 0.0f;
        int above = 0;
#pragma unroll
        for (int j = 0; j < 32; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int col = c + 8 * j + e;
                if (WHOLE || col < V) {
                    const float v = d[4 * j + 2 * h + e];
                    sum += gpt2__ex2((v - mx) * L2E);
                    above += (v > lt) & (col != tg);
                }
            }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        above += __shfl_xor_sync(0xffffffffu, above, 1);
        above += __shfl_xor_sync(0xffffffffu, above, 2);
        if ((threadIdx.x & 3) == 0 && live) {
            part[(size_t)row * nt_n + nt] = make_float2(mx, sum);
            if (above) atomicAdd(cnt + row, above);
        }
    }
}

/* named barrier id among 256 threads (the two consumer warpgroups): wait for it, or arrive without waiting */
static __device__ __forceinline__ void gpt2__bar_sync256(int id) { asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory"); }
static __device__ __forceinline__ void gpt2__bar_arrive256(int id) { asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory"); }

template <typename T>
__global__ void __launch_bounds__(384, 1) gpt2__score_gemm_kernel(const __grid_constant__ gpt2__tmap amap, const __grid_constant__ gpt2__tmap bmap,
                                                                  int n, int V, int C, const int *__restrict__ targets,
                                                                  const float *__restrict__ tl, float2 *__restrict__ part, int *__restrict__ cnt) {
#if GPT2__WG
    constexpr int BM = GPT2__SC_BM, BN = GPT2__SC_BN, BK = GPT2__SC_BK, ST = GPT2__SC_ST;
    extern __shared__ __align__(16) unsigned char gpt2__score_sh[];
    T *As = (T *)(((uintptr_t)gpt2__score_sh + 1023) & ~(uintptr_t)1023), *Bs = As + ST * BM * BK;
    uint64_t *full = (uint64_t *)(Bs + ST * BN * BK), *empty = full + ST;
    /* the warp's index read from lane 0, so the compiler knows it is the same across the warp (wgmma in code it
       thinks divergent is serialized) */
    const int tid = threadIdx.x, w = __shfl_sync(0xffffffffu, tid >> 5, 0), lane = tid & 31;
    const int mt_n = (n + BM - 1) / BM, nt_n = (V + BN - 1) / BN, tiles = mt_n * nt_n, kb_n = (C + BK - 1) / BK;
    if (tid == 0)
        for (int s = 0; s < ST; s++) { gpt2__mbar_init(full + s, 1); gpt2__mbar_init(empty + s, 4); }
    __syncthreads();
    if (w >= 8) { /* the producer warpgroup: its first lane alone moves the stages; its registers go to the consumers */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (w == 8 && lane == 0) {
            int it = 0;
            for (int t = blockIdx.x; t < tiles; t += gridDim.x)
                for (int kb = 0; kb < kb_n; kb++, it++) {
                    const int s = it % ST;
                    if (it >= ST) gpt2__mbar_wait(empty + s, (it / ST - 1) & 1);
                    gpt2__mbar_expect(full + s, (BM + BN) * BK * sizeof(T));
                    gpt2__tma2(As + s * BM * BK, &amap, kb * BK, (t % mt_n) * BM, full + s);
                    gpt2__tma2(Bs + s * BN * BK, &bmap, kb * BK, (t / mt_n) * BN, full + s);
                }
        }
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    /* consumer warpgroup g takes the block's tiles g, g + 2, ...; the two take turns at the products (named
       barriers 1 + g: g's turn), so that one's reduction runs beside the other's products */
    const int g = w >> 2, wl = w & 3, q = lane >> 2, tq = lane & 3;
    float d[128];
    for (int j = g, t = blockIdx.x + g * gridDim.x; t < tiles; j += 2, t += 2 * gridDim.x) {
        const int mt = t % mt_n, nt = t / mt_n;
        if (j > 0) gpt2__bar_sync256(1 + g);
        int it = j * kb_n, held = -1; /* the stage of the group still in flight */
        /* K slice kb: its stage in, four k16 products (64 rows x 256 columns each) issued as a group; the group before
           it waited for and its stage freed (at the tile's last slice, both) */
        for (int kb = 0; kb < kb_n; kb++, it++) {
            const int s = it % ST;
            gpt2__mbar_wait(full + s, (it / ST) & 1);
            const T *a = As + s * BM * BK, *b = Bs + s * BN * BK;
            gpt2__wg_fence();
#pragma unroll
            for (int kk = 0; kk < 4; kk++) gpt2__wg_mma256(d, gpt2__wg_desc(a + kk * 16), gpt2__wg_desc(b + kk * 16), kb > 0 || kk > 0, T());
            gpt2__wg_commit();
            if (kb == kb_n - 1) {
                gpt2__wg_wait<0>();
                if (lane == 0) { if (held >= 0) gpt2__mbar_arrive(empty + held); gpt2__mbar_arrive(empty + s); }
            } else {
                gpt2__wg_wait<1>();
                if (lane == 0 && held >= 0) gpt2__mbar_arrive(empty + held);
                held = s;
            }
        }
        gpt2__wg_keep(d);
        if (t + gridDim.x < tiles) gpt2__bar_arrive256(2 - g); /* the other's turn */
        const int r0 = mt * BM + wl * 16 + q, c = nt * BN + 2 * tq;
        if (nt * BN + BN <= V) gpt2__score_tile<true>(d, r0, c, n, V, nt, nt_n, targets, tl, part, cnt);
        else gpt2__score_tile<false>(d, r0, c, n, V, nt, nt_n, targets, tl, part, cnt);
    }
#else
    (void)n; (void)V; (void)C; (void)targets; (void)tl; (void)part; (void)cnt;
    __trap(); /* launched only where built for sm_90a (S->score_fused) */
#endif
}

__global__ void __launch_bounds__(256) gpt2__score_finish_kernel(const float2 *__restrict__ part, int nt_n, int n, const float *__restrict__ tl,
                                                                 const int *__restrict__ cnt, double *__restrict__ lp, int *__restrict__ rank) {
    const int r = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (r >= n) return;
    const float2 *p = part + (size_t)r * nt_n;
    float mx = -INFINITY;
    for (int i = lane; i < nt_n; i += 32) mx = fmaxf(mx, p[i].x);
    for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    double s = 0.0;
    for (int i = lane; i < nt_n; i += 32) s += (double)p[i].y * exp((double)p[i].x - (double)mx);
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) {
        lp[r] = (double)tl[r] - ((double)mx + log(s));
        rank[r] = cnt[r];
    }
}

/* The head's tensor map for gpt2__score_gemm_kernel and its shared memory: S->score_fused where both are set and the
   kernel was built for sm_90a (wg) */
template <typename T>
static int gpt2__score_enable(gpt2_model *m, gpt2__cuda_state *S, int wg) {
    const int C = m->cfg.n_embd;
    if (!wg || C % 8 || sizeof(T) != 2) return 0;
    const unsigned long long dims[2] = {(unsigned long long)C, (unsigned long long)m->cfg.n_vocab}, strides[1] = {(unsigned long long)C * sizeof(T)};
    const unsigned box[2] = {GPT2__SC_BK, GPT2__SC_BN};
    gpt2__tmap map;
    if (!gpt2__tmap_encode(&map, m->dtype, 2, S->lm_head, dims, strides, box) ||
        cudaFuncSetAttribute(gpt2__score_gemm_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gpt2__score_smem()) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    memcpy(S->score_map, &map, sizeof map);
    return 1;
}

/* The fused form over n rows (their ln at ln): chunks of as many rows as S->logits holds their tile pairs, targets and
   counts */
template <typename T>
static gpt2_status gpt2__cuda_score_fused(gpt2_model *m, gpt2__cuda_state *S, const gpt2__lane *L, const T *ln, int n, const int *targets,
                                          double *lp, int *rank) {
    const int C = m->cfg.n_embd, V = m->cfg.n_vocab, nt_n = (V + GPT2__SC_BN - 1) / GPT2__SC_BN;
    const size_t room = (size_t)S->logit_rows * S->ldv * sizeof(float), per = (size_t)nt_n * sizeof(float2) + sizeof(float) + sizeof(int);
    const int cap = room / per < (size_t)n ? (int)(room / per) : n;
    gpt2__tmap bmap;
    memcpy(&bmap, S->score_map, sizeof bmap);
    for (int c0 = 0; c0 < n; c0 += cap) {
        const int nr = n - c0 < cap ? n - c0 : cap;
        float2 *part = (float2 *)L->logits;
        float *tl = (float *)(part + (size_t)nr * nt_n);
        int *cnt = (int *)(tl + nr);
        const T *a = ln + (size_t)c0 * C;
        const unsigned long long dims[2] = {(unsigned long long)C, (unsigned long long)nr}, strides[1] = {(unsigned long long)C * sizeof(T)};
        const unsigned box[2] = {GPT2__SC_BK, GPT2__SC_BM};
        gpt2__tmap amap;
        if (!gpt2__tmap_encode(&amap, m->dtype, 2, a, dims, strides, box))
            return gpt2__fail(GPT2_ERR_DEVICE, "%s:%d: gpt2_score: the driver refused a tensor map of %d rows", __FILE__, __LINE__, nr);
        gpt2__score_target_kernel<T><<<(nr + 7) / 8, 256, 0, L->stream>>>(a, (const T *)S->lm_head, nr, C, targets + c0, tl, cnt);
        GPT2__LAUNCHED();
        const int tiles = (nr + GPT2__SC_BM - 1) / GPT2__SC_BM * nt_n;
        gpt2__score_gemm_kernel<T><<<tiles < S->sms ? tiles : S->sms, 384, gpt2__score_smem(), L->stream>>>(amap, bmap, nr, V, C, targets + c0,
                                                                                                          tl, part, cnt);
        GPT2__LAUNCHED();
        gpt2__score_finish_kernel<<<(nr + 7) / 8, 256, 0, L->stream>>>(part, nt_n, nr, tl, cnt, lp + c0, rank + c0);
        GPT2__LAUNCHED();
    }
    return GPT2_OK;
}

/* The scored rows of a step (n of them, their final layer norm in S->ln in order) to lp / rank on the device: the
   fused form where it runs (S->score_fused), else the logits product over chunks of at most S->logit_rows rows into
   S->logits (prompt rows' class, so a row's logits do not depend on the chunk), each chunk reduced by
   gpt2__score_kernel before the next overwrites it. */
template <typename T>
static gpt2_status gpt2__cuda_score_rows(gpt2_model *m, gpt2__cuda_state *S, const gpt2__lane *L, int n, const int *targets, double *lp,
                                         int *rank) {
    const int C = m->cfg.n_embd;
    if constexpr (sizeof(T) == 2)
        if (S->score_fused) return gpt2__cuda_score_fused<T>(m, S, L, (const T *)L->ln, n, targets, lp, rank);
    for (int c0 = 0; c0 < n; c0 += S->logit_rows) {
        const int nr = n - c0 < S->logit_rows ? n - c0 : S->logit_rows;
        gpt2_status st = gpt2__linear<T>(S, L, 0, L->logits, S->lm_head, (const T *)L->ln + (size_t)c0 * C, NULL, S->ldv, nr, nr, C,
                                         GPT2__EPI_NONE, 1, S->ldv, NULL);
        if (st) return st;
        gpt2__score_kernel<<<nr, 256, 0, L->stream>>>(L->logits, m->cfg.n_vocab, S->ldv, targets + c0, lp + c0, rank + c0);
        GPT2__LAUNCHED();
    }
    return GPT2_OK;
}

/* gpt2_score on the GPU. Windows (gpt2__score_next, in order) are packed into steps like prompts: whole windows, at
   most max_batch of them (a KV slot each) and S->max_rows fed rows. A step's last layer runs on its scored rows alone
   (the compacted rows of gpt2__cuda_run_t), whose final layer norm gpt2__cuda_score_rows turns into log-probabilities
   and ranks on the device; only those (a double and an int a token) come back. Steps alternate between the two
   staging blobs (h_meta, and S->score_h / S->score_d for the rows): the host packs and launches a step, then reads the
   one before it (its event, fly_done), so the GPU never waits for the host between steps. The sums are added on the
   host in the CPU's order (request, window, row). Device memory: the logits buffer the backend already holds, and
   S->score_d. */
typedef struct gpt2__score_rows_at { double *lp; int *rank, *targets; } gpt2__score_rows_at;
static gpt2__score_rows_at gpt2__score_rows_in(void *base, int R, int b) {
    char *p = (char *)base + (size_t)b * R * GPT2__SCORE_ROW_BYTES;
    gpt2__score_rows_at a = {(double *)p, (int *)(p + (size_t)R * sizeof(double)), (int *)(p + (size_t)R * (sizeof(double) + sizeof(int)))};
    return a;
}

/* Packs nw windows (N fed rows) into staging blob b and launches their step; its results land in S->score_h's blob b,
   fly_done[b] recorded after them. */
static gpt2_status gpt2__cuda_score_step(gpt2_model *m, const gpt2_score_request *reqs, const gpt2__score_win *win, int nw, int N, int b) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    const gpt2__score_rows_at hr = gpt2__score_rows_in(S->score_h, S->max_rows, b), dr = gpt2__score_rows_in(S->score_d, S->max_rows, b);
    gpt2__cuda_meta h = gpt2__meta_at(S->h_meta[b], N, N, 0), d = gpt2__meta_at(S->d_meta, N, N, 0);
    int n = 0;
    for (int k = 0, r = 0; k < nw; k++) {
        const int *tok = reqs[win[k].req].tokens + win[k].s;
        for (int p = 0; p < win[k].n_in; p++, r++) {
            h.tok[r] = tok[p];
            h.pos[r] = p;
            h.slot[r] = k;
            if (p < win[k].first) continue;
            h.out_row[n] = h.gat[n] = r;
            h.outc[n] = n;
            hr.targets[n++] = tok[p + 1];
        }
    }
    gpt2__plan_attention(&h, N, S->flash);
    d.n_att = h.n_att;
    d.n_tiles = h.n_tiles; d.tile_keys = h.tile_keys;
    d.n_gat = n; d.gat_P = n;
    if (cudaMemcpyAsync(S->d_meta, S->h_meta[b], h.bytes, cudaMemcpyHostToDevice, S->stream) != cudaSuccess ||
        cudaMemcpyAsync(dr.targets, hr.targets, (size_t)n * sizeof(int), cudaMemcpyHostToDevice, S->stream) != cudaSuccess)
        return gpt2__fail(GPT2_ERR_DEVICE, "%s:%d: gpt2_score: copying a step's rows: %s", __FILE__, __LINE__, cudaGetErrorString(cudaGetLastError()));
    const gpt2__lane lane = gpt2__lane_of(S);
    gpt2_status st = gpt2__cuda_run(m, &lane, &d, N, N, n, 0, 0);
    if (!st)
        st = m->dtype == GPT2_DTYPE_F16 ? gpt2__cuda_score_rows<__half>(m, S, &lane, n, dr.targets, dr.lp, dr.rank)
           : m->dtype == GPT2_DTYPE_BF16 ? gpt2__cuda_score_rows<__nv_bfloat16>(m, S, &lane, n, dr.targets, dr.lp, dr.rank)
           : gpt2__cuda_score_rows<float>(m, S, &lane, n, dr.targets, dr.lp, dr.rank);
    if (!st && (cudaMemcpyAsync(hr.lp, dr.lp, (size_t)n * sizeof(double), cudaMemcpyDeviceToHost, S->stream) != cudaSuccess ||
                cudaMemcpyAsync(hr.rank, dr.rank, (size_t)n * sizeof(int), cudaMemcpyDeviceToHost, S->stream) != cudaSuccess ||
                cudaEventRecord(S->fly_done[b], S->stream) != cudaSuccess))
        st = gpt2__fail(GPT2_ERR_DEVICE, "%s:%d: gpt2_score: %s", __FILE__, __LINE__, cudaGetErrorString(cudaGetLastError()));
    return st;
}

/* Waits for the step in staging blob b (nw windows) and adds its rows to their requests. */
static gpt2_status gpt2__cuda_score_collect(gpt2_model *m, gpt2_score_request *reqs, const gpt2__score_win *win, int nw, int b) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    if (cudaEventSynchronize(S->fly_done[b]) != cudaSuccess)
        return gpt2__fail(GPT2_ERR_DEVICE, "%s:%d: gpt2_score: %s", __FILE__, __LINE__, cudaGetErrorString(cudaGetLastError()));
    const gpt2__score_rows_at hr = gpt2__score_rows_in(S->score_h, S->max_rows, b);
    for (int k = 0, o = 0; k < nw; k++) {
        gpt2_score_request *r = &reqs[win[k].req];
        for (int p = win[k].first; p < win[k].n_in; p++, o++) {
            const int at = win[k].s + p + 1 - r->n_context;
            if (r->logprobs) r->logprobs[at] = (float)hr.lp[o];
            if (r->ranks) r->ranks[at] = hr.rank[o];
            r->sum_logprob += hr.lp[o];
            r->n_scored++;
        }
    }
    return GPT2_OK;
}

static gpt2_status gpt2__cuda_score(gpt2_model *m, gpt2_score_request *reqs, int n) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    const int L = m->max_seq, R = S->max_rows, B = m->max_batch;
    GPT2__CU(cudaSetDevice(S->device));
    S->dup_step = 0;
    S->feed_n = -1; /* d_meta is the scorer's now */
    gpt2__score_win *win = (gpt2__score_win *)gpt2__alloc(2 * (size_t)B * sizeof *win); /* [2][max_batch]: each blob's windows */
    gpt2_status st = win ? GPT2_OK : gpt2__fail(GPT2_ERR_OOM, "gpt2_score: cannot allocate its window tables");
    int nw[2] = {0, 0};
    gpt2__score_cursor cur = {0, 0};
    gpt2__score_win next;
    int have = !st && gpt2__score_next(reqs, n, L, &cur, &next);
    for (int b = 0; !st && (have || nw[1 - b]); b ^= 1) {
        if (have) { /* a step into blob b: windows while they fit */
            int N = 0;
            while (have && nw[b] < B && N + next.n_in <= R) {
                win[(size_t)b * B + nw[b]++] = next;
                N += next.n_in;
                have = gpt2__score_next(reqs, n, L, &cur, &next);
            }
            if (nw[b] == 0) { st = gpt2__fail(GPT2_ERR_ARG, "gpt2_score: a window of %d rows exceeds the %d rows of a step", next.n_in, R); break; }
            if ((st = gpt2__cuda_score_step(m, reqs, win + (size_t)b * B, nw[b], N, b))) break;
        }
        if (nw[1 - b]) { /* the step before, in the other blob */
            st = gpt2__cuda_score_collect(m, reqs, win + (size_t)(1 - b) * B, nw[1 - b], 1 - b);
            nw[1 - b] = 0;
        }
    }
    if (st) cudaStreamSynchronize(S->stream);
    GPT2_FREE(win);
    return st;
}

/* Ends whatever is in flight (after an error, or when gpt2_generate returns). */
static void gpt2__cuda_drain(gpt2_model *m) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    if (!S || !S->flying) return;
    gpt2__cuda_sync(S);
    S->flying = 0;
}

/* A request's bias and stop lists into its slot's S->ctl (the sampler's processors read them): the bias entries as
   (id, bias bits) pairs sorted by id, those of one id in list order (gpt2__process_row adds them so), then the stop ids,
   stop_token first when it is a token. gpt2__check_controls bounded them by GPT2_CTL_INTS. */
static int gpt2__bias_cmp(const void *a, const void *b) {
    const int *x = (const int *)a, *y = (const int *)b;
    return x[0] != y[0] ? (x[0] > y[0]) - (x[0] < y[0]) : (x[1] > y[1]) - (x[1] < y[1]);
}
static gpt2_status gpt2__cuda_controls(gpt2_model *m, gpt2__cuda_state *S, int slot, const gpt2_request *r, const gpt2_sampling *s) {
    int *c = S->ctl_host, n = 0;
    for (int k = 0; k < s->n_bias; k++) { c[2 * k] = s->bias_ids[k]; c[2 * k + 1] = k; } /* (id, index) to sort */
    qsort(c, (size_t)s->n_bias, 2 * sizeof(int), gpt2__bias_cmp);
    for (int k = 0; k < s->n_bias; k++) { const float b = s->bias[c[2 * k + 1]]; memcpy(&c[2 * k + 1], &b, sizeof b); }
    n = 2 * s->n_bias;
    if (r->stop_token >= 0 && r->stop_token < m->cfg.n_vocab) c[n++] = r->stop_token;
    for (int k = 0; k < r->n_stop_ids; k++) c[n++] = r->stop_ids[k];
    if (n == 0) return GPT2_OK;
    GPT2__CU(cudaMemcpyAsync(S->ctl + (size_t)slot * GPT2_CTL_INTS, c, (size_t)n * sizeof(int), cudaMemcpyHostToDevice, S->stream));
    return GPT2_OK;
}

/* Stages and launches one step of n sequences without waiting for it: its inputs into the next staging blob and
   over, the forward (a replayed graph when every row is a decode row), sampling, the sampled ids back into the blob,
   then an event. At most two steps are in flight; gpt2__cuda_collect reads the oldest. With feed, the step is the
   pure-decode successor of the step launched last (the same sequences in the same order, each one position on): its
   tokens are the ones that step samples, read on the GPU (tok[r] = -1 - r), so the host need not wait for them. */
static gpt2_status gpt2__cuda_launch(gpt2_model *m, const gpt2__seq *seqs, int n, int feed) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    int N = 0, P = 0, decode = 1, dup = 0;
    for (int i = 0; i < n; i++) {
        const gpt2__seq *q = &seqs[i];
        if (i > 0 && q->slot == seqs[i - 1].slot && !q->prompt && q->n_tok == 1) dup = 1;
        if (q->prompt || q->n_tok > 1) P += q->n_tok;
        if (q->slot < 0 || q->slot >= m->max_batch || q->pos < 0 || q->n_tok < 1 || q->pos + q->n_tok > m->max_seq)
            return gpt2__fail(GPT2_ERR_ARG, "CUDA step: sequence %d (slot %d, positions %d..%d) is outside max_batch = %d, "
                                            "max_seq = %d", i, q->slot, q->pos, q->pos + q->n_tok - 1, m->max_batch, m->max_seq);
        N += q->n_tok;
        if (q->n_tok != 1) decode = 0;
    }
    /* several decode rows of one sequence (gpt2_generate verifying a draft): each its own entry, consecutive, at
       consecutive positions; each computes as a decode row of its own would (the keys fed before it in this step read
       from qkv, or stored before attention: gpt2__attention) */
    dup = dup && decode && !P;
    if (n < 1 || N > S->max_rows || n > (dup ? (S->max_rows < S->logit_rows ? S->max_rows : S->logit_rows) : m->max_batch))
        return gpt2__fail(GPT2_ERR_ARG, "CUDA step: %d rows of %d sequences (workspace: %d rows, %d sequences)",
                          N, n, S->max_rows, m->max_batch);
    if (S->flying == 2 || (feed && (S->feed_n != n || !decode || P || dup)))
        return gpt2__fail(GPT2_ERR_ARG, "CUDA step: %d steps in flight, feed %d after a step of %d decode rows (now %d rows, "
                                        "%d of them prompt)", S->flying, feed, S->feed_n, N, P);
    GPT2__CU(cudaSetDevice(S->device));
    const int b = S->stage ^ 1;
    gpt2__cuda_meta h = gpt2__meta_at(S->h_meta[b], N, n, n), d = gpt2__meta_at(S->d_meta, N, n, n);
    /* prompt rows first (rows [0, P)), then the decode rows: each kind has its own GEMM kernel (gpt2__linear) */
    /* the raw rows of the rows with logprobs (gpt2__lp_prelude): S->stash grows to the most a step has had, at a step
       that is not fed (a fed step has the rows of the one before) */
    int n_lp = 0;
    for (int i = 0; i < n; i++) n_lp += seqs[i].sample && seqs[i].req && (seqs[i].req->out_logprobs || seqs[i].req->top_logprobs > 0);
    if (n_lp > S->stash_rows) {
        if (feed) return gpt2__fail(GPT2_ERR_ARG, "CUDA step: a fed step with %d rows of logprobs after %d", n_lp, S->stash_rows);
        if (S->stash) { cudaStreamSynchronize(S->stream); cudaFree(S->stash); S->stash = NULL; S->stash_rows = 0; } /* steps in flight read it */
        if (cudaMalloc(&S->stash, (size_t)n_lp * S->ldv * sizeof(float)) != cudaSuccess) {
            cudaGetLastError();
            return gpt2__fail(GPT2_ERR_OOM, "CUDA step: %d rows of logprobs need %zu MB for their logits", n_lp, (size_t)n_lp * S->ldv * 4 >> 20);
        }
        S->stash_rows = n_lp;
    }
    n_lp = 0;
    for (int i = 0, rp = 0, rd = P; i < n; i++) {
        const gpt2__seq *q = &seqs[i];
        int *r = q->prompt || q->n_tok > 1 ? &rp : &rd;
        for (int t = 0; t < q->n_tok; t++, (*r)++) {
            h.tok[*r] = feed ? -1 - *r : q->tok[t];
            h.pos[*r] = q->pos + t;
            h.slot[*r] = q->slot;
        }
        h.out_row[i] = *r - 1;
        gpt2__pick *pk = &h.picks[i];
        pk->temperature = q->sampling.temperature;
        pk->top_p = q->sampling.top_p;
        pk->top_k = q->sampling.top_k;
        pk->sample = q->sample;
        pk->seed = q->sampling.seed;
        pk->draw = q->draw;
        pk->out = S->h_meta_dev ? (int *)(S->h_meta_dev + ((char *)(h.next + i) - (char *)S->h_meta[0])) : NULL;
        pk->min_p = q->sampling.min_p;
        pk->typical_p = q->sampling.typical_p;
        pk->proc = q->sample && q->req && gpt2__processed(q->req);
        pk->pos = q->pos + q->n_tok - 1;
        pk->hist = S->hist + (size_t)q->slot * m->max_seq;
        pk->ctl = S->ctl + (size_t)q->slot * GPT2_CTL_INTS;
        const int lp = q->sample && q->req && (q->req->out_logprobs || q->req->top_logprobs > 0);
        pk->rec = !lp ? NULL : S->h_meta_dev ? (gpt2__lp_rec *)(S->h_meta_dev + ((char *)(h.recs + i) - (char *)S->h_meta[0])) : d.recs + i;
        pk->stash = lp ? S->stash + (size_t)n_lp++ * S->ldv : NULL;
        pk->top = lp ? q->req->top_logprobs : 0;
        S->fly_req[b][i] = lp ? q->req : NULL;
        S->fly_draw[b][i] = q->draw;
        if (pk->proc) {
            const gpt2_request *rq = q->req;
            pk->n_prompt = rq->prompt_len;
            pk->rep_penalty = q->sampling.repetition_penalty;
            pk->presence = q->sampling.presence_penalty;
            pk->frequency = q->sampling.frequency_penalty;
            pk->no_repeat = q->sampling.no_repeat_ngram;
            pk->min_new = q->sampling.min_new_tokens;
            pk->n_bias = q->sampling.n_bias;
            pk->n_stop = rq->n_stop_ids + (rq->stop_token >= 0 && rq->stop_token < m->cfg.n_vocab);
            /* the request's lists go up with its prompt (its first step's rows) */
            gpt2_status st = q->prompt ? gpt2__cuda_controls(m, S, q->slot, rq, &q->sampling) : GPT2_OK;
            if (st) return st;
        }
    }
    S->dup_step = dup;
    S->dup_seqs = 1;
    for (int i = 1; i < n; i++) S->dup_seqs += seqs[i].slot != seqs[i - 1].slot;
    const gpt2__step_paths q = gpt2__step_paths_of(S, m, h.pos, N, P, n, dup);
    /* compacted last layer: each prompt's last row in order, then every decode row (N - P of them, one a sequence) */
    h.gat_P = n - (N - P);
    h.n_gat = q.gather ? n : 0;
    for (int i = 0, jp = 0; h.n_gat && i < n; i++) {
        const int r = h.out_row[i], j = r < P ? jp++ : h.gat_P + r - P;
        h.gat[j] = r;
        h.outc[i] = j;
    }
    gpt2__plan_attention(&h, N, S->flash && !dup); /* a draft's rows stay decode rows, not a prompt run */
    const int np = q.np;
    S->parts_last = np;
    S->green_step = q.green;
    S->att_short = q.att_short;
    /* parts (gpt2__cuda_parts): a part's rows count from its first */
    for (int i = 1; i < np; i++)
        for (int r = gpt2__part_at(N, np, i), r0 = r; r < gpt2__part_at(N, np, i + 1); r++) h.att_rows[r] -= r0, h.out_row[r] -= r0;
    d.n_att = h.n_att;
    d.n_tiles = h.n_tiles; d.tile_keys = h.tile_keys;
    d.n_gat = h.n_gat; d.gat_P = h.gat_P;
    gpt2_status st = GPT2_OK;
    /* a fed step finds its blob already on the device: the sampler of the step before advanced it (gpt2__advance) */
    cudaError_t e = feed && S->h_meta_dev ? cudaSuccess : cudaMemcpyAsync(S->d_meta, S->h_meta[b], h.bytes, cudaMemcpyHostToDevice, S->stream);
    if (e == cudaSuccess)
        st = decode && !P && S->use_graphs ? gpt2__cuda_decode_graph(m, &d, n, np) : gpt2__cuda_step_body(m, &d, N, P, n, np);
    if (e == cudaSuccess && !st && !S->h_meta_dev)
        e = cudaMemcpyAsync(h.next, d.next, (size_t)n * (sizeof(int) + sizeof(gpt2__lp_rec)), cudaMemcpyDeviceToHost, S->stream);
    if (e == cudaSuccess && !st) e = cudaEventRecord(S->fly_done[b], S->stream);
    if (st || e != cudaSuccess) {
        gpt2__cuda_drain(m);
        S->feed_n = -1;
        return st ? st : gpt2__fail(GPT2_ERR_DEVICE, "%s:%d: CUDA step: %s", __FILE__, __LINE__, cudaGetErrorString(e));
    }
    S->stage = b;
    S->fly_n[b] = n;
    S->fly_next[b] = h.next;
    S->fly_recs[b] = h.recs;
    S->flying++;
    S->feed_n = decode && !P && !dup ? n : -1;
    return GPT2_OK;
}

/* Waits for the oldest step in flight and copies its sampled ids (one per sequence, in its order) to next. */
static gpt2_status gpt2__cuda_collect(gpt2_model *m, int *next) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    if (!S->flying) return gpt2__fail(GPT2_ERR_ARG, "CUDA step: no step in flight to collect");
    const int b = S->flying == 2 ? S->stage ^ 1 : S->stage;
    cudaError_t e = cudaEventSynchronize(S->fly_done[b]);
    S->flying--;
    if (e != cudaSuccess) {
        gpt2__cuda_drain(m);
        return gpt2__fail(GPT2_ERR_DEVICE, "%s:%d: CUDA step: %s", __FILE__, __LINE__, cudaGetErrorString(e));
    }
    memcpy(next, S->fly_next[b], (size_t)S->fly_n[b] * sizeof(int));
    /* logprobs into their requests at the row's draw, as gpt2__logprobs writes them */
    for (int i = 0; i < S->fly_n[b]; i++) {
        gpt2_request *r = S->fly_req[b][i];
        if (!r) continue;
        const gpt2__lp_rec *c = &S->fly_recs[b][i];
        const uint64_t draw = S->fly_draw[b][i];
        if (r->out_logprobs) r->out_logprobs[draw] = c->lp;
        if (r->top_logprobs > 0) {
            memcpy(r->out_top_ids + draw * r->top_logprobs, c->ids, (size_t)r->top_logprobs * sizeof(int));
            memcpy(r->out_top_logprobs + draw * r->top_logprobs, c->lps, (size_t)r->top_logprobs * sizeof(float));
        }
    }
    return GPT2_OK;
}

/* A request ended while steps are in flight: their rows of it no longer copy logprobs into it (gpt2__cuda_collect),
   as its caller may free or reuse it from on_end on */
static void gpt2__cuda_forget(gpt2_model *m, const gpt2_request *r) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    for (int b = 0; S && b < 2; b++)
        for (int i = 0; S->fly_req[b] && i < S->fly_n[b]; i++)
            if (S->fly_req[b][i] == r) S->fly_req[b][i] = NULL;
}

/* Whether gpt2_generate may launch a step before reading the one before (tests turn it off) */
static int gpt2__cuda_lookahead(const gpt2_model *m) { return ((const gpt2__cuda_state *)m->cuda)->lookahead; }

/* One step, start to end: its sampled ids in next. */
static gpt2_status gpt2__cuda_step(gpt2_model *m, const gpt2__seq *seqs, int n, int *next) {
    if (n < 1) return GPT2_OK;
    gpt2_status st = gpt2__cuda_launch(m, seqs, n, 0);
    return st ? st : gpt2__cuda_collect(m, next);
}

/* == [GPT2:CUDA_INIT] == CUDA init and free: usable GPU, weight upload, state =================================== */

/* Probe for gpt2__cuda_usable: launchable only when this build holds code for the GPU. */
__global__ void gpt2__probe_kernel(int *x) { if (x) *x = 0; }
__device__ int gpt2__built_wg = GPT2__WG; /* 1: the code running was built with wgmma (sm_90a; read by init) */

/* Whether device d's primary context is active (its caller has used it); 1 where that cannot be asked. Since CUDA 12
   cudaSetDevice creates a device's context, so switching back to a device the caller never used would hold memory
   there for the life of the process (every MPI rank on GPU 0; refused in exclusive-process mode). */
static int gpt2__cuda_ctx_active(int d) {
#if CUDART_VERSION >= 12050
    typedef CUresult (*get_fn)(CUdevice *, int);
    typedef CUresult (*state_fn)(CUdevice, unsigned *, int *);
    void *g = NULL, *s = NULL;
    cudaDriverEntryPointQueryResult qg, qs;
    CUdevice dev;
    unsigned flags = 0;
    int on = 1;
    if (cudaGetDriverEntryPointByVersion("cuDeviceGet", &g, 12000, cudaEnableDefault, &qg) == cudaSuccess &&
        qg == cudaDriverEntryPointSuccess && g &&
        cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &s, 12000, cudaEnableDefault, &qs) == cudaSuccess &&
        qs == cudaDriverEntryPointSuccess && s && ((get_fn)g)(&dev, d) == CUDA_SUCCESS &&
        ((state_fn)s)(dev, &flags, &on) == CUDA_SUCCESS)
        return on;
    cudaGetLastError();
#else
    (void)d;
#endif
    return 1;
}

static int gpt2__cuda_usable(int device, char *why, size_t cap) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) { snprintf(why, cap, "no CUDA device: %s", cudaGetErrorString(e)); cudaGetLastError(); return 0; }
    if (count < 1) { snprintf(why, cap, "no CUDA device: none found"); return 0; }
    int prev = 0;
    if ((e = cudaGetDevice(&prev)) != cudaSuccess) { snprintf(why, cap, "no CUDA device: %s", cudaGetErrorString(e)); return 0; }
    if (device < 0) device = prev;
    if (device >= count) { snprintf(why, cap, "CUDA device %d does not exist (%d found)", device, count); return 0; }
    cudaDeviceProp pr;
    if ((e = cudaGetDeviceProperties(&pr, device)) != cudaSuccess) {
        snprintf(why, cap, "CUDA device %d: %s", device, cudaGetErrorString(e));
        return 0;
    }
    int cc = pr.major * 10 + pr.minor;
    if (cc < GPT2__MIN_ARCH) {
        snprintf(why, cap, "GPU %.64s (sm_%d) is too old for this build (needs sm_%d+)", pr.name, cc, GPT2__MIN_ARCH);
        return 0;
    }
    cudaFuncAttributes fa;
    const int back = device != prev && gpt2__cuda_ctx_active(prev); /* asked before device's context exists */
    cudaSetDevice(device);
    e = cudaFuncGetAttributes(&fa, gpt2__probe_kernel);
    if (back) cudaSetDevice(prev);
    if (e != cudaSuccess) {
        cudaGetLastError();
        snprintf(why, cap, "GPU %.64s (sm_%d) has no code in this build (%.80s); rebuild for it", pr.name, cc, cudaGetErrorString(e));
        return 0;
    }
    return 1;
}

static void gpt2__cuda_free(gpt2_model *m) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    if (!S) return;
    cudaSetDevice(S->device);
    gpt2__cuda_sync(S);
    gpt2__green_make(S, 0);
    for (int i = 0; i < S->n_gemm; i++) {
        if (S->gemm[i].desc) cublasLtMatmulDescDestroy(S->gemm[i].desc);
        if (S->gemm[i].a) cublasLtMatrixLayoutDestroy(S->gemm[i].a);
        if (S->gemm[i].b) cublasLtMatrixLayoutDestroy(S->gemm[i].b);
        if (S->gemm[i].d) cublasLtMatrixLayoutDestroy(S->gemm[i].d);
    }
    if (S->lt) cublasLtDestroy(S->lt);
    cudaFree(S->lt_ws);
    for (int i = 1; i < GPT2__MAX_PARTS; i++) cudaFree(S->plt_ws[i]);
    cudaFree(S->warena);
    cudaFree(S->k_cache);
    cudaFree(S->v_cache);
    cudaFree(S->act);
    cudaFree(S->hist);
    cudaFree(S->stash);
    GPT2_FREE(S->ctl_host);
    for (int i = 0; i < 2; i++) { GPT2_FREE(S->fly_req[i]); GPT2_FREE(S->fly_draw[i]); }
    cudaFree(S->d_meta);
    if (S->h_meta[0]) cudaFreeHost(S->h_meta[0]);
    cudaFree(S->score_d);
    if (S->score_h) cudaFreeHost(S->score_h);
    for (int i = 0; i < 2; i++) if (S->fly_done[i]) cudaEventDestroy(S->fly_done[i]);
    if (S->fork) cudaEventDestroy(S->fork);
    for (int i = 0; i < GPT2__MAX_PARTS; i++) {
        if (S->pjoin[i]) cudaEventDestroy(S->pjoin[i]);
        if (S->att_go[i]) cudaEventDestroy(S->att_go[i]);
        if (S->att_done[i]) cudaEventDestroy(S->att_done[i]);
        if (S->pstream[i]) cudaStreamDestroy(S->pstream[i]);
    }
    if (S->stream) cudaStreamDestroy(S->stream);
    cudaGetLastError();
    GPT2_FREE(S->layers);
    GPT2_FREE(S);
    m->cuda = NULL;
}

/* Weight upload: dst (T) = src (S, the checkpoint's dtype as uploaded), through float32 (exact from F16 and BF16),
   so the bits are those of the CPU backend's float32 copy rounded to T; transposed from [rows][cols] to
   [cols][rows] when transpose is set (GPT-2's Conv1D [in][out] becomes [out][in]). Grid-stride over rows*cols. */
template <typename T, typename S>
__global__ void gpt2__convert_kernel(T *dst, const S *src, size_t rows, size_t cols, int transpose) {
    size_t n = rows * cols;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t s = transpose ? (i % rows) * cols + i / rows : i;
        gpt2__put(dst + i, gpt2__f(src[s]));
    }
}

/* Weights: each tensor's bytes go up as the checkpoint holds them (F32, F16 or BF16) into a staging buffer, and a
   kernel converts them to the model's dtype (fp32 when keep_f32: the layer norms' parameters), transposing the
   matrices. The stream orders each copy after the conversion before it. The host side: the bytes (the mapped file,
   or an MPI rank's received copy) go through two pinned buffers of GPT2__UP_CHUNK bytes in turn, the host (its
   OpenMP threads, where built with them) filling one while the copy engine reads the other, so the host waits only
   for the copy that last read the buffer it fills next. Without the pinned buffers (their allocation failed) each
   tensor goes up from pageable memory, through the driver's own bounce buffers (~8 GB/s on the H100's host). */

typedef struct {
    void *pin[2];         /* pinned host buffers of GPT2__UP_CHUNK bytes (NULL: pageable copies) */
    cudaEvent_t read[2];  /* recorded after the copy that reads pin[i] */
    int next;             /* the buffer filled next */
} gpt2__uploader;

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif
/* Whether all of [p, p + n) is in memory (for a mapped file: in the page cache). Linux only; elsewhere 1. */
static int gpt2__resident(const void *p, size_t n) {
#if defined(__linux__)
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = (uintptr_t)p & ~(uintptr_t)(pg - 1);
    const size_t np = ((uintptr_t)p + n - a + pg - 1) / pg;
    unsigned char v[4096];
    for (size_t i = 0; i < np; i += sizeof v) {
        size_t k = np - i < sizeof v ? np - i : sizeof v;
        if (mincore((void *)(a + i * pg), k * pg, v) != 0) return 0;
        for (size_t j = 0; j < k; j++) if (!(v[j] & 1)) return 0;
    }
#else
    (void)p;
    (void)n;
#endif
    return 1;
}

/* Copies n bytes, on up to GPT2__UP_THREADS OpenMP threads in 1 MB pieces when the source is all in memory. A
   mapped file's pages that are not yet read come in one thread's order instead: faulting them from several threads
   at once defeats the kernel's read-ahead. More threads than 8 gain little, and with all of a host's cores in each
   of two MPI ranks, the ranks' idle threads spinning between chunks slow a load. */

static inline int gpt2__up_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads() < GPT2__UP_THREADS ? omp_get_max_threads() : GPT2__UP_THREADS;
#else
    return 1;
#endif
}
static void gpt2__par_copy(void *dst, const void *src, size_t n) {
    const size_t piece = (size_t)1 << 20;
    const long long np = (long long)((n + piece - 1) / piece);
    GPT2__OMP(omp parallel for schedule(static) num_threads(gpt2__up_threads()) if (np > 1 && gpt2__resident(src, n)))
    for (long long i = 0; i < np; i++) {
        size_t o = (size_t)i * piece, k = n - o < piece ? n - o : piece;
        memcpy((char *)dst + o, (const char *)src + o, k);
    }
}
template <typename T>
static void gpt2__convert_launch(void *dst, const void *staging, char dtype, size_t rows, size_t cols, int transpose,
                                 int blocks, cudaStream_t stream) {
    if (dtype == 'F')
        gpt2__convert_kernel<T, float><<<blocks, 256, 0, stream>>>((T *)dst, (const float *)staging, rows, cols, transpose);
    else if (dtype == 'H')
        gpt2__convert_kernel<T, __half><<<blocks, 256, 0, stream>>>((T *)dst, (const __half *)staging, rows, cols, transpose);
    else
        gpt2__convert_kernel<T, __nv_bfloat16><<<blocks, 256, 0, stream>>>((T *)dst, (const __nv_bfloat16 *)staging, rows, cols,
                                                                           transpose);
}

static gpt2_status gpt2__cuda_upload(gpt2_model *m, gpt2__cuda_state *S, void *dst, const gpt2__slot *src, int transpose,
                                     int keep_f32, void *staging, gpt2__uploader *up) {
    size_t rows = src->ndim == 2 ? src->shape[0] : 1, cols = src->ndim == 2 ? src->shape[1] : src->shape[0];
    size_t n = rows * cols, bytes = n * (src->dtype == 'F' ? 4 : 2);
    if (!up->pin[0]) GPT2__CU(cudaMemcpyAsync(staging, src->src, bytes, cudaMemcpyHostToDevice, S->stream));
    else
        for (size_t o = 0; o < bytes; o += GPT2__UP_CHUNK) {
            size_t k = bytes - o < GPT2__UP_CHUNK ? bytes - o : GPT2__UP_CHUNK;
            int b = up->next;
            up->next ^= 1;
            GPT2__CU(cudaEventSynchronize(up->read[b]));
            gpt2__par_copy(up->pin[b], (const char *)src->src + o, k);
            GPT2__CU(cudaMemcpyAsync((char *)staging + o, up->pin[b], k, cudaMemcpyHostToDevice, S->stream));
            GPT2__CU(cudaEventRecord(up->read[b], S->stream));
        }
    int blocks = (int)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
    if (keep_f32 || m->dtype == GPT2_DTYPE_F32) gpt2__convert_launch<float>(dst, staging, src->dtype, rows, cols, transpose, blocks, S->stream);
    else if (m->dtype == GPT2_DTYPE_F16) gpt2__convert_launch<__half>(dst, staging, src->dtype, rows, cols, transpose, blocks, S->stream);
    else gpt2__convert_launch<__nv_bfloat16>(dst, staging, src->dtype, rows, cols, transpose, blocks, S->stream);
    GPT2__LAUNCHED();
    return GPT2_OK;
}

static gpt2_status gpt2__cuda_init_state(gpt2_model *m, gpt2__cuda_state *S, const gpt2__slot *slots) {
    const gpt2_config *cf = &m->cfg;
    const size_t C = (size_t)cf->n_embd, V = (size_t)cf->n_vocab, P = (size_t)cf->n_ctx, F = (size_t)m->n_inner;
    const size_t L = (size_t)cf->n_layer, H = (size_t)cf->n_head;
    int dev = m->device;
    if (dev < 0) GPT2__CU(cudaGetDevice(&dev));
    S->device = dev;
    GPT2__CU(cudaSetDevice(dev));
    cudaDeviceProp pr;
    GPT2__CU(cudaGetDeviceProperties(&pr, dev));
    S->sms = pr.multiProcessorCount;
    S->sm_smem = pr.sharedMemPerMultiprocessor;
    S->l2_bytes = (size_t)pr.l2CacheSize;
    S->esize = m->dtype == GPT2_DTYPE_F32 ? 4 : 2;
    S->mlp_act = m->arch.act;
    S->use_graphs = 1;
    S->lookahead = 1;
    S->gather = 32;
    S->ldv = (int)((V + 7) & ~(size_t)7);
    S->flash = gpt2__prefill_usable(m->dtype, (int)(C / H), dev);
    int wg = 0;
    if (cudaMemcpyFromSymbol(&wg, gpt2__built_wg, sizeof wg) != cudaSuccess) { cudaGetLastError(); wg = 0; }
    S->flash_wg = S->flash && wg && C / H == 64 && m->dtype != GPT2_DTYPE_F32;
    S->pdl = pr.major >= 9;
    const size_t es = S->esize;
    if (!gpt2__cuda_head_ok((int)(C / H), es))
        return gpt2__fail(GPT2_ERR_FORMAT, "head size %zu (n_embd %zu / n_head %zu) is too large for the CUDA backend",
                          C / H, C, H);
    /* weights */
    size_t per_layer = gpt2__align256(C * 3 * C * es) + gpt2__align256(3 * C * es) + gpt2__align256(C * C * es) +
                       gpt2__align256(C * es) + gpt2__align256(C * F * es) + gpt2__align256(F * es) +
                       gpt2__align256(F * C * es) + gpt2__align256(C * es) + 4 * gpt2__align256(C * 4);
    size_t wbytes = (m->arch.untied ? 2 : 1) * gpt2__align256((size_t)S->ldv * C * es) + gpt2__align256(P * C * es) + 2 * gpt2__align256(C * 4) +
                    L * per_layer;
    /* workspace per fed row: x fp32, ln/att/proj C, qkv 3C, fc F in T, logits V fp32 */
    S->lt_ws_size = (size_t)32 << 20;
    /* S->part: decode attention's span partials, and (never at the same time) a projection's K pieces */
    size_t part_per_row = H * (size_t)((m->max_seq + GPT2__SPAN_LEN - 1) / GPT2__SPAN_LEN) * (C / H + 2);
    if (part_per_row < 4 * C) part_per_row = 4 * C;
    size_t fixed = wbytes + GPT2__MAX_PARTS * S->lt_ws_size + ((size_t)64 << 20);
    size_t per_row = C * 4 + (3 * C + 3 * C + F) * es + part_per_row * 4 + 4 * 4 + 64 + 2 * GPT2__SCORE_ROW_BYTES, per_slot_kv = 2 * L * (size_t)m->max_seq * C * es;
    size_t free_b = 0, total_b = 0;
    GPT2__CU(cudaMemGetInfo(&free_b, &total_b));
    /* prompt tokens per engine step: enough rows for the GEMMs to run at full rate */
    if (m->prefill_tokens <= 0) m->prefill_tokens = 4096;
    const int budget = m->prefill_tokens > m->max_seq ? m->prefill_tokens : m->max_seq;
    if (m->max_batch == 0) {
        double room = 0.5 * ((double)free_b - (double)fixed - (double)(budget + 256) * per_row - 2048.0 * S->ldv * 4);
        double b = room / (double)(per_slot_kv + per_row + (size_t)S->ldv * 4 + sizeof(gpt2__pick));
        m->max_batch = b < 1 ? 1 : b > 256 ? 256 : (int)b;
    }
    S->max_rows = budget + m->max_batch;
    S->part_floats = (size_t)S->max_rows * part_per_row;
    /* logits: one row per sequence in a step; gpt2_forward's chunks of whole sequences fit too */
    S->logit_rows = m->max_batch > m->max_seq ? m->max_batch : m->max_seq;
    if (S->logit_rows < 2048) S->logit_rows = 2048;
    const size_t logit_bytes = gpt2__align256((size_t)S->logit_rows * S->ldv * 4);
    size_t kv_bytes = (size_t)m->max_batch * per_slot_kv / 2;
    /* and what init and the steps allocate after this check: the token history and control lists, the weights'
       staging buffer (the largest tensor in float32), the logprobs' raw rows at their most (one a sequence) */
    size_t biggest = V * C > P * C ? V * C : P * C;
    if (C * 3 * C > biggest) biggest = C * 3 * C;
    if (C * F > biggest) biggest = C * F;
    const size_t later = (size_t)m->max_batch * ((size_t)m->max_seq + GPT2_CTL_INTS) * sizeof(int) + biggest * sizeof(float) +
                         (size_t)m->max_batch * S->ldv * sizeof(float);
    size_t need = fixed + 2 * kv_bytes + (size_t)S->max_rows * per_row + logit_bytes + later;
    if (need > free_b)
        return gpt2__fail(GPT2_ERR_OOM, "CUDA device %d: asked %zu MB (weights %zu MB, KV cache %zu MB for %d sequences of %d tokens, "
                                        "workspace), %zu MB free", dev, need >> 20, wbytes >> 20, (2 * kv_bytes) >> 20,
                          m->max_batch, m->max_seq, free_b >> 20);
    GPT2__CU(cudaStreamCreateWithFlags(&S->stream, cudaStreamNonBlocking));
    GPT2__CU(cudaEventCreateWithFlags(&S->fork, cudaEventDisableTiming));
    S->part_rows = GPT2__PART_ROWS;
    /* F32 decode steps run as one part. Its products run on the FP32 units and want every SM: kept off the
       attention's SMs they lose more than the overlap gives, and a second part reads the weights again. Tests still
       set parts to run F32 in parts. */
    S->parts = m->dtype == GPT2_DTYPE_F32 ? 1 : GPT2__PARTS;
    S->prefill_order = -1;
    GPT2__LT(cublasLtCreate(&S->lt));
    GPT2__CU(cudaMalloc(&S->lt_ws, S->lt_ws_size));
    for (int i = 0; i < GPT2__MAX_PARTS; i++) {
        GPT2__CU(cudaEventCreateWithFlags(&S->pjoin[i], cudaEventDisableTiming));
        GPT2__CU(cudaEventCreateWithFlags(&S->att_go[i], cudaEventDisableTiming));
        GPT2__CU(cudaEventCreateWithFlags(&S->att_done[i], cudaEventDisableTiming));
        if (i == 0) continue;
        GPT2__CU(cudaStreamCreateWithFlags(&S->pstream[i], cudaStreamNonBlocking));
        GPT2__CU(cudaMalloc(&S->plt_ws[i], S->lt_ws_size));
    }
    S->att_sms = gpt2__att_sms_default(dev);
    S->green_ctx = GPT2__GREEN_CTX;
    S->att_ns = GPT2__AMMA_NS;
    S->att_tma = GPT2__ATT_TMA;
    gpt2__green_make(S, S->att_sms);
    GPT2__CU(cudaMalloc(&S->warena, wbytes));
    GPT2__CU(cudaMalloc(&S->k_cache, kv_bytes));
    GPT2__CU(cudaMalloc(&S->v_cache, kv_bytes));
    /* the sampler's processors: each slot's tokens and lists (hist, then ctl, in one allocation) */
    GPT2__CU(cudaMalloc(&S->hist, (size_t)m->max_batch * (m->max_seq + GPT2_CTL_INTS) * sizeof(int)));
    S->ctl = S->hist + (size_t)m->max_batch * m->max_seq;
    S->ctl_host = (int *)gpt2__alloc(GPT2_CTL_INTS * sizeof(int));
    for (int i = 0; i < 2; i++) {
        S->fly_req[i] = (gpt2_request **)gpt2__zalloc((size_t)S->max_rows * sizeof(gpt2_request *));
        S->fly_draw[i] = (uint64_t *)gpt2__zalloc((size_t)S->max_rows * sizeof(uint64_t));
    }
    if (!S->ctl_host || !S->fly_req[0] || !S->fly_req[1] || !S->fly_draw[0] || !S->fly_draw[1])
        return gpt2__fail(GPT2_ERR_OOM, "cannot allocate the sampler's host tables");
    /* activations */
    const size_t R = (size_t)S->max_rows;
    size_t act = gpt2__align256(R * C * 4) + logit_bytes + gpt2__align256(S->part_floats * 4) +
                 3 * gpt2__align256(R * C * es) + gpt2__align256(R * 3 * C * es) + gpt2__align256(R * F * es) +
                 gpt2__align256(R * H * sizeof(unsigned)) + gpt2__align256((size_t)GPT2__LN_FOLD_ROWS * C * 4);
    GPT2__CU(cudaMalloc(&S->act, act));
    char *a = (char *)S->act;
    S->att_count = (unsigned *)a; a += gpt2__align256(R * H * sizeof(unsigned));
    GPT2__CU(cudaMemsetAsync(S->att_count, 0, R * H * sizeof(unsigned), S->stream));
    S->x = (float *)a; a += gpt2__align256(R * C * 4);
    S->x2 = (float *)a; a += gpt2__align256((size_t)GPT2__LN_FOLD_ROWS * C * 4);
    S->logits = (float *)a; a += logit_bytes;
    S->part = (float *)a; a += gpt2__align256(S->part_floats * 4);
    S->ln = a; a += gpt2__align256(R * C * es);
    S->att = a; a += gpt2__align256(R * C * es);
    S->proj = a; a += gpt2__align256(R * C * es);
    S->qkv = a; a += gpt2__align256(R * 3 * C * es);
    S->fc = a;
    S->meta_bytes = gpt2__align256(gpt2__meta_size(S->max_rows, S->max_rows, S->max_rows));
    GPT2__CU(cudaMalloc(&S->d_meta, S->meta_bytes));
    GPT2__CU(cudaMallocHost(&S->h_meta[0], 2 * S->meta_bytes));
    S->h_meta[1] = (char *)S->h_meta[0] + S->meta_bytes;
    void *mapped = NULL;
    S->h_meta_dev = cudaHostGetDevicePointer(&mapped, S->h_meta[0], 0) == cudaSuccess ? (char *)mapped : NULL;
    cudaGetLastError();
    for (int i = 0; i < 2; i++) GPT2__CU(cudaEventCreateWithFlags(&S->fly_done[i], cudaEventDisableTiming));
    GPT2__CU(cudaMalloc(&S->score_d, 2 * (size_t)S->max_rows * GPT2__SCORE_ROW_BYTES));
    GPT2__CU(cudaMallocHost(&S->score_h, 2 * (size_t)S->max_rows * GPT2__SCORE_ROW_BYTES));
    S->feed_n = -1;
    /* weights: lay out, then upload through one staging buffer as large as the largest tensor in float32 */
    S->layers = (gpt2__cuda_layer *)gpt2__zalloc(L * sizeof(gpt2__cuda_layer));
    if (!S->layers) return gpt2__fail(GPT2_ERR_OOM, "cannot allocate the CUDA layer table");
    void *staging = NULL;
    GPT2__CU(cudaMalloc(&staging, biggest * sizeof(float)));
    gpt2__uploader up = {{NULL, NULL}, {NULL, NULL}, 0};
    for (int i = 0; i < 2 && GPT2__UP_CHUNK > 0; i++) /* -DGPT2__UP_CHUNK=0: pageable copies */
        if (cudaMallocHost(&up.pin[i], GPT2__UP_CHUNK) != cudaSuccess || cudaEventCreateWithFlags(&up.read[i], cudaEventDisableTiming) != cudaSuccess) {
            cudaGetLastError();
            for (int j = 0; j < 2; j++) {
                if (up.pin[j]) cudaFreeHost(up.pin[j]);
                if (up.read[j]) cudaEventDestroy(up.read[j]);
                up.pin[j] = NULL;
                up.read[j] = NULL;
            }
            break;
        }
    char *w = (char *)S->warena;
    gpt2_status st = GPT2_OK;
#define GPT2__PLACE(ptr, count, bytes_per) do { ptr = (decltype(ptr))w; w += gpt2__align256((count) * (bytes_per)); } while (0)
#define GPT2__UP(dst, slot, tr, f32) do { if (!st) st = gpt2__cuda_upload(m, S, dst, &slots[slot], tr, f32, staging, &up); } while (0)
    GPT2__PLACE(S->wte, (size_t)S->ldv * C, es);
    if (!st && cudaMemsetAsync(S->wte, 0, (size_t)S->ldv * C * es, S->stream) != cudaSuccess)
        st = gpt2__fail(GPT2_ERR_DEVICE, "%s:%d: clearing wte failed", __FILE__, __LINE__);
    GPT2__UP(S->wte, GPT2__SLOT_WTE, 0, 0);
    S->lm_head = S->wte;
    if (m->arch.untied) { /* the slot after ln_f's two, [V][C] as wte */
        GPT2__PLACE(S->lm_head, (size_t)S->ldv * C, es);
        if (!st && cudaMemsetAsync(S->lm_head, 0, (size_t)S->ldv * C * es, S->stream) != cudaSuccess)
            st = gpt2__fail(GPT2_ERR_DEVICE, "%s:%d: clearing lm_head failed", __FILE__, __LINE__);
        GPT2__UP(S->lm_head, GPT2__SLOT_LNF(L) + 2, 0, 0);
    }
    GPT2__PLACE(S->wpe, P * C, es); GPT2__UP(S->wpe, GPT2__SLOT_WPE, 0, 0);
    GPT2__PLACE(S->lnf_w, C, 4); GPT2__UP(S->lnf_w, GPT2__SLOT_LNF(L), 0, 1);
    GPT2__PLACE(S->lnf_b, C, 4); GPT2__UP(S->lnf_b, GPT2__SLOT_LNF(L) + 1, 0, 1);
    for (size_t l = 0; l < L; l++) {
        gpt2__cuda_layer *y = &S->layers[l];
        GPT2__PLACE(y->qkv_w, C * 3 * C, es); GPT2__UP(y->qkv_w, GPT2__SLOT_LAYER(l, GPT2__T_QKV_W), 1, 0);
        GPT2__PLACE(y->qkv_b, 3 * C, es); GPT2__UP(y->qkv_b, GPT2__SLOT_LAYER(l, GPT2__T_QKV_B), 0, 0);
        GPT2__PLACE(y->proj_w, C * C, es); GPT2__UP(y->proj_w, GPT2__SLOT_LAYER(l, GPT2__T_PROJ_W), 1, 0);
        GPT2__PLACE(y->proj_b, C, es); GPT2__UP(y->proj_b, GPT2__SLOT_LAYER(l, GPT2__T_PROJ_B), 0, 0);
        GPT2__PLACE(y->fc_w, C * F, es); GPT2__UP(y->fc_w, GPT2__SLOT_LAYER(l, GPT2__T_FC_W), 1, 0);
        GPT2__PLACE(y->fc_b, F, es); GPT2__UP(y->fc_b, GPT2__SLOT_LAYER(l, GPT2__T_FC_B), 0, 0);
        GPT2__PLACE(y->fcp_w, F * C, es); GPT2__UP(y->fcp_w, GPT2__SLOT_LAYER(l, GPT2__T_FCP_W), 1, 0);
        GPT2__PLACE(y->fcp_b, C, es); GPT2__UP(y->fcp_b, GPT2__SLOT_LAYER(l, GPT2__T_FCP_B), 0, 0);
        GPT2__PLACE(y->ln1_w, C, 4); GPT2__UP(y->ln1_w, GPT2__SLOT_LAYER(l, GPT2__T_LN1_W), 0, 1);
        GPT2__PLACE(y->ln1_b, C, 4); GPT2__UP(y->ln1_b, GPT2__SLOT_LAYER(l, GPT2__T_LN1_B), 0, 1);
        GPT2__PLACE(y->ln2_w, C, 4); GPT2__UP(y->ln2_w, GPT2__SLOT_LAYER(l, GPT2__T_LN2_W), 0, 1);
        GPT2__PLACE(y->ln2_b, C, 4); GPT2__UP(y->ln2_b, GPT2__SLOT_LAYER(l, GPT2__T_LN2_B), 0, 1);
    }
#undef GPT2__PLACE
#undef GPT2__UP
    if (!st && cudaStreamSynchronize(S->stream) != cudaSuccess)
        st = gpt2__fail(GPT2_ERR_DEVICE, "%s:%d: uploading the weights failed: %s", __FILE__, __LINE__, cudaGetErrorString(cudaGetLastError()));
    if (st) cudaStreamSynchronize(S->stream); /* no copy may still read the pinned buffers freed next */
    for (int i = 0; i < 2; i++) {
        if (up.pin[i]) cudaFreeHost(up.pin[i]);
        if (up.read[i]) cudaEventDestroy(up.read[i]);
    }
    cudaFree(staging);
    if (st) return st;
    GPT2__CU(cudaGetLastError());
    S->few_row = 1;
    S->ln_fold_fit = 1;
    S->att_stage = 1;
    if (m->dtype == GPT2_DTYPE_F16) gpt2__attn_stage_enable<__half>(S);
    else if (m->dtype == GPT2_DTYPE_BF16) gpt2__attn_stage_enable<__nv_bfloat16>(S);
    else gpt2__attn_stage_enable<float>(S);
    /* tensor-core decode attention: with the tiled prefill kernel (so sm_80+, F16/BF16, its own key stored by the
       kernel), head size 64, spans of 256 */
    if (S->flash && C / H == 64 && GPT2__SPAN_LEN == 256 && m->dtype != GPT2_DTYPE_F32)
        S->att_mma = m->dtype == GPT2_DTYPE_F16 ? gpt2__attn_mma_enable<__half>(S) : gpt2__attn_mma_enable<__nv_bfloat16>(S);
    if (S->att_mma) {
        if (m->dtype == GPT2_DTYPE_F16) gpt2__kv_maps<__half>(m, S);
        else gpt2__kv_maps<__nv_bfloat16>(m, S);
    }
    if (m->dtype != GPT2_DTYPE_F32)
        S->score_fused = m->dtype == GPT2_DTYPE_F16 ? gpt2__score_enable<__half>(m, S, wg) : gpt2__score_enable<__nv_bfloat16>(m, S, wg);
    if (m->dtype == GPT2_DTYPE_F16) { S->ln_fold = gpt2__ln_fold_enable<__half>(S); return gpt2__few_row_check<__half>(m, S); }
    if (m->dtype == GPT2_DTYPE_BF16) { S->ln_fold = gpt2__ln_fold_enable<__nv_bfloat16>(S); return gpt2__few_row_check<__nv_bfloat16>(m, S); }
    return gpt2__few_row_check<float>(m, S);
}

static gpt2_status gpt2__cuda_init(gpt2_model *m, const gpt2__slot *slots) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)gpt2__zalloc(sizeof *S);
    if (!S) return gpt2__fail(GPT2_ERR_OOM, "cannot allocate the CUDA backend state");
    m->cuda = S;
    gpt2_status st = gpt2__cuda_init_state(m, S, slots);
    if (st) {
        /* keep the message: freeing may touch the CUDA error state but not gpt2__error */
        gpt2__cuda_free(m);
        if (st == GPT2_ERR_DEVICE && strstr(gpt2_last_error(), "out of memory")) st = GPT2_ERR_OOM;
    }
    return st;
}

#endif /* GPT2__CUDA */

#endif /* GPT2_IMPLEMENTATION_DONE */
#endif /* GPT2_IMPLEMENTATION */

/* == [GPT2:LICENSE] == license ================================================================================== */

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
