"""Prompts from anything ``datasets.load_dataset`` reads: local files and directories, or a hub id.

A *source* is a local JSON/JSONL/CSV/Parquet file, a directory of them, or a
hub dataset id (with ``split`` and ``config``). Its rows are recognised by
shape, in this order:

* **ShareGPT** – ``conversations: [{from, value}, ...]``: the first human turn
  and the assistant turn after it (``sharegpt_file``'s rule);
* **OpenAI messages** – ``messages: [{role, content}, ...]``: the first user
  message and the assistant message after it;
* **prompt column** – the first of ``prompt``, ``text``, ``question``,
  ``instruction``; the reply, if any, from the first of ``response``,
  ``output``, ``completion``, ``answer``.

Anything else is refused with one error naming the columns found and the shapes
expected. A local ``.json`` file that is not valid JSON (the truncated
ShareGPT copy, say) is read record by record by ``sharegpt_file`` instead:
``datasets`` cannot read it, and that loader keeps every complete record.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from workloads.datasets.sharegpt_file import (
    ASSISTANT_ROLES,
    HUMAN_ROLES,
    BadRecord,
    DatasetError,
    Exchange,
    extract_exchange,
)

PROMPT_COLUMNS = ("prompt", "text", "question", "instruction")
REPLY_COLUMNS = ("response", "output", "completion", "answer")
BUILDERS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}
SHAPES = (
    "conversations: [{from, value}] (ShareGPT), messages: [{role, content}] (OpenAI), "
    f"or a prompt column ({', '.join(PROMPT_COLUMNS)})"
)


def not_valid_json(path: Path) -> bool:
    """True for a ``.json`` file that ``json`` cannot parse whole (nor as JSON lines)."""
    if path.suffix != ".json" or not path.is_file():
        return False
    text = path.read_text(errors="replace")
    try:
        json.loads(text)
        return False
    except json.JSONDecodeError:
        pass
    try:
        for line in text.splitlines():
            if line.strip():
                json.loads(line)
        return False
    except json.JSONDecodeError:
        return True


def load_rows(name: str, split: str = "train", config: str | None = None) -> list[dict[str, Any]]:
    """The rows of ``name`` as dicts; ``DatasetError`` with the reason if ``datasets`` cannot read it."""
    import datasets

    path = Path(name)
    try:
        if path.is_file():
            builder = BUILDERS.get(path.suffix.lower())
            if builder is None:
                raise DatasetError(f"{name}: unknown file type {path.suffix!r}; use one of {', '.join(BUILDERS)}")
            data = datasets.load_dataset(builder, data_files=str(path), split="train")
        elif path.is_dir():
            data = datasets.load_dataset(str(path), split=split)
        else:
            data = datasets.load_dataset(name, config, split=split)
    except DatasetError:
        raise
    except Exception as exc:  # noqa: BLE001 - datasets raises many types; each becomes one clear message
        where = "local dataset" if path.exists() else "hub dataset (no local path has that name)"
        raise DatasetError(f"cannot load {name!r} as a {where}: {type(exc).__name__}: {exc}") from exc
    return [dict(row) for row in data]


def shape_of(columns: Iterable[str]) -> str:
    """``sharegpt``, ``messages`` or ``prompt:<column>``; ``DatasetError`` for any other shape."""
    columns = list(columns)
    if "conversations" in columns:
        return "sharegpt"
    if "messages" in columns:
        return "messages"
    for column in PROMPT_COLUMNS:
        if column in columns:
            return f"prompt:{column}"
    raise DatasetError(f"unrecognised dataset shape: columns {columns}; expected {SHAPES}")


def _messages_exchange(row: Mapping[str, Any], index: int) -> Exchange:
    messages = row.get("messages")
    if not isinstance(messages, list):
        raise BadRecord("missing or non-list 'messages'")
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise BadRecord("message without string 'role'/'content'")
        if m["role"] in HUMAN_ROLES and m["content"].strip():
            after = messages[i + 1] if i + 1 < len(messages) else None
            reply = after["content"] if isinstance(after, Mapping) and after.get("role") in ASSISTANT_ROLES else None
            return Exchange(_row_id(row, index), m["content"], reply or None)
    raise BadRecord("no user message")


def _prompt_exchange(row: Mapping[str, Any], index: int, column: str) -> Exchange:
    prompt = row.get(column)
    if not isinstance(prompt, str) or not prompt.strip():
        raise BadRecord(f"empty or non-text {column!r}")
    # a CSV reads a numeric answer as a number: any non-empty value is the reply's text
    reply = next((str(row[c]) for c in REPLY_COLUMNS if row.get(c) is not None and str(row[c]).strip()), None)
    return Exchange(_row_id(row, index), prompt, reply)


def _row_id(row: Mapping[str, Any], index: int) -> str:
    raw = row.get("id", row.get("question_id"))
    return str(raw) if isinstance(raw, (str, int)) else f"record-{index}"


def exchanges(rows: list[dict[str, Any]], name: str) -> list[Exchange]:
    """One exchange per usable row; ``DatasetError`` if the shape is unknown or no row is usable."""
    if not rows:
        raise DatasetError(f"{name}: no rows")
    shape = shape_of(rows[0].keys())
    found, bad = [], 0
    for index, row in enumerate(rows):
        try:
            if shape == "sharegpt":
                found.append(extract_exchange(row, index))
            elif shape == "messages":
                found.append(_messages_exchange(row, index))
            else:
                found.append(_prompt_exchange(row, index, shape.removeprefix("prompt:")))
        except BadRecord:
            bad += 1
    if not found:
        raise DatasetError(f"{name}: none of its {len(rows)} rows has a usable prompt (shape {shape})")
    return found


def load_exchanges(name: str, split: str = "train", config: str | None = None) -> list[Exchange] | None:
    """The exchanges of ``name``; ``None`` for a local ``.json`` file that is not valid JSON (see the docstring)."""
    if not_valid_json(Path(name)):
        return None
    return exchanges(load_rows(name, split, config), name)
