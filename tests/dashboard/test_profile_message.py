"""The dashboard's first Start on a machine without a step-cost profile says it is measuring one, then runs."""

from __future__ import annotations

import threading

from dashboard import replay_launch
from engine.profiling.measure import MEASURING
from tests.dashboard.test_apptest import ended, no_launch_outlives_its_test, open_app, rerun_until

__all__ = ["no_launch_outlives_its_test"]  # the autouse fixture that stops a launch a failing test left running


def test_a_start_without_a_profile_shows_the_measuring_step_then_runs(runs_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("PDV_PROFILE_DIR", str(tmp_path / "no-profile-yet"))
    real = replay_launch.prepare_profiles
    release = threading.Event()
    measuring: list[str] = []

    def held_at_the_first_report(pair, config, engines, progress):
        """The real profiling step, its first progress report held until the page has shown it."""

        def report(message: str, fraction: float) -> None:
            progress(message, fraction)
            if not measuring:
                measuring.append(message)
                assert release.wait(60), "the test never released the profiling step"

        return real(pair, config, engines, report)

    monkeypatch.setattr(replay_launch, "prepare_profiles", held_at_the_first_report)
    at = open_app()
    at.number_input(key="live.num_requests").set_value(2)
    at.number_input(key="live.max_new_tokens").set_value(4)
    at.button(key="live.start").click().run()
    shown = lambda a: [p.proto.text for p in a.get("progress") if p.proto.text.startswith(MEASURING)]  # noqa: E731
    try:
        rerun_until(at, lambda a: bool(shown(a)))
        assert measuring and measuring[0].startswith(MEASURING)  # the real step reported, not only the wrapper
        assert [s.state for s in at.status] == ["running"]  # no ✓ while it measures
    finally:
        release.set()
    rerun_until(at, ended("live"))
    assert "Finished" in at.success[0].value
    assert any((tmp_path / "no-profile-yet").iterdir())  # the profile it measured is kept for the next Start
