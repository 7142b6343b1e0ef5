"""The page's side of the engine process: start it, send it launches, mirror what it publishes.

The dashboard's comparisons (Live run, Sweep) run in an engine process of
their own (``dashboard.engine_worker``), as vLLM v1 runs its EngineCore apart
from its API server: the engines and their lane threads never share an
interpreter lock, or the page's redraws, with the Streamlit server. Here:

* ``EngineHost`` owns that process: started on the first launch (importing
  torch takes a few seconds), kept for the next one with its model pairs
  loaded, started again if it died, ended with the server (``close``).
* ``dashboard.remote_launch`` holds what the run manager and the pages hold:
  launches whose worker thread, instead of running engines, sends the spec to
  the engine process and applies every frame it publishes to the fields their
  ``view()`` reads, so the pages cannot tell the difference – except that the
  engines' figures are their own.

How a launch ends: it finishes; Stop sends a cancel (the engines stop at their
next step boundary; the process is killed if it has not stopped within
``STOP_GRACE_S``); the page's process watches its browser sessions (``watched``)
and cancels a launch nobody has watched for ``ABANDON_S`` (the tab was
closed); the engine process dies (killed, out of memory): the launch fails
with the exit status, and what finished before is saved and shown.

``PDV_ENGINE_HOST=thread`` runs the same worker on a thread of the page's
process instead, through the same pipe and pickles – for tests that reach
into the engines and for debugging. The page says so when it does: its
figures then include the page's own work.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

from dashboard.engine_channel import Channel
from dashboard.inspect_launch import InspectSpec
from dashboard.launch import PairLoader
from dashboard.replay_spec import ReplaySpec

log = logging.getLogger(__name__)

STOP_GRACE_S = 45.0  # after Stop, the engines' current step and shutdown; then the process is killed
ABANDON_S = 15.0  # no browser session watching for this long: the tab was closed, the launch is stopped
HOSTS = ("process", "thread")


def host_kind() -> str:
    """``PDV_ENGINE_HOST``: ``process`` (the default) or ``thread``."""
    kind = os.environ.get("PDV_ENGINE_HOST", "process")
    if kind not in HOSTS:
        raise ValueError(f"PDV_ENGINE_HOST must be one of {', '.join(HOSTS)}, got {kind!r}")
    return kind


class _Link:
    """A running engine worker: its channel, and how to end it and say how it ended."""

    pid: int

    def __init__(self, channel: Channel) -> None:
        self.channel = channel

    def kill(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def exit_text(self) -> str:
        raise NotImplementedError


class _ProcessLink(_Link):
    def __init__(self) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self._proc = subprocess.Popen(  # noqa: S603  # our own module, with this interpreter
            [sys.executable, "-m", "dashboard.engine_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=Path(__file__).resolve().parent.parent,
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        super().__init__(Channel(self._proc.stdout, self._proc.stdin))
        self.pid = self._proc.pid

    def kill(self) -> None:
        self._proc.kill()

    def close(self) -> None:
        self.channel.close()  # the worker reads the end of its input: it cancels and exits
        try:
            self._proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def exit_text(self) -> str:
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "stopped answering"
        return f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"


class _ThreadLink(_Link):
    def __init__(self, load_pair: PairLoader) -> None:
        from dashboard.engine_worker import serve  # the engine process's own loop, on a thread here

        to_worker_r, to_worker_w = os.pipe()
        to_page_r, to_page_w = os.pipe()
        worker = Channel(os.fdopen(to_worker_r, "rb"), os.fdopen(to_page_w, "wb"))
        super().__init__(Channel(os.fdopen(to_page_r, "rb"), os.fdopen(to_worker_w, "wb")))
        self._worker_channel = worker
        self.pid = os.getpid()

        def run() -> None:
            try:
                serve(worker, load_pair)
            finally:
                worker.close()

        self._thread = threading.Thread(target=run, name="engine-host-worker", daemon=True)
        self._thread.start()

    def kill(self) -> None:  # a thread cannot be killed: close its pipes, which cancels what it runs
        self.close()

    def close(self) -> None:
        self.channel.close()
        self._thread.join(STOP_GRACE_S)

    def exit_text(self) -> str:
        return "ended"


class EngineHost:
    """The engine process of one run manager; thread-safe."""

    def __init__(self, load_pair: PairLoader, kind: str | None = None) -> None:
        self.kind = kind or host_kind()
        self._load_pair = load_pair  # the thread host's loader (the run manager's cached one)
        self._lock = threading.Lock()
        self._link: _Link | None = None
        self._inboxes: dict[str, queue.Queue] = {}
        self._closing_registered = False

    @property
    def in_page_process(self) -> bool:
        return self.kind == "thread"

    def _ensure(self) -> _Link:
        with self._lock:
            if self._link is None:
                link = _ProcessLink() if self.kind == "process" else _ThreadLink(self._load_pair)
                if not self._closing_registered:  # the server's exit ends the engine process too
                    atexit.register(self.close)
                    self._closing_registered = True
                hello = link.channel.recv()
                if not (isinstance(hello, list) and hello and hello[0][0] == "ready"):
                    raise RuntimeError(f"the engine process did not start: it {link.exit_text()}")
                self._link = link
                threading.Thread(target=self._read, args=(link,), name="engine-host-reader", daemon=True).start()
            return self._link

    def _read(self, link: _Link) -> None:
        """Route every frame to its launch's inbox; at the end of the stream tell every launch it is lost."""
        # the worker runs one launch at a time, in the order they were sent: its frames are the oldest inbox's
        while (frames := link.channel.recv()) is not None:
            with self._lock:
                for frame in frames:
                    inbox = next(iter(self._inboxes.values()), None)
                    if inbox is not None:
                        inbox.put(frame)
                    if frame[0] == "done":
                        self._inboxes.pop(frame[1], None)
        exit_text = link.exit_text()
        with self._lock:
            if self._link is link:
                self._link = None
            for inbox in self._inboxes.values():
                inbox.put(("lost", exit_text))
            self._inboxes.clear()

    def submit(self, launch_id: str, spec: ReplaySpec | InspectSpec, out_dir: Path | None) -> queue.Queue:
        """Send a launch to the engine process (starting it if needed); its frames arrive in the returned queue."""
        link = self._ensure()
        inbox: queue.Queue = queue.Queue()
        with self._lock:
            self._inboxes[launch_id] = inbox
        link.channel.send(("launch", launch_id, spec, out_dir))
        return inbox

    def cancel(self, launch_id: str) -> None:
        with self._lock:
            link = self._link
        if link is not None:
            try:
                link.channel.send(("cancel", launch_id))
            except OSError:  # already gone: its reader reports it
                pass

    def kill(self) -> None:
        """End the engine process now (a launch that does not stop after Stop)."""
        with self._lock:
            link = self._link
        if link is not None:
            link.kill()

    @property
    def pid(self) -> int | None:
        with self._lock:
            return None if self._link is None else self._link.pid

    def close(self) -> None:
        """End the engine process: what it runs is cancelled first."""
        with self._lock:
            link, self._link = self._link, None
        if link is not None:
            link.close()


