"""The whole speculative block, exactly: the emitted tokens follow the verifier for every drafter and the gate.

A block of L drafted tokens is run through the real stages (``draft_block`` or
a drafter's ``propose``, ``verify_block``) and the acceptance rule, on table
models over a vocabulary of three tokens whose distributions change with the
prefix, so the draft q and the verifier p differ at every block position.
Nothing is sampled: every draft path is enumerated with its probability under
q, and every uniform u_i on a grid of G midpoints, which gives exactly
P(u < p/q) = min(1, p/q) because every probability is a multiple of 1/4 and G
is a multiple of every possible denominator of p/q. The distribution of the
next token after the accepted ones is taken as is (``next_probs``), not
sampled. Each emitted prefix is completed to L + 1 tokens with the verifier's
own conditionals; the result must equal the verifier's joint distribution.
"""

from __future__ import annotations

import itertools
import zlib
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from engine import stages
from engine.config import SamplingParams
from engine.draft_source import DraftSource, SourceKind
from engine.drafters import Drafter
from engine.sampling import SamplingRows
from engine.speculative import Verdict, verify
from engine.suffix import NO_PROPOSAL, Proposal, SuffixDrafting

VOCAB = 3
GRID = 12  # multiple of every denominator of p/q when p and q are multiples of 1/4
GATE = 0.6  # stops where the draft's top probability is 1/2, lets 3/4 and 1 through
PENDING = 0  # the last emitted token the block starts from
# seeds the tables: chosen so that the gate lets the first position through and stops some later ones, and
# p differs from q at every prefix of up to two tokens (test_the_tables_have_what_the_tests_need checks it)
SALT = 109


def quarters(kind: str, prefix: tuple[int, ...]) -> np.ndarray:
    """A seeded distribution in multiples of 1/4 for ``kind`` ("p" or "q") after ``prefix``."""
    rng = np.random.default_rng(zlib.crc32(f"{SALT}{kind}{prefix}".encode()))
    return rng.multinomial(4, [1 / VOCAB] * VOCAB) / 4


def p_table(prefix: tuple[int, ...]) -> np.ndarray:
    return quarters("p", prefix)


def q_table(prefix: tuple[int, ...]) -> np.ndarray:
    return quarters("q", prefix)


class TableStore:
    """A KV store stand-in that only remembers the tokens fed to it."""

    def __init__(self) -> None:
        self.tokens: list[int] = []

    @property
    def length(self) -> int:
        return len(self.tokens)

    def truncate(self, length: int) -> None:
        del self.tokens[length:]


class TableModel:
    """A model runner whose next-token logits are log(table(tokens fed after the first))."""

    name = "table"
    device = torch.device("cpu")
    vocab_size = VOCAB

    def __init__(self, table) -> None:
        self.table = table

    def forward(self, stores, ids, counts, keep, stage=None) -> torch.Tensor:
        flat, rows, start = ids.tolist(), [], 0
        for store, n in zip(stores, counts, strict=True):
            for token in flat[start : start + n]:
                store.tokens.append(token)
                with np.errstate(divide="ignore"):  # log(0) = -inf: a token the table rules out
                    rows.append(np.log(self.table(tuple(store.tokens[1:]))))
            start += n
        return torch.tensor(np.array(rows), dtype=torch.float32)[keep]


def draft_paths(length: int) -> list[tuple[int, ...]]:
    return list(itertools.product(range(VOCAB), repeat=length))


def path_probability(path: tuple[int, ...]) -> float:
    """Probability under q of drafting ``path`` (tokens drafted past a gate's stop sum out to 1)."""
    return float(np.prod([q_table(path[:k])[t] for k, t in enumerate(path)]))


def enumerated_sample(paths: list[tuple[int, ...]]):
    """Stands in for ``stages.sample``: each row's "generator" is its path's index; call k returns token k."""
    calls = itertools.count()

    def sample(probs: torch.Tensor, rows: SamplingRows) -> torch.Tensor:
        k = next(calls)
        return torch.tensor([paths[g][k] for g in rows.generators])

    return sample


