"""The chaos schedule: seeded interruptions as pure data, and the actions that apply them.

:func:`schedule` draws, for every target (learner or elastic worker) m, a Poisson process of
interruptions of mean ``mtbi_s`` apart (``numpy.random.default_rng((seed, 0, m))``: adding a
target leaves the others' schedules alone), each starting after the previous one ended; the
kind by weight, the down time uniformly, a SLOW event's factor uniformly. The fabric draws its
own stream (``(seed, 1)``) of SPINE and PLANE failures when ``network_mtbi_s`` is finite. The
same configuration and targets give the same :class:`Schedule`, event for event.

Every event is two :class:`ChaosAction` s (:data:`EVENT_ACTIONS`): at ``at_s`` it begins, at
``at_s + duration_s`` it ends. Whoever runs the job applies them in time order:

==========  =================================  ===========================================
event       emulator (threads, this package)   fabric driver (processes)
==========  =================================  ===========================================
kill        the thread stops; a new one starts  SIGKILL; start the process again
            from the last checkpoint
pause       the thread stops stepping and       SIGSTOP / SIGCONT (:data:`PROCESS_SIGNALS`)
            sending until resumed
slow        each step takes ``factor`` × as     the agent's step-time multiplier
            long
spine       ``EmuNetwork.fail(plane, spine)``   ``tf-ctl fail switch <spine>`` / restore
plane       ``EmuCluster.fail_plane(plane)``    ``tf-ctl fail plane N`` / restore
==========  =================================  ===========================================

(:func:`ctl_argv` gives the ``tf-ctl`` arguments of a network action.)
"""

from __future__ import annotations

import enum
import math
import signal
from dataclasses import dataclass

import numpy as np

from host.train.decoupled.config import ChaosConfig, ChaosKind
from topologies.model import spine_name


@dataclass(frozen=True)
class ChaosEvent:
    """One interruption."""

    at_s: float  # since the job's start
    kind: ChaosKind
    target: int  # KILL, PAUSE, SLOW: the learner or worker; SPINE, PLANE: the plane
    duration_s: float
    factor: float = 1.0  # SLOW: the step-time multiplier
    spine: int = -1  # SPINE: which spine of the plane

    @property
    def end_s(self) -> float:
        return self.at_s + self.duration_s


class Action(enum.Enum):
    KILL = "kill"
    START = "start"
    STOP = "stop"
    CONT = "cont"
    SLOW = "slow"
    UNSLOW = "unslow"
    FAIL_SPINE = "fail_spine"
    RESTORE_SPINE = "restore_spine"
    FAIL_PLANE = "fail_plane"
    RESTORE_PLANE = "restore_plane"


EVENT_ACTIONS: dict[ChaosKind, tuple[Action, Action]] = {
    ChaosKind.KILL: (Action.KILL, Action.START),
    ChaosKind.PAUSE: (Action.STOP, Action.CONT),
    ChaosKind.SLOW: (Action.SLOW, Action.UNSLOW),
    ChaosKind.SPINE: (Action.FAIL_SPINE, Action.RESTORE_SPINE),
    ChaosKind.PLANE: (Action.FAIL_PLANE, Action.RESTORE_PLANE),
}
"""Per kind: the action that begins an event and the one that ends it."""

PROCESS_SIGNALS: dict[Action, signal.Signals] = {
    Action.KILL: signal.SIGKILL,
    Action.STOP: signal.SIGSTOP,
    Action.CONT: signal.SIGCONT,
}
"""The signal a process driver sends for these actions (START spawns the process again;
SLOW/UNSLOW set the agent's step-time multiplier)."""

CTL_VERBS: dict[Action, tuple[str, str]] = {
    Action.FAIL_SPINE: ("fail", "switch"),
    Action.RESTORE_SPINE: ("restore", "switch"),
    Action.FAIL_PLANE: ("fail", "plane"),
    Action.RESTORE_PLANE: ("restore", "plane"),
}
"""``tf-ctl`` verb and object of each network action."""


@dataclass(frozen=True)
class ChaosAction:
    at_s: float
    action: Action
    target: int
    factor: float = 1.0
    spine: int = -1


def ctl_argv(action: ChaosAction) -> list[str]:
    """The ``tf-ctl`` arguments that apply a network action on the fabric.

    Raises:
        KeyError: not a network action.
    """
    verb, what = CTL_VERBS[action.action]
    name = spine_name(action.target, action.spine) if what == "switch" else str(action.target)
    return [verb, what, name]


