"""``python -m workloads --help`` names every command, and each command's own --help answers."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support import ROOT

COMMANDS = ("replay", "bench", "report")


def _workloads(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workloads", *args], cwd=ROOT, capture_output=True, text=True)


def test_help_lists_every_command():
    done = _workloads("--help")
    assert done.returncode == 0
    listed = done.stdout.split("positional arguments:")[1]
    for command in COMMANDS:
        assert f"\n    {command} " in listed, f"{command} missing from --help:\n{listed}"


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_has_its_own_help(command):
    done = _workloads(command, "--help")
    assert done.returncode == 0 and done.stdout.startswith(f"usage: python -m workloads {command}")
