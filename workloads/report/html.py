"""``python -m workloads report RUN_DIR... --out report.html``: one shareable, self-contained HTML file.

The page reads top down as a comparison: the summary table (human headers with
units, "—" where a value does not apply, each run's output tokens/s and TPOT
against the AR run at the same load when the runs include one), what each
metric means, the setup (what every run shares once, then what differs), the
charts – tokens/s, × AR, TTFT and TPOT percentiles, the lanes' queue depth,
draft length over time, acceptance over the requests finished so far (a running
rate, not one per sampling window), acceptance by draft position – and a
link to each run directory's per-request CSV. Every run is named by engine and
load (``PDV · R=1.5/s #2``) and drawn in its engine's colour
(``presentation.palette``). Plotly's script is inlined once; the page loads nothing
from the network, so it can be attached to an email or an issue. Figures are
built by ``presentation.report_figures`` (``workloads`` draws nothing itself).
"""

from __future__ import annotations

import argparse
import html
import os
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from metrics.comparison import COLUMNS, NA, RATIOS, interval_texts, text, with_times_ar
from metrics.export import RunFilesError
from metrics.frames import last_round, position_frame, with_mean_draft_length
from metrics.runs import RunDirectory, load_point_verdicts, load_run_dir
from metrics.schema import REQUESTS_CSV
from presentation.palette import ENGINE_LABELS, engine_color, engine_label
from presentation.report_figures import (
    acceptance_by_position,
    acceptance_so_far,
    latency_percentiles,
    over_time,
    queue_depths,
    run_styles,
    speedup_bars,
    throughput_bars,
)

# the summary table's columns, key ones first; headers and formats are metrics.comparison's
SHOWN = (
    "label", "requests", "output_tok_s", "x_ar_tok_s", "x_ar_tpot_p50", "x_ar_tpot_p99", "acceptance_rate",
    "mean_acceptance_length", "mean_draft_len", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms",
    "e2e_p99_ms",
)  # fmt: skip
EXTRA_COLUMNS = {"e2e_p99_ms": ("E2E p99 (s)", "{:,.1f}")}  # shown in seconds: e2e_p99_ms / 1000
DEFINITIONS = (
    ("Output tok/s", "output tokens of the completed requests / the run's duration."),
    ("tok/s × AR", "a run's output tok/s over that of the AR run (the verifier alone, no speculation) at the same "
     "load in the same directory: above 1.00× the engine is faster than AR. For runs in rounds: the median over "
     "rounds of the ratio to AR of the same round, with in brackets the interval a repeat run's median falls in."),
    ("TPOT p50 / p99 × AR", "a run's TPOT percentile over AR's at the same load: below 1.00× its tokens come faster."),
    ("Acceptance", "accepted / drafted tokens over the run; — for AR, which drafts nothing."),
    ("Tokens / step", "tokens produced per verify step, 1 + accepted / verify steps (it counts the correction or "
     "bonus token)."),
    ("Draft L", "tokens drafted per verify step over the run's requests; a step that drafted nothing counts as "
     "L = 0, so it can sit below the controller's lowest L."),
    ("TTFT", "time to first token: from a request's arrival to its first output token."),
    ("TPOT", "time per output token after the first: (end-to-end − TTFT) / (output tokens − 1)."),
    ("E2E", "end-to-end latency of a request, arrival to last token."),
    ("Draft length", "the draft length L the controller had chosen at each sample; none for AR."),
)  # fmt: skip
FOLD_ABOVE = 12  # a longer per-run setup table starts folded: the charts should not sit pages below
PAGE_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:1200px;margin:auto;padding:0 16px;color:#222}"
    "table{border-collapse:collapse;font-size:13px;margin:8px 0}"
    ".wide{overflow-x:auto}th,td{border-bottom:1px solid #ddd;padding:4px 6px;text-align:right;white-space:nowrap}"
    # headers wrap (TTFT / p50 / (ms)) and so may run names: a 1280 px screen shows every key column unscrolled
    "th{background:#f4f4f4;white-space:normal;vertical-align:bottom;min-width:3.5em}td.t{white-space:normal}"
    "td.t,th.t{text-align:left}.w{white-space:nowrap}.dot{font-size:16px;line-height:0}"
    "summary{cursor:pointer;font-weight:600;margin:6px 0}"
    "p.note,dd{color:#555;font-size:13px}dt{font-weight:600;font-size:13px}dd{margin:0 0 4px 16px}"
)


