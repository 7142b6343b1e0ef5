"""A progress bar on stderr for the commands' long, once-only steps (measuring the step costs).

It adapts the ``ProgressFn`` protocol (message, fraction) the loaders and the
profiling step report through, so a step can be watched from a terminal as
from the dashboard. The bar appears only once a step reports, so a cached
profile prints nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from engine.progress import ProgressFn


@contextmanager
def progress_bar() -> Iterator[ProgressFn]:
    """A ``ProgressFn`` drawing one bar on stderr; the bar is closed when the block ends."""
    from tqdm import tqdm

    bar: tqdm | None = None

    def report(message: str, fraction: float) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(
                total=100,
                desc=message,
                file=sys.stderr,
                bar_format="{desc} {bar} {percentage:3.0f}%",
                dynamic_ncols=True,
            )
        bar.set_description_str(message, refresh=False)
        bar.n = round(100 * fraction)
        bar.refresh()

    try:
        yield report
    finally:
        if bar is not None:
            bar.close()
