"""Checking ``--host`` and ``--port`` before anything slow runs: a bad address is one line, not a traceback later.

Imports only the standard library, so the check answers in well under a second.
The check binds the address once and lets it go: a port another process holds,
a host this machine does not have, or a port outside 0..65535 are refused
here. Something can still take the port between this check and the server's
own bind; uvicorn then reports that.
"""

from __future__ import annotations

import socket

MAX_PORT = 65535


class AddressError(ValueError):
    """The server could not listen on the address it was given."""


def check_address(host: str, port: int) -> None:
    """Raise ``AddressError`` (a one-line message naming the flag) if the server could not listen on host:port."""
    if not 0 <= port <= MAX_PORT:
        raise AddressError(f"--port must be in 0..{MAX_PORT} (0 = any free port), got {port}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise AddressError(f"--host {host!r} is not an address of this machine ({exc})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: a TIME_WAIT port is free
        try:
            probe.bind(address)
        except OSError as exc:
            raise AddressError(f"cannot listen on {host}:{port} (--host/--port): {exc.strerror or exc}") from None
