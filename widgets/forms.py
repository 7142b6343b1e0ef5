"""The replay settings the Live run and Sweep pages share, drawn in the sidebar.

The engines are toggles; beside them an OpenAI-compatible endpoint can be
added, which runs after the engines on the same trace (its API key stays in
the session: ``EndpointSpec.describe`` leaves it out of the run files).

Every widget is keyed ``<page>.<field>`` (starting values: ``dashboard.settings``)
and keeps its value across page switches. ``replay_form`` returns the
``ReplaySpec`` the widgets describe, or the one problem that stops it.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dashboard.replay_spec import ReplaySpec
from dashboard.settings import ENGINE_ORDER, preset_options
from dashboard.uploads import UPLOAD_TYPES, UploadCheck, save_and_check
from engine.config import CONTROLLERS, DRAFTERS, ControllerConfig, EngineConfig, SamplingParams
from metrics.summary import SLO
from presentation.palette import ENGINE_LABELS
from widgets.rounds_inputs import rounds_inputs
from workloads.datasets.sharegpt_file import BUNDLED
from workloads.datasets.synthetic import LengthSpec
from workloads.drivers.arrivals import ArrivalPolicy, ClosedLoop, OpenLoop
from workloads.drivers.default_run import DEFAULT_RUN
from workloads.drivers.sweep import setting_limits
from workloads.drivers.trace import SYNTHETIC, DatasetSpec
from workloads.endpoint.spec import ENDPOINT_TYPES, EndpointSpec

KEEP = "session"  # widget values survive page switches
DATASET_LABELS = {"sharegpt": "ShareGPT (bundled)", "synthetic": "Synthetic", "upload": "Upload a dataset file"}
LOAD_LABELS = {"closed": "Concurrency (closed loop)", "open": "Request rate (open loop)"}
UPLOAD_HELP = (
    "JSON, JSONL, CSV or Parquet, read as `--dataset FILE` reads it: ShareGPT records (conversations: "
    "[{from, value}]), OpenAI messages (messages: [{role, content}]) or a prompt column (prompt, text, "
    "question or instruction)."
)
PRESET_HELP = (
    "smol: SmolLM2-135M-Instruct verifier with its distilled draft (first use converts the GGUF once). "
    "tiny: a random in-code pair that loads in a second – for trying the dashboard, not for real numbers."
)


@st.cache_data(max_entries=8, show_spinner="Checking the uploaded file")
def _check_upload(data: bytes, name: str) -> UploadCheck:
    return save_and_check(data, name)


def _numbers(text: str, convert, what: str) -> tuple:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise ValueError(f"give at least one {what}")
    try:
        return tuple(dict.fromkeys(convert(p) for p in parts))
    except ValueError:
        raise ValueError(f"{what}s must be a comma list of numbers, got {text!r}") from None


def engine_toggles(prefix: str) -> tuple[str, ...]:
    st.markdown("**Engines**")
    left, right = st.columns(2)
    chosen = []
    for i, engine in enumerate(ENGINE_ORDER):
        with left if i % 2 == 0 else right:
            if st.toggle(ENGINE_LABELS[engine], key=f"{prefix}.engine.{engine}", persist_state=KEEP):
                chosen.append(engine)
    return tuple(chosen)


ENDPOINT_HELP = (
    "An OpenAI-compatible server (vLLM, SGLang, `python -m engine serve`, ...), replayed with the same trace "
    "after the engines. The prompts are tokenized with the chosen preset's tokenizer."
)


def endpoint_entry(prefix: str) -> EndpointSpec | None:
    """The endpoint toggle and, when it is on, its settings; ``ValueError`` for settings that cannot run."""
    if not st.toggle("Endpoint", key=f"{prefix}.endpoint", persist_state=KEEP, help=ENDPOINT_HELP):
        return None
    url = st.text_input(
        "Endpoint URL", key=f"{prefix}.endpoint_url", persist_state=KEEP, placeholder="http://127.0.0.1:8000/v1"
    )
    model = st.text_input("Served model name", key=f"{prefix}.endpoint_model", persist_state=KEEP)
    left, right = st.columns(2)
    label = left.text_input("Label", key=f"{prefix}.endpoint_label", persist_state=KEEP, help="its name in charts")
    kind = right.selectbox("API", ENDPOINT_TYPES, key=f"{prefix}.endpoint_type", persist_state=KEEP)
    api_key = st.text_input(
        "API key",
        type="password",
        key=f"{prefix}.endpoint_api_key",
        persist_state=KEEP,
        help="kept for this session only, never saved",
    )
    url, model, label = url.strip(), model.strip(), label.strip()
    if not url:
        raise ValueError("give the endpoint's URL, e.g. http://127.0.0.1:8000/v1")
    if not model:
        raise ValueError("give the model name the endpoint serves (its /v1/models lists them)")
    taken = {name.lower() for name in (*ENGINE_ORDER, *ENGINE_LABELS.values())}
    if label.lower() in taken:
        raise ValueError(f"the endpoint's label {label!r} is an engine's name; choose another")
    return EndpointSpec(url, model, label, api_key or None, kind)


def _dataset(prefix: str) -> DatasetSpec:
    choice = st.radio(
        "Prompts", tuple(DATASET_LABELS), format_func=DATASET_LABELS.get, key=f"{prefix}.dataset", persist_state=KEEP
    )
    if choice == "synthetic":
        left, right = st.columns(2)
        prompt_len = left.number_input(
            "Prompt tokens", 1, 4096, key=f"{prefix}.synthetic_input_len", persist_state=KEEP
        )
        output_len = right.number_input(
            "Output tokens", 1, 4096, key=f"{prefix}.synthetic_output_len", persist_state=KEEP
        )
        return DatasetSpec(SYNTHETIC, LengthSpec(int(prompt_len)), LengthSpec(int(output_len)))
    if choice == "upload":
        return DatasetSpec(str(_uploaded(prefix)))
    return DatasetSpec(BUNDLED)


def _uploaded(prefix: str) -> Path:
    """The stored copy of the page's uploaded file, kept across page switches until another replaces it.

    Streamlit forgets a file uploader's file when its page is left, so the last
    accepted upload is remembered in the session under ``<page>.upload.kept``.
    """
    kept_key = f"{prefix}.upload.kept"
    upload = st.file_uploader("Dataset file", type=list(UPLOAD_TYPES), key=f"{prefix}.upload", help=UPLOAD_HELP)
    if upload is not None:
        check = _check_upload(upload.getvalue(), upload.name)
        if check.path is not None and not check.path.exists():  # the stored copy was cleaned away meanwhile
            _check_upload.clear()
            check = _check_upload(upload.getvalue(), upload.name)
        if check.error:
            raise ValueError(check.error)
        st.session_state[kept_key] = (upload.name, check)
    kept = st.session_state.get(kept_key)
    if kept is None:
        raise ValueError("upload a dataset file, or choose another prompt source")
    name, check = kept
    if not check.path.exists():
        del st.session_state[kept_key]
        raise ValueError(f"the stored copy of {name} is gone; upload it again")
    note = " (the file is cut short; complete records kept)" if check.truncated else ""
    earlier = "" if upload is not None else " – uploaded earlier; upload another file to replace it"
    st.caption(f"{name}: {check.usable} usable records{note}{earlier}")
    return check.path


def _policies(prefix: str, sweep: bool) -> tuple[ArrivalPolicy, ...]:
    mode = st.radio(
        "Load", tuple(LOAD_LABELS), format_func=LOAD_LABELS.get, key=f"{prefix}.load_mode", persist_state=KEEP
    )
    if mode == "closed":
        if sweep:
            text = st.text_input("Concurrency levels", key=f"{prefix}.concurrencies", persist_state=KEEP)
            return tuple(ClosedLoop(c) for c in _numbers(text, int, "concurrency level"))
        return (
            ClosedLoop(int(st.number_input("Concurrency", 1, 256, key=f"{prefix}.concurrency", persist_state=KEEP))),
        )
    if sweep:
        text = st.text_input("Request rates (req/s; inf = all at once)", key=f"{prefix}.rates", persist_state=KEEP)
        rates = _numbers(text, float, "request rate")
    else:
        rates = (
            st.number_input("Request rate (req/s)", 0.01, 1000.0, key=f"{prefix}.request_rate", persist_state=KEEP),
        )
    burst = st.number_input(
        "Burstiness",
        0.05,
        100.0,
        key=f"{prefix}.burstiness",
        persist_state=KEEP,
        help="Gamma shape: 1 = Poisson, < 1 burstier",
    )
    cap = st.number_input("Max in flight (0 = no cap)", 0, 1024, key=f"{prefix}.max_concurrency", persist_state=KEEP)
    return tuple(OpenLoop(float(r), float(burst), int(cap) or None) for r in rates)


def _controller(prefix: str) -> ControllerConfig:
    kind = st.selectbox(
        "Draft-length controller",
        CONTROLLERS,
        key=f"{prefix}.controller",
        persist_state=KEEP,
        help=(
            "fixed: L never changes; feedback: follows acceptance and queues; goodput: maximises expected tokens/s "
            "from costs measured online; cost: per step and per source of proposals, from this machine's measured "
            "step costs (measured once per model pair, then cached)"
        ),
    )
    if kind == "fixed":
        length = st.slider("Draft length L", 0, 16, key=f"{prefix}.draft_len", persist_state=KEEP)
        return ControllerConfig(
            "fixed", draft_len=length, min_len=0, max_len=max(length, 1), draft_confidence=confidence_gate(prefix)
        )
    low, high = st.slider("L bounds", 0, 16, key=f"{prefix}.bounds", persist_state=KEEP)
    start = st.slider("Starting L", 0, 16, key=f"{prefix}.draft_len", persist_state=KEEP)
    return ControllerConfig(kind, draft_len=start, min_len=low, max_len=high, draft_confidence=confidence_gate(prefix))


DRAFTER_HELP = (
    "model: the draft model proposes; ngram: prompt lookup, proposing what followed the context's own latest "
    "suffix earlier in the prompt or output (no model forward); model+ngram: the lookup where it finds one, "
    "else the draft model; suffix: the most frequent continuation of the latest tokens in the request itself or "
    "in the outputs of the requests this engine completed before (no model forward); suffix+model: that where "
    "it finds one, else the draft model"
)


def drafter_select(prefix: str, where=st) -> str:
    """The drafter of the speculative engines; ``where`` is the container to draw it in."""
    return where.selectbox("Drafter", DRAFTERS, key=f"{prefix}.drafter", persist_state=KEEP, help=DRAFTER_HELP)


def confidence_gate(prefix: str, where=st) -> float | None:
    """The draft confidence gate's slider (``None``: off); ``where`` is the container to draw it in."""
    gate = where.slider(
        "Draft confidence gate",
        0.0,
        0.95,
        step=0.05,
        key=f"{prefix}.draft_confidence",
        persist_state=KEEP,
        help="a request stops drafting where the draft's top-1 probability falls below this; 0 = always draft L",
    )
    return gate or None  # the slider's 0 is the gate switched off


