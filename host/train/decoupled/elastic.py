"""Elastic data parallel, the baseline: synchronous steps over the live workers, a rendezvous
per round at a coordinator, a group that stops, re-forms and continues when a worker dies or
returns.

Every round r each member computes the gradient of its own batch and sends it (GRADIENT) to
the coordinator; once every member's gradient of r is in, the coordinator sends the mean
(MEAN) to every member, which applies it with its inner optimizer: the round is committed and
every member holds the same parameters and optimizer state. The all-reduce is a reduce to the
coordinator and a broadcast back, over reliable MRC messages.

:class:`CoordinatorCore` (pure: messages and time in, messages out) keeps the rendezvous:

* **Forming.** At the start the group forms from the workers that JOIN (all have the same
  initial state); it is complete when every worker joined or ``form_timeout_s`` after
  the first; each member is admitted (STATE without payload: keep your own) at round 0.
* **A member missing.** ``rendezvous_timeout_s`` after a round's first gradient (or after a
  worker asked to join: the rendezvous is open), the members whose gradient did not come are
  dropped; the round fails for everyone (as a ring all-reduce
  fails when a member dies: the gradients of that attempt are discarded) and the rest get
  RETRY and redo the round on new batches. A member that restarts (JOIN with a new
  incarnation) fails the round the same way.
* **A worker returning.** A JOIN outside forming waits for the next commit: the MEAN to one
  member (the donor, the lowest rank) asks it for its state; the donor sends STATE
  (parameters and optimizer state, after that round) which the coordinator relays to the
  joiners, who become members from the next round. A GRADIENT from a non-member (a worker
  dropped for being slow or paused) gets RETRY "not a member" and the worker JOINs again.
  If no member is left, a joiner is admitted with its own (stale) state.
* **Re-forming costs time** (``reconfigure_s``, the paper's downscale and upscale times):
  every change of the group holds the messages that let the group step again — the RETRY
  after a drop, the STATE to admitted workers — for that long, so the whole job stops; the
  rendezvous timeout counts from the end of the stop.

:func:`run_worker` is one incarnation of a worker (restore the checkpoint after a restart,
join, rounds until the budget is committed). Records: each attempt of each worker
(:class:`AttemptRecord`: committed or not), the commits, the re-formations.
"""

from __future__ import annotations

import math
import pathlib
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from host.api import MessageEndpoint
from host.train.decoupled.config import MAX_INCARNATIONS, ElasticConfig
from host.train.decoupled.link import POLL_S, Hub, Inbound, Refusal, Uplink
from host.train.decoupled.member import Counters, MemberLog, MemberState, counter, run_member
from host.train.decoupled.process import Life
from host.train.diloco.task import evaluate
from host.train.diloco.wire import MessageKind, TensorMessage
from host.train.loop import flat_grad, set_flat_grad

_EMPTY = np.zeros(0, dtype=np.uint8)


# -- the coordinator ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Commit:
    round: int
    at_s: float
    opened_at_s: float  # the round's (last attempt's) first gradient
    group: tuple[int, ...]
    tokens: int


@dataclass(frozen=True)
class Reform:
    """The group changed: members dropped, or joiners admitted."""

    at_s: float
    round: int
    reason: str  # "timeout" | "restarted" | "left" | "admitted" | "formed"
    workers: tuple[int, ...]  # who was dropped or admitted
    group: tuple[int, ...]  # the group afterwards


@dataclass(frozen=True)
class Out:
    """A message the coordinator wants sent."""

    worker: int
    kind: MessageKind
    round: int
    array: np.ndarray
    counters: tuple[int, ...]


