"""A roofline model of a named accelerator: a forward costs whichever is longer, reading its bytes from HBM or
doing its multiply-adds, and no less than launching its kernels.

For a forward of ``rows`` rows with ``tokens`` new tokens each over ``context``
cached tokens per row, on a model of ``ModelShape``, split over ``tp``
devices (tensor parallel):

    flops = 2 * matmul_params * rows * tokens                 (every linear, the output head)
          + 4 * layers * hidden * rows * tokens * context      (attention: scores and values)
    bytes = weight_bytes + rows * (context + tokens) * kv_bytes_per_token
    gpu   = max(flops / (tp * matmul_tflops * flops_efficiency), bytes / (tp * hbm * bandwidth_efficiency))
    time  = max(gpu, kernels * launch_us) + (tp > 1) * 2 * layers * allreduce_us

with ``kernels = layers * kernels_per_layer + 4``: eager PyTorch launches
each kernel from the host, so a small model's forward is bounded by launches,
not by the device. Two lanes on two streams at once each run ``2 - overlap``
times slower than alone (``overlap`` 1: perfectly side by side; 0: one after
the other). Every parameter is a field, shown in ``assumptions`` and
overridable from the command line; the presets take HBM bandwidth, dense
bfloat16 matmul rate and memory from the vendor's public specifications (SXM
parts), the rest are stated guesses.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from sim.cost_model import profile_grid
from sim.model_shapes import ModelPairShape, ModelShape
from sim.policies import CostProfile

GB = 1e9


@dataclass(frozen=True)
class Accelerator:
    name: str
    hbm_gb_s: float  # HBM bandwidth, GB/s (specification)
    matmul_tflops: float  # dense bfloat16 tensor-core rate, TFLOP/s (specification, no sparsity)
    memory_gb: float  # HBM capacity, GB (specification)
    # a guess: the host-side cost of one eager PyTorch kernel launch, microseconds
    launch_us: float = 4.0
    # a guess: how much two streams' kernels run side by side (1 = fully, 0 = one after the other)
    overlap: float = 0.5
    bandwidth_efficiency: float = 0.8  # a guess: the share of HBM bandwidth a decode forward reaches
    flops_efficiency: float = 0.6  # a guess: the share of the matmul rate a large forward reaches
    kernels_per_layer: int = 14  # eager decoder layer: norms, q/k/v, rope, attention, o, residuals, MLP (3), act
    tp: int = 1  # devices the models are split over (tensor parallel)
    allreduce_us: float = 10.0  # a guess: one all-reduce of a layer's activations over NVLink, microseconds

    def __post_init__(self) -> None:
        for name in ("hbm_gb_s", "matmul_tflops", "memory_gb", "bandwidth_efficiency", "flops_efficiency"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{self.name}: {name} must be > 0, got {getattr(self, name)}")
        if not 0 <= self.overlap <= 1:
            raise ValueError(f"{self.name}: overlap must be in 0..1, got {self.overlap}")
        if self.launch_us < 0 or self.allreduce_us < 0:
            raise ValueError(f"{self.name}: launch_us and allreduce_us must be >= 0")
        if self.tp < 1 or self.kernels_per_layer < 1:
            raise ValueError(f"{self.name}: tp and kernels_per_layer must be >= 1")
        if self.bandwidth_efficiency > 1 or self.flops_efficiency > 1:
            raise ValueError(f"{self.name}: efficiencies are shares of the specification, at most 1")


# NVIDIA's H100 SXM5 and H200 SXM datasheets
PRESETS: dict[str, Accelerator] = {
    "h100": Accelerator("H100 SXM", hbm_gb_s=3350.0, matmul_tflops=989.0, memory_gb=80.0),
    "h200": Accelerator("H200 SXM", hbm_gb_s=4800.0, matmul_tflops=989.0, memory_gb=141.0),
}


def accelerator(name: str, **overrides: Any) -> Accelerator:
    """The preset ``name`` (h100, h200) with ``overrides`` (any field); a ValueError naming the choices."""
    try:
        base = PRESETS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown device {name!r}; choose one of {', '.join(PRESETS)}") from None
    known = {f.name for f in fields(Accelerator)} - {"name"}
    unknown = set(overrides) - known
    if unknown:
        raise ValueError(
            f"unknown device parameter(s) {', '.join(sorted(unknown))}; choose from {', '.join(sorted(known))}"
        )
    return replace(base, **overrides)


def forward_s(device: Accelerator, model: ModelShape, rows: int, tokens: float, context: float) -> float:
    """One forward's seconds by the roofline above."""
    new = rows * tokens
    flops = 2 * model.matmul_params * new + 4 * model.layers * model.hidden * new * context
    moved = model.weight_bytes + rows * (context + tokens) * model.kv_bytes_per_token
    gpu = max(
        flops / (device.tp * device.matmul_tflops * 1e12 * device.flops_efficiency),
        moved / (device.tp * device.hbm_gb_s * GB * device.bandwidth_efficiency),
    )
    launches = (model.layers * device.kernels_per_layer + 4) * device.launch_us * 1e-6
    comm = 2 * model.layers * device.allreduce_us * 1e-6 if device.tp > 1 else 0.0
    return max(gpu, launches) + comm


