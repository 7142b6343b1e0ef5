"""Teacher targets: the verifier's greedy answers with its top-k log-probabilities, and a cache for them.

Generation is the slow part of a run (most of its hour on two CPU threads), so
``cached_samples`` keeps what it made in a file and reuses it when the settings
that shaped it match.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import NamedTuple

import torch
from tqdm import tqdm

from distill.config import DistillConfig, Sample

log = logging.getLogger(__name__)


def load_verifier(dtype: torch.dtype = torch.float32):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from engine.models.presets import smol_verifier_dir

    path = smol_verifier_dir()
    tokenizer = AutoTokenizer.from_pretrained(path)
    # loaded rather than cast, so that buffers such as the rotary frequencies stay float32
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).eval()
    return model, tokenizer


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
    for b in range(0, len(order), cfg.gen_batch):
        new_tokens += _generate_batch(model, prompts, order[b : b + cfg.gen_batch], cfg, eos_id, pad_id, out)
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
    bar.close()
    return [s for s in out if s is not None]


def _generate_batch(
    model,
    prompts: Sequence[list[int]],
    idx: list[int],
    cfg: DistillConfig,
    eos_id: int,
    pad_id: int,
    out: list[Sample | None],
) -> int:
    """Generate one left-padded batch; fills ``out`` at ``idx`` and returns the answer tokens made."""
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
    new_tokens = 0
    for row, i in enumerate(idx):
        seq = answers[row]
        eos_at = (seq == eos_id).nonzero()
        length = int(eos_at[0]) + 1 if len(eos_at) else len(seq)
        out[i] = Sample(
            prompt_ids=torch.tensor(prompts[i], dtype=torch.long),
            answer_ids=seq[:length].clone(),
            topk_ids=top_ids[row, :length].to(torch.int32).clone(),
            topk_logp=top_logp[row, :length].to(torch.float16).clone(),
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


class Cached(NamedTuple):
    samples: list[Sample]
    seconds: float  # how long making them took: measured now, or recorded when they were cached
    reused: bool  # taken from the cache file rather than made in this run


def cached_samples(path: Path | None, key: dict, make: Callable[[], list[Sample]]) -> Cached:
    """``make()``'s samples, from ``path`` when it holds ones made with the same ``key``; saved there otherwise."""
    if path is not None and path.is_file():
        blob = torch.load(path, weights_only=True)
        if blob.get("key") == key:
            log.info("reusing generated targets from %s", path)
            return Cached([Sample(**fields) for fields in blob["samples"]], blob["seconds"], reused=True)
    start = time.perf_counter()
    samples = make()
    seconds = time.perf_counter() - start
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"key": key, "samples": [asdict(x) for x in samples], "seconds": seconds}, path)
    return Cached(samples, seconds, reused=False)
