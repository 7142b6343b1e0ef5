"""The acceptance rule on hand-made distributions, and its statistics."""

import functools

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from engine.speculative import verify, verify_greedy


def one_hot(*tokens: int, vocab: int = 4) -> torch.Tensor:
    return torch.nn.functional.one_hot(torch.tensor(tokens), vocab).float()


def test_greedy_accepts_matching_prefix_then_emits_verifier_token():
    draft = torch.tensor([[1, 2, 3]])
    q = one_hot(1, 2, 3).unsqueeze(0)
    p = one_hot(1, 2, 0, 3).unsqueeze(0)  # verifier disagrees at the third position
    v = verify(draft, q, p, torch.tensor([3]), torch.rand(1, 3))
    assert v.num_accepted.tolist() == [2]
    assert v.next_probs.argmax(-1).tolist() == [0]  # correction = verifier's argmax
    assert v.bonus.tolist() == [False]


def test_all_accepted_gives_bonus_from_last_position():
    draft = torch.tensor([[1, 2]])
    v = verify(draft, one_hot(1, 2).unsqueeze(0), one_hot(1, 2, 3).unsqueeze(0), torch.tensor([2]), torch.zeros(1, 2))
    assert v.num_accepted.tolist() == [2]
    assert v.bonus.tolist() == [True]
    assert v.next_probs.argmax(-1).tolist() == [3]


def test_ragged_draft_lengths_treat_undrafted_positions_as_bonus():
    draft = torch.tensor([[1, 2], [1, 0]])
    q = torch.stack([one_hot(1, 2), torch.stack([one_hot(1)[0], torch.zeros(4)])])
    p = torch.stack([one_hot(1, 2, 3), one_hot(1, 2, 0)])
    v = verify(draft, q, p, torch.tensor([2, 1]), torch.zeros(2, 2))
    assert v.num_accepted.tolist() == [2, 1]
    assert v.bonus.tolist() == [True, True]
    assert v.next_probs.argmax(-1).tolist() == [3, 2]  # row 1's bonus comes from position 2, not 3


def test_zero_draft_length_is_a_plain_verifier_step():
    p = torch.tensor([[[0.1, 0.2, 0.3, 0.4]]])
    v = verify(torch.zeros(1, 0, dtype=torch.long), torch.zeros(1, 0, 4), p, torch.tensor([0]), torch.zeros(1, 0))
    assert v.num_accepted.tolist() == [0]
    torch.testing.assert_close(v.next_probs, p[:, 0])


def test_rejection_probability_and_residual_on_hand_made_distributions():
    # q proposes token 0 with q=0.8 where p=0.4: accepted with probability p/q = 0.5
    q = torch.tensor([[[0.8, 0.2, 0.0, 0.0]]])
    p = torch.tensor([[[0.4, 0.4, 0.2, 0.0], [0.25, 0.25, 0.25, 0.25]]])
    draft = torch.tensor([[0]])
    accept = verify(draft, q, p, torch.tensor([1]), torch.tensor([[0.49]]))
    reject = verify(draft, q, p, torch.tensor([1]), torch.tensor([[0.51]]))
    assert accept.num_accepted.tolist() == [1]
    assert reject.num_accepted.tolist() == [0]
    # residual norm(max(0, p - q)) = norm([0, 0.2, 0.2, 0]) = [0, .5, .5, 0]
    torch.testing.assert_close(reject.next_probs, torch.tensor([[0.0, 0.5, 0.5, 0.0]]))


def _emitted_first_tokens(p_row: torch.Tensor, q_row: torch.Tensor, trials: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    vocab = p_row.shape[0]
    draft = torch.multinomial(q_row, trials, replacement=True, generator=gen).unsqueeze(1)  # [T, 1]
    q = q_row.expand(trials, 1, vocab)
    p = torch.stack([p_row, torch.full((vocab,), 1 / vocab)]).expand(trials, 2, vocab)
    v = verify(draft, q, p, torch.ones(trials, dtype=torch.long), torch.rand(trials, 1, generator=gen))
    correction = torch.multinomial(v.next_probs, 1, generator=gen).squeeze(1)
    return torch.where(v.num_accepted == 1, draft.squeeze(1), correction)


def test_first_emitted_token_follows_the_verifier_distribution():
    p = torch.tensor([0.05, 0.10, 0.30, 0.05, 0.25, 0.15, 0.05, 0.05])
    q = torch.tensor([0.30, 0.05, 0.05, 0.20, 0.10, 0.10, 0.10, 0.10])
    trials = 40_000
    counts = torch.bincount(_emitted_first_tokens(p, q, trials, seed=0), minlength=8).double().numpy()

    def expected(dist: torch.Tensor):
        return (dist.double() / dist.double().sum() * trials).numpy()

    assert chisquare(counts, expected(p)).pvalue > 1e-3
    # the same test tells the draft's distribution apart: it has the power to fail
    assert chisquare(counts, expected(q)).pvalue < 1e-6


@st.composite
def greedy_blocks(draw) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Drafted tokens [B, L], the verifier's argmax [B, L + 1] and draft lengths [B], over a vocabulary of 4."""
    batch, width = draw(st.integers(1, 6)), draw(st.integers(0, 5))

    def tokens(n: int) -> list[list[int]]:
        return draw(st.lists(st.lists(st.integers(0, 3), min_size=n, max_size=n), min_size=batch, max_size=batch))

    lens = draw(st.lists(st.integers(0, width), min_size=batch, max_size=batch))
    as_long = functools.partial(torch.tensor, dtype=torch.long)
    return as_long(tokens(width)).view(batch, width), as_long(tokens(width + 1)), as_long(lens)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(greedy_blocks(), st.floats(0, 0.999))
def test_the_greedy_rule_without_distributions_equals_the_rule_on_one_hot_ones(block, u):
    draft, target, lengths = block
    width = draft.shape[1]
    q = torch.nn.functional.one_hot(draft, 4).float() * (torch.arange(width) < lengths.unsqueeze(1)).unsqueeze(-1)
    v = verify(draft, q, torch.nn.functional.one_hot(target, 4).float(), lengths, torch.full(draft.shape, u))
    accepted, nexts = verify_greedy(draft, target, lengths)
    assert accepted.tolist() == v.num_accepted.tolist()
    assert nexts.tolist() == v.next_probs.argmax(-1).tolist()
