"""The first light's sections: each a function of the run's context, returning its part of the report.

Each section says what it measured; one that does not apply on the device
(host waits are a CUDA debug mode) says so instead of a figure. The section
order and the time budget that may skip them are ``first_light``'s.
"""

from __future__ import annotations

import gzip
import json
import tempfile
import time
import warnings
from dataclasses import asdict, replace
from pathlib import Path

import torch

from engine.config import ENGINES, StepChoice
from engine.devices import allocator_memory, cpu_name, fresh_memory, pci_bus_id, raise_if_device_failure
from engine.gpu.graph_runner import REPLAYED, GraphStats, graph_stats, with_cuda_graphs
from engine.gpu_check import _top2_gap as top2_gap
from engine.kernel_overlap import overlap
from engine.models.pair import ModelPair
from engine.models.shapes import PAIRS
from engine.profiling.cost_profile import ProfileShape
from engine.profiling.measure import measure, measure_interference
from engine.request import Request
from workloads.bench.first_light_context import Context
from workloads.bench.first_light_runs import (
    DRAFT_LEN,
    closed_batch,
    engine_config,
    make_requests,
    outputs,
    repetitive_prompts,
)

TRACE_LIMIT = 15 * 2**20  # bytes: a gzipped trace larger than this stays out of the files that come back


def device_section(ctx: Context) -> dict:
    import transformers

    info = {"device": ctx.settings.device, "torch": torch.__version__, "cuda": torch.version.cuda}
    info |= {"transformers": transformers.__version__, "cpu": cpu_name(), "torch_threads": torch.get_num_threads()}
    if not ctx.cuda:
        return info | {"nvml": "not on CUDA"}
    index = ctx.device.index or 0
    props = torch.cuda.get_device_properties(index)
    info |= {"name": props.name, "capability": list(torch.cuda.get_device_capability(index))}
    info |= {"multiprocessors": props.multi_processor_count, "memory_mb": round(props.total_memory / 2**20)}
    return info | {"nvml": nvml_counters(ctx.device)}


def nvml_counters(device: torch.device) -> dict[str, float | str]:
    """NVML's counters for ``device`` (found by PCI address), each read on its own: a value, or why not."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # no nvidia-ml-py, no driver: one line says which
        return {"nvml": f"unreadable: {type(exc).__name__}: {exc}"}
    found_by = "pci bus id"
    try:
        handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id(device))
    except Exception:  # a torch that reports no PCI address, or a VM that hides it: NVML's own numbering
        handle, found_by = pynvml.nvmlDeviceGetHandleByIndex(device.index or 0), "index (no PCI match)"
    readers = {
        "sm_busy_percent": lambda: pynvml.nvmlDeviceGetUtilizationRates(handle).gpu,
        "memory_busy_percent": lambda: pynvml.nvmlDeviceGetUtilizationRates(handle).memory,
        "memory_used_mb": lambda: pynvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20,
        "memory_total_mb": lambda: pynvml.nvmlDeviceGetMemoryInfo(handle).total / 2**20,
        "sm_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
        "memory_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
        "power_w": lambda: pynvml.nvmlDeviceGetPowerUsage(handle) / 1000,
        "temperature_c": lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
        "performance_state": lambda: pynvml.nvmlDeviceGetPerformanceState(handle),
        "driver": lambda: pynvml.nvmlSystemGetDriverVersion(),
    }
    counters: dict[str, float | str] = {"found_by": found_by}
    for name, read in readers.items():
        try:
            counters[name] = read()
        except Exception as exc:  # an unsupported counter (MIG, a VM) leaves the others readable
            counters[name] = f"unreadable: {type(exc).__name__}: {exc}"
    return counters


def divergences(f32: ModelPair, requests: list[Request], reference: list[list[int]]) -> list[dict]:
    """Each output that differs from ``reference``: where first, and the float32 verifier's top-2 logit gap there
    (a small gap is a near-tie that rounding may flip; a large one is a bug)."""
    found = []
    for request, want in zip(requests, reference, strict=True):
        got = request.output_token_ids
        if got == want:
            continue
        at = next((i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b), len(want))
        gap = top2_gap(f32, request.prompt_token_ids, want[:at])
        found.append({"request": request.request_id, "first_divergence": at, "float32_top2_logit_gap": gap})
    return found


def lossless_section(ctx: Context) -> dict:
    """Greedy float32 outputs of every engine, eager and with graphs, against eager AR's, token for token."""
    s = ctx.settings
    pair = ctx.pair(s.check_pair, "float32")
    prompts, config = repetitive_prompts(s.check_prompts), engine_config("model", s.check_prompts)
    reference = [r.output_token_ids for r in outputs(pair, "ar", config, prompts, s.check_tokens)]
    ctx.keep["float32_reference"] = reference
    graphed = ctx.keep["check_graphed"] = with_cuda_graphs(pair)  # host waits reuse its captured graphs
    identical, memory, differing = {}, {}, {}
    for engine in ENGINES:
        for label, used in ((engine, pair), (f"{engine}+graphs", graphed)):
            fresh_memory(ctx.device)
            requests = outputs(used, engine, config, prompts, s.check_tokens)
            found = divergences(pair, requests, reference)
            identical[label] = 1 - len(found) / len(reference)
            if found:
                differing[label] = found
            peak = allocator_memory(ctx.device)
            memory[label] = None if peak is None else round(peak.peak_allocated_mb, 1)
    graphs = {name: asdict(stats) for name, stats in graph_stats(graphed).items()}
    return {
        "pair": s.check_pair,
        "prompts": len(prompts),
        "max_new_tokens": s.check_tokens,
        "identical_to_ar": identical,  # share of prompts; 1.0 is lossless
        "differing": differing,
        "peak_allocated_mb": memory,
        "graphs": graphs,
    }


