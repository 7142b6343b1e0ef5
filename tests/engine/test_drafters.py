"""Drafters: the prompt lookup itself, and outputs unchanged by where proposals come from."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine.config import ControllerConfig, EngineConfig, SamplingParams
from engine.draft_source import SourceKind
from engine.ngram import prompt_lookup
from engine.request import Request
from engine.schedulers.registry import make_engine
from tests.engine.test_lossless import PROMPTS
from tests.engine.test_sampling_in_engines import merged_chisquare, second_token_marginal, seeded_samples
from tests.support.greedy import generate_matches_verifier
from tests.support.runners import counting
from tests.support.sampling_power import power_at_distance, trials_for_power

# The sampled-distribution checks below: a pooled chi-square test at level ALPHA, with as many samples as give
# power >= POWER against every second-token distribution at total-variation distance DELTA or more from the
# verifier's (tests/support/sampling_power.py gives the bound; each test computes its sample size from the exact
# marginal of its own prompt: 1,800-2,100 on the tiny pair, where 800 gave about 0.5).
ALPHA = 1e-3
DELTA = 0.1
POWER = 0.9


def lookup(tokens: list[int], min_n: int = 1, max_n: int = 3, k: int = 4) -> list[int]:
    return prompt_lookup(np.array(tokens), min_n, max_n, k).tokens


def test_the_longest_matching_suffix_wins():
    # suffix [2, 3] occurs at 1 (followed by 9) and [3] alone at 6 (followed by 7): the 2-gram wins
    assert lookup([1, 2, 3, 9, 9, 5, 3, 7, 2, 3]) == [9, 9, 5, 3]
    assert prompt_lookup(np.array([1, 2, 3, 9, 9, 5, 3, 7, 2, 3]), 1, 3, 4).match == 2


def test_the_latest_earlier_occurrence_wins():
    assert lookup([5, 1, 2, 6, 6, 5, 1, 3, 5, 1], max_n=2) == [3, 5, 1]


def test_a_proposal_stops_at_k_and_at_the_end_of_the_context():
    assert lookup([4, 8, 1, 2, 4, 8], max_n=2, k=2) == [1, 2]
    assert lookup([7, 1, 7], max_n=1, k=5) == [1, 7]


def test_no_proposal_without_a_match_of_at_least_min_n():
    assert lookup([1, 2, 3, 4]) == []
    assert lookup([1, 2, 9, 2], min_n=2) == []  # only a 1-gram matches
    assert lookup([3], min_n=1) == []  # shorter than any n-gram with a continuation
    assert lookup([1, 2, 1, 2], k=0) == []


REPEATING = ["abcabcabcabc", "the cat and the cat and the", "1,2,3,1,2,3,1,2", "x"]


@pytest.mark.parametrize("engine", ["baseline", "pd", "pdv"])
@pytest.mark.parametrize("drafter", ["ngram", "model+ngram", "suffix", "suffix+model"])
def test_greedy_output_matches_verifier_alone_with_every_drafter(tiny_pair, engine, drafter):
    # a fixed L: the cost controller, reading this machine's measured costs, may choose L = 0 and never draft
    fixed = ControllerConfig(kind="fixed", draft_len=4)
    config = EngineConfig(drafter=drafter, prompt_lookup_min=1, prompt_lookup_max=3, controller=fixed)
    params = SamplingParams(max_new_tokens=24, stop_token_ids=())
    requests = [Request(f"d{i}", tiny_pair.encode_prompt(p), params) for i, p in enumerate(PROMPTS + REPEATING)]
    generate_matches_verifier(tiny_pair, make_engine(engine, tiny_pair, config), requests)
    drafted, accepted = sum(r.drafted for r in requests), sum(r.accepted for r in requests)
    assert 0 < accepted < drafted  # lookups were proposed, some kept and some rejected


def test_the_ngram_drafter_never_runs_the_draft_model(tiny_pair):
    pair = counting(tiny_pair)
    before = pair.draft.tokens_forwarded
    # a fixed L: the cost controller, reading a profile timed on a busy machine, may leave L at 0 throughout
    config = EngineConfig(drafter="ngram", prompt_lookup_min=1, controller=ControllerConfig(kind="fixed"))
    eng = make_engine("baseline", pair, config)
    request = Request("n", pair.encode_prompt("abcabcabc"), SamplingParams(max_new_tokens=16))
    try:
        eng.generate([request], timeout=60)
    finally:
        eng.stop()
    assert request.status == "ok" and request.drafted > 0
    assert pair.draft.tokens_forwarded == before


def powered_trials(exact: np.ndarray) -> int:
    """The fewest samples (in hundreds) whose test against ``exact`` has power >= POWER at distance DELTA."""
    trials = trials_for_power(exact, DELTA, ALPHA, POWER)
    assert power_at_distance(exact, trials, DELTA, ALPHA) >= POWER
    return trials


def sampled_second_tokens(pair, engine: str, drafter: str, prompt: list[int], trials: int) -> list[Request]:
    controller = ControllerConfig(kind="fixed", draft_len=3)
    config = EngineConfig(
        controller=controller, drafter=drafter, prompt_lookup_min=1, prompt_lookup_max=1
    )
    return seeded_samples(pair, engine, config, prompt, trials)


@pytest.mark.parametrize("engine", ["baseline", "pd", "pdv"])
@pytest.mark.parametrize("drafter", ["ngram", "suffix"])
def test_sampled_second_token_follows_verifier_distribution_with_lookup_proposals(tiny_pair, engine, drafter):
    """T = 1, second output token: power >= 0.9 at total-variation distance 0.1, alpha = 1e-3 (``powered_trials``:
    2,100 samples for this prompt, pooled df 117, power 0.91)."""
    # every token occurs once in the prompt, so whatever the first token is, the lookup (or the suffix drafter's
    # match within the request) proposes what followed it
    prompt = np.random.default_rng(0).permutation(tiny_pair.verifier.vocab_size).tolist()
    exact = second_token_marginal(tiny_pair.verifier.model, prompt)
    requests = sampled_second_tokens(tiny_pair, engine, drafter, prompt, powered_trials(exact))
    assert all(r.steps[0].draft_len > 0 for r in requests)
    second = np.bincount([r.output_token_ids[1] for r in requests], minlength=tiny_pair.verifier.vocab_size)
    assert merged_chisquare(second, exact) > ALPHA
    # power check: a rule that always kept the proposal would emit the token after t1 in the prompt
    after = {t: prompt[i + 1] for i, t in enumerate(prompt[:-1])}
    kept_always = np.bincount(
        [after.get(r.output_token_ids[0], r.output_token_ids[1]) for r in requests], minlength=len(second)
    )
    assert merged_chisquare(second, kept_always / kept_always.sum()) < ALPHA


def test_proposals_from_the_global_suffix_tree_keep_the_distribution(tiny_pair, tmp_path):
    """T = 1, second output token: power >= 0.9 at total-variation distance 0.1, alpha = 1e-3 (``powered_trials``:
    1,800 samples for this prompt, pooled df 79, power 0.91)."""
    # the warm-up holds every token once, so the tree proposes what followed the first token there
    vocab = tiny_pair.verifier.vocab_size
    warmup = tmp_path / "warmup.json"
    permutation = np.random.default_rng(2).permutation(vocab).tolist()
    warmup.write_text(json.dumps({"sequences": [permutation]}))
    prompt = tiny_pair.encode_prompt("q")
    exact = second_token_marginal(tiny_pair.verifier.model, prompt)
    controller = ControllerConfig(kind="fixed", draft_len=3)
    config = EngineConfig(drafter="suffix", suffix_warmup=str(warmup), controller=controller)
    requests = seeded_samples(tiny_pair, "baseline", config, prompt, powered_trials(exact))
    from_tree = sum(r.steps[0].source is not None and r.steps[0].source.kind is SourceKind.GLOBAL for r in requests)
    assert from_tree > len(requests) / 2
    second = np.bincount([r.output_token_ids[1] for r in requests], minlength=vocab)
    assert merged_chisquare(second, exact) > ALPHA
    # power check: a rule that always kept the proposal would emit what followed t1 in the warm-up
    after = {t: permutation[i + 1] for i, t in enumerate(permutation[:-1])}
    always = [after.get(r.output_token_ids[0], r.output_token_ids[1]) for r in requests]
    kept_always = np.bincount(always, minlength=vocab)
    assert merged_chisquare(second, kept_always / kept_always.sum()) < ALPHA


def test_model_and_lookup_proposals_mixed_in_one_batch_keep_the_distribution(tiny_pair):
    """T = 1, second output token: power >= 0.9 at total-variation distance 0.1, alpha = 1e-3 (``powered_trials``:
    1,800 samples for this prompt, pooled df 76, power 0.92)."""
    # half the vocabulary is in the prompt: a first token from that half gets a lookup, any other the draft model
    prompt = np.random.default_rng(1).permutation(tiny_pair.verifier.vocab_size)[:128].tolist()
    exact = second_token_marginal(tiny_pair.verifier.model, prompt)
    pair = counting(tiny_pair)
    before = pair.draft.tokens_forwarded
    requests = sampled_second_tokens(pair, "baseline", "model+ngram", prompt, powered_trials(exact))
    looked_up = sum(r.output_token_ids[0] in set(prompt) for r in requests)
    assert len(requests) / 10 < looked_up < len(requests) * 9 / 10 and pair.draft.tokens_forwarded > before
    second = np.bincount([r.output_token_ids[1] for r in requests], minlength=tiny_pair.verifier.vocab_size)
    assert merged_chisquare(second, exact) > ALPHA


def test_the_draft_cache_stays_in_step_with_lookup_steps_in_between(tiny_pair):
    # between steps the draft cache plus the tokens it still lacks is the verifier's context and ``pending``;
    # a fixed L: the cost controller, reading this machine's measured costs, may choose L = 0 and never look up
    fixed = ControllerConfig(kind="fixed", draft_len=4)
    config = EngineConfig(drafter="model+ngram", prompt_lookup_min=1, prompt_lookup_max=2, controller=fixed)
    eng = make_engine("baseline", tiny_pair, config)
    params = SamplingParams(max_new_tokens=40, stop_token_ids=())
    request = Request("c", tiny_pair.encode_prompt("abcabcabcabc"), params)
    seq = eng._new_sequence(request, len(request.prompt_token_ids) + 41)
    running = eng._prefill([seq])
    kept_lookups = 0  # steps whose lookup proposal was (partly) accepted: the draft model never saw those tokens
    while running:
        looked_up = bool(eng.drafter.lookups(running, [4])[0].tokens)
        running = eng._step(running)
        kept_lookups += looked_up and request.steps[-1].accepted > 0
        if running:  # a finished sequence has released its caches
            assert seq.draft_kv.length + len(seq.draft_pending) == seq.verifier_kv.length + 1
    assert kept_lookups > 0


def test_lookup_proposals_become_point_masses_beside_model_rows():
    import torch

    from engine.drafters import with_point_masses
    from engine.stages import DraftBlock

    vocab = 6
    model_probs = torch.zeros(3, 2, vocab)
    model_probs[0, :, 1] = 0.5
    model_probs[0, :, 2] = 0.5
    block = DraftBlock(
        seqs=[object()] * 3,
        rows=None,
        lens=[2, 0, 0],
        tokens=torch.tensor([[1, 2], [0, 0], [0, 0]]),
        probs=model_probs,
        fed=[[], [], []],
        draft_len_before=[0, 0, 0],
        forwards=[2, 0, 0],
    )
    out = with_point_masses(block, [[], [4, 5, 3], []], vocab)
    assert out.lens == [2, 3, 0]
    assert out.tokens.tolist() == [[1, 2, 0], [4, 5, 3], [0, 0, 0]]
    assert torch.equal(out.probs[0, :2], model_probs[0])  # the model's row is kept as it was
    assert torch.equal(out.probs[1], torch.eye(vocab)[[4, 5, 3]])  # q = 1 on each proposed token
    assert out.probs[2].abs().sum() == 0 and out.probs[0, 2].abs().sum() == 0


def test_greedy_blocks_carry_the_proposals_without_distributions():
    import torch

    from engine.drafters import with_point_masses
    from engine.stages import DraftBlock

    block = DraftBlock(
        seqs=[object()] * 2,
        rows=None,
        lens=[0, 0],
        tokens=torch.zeros(2, 0, dtype=torch.long),
        probs=torch.zeros(2, 0, 0),
        fed=[[], []],
        draft_len_before=[0, 0],
        forwards=[0, 0],
    )
    out = with_point_masses(block, [[4, 5], []], 0)
    assert out.lens == [2, 0] and out.tokens.tolist() == [[4, 5], [0, 0]]
    assert out.probs.numel() == 0
