"""Figures of run directories for the shareable HTML report (``python -m workloads report``).

Inputs are the frames ``metrics.runs.load_run_dir`` reads (``metrics.schema``
columns) with a ``label`` per run (``metrics.frames.with_labels``), and
``metrics.frames.position_frame``. Every figure is a plain Plotly figure; the
report inlines Plotly's script once, so the page opens offline.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

LANES = {"waiting": "admission", "queue_prefill": "prefill", "queue_decode": "decode", "queue_verify": "verify"}
HEIGHT = 380


def _figure(title: str, x_title: str, y_title: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=title, template="plotly_white", height=HEIGHT, margin={"t": 50, "b": 40})
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title)
    return fig


def throughput_bars(summary: pd.DataFrame) -> go.Figure:
    """Output tokens/s of each run."""
    fig = _figure("Output tokens/s per run", "", "tokens/s")
    fig.add_trace(go.Bar(x=summary["label"], y=summary["output_tok_s"], name="output tokens/s"))
    return fig


def latency_percentiles(summary: pd.DataFrame, metric: str) -> go.Figure:
    """p50, p95 and p99 of ``metric`` (``ttft`` or ``tpot``) per run, grouped bars."""
    fig = _figure(f"{metric.upper()} percentiles per run", "", "milliseconds")
    for q in ("p50", "p95", "p99"):
        fig.add_trace(go.Bar(x=summary["label"], y=summary[f"{metric}_{q}_ms"], name=q))
    fig.update_layout(barmode="group")
    return fig


def over_time(ts: pd.DataFrame, column: str, title: str, y_title: str) -> go.Figure:
    """``column`` against seconds since each run started, one line per run."""
    fig = _figure(title, "seconds since the run started", y_title)
    for label, g in ts.dropna(subset=[column]).groupby("label", sort=False):
        fig.add_trace(go.Scatter(x=g["t_s"], y=g[column], name=str(label), mode="lines"))
    return fig


def queue_depths(ts: pd.DataFrame) -> go.Figure:
    """Every lane's queue depth over time: one line per run and lane (lanes a run lacks are empty)."""
    fig = _figure("Lanes' queue depth", "seconds since the run started", "requests or blocks queued")
    for label, g in ts.groupby("label", sort=False):
        for column, lane in LANES.items():
            rows = g.dropna(subset=[column])
            if not rows.empty:
                fig.add_trace(go.Scatter(x=rows["t_s"], y=rows[column], name=f"{label} {lane}", mode="lines"))
    return fig


def acceptance_by_position(positions: pd.DataFrame) -> go.Figure:
    """P(position k accepted | k drafted) per run and draft position."""
    fig = _figure("Acceptance by draft position", "draft position k", "accepted / drafted at k")
    for label, g in positions.groupby("label", sort=False):
        fig.add_trace(go.Scatter(x=g["position"], y=g["rate"], name=str(label), mode="lines+markers"))
    fig.update_yaxes(range=[0, 1.02])
    return fig
