#!/usr/bin/env python3
"""Reference data for kiln's GPT-2, from HF transformers (run where torch and
transformers are installed; no network needed).

  python3 tests/gpt2/make_golden.py tokenizer VOCAB_DIR OUT.json
      ids of GPT2Tokenizer (from encoder.json + vocab.bpe) on a varied text set
  python3 tests/gpt2/make_golden.py model CONFIG OUT.json [--device cuda] [--dtype fp32|fp16]
      logits and greedy tokens of GPT2LMHeadModel on kiln's seeded random
      weights (gpt2::Weights::random); CONFIG: tiny | 124M | L,H,C,V,T
"""
import json
import math
import sys

import numpy as np

TEXTS = [
    "Hello world",
    "Hello, world! How's it going? I'm fine, you'll see, we've done it, they'd agree.",
    "  leading spaces, trailing spaces   ",
    "tabs\tand\nnewlines\n\n\nand \r\n windows line ends",
    "numbers 12345 3.14159 1,000,000 and 2024-11-30",
    "CamelCaseIdentifiers and snake_case_names = foo(bar[0], baz->qux);",
    "def f(x):\n    return x ** 2  # square\n",
    "Ünïcödé àccénts, naïve café, Straße, Ærøskøbing",
    "中文字符和日本語のテキスト、한국어 텍스트",
    "emoji 🙂👍🏽🚀 and symbols ©®™ ∑∫√ ≤≥ ←→",
    "Mixed 'quotes' \"double\" `back` and DON'T SHOUT 'S",
    "<|endoftext|>A new document<|endoftext|>",
    "a" * 40 + " " + "ab" * 20,
    "   \n   \n",
    "",
]


def mix(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def random_weights(L, H, C, V, T, seed):
    """The tensors of kiln's gpt2::Weights::random, by HF name, in its order."""
    names = [("wte.weight", (V, C)), ("wpe.weight", (T, C))]
    for i in range(L):
        p = f"h.{i}."
        names += [(p + "ln_1.weight", (C,)), (p + "ln_1.bias", (C,)),
                  (p + "attn.c_attn.weight", (C, 3 * C)), (p + "attn.c_attn.bias", (3 * C,)),
                  (p + "attn.c_proj.weight", (C, C)), (p + "attn.c_proj.bias", (C,)),
                  (p + "ln_2.weight", (C,)), (p + "ln_2.bias", (C,)),
                  (p + "mlp.c_fc.weight", (C, 4 * C)), (p + "mlp.c_fc.bias", (4 * C,)),
                  (p + "mlp.c_proj.weight", (4 * C, C)), (p + "mlp.c_proj.bias", (C,))]
    names += [("ln_f.weight", (C,)), ("ln_f.bias", (C,))]
    out, counter = {}, 0
    golden = np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        for name, shape in names:
            n = int(np.prod(shape))
            k = np.arange(counter + 1, counter + n + 1, dtype=np.uint64)
            counter += n
            u = (mix(np.uint64(seed) + k * golden) >> np.uint64(40)).astype(np.float64) / 16777216.0
            if name == "wte.weight":
                lo, hi = -0.5, 0.5
            elif name == "wpe.weight":
                lo, hi = -0.1, 0.1
            elif name.endswith(("ln_1.weight", "ln_2.weight")) or name == "ln_f.weight":
                lo, hi = 0.9, 1.1
            elif name.endswith(".bias"):
                lo, hi = -0.1, 0.1
            else:
                a = 1.0 / math.sqrt(4 * C if name.endswith("mlp.c_proj.weight") else C)
                lo, hi = -a, a
            out[name] = (lo + (hi - lo) * u).astype(np.float32).reshape(shape)
    return out


CONFIGS = {"tiny": (2, 4, 64, 512, 128), "124M": (12, 12, 768, 50257, 1024)}
PROMPT = [464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13, 50, 7]


def model(spec, out_path, device="cpu", dtype="fp32", seed=1, new_tokens=64):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    L, H, C, V, T = CONFIGS[spec] if spec in CONFIGS else map(int, spec.split(","))
    cfg = GPT2Config(vocab_size=V, n_positions=T, n_embd=C, n_layer=L, n_head=H,
                     activation_function="gelu_new", layer_norm_epsilon=1e-5,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    m = GPT2LMHeadModel(cfg).eval()
    state = {"transformer." + k: torch.from_numpy(v) for k, v in random_weights(L, H, C, V, T, seed).items()}
    missing, unexpected = m.load_state_dict(state, strict=False)
    assert not unexpected and all(k.endswith(("attn.bias", "masked_bias", "lm_head.weight")) for k in missing), missing
    m.tie_weights()
    tdtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    m = m.to(device=device, dtype=tdtype)
    prompt = [t % V for t in PROMPT]
    with torch.no_grad():
        ids = torch.tensor([prompt], device=device)
        logits = m(ids).logits[0].float().cpu().numpy()
        tokens, gaps, seq = [], [], list(prompt)
        for _ in range(new_tokens):
            last = m(torch.tensor([seq], device=device)).logits[0, -1].float().cpu().numpy()
            top = np.sort(last)[-2:]
            gaps.append(float(top[1] - top[0]))
            t = int(np.argmax(last))
            tokens.append(t)
            seq.append(t)
    json.dump({"config": {"n_layer": L, "n_head": H, "n_embd": C, "vocab_size": V, "n_ctx": T},
               "seed": seed, "dtype": dtype, "device": device, "prompt": prompt,
               "logits": [[round(float(x), 6) for x in row] for row in logits] if V <= 4096 else None,
               "last_logits": [round(float(x), 5) for x in logits[-1]],
               "greedy": tokens, "top2_gaps": gaps}, open(out_path, "w"))


def tokenizer(vocab_dir, out_path):
    import os
    import shutil
    import tempfile
    import transformers
    from transformers import GPT2Tokenizer
    # The npm package's names for HF's vocab.json and merges.txt.
    tmp = tempfile.mkdtemp()
    shutil.copy(os.path.join(vocab_dir, "encoder.json"), os.path.join(tmp, "vocab.json"))
    shutil.copy(os.path.join(vocab_dir, "vocab.bpe"), os.path.join(tmp, "merges.txt"))
    tok = GPT2Tokenizer.from_pretrained(tmp)
    assert tok.encode("Hello world") == [15496, 995], (transformers.__version__, tok.encode("Hello world"))
    cases = [{"text": t, "ids": tok.encode(t)} for t in TEXTS]
    json.dump(cases, open(out_path, "w"), ensure_ascii=False, indent=0)


if __name__ == "__main__":
    if sys.argv[1] == "tokenizer":
        tokenizer(sys.argv[2], sys.argv[3])
    else:
        args = sys.argv[4:]
        opts = dict(zip(args[::2], args[1::2]))
        model(sys.argv[2], sys.argv[3], device=opts.get("--device", "cpu"), dtype=opts.get("--dtype", "fp32"))
