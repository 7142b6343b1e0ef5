"""Shared fixtures: the in-code ``tiny`` pair and a reference greedy decoder."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# as engine/__init__.py does, but before torch is imported here
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest  # noqa: E402
import torch  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never reach a model hub
torch.set_num_threads(2)

from engine.models.pair import ModelPair, load_model_pair  # noqa: E402


@pytest.fixture(scope="session")
def tiny_pair() -> ModelPair:
    return load_model_pair("tiny", device="cpu")


@pytest.fixture
def runs_dir(tmp_path, monkeypatch) -> Path:
    """A fresh runs directory for the dashboard, whose default preset is ``tiny``."""
    path = tmp_path / "runs"
    monkeypatch.setenv("PDV_RUNS_DIR", str(path))
    monkeypatch.setenv("PDV_DEFAULT_PRESET", "tiny")
    return path


def hf_greedy(model: torch.nn.Module, prompt_ids: list[int], max_new_tokens: int, stop: bool = False) -> list[int]:
    """The verifier alone, through transformers' own ``generate``.

    ``stop=False`` ignores end-of-sequence tokens (compare with ``stop_token_ids=()``).
    """
    from transformers import GenerationConfig

    config = GenerationConfig(
        max_new_tokens=max_new_tokens,
        do_sample=False,
        eos_token_id=model.generation_config.eos_token_id if stop else None,
        pad_token_id=0,
    )
    previous = model.config._attn_implementation
    model.set_attn_implementation("sdpa")
    try:
        with torch.inference_mode():
            ids = torch.tensor([prompt_ids])
            out = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config)
    finally:
        model.set_attn_implementation(previous)
    return out[0, len(prompt_ids) :].tolist()


def pytest_collection_modifyitems(config, items):
    if os.environ.get("PDV_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="marked slow (over a minute: larger models, the soak); run with PDV_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI=true a skip is a failure, unless the test is marked ``slow`` (which says why it may skip)."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and in_ci() and item.get_closest_marker("slow") is None and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, and only tests marked slow may skip there: {reason}"


def greedy_run_matches_verifier(
    pair: ModelPair,
    engine: str,
    prompts: list[str],
    max_new_tokens: int,
    config=None,
    stop: bool = False,
    timeout: float = 120,
) -> list:
    """Run ``prompts`` greedily through ``engine`` and check each output against the verifier's own ``generate``.

    ``stop=False`` runs without stop tokens on both sides. Returns the finished requests.
    """
    from engine.config import EngineConfig, SamplingParams
    from engine.request import Request
    from engine.schedulers.registry import make_engine

    params = SamplingParams(max_new_tokens=max_new_tokens, **({} if stop else {"stop_token_ids": ()}))
    requests = [Request(f"g{i}", pair.encode_prompt(p), params) for i, p in enumerate(prompts)]
    eng = make_engine(engine, pair, config or EngineConfig(engine=engine, drafter="model"))
    try:
        eng.generate(requests, timeout=timeout)
    finally:
        eng.stop()
    for r in requests:
        assert r.status == "ok", r.error
        assert r.output_token_ids == hf_greedy(pair.verifier.model, r.prompt_token_ids, max_new_tokens, stop=stop)
    return requests