def block_seqs(n: int, with_draft: bool) -> list[SimpleNamespace]:
    return [
        SimpleNamespace(
            pending=PENDING,
            draft_pending=[PENDING],
            draft_kv=TableStore() if with_draft else None,
            verifier_kv=TableStore(),
            request=SimpleNamespace(num_output_tokens=1),
        )
        for _ in range(n)
    ]


DRAFTERS = ["model", "ngram", "model+ngram", "suffix", "suffix+model"]


def propose(drafter: str, length: int, confidence: float | None, monkeypatch, lookup: tuple[int, ...]):
    """Draft one block per enumerated path (and one lookup row): the block, each row's weight and group.

    The model-free row (prompt lookup or suffix drafting) proposes ``lookup``, a point mass.
    """
    model = TableModel(q_table) if drafter not in ("ngram", "suffix") else None
    paths = draft_paths(length) if model is not None else []
    found = [NO_PROPOSAL] * len(paths)
    suffix = drafter.startswith("suffix")
    if drafter != "model":
        paths.append(lookup)  # the lookup row's "path" is never sampled: its proposal is fixed
        found.append(Proposal(list(lookup), DraftSource(SourceKind.GLOBAL if suffix else SourceKind.LOOKUP, 2)))
    monkeypatch.setattr(stages, "sample", enumerated_sample(paths))
    seqs = block_seqs(len(paths), with_draft=model is not None)
    params = [SamplingParams(temperature=1.0, stop_token_ids=())] * len(paths)
    rows = SamplingRows.build(params, list(range(len(paths))), torch.device("cpu"))
    lookup_ns = (2, 2) if drafter in ("ngram", "model+ngram") else None
    drafting = SuffixDrafting(max_tokens=64, min_prob=0.1) if suffix else None
    block = Drafter(drafter, VOCAB, model=model, lookup=lookup_ns, suffix=drafting).propose(
        seqs, [length] * len(paths), found, rows, confidence
    )
    weights = [1.0 if f.tokens else path_probability(path) for f, path in zip(found, paths, strict=True)]
    groups = ["lookup" if f.tokens else "model" for f in found]
    return block, weights, groups


def emitted_distributions(block, weights, groups, rule=verify) -> dict[str, dict[tuple[int, ...], float]]:
    """Per group: the exact distribution of the L + 1 tokens (block, then verifier alone) after ``PENDING``."""
    target = stages.verify_block(TableModel(p_table), block)  # [B, L+1, V]
    batch, width = block.tokens.shape
    grid = torch.tensor(list(itertools.product(range(GRID), repeat=width)), dtype=torch.float64)
    u = ((grid + 0.5) / GRID).repeat(batch, 1)  # [B * G^L, L]: every row against every grid point
    times = grid.shape[0]
    verdict: Verdict = rule(
        block.tokens.repeat_interleave(times, 0),
        block.probs.repeat_interleave(times, 0),
        target.repeat_interleave(times, 0),
        torch.tensor(block.lens).repeat_interleave(times),
        u,
    )
    accepted, nexts = verdict.num_accepted.tolist(), verdict.next_probs.double().numpy()
    tokens = block.tokens.tolist()
    out: dict[str, dict[tuple[int, ...], float]] = {g: {} for g in groups}
    for r, (n, probs) in enumerate(zip(accepted, nexts, strict=True)):
        b = r // times
        for x in np.flatnonzero(probs):
            emitted = (*tokens[b][:n], int(x))
            share = weights[b] / times * probs[x]
            out[groups[b]][emitted] = out[groups[b]].get(emitted, 0.0) + share
    return {g: completed(dist, width + 1) for g, dist in out.items()}


def completed(dist: dict[tuple[int, ...], float], length: int) -> dict[tuple[int, ...], float]:
    """``dist`` over prefixes, each continued by the verifier's conditionals to ``length`` tokens."""
    full: dict[tuple[int, ...], float] = {}
    for prefix, mass in dist.items():
        for tail in itertools.product(range(VOCAB), repeat=length - len(prefix)):
            seq = prefix + tail
            tail_mass = np.prod([p_table(seq[:k])[seq[k]] for k in range(len(prefix), length)])
            full[seq] = full.get(seq, 0.0) + mass * tail_mass
    return full


def verifier_joint(length: int) -> dict[tuple[int, ...], float]:
    return completed({(): 1.0}, length)


