"""Command-line flags shared by ``python -m engine generate`` and ``python -m workloads replay``.

The sampling, draft-length and engine flags are read from the metadata of the
config dataclasses' fields (``engine.config.flag``): one definition, flags
mapped to fields one to one, and every value checked by the dataclass's own
``__post_init__``. A field that may be ``None`` ("off", "never" or "auto")
takes 0 on the command line to mean ``None``: the configs themselves never
read 0 as off.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import MISSING, Field, fields
from typing import Any, NoReturn, TypeVar, get_args, get_type_hints

from engine.config import DTYPES, ControllerConfig, EngineConfig, EngineName, SamplingParams
from engine.models.presets import DEFAULT_PRESET, PRESETS

C = TypeVar("C")
DTYPE_HELP = "one dtype for both models (default: float32 on the CPU, bfloat16 on CUDA; a distilled draft its own)"


class OneLineErrorParser(argparse.ArgumentParser):
    """A parser whose errors are one line naming the flag (``--help`` for the rest), not the whole usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Help that ends with each option's default, unless the help already names it or there is none to name."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS) or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


def engine_name(text: str) -> EngineName:
    """The ``--engine`` option's type: any case; argparse shows the error, which names the choices."""
    try:
        return EngineName.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _flagged(cls: type) -> list[Field]:
    return [f for f in fields(cls) if "flag" in f.metadata]


def _zero_is_off(kind: type):
    def convert(text: str) -> Any:
        value = kind(text)
        return None if value == 0 else value

    convert.__name__ = kind.__name__  # argparse names the type in its error messages
    return convert


def add_config_args(parser: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type) -> None:
    """One option per flagged field of the dataclass ``cls``, stored under the field's name."""
    hints = get_type_hints(cls)
    for f in _flagged(cls):
        meta = dict(f.metadata)
        name, kind, text = meta.pop("flag"), meta.pop("type"), meta.pop("help")
        default = f.default if f.default is not MISSING else None
        shown = "off" if default is None else "%(default)s"
        parser.add_argument(
            name,
            dest=f.name,
            metavar=None if "choices" in meta else name.lstrip("-").upper().replace("-", "_"),
            type=_zero_is_off(kind) if type(None) in get_args(hints[f.name]) else kind,
            default=default,
            help=f"{text} (default: {shown})",
            **meta,
        )


def config_from_args(cls: type[C], args: argparse.Namespace, **fixed: Any) -> C:
    """An instance of ``cls`` from the options ``add_config_args`` added, plus ``fixed`` fields.

    A value the dataclass refuses raises its ``ValueError`` with each field name replaced by the flag the user
    typed (``max_new_tokens`` -> ``--max-new-tokens``).
    """
    try:
        return cls(**{f.name: getattr(args, f.name) for f in _flagged(cls)}, **fixed)
    except ValueError as exc:
        raise ValueError(in_flag_terms(str(exc), cls)) from None


def in_flag_terms(message: str, cls: type) -> str:
    """``message`` with every flagged field name of ``cls`` written as its command-line flag."""
    for f in _flagged(cls):
        message = re.sub(rf"(?<![\w-]){f.name}(?![\w-])", f.metadata["flag"], message)
    return message


def add_engine_args(parser: argparse.ArgumentParser) -> None:
    """The draft-length and engine options, in two groups."""
    add_config_args(parser.add_argument_group("draft length"), ControllerConfig)
    add_config_args(parser.add_argument_group("engine"), EngineConfig)


def engine_config_from_args(args: argparse.Namespace) -> EngineConfig:
    return config_from_args(EngineConfig, args, controller=config_from_args(ControllerConfig, args))


def add_sampling_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("generation")
    add_config_args(group, SamplingParams)
    group.add_argument("--ignore-eos", action="store_true", help="generate max tokens even past end-of-sequence")


def sampling_from_args(args: argparse.Namespace, seed: int | None) -> SamplingParams:
    return config_from_args(SamplingParams, args, seed=seed, stop_token_ids=() if args.ignore_eos else None)


def add_model_args(parser: argparse.ArgumentParser) -> None:
    """Model-pair options of every command that loads models."""
    group = parser.add_argument_group("models")
    group.add_argument("--preset", choices=PRESETS, default=None, help=f"named model pair (default: {DEFAULT_PRESET})")
    group.add_argument(
        "--draft-model", default=None, help="draft model: hub id or local directory (default: the preset's)"
    )
    group.add_argument(
        "--verifier-model", default=None, help="verifier model: hub id or local directory (default: the preset's)"
    )
    group.add_argument("--device", default="auto", help="auto | cpu | cuda[:N] (default: %(default)s)")
    group.add_argument("--dtype", choices=DTYPES, default=None, help=DTYPE_HELP)
