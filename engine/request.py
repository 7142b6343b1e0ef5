"""The request record: the single source of truth for a request's life.

An engine mutates a ``Request`` from its worker threads while the request is
alive; once ``done`` is set the record is frozen in practice and readers
(metrics, the dashboard, the CSV writers) may read it freely. Every metric is
derived from these fields, never counted a second time elsewhere.

Vocabulary (used everywhere in PD-Verify):

* *drafted* tokens – proposed by the draft model in one speculative step.
* *accepted* tokens – drafted tokens the verifier kept.
* *correction* token – sampled by the verifier at the first rejected position.
* *bonus* token – sampled by the verifier after all drafted tokens were accepted.
  Each verify step emits ``accepted + 1`` tokens (the +1 is a correction or a bonus).
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.config import SamplingParams
from engine.draft_source import DraftSource

log = logging.getLogger(__name__)


class RequestStatus(enum.StrEnum):
    WAITING = "waiting"  # submitted, not yet admitted (memory budget or batch limit)
    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"
    CANCELLED = "cancelled"
    REJECTED = "rejected"  # refused at submission, never ran

    @property
    def finished(self) -> bool:
        return self not in (RequestStatus.WAITING, RequestStatus.RUNNING)


class FinishReason(enum.StrEnum):
    STOP = "stop"  # a stop token (kept in the output)
    LENGTH = "length"  # max_new_tokens reached


class TokenKind(enum.StrEnum):
    """How an emitted token was produced (shown token by token on the Inspect page)."""

    FIRST = "first"  # sampled by the verifier at the end of prefill
    DECODE = "decode"  # plain autoregressive verifier step (AR engine, or L = 0)
    ACCEPTED = "accepted"
    CORRECTION = "correction"
    BONUS = "bonus"


@dataclass(frozen=True)
class StepRecord:
    """One speculative verify step of one request."""

    draft_len: int  # tokens drafted for this request in this step (0 = no speculation)
    accepted: int  # how many of them the verifier accepted, 0..draft_len
    source: DraftSource | None = None  # where the proposal came from; None when nothing was drafted


@dataclass(frozen=True)
class TokenEvent:
    """Tokens emitted together, streamed to the submitter's callback."""

    request_id: str
    token_ids: tuple[int, ...]
    time: float  # time.perf_counter()
    finished: bool


@dataclass(eq=False)
class Request:
    """A generation request and everything that happened to it.

    Times are ``time.perf_counter()`` seconds. ``token_times[i]`` is when
    ``output_token_ids[i]`` was handed back; tokens accepted in one verify step
    share one time.
    """

    request_id: str
    prompt_token_ids: list[int]
    params: SamplingParams = field(default_factory=SamplingParams)
    prompt: str | None = None
    on_event: Callable[[TokenEvent], None] | None = None
    # False: the output never teaches suffix drafting's global tree (a replay's warm-up request, which runs a
    # measured prompt: learning its output would let the measured request draft from itself)
    teaches_drafter: bool = True

    status: RequestStatus = RequestStatus.WAITING
    error: str | None = None
    finish_reason: FinishReason | None = None  # set when the request ends OK
    arrival_time: float | None = None
    admitted_time: float | None = None
    first_token_time: float | None = None
    finish_time: float | None = None
    output_token_ids: list[int] = field(default_factory=list)
    token_times: list[float] = field(default_factory=list)
    token_kinds: list[TokenKind] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event, repr=False)
    # makes ending the request one step: a lane still stepping a request that another thread has
    # just failed (a crashed lane, a stop) cannot add tokens to it, end it a second time or publish
    # after its final event; reentrant, so a listener may read the request
    _end_lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    def __post_init__(self) -> None:
        if not self.request_id:
            raise ValueError("request_id must be a non-empty string")
        if any(not isinstance(t, int) or t < 0 for t in self.prompt_token_ids):
            raise ValueError(f"request {self.request_id}: prompt token ids must be non-negative ints")

    # -- pickling: a request crosses from the engine process to the page's process ---------------
    def __getstate__(self) -> dict:
        """Everything but the listener, the done event and the end lock, which belong to the process it ran in."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("on_event", "done", "_end_lock")}
        state["done"] = self.done.is_set()
        return state

    def __setstate__(self, state: dict) -> None:
        was_done = state.pop("done")
        self.__dict__.update(state, on_event=None, done=threading.Event(), _end_lock=threading.RLock())
        if was_done:
            self.done.set()

    # -- derived counters (never stored twice) ---------------------------------
    @property
    def drafted(self) -> int:
        return sum(s.draft_len for s in self.steps)

    @property
    def accepted(self) -> int:
        return sum(s.accepted for s in self.steps)

    @property
    def verify_steps(self) -> int:
        return len(self.steps)

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_token_ids)

    # -- mutations, called by engines only -------------------------------------
    def mark_arrived(self) -> None:
        self.arrival_time = time.perf_counter()

    def mark_admitted(self) -> None:
        with self._end_lock:
            if self.status.finished:  # ended meanwhile (cancelled, or failed with a crashed lane): stays ended
                return
            self.status = RequestStatus.RUNNING
            self.admitted_time = time.perf_counter()

    def emit(self, token_ids: list[int], kinds: list[TokenKind], finish_reason: FinishReason | None) -> None:
        """Append tokens emitted together; finish the request if ``finish_reason`` is set.

        Tokens for a request that has already ended are dropped.
        """
        now = time.perf_counter()
        with self._end_lock:  # held while publishing too, so the final event is always the last one
            if self.status.finished:
                return
            if self.first_token_time is None and token_ids:
                self.first_token_time = now
            self.output_token_ids.extend(token_ids)
            self.token_kinds.extend(kinds)
            self.token_times.extend([now] * len(token_ids))
            if finish_reason is not None:
                self.finish_reason = finish_reason
                self._end(RequestStatus.OK, None, now)
            self._publish(TokenEvent(self.request_id, tuple(token_ids), now, finish_reason is not None))

    def fail(self, status: RequestStatus, error: str | None) -> None:
        """End the request as failed, cancelled or rejected, keeping what it produced."""
        assert status in (RequestStatus.FAILED, RequestStatus.CANCELLED, RequestStatus.REJECTED)
        now = time.perf_counter()
        with self._end_lock:
            if self.status.finished:
                return
            self._end(status, error, now)
            self._publish(TokenEvent(self.request_id, (), now, True))

    def _end(self, status: RequestStatus, error: str | None, now: float) -> None:
        self.status = status
        self.error = error
        self.finish_time = now
        self.done.set()

    def _publish(self, event: TokenEvent) -> None:
        """Hand ``event`` to the listener. It runs on an engine lane thread, so its errors stay its own:
        they are logged and never reach the engine or the other requests of the batch."""
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception:
            log.exception("request %s: its on_event listener raised", self.request_id)
