"""The loss bound P per round: the three policies and the critical-learning-regime detector.

:class:`PhaseController` is pure (gradient norms in, P out). Every round the coordinator
calls :meth:`~PhaseController.bound` for the round's P, then :meth:`~PhaseController.observe`
with the L2 norm of the round's aggregated gradient. Every ``check_every_rounds`` rounds the
mean norm of the window just finished is compared with the previous window's: a relative
change of at least ``eta`` means a CLR (P = P_low for the next window), less means P_high.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from host.dblp.config import LossPolicy, PhaseConfig

BOUND_RULES: dict[LossPolicy, Callable[[PhaseConfig, bool], float]] = {
    LossPolicy.DBLP: lambda cfg, in_clr: cfg.p_low if in_clr else cfg.p_high,
    LossPolicy.FIXED: lambda cfg, in_clr: cfg.p_low,
    LossPolicy.RELIABLE: lambda cfg, in_clr: 0.0,
}
"""The bound of each policy given whether a CLR is in force: one row per policy."""


def relative_change(previous: float, current: float) -> float:
    """``|previous − current| / previous`` (infinite when ``previous`` is 0 and they differ)."""
    if previous == 0.0:
        return 0.0 if current == 0.0 else math.inf
    return abs(previous - current) / previous


@dataclass(frozen=True)
class PhaseCheck:
    """The outcome of one detector check (for logs)."""

    round: int
    previous_norm: float
    current_norm: float
    change: float
    in_clr: bool


class PhaseController:
    """The per-round loss bound of one policy.

    Args:
        policy: which rule of :data:`BOUND_RULES` applies.
        cfg: P_low, k, eta and the check interval.
    """

    def __init__(self, policy: LossPolicy, cfg: PhaseConfig | None = None) -> None:
        self.policy = policy
        self.cfg = cfg or PhaseConfig()
        self.in_clr = self.cfg.start_in_clr
        self.checks: list[PhaseCheck] = []
        self._window: list[float] = []
        self._previous_mean: float | None = None

    def bound(self) -> float:
        """P for the current round."""
        return BOUND_RULES[self.policy](self.cfg, self.in_clr)

    def observe(self, round_: int, grad_norm: float) -> PhaseCheck | None:
        """Record the aggregated gradient's L2 norm of round ``round_``; at the end of each
        window run the detector and return its outcome (None between checks)."""
        if not math.isfinite(grad_norm):
            grad_norm = 0.0
        self._window.append(grad_norm)
        if len(self._window) < self.cfg.check_every_rounds:
            return None
        mean = sum(self._window) / len(self._window)
        self._window.clear()
        previous, self._previous_mean = self._previous_mean, mean
        if previous is None:  # the first window has nothing to compare with: keep the state
            return None
        change = relative_change(previous, mean)
        self.in_clr = change >= self.cfg.eta
        check = PhaseCheck(round_, previous, mean, change, self.in_clr)
        self.checks.append(check)
        return check
