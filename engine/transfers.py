"""The host's side of a step: what goes up to the device and the one read that comes back.

On a GPU the host queues kernels ahead of the device only until it needs a
value the device computes: every read-back (``.tolist()``, ``bool()``,
``.item()``) stops the queue until the device catches up. So a step uploads
its metadata in as few copies as possible (``upload``: one pinned,
non-blocking copy on CUDA) and reads back once: the verdicts, the sampled
tokens and the non-finite checks of every forward of the step travel in one
copy (``read_back``). ``FiniteChecks`` collects those checks as device flags
instead of waiting on each forward. The design's count per step is stated in
docs/architecture.md ("Host waits") and held by a test.
"""

from __future__ import annotations

import torch

INF = float("inf")


def upload(values: list[int] | list[float], device: torch.device, dtype: torch.dtype = torch.long) -> torch.Tensor:
    """One host-to-device copy of ``values`` (pinned and non-blocking on CUDA: the host does not wait)."""
    host = torch.tensor(values, dtype=dtype)
    if device.type == "cuda":
        return host.pin_memory().to(device, non_blocking=True)
    return host.to(device)


def read_back(*tensors: torch.Tensor) -> list[list[int]]:
    """One device-to-host copy of several integer or bool tensors; each comes back as a flat list of ints.

    The copy is explicit (``copy=True``) so that it is one visible operator on every device.
    """
    if not tensors:
        return []
    flat = torch.cat([t.reshape(-1).long() for t in tensors])
    values = flat.to("cpu", copy=True).tolist()
    out, start = [], 0
    for t in tensors:
        out.append(values[start : start + t.numel()])
        start += t.numel()
    return out


class FiniteChecks:
    """Device flags saying which forwards of a step returned NaN or +inf logits, read with the step's verdicts.

    NaN or +inf logits would be sampled into garbage tokens without a word: the
    step fails its batch instead, before it emits anything. -inf is legitimate
    (a draft whose vocabulary is restricted masks the rest with -inf), so one
    reduction per forward suffices: a sum is NaN or +inf exactly when a logit
    is NaN or +inf (or +inf meets -inf), i.e. when it is not below +inf.
    """

    def __init__(self) -> None:
        self._flags: list[torch.Tensor] = []  # 0-d bool each: True = non-finite
        self._where: list[str] = []

    def add(self, logits: torch.Tensor, where: str) -> None:
        """Queue the check of one forward's logits ([K, V]); ``where`` names it in the error."""
        self._flags.append(~(logits.sum() < INF))
        self._where.append(where)

    def flags(self, device: torch.device) -> torch.Tensor:
        """[F] bool, one per added forward (empty when none was added)."""
        if not self._flags:
            return torch.zeros(0, dtype=torch.bool, device=device)
        return torch.stack(self._flags)

    def raise_if_any(self, host_flags: list[int]) -> None:
        """Raise ``FloatingPointError`` naming the first forward whose flag (as read back) is set."""
        for flag, where in zip(host_flags, self._where, strict=True):
            if flag:
                raise FloatingPointError(f"the {where} returned non-finite logits (NaN or +inf)")
