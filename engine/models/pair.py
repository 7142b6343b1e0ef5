"""Loading a draft/verifier pair that shares one tokenizer.

Sources: a preset name (see ``engine.models.presets``), a local directory, or a
hub id (when the hub is reachable). Every check that can fail – a path that
does not exist, a hub id while offline, tokenizers or vocabularies that
differ – fails here, before any engine thread starts, with one message that
says what to do.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedTokenizerBase,
)

from engine.devices import cuda_problem
from engine.models.cpu_linear import chosen_backend, cpu_has_bfloat16
from engine.models.presets import DEFAULT_PRESET, preset_paths
from engine.models.shared_draft import SharedDraftError, is_shared_draft, load_shared_draft, stored_compute_dtype
from engine.models.tiny import tiny_models, tiny_tokenizer
from engine.progress import ProgressFn, no_progress
from engine.runner import ModelRunner

log = logging.getLogger(__name__)


class ModelLoadError(ValueError):
    """A model pair that cannot be used; the message says why and what to do."""


@dataclass
class ModelPair:
    verifier: ModelRunner
    draft: ModelRunner
    tokenizer: PreTrainedTokenizerBase
    device: torch.device
    max_context: int  # tokens the verifier can attend to (prompt + output)
    eos_token_ids: tuple[int, ...]
    source: dict[str, str]  # preset / model ids, for run records

    def encode_prompt(self, text: str, raw: bool = False) -> list[int]:
        """Token ids the models see for a user message (chat template unless ``raw``)."""
        return encode_prompt(self.tokenizer, text, raw)

    def decode(self, token_ids: list[int]) -> str:
        return self.tokenizer.decode(token_ids, skip_special_tokens=True)

    def weight_bytes(self) -> int:
        """Bytes of all parameters and buffers of both models, each distinct tensor counted once."""
        seen: dict[int, int] = {}
        for model in (self.verifier.model, self.draft.model):
            for t in (*model.parameters(), *model.buffers()):
                seen[t.data_ptr()] = t.numel() * t.element_size()
        return sum(seen.values())

    def describe(self) -> dict[str, str]:
        return {
            **self.source,
            "device": str(self.device),
            "dtype": str(self.verifier.dtype).removeprefix("torch."),
            "draft_dtype": str(self.draft.dtype).removeprefix("torch."),
            "cpu_linear": self.verifier.linear_kernel,
            "draft_params": str(own_parameters(self.draft.model, self.verifier.model)),
            "verifier_params": str(sum(p.numel() for p in self.verifier.model.parameters())),
        }


def encode_prompt(tokenizer: PreTrainedTokenizerBase, text: str, raw: bool = False) -> list[int]:
    """Token ids for a user message: the tokenizer's chat template with a generation prompt, unless ``raw``."""
    if not raw and tokenizer.chat_template:
        return encode_conversation(tokenizer, [{"role": "user", "content": text}])
    return list(tokenizer(text).input_ids)


def encode_conversation(tokenizer: PreTrainedTokenizerBase, conversation: list[dict[str, str]]) -> list[int]:
    """Token ids for ``conversation`` (role/content dicts) through the chat template, ending in the model's turn."""
    text = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    return list(tokenizer(text, add_special_tokens=False).input_ids)


def own_parameters(draft: torch.nn.Module, verifier: torch.nn.Module) -> int:
    """Parameters of ``draft`` that are not shared with ``verifier``."""
    shared = {id(p) for p in verifier.parameters()}
    return sum(p.numel() for p in draft.parameters() if id(p) not in shared)


def resolve_device(device: str) -> torch.device:
    if device not in ("auto", "cpu", "cuda") and not device.startswith("cuda:"):
        raise ModelLoadError(f"device must be auto, cpu or cuda[:N], got {device!r}")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda"):
        # no silent fallback to the CPU: a run asked for on a GPU and measured on a CPU would be mislabelled
        problem = cuda_problem(device)
        if problem is not None:
            raise ModelLoadError(f"--device {device}: CUDA is not usable: {problem}; use --device cpu or auto")
    return torch.device(device)


def default_dtype(device: torch.device) -> torch.dtype:
    # bfloat16 halves memory traffic on GPUs; CPU kernels are fastest and exact in float32
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def _hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


def _check_source(name: str) -> str:
    """Refuse a missing local path, or a hub id while the hub is off, before loading."""
    expanded = os.path.expanduser(name)
    if os.path.isdir(expanded):
        return expanded
    looks_like_path = name.startswith((".", "/", "~")) or name.count("/") > 1  # hub ids are "org/name"
    if looks_like_path or os.path.exists(expanded):
        raise ModelLoadError(f"model path {name!r} does not exist or is not a directory")
    if _hub_offline():
        raise ModelLoadError(
            f"{name!r} is not a local directory and the model hub is offline (HF_HUB_OFFLINE is set); "
            "pass a local directory or a preset"
        )
    return name


def _from_pretrained(name: str, dtype: torch.dtype, device: torch.device) -> torch.nn.Module:
    try:
        model = AutoModelForCausalLM.from_pretrained(name, dtype=dtype)
    except OSError as exc:
        raise ModelLoadError(f"cannot load model {name!r}: {exc}") from exc
    return model.to(device)


def _load_tokenizer(name: str) -> PreTrainedTokenizerBase:
    try:
        return AutoTokenizer.from_pretrained(name)
    except OSError as exc:
        raise ModelLoadError(f"cannot load the tokenizer of {name!r}: {exc}") from exc


