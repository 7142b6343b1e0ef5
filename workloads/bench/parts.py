"""Every benchmark, as a part of ``python -m workloads bench``: its name, its run and its own options.

A part is a module with ``NAME`` (``"<number>-<name>"``: either half selects
it in ``--parts``) and ``run(ctx) -> PartResult``. A part with options of its
own declares them as one frozen dataclass whose fields carry their flags
(``engine.config.flag``, prefixed with the part's name: ``--drafters-loads``);
the command line builds them with ``engine.flags`` as every other CLI does,
and the part reads them with ``ctx.options(TheOptions)``.

The suite (``--parts`` not given) is the six parts that answer "is it faster,
and do the lanes help?"; the drafter comparison (which drafter, draft length
and controller pay on this pair) runs when named, into a directory of its own
under ``--out``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from workloads.bench import drafters, hardware, lanes, llama_peer, load, overhead, page_vs_cli, single
from workloads.bench.common import BenchContext, PartResult


@dataclass(frozen=True)
class Part:
    name: str  # e.g. "7-drafters"
    run: Callable[[BenchContext], PartResult]
    options: type | None = None  # its own options (a flagged frozen dataclass), if it has any
    in_suite: bool = True  # runs when --parts is not given


PARTS: dict[str, Part] = {
    p.name: p
    for p in (
        Part(overhead.NAME, overhead.run),
        Part(single.NAME, single.run),
        Part(load.NAME, load.run, load.LoadOptions),
        Part(lanes.NAME, lanes.run, lanes.LanesOptions),
        Part(hardware.NAME, hardware.run),
        Part(page_vs_cli.NAME, page_vs_cli.run),
        Part(drafters.NAME, drafters.run, drafters.DrafterOptions, in_suite=False),
        Part(llama_peer.NAME, llama_peer.run, llama_peer.LlamaCppOptions, in_suite=False),
    )
}
SUITE = tuple(name for name, part in PARTS.items() if part.in_suite)
ALIASES = {half: name for name in PARTS for half in name.split("-", 1)}


def parse_parts(text: str) -> list[str]:
    """The parts named in ``text`` (a comma list of names or numbers), in the order given.

    Raises ``ValueError`` naming the unknown part and the choices.
    """
    chosen = []
    for token in (t.strip() for t in text.split(",") if t.strip()):
        name = token if token in PARTS else ALIASES.get(token)
        if name is None:
            raise ValueError(f"unknown part {token!r}; choose from {', '.join(PARTS)}")
        chosen.append(name)
    if not chosen:
        raise ValueError("--parts names no part")
    return chosen
