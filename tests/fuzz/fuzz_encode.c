/* fuzz_encode — gpt2_encode with GPT-2's own tokenizer (weights/) on arbitrary bytes: invalid UTF-8,
   NULs, any mix of classes. Every encoding must round-trip through gpt2_decode byte for byte, the
   sizing and filling calls must agree, and a short buffer must get a prefix of the ids.

   Long runs: an input that begins with the two bytes FF FE is a recipe instead of text, records of
   [k][l][l bytes] meaning "those l bytes, (k + 1) * 16 times", the expansion cut at 16 KB; so a few
   bytes of input spell a 16 KB run of one character, of spaces, or of one multi-byte character
   (longer runs take the same paths, only slower). */
#include "fuzz.h"

#define FUZZ_EXPAND_MAX ((size_t)1 << 14)

/* the text a recipe spells, into out (room for FUZZ_EXPAND_MAX bytes); returns its length */
static size_t expand(const uint8_t *r, size_t n, char *out) {
    size_t len = 0, i = 2;
    while (i + 2 <= n && len < FUZZ_EXPAND_MAX) {
        size_t times = ((size_t)r[i] + 1) * 16, l = r[i + 1];
        i += 2;
        if (l > n - i) l = n - i;
        if (l == 0) break;
        for (size_t t = 0; t < times && len + l <= FUZZ_EXPAND_MAX; t++, len += l) memcpy(out + len, r + i, l);
        i += l;
    }
    return len;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    fuzz_gpt2_tokenizer();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const gpt2_tokenizer *tok = fuzz_gpt2_tokenizer();
    char *text;
    size_t len;
    if (size >= 2 && data[0] == 0xFF && data[1] == 0xFE) {
        text = (char *)malloc(FUZZ_EXPAND_MAX);
        len = expand(data, size, text);
    } else {
        text = (char *)malloc(size ? size : 1); /* a copy of exactly the input's size: ASan sees any over-read */
        memcpy(text, data, size);
        len = size;
    }
    int count;
    free(fuzz_encode_round_trip(tok, text, len, &count));
    free(text);
    return 0;
}
