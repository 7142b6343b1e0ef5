"""Metrics: what a benchmark run measured, derived from finished ``Request`` records.

Data flows one way::

    Request records ──► request_metrics ──► summary ──► export ──► five files
    engine.stats()  ──► timeseries (+ device probe) ──┘              │
                                                        runs ◄───────┘ (dashboard)

* ``request_metrics`` – per request TTFT, TPOT, ITL, E2E, queue wait.
* ``summary``         – per run throughput, percentiles, acceptance, goodput.
* ``timeseries``      – a sampler thread turning ``engine.stats()`` snapshots into rows.
* ``device``          – GPU counters through NVML, or CPU/RSS through psutil, never silently.
* ``schema``/``export``/``runs`` – the CSV/JSONL/JSON files and reading them back.

Nothing here imports torch or streamlit: the dashboard and the CSV readers can
use this package without loading a model. ``METRICS.md`` beside this file lists
every definition and column.
"""
