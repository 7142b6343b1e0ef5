"""Engine names are one type, ``EngineName``: any case at the boundary, one error naming the choices, and lane
threads named after their engine."""

import pytest

from engine.config import ENGINES, ControllerConfig, EngineConfig, EngineName
from engine.schedulers.registry import make_engine


def test_a_name_in_any_case_is_the_engine_and_an_unknown_one_is_refused_with_the_choices():
    assert EngineName.parse("PDV") is EngineName.PDV and EngineName.parse("baseline") is EngineName.BASELINE
    assert ENGINES[0] is EngineName.AR  # the reference comes first
    with pytest.raises(ValueError, match=r"unknown engine 'turbo'; choose one of ar, baseline, pd, pdv"):
        EngineName.parse("turbo")


def test_the_cli_refuses_an_unknown_engine_in_one_line_and_takes_any_case(capsys):
    from engine.__main__ import _parser

    parser = _parser()
    assert parser.parse_args(["generate", "--engine", "PD", "--prompt", "x"]).engine is EngineName.PD
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(["serve", "--engine", "turbo"])
    assert exit_info.value.code == 2
    assert "unknown engine 'turbo'; choose one of ar, baseline, pd, pdv" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "threads"),
    [("AR", {"ar-loop"}), ("baseline", {"baseline-loop"}), ("Pd", {"pd-prefill", "pd-decode"})]
    + [("pdv", {"pdv-prefill", "pdv-decode", "pdv-verify"})],
)
def test_make_engine_takes_a_name_in_any_case_and_names_each_lane_thread_after_the_engine(tiny_pair, name, threads):
    eng = make_engine(name, tiny_pair, EngineConfig(controller=ControllerConfig(kind="fixed"), drafter="ngram"))
    try:
        eng.start()
        assert eng.name is EngineName.parse(name) and eng.stats().engine == name.lower()
        assert {lane.thread.name for lane in eng.lanes.values()} == threads
    finally:
        eng.stop()


def test_a_name_says_whether_its_engine_speculates_as_the_engine_class_does():
    from engine.schedulers.registry import ENGINE_CLASSES

    assert [n for n in ENGINES if not n.speculative] == [EngineName.AR]
    assert all(ENGINE_CLASSES[n].speculative == n.speculative and ENGINE_CLASSES[n].name is n for n in ENGINES)
