"""One worker's training: the round of each algorithm, its measurements, faults and ending.

The update rules (x: this worker's flat float32 parameters; InnerOpt^H: H steps of the inner
optimizer on the worker's own batches, its state kept across rounds; Outer: the worker's
:class:`~host.train.diloco.outer.OuterOptimizer`, ``base − lr · d(Δ)``):

* **Data parallel** (per inner step): g ← ∇f(x; own batch); ḡ ← AllReduceMean(g);
  x ← InnerOpt(x, ḡ). A round is H such steps (the unit of measurement only).
* **DiLoCo** (per round): x₀ ← x; y ← InnerOpt^H(x₀); Δ ← x₀ − y; Δ̄ ← AllReduceMean(Δ);
  x ← Outer(base = x₀, Δ̄). Every worker applies the same bits.
* **Factored Gossip DiLoCo** (per round, worker i): x₀ ← x_i; Mix1 starts in the background
  with x₀; y ← InnerOpt^H(x₀); Δ ← x₀ − y; Δ̃ ← Mix2(Δ) (none: Δ; local: Σ_j W2_ij Δ_j over
  the neighbours that arrived in time; global: AllReduceMean(Δ)); z ← Mix1 result
  Σ_j W1_ij x₀_j (neighbours whose message did not arrive in time: their weight on x₀);
  x_i ← Outer_i(base = z, Δ̃).

Measured per round (:class:`RoundRecord`): compute (forward, backward, inner optimizer step),
time blocked on communication (all-reduces, Mix2, the wait for Mix1), wall time (round start
to the outer update done; the evaluation after it is not counted), bytes, the mean training
loss, the validation loss, Mix1/Mix2 messages missing and late. Every ``eval_every_rounds``
rounds the worker hands its parameters and output distributions to an observer (the
consensus distance and JS divergence need every worker's).

:func:`run_worker` is the whole life of a worker on any transport endpoint: connect, train,
and on failure tell the peers (ABORT) and report how it ended (:class:`WorkerOutcome`).
"""

from __future__ import annotations

import enum
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch

from host.api import MessageEndpoint
from host.dblp.config import DblpConfig
from host.train.diloco import metrics
from host.train.diloco.config import Algorithm, DilocoConfig, FaultKind, InnerOptimizer, Mix2Scope
from host.train.diloco.errors import ExchangeError, InjectedFault
from host.train.diloco.exchange import Comm, neighbour_mix, open_comm
from host.train.diloco.outer import OuterOptimizer
from host.train.diloco.task import WorkerTask, bind, evaluate
from host.train.diloco.wire import MessageKind
from host.train.loop import flat_grad, set_flat_grad


class RoundObserver(Protocol):
    """Receives every worker's parameters and output distributions of evaluated rounds."""

    def observe(self, rank: int, round_: int, params: np.ndarray, probs: np.ndarray) -> None: ...


@dataclass(frozen=True)
class RoundRecord:
    """One round of one worker. Times in seconds; ``*_at_s`` since the job's time origin."""

    algorithm: str
    rank: int
    host: int
    round: int
    inner_steps: int
    train_loss: float  # mean over the round's inner steps
    val_loss: float  # on the fixed validation batch after the round (nan: not evaluated)
    compute_s: float
    blocked_s: float  # waiting on communication: all-reduces, Mix2, the Mix1 wait
    mix1_wait_s: float
    wall_s: float
    utilization: float  # compute_s / wall_s
    bytes_sent: int
    bytes_received: int
    delivered_fraction: float  # DBLP: chunks delivered / sent; otherwise 1
    mix1_missing: int
    mix1_late: int  # Mix1 messages that arrived after their round was mixed without them
    mix2_missing: int
    start_at_s: float
    inner_start_at_s: float
    inner_end_at_s: float
    mix1_first_arrival_at_s: float  # nan: none
    mix1_last_arrival_at_s: float


class WorkerStatus(enum.Enum):
    FINISHED = "finished"
    DIED = "died"  # it failed itself (an injected fault, an error of its own)
    STOPPED = "stopped"  # it stopped because a peer failed or stopped answering


