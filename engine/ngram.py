"""Prompt lookup: proposing tokens by finding the context's own suffix earlier in the context.

A request's context (prompt and output so far) often repeats itself: code,
quoted text, lists, a small model looping. The lookup takes the longest
suffix of ``max_n`` down to ``min_n`` tokens that also occurs earlier, picks
its latest earlier occurrence, and proposes up to ``k`` tokens that followed
it there (vLLM's ``ngram`` method, transformers' ``prompt_lookup_num_tokens``).
No model runs; a proposal is a point mass, so the acceptance rule stays exact.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def prompt_lookup(context: np.ndarray, min_n: int, max_n: int, k: int) -> list[int]:
    """Up to ``k`` tokens that followed the latest earlier occurrence of the longest matching suffix.

    ``context`` is a 1-D integer array ending with the last emitted token.
    Returns [] when no suffix of ``min_n``..``max_n`` tokens occurs earlier or ``k`` is 0.
    """
    length = len(context)
    if k <= 0:
        return []
    for n in range(min(max_n, length - 1), min_n - 1, -1):
        # windows that start at 0..length-n-1: each is followed by at least one token
        windows = sliding_window_view(context[:-1], n)
        hits = np.flatnonzero((windows == context[-n:]).all(axis=1))
        if hits.size:
            start = int(hits[-1]) + n
            return context[start : start + k].tolist()
    return []
