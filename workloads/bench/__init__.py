"""``python -m workloads bench``: is PD-Verify faster than what a user already has, and do the lanes help?

Every benchmark is a part of this one command (``parts``: each a module with a
``run(ctx) -> PartResult``, and options of its own where it has any); every
part runs its competitors interleaved on the same prompts, model pair and
dtype, round after round, and reports median ratios with their min–max
(``common``). The suite, run when ``--parts`` is not given:

1. ``overhead`` – ``ar`` against transformers' greedy ``generate`` (goal >= 0.95x);
2. ``single`` – every engine's default drafter against ``ar`` and transformers;
3. ``load`` – the engines from C = 1 to 64 against ``generate`` served request
   by request (goal: the best engine at C = 16 >= 4x);
4. ``lanes`` – PDV, PD and Baseline under open-loop mixed traffic;
5. ``hardware`` – the verifier step against measured FLOP/s and bandwidth;
6. ``page_vs_cli`` – the default Live run in Chromium against the same spec
   through ``replay`` (goal: every engine's figures within ±10 %, the same verdict).

The studies, run when named, each into a directory of its own under ``--out``:

7. ``drafters`` – drafters, draft lengths and controllers against ``ar``;
8. ``suffix`` – suffix drafting after a warm-up of other requests, in calls
   that append rounds;
9. ``forward_cost`` – dispatched operators and wall time of one forward, and
   the verifier step against the machine's rates, before and after a change.
10. ``lane_rates`` – forwards per second of one lane with every thread against
    two lanes at once with half each.
11. ``lane_modes`` – AR, Baseline, PD and PDV taking turns against PD and PDV
    with lanes at once and Baseline's batch split over two lanes at once (the
    fair reference), at one closed-loop load.

``--quick`` sizes every part down to seconds on the tiny pair (the suite's
tests run each part so). ``run`` is the command (CSVs, figures, the printed
table); ``docs`` renders ``docs/results.md`` from the CSVs, the one renderer of
that page (the drafter and suffix studies' summary CSVs included, through its
``<!-- csv: … -->`` blocks).
"""
