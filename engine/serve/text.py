"""Token ids to text, piece by piece, with stop strings.

``Detokenizer`` is the incremental decoding vLLM uses: each call decodes a
short window (the tokens already read back to the last safe point, plus the
new ones) and hands out only what the new tokens added, so the work per
token stays constant. Text that ends in a replacement character (half a
UTF-8 character, or half a multi-token glyph) is held back until the next
tokens complete it, or until the end. Decoding skips special tokens, as
``ModelPair.decode`` does, so the pieces of a whole output join to that
output's ``decode``.

``StopStrings`` cuts the text at the first occurrence of any stop string (the
stop string itself is not sent, as in OpenAI's API) and holds back the last
``longest stop - 1`` characters until it knows they do not begin one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

REPLACEMENT = "\ufffd"


class Detokenizer:
    def __init__(self, decode: Callable[[list[int]], str]) -> None:
        self._decode = decode
        self._ids: list[int] = []
        self._prefix = 0  # window start: the tokens before it are never decoded again
        self._read = 0  # tokens whose text has been handed out

    def add(self, token_ids: tuple[int, ...] | list[int]) -> str:
        """Text the new tokens complete (may be empty while a character is unfinished)."""
        self._ids.extend(token_ids)
        return self._advance(final=False)

    def flush(self) -> str:
        """Whatever is still held back, at the end of the output."""
        return self._advance(final=True)

    def _advance(self, final: bool) -> str:
        if self._read == len(self._ids):
            return ""
        before = self._decode(self._ids[self._prefix : self._read])
        after = self._decode(self._ids[self._prefix :])
        if not final and (len(after) <= len(before) or after.endswith(REPLACEMENT)):
            return ""
        self._prefix, self._read = self._read, len(self._ids)
        return after[len(before) :]


class StopStrings:
    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops = stops
        self._hold = max(map(len, stops), default=1) - 1
        self._pending = ""  # text held back: it may be the start of a stop string

    def feed(self, text: str, final: bool = False) -> tuple[str, bool]:
        """Text safe to send now, and whether a stop string ended the output (nothing follows it)."""
        buffer = self._pending + text
        hits = [i for i in (buffer.find(s) for s in self.stops) if i >= 0]
        if hits:
            self._pending = ""
            return buffer[: min(hits)], True
        keep = 0 if final else min(self._hold, len(buffer))
        self._pending = buffer[len(buffer) - keep :]
        return buffer[: len(buffer) - keep], False


def read_tokens(detokenizer: Detokenizer, stops: StopStrings, token_ids: Sequence[int], finished: bool) -> TextRead:
    """One event's tokens as text safe to send, read one token at a time (mutates both readers).

    A stop string ends the read at the token whose text completed it, so the tokens counted behind a
    stopped text never depend on how many tokens one speculative step emitted together (the draft length,
    hence timing): a streamed and a plain response report the same usage.
    """
    out = []
    last = len(token_ids) - 1
    for i, token_id in enumerate(token_ids):
        final = finished and i == last
        text = detokenizer.add((token_id,)) + (detokenizer.flush() if final else "")
        text, stopped = stops.feed(text, final=final)
        out.append(text)
        if stopped:
            return TextRead("".join(out), True, i + 1)
    if not token_ids and finished:
        text, stopped = stops.feed(detokenizer.flush(), final=True)
        return TextRead(text, stopped, 0)
    return TextRead("".join(out), False, len(token_ids))


class TextRead(NamedTuple):
    text: str
    stopped: bool  # a stop string ended the output: nothing after it is sent
    tokens: int  # tokens read: all of the event's, or up to the one that completed the stop string
