"""One prompt through one engine, for the Inspect page.

The worker builds the engine with ``engine.schedulers.registry.make_engine``, submits a single
``Request`` and waits for it; the view carries the finished request and its
output cut into coloured pieces (``dashboard.token_view``).
"""

from __future__ import annotations

from dataclasses import dataclass

from dashboard.launch import POLL_S, Launch, LaunchStatus, PairLoader
from dashboard.token_view import TokenPiece, token_pieces
from engine.config import EngineConfig, SamplingParams
from engine.request import Request, RequestStatus


@dataclass(frozen=True)
class InspectSpec:
    preset: str
    engine: str
    prompt: str
    config: EngineConfig
    params: SamplingParams
    device: str = "auto"
    kind: str = "inspect"

    def __post_init__(self) -> None:
        if not self.prompt.strip():
            raise ValueError("write a prompt first")


@dataclass(frozen=True)
class InspectView:
    launch_id: str
    spec: InspectSpec
    status: LaunchStatus
    request: Request | None  # finished
    pieces: tuple[TokenPiece, ...]  # the output, token by token


class InspectLaunch(Launch):
    kind = "inspect"

    def __init__(self, launch_id: str, spec: InspectSpec, load_pair: PairLoader) -> None:
        super().__init__(launch_id, load_pair)
        self.spec = spec
        self._request: Request | None = None
        self._pieces: tuple[TokenPiece, ...] = ()

    def _work(self) -> str | None:
        from engine.profiling import prepare_profile
        from engine.schedulers.registry import make_engine

        spec = self.spec
        pair = self._pair(spec.preset, spec.device)
        if self._cancel.is_set():
            return None
        request = Request("inspect", pair.encode_prompt(spec.prompt), spec.params, prompt=spec.prompt)
        config = spec.config
        profile = prepare_profile(pair, config, self._progress, engine=spec.engine)  # once per machine, own message
        if self._cancel.is_set():
            return None
        engine = make_engine(spec.engine, pair, config, profile)
        self._running(f"Generating with {spec.engine}")
        engine.start()
        try:
            engine.submit(request)
            while not request.done.wait(POLL_S) and not self._cancel.is_set():
                pass
        finally:
            engine.stop()
        pieces = token_pieces(
            lambda ids: pair.tokenizer.decode(ids, skip_special_tokens=False),
            request.output_token_ids,
            [str(k) for k in request.token_kinds],
        )
        with self._lock:
            self._request, self._pieces = request, pieces
        if request.status in (RequestStatus.FAILED, RequestStatus.REJECTED):
            return f"request {request.status}: {request.error}"
        return None

    def view(self) -> InspectView:
        with self._lock:
            return InspectView(self.id, self.spec, self._status, self._request, self._pieces)
