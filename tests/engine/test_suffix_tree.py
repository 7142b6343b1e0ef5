"""The global suffix tree: insert, match, propose and evict against hand-built cases and a brute-force count."""

from __future__ import annotations

import random

import numpy as np
import pytest

from engine.suffix import context_continuation
from engine.suffix_tree import SuffixTree, TreeSize


def occurrences(sequences: list[list[int]], pattern: list[int], depth: int) -> int:
    """Brute force: how many stored (depth-cut) suffixes begin with ``pattern``."""
    if len(pattern) > depth:
        return 0
    n = len(pattern)
    return sum(seq[i : i + n] == pattern for seq in sequences for i in range(len(seq) - n + 1))


def unlimited(match: int) -> int:
    return 100


def test_counts_of_a_hand_built_tree():
    tree = SuffixTree(depth=8)
    tree.add([1, 2, 3, 1, 2, 4])
    assert tree.count([1, 2]) == 2
    assert tree.count([1, 2, 3]) == 1
    assert tree.count([2]) == 2
    assert tree.count([3, 1, 2, 4]) == 1
    assert tree.count([2, 1]) == 0
    # suffixes 123124, 23124, 3124, 124, 24, 4: nodes "12" (split into 3... and 4), "2" (3... and 4), "3124", "4"
    assert tree.size() == TreeSize(tokens=6, sequences=1, nodes=8)


def test_proposes_the_most_frequent_continuation_of_the_longest_match():
    tree = SuffixTree(depth=8)
    tree.add([5, 6, 7, 8])
    tree.add([5, 6, 7, 9])
    tree.add([5, 6, 7, 9])
    tree.add([1, 6, 7, 3])
    # the longest match of ...5 6 7 is "5 6 7" (3 tokens); 9 follows it twice, 8 once
    found = tree.propose([0, 5, 6, 7], max_match=4, budget=unlimited, min_prob=0.0)
    assert found.match == 3
    assert found.tokens == [9]
    assert found.probs == pytest.approx([2 / 3])


def test_stops_below_the_minimum_probability_and_at_the_budget():
    tree = SuffixTree(depth=8)
    for tail in ([1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 6, 7]):
        tree.add(tail)
    # after "1": "2" always (1.0), then "3" two times in three (0.67), then 4 or 5 (0.33 of the paths)
    assert tree.propose([1], 1, unlimited, min_prob=0.5).tokens == [2, 3]
    assert tree.propose([1], 1, unlimited, min_prob=0.0).tokens == [2, 3, 4]
    assert tree.propose([1], 1, lambda match: match, min_prob=0.0).tokens == [2]
    assert tree.propose([1], 1, unlimited, min_prob=0.0, min_count=2).tokens == [2, 3]


def test_nothing_is_proposed_for_an_unknown_suffix():
    tree = SuffixTree(depth=8)
    tree.add([1, 2, 3])
    found = tree.propose([7, 8], 4, unlimited, 0.0)
    assert (found.tokens, found.match) == ([], 0)


def test_random_sequences_count_like_brute_force_and_removal_restores_the_tree():
    rng = random.Random(3)
    depth = 5
    tree = SuffixTree(depth=depth)
    kept = [[rng.randrange(4) for _ in range(rng.randrange(1, 30))] for _ in range(6)]
    ids = [tree.add(seq) for seq in kept]
    before = tree.size()
    extra = [rng.randrange(4) for _ in range(25)]
    extra_id = tree.add(extra)
    patterns = [[rng.randrange(4) for _ in range(rng.randrange(1, 7))] for _ in range(300)]
    for p in patterns:
        assert tree.count(p) == occurrences([*kept, extra], p, depth), p
    tree.remove(extra_id)
    assert tree.size() == before  # nodes too: removal merges what insertion split
    for p in patterns:
        assert tree.count(p) == occurrences(kept, p, depth), p
    for seq_id in ids:
        tree.remove(seq_id)
    assert tree.size() == TreeSize(0, 0, 0)


def test_the_oldest_sequences_are_evicted_beyond_the_bound():
    tree = SuffixTree(depth=4, max_tokens=10)
    tree.add([1, 1, 1, 1])
    tree.add([2, 2, 2, 2])
    tree.add([3, 3, 3, 3])  # 12 tokens > 10: the first goes
    assert tree.count([1]) == 0
    assert tree.count([2, 2]) == 3
    assert tree.size() == TreeSize(tokens=8, sequences=2, nodes=tree.size().nodes)
    tree.add(list(range(20)))  # longer than the bound alone: only its last 10 tokens stay
    assert tree.size().tokens == 10
    assert tree.count([9]) == 0 and tree.count([10, 11]) == 1


def test_memory_stays_bounded_over_a_long_run():
    rng = np.random.default_rng(0)
    tree = SuffixTree(depth=24, max_tokens=2_000)
    for _ in range(400):  # 400 outputs of about 60 tokens: twelve times the bound
        tree.add(rng.integers(0, 50, size=int(rng.integers(20, 100))).tolist())
        size = tree.size()
        assert size.tokens <= 2_000
        assert size.nodes <= 2 * size.tokens  # at most two nodes per stored suffix
    assert tree.size().sequences < 400


def test_context_continuation_counts_every_earlier_occurrence():
    # "1 2" occurs three times before the end: followed by 3, 3 and 4
    context = np.array([1, 2, 3, 1, 2, 3, 1, 2, 4, 9, 1, 2])
    found = context_continuation(context, 8, unlimited, 0.0)
    assert found.match == 2
    assert found.tokens[0] == 3
    assert found.probs[0] == pytest.approx(2 / 3)
    # the same text in a tree gives the same first token and probability
    tree = SuffixTree(depth=24)
    tree.add(context[:-1].tolist())
    shared = tree.propose(context.tolist(), 8, unlimited, 0.0)
    assert shared.match == 2 and shared.tokens[0] == 3 and shared.probs[0] == pytest.approx(2 / 3)


def test_context_continuation_finds_nothing_in_text_that_never_repeats():
    assert context_continuation(np.arange(10), 8, unlimited, 0.0).tokens == []
