"""Host waits of a step, counted: the design's number (docs/architecture.md, "Host waits") and no more.

A read-back stops the host until the device catches up. On the CPU the reads
are visible too: ``bool()``/``.item()`` dispatch ``_local_scalar_dense`` (or,
under inference mode, ``is_nonzero``/``item``), the
step's one read-back is an explicit copy to the CPU (``_to_copy``), and
``Tensor.tolist`` is counted by a wrapper this test installs (on a device
tensor it is a wait the dispatcher does not show on the CPU).
"""

from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from engine.config import SamplingParams
from engine.drafters import Drafter
from engine.request import Request
from engine.sampling import SamplingRows, make_generator
from engine.sequence import Sequence
from engine.stages import accept_block, draft_block, prefill_chunk, verify_block

CPU = torch.device("cpu")
# bool() and .item(): under inference mode the dispatcher shows them before they decompose
SCALAR_READS = (
    torch.ops.aten._local_scalar_dense.default,
    torch.ops.aten.is_nonzero.default,
    torch.ops.aten.item.default,
)


class HostTraffic(TorchDispatchMode):
    """Counts scalar reads, copies to the host and uploads (``torch.tensor`` of host values) in its block."""

    def __init__(self, monkeypatch) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()
        tolist = torch.Tensor.tolist

        def counted_tolist(tensor):
            self.counts["tolist"] += 1
            return tolist(tensor)

        monkeypatch.setattr(torch.Tensor, "tolist", counted_tolist)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in SCALAR_READS:
            self.counts["scalar reads"] += 1
        elif func is torch.ops.aten._to_copy.default and kwargs.get("device") == CPU:
            self.counts["copies to host"] += 1
        elif func is torch.ops.aten.lift_fresh.default:
            self.counts["uploads"] += 1
        return func(*args, **kwargs)


def _sequences(pair, rows: int, temperature: float) -> list[Sequence]:
    seqs = []
    for i in range(rows):
        params = SamplingParams(max_new_tokens=16, temperature=temperature, seed=i)
        prompt = pair.encode_prompt(f"the the the prompt number {i} and the the the")
        seq = Sequence(
            Request(f"r{i}", prompt, params),
            frozenset(),
            len(prompt) + 17,
            None if params.greedy else make_generator(i, CPU),
        )
        seq.verifier_kv = pair.verifier.new_store(len(prompt) + 17)
        seqs.append(seq)
    done = prefill_chunk(pair.verifier, None, seqs, 10_000)
    assert len(done) == rows
    return seqs


def _decode_step(pair, seqs, drafter: Drafter | None, monkeypatch) -> Counter[str]:
    """One decode step as the colocated loop runs it: rows, proposals, verify, accept.

    The sequences' sampling rows were uploaded when prefill sampled their first tokens.
    """
    assert all(s.sampling is not None for s in seqs)
    with HostTraffic(monkeypatch) as traffic:
        rows = SamplingRows.of(seqs, CPU)
        if drafter is None:  # the AR engine: no proposals
            block = draft_block(None, seqs, [0] * len(seqs), rows)
        else:
            found = drafter.lookups(seqs, [3] * len(seqs))
            block = drafter.propose(seqs, [len(f.tokens) for f in found], found, rows)
        accept_block(block, verify_block(pair.verifier, block))
    monkeypatch.undo()
    return traffic.counts


@pytest.mark.parametrize("temperature", [0.0, 0.8])
@pytest.mark.parametrize("rows", [1, 8])
def test_an_ar_decode_step_waits_on_the_device_once(tiny_pair, monkeypatch, rows, temperature):
    counts = _decode_step(tiny_pair, _sequences(tiny_pair, rows, temperature), None, monkeypatch)
    assert counts["scalar reads"] == 0, counts
    assert counts["copies to host"] == 1 and counts["tolist"] == 1, counts  # the step's one read-back
    assert counts["uploads"] == 3, counts  # verify index, step index, draft lengths: sampling rows are cached


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_a_step_with_prompt_lookup_proposals_waits_on_the_device_once(tiny_pair, monkeypatch, temperature):
    seqs = _sequences(tiny_pair, 8, temperature)
    drafter = Drafter("ngram", tiny_pair.verifier.vocab_size, lookup=(1, 3))
    assert any(f.tokens for f in drafter.lookups(seqs, [3] * len(seqs))), "the prompts repeat: lookups match"
    counts = _decode_step(tiny_pair, seqs, drafter, monkeypatch)
    assert counts["scalar reads"] == 0, counts
    assert counts["copies to host"] == 1 and counts["tolist"] == 1, counts


def test_a_prefill_chunk_that_completes_prompts_waits_once(tiny_pair, monkeypatch):
    seqs = []
    for i in range(4):
        prompt = tiny_pair.encode_prompt(f"prompt {i}")
        seq = Sequence(Request(f"p{i}", prompt, SamplingParams(max_new_tokens=4)), frozenset(), len(prompt) + 5, None)
        seq.verifier_kv = tiny_pair.verifier.new_store(len(prompt) + 5)
        seqs.append(seq)
    with HostTraffic(monkeypatch) as traffic:
        prefill_chunk(tiny_pair.verifier, None, seqs, 10_000)
    monkeypatch.undo()
    counts = traffic.counts
    assert counts["scalar reads"] == 0 and counts["copies to host"] == 1 and counts["tolist"] == 1, counts
    # the chunk's tokens, the step index, and the new sequences' sampling rows (once for their whole life)
    assert counts["uploads"] == 3, counts
    assert all(s.sampling is not None for s in seqs)