def divergence_section(ctx: Context) -> dict:
    """bfloat16 AR against float32 AR: the share of outputs that differ, and the float32 top-2 gap where they do."""
    s = ctx.settings
    reference = ctx.keep.get("float32_reference")
    if reference is None:
        return {"skipped": "needs the float32 reference of the losslessness section"}
    prompts, config = repetitive_prompts(s.check_prompts), engine_config("model", s.check_prompts)
    bf16 = ctx.pair(s.check_pair, "bfloat16")
    requests = outputs(bf16, "ar", config, prompts, s.check_tokens)
    found = divergences(ctx.pair(s.check_pair, "float32"), requests, reference)
    return {"pair": s.check_pair, "divergence_rate": len(found) / len(reference), "divergences": found}


def host_waits_section(ctx: Context) -> dict:
    """Host waits per verify step, counted by CUDA's sync debug mode while AR and Baseline serve."""
    if not ctx.cuda:
        return {"not_applicable": "a CUDA debug mode: the CPU has no host waits to count"}
    s = ctx.settings
    pair = ctx.pair(s.check_pair, "float32")
    prompts, config = repetitive_prompts(s.check_prompts), engine_config("model", s.check_prompts)
    # with graphs: the losslessness section's pair, whose buckets are captured (a capture synchronizes once)
    graphed = ctx.keep.get("check_graphed") or with_cuda_graphs(pair)
    waits = {}
    for engine in ("ar", "baseline"):
        for label, used in ((engine, pair), (f"{engine}+graphs", graphed)):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                torch.cuda.set_sync_debug_mode("warn")
                try:
                    requests = outputs(used, engine, config, prompts, s.check_tokens)
                finally:
                    torch.cuda.set_sync_debug_mode(0)
            syncs = sum("synchroniz" in str(w.message) for w in caught)
            steps = sum(len(r.steps) for r in requests)
            waits[label] = {"syncs": syncs, "verify_steps": steps, "per_step": round(syncs / max(steps, 1), 3)}
    return waits


def speed_section(ctx: Context) -> dict:
    """Every engine at every concurrency on the speed pair, eager and with graphs, in alternating order."""
    s = ctx.settings
    pair = ctx.pair(s.speed_pair, s.speed_dtype)
    graphed = with_cuda_graphs(pair)
    runs, skipped, failed = [], [], []
    config = engine_config(s.speed_drafter, max(s.concurrency))
    for round_index, c in enumerate(s.concurrency):
        for engine in ENGINES:
            order = (False, True) if round_index % 2 == 0 else (True, False)
            for graphs in order:
                label = {"engine": str(engine), "concurrency": c, "graphs": graphs}
                if not ctx.allows("speed"):
                    skipped.append(label)
                    continue
                began, before = time.perf_counter(), graph_stats(graphed)
                used = graphed if graphs else pair
                try:
                    figures = closed_batch(used, engine, config, c, s.speed_tokens, s.min_requests)
                except Exception as exc:  # this run's failure is its row; a device failure ends the section
                    raise_if_device_failure(exc)
                    failed.append(label | {"failed": f"{type(exc).__name__}: {exc}"})
                    ctx.progress(f"speed: {engine} C={c} graphs={graphs}: failed: {exc}")
                    continue
                finally:
                    ctx.budget.took("speed", time.perf_counter() - began)
                if graphs:
                    figures["graph_replayed_share"] = replayed_share(before, graph_stats(graphed))
                runs.append(label | figures)
                ctx.progress(f"speed: {engine} C={c} graphs={graphs}: {figures['tok_per_s']} tok/s")
    nvml = nvml_counters(ctx.device) if ctx.cuda else "not on CUDA"
    return {
        "pair": s.speed_pair,
        "dtype": s.speed_dtype,
        "drafter": s.speed_drafter,
        "draft_len": DRAFT_LEN,
        "max_new_tokens": s.speed_tokens,
        "acceptance_source": PAIRS[s.speed_pair].acceptance,
        "runs": runs,
        "skipped_for_time": skipped,
        "failed_runs": failed,
        "graphs": {name: asdict(stats) for name, stats in graph_stats(graphed).items()},
        "nvml_after": nvml,
    }


