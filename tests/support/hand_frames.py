"""Hand-made run frames for the figure and table tests: time series, requests and a load summary."""

from __future__ import annotations

import math

import pandas as pd

ENGINES = ("baseline", "pd", "pdv")


def series() -> pd.DataFrame:
    """Two windows per engine; lanes an engine lacks are NaN, as in timeseries.csv."""
    rows = []
    lanes = {"baseline": (None, None, None), "pd": (1, 2, None), "pdv": (1, 0, 3)}
    for engine in ENGINES:
        for t in (0.25, 0.5):
            prefill, decode, verify = lanes[engine]
            rows.append(
                {
                    "engine": engine,
                    "label": f"{engine} · C=4",
                    "t_s": t,
                    "tokens_per_s": 100.0 * (ENGINES.index(engine) + 1) + t,
                    "waiting": 2,
                    "queue_prefill": prefill,
                    "queue_decode": decode,
                    "queue_verify": verify,
                    "draft_len": 4,
                    "acceptance_rate": 0.5,
                    "gpu_util": math.nan,
                    "gpu_mem_util": math.nan,
                    "cpu_util": 90.0,
                    "rss_mb": 500.0,
                }
            )
    return pd.DataFrame(rows)


def requests() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "engine": ["baseline", "baseline", "pd", "pdv", "pdv"],
            "status": ["ok", "cancelled", "ok", "ok", "ok"],
            "ttft_ms": [10.0, 999.0, 12.0, 9.0, math.nan],
            "tpot_ms": [5.0, 5.0, 4.0, 3.0, 3.5],
        }
    )


def summary() -> pd.DataFrame:
    rows = []
    for engine in ENGINES:
        for c in (4, 1, 2):  # deliberately unsorted
            rows.append(
                {
                    "run_id": f"{engine}-c{c}",
                    "engine": engine,
                    "label": f"{engine} · C={c}",
                    "concurrency": c,
                    "request_rate": math.nan,
                    "output_tok_s": 10.0 * c,
                    "tpot_p95_ms": 5.0 + c,
                    "tpot_p99_ms": 6.0 + c,
                    "acceptance_rate": 0.5 if engine != "ar" else math.nan,
                }
            )
    return pd.DataFrame(rows)


def trace_colors(fig) -> dict[str, str]:
    """Legend group (or name) -> colour of every line or bar trace."""
    out = {}
    for trace in fig.data:
        color = trace.line.color if trace.type == "scatter" else trace.marker.color
        out[trace.legendgroup or trace.name] = color
    return out
