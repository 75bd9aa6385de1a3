"""Tiny synthetic GGUF models for the architecture tests (test_architectures.py).

Random weights, small dimensions, and a small SentencePiece vocabulary: the
unknown/BOS/EOS tokens, some control tokens, one user-defined token, the 256
byte tokens ``<0xXX>`` and a few hundred pieces (``▁`` for spaces) with scores,
some of them equal. Written with the PyPI ``gguf`` package as the converter
would write a real model of that architecture (norm weights as stored, fused
tensors for Phi-3, ...). Nothing here is a trained model: the point is that
companiond and llama.cpp compute the same function of the same file.
"""

from collections import Counter

import numpy as np
import gguf

CORPUS = """
The quick brown fox jumps over the lazy dog. Once upon a time there was a little
robot who lived in a quiet house by the sea. Every morning it said hello to the
sun, counted the waves, and wrote short poems about the weather. Hello world!
Companions talk, listen and remember; the best ones are kind and patient.
Numbers like 12, 345 and 6789 appear too, as do words such as naïve, café,
über, and 東京. What's the time? It's half past three, isn't it?
"""

CONTROL = {
    "llama": ["[INST]", "[/INST]"],
    "gemma": ["<start_of_turn>", "<end_of_turn>"],
    "phi3": ["<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|endoftext|>"],
}


def vocab(family):
    """(pieces, scores, types) of a small SentencePiece vocabulary."""
    if family == "gemma":
        head = [("<pad>", 3), ("<eos>", 3), ("<bos>", 3), ("<unk>", 2)]
    else:
        head = [("<unk>", 2), ("<s>", 3), ("</s>", 3)]
    pieces = [p for p, _ in head]
    types = [t for _, t in head]
    scores = [0.0] * len(head)
    for c in CONTROL["gemma" if family.startswith("gemma") else family]:
        pieces.append(c)
        types.append(3)
        scores.append(0.0)
    pieces.append("<h1>")  # user-defined: matched even in plain text
    types.append(4)
    scores.append(0.0)
    for b in range(256):
        pieces.append(f"<0x{b:02X}>")
        types.append(6)
        scores.append(0.0)
    text = CORPUS.replace("\n", " ")
    chars = sorted(set(text.replace(" ", "\u2581")) | set("abcdefghijklmnopqrstuvwxyz"))
    counts = Counter()
    for word in text.split(" "):
        if not word:
            continue
        w = "\u2581" + word
        for n in range(2, 7):
            for i in range(len(w) - n + 1):
                counts[w[i:i + n]] += 1
    merged = [p for p, c in counts.most_common() if c >= 2][:360]
    seen = set(pieces)
    normal = []
    for p in ["\u2581"] + chars + merged:
        if p not in seen:
            seen.add(p)
            normal.append(p)
    for i, p in enumerate(normal):
        pieces.append(p)
        types.append(1)
        # Scores fall with the rank; every seventh equals its predecessor
        # (ties are broken by position).
        scores.append(-float(i - (1 if i % 7 == 0 and i else 0)))
    return pieces, scores, types


# The layers' output projections are scaled up so that the layers, not the
# token's own embedding, decide the next token (tied embeddings otherwise
# repeat the last token).
OUT = 0.5

# The chat templates of the real models (Gemma's raises on a system role).
TEMPLATES = {
    "gemma": "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}",
    "phi3": "{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}",
    "llama": "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}",
}

DIMS = dict(n_embd=64, n_head=4, n_head_kv=2, head_dim=16, n_ff=128)


def _tensor(w, name, arr, qtype):
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if qtype == gguf.GGMLQuantizationType.F32 or arr.ndim == 1:
        w.add_tensor(name, arr)
    else:
        data = gguf.quants.quantize(arr, qtype)
        w.add_tensor(name, data, raw_dtype=qtype)


