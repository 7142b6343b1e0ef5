"""``python -m engine serve`` refuses a bad --port or --host before loading anything: one line, exit 2."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from engine.serve.address import AddressError, check_address
from tests.support import ROOT


def _serve(*flags: str) -> subprocess.CompletedProcess:
    # no timeout races a measurement here: the check must answer before any model loads, which the
    # output shows (no "Loading" line); a run that loaded the models would also print the serving line
    return subprocess.run(
        [sys.executable, "-m", "engine", "serve", "--preset", "tiny", *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "flags, named",
    [(("--port", "99999"), "--port must be in 0..65535"), (("--host", "no-such-host.invalid"), "--host")],
)
def test_a_bad_address_is_one_line_and_exit_2_before_any_model_loads(flags, named):
    done = _serve(*flags)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0]


def test_a_port_another_process_holds_is_refused():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(AddressError, match=f"127.0.0.1:{port}"):
            check_address("127.0.0.1", port)


def test_a_free_port_and_port_0_pass():
    check_address("127.0.0.1", 0)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    check_address("127.0.0.1", free)