def _attempt(problems: list[str], draw, *args):
    """Draw one section; a ValueError becomes a problem and the rest of the form is still drawn."""
    try:
        return draw(*args)
    except ValueError as exc:
        problems.append(str(exc))
        return None


def _slo(prefix: str) -> SLO | None:
    if not st.toggle("Goodput SLOs", key=f"{prefix}.slo", persist_state=KEEP):
        return None
    left, right = st.columns(2)
    ttft = left.number_input("TTFT ms", 1.0, 1e6, key=f"{prefix}.ttft_slo_ms", persist_state=KEEP)
    tpot = right.number_input("TPOT ms", 1.0, 1e6, key=f"{prefix}.tpot_slo_ms", persist_state=KEEP)
    return SLO(float(ttft), float(tpot))


def _notes(prefix: str, dataset: DatasetSpec, policies: tuple[ArrivalPolicy, ...], num: int, max_new: int) -> None:
    """Say in the sidebar where one setting limits another, so no chart claims more than what ran."""
    notes = [note[0].upper() + note[1:] + "." for note in setting_limits(dataset, policies, num, max_new)]
    kept = st.session_state.get(f"{prefix}.upload.kept")
    if dataset.name not in (BUNDLED, SYNTHETIC) and kept is not None and kept[1].usable < num:
        notes.append(f"{kept[0]} has {kept[1].usable} usable records: a run takes at most {kept[1].usable} requests.")
    for note in notes:
        st.sidebar.warning(note, icon=":material/info:")


