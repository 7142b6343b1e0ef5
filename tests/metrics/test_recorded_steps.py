"""outputs.jsonl's ``steps``: every verify step of a request, written compactly and read back as the engine kept it."""

from __future__ import annotations

import json
from dataclasses import replace

import pandas as pd
import pytest

from engine.draft_source import MAX_MATCH_GROUP, MODEL, DraftSource, SourceKind
from engine.request import StepRecord
from metrics.frames import live_frames
from metrics.recorded_steps import read_steps, step_entries
from metrics.run_record import RequestOutput
from metrics.runs import load_run_dir
from tests.metrics.test_export import ar_record, write_one

STEPS = (
    StepRecord(4, 3, MODEL),
    StepRecord(0, 0, None),  # a step that drafted nothing has no source
    StepRecord(5, 5, DraftSource(SourceKind.GLOBAL, MAX_MATCH_GROUP)),
    StepRecord(2, 0, DraftSource(SourceKind.LOOKUP, 1)),
)


def test_every_draft_source_is_read_back_from_its_value():
    sources = [MODEL] + [DraftSource(k, m) for k in SourceKind if k is not SourceKind.MODEL for m in (1, 6)]
    assert [DraftSource.parse(str(s)) for s in sources] == sources


@pytest.mark.parametrize("text", ["", "suffix", "lookup0", "lookup7", "model2", "draft"])
def test_a_value_no_source_has_is_refused(text):
    with pytest.raises(ValueError):
        DraftSource.parse(text)


@pytest.mark.parametrize("entry", [[3, 4, None], [2, 1], "2,1,model", [2.5, 1, None], [2, 1, "nope"]])
def test_an_entry_that_is_not_a_step_is_refused(entry):
    with pytest.raises(ValueError):
        read_steps([entry])


def test_steps_round_trip_through_outputs_jsonl_and_an_older_file_reads_as_unrecorded(tmp_path):
    output = RequestOutput("run-ar", "pd", "r1", "hi", (1,), (5, 6, 7, 8), "x", 1, None, STEPS)
    record = replace(ar_record(), outputs=(output,))
    write_one(tmp_path / "new", record)
    line = json.loads((tmp_path / "new" / "outputs.jsonl").read_text())
    assert line["steps"] == [[4, 3, "model"], [0, 0, None], [5, 5, "suffix-global6"], [2, 0, "lookup1"]]
    assert read_steps(load_run_dir(tmp_path / "new").frames.outputs["steps"].iloc[0]) == STEPS
    assert read_steps(live_frames([record]).outputs["steps"].iloc[0]) == STEPS
    assert step_entries(()) == [] and read_steps([]) == ()  # recorded, and no step at all (AR): not missing

    write_one(tmp_path / "old", record)  # as written before the per-step record: the field is absent
    path = tmp_path / "old" / "outputs.jsonl"
    del line["steps"]
    path.write_text(json.dumps(line) + "\n")
    cell = load_run_dir(tmp_path / "old").frames.outputs["steps"].iloc[0]
    assert pd.isna(cell) and read_steps(cell) is None
    assert read_steps(None) is None  # a server's output: null
