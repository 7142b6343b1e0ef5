"""Figures of a benchmark directory (``python -m workloads bench``), as Plotly figures and files.

Inputs are the bench's CSV rows as dicts (strings or numbers): per-round rows of
the load sweep and the summary rows of every part (median ratio to the part's
reference with its min–max). ``write_figures`` writes them as one
self-contained HTML file (Plotly's script inline: it opens offline) and, where
``kaleido`` can drive a Chrome, one PNG each.
"""

from __future__ import annotations

import html
import os
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

STYLE = "table{border-collapse:collapse;font-size:13px}th,td{border:1px solid #ccc;padding:2px 6px;text-align:right}"
CHROMIUM = Path("/usr/bin/chromium")  # Debian's package: kaleido 1.x needs a Chrome to render PNGs


def _num(value: Any) -> float | None:
    try:
        return None if value in ("", None) else float(value)
    except (TypeError, ValueError):
        return None


def _medians(rows: Sequence[dict[str, Any]], metric: str) -> dict[tuple[str, int], float]:
    """Median of ``metric`` over rounds per (label, concurrency)."""
    groups: dict[tuple[str, int], list[float]] = {}
    for r in rows:
        value, c = _num(r.get(metric)), _num(r.get("concurrency"))
        if value is not None and c is not None:
            groups.setdefault((str(r["label"]), int(c)), []).append(value)
    return {k: statistics.median(v) for k, v in groups.items()}


def load_curve(rows: Sequence[dict[str, Any]], metric: str = "output_tok_s", title: str = "") -> go.Figure:
    """``metric`` (median over rounds) against concurrency, one line per competitor."""
    medians = _medians(rows, metric)
    fig = go.Figure()
    for label in dict.fromkeys(k[0] for k in medians):
        points = sorted((c, v) for (lab, c), v in medians.items() if lab == label)
        fig.add_trace(go.Scatter(x=[c for c, _ in points], y=[v for _, v in points], name=label, mode="lines+markers"))
    fig.update_layout(title=title or f"{metric} against concurrency", template="plotly_white")
    fig.update_xaxes(title="concurrent requests (C)", type="log", dtick=0.30102999566)
    fig.update_yaxes(title=metric)
    return fig


def pareto(rows: Sequence[dict[str, Any]]) -> go.Figure:
    """Throughput against TPOT p99 (medians over rounds), one point per competitor and C."""
    tput, tpot = _medians(rows, "output_tok_s"), _medians(rows, "tpot_p99_ms")
    fig = go.Figure()
    for label in dict.fromkeys(k[0] for k in tput):
        keys = sorted(k for k in tput if k[0] == label and k in tpot)
        fig.add_trace(
            go.Scatter(
                x=[tpot[k] for k in keys],
                y=[tput[k] for k in keys],
                text=[f"C={k[1]}" for k in keys],
                name=label,
                mode="lines+markers+text",
                textposition="top center",
            )
        )
    fig.update_layout(title="Throughput against TPOT p99 (up and left is better)", template="plotly_white")
    fig.update_xaxes(title="TPOT p99 (ms)")
    fig.update_yaxes(title="output tokens/s")
    return fig


def ratio_bars(summary: Sequence[dict[str, Any]], title: str) -> go.Figure:
    """Median ratio to the reference with min–max error bars, one bar per (group, competitor)."""
    rows = [s for s in summary if _num(s.get("ratio_median")) is not None]
    fig = go.Figure(
        go.Bar(
            x=[f"{s['group']} {s['label']} ({s['metric']})" for s in rows],
            y=[_num(s["ratio_median"]) for s in rows],
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [_num(s["ratio_max"]) - _num(s["ratio_median"]) for s in rows],
                "arrayminus": [_num(s["ratio_median"]) - _num(s["ratio_min"]) for s in rows],
            },
        )
    )
    fig.update_layout(title=title, template="plotly_white")
    fig.update_yaxes(title="x reference (median, min-max)")
    return fig


def html_page(figures: Sequence[tuple[str, go.Figure]], title: str, body_html: str = "") -> str:
    """One self-contained page: ``body_html``, then each figure; Plotly's script inline once."""
    parts = []
    for i, (name, fig) in enumerate(figures):
        div = fig.to_html(full_html=False, include_plotlyjs=(i == 0), div_id=f"fig-{name}")
        parts.append(f'<section id="{name}">{div}</section>')
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head>"
        f"<body style='font-family:sans-serif;max-width:1100px;margin:auto'>{body_html}{''.join(parts)}</body></html>"
    )


def write_figures(figures: Sequence[tuple[str, go.Figure]], out_dir: Path, title: str) -> list[str]:
    """``figures.html`` (self-contained) and a PNG per figure in ``out_dir``; returns notes on what was skipped."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "figures.html").write_text(html_page(figures, title))
    if "BROWSER_PATH" not in os.environ and CHROMIUM.exists():
        os.environ["BROWSER_PATH"] = str(CHROMIUM)  # kaleido looks for its Chrome here
    notes = []
    for name, fig in figures:
        try:
            fig.write_image(out_dir / f"{name}.png", width=1000, height=550)
        except Exception as exc:  # noqa: BLE001 - kaleido fails many ways without a Chrome; HTML is still written
            notes.append(f"PNG figures skipped: kaleido could not render ({type(exc).__name__}: {exc})")
            break
    return notes
