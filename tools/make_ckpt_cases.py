#!/usr/bin/env python3
"""Writes tests/ckpt/ (the checkpoint readers' cases: real torch.save output, its edge forms and hostile variants)
and tests/fuzz/corpus/pytorch/ (the pytorch fuzz harness's seeds, every .bin below, flat). Needs torch, numpy
and safetensors. The output is the same bytes on every run (fixed seeds, no timestamps).

    python3 tools/make_ckpt_cases.py

tests/ckpt/config.json                    a tiny config (1 layer, 2 heads, n_embd 8, n_ctx 8, vocab 16)
tests/ckpt/ref_{f32,f16,bf16}.safetensors the weights as safetensors (the twin each good .bin must equal)
tests/ckpt/bin_{f32,f16,bf16}.bin         torch.save of the state dict: f32 bare keys with the causal-mask
                                          buffers and a tied lm_head (one storage); f16 "transformer."-prefixed
                                          keys; bf16 a dict of nn.Parameters
tests/ckpt/bin_f32_proto4.bin, bin_f32_offset.bin, crafted_ok.bin, raw_ok.bin, zip64_descriptor.bin,
    zip64_extra.bin                       good edge forms (pickle protocol 4, a view at a storage offset, a
                                          hand-pickled state dict, a zip written byte by byte, zip64 records
                                          with a data descriptor or with the zip64 extra field)
tests/ckpt/hostile_*.bin                  each refused (tests/ckpt_tests.inc says with which message)
tests/ckpt/shard_*/, both/                index faults not in tests/family_bad; both formats in one directory
A state dict of more than 65536 entries needs a 260 KB pickle: tests/ckpt_tests.inc builds that one in memory.
Nothing here is ever unpickled by Python (the hostile pickles would run code if they were).
"""
import collections
import io
import json
import os
import pickle
import shutil
import struct
import sys
import zipfile

import numpy as np
import torch
from safetensors.torch import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "ckpt")
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus", "pytorch")
CONFIG = {"n_layer": 1, "n_head": 2, "n_embd": 8, "n_positions": 8, "vocab_size": 16,
          "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05, "model_type": "gpt2"}
L, C, P, V = 1, 8, 8, 16


def path(*p):
    full = os.path.join(OUT, *p)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    return full


def write(rel, data):
    with open(path(rel), "wb") as f:
        f.write(data)


def weights(seed=1):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g) * 0.2
    w = collections.OrderedDict()
    w["wte.weight"] = r(V, C)
    w["wpe.weight"] = r(P, C)
    for l in range(L):
        h = f"h.{l}."
        w[h + "ln_1.weight"] = 1 + r(C)
        w[h + "ln_1.bias"] = r(C)
        w[h + "attn.c_attn.weight"] = r(C, 3 * C)
        w[h + "attn.c_attn.bias"] = r(3 * C)
        w[h + "attn.c_proj.weight"] = r(C, C)
        w[h + "attn.c_proj.bias"] = r(C)
        w[h + "ln_2.weight"] = 1 + r(C)
        w[h + "ln_2.bias"] = r(C)
        w[h + "mlp.c_fc.weight"] = r(C, 4 * C)
        w[h + "mlp.c_fc.bias"] = r(4 * C)
        w[h + "mlp.c_proj.weight"] = r(4 * C, C)
        w[h + "mlp.c_proj.bias"] = r(C)
    w["ln_f.weight"] = 1 + r(C)
    w["ln_f.bias"] = r(C)
    return w


def saved(obj, **kw):
    b = io.BytesIO()
    torch.save(obj, b, **kw)
    return b.getvalue()


def state_dict(w, prefix="", buffers=False, tied=False):
    sd = collections.OrderedDict()
    for k, t in w.items():
        sd[prefix + k] = t
        if buffers and k.endswith("ln_1.bias"):
            l = k.split(".")[1]
            sd[prefix + f"h.{l}.attn.bias"] = torch.tril(torch.ones(P, P, dtype=torch.bool)).view(1, 1, P, P)
            sd[prefix + f"h.{l}.attn.masked_bias"] = torch.tensor(-1e4)
    if tied:
        sd["lm_head.weight"] = sd[prefix + "wte.weight"]  # the same tensor: one storage, written once
    sd._metadata = collections.OrderedDict({"": {"version": 1}})
    return sd


# ---------------------------------------------------------------- good checkpoints

