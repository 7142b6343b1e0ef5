"""How engines, endpoints and token kinds are named and coloured, defined once.

Every chart, panel heading and widget label of the dashboard, and every chart
and table of the shareable report (``workloads.report.html``), takes an
engine's colour and name from here, so one engine looks the same everywhere. An endpoint's runs carry
its label where an engine's carry ``ar``/``pdv``: it is shown as given, in
``OTHER_COLOR``. Several runs of one engine on one chart keep its hue, in
shades and dashes (``run_style``). The Inspect page paints token kinds
(``engine.request.TokenKind``) with ``KIND_COLORS``.
"""

from __future__ import annotations

ENGINE_COLORS = {"ar": "#7F7F7F", "baseline": "#4C78A8", "pd": "#F58518", "pdv": "#54A24B"}
ENGINE_LABELS = {"ar": "AR", "baseline": "Baseline", "pd": "PD", "pdv": "PDV"}
OTHER_COLOR = "#B279A2"  # any other name: an endpoint's label (workloads.endpoint.spec)

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


# several runs of one engine on one chart: the same hue, each later run darker or lighter and dashed differently
RUN_SHADES = (0.0, -0.35, 0.45, -0.6, 0.7)  # < 0 mixes in black, > 0 white
RUN_DASHES = ("solid", "dash", "dot", "dashdot", "longdash")


def engine_color(engine: str) -> str:
    return ENGINE_COLORS.get(str(engine), OTHER_COLOR)


def shade(color: str, amount: float) -> str:
    """``color`` (``#RRGGBB``) mixed with white (``amount`` > 0) or black (< 0) by ``abs(amount)``."""
    rgb = [int(color[i : i + 2], 16) for i in (1, 3, 5)]
    target = 255 if amount > 0 else 0
    mixed = [round(c + (target - c) * abs(amount)) for c in rgb]
    return "#" + "".join(f"{c:02X}" for c in mixed)


def run_style(engine: str, nth: int) -> dict[str, str]:
    """Line colour and dash of the ``nth`` (0-based) run of ``engine`` on a chart: the first is the engine's own."""
    return {
        "color": shade(engine_color(engine), RUN_SHADES[nth % len(RUN_SHADES)]),
        "dash": RUN_DASHES[nth % len(RUN_DASHES)],
    }


def engine_label(engine: str) -> str:
    return ENGINE_LABELS.get(str(engine), str(engine))
