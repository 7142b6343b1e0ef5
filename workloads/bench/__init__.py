"""``python -m workloads bench``: is PD-Verify faster than what a user already has, and do the lanes help?

Six parts, each a module with a ``run(ctx) -> PartResult``; every part runs its
competitors interleaved on the same prompts, model pair and dtype, round after
round, and reports median ratios with their min–max (``common``):

1. ``overhead`` – ``ar`` against transformers' greedy ``generate`` (goal >= 0.95x);
2. ``single`` – every engine's default drafter against ``ar`` and transformers;
3. ``load`` – the engines from C = 1 to 64 against ``generate`` served request
   by request (goal: the best engine at C = 16 >= 4x);
4. ``lanes`` – PDV, PD and Baseline under open-loop mixed traffic;
5. ``hardware`` – the verifier step against measured FLOP/s and bandwidth;
6. ``dashboard_cost`` – a replay with and without live sampling (goal < 5%).

``run`` is the command (CSVs, figures, the printed table); ``docs`` renders
``docs/results.md`` from the CSVs, the one renderer of that page. Beside the
suite, on the same machinery (``common``: held-out prompts, ratios over
rounds, CSVs; ``reference``: transformers' ``generate``), ``drafters``
(``python -m workloads.bench.drafters``) compares drafters, draft lengths and
controllers; its summary CSVs are rendered into the page by ``docs`` too.
"""
