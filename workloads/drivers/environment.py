"""What a run was made with: package versions, Python, platform, git commit.

Recorded in every run.json entry so a result can be traced to the code and the
libraries that produced it. Versions come from package metadata, so nothing
heavy is imported to read them.
"""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("torch", "transformers", "accelerate", "numpy", "pandas", "psutil", "nvidia-ml-py", "tqdm")
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def package_versions(packages: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in packages:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit(root: Path = PROJECT_ROOT) -> dict[str, Any] | None:
    """``{"commit", "dirty"}`` of the checkout, or ``None`` outside git or before the first commit."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=5, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status)}


def run_context(pair: Any) -> dict[str, Any]:
    """The run.json fields about models, device and software, for ``run_sweep(meta=...)``."""
    return {"models": pair.describe(), "device": str(pair.device), "environment": environment()}


def environment() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": package_versions(),
        "git": git_commit(),
    }
