"""Reading a measured grid between its points: linear between measured points, the nearest edge beyond."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence


def interpolate(xs: Sequence[int], ys: Sequence[float], x: float) -> float:
    """``ys`` at ``x``, for ``ys[i]`` measured at ascending ``xs[i]``."""
    i = bisect_left(xs, x)
    if i == 0:
        return ys[0]
    if i == len(xs):
        return ys[-1]
    x0, x1 = xs[i - 1], xs[i]
    return ys[i - 1] + (ys[i] - ys[i - 1]) * (x - x0) / (x1 - x0)


def interpolate2(xs: Sequence[int], ys: Sequence[int], table: Sequence[Sequence[float]], x: float, y: float) -> float:
    """``table[i][j]`` (measured at ``xs[i]``, ``ys[j]``) at (``x``, ``y``): along ``ys`` in each row, then ``xs``."""
    return interpolate(xs, [interpolate(ys, row, y) for row in table], x)
