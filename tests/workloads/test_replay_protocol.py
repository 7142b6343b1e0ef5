"""An in-process engine is what a replay drives, as it is: no adapter stands between them."""

from engine.config import SamplingParams
from engine.request import Request
from engine.schedulers.registry import make_engine
from workloads.drivers.engines import ReplayEngine


def protocol_members() -> list[str]:
    return sorted(n for n in vars(ReplayEngine) if not n.startswith("_"))


def test_every_engine_provides_each_member_of_the_replay_protocol(tiny_pair):
    members = protocol_members()
    assert {"start", "submit", "stats", "stop", "output_text", "accounting_problems", "describe"} <= set(members)
    for name in ("ar", "baseline", "pd", "pdv"):
        engine = make_engine(name, tiny_pair)
        missing = [m for m in members if not hasattr(engine, m)]
        assert not missing, f"{name} lacks {missing}"


def test_an_engine_reports_its_token_ids_as_its_text_and_balanced_counts_once_stopped(tiny_pair):
    engine: ReplayEngine = make_engine("pd", tiny_pair)
    request = Request("r", [1, 2, 3], SamplingParams(max_new_tokens=4))
    engine.start()
    engine.submit(request)
    assert request.done.wait(60)
    engine.stop()
    assert engine.output_text(request) is None
    assert engine.describe() is None
    assert engine.accounting_problems() == []
