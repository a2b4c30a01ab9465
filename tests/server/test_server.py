"""./server under the official openai client (and raw HTTP where a status or header is the point).

Run by tests/server/run.sh, which starts three servers on the embedded model (CPU backend) and passes their
addresses: SERVER_URL (the main one, with --api-key SERVER_KEY), SMALL_URL (--max-batch 1 --max-queue 0
--max-body 4096: the queue and the body limits) and SCORER_URL (--max-batch 2 --score-slots 2: scoring on an
instance of its own). Prints `server tests: N passed, N failed`."""
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse

import openai

URL = os.environ["SERVER_URL"]
SMALL = os.environ["SMALL_URL"]
SCORER = os.environ["SCORER_URL"]
KEY = os.environ["SERVER_KEY"]
ROOT = os.environ.get("ROOT", ".")
MODEL = "weights"
client = openai.OpenAI(base_url=URL + "/v1", api_key=KEY, max_retries=0, timeout=30)
TESTS = []


def test(f):
    TESTS.append(f)
    return f


def raw(url, method, path, body=None, headers=None, stream=False):
    """(status, headers, body bytes) of one plain HTTP request; with stream, the open response instead"""
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    h = {"Authorization": "Bearer " + KEY}
    if body is not None and not isinstance(body, (bytes, str)):
        body, h["Content-Type"] = json.dumps(body), "application/json"
    h.update(headers or {})
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    if stream:
        return c, r
    data = r.read()
    c.close()
    return r.status, dict(r.getheaders()), data


def complete(**kw):
    extra = {k: kw.pop(k) for k in list(kw) if k in ("top_k", "ignore_eos", "min_p", "typical_p", "repetition_penalty",
                                                      "no_repeat_ngram_size", "min_tokens")}
    return client.completions.create(model=MODEL, extra_body=extra or None, **kw)


def stream_text(**kw):
    """the texts of a streamed completion by choice index, and each choice's finish_reason"""
    texts, finish = {}, {}
    for ch in complete(stream=True, **kw):
        for c in ch.choices:
            texts[c.index] = texts.get(c.index, "") + c.text
            if c.finish_reason:
                finish[c.index] = c.finish_reason
    return texts, finish


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def demo(*args):
    return subprocess.run([os.path.join(ROOT, "demo"), "--backend", "cpu", *args], capture_output=True, text=True,
                          check=True, timeout=60).stdout


@test
def models_lists_the_directory_name():
    ids = [m.id for m in client.models.list().data]
    check(ids == [MODEL], f"models {ids}, expected [{MODEL!r}]")


@test
def completion_has_openai_shape_and_usage():
    r = complete(prompt="ROMEO:", max_tokens=12, temperature=0, ignore_eos=True)
    check(r.object == "text_completion" and len(r.choices) == 1, f"object {r.object}, {len(r.choices)} choices")
    check(r.choices[0].finish_reason == "length", f"finish_reason {r.choices[0].finish_reason}")
    check(r.usage.prompt_tokens == 3 and r.usage.completion_tokens == 12 and r.usage.total_tokens == 15, f"usage {r.usage}")
    check(len(r.choices[0].text) > 0, "empty text")


@test
def seeded_sampling_equals_demo():
    for t, k, seed in ((0.8, 40, 7), (1.0, 0, 3), (0.0, 0, 1)):
        out = demo("--temperature", str(t), "--top-k", str(k), "--seed", str(seed), "-n", "24", "ROMEO:")
        want = out[len("ROMEO:"):-1]
        got = complete(prompt="ROMEO:", max_tokens=24, temperature=t, top_k=k, seed=seed, ignore_eos=True).choices[0].text
        check(got == want, f"T={t} k={k} seed={seed}: server {got!r}, demo {want!r}")


@test
def streaming_equals_the_whole_response():
    want = complete(prompt="JULIET:", max_tokens=30, seed=11, top_k=40, ignore_eos=True).choices[0].text
    texts, finish = stream_text(prompt="JULIET:", max_tokens=30, seed=11, top_k=40, ignore_eos=True)
    check(texts.get(0) == want, f"stream {texts.get(0)!r}, whole {want!r}")
    check(finish.get(0) == "length", f"finish {finish}")