@dataclass(frozen=True)
class Schedule:
    config: ChaosConfig
    targets: int
    events: tuple[ChaosEvent, ...]

    def actions(self) -> tuple[ChaosAction, ...]:
        """Every event's begin and end actions, in time order (an event's end after its
        begin; ties by target, then kind)."""
        out: list[tuple[float, int, int, int, ChaosAction]] = []
        order = {k: i for i, k in enumerate(ChaosKind)}
        for e in self.events:
            begin, end = EVENT_ACTIONS[e.kind]
            for phase, (at, act) in enumerate(((e.at_s, begin), (e.end_s, end))):
                out.append(
                    (
                        at,
                        phase,
                        e.target,
                        order[e.kind],
                        ChaosAction(at, act, e.target, e.factor if phase == 0 else 1.0, e.spine),
                    )
                )
        return tuple(a for *_key, a in sorted(out, key=lambda x: x[:4]))

    def for_target(self, target: int) -> tuple[ChaosEvent, ...]:
        """The process events of ``target``."""
        return tuple(e for e in self.events if e.kind in _PROCESS and e.target == target)

    def describe(self) -> str:
        return "\n".join(
            f"{e.at_s:8.2f} s  {e.kind.value:5}  target {e.target}"
            + (f" spine {e.spine}" if e.spine >= 0 else "")
            + f"  for {e.duration_s:.2f} s"
            + (f"  ×{e.factor:.2f}" if e.kind is ChaosKind.SLOW else "")
            for e in self.events
        )


_PROCESS = frozenset({ChaosKind.KILL, ChaosKind.PAUSE, ChaosKind.SLOW})


def _stream(
    rng: np.random.Generator,
    cfg: ChaosConfig,
    mtbi_s: float,
    weights: tuple[tuple[ChaosKind, float], ...],
    target: int,
    *,
    planes: int = 1,
    spines: int = 1,
) -> list[ChaosEvent]:
    kinds = [k for k, _w in weights]
    p = np.array([w for _k, w in weights], dtype=np.float64)
    p /= p.sum()
    out: list[ChaosEvent] = []
    t = cfg.start_after_s
    while True:
        t += float(rng.exponential(mtbi_s))
        # every event draws the same values, whatever its kind, so that one draw does not
        # shift the next event's
        kind = kinds[int(rng.choice(len(kinds), p=p))]
        duration = float(rng.uniform(cfg.down_min_s, cfg.down_max_s))
        factor = float(rng.uniform(cfg.slow_min, cfg.slow_max))
        plane = int(rng.integers(planes))
        spine = int(rng.integers(spines))
        if t > cfg.horizon_s:
            return out
        if kind in _PROCESS:
            out.append(
                ChaosEvent(t, kind, target, duration, factor if kind is ChaosKind.SLOW else 1.0)
            )
        else:
            out.append(
                ChaosEvent(t, kind, plane, duration, spine=spine if kind is ChaosKind.SPINE else -1)
            )
        t += duration


def schedule(cfg: ChaosConfig, targets: int, *, planes: int = 2, spines: int = 2) -> Schedule:
    """The interruptions of ``targets`` learners (and of a fabric of ``planes`` planes with
    ``spines`` spines each), sorted by time.

    Raises:
        ValueError: targets < 0, or planes or spines < 1.
    """
    if targets < 0 or planes < 1 or spines < 1:
        raise ValueError(
            f"need targets >= 0, planes and spines >= 1: {targets}, {planes}, {spines}"
        )
    events: list[ChaosEvent] = []
    for m in range(targets):
        rng = np.random.default_rng((cfg.seed, 0, m))
        events += _stream(rng, cfg, cfg.mtbi_s, cfg.process_weights, m)
    if math.isfinite(cfg.network_mtbi_s):
        rng = np.random.default_rng((cfg.seed, 1))
        events += _stream(
            rng, cfg, cfg.network_mtbi_s, cfg.network_weights, 0, planes=planes, spines=spines
        )
    order = {k: i for i, k in enumerate(ChaosKind)}
    events.sort(key=lambda e: (e.at_s, order[e.kind], e.target))
    return Schedule(cfg, targets, tuple(events))
