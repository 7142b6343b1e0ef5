"""What the reader of a finished run must be told in words, beside its figures.

* ``answered_nothing`` – a run whose every request failed (a server that
  refuses the requests, a wrong model name, a server that is down) has no
  figures at all; it says so, with the first error, instead of a table of
  zeros;
* ``endpoint_lines`` – how an endpoint run sent its prompts (token ids, their
  text, or a chat message, and what the server answered when asked) and where
  its output token counts came from (the server's usage, or the text
  tokenized with the pair's tokenizer).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from engine.request import RequestStatus
from workloads.drivers.run_result import RunResult


def answered_nothing(result: RunResult) -> str | None:
    """``None`` unless every request of ``result`` failed; then one line naming the run and the first error."""
    failed = [r for r in result.requests if r.status == RequestStatus.FAILED]
    if not result.requests or len(failed) < len(result.requests):
        return None
    who = "the endpoint answered nothing" if result.endpoint is not None else "the engine completed nothing"
    n = len(result.requests)
    return f"{result.run_id}: {who}: {n} of {n} requests failed: {failed[0].error}"


def endpoint_lines(results: Sequence[RunResult]) -> list[str]:
    """One line per endpoint among ``results``: how its runs sent prompts and counted output tokens."""
    by_label: dict[str, list[dict[str, Any]]] = {}
    for result in results:
        if result.endpoint is not None:
            by_label.setdefault(result.engine, []).append(result.endpoint)
    return [_line(label, runs) for label, runs in by_label.items()]


def _line(label: str, runs: list[dict[str, Any]]) -> str:
    sent = [run.get("prompt_sent") or {} for run in runs]
    forms = Counter(s.get("sent", "?") for s in sent)
    first = sent[0]
    tried = "; ".join(f"{form} {answer}" for form, answer in (first.get("tried") or {}).items())
    how = f"asked the server: {tried}" if first.get("how") == "probed" else "as given"
    form = ", ".join(f"{f} in {n} of {len(runs)} runs" for f, n in forms.items())
    form = next(iter(forms)) if len(forms) == 1 else form
    counted: Counter[str] = Counter()
    for run in runs:
        counted.update(run.get("output_tokens_from") or {})
    counts = ", ".join(f"{source} ({n} requests)" for source, n in counted.items()) or "no request streamed"
    over = sum(run.get("tokenized_over_final_usage") or 0 for run in runs)
    beyond = f"; {over} tokens counted beyond the server's totals" if over else ""
    return f"{label}: prompts sent as {form} ({how}); output tokens counted from {counts}{beyond}"
