"""Datasets through ``datasets``: every recognised shape, the clear error, hub ids, the truncated-file
fallback, and MT-Bench replayed as two turns that follow the engine's own first answers."""

from __future__ import annotations

import csv
import json

import pandas as pd
import pytest

from engine.config import EngineConfig, SamplingParams
from workloads.datasets.mt_bench import questions
from workloads.datasets.sharegpt_file import DatasetError
from workloads.datasets.sources import load_exchanges
from workloads.drivers.arrivals import ClosedLoop
from workloads.drivers.mt_bench import CATEGORIES_CSV, run_mt_bench
from workloads.drivers.run_spec import RunSettings
from workloads.drivers.sweep import SweepPlan
from workloads.drivers.trace import MT_BENCH, DatasetSpec, load_trace

SHAREGPT = {"id": "a", "conversations": [{"from": "human", "value": "hi there"}, {"from": "gpt", "value": "hello"}]}
MESSAGES = {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"},
                         {"role": "assistant", "content": "hello"}]}  # fmt: skip


def write_jsonl(path, rows):
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return str(path)


@pytest.mark.parametrize(
    "rows",
    [
        [SHAREGPT],
        [MESSAGES],
        [{"prompt": "hi there", "response": "hello"}],
        [{"question": "hi there", "answer": "hello"}],
    ],
    ids=["sharegpt", "openai-messages", "prompt-column", "question-column"],
)
def test_each_shape_gives_the_first_user_turn_and_its_reply(tmp_path, rows):
    [ex] = load_exchanges(write_jsonl(tmp_path / "d.jsonl", rows))
    assert (ex.prompt, ex.reply) == ("hi there", "hello")


def test_csv_parquet_and_a_directory_load_through_datasets(tmp_path):
    frame = pd.DataFrame({"instruction": ["one", "two"], "output": ["1", "2"]})
    frame.to_csv(tmp_path / "d.csv", index=False)
    frame.to_parquet(tmp_path / "d.parquet")
    (tmp_path / "dir").mkdir()
    frame.to_parquet(tmp_path / "dir" / "train.parquet")
    for name in ("d.csv", "d.parquet", "dir"):
        assert [(e.prompt, e.reply) for e in load_exchanges(str(tmp_path / name))] == [("one", "1"), ("two", "2")]


def test_an_unknown_shape_is_refused_naming_the_columns_and_the_shapes_expected(tmp_path):
    with pytest.raises(DatasetError, match=r"columns \['query', 'label'\]; expected conversations"):
        load_exchanges(write_jsonl(tmp_path / "d.jsonl", [{"query": "x", "label": 1}]))


def test_a_hub_id_goes_to_load_dataset_with_its_split_and_config(monkeypatch):
    import datasets

    calls = []

    def fake(name, config=None, split=None, **kwargs):
        calls.append((name, config, split))
        return datasets.Dataset.from_list([MESSAGES])

    monkeypatch.setattr(datasets, "load_dataset", fake)
    [ex] = load_exchanges("someone/chats", split="test", config="en")
    assert calls == [("someone/chats", "en", "test")] and ex.prompt == "hi there"


def test_a_hub_id_that_cannot_load_is_one_clear_error(monkeypatch):
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(
        DatasetError, match="cannot load 'someone/chats' as a hub dataset .*: ConnectionError: no network"
    ):
        load_exchanges("someone/chats")


def test_a_json_file_cut_inside_a_record_falls_back_to_the_sharegpt_loader(tmp_path, tiny_pair):
    records = [dict(SHAREGPT, id=str(i)) for i in range(3)]
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(records)[:-30])  # the last record is cut off: not valid JSON
    assert load_exchanges(str(path)) is None
    with pytest.warns(UserWarning):
        trace = load_trace(DatasetSpec(str(path)), tiny_pair, 2, seed=0)
    assert len(trace) == 2 and trace.items[0].prompt == "hi there"


def test_mt_bench_is_a_built_in_dataset_covering_every_category():
    assert len(questions()) == 80
    assert len({q["category"] for q in questions()[:8]}) == 8  # any prefix spreads over the categories


def test_mt_bench_second_turns_follow_each_engines_own_first_answers(tmp_path, tiny_pair):
    trace = load_trace(DatasetSpec(MT_BENCH), tiny_pair, 8, seed=0, max_new_tokens=6)
    settings = RunSettings(EngineConfig(), SamplingParams(max_new_tokens=6, seed=0))
    plan = SweepPlan(("ar", "baseline"), (ClosedLoop(2),), settings)
    results = run_mt_bench(tiny_pair, trace, plan, tmp_path)
    assert [(r.key.engine, r.requests[0].request_id[-2:]) for r in results] == [
        ("ar", "t1"), ("ar", "t2"), ("baseline", "t1"), ("baseline", "t2")
    ]  # fmt: skip
    first, second = results[0], results[1]
    for one, two in zip(first.requests, second.requests, strict=True):
        answer = tiny_pair.tokenizer.decode(one.output_token_ids, skip_special_tokens=True)
        assert answer and answer in tiny_pair.tokenizer.decode(two.prompt_token_ids, skip_special_tokens=True)
    rows = list(csv.DictReader(open(tmp_path / CATEGORIES_CSV)))
    assert len(rows) == 4 * 8 and {r["turn"] for r in rows} == {"1", "2"}
    assert {r["category"] for r in rows} == {q["category"] for q in questions()}
    entries = json.loads((tmp_path / "run.json").read_text())["runs"]
    assert [e["mt_bench_turn"] for e in entries] == [1, 2, 1, 2]
