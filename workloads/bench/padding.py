"""The packed attention's groups against one padded call, on the load sweep's prompts
(``python -m workloads bench --parts forward-cost --forward-cost-measures padding``).

The verifier's forward at ``PADDED_ROWS`` rows whose caches hold the first
held-out prompts the load sweep serves (their own tokens, so the rows' lengths
are a real batch's: mostly 30–90 tokens, a few of hundreds), one and five new
tokens per row (a decode and a verify step), for each group overhead of
``OVERHEADS``: ``one`` makes every row one padded call (the layout before
groups), the others are ``attention_groups``'s fixed cost per group, the
engine's default among them. The cases are interleaved in every repeat; rows
are labelled ``rows`` = ``PADDED_ROWS``, ``tokens`` = new tokens per row,
metrics ``padded_ms_<overhead>`` (median wall milliseconds) and
``groups_<overhead>`` (the groups that forward ran).
"""

from __future__ import annotations

import statistics
import time

import torch

from engine.attention import GROUP_OVERHEAD, attention_groups
from engine.models.pair import ModelPair
from workloads.drivers.trace import Trace

PADDED_ROWS = 16
ONE_GROUP = 1 << 62
OVERHEADS = (ONE_GROUP, 0, 512, GROUP_OVERHEAD, 8192)


def _name(overhead: int) -> str:
    return "one" if overhead == ONE_GROUP else str(overhead)


def padding_rows(label: str, round_: int, pair: ModelPair, trace: Trace, repeats: int) -> list[dict]:
    """Median milliseconds of ``pair``'s verifier forward over ``trace``'s first prompts, per group overhead."""
    runner = pair.verifier
    prompts = [list(item.prompt_token_ids) for item in trace.items[:PADDED_ROWS]]
    lengths = [len(p) for p in prompts]
    common = {"label": label, "round": round_, "preset": pair.source.get("preset") or "custom", "rows": len(prompts)}
    out = []
    kept = runner.group_overhead
    try:
        for tokens in (1, 5):
            stores = [runner.new_store(n + tokens) for n in lengths]
            runner.forward(stores, torch.tensor([t for p in prompts for t in p]), lengths, torch.tensor([0]))
            ids = torch.randint(0, runner.vocab_size, (tokens * len(prompts),), generator=torch.Generator())
            keep = torch.arange(ids.shape[0])
            times: dict[int, list[float]] = {o: [] for o in OVERHEADS}
            for _ in range(repeats + 1):  # the first pass warms every shape up and is not kept
                for overhead in OVERHEADS:
                    runner.group_overhead = overhead
                    start = time.perf_counter()
                    runner.forward(stores, ids.to(runner.device), [tokens] * len(prompts), keep.to(runner.device))
                    if runner.device.type == "cuda":
                        torch.cuda.synchronize(runner.device)
                    times[overhead].append(time.perf_counter() - start)
                    for store, n in zip(stores, lengths, strict=True):
                        store.truncate(n)
            ends = [n + tokens for n in lengths]
            for overhead, t in times.items():
                groups = len(attention_groups(ends, [tokens] * len(ends), overhead))
                row = {**common, "tokens": tokens}
                ms = round(statistics.median(t[1:]) * 1000, 2)
                out.append({**row, "metric": f"padded_ms_{_name(overhead)}", "value": ms})
                out.append({**row, "metric": f"groups_{_name(overhead)}", "value": groups})
    finally:
        runner.group_overhead = kept
    return out
