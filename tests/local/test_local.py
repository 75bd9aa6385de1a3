"""The built-in local model end to end (docs/local-model.md): no provider
configured, the SmolLM2-135M-Instruct GGUF given by path."""

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import CHARACTER, Companiond, binary


def test_a_chat_turn_streams_real_tokens_and_ends(server):
    reply, frames = server.turn("Hello! What is your favourite colour?")
    deltas = [f for f in frames if f["type"] == "assistant_delta"]
    assert not [f for f in frames if f["type"] == "error"], frames
    assert len(deltas) >= 3, f"not streamed: {frames}"
    assert reply.strip(), frames
    assert frames[-1]["type"] == "turn_end"
    ai = [e for e in server.history() if e.get("role", e.get("type")) in ("ai", "assistant")]
    assert ai or any(reply.strip()[:20] in json.dumps(e) for e in server.history())


def test_list_models_and_test_connectivity_answer_for_local(server, gguf):
    r = server.post("/api/config/list_models", {"provider_key": "local"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["success"] and body["resolved_url"] == "local://builtin"
    names = [m.get("name") for m in body["models"]]
    assert gguf.name in names, body
    first = body["models"][0]
    assert first["architecture"] == "llama" and first["context_length"] >= 2048, first
    r = server.post("/api/config/test_connectivity", {"provider_key": "local"})
    assert r.status_code == 200 and r.json()["success"], r.text
    # the provider catalog offers it like any other
    prov = server.get("/api/config/api_providers").json()
    assert "local" in [p["key"] for p in prov["core_api_providers"]]


def test_the_second_turn_reuses_the_prompt_prefix(server):
    server.turn("I like lighthouses, the sea and old harbour towns. " * 8
                + "Answer in one short sentence.")
    st = server.get("/api/local/status").json()["engine"]
    prompt1 = st["last_prompt_tokens"]
    server.turn("Thanks! One word, please.")
    st = server.get("/api/local/status").json()["engine"]
    assert st["last_cached_tokens"] >= prompt1 * 0.8, st
    assert st["loads"] == 1, st


def test_constrained_extraction_yields_facts_that_parse(server):
    for text in ["My name is Alice and I live in Berlin.", "My cat is called Miso."]:
        server.turn(text)
    r = server.post("/api/memory/extract", {"character": CHARACTER})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["lines_read"] >= 4, body
    facts = json.loads((server.data / "memory" / CHARACTER / "facts.json").read_text())
    assert body["added"] >= 1 and len(facts) >= 1, (body, facts)
    assert all(f["text"].strip() for f in facts)
    assert all(f["entity"] in ("master", "neko", "relationship") for f in facts), facts


def test_unload_then_load_again(server):
    assert server.post("/api/local/unload").json()["success"]
    deadline = time.time() + 10
    while time.time() < deadline:
        e = server.get("/api/local/status").json()["engine"]
        if e["state"] == "unloaded":
            break
        time.sleep(0.2)
    assert e["state"] == "unloaded" and e["unloads"] >= 1, e
    reply, frames = server.turn("Are you still there?")
    assert reply.strip() and not [f for f in frames if f["type"] == "error"], frames


def test_the_model_is_unloaded_after_the_idle_time(gguf, tmp_path):
    c = Companiond(tmp_path, model=gguf, config={"localIdleSeconds": 1})
    try:
        assert c.post("/api/config/test_connectivity", {"provider_key": "local"}).json()["success"]
        assert c.get("/api/local/status").json()["engine"]["loaded"]
        time.sleep(2.5)
        e = c.get("/api/local/status").json()["engine"]
        assert e["state"] == "unloaded" and e["unloads"] == 1 and not e["loaded"], e
    finally:
        c.stop()


@pytest.mark.parametrize("kind", ["truncated", "not_gguf"])
def test_a_bad_model_file_is_refused_with_a_clear_error(gguf, tmp_path, kind):
    bad = tmp_path / "bad.gguf"
    data = gguf.read_bytes()
    bad.write_bytes(data[: len(data) * 2 // 3] if kind == "truncated" else b"not a model" * 100)
    c = Companiond(tmp_path, model=bad)
    try:
        reply, frames = c.turn("Hello?")
        errors = [f for f in frames if f["type"] == "error"]
        assert errors and not reply, frames
        text = json.dumps(errors[0]).lower()
        assert ("truncated" if kind == "truncated" else "not a gguf") in text, errors
        st = c.get("/api/local/status").json()
        assert st["file"]["ok"] is False
        assert st["file"]["error_code"] == ("model_truncated" if kind == "truncated" else "not_gguf")
        models = c.post("/api/config/list_models", {"provider_key": "local"}).json()["models"]
        assert models[0]["error_code"] == st["file"]["error_code"]
        assert c.proc.poll() is None, "companiond died"
    finally:
        c.stop()


def test_without_any_model_the_chat_says_no_provider(tmp_path):
    c = Companiond(tmp_path)
    try:
        _, frames = c.turn("Hello?")
        errors = [f for f in frames if f["type"] == "error"]
        assert errors and "no_provider" in json.dumps(errors[0]), frames
    finally:
        c.stop()


# ------------------------------------------------------------------ downloads

def wait_pull(c, name, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for m in c.get("/api/local/models").json()["models"]:
            if m["name"] == name and m.get("download", {}).get("state") in ("done", "failed"):
                return m
        time.sleep(0.2)
    raise AssertionError("the pull did not end")


def test_pull_resumes_verifies_and_the_model_answers(files, gguf, tmp_path):
    data = gguf.read_bytes()
    cat = tmp_path / "catalog.json"
    cat.write_text(json.dumps([files.entry("test-smollm", "smollm.gguf", data)]))
    files.cut["smollm.gguf"] = len(data) // 3
    c = Companiond(tmp_path, env={"COMPANIOND_MODEL_CATALOG": str(cat)})
    try:
        r = c.post("/api/local/models/test-smollm/pull")
        assert r.status_code == 202, r.text
        m = wait_pull(c, "test-smollm")
        assert m["download"]["state"] == "failed" and m["download"]["error_code"] == "network", m
        part = c.data / "models" / "smollm.gguf.part"
        assert part.exists() and 0 < part.stat().st_size < len(data)
        r = c.post("/api/local/models/test-smollm/pull")
        m = wait_pull(c, "test-smollm")
        assert m["download"]["state"] == "done" and m["pulled"], m
        assert files.requests[-1][1] == f"bytes={part.stat().st_size if part.exists() else len(data) // 3}-" \
            or files.requests[-1][1].startswith("bytes="), files.requests
        assert (c.data / "models" / "smollm.gguf").read_bytes() == data
        # with no file given, the pulled model is the one used
        reply, frames = c.turn("Hi!")
        assert reply.strip() and not [f for f in frames if f["type"] == "error"], frames
    finally:
        c.stop()


def test_a_bad_checksum_is_refused_and_deleted(files, gguf, tmp_path):
    data = gguf.read_bytes()[: 1 << 20]
    cat = tmp_path / "catalog.json"
    cat.write_text(json.dumps([files.entry("bad-sum", "bad.gguf", data, sha="0" * 64)]))
    c = Companiond(tmp_path, env={"COMPANIOND_MODEL_CATALOG": str(cat)})
    try:
        c.post("/api/local/models/bad-sum/pull")
        m = wait_pull(c, "bad-sum")
        assert m["download"]["error_code"] == "checksum_mismatch", m
        assert not (c.data / "models" / "bad.gguf").exists()
        assert not (c.data / "models" / "bad.gguf.part").exists()
        assert c.post("/api/local/models/no-such-model/pull").status_code == 404
    finally:
        c.stop()


def test_a_full_disk_is_refused_before_the_download(files, gguf, tmp_path):
    data = gguf.read_bytes()
    cat = tmp_path / "catalog.json"
    cat.write_text(json.dumps([files.entry("big", "big.gguf", data)]))
    models = tmp_path / "data" / "models"
    models.mkdir(parents=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(models)],
                       capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {r.stderr.decode().strip()}")
    try:
        # the CLI: `companiond model pull NAME`
        p = subprocess.run([binary(), "model", "pull", "big", "--data-dir", str(tmp_path / "data")],
                           env={**os.environ, "COMPANIOND_MODEL_CATALOG": str(cat)},
                           capture_output=True, timeout=120)
        assert p.returncode == 1, p
        assert b"not enough free disk space" in p.stderr, p.stderr
        assert not list(models.iterdir()), list(models.iterdir())
    finally:
        subprocess.run(["umount", str(models)])


def test_the_cli_pulls_a_model(files, gguf, tmp_path):
    data = gguf.read_bytes()
    cat = tmp_path / "catalog.json"
    cat.write_text(json.dumps([files.entry("cli-smollm", "cli.gguf", data)]))
    env = {**os.environ, "COMPANIOND_MODEL_CATALOG": str(cat)}
    out = subprocess.run([binary(), "model", "list", "--data-dir", str(tmp_path / "d")],
                         env=env, capture_output=True, timeout=60)
    assert out.returncode == 0 and b"cli-smollm" in out.stdout and b"qwen3-0.6b" in out.stdout
    files.cut["cli.gguf"] = 1000
    p = subprocess.run([binary(), "model", "pull", "cli-smollm", "--data-dir", str(tmp_path / "d")],
                       env=env, capture_output=True, timeout=120)
    assert p.returncode == 1 and b"pull again to resume" in p.stderr, p.stderr
    p = subprocess.run([binary(), "model", "pull", "cli-smollm", "--data-dir", str(tmp_path / "d")],
                       env=env, capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert Path(p.stdout.decode().strip()).read_bytes() == data
    assert files.requests[-1][1] == "bytes=1000-", files.requests
