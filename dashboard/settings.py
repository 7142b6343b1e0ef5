"""Where the dashboard keeps its runs, and what every settings widget starts at.

Environment overrides (read at each script run, so a test or a deployment sets
them without touching code):

* ``PDV_RUNS_DIR`` – run directories are written and listed here (default
  ``runs/`` at the repository root, where ``python -m workloads replay`` writes too).
* ``PDV_DEFAULT_PRESET`` – the model preset the pages start with (default ``smol``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from engine.config import ENGINES, ControllerConfig, EngineConfig
from engine.models.presets import DEFAULT_PRESET, PRESETS
from metrics.verdict import MIN_ROUNDS
from workloads.drivers.default_run import DEFAULT_RUN
from workloads.endpoint.spec import DEFAULT_LABEL

ROOT = Path(__file__).resolve().parents[1]
ENGINE_ORDER = ENGINES  # AR first: the reference every other engine is shown against
DASHBOARD_PRESETS = ("smol", "tiny")  # qwen-coder is not in the default install
DATASETS = ("sharegpt", "synthetic", "upload")
LOAD_MODES = ("closed", "open")


PRECISE_BUDGET_S = DEFAULT_RUN.budget_s  # a precise comparison's rounds end within this


def runs_dir() -> Path:
    env = os.environ.get("PDV_RUNS_DIR")
    return Path(env).expanduser() if env else ROOT / "runs"


def default_preset() -> str:
    preset = os.environ.get("PDV_DEFAULT_PRESET", DEFAULT_PRESET)
    return preset if preset in PRESETS else DEFAULT_PRESET


def preset_options() -> tuple[str, ...]:
    preset = default_preset()
    return DASHBOARD_PRESETS if preset in DASHBOARD_PRESETS else (preset, *DASHBOARD_PRESETS)


def _slider_gate() -> float:
    """The draft confidence gate's default as its slider shows it: 0 is the gate switched off (``None``)."""
    return ControllerConfig().draft_confidence or 0.0


def _replay_defaults(prefix: str, rounds: int) -> dict[str, Any]:
    return {
        # every engine, AR included: AR (no speculation) is the reference every speed-up is measured against
        **{f"{prefix}.engine.{e}": True for e in ENGINE_ORDER},
        f"{prefix}.endpoint": False,  # an OpenAI-compatible server is opt-in: there is none until one is given
        f"{prefix}.rounds": rounds,
        f"{prefix}.precise": prefix == "live" and DEFAULT_RUN.precise,  # a sweep's rounds are fixed by default
        f"{prefix}.endpoint_url": "",
        f"{prefix}.endpoint_model": "",
        f"{prefix}.endpoint_label": DEFAULT_LABEL,
        f"{prefix}.endpoint_api_key": "",  # none: a server without --api-key takes any request
        f"{prefix}.endpoint_type": "completions",  # raw prompts, as the engines take them; chat adds a template
        f"{prefix}.preset": default_preset(),
        f"{prefix}.dataset": "sharegpt",
        f"{prefix}.synthetic_input_len": 128,
        f"{prefix}.synthetic_output_len": 64,
        f"{prefix}.load_mode": "closed",
        f"{prefix}.burstiness": 1.0,  # Poisson arrivals
        f"{prefix}.max_concurrency": 0,  # 0 = no cap on an open loop
        f"{prefix}.temperature": 0.0,  # greedy: every engine must then produce the same text
        f"{prefix}.drafter": EngineConfig().drafter,
        f"{prefix}.controller": ControllerConfig().kind,
        f"{prefix}.draft_len": ControllerConfig().draft_len,
        f"{prefix}.bounds": (1, 8),  # feedback/goodput: beyond 8 a small draft's acceptance rarely pays
        f"{prefix}.draft_confidence": _slider_gate(),
        f"{prefix}.slo": False,
        f"{prefix}.ttft_slo_ms": 2000.0,
        f"{prefix}.tpot_slo_ms": 200.0,
        f"{prefix}.seed": 0,
    }


def session_defaults() -> dict[str, Any]:
    """Every settings widget's starting value, keyed by its widget key."""
    return {
        # 5 rounds x 4 engines of 2 requests (one batch at concurrency 2) with 16 new tokens: intervals that
        # hold other runs' medians, from Start to the verdict in the time docs/results.md ("The verdict")
        # gives on a warm 2-core CPU; the page's own redrawing makes each run about 1.5x slower than replay's
        **_replay_defaults("live", DEFAULT_RUN.rounds),
        "live.num_requests": DEFAULT_RUN.num_requests,
        "live.concurrency": DEFAULT_RUN.concurrency,
        "live.request_rate": 2.0,
        "live.max_new_tokens": DEFAULT_RUN.max_new_tokens,
        "live.simultaneous": False,  # one engine at a time: each is measured alone on the device
        # three load points x four engines of 6 short requests: 170 s from Start to the end on the default
        # preset and a 2-core CPU for one round, measured with the dashboard open in a local browser; each
        # round replays them all again, so a sweep takes the fewest rounds that give a verdict per load point
        **_replay_defaults("sweep", MIN_ROUNDS),
        "sweep.num_requests": 6,
        "sweep.concurrencies": "1,2,4",
        "sweep.rates": "0.5,1,2",
        "sweep.max_new_tokens": 32,
        "inspect.preset": default_preset(),
        "inspect.engine": "pdv",
        "inspect.prompt": "Explain in three sentences why the sky is blue.",
        "inspect.max_new_tokens": 64,
        "inspect.temperature": 0.0,
        "inspect.drafter": EngineConfig().drafter,
        "inspect.draft_len": ControllerConfig().draft_len,
        "inspect.draft_confidence": _slider_gate(),
    }
