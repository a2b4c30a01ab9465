/* fuzz_batch — the bytes are a demo --batch-file: prompt lines, or JSON Lines with the generation keys ("stop",
   "logit_bias", "logprobs", the penalties, ...). demo.cu's reader (demo_make_work) takes them with GPT-2's tokenizer
   (weights/), a context of 256 tokens and options that set every list (--stop, --logit-bias, --logprobs), so lines that
   replace them run too. A file it takes gives requests that gpt2_generate's own checks take (run on a stub model of
   GPT-2's vocabulary: nothing is generated); one it refuses says why. */
#include "fuzz.h"
#define DEMO_NO_MAIN
#pragma clang diagnostic ignored "-Wunused-function" /* the demo's main-side functions */
#include "../../demo.cu"

static demo_args args;
static gpt2_model *stub;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    char *opts[] = {(char *)"demo", (char *)"--batch-file", (char *)"fuzz.jsonl", (char *)"--stop", (char *)"x\\n",
                    (char *)"--logit-bias", (char *)"5:-inf", (char *)"--logprobs", (char *)"2", (char *)"-n", (char *)"8"};
    if (!demo_parse_args((int)(sizeof opts / sizeof opts[0]), opts, &args)) { fprintf(stderr, "options: %s\n", demo_error); exit(2); }
    stub = (gpt2_model *)calloc(1, sizeof *stub);
    stub->cfg.n_vocab = 50257;
    stub->backend = GPT2_BACKEND_CPU;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    enum { MAX_SEQ = 256 };
    demo_work w;
    demo_error[0] = 0;
    if (!demo_make_work(&w, &args, fuzz_gpt2_tokenizer(), MAX_SEQ, stub->cfg.n_vocab, (const char *)data, size)) {
        FUZZ_CHECK(demo_error[0], "a refused batch file without a message");
        demo_work_free(&w);
        return 0;
    }
    FUZZ_CHECK(w.n >= 1, "a batch file taken with %d requests", w.n);
    for (int i = 0; i < w.n; i++) {
        gpt2_request *r = &w.reqs[i];
        FUZZ_CHECK(r->prompt_len >= 1 && r->max_new_tokens >= 0 && r->prompt_len + r->max_new_tokens <= MAX_SEQ,
                   "request %d: prompt_len %d + max_new_tokens %d (context %d)", i, r->prompt_len, r->max_new_tokens, MAX_SEQ);
        FUZZ_CHECK(gpt2__check_tokens(stub, r->prompt, (size_t)r->prompt_len, "prompt") == GPT2_OK, "request %d: %s", i, gpt2_last_error());
        FUZZ_CHECK(gpt2__check_controls(stub, r, i) == GPT2_OK, "request %d taken by the demo, refused by the library: %s", i,
                   gpt2_last_error());
        FUZZ_CHECK(r->max_new_tokens == 0 || r->out, "request %d has no output room", i);
    }
    demo_work_free(&w);
    return 0;
}
