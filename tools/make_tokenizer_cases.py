#!/usr/bin/env python3
"""Writes tests/tokenizer/cases.txt: texts with their GPT-2 token ids from two reference tokenizers.

Both references are built offline from the original release files (encoder.json + vocab.bpe):
    tiktoken    data_gym_to_mergeable_bpe_ranks + GPT-2's split pattern, encode_ordinary
    tokenizers  models.BPE.from_file + ByteLevel pre-tokenizer (add_prefix_space=False) + ByteLevel decoder
Every text case must get the same ids from both and decode back to its bytes in both, or the
script fails. Invalid UTF-8 has no reference (both take str); those cases carry the ids of
gpt2.cuh's documented rule, each byte that does not begin a well-formed UTF-8 sequence is an
"other" character (neither letter, number nor whitespace), computed here by mapping those bytes to
lone surrogates (category Cs, hence "other") for the split and BPE-merging each piece with tiktoken.

    pip install tiktoken tokenizers regex
    python3 tools/make_tokenizer_cases.py [--tokenizer-dir ../shared/gpt2-tokenizer] [--out tests/tokenizer/cases.txt]

Output, one case per line ('#' lines are comments):
    text  <UTF-8 bytes in hex, '-' when empty> <id> <id> ...
    bytes <bytes in hex, not valid UTF-8> <id> <id> ...
"""
import argparse
import os
import random
import sys

import regex
import tiktoken
import tokenizers
from tiktoken.load import data_gym_to_mergeable_bpe_ranks
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

PROSE = [
    "",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "To be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer\n"
    "The slings and arrows of outrageous fortune,\nOr to take arms against a sea of troubles",
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n",
    "GPT-2 is a large transformer-based language model with 1.5 billion parameters, trained on a "
    "dataset of 8 million web pages.",
    "a", "A", " ", "  ", "\n", ".", "'", "0", "x y z",
    "Mr. O'Neil's dog ate the U.S.A.'s cake at 5:30 p.m. (approx.) — really!",
    "e.g., i.e., etc.; vs. w/ w/o @user #hashtag $100 50% 3*4=12 a&b x|y ~tilde `code` ^caret",
    "\"Quoted,\" she said. 'Single,' he replied. «Guillemets» „Low-9“ ‘curly’ “double”",
    "Ellipsis… em—dash en–dash minus−sign bullet• middle·dot §section ¶pilcrow †dagger",
    "https://example.com/path?query=1&x=y#frag user@example.org ftp://files.example.net/a_b-c.txt",
    "# Heading\n\n* item one\n* item two\n\n1. first\n2. second\n\n> quote\n\n**bold** _italic_ [link](http://x.y)",
    "| col A | col B |\n|-------|-------|\n|   1   |   2   |\n",
    "CamelCaseIdentifier snake_case_name kebab-case-name SCREAMING_SNAKE dot.separated.name",
    "ALL CAPS SENTENCE WITH SHOUTING!!! and lowercase whisper...",
    "Ünïcödé wörds: naïve café résumé façade coöperate jalapeño Øresund Ångström straße",
]

CONTRACTIONS = [
    "it's", "It's", "IT'S", "it'S", "we'll", "WE'LL", "We'Ll", "I'm", "I'M", "I'd", "I'D", "you're", "YOU'RE",
    "they've", "THEY'VE", "don't", "DON'T", "can't", "won't", "shouldn't've", "y'all'd've",
    "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D",
    "''s", "'''", "' s", " 's", " 'll", "x'sy", "'sss", "'re'll've'd", "'ll'll'll", "rock'n'roll",
    "it’s", "IT’S", "we’ll", "don’t", "it‘s", "it`s", "it´s", "itʼs", "it＇s",
    "'x", "'", "''", "'a'b'c'", "the '90s", "'Tis the season", "o'clock", "ma'am", "'re 's",
    "the students' books", "James' car", "James's car", "'s'", "He said 'it's fine.'",
    "l'homme d'affaires qu'il aujourd'hui", "'ll\n'll", "'\u00a0s",
]

