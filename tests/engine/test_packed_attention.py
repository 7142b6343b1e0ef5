"""One attention call per layer: the packed forward against each request alone, its operator count, the pool."""

import gc

import pytest
import torch

from engine.attention import ATTN_IMPLEMENTATION
from engine.kv import BLOCK_TOKENS, FIRST_POOL_BLOCKS, KVStore
from engine.runner import ModelRunner
from tests.support.operators import OperatorCounter
from tests.support.packed import forward_tokens, packed_and_alone


def test_a_packed_forward_of_rows_with_different_pasts_equals_each_row_alone(tiny_pair):
    runner = tiny_pair.verifier
    gen = torch.Generator().manual_seed(5)
    prompts = [torch.randint(0, 256, (n,), generator=gen).tolist() for n in (3, 40, 17, 1)]
    news = [torch.randint(0, 256, (n,), generator=gen).tolist() for n in (5, 1, 3, 2)]
    packed, alone = packed_and_alone(runner, prompts, news, 64)
    # float32 GEMMs of different shapes (11 rows packed, 1-5 alone) sum in different orders: over 20 seeds at
    # 1, 2 and 3 intra-op threads the logits (up to 11 in size) differed by at most 7.1e-5, and 1e-5 failed a CI
    # run; a wrong past or mask differs by whole units
    torch.testing.assert_close(packed, alone, rtol=1e-4, atol=2e-4)
    assert packed.argmax(-1).tolist() == alone.argmax(-1).tolist()


def test_a_packed_forward_equals_the_model_without_a_cache(tiny_pair):
    """The pool's writes and reads reproduce plain causal attention over the whole sequence."""
    runner = tiny_pair.verifier
    tokens = torch.randint(0, 256, (37,), generator=torch.Generator().manual_seed(1)).tolist()
    store = runner.new_store(40)
    for chunk in (tokens[:20], tokens[20:33], tokens[33:]):  # prefill in chunks, then a verify-sized block
        logits = forward_tokens(runner, [store], [chunk])
    model = tiny_pair.verifier.model
    with torch.inference_mode():
        model.set_attn_implementation("sdpa")  # the same weights through transformers' own attention
        try:
            expected = model(torch.tensor([tokens])).logits[0, 33:].float()
        finally:
            model.set_attn_implementation(ATTN_IMPLEMENTATION)
    torch.testing.assert_close(logits, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("tokens", [1, 5])
def test_operators_per_layer_do_not_grow_with_the_batch_size(tiny_pair, tokens):
    runner = tiny_pair.verifier
    counts = {}
    for rows in (1, 8, 32):
        stores = [runner.new_store(50 + tokens) for _ in range(rows)]
        forward_tokens(runner, stores, [[7] * (10 + r) for r in range(rows)])  # different pasts per row
        with OperatorCounter() as counter:
            forward_tokens(runner, stores, [[9] * tokens for _ in range(rows)])
        counts[rows] = counter.total
    assert counts[1] == counts[8] == counts[32], counts


def test_a_store_returns_its_blocks_when_freed_or_dropped(tiny_pair):
    pool = ModelRunner(tiny_pair.verifier.model, "fresh").pool
    free = pool.free_blocks
    store = KVStore(pool, 3 * BLOCK_TOKENS + 1)
    assert store.capacity == 4 * BLOCK_TOKENS and pool.free_blocks == free - 4
    store.free()
    assert pool.free_blocks == free
    store = KVStore(pool, BLOCK_TOKENS)
    del store
    gc.collect()
    assert pool.free_blocks == free


def test_the_pool_grows_without_losing_what_stores_hold(tiny_pair):
    runner = ModelRunner(tiny_pair.verifier.model, "growing")
    prompt = list(range(30))
    first = runner.new_store(40)
    forward_tokens(runner, [first], [prompt])
    before = forward_tokens(runner, [first], [[5]])
    first.truncate(30)
    blocks = runner.pool.num_blocks
    more = [runner.new_store(FIRST_POOL_BLOCKS * BLOCK_TOKENS) for _ in range(2)]  # forces growth
    assert runner.pool.num_blocks > blocks
    torch.testing.assert_close(forward_tokens(runner, [first], [[5]]), before)
    del more