shutil.rmtree(OUT, ignore_errors=True)
w32 = weights()
dtypes = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
write("config.json", json.dumps(CONFIG).encode())
for name, dt in dtypes.items():
    w = collections.OrderedDict((k, t.to(dt).contiguous()) for k, t in w32.items())
    save_file(dict(w), path(f"ref_{name}.safetensors"))
    if name == "f32":
        blob = saved(state_dict(w, buffers=True, tied=True))
    elif name == "f16":
        blob = saved(state_dict(w, prefix="transformer.", tied=True))
    else:
        blob = saved(collections.OrderedDict((k, torch.nn.Parameter(t, requires_grad=False)) for k, t in w.items()))
    write(f"bin_{name}.bin", blob)

# pickle protocol 4 (FRAME, SHORT_BINUNICODE, MEMOIZE, STACK_GLOBAL)
write("bin_f32_proto4.bin", saved(state_dict(w32, buffers=True), pickle_protocol=4))

# a view with a storage offset (a slice of a larger tensor: torch saves the whole storage and the offset)
w = collections.OrderedDict(w32)
big = torch.cat([torch.zeros(3, C), w32["wte.weight"]])
w["wte.weight"] = big[3:]
write("bin_f32_offset.bin", saved(w))

# shards: the f32 weights split in two, with an index, in both formats
names = list(w32)
half = [names[: len(names) // 2], names[len(names) // 2:]]


def index(fmt_name, shards, weight_map):
    total = sum(w32[k].numel() * 4 for k in w32)
    return json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2).encode()


def shard_dir(d, fmt, parts, weight_map=None, index_name=None, shard_names=None):
    write(os.path.join(d, "config.json"), json.dumps(CONFIG).encode())
    n = len(parts)
    wm = {}
    for i, keys in enumerate(parts):
        fname = (shard_names[i] if shard_names else
                 (f"pytorch_model-{i + 1:05d}-of-{n:05d}.bin" if fmt == "bin" else f"model-{i + 1:05d}-of-{n:05d}.safetensors"))
        sd = collections.OrderedDict((k, w32[k]) for k in keys)
        if fmt == "bin":
            write(os.path.join(d, fname), saved(sd))
        else:
            save_file(dict(sd), path(d, fname))
        for k in keys:
            wm.setdefault(k, fname)
    if weight_map is not None:
        wm = weight_map(wm)
    iname = index_name or ("pytorch_model.bin.index.json" if fmt == "bin" else "model.safetensors.index.json")
    write(os.path.join(d, iname), index(fmt, n, wm))


# the index names shard 1 only: shard 2's tensors are absent from the weight_map
shard_dir("shard_missing", "st", half, weight_map=lambda wm: {k: v for k, v in wm.items() if "00001" in v})
# the weight_map names a tensor that no shard holds
shard_dir("shard_absent", "st", half, weight_map=lambda wm: dict(wm, **{"h.0.attn.masked_bias": wm[half[0][0]]}))
# the weight_map names one tensor twice, with and without the "transformer." prefix
shard_dir("shard_prefix_twice", "st", [half[0], half[1]],
          weight_map=lambda wm: dict(wm, **{"transformer.wte.weight": wm["wte.weight"]}))
w2 = dict(w32)
w2["transformer.wte.weight"] = w32["wte.weight"].clone()
save_file({k: w2[k] for k in half[0] + ["transformer.wte.weight"]}, path("shard_prefix_twice", "model-00001-of-00002.safetensors"))
# model.safetensors is taken before pytorch_model.bin (which here would be refused)
write("both/config.json", json.dumps(CONFIG).encode())
shutil.copyfile(path("ref_f32.safetensors"), path("both", "model.safetensors"))

# ---------------------------------------------------------------- hostile checkpoints


def zip_of(pkl, entries=None, prefix="archive", compress=False):
    """A torch.save-shaped zip (stored entries) holding data.pkl and the given data/KEY entries."""
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as z:
        def put(name, data):  # a fixed date: the same bytes on every run
            z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data,
                       zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED)
        put(prefix + "/data.pkl", pkl)
        put(prefix + "/byteorder", "little")
        for k, v in (entries or {}).items():
            put(prefix + "/data/" + k, v)
        put(prefix + "/version", "3\n")
    return b.getvalue()


class RunsCommand:
    def __reduce__(self):
        return (os.system, ("true",))


class Evaluates:
    def __reduce__(self):
        return (eval, ("1+1",))


