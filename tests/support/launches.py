"""Stopping the dashboard launch a test left running, so that one failing test cannot leak a run into the next."""

from __future__ import annotations

from dashboard.run_manager import RunManager

STOP_TIMEOUT_S = 60.0  # a cancel takes effect at the engines' next step boundary; slow on a busy machine


def stop_left_launch(manager: RunManager) -> None:
    """Cancel ``manager``'s active launch, if any, wait for its thread (which stops its engines) to end, and end
    the manager's engine process (or worker thread)."""
    launch = manager.active()
    if launch is not None:
        launch.cancel()
        assert launch.wait(timeout=STOP_TIMEOUT_S), f"launch {launch.id} did not stop within {STOP_TIMEOUT_S:.0f} s"
    manager.close()
