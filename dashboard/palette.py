"""How the dashboard names and colours things, defined once: engines, endpoints, token kinds.

Every chart, panel heading and widget label takes an engine's colour and name
from here, so one engine looks the same everywhere. An endpoint's runs carry
its label where an engine's carry ``ar``/``pdv``: it is shown as given, in
``OTHER_COLOR``. The Inspect page paints token kinds
(``engine.request.TokenKind``) with ``KIND_COLORS``.
"""

from __future__ import annotations

ENGINE_COLORS = {"ar": "#7F7F7F", "baseline": "#4C78A8", "pd": "#F58518", "pdv": "#54A24B"}
ENGINE_LABELS = {"ar": "AR", "baseline": "Baseline", "pd": "PD", "pdv": "PDV"}
OTHER_COLOR = "#B279A2"  # any other name: an endpoint's label (workloads.endpoint_spec)

# token kinds of engine.request.TokenKind, as the Inspect page paints them
KIND_COLORS = {
    "accepted": "#B7E4B0",  # drafted and kept: speculation paid off
    "correction": "#F7B6A8",  # the verifier's token at the first rejected position
    "bonus": "#C9B8F0",  # the verifier's extra token after a fully accepted draft
    "first": "#D9D9D9",  # sampled by the verifier at the end of prefill
    "decode": "#DCE8F5",  # plain verifier step (AR, or L = 0)
}
KIND_LABELS = {
    "accepted": "accepted draft token",
    "correction": "correction",
    "bonus": "bonus",
    "first": "first token",
    "decode": "decode (no draft)",
}


def engine_color(engine: str) -> str:
    return ENGINE_COLORS.get(str(engine), OTHER_COLOR)


def engine_label(engine: str) -> str:
    return ENGINE_LABELS.get(str(engine), str(engine))
