/* fuzz_config — the bytes are config.json: parsed by gpt2__parse_config (a config that parses must
   be in range), then loaded through gpt2__load_memory with the micro fixture's model.safetensors
   (CPU backend, max_batch 1). Configs describing any other shape must fail with a reason; one that
   matches loads and is run. */
#include "fuzz.h"

static char *weights;
static size_t weights_len;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    weights = fuzz_fixture("tests/models/micro_f32/model.safetensors", &weights_len);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gpt2_config c;
    int n_inner = 0;
    gpt2__arch arch;
    if (gpt2__parse_config((const char *)data, size, "config.json", &c, &n_inner, &arch) == GPT2_OK) {
        FUZZ_CHECK(c.n_layer >= 1 && c.n_head >= 1 && c.n_embd >= 1 && c.n_ctx >= 1 && c.n_vocab >= 1 && n_inner >= 1,
                   "a config parsed with a size below 1: L%d H%d C%d P%d V%d F%d",
                   c.n_layer, c.n_head, c.n_embd, c.n_ctx, c.n_vocab, n_inner);
        FUZZ_CHECK(c.n_embd % c.n_head == 0, "n_embd %d is not a multiple of n_head %d", c.n_embd, c.n_head);
        FUZZ_CHECK(c.ln_eps > 0.0f && c.ln_eps < 1.0f, "layer_norm_epsilon %g", (double)c.ln_eps);
    }
    gpt2_options opt = gpt2_default_options();
    opt.backend = GPT2_BACKEND_CPU;
    opt.max_batch = 1;
    gpt2_model *m = NULL;
    gpt2__error[0] = 0;
    gpt2_status st = gpt2__load_memory(&m, (const char *)data, size, "config.json",
                                       (const unsigned char *)weights, weights_len, "model.safetensors", &opt);
    if (st != GPT2_OK) {
        FUZZ_CHECK(m == NULL, "a failed load (status %d) returned a model", (int)st);
        FUZZ_CHECK(gpt2_last_error()[0], "status %d without a message", (int)st);
        return 0;
    }
    fuzz_run_model(m);
    gpt2_free(m);
    return 0;
}
