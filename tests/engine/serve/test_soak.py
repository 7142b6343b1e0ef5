"""Soak: thousands of requests through ``python -m engine serve`` (tiny preset) at high concurrency.

The server's resident memory, threads and open file descriptors are sampled
as requests complete; the last quarter of the run must show no growth over
the first. Streamed and plain requests alternate, and every tenth streamed
client leaves after its first chunk, so cancellation is soaked too.

As a test (marked ``slow`` and ``soak``: ``PDV_SLOW=1 python -m pytest -q -m soak``) or as a
script printing the figures and one JSON line::

    python tests/engine/serve/test_soak.py --requests 2000 --concurrency 64
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time

import httpx
import psutil
import pytest

from tests.support import ROOT as ROOT_DIR

ROOT = ROOT_DIR
START_TIMEOUT_S = 180
SOAK_REQUESTS = 20_000  # enough for ~1 KB kept per request (20 MB) to stand far out of allocator noise
RSS_TOLERANCE = 0.01  # the last quarter's median RSS may exceed the second's by at most 1 % (the first warms up)
# open connections come and go (leaving clients reconnect), so the count of sockets moves by a few at any
# moment; a leak of one descriptor per request would add hundreds
FD_TOLERANCE = 4


def _start_server(engine: str) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, "-m", "engine", "serve", "--preset", "tiny", "--device", "cpu", "--engine", engine]
    command += ["--host", "127.0.0.1", "--port", "0"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    ready: list[str] = []
    reader = threading.Thread(target=lambda: ready.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_S)
    if not ready or "http://" not in ready[0]:
        proc.kill()
        raise RuntimeError(f"the server did not start: {ready!r}")
    return proc, ready[0].strip().rsplit(" ", 1)[-1].removesuffix("/v1")


async def _one(http: httpx.AsyncClient, i: int, max_tokens: int) -> str:
    body = {"prompt": f"request {i} about rivers", "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
    if i % 2 == 0:
        response = await http.post("/v1/completions", json=body)
        return "ok" if response.status_code == 200 else f"http {response.status_code}"
    async with http.stream("POST", "/v1/completions", json={**body, "stream": True}) as response:
        async for line in response.aiter_lines():
            if i % 20 == 1 and line.startswith("data: {"):
                return "left"  # every tenth streamed client leaves after its first chunk
        return "ok" if response.status_code == 200 else f"http {response.status_code}"


async def _drive(url: str, process: psutil.Process, requests: int, concurrency: int, max_tokens: int) -> dict:
    samples: list[tuple[int, float, int, int]] = []  # (completed, rss MB, threads, fds)
    outcomes: dict[str, int] = {}
    next_index, done = 0, 0
    sample_every = max(1, requests // 40)

    async def worker(http: httpx.AsyncClient) -> None:
        nonlocal next_index, done
        while next_index < requests:
            i, next_index = next_index, next_index + 1
            outcome = await _one(http, i, max_tokens)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            done += 1
            if done % sample_every == 0:
                with process.oneshot():
                    samples.append((done, process.memory_info().rss / 2**20, process.num_threads(), process.num_fds()))

    start = time.perf_counter()
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=httpx.Limits(max_connections=concurrency)) as http:
        await asyncio.gather(*(worker(http) for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    return {"samples": samples, "outcomes": outcomes, "elapsed_s": elapsed}


def soak(requests: int = 2000, concurrency: int = 64, max_tokens: int = 16, engine: str = "pdv") -> dict:
    """Run the soak; the figures as a dict (also what the script prints)."""
    proc, url = _start_server(engine)
    try:
        run = asyncio.run(_drive(url, psutil.Process(proc.pid), requests, concurrency, max_tokens))
        metrics = httpx.get(f"{url}/metrics").text
        health = httpx.get(f"{url}/health").status_code
    finally:
        proc.terminate()
        proc.wait(60)
    samples = run["samples"]
    first = [s for s in samples if s[0] <= requests // 4]
    last = [s for s in samples if s[0] > requests - requests // 4]
    figures = {
        "requests": requests,
        "concurrency": concurrency,
        "max_tokens": max_tokens,
        "engine": engine,
        "elapsed_s": round(run["elapsed_s"], 1),
        "requests_per_s": round(requests / run["elapsed_s"], 1),
        "outcomes": run["outcomes"],
        "health_after": health,
        "rss_mb_first_quarter_median": round(statistics.median(s[1] for s in first), 1),
        "rss_mb_last_quarter_median": round(statistics.median(s[1] for s in last), 1),
        "rss_mb_max": round(max(s[1] for s in samples), 1),
        "rss_mb_median_by_quarter": [
            round(statistics.median(s[1] for s in samples if q * requests < 4 * s[0] <= (q + 1) * requests), 1)
            for q in range(4)
        ],
        "threads_first_quarter_max": max(s[2] for s in first),
        "threads_last_quarter_max": max(s[2] for s in last),
        "fds_first_quarter_max": max(s[3] for s in first),
        "fds_last_quarter_max": max(s[3] for s in last),
        "kv_cache_usage_after": _gauge(metrics, "vllm:kv_cache_usage_perc"),
        "unfinished_after": _gauge(metrics, "pdverify:requests_unfinished"),
    }
    return figures


def _gauge(metrics: str, name: str) -> float:
    line = next(line for line in metrics.splitlines() if line.startswith(name))
    return float(line.rsplit(" ", 1)[-1])


@pytest.mark.slow
@pytest.mark.soak
def test_a_20000_request_soak_through_the_server_shows_no_growth_in_memory_threads_or_fds():
    f = soak(SOAK_REQUESTS, 64)
    print(json.dumps(f))
    assert f["outcomes"].get("ok", 0) + f["outcomes"].get("left", 0) == SOAK_REQUESTS, f["outcomes"]
    assert f["health_after"] == 200 and f["kv_cache_usage_after"] == 0 and f["unfinished_after"] == 0
    _, second, _, last = f["rss_mb_median_by_quarter"]
    assert last <= second * (1 + RSS_TOLERANCE), f
    assert f["threads_last_quarter_max"] <= f["threads_first_quarter_max"], f
    assert f["fds_last_quarter_max"] <= f["fds_first_quarter_max"] + FD_TOLERANCE, f


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--engine", default="pdv")
    args = parser.parse_args()
    f = soak(args.requests, args.concurrency, args.max_tokens, args.engine)
    for key, value in f.items():
        print(f"{key:32} {value}")
    print(json.dumps(f))


if __name__ == "__main__":
    main()
