"""Synthetic workloads: prompts of a chosen token length, made of real-ish English text.

Lengths follow vLLM's "random" dataset: each request's prompt and output
lengths are drawn uniformly from ``[L * (1 - r), L * (1 + r)]`` (``r`` = range
ratio; ``r = 0`` gives fixed lengths), from a seeded generator.

A prompt is text, not raw token ids, so it goes through the same tokenizer and
chat template as a dataset prompt and shows up readable in outputs.jsonl. Text
of exactly ``n`` tokens is found by growing a seeded stream of words and
bisecting on how many of them to keep, then adding the next word letter by
letter; the result encodes to the asked length or a token or two fewer
(tokenizers merge across the cut).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workloads.datasets.sharegpt import SampledRequest, Tokenizer

_VOCABULARY = (
    "the system model request token batch memory latency queue worker thread cache value answer "
    "question people time year way day man thing woman life child world school state family student "
    "group country problem hand part place case week company number night point home water room mother "
    "area money story fact month lot right study book eye job word business issue side kind head house "
    "service friend father power hour game line end member law car city community name president team "
    "minute idea kid body information back parent face others level office door health person art war "
    "history party result change morning reason research girl guy moment air teacher force education "
    "is was are be have do say go can get make know will think take see come could want look use find "
    "give tell work call try ask need feel become leave put mean keep let begin seem help talk turn "
    "start show hear play run move like live believe hold bring happen write provide sit stand lose "
    "pay meet include continue set learn lead understand watch follow stop create speak read allow add "
    "spend grow open walk win offer remember love consider appear buy wait serve die send expect build "
    "stay fall cut reach kill remain suggest raise pass sell require report decide pull good new first "
    "last long great little own other old right big high different small large next early young "
    "important few public bad same able quickly slowly often never always sometimes together however "
    "because although while before after during without within between under over through into"
)
WORDS = tuple(_VOCABULARY.split())


@dataclass(frozen=True)
class LengthSpec:
    """Token lengths drawn uniformly from ``[mean * (1 - range_ratio), mean * (1 + range_ratio)]``."""

    mean: int
    range_ratio: float = 0.0

    def __post_init__(self) -> None:
        if self.mean < 1:
            raise ValueError(f"length must be >= 1, got {self.mean}")
        if not 0 <= self.range_ratio < 1:
            raise ValueError(f"range ratio must be in [0, 1), got {self.range_ratio}")

    def sample(self, rng: np.random.Generator, n: int) -> list[int]:
        low = max(1, int(self.mean * (1 - self.range_ratio)))
        high = max(low, int(self.mean * (1 + self.range_ratio)))
        return [int(x) for x in rng.integers(low, high + 1, size=n)]


def _word_stream(rng: np.random.Generator, n: int) -> list[str]:
    """``n`` words grouped in sentences of 6-14 words: capitalised, ending with a full stop."""
    words: list[str] = []
    while len(words) < n:
        sentence = [WORDS[i] for i in rng.integers(0, len(WORDS), size=int(rng.integers(6, 15)))]
        sentence[0] = sentence[0].capitalize()
        sentence[-1] += "."
        words.extend(sentence)
    return words[:n]


def text_of_length(tokenizer: Tokenizer, n_tokens: int, rng: np.random.Generator) -> tuple[str, int]:
    """Text that encodes to at most ``n_tokens`` tokens, as close to it as the tokenizer allows."""

    def count(text: str) -> int:
        return len(tokenizer.encode(text))

    words = _word_stream(rng, max(8, n_tokens))
    while count(" ".join(words)) <= n_tokens:  # some tokenizers give more than one word per token
        words.extend(_word_stream(rng, len(words)))
    lo, hi = 1, len(words)  # invariant: count(words[:hi]) > n_tokens
    if count(words[0]) > n_tokens:
        hi = 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count(" ".join(words[:mid])) <= n_tokens:
            lo = mid
        else:
            hi = mid
    base = " ".join(words[:lo]) if hi > 1 else ""
    text = base
    # the next word, letter by letter: closes the gap a whole word leaves with byte-level tokenizers
    nxt = words[lo] if hi > 1 else words[0]
    for j in range(1, len(nxt) + 1):
        candidate = f"{base} {nxt[:j]}" if base else nxt[:j]
        if count(candidate) > n_tokens:
            break
        text = candidate
    if not text:
        text = nxt[:1]  # a prompt must not be empty, even when one letter is over the budget
    return text, count(text)


def synthetic_requests(
    tokenizer: Tokenizer,
    num_requests: int,
    input_len: LengthSpec,
    output_len: LengthSpec,
    seed: int = 0,
) -> list[SampledRequest]:
    """``num_requests`` synthetic requests; the same arguments always give the same requests."""
    if num_requests < 1:
        raise ValueError(f"num_requests must be >= 1, got {num_requests}")
    rng = np.random.default_rng(seed)
    prompt_lens = input_len.sample(rng, num_requests)
    output_lens = output_len.sample(rng, num_requests)
    requests = []
    for i, (p_len, o_len) in enumerate(zip(prompt_lens, output_lens, strict=True)):
        text, actual = text_of_length(tokenizer, p_len, rng)
        requests.append(SampledRequest(f"synthetic-{i}", text, o_len, actual, has_reply=False))
    return requests
