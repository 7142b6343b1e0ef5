"""The dashboard's tests run the engine worker on a thread of the test's process (``PDV_ENGINE_HOST=thread``).

The worker's loop, pipes and pickles are the engine process's own, so what
the pages see is the same; only a test can then reach into the engines (fault
injection, a slow loader). ``tests/dashboard/test_engine_process.py`` and the
browser tests run the real engine process.
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _engine_worker_on_a_thread(request, monkeypatch):
    if request.node.get_closest_marker("engine_process") is None:
        monkeypatch.setenv("PDV_ENGINE_HOST", "thread")
