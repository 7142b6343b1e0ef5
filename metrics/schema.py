"""Columns of the files a benchmark writes (one directory per invocation).

* ``requests.csv``   – one row per submitted request and run.
* ``timeseries.csv`` – one row per sampling window and run.
* ``summary.csv``    – one row per run: its figures pooled over its rounds, and its × AR intervals.
* ``rounds.csv``     – one row per run and round: the round's figures and what else the machine did.
* ``outputs.jsonl``  – one JSON object per request and run: prompt and generated tokens/text.
* ``run.json``       – configuration, models, device, package versions, per run.

A *run* is one engine (or endpoint) at one load point; a comparison replays
the trace on every engine once per *round* (``metrics.rounds``), so a run's
requests.csv, timeseries.csv and outputs.jsonl rows carry their round (1, 2, …)
and its time series restart at 0 each round. summary.csv pools the rounds'
requests and carries each figure's ratio to AR of the same round as median,
``_lo`` and ``_hi`` (the interval a repeat run's median falls in, ``metrics.rounds``) over ``rounds`` rounds.

Every row carries ``run_id`` (and ``engine``, ``concurrency``), so a directory
can hold many runs and new runs are appended. A cell that does not apply – a
lane the engine lacks, GPU counters without a GPU, TPOT of a one-token output –
is empty, never 0.
"""

from __future__ import annotations

REQUESTS_CSV = "requests.csv"
TIMESERIES_CSV = "timeseries.csv"
SUMMARY_CSV = "summary.csv"
ROUNDS_CSV = "rounds.csv"
OUTPUTS_JSONL = "outputs.jsonl"
RUN_JSON = "run.json"
RUN_FILES = (REQUESTS_CSV, TIMESERIES_CSV, SUMMARY_CSV, ROUNDS_CSV, OUTPUTS_JSONL, RUN_JSON)

REQUEST_COLUMNS = (
    "run_id", "engine", "concurrency", "request_rate", "request_id", "prompt_tokens", "output_tokens",
    "arrival_s", "first_token_s", "finish_s", "ttft_ms", "tpot_ms", "e2e_ms", "queue_ms",
    "drafted_tokens", "accepted_tokens", "verify_steps", "status", "error", "round",
)  # fmt: skip

TIMESERIES_COLUMNS = (
    "run_id", "engine", "concurrency", "t_s", "tokens_per_s", "running", "queue_prefill", "queue_decode",
    "queue_verify", "draft_len", "acceptance_rate", "gpu_util", "gpu_mem_util", "cpu_util", "rss_mb",
    "waiting", "kv_cache_usage", "mean_acceptance_length", "round", "suffix_tree_tokens",
)  # fmt: skip

SUMMARY_FIGURES = (
    "run_id", "engine", "concurrency", "request_rate", "num_requests", "completed", "failed", "duration_s",
    "output_tok_s", "req_s", "ttft_p50_ms", "ttft_p95_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p95_ms",
    "tpot_p99_ms", "itl_p99_ms", "e2e_p50_ms", "e2e_p95_ms", "e2e_p99_ms", "acceptance_rate",
    "mean_acceptance_length", "goodput_req_s",
)  # fmt: skip  # the fields of metrics.summary.RunSummary (its last, ``simulated``, is SIMULATED)
# ratio name -> the figure it divides by AR's of the same round; tokens/s above 1 is faster, latencies below 1 are
RATIO_FIGURES = {
    "tok_s": "output_tok_s", "tpot_p50": "tpot_p50_ms", "tpot_p99": "tpot_p99_ms", "ttft_p50": "ttft_p50_ms",
}  # fmt: skip
RATIO_COLUMNS = tuple(f"{name}_x_ar{end}" for name in RATIO_FIGURES for end in ("", "_lo", "_hi"))
# a simulated run's cost model (``sim``), so every row that holds a simulated figure says so; empty: measured
SIMULATED = "simulated"
SUMMARY_COLUMNS = (*SUMMARY_FIGURES, *RATIO_COLUMNS, "rounds", SIMULATED)

NOISE_COLUMNS = ("others_cpu_share", "steal_share", "load_1m")  # metrics.host_noise.HostNoise over the round
ROUND_COLUMNS = (*SUMMARY_FIGURES[:4], "round", *SUMMARY_FIGURES[4:], *NOISE_COLUMNS, SIMULATED)

OUTPUT_FIELDS = (
    "run_id", "engine", "request_id", "prompt", "prompt_token_ids", "output_token_ids", "text", "round",
    "token_kinds", "steps",
)  # fmt: skip

# Columns added to a file after its first version: a file written before them is read with them empty.
ADDED_COLUMNS = {
    "requests": ("round",),
    "timeseries": ("waiting", "kv_cache_usage", "mean_acceptance_length", "round", "suffix_tree_tokens"),
    "summary": (*RATIO_COLUMNS, "rounds", SIMULATED),
    "rounds": (SIMULATED,),
}
TIMESERIES_ADDED = ADDED_COLUMNS["timeseries"]

# Columns read back as text whatever they look like (a ShareGPT id can look like a number).
TEXT_COLUMNS = ("run_id", "engine", "request_id", "status", "error", SIMULATED)
