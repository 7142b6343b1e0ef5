"""Fixtures every folder shares, and the CI rule on skips.

Imports nothing heavy: a test that needs a model asks for ``tiny_pair`` (or imports
``tests.support.greedy``), and pure tests load no torch.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# as engine/__init__.py does, before any test imports torch
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never reach a model hub


@pytest.fixture(scope="session", autouse=True)
def profiles_dir(tmp_path_factory) -> Path:
    """Step cost profiles go to a temporary directory: one timed on a machine busy with tests is never kept."""
    path = tmp_path_factory.mktemp("profiles")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PDV_PROFILE_DIR", str(path))
        yield path


@pytest.fixture(scope="session")
def tiny_pair(profiles_dir):
    """The tiny pair, with the step costs of the default engine configs measured as every command does first.

    Engines never measure their profile (``engine.profiling``); a test whose config changes the grid
    (``--max-batch-size``, ``--max-draft-len``) runs ``prepare_profile`` itself.
    """
    from engine.models.pair import load_model_pair
    from engine.profiling import prepare_default_profiles

    pair = load_model_pair("tiny", device="cpu")
    prepare_default_profiles(pair)
    return pair


@pytest.fixture
def runs_dir(tmp_path, monkeypatch) -> Path:
    """A fresh runs directory for the dashboard, whose default preset is ``tiny``."""
    path = tmp_path / "runs"
    monkeypatch.setenv("PDV_RUNS_DIR", str(path))
    monkeypatch.setenv("PDV_DEFAULT_PRESET", "tiny")
    return path


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
