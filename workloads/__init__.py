"""Workloads: datasets, the drivers that replay them on engines, the endpoint client, benchmarks and reports.

Subpackages, one concern each (each lists its modules):

* ``datasets`` – every source of prompts (ShareGPT, any ``datasets`` source, MT-Bench, synthetic);
* ``drivers``  – traces, arrivals, replay, sweeps, the live run and the background job;
* ``endpoint`` – an OpenAI-compatible server driven through the same engine protocol;
* ``bench``    – ``python -m workloads bench``, the benchmark suite, and the one writer of ``docs/results.md`` and
  the README's status table;
* ``report``   – the CLI's summary table and the shareable HTML report.

``__main__`` is ``python -m workloads replay|bench|report``; ``replay_args``
builds its flags from the config.
"""
