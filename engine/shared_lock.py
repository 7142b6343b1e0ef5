"""A shared/exclusive lock: many holders at once in shared mode, or one alone in exclusive mode.

The KV pool (``engine.kv.KVPool``) takes it around its tensors: every forward
holds it shared, so forwards on different lanes run at once, and growth, which
replaces the tensors, holds it exclusive. Exclusive waiters go first: once one
waits, new shared holders wait behind it, so lanes that keep forwarding never
starve growth. A thread that already holds it shared may take it shared again
(it would otherwise deadlock behind a waiting writer); asking for exclusive
while holding it shared is refused with an error, since it could never be
granted.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class SharedExclusiveLock:
    """Shared holders run at once; an exclusive holder runs alone. Neither mode is reentrant across modes."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._shared = 0  # threads' shared holds at the moment, counting re-entries
        self._exclusive = False
        self._writers_waiting = 0
        self._mine = threading.local()  # this thread's shared holds (re-entries)

    def _held_here(self) -> int:
        return getattr(self._mine, "count", 0)

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Hold the lock with other shared holders; waits while an exclusive holder runs or waits."""
        held = self._held_here()
        with self._cond:
            # a re-entry must not wait for a writer: the writer waits for this very thread
            while self._exclusive or (self._writers_waiting and not held):
                self._cond.wait()
            self._shared += 1
        self._mine.count = held + 1
        try:
            yield
        finally:
            self._mine.count = held
            with self._cond:
                self._shared -= 1
                if not self._shared:
                    self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the lock alone: waits until every shared holder has left; new shared holders wait meanwhile."""
        if self._held_here():
            raise RuntimeError("a thread holding the lock shared cannot take it exclusive (it would wait for itself)")
        with self._cond:
            self._writers_waiting += 1
            try:
                while self._exclusive or self._shared:
                    self._cond.wait()
            except BaseException:
                self._writers_waiting -= 1
                self._cond.notify_all()  # shared waiters held back by this writer go on
                raise
            self._writers_waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()
