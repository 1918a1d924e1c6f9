#!/usr/bin/python3
"""Make tiny Hugging Face checkpoints and their reference outputs.

Run from the repository root with Debian's torch (python3-torch, 1.13, CPU):

    /usr/bin/python3 nn/infer/testdata/hf/make_fixtures.py

For each fixture it writes, under nn/infer/testdata/hf/<name>/:

    config.json            as transformers writes it for the family
    model.safetensors      or model-0000i-of-0000n.safetensors shards with
                           model.safetensors.index.json
    tokenizer.json         a tiny byte-level BPE tokenizer with the family's
                           control tokens
    reference.json         the prompt, the logits at every prompt position,
                           and a greedy continuation

The reference forward pass below is written from the published
architectures (Llama: RMSNorm, rotary embedding with rotate_half over the
two halves of each head, grouped-query attention, SwiGLU; Qwen2 adds q/k/v
biases; Qwen3 adds a per-head RMSNorm of queries and keys and an explicit
head_dim), independently of the Go code. It runs in float64 on the weights
exactly as stored (bfloat16 and float16 weights are widened, not
re-rounded), so the only difference from the Go engine is the engine's
float32 arithmetic. Safetensors files are written by hand: an 8-byte
little-endian header length, the JSON header, the raw little-endian bytes.

Weights are random (fixed seeds). A seed is kept only when every greedy
step's best logit beats the second by at least MARGIN, so that float32
rounding cannot flip a token, and the continuation is not one token
repeated.
"""

import gzip
import json
import math
import os
import struct

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
MARGIN = 0.02
DISTINCT = 5  # distinct tokens a greedy continuation must hold, so it is not one token repeated
PROMPT = [5, 72, 101, 108, 108, 111, 33, 260]
STEPS = 16

# The tokenizer: GPT-2's byte-to-unicode alphabet as 256 tokens, a few
# merges, and Qwen's three control tokens; the structure of
# tokenizer/testdata/hf/qwen2.5.json.gz (normalizer, pre-tokenizer, decoder)
# is kept as it is.
MERGES = [("Ġ", "t"), ("h", "e"), ("l", "l"), ("Ġ", "a"), ("i", "n"), ("Ġt", "he"), ("o", "u"), ("e", "r")]
ADDED = {
    # Qwen's control tokens.
    "qwen": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
    # Llama 3's, on the same byte-level vocabulary (and Qwen's pre-tokenizer:
    # the chat template, not the pre-tokenizer, is what the tests exercise).
    "llama": ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
}
END_OF_TURN = {"qwen": "<|im_end|>", "llama": "<|eot_id|>"}
VOCAB = 272  # config vocab_size: 256 bytes + 8 merges + at most 5 added, padded


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def make_tokenizer(family):
    real = json.load(gzip.open(os.path.join(ROOT, "tokenizer/testdata/hf/qwen2.5.json.gz")))
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    for a, b in MERGES:
        vocab[a + b] = len(vocab)
    added = []
    for i, content in enumerate(ADDED[family]):
        tid = len(vocab) + i
        added.append({"id": tid, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True})
    model = dict(real["model"])
    model["vocab"] = vocab
    model["merges"] = [a + " " + b for a, b in MERGES]
    tok = {k: real[k] for k in ("version", "truncation", "padding", "normalizer", "pre_tokenizer", "post_processor", "decoder")}
    tok["added_tokens"] = added
    tok["model"] = model
    return tok, {c: len(vocab) + i for i, c in enumerate(ADDED[family])}


