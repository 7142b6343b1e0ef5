"""How the packed attention splits a batch into padded groups: the pure rule, and forwards that use it."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from engine.attention import attention_groups, padded_cost
from tests.support.operators import OperatorCounter
from tests.support.packed import forward_tokens, packed_and_alone


def test_rows_of_similar_length_stay_in_one_group():
    ends = [40 + r for r in range(32)]
    assert attention_groups(ends, [1] * 32) == [sorted(range(32), key=lambda r: ends[r])]


def test_a_long_row_among_short_ones_gets_a_group_of_its_own():
    ends = [50, 40, 620, 45, 35, 60, 55, 42]
    groups = attention_groups(ends, [1] * 8)
    assert groups == [[4, 1, 7, 3, 0, 6, 5], [2]]


def test_a_split_must_save_more_than_a_group_costs():
    ends, widths = [10, 10, 300], [1, 1, 1]
    saved = padded_cost(3, 1, 300) - padded_cost(2, 1, 10) - padded_cost(1, 1, 300)
    assert len(attention_groups(ends, widths, overhead=saved)) == 1
    assert len(attention_groups(ends, widths, overhead=saved - 1)) == 2


def test_wide_rows_count_their_queries():
    # a prefill chunk of 300 new tokens beside decode rows of similar ends: its queries, not its keys, cost
    ends, widths = [310, 320, 300, 305], [1, 1, 300, 1]
    assert [2] in attention_groups(ends, widths)


@given(
    st.lists(st.tuples(st.integers(1, 3000), st.integers(1, 9)), min_size=1, max_size=64),
    st.integers(0, 10_000),
    st.integers(1, 6),
)
def test_every_row_is_in_exactly_one_group_and_groups_are_bounded(rows, overhead, most):
    ends, widths = [max(e, w) for e, w in rows], [w for _, w in rows]
    groups = attention_groups(ends, widths, overhead, most)
    assert sorted(r for g in groups for r in g) == list(range(len(rows)))
    assert 1 <= len(groups) <= most and all(groups)
    flat = [ends[r] for g in groups for r in g]
    assert flat == sorted(flat)  # sorted by end within and across groups
    cost = sum(padded_cost(len(g), max(widths[r] for r in g), max(ends[r] for r in g)) for g in groups)
    one = padded_cost(len(rows), max(widths), max(ends))
    assert cost + overhead * (len(groups) - 1) <= one  # every split taken paid for its group


@pytest.mark.parametrize("overhead", [0, 10**9])  # as many groups as allowed, and one group
def test_a_forward_in_groups_equals_each_row_alone(tiny_pair, monkeypatch, overhead):
    runner = tiny_pair.verifier
    monkeypatch.setattr(runner, "group_overhead", overhead)
    gen = torch.Generator().manual_seed(11)
    prompts = [torch.randint(0, 256, (n,), generator=gen).tolist() for n in (3, 300, 17, 1, 120, 40)]
    news = [torch.randint(0, 256, (n,), generator=gen).tolist() for n in (5, 1, 3, 2, 5, 1)]
    packed, alone = packed_and_alone(runner, prompts, news, 320)  # the prefill of rows 1-300 long runs in groups too
    # the tolerance of test_packed_attention: GEMMs and SDPA of other shapes sum in other orders
    torch.testing.assert_close(packed, alone, rtol=1e-4, atol=2e-4)
    assert packed.argmax(-1).tolist() == alone.argmax(-1).tolist()


def test_operators_per_layer_are_bounded_by_the_groups_not_the_rows(tiny_pair, monkeypatch):
    runner = tiny_pair.verifier
    monkeypatch.setattr(runner, "group_overhead", 0)  # split wherever padding is saved: the most groups
    counts = {}
    for rows in (8, 32):
        stores = [runner.new_store(20 * rows + 2) for _ in range(rows)]
        forward_tokens(runner, stores, [[7] * (1 + 20 * r) for r in range(rows)])  # every row a different length
        with OperatorCounter() as counter:
            forward_tokens(runner, stores, [[9] for _ in range(rows)])
        counts[rows] = counter.total
    assert counts[8] == counts[32], counts
