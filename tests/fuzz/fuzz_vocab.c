/* fuzz_vocab — the bytes are vocab.json (encoder.json when the input's length is odd), loaded by
   gpt2_tokenizer_load from a directory whose merges file holds only its version line, so whatever
   fails or passes is the vocabulary's doing. A vocabulary that loads must have 256 byte tokens,
   decode every id, and encode a fixed text that round-trips. */
#include "fuzz.h"

static const char text[] = "Hello, world! It's 2026: caf\xC3\xA9 \xE2\x80\x94 \xF0\x9F\x98\x80 \n\n   x\t\x00\xFF\xC3";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gpt2_tokenizer *tok = fuzz_load_tokenizer(size & 1, data, size, "#version: 0.2\n", 14);
    if (!tok) return 0;
    FUZZ_CHECK(tok->n_vocab >= 256, "a byte-level vocabulary of %d tokens loaded", tok->n_vocab);
    for (int id = 0; id < tok->n_vocab; id++) {
        char buf[8];
        int n = gpt2_decode(tok, &id, 1, buf, sizeof buf);
        FUZZ_CHECK(n >= 1, "id %d decodes to %d bytes", id, n);
    }
    int count;
    free(fuzz_encode_round_trip(tok, text, sizeof text - 1, &count));
    gpt2_tokenizer_free(tok);
    return 0;
}
