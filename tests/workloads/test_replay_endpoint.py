"""Replay against an OpenAI-compatible server: our own, served on loopback from the tiny preset."""

from __future__ import annotations

import json
import socket

import pytest

from engine.config import EngineConfig, SamplingParams
from engine.models.pair import load_model_pair
from engine.request import RequestStatus
from metrics.runs import load_run_dir
from metrics.server_metrics import parse_server_metrics
from tests.support.serve import MODEL, served, uvicorn_thread
from workloads.__main__ import main
from workloads.datasets.synthetic import LengthSpec
from workloads.drivers.arrivals import ClosedLoop
from workloads.drivers.run_spec import RunSettings
from workloads.drivers.sweep import SweepPlan, run_sweep
from workloads.drivers.trace import DatasetSpec, load_trace
from workloads.endpoint.spec import EndpointSpec

N = 6
TRACE_ARGS = [
    "--concurrency", "2", "--num-requests", str(N), "--dataset", "synthetic", "--input-len", "16",
    "--output-len", "6", "--preset", "tiny", "--device", "cpu", "--seed", "1", "--ignore-eos", "--warmup", "0",
]  # fmt: skip


@pytest.fixture(scope="module")
def pair():
    # the CLI loads the preset itself: the server gets a pair of its own, as a separate server would have
    return load_model_pair(preset="tiny", device="cpu")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("endpoint_type", ["completions", "chat"])
def test_endpoint_replay_matches_the_in_process_engine_and_writes_normal_run_files(pair, tmp_path, endpoint_type):
    out = tmp_path / "runs"
    with uvicorn_thread(served(pair, "baseline").app) as url:
        code = main([
            "replay", "--engines", "baseline", "--endpoint", f"{url}/v1", "--model", MODEL, "--label", "served",
            "--endpoint-type", endpoint_type, *TRACE_ARGS, "--rounds", "1", "--out", str(out),
        ])  # fmt: skip  # one round: the comparison is the outputs, not × AR
    assert code == 0
    run = load_run_dir(out)
    requests, outputs, series = run.frames.requests, run.frames.outputs, run.frames.timeseries
    assert list(run.frames.summary["engine"]) == ["baseline", "served"]
    assert (requests["status"] == "ok").all() and len(requests) == 2 * N

    texts = {e: dict(zip(g["request_id"], g["text"], strict=True)) for e, g in outputs.groupby("engine")}
    assert texts["served"] == texts["baseline"]  # greedy, same trace: the same outputs
    # a server does not say how each token was produced: no per-token kinds for it, an engine's are recorded
    kinds = outputs.set_index("engine")["token_kinds"]
    assert kinds.loc["served"].isna().all() and kinds.loc["baseline"].notna().all()
    steps = outputs.set_index("engine")["steps"]  # nor how it drafted: no per-step record either
    assert steps.loc["served"].isna().all() and steps.loc["baseline"].notna().all()
    served_rows = requests[requests["engine"] == "served"]
    assert (served_rows["output_tokens"] == 6).all()  # --ignore-eos: the server generated every token
    assert (served_rows["ttft_ms"] > 0).all() and served_rows["tpot_ms"].notna().all()
    # what only an engine knows stays empty, not 0
    assert served_rows[["queue_ms"]].isna().all().all()
    assert (served_rows["drafted_tokens"] == 0).all()

    scraped = series[series["engine"] == "served"]
    assert len(scraped) >= 1 and scraped["running"].notna().all() and scraped["kv_cache_usage"].notna().all()
    assert series.loc[series["engine"] == "baseline", "kv_cache_usage"].isna().all()
    endpoint = next(r for r in run.runs if r["engine"] == "served")["endpoint"]
    assert endpoint["output_tokens_from"] == {"usage": N} and endpoint["metrics_scraped"]
    assert "api_key" not in json.dumps(endpoint)


def test_a_server_that_is_down_fails_every_request_with_its_error_and_the_run_ends(pair, tmp_path):
    plan, trace = sweep_inputs(pair, EndpointSpec(f"http://127.0.0.1:{free_port()}", MODEL))
    (result,) = run_sweep(pair, trace, plan, tmp_path)
    assert [r.status for r in result.requests] == [RequestStatus.FAILED] * N
    assert all("ConnectError" in r.error for r in result.requests)
    assert result.summary.failed == N and result.endpoint["metrics_scraped"] is False
    assert load_run_dir(tmp_path).frames.timeseries["running"].isna().all()


def test_http_errors_become_failed_requests_with_the_servers_message(pair, tmp_path):
    with uvicorn_thread(served(pair, "baseline").app) as url:
        plan, trace = sweep_inputs(pair, EndpointSpec(url, "no-such-model"))
        (result,) = run_sweep(pair, trace, plan, None)
    assert {r.status for r in result.requests} == {RequestStatus.FAILED}
    assert all(r.error.startswith("HTTP 404") and "no-such-model" in r.error for r in result.requests)


def test_a_wrong_api_key_is_a_401_per_request(pair):
    with uvicorn_thread(served(pair, "baseline", api_key="right").app) as url:
        plan, trace = sweep_inputs(pair, EndpointSpec(url, MODEL, api_key="wrong"))
        (result,) = run_sweep(pair, trace, plan, None)
    assert all(r.error.startswith("HTTP 401") for r in result.requests)


