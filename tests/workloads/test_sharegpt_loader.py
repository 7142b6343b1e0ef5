"""ShareGPT loader: the truncated bundled file, the reply-less sample, bad files and bad records."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from tests.support import ROOT as ROOT_DIR
from workloads.datasets.sharegpt import ShareGPTFilter, load_sharegpt
from workloads.datasets.sharegpt_file import DatasetError, TruncatedDatasetWarning, iter_records, resolve_path

REPO_ROOT = ROOT_DIR
HELDOUT = REPO_ROOT / "workloads" / "datasets" / "data" / "sharegpt_heldout.json"  # 365 reply-less records, committed
BUNDLED_RECORDS = 17_671
BUNDLED_SIZE = 125_509_632


class WhitespaceTokenizer:
    """One token per whitespace-separated word: lengths are easy to reason about in tests."""

    def encode(self, text: str) -> list[int]:
        return [len(word) for word in text.split()]


TOK = WhitespaceTokenizer()


def words(n: int, word: str = "w") -> str:
    return " ".join([word] * n)


def record(rid: str, prompt: str, reply: str | None = None) -> dict:
    turns = [{"from": "human", "value": prompt}]
    if reply is not None:
        turns.append({"from": "gpt", "value": reply})
    return {"id": rid, "conversations": turns}


def write(tmp_path: Path, content: object, name: str = "data.json") -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def bundled():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = load_sharegpt("sharegpt", TOK, num_requests=200, seed=0)
    return dataset, caught


def test_bundled_truncated_file_recovers_every_complete_record(bundled):
    dataset, caught = bundled
    assert dataset.records == BUNDLED_RECORDS
    assert len(dataset.requests) == 200
    # the bundled copy is known to be cut: recorded in the dataset, no warning on every run
    assert not [w for w in caught if issubclass(w.category, TruncatedDatasetWarning)]
    with resolve_path(None) as path, open(path, "rb") as fh:
        assert path.stat().st_size == BUNDLED_SIZE
        fh.seek(dataset.truncated_at)
        assert fh.read(1) == b"{", "the reported offset must be the start of the cut record"


def test_bundled_file_stream_matches_record_count():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncatedDatasetWarning)
        ids = [r["id"] for r in iter_records(None)]
    assert len(ids) == BUNDLED_RECORDS
    assert ids[0] == "QWJhYvA_0"


def test_bundled_requests_respect_default_filter(bundled):
    dataset, _ = bundled
    for req in dataset.requests:
        assert 4 <= req.prompt_len <= 1024
        assert req.output_len >= 4
        assert req.prompt_len + req.output_len <= 2048
        assert req.prompt_len == len(req.prompt.split())


def test_reply_less_sample_loads_with_default_output_len():
    dataset = load_sharegpt(HELDOUT, TOK, num_requests=None, seed=1, default_output_len=96)
    assert dataset.records == 365
    assert dataset.skipped_records == 0
    assert dataset.truncated_at is None
    assert len(dataset.requests) + dataset.filtered_out == 365
    assert len(dataset.requests) > 300
    assert all(r.output_len == 96 and not r.has_reply for r in dataset.requests)


def test_record_without_reply_gets_default_output_len(tmp_path):
    path = write(tmp_path, [record("a", words(10)), record("b", words(10), words(7))])
    dataset = load_sharegpt(path, TOK, default_output_len=33)
    by_id = {r.request_id: r for r in dataset.requests}
    assert by_id["a"].output_len == 33 and not by_id["a"].has_reply
    assert by_id["b"].output_len == 7 and by_id["b"].has_reply
    assert by_id["b"].prompt_len == 10


def test_prompt_is_first_human_turn_and_reply_the_following_gpt_turn(tmp_path):
    conv = {
        "id": "x",
        "conversations": [
            {"from": "gpt", "value": words(50, "intro")},
            {"from": "human", "value": words(6, "q")},
            {"from": "gpt", "value": words(9, "a")},
            {"from": "human", "value": words(20, "later")},
        ],
    }
    (req,) = load_sharegpt(write(tmp_path, [conv]), TOK).requests
    assert req.prompt == words(6, "q")
    assert req.output_len == 9


def test_seeded_shuffle_is_reproducible(tmp_path):
    path = write(tmp_path, [record(f"r{i}", words(5 + i), words(5)) for i in range(40)])
    first = [r.request_id for r in load_sharegpt(path, TOK, num_requests=10, seed=7).requests]
    again = [r.request_id for r in load_sharegpt(path, TOK, num_requests=10, seed=7).requests]
    other = [r.request_id for r in load_sharegpt(path, TOK, num_requests=10, seed=8).requests]
    assert first == again
    assert first != other
    assert first != [f"r{i}" for i in range(10)]


def test_default_filter_limits(tmp_path):
    rows = [
        record("short_prompt", words(3), words(10)),
        record("short_output", words(10), words(3)),
        record("long_prompt", words(1025), words(10)),
        record("too_long_total", words(1000), words(1049)),
        record("edge_ok", words(1024), words(1024)),
        record("min_ok", words(4), words(4)),
    ]
    dataset = load_sharegpt(write(tmp_path, rows), TOK)
    assert {r.request_id for r in dataset.requests} == {"edge_ok", "min_ok"}
    assert dataset.filtered_out == 4


def test_custom_filter_and_max_context(tmp_path):
    rows = [record(f"p{n}", words(n), words(n)) for n in (2, 10, 40, 100)]
    path = write(tmp_path, rows)
    relaxed = ShareGPTFilter(min_prompt_len=1, min_output_len=1, max_prompt_len=50, max_total_len=10_000)
    assert {r.request_id for r in load_sharegpt(path, TOK, filter=relaxed).requests} == {"p2", "p10", "p40"}
    capped = load_sharegpt(path, TOK, filter=relaxed, max_context=30)
    assert {r.request_id for r in capped.requests} == {"p2", "p10"}
    assert capped.filtered_out == 2
    # the engines see the prompt inside a chat template: the filter must count those tokens too
    templated = load_sharegpt(
        path, TOK, filter=relaxed, max_context=30, encode_prompt=lambda text: TOK.encode(text) + [0] * 12
    )
    assert {r.request_id for r in templated.requests} == {"p2"}
    assert templated.requests[0].prompt_len == 14


def test_num_requests_stops_tokenising_early(tmp_path):
    class CountingTokenizer(WhitespaceTokenizer):
        calls = 0

        def encode(self, text: str) -> list[int]:
            CountingTokenizer.calls += 1
            return super().encode(text)

    path = write(tmp_path, [record(f"r{i}", words(8), words(8)) for i in range(500)])
    dataset = load_sharegpt(path, CountingTokenizer(), num_requests=5)
    assert len(dataset.requests) == 5
    assert CountingTokenizer.calls == 10


def test_progress_follows_the_sampling_and_an_exception_from_it_ends_it(tmp_path):
    path = write(tmp_path, [record(f"r{i}", words(8), words(8)) for i in range(50)])
    seen = []
    load_sharegpt(path, TOK, num_requests=5, progress=lambda done, wanted: seen.append((done, wanted)))
    assert seen == [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]

    class Stop(Exception):
        pass

    def stop_at_two(done: int, wanted: int) -> None:
        if done == 2:
            raise Stop

    with pytest.raises(Stop):
        load_sharegpt(path, TOK, num_requests=5, progress=stop_at_two)


def test_bad_records_are_skipped_and_counted(tmp_path):
    rows = [
        record("good1", words(8), words(8)),
        {"id": "no_conv"},
        {"id": "conv_not_list", "conversations": "hello"},
        {"id": "value_not_str", "conversations": [{"from": "human", "value": 42}]},
        {"id": "turn_not_obj", "conversations": ["hi"]},
        {"id": "only_gpt", "conversations": [{"from": "gpt", "value": words(8)}]},
        "not an object",
        None,
        record("good2", words(8)),
    ]
    dataset = load_sharegpt(write(tmp_path, rows), TOK)
    assert {r.request_id for r in dataset.requests} == {"good1", "good2"}
    assert dataset.records == 9
    assert dataset.skipped_records == 7
    assert sum(dataset.skip_reasons.values()) == 7


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("this is not json", "not JSON"),
        ("", "empty"),
        ('{"id": "a", "conversations": []}', "not a JSON array"),
        ('"just a string"', "not a JSON array"),
        ("[]", "no records"),
        ("  [ \n ]  ", "no records"),
        ('[{"id": 1}, {"conversations": 3}, 5]', "no usable records"),
        ('[["human", "hi"], ["gpt", "hello"]]', "wrong shape"),
        ('[{"id": "a", "conversations": []} {"id": "b"}]', "invalid JSON"),
        ('[{"id": "a", "conversations": [}]', "invalid JSON"),
        ("[1, 2] extra", "after the closing"),
    ],
)
def test_bad_files_raise_one_clear_error(tmp_path, content, needle):
    path = write(tmp_path, content, name="broken.json")
    with pytest.raises(DatasetError) as info:
        load_sharegpt(path, TOK)
    message = str(info.value)
    assert str(path) in message
    assert needle in message
    assert isinstance(info.value, ValueError)


def test_missing_file_raises_dataset_error(tmp_path):
    with pytest.raises(DatasetError, match="cannot read"):
        load_sharegpt(tmp_path / "absent.json", TOK)


def test_not_utf8_raises_dataset_error(tmp_path):
    path = tmp_path / "latin1.json"
    path.write_bytes(b'[{"id": "a", "conversations": [{"from": "human", "value": "caf\xe9 au lait"}]}]')
    with pytest.raises(DatasetError, match="UTF-8"):
        load_sharegpt(path, TOK)


def test_truncated_small_file_keeps_complete_records(tmp_path):
    rows = [record(f"r{i}", words(6, "é"), words(6)) for i in range(3)]
    full = json.dumps(rows, ensure_ascii=False, indent=1).encode("utf-8")
    cut_record_start = full.index(b'{\n  "id": "r2"')
    for cut in (cut_record_start + 1, cut_record_start + 30, len(full) - 3):
        path = tmp_path / f"cut{cut}.json"
        path.write_bytes(full[:cut])
        with pytest.warns(TruncatedDatasetWarning, match=f"starts at byte {cut_record_start}"):
            dataset = load_sharegpt(path, TOK)
        assert dataset.records == 2
        assert dataset.truncated_at == cut_record_start


def test_truncated_inside_multibyte_character(tmp_path):
    rows = [record("a", words(6), words(6)), record("b", "é" * 10, words(6))]
    full = json.dumps(rows, ensure_ascii=False).encode("utf-8")
    start = full.index(b'{"id": "b"')
    cut = full.index("é".encode()) + 1  # leaves half of a two-byte character at the end
    path = tmp_path / "cut.json"
    path.write_bytes(full[:cut])
    with pytest.warns(TruncatedDatasetWarning):
        dataset = load_sharegpt(path, TOK)
    assert dataset.records == 1
    assert dataset.truncated_at == start


def test_records_larger_than_read_chunk(tmp_path, monkeypatch):
    import workloads.datasets.sharegpt_file as mod

    monkeypatch.setattr(mod, "_CHUNK_CHARS", 64)
    rows = [record(f"r{i}", words(300, "long"), words(50)) for i in range(5)]
    dataset = load_sharegpt(write(tmp_path, rows), TOK)
    assert dataset.records == 5
    assert len(dataset.requests) == 5
