"""Which intra-op thread counts each lane of an engine computes with, seen from inside its stages."""

from __future__ import annotations

import threading

import torch

from engine.config import ControllerConfig, EngineConfig, LaneCompute
from engine.schedulers.registry import make_engine
from tests.support.short_requests import run_short_requests

STAGES = ("_prefill", "_step", "_draft", "_verify")


def threads_seen_by_each_lane(
    pair, compute: LaneCompute, engine: str = "pdv"
) -> tuple[dict[str, set[int]], int, list[list[int]]]:
    """Run ``engine`` (PDV pipelined, so every lane works) and record ``torch.get_num_threads()`` on each lane's
    thread as its stages run. Returns {thread name: counts seen}, the arbiter's slots and the outputs."""
    config = EngineConfig(
        drafter="model",
        controller=ControllerConfig(kind="fixed"),
        hybrid_threshold=None,
        lane_compute=compute,
        intra_op_threads=2,
    )
    eng = make_engine(engine, pair, config)
    seen: dict[str, set[int]] = {}

    def recorded(stage):
        def run(*args, **kwargs):
            seen.setdefault(threading.current_thread().name, set()).add(torch.get_num_threads())
            return stage(*args, **kwargs)

        return run

    for name in STAGES:
        setattr(eng, name, recorded(getattr(eng, name)))
    requests = run_short_requests(eng)
    return seen, eng.arbiter.slots, [r.output_token_ids for r in requests]
