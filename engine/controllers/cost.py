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

with the times read from the machine's ``CostProfile`` plus what real steps took
beyond the profile's forwards (``Residual``: sampling, lookups, the acceptance
rule, bookkeeping, and whatever the profile gets wrong on this machine today),
fitted online as a part per row, a part per proposed token and a part every
drafting step pays once. The part per token matters: were it charged to every
L alike, a wider verify that costs more than the profile says would look like
a fixed cost that longer drafts share, and the controller would draft where a
plain step is faster. The part per drafting step matters at a large batch: one
row wider than a token widens the attention of every row and runs the
acceptance rule, so three proposed tokens in sixteen rows cost far more than
three sixteenths of a step with every row drafting, the profile's
interpolation. All L = 0
is a plain verifier step, AR's own, so speculation is chosen only where the
measurements say it emits tokens faster than AR would; at a large batch, where
a verifier forward over more tokens costs more, L shrinks or drops to 0. The
search is coordinate ascent over the sources (two passes). Probes keep every
source's acceptance known, and share the cost a drafting step pays once: a
source left at L = 0 for ``PROBE_EVERY`` steps drafts L = 1 on the next step
that drafts, and a step that ends ``PROBE_EVERY`` plain steps in a row drafts
(the model's choice, or the probes alone). A controller that has drafted for
``PLAIN_EVERY`` steps in a row runs one plain step so that the parts of the
residual stay apart.

The model is then checked against what it delivered (``Realised``): for plain
steps and for drafting steps apart, realised tokens per second over predicted,
over each kind's recent steps. Where the model prefers drafting but its
prediction scaled by those factors says a plain step is faster, the step is
plain (unless it ends ``PROBE_EVERY`` plain steps in a row: then it drafts,
to keep measuring). This
catches what no term of the model does: choosing the best of many noisy
acceptance estimates picks the luckiest ones, so the model is optimistic
exactly about the drafts it chooses.
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import numpy as np

from engine.config import ControllerConfig
from engine.controllers.base import DraftLengthController, LoadSignals, RowOption, RowOutcome, StepObservation
from engine.draft_source import MODEL, DraftSource
from engine.profiling.cost_profile import CostProfile

DECAY = 0.98  # per observed step of a source: about the last 50 steps count
PRIOR_ACCEPT, PRIOR_TRIALS = 1.0, 2.0  # alpha starts at 0.5 and moves with the first few observations
PROBE_EVERY = 16
PLAIN_EVERY = 64  # drafting steps in a row before one plain step: at most 1/65 of steps, to keep costs known
RESIDUAL_DECAY = 0.95  # per observed step: about the last 20 steps count
RIDGE = 1.0  # token^2: without steps to tell them apart, a residual goes on the rows, not the tokens
RIDGE_DRAFTING = 0.01  # (drafting step)^2: the same, small against the decayed count of drafting steps it divides
REALISED_DECAY = 0.95  # per step of one kind (plain or drafting): about its last 20 steps
REALISED_MIN_STEPS = 4.0  # decayed steps of a kind before its realised rate counts


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


class Residual:
    """Decayed least squares of a step's time beyond its forwards on (rows, proposed tokens, drafting), no intercept.

    ``drafting`` is 1 for a step with any proposal: a verify with a row wider than one token pays once for the
    width (wider attention over every row, the acceptance rule, trimming rejected cache), a cost that neither the
    rows nor the tokens carry. The coefficients may be negative (a profile measured on a busier machine); the
    ridge keeps the token and drafting parts at 0 until plain and drafting steps, and drafting steps of
    different widths, tell the three apart.
    """

    def __init__(self) -> None:
        self._xx = np.zeros((3, 3))  # decayed sums of products of the features
        self._xy = np.zeros(3)
        self._coefficients = (0.0, 0.0, 0.0)

    def add(self, rows: int, tokens: int, seconds: float) -> None:
        x = np.array([rows, tokens, float(tokens > 0)])
        self._xx = RESIDUAL_DECAY * self._xx + np.outer(x, x)
        self._xy = RESIDUAL_DECAY * self._xy + x * seconds
        xx = self._xx + np.diag([0.0, RIDGE, RIDGE_DRAFTING])
        if self._xx[0, 0] > 0:
            per_row, per_token, per_drafting = np.linalg.solve(xx, self._xy)
            self._coefficients = (float(per_row), float(per_token), float(per_drafting))

    def coefficients(self) -> tuple[float, float, float]:
        """(seconds per row, per proposed token, per drafting step); zeros before any step."""
        return self._coefficients

    def seconds(self, rows: int, tokens: float) -> float:
        per_row, per_token, per_drafting = self._coefficients
        return per_row * rows + per_token * tokens + per_drafting * (tokens > 0)


class Realised:
    """What steps of one kind (plain, or drafting) emitted and took, against what the model predicted for them."""

    def __init__(self) -> None:
        self.steps = self.tokens = self.predicted_tokens = self.seconds = self.predicted_seconds = 0.0

    def add(self, tokens: float, predicted_tokens: float, seconds: float, predicted_seconds: float) -> None:
        d = REALISED_DECAY
        self.steps = d * self.steps + 1
        self.tokens = d * self.tokens + tokens
        self.predicted_tokens = d * self.predicted_tokens + predicted_tokens
        self.seconds = d * self.seconds + seconds
        self.predicted_seconds = d * self.predicted_seconds + predicted_seconds

    def factor(self) -> float:
        """Realised tokens per second / predicted, over recent steps of this kind; 1 until there are a few."""
        if self.steps < REALISED_MIN_STEPS or min(self.predicted_tokens, self.seconds) <= 0:
            return 1.0
        return (self.tokens / self.predicted_tokens) * (self.predicted_seconds / self.seconds)


class Groups(NamedTuple):
    """A step's row options counted by (source, cap): what a step's rate depends on, in fewer terms than rows."""

    counts: tuple[tuple[tuple[DraftSource | None, int], int], ...]
    rows: int

    @classmethod
    def of(cls, options: list[RowOption]) -> Groups:
        return cls(tuple(Counter((o.source, o.cap) for o in options).items()), len(options))


class CostController(DraftLengthController):
    def __init__(self, config: ControllerConfig, profile: CostProfile) -> None:
        super().__init__(config)
        self.profile = profile
        self._counts: dict[DraftSource, PositionCounts] = {}
        self._chosen: dict[DraftSource, int] = {}  # last choice per source: where the next search starts
        self._idle: dict[DraftSource, int] = {}  # steps in a row the source did not draft
        self.residual = Residual()  # recent steps' time beyond the profile's forwards
        self._drafting = 0  # steps in a row given proposals
        self.plain, self.drafted = Realised(), Realised()  # how far each kind of step fell from the model
        self._plain_run = 0  # steps in a row without proposals

    def forward_s(self, batch: int, extra_tokens: float, model_rows: int, model_len: int) -> float:
        """The profile's time for one step's forwards: ``model_len`` draft positions, then one verify."""
        return model_len * self.profile.draft_s(model_rows) + self.profile.verify_s(batch, 1 + extra_tokens / batch)

    def _observe(self, obs: StepObservation) -> None:
        model_rows = sum(r.source == MODEL and r.drafted > 0 for r in obs.rows)
        predicted = self.forward_s(obs.batch_size, obs.drafted, model_rows, obs.positions if model_rows else 0)
        spent = obs.draft_s + obs.verify_s
        if obs.rows or not obs.drafted:  # a drafting step without its rows cannot be predicted
            expected = 0.0
            for row in obs.rows or [RowOutcome(None, 0, 0)] * obs.batch_size:
                counts = self._counts.get(row.source) if row.source is not None and row.drafted else None
                expected += counts.expected()[min(row.drafted, len(counts.trials))] if counts else 1.0
            cost = max(predicted + self.residual.seconds(obs.batch_size, obs.drafted), predicted / 2)
            arm = self.drafted if obs.drafted else self.plain
            arm.add(obs.batch_size + obs.accepted, expected, spent, cost)
        self.residual.add(obs.batch_size, obs.drafted, spent - predicted)
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
                self._drafting = 0
                return [0] * len(options)
            expected = {s: self._counts.get(s, PositionCounts(self.config.max_len)).expected() for s in sources}
            allowed = self.allowed()
            groups = Groups.of(options)
            choice = {s: self._chosen.get(s, self.config.draft_len) for s in sources}
            best = self.rate(groups, choice, expected)
            for _ in range(2):
                for source in sources:
                    for length in allowed:
                        trial = {**choice, source: length}
                        rate = self.rate(groups, trial, expected)
                        if rate > best:
                            best, choice = rate, trial
            self._chosen.update(choice)
            self._report(choice, best)
            due = self._plain_run + 1 >= PROBE_EVERY
            wants = any(choice[o.source] and o.cap for o in options if o.source is not None)
            if wants and not due and self._vetoes(groups, choice, expected):
                choice = dict.fromkeys(choice, 0)
            elif wants or due:  # the step drafts: sources long left at 0 ride along on it, at L = 1
                lowest = min((a for a in allowed if a > 0), default=0)
                for source in sources:
                    if choice[source] == 0 and self._idle.get(source, 0) + 1 >= PROBE_EVERY:
                        choice[source] = lowest
            for source in sources:
                self._idle[source] = self._idle.get(source, 0) + 1 if choice[source] == 0 else 0
            lens = [min(choice[o.source], o.cap) if o.source is not None else 0 for o in options]
            self._plain_run = 0 if any(lens) else self._plain_run + 1
            self._drafting = self._drafting + 1 if any(lens) else 0
            if self._drafting > PLAIN_EVERY:
                self._drafting, self._plain_run = 0, 1
                return [0] * len(options)
            return lens

    def _vetoes(
        self, options: Groups, choice: dict[DraftSource, int], expected: dict[DraftSource, list[float]]
    ) -> bool:
        """Whether recent real steps say a plain step beats ``choice`` where the model says it does not.

        Each kind of step's predicted rate is scaled by what that kind realised lately: a model that is
        optimistic about drafting (its cost, or the acceptance of the sources it just picked, the luckiest of
        many noisy estimates) is corrected by what its drafting steps delivered.
        """
        plain = self.plain.factor() * self.rate(options, dict.fromkeys(choice, 0), expected)
        return plain >= self.drafted.factor() * self.rate(options, choice, expected)

    def rate(
        self,
        options: list[RowOption] | Groups,
        choice: dict[DraftSource, int],
        expected: dict[DraftSource, list[float]],
    ) -> float:
        """Expected tokens per second of one step with ``choice`` (L per source)."""
        groups = options if isinstance(options, Groups) else Groups.of(options)
        tokens = extra = 0.0
        model_rows = model_len = 0
        for (source, cap), count in groups.counts:
            length = min(choice[source], cap) if source is not None else 0
            tokens += count * (expected[source][length] if source is not None else 1.0)
            extra += count * length
            if source == MODEL and length > 0:
                model_rows += count
                model_len = max(model_len, length)
        forward = self.forward_s(groups.rows, extra, model_rows, model_len)
        cost = max(forward + self.residual.seconds(groups.rows, extra), forward / 2)
        return tokens / cost if cost > 0 else 0.0

    def _report(self, choice: dict[DraftSource, int], rate: float) -> None:
        """Publish the model's L (else the longest chosen) as the controller's length, logging changes."""
        new = choice.get(MODEL, max(choice.values()))
        if new != self._length:
            shown = ", ".join(f"{s} L={n}" for s, n in sorted(choice.items()))
            self._record(new, f"cost: {shown} maximise {rate:.1f} tok/s")
