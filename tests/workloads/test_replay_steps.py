"""A tiny replay's outputs.jsonl keeps every verify step of every request, matching its requests.csv counts."""

from __future__ import annotations

from metrics.recorded_steps import read_steps
from metrics.runs import load_run_dir
from workloads.__main__ import main


def test_a_replays_outputs_record_each_requests_steps_summing_to_its_counts(tmp_path):
    out = tmp_path / "run"
    code = main([
        "replay", "--engines", "ar,pdv", "--drafter", "model", "--controller", "fixed", "--concurrency", "2",
        "--num-requests", "4",
        "--dataset", "synthetic", "--input-len", "16", "--output-len", "8", "--rounds", "2", "--preset", "tiny",
        "--device", "cpu", "--seed", "2", "--out", str(out),
    ])  # fmt: skip
    assert code == 0
    run = load_run_dir(out)
    keys = ["run_id", "round", "request_id"]
    counts = run.frames.requests.set_index(keys)[["drafted_tokens", "accepted_tokens", "verify_steps"]]
    outputs = run.frames.outputs
    assert len(outputs) == len(counts) == 2 * 2 * 4
    for row in outputs.itertuples():
        steps = read_steps(row.steps)
        assert steps is not None, row.request_id
        drafted, accepted, verify_steps = counts.loc[(row.run_id, row.round, row.request_id)]
        assert (sum(s.draft_len for s in steps), sum(s.accepted for s in steps), len(steps)) == (
            drafted,
            accepted,
            verify_steps,
        )
        if row.engine == "ar":
            assert steps == ()  # AR verifies nothing: its steps are recorded, and there are none
        else:
            assert steps and all(s.source is not None for s in steps if s.draft_len), row.request_id
    assert outputs.loc[outputs["engine"] == "pdv", "steps"].map(lambda s: sum(e[0] for e in s)).sum() > 0