@dataclass(frozen=True)
class WorkerOutcome:
    rank: int
    host: int
    status: WorkerStatus
    last_round: int  # the last round it completed (-1: none)
    error: str  # "" when finished
    records: tuple[RoundRecord, ...]
    parameters: np.ndarray | None = field(default=None, compare=False)  # its final parameters

    def describe(self) -> str:
        where = f"worker {self.rank} (host {self.host})"
        if self.status is WorkerStatus.FINISHED:
            return f"{where} finished round {self.last_round}"
        return (
            f"{where} {self.status.value} in round {self.last_round + 1} "
            f"(last completed round {self.last_round}): {self.error}"
        )


STATUS_OF: tuple[tuple[type[BaseException], WorkerStatus], ...] = (
    (ExchangeError, WorkerStatus.STOPPED),
    (Exception, WorkerStatus.DIED),
)
"""How a worker's exception classifies its end (first match)."""


def get_flat(model: torch.nn.Module) -> torch.Tensor:
    """Every parameter, concatenated (a new float32 tensor)."""
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).to(torch.float32)


def set_flat(model: torch.nn.Module, flat: torch.Tensor) -> None:
    """Copy ``flat`` into the parameters (in place: the inner optimizer's state stays theirs)."""
    off = 0
    with torch.no_grad():
        for p in model.parameters():
            n = p.numel()
            p.copy_(flat[off : off + n].view_as(p))
            off += n
    if off != flat.numel():
        raise ValueError(f"{flat.numel()} values for {off} parameters")


def inner_optimizer(cfg: DilocoConfig, model: torch.nn.Module) -> torch.optim.Optimizer:
    return INNER_OPTIMIZERS[cfg.inner.optimizer](cfg, model)


INNER_OPTIMIZERS: dict[
    InnerOptimizer, Callable[[DilocoConfig, torch.nn.Module], torch.optim.Optimizer]
] = {
    InnerOptimizer.ADAMW: lambda c, m: torch.optim.AdamW(
        m.parameters(),
        lr=c.inner.lr,
        betas=(c.inner.beta1, c.inner.beta2),
        weight_decay=c.inner.weight_decay,
    ),
    InnerOptimizer.SGD: lambda c, m: torch.optim.SGD(
        m.parameters(), lr=c.inner.lr, momentum=c.inner.sgd_momentum
    ),
}


@dataclass
class _Plan:
    """What faults change in one round."""

    send_mix1: bool = True


@dataclass
class _Tally:
    """Measurements of the round in progress."""

    start: float
    compute_s: float = 0.0
    blocked_s: float = 0.0
    mix1_wait_s: float = 0.0
    losses: list[float] = field(default_factory=list)
    delivered: list[float] = field(default_factory=list)
    mix1_missing: int = 0
    mix2_missing: int = 0
    inner_start: float = math.nan
    inner_end: float = math.nan
    arrivals: tuple[float, ...] = ()

    def blocked(self, since: float) -> None:
        self.blocked_s += time.monotonic() - since


