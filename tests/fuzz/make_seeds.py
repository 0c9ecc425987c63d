#!/usr/bin/env python3
"""Writes the seed corpora of kiln's fuzz targets into tests/fuzz/corpus/:
small valid inputs each target should accept, from which libFuzzer mutates.

    python3 tests/fuzz/make_seeds.py
"""
import hashlib
import json
import os
import random
import struct

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "corpus")
rng = random.Random(1)

# The small config fuzz_safetensors reads: 1 layer, 1 head, 16 wide, vocab 8, context 4.
L, H, C, V, T = 1, 1, 16, 8, 4


def tensors():
    yield "wte.weight", [V, C]
    yield "wpe.weight", [T, C]
    for l in range(L):
        p = f"h.{l}."
        yield p + "ln_1.weight", [C]
        yield p + "ln_1.bias", [C]
        yield p + "attn.c_attn.weight", [C, 3 * C]
        yield p + "attn.c_attn.bias", [3 * C]
        yield p + "attn.c_proj.weight", [C, C]
        yield p + "attn.c_proj.bias", [C]
        yield p + "ln_2.weight", [C]
        yield p + "ln_2.bias", [C]
        yield p + "mlp.c_fc.weight", [C, 4 * C]
        yield p + "mlp.c_fc.bias", [4 * C]
        yield p + "mlp.c_proj.weight", [4 * C, C]
        yield p + "mlp.c_proj.bias", [C]
    yield "ln_f.weight", [C]
    yield "ln_f.bias", [C]


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def safetensors(dtype, prefix="", metadata=False):
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = {"format": "pt"}
    fmt = {"F32": "<f", "F16": "<e"}[dtype]
    for name, shape in tensors():
        vals = b"".join(struct.pack(fmt, rng.uniform(-0.5, 0.5)) for _ in range(numel(shape)))
        header[prefix + name] = {"dtype": dtype, "shape": shape,
                                 "data_offsets": [len(data), len(data) + len(vals)]}
        data += vals
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(len(text) + 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def llmc(version):
    Vp = V + 8
    head = [20240326, version, T, V, L, H, C, Vp] + [0] * 248
    count = Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
    body = b""
    for _ in range(count):
        x = rng.uniform(-0.5, 0.5)
        if version == 5:
            body += struct.pack("<H", struct.unpack("<I", struct.pack("<f", x))[0] >> 16)
        else:
            body += struct.pack("<f", x)
    return struct.pack("<256i", *head) + body


def write(target, name, data):
    os.makedirs(os.path.join(out, target), exist_ok=True)
    with open(os.path.join(out, target, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


write("safetensors", "f32", safetensors("F32"))
write("safetensors", "f16_prefixed", safetensors("F16", "transformer.", metadata=True))
write("llmc", "v3_fp32", llmc(3))
write("llmc", "v5_bf16", llmc(5))
cfg = {"n_layer": 12, "n_head": 12, "n_embd": 768, "vocab_size": 50257, "n_positions": 1024}
write("config", "gpt2", json.dumps(cfg))
write("config", "hf_names", json.dumps({"num_hidden_layers": 2, "num_attention_heads": 4,
                                        "hidden_size": 64, "vocab_size": 512,
                                        "max_position_embeddings": 128, "model_type": "gpt2",
                                        "architectures": ["GPT2LMHeadModel"],
                                        "layer_norm_epsilon": 1e-5}))
for i, text in enumerate(["Hello world", "I'm sure they'll've done it's",
                          "  spaces\t\ttabs\n\nnewlines\r\n", "3.14159 and 2,000,000",
                          "naïve café — “quotes” 日本語 한국어 😀👍🏽",
                          "<|endoftext|>The end<|endoftext|>", "\x00\x01\x1c\x1f\x7f",
                          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"]):
    write("encode", f"text{i}", text)
write("encode", "invalid_utf8", b"\xff\xfe\xc3\x28\xe2\x82\xf0\x9f\x98")
# Tokenizer files: vocabulary JSON, a NUL byte, then merges.
byte_tokens = {}
n = 0
for b in range(256):
    printable = (33 <= b <= 126) or (161 <= b <= 172) or (174 <= b <= 255)
    cp = b if printable else 256 + n
    if not printable:
        n += 1
    byte_tokens[chr(cp)] = b
vocab = dict(byte_tokens)
vocab.update({"he": 256, "ll": 257, "hell": 258, "hello": 259, "Ġw": 260, "<|endoftext|>": 261})
merges = "#version: 0.2\nh e\nl l\nhe ll\nhell o\nĠ w\n"
write("tokenizer_files", "small", json.dumps(vocab, ensure_ascii=False) + "\0" + merges)

# Kernel-cache entries: flag byte (1: the manifest lines are sealed by the
# target), manifest, then 0x01-separated file names and contents.
KEY = "0123456789abcdef" * 4


def cache_entry(files, seal_in_input):
    sha = lambda b: hashlib.sha256(b).hexdigest()
    lines = "kiln-cache-entry 1\nkey %s\n" % KEY
    for n in sorted(files):
        lines += "file %s %d %s\n" % (n, len(files[n]), sha(files[n]))
    if not seal_in_input:
        lines += "end " + sha(lines.encode()) + "\n"
    data = bytes([1 if seal_in_input else 0]) + lines.encode()
    for n in sorted(files):
        data += b"\x01" + n.encode() + b"\x01" + files[n]
    return data


gpu = {"kiln.txt": b"func.func @k() attributes {kiln.kernel} {\n  return\n}\n",
       "ptx.txt": b"//\n.version 8.0\n.target sm_90a\n.address_size 64\n"}
host = {"kiln.txt": b"module {}\n", "lowered.txt": b"module {}\n", "llvm-dialect.txt": b"module {}\n",
        "llvm.txt": b"; ModuleID = 'k'\n", "host.o": b"\x7fELF\x02\x01\x01" + bytes(57)}
write("cache_entry", "gpu_sealed", cache_entry(gpu, True))
write("cache_entry", "gpu_whole", cache_entry(gpu, False))
write("cache_entry", "host_sealed", cache_entry(host, True))
