#!/usr/bin/python3
"""Convert the tiny Hugging Face fixtures to GGUF with llama.cpp's gguf-py.

Run from the repository root with Debian's numpy (python3-numpy) and
sentencepiece (python3-sentencepiece, which gguf-py imports), giving the
gguf-py directory of a llama.cpp checkout (not part of this repository):

    /usr/bin/python3 nn/infer/testdata/gguf/make_gguf.py LLAMA_CPP/gguf-py

It writes nn/infer/testdata/gguf/<fixture>-<type>.gguf for the fixtures
llama-gqa-tied (float32) in f32, f16 and q8_0, and qwen2-bias (float16) in
f16 and q8_0. It does what llama.cpp's convert_hf_to_gguf.py does for
these two architectures, which needs torch and transformers that this
machine lacks: the same metadata keys, tensor names and types (1-D tensors
float32; matrices in the output type, q8_0 quantised by gguf-py's own
quantiser), llama's query and key rows permuted by the converter's
permute(), and the tokenizer as its gpt2 vocabulary (tokens, token types,
merges, bos and eos) with a chat template of the family's markers.
"""

import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, sys.argv[1])
import gguf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
HF = os.path.join(HERE, "..", "hf")

# Chat templates: short ones with each family's markers (the engine maps a
# template onto its own renderers by these markers).
TEMPLATES = {
    "llama": "{% for message in messages %}<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
             "{{ message['content'] | trim }}<|eot_id|>{% endfor %}"
             "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}",
    "qwen2": "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
             "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
}

# tokenizer.ggml.pre by the pre-tokenizer's Split pattern, as
# convert_hf_to_gguf.py names them.
PRE = {
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+": "qwen2",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+": "llama-bpe",
}

NP = {"F32": np.float32, "F16": np.float16}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=NP[e["dtype"]]).reshape(e["shape"]).astype(np.float32)
    return out


def permute(w, n_head):
    # convert_hf_to_gguf.py's LlamaModel.permute.
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def gguf_name(name):
    if name.startswith("model.layers."):
        rest = name[len("model.layers."):]
        i, sub = rest.split(".", 1)
        return "blk.%s.%s" % (i, NAMES[sub])
    return NAMES[name]


def convert(fixture, outtype):
    src = os.path.join(HF, fixture)
    cfg = json.load(open(os.path.join(src, "config.json")))
    tok = json.load(open(os.path.join(src, "tokenizer.json")))
    arch = cfg["model_type"]
    ftype = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
             "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[outtype]
    path = os.path.join(HERE, "%s-%s.gguf" % (fixture, outtype))
    w = gguf.GGUFWriter(path, arch)

    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    w.add_name(fixture)
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_file_type(ftype)
    if arch == "llama":
        w.add_vocab_size(cfg["vocab_size"])
        w.add_rope_dimension_count(cfg["hidden_size"] // heads)
    rs = cfg.get("rope_scaling")
    if rs and rs.get("type", rs.get("rope_type")) == "linear":
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(rs["factor"])

    # The vocabulary as convert_hf_to_gguf.py's get_vocab_base lays it out.
    vocab = dict(tok["model"]["vocab"])
    added = {a["id"]: a for a in tok["added_tokens"]}
    for a in added.values():
        vocab[a["content"]] = a["id"]
    rev = {i: t for t, i in vocab.items()}
    tokens, types = [], []
    for i in range(cfg["vocab_size"]):
        if i not in rev:
            tokens.append("[PAD%d]" % i)
            types.append(gguf.TokenType.UNUSED)
        elif i in added:
            tokens.append(rev[i])
            types.append(gguf.TokenType.CONTROL if added[i]["special"] else gguf.TokenType.USER_DEFINED)
        else:
            tokens.append(rev[i])
            types.append(gguf.TokenType.NORMAL)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(PRE[tok["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]])
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(cfg["bos_token_id"])
    w.add_eos_token_id(cfg["eos_token_id"])
    w.add_chat_template(TEMPLATES[arch])

    for name, t in sorted(read_safetensors(os.path.join(src, "model.safetensors")).items()):
        if arch == "llama" and name.endswith("q_proj.weight"):
            t = permute(t, heads)
        elif arch == "llama" and name.endswith("k_proj.weight"):
            t = permute(t, kv)
        if t.ndim == 1 or outtype == "f32":
            w.add_tensor(gguf_name(name), t.astype(np.float32))
        elif outtype == "f16":
            w.add_tensor(gguf_name(name), t.astype(np.float16))
        else:
            q = gguf.quants.quantize(t, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(gguf_name(name), q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(path, os.path.getsize(path))


for fixture, types in [("llama-gqa-tied", ["f32", "f16", "q8_0"]), ("qwen2-bias", ["f16", "q8_0"])]:
    for t in types:
        convert(fixture, t)
