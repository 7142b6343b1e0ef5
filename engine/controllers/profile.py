"""What a step costs on this machine: verifier and draft forward times by batch size and tokens per row.

The ``cost`` controller chooses draft lengths from these times. They are
measured once per machine, model pair, dtype and thread count – real forwards
over real KV stores holding ``CONTEXT`` tokens – and cached as JSON under the
cache root (``profiles/``), so a later start reads them back in milliseconds.
``python -m engine profile`` measures (or reads) and prints one.

Between measured points times are interpolated linearly; beyond the grid the
nearest edge is used.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from bisect import bisect_left
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from engine.config import EngineConfig
from engine.devices import cpu_name
from engine.drafters import Drafter
from engine.models.gguf_cache import cache_root
from engine.models.pair import ModelPair
from engine.runner import ModelRunner

log = logging.getLogger(__name__)

CONTEXT = 128  # tokens already in each row's cache while timing: a short chat prompt
REPEATS = 3  # timings per point; the median is kept
BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
TOKENS = (1, 2, 3, 5, 9, 17)  # tokens per row in one verifier forward (L + 1)


@dataclass(frozen=True)
class CostProfile:
    batch_sizes: tuple[int, ...]
    tokens: tuple[int, ...]
    verify_ms: tuple[tuple[float, ...], ...]  # [batch size][tokens per row]: one verifier forward
    draft_ms: tuple[float, ...]  # [batch size]: one draft forward of one token per row; () without a draft
    machine: dict[str, str]  # what the times were measured on

    def verify_s(self, batch: int, tokens_per_row: float) -> float:
        rows = [_interpolate(self.tokens, row, tokens_per_row) for row in self.verify_ms]
        return _interpolate(self.batch_sizes, rows, batch) / 1000

    def draft_s(self, batch: int) -> float:
        """One draft position for ``batch`` rows (0 without a draft model)."""
        return _interpolate(self.batch_sizes, self.draft_ms, batch) / 1000 if self.draft_ms else 0.0

    def table(self) -> str:
        """The profile as a text table (milliseconds)."""
        head = (
            "batch  " + "  ".join(f"verify t={t:<3d}" for t in self.tokens) + ("  draft/pos" if self.draft_ms else "")
        )
        lines = [head]
        for i, b in enumerate(self.batch_sizes):
            cells = "  ".join(f"{v:12.1f}" for v in self.verify_ms[i])
            draft = f"  {self.draft_ms[i]:9.1f}" if self.draft_ms else ""
            lines.append(f"{b:5d}  {cells}{draft}")
        return "\n".join(lines)


def _interpolate(xs: tuple[int, ...], ys, x: float) -> float:
    i = bisect_left(xs, x)
    if i == 0:
        return ys[0]
    if i == len(xs):
        return ys[-1]
    x0, x1 = xs[i - 1], xs[i]
    return ys[i - 1] + (ys[i] - ys[i - 1]) * (x - x0) / (x1 - x0)


def _time_forwards(runner: ModelRunner, batch: int, tokens: tuple[int, ...]) -> tuple[float, ...]:
    """Median milliseconds of one forward of t new tokens on each of ``batch`` rows, for each t in ``tokens``."""
    stores = [runner.new_store(CONTEXT + max(tokens)) for _ in range(batch)]
    gen = torch.Generator().manual_seed(0)
    context = torch.randint(0, runner.vocab_size, (batch * CONTEXT,), generator=gen).to(runner.device)
    runner.forward(stores, context, [CONTEXT] * batch, torch.tensor([CONTEXT - 1], device=runner.device))
    medians = []
    for t in tokens:
        times = []
        for _ in range(REPEATS):
            ids = torch.randint(0, runner.vocab_size, (batch * t,), generator=gen).to(runner.device)
            start = time.perf_counter()
            runner.forward(stores, ids, [t] * batch, torch.arange(batch * t, device=runner.device))
            if runner.device.type == "cuda":
                torch.cuda.synchronize(runner.device)
            times.append(time.perf_counter() - start)
            for store in stores:
                store.truncate(CONTEXT)
        medians.append(sorted(times)[len(times) // 2] * 1000)
    return tuple(medians)


def measure(pair: ModelPair, max_batch: int, max_tokens: int, with_draft: bool) -> CostProfile:
    """Time the verifier (and the draft) on the grid up to ``max_batch`` rows and ``max_tokens`` per row."""
    batches = tuple(b for b in BATCH_SIZES if b < max_batch) + (max_batch,)
    tokens = tuple(t for t in TOKENS if t < max_tokens) + (max_tokens,)
    verify = tuple(_time_forwards(pair.verifier, b, tokens) for b in batches)
    draft = tuple(_time_forwards(pair.draft, b, (1,))[0] for b in batches) if with_draft else ()
    return CostProfile(batches, tokens, verify, draft, machine_key(pair))


def machine_key(pair: ModelPair) -> dict[str, str]:
    return {
        "cpu": cpu_name(),
        "device": str(pair.device),
        "torch": torch.__version__,
        "threads": str(torch.get_num_threads()),
        "verifier": str(pair.source.get("verifier", "")),
        "draft": str(pair.source.get("draft", "")),
        "preset": str(pair.source.get("preset", "")),
        "dtype": f"{pair.verifier.dtype}/{pair.draft.dtype}",
    }


def profile_path(pair: ModelPair, max_batch: int, max_tokens: int, with_draft: bool) -> Path:
    key = {**machine_key(pair), "max_batch": max_batch, "max_tokens": max_tokens, "draft": with_draft}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_root() / "profiles" / f"{digest}.json"


def load_or_measure(pair: ModelPair, max_batch: int, max_tokens: int, with_draft: bool) -> CostProfile:
    """The cached profile for this machine and pair, measured and cached first if there is none."""
    path = profile_path(pair, max_batch, max_tokens, with_draft)
    try:
        data = json.loads(path.read_text())
        return CostProfile(
            tuple(data["batch_sizes"]),
            tuple(data["tokens"]),
            tuple(map(tuple, data["verify_ms"])),
            tuple(data["draft_ms"]),
            data["machine"],
        )
    except FileNotFoundError:
        pass
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("cost profile %s is unreadable (%s); measuring again", path, exc)
    log.info("measuring the step cost profile (once per machine and model pair)")
    profile = measure(pair, max_batch, max_tokens, with_draft)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(profile), indent=1))
    tmp.replace(path)
    return profile


def profile_for(config: EngineConfig, pair: ModelPair, drafter: Drafter) -> CostProfile | None:
    """The profile a ``cost`` controller reads for ``config`` (None for any other controller or no drafter)."""
    if config.controller.kind != "cost" or drafter.name == "none":
        return None
    return load_or_measure(pair, config.max_batch_size, config.controller.max_len + 1, drafter.model is not None)