class CoordinatorCore:
    """The rendezvous and the reduce (pure: time passed in)."""

    def __init__(self, cfg: ElasticConfig, tokens_per_step: int) -> None:
        self.cfg = cfg
        self.tokens_per_step = tokens_per_step
        self.round = 0
        self.group: set[int] = set()
        self.forming = True
        self.first_join: float | None = None
        self.pending: set[int] = set()  # joined during forming
        self.joiners: set[int] = set()  # waiting for a donor
        self.healing: dict[int, int] = {}  # joiner -> donor
        self.incarnation: dict[int, int] = {}
        self.grads: dict[int, np.ndarray] = {}
        self.first_at: float | None = None
        self.commits: list[Commit] = []
        self.reforms: list[Reform] = []
        self.refused: Counter[Refusal] = Counter()
        self.counts: Counter[str] = Counter()
        self.held: list[tuple[float, Out]] = []  # released at their time (re-forming)
        self.stopped_until = -math.inf  # the group re-forms until then

    def receive(self, now: float, worker: int, msg: TensorMessage) -> list[Out]:
        if not 0 <= worker < self.cfg.workers:
            self.refused[Refusal.UNKNOWN_MEMBER] += 1
            return []
        handler = COORDINATOR_RECEIVERS.get(msg.kind)
        if handler is None:
            self.refused[Refusal.UNEXPECTED_KIND] += 1
            return []
        return handler(self, now, worker, msg) + self.tick(now)

    def next_deadline(self) -> float:
        times = [math.inf]
        if self.forming and self.first_join is not None:
            times.append(self.first_join + self.cfg.form_timeout_s)
        if self.first_at is not None:
            times.append(self._round_deadline())
        times += [at for at, _ in self.held]
        return min(times)

    def _round_deadline(self) -> float:
        assert self.first_at is not None
        return max(self.first_at, self.stopped_until) + self.cfg.rendezvous_timeout_s

    def _reform(self, now: float, outs: list[Out]) -> list[Out]:
        """``outs`` let the group step again after it changed: sent now, or once the
        re-formation's ``reconfigure_s`` has passed."""
        if self.cfg.reconfigure_s <= 0:
            return outs
        self.stopped_until = max(self.stopped_until, now + self.cfg.reconfigure_s)
        self.counts["reconfigurations"] += 1
        self.held += [(self.stopped_until, o) for o in outs]
        return []

    def _release(self, now: float) -> list[Out]:
        if not self.held:
            return []
        due = [o for at, o in self.held if at <= now]
        self.held = [(at, o) for at, o in self.held if at > now]
        return due

    def tick(self, now: float) -> list[Out]:
        out: list[Out] = self._release(now)
        if self.forming and (
            len(self.pending) == self.cfg.workers
            or (self.first_join is not None and now >= self.first_join + self.cfg.form_timeout_s)
        ):
            out += self._formed(now)
        if not self.forming and self.first_at is not None and now >= self._round_deadline():
            missing = tuple(sorted(self.group - set(self.grads)))
            if missing:
                out += self._fail_round(now, "timeout", missing)
        if not self.forming and not self.group and self.joiners:
            out += self._admit_own(now, min(self.joiners))
        return out + self._maybe_commit(now)

    # -- membership ------------------------------------------------------------------------

    def _formed(self, now: float) -> list[Out]:
        self.forming = False
        self.group = set(self.pending)
        self.reforms.append(
            Reform(now, self.round, "formed", tuple(sorted(self.pending)), self._g())
        )
        out = [self._state_own(w) for w in sorted(self.pending)]
        self.pending.clear()
        return out

    def _g(self) -> tuple[int, ...]:
        return tuple(sorted(self.group))

    def _state_own(self, worker: int) -> Out:
        return Out(worker, MessageKind.STATE, self.round, np.zeros(0, np.float32), (0,))

    def _admit_own(self, now: float, worker: int) -> list[Out]:
        self.joiners.discard(worker)
        self.group.add(worker)
        self.reforms.append(Reform(now, self.round, "admitted", (worker,), self._g()))
        return self._reform(now, [self._state_own(worker)])

    def _remove(self, worker: int) -> None:
        """``worker`` is no member any more: its joiners need another donor."""
        self.group.discard(worker)
        self.grads.pop(worker, None)
        self.joiners.discard(worker)
        self.healing.pop(worker, None)
        for j, donor in list(self.healing.items()):
            if donor == worker:
                del self.healing[j]
                self.joiners.add(j)

    def _fail_round(self, now: float, reason: str, dropped: tuple[int, ...]) -> list[Out]:
        present = sorted(set(self.grads) - set(dropped))
        for w in dropped:
            self._remove(w)
        self.reforms.append(Reform(now, self.round, reason, dropped, self._g()))
        self.grads.clear()
        self.first_at = None
        self.counts["failed_rounds"] += 1
        return self._reform(
            now, [Out(w, MessageKind.RETRY, self.round, _EMPTY, (1,)) for w in present]
        )

    # -- messages --------------------------------------------------------------------------

    def _join(self, now: float, worker: int, msg: TensorMessage) -> list[Out]:
        inc = msg.counter("incarnation")
        if not 0 <= inc < MAX_INCARNATIONS:
            self.refused[Refusal.BAD_COUNTER] += 1
            return []
        self.incarnation[worker] = inc
        out: list[Out] = []
        if worker in self.group:  # it restarted (or gave up waiting): its round is lost
            out += self._fail_round(now, "restarted", (worker,))
        self.healing.pop(worker, None)
        if self.forming:
            self.first_join = now if self.first_join is None else self.first_join
            self.pending.add(worker)
            return out
        self.joiners.add(worker)
        if self.first_at is None:  # the rendezvous is open: members must show up in time
            self.first_at = now
        return out

    def _gradient(self, now: float, worker: int, msg: TensorMessage) -> list[Out]:
        member = worker in self.group and msg.counter("incarnation") == self.incarnation.get(worker)
        if not member or msg.round != self.round:
            self.refused[Refusal.STALE] += 1
            if member:  # a member out of step: it joins again
                self._remove(worker)
            return [Out(worker, MessageKind.RETRY, self.round, _EMPTY, (0,))]
        if msg.array.dtype != np.float32 or not np.isfinite(msg.array).all():
            self.refused[
                Refusal.NON_FINITE if msg.array.dtype == np.float32 else Refusal.BAD_DTYPE
            ] += 1
            return []
        if self.grads and msg.array.size != next(iter(self.grads.values())).size:
            self.refused[Refusal.BAD_SHAPE] += 1
            return []
        self.grads[worker] = msg.array.copy()
        if self.first_at is None:
            self.first_at = now
        return []

    def _state(self, now: float, worker: int, msg: TensorMessage) -> list[Out]:
        healees = sorted(j for j, d in self.healing.items() if d == worker)
        for j in healees:
            del self.healing[j]
        if msg.round != self.round or worker not in self.group:
            self.joiners.update(healees)
            self.refused[Refusal.STALE] += 1
            return []
        self.group.update(healees)
        if healees:
            self.reforms.append(Reform(now, self.round, "admitted", tuple(healees), self._g()))
        arr = np.array(msg.array)
        outs = [Out(j, MessageKind.STATE, self.round, arr, (1,)) for j in healees]
        return self._reform(now, outs) if healees else outs

    def _abort(self, now: float, worker: int, msg: TensorMessage) -> list[Out]:
        if worker in self.group:
            self._remove(worker)
            self.reforms.append(Reform(now, self.round, "left", (worker,), self._g()))
        self.pending.discard(worker)
        self.joiners.discard(worker)
        return []

    def _maybe_commit(self, now: float) -> list[Out]:
        if self.forming or not self.group or not set(self.grads) >= self.group:
            return []
        members = sorted(self.group)
        stacked = np.stack([self.grads[w] for w in members]).astype(np.float64)
        mean: np.ndarray = stacked.sum(axis=0) / len(members)
        donor = members[0] if self.joiners else -1
        evaluator = members[0] if (self.round + 1) % self.cfg.eval_every_rounds == 0 else -1
        assert self.first_at is not None
        self.commits.append(
            Commit(
                self.round, now, self.first_at, tuple(members), len(members) * self.tokens_per_step
            )
        )
        arr = mean.astype(np.float32)
        out = [
            Out(
                w,
                MessageKind.MEAN,
                self.round,
                arr,
                (len(members), int(w == donor), int(w == evaluator)),
            )
            for w in members
        ]
        if donor >= 0:
            self.healing.update({j: donor for j in self.joiners})
            self.joiners.clear()
        self.round += 1
        self.grads.clear()
        self.first_at = None
        return out


