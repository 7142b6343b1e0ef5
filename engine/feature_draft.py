"""A draft that reads the verifier's hidden states (feature-conditioned drafting).

A draft that sees only tokens has to rebuild, in a few layers, what the
verifier worked out in all of its layers. This one is handed that work: at
position ``j`` its input is the token ``x_j`` together with the verifier's
final hidden state at position ``j - 1`` (the vector the verifier's output
layer turned into ``x_j``). A small MLP (optionally followed by decoder
layers) maps the pair to a prediction of the verifier's hidden state at
``j``, and the verifier's own output rows turn that into a proposal for
``x_{j+1}``. The verifier's hidden state already carries the context, so even
without attention of its own the draft sees the whole prefix through it.

The verifier's hidden states exist only for tokens it has processed, so when
the draft runs ahead it feeds its own predicted hidden state back in place of
the verifier's: proposal ``k`` of a block rests on ``k - 1`` predictions.
After verification the draft forgets the positions it computed from its own
predictions and re-reads the accepted tokens with the verifier's real hidden
states, which the verify pass produced anyway. None of this touches the
acceptance rule: the verifier still decides every token, so the output is the
verifier's whatever the draft proposes.

Training teaches the draft the situation it meets at inference:
``unrolled_hidden`` computes, for every position of a sequence at once, what
the draft would produce as the first, second, ... proposal of a block starting
there, with the attention pattern those proposals would see (verifier-fed
positions before the block, its own earlier proposals inside it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AttentionInterface, LlamaConfig, LlamaForCausalLM
from transformers.modeling_outputs import CausalLMOutputWithPast

UNROLLED_ATTENTION = "pdv_unrolled"


class FeatureMLP(nn.Module):
    """``h + down(silu(up([e; h])))``: the hidden state read, moved by what the token adds to it."""

    def __init__(self, hidden_size: int, inner_size: int) -> None:
        super().__init__()
        self.up = nn.Linear(2 * hidden_size, inner_size, bias=True)
        self.down = nn.Linear(inner_size, hidden_size, bias=True)

    def forward(self, embeds: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        return features + self.down(F.silu(self.up(torch.cat([embeds, features], dim=-1))))


class FeatureDraft(LlamaForCausalLM):
    """``norm(layers(mlp(embedding(x_j), verifier hidden at j - 1)))``; the layers may be none.

    ``config.feature_mlp_size`` is the MLP's inner width. ``forward`` takes
    ``features`` [1, N, H] (or [B, T, H]) next to ``input_ids`` and returns the
    final hidden state of every position in ``hidden_states[0]``, which is what
    the next draft position reads as its feature.
    """

    takes_features = True

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__(config)
        self.fc = FeatureMLP(config.hidden_size, config.feature_mlp_size)

    def forward(
        self,
        input_ids: torch.Tensor,
        features: torch.Tensor,
        position_ids: torch.Tensor | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        **kwargs,
    ) -> CausalLMOutputWithPast:
        embeds = self.model.embed_tokens(input_ids)
        x = self.fc(embeds, features.to(embeds.dtype))
        kwargs.pop("use_cache", None)
        hidden = self.model(inputs_embeds=x, position_ids=position_ids, use_cache=False, **kwargs).last_hidden_state
        kept = hidden[:, -logits_to_keep:] if isinstance(logits_to_keep, int) else hidden[:, logits_to_keep]
        return CausalLMOutputWithPast(logits=self.lm_head(kept), hidden_states=(hidden,))


def shifted(hidden: torch.Tensor) -> torch.Tensor:
    """[B, T, H] -> the feature each position reads: the hidden state one position back, zeros at 0."""
    return torch.cat([torch.zeros_like(hidden[:, :1]), hidden[:, :-1]], dim=1)


# --------------------------------------------------------------------------
# Training view: every block depth at once
# --------------------------------------------------------------------------


@dataclass
class Unroll:
    """Keys and values of the depths computed so far, per layer (kept in the autograd graph)."""

    kv: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = field(default_factory=dict)


def unroll_mask(length: int, depth: int, device: torch.device) -> torch.Tensor:
    """Which keys the depth-``depth`` query at each position sees: [T, depth * T] bool.

    Keys are laid out depth by depth. A block whose first proposal sits at
    position ``p`` puts its ``d``-th proposal at ``j = p + d - 1``; that query
    sees the verifier-fed (depth 1) keys up to ``p`` and, for each depth ``t``
    from 2 to ``d``, the one key the block wrote at ``p + t - 1``.
    """
    j = torch.arange(length, device=device).unsqueeze(1)
    i = torch.arange(length, device=device).unsqueeze(0)
    parts = [i <= j - depth + 1] + [i == j - depth + t for t in range(2, depth + 1)]
    return torch.cat(parts, dim=1)


def unrolled_attention(
    module: nn.Module,
    query: torch.Tensor,  # [B, H, T, D]
    key: torch.Tensor,  # [B, H_kv, T, D]
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    unroll: Unroll | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    if unroll is None:
        raise RuntimeError(f"{UNROLLED_ATTENTION} attention needs unroll=Unroll(); use unrolled_hidden")
    cache = unroll.kv.setdefault(module.layer_idx, [])
    cache.append((key, value))
    keys = torch.cat([k for k, _ in cache], dim=2)
    values = torch.cat([v for _, v in cache], dim=2)
    mask = unroll_mask(query.shape[2], len(cache), query.device)
    out = F.scaled_dot_product_attention(query, keys, values, attn_mask=mask, scale=scaling, enable_gqa=True)
    return out.transpose(1, 2), None  # [B, T, H, D]


AttentionInterface.register(UNROLLED_ATTENTION, unrolled_attention)


def unrolled_hidden(
    draft: FeatureDraft, input_ids: torch.Tensor, features: torch.Tensor, depth: int
) -> list[torch.Tensor]:
    """Hidden states of proposals 1..``depth`` of a block starting at every position.

    ``input_ids`` [B, T] (right-padded), ``features`` [B, T, H] the verifier's
    hidden states at the same positions. Element ``d - 1`` of the result, at
    position ``j``, is the draft's hidden state for its ``d``-th proposal when
    that proposal is computed at ``j`` (so it predicts ``x_{j+1}``), given that
    the tokens it drafted before in the block were the true ones.
    """
    previous = draft.config._attn_implementation
    draft.set_attn_implementation(UNROLLED_ATTENTION)
    try:
        unroll, outs = Unroll(), []
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).expand_as(input_ids)
        read = shifted(features)
        nothing = torch.zeros(0, dtype=torch.long, device=input_ids.device)
        for _ in range(depth):
            out = draft(input_ids, read, position_ids=positions, logits_to_keep=nothing, unroll=unroll)
            hidden = out.hidden_states[0]
            outs.append(hidden)
            read = shifted(hidden)
        return outs
    finally:
        draft.set_attn_implementation(previous)
