"""llama.cpp's OpenAI-compatible server as the bench starts it: installed on demand, run as a user would.

``llama-cpp-python[server]`` (``requirements-llama.txt``) is a bench-only
dependency: pip builds it from source, about 10 minutes on 2 cores, so it is
not in the default install and ``ensure_installed`` installs it the first time
a part needs it, showing pip's progress. ``serve`` starts ``python -m
llama_cpp.server`` on a GGUF file in a process of its own and waits until
``/v1/models`` answers; the server has no ``/health`` and no ``/metrics``.

Its flags, and why (``server_argv``):

* ``--n_threads 2 --n_threads_batch 2``: the cores the in-process engines have
  on this machine, for decoding and for prompts alike (its default takes every
  core for prompts);
* ``--interrupt_requests False``: it serves one request at a time, and by
  default a request that arrives while another streams *ends* that stream
  early (``[DONE]`` without a finish reason); a closed loop of C > 1 clients
  would then see every stream but the newest cut off;
* ``--n_ctx``: the model's context, so no prompt an engine takes is refused;
* ``--draft_model prompt-lookup-decoding``: its one kind of speculation,
  n-gram lookup in the prompt and output (``LlamaPromptLookupDecoding``);
  llama-cpp-python's server has no draft-model speculation.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

PACKAGE = "llama-cpp-python"
REQUIREMENTS = Path(__file__).resolve().parents[2] / "requirements-llama.txt"
ALIAS = "smollm2"  # the model name it serves (``--model_alias``)
THREADS = 2
CONTEXT = 8192  # SmolLM2's
LOOKUP = "prompt-lookup-decoding"
LOOKUP_TOKENS = 10  # its default draft length, kept
READY_TIMEOUT_S = 180.0


class LlamaServerError(RuntimeError):
    """llama.cpp's server could not be installed or did not start; the message says why."""


@dataclass(frozen=True)
class ServerFlavour:
    """One way of running the server: its label in the runs, and its speculation."""

    label: str  # e.g. "llama.cpp"
    lookup: bool  # prompt-lookup decoding on


PLAIN = ServerFlavour("llama.cpp", False)
WITH_LOOKUP = ServerFlavour("llama.cpp-lookup", True)
FLAVOURS = {"plain": PLAIN, "lookup": WITH_LOOKUP}


def installed_version() -> str | None:
    """llama-cpp-python's version where its server can be imported, else ``None``."""
    importlib.invalidate_caches()  # a package pip has just installed is found
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("sse_starlette") is None:
        return None
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None


def ensure_installed(say: Callable[[str], None]) -> str:
    """The installed version, installing ``requirements-llama.txt`` first where it is missing.

    pip's output goes to ``say`` line by line, with the minutes elapsed: the build from source is long and
    silent otherwise. Raises ``LlamaServerError`` with pip's last lines if the install fails.
    """
    version = installed_version()
    if version is not None:
        return version
    say(f"{PACKAGE} is not installed: building it from source with pip (about 10 minutes on 2 cores) ...")
    argv = [sys.executable, "-m", "pip", "install", "--progress-bar", "off", "-r", str(REQUIREMENTS)]
    start, tail = time.monotonic(), []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as pip:
        assert pip.stdout is not None
        for line in pip.stdout:
            tail = [*tail[-19:], line.rstrip()]
            say(f"[{(time.monotonic() - start) / 60:4.1f} min] {line.rstrip()}")
    version = installed_version()
    if pip.returncode != 0 or version is None:
        raise LlamaServerError(
            f"pip could not install {REQUIREMENTS.name} (exit {pip.returncode}):\n" + "\n".join(tail)
        )
    say(f"{PACKAGE} {version} installed in {(time.monotonic() - start) / 60:.1f} min")
    return version


def server_argv(gguf: Path, port: int, flavour: ServerFlavour) -> list[str]:
    """``python -m llama_cpp.server`` on ``gguf`` with the flags the module docstring gives."""
    argv = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", ALIAS,
        "--host", "127.0.0.1", "--port", str(port), "--n_threads", str(THREADS), "--n_threads_batch", str(THREADS),
        "--n_ctx", str(CONTEXT), "--interrupt_requests", "False", "--verbose", "False",
    ]  # fmt: skip
    if flavour.lookup:
        argv += ["--draft_model", LOOKUP, "--draft_model_num_pred_tokens", str(LOOKUP_TOKENS)]
    return argv


def shown(argv: list[str]) -> str:
    """The command line as a user would type it: ``python -m llama_cpp.server ...``."""
    return " ".join(["python", *argv[1:]])


@contextmanager
def serve(argv: list[str], url: str, log: Path, ready_timeout: float = READY_TIMEOUT_S) -> Iterator[str]:
    """Run the server ``argv`` until ``url``/v1/models answers; yields ``url``; stops it afterwards.

    Raises ``LlamaServerError`` with the end of its log if it exits or does not answer in time.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + ready_timeout
        while True:
            if proc.poll() is not None:
                raise LlamaServerError(f"{shown(argv)} exited with {proc.returncode}:\n{_tail(log)}")
            try:
                if httpx.get(f"{url}/v1/models", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise LlamaServerError(f"{shown(argv)} did not answer in {ready_timeout:.0f} s:\n{_tail(log)}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _tail(path: Path, chars: int = 2000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else "(no log)"
