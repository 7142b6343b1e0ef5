"""``python -m engine gpu-check``: the smoke test for a first GPU, written into one JSON report.

What it checks, each section measured on the GPU it runs on (none of it has run
on a GPU yet: this machine has none, and there the command fails with one
line before loading anything):

* the device, its compute capability, torch's CUDA version and the dtypes used;
* NVML's counters for the device, as torch reads them through pynvml (each
  counter on its own: what it reads, or why not);
* float32 losslessness: every engine's greedy outputs against AR's, token for token;
* bfloat16 divergence: AR in bfloat16 against AR in float32, the share of
  requests whose outputs differ, and for each the first differing position with
  the float32 verifier's top-2 logit gap there (a small gap is a near-tie that
  rounding may flip; a large one is a bug);
* host waits per decode step: ``torch.cuda.set_sync_debug_mode("warn")`` while
  AR and Baseline serve the prompts, warnings counted per verify step;
* peak memory per engine (PyTorch's allocated and reserved), with the cache
  emptied and the peak statistics reset between engines;
* whether draft and verify kernels overlap: a ``torch.profiler`` trace of a
  short PDV run (pipelined from the first group, every lane at once), each
  kernel attributed to the lane thread that launched it
  (``engine.kernel_overlap``), and the time both lanes had kernels running.
"""

from __future__ import annotations

import json
import tempfile
import warnings
from pathlib import Path

import torch

from engine.config import ENGINES, EngineConfig, SamplingParams, StepChoice
from engine.devices import cuda_problem

PROMPTS = (
    "Explain speculative decoding in two sentences.",
    "Write a haiku about a GPU.",
    "List three prime numbers and say why they are prime.",
    "What is the capital of France?",
    "Summarise the plot of a story about a lighthouse keeper.",
    "Translate 'good morning' into Spanish and German.",
    "Give one tip for writing readable Python.",
    "Why is the sky blue?",
)
MAX_NEW_TOKENS = 48


def _outputs(pair, engine: str, config: EngineConfig) -> tuple[list[list[int]], int]:
    """Greedy outputs of ``engine`` on the prompts, and its verify steps."""
    from engine.request import Request
    from engine.schedulers.registry import make_engine

    requests = [
        Request(f"g{i}", pair.encode_prompt(p), SamplingParams(max_new_tokens=MAX_NEW_TOKENS))
        for i, p in enumerate(PROMPTS)
    ]
    eng = make_engine(engine, pair, config)
    try:
        eng.generate(requests, timeout=600)
    finally:
        eng.stop()
    return [r.output_token_ids for r in requests], sum(len(r.steps) for r in requests)


def _top2_gap(pair, prompt_ids: list[int], prefix: list[int]) -> float:
    """The float32 verifier's gap between its two largest logits after ``prompt + prefix``."""
    with torch.inference_mode():
        model = pair.verifier.model
        model.set_attn_implementation("sdpa")
        try:
            logits = model(torch.tensor([prompt_ids + prefix], device=pair.device)).logits[0, -1].float()
        finally:
            from engine.attention import ATTN_IMPLEMENTATION

            model.set_attn_implementation(ATTN_IMPLEMENTATION)
    top = logits.topk(2).values
    return float(top[0] - top[1])


