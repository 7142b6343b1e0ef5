"""Drivers: what is sent to an engine, when, and the harness that measures it.

* ``trace``      – the tokenised, capped request list every engine of a comparison replays;
* ``arrivals``   – closed-loop concurrency and open-loop (bursty) Poisson arrivals;
* ``replay``     – one engine on one trace under one arrival policy -> ``RunResult``;
* ``run_result`` – ``RunResult``: a run's requests, metrics, summary and ``StopReason``;
* ``live``       – ``LiveRun``: the run in progress (time series, finished requests, metrics) for other threads;
* ``sweep``      – every engine x load point; ``RunWriter``, the one writer of run files;
* ``job``        – a sweep in a background thread, for the dashboard;
* ``mt_bench``   – MT-Bench replayed as two turns;
* ``environment`` – the machine and package versions recorded with every run;
* ``simulate``   – a trace replayed into a simulated engine (``sim``) on its virtual clock, written as a replay's;
* ``sim_trace``  – traces for model pairs given by their shapes: lengths without their tokenizer;
* ``sim_validate`` – real runs and their simulations on this machine, predicted vs measured.
"""