@test
def n_choices_use_seed_plus_index():
    r = complete(prompt="KING:", max_tokens=10, n=3, seed=20, top_k=40, ignore_eos=True)
    check([c.index for c in r.choices] == [0, 1, 2], f"indices {[c.index for c in r.choices]}")
    for c in r.choices:
        one = complete(prompt="KING:", max_tokens=10, seed=20 + c.index, top_k=40, ignore_eos=True).choices[0].text
        check(c.text == one, f"choice {c.index}: {c.text!r}, alone {one!r}")
    check(r.usage.completion_tokens == 30, f"usage {r.usage}")
    texts, _ = stream_text(prompt="KING:", max_tokens=10, n=3, seed=20, top_k=40, ignore_eos=True)
    check([texts[i] for i in range(3)] == [c.text for c in r.choices], f"streamed {texts}")


@test
def prompt_forms_string_list_ids():
    ids = json.loads(raw(URL, "POST", "/tokenize", {"prompt": "ROMEO:"})[2])["tokens"]
    a = complete(prompt="ROMEO:", max_tokens=8, temperature=0, ignore_eos=True).choices[0].text
    b = complete(prompt=ids, max_tokens=8, temperature=0, ignore_eos=True).choices[0].text
    r = complete(prompt=["ROMEO:", "JULIET:"], max_tokens=8, temperature=0, ignore_eos=True)
    s = complete(prompt=[ids, ids], max_tokens=8, temperature=0, ignore_eos=True)
    check(a == b == r.choices[0].text == s.choices[0].text == s.choices[1].text, f"{a!r} {b!r} {r.choices[0].text!r}")
    check(len(r.choices) == 2 and len(s.choices) == 2, f"{len(r.choices)} and {len(s.choices)} choices for two prompts")


@test
def stop_strings_end_the_text_before_them():
    full = complete(prompt="ROMEO:", max_tokens=40, temperature=0, ignore_eos=True).choices[0].text
    stop = full[12:15]
    i = full.find(stop)
    for stream in (False, True):
        if stream:
            texts, finish = stream_text(prompt="ROMEO:", max_tokens=40, temperature=0, stop=[stop, "zzzz"], ignore_eos=True)
            got, fr = texts.get(0, ""), finish.get(0)
        else:
            c = complete(prompt="ROMEO:", max_tokens=40, temperature=0, stop=stop, ignore_eos=True).choices[0]
            got, fr = c.text, c.finish_reason
        check(got == full[:i] and fr == "stop", f"stream={stream} stop {stop!r}: {got!r} ({fr}), expected {full[:i]!r}")


@test
def logprobs_have_the_legacy_shape():
    c = complete(prompt="ROMEO:", max_tokens=10, temperature=0, logprobs=3, ignore_eos=True).choices[0]
    lp = c.logprobs
    check(len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 10,
          f"lengths {len(lp.tokens)} {len(lp.token_logprobs)} {len(lp.top_logprobs)} {len(lp.text_offset)}")
    check("".join(lp.tokens) == c.text, f"tokens {lp.tokens} do not spell {c.text!r}")
    for t, (tok, v, top) in enumerate(zip(lp.tokens, lp.token_logprobs, lp.top_logprobs)):
        check(v <= 0 and 1 <= len(top) <= 3, f"token {t}: logprob {v}, top {top}")
        # greedy: the chosen token is the most likely one
        check(abs(max(top.values()) - v) < 1e-5, f"token {t}: {v} but top {top}")
    check(lp.text_offset == sorted(lp.text_offset) and lp.text_offset[0] == 0, f"offsets {lp.text_offset}")


@test
def streamed_logprobs_equal_the_whole_response():
    kw = dict(prompt="ROMEO:", max_tokens=20, temperature=0, logprobs=2, ignore_eos=True)
    whole = complete(**kw).choices[0].logprobs
    toks, lps, offs = [], [], []
    for ch in complete(stream=True, **kw):
        for c in ch.choices:
            if c.logprobs:
                toks += c.logprobs.tokens
                lps += c.logprobs.token_logprobs
                offs += c.logprobs.text_offset
    check(toks == whole.tokens and lps == whole.token_logprobs and offs == whole.text_offset,
          f"streamed {toks} {lps} {offs}, whole {whole.tokens} {whole.token_logprobs} {whole.text_offset}")


