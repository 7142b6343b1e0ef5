"""Runner wrappers tests install to observe forwards, so the engine's own runner keeps no counters for them."""

from __future__ import annotations

import threading
from dataclasses import replace

import torch

from engine.kv import KVStore
from engine.models.pair import ModelPair
from engine.runner import ModelRunner, Stage


class CountingRunner(ModelRunner):
    """A ``ModelRunner`` sharing ``runner``'s model that counts the tokens of every forward it completes."""

    def __init__(self, runner: ModelRunner) -> None:
        self.__dict__.update(runner.__dict__)  # the wrapped runner already set the model up
        self._count_lock = threading.Lock()  # lanes forward on several threads at once
        self.tokens_forwarded = 0

    def forward(
        self,
        stores: list[KVStore],
        input_ids: torch.Tensor,
        num_tokens: list[int],
        keep: torch.Tensor,
        stage: Stage | None = None,
    ) -> torch.Tensor:
        logits = super().forward(stores, input_ids, num_tokens, keep, stage)
        with self._count_lock:
            self.tokens_forwarded += sum(num_tokens)
        return logits


def counting(pair: ModelPair) -> ModelPair:
    """``pair`` with both runners wrapped in ``CountingRunner``s (the original pair is untouched)."""
    return replace(pair, verifier=CountingRunner(pair.verifier), draft=CountingRunner(pair.draft))
