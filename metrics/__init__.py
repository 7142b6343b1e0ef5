"""Metrics: what a benchmark run measured, derived from finished ``Request`` records.

Data flows one way::

    Request records ──► request_metrics ──► summary ──► export ──► five files
    engine.stats()  ──► timeseries (+ device probe) ──┘              │
                                                        runs ◄───────┘ (dashboard)

* ``run_key``         – a run's identity: engine, load, id.
* ``request_metrics`` – per request TTFT, TPOT, ITL, E2E, queue wait.
* ``summary``         – per run throughput, percentiles, acceptance, goodput.
* ``timeseries``      – a sampler thread turning ``engine.stats()`` snapshots (``EngineStats``) into rows.
* ``server_metrics``  – a server's Prometheus ``/metrics`` page read for an endpoint run's time series.
* ``device``          – GPU counters through NVML (``nvml_probe``), or CPU/RSS through psutil
                        (``host_probe``), never silently; ``device_types`` – what a probe reports.
* ``schema``/``export``/``runs`` – the CSV/JSONL/JSON files and reading them back.
* ``run_record``      – ``RunRecord``: everything written for one round of one run.
* ``recorded_steps``  – a request's verify steps as outputs.jsonl keeps them, and reading them back.
* ``frames``          – pandas views of runs, identical whether built live or read back.
* ``comparison``      – every run against AR at the same load ("× AR") and how summary columns read.
* ``rounds``          – a comparison's rounds: balanced order, ratios within a round, their min–max interval;
  ``round_summary`` – one load point summarised over its rounds; ``verdict`` – its one-line answer.
* ``host_noise``      – what else the machine did during a run (load, other processes' CPU, steal).
* ``draft_sources``   – proposals per draft source: how often each drafted and how much was kept.

Nothing here imports torch, Streamlit or Plotly (figures are ``presentation``'s):
the dashboard and the CSV readers can use this package without loading a model.
It reads the engine's ``Request``, ``DraftSource`` and ``EngineStats`` types
(``engine.request``, ``engine.draft_source``, ``engine.schedulers.stats``), which
load no torch. ``METRICS.md`` beside this file lists every definition and column.
"""