@test
def echo_scoring_equals_demo_score():
    text = "ROMEO: But soft, what light through yonder window breaks?"
    c = complete(prompt=text, max_tokens=0, echo=True, logprobs=0).choices[0]
    check(c.text == text, f"echo text {c.text!r}")
    lp = c.logprobs.token_logprobs
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write(json.dumps({"text": text}) + "\n")
    ref = json.loads(demo("--batch-file", f.name, "--score", "--logprobs"))
    os.unlink(f.name)
    want = ref["logprobs"]
    check(lp[0] is None and len(lp) == len(want) + 1, f"{len(lp)} logprobs, first {lp[0]}; demo {len(want)}")
    diff = max(abs(a - b) for a, b in zip(lp[1:], want))
    check(diff < 1e-5, f"echo logprobs differ from ./demo --score by {diff}")
    # with alternatives: the most likely prompt token at each place (the token itself where its rank is 0)
    e = complete(prompt=text, max_tokens=0, echo=True, logprobs=2).choices[0].logprobs
    for t in range(1, len(e.tokens)):
        top = e.top_logprobs[t]
        best = max(top, key=top.get)
        check(len(top) == 2 and top[best] >= e.token_logprobs[t] - 1e-4, f"place {t}: {e.token_logprobs[t]}, top {top}")
        check((best == e.tokens[t]) == (ref["ranks"][t - 1] == 0), f"place {t}: rank {ref['ranks'][t - 1]}, top {top}")


@test
def tokenize_detokenize_round_trip():
    s, _, b = raw(URL, "POST", "/tokenize", {"prompt": "Hello, world"})
    ids = json.loads(b)["tokens"]
    check(s == 200 and ids == [15496, 11, 995], f"tokenize {s} {ids}")
    s, _, b = raw(URL, "POST", "/detokenize", {"tokens": ids})
    check(s == 200 and json.loads(b)["prompt"] == "Hello, world", f"detokenize {s} {b!r}")


def streams_each_as_alone(n, max_tokens, seed, meanwhile=None):
    """n streamed completions at once equal the same requests one at a time; meanwhile() runs while they stream"""
    prompts = [("ROMEO:", "JULIET:", "KING:", "First Citizen:")[i % 4] for i in range(n)]
    want = [complete(prompt=p, max_tokens=max_tokens, seed=seed + i, top_k=40, ignore_eos=True).choices[0].text
            for i, p in enumerate(prompts)]
    got = [None] * n

    def one(i):
        try:
            got[i] = stream_text(prompt=prompts[i], max_tokens=max_tokens, seed=seed + i, top_k=40, ignore_eos=True)[0].get(0)
        except Exception as e:  # noqa: BLE001 (reported below as a difference)
            got[i] = repr(e)
    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    if meanwhile:
        meanwhile()
    for t in ts:
        t.join(60)
    bad = [i for i in range(n) if got[i] != want[i]]
    check(not bad, f"{len(bad)} of {n} streams differ, first {bad[:1]}: {got[bad[0]]!r} vs {want[bad[0]]!r}" if bad else "")


@test
def streams_64_concurrent_each_as_alone():
    streams_each_as_alone(64, 16, 100)


@test
def echo_scoring_beside_streams_leaves_them_as_alone():
    # scoring shares the model's KV slots with the engine's requests: it must wait for them, not run between steps
    text = "ROMEO: But soft, what light through yonder window breaks?"
    alone = complete(prompt=text, max_tokens=0, echo=True, logprobs=0).choices[0].logprobs.token_logprobs
    lps = []

    def score_four_times():
        for _ in range(4):
            time.sleep(0.05)
            lps.append(complete(prompt=text, max_tokens=0, echo=True, logprobs=0).choices[0].logprobs.token_logprobs)
    streams_each_as_alone(8, 48, 300, score_four_times)
    check(len(lps) == 4 and all(lp == alone for lp in lps), "echo logprobs beside streams differ from those alone")


