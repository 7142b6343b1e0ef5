"""A live page builds a figure again only when its data changed: a redraw with the same data rebuilds nothing."""

from __future__ import annotations

from tests.dashboard.test_apptest import ended, open_app, rerun_until
from widgets.figure_memo import FigureMemo


def test_a_figure_is_built_once_per_version_of_its_data():
    memo, calls = FigureMemo(), []

    def build() -> object:
        calls.append(1)
        return object()

    first = memo.get("throughput", ("launch", 3), build)
    assert memo.get("throughput", ("launch", 3), build) is first and len(calls) == 1
    assert memo.get("throughput", ("launch", 4), build) is not first and len(calls) == 2
    assert memo.builds == {"throughput": 2}


def test_redrawing_a_finished_live_run_rebuilds_no_figure(runs_dir):
    at = open_app()
    at.number_input(key="live.num_requests").set_value(2)
    at.number_input(key="live.max_new_tokens").set_value(4)
    at.button(key="live.start").click().run()
    rerun_until(at, ended("live"))
    at.run()
    memo = at.session_state["live.figure_memo"]
    built = dict(memo.builds)
    assert {"throughput", "device", "ttft", "tpot", "draft_len", "acceptance", "positions"} <= set(built)
    for _ in range(2):
        at.run()
        assert not at.exception, at.exception
    assert memo.builds == built  # the same data: every figure kept, none built again
    assert len(at.get("plotly_chart")) >= 10  # and every one still drawn
