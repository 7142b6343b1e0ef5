"""Suffix drafting's choice per row: a longer match earns a longer draft, and the better-scored side proposes."""

from __future__ import annotations

from engine.draft_source import DraftSource, SourceKind
from engine.suffix import NO_PROPOSAL, SuffixDrafting
from engine.suffix_tree import TreeSize

LEARNED = [10, 11, 12, 13, 14, 15, 16, 17, 18, 19]  # a completed output: every token once, so each goes on surely


def drafting() -> SuffixDrafting:
    drafting = SuffixDrafting(max_tokens=1_000, min_prob=0.1)
    drafting.learn(LEARNED)
    return drafting


def test_a_longer_match_earns_a_longer_draft_up_to_the_cap():
    suffix = drafting()
    # the context's last tokens match 1, 2 and 3 tokens of the learned output: as many tokens are proposed
    assert suffix.propose([1, 2, 12], cap=8).tokens == [13]
    assert suffix.propose([1, 11, 12], cap=8).tokens == [13, 14]
    assert suffix.propose([10, 11, 12], cap=8).tokens == [13, 14, 15]
    assert suffix.propose([10, 11, 12], cap=2).tokens == [13, 14]  # the controller's L caps it
    assert suffix.propose([10, 11, 12], cap=0) == NO_PROPOSAL


def test_the_global_tree_proposes_what_the_request_itself_lacks_and_names_its_match():
    found = drafting().propose([1, 2, 10, 11, 12, 13], cap=8)
    assert found.tokens == [14, 15, 16, 17]
    assert found.source == DraftSource(SourceKind.GLOBAL, 4)


def test_the_requests_own_context_wins_when_its_continuation_scores_higher():
    # "5 6" occurred earlier in the request, followed by 7 8: a match of 2 there against 1 token (6) in the tree
    suffix = drafting()
    suffix.learn([6, 9])
    found = suffix.propose([5, 6, 7, 8, 1, 5, 6], cap=8)
    assert found.tokens == [7, 8]
    assert found.source == DraftSource(SourceKind.REQUEST, 2)


def test_nothing_is_proposed_when_neither_side_knows_the_suffix():
    assert drafting().propose([1, 2, 3], cap=8) == NO_PROPOSAL


def test_only_a_nonempty_output_is_learned():
    suffix = drafting()
    suffix.learn([])
    assert suffix.size() == TreeSize(tokens=len(LEARNED), sequences=1, nodes=suffix.size().nodes)