# os.system as pickle writes it on Linux (posix.system), and as a hand-written GLOBAL naming os.system
write("hostile_posix_system.bin", zip_of(pickle.dumps({"wte.weight": RunsCommand()}, protocol=2)))
write("hostile_os_system.bin", zip_of(b"\x80\x02}q\x00X\n\x00\x00\x00wte.weightcos\nsystem\nX\x04\x00\x00\x00true\x85Rs."))
shutil.copyfile(path("hostile_posix_system.bin"), path("both", "pytorch_model.bin"))
write("hostile_eval.bin", zip_of(pickle.dumps(collections.OrderedDict(x=Evaluates()), protocol=2, fix_imports=False)))
# nesting: a few levels past each limit (64 marks, values 32 deep) is enough; the list holds itself
write("hostile_deep_marks.bin", zip_of(b"\x80\x02" + b"(" * 80 + b"."))
write("hostile_deep_tuples.bin", zip_of(b"\x80\x02)" + b"\x85" * 40 + b"."))
write("hostile_deep_lists.bin", zip_of(b"\x80\x02]q\x00" + b"h\x00a" * 40 + b"."))
write("hostile_huge_memo.bin", zip_of(b"\x80\x02}r\xf0\xff\xff\xff."))
write("hostile_get_unset.bin", zip_of(b"\x80\x02}h\x07."))
write("hostile_stack_global.bin", zip_of(pickle.dumps(collections.OrderedDict(x=RunsCommand()), protocol=4)))
write("hostile_float_value.bin", zip_of(pickle.dumps(collections.OrderedDict(x=1.5), protocol=2)))
write("hostile_int_value.bin", zip_of(pickle.dumps(collections.OrderedDict(x=7), protocol=2)))
write("hostile_no_stop.bin", zip_of(b"\x80\x02}q\x00"))
torch.manual_seed(0)
write("hostile_full_module.bin", saved(torch.nn.Linear(2, 2)))
# the legacy format names each storage by its address and lists them sorted: one tensor, renamed, so that the
# bytes are the same on every run
legacy_sd = collections.OrderedDict(wte=w32["wte.weight"])
legacy = saved(legacy_sd, _use_new_zipfile_serialization=False)
key = str(legacy_sd["wte"].untyped_storage()._cdata).encode()
write("hostile_legacy.bin", legacy.replace(key, b"0" * len(key)))
write("hostile_not_zip.bin", b"hello, this is not a checkpoint at all")


class Storage:
    def __init__(self, key, numel, dtype="FloatStorage"):
        self.key, self.numel, self.dtype = key, numel, dtype


class Tensor:
    """Pickles as torch's tensors do: _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)."""
    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, tuple(size), tuple(stride), False, collections.OrderedDict())

    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2, self.args)


class TorchPickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", getattr(torch, obj.dtype), obj.key, "cpu", obj.numel)
        return None


def crafted(tensors, entries):
    """A state dict of crafted tensors (name -> Tensor) over crafted storages (key -> bytes)."""
    b = io.BytesIO()
    TorchPickler(b, protocol=2).dump(collections.OrderedDict(tensors))
    return zip_of(b.getvalue(), entries)


def wte_file(offset=0, size=(V, C), stride=(C, 1), numel=V * C, entry_bytes=V * C * 4, dtype="FloatStorage", key="0"):
    """bin_f32 with its wte replaced by a crafted tensor."""
    tensors = collections.OrderedDict()
    entries = {}
    for i, (k, t) in enumerate(w32.items()):
        if k == "wte.weight":
            tensors[k] = Tensor(Storage(key, numel, dtype), offset, size, stride)
            raw = t.numpy().astype("<f4").tobytes()
            entries["0"] = (raw + b"\0" * entry_bytes)[:entry_bytes]
        else:
            tensors[k] = Tensor(Storage(str(i), t.numel()), 0, t.shape, t.stride())
            entries[str(i)] = t.numpy().astype("<f4").tobytes()
    return crafted(tensors, entries)


write("crafted_ok.bin", wte_file())
write("hostile_offset_past.bin", wte_file(offset=5))
write("hostile_huge_offset.bin", wte_file(offset=(1 << 62)))
write("hostile_numel_lies.bin", wte_file(numel=V * C * 2))
write("hostile_strides.bin", wte_file(stride=(1, V)))
write("hostile_storage_missing.bin", wte_file(key="404"))
write("hostile_long_dtype.bin", wte_file(dtype="LongStorage", entry_bytes=V * C * 8))
write("hostile_wrong_shape.bin", wte_file(size=(C, V), stride=(V, 1)))
write("hostile_real_transposed.bin", saved(collections.OrderedDict(w32, **{"wte.weight": w32["wte.weight"].t().contiguous().t()})))

# zips that lie: built byte by byte


def raw_zip(files, lie=None):
    """files: [(name, data)]; lie(i, local, central) may rewrite entry i's headers (dicts of fields)."""
    out, central = bytearray(), []
    for i, (name, data) in enumerate(files):
        nb = name.encode()
        loc = dict(off=len(out), flags=0, method=0, csize=len(data), usize=len(data), name=nb, data=data)
        cen = dict(loc)
        if lie:
            lie(i, loc, cen)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, loc["flags"], loc["method"], 0, 0, 0, loc["csize"],
                           loc["usize"], len(loc["name"]), 0) + loc["name"] + loc["data"]
        central.append(cen)
    cd = len(out)
    for c in central:
        out += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, c["flags"], c["method"], 0, 0, 0, c["csize"],
                           c["usize"], len(c["name"]), 0, 0, 0, 0, 0, c["off"]) + c["name"]
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(central), len(central), len(out) - cd, cd, 0)
    return bytes(out)