MULTILINGUAL = [
    "中文分词测试：今天天气很好，我们去公园散步吧。",
    "日本語のテキスト、ひらがなとカタカナと漢字を混ぜます。東京タワー！",
    "한국어 텍스트입니다. 안녕하세요, 만나서 반갑습니다!",
    "العربية: مرحبا بالعالم، كيف حالك اليوم؟",
    "الْعَرَبِيَّةُ مع الحركات وَالتَّشْكِيل",
    "हिन्दी में एक वाक्य। नमस्ते दुनिया! क्षत्रिय ज्ञान",
    "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ สวัสดีครับ",
    "Русский текст: Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Ελληνικά: Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Άλφα, Ώμέγα, ΐ ΰ",
    "עברית: שָׁלוֹם עוֹלָם, מה שלומך?",
    "Tiếng Việt: Tôi có thể ăn thủy tinh mà không hại gì.",
    "Türkçe: Pijamalı hasta yağız şoföre çabucak güvendi. İstanbul ı İ",
    "ქართული ენა, Հայերեն լեզու, አማርኛ ቋንቋ",
    "தமிழ் மொழி, বাংলা ভাষা, ਪੰਜਾਬੀ, ગુજરાતી, తెలుగు, ಕನ್ನಡ, മലയാളം, සිංහල",
    "Mixed: English中文日本語한국어العربيةहिन्दीРусский",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 𝐛𝐨𝐥𝐝 𝑖𝑡𝑎𝑙𝑖𝑐",
    "ǅungla ǈ ǋ ʰʲʷ ª º ˈstress ˌsecondary",
    "ꦗꦮ ᠮᠣᠩᠭᠣᠯ ᏣᎳᎩ ᐃᓄᒃᑎᑐᑦ ⵜⴰⵎⴰⵣⵉⵖⵜ",
    "ɪŋɡlɪʃ fəˈnɛtɪks: ʃ ʒ θ ð ŋ",
    "ⅰⅱⅲ Ⅻ ↀ 〇〡〢",
    "漢字の「かぎかっこ」と『二重かぎ』、（全角括弧）",
    "ｆｕｌｌｗｉｄｔｈ ＡＢＣ ｶﾀｶﾅ",
]

COMBINING = [
    "café", "cafe\u0301", "e\u0301\u0302\u0303", "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319a\u0324l\u0316g\u0317o",
    "\u0301", " \u0301", "a \u0301b", "n\u0303", "\u0915\u094d\u0937", "ñ vs n\u0303", "Å vs A\u030a vs Å",
    "a\u0308\u0308\u0308\u0308", "x\u20dd", "1\u20e3", "\u05e9\u05c1\u05b8", "e\u0301'e\u0301",
    "ﬁ ﬂ ﬀ ligatures", "a\u200db", "a\u200cb", "a\u2060b", "a\ufeffb", "\ufeffBOM at start", "soft\u00adhyphen",
]

EMOJI = [
    "😀", "😀😃😄", "Hello 👋 world 🌍!", "👍🏽", "👍🏿👍🏻", "👨‍👩‍👧‍👦", "👩‍💻 coding", "🏳️‍🌈", "🏴‍☠️",
    "🇺🇸🇯🇵🇩🇪", "flag 🇫🇷 and 🇧🇷", "1️⃣2️⃣#️⃣", "❤️ ♥ ❤", "☕️", "🤖🧠💡", "emoji🙂inside🙂words",
    "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "🧑🏾‍🤝‍🧑🏼", "✨ sparkle ✨", "😂😂😂😂😂😂😂😂😂😂",
]

DIGITS = [
    "0123456789", "12345678901234567890", "3.14159265358979", "1,000,000", "10,000.50", "-42", "+7", "1e10",
    "2^32 = 4294967296", "0xFF 0b1010 0o777", "v1.2.3-rc.4", "2024-01-15T12:34:56Z", "+1 (555) 123-4567",
    "٠١٢٣٤٥٦٧٨٩", "۰۱۲۳۴۵۶۷۸۹", "०१२३४५६७८९", "০১২৩৪৫৬৭৮৯", "๐๑๒๓๔๕๖๗๘๙", "０１２３４５６７８９",
    "x² + y³ = z⁴", "H₂O CO₂", "½ ¼ ¾ ⅓ ⅞", "①②③ ⑴⑵ ⒈⒉", "𝟎𝟏𝟐 𝟘𝟙𝟚", "四五六 十 百", "Ⅳ Ⅸ ⅻ",
    "abc123def456", "123abc", " 123 456 ", "1 2 3", "1\t2\n3", "99%", "$19.99", "€5", "£3.50", "¥1000",
    "٣ apples and ٤ oranges", "१० rupees", "page ２３", "10¹⁰", "1/2 + 1/3", "1,234,567.890", "007",
]

