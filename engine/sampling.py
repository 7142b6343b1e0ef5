"""Turning logits into the distributions that drafting and verification compare.

Greedy rows (temperature 0) get the one-hot distribution of their argmax, so
the speculative acceptance rule reduces exactly to "accept while the draft
token equals the verifier's argmax" and needs no special case. Sampling rows
get softmax(logits / T) truncated by top-k and top-p, then renormalised.

Each sampling request owns a ``torch.Generator`` seeded from its seed, so
what it samples does not depend on which other requests share its batch.

A sequence's parameters go to the device once (``SamplingRow``, at its first
step); each step gathers its rows' (``SamplingRows.of``) with one operator and
no upload.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from engine.config import SamplingParams
from engine.request import Request
from engine.transfers import upload


def _row_values(params: SamplingParams) -> list[float]:
    """A row's parameters as ``SamplingRow.values`` holds them."""
    return [params.temperature, params.top_p, float(params.top_k or 0), float(params.greedy)]


@dataclass(frozen=True)
class SamplingRow:
    """One sequence's sampling parameters on the device, uploaded once and gathered by every step after."""

    values: torch.Tensor  # [4] float32: temperature, top_p, top_k, greedy (1.0 or 0.0)
    params: SamplingParams
    generator: torch.Generator | None  # None for greedy rows


class Sampled(Protocol):
    """What ``SamplingRows.of`` reads of a sequence and sets on it (``engine.sequence.Sequence`` is one)."""

    request: Request
    generator: torch.Generator | None
    sampling: SamplingRow | None


@dataclass(frozen=True)
class SamplingRows:
    """Sampling parameters of the rows of a batch: tensors on the device, and the host's copy of what
    decides which operators run (so that deciding needs no read-back)."""

    temperature: torch.Tensor  # [B] float
    top_p: torch.Tensor  # [B] float
    top_k: torch.Tensor  # [B] long; 0 encodes no truncation (a tensor holds no None)
    greedy_mask: torch.Tensor  # [B] bool, on the device
    greedy: tuple[bool, ...]  # [B] host copy: decides where random numbers are drawn
    generators: tuple[torch.Generator | None, ...]  # [B] None for greedy rows
    truncate_k: tuple[bool, ...] = ()  # [B] host: the row has top_k > 0
    truncate_p: tuple[bool, ...] = ()  # [B] host: the row has top_p < 1

    @staticmethod
    def build(
        params: list[SamplingParams], generators: list[torch.Generator | None], device: torch.device
    ) -> SamplingRows:
        """The rows of ``params``, uploaded in one copy (a batch without ``Sequence``s: tests, benchmarks)."""
        host = [v for p in params for v in _row_values(p)]
        values = upload(host, device, torch.float32).view(len(params), 4)
        return SamplingRows._of_matrix(values, params, generators)

    @staticmethod
    def gather(rows: list[SamplingRow]) -> SamplingRows:
        """The batch of ``rows`` (each uploaded already): one stack on the device, no copy from the host."""
        values = torch.stack([r.values for r in rows])  # [B, 4]
        return SamplingRows._of_matrix(values, [r.params for r in rows], [r.generator for r in rows])

    @staticmethod
    def _of_matrix(
        values: torch.Tensor,  # [B, 4] as SamplingRow.values
        params: list[SamplingParams],
        generators: list[torch.Generator | None],
    ) -> SamplingRows:
        temperature, top_p, top_k, greedy = values.t()
        return SamplingRows(
            temperature=temperature,
            top_p=top_p,
            top_k=top_k.long(),
            greedy_mask=greedy.bool(),
            greedy=tuple(p.greedy for p in params),
            generators=tuple(generators),
            truncate_k=tuple(bool(p.top_k) for p in params),
            truncate_p=tuple(p.top_p < 1 for p in params),
        )

    @staticmethod
    def of(seqs: list[Sampled], device: torch.device) -> SamplingRows:
        """The rows of ``seqs``, from each sequence's ``SamplingRow``.

        Sequences without one yet (their first step) get theirs here, all in
        one upload; after that a step uploads nothing. Mutates: ``sampling`` of
        those sequences.
        """
        new = [seq for seq in seqs if seq.sampling is None]
        if new:
            host = [v for seq in new for v in _row_values(seq.request.params)]
            values = upload(host, device, torch.float32).view(len(new), 4)
            for seq, row in zip(new, values, strict=True):
                seq.sampling = SamplingRow(row, seq.request.params, seq.generator)
        return SamplingRows.gather([seq.sampling for seq in seqs])

    def select(self, rows: list[int], index: torch.Tensor | None = None) -> SamplingRows:
        """The rows ``rows`` (repeats allowed); ``index`` is ``rows`` already on the device, if the caller has it."""
        if index is None:
            index = upload(rows, self.temperature.device)
        return SamplingRows(
            temperature=self.temperature[index],
            top_p=self.top_p[index],
            top_k=self.top_k[index],
            greedy_mask=self.greedy_mask[index],
            greedy=tuple(self.greedy[r] for r in rows),
            generators=tuple(self.generators[r] for r in rows),
            truncate_k=tuple(self.truncate_k[r] for r in rows),
            truncate_p=tuple(self.truncate_p[r] for r in rows),
        )

    @property
    def all_greedy(self) -> bool:
        return all(self.greedy)


