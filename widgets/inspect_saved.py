"""The Inspect page's saved-run mode: pick a run directory, a run, its round and a request.

The request's output is painted as a new prompt's is (``dashboard.inspect_saved``),
with the same tiles, step chart and proposals per source (``widgets.request_card``);
a run written before outputs.jsonl recorded token kinds or steps gets one plain message for each.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dashboard.inspect_saved import NO_KINDS, request_row, saved_request, tokenizer_decode
from dashboard.token_view import legend_html, pieces_html
from metrics.export import RunFilesError
from metrics.runs import list_run_dirs, load_run_dir
from presentation.palette import engine_label
from widgets.request_card import request_card


@st.cache_resource(max_entries=4, show_spinner="Loading the run's tokenizer")
def _decoder(models: tuple[tuple[str, str], ...]):
    return tokenizer_decode(dict(models))


def saved_run_section(root: Path) -> None:
    """Draw the pickers and the chosen request; every choice is keyed ``inspect.saved.*``."""
    infos = [i for i in list_run_dirs(root) if i.problem is None]
    if not infos:
        st.info(f"No run directories under `{root}` yet: start a run on the Live run or Sweep page first.")
        return
    names = {("." if i.path == root else str(i.path.relative_to(root))): i.path for i in infos}
    cols = st.columns(4)
    name = cols[0].selectbox("Run directory", list(names), key="inspect.saved.dir")
    try:
        directory = load_run_dir(names[name])
    except RunFilesError as exc:
        st.error(str(exc))
        return
    outputs = directory.frames.outputs
    if outputs.empty:
        st.info("This run directory holds no request outputs.")
        return
    entries = {r["run_id"]: r for r in directory.runs}
    run_ids = list(dict.fromkeys(outputs["run_id"]))
    run_id = cols[1].selectbox(
        "Run (engine · load)", run_ids, format_func=lambda r: _run_label(r, entries.get(r, {})), key="inspect.saved.run"
    )
    of_run = outputs[outputs["run_id"] == run_id]
    rounds = sorted({int(r) for r in of_run["round"].fillna(1)})
    round_ = cols[2].selectbox("Round", rounds, key="inspect.saved.round")
    of_round = of_run[of_run["round"].fillna(1).astype(int) == round_]
    request_id = cols[3].selectbox("Request", list(of_round["request_id"]), key="inspect.saved.request")
    row = of_round[of_round["request_id"] == request_id].iloc[0].to_dict()
    models = entries.get(run_id, {}).get("models") or {}
    try:
        decode = _decoder(tuple(sorted((str(k), str(v)) for k, v in models.items())))
        saved = saved_request(row, decode, request_row(directory.frames.requests, run_id, round_, request_id))
    except ValueError as exc:
        st.error(f"Cannot show this request: {exc}")
        return
    st.caption("Prompt")
    st.text(saved.prompt or "(no prompt text recorded)")
    st.caption(f"Output of {engine_label(saved.engine)}, round {saved.round}")
    if saved.pieces is None:
        st.info(NO_KINDS)
        st.text(saved.text)
    else:
        st.html(legend_html())
        st.html(pieces_html(saved.pieces))
    request_card(saved.figures, saved.engine, key="inspect.saved")


def _run_label(run_id: str, entry: dict) -> str:
    engine = engine_label(str(entry.get("engine", "?")))
    load = entry.get("concurrency")
    rate = entry.get("request_rate")
    where = f"C = {load}" if rate is None else f"{rate} req/s"
    return f"{engine} · {where} · {run_id}"