def check_same_tokenizer(
    draft_tok: PreTrainedTokenizerBase | None,
    verifier_tok: PreTrainedTokenizerBase,
    draft_vocab: int,
    verifier_vocab: int,
) -> None:
    if draft_vocab != verifier_vocab:
        raise ModelLoadError(
            f"draft and verifier output different vocabularies ({draft_vocab} vs {verifier_vocab} logits); "
            "speculative decoding needs one shared tokenizer"
        )
    if draft_tok is not None and draft_tok.get_vocab() != verifier_tok.get_vocab():
        raise ModelLoadError("draft and verifier tokenizers differ; speculative decoding needs one shared tokenizer")


def load_model_pair(
    preset: str | None = None,
    draft_model: str | None = None,
    verifier_model: str | None = None,
    device: str = "auto",
    dtype: str | None = None,
    progress: ProgressFn | None = None,
) -> ModelPair:
    """Load and check a pair; ``preset`` is used when no model ids are given (default ``smol``)."""
    progress = progress or no_progress
    if (draft_model is None) != (verifier_model is None):
        raise ModelLoadError("pass both --draft-model and --verifier-model, or neither")
    if draft_model is not None and preset is not None:
        raise ModelLoadError("pass either a preset or --draft-model/--verifier-model, not both")
    dev = resolve_device(device)
    torch_dtype = getattr(torch, dtype, None) if dtype else default_dtype(dev)
    if not isinstance(torch_dtype, torch.dtype) or not torch_dtype.is_floating_point:
        raise ModelLoadError(f"dtype must be a floating-point torch dtype such as float32 or bfloat16, got {dtype!r}")
    try:
        chosen_backend()  # a bad PDV_CPU_LINEAR fails here, before any weights load
    except (ValueError, RuntimeError) as exc:
        raise ModelLoadError(str(exc)) from exc

    if draft_model is None:
        preset = preset or DEFAULT_PRESET
        if preset == "tiny":
            draft, verifier = tiny_models()
            tokenizer = tiny_tokenizer()
            return _pair(
                draft.to(dev, torch_dtype),
                verifier.to(dev, torch_dtype),
                tokenizer,
                None,
                dev,
                {"preset": "tiny", "draft": "tiny-draft", "verifier": "tiny-verifier"},
            )
        try:
            paths = preset_paths(preset, progress)
        except FileNotFoundError as exc:
            raise ModelLoadError(str(exc)) from exc
        except ValueError as exc:
            raise ModelLoadError(str(exc)) from exc
        draft_name, verifier_name = str(paths.draft), str(paths.verifier)
        source = {"preset": preset, "draft": draft_name, "verifier": verifier_name}
    else:
        draft_name, verifier_name = _check_source(draft_model), _check_source(verifier_model)
        source = {"preset": "", "draft": draft_model, "verifier": verifier_model}

    progress(f"Loading verifier {verifier_name}", 0.0)
    tokenizer = _load_tokenizer(verifier_name)
    verifier = _from_pretrained(verifier_name, torch_dtype, dev)
    progress(f"Loading draft {draft_name}", 0.5)
    if is_shared_draft(draft_name):
        # no tokenizer or embedding of its own: it is checked against the verifier's embedding instead
        draft_tok = None
        try:
            draft_dtype = _shared_draft_dtype(draft_name, dtype, torch_dtype, dev)
            draft = load_shared_draft(draft_name, verifier, draft_dtype, dev)
        except SharedDraftError as exc:
            raise ModelLoadError(str(exc)) from exc
    else:
        try:
            draft_tok = AutoTokenizer.from_pretrained(draft_name)
        except (OSError, ValueError):
            draft_tok = None  # a draft shipped without tokenizer files is checked by vocabulary size only
        draft = _from_pretrained(draft_name, torch_dtype, dev)
    progress("Models loaded", 1.0)
    return _pair(draft, verifier, tokenizer, draft_tok, dev, source)


def _shared_draft_dtype(path: str, requested: str | None, default: torch.dtype, device: torch.device) -> torch.dtype:
    """The dtype the draft was trained in, unless --dtype names one for both models or the CPU lacks bfloat16."""
    own = None if requested else stored_compute_dtype(path)
    if own is None:
        return default
    if own == torch.bfloat16 and device.type == "cpu" and not cpu_has_bfloat16():
        log.warning("this CPU has no bfloat16 instructions: the draft runs in %s instead", default)
        return default
    return own


def _pair(draft, verifier, tokenizer, draft_tok, device, source) -> ModelPair:
    check_same_tokenizer(draft_tok, tokenizer, draft.config.vocab_size, verifier.config.vocab_size)
    eos = verifier.generation_config.eos_token_id if verifier.generation_config else None
    eos = eos if eos is not None else verifier.config.eos_token_id
    if eos is None:
        eos = tokenizer.eos_token_id
    eos_ids = tuple(eos) if isinstance(eos, (list, tuple)) else ((eos,) if eos is not None else ())
    max_context = min(
        getattr(verifier.config, "max_position_embeddings", 2048),
        getattr(draft.config, "max_position_embeddings", 2048),
    )
    return ModelPair(
        verifier=ModelRunner(verifier, "verifier"),
        draft=ModelRunner(draft, "draft"),
        tokenizer=tokenizer,
        device=device,
        max_context=max_context,
        eos_token_ids=eos_ids,
        source=source,
    )