def _load(concurrency: object, rate: object) -> str:
    if pd.isna(rate):
        return f"C={int(concurrency)}" if not pd.isna(concurrency) else ""
    return f"R={rate:g}/s" + ("" if pd.isna(concurrency) else f" (C≤{int(concurrency)})")


def run_labels(directories: Sequence[RunDirectory]) -> dict[str, str]:
    """run_id -> "PDV · R=1.5/s", with "#2", "#3" for repeats in one directory and the directory's name when several,
    and "(simulated: <cost model>)" for a simulated run."""
    labels = {}
    for d in directories:
        summary = d.frames.summary
        base = [
            f"{engine_label(e)} · {_load(c, r)}"
            for e, c, r in summary[["engine", "concurrency", "request_rate"]].values
        ]
        total, seen = Counter(base), Counter()
        simulated = summary["simulated"] if "simulated" in summary else pd.Series([None] * len(summary))
        for run_id, label, cost in zip(summary["run_id"], base, simulated, strict=True):
            seen[label] += 1
            label = f"{label} #{seen[label]}" if total[label] > 1 else label
            label = label if pd.isna(cost) else f"{label} (simulated: {cost})"  # never mistaken for a measurement
            labels[str(run_id)] = f"{d.path.name}: {label}" if len(directories) > 1 else label
    return labels


