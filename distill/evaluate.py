"""Evaluation: greedy acceptance of the saved draft replaying the verifier's answers, and forward times.

The draft is measured as the engines run it: reloaded from its directory in the
dtype it trained in, with its forward time taken through the engines' packed
forward. Acceptance replays greedy speculative decoding over the verifier's own
held-out answers, so it needs no engine: see ``block_acceptance``.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import torch

from distill.config import DistillConfig, Sample, torch_dtype
from distill.teacher import generate_samples, load_verifier

log = logging.getLogger(__name__)

EVAL_GATES = (0.2, 0.3, 0.4, 0.5)  # --draft-confidence values the evaluation also reports


@torch.inference_mode()
def greedy_proposals(draft, sample: Sample, draft_len: int) -> tuple[list[list[bool]], list[list[float]]]:
    """``matches[d][g]``: is the draft's greedy proposal ``d + 1`` of a block, made where answer token ``g`` is
    predicted, that token? (The block's earlier proposals being the verifier's tokens.) ``top[d][g]``: the
    draft's top-1 probability there, which the engines' confidence gate compares with its threshold.

    A draft that reads only tokens proposes the same at every depth once its
    earlier proposals were right, so one teacher-forced pass gives every depth.
    """
    seq = torch.cat([sample.prompt_ids, sample.answer_ids]).unsqueeze(0)
    p, answer = len(sample.prompt_ids), sample.answer_ids
    logits = draft(input_ids=seq).logits[0, p - 1 : p - 1 + len(answer)]
    top = logits.float().softmax(-1).max(-1)
    return [(top.indices == answer).tolist()] * draft_len, [top.values.tolist()] * draft_len


class Replay(NamedTuple):
    accepted: int
    proposed: int
    rejected: int  # blocks that ended at a proposal the verifier refused


def block_acceptance(
    matches: Sequence[Sequence[bool]], draft_len: int, sure: Sequence[Sequence[bool]] | None = None
) -> Replay:
    """Token and block counts when greedy speculative decoding replays the verifier's answer.

    The verifier makes answer token 0 at prefill. Each block then drafts
    ``draft_len`` tokens (fewer at the end of the answer); the accepted count is
    the matching prefix, and the verifier adds one token of its own. Proposal
    ``d`` of a block only counts when the ones before it matched, so the
    teacher-forced ``matches[d - 1]`` (see ``greedy_proposals``) give every block exactly.
    With ``sure`` (the confidence gate's verdicts, same shape) a block stops before its first unsure proposal.
    """
    accepted = proposed = rejected = 0
    pos, total = 1, len(matches[0])
    while pos < total:
        block = min(draft_len, total - pos)
        if sure is not None:
            block = next((k for k in range(block) if not sure[k][pos + k]), block)
        run = 0
        while run < block and matches[run][pos + run]:
            run += 1
        accepted += run
        proposed += block
        rejected += run < block
        pos += run + 1
    return Replay(accepted, proposed, rejected)


def acceptance(draft, samples: Sequence[Sample], draft_len: int, gates: Sequence[float] = ()) -> dict:
    """Greedy acceptance over ``samples``, and under ``gates`` (the engines' ``--draft-confidence`` values)."""
    accepted = drafted = rejected = agree = total = 0
    gated = {g: [0, 0] for g in gates}  # accepted, proposed
    for s in samples:
        m, top = greedy_proposals(draft, s, draft_len)
        replay = block_acceptance(m, draft_len)
        accepted, drafted, rejected = (
            accepted + replay.accepted,
            drafted + replay.proposed,
            rejected + replay.rejected,
        )
        agree, total = agree + sum(m[0]), total + len(m[0])
        for g, sums in gated.items():
            a, d, _ = block_acceptance(m, draft_len, [[x >= g for x in row] for row in top])
            sums[0], sums[1] = sums[0] + a, sums[1] + d
    result = {
        "draft_len": draft_len,
        "acceptance_rate": round(accepted / drafted, 4),
        "accepted": accepted,
        "drafted": drafted,
        "rejected": rejected,
        # the chance that a proposal the verifier gets to judge is accepted (Leviathan et al.'s alpha);
        # the engines' goodput controller estimates the same ratio
        "per_token_acceptance": round(accepted / max(accepted + rejected, 1), 4),
        "top1_agreement": round(agree / total, 4),
        "eval_prompts": len(samples),
        "eval_answer_tokens": total,
    }
    if gated:
        result["gated"] = [
            {
                "draft_confidence": g,
                "acceptance_rate": round(a / max(d, 1), 4),
                "accepted": a,
                "proposed": d,
            }
            for g, (a, d) in gated.items()
        ]
    return result


@torch.inference_mode()
def exit_agreement(verifier, samples: Sequence[Sample]) -> dict:
    """How early the verifier settles on its greedy token: for k = 1 .. all of its layers, the share of
    answer tokens that its own final norm and output layer, applied after its first k layers, predict.

    A draft that costs a fifth of a verifier forward has to match what the full stack decides; this shows
    how much of that decision the verifier itself has made a layer or a few before its end.
    """
    layers = verifier.config.num_hidden_layers
    agree, total = [0] * layers, 0
    for s in samples:
        seq = torch.cat([s.prompt_ids, s.answer_ids]).unsqueeze(0)
        p, answer = len(s.prompt_ids), s.answer_ids
        states = verifier.model(input_ids=seq, output_hidden_states=True).hidden_states
        for k in range(1, layers + 1):
            at = states[k][0, p - 1 : p - 1 + len(answer)]
            if k < layers:  # the model's last entry already went through its final norm
                at = verifier.model.norm(at)
            agree[k - 1] += int((verifier.lm_head(at).argmax(-1) == answer).sum())
        total += len(answer)
    return {"answer_tokens": total, "top1_agreement": [round(a / total, 4) for a in agree]}


@torch.inference_mode()
def forward_ms(runner, prompt_ids: torch.Tensor, steps: int = 64, repeats: int = 3) -> float:
    """Median time of one single-token forward through ``runner`` (as the engines run it) at batch 1 (ms)."""
    keep = torch.tensor([0])
    runs = []
    for _ in range(repeats):
        store = runner.new_store(len(prompt_ids) + steps + 8)
        n = len(prompt_ids)
        runner.forward([store], prompt_ids, [n], torch.tensor([n - 1]))
        token = prompt_ids[-1:]
        for i in range(steps + 4):
            if i == 4:
                start = time.perf_counter()
            logits = runner.forward([store], token, [1], keep)
            token = logits.argmax(-1)
        runs.append((time.perf_counter() - start) / steps * 1000)
    return round(statistics.median(runs), 2)


def saved_draft(out: Path, verifier):
    """The draft saved in ``out``, loaded onto ``verifier`` as the engines run it."""
    from engine.models.shared_draft import load_shared_draft, stored_compute_dtype

    return load_shared_draft(out, verifier, stored_compute_dtype(out) or torch.float32, torch.device("cpu"))


def train_fit(out: Path, verifier, prompts: Sequence[list[int]], cfg: DistillConfig, eos_id: int, pad_id: int):
    """Greedy acceptance on training prompts, answered as in training (by the ``teacher_dtype`` copy).

    Set beside the held-out figure, it tells whether the draft is short of capacity (both low) or of data
    (high on what it trained on, low on new prompts).
    """
    teacher = load_verifier(torch_dtype(cfg.teacher_dtype))[0]
    samples = generate_samples(teacher, prompts, cfg, eos_id, pad_id, "verifier answers (training prompts)")
    return acceptance(saved_draft(out, verifier), samples, cfg.draft_len)


def evaluate(out: Path, verifier, eval_samples: Sequence[Sample], cfg: DistillConfig) -> dict:
    """Reload the saved draft as the engines run it and measure acceptance and forward times."""
    from engine.models.pair import own_parameters
    from engine.runner import ModelRunner

    draft = saved_draft(out, verifier)
    ev = acceptance(draft, eval_samples, cfg.draft_len, EVAL_GATES)
    log.info(
        "greedy acceptance at L=%d: %.4f (top-1 agreement %.4f)",
        cfg.draft_len,
        ev["acceptance_rate"],
        ev["top1_agreement"],
    )
    probe = eval_samples[0].prompt_ids
    steps, repeats = 64, 3
    previous = verifier.config._attn_implementation
    try:
        draft_ms = forward_ms(ModelRunner(draft, "draft"), probe, steps, repeats)
        verifier_ms = forward_ms(ModelRunner(verifier, "verifier"), probe, steps, repeats)
    finally:
        verifier.set_attn_implementation(previous)
    latency = {
        "draft_ms": draft_ms,
        "verifier_ms": verifier_ms,
        "ratio": round(draft_ms / verifier_ms, 4),
        "steps": steps,
        "repeats": repeats,
    }
    log.info("forward ms/token: draft %.2f, verifier %.2f, ratio %.3f", draft_ms, verifier_ms, latency["ratio"])
    arch = {k: getattr(draft.config, k) for k in ("hidden_size", "num_attention_heads", "num_key_value_heads")}
    arch["intermediate_size"] = draft.config.intermediate_size
    arch["num_hidden_layers"] = draft.config.num_hidden_layers
    return {
        "architecture": arch,
        "eval": ev,
        "latency": latency,
        "parameters": own_parameters(draft, verifier),
        "vocab_size": draft.config.vocab_size,
        "vocab_subset": draft.lm_head.vocab_index.numel(),
    }