def replay_form(prefix: str, sweep: bool = False) -> tuple[ReplaySpec | None, str | None]:
    """Draw the settings in the sidebar; ``(spec, None)``, or ``(None, problem)`` when they cannot run."""
    problems: list[str] = []
    with st.sidebar:
        engines = engine_toggles(prefix)
        endpoint = _attempt(problems, endpoint_entry, prefix)
        st.divider()
        preset = st.selectbox(
            "Model preset", preset_options(), key=f"{prefix}.preset", persist_state=KEEP, help=PRESET_HELP
        )
        dataset = _attempt(problems, _dataset, prefix)
        left, right = st.columns(2)
        num = left.number_input("Requests", 1, 10_000, key=f"{prefix}.num_requests", persist_state=KEEP)
        max_new = right.number_input("Max new tokens", 1, 2048, key=f"{prefix}.max_new_tokens", persist_state=KEEP)
        rounds, precise = rounds_inputs(prefix)
        st.divider()
        policies = _attempt(problems, _policies, prefix, sweep)
        st.divider()
        temperature = st.slider("Temperature", 0.0, 2.0, step=0.05, key=f"{prefix}.temperature", persist_state=KEEP)
        drafter = drafter_select(prefix)
        controller = _attempt(problems, _controller, prefix)
        slo = _attempt(problems, _slo, prefix)
        simultaneous = not sweep and st.checkbox(
            "Run simultaneously",
            key=f"{prefix}.simultaneous",
            persist_state=KEEP,
            help="All engines at once, sharing the device; by default they run one after another.",
        )
    if not engines and not st.session_state.get(f"{prefix}.endpoint"):
        problems.insert(0, "switch on at least one engine or the endpoint")
    if problems:
        return None, problems[0]
    _notes(prefix, dataset, policies, int(num), int(max_new))
    try:
        spec = ReplaySpec(
            kind=prefix,
            preset=preset,
            engines=engines,
            policies=policies,
            dataset=dataset,
            num_requests=int(num),
            config=EngineConfig(
                controller=controller, drafter=drafter
            ),
            params=SamplingParams(temperature=float(temperature), max_new_tokens=int(max_new), seed=0),
            slo=slo,
            simultaneous=simultaneous,
            endpoints=(endpoint,) if endpoint is not None else (),
            rounds=int(rounds),
            # fewer rounds than a precise comparison starts with: exactly those rounds
            precision=DEFAULT_RUN.precision(int(rounds)) if precise else None,
        )
    except ValueError as exc:
        return None, str(exc)
    return spec, None
