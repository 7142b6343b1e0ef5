"""Fixtures every folder shares, the CI rule on skips, and the rule that no background thread outlives the session.

Imports nothing heavy: a test that needs a model asks for ``tiny_pair`` (or imports
``tests.support.greedy``), and pure tests load no torch.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from pathlib import Path

import pytest

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


@pytest.fixture(autouse=True)
def no_engine_outlives_its_test():
    """Stop the engines a test started and left running (a failed assertion before its ``stop``), so that they
    load no later test; a warning names them. Module- and session-scoped fixtures start theirs before this
    fixture looks, so they are left to their own teardown."""
    if "engine.schedulers.shutdown" not in sys.modules:  # no engine can have started yet
        before: set[int] = set()
    else:
        before = {id(e) for e in sys.modules["engine.schedulers.shutdown"].running_engines()}
    yield
    shutdown = sys.modules.get("engine.schedulers.shutdown")
    left = [e for e in shutdown.running_engines() if id(e) not in before] if shutdown else []
    for engine in left:
        engine.stop(timeout=LEAK_WAIT_S)
    if left:
        warnings.warn(f"the test left engines running, stopped after it: {', '.join(e.name for e in left)}",
                      stacklevel=1)  # fmt: skip


LEAK_WAIT_S = 30.0  # stopped lanes end at their next step boundary; a busy two-core machine takes a while
_first_seen_after: dict[threading.Thread, str] = {}  # background thread -> the test after which it was first alive


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Note which test left each background thread alive, to name it if the thread outlives the session."""
    yield
    from tests.support.threads import background_threads

    for thread in background_threads():
        _first_seen_after.setdefault(thread, item.nodeid)


def pytest_sessionfinish(session, exitstatus):
    """Engine lanes, dashboard launches or samplers alive at the end fail the run, each named with the test
    that left it: a leaked run loads the CPU for every later test and is stopped only at interpreter exit."""
    if not _first_seen_after:
        return
    from tests.support.threads import wait_for_no_background_threads

    leaked = wait_for_no_background_threads(LEAK_WAIT_S)
    if not leaked:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"{t.name} (alive since {_first_seen_after.get(t, 'an unknown test')})" for t in leaked]
    message = f"background threads still running at the end of the session: {'; '.join(lines)}"
    if reporter is not None:
        reporter.write_sep("=", "background threads outlived the session", red=True)
        reporter.write_line(message, red=True, bold=True)
    else:
        print(message)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