def _table(frame: pd.DataFrame, headers: dict[str, str], swatches: dict[str, str] | None = None) -> str:
    """``frame`` (already text) as an HTML table; ``swatches`` puts an engine-coloured dot before each run label.

    Numbers align right, words left; a table wider than the page scrolls sideways instead of widening it.
    """
    left = {c for c in frame if c in ("label", "run") or not frame[c].map(_numeric).all()}
    head = "".join(f'<th class="{"t" if c in left else ""}">{html.escape(headers[c])}</th>' for c in frame)
    rows = []
    for _, row in frame.iterrows():
        cells = []
        for c, value in row.items():
            if c in ("label", "run"):
                dot = f'<span class="dot" style="color:{swatches[value]}">●</span> ' if swatches else ""
                cells.append(f'<td class="t">{dot}{html.escape(str(value))}</td>')
            elif c in left:
                cells.append(f"<td class=t>{_unbroken_words(str(value))}</td>")
            else:
                cells.append(f"<td>{html.escape(str(value))}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return f"<div class=wide><table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"


def _unbroken_words(value: str) -> str:
    """``value`` as HTML that wraps only between words: ``1.00× (0.92–1.14)`` breaks before the bracket, never
    inside the interval (a browser would break after the dash)."""
    return " ".join(f"<span class=w>{html.escape(word)}</span>" for word in value.split(" "))


def _numeric(value: str) -> bool:
    """A table cell that reads as a number ("1,234.5", "0.93×", "16/16") or "—"."""
    return value == NA or value.replace(",", "").replace("×", "").replace("/", "").replace(".", "", 1).isdigit()


def summary_html(summary: pd.DataFrame, colors: dict[str, str]) -> str:
    """The summary table: human headers with units, sensible rounding, "—" where a value does not apply."""
    frame = summary.copy()
    frame["requests"] = [f"{ok}/{n}" for ok, n in zip(frame["completed"], frame["num_requests"], strict=True)]
    frame["e2e_p99_ms"] = frame["e2e_p99_ms"] / 1000
    formats = {**{c: fmt for c, (_, fmt) in COLUMNS.items()}, **{c: fmt for c, (_, fmt) in EXTRA_COLUMNS.items()}}
    headers = {**{c: h for c, (h, _) in COLUMNS.items()}, **{c: h for c, (h, _) in EXTRA_COLUMNS.items()}}
    shown = [c for c in SHOWN if c in frame and (c in ("label", "requests") or frame[c].notna().any())]
    table = pd.DataFrame(
        {c: [v or NA for v in interval_texts(frame, c)] if c in RATIOS else [text(v, formats[c]) for v in frame[c]]
         for c in shown}
    )  # fmt: skip
    return _table(table, headers, colors)


def verdicts_html(directories: Sequence[RunDirectory]) -> str:
    """The comparisons' verdict lines, one per directory and load point, with their noise warnings."""
    items = []
    for d in directories:
        for point in load_point_verdicts(d.runs):
            where = f"{d.path.name} · {point.load}" if len(directories) > 1 else point.load
            warning = f"<br><em>{html.escape(point.noise_warning)}</em>" if point.noise_warning else ""
            items.append(f"<li><strong>{html.escape(where)}:</strong> {html.escape(point.verdict)}{warning}</li>")
    return f"<h2>Verdict</h2><ul>{''.join(items)}</ul>" if items else ""


def setup_html(directories: Sequence[RunDirectory], labels: dict[str, str]) -> str:
    """What every run shares, once; then a row per run with what differs (and its id, to find its files)."""
    rows = []
    for d in directories:
        for run in d.runs:
            models, config, trace = run.get("models", {}), run.get("engine_config", {}), run.get("trace", {})
            controller = config.get("controller", {})
            rows.append(
                {
                    "run": labels.get(str(run.get("run_id")), str(run.get("run_id"))),
                    "Run id": str(run.get("run_id")),
                    "Started (UTC)": str(run.get("started_at") or NA)[:19].replace("T", " "),
                    "Duration (s)": text(run.get("duration_s"), "{:,.1f}"),
                    "Directory": str(d.path.name),
                    "Models": models.get("preset") or models.get("verifier") or NA,
                    "Dtype": models.get("dtype") or NA,
                    "Device": run.get("device") or NA,
                    "Drafter": config.get("drafter") or NA,
                    "Draft-length controller": (controller.get("kind") if isinstance(controller, dict) else None) or NA,
                    "Trace": trace.get("source") or NA,
                    "Requests submitted": str(run.get("submitted_requests", NA)),
                    "Code version": _commit((run.get("environment") or {}).get("git")),
                }
            )
    frame = pd.DataFrame(rows).astype(str)
    per_run_always = ("Run id", "Started (UTC)", "Duration (s)")
    common = [c for c in frame.columns[1:] if frame[c].nunique() == 1 and c not in per_run_always]
    shared = "".join(f"<tr><th class='t'>{html.escape(c)}</th><td class='t'>{html.escape(frame[c].iloc[0])}</td></tr>"
                     for c in common)  # fmt: skip
    per_run = frame.drop(columns=common)
    headers = {c: ("Run" if c == "run" else c) for c in per_run}
    return (
        f"<h3>Common to every run</h3><table>{shared}</table>"
        f"<details{' open' if len(per_run) <= FOLD_ABOVE else ''}><summary>Per run ({len(per_run)} runs)</summary>"
        f"{_table(per_run, headers)}</details>"
    )


def _commit(git: object) -> str:
    if not isinstance(git, dict) or not git.get("commit"):
        return NA
    return str(git["commit"])[:10] + (" (with local changes)" if git.get("dirty") else "")


def _csv_links(directories: Sequence[RunDirectory], out: Path) -> str:
    """A link to each directory's per-request CSV: relative to the report when the two share a folder above the
    file system's root (the link survives moving both together), else absolute."""
    items, relative = [], []
    folder = out.resolve().parent
    for d in directories:
        target = (d.path / REQUESTS_CSV).resolve()
        try:
            shared = Path(os.path.commonpath([target, folder]))
        except ValueError:  # another drive
            shared = Path(target.anchor)
        relative.append(shared != Path(target.anchor))
        href = os.path.relpath(target, folder) if relative[-1] else target.as_uri()
        shown = href if relative[-1] else str(target)
        items.append(f'<li><a href="{html.escape(href)}">{html.escape(shown)}</a> ({html.escape(d.path.name)})</li>')
    note = (
        "Relative links open from this report's folder: keep the report and the run directories together "
        "(they do not open from an email attachment alone)."
        if any(relative)
        else "These links are absolute: they open on the machine that wrote this report."
    )
    return f"<ul>{''.join(items)}</ul><p class='note'>{note}</p>"


def _section(name: str, fig: object, first: bool) -> str:
    div = fig.to_html(full_html=False, include_plotlyjs=first, div_id=f"fig-{name}", config={"displaylogo": False})
    return f'<section id="{name}">{div}</section>'


def build_report(paths: Sequence[str | Path], out: Path, title: str = "PD-Verify runs") -> str:
    """The report page for the run directories at ``paths``; ``RunFilesError`` names a directory that is not one."""
    directories = [load_run_dir(p) for p in paths]
    labels = run_labels(directories)

    def concat(frames: list[pd.DataFrame], **by_directory: list[str]) -> pd.DataFrame:
        kept = [f.assign(**{k: v[i] for k, v in by_directory.items()}) for i, f in enumerate(frames) if not f.empty]
        df = pd.concat(kept, ignore_index=True) if kept else frames[0]
        return df.assign(label=df["run_id"].astype(str).map(labels).fillna(df["run_id"])) if "run_id" in df else df

    names = [str(d.path) for d in directories]
    summaries = [with_mean_draft_length(d.frames.summary, d.frames.requests) for d in directories]
    summary = with_times_ar(concat(summaries, directory=names), within=["directory"])
    # grouped for reading: directory, then load, then AR, Baseline, PD, PDV (others after), repeats in run order
    order = {e: i for i, e in enumerate(ENGINE_LABELS)}
    summary = summary.assign(
        _engine=summary["engine"].map(order).fillna(len(order)), _dir=summary["directory"].map(names.index)
    )
    summary = summary.sort_values(
        ["_dir", "concurrency", "request_rate", "_engine"], kind="stable", na_position="first"
    )
    ts = concat([last_round(d.frames.timeseries) for d in directories])  # over time: each run's last round
    positions = concat([position_frame(d.runs) for d in directories])
    styles = run_styles(summary)
    swatches = {str(label): engine_color(e) for label, e in zip(summary["label"], summary["engine"], strict=True)}
    has_ar = summary["x_ar_tok_s"].notna().any()
    figures = [("throughput", throughput_bars(summary))]
    if has_ar:
        figures.append(("times-ar", speedup_bars(summary)))
    figures += [
        ("ttft", latency_percentiles(summary, "ttft")),
        ("tpot", latency_percentiles(summary, "tpot")),
        ("queues", queue_depths(ts, styles)),
        ("draft-length", over_time(ts, "draft_len", "Draft length over time", "tokens per draft", styles)),
        ("acceptance", acceptance_so_far(concat([d.frames.requests for d in directories]), styles)),
        ("positions", acceptance_by_position(positions, styles)),
    ]
    ar_note = (
        "× AR: against the AR run at the same load in the same directory (the first, when AR ran several times); "
        "for runs in rounds, the median of each round's ratio to AR of the same round, with "
        "the interval a repeat run's median falls in."
        if has_ar
        else "No AR run at the same load as these runs, so no × AR columns: add an AR run to compare against."
    )
    dirs = ", ".join(html.escape(d.path.name) for d in directories)
    definitions = "".join(f"<dt>{html.escape(t)}</dt><dd>{html.escape(d)}</dd>" for t, d in DEFINITIONS)
    body = (
        f"<h1>{html.escape(title)}</h1><p class='note'>{len(summary)} runs from {dirs}. Each engine has one colour "
        "throughout; repeated runs of one engine at one load are numbered #1, #2, … in the order they ran.</p>"
        f"{verdicts_html(directories)}<h2>Summary</h2>{summary_html(summary, swatches)}"
        f"<p class='note'>{html.escape(ar_note)} — marks a value that does not apply.</p>"
        f"<details><summary>What the columns mean</summary><dl>{definitions}</dl><p class='note'>The full "
        "definitions are in metrics/METRICS.md in the PD-Verify repository.</p></details>"
        f"<h2>Setup</h2>{setup_html(directories, labels)}"
        f"<h2>Per-request data</h2>{_csv_links(directories, Path(out))}<h2>Charts</h2>"
    )
    sections = "".join(_section(name, fig, i == 0) for i, (name, fig) in enumerate(figures))
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{PAGE_STYLE}</style></head><body>{body}{sections}</body></html>"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workloads report", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories (holding run.json)")
    parser.add_argument("--out", default="report.html", help="the HTML file to write (default %(default)s)")
    parser.add_argument("--title", default="PD-Verify runs", help="the page's heading (default %(default)s)")
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
