"""A request's output as coloured pieces of text, one per token (Inspect page).

Byte-level tokenizers split some characters over several tokens; decoding such
a token alone gives U+FFFD. ``token_pieces`` decodes growing prefixes and
holds tokens back until the character is complete, so the text reads exactly
as the full decode; a held-back group is painted with its last token's kind.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from presentation.palette import KIND_COLORS, KIND_LABELS

MAX_HELD_TOKENS = 4  # a UTF-8 character has at most 4 bytes


@dataclass(frozen=True)
class TokenPiece:
    text: str
    kind: str  # engine.request.TokenKind value
    tokens: int  # tokens this piece stands for (more than 1 only for a split character)


def token_pieces(
    decode: Callable[[list[int]], str], token_ids: Sequence[int], kinds: Sequence[str]
) -> tuple[TokenPiece, ...]:
    """Text of each token (or held-back group) and its kind; the pieces join to ``decode(token_ids)``."""
    if len(token_ids) != len(kinds):
        raise ValueError(f"{len(token_ids)} tokens but {len(kinds)} kinds")
    pieces: list[TokenPiece] = []
    shown = ""
    start = 0
    for i in range(len(token_ids)):
        text = decode(list(token_ids[: i + 1]))
        held = i + 1 - start
        if text.endswith("\ufffd") and i + 1 < len(token_ids) and held < MAX_HELD_TOKENS:
            continue
        common = len(shown) if text.startswith(shown) else _common_prefix(shown, text)
        _trim(pieces, len(shown) - common)  # an earlier replacement character resolved: it moves here
        pieces.append(TokenPiece(text[common:], str(kinds[i]), held))
        shown = text
        start = i + 1
    return tuple(pieces)


def _trim(pieces: list[TokenPiece], chars: int) -> None:
    """Drop ``chars`` characters from the end of the pieces (their token counts stay)."""
    for k in range(len(pieces) - 1, -1, -1):
        if chars <= 0:
            return
        cut = min(chars, len(pieces[k].text))
        pieces[k] = TokenPiece(pieces[k].text[: len(pieces[k].text) - cut], pieces[k].kind, pieces[k].tokens)
        chars -= cut


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def pieces_html(pieces: Sequence[TokenPiece]) -> str:
    """The pieces as inline-styled spans (HTML-escaped; whitespace kept)."""
    spans = []
    for piece in pieces:
        if not piece.text:
            continue
        color = KIND_COLORS.get(piece.kind, "#EEEEEE")
        title = KIND_LABELS.get(piece.kind, piece.kind)
        spans.append(
            f'<span title="{html.escape(title)}" style="background:{color};border-radius:3px;'
            f'padding:1px 0;margin:0 1px">{html.escape(piece.text)}</span>'
        )
    return (
        '<div style="white-space:pre-wrap;font-family:ui-monospace,monospace;font-size:0.95rem;'
        f'line-height:1.9">{"".join(spans)}</div>'
    )


def legend_html() -> str:
    items = [
        f'<span style="background:{KIND_COLORS[k]};border-radius:3px;padding:2px 8px;margin-right:8px">'
        f"{html.escape(KIND_LABELS[k])}</span>"
        for k in KIND_COLORS
    ]
    return f'<div style="font-size:0.85rem">{"".join(items)}</div>'
