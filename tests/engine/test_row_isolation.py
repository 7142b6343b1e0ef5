"""A row that fails inside a batched step fails alone: its batchmates, greedy and sampled, finish as if it were not
there."""

from __future__ import annotations

import threading

import pytest

from engine.config import ControllerConfig, EngineConfig, SamplingParams
from engine.request import Request, RequestStatus
from engine.schedulers.registry import make_engine
from tests.support.greedy import hf_greedy
from tests.support.serve import wait_until

NEW_TOKENS = 12
POISON = 201  # a token id only the poisoned request's prompt holds
GREEDY = SamplingParams(temperature=0.0, max_new_tokens=NEW_TOKENS, stop_token_ids=())
SAMPLED = SamplingParams(temperature=1.0, top_p=0.9, top_k=50, max_new_tokens=NEW_TOKENS, stop_token_ids=())


class PoisonedRow:
    """Wraps the verifier's forward: a batch holding the poisoned request's cache raises, from ``after`` of its
    output tokens on (0: at its prefill). Records the batch sizes it failed, so a test knows it hit a batch."""

    def __init__(self, runner, prompt_len: int, after: int) -> None:
        self.forward = runner.forward
        self.prompt_len, self.after = prompt_len, after
        self.stores: set[int] = set()  # id() of the poisoned request's verifier cache, learnt at its prefill
        self.failed_batches: list[int] = []
        self._lock = threading.Lock()

    def __call__(self, stores, input_ids, num_tokens, *rest, **named):
        ids, start = input_ids.tolist(), 0
        for store, n in zip(stores, num_tokens, strict=True):
            # its prompt's first chunk (an empty cache): a sampled row may well draw the same token id later
            if store.length == 0 and POISON in ids[start : start + n]:
                with self._lock:
                    self.stores.add(id(store))
            start += n
        if any(self._poisoned(store) for store in stores):
            with self._lock:
                self.failed_batches.append(len(stores))
            raise RuntimeError("poisoned row")
        return self.forward(stores, input_ids, num_tokens, *rest, **named)

    def _poisoned(self, store) -> bool:
        # the cache holds the prompt and every output token but the last: P + k - 1 once k tokens are out
        return id(store) in self.stores and (self.after == 0 or store.length >= self.prompt_len + self.after - 1)


@pytest.mark.parametrize("after", [0, 4], ids=["at-prefill", "mid-decode"])
@pytest.mark.parametrize("engine", ["ar", "baseline", "pd", "pdv"])
def test_a_row_failing_inside_a_mixed_batch_fails_alone(tiny_pair, monkeypatch, engine, after):
    prompts = [[3 + i, 7, 11, 5 + i, 9] for i in range(5)]
    poisoned_prompt = [3, POISON, 11, 5, 9, 13]
    # greedy rows at the first, a middle and the last position, sampled rows between them, the poisoned one inside
    requests = [
        Request("greedy-0", prompts[0], GREEDY),
        Request("sampled-1", prompts[1], SAMPLED),
        Request("poisoned", poisoned_prompt, GREEDY if after else SAMPLED),
        Request("greedy-3", prompts[2], GREEDY),
        Request("sampled-4", prompts[3], SAMPLED),
        Request("greedy-5", prompts[4], GREEDY),
    ]
    poison = PoisonedRow(tiny_pair.verifier, len(poisoned_prompt), after)
    config = EngineConfig(
        controller=ControllerConfig(kind="fixed", draft_len=3), drafter="model", hybrid_threshold=None
    )
    eng = make_engine(engine, tiny_pair, config)
    monkeypatch.setattr(tiny_pair.verifier, "forward", poison)
    for request in requests:  # queued before the engine starts, so they share their first batches
        eng.submit(request)
    try:
        eng.start()
        assert all(r.done.wait(120) for r in requests)
        wait_until(lambda: eng.stats().unfinished == 0 and eng.budget.used == 0, timeout=10)
        stats = eng.stats()
    finally:
        eng.stop()
    monkeypatch.undo()

    assert poison.failed_batches and max(poison.failed_batches) >= 2, "the poisoned row never failed inside a batch"
    bad = requests[2]
    assert bad.status == RequestStatus.FAILED and "poisoned row" in bad.error
    # a speculative step emits up to L + 1 tokens at once, so the failure can come a few tokens past ``after``
    assert after <= len(bad.output_token_ids) < NEW_TOKENS and (after or not bad.output_token_ids)
    for r in requests[:2] + requests[3:]:
        assert r.status == RequestStatus.OK, (r.request_id, r.error)
        assert len(r.output_token_ids) == NEW_TOKENS
        if r.params.greedy:
            assert r.output_token_ids == hf_greedy(tiny_pair.verifier.model, r.prompt_token_ids, NEW_TOKENS)
    assert stats.accounting_problem() is None and eng.budget.used == 0 and eng.fatal_error is None