good = open(path("crafted_ok.bin"), "rb").read()
with zipfile.ZipFile(io.BytesIO(good)) as z:
    members = [(n, z.read(n)) for n in z.namelist()]
write("raw_ok.bin", raw_zip(members))


def zip64_zip(files, descriptor):
    """files as raw_zip's, written as miniz writes an archive over 4 GB: every size and offset in the central
    directory through the zip64 extra field, a zip64 end record and its locator; local headers either with
    sizes 0 and bit 3 (a data descriptor follows the data, as PyTorch's writer does) or with 0xFFFFFFFF and a
    zip64 extra field."""
    out, central = bytearray(), []
    for name, data in files:
        nb = name.encode()
        off = len(out)
        if descriptor:
            out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 8, 0, 0, 0, 0, 0, 0, len(nb), 0) + nb + data
            out += struct.pack("<IIQQ", 0x08074B50, 0, len(data), len(data))
        else:
            extra = struct.pack("<HHQQ", 1, 16, len(data), len(data))
            out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 0, 0, 0, 0, 0xFFFFFFFF, 0xFFFFFFFF, len(nb),
                               len(extra)) + nb + extra + data
        central.append((nb, off, len(data)))
    cd = len(out)
    for nb, off, n in central:
        extra = struct.pack("<HHQQQ", 1, 24, n, n, off)
        out += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 8 if descriptor else 0, 0, 0, 0, 0, 0xFFFFFFFF,
                           0xFFFFFFFF, len(nb), len(extra), 0, 0, 0, 0, 0xFFFFFFFF) + nb + extra
    cd_size = len(out) - cd
    z64 = len(out)
    out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, len(central), len(central), cd_size, cd)
    out += struct.pack("<IIQI", 0x07064B50, 0, z64, 1)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    return bytes(out)


write("zip64_descriptor.bin", zip64_zip(members, True))
write("zip64_extra.bin", zip64_zip(members, False))


def overlap(i, loc, cen):  # entry 1's data runs over entry 2's local header
    if i == 1:
        cen["csize"] = cen["usize"] = loc["csize"] = loc["usize"] = len(loc["data"]) + 40


def size_lie(i, loc, cen):  # the central directory claims more bytes than the local header
    if i == 1:
        cen["csize"] = cen["usize"] = len(loc["data"]) + 4


def size_past(i, loc, cen):  # both claim more bytes than the file holds
    if i == len(members) - 1:
        cen["csize"] = cen["usize"] = loc["csize"] = loc["usize"] = 1 << 30


def name_lie(i, loc, cen):
    if i == 2:
        cen["name"] = b"archive/data/9"


def deflated(i, loc, cen):
    if i == 1:
        cen["method"] = loc["method"] = 8


write("hostile_zip_overlap.bin", raw_zip(members, overlap))
write("hostile_zip_size_lie.bin", raw_zip(members, size_lie))
write("hostile_zip_size_past.bin", raw_zip(members, size_past))
write("hostile_zip_name_lie.bin", raw_zip(members, name_lie))
write("hostile_zip_deflated.bin", raw_zip(members, deflated))
write("hostile_zip_compressed_real.bin", zip_of(b"\x80\x02}.", compress=True))
real = open(path("bin_f32.bin"), "rb").read()
write("hostile_truncated.bin", real[: len(real) // 2])
write("hostile_truncated_tail.bin", real[:-1])
write("hostile_no_data_pkl.bin", raw_zip([("archive/version", b"3\n")]))
write("hostile_big_endian.bin", raw_zip([("archive/data.pkl", b"\x80\x02}."), ("archive/byteorder", b"big")]))
write("hostile_dup_entry.bin", raw_zip([("archive/data.pkl", b"\x80\x02}."), ("archive/data.pkl", b"\x80\x02}.")]))

# ---------------------------------------------------------------- the fuzzer's seeds: every .bin above, flat
os.makedirs(CORPUS, exist_ok=True)  # seeds a long run added (named by SHA-1) stay
for root, _, files in sorted(os.walk(OUT)):
    for f in sorted(files):
        if f.endswith(".bin"):
            rel = os.path.relpath(os.path.join(root, f), OUT).replace("/", "_")
            shutil.copyfile(os.path.join(root, f), os.path.join(CORPUS, rel))
print("wrote", os.path.relpath(OUT, ROOT), "and", os.path.relpath(CORPUS, ROOT))