class Worker:
    """Worker ``comm.rank`` of a job (its task bound, its optimizers built).

    Args:
        origin: ``time.monotonic()`` of the job's start (the records' ``*_at_s`` are since).
        on_round: called with each round's record as the round ends (an agent reports it).
    """

    def __init__(
        self,
        cfg: DilocoConfig,
        comm: Comm,
        *,
        observer: RoundObserver | None = None,
        origin: float | None = None,
        on_round: Callable[[RoundRecord], None] | None = None,
    ) -> None:
        self.cfg = cfg
        self.comm = comm
        self.rank = comm.rank
        self.observer = observer
        self.on_round = on_round
        self.origin = time.monotonic() if origin is None else origin
        self.task: WorkerTask = bind(cfg, self.rank)
        self.model = self.task.run.model
        self.opt = inner_optimizer(cfg, self.model)
        self.outer = OuterOptimizer(cfg.outer)
        self.step = 0
        self.records: list[RoundRecord] = []
        self._late_seen = 0

    # -- the steps -------------------------------------------------------------------------

    def _inner_steps(self, t: _Tally, sync: Callable[[int], None] | None = None) -> None:
        """H inner steps; ``sync(h)`` (data parallel: the gradient all-reduce, timed by
        itself) runs between step h's backward pass and its optimizer step."""
        t.inner_start = time.monotonic()
        for h in range(self.cfg.inner_steps):
            t0 = time.monotonic()
            x, y = self.task.run.batch(self.step)
            self.step += 1
            self.opt.zero_grad(set_to_none=True)
            loss = self.task.run.loss(self.model, x, y)
            torch.autograd.backward(loss)
            if sync is not None:
                t.compute_s += time.monotonic() - t0
                sync(h)
                t0 = time.monotonic()
            self.opt.step()
            t.losses.append(float(loss.detach()))
            t.compute_s += time.monotonic() - t0
        t.inner_end = time.monotonic()

    def _dp_round(self, r: int, t: _Tally, plan: _Plan) -> None:
        def average(h: int) -> None:
            t0 = time.monotonic()
            res = self.comm.reduce.allreduce(MessageKind.GRAD_REDUCE, r, h, flat_grad(self.model))
            set_flat_grad(self.model, res.vector)
            t.delivered.append(res.delivered_fraction)
            t.blocked(t0)

        self._inner_steps(t, average)

    def _diloco_round(self, r: int, t: _Tally, plan: _Plan) -> None:
        x0 = get_flat(self.model)
        self._inner_steps(t)
        delta = x0 - get_flat(self.model)
        t0 = time.monotonic()
        res = self.comm.reduce.allreduce(MessageKind.OUTER_REDUCE, r, 0, delta.numpy())
        t.blocked(t0)
        t.delivered.append(res.delivered_fraction)
        set_flat(self.model, self.outer.step(x0, torch.from_numpy(res.vector)))

    def _gossip_round(self, r: int, t: _Tally, plan: _Plan) -> None:
        assert self.comm.mix1 is not None
        x0 = get_flat(self.model)
        mix1 = self.comm.mix1.start(r, x0.numpy().copy(), send=plan.send_mix1)
        self._inner_steps(t)
        delta = x0 - get_flat(self.model)
        t0 = time.monotonic()
        mixed_delta = MIX2_RULES[self.cfg.gossip.mix2](self, r, t, delta.numpy())
        t.blocked(t0)
        t0 = time.monotonic()
        z = mix1.finish(self.cfg.gossip.mix1_timeout_s)
        t.mix1_wait_s = time.monotonic() - t0
        t.blocked_s += t.mix1_wait_s
        t.mix1_missing = z.missing
        t.arrivals = z.arrivals_s
        set_flat(
            self.model, self.outer.step(torch.from_numpy(z.vector), torch.from_numpy(mixed_delta))
        )

    def _mix2_none(self, r: int, t: _Tally, delta: np.ndarray) -> np.ndarray:
        return delta

    def _mix2_local(self, r: int, t: _Tally, delta: np.ndarray) -> np.ndarray:
        assert self.comm.mesh is not None
        res = neighbour_mix(
            self.comm.mesh,
            MessageKind.MIX2,
            r,
            delta,
            self.comm.mix2_weights,
            self.cfg.gossip.mix2_timeout_s,
        )
        t.mix2_missing = res.missing
        return res.vector

    def _mix2_global(self, r: int, t: _Tally, delta: np.ndarray) -> np.ndarray:
        res = self.comm.reduce.allreduce(MessageKind.OUTER_REDUCE, r, 0, delta)
        t.delivered.append(res.delivered_fraction)
        return res.vector

    # -- rounds ----------------------------------------------------------------------------

    def round(self, r: int) -> RoundRecord:
        """Run round ``r`` (faults first), evaluate if due, and record it."""
        plan = _Plan()
        for kind in self.cfg.faults_at(self.rank, r):
            FAULTS[kind](self, r, plan)
        t = _Tally(time.monotonic())
        ROUND_RULES[self.cfg.algorithm](self, r, t, plan)
        wall = time.monotonic() - t.start
        val_loss = math.nan
        if (r + 1) % self.cfg.eval_every_rounds == 0 or r == self.cfg.rounds - 1:
            val_loss, probs = evaluate(self.task)
            if self.observer is not None:
                self.observer.observe(self.rank, r, get_flat(self.model).numpy(), probs)
        late = self.comm.late(MessageKind.MIX1)
        rec = RoundRecord(
            algorithm=self.cfg.algorithm.value,
            rank=self.rank,
            host=self.comm.host,
            round=r,
            inner_steps=self.cfg.inner_steps,
            train_loss=sum(t.losses) / len(t.losses),
            val_loss=val_loss,
            compute_s=t.compute_s,
            blocked_s=t.blocked_s,
            mix1_wait_s=t.mix1_wait_s,
            wall_s=wall,
            utilization=metrics.utilization(t.compute_s, wall),
            bytes_sent=self.comm.bytes_sent(r),
            bytes_received=self.comm.bytes_received(r),
            delivered_fraction=min(t.delivered, default=1.0),
            mix1_missing=t.mix1_missing,
            mix1_late=late - self._late_seen,
            mix2_missing=t.mix2_missing,
            start_at_s=t.start - self.origin,
            inner_start_at_s=t.inner_start - self.origin,
            inner_end_at_s=t.inner_end - self.origin,
            mix1_first_arrival_at_s=t.arrivals[0] - self.origin if t.arrivals else math.nan,
            mix1_last_arrival_at_s=t.arrivals[-1] - self.origin if t.arrivals else math.nan,
        )
        self._late_seen = late
        self.records.append(rec)
        if self.on_round is not None:
            self.on_round(rec)
        return rec

    def train(self) -> None:
        """Every round of the job.

        Raises:
            InjectedFault: a KILL fault for this worker.
            ExchangeError: a blocking exchange failed (a peer died or went silent).
        """
        for r in range(self.cfg.rounds):
            self.round(r)


