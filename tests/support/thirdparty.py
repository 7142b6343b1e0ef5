"""Helpers for the tests against software PD-Verify did not write: servers and clients run as real processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support import ROOT as ROOT_DIR

ROOT = ROOT_DIR
# no hub, no update checks: everything a third-party tool needs is on this machine
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1", "HF_DATASETS_OFFLINE": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, **OFFLINE_ENV, **extra}


def log_tail(path: Path, chars: int = 3000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else "(no log)"


@contextmanager
def server_process(argv: list[str], url: str, log: Path, ready_timeout: float = 180.0) -> Iterator[str]:
    """Run ``argv`` as a server until ``url``/health answers 200; yields ``url``; stops the process afterwards."""
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env(), cwd=ROOT)
    try:
        deadline = time.monotonic() + ready_timeout
        while True:
            if proc.poll() is not None:
                pytest.fail(f"{argv[:4]} exited with {proc.returncode} before it served:\n{log_tail(log)}")
            try:
                if httpx.get(f"{url}/health", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"{argv[:4]} did not answer /health within {ready_timeout:.0f} s:\n{log_tail(log)}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def engine_serve_argv(port: int, engine: str = "pdv") -> list[str]:
    """``python -m engine serve`` on the tiny preset, as a user starts it."""
    return [sys.executable, "-m", "engine", "serve", "--preset", "tiny", "--device", "cpu", "--engine", engine,
            "--port", str(port)]  # fmt: skip


def counters(url: str) -> dict[str, float]:
    """Every counter of ``url``/metrics summed over its labels, by the name of its ``_total`` sample."""
    text = httpx.get(f"{url}/metrics", timeout=5.0).text
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.type != "counter":
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals
