"""The profile cache: one JSON file per machine, model pair and grid; a larger grid serves a smaller one.

Profiles live in ``$PDV_PROFILE_DIR`` (tests point it at a temporary
directory, so a profile measured on a machine busy with tests is never what a
later real run reads), by default ``profiles/`` under the cache root
(``$PDV_CACHE_DIR`` or ~/.cache/pd-verify). Writes are atomic (a temporary
file, then a rename). An unreadable file counts as missing and is measured
again; a file from before lanes' interference was measured reads with
``interference`` None (``prepare`` then measures just that).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import asdict
from pathlib import Path

from engine.models.gguf_cache import cache_root
from engine.models.pair import ModelPair
from engine.profiling.cost_profile import CostProfile, ProfileShape
from engine.profiling.interference import Interference
from engine.profiling.measure import machine_key

log = logging.getLogger(__name__)


def profiles_dir() -> Path:
    env = os.environ.get("PDV_PROFILE_DIR")
    return Path(env) if env else cache_root() / "profiles"


def _stem(pair: ModelPair, with_draft: bool) -> str:
    """What every profile of this machine and pair shares in its file name (a digest of ``machine_key``)."""
    key = {**machine_key(pair), "draft": with_draft}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def profile_path(pair: ModelPair, shape: ProfileShape) -> Path:
    """Where the profile measured on ``shape``'s grid is cached."""
    return profiles_dir() / f"{_stem(pair, shape.with_draft)}-b{shape.max_batch}-t{shape.max_tokens}.json"


def _covering(pair: ModelPair, shape: ProfileShape) -> list[Path]:
    """Cached profiles of this machine and pair whose grid reaches ``shape``'s bounds, smallest grid first.

    A profile measured up to 32 rows serves a config of at most 4 rows: the controller never asks beyond its
    bounds, and the smaller grid's points (1, 2, 4) are points of the larger one.
    """
    found = []
    for path in profiles_dir().glob(f"{_stem(pair, shape.with_draft)}-b*-t*.json"):
        batch, tokens = (int(part[1:]) for part in path.stem.split("-")[1:])
        if batch >= shape.max_batch and tokens >= shape.max_tokens:
            found.append((batch * tokens, path))
    return [path for _, path in sorted(found)]


def read_profile(pair: ModelPair, shape: ProfileShape) -> CostProfile | None:
    """A cached profile covering ``shape`` for this machine and pair, or None (never measures)."""
    for path in _covering(pair, shape):
        try:
            data = json.loads(path.read_text())
            return CostProfile(
                tuple(data["batch_sizes"]),
                tuple(data["tokens"]),
                tuple(map(tuple, data["verify_ms"])),
                tuple(data["draft_ms"]),
                data["machine"],
                _interference(data.get("interference")),
            )
        except FileNotFoundError:
            continue
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("cost profile %s is unreadable (%s); it will be measured again", path, exc)
    return None


def _interference(data: dict | None) -> Interference | None:
    """The interference table of a profile file; None in a file written before it was measured."""
    if data is None:
        return None
    tables = {k: tuple(map(tuple, data[k])) for k in ("alone_ms", "lane_alone_ms", "concurrent_ms")}
    return Interference(tuple(data["rows"]), tuple(data["tokens"]), int(data["lane_threads"]), **tables)


def write_profile(pair: ModelPair, shape: ProfileShape, profile: CostProfile) -> Path:
    path = profile_path(pair, shape)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(profile), indent=1))
    tmp.replace(path)
    return path
