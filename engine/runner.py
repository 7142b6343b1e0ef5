"""One model and the packed forward pass every engine stage is built from."""

from __future__ import annotations

from enum import StrEnum

import torch
from transformers import PreTrainedModel

from engine.attention import ATTN_IMPLEMENTATION, GROUP_OVERHEAD, PackedBatch, step_index
from engine.kv import KVPool, KVStore
from engine.models.cpu_linear import chosen_backend, route_linears


class Stage(StrEnum):
    """The engine stage a forward serves (``engine.stages``): named in the stages' errors, and passed to
    ``ModelRunner.forward`` as a label that runner wrappers (fault injection, ``engine.faults``) match on."""

    PREFILL = "prefill"
    DRAFT = "draft"
    VERIFY = "verify"


class ModelRunner:
    """Runs packed forwards of one causal LM over per-request ``KVStore``s in the model's ``KVPool``.

    ``forward`` appends the given tokens to each store (advancing ``length``)
    and returns logits only at the requested positions. It may be called from
    several lane threads at once as long as they touch different stores.
    """

    def __init__(self, model: PreTrainedModel, name: str) -> None:
        self.name = name
        self.model = model.eval()
        self.model.set_attn_implementation(ATTN_IMPLEMENTATION)
        self.linear_kernel = route_linears(self.model, chosen_backend())
        cfg = model.config
        self.num_layers: int = cfg.num_hidden_layers
        self.num_kv_heads: int = cfg.num_key_value_heads
        self.head_dim: int = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.vocab_size: int = cfg.vocab_size
        self.hidden_size: int = cfg.hidden_size
        self.device = next(model.parameters()).device
        # the layers' dtype, which the KV cache holds (a shared draft's borrowed embedding may differ)
        decoder = getattr(model, "model", model)
        self.dtype = next(getattr(decoder, "layers", decoder).parameters()).dtype
        self.pool = KVPool(self.num_layers, self.num_kv_heads, self.head_dim, self.dtype, self.device)
        self.group_overhead = GROUP_OVERHEAD  # how readily attention splits a batch (engine.attention)

    def new_store(self, capacity: int) -> KVStore:
        """A store of ``capacity`` positions in this model's pool (its blocks return when it is dropped)."""
        return KVStore(self.pool, capacity)

    @torch.inference_mode()
    def forward(
        self,
        stores: list[KVStore],
        input_ids: torch.Tensor,  # [N] long, on device: the new tokens of all stores, packed in order
        num_tokens: list[int],  # new tokens per store; sums to N
        keep: torch.Tensor,  # [K] long, on device: packed positions whose logits are returned
        stage: Stage | None = None,  # the calling stage, for wrappers (unused here); None outside the engine
    ) -> torch.Tensor:  # [K, V] float32 logits
        for store, n in zip(stores, num_tokens, strict=True):
            if store.length + n > store.capacity:
                raise RuntimeError(f"KV store overflow: {store.length} + {n} > capacity {store.capacity}")
        if sum(num_tokens) != input_ids.shape[0]:
            raise ValueError(f"packed {input_ids.shape[0]} tokens but the stores take {sum(num_tokens)}")
        # shared: other lanes' forwards on their own stores run at once (why that is safe: engine.kv.KVPool);
        # growth, exclusive, waits for this forward rather than swap the tensors under it
        with self.pool.tensors.shared():
            for store in stores:
                for fence in store.take_fences():  # CUDA: the blocks' previous users are done with them
                    self.pool.backend.current_stream(self.device).wait_event(fence)
            index = step_index(stores, num_tokens, self.device, self.group_overhead)
            logits = self.model(
                input_ids=input_ids.unsqueeze(0),
                position_ids=index.position_ids,
                use_cache=False,
                logits_to_keep=keep,
                packed_batch=PackedBatch(self.pool, index),
            ).logits
        for store, n in zip(stores, num_tokens, strict=True):
            store.length += n
        # no host wait here: the stages check the logits for NaN/+inf with their step's one read-back
        return logits[0].float()
