/* fuzz_merges — the bytes are merges.txt (vocab.bpe when the input's length is odd), loaded by
   gpt2_tokenizer_load beside a fixed small vocabulary (tests/fuzz/data/vocab.json: the 256 byte
   tokens, the results of GPT-2's first 600 merges, <|endoftext|>). Merges naming unknown tokens
   must fail with a reason; a merge list that loads must encode a fixed text that round-trips. */
#include "fuzz.h"

static const char text[] =
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak. They're "
    "the 1st and 2nd of 3000; don't we'll \xC3\xA9t\xC3\xA9   \t\n \xE2\x80\x94\xF0\x9F\x98\x80\xFF";
static char *vocab;
static size_t vocab_len;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    vocab = fuzz_fixture("tests/fuzz/data/vocab.json", &vocab_len);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gpt2_tokenizer *tok = fuzz_load_tokenizer(size & 1, vocab, vocab_len, data, size);
    if (!tok) return 0;
    FUZZ_CHECK(tok->n_merges >= 0, "%d merges", tok->n_merges);
    int count;
    free(fuzz_encode_round_trip(tok, text, sizeof text - 1, &count));
    gpt2_tokenizer_free(tok);
    return 0;
}
