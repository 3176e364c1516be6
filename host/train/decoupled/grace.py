"""The adaptive grace window of the syncer: a pure policy, time passed in.

Once a fragment's quorum is in, the syncer waits a little longer for more learners, but only
within the slack the learners' overlap leaves before they need the merged fragment back
(Decoupled DiLoCo, Eq. 3)::

    ξ_grace = γ · (τ · ξ_step − ξ_quorum − ξ_sync),   clamped to [0, cap]

* ξ_step: a learner's step time: between two reports of the same learner incarnation,
  elapsed time ÷ steps taken (a pause inflates one sample; the cap bounds the damage); a
  first incarnation's first report gives one too, from its connection (its step 0), so the
  job's first merges already have a window;
* ξ_quorum: from a fragment round's first report to its quorum;
* ξ_sync: the merge itself, from the grace window's end to the merged fragment handed to the
  transport;
* γ < 1 a safety margin, τ the overlap in steps.

Each timing is an exponential moving average (:class:`Ema`: the first sample initialises it,
then v ← (1 − α)·v + α·x). A timing without samples counts 0, except ξ_step: without it the
window is 0 (nothing is known of the slack). With τ = 0 the window is always 0.
:data:`TIMINGS` lists the timings; :meth:`GraceWindow.observe` takes a sample of any.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

from host.train.decoupled.config import GraceConfig


class Timing(enum.Enum):
    STEP = "step"
    QUORUM = "quorum"
    SYNC = "sync"


TIMINGS = tuple(Timing)


class Ema:
    """An exponential moving average (None until the first sample)."""

    def __init__(self, alpha: float) -> None:
        self.alpha = alpha
        self.value: float | None = None
        self.samples = 0

    def add(self, x: float) -> float:
        """Take sample ``x`` (non-finite or negative samples are ignored); the new average."""
        if math.isfinite(x) and x >= 0:
            self.samples += 1
            self.value = x if self.value is None else (1 - self.alpha) * self.value + self.alpha * x
        return self.value if self.value is not None else math.nan


def grace_window_s(
    cfg: GraceConfig,
    overlap_steps: int,
    step_s: float | None,
    quorum_s: float | None,
    sync_s: float | None,
) -> float:
    """γ·(τ·ξ_step − ξ_quorum − ξ_sync) clamped to [0, cap]; 0 when ξ_step is unknown."""
    if step_s is None:
        return 0.0
    raw = cfg.gamma * (overlap_steps * step_s - (quorum_s or 0.0) - (sync_s or 0.0))
    return min(max(raw, 0.0), cfg.cap_s)


@dataclass(frozen=True)
class _LastReport:
    incarnation: int
    step: int
    at_s: float


@dataclass
class GraceWindow:
    """The syncer's timing estimates and the window they give."""

    cfg: GraceConfig
    overlap_steps: int
    emas: dict[Timing, Ema] = field(default_factory=dict)
    _last: dict[int, _LastReport] = field(default_factory=dict)
    _connected: dict[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.emas = {t: Ema(self.cfg.ema_alpha) for t in TIMINGS}

    def observe(self, timing: Timing, seconds: float) -> None:
        self.emas[timing].add(seconds)

    def connected(self, now: float, learner: int) -> None:
        """``learner`` connected at ``now`` (a first incarnation is then at its step 0)."""
        self._connected.setdefault(learner, now)

    def report(self, now: float, learner: int, incarnation: int, step: int) -> None:
        """A report of ``learner`` at its step ``step``, received at ``now``: a ξ_step sample
        if the same incarnation reported before at an earlier step, or if it is the first
        incarnation's first report and its connection was seen."""
        last = self._last.get(learner)
        if last is None and incarnation == 0 and learner in self._connected and step > 0:
            last = _LastReport(0, 0, self._connected[learner])
        if last is not None and last.incarnation == incarnation and step > last.step:
            self.observe(Timing.STEP, (now - last.at_s) / (step - last.step))
        self._last[learner] = _LastReport(incarnation, step, now)

    def value(self, timing: Timing) -> float | None:
        return self.emas[timing].value

    def window_s(self) -> float:
        return grace_window_s(
            self.cfg,
            self.overlap_steps,
            self.value(Timing.STEP),
            self.value(Timing.QUORUM),
            self.value(Timing.SYNC),
        )