def distance(dist: dict[tuple[int, ...], float], length: int) -> float:
    """Largest absolute difference from the verifier's joint distribution."""
    exact = verifier_joint(length)
    return max(abs(dist.get(seq, 0.0) - mass) for seq, mass in exact.items())


LOOKUP = (0, 2, 1)  # the lookup row's fixed proposal: the verifier gives each of its tokens a probability in (0, 1)


@pytest.mark.parametrize("length", [2, 3])
@pytest.mark.parametrize("drafter", DRAFTERS)
@pytest.mark.parametrize("confidence", [None, GATE])
def test_block_output_is_exactly_the_verifier_distribution(drafter, length, confidence, monkeypatch):
    block, weights, groups = propose(drafter, length, confidence, monkeypatch, LOOKUP[:length])
    if confidence is not None and drafter not in ("ngram", "suffix"):
        stopped = [n < length for n, g in zip(block.lens, groups, strict=True) if g == "model"]
        assert any(stopped) and not all(stopped)  # the gate fired on some prefixes, not all
    for group, dist in emitted_distributions(block, weights, groups).items():
        assert sum(dist.values()) == pytest.approx(1.0)
        assert distance(dist, length + 1) < 1e-5, group


def test_the_tables_have_what_the_tests_need():
    """p differs from q at every prefix of up to two tokens; the gate passes the root and some but not all
    second positions."""
    prefixes = [path[:k] for path in draft_paths(2) for k in range(3)]
    assert all(not np.array_equal(p_table(s), q_table(s)) for s in prefixes)
    assert q_table(()).max() >= GATE
    second = [q_table((t,)).max() >= GATE for t in range(VOCAB) if q_table(())[t] > 0]
    assert any(second) and not all(second)


# --- the checker catches deliberately wrong rules -------------------------------------------------


def residual_from_previous_position(draft_tokens, draft_probs, target_probs, draft_lens, u) -> Verdict:
    """Wrong: after a rejection at position n + 1, the residual uses q of position n."""
    right = verify(draft_tokens, draft_probs, target_probs, draft_lens, u)
    rows = torch.arange(draft_tokens.shape[0])
    n = right.num_accepted
    p_next = target_probs[rows, n]
    q_prev = draft_probs[rows, (n - 1).clamp_min(0).clamp_max(draft_probs.shape[1] - 1)]
    residual = (p_next - q_prev).clamp_min(0)
    mass = residual.sum(-1, keepdim=True)
    wrong = torch.where(mass > 0, residual / mass.clamp_min(1e-30), p_next)
    return Verdict(n, torch.where(right.bonus.unsqueeze(-1), right.next_probs, wrong), right.bonus)


def resample_from_p(draft_tokens, draft_probs, target_probs, draft_lens, u) -> Verdict:
    """Wrong: after a rejection, sample from p instead of norm(max(p - q, 0))."""
    right = verify(draft_tokens, draft_probs, target_probs, draft_lens, u)
    p_next = target_probs[torch.arange(draft_tokens.shape[0]), right.num_accepted]
    return Verdict(right.num_accepted, p_next, right.bonus)


def gate_on_sampled_token(block):
    """Wrong: the gate stops a row where the *sampled* token's draft probability is below the threshold."""
    for b in range(len(block.lens)):
        for k in range(block.lens[b]):
            if block.probs[b, k, block.tokens[b, k]] < GATE:
                block.lens[b] = k
                block.probs[b, k:] = 0
                break
    return block


@pytest.mark.parametrize("rule", [residual_from_previous_position, resample_from_p])
@pytest.mark.parametrize("drafter", DRAFTERS)
def test_a_wrong_rule_is_caught(drafter, rule, monkeypatch):
    block, weights, groups = propose(drafter, 3, None, monkeypatch, LOOKUP)
    worst = max(distance(d, 4) for d in emitted_distributions(block, weights, groups, rule).values())
    assert worst > 1e-3


def test_a_gate_that_reads_the_sampled_token_is_caught(monkeypatch):
    block, weights, groups = propose("model", 3, None, monkeypatch, LOOKUP)
    dist = emitted_distributions(gate_on_sampled_token(block), weights, groups)["model"]
    assert distance(dist, 4) > 1e-3