def write(path, arch, qtype=gguf.GGMLQuantizationType.F32, seed=0, orig_ctx=4096):
    """Write a tiny random model of `arch` (llama, gemma, gemma2, gemma3, phi3);
    Phi-3's RoPE factors are the long ones past `orig_ctx`."""
    rng = np.random.default_rng(seed)
    family = "gemma" if arch.startswith("gemma") else ("phi3" if arch == "phi3" else "llama")
    pieces, scores, types = vocab(family)
    d = DIMS
    n_layer = {"gemma3": 6, "gemma2": 4}.get(arch, 3)
    n_vocab = len(pieces)
    n_q = d["n_head"] * d["head_dim"]
    n_kv = d["n_head_kv"] * d["head_dim"]

    w = gguf.GGUFWriter(str(path), arch)
    w.add_name({"phi3": "Phi-3 synthetic", "llama": "Llama synthetic"}.get(arch, f"{arch} synthetic"))
    w.add_block_count(n_layer)
    w.add_context_length(4096 if arch != "phi3" else 131072)
    w.add_embedding_length(d["n_embd"])
    w.add_feed_forward_length(d["n_ff"])
    w.add_head_count(d["n_head"])
    w.add_head_count_kv(d["n_head_kv"])
    w.add_key_length(d["head_dim"])
    w.add_value_length(d["head_dim"])
    w.add_rope_dimension_count(d["head_dim"])
    w.add_layer_norm_rms_eps(1e-6)
    if arch == "gemma2":
        w.add_sliding_window(6)
        w.add_attn_logit_softcapping(50.0)
        w.add_final_logit_softcapping(30.0)
        w.add_rope_freq_base(10000.0)
    elif arch == "gemma3":
        w.add_sliding_window(6)
        w.add_rope_freq_base(1000000.0)
        # As Gemma 3 4B and larger: linear scaling on the global layers only.
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(8.0)
    elif arch == "phi3":
        w.add_rope_freq_base(10000.0)
        w.add_rope_scaling_orig_ctx_len(orig_ctx)
        w.add_rope_scaling_attn_factors(1.19)
    else:
        w.add_rope_freq_base(10000.0)

    w.add_tokenizer_model("llama")
    w.add_token_list(pieces)
    w.add_token_scores(scores)
    w.add_token_types(types)
    if family == "gemma":
        w.add_bos_token_id(2)
        w.add_eos_token_id(1)
        w.add_unk_token_id(3)
        w.add_pad_token_id(0)
        w.add_add_space_prefix(False)
    else:
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_unk_token_id(0)
    w.add_add_bos_token(family != "phi3")
    w.add_chat_template(TEMPLATES[family])
    w.add_add_eos_token(False)

    def rnd(*shape, scale=None):
        fan_in = shape[-1]
        return rng.standard_normal(shape).astype(np.float32) * (scale or 1.0 / np.sqrt(fan_in))

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    _tensor(w, "token_embd.weight", rnd(n_vocab, d["n_embd"], scale=1.0 if family != "gemma" else 0.1), qtype)
    _tensor(w, "output_norm.weight", norm(d["n_embd"]), qtype)
    if family == "llama" or family == "phi3":
        _tensor(w, "output.weight", rnd(n_vocab, d["n_embd"], scale=0.5), qtype)
    if arch == "llama":
        # Llama 3's per-dimension RoPE divisors.
        _tensor(w, "rope_freqs.weight", (1.0 + 3 * rng.random(d["head_dim"] // 2)).astype(np.float32), qtype)
    if arch == "phi3":
        half = d["head_dim"] // 2
        _tensor(w, "rope_factors_short.weight", (1.0 + rng.random(half)).astype(np.float32), qtype)
        _tensor(w, "rope_factors_long.weight", (1.0 + 4 * rng.random(half)).astype(np.float32), qtype)
    for i in range(n_layer):
        p = f"blk.{i}."
        _tensor(w, p + "attn_norm.weight", norm(d["n_embd"]), qtype)
        if arch == "phi3":
            _tensor(w, p + "attn_qkv.weight", rnd(n_q + 2 * n_kv, d["n_embd"]), qtype)
        else:
            _tensor(w, p + "attn_q.weight", rnd(n_q, d["n_embd"]), qtype)
            _tensor(w, p + "attn_k.weight", rnd(n_kv, d["n_embd"]), qtype)
            _tensor(w, p + "attn_v.weight", rnd(n_kv, d["n_embd"]), qtype)
        _tensor(w, p + "attn_output.weight", rnd(d["n_embd"], n_q, scale=OUT), qtype)
        if arch == "gemma3":
            _tensor(w, p + "attn_q_norm.weight", norm(d["head_dim"]), qtype)
            _tensor(w, p + "attn_k_norm.weight", norm(d["head_dim"]), qtype)
        if arch in ("gemma2", "gemma3"):
            _tensor(w, p + "post_attention_norm.weight", 3 * norm(d["n_embd"]), qtype)
            _tensor(w, p + "post_ffw_norm.weight", 3 * norm(d["n_embd"]), qtype)
        _tensor(w, p + "ffn_norm.weight", norm(d["n_embd"]), qtype)
        if arch == "phi3":
            _tensor(w, p + "ffn_up.weight", rnd(2 * d["n_ff"], d["n_embd"]), qtype)
        else:
            _tensor(w, p + "ffn_gate.weight", rnd(d["n_ff"], d["n_embd"]), qtype)
            _tensor(w, p + "ffn_up.weight", rnd(d["n_ff"], d["n_embd"]), qtype)
        _tensor(w, p + "ffn_down.weight", rnd(d["n_embd"], d["n_ff"], scale=OUT), qtype)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


if __name__ == "__main__":
    import sys
    write(sys.argv[2], sys.argv[1],
          gguf.GGMLQuantizationType[sys.argv[3]] if len(sys.argv) > 3 else gguf.GGMLQuantizationType.F32)
