"""A job description: what to train, how, with which loss policy and which injected events.

:class:`JobSpec` is a frozen dataclass that round-trips through JSON (what the experiment
driver hands to the per-host agents). :meth:`JobSpec.from_json` validates every field
(unknown keys, types, ranges) and raises :class:`JobSpecError`; nothing is evaluated.
"""

from __future__ import annotations

import enum
import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from host.dblp.config import LossPolicy, PhaseConfig

TASK_NAMES = ("digits-mlp", "digits-cnn", "chars-transformer", "chars-transformer-m")
"""The tasks of :data:`host.train.tasks.TASKS` (checked there at import)."""


class JobSpecError(ValueError):
    """A job description that cannot be run (the message names the field)."""


class Collective(enum.Enum):
    PS = "ps"  # workers + one parameter server (the DBLP evaluation's setup)
    RING = "ring"  # every host a worker, ring all-reduce


class EventKind(enum.Enum):
    """What happens to the network in a round (how each kind is applied:
    :data:`ROUND_ALIGNED`)."""

    BURST = "burst"
    """Loss of ``value`` % on every host-facing port, both directions, for exactly this
    round's communication: on before any host sends in the round, off before any sends in
    the next one (every agent waits for it at the round's start, outside the measured
    latency)."""
    FAIL_PLANE = "fail_plane"
    """Plane ``value`` fails while this round runs: triggered as the coordinator starts the
    round and applied by the driver on its own clock, without anyone waiting for it (a
    failure in the middle of the round's communication, as in a real fabric)."""
    RESTORE_PLANE = "restore_plane"
    """Plane ``value`` comes back, triggered like a failure."""


ROUND_ALIGNED = frozenset({EventKind.BURST})
"""Kinds that change the network exactly at round boundaries (agents wait for them); the
others are triggered at the round's start and land wherever the driver's clock puts them."""


@dataclass(frozen=True)
class JobEvent:
    round: int
    kind: EventKind
    value: float


@dataclass(frozen=True)
class JobSpec:
    """One training job (every field has a unit or a fixed meaning; see the table in
    :data:`host.train.tasks.TASKS` for the tasks)."""

    task: str = "digits-mlp"
    rounds: int = 150
    batch_size: int = 32
    optimizer: str = "sgd"  # "sgd" (with momentum) or "adam"
    lr: float = 0.1
    momentum: float = 0.9
    seed: int = 0
    eval_every: int = 10
    target_metric: float = 0.9
    """Accuracy to reach (classification) or perplexity to get below (language model)."""
    policy: LossPolicy = LossPolicy.DBLP
    phase: PhaseConfig = field(default_factory=PhaseConfig)
    collective: Collective = Collective.PS
    workers: int = 3
    events: tuple[JobEvent, ...] = ()
    peer_timeout_s: float = 30.0
    setup_timeout_s: float = 60.0
    min_chunks: int = 0
    """Cut the gradient into at least this many DBLP chunks (one chunk = one packet); 0: as
    many as full packets need. A loss bound P can only drop ⌊N·P⌋ of N chunks, so a baseline
    at P_low = 0.8 % needs N ≥ 125 to lose anything at all."""

    def __post_init__(self) -> None:
        if self.task not in TASK_NAMES:
            raise JobSpecError(f"unknown task '{self.task}'; valid: {', '.join(TASK_NAMES)}")
        for name in ("rounds", "batch_size", "eval_every", "workers"):
            if getattr(self, name) < 1:
                raise JobSpecError(f"{name} must be >= 1")
        if self.min_chunks < 0:
            raise JobSpecError("min_chunks must be >= 0")
        if self.optimizer not in ("sgd", "adam"):
            raise JobSpecError(f"optimizer must be 'sgd' or 'adam', not '{self.optimizer}'")
        if self.lr <= 0 or self.peer_timeout_s <= 0 or self.setup_timeout_s <= 0:
            raise JobSpecError("lr and timeouts must be positive")
        if self.events and self.collective is not Collective.PS:
            raise JobSpecError(
                "network events need the parameter server's round hooks (collective 'ps')"
            )
        for ev in self.events:
            if not 0 <= ev.round < self.rounds:
                raise JobSpecError(f"event at round {ev.round} outside 0..{self.rounds - 1}")
            if ev.kind is EventKind.BURST and not 0 < ev.value <= 100:
                raise JobSpecError(f"burst loss must be in (0, 100] %, got {ev.value}")

    def events_at(self, round_: int) -> list[JobEvent]:
        return [e for e in self.events if e.round == round_]

    def burst_pct(self, round_: int) -> float:
        return sum(e.value for e in self.events_at(round_) if e.kind is EventKind.BURST)

    def gated(self, round_: int) -> bool:
        """Whether every agent waits at the start of ``round_`` until the network is in the
        round's state: a burst starts or ends there (round-aligned events change)."""
        return round_ < self.rounds and (
            self.burst_pct(round_) != (self.burst_pct(round_ - 1) if round_ > 0 else 0.0)
        )

    def triggers(self, round_: int) -> list[JobEvent]:
        """The events the coordinator triggers as it starts ``round_`` without waiting."""
        return [e for e in self.events_at(round_) if e.kind not in ROUND_ALIGNED]

    # -- JSON ----------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["policy"] = self.policy.value
        d["collective"] = self.collective.value
        d["events"] = [
            {"round": e.round, "kind": e.kind.value, "value": e.value} for e in self.events
        ]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobSpec:
        """Raises: JobSpecError (unknown key, wrong type, bad value)."""
        if not isinstance(d, dict):
            raise JobSpecError("a job description is a JSON object")
        known = {f.name: f for f in fields(cls)}
        unknown = set(d) - set(known)
        if unknown:
            raise JobSpecError(f"unknown job fields: {', '.join(sorted(unknown))}")
        kw: dict[str, Any] = {}
        try:
            for name, value in d.items():
                if name == "policy":
                    kw[name] = LossPolicy.parse(str(value))
                elif name == "collective":
                    kw[name] = Collective(str(value))
                elif name == "phase":
                    kw[name] = _phase(value)
                elif name == "events":
                    kw[name] = tuple(
                        JobEvent(int(e["round"]), EventKind(str(e["kind"])), float(e["value"]))
                        for e in value
                    )
                else:
                    kw[name] = _typed(name, value, type(getattr(cls(), name)))
        except (KeyError, TypeError, ValueError) as e:
            if isinstance(e, JobSpecError):
                raise
            raise JobSpecError(f"bad job description: {e}") from e
        return cls(**kw)

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise JobSpecError(f"job description is not JSON: {e}") from e
        return cls.from_dict(doc)


def _typed(name: str, value: Any, kind: type) -> Any:
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or isinstance(value, bool) != (kind is bool):
        raise JobSpecError(f"{name} must be a {kind.__name__}, got {value!r}")
    return value


def _phase(value: Any) -> PhaseConfig:
    if not isinstance(value, dict):
        raise JobSpecError("phase must be an object")
    known = {f.name: f for f in fields(PhaseConfig)}
    unknown = set(value) - set(known)
    if unknown:
        raise JobSpecError(f"unknown phase fields: {', '.join(sorted(unknown))}")
    base = PhaseConfig()
    kw = {k: _typed(f"phase.{k}", v, type(getattr(base, k))) for k, v in value.items()}
    return PhaseConfig(**kw)
