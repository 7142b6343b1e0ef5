"""``python -m workloads bench``: is PD-Verify faster than what a user already has, and do the lanes help?

Every benchmark is a part of this one command (``parts``: each a module with a
``run(ctx) -> PartResult``, and options of its own where it has any); every
part runs its competitors interleaved on the same prompts, model pair and
dtype, round after round, and reports median ratios with their min–max
(``rows``). The suite, run when ``--parts`` is not given:

1. ``overhead`` – ``ar`` against transformers' greedy ``generate`` (goal >= 0.95x);
2. ``single`` – every engine's default drafter against ``ar`` and transformers;
3. ``load`` – the engines from C = 1 to 64 against ``generate`` served request
   by request (goals: the best engine at C = 16 >= 6x; PDV >= 0.97x the better
   of Baseline and PD at every load point, ``pdv_goal``);
4. ``lanes`` – PDV, PD and Baseline under open-loop mixed traffic;
5. ``hardware`` – the verifier step against measured FLOP/s and bandwidth;
6. ``page_vs_cli`` – the default Live run in Chromium against the same spec
   through ``replay`` (goal: every engine's figures within ±10 %, the same verdict).

Run when named, into a directory of its own under ``--out``:

7. ``drafters`` – drafters, draft lengths and controllers against ``ar``, on
   held-out ShareGPT prompts at C = 1 and under load and on MT-Bench.

Each part's rows are typed (``rows``: one ``Row`` subclass per part, one
``Summary`` per competitor and metric), and a ratio with its interval is
written one way (``metrics.rounds.RatioInterval.text``).

``--quick`` sizes every part down to seconds on the tiny pair (the suite's
tests run each part so). ``run`` is the command (CSVs, figures, the printed
table); ``docs`` renders ``docs/results.md`` from the CSVs, the one renderer of
that page, and of the README's status table
(``docs.render_readme``).
"""
