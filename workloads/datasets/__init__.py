"""Datasets: every source of prompts, and nothing else of the project but each other.

* ``sharegpt_file`` – the ShareGPT format, read record by record (the truncated bundled copy or any path);
  the one reader of ShareGPT records, whose rule (first human turn, the reply after it) every source follows;
* ``sharegpt``      – benchmark requests sampled from ShareGPT exchanges (vLLM's length filters);
* ``sources``       – anything ``datasets.load_dataset`` reads (files, directories, hub ids), recognised by shape;
* ``mt_bench``      – MT-Bench's bundled questions and their request ids;
* ``synthetic``     – prompts of exact token lengths from a seeded word stream;
* ``data/``         – the bundled files (held-out ShareGPT prompts, MT-Bench questions).

The draft-training lab reads ShareGPT through ``sharegpt_file`` too, so this
room imports nothing from engines, drivers or metrics.
"""