def run(device: str, preset: str | None, out: Path) -> dict:
    """Every check on ``device``; writes the report to ``out`` and returns it. Raises if CUDA is not usable."""
    from engine.models.pair import load_model_pair

    problem = cuda_problem(device)
    if problem is not None:
        raise RuntimeError(f"gpu-check: CUDA is not usable: {problem}")
    torch.cuda.set_sync_debug_mode(0)
    report: dict = {"device": device, "torch": torch.__version__, "cuda": torch.version.cuda}
    index = torch.device(device).index or 0
    report["name"] = torch.cuda.get_device_name(index)
    report["capability"] = list(torch.cuda.get_device_capability(index))

    report["nvml"] = _nvml_counters(index)

    config = EngineConfig()
    f32 = load_model_pair(preset, device=device, dtype="float32")
    reference, _ = _outputs(f32, "ar", config)
    lossless, memory = {}, {}
    for engine in ENGINES:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(index)
        outputs, _ = _outputs(f32, engine, config)
        lossless[engine] = sum(o == r for o, r in zip(outputs, reference, strict=True)) / len(PROMPTS)
        memory[engine] = {
            "peak_allocated_mb": torch.cuda.max_memory_allocated(index) / 2**20,
            "peak_reserved_mb": torch.cuda.max_memory_reserved(index) / 2**20,
        }
    report["float32_identical_to_ar"] = lossless  # share of prompts, per engine; 1.0 is lossless
    report["peak_memory_float32"] = memory

    waits = {}
    for engine in ("ar", "baseline"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                _, steps = _outputs(f32, engine, config)
            finally:
                torch.cuda.set_sync_debug_mode(0)
        syncs = sum("synchroniz" in str(w.message) for w in caught)
        waits[engine] = {"syncs": syncs, "verify_steps": steps, "per_step": syncs / max(steps, 1)}
    report["host_waits"] = waits

    del f32
    torch.cuda.empty_cache()
    bf16 = load_model_pair(preset, device=device, dtype="bfloat16")
    outputs, _ = _outputs(bf16, "ar", config)
    del bf16
    f32 = load_model_pair(preset, device=device, dtype="float32")
    divergences = []
    for prompt, got, want in zip(PROMPTS, outputs, reference, strict=True):
        if got == want:
            continue
        at = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), min(len(got), len(want)))
        gap = _top2_gap(f32, f32.encode_prompt(prompt), want[:at])
        divergences.append({"prompt": prompt, "first_divergence": at, "float32_top2_logit_gap": gap})
    report["bfloat16_divergence_rate"] = len(divergences) / len(PROMPTS)
    report["bfloat16_divergences"] = divergences
    report["draft_verify_overlap"] = _overlap_profile(f32, config)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    return report


def _overlap_profile(pair, config: EngineConfig) -> dict:
    """A short PDV run under ``torch.profiler``: the decode lane's (draft) and verify lane's kernel time, and how
    long both ran at once. The trace file is kept beside the report for a look in Perfetto."""
    from dataclasses import replace

    from torch.profiler import ProfilerActivity, profile

    from engine.kernel_overlap import overlap
    from engine.request import Request
    from engine.schedulers.registry import make_engine

    # pipelined from the first group and at every step; concurrent_lanes None: every lane at once on CUDA
    pipelined = replace(config, hybrid_threshold=None, step_choice=StepChoice.COUNT, concurrent_lanes=None)
    eng = make_engine("pdv", pair, pipelined)
    requests = [
        Request(f"o{i}", pair.encode_prompt(p), SamplingParams(max_new_tokens=MAX_NEW_TOKENS))
        for i, p in enumerate(PROMPTS)
    ]
    trace = Path(tempfile.mkdtemp(prefix="pdv-gpu-check-")) / "pdv_trace.json"
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        try:
            eng.generate(requests, timeout=600)
            threads = {lane.thread.native_id: name for name, lane in eng.lanes.items()}
        finally:
            eng.stop()
    prof.export_chrome_trace(str(trace))
    events = json.loads(trace.read_text()).get("traceEvents", [])
    found = overlap(events, threads, "decode", "verify")
    return {
        "draft_kernel_ms": found.first_us / 1000,
        "verify_kernel_ms": found.second_us / 1000,
        "overlap_ms": found.both_us / 1000,
        "overlap_share_of_shorter": found.share,  # 0: they never overlapped; 1: the shorter always ran beside
        "kernels": found.kernels,
        "trace": str(trace),
    }


def _nvml_counters(index: int) -> dict[str, float | str]:
    """NVML's utilisation counters for GPU ``index`` and CUDA's free and total memory.

    torch reads NVML through pynvml. Each counter is read on its own so one that
    is unsupported (utilisation under MIG) or a missing pynvml leaves the others
    readable; a counter that cannot be read is reported with why, not dropped.
    """
    readers = {
        "sm_busy_percent": lambda: float(torch.cuda.utilization(index)),
        "memory_busy_percent": lambda: float(torch.cuda.memory_usage(index)),
        "memory_free_mb": lambda: torch.cuda.mem_get_info(index)[0] / 2**20,
        "memory_total_mb": lambda: torch.cuda.mem_get_info(index)[1] / 2**20,
    }
    counters: dict[str, float | str] = {}
    for name, read in readers.items():
        try:
            counters[name] = read()
        except Exception as exc:  # pynvml missing or an NVML error: the report says which, per counter
            counters[name] = f"unreadable: {type(exc).__name__}: {exc}"
    return counters