COORDINATOR_RECEIVERS: dict[
    MessageKind, Callable[[CoordinatorCore, float, int, TensorMessage], list[Out]]
] = {
    MessageKind.HELLO: lambda c, now, w, m: [],
    MessageKind.JOIN: CoordinatorCore._join,
    MessageKind.GRADIENT: CoordinatorCore._gradient,
    MessageKind.STATE: CoordinatorCore._state,
    MessageKind.ABORT: CoordinatorCore._abort,
}
"""What the coordinator does with each kind it takes (any other is refused and counted)."""


class Coordinator:
    """The coordinator's thread over a hub; the core's clock is seconds since ``origin``."""

    def __init__(self, core: CoordinatorCore, hub: Hub, *, origin: float) -> None:
        self.core = core
        self.hub = hub
        self.origin = origin
        self.unsent = 0

    def _send(self, outs: list[Out]) -> None:
        for o in outs:
            ok = self.hub.send(o.worker, o.kind, o.round, o.array, counters=o.counters)
            self.unsent += not ok

    def run(self, stop: threading.Event) -> None:
        core = self.core
        while True:
            now = time.monotonic() - self.origin
            wait = min(POLL_S, max(0.0, core.next_deadline() - now))
            try:
                inbound: Inbound | None = self.hub.inbox.get(timeout=wait)
            except queue.Empty:
                inbound = None
                if stop.is_set():
                    return
            outs: list[Out] = []
            if inbound is not None and inbound.msg is not None:
                outs += core.receive(inbound.at_s - self.origin, inbound.member, inbound.msg)
            outs += core.tick(time.monotonic() - self.origin)
            self._send(outs)