@test
def score_slots_score_beside_generation_without_waiting():
    """--score-slots: echo scoring runs while a long generation holds the engine (without them it would wait for the
    generation's end), and gives the engine model's logprobs bit for bit"""
    text = "ROMEO: But soft, what light through yonder window breaks?"
    alone = complete(prompt=text, max_tokens=0, echo=True, logprobs=1).choices[0].logprobs
    c, r = raw(SCORER, "POST", "/v1/completions", {"model": MODEL, "prompt": "ROMEO:", "max_tokens": 1000,
                                                   "stream": True, "ignore_eos": True}, stream=True)
    check(r.status == 200, f"status {r.status}")
    r.fp.readline()
    scorer = openai.OpenAI(base_url=SCORER + "/v1", api_key=KEY, max_retries=0, timeout=30)
    t0 = time.time()
    got = scorer.completions.create(model=MODEL, prompt=text, max_tokens=0, echo=True, logprobs=1).choices[0].logprobs
    took = time.time() - t0
    busy = metric(SCORER, "gpt2_requests_in_flight")
    c.sock.close()
    c.close()
    check(busy >= 1, "the generation had ended before the scoring did")
    check(took < 1.0, f"scoring took {took:.2f} s beside the generation")
    check(got.token_logprobs == alone.token_logprobs and got.top_logprobs == alone.top_logprobs,
          "logprobs differ from the engine model's")


def metric(url, name):
    for line in raw(url, "GET", "/metrics")[2].decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in /metrics")


def freed_and_cancelled(before):
    """within 10 s nothing is in flight or queued, and one more request was cancelled than before"""
    end = time.time() + 10
    while time.time() < end and (metric(URL, "gpt2_requests_in_flight") or metric(URL, "gpt2_queue_depth")):
        time.sleep(0.02)
    check(metric(URL, "gpt2_requests_in_flight") == 0, "the slot was not freed within 10 s")
    check(metric(URL, "gpt2_requests_cancelled_total") == before + 1, "the request was not cancelled")


@test
def a_disconnect_cancels_and_frees_the_slot():
    before = metric(URL, "gpt2_requests_cancelled_total")
    c, r = raw(URL, "POST", "/v1/completions", {"model": MODEL, "prompt": "ROMEO:", "max_tokens": 1000,
                                                "stream": True, "ignore_eos": True}, stream=True)
    check(r.status == 200, f"status {r.status}")
    r.fp.readline()
    check(metric(URL, "gpt2_requests_in_flight") >= 1, "nothing in flight while streaming")
    c.sock.close()
    c.close()
    freed_and_cancelled(before)


@test
def a_hang_up_cancels_a_whole_response_too():
    """a client that waits for a non-streamed response and closes its socket: the request is cancelled within the
    socket's 100 ms look, long before its 1000 tokens"""
    before = metric(URL, "gpt2_requests_cancelled_total")
    u = urllib.parse.urlparse(URL)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    body = json.dumps({"model": MODEL, "prompt": "ROMEO:", "max_tokens": 1000, "ignore_eos": True})
    c.request("POST", "/v1/completions", body=body, headers={"Authorization": "Bearer " + KEY,
                                                             "Content-Type": "application/json"})
    end = time.time() + 5
    while time.time() < end and not metric(URL, "gpt2_requests_in_flight"):
        time.sleep(0.01)
    check(metric(URL, "gpt2_requests_in_flight") >= 1, "the request never ran")
    tokens = metric(URL, "gpt2_tokens_generated_total")
    c.sock.close()
    c.close()
    freed_and_cancelled(before)
    made = metric(URL, "gpt2_tokens_generated_total") - tokens
    check(made < 900, f"{made:.0f} tokens made after the hang-up: it ran to its end")


def error_of(status, body, code):
    check(status == code, f"status {status}, expected {code}: {body[:200]!r}")
    e = json.loads(body)["error"]
    check(set(e) == {"message", "type", "param", "code"} and e["message"], f"error object {e}")
    return e


