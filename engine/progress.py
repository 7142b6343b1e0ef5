"""How long work reports its progress: one callback type every slow step takes (conversion, profiling).

The CLIs pass a tqdm bar's update, the dashboard a function that stores the latest message for its page;
``no_progress`` is the default where nobody watches.
"""

from __future__ import annotations

from collections.abc import Callable

ProgressFn = Callable[[str, float], None]  # (message, fraction in [0, 1])


def no_progress(message: str, fraction: float) -> None:
    """A ``ProgressFn`` that reports nowhere."""