FIXTURES = [
    # name, model_type, dtype, shards, config extras
    dict(name="llama-gqa-tied", model_type="llama", dtype="F32", shards=1, dim=32, hidden=64, layers=2, heads=4, kv_heads=2,
         tie=True, rope_theta=10000.0, eps=1e-5, rope_scaling=None, head_dim=None),
    dict(name="llama3-scaled", model_type="llama", dtype="BF16", shards=2, dim=32, hidden=48, layers=2, heads=4, kv_heads=1,
         tie=False, rope_theta=500000.0, eps=1e-5, head_dim=None,
         rope_scaling={"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 16, "rope_type": "llama3"}),
    dict(name="qwen2-bias", model_type="qwen2", dtype="F16", shards=1, dim=32, hidden=64, layers=2, heads=4, kv_heads=2,
         tie=False, rope_theta=1000000.0, eps=1e-6, head_dim=None, rope_scaling={"type": "linear", "factor": 2.0}),
    dict(name="qwen3-qknorm", model_type="qwen3", dtype="BF16", shards=1, dim=32, hidden=64, layers=2, heads=4, kv_heads=2,
         tie=False, rope_theta=1000000.0, eps=1e-6, head_dim=16, rope_scaling=None),
]

TORCH_DTYPE = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}


def head_dim(f):
    return f["head_dim"] or f["dim"] // f["heads"]


def make_weights(f, gen):
    """Random weights, rounded to the fixture's dtype (kept in that dtype)."""
    d, h, hd = f["dim"], f["hidden"], head_dim(f)
    qd, kvd = f["heads"] * hd, f["kv_heads"] * hd
    dt = TORCH_DTYPE[f["dtype"]]

    def mat(rows, cols, scale=1.0):
        return (torch.randn(rows, cols, generator=gen, dtype=torch.float64) * scale / math.sqrt(cols)).to(dt)

    def norm(n):
        return (1 + 0.2 * torch.randn(n, generator=gen, dtype=torch.float64)).to(dt)

    def bias(n):
        return (0.3 * torch.randn(n, generator=gen, dtype=torch.float64)).to(dt)

    w = {"model.embed_tokens.weight": (torch.randn(VOCAB, d, generator=gen, dtype=torch.float64)).to(dt)}
    for i in range(f["layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = norm(d)
        w[p + "self_attn.q_proj.weight"] = mat(qd, d, 2.0)
        w[p + "self_attn.k_proj.weight"] = mat(kvd, d, 2.0)
        w[p + "self_attn.v_proj.weight"] = mat(kvd, d)
        w[p + "self_attn.o_proj.weight"] = mat(d, qd)
        if f["model_type"] == "qwen2":
            w[p + "self_attn.q_proj.bias"] = bias(qd)
            w[p + "self_attn.k_proj.bias"] = bias(kvd)
            w[p + "self_attn.v_proj.bias"] = bias(kvd)
        if f["model_type"] == "qwen3":
            w[p + "self_attn.q_norm.weight"] = norm(hd)
            w[p + "self_attn.k_norm.weight"] = norm(hd)
        w[p + "post_attention_layernorm.weight"] = norm(d)
        w[p + "mlp.gate_proj.weight"] = mat(h, d)
        w[p + "mlp.up_proj.weight"] = mat(h, d)
        w[p + "mlp.down_proj.weight"] = mat(d, h)
    w["model.norm.weight"] = norm(d)
    if not f["tie"]:
        w["lm_head.weight"] = mat(VOCAB, d, 4.0)
    return w


def inv_freq(f):
    hd = head_dim(f)
    freq = torch.tensor([f["rope_theta"] ** (-(2 * i) / hd) for i in range(hd // 2)], dtype=torch.float64)
    rs = f["rope_scaling"]
    if rs is None:
        return freq
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "linear":
        return freq / rs["factor"]
    assert kind == "llama3"
    factor, low, high, old = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"], rs["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = 2 * math.pi / freq
    scaled = torch.where(wavelen > low_wavelen, freq / factor, freq)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(medium, smoothed, scaled)


def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def forward(f, w64, tokens):
    """Logits (T, VOCAB) of tokens, every position, in float64."""
    T = len(tokens)
    hd, H, KV, eps = head_dim(f), f["heads"], f["kv_heads"], f["eps"]
    x = w64["model.embed_tokens.weight"][torch.tensor(tokens)]
    pos = torch.arange(T, dtype=torch.float64)
    ang = pos[:, None] * inv_freq(f)[None, :]  # (T, hd/2)
    ang = torch.cat((ang, ang), dim=-1)  # (T, hd): HF repeats the frequencies over the two halves
    cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    for i in range(f["layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w64[p + "input_layernorm.weight"], eps)
        q = h @ w64[p + "self_attn.q_proj.weight"].T
        k = h @ w64[p + "self_attn.k_proj.weight"].T
        v = h @ w64[p + "self_attn.v_proj.weight"].T
        if f["model_type"] == "qwen2":
            q = q + w64[p + "self_attn.q_proj.bias"]
            k = k + w64[p + "self_attn.k_proj.bias"]
            v = v + w64[p + "self_attn.v_proj.bias"]
        q, k, v = q.view(T, H, hd), k.view(T, KV, hd), v.view(T, KV, hd)
        if f["model_type"] == "qwen3":
            q = rms_norm(q, w64[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w64[p + "self_attn.k_norm.weight"], eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        scores = torch.einsum("thd,shd->hts", q, k) / math.sqrt(hd) + mask
        att = torch.softmax(scores, dim=-1)
        o = torch.einsum("hts,shd->thd", att, v).reshape(T, H * hd)
        x = x + o @ w64[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w64[p + "post_attention_layernorm.weight"], eps)
        g = h @ w64[p + "mlp.gate_proj.weight"].T
        u = h @ w64[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(g) * u) @ w64[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w64["model.norm.weight"], eps)
    head = w64["model.embed_tokens.weight"] if f["tie"] else w64["lm_head.weight"]
    return x @ head.T


def greedy(f, w64):
    """Greedy continuation of PROMPT, and the smallest top-1 margin seen."""
    toks = list(PROMPT)
    margin = float("inf")
    for _ in range(STEPS):
        logits = forward(f, w64, toks)[-1]
        top = torch.topk(logits, 2).values
        margin = min(margin, float(top[0] - top[1]))
        toks.append(int(torch.argmax(logits)))
    prefill = forward(f, w64, PROMPT)
    top = torch.topk(prefill, 2, dim=-1).values
    margin = min(margin, float((top[:, 0] - top[:, 1]).min()))
    return toks[len(PROMPT):], margin


def tensor_bytes(t):
    if t.dtype == torch.float32:
        return t.contiguous().numpy().astype("<f4").tobytes()
    return t.contiguous().view(torch.int16).numpy().astype("<i2").tobytes()


def write_safetensors(path, tensors, dtype):
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        b = tensor_bytes(tensors[name])
        header[name] = {"dtype": dtype, "shape": list(tensors[name].shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)  # pad to 8 bytes, as the safetensors library does
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(h)))
        out.write(h)
        for b in blobs:
            out.write(b)


def config_json(f, eos):
    arch = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}[f["model_type"]]
    c = {
        "architectures": [arch],
        "model_type": f["model_type"],
        "hidden_size": f["dim"],
        "intermediate_size": f["hidden"],
        "num_hidden_layers": f["layers"],
        "num_attention_heads": f["heads"],
        "num_key_value_heads": f["kv_heads"],
        "vocab_size": VOCAB,
        "max_position_embeddings": 512,
        "rms_norm_eps": f["eps"],
        "rope_theta": f["rope_theta"],
        "rope_scaling": f["rope_scaling"],
        "tie_word_embeddings": f["tie"],
        "hidden_act": "silu",
        "torch_dtype": {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}[f["dtype"]],
        "bos_token_id": eos,
        "eos_token_id": eos,
        "initializer_range": 0.02,
        "transformers_version": "4.51.0",
    }
    if f["model_type"] == "llama":
        c["attention_bias"] = False
        c["mlp_bias"] = False
    if f["model_type"] == "qwen2":
        c["use_sliding_window"] = False
        c["sliding_window"] = 32768
        c["max_window_layers"] = 2
    if f["model_type"] == "qwen3":
        c["head_dim"] = f["head_dim"]
        c["attention_bias"] = False
        c["use_sliding_window"] = False
    return c


def main():
    for i, f in enumerate(FIXTURES):
        family = "llama" if f["model_type"] == "llama" else "qwen"
        tok, ids = make_tokenizer(family)
        assert len(tok["model"]["vocab"]) + len(ADDED[family]) <= VOCAB
        out = os.path.join(HERE, f["name"])
        os.makedirs(out, exist_ok=True)
        for seed in range(1000 * i, 1000 * i + 1000):
            gen = torch.Generator().manual_seed(seed)
            w = make_weights(f, gen)
            w64 = {k: v.to(torch.float64) for k, v in w.items()}
            cont, margin = greedy(f, w64)
            if margin >= MARGIN and len(set(cont)) >= DISTINCT:
                break
        else:
            raise SystemExit(f"{f['name']}: no seed with a top-1 margin of {MARGIN} and {DISTINCT} distinct tokens")
        logits = forward(f, w64, PROMPT)
        names = sorted(w)
        if f["shards"] == 1:
            write_safetensors(os.path.join(out, "model.safetensors"), w, f["dtype"])
        else:
            n = f["shards"]
            weight_map = {}
            for s in range(n):
                fn = f"model-{s + 1:05d}-of-{n:05d}.safetensors"
                part = {k: w[k] for k in names[s::n]}
                write_safetensors(os.path.join(out, fn), part, f["dtype"])
                weight_map.update({k: fn for k in part})
            size = sum(v.numel() * v.element_size() for v in w.values())
            with open(os.path.join(out, "model.safetensors.index.json"), "w") as fp:
                json.dump({"metadata": {"total_size": size}, "weight_map": dict(sorted(weight_map.items()))}, fp, indent=2)
        with open(os.path.join(out, "config.json"), "w") as fp:
            json.dump(config_json(f, ids[END_OF_TURN[family]]), fp, indent=2)
        with open(os.path.join(out, "tokenizer.json"), "w") as fp:
            json.dump(tok, fp, ensure_ascii=False)
        ref = {
            "seed": seed,
            "margin": round(margin, 6),
            "prompt": PROMPT,
            "logits": [[round(float(v), 6) for v in row] for row in logits],
            "greedy": cont,
        }
        with open(os.path.join(out, "reference.json"), "w") as fp:
            json.dump(ref, fp, separators=(",", ":"))
        print(f"{f['name']}: seed {seed}, margin {margin:.4f}, greedy {cont}")


if __name__ == "__main__":
    main()
