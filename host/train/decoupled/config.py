"""Settings of Decoupled DiLoCo, elastic data-parallel and chaos runs: frozen dataclasses, units
in the names, validated at construction.

* :class:`DecoupledConfig`: M learners, P fragments, H (every fragment is sent every H steps;
  one fragment every H/P steps, round-robin), the overlap τ, the inner and outer optimizers
  (:mod:`host.train.diloco.config`'s), the syncer (:class:`SyncerConfig`: quorum K, the grace
  window's γ, cap and EMA (:class:`GraceConfig`), merge weights, averaging, the learner
  timeout). :meth:`DecoupledConfig.reference` is the DiLoCo job it reduces to (K = M, no
  grace window, equal weights, direct averaging, P = 1, τ = 0).
* :class:`ElasticConfig`: elastic data parallel, the baseline: the rendezvous timeout, how long
  a worker waits for its round's result and for admission.
* :class:`ChaosConfig`: the seeded schedule of interruptions (:mod:`.chaos`): a mean time
  between interruptions per learner (and per fabric), the down times, the slow-down factors,
  the weights of the kinds.

An invalid combination raises :class:`~host.train.decoupled.errors.ConfigError` naming the
setting and what would be valid, before any connection or thread exists.
"""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass, field

from host.train.decoupled.errors import ConfigError
from host.train.diloco.config import (
    TASK_NAMES,
    Algorithm,
    DilocoConfig,
    InnerConfig,
    OuterConfig,
    settings_from_json,
    to_dict,
)
from host.train.diloco.errors import ConfigError as DilocoConfigError

MAX_LEARNERS = 1 << 12
"""Learners (and elastic workers) a job may have: ranks travel as u16, and the syncer's
rank is M."""
MAX_INCARNATIONS = 1 << 16
"""Restarts a learner may report (a larger one is an absurd counter)."""


class Averaging(enum.Enum):
    """How the syncer combines the learners' outer gradients of a fragment (one row of
    :data:`host.train.decoupled.weights.AVERAGING` per member)."""

    RDA = "rda"
    """Radial–Directional Averaging (norms and directions averaged separately) for every
    tensor but the embedding, which is averaged directly."""
    DIRECT = "direct"
    """The weighted mean of every tensor."""


class Anchor(enum.Enum):
    """Where the syncer anchors a learner's outer gradient Δ_{m,p} = anchor − θ_{m,p} (one row
    of :data:`host.train.decoupled.syncer.ANCHORS` per member)."""

    CURRENT = "current"
    """Θ_p as it is before this merge (the research note's reading of the paper, Appendix
    D.2). When learners drift apart a fragment's quorum splits into several small merges, and
    a report merged after others carries "undo their steps" in its Δ."""
    BASE = "base"
    """The version of Θ_p the learner last received (its report carries it): Δ is the
    learner's own progress only, applied to the current Θ_p. The syncer keeps the last
    ``history_versions`` versions of each fragment; a report whose base is older falls back
    to CURRENT (counted)."""


class Weighting(enum.Enum):
    """What a learner's report weighs in a merge (one row of
    :data:`host.train.decoupled.weights.WEIGHTINGS` per member)."""

    TOKENS_SQUARED_PER_STEP = "tokens2_per_step"
    """tokens² / steps since the fragment's last sync: quantity × quality (the paper's)."""
    TOKENS = "tokens"
    EQUAL = "equal"


def _positive(obj: object, *names: str) -> None:
    for name in names:
        v = getattr(obj, name)
        if not v > 0 or not math.isfinite(v):
            raise ConfigError(f"{name} must be positive and finite, got {v}")


def _at_least(obj: object, least: int, *names: str) -> None:
    for name in names:
        v = getattr(obj, name)
        if v < least:
            raise ConfigError(f"{name} must be >= {least}, got {v}")