# -- a worker ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AttemptRecord:
    """One attempt of one round by one worker incarnation (seconds since the job's origin)."""

    worker: int
    incarnation: int
    round: int
    start_at_s: float
    end_at_s: float  # the round's result received (or given up)
    work_s: float  # compute padded to the emulated step time
    train_loss: float
    tokens: int
    committed: bool


@dataclass(frozen=True)
class WorkerEval:
    at_s: float
    round: int  # rounds committed when evaluated
    val_loss: float


@dataclass
class WorkerLog(MemberLog):
    attempts: list[AttemptRecord] = field(default_factory=list)
    evals: list[WorkerEval] = field(default_factory=list)


class WorkerState(MemberState):
    """What survives a worker's restarts: its task, optimizer, round and last checkpoint."""

    def __init__(self, cfg: ElasticConfig, rank: int, path: pathlib.Path | None = None) -> None:
        self.cfg = cfg
        self.round = 0
        super().__init__(cfg.reference(), rank, path)

    def counters(self) -> Counters:
        return {"round": (self.round,)}

    def load_counters(self, counters: Counters) -> None:
        (self.round,) = counter(counters, "round", 1)

    def gradient(self) -> tuple[np.ndarray, float, int]:
        """(gradient, loss, tokens) of the next batch."""
        run = self.task.run
        x, y = run.batch(self.round)
        self.opt.zero_grad(set_to_none=True)
        loss = run.loss(self.model, x, y)
        torch.autograd.backward(loss)
        return flat_grad(self.model), float(loss.detach()), int(y.numel())

    def apply(self, mean: np.ndarray) -> None:
        set_flat_grad(self.model, mean)
        self.opt.step()


