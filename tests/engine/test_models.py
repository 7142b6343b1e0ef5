"""Model-pair loading refuses bad pairs before any engine starts."""

import json
import subprocess
import sys

import pytest
from transformers import LlamaConfig, LlamaForCausalLM

from engine.models.pair import ModelLoadError, load_model_pair, resolve_device
from engine.models.tiny import tiny_tokenizer
from tests.support import ROOT


def save_llama(path, vocab_size: int, with_tokenizer: bool = True):
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=256,
        eos_token_id=vocab_size - 1,
    )
    LlamaForCausalLM(config).save_pretrained(path)
    if with_tokenizer:
        tiny_tokenizer().save_pretrained(path)


def test_local_directories_load_as_a_pair(tmp_path):
    save_llama(tmp_path / "d", 257)
    save_llama(tmp_path / "v", 257)
    pair = load_model_pair(draft_model=str(tmp_path / "d"), verifier_model=str(tmp_path / "v"), device="cpu")
    assert pair.draft.vocab_size == pair.verifier.vocab_size == 257
    assert pair.encode_prompt("hi", raw=True) == [71, 72]


def test_pair_with_different_vocabularies_is_refused(tmp_path):
    save_llama(tmp_path / "d", 300)
    save_llama(tmp_path / "v", 257)
    with pytest.raises(ModelLoadError, match="different vocabularies"):
        load_model_pair(draft_model=str(tmp_path / "d"), verifier_model=str(tmp_path / "v"))


def test_pair_with_different_tokenizers_is_refused(tmp_path):
    save_llama(tmp_path / "d", 257)
    save_llama(tmp_path / "v", 257)
    vocab_file = tmp_path / "d" / "tokenizer.json"
    data = json.loads(vocab_file.read_text())
    vocab = data["model"]["vocab"]
    a, b = list(vocab)[:2]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    vocab_file.write_text(json.dumps(data))
    with pytest.raises(ModelLoadError, match="tokenizers differ"):
        load_model_pair(draft_model=str(tmp_path / "d"), verifier_model=str(tmp_path / "v"))


def test_missing_path_and_offline_hub_id_are_refused_with_clear_messages(monkeypatch):
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_model_pair(draft_model="./no/such/dir", verifier_model="./nope")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match="hub is offline"):
        load_model_pair(draft_model="HuggingFaceTB/SmolLM2-135M", verifier_model="HuggingFaceTB/SmolLM2-360M")
    with pytest.raises(ModelLoadError, match="both"):
        load_model_pair(draft_model="a/b")
    with pytest.raises(ModelLoadError, match="unknown preset"):
        load_model_pair("huge")


def test_an_unknown_device_is_refused():
    # cuda without CUDA is tests/engine/test_devices.py's
    with pytest.raises(ModelLoadError, match="device must be"):
        resolve_device("tpu")


def test_cli_generate_prints_one_json_object():
    cmd = [
        sys.executable,
        "-m",
        "engine",
        "generate",
        "--engine",
        "baseline",
        "--preset",
        "tiny",
        "--prompt",
        "hi",
        "--max-new-tokens",
        "16",
        "--json",
    ]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["prompt_token_ids"] == [71, 72]
    assert len(result["token_ids"]) == 16
    assert result["drafted"] >= result["accepted"] >= 0
    assert result["verify_steps"] > 0 and result["elapsed_s"] > 0
    assert set(result) >= {"text", "drafted", "accepted", "verify_steps", "elapsed_s"}
    assert result["models"]["preset"] == "tiny" and int(result["models"]["draft_params"]) > 0
    # tiny float32 pair: 3-layer verifier + 2-layer draft, both with their own (tied) embedding
    params = int(result["models"]["draft_params"]) + int(result["models"]["verifier_params"])
    assert result["weights_mb"] >= params * 4 / 2**20 - 0.05  # reported to 0.1 MB
    assert result["rss_mb"] > result["weights_mb"]


@pytest.mark.parametrize("engine", ["ar", "pdv"])
def test_cli_generate_works_for_every_engine_and_rejects_bad_flags(engine):
    cmd = [
        sys.executable,
        "-m",
        "engine",
        "generate",
        "--engine",
        engine,
        "--preset",
        "tiny",
        "--prompt",
        "hello",
        "--max-new-tokens",
        "5",
        "--json",
    ]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)["token_ids"]) == 5
    bad = subprocess.run(cmd[:-3] + ["--max-new-tokens", "0"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--max-new-tokens must be >= 1" in bad.stderr


def test_cli_dtype_sets_both_models_and_a_bad_one_is_one_error():
    cmd = [sys.executable, "-m", "engine", "generate", "--preset", "tiny", "--prompt", "hi", "--max-new-tokens", "4"]
    out = subprocess.run([*cmd, "--dtype", "bfloat16", "--json"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    models = json.loads(out.stdout)["models"]
    assert (models["dtype"], models["draft_dtype"]) == ("bfloat16", "bfloat16")
    bad = subprocess.run([*cmd, "--dtype", "float33"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "invalid choice: 'float33'" in bad.stderr
    with pytest.raises(ModelLoadError, match="floating-point torch dtype"):
        load_model_pair(preset="tiny", device="cpu", dtype="int8")
