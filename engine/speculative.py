"""The speculative acceptance rule, as one pure function.

Leviathan et al. (2023), Algorithm 1, for each row b with L_b drafted tokens:

    for i = 1..L_b:  accept d_i  iff  u_i < min(1, p_i(d_i) / q_i(d_i))        (u_i ~ U[0, 1))
    n = number of leading accepted tokens
    emit d_1..d_n, then one token from   norm(max(0, p_{n+1} - q_{n+1}))   if n < L_b   (correction)
                                          p_{L_b + 1}                       if n = L_b   (bonus)

p = verifier distribution, q = draft distribution at the same position. The
emitted sequence is distributed exactly as the verifier alone would sample it.
With one-hot (greedy) p and q the rule is: accept while d_i == argmax p_i, then
emit argmax p_{n+1} – token for token the verifier's greedy output.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class Verdict(NamedTuple):
    num_accepted: torch.Tensor  # [B] long: accepted drafted tokens, 0..L_b
    next_probs: torch.Tensor  # [B, V]: distribution of the token emitted after them (correction or bonus)
    bonus: torch.Tensor  # [B] bool: every drafted token was accepted, next token is the bonus


def verify(
    draft_tokens: torch.Tensor,  # [B, L] long; row b uses its first draft_lens[b] entries
    draft_probs: torch.Tensor,  # [B, L, V] q: draft distribution each token was sampled from
    target_probs: torch.Tensor,  # [B, L+1, V] p: verifier distribution at each position
    draft_lens: torch.Tensor,  # [B] long, 0..L
    u: torch.Tensor,  # [B, L] uniform [0, 1) numbers
) -> Verdict:
    batch, width = draft_tokens.shape
    positions = torch.arange(width, device=draft_tokens.device)
    drafted = positions.unsqueeze(0) < draft_lens.unsqueeze(1)  # [B, L]

    index = draft_tokens.unsqueeze(-1)
    p_of_draft = target_probs[:, :width].gather(-1, index).squeeze(-1)  # [B, L]
    q_of_draft = draft_probs.gather(-1, index).squeeze(-1)  # [B, L]
    # u < p/q without dividing: q > 0 for any token the draft actually sampled
    accept = (u * q_of_draft < p_of_draft) & drafted
    num_accepted = accept.long().cumprod(-1).sum(-1)  # [B]

    rows = torch.arange(batch, device=draft_tokens.device)
    p_next = target_probs[rows, num_accepted]  # [B, V]
    bonus = num_accepted == draft_lens
    # beyond the drafted positions q is taken as 0, so the "residual" there is p itself (the bonus)
    q_next = draft_probs[rows, num_accepted.clamp_max(max(width - 1, 0))] if width else torch.zeros_like(p_next)
    q_next = torch.where(bonus.unsqueeze(-1), torch.zeros_like(q_next), q_next)
    residual = (p_next - q_next).clamp_min(0)
    mass = residual.sum(-1, keepdim=True)
    # zero mass can only come from rounding (p == q everywhere means no rejection happens)
    next_probs = torch.where(mass > 0, residual / mass.clamp_min(1e-30), p_next)
    return Verdict(num_accepted, next_probs, bonus)


def verify_greedy(
    draft_tokens: torch.Tensor,  # [B, L] long; row b uses its first draft_lens[b] entries
    target_tokens: torch.Tensor,  # [B, L+1] long: the verifier's argmax at each position
    draft_lens: torch.Tensor,  # [B] long, 0..L
) -> tuple[torch.Tensor, torch.Tensor]:
    """The rule above for a batch of greedy rows, without distributions: (num_accepted [B], next token [B]).

    With one-hot p and q, u * q(d) < p(d) holds exactly when d is p's argmax, and the residual after a
    rejection, like the bonus, is one-hot on the argmax: accept while d_i == argmax p_i, then emit argmax
    p_{n+1}. Equal to ``verify`` followed by an argmax, at a fraction of its memory traffic.
    """
    width = draft_tokens.shape[1]
    drafted = torch.arange(width, device=draft_tokens.device).unsqueeze(0) < draft_lens.unsqueeze(1)
    accept = (draft_tokens == target_tokens[:, :width]) & drafted
    num_accepted = accept.long().cumprod(-1).sum(-1)
    return num_accepted, target_tokens.gather(1, num_accepted.unsqueeze(1)).squeeze(1)
