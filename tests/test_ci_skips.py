"""Under CI=true a skipped test fails the run, unless it is marked ``slow``; elsewhere skips stay skips."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TESTS = """
import pytest

def test_needs_a_missing_file():
    pytest.skip("the fixture file is not present")

@pytest.mark.skipif(True, reason="the browser is not installed")
def test_needs_a_browser():
    pass

@pytest.mark.slow
def test_needs_real_models():
    pass

def test_plain():
    pass
"""

CONFTEST = """
from tests.conftest import pytest_collection_modifyitems, pytest_runtest_makereport  # noqa: F401

def pytest_configure(config):
    config.addinivalue_line("markers", "slow: needs real multi-GB models")
"""


def run_pytest(tmp_path: Path, ci: str | None) -> str:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_example.py").write_text(TESTS)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PDV_SLOW")}
    env["PYTHONPATH"] = str(ROOT)
    if ci is not None:
        env["CI"] = ci
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return done.stdout.strip().splitlines()[-1]


def test_a_skip_fails_under_ci_unless_marked_slow(tmp_path):
    # a skip in the test body fails it; a skipif marker fails its setup (an error)
    assert run_pytest(tmp_path, "true").startswith("1 failed, 1 passed, 1 skipped, 1 error in")


def test_skips_stay_skips_outside_ci(tmp_path):
    assert run_pytest(tmp_path, None).startswith("1 passed, 3 skipped in")