CODE = [
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "import numpy as np\nx = np.zeros((3, 4), dtype=np.float32)\nprint(f\"{x.shape=}\")\n",
    "class Foo:\n\tdef __init__(self):\n\t\tself.x = 1  # tab-indented\n",
    "#include <stdio.h>\n\nint main(void) {\n    printf(\"Hello, %s!\\n\", \"world\");\n    return 0;\n}\n",
    "for (int i = 0; i < n; ++i) { a[i] += b[i] * c[i]; }",
    "const add = (a, b) => a + b;\nconsole.log(`sum: ${add(1, 2)}`);\n",
    "fn main() {\n    let v: Vec<i32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}\n",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n",
    "<!DOCTYPE html>\n<html lang=\"en\">\n  <body><p class=\"x\">Hi &amp; bye</p></body>\n</html>\n",
    "{\"name\": \"gpt2\", \"n_layer\": 12, \"ok\": true, \"list\": [1, 2.5, null]}",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE 'A%' ORDER BY id DESC;",
    "#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do echo \"$f\"; done 2>/dev/null | wc -l\n",
    "\\begin{equation}\n  E = mc^2 \\quad \\int_0^\\infty e^{-x} dx = 1\n\\end{equation}",
    "^(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+)@\\w+\\.[a-z]{2,}$",
    "all: build\n\nbuild:\n\tgcc -O2 -Wall -o app main.c\n",
    "x=1;y=2;z=x+y;if(z>2){z--;}else{z++;}",
    "    \n    \n\tindented blank lines\n",
    "// comment\n/* block\n   comment */\n",
    "a->b, c::d, e=>f, g<=h, i!=j, k===l, m&&n, o||p, q<<=r, s>>>t",
    "print('it''s')  # SQL-style quotes",
    "std::vector<std::pair<int, std::string>> v{{1, \"one\"}};",
]

WHITESPACE = [
    "a  b", "a   b", "a    b", "a\tb", "a\t\tb", "a \tb", "a\t b", "a\nb", "a\n\nb", "a \nb", "a\n b", "a\r\nb",
    "a\r\n\r\nb", "a\rb", "line1\nline2\n", "trailing spaces   ", "trailing tab\t", "trailing newline\n",
    "\n\n\n", "   leading spaces", "\tleading tab", "\n\nleading newlines", "   ", "\t\t\t", " \t \t ",
    " \n \n ", "\r\n", "\r\n\r\n", "a \u00a0b", "a\u00a0b", "a\u00a0\u00a0b", "\u00a0", "non\u00a0breaking\u00a0space",
    "em\u2003space", "thin\u2009space", "ideographic\u3000space", "narrow\u202fnbsp", "line\u2028separator",
    "para\u2029separator", "next\u0085line", "ogham\u1680space", "mongolian\u180evowel", "zero\u200bwidth",
    "medium\u205fmath", "hair\u200aspace", "a\u000bb\u000cc", " a", "  a", "   a", " .", "  .", " 1", "  1",
    "a ", "a  ", ". ", "x \u00a0 y", "\u3000\u3000indent", "end\u00a0", "a \u2003 b", "a\n\u00a0b", " \u0301",
    "word\n\n\n\nword", "word \n \n word", "\t\n\t\n", "x\t\t\ty", "tab\tseparated\tvalues\t1\t2\t3",
]

SPECIAL = [
    "<|endoftext|>", "Hello<|endoftext|>World", "<|endoftext|><|endoftext|>", " <|endoftext|> ",
    "<|endoftext|>\n", "<|startoftext|>", "<|im_start|>user\nhi<|im_end|>", "<s></s>[CLS][SEP]<unk>",
    "endoftext", "<|", "|>",
]

SYMBOLS = [
    "∑∫√∞≈≠≤≥±×÷", "→ ← ↑ ↓ ⇒ ⇔", "€£¥₹₽₿¢", "©®™℠", "♠♣♥♦", "☺☻", "░▒▓█", "┌─┐│└┘",
    "\x00", "\x01\x02\x03", "\x7f", "\x1b[31mred\x1b[0m", "bell\x07", "a\x00b", "tab\x08backspace",
    "\ufffd", "replacement\ufffdchar", "\ue000\uf8ff private use", "\U000f0000\U0010fffd", "\ufdd0\ufffe\uffff",
    "\u0378\u0379 unassigned", "\U000e0001\U000e0041 tags", "\U0001f9ff\U0001fa70", "\u2e80\u2fd5", "\U00020000\U0002a6d6",
]

