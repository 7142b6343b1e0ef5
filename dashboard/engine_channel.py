"""The pipe between the page's process and the engine process: whole Python values, one frame at a time.

A frame is an 8-byte big-endian length and a pickle. Both ends are this
project's own code, started by the page's process, so pickle is safe here; the
channel is never opened to anything else. ``recv`` returns ``None`` at the end
of the stream: the other process closed its end or died.
"""

from __future__ import annotations

import pickle
import struct
import threading
from typing import Any, BinaryIO

_HEADER = struct.Struct(">Q")


class Channel:
    def __init__(self, reader: BinaryIO, writer: BinaryIO) -> None:
        self._reader = reader
        self._writer = writer
        self._send_lock = threading.Lock()  # frames from several threads never interleave

    def send(self, value: Any) -> None:
        """Send one frame; ``BrokenPipeError`` (an ``OSError``) once the other end is gone."""
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        with self._send_lock:
            self._writer.write(_HEADER.pack(len(data)) + data)
            self._writer.flush()

    def recv(self) -> Any | None:
        """The next frame, or ``None`` at the end of the stream."""
        header = self._read(_HEADER.size)
        if header is None:
            return None
        data = self._read(_HEADER.unpack(header)[0])
        return None if data is None else pickle.loads(data)

    def _read(self, n: int) -> bytes | None:
        chunks, left = [], n
        while left:
            try:
                chunk = self._reader.read(left)
            except (OSError, ValueError):  # the file was closed under us: the end of the stream
                return None
            if not chunk:
                return None
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        for f in (self._writer, self._reader):
            try:
                f.close()
            except OSError:
                pass
