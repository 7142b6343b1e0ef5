"""Helpers for the server tests: an app over a fresh tiny engine, SSE parsing, a real uvicorn on loopback."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import uvicorn
from fastapi import FastAPI

from engine.config import EngineConfig, SamplingParams
from engine.models.pair import ModelPair
from engine.profiling import prepare_profile
from engine.request import Request
from engine.schedulers.base import Engine
from engine.schedulers.registry import make_engine
from engine.serve.app import build_app

MODEL = "tiny"


@dataclass
class Served:
    app: FastAPI
    engine: Engine
    submitted: list[Request] = field(default_factory=list)  # every Request the app handed the engine


def served(pair: ModelPair, engine: str = "baseline", api_key: str | None = None, **config) -> Served:
    """An app over a fresh ``engine`` on ``pair``, its step-cost profile read or measured first as ``serve`` does."""
    engine_config = EngineConfig(**config)
    prepare_profile(pair, engine_config, engine=engine)
    eng = make_engine(engine, pair, engine_config)
    result = Served(build_app(eng, pair, MODEL, api_key=api_key), eng)
    submit = eng.submit

    def recording_submit(request: Request) -> Request:
        result.submitted.append(request)
        return submit(request)

    eng.submit = recording_submit
    return result


def in_process_greedy(pair: ModelPair, prompt_ids: list[int], max_tokens: int, engine: str = "ar") -> list[int]:
    """The token ids the engine gives in-process, greedy, for the same prompt."""
    prepare_profile(pair, EngineConfig(), engine=engine)
    eng = make_engine(engine, pair)
    try:
        params = SamplingParams(temperature=0.0, max_new_tokens=max_tokens)
        (request,) = eng.generate([Request("reference", prompt_ids, params)], timeout=60)
    finally:
        eng.stop()
    return request.output_token_ids


def sse_events(lines: Iterable[str]) -> list[dict | str]:
    """The ``data:`` payloads of a server-sent event stream: dicts, and the final "[DONE]"."""
    events = []
    for line in lines:
        if line.startswith("data: "):
            payload = line.removeprefix("data: ")
            events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def wait_until(condition, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


@contextmanager
def uvicorn_thread(app: FastAPI) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free 127.0.0.1 port in a thread; yields the base URL."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        assert wait_until(lambda: server.started or not thread.is_alive()) and server.started
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
