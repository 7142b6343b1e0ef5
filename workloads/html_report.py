"""``python -m workloads report RUN_DIR... --out report.html``: one shareable, self-contained HTML file.

The page holds the setup of every run (models, dtype, device, engine
configuration, trace, load), the summary table, the charts – output tokens/s,
TTFT and TPOT percentiles, the lanes' queue depth, draft length and
acceptance over time, acceptance by draft position – and a link to each run
directory's per-request CSV (relative to the report, so the link works when
the report sits beside the runs). Plotly's script is inlined once; the page
loads nothing from the network, so it can be attached to an email or an issue.
Figures are built by ``metrics.report_figures`` (``workloads`` draws nothing
itself).
"""

from __future__ import annotations

import argparse
import html
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from metrics.bench_figures import html_page
from metrics.export import RunFilesError
from metrics.frames import position_frame, run_labels
from metrics.report_figures import acceptance_by_position, latency_percentiles, over_time, queue_depths, throughput_bars
from metrics.runs import RunDirectory, load_run_dir
from metrics.schema import REQUESTS_CSV

SUMMARY_SHOWN = (
    "label", "num_requests", "completed", "duration_s", "output_tok_s", "req_s", "ttft_p50_ms", "ttft_p99_ms",
    "tpot_p50_ms", "tpot_p99_ms", "e2e_p99_ms", "acceptance_rate", "mean_acceptance_length",
)  # fmt: skip


def _labelled(directories: Sequence[RunDirectory]) -> dict[str, str]:
    """run_id -> a label unique across directories (the directory's name is added when several are given)."""
    labels = {}
    for d in directories:
        for run_id, label in run_labels(d.frames.summary).items():
            labels[run_id] = f"{d.path.name}: {label}" if len(directories) > 1 else label
    return labels


def setup_table(directories: Sequence[RunDirectory], labels: dict[str, str]) -> pd.DataFrame:
    rows = []
    for d in directories:
        for run in d.runs:
            models, config, trace = run.get("models", {}), run.get("engine_config", {}), run.get("trace", {})
            controller = config.get("controller", {})
            rows.append(
                {
                    "run": labels.get(str(run.get("run_id")), run.get("run_id")),
                    "started": run.get("started_at"),
                    "models": models.get("preset") or models.get("verifier", ""),
                    "dtype": models.get("dtype", ""),
                    "device": run.get("device", ""),
                    "drafter": config.get("drafter", ""),
                    "controller": controller.get("kind", "") if isinstance(controller, dict) else "",
                    "trace": trace.get("source", ""),
                    "requests": run.get("submitted_requests"),
                    "git": _commit((run.get("environment") or {}).get("git")),
                }
            )
    return pd.DataFrame(rows)


def _commit(git: object) -> str:
    if not isinstance(git, dict) or not git.get("commit"):
        return ""
    return str(git["commit"])[:10] + (" (with local changes)" if git.get("dirty") else "")


def build_report(paths: Sequence[str | Path], out: Path, title: str = "PD-Verify runs") -> str:
    """The report page for the run directories at ``paths``; ``RunFilesError`` names a directory that is not one."""
    directories = [load_run_dir(p) for p in paths]
    labels = _labelled(directories)

    def concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
        df = (
            pd.concat([f for f in frames if not f.empty], ignore_index=True)
            if any(not f.empty for f in frames)
            else frames[0]
        )
        return df.assign(label=df["run_id"].map(labels).fillna(df["run_id"])) if "run_id" in df else df

    summary = concat([d.frames.summary for d in directories])
    ts = concat([d.frames.timeseries for d in directories])
    positions = concat([position_frame(d.runs) for d in directories])
    figures = [
        ("throughput", throughput_bars(summary)),
        ("ttft", latency_percentiles(summary, "ttft")),
        ("tpot", latency_percentiles(summary, "tpot")),
        ("queues", queue_depths(ts)),
        ("draft-length", over_time(ts, "draft_len", "Draft length over time", "tokens per draft")),
        ("acceptance", over_time(ts, "acceptance_rate", "Acceptance over time", "accepted / drafted")),
        ("positions", acceptance_by_position(positions)),
    ]
    links = "".join(
        f'<li><a href="{html.escape(os.path.relpath(d.path / REQUESTS_CSV, out.parent.resolve()))}">'
        f"{html.escape(str(d.path / REQUESTS_CSV))}</a></li>"
        for d in directories
    )
    table = summary[[c for c in SUMMARY_SHOWN if c in summary]].round(3)
    body = (
        f"<h1>{html.escape(title)}</h1>"
        f"<h2>Setup</h2>{setup_table(directories, labels).to_html(index=False, na_rep='', border=0)}"
        f"<h2>Summary</h2>{table.to_html(index=False, na_rep='', border=0)}"
        "<p>Definitions: metrics/METRICS.md in the PD-Verify repository.</p>"
        f"<h2>Per-request data</h2><ul>{links}</ul><h2>Charts</h2>"
    )
    return html_page(figures, title, body)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workloads report", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories (holding run.json)")
    parser.add_argument("--out", default="report.html", help="the HTML file to write (default %(default)s)")
    parser.add_argument("--title", default="PD-Verify runs")
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    try:
        page = build_report([Path(p).resolve() for p in args.run_dirs], out, args.title)
    except RunFilesError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    out.write_text(page)
    print(f"wrote {out} ({len(page) / 1e6:.1f} MB)")
    return 0
