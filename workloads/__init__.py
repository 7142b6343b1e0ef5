"""Workloads: what is sent to an engine, when, and the driver that measures it.

* ``sharegpt`` / ``synthetic`` – sources of prompts and reference output lengths.
* ``trace``     – the tokenised, capped request list every engine of a comparison replays.
* ``arrivals``  – closed-loop concurrency and open-loop (bursty) Poisson arrivals.
* ``replay``    – one engine on one trace under one arrival policy -> ``RunResult``.
* ``sweep``     – every engine x load point, written to a run directory as each run ends.
* ``job``       – a sweep in a background thread, for the dashboard.
* ``__main__``  – ``python -m workloads replay``.
"""
