"""Data preparation: prompts and real replies from the bundled ShareGPT file, and the draft's vocabulary."""

from __future__ import annotations

import random
import warnings
from collections import Counter
from collections.abc import Sequence

import torch

from distill.config import DistillConfig, Sample
from workloads.datasets.sharegpt_file import iter_exchanges

ANSWER_WEIGHT = 20  # how much more a token of a verifier answer counts than one of ShareGPT text


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