def _kill(worker: Worker, r: int, plan: _Plan) -> None:
    raise InjectedFault(f"worker {worker.rank} killed at the start of round {r} (fault injection)")


def _drop_mix1(worker: Worker, r: int, plan: _Plan) -> None:
    plan.send_mix1 = False


FAULTS: dict[FaultKind, Callable[[Worker, int, _Plan], None]] = {
    FaultKind.KILL: _kill,
    FaultKind.DROP_MIX1: _drop_mix1,
}
ROUND_RULES: dict[Algorithm, Callable[[Worker, int, _Tally, _Plan], None]] = {
    Algorithm.DATA_PARALLEL: Worker._dp_round,
    Algorithm.DILOCO: Worker._diloco_round,
    Algorithm.GOSSIP: Worker._gossip_round,
}
MIX2_RULES: dict[Mix2Scope, Callable[[Worker, int, _Tally, np.ndarray], np.ndarray]] = {
    Mix2Scope.NONE: Worker._mix2_none,
    Mix2Scope.LOCAL: Worker._mix2_local,
    Mix2Scope.GLOBAL: Worker._mix2_global,
}


def run_worker(
    cfg: DilocoConfig,
    endpoint: MessageEndpoint,
    rank: int,
    hosts: tuple[int, ...],
    dblp: DblpConfig,
    *,
    observer: RoundObserver | None = None,
    origin: float | None = None,
    on_round: Callable[[RoundRecord], None] | None = None,
) -> WorkerOutcome:
    """The whole life of worker ``rank`` on ``endpoint``: set up, train, end.

    Never raises for a failure of the job: a setup failure, a fault, a peer that failed or an
    error of its own ends the worker, which tells its peers (ABORT) and reports the status,
    the last completed round and the error in its outcome.
    """
    host = hosts[rank]
    worker: Worker | None = None
    try:
        with open_comm(cfg, endpoint, rank, hosts, dblp) as comm:
            worker = Worker(cfg, comm, observer=observer, origin=origin, on_round=on_round)
            try:
                worker.train()
            except Exception as e:
                last = worker.records[-1].round if worker.records else -1
                comm.abort(last + 1, f"{type(e).__name__}: {e}")
                raise
    except Exception as e:
        status = next(s for kind, s in STATUS_OF if isinstance(e, kind))
        records = tuple(worker.records) if worker is not None else ()
        last = records[-1].round if records else -1
        return WorkerOutcome(rank, host, status, last, f"{type(e).__name__}: {e}", records)
    return WorkerOutcome(
        rank,
        host,
        WorkerStatus.FINISHED,
        cfg.rounds - 1,
        "",
        tuple(worker.records),
        get_flat(worker.model).numpy(),
    )