@dataclass(frozen=True)
class RooflineCost:
    device: Accelerator
    pair: ModelPairShape

    def __post_init__(self) -> None:
        weights = (self.pair.verifier.weight_bytes + self.pair.draft.weight_bytes) / self.device.tp / GB
        if weights >= self.device.memory_gb:
            raise ValueError(
                f"{self.pair.name}'s weights take {weights:.0f} GB per device, more than the {self.device.name}'s "
                f"{self.device.memory_gb:g} GB: split them over more devices (tp)"
            )

    @property
    def name(self) -> str:
        tp = f" x{self.device.tp}" if self.device.tp > 1 else ""
        return f"roofline {self.device.name}{tp}"

    @property
    def cuda(self) -> bool:
        return True

    def kv_capacity_tokens(self) -> int:
        """Tokens of KV cache (both models) the device's memory holds after the weights."""
        free = (
            self.device.memory_gb * GB * self.device.tp - self.pair.verifier.weight_bytes - self.pair.draft.weight_bytes
        )
        per_token = self.pair.verifier.kv_bytes_per_token + self.pair.draft.kv_bytes_per_token
        return int(0.9 * free / per_token)

    def verify_s(self, rows: int, tokens: float, context: float) -> float:
        return forward_s(self.device, self.pair.verifier, rows, tokens, context)

    def draft_s(self, rows: int, context: float) -> float:
        return forward_s(self.device, self.pair.draft, rows, 1, context)

    def prefill_s(self, tokens: int, rows: int, context: float, with_draft: bool) -> float:
        per_row = tokens / max(1, rows)
        verify = forward_s(self.device, self.pair.verifier, rows, per_row, context)
        return verify + (forward_s(self.device, self.pair.draft, rows, per_row, context) if with_draft else 0.0)

    def concurrent_slowdown(self, rows: int, tokens: float) -> float:
        return 2.0 - self.device.overlap

    def budget_slowdown(self, rows: int, tokens: float) -> float:
        return 1.0  # a lane alone has the whole device

    def profile(self, max_batch: int, max_tokens: int) -> CostProfile:
        machine = {"device": f"cuda (roofline {self.device.name})", "pair": self.pair.name}
        return profile_grid(self, max_batch, max_tokens, machine)

    def assumptions(self) -> dict[str, Any]:
        return {
            "cost model": self.name,
            **{k: v for k, v in asdict(self.device).items() if k != "name"},
            "verifier": f"{self.pair.verifier.name} ({self.pair.verifier.params / 1e9:.2f} B parameters)",
            "draft": f"{self.pair.draft.name} ({self.pair.draft.params / 1e9:.2f} B parameters)",
            "context": "each forward reads its rows' whole KV cache",
        }
