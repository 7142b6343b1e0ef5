"""The distillation recipe (every setting that determines the trained weights) and one training sequence."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DistillConfig:
    """Everything that determines the trained weights; defaults reproduce the committed draft."""

    seed: int = 0
    layers: str = "0,1,28,29"  # verifier layers the draft starts from, in order
    vocab_subset: int = 16384  # tokens the draft can propose
    train_prompts: int = 2304
    eval_prompts: int = 48
    max_prompt_tokens: int = 192
    max_new_tokens: int = 128
    gen_batch: int = 64
    top_k: int = 32
    epochs: int = 6
    batch_tokens: int = 3072
    lr: float = 1e-3
    min_lr_ratio: float = 0.05
    warmup_steps: int = 30
    weight_decay: float = 0.0
    ce_weight: float = 0.5
    real_replies: int = 512
    max_real_tokens: int = 256
    draft_len: int = 4
    minutes: float = 55.0
    threads: int = 2
    teacher_dtype: str = "bfloat16"  # verifier copy that writes the training targets (eval answers: float32)
    train_dtype: str = "bfloat16"  # autocast dtype of the student's training forwards


@dataclass
class Sample:
    """One training/eval sequence: chat-formatted prompt, verifier answer and its top-k targets."""

    prompt_ids: torch.Tensor  # [P] int64
    answer_ids: torch.Tensor  # [G] int64, the verifier's greedy tokens (ends with eos if reached)
    topk_ids: torch.Tensor  # [G, k] int32
    topk_logp: torch.Tensor  # [G, k] float16, teacher log-probabilities


def torch_dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise SystemExit(f"expected a floating-point torch dtype name such as float32 or bfloat16, got {name!r}")
    return dtype


def parse_layers(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",")]
    except ValueError as exc:
        raise SystemExit(f"--layers takes comma-separated layer indices, got {text!r}") from exc
