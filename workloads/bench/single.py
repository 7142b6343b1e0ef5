"""Part 2, single stream: every engine with its default drafter and controller against ``ar``,
transformers' plain and prompt-lookup ``generate`` and, where the pair allows it, transformers' assisted
generation with the draft model; one request at a time.

Ratios are to ``ar`` in the same round. Assisted generation needs a draft that
transformers can run as an assistant (a full causal LM sharing the verifier's
tokenizer, as in the ``qwen-coder`` preset); other pairs leave it out and say so.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.config import ENGINES, EngineConfig, SamplingParams
from workloads.bench.common import BenchContext, PartResult, first, held_out, rotated
from workloads.bench.reference import hf_generate
from workloads.bench.rows import RateRow, find, ratio_summary, same_output_note, spread
from workloads.drivers.arrivals import ClosedLoop
from workloads.drivers.replay import replay
from workloads.drivers.run_spec import RunSettings, RunSpec

NAME = "2-single"
LOOKUP = 10  # prompt_lookup_num_tokens: the better of the two settings the drafter benchmark tried
HF = "transformers generate"
HF_LOOKUP = f"transformers generate lookup={LOOKUP}"
HF_ASSISTED = "transformers assisted (draft model)"


@dataclass(frozen=True, kw_only=True)
class SingleRow(RateRow):
    acceptance: float | None  # engines only: transformers' generate reports none
    tokens_per_step: float | None
    same_output_as_ar: bool


def assistant_of(pair):
    """The draft model if transformers can use it as an assistant, else None."""
    model = getattr(pair.draft, "model", None)
    if model is None or not hasattr(model, "generate") or pair.source.get("preset") != "qwen-coder":
        return None
    return model


def run(ctx: BenchContext) -> PartResult:
    s, pair = ctx.settings, ctx.pair
    trace = held_out(ctx, s.prompts)
    assistant = assistant_of(pair)
    labels = [*ENGINES, HF, HF_LOOKUP] + ([HF_ASSISTED] if assistant is not None else [])
    for lookup in (None, LOOKUP):  # warm-up: each generate path's first call pays lazy set-up
        hf_generate(pair, first(trace, 1), 4, lookup)
    params = SamplingParams(max_new_tokens=s.max_new_tokens, seed=0)
    rows: list[SingleRow] = []
    for round_ in range(s.rounds):
        measured, outputs = [], {}
        for label in rotated(labels, round_):
            if label in ENGINES:
                settings = RunSettings(EngineConfig(), params)
                result = replay(pair, trace, RunSpec(label, ClosedLoop(1), settings))
                outputs[label] = [list(r.output_token_ids) for r in result.requests]
                m = result.summary
                measured.append((label, m.output_tok_s, m.acceptance_rate, m.mean_acceptance_length))
            else:
                lookup = LOOKUP if label == HF_LOOKUP else None
                helper = assistant if label == HF_ASSISTED else None
                tok_s, outputs[label] = hf_generate(pair, trace, s.max_new_tokens, lookup, helper)
                measured.append((label, tok_s, None, None))
        rows += [
            SingleRow(group="C=1", round=round_, label=label, output_tok_s=tok_s, acceptance=acceptance,
                      tokens_per_step=per_step, same_output_as_ar=outputs[label] == outputs["ar"])
            for label, tok_s, acceptance, per_step in measured
        ]  # fmt: skip
    summary = ratio_summary(rows, "output_tok_s", "ar", NAME)
    best = max((e for e in ENGINES if e != "ar"), key=lambda e: find(summary, "C=1", e, "output_tok_s").ratio.median)
    notes = [
        f"Fastest engine one request at a time: {best}, {spread(find(summary, 'C=1', best, 'output_tok_s'))} ar; "
        f"transformers' prompt-lookup generate: {spread(find(summary, 'C=1', HF_LOOKUP, 'output_tok_s'))} ar.",
        same_output_note(rows, "same_output_as_ar"),
    ]
    if assistant is None:
        notes.append("Assisted generation left out: this pair's draft is not a transformers assistant model.")
    return PartResult(NAME, "Single stream: every engine against ar and transformers, C = 1", rows, summary, [], notes)
