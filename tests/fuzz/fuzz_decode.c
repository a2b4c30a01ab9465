/* fuzz_decode — gpt2_decode with GPT-2's own tokenizer (weights/) on arbitrary ids.

   Input: byte 0 picks the output buffer (bits 0-1: exactly the text's size, one byte short, one
   byte more, or a cap of byte 1; bit 2: ids as raw 32-bit integers instead of 16-bit ones mapped to
   [-4, n_vocab + 4)); the rest are the ids. An id outside the vocabulary must fail the call before
   anything is written; otherwise the bytes written must be the tokens' bytes, a NUL must follow
   exactly when the text is shorter than the buffer, nothing past the buffer is touched (ASan), and
   decode(encode(text)) must give the text back. */
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    fuzz_gpt2_tokenizer();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const gpt2_tokenizer *tok = fuzz_gpt2_tokenizer();
    if (size < 2) return 0;
    int mode = data[0], raw = mode & 4, width = raw ? 4 : 2;
    int n = (int)((size - 2) / (size_t)width);
    int *ids = (int *)malloc((size_t)n * sizeof(int) + 1);
    int valid = 1;
    size_t expect = 0;
    for (int i = 0; i < n; i++) {
        const uint8_t *p = data + 2 + (size_t)i * width;
        if (raw) ids[i] = (int)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        else ids[i] = (int)(((unsigned)p[0] | (unsigned)p[1] << 8) % (unsigned)(tok->n_vocab + 8)) - 4;
        if (ids[i] < 0 || ids[i] >= tok->n_vocab) valid = 0;
        else expect += tok->tok_off[ids[i] + 1] - tok->tok_off[ids[i]];
    }
    int total = gpt2_decode(tok, ids, n, NULL, 0);
    if (!valid) {
        FUZZ_CHECK(total == -1, "ids with one outside the vocabulary decoded to %d bytes", total);
        char canary[4] = { 'c', 'c', 'c', 'c' };
        FUZZ_CHECK(gpt2_decode(tok, ids, n, canary, sizeof canary) == -1 && !memcmp(canary, "cccc", 4),
                   "a failing decode wrote into the buffer");
        free(ids);
        return 0;
    }
    FUZZ_CHECK(total >= 0 && (size_t)total == expect, "decode sizes %d bytes, the tokens hold %zu", total, expect);
    size_t cap = (mode & 3) == 0 ? expect : (mode & 3) == 1 ? (expect ? expect - 1 : 0) : (mode & 3) == 2 ? expect + 1 : data[1];
    char *out = (char *)malloc(cap ? cap : 1);
    memset(out, 0xAA, cap);
    int got = gpt2_decode(tok, ids, n, cap ? out : NULL, cap);
    FUZZ_CHECK(got == total, "decode into %zu bytes returned %d, sizing said %d", cap, got, total);
    size_t at = 0;
    for (int i = 0; i < n && at < cap; i++) {
        const unsigned char *b = tok->bytes + tok->tok_off[ids[i]];
        size_t l = tok->tok_off[ids[i] + 1] - tok->tok_off[ids[i]];
        for (size_t k = 0; k < l && at < cap; k++, at++)
            FUZZ_CHECK((unsigned char)out[at] == b[k], "byte %zu is 0x%02X, token %d (position %d) has 0x%02X there",
                       at, (unsigned char)out[at], ids[i], i, b[k]);
    }
    if (expect < cap) FUZZ_CHECK(out[expect] == 0, "no NUL after %zu bytes in a %zu-byte buffer", expect, cap);
    for (size_t k = expect + 1; k < cap; k++) FUZZ_CHECK((unsigned char)out[k] == 0xAA, "byte %zu past the text was written", k);
    if (cap >= expect) {
        int count;
        free(fuzz_encode_round_trip(tok, out, expect, &count));
    }
    free(out);
    free(ids);
    return 0;
}
