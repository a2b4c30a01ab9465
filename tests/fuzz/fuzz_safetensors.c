/* fuzz_safetensors — the bytes are model.safetensors for a fixed small config (the micro fixture's
   shapes: 1 layer, 2 heads, n_embd 16, n_ctx 16, vocab 50), loaded through gpt2__load_memory on the
   CPU backend with max_batch 1. The header length, the JSON header, every tensor entry (name, dtype,
   shape, data_offsets) and the data section are under the fuzzer's control. A file that loads is run. */
#include "fuzz.h"

static const char config[] =
    "{\"n_layer\": 1, \"n_head\": 2, \"n_embd\": 16, \"n_positions\": 16, \"vocab_size\": 50}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gpt2_options opt = gpt2_default_options();
    opt.backend = GPT2_BACKEND_CPU;
    opt.max_batch = 1;
    gpt2_model *m = NULL;
    gpt2__error[0] = 0;
    gpt2_status st = gpt2__load_memory(&m, config, sizeof config - 1, "config.json", data, size, "model.safetensors", &opt);
    if (st != GPT2_OK) {
        FUZZ_CHECK(m == NULL, "a failed load (status %d) returned a model", (int)st);
        FUZZ_CHECK(gpt2_last_error()[0], "status %d without a message", (int)st);
        return 0;
    }
    FUZZ_CHECK(gpt2_model_max_batch(m) == 1, "max_batch %d, asked for 1", gpt2_model_max_batch(m));
    fuzz_run_model(m);
    gpt2_free(m);
    return 0;
}