def replayed_share(before: dict[str, GraphStats], after: dict[str, GraphStats]) -> dict[str, float | None]:
    """Per model, the share of its forwards between two snapshots of its graph stats that replayed a graph."""
    shares = {}
    for name, now in after.items():
        then = before[name].choices
        delta = {k: v - then.get(k, 0) for k, v in now.choices.items()}
        total = sum(delta.values())
        shares[name] = round(delta.get(REPLAYED, 0) / total, 4) if total else None
    return shares


def profile_section(ctx: Context) -> dict:
    """The speed pair's step costs on the engine's profile grid, written as a profile file the simulator reads."""
    s = ctx.settings
    pair = ctx.pair(s.speed_pair, s.speed_dtype)
    shape = ProfileShape(max(s.concurrency), DRAFT_LEN + 1, with_draft=True)
    profile = measure(pair, shape)
    if ctx.allows("profile_interference"):
        profile = replace(profile, interference=measure_interference(pair, shape))
    device = ctx.report.get("device", {})
    data = asdict(profile) | {"device": {k: v for k, v in device.items() if k != "nvml"}, "forwards": "eager"}
    path = ctx.out / "step-costs.json"
    path.write_text(json.dumps(data, indent=1))
    return {"file": path.name, "pair": s.speed_pair, "table_ms": profile.table().splitlines()}


def overlap_section(ctx: Context) -> dict:
    """A short pipelined PDV run under ``torch.profiler``: the draft and verify lanes' kernel time, and overlap."""
    from torch.profiler import ProfilerActivity, profile

    s = ctx.settings
    pair = ctx.pair(s.speed_pair, s.speed_dtype)
    config = replace(engine_config(s.speed_drafter, s.overlap_rows), hybrid_threshold=None)
    config = replace(config, step_choice=StepChoice.COUNT, concurrent_lanes=None)  # every lane at once on CUDA
    from engine.schedulers.registry import make_engine

    eng = make_engine("pdv", pair, config).start()
    requests = make_requests(pair, repetitive_prompts(s.overlap_rows), s.overlap_tokens, "p")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if ctx.cuda else [])
    trace = Path(tempfile.mkdtemp(prefix="first-light-")) / "pdv-trace.json"
    with profile(activities=activities) as prof:
        try:
            eng.generate(requests, timeout=120)
            threads = {lane.thread.native_id: name for name, lane in eng.lanes.items()}
        finally:
            eng.stop()
    prof.export_chrome_trace(str(trace))
    events = json.loads(trace.read_text()).get("traceEvents", [])
    found = overlap(events, threads, "decode", "verify")
    packed = gzip.compress(trace.read_bytes())
    kept = len(packed) <= TRACE_LIMIT
    if kept:
        (ctx.out / "pdv-trace.json.gz").write_bytes(packed)
    return {
        "draft_kernel_ms": found.first_us / 1000,
        "verify_kernel_ms": found.second_us / 1000,
        "overlap_ms": found.both_us / 1000,
        "overlap_share_of_shorter": found.share,  # 0: never overlapped; 1: the shorter lane always ran beside
        "kernels": found.kernels,
        "trace": "pdv-trace.json.gz" if kept else f"left out: {len(packed) / 2**20:.0f} MiB gzipped",
    }


def acceptance_section(ctx: Context) -> dict:
    """Where acceptance comes from with random weights: Baseline's acceptance for each (pair, drafter) source."""
    s = ctx.settings
    found = {}
    for name, drafter in s.acceptance_sources:
        if not ctx.allows("acceptance"):
            found[f"{name} {drafter}"] = {"skipped": "time budget"}
            continue
        pair = ctx.pair(name, s.speed_dtype)
        config = engine_config(drafter, s.acceptance_rows)
        requests = outputs(pair, "baseline", config, repetitive_prompts(s.acceptance_rows), s.speed_tokens)
        drafted, accepted = sum(r.drafted for r in requests), sum(r.accepted for r in requests)
        steps = sum(r.verify_steps for r in requests)
        found[f"{name} {drafter}"] = {
            "source": PAIRS[name].acceptance if drafter.startswith("model") else "lookup drafting",
            "acceptance": round(accepted / drafted, 4) if drafted else None,
            "tokens_per_verify_step": round(sum(len(r.output_token_ids) for r in requests) / max(steps, 1), 3),
        }
    return found
