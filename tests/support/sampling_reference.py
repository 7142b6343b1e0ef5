"""Exact token marginals of a model pair under sampling, and the power of a chi-square test against a wrong rule.

Everything here is computed from the models' logits with its own filter
(``reference_probs``), independent of ``engine.sampling``, so a broken
``probabilities()`` cannot agree with it by construction.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from scipy.stats import chi2, chisquare, ncx2

ALPHA = 1e-4  # per chi-square test; sixteen or so in the suite, all seeded, so a false alarm is rare and repeatable


def reference_probs(logits: np.ndarray, temperature: float, top_k: int | None, top_p: float) -> np.ndarray:
    """softmax(logits / T), keeping the top_k largest, then the smallest prefix of the sorted rest whose mass
    before the last kept token is below top_p; renormalised. ``logits`` is [N, V]."""
    scaled = logits / temperature
    if top_k:
        kth = np.sort(scaled, axis=-1)[:, -top_k][:, None]
        scaled = np.where(scaled < kth, -np.inf, scaled)
    probs = np.exp(scaled - scaled.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    order = np.argsort(-probs, axis=-1, kind="stable")
    sorted_probs = np.take_along_axis(probs, order, -1)
    before = np.cumsum(sorted_probs, -1) - sorted_probs
    drop = np.zeros_like(probs, dtype=bool)
    np.put_along_axis(drop, order, before >= top_p, -1)
    probs = np.where(drop, 0.0, probs)
    return probs / probs.sum(-1, keepdims=True)


def last_logits(model, sequences: list[list[int]]) -> np.ndarray:
    """Logits [N, V] at the last position of equally long ``sequences``, through transformers' sdpa path."""
    previous = model.config._attn_implementation
    model.set_attn_implementation("sdpa")
    out = []
    try:
        with torch.inference_mode():
            for start in range(0, len(sequences), 512):
                batch = torch.tensor(sequences[start : start + 512])
                out.append(model(batch).logits[:, -1].double().numpy())
    finally:
        model.set_attn_implementation(previous)
    return np.concatenate(out)


class Marginals(NamedTuple):
    exact: np.ndarray  # [depth, V]: P(output token i = x) under the verifier alone
    resampled: np.ndarray  # [depth, V]: the same under "after a rejection, sample from p" (the wrong rule)
    draft: np.ndarray  # [depth, V]: the same under the draft model alone


def marginals(
    pair, prompt: list[int], depth: int, temperature: float, top_k: int | None, top_p: float, gate: float | None
) -> Marginals:
    """Exact marginals of output tokens 0..depth-1, by walking the tree of every prefix the verifier can emit.

    Token 0 comes from prefill; every later token is assumed drafted or corrected (draft length L with
    max_new_tokens = L + 2 makes tokens 1..L so). Under the wrong rule a drafted position emits
    min(p, q) + (1 - sum min(p, q)) p, whatever the block position; where the confidence ``gate``
    stops (draft's own top probability below it) the verifier samples p itself.
    """
    vocab = pair.verifier.vocab_size
    exact, resampled, draft = (np.zeros((depth, vocab)) for _ in range(3))
    level = {(): (1.0, 1.0, 1.0)}  # prefix -> its probability under (verifier, wrong rule, draft)
    for i in range(depth):
        prefixes = list(level)
        sequences = [prompt + list(s) for s in prefixes]
        v_logits = last_logits(pair.verifier.model, sequences)
        d_logits = last_logits(pair.draft.model, sequences)
        p = reference_probs(v_logits, temperature, top_k, top_p)
        q = reference_probs(d_logits, temperature, top_k, top_p)
        overlap = np.minimum(p, q)
        r = overlap + (1 - overlap.sum(-1, keepdims=True)) * p
        if i == 0:
            r = p
        if gate is not None:
            raw = np.exp(d_logits - d_logits.max(-1, keepdims=True))
            sure = (raw / raw.sum(-1, keepdims=True)).max(-1) >= gate
            r = np.where(sure[:, None], r, p)
        weights = np.array([level[s] for s in prefixes])  # [N, 3]
        exact[i] = weights[:, 0] @ p
        resampled[i] = weights[:, 1] @ r
        draft[i] = weights[:, 2] @ q
        if i + 1 < depth:
            level = {}
            for n, s in enumerate(prefixes):
                for x in np.flatnonzero(p[n] + q[n]):
                    w = weights[n] * (p[n, x], r[n, x], q[n, x])
                    level[(*s, int(x))] = tuple(np.add(level.get((*s, int(x)), (0.0, 0.0, 0.0)), w))
    return Marginals(exact, resampled, draft)


def pooled(probs: np.ndarray, trials: int, min_expected: float = 5.0) -> np.ndarray:
    """Bins with expected count >= min_expected under ``probs``, the rest pooled into one: a [V] -> bin map."""
    big = probs * trials >= min_expected
    return np.where(big, np.cumsum(big) - 1, big.sum())


def chisquare_pvalue(counts: np.ndarray, probs: np.ndarray) -> float:
    """Chi-square p-value of ``counts`` against ``probs``, bins pooled by the expected counts."""
    bins = pooled(probs, counts.sum())
    obs, exp = np.bincount(bins, counts), np.bincount(bins, probs / probs.sum() * counts.sum())
    keep = exp > 0
    if obs[~keep].any():  # a token ``probs`` rules out was sampled
        return 0.0
    return float(chisquare(obs[keep], exp[keep]).pvalue)


def power(null: np.ndarray, alternative: np.ndarray, trials: int, alpha: float = ALPHA) -> float:
    """Probability that the pooled chi-square test at level ``alpha`` rejects ``null`` when samples follow
    ``alternative``: noncentral chi-square with lambda = trials * sum (a - p)^2 / p over the pooled bins."""
    bins = pooled(null, trials)
    p, a = np.bincount(bins, null), np.bincount(bins, alternative)
    keep = p > 0
    df = int(keep.sum()) - 1
    lam = trials * float((((a - p) ** 2)[keep] / p[keep]).sum())
    return float(ncx2.sf(chi2.isf(alpha, df), df, lam))
