"""A process that exits while an engine is mid-run exits cleanly (Ctrl-C in ``replay``, Streamlit stopped).

Without the exit hook (``engine.schedulers.shutdown``) the lane threads are ended inside torch as the
interpreter finalises, and the process aborts: "terminate called without an active exception", status 134.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support import ROOT

SCRIPT = """
import sys
import time
from engine.config import SamplingParams
from engine.models.pair import load_model_pair
from engine.request import Request
from engine.schedulers.registry import make_engine

pair = load_model_pair("tiny", device="cpu")
eng = make_engine(sys.argv[1], pair).start()
requests = [eng.submit(Request(str(i), list(range(5, 60)), SamplingParams(max_new_tokens=256))) for i in range(64)]
deadline = time.monotonic() + 120
while not requests[0].output_token_ids and time.monotonic() < deadline:  # exit once tokens are flowing
    time.sleep(0.01)
assert requests[0].output_token_ids, "no token within 120 s"
print("exiting mid-run with", eng.stats().unfinished, "requests unfinished", flush=True)
"""


@pytest.mark.parametrize("engine", ["ar", "pdv"])
def test_exiting_with_an_engine_mid_run_stops_it_and_exits_cleanly(tiny_pair, profiles_dir, engine):
    # tiny_pair: the default profiles are measured already, in the directory the child inherits
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, engine], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "exiting mid-run with" in result.stdout
    unfinished = int(result.stdout.split("with")[1].split()[0])
    assert unfinished > 0  # it really was mid-run
    assert f"stopped the engines still running at exit: {engine}" in result.stderr
    assert "terminate called" not in result.stderr
