"""How much two lanes slow each other's forwards when they run at once on this device: pure values, no torch.

Measured once per machine with the step costs (``measure.measure_interference``)
on a few verifier shapes, all in one sitting so that the ratios compare like with
like. Three times per shape (rows x new tokens per row, over ``CONTEXT`` cached
tokens):

* ``alone_ms`` – one forward alone with every intra-op thread of the profile
  (what ``CostProfile.verify_s`` says, measured again beside the other two);
* ``lane_alone_ms`` – the same forward alone on one lane's budget
  (``lane_threads`` intra-op threads: the profile's threads split between two lanes);
* ``concurrent_ms`` – the same forward on one lane's budget while a second lane
  runs the same shape at once on its own budget.

``concurrent_slowdown`` = ``concurrent_ms`` / ``alone_ms``: a pipelined step's
forward costs ``verify_s(rows, tokens) * concurrent_slowdown(rows, tokens)``.
Below 2, two lanes at once get more done than one lane taking turns with every
core; above 2, taking turns does. The other lane runs the same shape: the
figure stands for "another lane of the same size is busy", not for a given
pair of shapes.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.profiling.grid import interpolate2


@dataclass(frozen=True)
class Interference:
    rows: tuple[int, ...]  # rows per forward measured, ascending
    tokens: tuple[int, ...]  # new tokens per row measured, ascending
    lane_threads: int  # intra-op threads each of the two lanes had
    alone_ms: tuple[tuple[float, ...], ...]  # [rows][tokens]: alone, every thread
    lane_alone_ms: tuple[tuple[float, ...], ...]  # [rows][tokens]: alone, one lane's budget
    concurrent_ms: tuple[tuple[float, ...], ...]  # [rows][tokens]: one lane's budget, the other lane busy

    def __post_init__(self) -> None:
        for name in ("alone_ms", "lane_alone_ms", "concurrent_ms"):
            table = getattr(self, name)
            if len(table) != len(self.rows) or any(len(row) != len(self.tokens) for row in table):
                raise ValueError(f"{name} must be {len(self.rows)} x {len(self.tokens)} (rows x tokens)")
            if any(v <= 0 for row in table for v in row):
                raise ValueError(f"{name} holds a time that is not positive")
        if self.lane_threads < 1:
            raise ValueError(f"lane_threads must be at least 1, got {self.lane_threads}")

    def concurrent_slowdown(self, rows: int, tokens: float) -> float:
        """Time of a forward while another lane runs at once / its time alone with every thread (interpolated)."""
        return interpolate2(self.rows, self.tokens, _ratio(self.concurrent_ms, self.alone_ms), rows, tokens)

    def budget_slowdown(self, rows: int, tokens: float) -> float:
        """Time of a forward alone on one lane's budget / its time alone with every thread (interpolated)."""
        return interpolate2(self.rows, self.tokens, _ratio(self.lane_alone_ms, self.alone_ms), rows, tokens)

    def table(self) -> str:
        """The measurement as a text table (milliseconds, and the slowdown)."""
        lines = [f"two lanes at once, {self.lane_threads} intra-op thread(s) each:",
                 "rows  tokens  alone ms  one lane's budget ms  with the other lane ms  slowdown"]  # fmt: skip
        for i, r in enumerate(self.rows):
            for j, t in enumerate(self.tokens):
                lines.append(
                    f"{r:4d}  {t:6d}  {self.alone_ms[i][j]:8.1f}  {self.lane_alone_ms[i][j]:20.1f}  "
                    f"{self.concurrent_ms[i][j]:22.1f}  {self.concurrent_ms[i][j] / self.alone_ms[i][j]:8.2f}"
                )
        return "\n".join(lines)


def _ratio(num: tuple[tuple[float, ...], ...], den: tuple[tuple[float, ...], ...]) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(n / d for n, d in zip(rn, rd, strict=True)) for rn, rd in zip(num, den, strict=True))