def test_a_stream_cut_off_before_its_finish_reason_is_a_failed_request(pair):
    from fastapi import FastAPI
    from fastapi.responses import StreamingResponse

    app = FastAPI()

    @app.post("/v1/completions")
    def cut_off():
        chunk = {"choices": [{"index": 0, "text": "hello", "finish_reason": None}]}
        return StreamingResponse(iter([f"data: {json.dumps(chunk)}\n\n"]), media_type="text/event-stream")

    with uvicorn_thread(app) as url:
        plan, trace = sweep_inputs(pair, EndpointSpec(url, MODEL))
        (result,) = run_sweep(pair, trace, plan, None)
    assert {r.status for r in result.requests} == {RequestStatus.FAILED}
    assert all("cut off" in r.error for r in result.requests)
    assert all(r.num_output_tokens >= 1 for r in result.requests)  # what arrived is kept
    assert result.endpoint["output_tokens_from"] == {"tokenized": N}  # no usage: counted by tokenizing


def test_server_metrics_parse_vllm_series_and_leave_missing_ones_empty():
    text = (
        '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m"} 3.0\n'
        '# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{model_name="m"} 0.25\n'
        '# TYPE vllm:spec_decode_num_drafts counter\nvllm:spec_decode_num_drafts_total{model_name="m"} 4.0\n'
    )
    m = parse_server_metrics(text)
    assert (m.running, m.kv_cache_usage, m.drafts) == (3, 0.25, 4)
    assert m.waiting is None and m.draft_tokens is None and m.draft_len is None
    assert m.suffix_tree is None  # no pdverify:suffix_tree_size series


def test_the_suffix_trees_three_sizes_are_read_by_unit_never_summed_and_only_when_all_are_there():
    tree = "".join(
        f'pdverify:suffix_tree_size{{unit="{unit}"}} {value}\n'
        for unit, value in (("tokens", 1200.0), ("sequences", 30.0), ("nodes", 1500.0))
    )
    m = parse_server_metrics("# TYPE pdverify:suffix_tree_size gauge\n" + tree)
    assert m.suffix_tree == (1200, 30, 1500) and m.suffix_tree.tokens == 1200
    part = "\n".join(line for line in tree.splitlines() if "nodes" not in line) + "\n"
    assert parse_server_metrics("# TYPE pdverify:suffix_tree_size gauge\n" + part).suffix_tree is None


def sweep_inputs(pair, spec: EndpointSpec):
    dataset = DatasetSpec("synthetic", LengthSpec(16, 0.0), LengthSpec(4, 0.0))
    trace = load_trace(dataset, pair, N, 0, 4)
    params = SamplingParams(max_new_tokens=4)
    plan = SweepPlan((), (ClosedLoop(2),), RunSettings(EngineConfig(), params, warmup=0), endpoints=(spec,))
    return plan, trace


def test_scraping_a_speculative_server_fills_acceptance_and_kv_usage_per_window(pair):
    from engine.schedulers.stats import Counters, EngineStats
    from metrics.device_types import DeviceSample
    from metrics.timeseries import make_row

    with uvicorn_thread(served(pair, "pdv").app) as url:
        plan, trace = sweep_inputs(pair, EndpointSpec(url, MODEL))
        (result,) = run_sweep(pair, trace, plan, None)
    assert all(r.status == RequestStatus.OK for r in result.requests)
    assert any(row.kv_cache_usage is not None for row in result.timeseries)
    # the server drafts from its global suffix tree (the default drafter): its size reaches the endpoint's rows
    held = [row.suffix_tree_tokens for row in result.timeseries if row.suffix_tree_tokens is not None]
    assert held and held[-1] > 0
    # the window arithmetic, on two scrapes: 6 of 8 drafted tokens accepted over 2 drafts
    device = DeviceSample(None, None, None, None, None, None, 1.0)
    before = EngineStats("vllm", 1.0, 0, 1, (), None, Counters(0, 10, 5), 0, kv_cache_usage=0.1, drafts=3)
    after = EngineStats("vllm", 2.0, 0, 1, (), None, Counters(0, 18, 11), 0, kv_cache_usage=0.3, drafts=5)
    row = make_row(before, after, device, 0.0)
    assert row.acceptance_rate == pytest.approx(6 / 8) and row.mean_acceptance_length == pytest.approx(1 + 6 / 2)
    assert row.kv_cache_usage == 0.3 and row.queue_verify is None and row.busy_loop is None


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--endpoint", "localhost:8000", "--model", "m"], "endpoint URL must be http(s)://"),
        (["--endpoint", "http://127.0.0.1:8000/v1"], "--endpoint needs --model"),
        (["--model", "m"], "--model only applies with --endpoint"),
        (["--endpoint", "http://127.0.0.1:8000", "--model", "m", "--label", "pdv"], "is an engine's name"),
    ],
)
def test_bad_endpoint_flags_are_one_message_and_exit_2_before_anything_loads(flags, message, capsys, monkeypatch):
    def no_loading(*args, **kwargs):
        raise AssertionError("models were loaded before the flags were checked")

    monkeypatch.setattr("engine.models.pair.load_model_pair", no_loading)
    assert main(["replay", *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err