@test
def errors_400_bad_json_and_fields():
    error_of(*raw(URL, "POST", "/v1/completions", "{not json")[::2], 400)
    e = error_of(*raw(URL, "POST", "/v1/completions", {"model": MODEL, "prompt": "x", "temperature": "hot"})[::2], 400)
    check(e["param"] == "temperature", f"param {e['param']}")
    for bad in ({"prompt": "x", "max_tokens": -1}, {"prompt": "x", "n": 0}, {"prompt": [[1, 2], "x", 3]},
                {"prompt": "x", "logit_bias": {"abc": 1}}, {"prompt": "x", "stop": [""]}, {"prompt": [50257]}, {}):
        error_of(*raw(URL, "POST", "/v1/completions", dict(bad, model=MODEL))[::2], 400)
    try:
        complete(prompt="x", max_tokens=5, top_p=7)
        raise AssertionError("top_p=7 was taken")
    except openai.BadRequestError:
        pass
    e = error_of(*raw(URL, "POST", "/v1/completions", {"model": MODEL, "prompt": [1] * 1000, "max_tokens": 100})[::2], 400)
    check(e["param"] == "max_tokens", f"too long a prompt: param {e['param']}")


@test
def errors_401_without_the_key():
    for h in ({"Authorization": "Bearer wrong"}, {"Authorization": ""}):
        error_of(*raw(URL, "POST", "/v1/completions", {"model": MODEL, "prompt": "x"}, headers=h)[::2], 401)
    try:
        openai.OpenAI(base_url=URL + "/v1", api_key="wrong", max_retries=0).models.list()
        raise AssertionError("a wrong key was taken")
    except openai.AuthenticationError:
        pass
    check(raw(URL, "GET", "/health", headers={"Authorization": ""})[0] == 200, "/health needs no key")


@test
def errors_404_route_and_model():
    error_of(*raw(URL, "GET", "/v1/nothing")[::2], 404)
    try:
        client.completions.create(model="gpt-17", prompt="x", max_tokens=1)
        raise AssertionError("an unknown model was taken")
    except openai.NotFoundError:
        pass


@test
def errors_413_body_too_large():
    error_of(*raw(SMALL, "POST", "/v1/completions", {"model": MODEL, "prompt": "x" * 8000})[::2], 413)
    check(raw(SMALL, "POST", "/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 1})[0] == 200,
          "a small body after a large one")


@test
def errors_503_queue_full_with_retry_after():
    c, r = raw(SMALL, "POST", "/v1/completions", {"model": MODEL, "prompt": "ROMEO:", "max_tokens": 1000,
                                                  "stream": True, "ignore_eos": True}, stream=True)
    r.fp.readline()
    s, h, b = raw(SMALL, "POST", "/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 1})
    c.sock.close()
    c.close()
    error_of(s, b, 503)
    check(h.get("Retry-After") == "1", f"headers {h}")
    end = time.time() + 10
    while time.time() < end and raw(SMALL, "POST", "/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 1})[0] != 200:
        time.sleep(0.05)
    check(metric(SMALL, "gpt2_requests_in_flight") == 0, "the small server's slot is still held")


@test
def metrics_are_prometheus_text():
    text = raw(URL, "GET", "/metrics")[2].decode()
    for name in ("gpt2_requests_total", "gpt2_tokens_generated_total", "gpt2_queue_depth", "gpt2_requests_in_flight",
                 "gpt2_step_seconds"):
        check(f"# TYPE {name} " in text, f"no {name} in /metrics")
    check(metric(URL, "gpt2_step_seconds_count") > 0, "no steps counted")
    check(metric(URL, "gpt2_tokens_generated_total") > 0, "no tokens counted")


def main():
    passed = failed = 0
    for f in TESTS:
        t0 = time.time()
        try:
            f()
            passed += 1
            print(f"ok   {f.__name__} ({time.time() - t0:.1f} s)")
        except Exception as e:  # noqa: BLE001
            failed += 1
            print(f"FAIL {f.__name__}: {e}")
            if not isinstance(e, AssertionError):
                traceback.print_exc()
    print(f"server tests: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
