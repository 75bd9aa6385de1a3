"""companiond against llama.cpp on the same files: every architecture and the
SentencePiece tokenizer (docs/local-model.md, "How the architectures are tested").

No real Gemma or Phi-3 file can be downloaded on the build machine, so
``synth.py`` writes tiny random models of each architecture (f32, Q8_0, Q4_1) with
a small SentencePiece vocabulary. ``companiond model run`` tokenizes and
continues a prompt greedily; llama.cpp (``llama_cpp``, the Python binding)
does the same on the same file with the same thread count, f32 KV cache and
no flash attention. Tokens must be identical; at each generated step the
logits of companiond's five likeliest tokens must equal llama.cpp's within a
tolerance, and where the two pick different tokens llama.cpp's own top two
must be that close (a tie within rounding), after which the continuations
may part.
"""

import json
import subprocess

import llama_cpp
import numpy as np
import pytest

import synth
from conftest import Companiond, binary

ARCHS = ["llama", "gemma", "gemma2", "gemma3", "phi3"]
QTYPES = ["F32", "Q8_0", "Q4_1"]

TEXTS = [
    "Hello world",
    " leading space",
    "  two  spaces and a trailing one ",
    "naïve café über 東京",
    "emoji 🙂 and 🚀 fall back to bytes!",
    "tabs\tand\nnew lines\n\n",
    "What's the time? It's half past three.",
    "Numbers like 12, 345 and 6789",
    "<h1>a user-defined token is matched in plain text",
    "",
    "x",
]
SPECIAL_TEXTS = {
    "llama": "<s>[INST] Hello [/INST] Once upon a time</s>",
    "gemma": "<bos><start_of_turn>user\nHello world<end_of_turn>\n<start_of_turn>model\n",
    "phi3": "<|system|>\nBe kind.<|end|>\n<|user|>\x0b\x0c\r\n Hello there <|end|>\n<|assistant|>\n",
}
PROMPTS = [
    # Under 16 tokens: every product quantises its activations, as llama.cpp's.
    "Once upon a time",
    # 16 tokens or more: the prompt goes through the f32 GEMM path, and past
    # the synthetic Gemmas' sliding window (6) within the prompt.
    "The quick brown fox jumps over the lazy dog. Every morning it said hello to the sun",
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("synth")
    out = {}
    for arch in ARCHS:
        for q in QTYPES:
            out[arch, q] = synth.write(d / f"{arch}-{q}.gguf", arch, synth.gguf.GGMLQuantizationType[q])
    # Phi-3 past its original context (256 < companiond's smallest window,
    # 512): the long RoPE factors on both sides.
    out["phi3-long", "F32"] = synth.write(d / "phi3-long.gguf", "phi3", orig_ctx=256)
    return out


def run(path, prompt, max_tokens, top=5):
    p = subprocess.run([binary(), "model", "run", str(path), "--prompt", prompt,
                        "--max-tokens", str(max_tokens), "--threads", "1", "--top", str(top)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def family(arch):
    return "gemma" if arch.startswith("gemma") else arch


@pytest.mark.parametrize("arch", ARCHS)
def test_tokenization_matches_llama_cpp(files, arch):
    path = files[arch, "F32"]
    llm = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
    for text in TEXTS + [SPECIAL_TEXTS[family(arch)]]:
        # companiond adds no second BOS to a text that starts with one.
        bos = not text.startswith(("<s>", "<bos>"))
        ref = llm.tokenize(text.encode(), add_bos=bos, special=True)
        out = run(path, text, 0)
        assert out["prompt_tokens"] == ref, text
        # Detokenization: each token's piece, control tokens left out.
        pieces = b"".join(llm._model.detokenize([t]) for t in ref)
        assert out["prompt_text"] == pieces.decode("utf-8", errors="replace"), text
    # The emoji is no piece: its four bytes, after BOS (and the space prefix).
    ids = run(path, "🙂", 0)["prompt_tokens"]
    assert len(ids) >= 5, ids


@pytest.mark.parametrize("arch,qtype", [(a, q) for a in ARCHS for q in QTYPES] + [("phi3-long", "F32")])
def test_greedy_continuation_matches_llama_cpp(files, arch, qtype):
    path = files[arch, qtype]
    llm = llama_cpp.Llama(str(path), n_ctx=512, n_threads=1, n_batch=512, type_k=0, type_v=0,
                          flash_attn=False, logits_all=True, verbose=False)
    compared, parted = 0, 0
    for prompt in PROMPTS:
        out = run(path, prompt, 16)
        ids = llm.tokenize(prompt.encode(), add_bos=True, special=True)
        assert out["prompt_tokens"] == ids
        # f32 weights agree to rounding. Q8_0 products quantise the
        # activations as llama.cpp's do: under 16 prompt tokens the logits
        # are the same to the bit but for Gemma's GELU (llama.cpp reads it
        # from an f16 table); a longer prompt goes through companiond's f32
        # GEMM of the dequantised weights (more precise, further apart).
        gemma = arch.startswith("gemma")
        if qtype == "F32":
            tol = 2e-3
        elif len(ids) < 16 and qtype == "Q8_0":
            tol = 2.5e-2 if gemma else 1e-5
        else:
            # Q4_1 is companiond's own AVX2 kernel (q4_1.rs), which keeps
            # the activations' block scales in f32 where ggml rounds them to
            # f16: both are as far from the exact product.
            tol = 6e-2
        llm.reset()
        llm.eval(ids)
        stops = set(out["stop_tokens"])
        for step, tok in enumerate(out["tokens"] + [None]):
            logits = np.array(llm.scores[llm.n_tokens - 1])
            best = int(np.argmax(logits))
            if tok is None:
                # companiond stopped: at a stop token, or after 16 tokens.
                assert step == 16 or best in stops, (step, best)
                break
            for t, v in out["top"][step]:
                assert abs(logits[t] - v) <= tol * max(1.0, abs(v)), (arch, qtype, step, t, logits[t], v)
            compared += 1
            if tok != best:
                # Only a tie within rounding may part the two.
                assert logits[best] - logits[tok] <= 2 * tol * max(1.0, abs(logits[best])), (
                    arch, qtype, step, best, tok, logits[best], logits[tok])
                parted += 1
                break
            llm.eval([tok])
    assert compared >= 8, compared
    if qtype == "F32":
        assert parted == 0


def test_phi3_and_gemma_are_no_longer_refused(files):
    for arch in ARCHS:
        out = run(files[arch, "Q8_0"], "Hello", 2)
        assert out["architecture"] == arch
        assert len(out["tokens"]) <= 2


@pytest.mark.parametrize("arch", ["gemma2", "phi3"])
def test_a_chat_turn_with_the_models_own_template(files, arch, tmp_path):
    """The engine end to end: the file's chat template (Gemma's refuses the
    system prompt, which is folded into the first user turn), SentencePiece
    with the template's BOS not doubled, streamed text, the prefix cache."""
    c = Companiond(tmp_path, model=files[arch, "Q8_0"])
    try:
        reply, frames = c.turn("Hello there, how are you?")
        assert frames[-1]["type"] == "turn_end"
        assert not [f for f in frames if f["type"] == "error"], frames
        assert reply.strip()
        c.turn("And what about the weather?")
        engine = c.get("/api/local/status").json()["engine"]
        assert engine["loaded"] == {"phi3": "Phi-3 synthetic"}.get(arch, f"{arch} synthetic")
        assert engine["last_cached_tokens"] > 0
    finally:
        c.stop()


BPE_TEXTS = [
    "The capital of France is",
    "<|im_start|>system\nYou are kind.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    " leading space", "a  b", "Numbers 12345 and 3.14!", "naïve café 東京 🙂",
    "tabs\t\tnew\n\n\nlines   end  ",
]


def test_byte_level_bpe_matches_llama_cpp_on_the_real_smollm2(gguf):
    """The `gpt2` path on a real file: no space added before the text or
    after a special token (a ChatML prompt reads `system`, not ` system`),
    digits alone; and the trained model's greedy continuation."""
    llm = llama_cpp.Llama(str(gguf), n_ctx=512, n_threads=1, n_batch=512, type_k=0, type_v=0,
                          flash_attn=False, logits_all=True, verbose=False)
    for text in BPE_TEXTS:
        ref = llm.tokenize(text.encode(), add_bos=False, special=True)
        out = run(gguf, text, 0)
        assert out["prompt_tokens"] == ref, text
    out = run(gguf, "The capital of France is", 8)
    assert out["text"].startswith(" Paris")
    llm.eval(out["prompt_tokens"])
    for step, tok in enumerate(out["tokens"]):
        logits = np.array(llm.scores[llm.n_tokens - 1])
        # Q4_1 weights: companiond's own kernel (see the synthetic Q4_1 case);
        # activations re-quantised in 30 layers grow its f16-versus-f32 scale
        # rounding to about 3 %.
        for t, v in out["top"][step]:
            assert abs(logits[t] - v) <= 4e-2 * max(1.0, abs(v)), (step, t, logits[t], v)
        best = int(np.argmax(logits))
        if tok != best:
            assert logits[best] - logits[tok] <= 0.1, (step, best, tok)
            break
        llm.eval([tok])


def test_unsupported_files_are_refused_with_a_reason(tmp_path):
    """Another architecture or tokenizer, or a BPE vocabulary without its
    merges: `model_unsupported`, exit code 1."""
    for arch, tok in [("rwkv6", "llama"), ("llama", "bert"), ("llama", "gpt2")]:
        path = tmp_path / f"{arch}-{tok}.gguf"
        w = synth.gguf.GGUFWriter(str(path), arch)
        for k, v in [("block_count", 1), ("embedding_length", 32), ("attention.head_count", 2)]:
            w.add_uint32(f"{arch}.{k}", v)
        w.add_tokenizer_model(tok)
        w.add_token_list(["<unk>", "<s>", "</s>", "a"])
        w.add_tensor("token_embd.weight", synth.np.zeros((4, 32), dtype=synth.np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        p = subprocess.run([binary(), "model", "run", str(path), "--prompt", "a"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 1, p
        assert "model_unsupported" in p.stderr, p.stderr
        assert "panicked" not in p.stderr
