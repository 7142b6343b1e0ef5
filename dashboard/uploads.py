"""An uploaded dataset file: kept under a content-addressed name and checked before any run uses it.

The check reads the file with the reader a replay uses –
``workloads.datasets.sources.load_exchanges``, as ``--dataset`` does: JSON,
JSONL, CSV or Parquet in the ShareGPT, OpenAI-messages or prompt-column shape,
and for a ``.json`` file that is not valid JSON the ShareGPT loader
(``workloads.datasets.sharegpt_file.iter_exchanges``), which keeps a cut-short
file's complete records. So a file it accepts is one the run can read; what it
refuses comes back as one message naming the uploaded file.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from workloads.datasets.sharegpt_file import DatasetError, ScanReport, TruncatedDatasetWarning, iter_exchanges
from workloads.datasets.sources import BUILDERS, load_exchanges

UPLOAD_DIR = Path(tempfile.gettempdir()) / "pd-verify-uploads"
# Streamlit's own limit (.streamlit/config.toml, server.maxUploadSize, in MiB) stops a larger file in the
# browser; this one refuses it here too, whatever the server was started with.
MAX_UPLOAD_MB = 200
UPLOAD_TYPES = tuple(suffix.removeprefix(".") for suffix in BUILDERS)  # json, jsonl, csv, parquet


@dataclass(frozen=True)
class UploadCheck:
    path: Path | None  # None when the file cannot be used
    usable: int  # records with a prompt
    error: str | None
    truncated: bool = False


def _store(data: bytes, path: Path) -> None:
    """Write ``data`` to ``path`` whole under a temporary name first: a failed write never leaves a partial file."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _count_sharegpt(path: Path, name: str) -> UploadCheck:
    """A ``.json`` file ``json`` cannot parse: its complete ShareGPT records, as the replay's fallback reads them."""
    report, skipped = ScanReport(), Counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncatedDatasetWarning)  # reported below as `truncated`
        usable = sum(1 for _ in iter_exchanges(path, report, skipped))
    if usable == 0:
        reasons = "; ".join(f"{reason} ({n})" for reason, n in skipped.most_common(3)) or "the array is empty"
        return UploadCheck(
            None,
            0,
            f"{name} has no usable ShareGPT records – expected a JSON array of "
            f'{{"id", "conversations": [{{"from": "human", "value": ...}}, ...]}}: {reasons}',
        )
    return UploadCheck(path, usable, None, report.truncated_at is not None)


def save_and_check(data: bytes, name: str, directory: Path = UPLOAD_DIR, max_mb: float | None = None) -> UploadCheck:
    """Store ``data`` (an upload called ``name``) and count its usable records.

    A file over ``max_mb`` MiB (default ``MAX_UPLOAD_MB``) or of another type is refused before anything is
    written."""
    limit = MAX_UPLOAD_MB if max_mb is None else max_mb
    if len(data) > limit * 2**20:
        return UploadCheck(None, 0, f"{name} is {len(data) / 2**20:.1f} MB, over the {limit:g} MB upload limit")
    suffix = Path(name).suffix.lower()
    if suffix not in BUILDERS:
        return UploadCheck(None, 0, f"{name}: unknown file type {suffix!r}; upload one of {', '.join(BUILDERS)}")
    # the suffix is kept: it tells the reader how to parse the file
    path = directory / f"{hashlib.sha256(data).hexdigest()[:16]}{suffix}"
    try:
        _store(data, path)
    except OSError as exc:
        return UploadCheck(None, 0, f"{name} could not be stored in {directory}: {exc.strerror or exc}")
    try:
        found = load_exchanges(str(path))
        if found is None:  # a .json file that is not valid JSON
            return _count_sharegpt(path, name)
    except (DatasetError, UnicodeError, ValueError) as exc:
        return UploadCheck(None, 0, f"{name} cannot be used: {str(exc).replace(str(path), name)}")
    return UploadCheck(path, len(found), None)
