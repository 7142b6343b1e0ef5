"""Prompt lookup: proposing tokens by finding the context's own suffix earlier in the context.

A request's context (prompt and output so far) often repeats itself: code,
quoted text, lists, a small model looping. The lookup takes the longest
suffix of ``max_n`` down to ``min_n`` tokens that also occurs earlier, picks
its latest earlier occurrence, and proposes up to ``k`` tokens that followed
it there (vLLM's ``ngram`` method, transformers' ``prompt_lookup_num_tokens``).
No model runs; a proposal is a point mass, so the acceptance rule stays exact.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


class Lookup(NamedTuple):
    tokens: list[int]  # the proposal; [] when nothing matched
    match: int  # length of the matched suffix (0 when nothing matched): longer matches are more reliable


NO_LOOKUP = Lookup([], 0)


def prompt_lookup(context: np.ndarray, min_n: int, max_n: int, k: int) -> Lookup:
    """Up to ``k`` tokens that followed the latest earlier occurrence of the longest matching suffix.

    ``context`` is a 1-D integer array ending with the last emitted token.
    Nothing is proposed when no suffix of ``min_n``..``max_n`` tokens occurs earlier or ``k`` is 0.
    """
    length = len(context)
    if k <= 0:
        return NO_LOOKUP
    for n in range(min(max_n, length - 1), min_n - 1, -1):
        # windows that start at 0..length-n-1: each is followed by at least one token
        windows = sliding_window_view(context[:-1], n)
        hits = np.flatnonzero((windows == context[-n:]).all(axis=1))
        if hits.size:
            start = int(hits[-1]) + n
            return Lookup(context[start : start + k].tolist(), n)
    return NO_LOOKUP
