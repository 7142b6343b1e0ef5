"""MT-Bench's questions: 80 two-turn questions in 8 categories, bundled in ``data/``.

This module only reads the questions and names their requests; replaying them
as two turns is ``workloads.drivers.mt_bench``'s job.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from workloads.datasets.sharegpt import SampledRequest

MT_BENCH_QUESTIONS = Path(__file__).resolve().parent / "data" / "mt_bench_questions.jsonl"


def questions() -> list[dict[str, Any]]:
    """MT-Bench's questions, interleaved by category (one of each in turn): any prefix covers every category."""
    rows = [json.loads(line) for line in MT_BENCH_QUESTIONS.read_text().splitlines() if line.strip()]
    rank: dict[str, int] = {}
    order = []
    for q in rows:
        n = rank.get(q["category"], 0)
        rank[q["category"]] = n + 1
        order.append((n, list(rank).index(q["category"]), q))
    return [q for *_, q in sorted(order, key=lambda t: (t[0], t[1]))]


def request_id(question: dict[str, Any], turn: int) -> str:
    return f"mt{question['question_id']}-{question['category']}-t{turn}"


def category_of(request_id: str) -> str:
    return request_id.split("-")[1]


def first_turns(num_requests: int, output_len: int) -> list[SampledRequest]:
    """The first turns of the first ``num_requests`` questions (at most 80)."""
    return [SampledRequest(request_id(q, 1), q["turns"][0], output_len) for q in questions()[:num_requests]]
