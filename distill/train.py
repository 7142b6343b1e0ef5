"""Training: the student (verifier layers on the verifier's shared embedding), its loss, and the loop."""

from __future__ import annotations

import logging
import math
import random
import statistics
import time
from collections.abc import Sequence

import torch
from tqdm import tqdm

from distill.config import DistillConfig, Sample, parse_layers, torch_dtype

log = logging.getLogger(__name__)


def build_student(verifier, cfg: DistillConfig, vocab_index: torch.Tensor):
    """Copies of the ``cfg.layers`` verifier layers on its (frozen, shared) embeddings and output rows."""
    from engine.models.shared_draft import draft_from_verifier

    verifier.get_input_embeddings().weight.requires_grad_(False)
    return draft_from_verifier(verifier, parse_layers(cfg.layers), vocab_index)


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
    """Right-padded inputs, plus flat indices of the positions that predict answer tokens and their targets."""
    lengths = [len(s.prompt_ids) + len(s.answer_ids) for s in samples]
    width = max(lengths)
    ids = torch.full((len(samples), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(samples), width), dtype=torch.long)
    positions, tk_ids, tk_logp = [], [], []
    for row, s in enumerate(samples):
        seq = torch.cat([s.prompt_ids, s.answer_ids])
        ids[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1
        p = len(s.prompt_ids)
        # position t predicts token t+1: answer token j is predicted at p - 1 + j
        positions.append(row * width + torch.arange(p - 1, p - 1 + len(s.answer_ids)))
        tk_ids.append(s.topk_ids)
        tk_logp.append(s.topk_logp)
    return ids, mask, torch.cat(positions), torch.cat(tk_ids), torch.cat(tk_logp)


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


def autocast(name: str):
    """CPU autocast to ``name``; a no-op for float32 (weights and optimizer state stay float32 either way)."""
    dtype = torch_dtype(name)
    return torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32)


def train(student, samples: Sequence[Sample], cfg: DistillConfig, pad_id: int, deadline: float) -> dict:
    """AdamW with warmup + cosine decay over ``cfg.epochs`` passes; stops early only at the deadline.

    Only the draft's own weights (layers and final norm) train; the embedding
    and output rows belong to the verifier. Mutates ``student``'s weights and leaves it in eval mode.
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
    for epoch, batches in enumerate(epochs):
        for batch in batches:
            if time.monotonic() > deadline:
                stopped_early = True
                break
            ids, mask, positions, tk_ids, tk_logp = collate([samples[i] for i in batch], pad_id)
            time_progress = (time.monotonic() - clock_start) / budget
            lr = lr_at(step, total, cfg, time_progress)
            for group in opt.param_groups:
                group["lr"] = lr
            with lower_precision:
                hidden = student.model(input_ids=ids, attention_mask=mask).last_hidden_state
            hidden = hidden.reshape(-1, hidden.shape[-1]).index_select(0, positions)
            with lower_precision:
                logits = head.subset_logits(hidden)
            loss, kl = distill_loss(logits, to_subset[tk_ids.long()], tk_logp, cfg.ce_weight)
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
