"""The syncer: the global fragments, their outer optimizers, quorums, grace windows and merges.

:class:`SyncerCore` is pure (messages and time in, messages out; no I/O, no clock), so it is
tested without a network. :class:`Syncer` runs it on a thread over a
:class:`~host.train.decoupled.link.Hub`.

**State.** Per fragment p: Θ_p (float32), its version (merges so far), its own
:class:`~host.train.diloco.outer.OuterOptimizer` (Nesterov momentum buffer), and the open
round: the reports since its last merge, at most one per learner (a newer report of the same
learner replaces the older one: it covers more steps).

**Reports.** A REPORT passes every row of :data:`REPORT_CHECKS` or is refused and counted by
:class:`~host.train.decoupled.link.Refusal` (never merged): a fragment the model does not have,
a dtype other than float32, a size other than the fragment's, counters that are negative or
absurd (step < 1, steps since sync outside [1, step], tokens outside [1, steps × tokens per
step], an incarnation outside [0, 2¹⁶), a step beyond the job's budget), a version the syncer
has not made, a non-finite value. A message from a member id the job does not have, or of a
kind the syncer does not take, is refused too.

**Liveness.** A learner is live from its HELLO or report until ``learner_timeout_s`` passes
without one; then it is dropped from quorums (recorded). Its next report welcomes it back.
A learner that says ABORT ("finished") has left.

**Merging fragment p** (:meth:`SyncerCore._advance`): once the open round holds
K' = max(1, min(K, live learners)) reports, the grace window ξ
(:class:`~host.train.decoupled.grace.GraceWindow`) starts; the round is merged when ξ has
passed or every live learner has reported, whichever comes first. With reports m (θ_{m,p},
c_steps, c_tokens): Δ_m = Θ_p − θ_{m,p} (anchored at the syncer's fragment before this merge),
weights by :data:`~host.train.decoupled.weights.WEIGHTINGS`, Δ = RDA or the direct average
(:func:`~host.train.decoupled.weights.combine`; the embedding directly), Θ_p ← OuterOpt(Θ_p, Δ),
the version + 1, and MERGED (Θ_p) goes to every learner whose report was merged. PULL is
answered with FRAGMENT for every fragment.

With K = M, no grace window, equal weights, direct averaging, P = 1 and τ = 0 every learner
waits for the merge before its next step and the merge is DiLoCo's outer step.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from host.train.decoupled.config import MAX_INCARNATIONS, Anchor, DecoupledConfig
from host.train.decoupled.fragments import Fragmentation
from host.train.decoupled.grace import GraceWindow, Timing
from host.train.decoupled.link import POLL_S, Hub, Inbound, Refusal
from host.train.decoupled.weights import combine, merge_weights
from host.train.diloco.outer import OuterOptimizer
from host.train.diloco.task import WorkerTask, evaluate
from host.train.diloco.wire import MessageKind, TensorMessage


@dataclass(frozen=True)
class Report:
    learner: int
    fragment: int
    base_version: int
    step: int
    steps: int  # since the learner last received the fragment
    tokens: int
    incarnation: int
    vector: np.ndarray
    at_s: float


@dataclass(frozen=True)
class Included:
    """A report a merge took."""

    learner: int
    incarnation: int
    step: int
    steps: int
    tokens: int
    base_version: int
    weight: float


@dataclass(frozen=True)
class MergeRecord:
    """One merge of one fragment. Times in seconds (``*_at_s`` on the core's clock)."""

    fragment: int
    version: int  # after the merge
    opened_at_s: float  # the round's first report
    quorum_at_s: float
    merged_at_s: float
    quorum: int  # reports merged
    live: int  # live learners at the merge
    grace_s: float  # the window granted at the quorum
    waited_s: float  # quorum to merge (≤ grace_s: everyone live may have reported sooner)
    tokens: int
    staleness: int  # versions the oldest report's copy was behind
    delta_norm: float
    included: tuple[Included, ...]


@dataclass(frozen=True)
class LivenessEvent:
    at_s: float
    learner: int
    what: str  # "dropped" | "returned" | "left"


@dataclass(frozen=True)
class Send:
    """A message the core wants sent."""

    learner: int
    kind: MessageKind
    round: int
    tensor: int
    array: np.ndarray
    counters: tuple[int, ...] = ()


@dataclass
class _Round:
    opened_at: float
    reports: dict[int, Report] = field(default_factory=dict)
    quorum_at: float | None = None
    deadline: float = math.inf
    grace_s: float = 0.0


def _start(learner: int) -> Send:
    return Send(learner, MessageKind.START, 0, 0, np.zeros(0, np.uint8))


class SyncerCore:
    """The syncer's state and rules (pure: time passed in).

    Args:
        initial: the model's parameters at the start (every learner's initial weights).
        tokens_per_step: the most tokens one learner step can have (for the counter checks).
        now: the start; every learner counts as live until its timeout from here.
    """

    def __init__(
        self,
        cfg: DecoupledConfig,
        fragmentation: Fragmentation,
        initial: Sequence[torch.Tensor],
        tokens_per_step: int,
        *,
        now: float = 0.0,
    ) -> None:
        self.cfg = cfg
        self.fragmentation = fragmentation
        self.tokens_per_step = tokens_per_step
        self.theta = [f.gather(initial).clone() for f in fragmentation.fragments]
        self.versions = [0] * len(fragmentation)
        self.finishing = False  # see finish()
        self.history: list[dict[int, torch.Tensor]] = [{0: t} for t in self.theta]
        """Per fragment: version → Θ_p of that version (the last ``history_versions``)."""
        self.outer = [OuterOptimizer(cfg.outer) for _ in fragmentation.fragments]
        self.masks = [f.direct_mask() for f in fragmentation.fragments]
        self.grace = GraceWindow(cfg.syncer.grace, cfg.overlap_steps)
        self.rounds: dict[int, _Round] = {}
        self.last_seen: dict[int, float] = {}
        self.departed: set[int] = set()
        self.dropped: set[int] = set()
        self.refused: Counter[Refusal] = Counter()
        self.counts: Counter[str] = Counter()
        self.merges: list[MergeRecord] = []
        self.liveness: list[LivenessEvent] = []
        self.fragment_tokens = 0  # Σ over merges of the reports' tokens
        self.greeted: set[int] = set()
        self.started_at: float | None = None
        """When every learner had connected and START went out (None: not yet)."""
        for m in range(cfg.learners):  # every learner is presumed live from the start
            self.last_seen[m] = now

    # -- liveness --------------------------------------------------------------------------

    def _seen(self, now: float, learner: int) -> None:
        if learner in self.dropped:
            self.dropped.discard(learner)
            self.liveness.append(LivenessEvent(now, learner, "returned"))
        self.departed.discard(learner)
        self.last_seen[learner] = now

    def _update_liveness(self, now: float) -> None:
        timeout = self.cfg.syncer.learner_timeout_s
        for m, seen in self.last_seen.items():
            if m not in self.dropped and m not in self.departed and now - seen > timeout:
                self.dropped.add(m)
                self.liveness.append(LivenessEvent(now, m, "dropped"))

    def live(self) -> set[int]:
        """Learners that count for quorums (as of the last update)."""
        return set(self.last_seen) - self.dropped - self.departed

    # -- messages --------------------------------------------------------------------------

    def receive(self, now: float, learner: int, msg: TensorMessage) -> list[Send]:
        """Handle one message of ``learner`` that arrived at ``now``; what to send."""
        if not 0 <= learner < self.cfg.learners:
            self.refused[Refusal.UNKNOWN_MEMBER] += 1
            return []
        handler = RECEIVERS.get(msg.kind)
        if handler is None:
            self.refused[Refusal.UNEXPECTED_KIND] += 1
            return []
        return handler(self, now, learner, msg) + self._advance(now)

    def connection_ended(self, now: float, learner: int) -> None:
        """The learner's connection failed: nothing changes until its timeout (a process
        may reconnect); recorded."""
        self.counts["connections_ended"] += 1

    def tick(self, now: float) -> list[Send]:
        """Drop learners that timed out and merge what is due at ``now``."""
        return self._advance(now)

    def next_deadline(self) -> float:
        """When :meth:`tick` next has something to do (inf: only a message can change
        anything)."""
        timeout = self.cfg.syncer.learner_timeout_s
        times = [r.deadline for r in self.rounds.values() if r.quorum_at is not None]
        times += [
            seen + timeout
            for m, seen in self.last_seen.items()
            if m not in self.dropped and m not in self.departed
        ]
        return min(times, default=math.inf)

    def _hello(self, now: float, learner: int, msg: TensorMessage) -> list[Send]:
        """A learner connected. Once all M have, every one of them gets START (and any later
        one at once): learners that begin together stay in step on a calm run, so their
        reports of a fragment fall into one grace window."""
        self._seen(now, learner)
        self.grace.connected(now, learner)
        self.greeted.add(learner)
        if self.started_at is not None:
            return [_start(learner)]
        if len(self.greeted) < self.cfg.learners:
            return []
        self.started_at = now
        return [_start(m) for m in sorted(self.greeted)]

    def _abort(self, now: float, learner: int, msg: TensorMessage) -> list[Send]:
        self.departed.add(learner)
        self.dropped.discard(learner)
        self.liveness.append(LivenessEvent(now, learner, "left"))
        return []

    def _pull(self, now: float, learner: int, msg: TensorMessage) -> list[Send]:
        self._seen(now, learner)
        self.counts["pulls"] += 1
        return [
            Send(learner, MessageKind.FRAGMENT, self.versions[p], p, self.theta[p].numpy())
            for p in range(len(self.theta))
        ]

    def _report(self, now: float, learner: int, msg: TensorMessage) -> list[Send]:
        for reason, ok in REPORT_CHECKS:
            if not ok(self, msg):
                self.refused[reason] += 1
                return []
        self._seen(now, learner)
        step, steps, tokens, incarnation = msg.counters
        self.grace.report(now, learner, incarnation, step)
        p = msg.tensor
        r = self.rounds.setdefault(p, _Round(now))
        if learner in r.reports:
            self.counts["superseded"] += 1
        r.reports[learner] = Report(
            learner, p, msg.round, step, steps, tokens, incarnation, msg.array.copy(), now
        )
        return []

    # -- report checks ---------------------------------------------------------------------

    def _counters_ok(self, msg: TensorMessage) -> bool:
        step, steps, tokens, incarnation = msg.counters
        return (
            1 <= step <= self.cfg.steps
            and 1 <= steps <= step
            and 1 <= tokens <= steps * self.tokens_per_step
            and 0 <= incarnation < MAX_INCARNATIONS
        )

    # -- merging ---------------------------------------------------------------------------

    def _quorum(self, live: set[int]) -> int:
        return max(1, min(self.cfg.syncer.quorum, len(live)))

    def finish(self) -> None:
        """The job ended: from now on reports are held, not merged, until :meth:`flush`, so
        that the last reports the learners hand over merge once per fragment. (Merged as they
        came, K = 1 made up to one merge per learner and fragment within a few milliseconds,
        each a small Δ with a full outer-momentum push: on a calm run the global model's
        final loss rose from 0.205 to 0.376 nats.)"""
        self.finishing = True

    def _advance(self, now: float) -> list[Send]:
        self._update_liveness(now)
        if self.finishing:
            return []
        live = self.live()
        out: list[Send] = []
        for p in sorted(self.rounds):
            r = self.rounds[p]
            if r.quorum_at is None and len(r.reports) >= self._quorum(live):
                r.quorum_at = now
                r.grace_s = self.grace.window_s()
                r.deadline = now + r.grace_s
                self.grace.observe(Timing.QUORUM, now - r.opened_at)
            if r.quorum_at is not None and (now >= r.deadline or live <= set(r.reports)):
                out += self._merge(now, p, len(live))
        return out

    def anchor_of(self, p: int, base_version: int) -> np.ndarray:
        """What a report of fragment ``p`` based on ``base_version`` is anchored at
        (:data:`ANCHORS`)."""
        return ANCHORS[self.cfg.syncer.anchor](self, p, base_version)

    def _base_anchor(self, p: int, base_version: int) -> np.ndarray:
        kept = self.history[p].get(base_version)
        if kept is None:
            self.counts["anchor_evicted"] += 1
            return self.theta[p].numpy()
        return kept.numpy()

    def _keep(self, p: int) -> None:
        """Θ_p's current version into the history (the oldest beyond the limit out)."""
        h = self.history[p]
        h[self.versions[p]] = self.theta[p]
        while len(h) > self.cfg.syncer.history_versions:
            del h[min(h)]

    def _merge(self, now: float, p: int, live: int) -> list[Send]:
        r = self.rounds.pop(p)
        reports = [r.reports[m] for m in sorted(r.reports)]
        anchor = self.theta[p]
        deltas = np.stack([self.anchor_of(p, rep.base_version) - rep.vector for rep in reports])
        w = merge_weights(
            self.cfg.syncer.weighting, [x.steps for x in reports], [x.tokens for x in reports]
        )
        delta = combine(self.cfg.syncer.averaging, deltas, w, self.masks[p])
        share = 1.0
        if self.cfg.syncer.share_scaled:
            share = len(reports) / max(live, len(reports))
            delta *= share
        self.theta[p] = self.outer[p].step(anchor, torch.from_numpy(delta), share)
        self.versions[p] += 1
        self._keep(p)
        tokens = sum(x.tokens for x in reports)
        self.fragment_tokens += tokens
        assert r.quorum_at is not None
        self.merges.append(
            MergeRecord(
                fragment=p,
                version=self.versions[p],
                opened_at_s=r.opened_at,
                quorum_at_s=r.quorum_at,
                merged_at_s=now,
                quorum=len(reports),
                live=live,
                grace_s=r.grace_s,
                waited_s=now - r.quorum_at,
                tokens=tokens,
                staleness=self.versions[p] - 1 - min(x.base_version for x in reports),
                delta_norm=float(np.linalg.norm(delta)),
                included=tuple(
                    Included(
                        x.learner,
                        x.incarnation,
                        x.step,
                        x.steps,
                        x.tokens,
                        x.base_version,
                        float(wt),
                    )
                    for x, wt in zip(reports, w)
                ),
            )
        )
        vec = self.theta[p].numpy()
        return [
            Send(x.learner, MessageKind.MERGED, self.versions[p], p, vec, (len(reports),))
            for x in reports
        ]

    @property
    def tokens_merged(self) -> float:
        """Tokens the global model has taken in: every report counts its tokens for one
        fragment, 1/P of the model, so Σ over merges of the reports' tokens ÷ P."""
        return self.fragment_tokens / len(self.theta)

    def observe_sync(self, seconds: float) -> None:
        """A merge took ``seconds`` from its due time to its replies handed over (ξ_sync)."""
        self.grace.observe(Timing.SYNC, seconds)

    def flush(self, now: float) -> list[Send]:
        """The job ended: merge every round that holds a report."""
        out: list[Send] = []
        for p in sorted(self.rounds):
            r = self.rounds[p]
            if r.quorum_at is None:
                r.quorum_at = now
            out += self._merge(now, p, len(self.live()))
        return out

    def global_vector(self, params: Sequence[torch.Tensor]) -> None:
        """Write the global model (every Θ_p) into ``params``."""
        for f, theta in zip(self.fragmentation.fragments, self.theta):
            f.scatter(params, theta)


ANCHORS: dict[Anchor, Callable[[SyncerCore, int, int], np.ndarray]] = {
    Anchor.CURRENT: lambda s, p, base: s.theta[p].numpy(),
    Anchor.BASE: SyncerCore._base_anchor,
}
"""Per anchor: (core, fragment, the report's base version) → the vector Δ is taken from."""

RECEIVERS: dict[MessageKind, Callable[[SyncerCore, float, int, TensorMessage], list[Send]]] = {
    MessageKind.HELLO: SyncerCore._hello,
    MessageKind.REPORT: SyncerCore._report,
    MessageKind.PULL: SyncerCore._pull,
    MessageKind.ABORT: SyncerCore._abort,
}
"""What the syncer does with each kind it takes (any other kind is refused and counted)."""

REPORT_CHECKS: tuple[tuple[Refusal, Callable[[SyncerCore, TensorMessage], bool]], ...] = (
    (Refusal.UNKNOWN_FRAGMENT, lambda s, m: 0 <= m.tensor < len(s.theta)),
    (Refusal.BAD_DTYPE, lambda s, m: m.array.dtype == np.float32),
    (Refusal.BAD_SHAPE, lambda s, m: m.array.size == s.theta[m.tensor].numel()),
    (Refusal.BAD_COUNTER, SyncerCore._counters_ok),
    (Refusal.FUTURE_VERSION, lambda s, m: m.round <= s.versions[m.tensor]),
    (Refusal.NON_FINITE, lambda s, m: bool(np.isfinite(m.array).all())),
)
"""Every check a REPORT must pass, in order; the first that fails is the refusal counted."""


@dataclass(frozen=True)
class EvalPoint:
    """The global model's validation loss."""

    at_s: float  # since the job's origin
    merges: int
    tokens_merged: float  # SyncerCore.tokens_merged
    val_loss: float


class Syncer:
    """The syncer's thread: the hub's messages into the core, its sends out, evaluations.
    The core's clock is seconds since ``origin``.

    Args:
        task: a bound task whose model is used to evaluate the global model.
        origin: ``time.monotonic()`` of the job's start.
    """

    def __init__(self, core: SyncerCore, hub: Hub, task: WorkerTask, *, origin: float) -> None:
        self.core = core
        self.hub = hub
        self.task = task
        self.origin = origin
        self.evals: list[EvalPoint] = []
        self.unsent = 0
        self._next_eval = core.cfg.syncer.eval_every_merges

    def _send(self, sends: list[Send]) -> None:
        for s in sends:
            ok = self.hub.send(
                s.learner, s.kind, s.round, s.array, tensor=s.tensor, counters=s.counters
            )
            self.unsent += not ok

    def evaluate(self) -> None:
        core = self.core
        core.global_vector(list(self.task.run.model.parameters()))
        loss, _probs = evaluate(self.task)
        self.evals.append(
            EvalPoint(time.monotonic() - self.origin, len(core.merges), core.tokens_merged, loss)
        )

    def _clock(self) -> float:
        """The core's clock: seconds since the job's origin."""
        return time.monotonic() - self.origin

    def _step(self, inbound: Inbound | None) -> None:
        core = self.core
        t0 = time.monotonic()
        merges_before = len(core.merges)
        sends: list[Send] = []
        if inbound is not None and inbound.msg is None:
            core.connection_ended(inbound.at_s - self.origin, inbound.member)
        elif inbound is not None and inbound.msg is not None:
            sends += core.receive(inbound.at_s - self.origin, inbound.member, inbound.msg)
        sends += core.tick(self._clock())
        self._send(sends)
        if len(core.merges) > merges_before:
            core.observe_sync(time.monotonic() - t0)
        if len(core.merges) >= self._next_eval:
            self.evaluate()
            self._next_eval = len(core.merges) + core.cfg.syncer.eval_every_merges

    def run(self, stop: threading.Event) -> None:
        """Serve until ``stop`` is set, then on until every live learner has left (handing
        over its last reports, held: :meth:`SyncerCore.finish`) or ``drain_s`` passed and the
        inbox is empty; then merge what is left, each fragment once."""
        core = self.core
        drain_until: float | None = None
        while True:
            if drain_until is None and stop.is_set():
                drain_until = time.monotonic() + core.cfg.syncer.drain_s
                core.finish()
            wait = min(POLL_S, max(0.0, core.next_deadline() - self._clock()))
            try:
                inbound: Inbound | None = self.hub.inbox.get(timeout=wait)
            except queue.Empty:
                inbound = None
                if drain_until is not None and (not core.live() or time.monotonic() >= drain_until):
                    break
            self._step(inbound)
        self._send(core.flush(self._clock()))
        self.evaluate()
