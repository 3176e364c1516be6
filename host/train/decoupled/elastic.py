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
  initial state); it is complete when every worker joined or ``rendezvous_timeout_s`` after
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

:func:`run_worker` is one incarnation of a worker (restore the checkpoint after a restart,
join, rounds until the budget is committed). Records: each attempt of each worker
(:class:`AttemptRecord`: committed or not), the commits, the re-formations.
"""

from __future__ import annotations

import copy
import math
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from host.api import MessageEndpoint
from host.train.decoupled.config import MAX_INCARNATIONS, ElasticConfig
from host.train.decoupled.errors import LinkError
from host.train.decoupled.link import POLL_S, Hub, Inbound, Refusal, Uplink
from host.train.decoupled.process import Life
from host.train.diloco.config import InnerOptimizer
from host.train.diloco.task import WorkerTask, bind, evaluate
from host.train.diloco.wire import MessageKind, TensorMessage
from host.train.diloco.worker import get_flat, inner_optimizer, set_flat
from host.train.loop import flat_grad, set_flat_grad

_EMPTY = np.zeros(0, dtype=np.uint8)

# -- optimizer state as one vector -------------------------------------------------------------

OPTIMIZER_STATE: dict[InnerOptimizer, tuple[tuple[str, ...], bool]] = {
    InnerOptimizer.ADAMW: (("exp_avg", "exp_avg_sq"), True),
    InnerOptimizer.SGD: (("momentum_buffer",), False),
}
"""Per inner optimizer: its per-parameter state tensors and whether it counts steps."""


def state_vector(
    model: torch.nn.Module, opt: torch.optim.Optimizer, kind: InnerOptimizer
) -> np.ndarray:
    """Parameters, then each state tensor of every parameter, then the step count (float32).
    State not created yet counts as zeros."""
    keys, has_step = OPTIMIZER_STATE[kind]
    params = list(model.parameters())
    parts = [get_flat(model)]
    for key in keys:
        for p in params:
            t = opt.state.get(p, {}).get(key)
            parts.append(torch.zeros(p.numel()) if t is None else t.detach().reshape(-1).float())
    step = float(opt.state.get(params[0], {}).get("step", 0.0)) if has_step else 0.0
    parts.append(torch.tensor([step]))
    out: np.ndarray = torch.cat(parts).numpy()
    return out


def load_state_vector(
    model: torch.nn.Module, opt: torch.optim.Optimizer, kind: InnerOptimizer, vector: np.ndarray
) -> None:
    """The inverse of :func:`state_vector`.

    Raises:
        ValueError: the vector does not fit this model and optimizer.
    """
    keys, has_step = OPTIMIZER_STATE[kind]
    params = list(model.parameters())
    n = sum(p.numel() for p in params)
    if vector.size != n * (1 + len(keys)) + 1:
        raise ValueError(f"state of {vector.size} values for {n} parameters and {keys}")
    flat = torch.from_numpy(np.array(vector, dtype=np.float32))
    set_flat(model, flat[:n])
    step = float(flat[-1])
    opt.state.clear()
    if has_step and step == 0:
        return
    off = n
    states: dict[torch.Tensor, dict[str, Any]] = {p: {} for p in params}
    for key in keys:
        for p in params:
            states[p][key] = flat[off : off + p.numel()].view_as(p).clone()
            off += p.numel()
    for p in params:
        if has_step:
            states[p]["step"] = torch.tensor(step)
        opt.state[p] = states[p]


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
            times.append(self.first_join + self.cfg.rendezvous_timeout_s)
        if self.first_at is not None:
            times.append(self.first_at + self.cfg.rendezvous_timeout_s)
        return min(times)

    def tick(self, now: float) -> list[Out]:
        out: list[Out] = []
        if self.forming and (
            len(self.pending) == self.cfg.workers
            or (
                self.first_join is not None
                and now >= self.first_join + self.cfg.rendezvous_timeout_s
            )
        ):
            out += self._formed(now)
        if (
            not self.forming
            and self.first_at is not None
            and now >= self.first_at + self.cfg.rendezvous_timeout_s
        ):
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
        return [self._state_own(worker)]

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
        return [Out(w, MessageKind.RETRY, self.round, _EMPTY, (1,)) for w in present]

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
        return [Out(j, MessageKind.STATE, self.round, arr, (1,)) for j in healees]

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
class WorkerLog:
    attempts: list[AttemptRecord] = field(default_factory=list)
    evals: list[WorkerEval] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    bytes_sent: int = 0
    bytes_received: int = 0


@dataclass(frozen=True)
class _Checkpoint:
    round: int
    model: dict[str, torch.Tensor]
    optimizer: dict[str, Any]


class WorkerState:
    """What survives a worker's restarts: its task, optimizer, round and last checkpoint."""

    def __init__(self, cfg: ElasticConfig, rank: int) -> None:
        ref = cfg.reference()
        self.cfg = cfg
        self.rank = rank
        self.task: WorkerTask = bind(ref, rank)
        self.model = self.task.run.model
        self.opt = inner_optimizer(ref, self.model)
        self.round = 0
        self.checkpoint = self._snapshot()

    def _snapshot(self) -> _Checkpoint:
        return _Checkpoint(
            self.round,
            {k: v.detach().clone() for k, v in self.model.state_dict().items()},
            copy.deepcopy(self.opt.state_dict()),
        )

    def save(self) -> None:
        self.checkpoint = self._snapshot()

    def restore(self) -> None:
        c = self.checkpoint
        self.model.load_state_dict(c.model)
        self.opt.load_state_dict(copy.deepcopy(c.optimizer))
        self.round = c.round

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

    def state(self) -> np.ndarray:
        return state_vector(self.model, self.opt, self.cfg.inner.optimizer)

    def load(self, vector: np.ndarray) -> None:
        load_state_vector(self.model, self.opt, self.cfg.inner.optimizer, vector)


class _WorkerRun:
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
            self.log.attempts.append(
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
                )
            )
            if committed and msg is not None:
                if msg.counter("evaluate"):
                    val, _probs = evaluate(s.task)
                    self.log.evals.append(WorkerEval(time.monotonic() - self.origin, s.round, val))
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
    """
    if life.incarnation > 0:
        state.restore()
        log.counts["restarts"] += 1
    link = Uplink(
        endpoint,
        state.rank,
        coordinator_host,
        cfg.workers,
        fingerprint,
        timeout_s=cfg.setup_timeout_s,
    )
    try:
        _WorkerRun(cfg, state, link, life, log, origin).rounds()
    except LinkError:
        life.check()
        raise
    finally:
        link.close()
        log.bytes_sent += link.bytes_sent
        log.bytes_received += link.bytes_received
