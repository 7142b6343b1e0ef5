"""The engine process: runs the dashboard's comparisons apart from the page (``python -m dashboard.engine_worker``).

The page's process (``dashboard.engine_host``) starts this process once and
sends it launches (an inspection, one request, runs here too); a comparison is a ``ReplayLaunch`` – the model pair, the
trace, the step-cost profile, the sweeps with their engines and lane threads –
exactly as the CLI's ``replay`` runs them, with nothing of the page in this
interpreter or on its threads. What the page shows is published from here
every ``PUBLISH_S``: the launch's status, each sweep's live events (requests
finished, time series rows), every ended round and every comparison, each sent
once. Drawing it costs this process nothing.

Model pairs stay loaded between launches. When the page's process goes away,
however it ends, the kernel closes its end of the pipe: the launch in progress
is cancelled and this process exits. (``PR_SET_PDEATHSIG`` would not do: it
fires when the *thread* that started the process ends, and a launch's thread
does.)
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from dashboard.engine_channel import Channel
from dashboard.inspect_launch import InspectLaunch, InspectSpec
from dashboard.launch import PairLoader
from dashboard.live_mirror import RecordingLiveRun
from dashboard.replay_launch import ReplayLaunch
from dashboard.replay_spec import ReplaySpec
from engine.models.pair import ModelPair, load_model_pair
from engine.progress import ProgressFn

log = logging.getLogger(__name__)

PUBLISH_S = 0.5  # how often the page's process hears of a launch: the page redraws every 2 s at most


@dataclass
class _Cursor:
    """What one sweep has published so far."""

    results: int = 0
    comparisons: dict[int, object] = field(default_factory=dict)
    ended: bool = False


class _Pairs:
    """Model pairs loaded in this process, kept for the next launch."""

    def __init__(self, load_pair: PairLoader) -> None:
        self._load = load_pair
        self._pairs: dict[tuple[str, str], ModelPair] = {}

    def get(self, preset: str, device: str, progress: ProgressFn) -> ModelPair:
        pair = self._pairs.get((preset, device))
        if pair is None:
            pair = self._pairs[(preset, device)] = self._load(preset, device, progress)
        progress(f"{preset} pair loaded on {pair.device}", 1.0)
        return pair


def _publish(channel: Channel, launch: ReplayLaunch | InspectLaunch) -> None:
    """Send what changed in ``launch`` every ``PUBLISH_S`` until it has ended, then its last state."""
    sent_status, cursors = None, None
    while True:
        over = launch.wait(PUBLISH_S)
        frames: list[tuple] = []
        if isinstance(launch, InspectLaunch):
            view = launch.view()
            if view.status != sent_status:
                frames.append(("status", view.status))
                sent_status = view.status
            if over:
                frames += [("inspected", view.request, view.pieces), ("done", launch.id)]
            if frames:
                channel.send(frames)
            if over:
                return
            continue
        planned, sweeps = launch.sweep_states()
        if sweeps and cursors is None:
            frames.append(("sweeps", tuple(s.plan for s in sweeps), planned))
            cursors = [_Cursor() for _ in sweeps]
        for i, (sweep, cursor) in enumerate(zip(sweeps, cursors or (), strict=False)):
            events = sweep.live.drain() if isinstance(sweep.live, RecordingLiveRun) else []
            if events:
                frames.append(("live", i, events))
            frames.extend(("result", i, r) for r in sweep.results[cursor.results :])
            cursor.results = len(sweep.results)
            for index, point in sweep.comparisons.items():
                if cursor.comparisons.get(index) is not point:
                    frames.append(("comparison", i, index, point))
                    cursor.comparisons[index] = point
            if sweep.ended and not cursor.ended:
                frames.append(("ended", i))
                cursor.ended = True
        status = launch.status()
        if status != sent_status:
            frames.append(("status", status))
            sent_status = status
        if over:
            frames.append(("done", launch.id))
        if frames:
            channel.send(frames)
        if over:
            return


def serve(channel: Channel, load_pair: PairLoader) -> None:
    """Run the launches the page's process sends, one at a time, until it closes the channel."""
    commands: queue.Queue[tuple | None] = queue.Queue()
    lock = threading.Lock()
    running: dict[str, ReplayLaunch | InspectLaunch] = {}
    cancelled: set[str] = set()

    def read() -> None:
        while (message := channel.recv()) is not None:
            if message[0] == "cancel":
                with lock:
                    cancelled.add(message[1])
                    launch = running.get(message[1])
                if launch is not None:
                    launch.cancel()
            else:
                commands.put(message)
        with lock:  # the page's process is gone: nothing may go on running for nobody
            for launch in running.values():
                launch.cancel()
        commands.put(None)

    threading.Thread(target=read, name="engine-host-commands", daemon=True).start()
    pairs = _Pairs(load_pair)
    channel.send([("ready", os.getpid())])
    while (command := commands.get()) is not None:
        _, launch_id, spec, out_dir = command
        launch: ReplayLaunch | InspectLaunch
        if isinstance(spec, InspectSpec):
            launch = InspectLaunch(launch_id, spec, pairs.get)
        else:
            launch = _replay_launch(launch_id, spec, out_dir, pairs)
        with lock:
            running[launch_id] = launch
            if launch_id in cancelled:
                launch.cancel()
        launch.start()
        try:
            _publish(channel, launch)
        except OSError:  # the page's process went away mid-launch: stop it and leave
            launch.cancel()
            launch.wait()
            return
        finally:
            with lock:
                running.pop(launch_id, None)


def _replay_launch(launch_id: str, spec: ReplaySpec, out_dir: Path, pairs: _Pairs) -> ReplayLaunch:
    # this process writes one launch at a time: the write lock only orders its own sweeps' writes
    return ReplayLaunch(launch_id, spec, out_dir, pairs.get, threading.Lock(), RecordingLiveRun)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="engine process: %(levelname)s %(name)s: %(message)s")
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr  # a stray print must not corrupt the frames
    channel = Channel(sys.stdin.buffer, out)

    def load(preset: str, device: str, progress: ProgressFn) -> ModelPair:
        return load_model_pair(preset, device=device, progress=progress)

    serve(channel, load)


if __name__ == "__main__":
    main()