NEW_UNICODE = [
    # letters and digits added in Unicode 15.0 / 15.1 / 16.0: letters and numbers to both references
    "a\U00011f04\U00011f05 \U00011f50\U00011f51",           # Kawi (15.0)
    "\U0001e4d0\U0001e4d1 \U0001e4f0\U0001e4f1",            # Nag Mundari (15.0)
    "x\U00031350\U0002ebf0y",                              # CJK Extension H (15.0), I (15.1)
    "\U000105c0\U000105c1 \U00010d4a\U00010d4b \U00010d40\U00010d41",  # Todhri, Garay letters, Garay digits (16.0)
    "\U00011bc0\U00011bc1 \U00011bf0\U00011bf1 \U0001ccf0\U0001ccf1",  # Sunuwar letters and digits, outlined digits (16.0)
    # added in Unicode 17.0: not letters or numbers to either reference (Unicode 16 tables)
    "a\U00010940b \U00011db0 \U00011de0\U00011de1 \U000323b0",
]


def long_cases():
    return [
        "a" * 1000, "A" * 257, " " * 500, "\n" * 300, "\t" * 100, "ab" * 500, "abc " * 200, "! " * 150,
        "pneumonoultramicroscopicsilicovolcanoconiosis", "Supercalifragilisticexpialidocious" * 5,
        "Rindfleischetikettierungsüberwachungsaufgabenübertragungsgesetz",
        "!" * 200, "=" * 80, "-" * 100, "." * 64, "🙂" * 100, "哈" * 300, "ab1" * 100, "9" * 400,
        "a" * 30 + " " * 30 + "b" * 30, "x " * 300, "aaaaaaaaaa bbbbbbbbbb " * 20, "😀a" * 50,
        "\u00a0" * 50, " \u00a0" * 30, "'s" * 100, "word " * 100 + "\n", "ﷺ" * 20, "Ꭰ" * 40,
    ]


def random_cases(rng, n):
    """Random mixes of the classes the pre-tokenizer separates, to probe its boundaries."""
    pools = [
        list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"), list("0123456789"),
        list(" " * 8 + "\t\n\r"), list(".,;:!?-_()[]{}<>/\\|@#$%^&*+=~`\"'"),
        ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "’s"],
        list("中文字漢字かなカナ한국어"), list("αβγδεζηθабвгдеж"), list("ابتثجحخدذرزسشصضطظعغفقكلمنهوي"),
        list("कखगघङचछजझञ्ािीुूेैोौं"), list("กขคงจฉชซญดตถทนบปผพฟภมยรลวศษสหอฮัิีึืุู่้๊๋"),
        ["\u0301", "\u0300", "\u0308", "\u0327", "\u20dd", "\u200d", "\u200b", "\ufe0f"],
        ["😀", "👍", "🏽", "🇺", "🇸", "👨‍👩‍👧", "❤", "🎉"],
        ["\u00a0", "\u2003", "\u3000", "\u2009", "\u202f", "\u2028", "\u0085", "\u1680"],
        list("٠١٢٣۴۵०१२৩๔５６²³½⅓①Ⅻ"), list("€£¥©®™∑∞→★♠"),
        [chr(cp) for cp in (0x00, 0x1b, 0x7f, 0xad, 0xfffd, 0xe000, 0x10ffff, 0x1f600)],
    ]
    out = []
    for _ in range(n):
        k = rng.randint(1, 40)
        chosen = rng.sample(range(len(pools)), rng.randint(1, 5))
        out.append("".join(rng.choice(pools[rng.choice(chosen)]) for _ in range(k)))
    return out


def random_code_points(rng, n):
    """Random scalar values from every plane in use, to sample the Unicode tables widely."""
    out = []
    for _ in range(n):
        s = []
        for _ in range(rng.randint(1, 12)):
            plane = rng.choice([0, 0, 0, 1, 2, 3, 14])
            cp = (plane << 16) | rng.randrange(0x10000)
            if not 0xD800 <= cp <= 0xDFFF:
                s.append(chr(cp))
            if rng.random() < 0.3:
                s.append(rng.choice([" ", "a", "1", "\n", "  "]))
        out.append("".join(s))
    return out


