/* fuzz_pytorch — the bytes are pytorch_model.bin (PyTorch's zip format, read by the restricted unpickler) for a
   fixed tiny config (tests/ckpt's: 1 layer, 2 heads, n_embd 8, n_ctx 8, vocab 16), loaded through
   gpt2__load_ckpt on the CPU backend with max_batch 1. The zip's directory and local headers, data.pkl and the
   storages are under the fuzzer's control. A file that loads is run. */
#include "fuzz.h"

static const char config[] =
    "{\"n_layer\": 1, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 8, \"vocab_size\": 16}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gpt2_options opt = gpt2_default_options();
    opt.backend = GPT2_BACKEND_CPU;
    opt.max_batch = 1;
    gpt2_model *m = NULL;
    gpt2__ckpt ck;
    gpt2__error[0] = 0;
    gpt2_status st = gpt2__ckpt_memory(&ck, data, size, "pytorch_model.bin", 'P');
    if (!st) st = gpt2__load_ckpt(&m, config, sizeof config - 1, "config.json", &ck, &opt);
    gpt2__ckpt_close(&ck);
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
