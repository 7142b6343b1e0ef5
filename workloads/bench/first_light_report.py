"""The first light's report as Markdown: a table per section, and what was skipped or failed, said first."""

from __future__ import annotations

import json

SPEED_COLUMNS = (
    ("engine", "engine"), ("concurrency", "C"), ("graphs", "graphs"), ("tok_per_s", "tok/s"),
    ("ttft_ms_p50", "TTFT p50 ms"), ("tpot_ms_p50", "TPOT p50 ms"), ("tpot_ms_p99", "TPOT p99 ms"),
    ("acceptance", "acceptance"), ("tokens_per_verify_step", "tokens/step"), ("peak_allocated_mb", "peak MiB"),
)  # fmt: skip


def _table(header: list[str], rows: list[list[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join("" if v is None else str(v) for v in row) + " |" for row in rows]


def _speed(section: dict) -> list[str]:
    lines = [f"Pair `{section['pair']}` in {section['dtype']}, drafter `{section['drafter']}` "
             f"(L = {section['draft_len']}), {section['max_new_tokens']} new tokens per request; acceptance: "
             f"{section['acceptance_source']}.", ""]  # fmt: skip
    runs = section["runs"]
    lines += _table([h for _, h in SPEED_COLUMNS], [[r.get(k) for k, _ in SPEED_COLUMNS] for r in runs])
    by_key = {(r["engine"], r["concurrency"], r["graphs"]): r for r in runs}
    ratios = [
        [engine, c, round(g["tok_per_s"] / e["tok_per_s"], 3)]
        for (engine, c, graphs), g in by_key.items()
        if graphs and (e := by_key.get((engine, c, False))) and e["tok_per_s"] and g["tok_per_s"]
    ]
    replayed = [share for r in runs if r["graphs"] for share in r.get("graph_replayed_share", {}).values()]
    if ratios and not any(replayed):
        lines += ["", "No forward replayed a graph (not on CUDA): both modes ran eagerly, so no ratio is shown."]
    elif ratios:
        shares = ", ".join(
            f"{r['engine']} C={r['concurrency']}: {r.get('graph_replayed_share')}" for r in runs if r["graphs"]
        )
        lines += ["", f"Share of forwards that replayed a graph, per model: {shares}."]
        lines += ["", "Graphs against eager (tok/s ratio, one round each: no interval, no verdict):", ""]
        lines += _table(["engine", "C", "graphs / eager"], ratios)
    for run in section.get("failed_runs", []):
        lines += ["", f"**Failed**: {run['engine']} C={run['concurrency']} graphs={run['graphs']}: {run['failed']}"]
    if section["skipped_for_time"]:
        skipped = ", ".join(
            f"{s['engine']} C={s['concurrency']} graphs={s['graphs']}" for s in section["skipped_for_time"]
        )
        lines += ["", f"Skipped for time: {skipped}."]
    return lines


def _lossless(section: dict) -> list[str]:
    rows = [[k, v, section["peak_allocated_mb"].get(k)] for k, v in section["identical_to_ar"].items()]
    head = f"Pair `{section['pair']}`, {section['prompts']} prompts x {section['max_new_tokens']} tokens."
    lines = [head, "", *_table(["engine", "identical to AR (share)", "peak MiB"], rows)]
    for label, found in section["differing"].items():
        where = ", ".join(
            f"{d['request']} at {d['first_divergence']} (top-2 gap {d['float32_top2_logit_gap']:.3g})" for d in found
        )
        lines += ["", f"{label} differs: {where}."]
    return lines


RENDERERS = {"speed": _speed, "lossless_float32": _lossless}


def markdown(report: dict) -> str:
    gpu = "on a GPU" if report["ran_on_gpu"] else "on the CPU (a dry run: no figure here is a GPU's)"
    lines = [
        "# First light",
        "",
        f"Status: **{report['status']}**, ran {gpu}, {report['elapsed_s']} s of a {report['budget_s']:.0f} s budget.",
        "Weights are random (shaped pairs): the figures are costs, not text quality.",
        f"Imported here but absent on the GPU machine: {', '.join(report['imported_but_absent_on_gpu']) or 'none'}.",
        "",
    ]
    for name, section in report["sections"].items():
        lines += [f"## {name}", ""]
        for word in ("skipped", "failed", "cut_off", "not_applicable"):
            if word in section:
                lines += [f"**{word.replace('_', ' ')}**: {section[word]}", ""]
        if set(section) & {"skipped", "failed", "cut_off"}:
            continue
        body = {k: v for k, v in section.items() if k != "seconds"}
        if name in RENDERERS:
            lines += RENDERERS[name](body)
        else:
            lines += ["```json", json.dumps(body, indent=1, default=str), "```"]
        lines += ["", f"({section.get('seconds', '?')} s)", ""]
    return "\n".join(lines) + "\n"
