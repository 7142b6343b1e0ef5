"""The conversion cache: GGUF checkpoints dequantised once into safetensors directories.

A converted directory carries a manifest of its files' sha256s; a directory
whose manifest does not match is converted again rather than trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from engine.progress import ProgressFn, no_progress


def cache_root() -> Path:
    """Where converted checkpoints live: ``$PDV_CACHE_DIR`` or ~/.cache/pd-verify."""
    env = os.environ.get("PDV_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "pd-verify"


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


def convert_gguf(gguf_path: Path, target: Path, progress: ProgressFn = no_progress) -> Path:
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


def cached_conversion(name: str, gguf_path: Path, progress: ProgressFn = no_progress) -> Path:
    """Return the converted directory for ``gguf_path``, converting if missing or corrupt."""
    target = cache_root() / name
    progress(f"Checking cache {target}", 0.0)
    if cache_is_valid(target):
        return target
    return convert_gguf(gguf_path, target, progress)
