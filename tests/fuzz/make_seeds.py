#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora (tests/fuzz/corpus/NAME/) and the small tokenizer the merges
harness loads (tests/fuzz/data/vocab.json), from the repository's fixtures. Needs numpy only.

    python3 tests/fuzz/make_seeds.py        # rewrites the named seeds it made before

Seeds are small on purpose (the whole corpus stays under 3 MB): the micro model in every dtype and
key layout, the malformed fixtures made from it, every fixture's config.json, a tokenizer cut down
to GPT-2's first 600 merges, and text and id sequences that reach the tokenizer's corners.
The corpora also hold inputs the fuzzers found in long runs (named by their SHA-1, kept by
libFuzzer's -merge=1 for the coverage they add); this script leaves those alone.
"""
import json
import os
import struct

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FUZZ = os.path.join(ROOT, "tests", "fuzz")
N_MERGES = 600


def out(name, file, data):
    d = os.path.join(FUZZ, "corpus", name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, file), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))


def read(*rel):
    with open(os.path.join(ROOT, *rel), "rb") as f:
        return f.read()


# ---------------------------------------------------------------- safetensors


def st_parse(blob):
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    body = blob[8 + n:]
    meta = header.pop("__metadata__", None)
    tensors = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        dt = {"F32": np.float32, "F16": np.float16, "I64": np.int64}[e["dtype"]]
        tensors[name] = np.frombuffer(body[b:end], dtype=dt).reshape(e["shape"])
    return tensors, meta


def st_write(tensors, meta=None, dtype="F32", pad=True):
    """tensors: name -> float array; dtype F32, F16 or BF16 (round to nearest even)."""
    header, chunks, at = {}, [], 0
    if meta is not None:
        header["__metadata__"] = meta
    for name, a in tensors.items():
        a = np.asarray(a, dtype=np.float32)
        if dtype == "F32":
            raw = a.astype("<f4").tobytes()
        elif dtype == "F16":
            raw = a.astype("<f2").tobytes()
        else:
            u = a.astype("<f4").view("<u4").astype(np.uint64)
            raw = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [at, at + len(raw)]}
        chunks.append(raw)
        at += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(chunks)


def seeds_safetensors():
    micro = read("tests", "models", "micro_f32", "model.safetensors")
    out("safetensors", "micro_f32", micro)
    t, meta = st_parse(micro)
    out("safetensors", "micro_f16", st_write(t, meta, "F16"))
    out("safetensors", "micro_bf16", st_write(t, None, "BF16", pad=False))
    prefixed = {"transformer." + k: v for k, v in t.items()}
    prefixed["transformer.h.0.attn.bias"] = np.tril(np.ones((1, 1, 16, 16), np.float32))
    prefixed["transformer.h.0.attn.masked_bias"] = np.array(-1e4, np.float32)
    prefixed["lm_head.weight"] = t["wte.weight"]
    out("safetensors", "micro_prefixed_buffers", st_write(prefixed, {"format": "pt"}))
    # the same tensors in reverse order (data offsets no longer follow the names' order)
    out("safetensors", "micro_reversed", st_write(dict(reversed(list(t.items())))))
    # special values: NaN, inf, F16 subnormals
    odd = dict(t)
    w = odd["wte.weight"].copy()
    w[0, 0], w[1, 1], w[2, 2] = np.nan, np.inf, 6e-8
    odd["wte.weight"] = w
    out("safetensors", "micro_nan_inf_f16", st_write(odd, None, "F16"))
    bad = os.path.join(ROOT, "tests", "bad")
    for case in sorted(os.listdir(bad)):
        p = os.path.join(bad, case, "model.safetensors")
        if os.path.isfile(p) and not case.startswith("config_"):
            out("safetensors", "bad_" + case, read(p))
    out("safetensors", "empty", b"")
    out("safetensors", "header_only", struct.pack("<Q", 2) + b"{}")


# ---------------------------------------------------------------- config.json


def seeds_config():
    for base in ("models", "bad"):
        d = os.path.join(ROOT, "tests", base)
        for case in sorted(os.listdir(d)):
            p = os.path.join(d, case, "config.json")
            if os.path.isfile(p) and (base == "models" or case.startswith("config_")):
                out("config", base + "_" + case, read(p))
    out("config", "minimal", '{"n_layer":1,"n_head":2,"n_embd":16,"n_positions":16,"vocab_size":50}')
    out("config", "n_ctx_inner", '{"n_layer":1,"n_head":2,"n_embd":16,"n_ctx":16,"vocab_size":50,"n_inner":64,'
                                  '"layer_norm_epsilon":1e-5,"activation_function":"gelu_pytorch_tanh"}')
    out("config", "escapes", '{"n_\\u006cayer":1,"n_head":2.0,"n_embd":1.6e1,"n_positions":16,"vocab_size":50,'
                              '"x":[{"y":[true,false,null,"\\ud83d\\ude00\\n"]}],"scale_attn_by_inverse_layer_idx":false}')


# ---------------------------------------------------------------- tokenizer


def small_tokenizer():
    """GPT-2's byte tokens, the tokens of its first N_MERGES merges (ids 256 + rank, as in GPT-2)
    and <|endoftext|>: a consistent vocab.json + merges.txt of a few KB."""
    vocab = json.loads(read("weights", "vocab.json"))
    merges = read("weights", "merges.txt").decode("utf-8").split("\n")[1:N_MERGES + 1]
    small = {t: i for t, i in vocab.items() if i < 256 + N_MERGES}
    for line in merges:
        assert line.replace(" ", "", 1) in small, line
    small["<|endoftext|>"] = 256 + N_MERGES
    return small, merges


def seeds_tokenizer():
    small, merges = small_tokenizer()
    vocab_json = json.dumps(small, ensure_ascii=False)
    os.makedirs(os.path.join(FUZZ, "data"), exist_ok=True)
    with open(os.path.join(FUZZ, "data", "vocab.json"), "w", encoding="utf-8") as f:
        f.write(vocab_json)
    out("vocab", "small", vocab_json)
    out("vocab", "small_ascii_escaped", json.dumps(small, ensure_ascii=True, indent=1))
    bytes_only = {t: i for t, i in small.items() if i < 256}
    out("vocab", "bytes_only", json.dumps(bytes_only, ensure_ascii=False))
    out("vocab", "bytes_shuffled_ids", json.dumps({t: 255 - i for t, i in bytes_only.items()}, ensure_ascii=False))
    head = "#version: 0.2\n"
    out("merges", "small", head + "\n".join(merges) + "\n")
    out("merges", "small_crlf_no_version", "\r\n".join(merges[:200]))
    out("merges", "blank_lines", head + "\n\n".join(merges[:50]) + "\n\n   \n")
    out("merges", "version_only", head)
    out("merges", "unknown_token", head + "Ġ t\nzz q\n")

    texts = {
        "shakespeare": "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n",
        "contractions": "They're here; we'll see. I'd've 'S 'LL 'll'd' 're've 's",
        "numbers": "In 2026, 3.14159 and ½ and ٣٤ and 1,000,000 and Ⅻ.",
        "unicode": "Café naïve — 日本語のテキスト 🙂👍🏽 Ελληνικά עברית\u200b\u00a0\u3000end",
        "whitespace": "a  b   c\t\td\n\n\ne \r\n f  \n   ",
        "endoftext": "<|endoftext|>Hello<|endoftext|>",
    }
    for name, t in texts.items():
        out("encode", name, t)
    out("encode", "invalid_utf8", b"ok \xff\xfe \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x82 \xc3 end\x00\x00mid\x00")
    out("encode", "run_letters", b"\xff\xfe\xff\x01a")
    out("encode", "run_spaces_then_word", b"\xff\xfe\x10\x01 \x00\x04word")
    out("encode", "run_multibyte", b"\xff\xfe\x40\x04\xf0\x9f\x99\x82\x20\x03\xe6\x97\xa5")
    out("encode", "run_newlines", b"\xff\xfe\x30\x02\r\n")

    vocab = json.loads(read("weights", "vocab.json"))
    ids = [vocab[t] for t in ("First", "ĠCitizen", ":", "Ċ", "Ġ", "Ġé", "<|endoftext|>")]
    ids16 = b"".join(struct.pack("<H", i + 4) for i in ids)
    for mode in range(4):
        out("decode", "words_mode%d" % mode, bytes([mode, 5]) + ids16)
    out("decode", "edges", bytes([0, 0]) + b"".join(struct.pack("<H", i + 4) for i in (0, 255, 256, 50255, 50256)))
    out("decode", "out_of_range", bytes([2, 0]) + struct.pack("<HH", 3, 50261))
    out("decode", "raw_extremes", bytes([4, 0]) + struct.pack("<iii", 0, -2147483648, 2147483647))
    # an id sequence whose text is not valid UTF-8 on its own (half of a multi-byte character)
    out("decode", "split_char", bytes([0, 0]) + struct.pack("<HH", vocab["Ã"] + 4, vocab["©"] + 4))


def main():
    seeds_safetensors()
    seeds_config()
    seeds_tokenizer()


if __name__ == "__main__":
    main()