class WorkerRun:
    """One incarnation of an elastic worker over its uplink: join, then rounds until the
    budget is committed."""

    def __init__(
        self,
        cfg: ElasticConfig,
        state: WorkerState,
        link: Uplink,
        life: Life,
        log: WorkerLog,
        origin: float,
    ) -> None:
        self.cfg, self.state, self.link, self.life, self.log = cfg, state, link, life, log
        self.origin = origin

    def _next(self, want: frozenset[MessageKind], timeout_s: float) -> TensorMessage | None:
        """The next message of a kind in ``want`` (others are counted and skipped)."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.life.check()
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            msg = self.link.recv(min(POLL_S, left))
            if msg is None:
                continue
            if msg.kind in want:
                return msg
            self.log.counts["skipped"] += 1

    def join(self) -> None:
        """JOIN until admitted; load the state it is given."""
        inc = self.life.incarnation
        while True:
            self.life.gate()
            self.link.send_bytes(MessageKind.JOIN, self.state.round, b"", counters=(inc,))
            self.log.counts["joins"] += 1
            msg = self._next(frozenset({MessageKind.STATE}), self.cfg.join_timeout_s)
            if msg is None:
                continue
            if msg.counter("carried"):
                self.state.load(msg.array)
            self.state.round = msg.round
            return

    def rounds(self) -> None:
        s, cfg = self.state, self.cfg
        self.join()
        want = frozenset({MessageKind.MEAN, MessageKind.RETRY})
        while s.round < cfg.rounds:
            self.life.gate()
            t0 = time.monotonic()
            grad, loss, tokens = s.gradient()
            work = self.life.pace(t0, cfg.min_step_s)
            self.life.gate()
            attempted = s.round
            self.link.send(MessageKind.GRADIENT, attempted, grad, counters=(self.life.incarnation,))
            msg = self._next(want, cfg.reply_timeout_s)
            committed = msg is not None and msg.kind is MessageKind.MEAN and msg.round == attempted
            if committed and msg is not None:
                s.apply(np.array(msg.array))
                s.round = attempted + 1
                if msg.counter("donor"):
                    self.link.send(MessageKind.STATE, s.round, s.state(), counters=(1,))
            self.log.keep(
                self.log.attempts,
                AttemptRecord(
                    s.rank,
                    self.life.incarnation,
                    attempted,
                    t0 - self.origin,
                    time.monotonic() - self.origin,
                    work,
                    loss,
                    tokens,
                    committed,
                ),
            )
            if committed and msg is not None:
                if msg.counter("evaluate"):
                    val, _probs = evaluate(s.task)
                    self.log.keep(
                        self.log.evals, WorkerEval(time.monotonic() - self.origin, s.round, val)
                    )
                if s.round % cfg.checkpoint_every_steps == 0:
                    s.save()
            elif msg is not None and msg.kind is MessageKind.RETRY and msg.counter("member"):
                s.round = msg.round
                self.log.counts["retries"] += 1
            else:
                self.log.counts["rejoins"] += 1
                self.join()
        self.link.send_bytes(MessageKind.ABORT, s.round, b"finished")
        self.link.flush(cfg.reply_timeout_s)


def run_worker(
    cfg: ElasticConfig,
    state: WorkerState,
    log: WorkerLog,
    life: Life,
    endpoint: MessageEndpoint,
    *,
    coordinator_host: int,
    fingerprint: bytes,
    origin: float,
) -> None:
    """One incarnation of an elastic worker.

    Raises:
        Killed: killed, or stopped at the end of the job.
        LinkError: the coordinator refused it or went away.
        CheckpointError: a restart found an unreadable checkpoint.
    """
    run_member(
        state,
        log,
        life,
        endpoint,
        lambda link: WorkerRun(cfg, state, link, life, log, origin).rounds(),
        hub_host=coordinator_host,
        hub=cfg.workers,
        fingerprint=fingerprint,
        timeout_s=cfg.setup_timeout_s,
    )