@dataclass(frozen=True)
class GraceConfig:
    """The adaptive grace window ξ = γ·(τ·ξ_step − ξ_quorum − ξ_sync), clamped to
    [0, ``cap_s``] (:mod:`host.train.decoupled.grace`)."""

    gamma: float = 0.5
    """Safety margin γ (0: no grace window; at most 1)."""
    cap_s: float = 1.0
    """The longest window, seconds."""
    ema_alpha: float = 0.2
    """Weight of a new sample in the exponential moving averages of ξ_step, ξ_quorum and
    ξ_sync (1: the last sample only)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.gamma <= 1.0:
            raise ConfigError(f"grace gamma must be in [0, 1], got {self.gamma}")
        if not 0.0 <= self.cap_s < math.inf:
            raise ConfigError(f"grace cap_s must be >= 0 and finite, got {self.cap_s}")
        if not 0.0 < self.ema_alpha <= 1.0:
            raise ConfigError(f"grace ema_alpha must be in (0, 1], got {self.ema_alpha}")


NO_GRACE = GraceConfig(gamma=0.0, cap_s=0.0)
"""Merge as soon as the quorum is in."""


@dataclass(frozen=True)
class SyncerConfig:
    """The syncer: when it merges a fragment and how."""

    quorum: int = 1
    """K: merge a fragment once this many learners reported it (fewer while fewer are live)."""
    grace: GraceConfig = field(default_factory=GraceConfig)
    weighting: Weighting = Weighting.TOKENS_SQUARED_PER_STEP
    averaging: Averaging = Averaging.RDA
    anchor: Anchor = Anchor.BASE
    history_versions: int = 64
    """Versions of each fragment the syncer keeps for :attr:`Anchor.BASE` (the newest
    included)."""
    share_scaled: bool = True
    """Scale a merge's Δ by its share of the live learners (reports ÷ live), and its outer
    momentum by that share too (:meth:`OuterOptimizer.direction`): when learners report a
    fragment apart, q merges of one report each then move Θ_p about as far as one merge of
    all q would, instead of q full outer steps (which overshoot, and with momentum diverge).
    With every live learner in one merge the share is 1 and nothing changes."""
    learner_timeout_s: float = 5.0
    """A learner that has not reported (or connected) for this long is dropped from quorums;
    its next report welcomes it back."""
    eval_every_merges: int = 8
    """Validation loss of the global model every this many merges (and at the end)."""
    drain_s: float = 1.0
    """At the end of the job the syncer waits until every live learner has handed over its
    last reports and left, at most this long, then merges each fragment's reports once (0:
    merge what it holds at once)."""

    def __post_init__(self) -> None:
        _at_least(self, 1, "quorum", "eval_every_merges", "history_versions")
        _positive(self, "learner_timeout_s")
        if not 0 <= self.drain_s < math.inf:
            raise ConfigError(f"drain_s must be >= 0 and finite, got {self.drain_s}")


@dataclass(frozen=True)
class DecoupledConfig:
    """One Decoupled DiLoCo job: M = ``learners`` learners, each taking ``steps`` inner steps
    of ``batch_size`` samples of its own data; fragment p is sent after the steps
    s ≡ (p + 1)·H/P (mod H) and its merged copy applied τ = ``overlap_steps`` steps later."""

    task: str = "chars-transformer-m"
    learners: int = 4
    fragments: int = 4
    sync_every_steps: int = 24
    """H: every fragment is sent once per H steps (so one fragment every H/P steps)."""
    overlap_steps: int = 2
    """τ: a sent fragment's merged copy is applied this many steps after it was sent (0: the
    learner waits for it before its next step)."""
    steps: int = 240
    batch_size: int = 16
    seed: int = 0
    """Model initialisation (the same for every learner and the syncer) and data order."""
    inner: InnerConfig = field(default_factory=InnerConfig)
    outer: OuterConfig = field(default_factory=OuterConfig)
    syncer: SyncerConfig = field(default_factory=SyncerConfig)
    merge_wait_s: float = 30.0
    """Once a merged fragment is due, the learner waits at most this long for it, then trains
    on and applies it when it comes."""
    checkpoint_every_steps: int = 0
    """A learner checkpoints its parameters and optimizer state this often (0: every H steps);
    a killed learner restarts from its last checkpoint."""
    min_step_s: float = 0.0
    """The emulated accelerator: a step takes at least this long (it sleeps the rest), so a
    few learners share two cores with realistic step times. 0: as fast as the CPU."""
    setup_timeout_s: float = 30.0
    max_wall_s: float = math.inf
    """The run ends after this long even if learners have steps left."""

    def __post_init__(self) -> None:
        if self.task not in TASK_NAMES:
            raise ConfigError(f"unknown task '{self.task}'; valid: {', '.join(TASK_NAMES)}")
        _at_least(self, 1, "learners", "fragments", "sync_every_steps", "steps", "batch_size")
        _at_least(self, 0, "overlap_steps", "checkpoint_every_steps")
        if self.learners > MAX_LEARNERS:
            raise ConfigError(f"learners must be <= {MAX_LEARNERS}, got {self.learners}")
        if self.sync_every_steps % self.fragments:
            raise ConfigError(
                f"sync_every_steps (H = {self.sync_every_steps}) must be a multiple of "
                f"fragments (P = {self.fragments}): one fragment every H/P steps"
            )
        if self.overlap_steps >= self.sync_every_steps:
            raise ConfigError(
                f"overlap_steps (τ = {self.overlap_steps}) must be below sync_every_steps "
                f"(H = {self.sync_every_steps}): a fragment's merge is applied before it is "
                "sent again"
            )
        if self.syncer.quorum > self.learners:
            raise ConfigError(
                f"quorum K = {self.syncer.quorum} exceeds the {self.learners} learners"
            )
        _positive(self, "merge_wait_s", "setup_timeout_s")
        if not self.max_wall_s > 0:
            raise ConfigError(f"max_wall_s must be positive, got {self.max_wall_s}")
        if self.min_step_s < 0 or not math.isfinite(self.min_step_s):
            raise ConfigError(f"min_step_s must be >= 0 and finite, got {self.min_step_s}")

    @property
    def send_interval_steps(self) -> int:
        """H/P: steps between two fragments sent."""
        return self.sync_every_steps // self.fragments

    @property
    def checkpoint_interval_steps(self) -> int:
        return self.checkpoint_every_steps or self.sync_every_steps

    def reference(self) -> DilocoConfig:
        """The DiLoCo job with this task, M, H, batches, seed and optimizers: what this job is
        with K = M, no grace window, equal weights, direct averaging, P = 1 and τ = 0 (and
        what binds a learner's task: the same model and data as DiLoCo worker m)."""
        return DilocoConfig(
            algorithm=Algorithm.DILOCO,
            task=self.task,
            workers=self.learners,
            inner_steps=self.sync_every_steps,
            rounds=math.ceil(self.steps / self.sync_every_steps),
            batch_size=self.batch_size,
            seed=self.seed,
            inner=self.inner,
            outer=self.outer,
        )


@dataclass(frozen=True)
class ElasticConfig:
    """Elastic data parallel: every round each member computes a gradient on its own batch; the
    group's mean is applied by every member, or, when a member misses the round, the group
    drops it and redoes the round."""

    task: str = "chars-transformer-m"
    workers: int = 4
    rounds: int = 240
    """Committed rounds (optimizer steps) of the job."""
    batch_size: int = 16
    seed: int = 0
    inner: InnerConfig = field(default_factory=InnerConfig)
    rendezvous_timeout_s: float = 1.0
    """After a round's first gradient, the coordinator waits this long for the other members;
    those missing are dropped and the round is redone by the rest."""
    form_timeout_s: float = 2.0
    """At the start the group forms once every worker joined, or this long after the first
    JOIN without the late ones (who join later like a returning worker): a start-up
    straggler (imports, a busy machine) is not a failure."""
    reply_timeout_s: float = 10.0
    """A worker waits this long for its round's result, then asks to join again."""
    join_timeout_s: float = 2.0
    """A joining worker asks again if it is not admitted within this long."""
    reconfigure_s: float = 0.0
    """What every change of the group costs the whole job (the paper's downscale and upscale
    times: a real elastic job re-forms its communicator, re-shards and reloads): after members
    are dropped the rest redo the round only this long later, and an admitted worker gets its
    state, so the group can step again, only this long later. 0: re-forming is free (a
    per-step fault-tolerant group that never stops)."""
    checkpoint_every_steps: int = 24
    min_step_s: float = 0.0
    """As :attr:`DecoupledConfig.min_step_s`."""
    eval_every_rounds: int = 24
    setup_timeout_s: float = 30.0
    max_wall_s: float = math.inf

    def __post_init__(self) -> None:
        if self.task not in TASK_NAMES:
            raise ConfigError(f"unknown task '{self.task}'; valid: {', '.join(TASK_NAMES)}")
        _at_least(self, 1, "workers", "rounds", "batch_size", "checkpoint_every_steps")
        _at_least(self, 1, "eval_every_rounds")
        if self.workers > MAX_LEARNERS:
            raise ConfigError(f"workers must be <= {MAX_LEARNERS}, got {self.workers}")
        _positive(self, "rendezvous_timeout_s", "reply_timeout_s", "join_timeout_s")
        _positive(self, "form_timeout_s", "setup_timeout_s")
        if not self.max_wall_s > 0:
            raise ConfigError(f"max_wall_s must be positive, got {self.max_wall_s}")
        if self.reply_timeout_s <= self.rendezvous_timeout_s:
            raise ConfigError(
                f"reply_timeout_s ({self.reply_timeout_s}) must exceed rendezvous_timeout_s "
                f"({self.rendezvous_timeout_s}): a member waits out the group's timeout"
            )
        if self.min_step_s < 0 or not math.isfinite(self.min_step_s):
            raise ConfigError(f"min_step_s must be >= 0 and finite, got {self.min_step_s}")
        if self.reconfigure_s < 0 or not math.isfinite(self.reconfigure_s):
            raise ConfigError(f"reconfigure_s must be >= 0 and finite, got {self.reconfigure_s}")
        waits = {  # a member waits out its round's re-forming; a joiner its drop's and its own
            "reply_timeout_s": self.reconfigure_s + self.rendezvous_timeout_s,
            "join_timeout_s": 2 * self.reconfigure_s + self.rendezvous_timeout_s,
        }
        for name, least in waits.items():
            if self.reconfigure_s > 0 and getattr(self, name) <= least:
                raise ConfigError(
                    f"{name} ({getattr(self, name)}) must exceed {least:g} s with reconfigure_s "
                    f"{self.reconfigure_s:g}: a worker waits out a re-formation without giving up"
                )

    def reference(self) -> DilocoConfig:
        """The synchronous data-parallel job of the same task (binds a worker's task)."""
        return DilocoConfig(
            algorithm=Algorithm.DATA_PARALLEL,
            task=self.task,
            workers=self.workers,
            inner_steps=1,
            rounds=self.rounds,
            batch_size=self.batch_size,
            seed=self.seed,
            inner=self.inner,
        )


class ChaosKind(enum.Enum):
    """What an interruption does (one row of :data:`host.train.decoupled.chaos.EVENT_ACTIONS`
    per member)."""

    KILL = "kill"
    """The process dies; after the down time it restarts from its last checkpoint."""
    PAUSE = "pause"
    """The process is stopped (SIGSTOP) for the down time, then continued (SIGCONT)."""
    SLOW = "slow"
    """The process's steps take ``factor`` times as long for the down time."""
    SPINE = "spine"
    """One spine switch of one plane fails for the down time (every link of it)."""
    PLANE = "plane"
    """A whole plane fails for the down time."""


PROCESS_KINDS = frozenset({ChaosKind.KILL, ChaosKind.PAUSE, ChaosKind.SLOW})
NETWORK_KINDS = frozenset({ChaosKind.SPINE, ChaosKind.PLANE})


@dataclass(frozen=True)
class ChaosConfig:
    """A seeded schedule of interruptions. Every learner (target) is interrupted as a Poisson
    process of mean ``mtbi_s`` between interruptions, never while it is still interrupted; the
    fabric likewise with ``network_mtbi_s``. Kinds are drawn by weight, down times uniformly
    in [``down_min_s``, ``down_max_s``], slow-down factors in [``slow_min``, ``slow_max``]."""

    seed: int = 0
    mtbi_s: float = 60.0
    """Mean time between interruptions of one learner (a cluster of M: MTBF = mtbi_s / M)."""
    horizon_s: float = 600.0
    """No interruption starts later than this (restarts and resumptions may)."""
    process_weights: tuple[tuple[ChaosKind, float], ...] = (
        (ChaosKind.KILL, 1.0),
        (ChaosKind.PAUSE, 1.0),
        (ChaosKind.SLOW, 1.0),
    )
    network_mtbi_s: float = math.inf
    """Mean time between network interruptions (inf: none)."""
    network_weights: tuple[tuple[ChaosKind, float], ...] = (
        (ChaosKind.SPINE, 1.0),
        (ChaosKind.PLANE, 1.0),
    )
    down_min_s: float = 1.0
    down_max_s: float = 5.0
    slow_min: float = 2.0
    slow_max: float = 4.0
    start_after_s: float = 0.0
    """No interruption before this (the job's setup)."""

    def __post_init__(self) -> None:
        _positive(self, "mtbi_s", "horizon_s")
        if not self.network_mtbi_s > 0:
            raise ConfigError(f"network_mtbi_s must be positive, got {self.network_mtbi_s}")
        for name, allowed, weights in (
            ("process_weights", PROCESS_KINDS, self.process_weights),
            ("network_weights", NETWORK_KINDS, self.network_weights),
        ):
            kinds = [k for k, _w in weights]
            if len(set(kinds)) != len(kinds) or not set(kinds) <= allowed:
                raise ConfigError(
                    f"{name} must name each of {sorted(k.value for k in allowed)} at most "
                    f"once, got {[k.value for k in kinds]}"
                )
            if any(not w >= 0 or not math.isfinite(w) for _k, w in weights) or not any(
                w > 0 for _k, w in weights
            ):
                raise ConfigError(f"{name} must be finite, >= 0 and not all 0, got {weights}")
        if not 0 < self.down_min_s <= self.down_max_s < math.inf:
            raise ConfigError(
                f"need 0 < down_min_s <= down_max_s, got {self.down_min_s}, {self.down_max_s}"
            )
        if not 1.0 <= self.slow_min <= self.slow_max < math.inf:
            raise ConfigError(
                f"need 1 <= slow_min <= slow_max, got {self.slow_min}, {self.slow_max}"
            )
        if self.start_after_s < 0:
            raise ConfigError(f"start_after_s must be >= 0, got {self.start_after_s}")


# -- JSON (what a fabric driver hands its agents; nothing is unpickled) -------------------------

JobConfig = DecoupledConfig | ElasticConfig

JOB_KINDS: dict[str, type[DecoupledConfig] | type[ElasticConfig]] = {
    "decoupled": DecoupledConfig,
    "elastic": ElasticConfig,
}
"""The kinds of job a fabric agent runs, by name."""


def job_to_json(cfg: JobConfig) -> str:
    """``cfg`` as one line of JSON (:func:`job_from_json` reads it back equal; an infinite
    ``max_wall_s`` is written as ``Infinity``, which Python's reader takes)."""
    return json.dumps(to_dict(cfg), sort_keys=True)


def job_from_json(kind: str, text: str | bytes) -> JobConfig:
    """A job of ``kind`` (:data:`JOB_KINDS`) from its JSON form, every key, type and
    combination checked.

    Raises:
        ConfigError: an unknown kind, not JSON, an unknown setting (with the nearest name), a
            wrong type or value, or an invalid combination (the setting's path is named).
    """
    cls = JOB_KINDS.get(kind)
    if cls is None:
        raise ConfigError(f"unknown job kind '{kind}'; valid: {', '.join(JOB_KINDS)}")
    try:
        out: JobConfig = settings_from_json(cls, text)
    except DilocoConfigError as e:
        if isinstance(e, ConfigError):
            raise
        raise ConfigError(str(e)) from None
    return out
