"""Which kernel runs the float32 linear layers on the CPU.

PyTorch hands a float32 ``nn.Linear`` on the CPU to its BLAS (MKL in the
official wheels). For the few-row products a decoder runs (one token per
request when decoding, L + 1 when verifying, a short prompt when prefilling)
oneDNN, which PyTorch also ships, is faster on some CPUs; on the 2-core AMD
EPYC this project is measured on, a 5-row product with SmolLM2's weights took
about half the time. Both compute in float32; only the order of the additions
differs, as it does between any two GEMM kernels or batch sizes.

``PDV_CPU_LINEAR`` picks the kernel for every float32 CPU model an engine
runs: ``onednn`` (the default) or ``blas`` (PyTorch's own choice). Layers
with fewer than ``MIN_ONEDNN_WEIGHTS`` weights stay on BLAS, whose fixed cost
per call is lower. Other dtypes and devices are left alone: bfloat16 already
goes to oneDNN on the CPU, and CUDA has its own kernels.
"""

from __future__ import annotations

import os

import torch
from torch import nn

ENV = "PDV_CPU_LINEAR"
BACKENDS = ("onednn", "blas")
# oneDNN's fixed cost per call is larger than BLAS's: below this size it loses (a 64 x 128 layer, as in the
# tiny preset, took about 30 us through oneDNN against 7 us through BLAS here)
MIN_ONEDNN_WEIGHTS = 1 << 16


def onednn_available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def cpu_has_bfloat16() -> bool:
    """True when the CPU multiplies bfloat16 in hardware (AVX512-BF16 or AMX); else bfloat16 is emulated and slow."""
    cpu = torch.cpu
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(cpu, name, lambda: False)() for name in checks)


def chosen_backend() -> str:
    """``PDV_CPU_LINEAR`` if set (one clear error for a bad value), else oneDNN where PyTorch has it."""
    name = os.environ.get(ENV, "").strip().lower()
    if not name:
        return "onednn" if onednn_available() else "blas"
    if name not in BACKENDS:
        raise ValueError(f"{ENV} must be one of {', '.join(BACKENDS)}, got {name!r}")
    if name == "onednn" and not onednn_available():
        raise RuntimeError(f"{ENV}=onednn but this PyTorch build has no oneDNN linear; set {ENV}=blas")
    return name


class OneDNNLinear(nn.Module):
    """An ``nn.Linear`` computed by oneDNN; holds the very same weight and bias parameters."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x.contiguous(), self.weight, self.bias, "none", [], "")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def route_linears(model: nn.Module, backend: str, min_weights: int = MIN_ONEDNN_WEIGHTS) -> str:
    """Put ``model``'s float32 CPU linears on ``backend``; returns the kernel its linears now use.

    Only ``nn.Linear`` modules whose weight is a float32 CPU tensor change, and
    only those with at least ``min_weights`` weights go to oneDNN. The answer is
    ``"onednn"`` when any layer went there, ``"blas"`` when float32 CPU layers
    exist but none did, and ``"default"`` when the model has none (other dtypes
    or devices).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    found = routed = False
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            is_plain = type(child) is nn.Linear
            if not (is_plain or isinstance(child, OneDNNLinear)):
                continue
            if child.weight.dtype != torch.float32 or child.weight.device.type != "cpu":
                continue
            found = True
            onednn = backend == "onednn" and child.weight.numel() >= min_weights
            routed |= onednn
            if onednn and is_plain:
                setattr(parent, name, OneDNNLinear(child))
            elif not onednn and not is_plain:
                plain = nn.Linear(child.in_features, child.out_features, bias=child.bias is not None, device="meta")
                plain.weight, plain.bias = child.weight, child.bias
                setattr(parent, name, plain)
    return "onednn" if routed else ("blas" if found else "default")
