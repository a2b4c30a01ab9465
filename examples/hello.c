#define GPT2_IMPLEMENTATION /* in exactly one file */
#include "gpt2.cuh"
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "weights", *text = argc > 2 ? argv[2] : "ROMEO:";
    gpt2_model *model;
    gpt2_tokenizer *tok;
    int prompt[256], out[64];
    char buf[4096];
    gpt2_request req = {0};
    if (gpt2_load(&model, dir, NULL) || gpt2_tokenizer_load(&tok, dir)) return fprintf(stderr, "%s\n", gpt2_last_error()), 1;
    req.prompt = prompt;
    req.prompt_len = gpt2_encode(tok, text, strlen(text), prompt, 256);
    if (req.prompt_len < 1 || req.prompt_len > 256) return fprintf(stderr, "prompt: 1 to 256 tokens\n"), 1;
    req.max_new_tokens = 64; req.stop_token = 50256; req.out = out;
    req.sampling.temperature = 0.8f; req.sampling.top_k = 40; req.sampling.seed = 42;
    if (gpt2_generate(model, &req, 1, NULL, NULL)) return fprintf(stderr, "%s\n", gpt2_last_error()), 1;
    gpt2_decode(tok, out, req.n_out, buf, sizeof buf);
    printf("%s%s\n", text, buf);
    gpt2_tokenizer_free(tok);
    gpt2_free(model);
    return 0;
}
