"""``cost``: each step's draft lengths chosen from measured step costs and measured acceptance.

Rows are grouped by *source* (``engine.draft_source.DraftSource``): the draft
model, or a prompt lookup or suffix match of n tokens (a longer match is
usually a better guess), the request's own context and the global suffix
tree apart, since they are right at different rates. For each
source the controller keeps, per draft position k, how often position k was
accepted once positions 1..k-1 were (alpha_k, from counts that decay so that
it follows the text, with a prior of one acceptance in two trials), and so the
expected tokens a row emits with L proposals:

    E_s(L) = 1 + alpha_1 + alpha_1 alpha_2 + ... + alpha_1 ... alpha_L

For the next step it picks one L per source present to maximise

    sum over rows of E_s(min(L_s, cap)) / (L_model * t_draft(model rows) + t_verify(rows, tokens per row))

with the times read from the machine's ``CostProfile``, plus the step's
overhead: what a real step took beyond the profile's forwards (sampling, the
acceptance rule, bookkeeping), an average over recent steps. It is the same
for every L, so it favours longer drafts, whose tokens share it. All L = 0 is a plain
verifier step, AR's own, so speculation is chosen only where the measurements
say it emits tokens faster than AR would; at a large batch, where a verifier
forward over more tokens costs more, L shrinks or drops to 0. The search is
coordinate ascent over the sources (two passes). A source left at L = 0 is
probed with L = 1 every ``PROBE_EVERY`` steps so that its acceptance stays known.
"""

from __future__ import annotations

from engine.config import ControllerConfig
from engine.controllers.base import DraftLengthController, LoadSignals, RowOption, StepObservation
from engine.draft_source import MODEL, DraftSource
from engine.profiling.cost_profile import CostProfile

DECAY = 0.98  # per observed step of a source: about the last 50 steps count
PRIOR_ACCEPT, PRIOR_TRIALS = 1.0, 2.0  # alpha starts at 0.5 and moves with the first few observations
PROBE_EVERY = 16
OVERHEAD_WEIGHT = 0.1  # EMA weight of a step's measured overhead: about the last 10 steps


class PositionCounts:
    """Decayed trials and acceptances per draft position (index 0 is position 1)."""

    def __init__(self, max_len: int) -> None:
        self.trials = [0.0] * max_len
        self.accepts = [0.0] * max_len

    def add(self, rows: list[tuple[int, int]]) -> None:
        """``rows``: (drafted, accepted) of one step's rows of this source."""
        self.trials = [t * DECAY for t in self.trials]
        self.accepts = [a * DECAY for a in self.accepts]
        for drafted, accepted in rows:
            for k in range(min(drafted, accepted + 1, len(self.trials))):  # position k+1 was reached
                self.trials[k] += 1
                self.accepts[k] += k < accepted

    def expected(self) -> list[float]:
        """E(L) for L = 0 .. max_len."""
        out, reach = [1.0], 1.0
        for t, a in zip(self.trials, self.accepts, strict=True):
            reach *= (a + PRIOR_ACCEPT) / (t + PRIOR_TRIALS)
            out.append(out[-1] + reach)
        return out


class CostController(DraftLengthController):
    def __init__(self, config: ControllerConfig, profile: CostProfile) -> None:
        super().__init__(config)
        self.profile = profile
        self._counts: dict[DraftSource, PositionCounts] = {}
        self._chosen: dict[DraftSource, int] = {}  # last choice per source: where the next search starts
        self._idle: dict[DraftSource, int] = {}  # steps since the source last drafted
        self.overhead_s = 0.0  # recent steps' time beyond the profile's forwards

    def forward_s(self, batch: int, extra_tokens: float, model_rows: int, model_len: int) -> float:
        """The profile's time for one step's forwards: ``model_len`` draft positions, then one verify."""
        return model_len * self.profile.draft_s(model_rows) + self.profile.verify_s(batch, 1 + extra_tokens / batch)

    def _observe(self, obs: StepObservation) -> None:
        model_rows = sum(r.source == MODEL and r.drafted > 0 for r in obs.rows)
        predicted = self.forward_s(obs.batch_size, obs.drafted, model_rows, obs.positions if model_rows else 0)
        spent = max(0.0, obs.draft_s + obs.verify_s - predicted)
        self.overhead_s += OVERHEAD_WEIGHT * (spent - self.overhead_s)
        by_source: dict[DraftSource, list[tuple[int, int]]] = {}
        for row in obs.rows:
            if row.source is not None and row.drafted > 0:
                by_source.setdefault(row.source, []).append((row.drafted, row.accepted))
        for source, rows in by_source.items():
            self._counts.setdefault(source, PositionCounts(self.config.max_len)).add(rows)

    def allowed(self) -> list[int]:
        cfg = self.config
        low = [0] if cfg.allow_zero else []
        return low + list(range(max(cfg.min_len, 1), cfg.max_len + 1))

    def lengths(self, signals: LoadSignals, options: list[RowOption]) -> list[int]:
        sources = sorted({o.source for o in options if o.source is not None})
        with self._lock:
            if not sources:
                return [0] * len(options)
            expected = {s: self._counts.get(s, PositionCounts(self.config.max_len)).expected() for s in sources}
            allowed = self.allowed()
            choice = {s: self._chosen.get(s, self.config.draft_len) for s in sources}
            best = self.rate(options, choice, expected)
            for _ in range(2):
                for source in sources:
                    for length in allowed:
                        trial = {**choice, source: length}
                        rate = self.rate(options, trial, expected)
                        if rate > best:
                            best, choice = rate, trial
            for source in sources:
                idle = self._idle.get(source, 0) + 1 if choice[source] == 0 else 0
                if idle >= PROBE_EVERY and allowed[-1] > 0:
                    choice[source], idle = min(a for a in allowed if a > 0), 0
                self._idle[source] = idle
            self._chosen.update(choice)
            self._report(choice, best)
            return [min(choice[o.source], o.cap) if o.source is not None else 0 for o in options]

    def rate(
        self, options: list[RowOption], choice: dict[DraftSource, int], expected: dict[DraftSource, list[float]]
    ) -> float:
        """Expected tokens per second of one step with ``choice`` (L per source)."""
        tokens = extra = 0.0
        model_rows = model_len = 0
        for o in options:
            length = min(choice[o.source], o.cap) if o.source is not None else 0
            tokens += expected[o.source][length] if o.source is not None else 1.0
            extra += length
            if o.source == MODEL and length > 0:
                model_rows += 1
                model_len = max(model_len, length)
        cost = self.forward_s(len(options), extra, model_rows, model_len) + self.overhead_s
        return tokens / cost if cost > 0 else 0.0

    def _report(self, choice: dict[DraftSource, int], rate: float) -> None:
        """Publish the model's L (else the longest chosen) as the controller's length, logging changes."""
        new = choice.get(MODEL, max(choice.values()))
        if new != self._length:
            shown = ", ".join(f"{s} L={n}" for s, n in sorted(choice.items()))
            self._record(new, f"cost: {shown} maximise {rate:.1f} tok/s")
