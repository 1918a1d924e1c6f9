#!/usr/bin/python3
"""Write a q8_0 GGUF of a Qwen2 checkpoint with llama.cpp's own gguf-py.

    /usr/bin/python3 perf/llamacpp/make_gguf.py LLAMA_CPP_DIR HF_DIR OUT.gguf

It does what LLAMA_CPP_DIR/convert_hf_to_gguf.py --outtype q8_0 does for
Qwen2ForCausalLM, with that checkout's gguf-py: the same metadata, tensor
names (gguf-py's TensorNameMap) and types (1-D tensors and norms F32,
matrices q8_0 by gguf-py's quantiser, bfloat16 widened to float32 first),
the vocabulary as get_vocab_base lays it out and gguf.SpecialVocab for
merges, special ids, add_bos and the chat template. The converter itself
cannot run here: it imports torch at the top, reads safetensors through
the safetensors package, and reads the vocabulary through transformers'
AutoTokenizer, whose encoding of a test text it hashes to name the
pre-tokenizer. Debian 12 packages torch but neither safetensors nor
transformers, and PyPI is out of reach. The pre-tokenizer is named qwen2
here, which is what that hash gives for Qwen2's tokenizer.json.
Needs Debian's python3-numpy (and python3-sentencepiece, which gguf-py imports).
"""

import json
import os
import struct
import sys

import numpy as np

llama_dir, hf_dir, out = sys.argv[1:4]
sys.path.insert(0, os.path.join(llama_dir, "gguf-py"))
import gguf  # noqa: E402


def read_safetensors(path):
    """Yields (name, float32 array) in file order, bfloat16 and float16 widened."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0] if kv[0] != "__metadata__" else -1):
            if name == "__metadata__":
                continue
            a, b = e["data_offsets"]
            f.seek(base + a)
            raw = f.read(b - a)
            if e["dtype"] == "BF16":
                x = (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
            elif e["dtype"] == "F16":
                x = np.frombuffer(raw, dtype=np.float16).astype(np.float32)
            elif e["dtype"] == "F32":
                x = np.frombuffer(raw, dtype=np.float32)
            else:
                sys.exit("tensor %s: dtype %s is not read here" % (name, e["dtype"]))
            yield name, x.reshape(e["shape"])


cfg = json.load(open(os.path.join(hf_dir, "config.json")))
if cfg["architectures"] != ["Qwen2ForCausalLM"]:
    sys.exit("architectures %s: only Qwen2ForCausalLM is written here" % cfg["architectures"])
arch = gguf.MODEL_ARCH.QWEN2
w = gguf.GGUFWriter(out, gguf.MODEL_ARCH_NAMES[arch])

# Model.set_gguf_parameters.
w.add_type(gguf.GGUFType.MODEL)
w.add_name(os.path.basename(os.path.normpath(hf_dir)))
w.add_block_count(cfg["num_hidden_layers"])
w.add_context_length(cfg["max_position_embeddings"])
w.add_embedding_length(cfg["hidden_size"])
w.add_feed_forward_length(cfg["intermediate_size"])
w.add_head_count(cfg["num_attention_heads"])
w.add_head_count_kv(cfg["num_key_value_heads"])
w.add_rope_freq_base(cfg["rope_theta"])
w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
w.add_quantization_version(gguf.GGML_QUANT_VERSION)

# Model.get_vocab_base and _set_vocab_gpt2, from tokenizer.json.
tok = json.load(open(os.path.join(hf_dir, "tokenizer.json")))
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
w.add_tokenizer_model("gpt2")
w.add_tokenizer_pre("qwen2")
w.add_token_list(tokens)
w.add_token_types(types)
gguf.SpecialVocab(hf_dir, load_merges=True, n_vocab=len(tokens)).add_to_gguf(w)

# Model.prepare_tensors for --outtype q8_0.
names = gguf.get_tensor_name_map(arch, cfg["num_hidden_layers"])
for name, x in read_safetensors(os.path.join(hf_dir, "model.safetensors")):
    new = names.get_name(name, try_suffixes=(".weight", ".bias"))
    if new is None:
        sys.exit("tensor %s: no GGUF name" % name)
    if x.ndim <= 1 or new.endswith("_norm.weight") or not new.endswith(".weight"):
        w.add_tensor(new, x.astype(np.float32), raw_dtype=gguf.GGMLQuantizationType.F32)
    else:
        w.add_tensor(new, gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0), raw_dtype=gguf.GGMLQuantizationType.Q8_0)

w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(out, os.path.getsize(out), "bytes")
