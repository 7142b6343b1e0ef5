"""A request's timeline written at virtual times.

``engine.request.Request`` stamps its timeline with ``time.perf_counter()``
as it goes; a simulated engine stamps the same fields with the virtual
clock's time, keeping the same rules: tokens of a request that has ended are
dropped, the first token sets ``first_token_time``, a finish reason ends it
OK, the listener hears every emission and one final event.
"""

from __future__ import annotations

from sim.policies import FinishReason, Request, RequestStatus, TokenEvent, TokenKind

PLACEHOLDER_TOKEN = 0  # a simulated token has a time and a kind, no identity


def arrive(request: Request, now: float) -> None:
    request.arrival_time = now


def admit(request: Request, now: float) -> None:
    if not request.status.finished:
        request.status = RequestStatus.RUNNING
        request.admitted_time = now


def emit(request: Request, kinds: list[TokenKind], finish: FinishReason | None, now: float) -> None:
    """Append ``len(kinds)`` tokens at ``now``; end the request OK when ``finish`` is set."""
    if request.status.finished:
        return
    if request.first_token_time is None and kinds:
        request.first_token_time = now
    request.output_token_ids.extend([PLACEHOLDER_TOKEN] * len(kinds))
    request.token_kinds.extend(kinds)
    request.token_times.extend([now] * len(kinds))
    if finish is not None:
        request.finish_reason = finish
        _end(request, RequestStatus.OK, None, now)
    if request.on_event is not None:  # built only for a listener: a simulation emits millions of times
        _publish(request, TokenEvent(request.request_id, (PLACEHOLDER_TOKEN,) * len(kinds), now, finish is not None))


def fail(request: Request, status: RequestStatus, error: str, now: float) -> None:
    """End ``request`` failed, cancelled or rejected at ``now`` (if it has not ended)."""
    if request.status.finished:
        return
    _end(request, status, error, now)
    _publish(request, TokenEvent(request.request_id, (), now, True))


def _end(request: Request, status: RequestStatus, error: str | None, now: float) -> None:
    request.status = status
    request.error = error
    request.finish_time = now
    request.done.set()


def _publish(request: Request, event: TokenEvent) -> None:
    if request.on_event is not None:
        request.on_event(event)