def make_generator(seed: int | None, device: torch.device) -> torch.Generator:
    generator = torch.Generator(device=device)
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(seed)
    return generator


def probabilities(logits: torch.Tensor, rows: SamplingRows) -> torch.Tensor:
    """logits [B, V] -> probabilities [B, V] under each row's sampling parameters."""
    greedy_probs = torch.zeros_like(logits).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    if rows.all_greedy:
        return greedy_probs
    temperature = rows.temperature.clamp_min(1e-5).unsqueeze(-1)
    scaled = logits / temperature
    if any(rows.truncate_k):  # decided on the host: no read-back
        k = torch.where(rows.top_k > 0, rows.top_k, logits.shape[-1]).clamp_max(logits.shape[-1])
        kth = scaled.sort(-1, descending=True).values.gather(-1, (k - 1).unsqueeze(-1))
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    probs = scaled.softmax(-1)
    if any(rows.truncate_p):
        sorted_probs, order = probs.sort(-1, descending=True)
        # drop a token when the mass strictly before it already reaches top_p; the top token always stays,
        # also for a top_p that is 0 in float32 (the mass before the top token, 0, would reach it)
        drop_sorted = (sorted_probs.cumsum(-1) - sorted_probs) >= rows.top_p.unsqueeze(-1)
        drop_sorted[..., 0] = False
        # a row with top_p = 1 keeps every token: its float32 cumsum can reach 1 before the smallest ones
        drop_sorted &= (rows.top_p < 1).unsqueeze(-1)
        drop = torch.zeros_like(drop_sorted).scatter_(-1, order, drop_sorted)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(-1, keepdim=True)
    return torch.where(rows.greedy_mask.unsqueeze(-1), greedy_probs, probs)


def sample(probs: torch.Tensor, rows: SamplingRows) -> torch.Tensor:
    """probs [B, V] -> tokens [B]. Greedy rows take the argmax without touching a generator."""
    tokens = probs.argmax(-1)
    if rows.all_greedy:
        return tokens
    for b, generator in enumerate(rows.generators):
        if not rows.greedy[b]:
            tokens[b] = torch.multinomial(probs[b], 1, generator=generator)[0]
    return tokens


def uniforms(rows: SamplingRows, width: int, device: torch.device) -> torch.Tensor:
    """[B, width] uniform [0, 1) numbers from each row's generator; zeros for greedy rows.

    Greedy rows need none: with one-hot distributions the acceptance test is
    deterministic for any u in [0, 1).
    """
    u = torch.zeros(len(rows.greedy), width, device=device)
    for b, generator in enumerate(rows.generators):
        if not rows.greedy[b] and width:
            u[b] = torch.rand(width, generator=generator, device=device)
    return u