INVALID = [
    b"\xff", b"\xfe\xff", b"\x80", b"\x80\x80\x80", b"\xbf", b"\xc0\xaf", b"\xc1\xbf", b"\xe0\x80\xaf",
    b"\xe0\x9f\xbf", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf0\x80\x80\xaf", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80",
    b"\xf8\x88\x80\x80\x80", b"\xfc\x84\x80\x80\x80\x80", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xe2\x82a",
    b"\xe2\x82\xe2\x82\xac", b"hello \xff world", b"it\xe2\x80s", b"'\xffs", b" \xff", b"\xff ", b"\xff\xff  \xff",
    b"abc\xc3", b"\xc3(", b"\xa9\xc3", b"caf\xe9", b"na\xefve \xe9t\xe9", b"\xe4\xb8\xad\xe6\x96", b"\x00\xff\x00",
    b"123\xff456", b"word\xffword", b"\xf0\x9f\x98\x80\xf0\x9f\x98", b"\xef\xbb\xbf\xff", b"\n\xff\n", b"\t\x80 x",
    b"\xed\xa0\xbd\xed\xb8\x80", b"\xc0\x80", b"\xe0\x80\x80", b"'\x80ll", b"\xce\xb1\xce", b" \xce\xb1\xce x",
    bytes(range(256)), bytes(range(255, -1, -1)), b"\x80" * 100, b"\xff" * 50 + b"a" * 50,
]


def invalid_random(rng, n):
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 10)):
            r = rng.random()
            if r < 0.4:
                parts.append(bytes(rng.randrange(256) for _ in range(rng.randint(1, 4))))
            elif r < 0.7:
                parts.append(rng.choice(["é", "中", "😀", "\u00a0", "x", " "]).encode()[:rng.randint(1, 3)])
            else:
                parts.append(rng.choice([b"hello", b" ", b"  ", b"\n", b"'s", b"42", b"!!"]))
        b = b"".join(parts)
        try:
            b.decode("utf-8")
        except UnicodeDecodeError:
            out.append(b)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer-dir", default="../shared/gpt2-tokenizer")
    ap.add_argument("--out", default="tests/tokenizer/cases.txt")
    args = ap.parse_args()
    encoder_json = os.path.join(args.tokenizer_dir, "encoder.json")
    vocab_bpe = os.path.join(args.tokenizer_dir, "vocab.bpe")

    ranks = data_gym_to_mergeable_bpe_ranks(vocab_bpe_file=vocab_bpe, encoder_json_file=encoder_json)
    tik = tiktoken.Encoding("gpt2-offline", pat_str=PATTERN, mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": 50256})
    hf = Tokenizer(models.BPE.from_file(encoder_json, vocab_bpe))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()

    rng = random.Random(20240607)
    texts = (PROSE + CONTRACTIONS + MULTILINGUAL + COMBINING + EMOJI + DIGITS + CODE + WHITESPACE + SPECIAL
             + SYMBOLS + NEW_UNICODE + long_cases() + random_cases(rng, 150) + random_code_points(rng, 60))
    lines = [
        "# GPT-2 tokenizer cases, written by tools/make_tokenizer_cases.py: do not edit.",
        f"# text: ids from tiktoken {tiktoken.__version__} (encode_ordinary) and HF tokenizers {tokenizers.__version__}, "
        "which agree on every one.",
        "# bytes: invalid UTF-8, ids by gpt2.cuh's rule (each byte that begins no well-formed UTF-8 sequence is an",
        "#        \"other\" character), computed from the split pattern and tiktoken's BPE.",
        "# <kind> <bytes in hex, '-' when empty> <id> ...",
    ]
    seen = set()
    n_text = 0
    for t in texts:
        if t in seen:
            continue
        seen.add(t)
        a = tik.encode_ordinary(t)
        b = hf.encode(t).ids
        if a != b:
            sys.exit(f"tiktoken and tokenizers disagree on {t!r}:\n  {a}\n  {b}")
        if tik.decode_bytes(a) != t.encode() or (t and hf.decode(b) != t):
            sys.exit(f"decoding does not give back {t!r}")
        lines.append(f"text {t.encode().hex() or '-'} {' '.join(map(str, a))}".rstrip())
        n_text += 1

    split = regex.compile(PATTERN)
    n_bytes = 0
    for raw in INVALID + invalid_random(rng, 80):
        try:
            raw.decode("utf-8")
            sys.exit(f"{raw!r} is valid UTF-8: it belongs with the text cases")
        except UnicodeDecodeError:
            pass
        s = raw.decode("utf-8", errors="surrogateescape")  # invalid bytes -> U+DC80..U+DCFF, class Cs
        ids = []
        for piece in split.findall(s):
            ids += tik._encode_single_piece(piece.encode("utf-8", errors="surrogateescape"))
        if tik.decode_bytes(ids) != raw:
            sys.exit(f"{raw!r}: the pieces do not cover the bytes")
        lines.append(f"bytes {raw.hex()} {' '.join(map(str, ids))}")
        n_bytes += 1

    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{args.out}: {n_text} text cases (tiktoken == tokenizers on all), {n_bytes} invalid UTF-8 cases")


if __name__ == "__main__":
    main()
