"""One worker's data-parallel training loop, the parameter server's loop, and how a job's
rounds meet its network events.

Every round a worker takes a batch of its shard, computes the gradient, hands the flattened
gradient to the collective (``allreduce``: PS or ring, any loss policy), writes the returned
average (zeros where chunks were lost) back into ``.grad`` and steps its optimizer. All
workers start from the same weights (same seed). The worker that ``evaluates`` (rank 0)
measures test accuracy or validation perplexity every ``eval_every`` rounds and after the
last one. Records are plain frozen dataclasses; the runner turns them into CSV rows.

**A round's communication latency** (one definition, used by every table, CSV and plot): per
worker, from its first send of the round to the last byte of the averaged result received
(:attr:`WorkerRound.allreduce_ms`: the collective call, which starts by sending); the round's
latency is the slowest worker's. Waiting for the network to be put into the round's state
(:attr:`WorkerRound.gate_ms`) happens before that and is not part of it.

**Network events** (:class:`~host.train.job.JobEvent`) reach the network through a
:class:`RoundNetwork`: the coordinator (the parameter server) calls
:meth:`~RoundNetwork.enter_round` as it starts each round, every worker calls
:meth:`~RoundNetwork.await_round` before its first send. A burst is round-aligned: in a round
where one starts or ends (:meth:`~host.train.job.JobSpec.gated`) everyone waits until the
loss is on (off), and the coordinator changes it only once every worker waits (each has the
round before's result), so it covers exactly that round's communication in both directions
(turned on as soon as the server began the round, it used to catch the tail of the round
before's results on their way to a slower worker). Plane
failures are triggered as the round starts and land wherever the network's own clock puts
them; nobody waits for them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from host.collectives import AllReduceResult, ParameterServer
from host.dblp.chunks import DType, TensorSpec
from host.train.job import EventKind, JobSpec
from host.train.tasks import TASKS, TaskRun

AllReduce = Callable[[int, np.ndarray], AllReduceResult]


@dataclass(frozen=True)
class WorkerRound:
    rank: int
    round: int
    train_loss: float
    push_ms: float  # PS: pushing the gradient (first chunk -> STOP); ring: 0
    allreduce_ms: float  # first send -> the average's last byte: this worker's latency
    delivered_fraction: float
    loss_bound: float
    wall_s: float  # since the worker's first round started
    gate_ms: float = 0.0  # waiting for the network to enter this round's state (not latency)
    attempts: int = 1  # the most attempts any of this worker's transfers needed
    probes: int = 0  # probes this worker sent and answered in the round
    start_mono: float = 0.0  # time.monotonic() of the first send (shared by all namespaces)


@dataclass(frozen=True)
class EvalPoint:
    round: int
    wall_s: float
    metric: float


@dataclass(frozen=True)
class WorkerResult:
    rank: int
    rounds: tuple[WorkerRound, ...]
    evals: tuple[EvalPoint, ...]
    total_s: float
    parameters: int


@dataclass(frozen=True)
class ServerRecord:
    round: int
    loss_bound: float
    gather_ms: float  # gather started -> every worker's push received (STOPs sent)
    broadcast_ms: float  # broadcast started -> every worker's STOP received
    delivered_fraction: float
    grad_norm: float
    in_clr: bool
    wall_s: float
    broadcast_attempts: int = 1  # the most attempts any broadcast transfer needed
    start_mono: float = 0.0  # time.monotonic() as the gather started


def flat_grad(model: torch.nn.Module) -> np.ndarray:
    """Every parameter's gradient, concatenated (float32; zeros where a grad is None)."""
    parts = [
        (p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
        for p in model.parameters()
    ]
    return torch.cat(parts).detach().to(torch.float32).numpy().copy()


def set_flat_grad(model: torch.nn.Module, flat: np.ndarray) -> None:
    """Write ``flat`` back into the parameters' ``.grad``."""
    src = torch.from_numpy(np.ascontiguousarray(flat, dtype=np.float32)).reshape(-1)
    params = list(model.parameters())
    total = sum(p.numel() for p in params)
    if total != src.numel():
        raise ValueError(f"gradient of {src.numel()} values for {total} parameters")
    off = 0
    for p in params:
        n = p.numel()
        p.grad = src[off : off + n].view_as(p).to(p.dtype).clone()
        off += n


def bind_task(job: JobSpec, rank: int) -> TaskRun:
    return TASKS[job.task].bind(job.seed, rank, job.workers, job.batch_size)


def gradient_numel(job: JobSpec) -> int:
    """Values in the job's flattened gradient."""
    return sum(p.numel() for p in bind_task(job, 0).model.parameters())


def gradient_spec(job: JobSpec) -> TensorSpec:
    """The flattened gradient every worker sends (the server needs it to receive)."""
    return TensorSpec(0, DType.FLOAT32, (gradient_numel(job),))


def _optimizer(job: JobSpec, model: torch.nn.Module) -> torch.optim.Optimizer:
    if job.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=job.lr)
    return torch.optim.SGD(model.parameters(), lr=job.lr, momentum=job.momentum)


def train_worker(
    job: JobSpec,
    rank: int,
    allreduce: AllReduce,
    *,
    evaluate: bool,
    on_round: Callable[[WorkerRound], None] | None = None,
    network: RoundNetwork | None = None,
) -> WorkerResult:
    """Run ``job.rounds`` rounds as worker ``rank``.

    Args:
        network: waited on before the first send of a round where the network changes
            (:meth:`JobSpec.gated`); None: nobody changes it.
    Raises:
        RoundFailed: the collective failed (a peer disappeared or aborted).
    """
    run = bind_task(job, rank)
    model, opt = run.model, _optimizer(job, run.model)
    rounds: list[WorkerRound] = []
    evals: list[EvalPoint] = []
    t0 = time.monotonic()
    for r in range(job.rounds):
        model.train()
        x, y = run.batch(r)
        opt.zero_grad(set_to_none=True)
        loss = run.loss(model, x, y)
        torch.autograd.backward(loss)
        grad = flat_grad(model)
        gate = 0.0
        if network is not None and job.gated(r):
            g0 = time.monotonic()
            network.await_round(r)
            gate = time.monotonic() - g0
        start = time.monotonic()
        res = allreduce(r, grad)
        set_flat_grad(model, res.vector)
        opt.step()
        push = sum(s.latency_s for s in res.sends) if len(res.sends) == 1 else 0.0
        rec = WorkerRound(
            rank,
            r,
            float(loss.detach()),
            push * 1e3,
            res.latency_s * 1e3,
            res.delivered_fraction,
            res.bound,
            time.monotonic() - t0,
            gate * 1e3,
            max((s.attempts for s in res.sends), default=1),
            sum(s.probes for s in res.sends) + sum(x.probes for x in res.recvs),
            start,
        )
        rounds.append(rec)
        if on_round is not None:
            on_round(rec)
        if evaluate and ((r + 1) % job.eval_every == 0 or r == job.rounds - 1):
            model.eval()
            evals.append(EvalPoint(r, time.monotonic() - t0, run.evaluate(model)))
    total = time.monotonic() - t0
    return WorkerResult(
        rank, tuple(rounds), tuple(evals), total, sum(p.numel() for p in model.parameters())
    )


def serve(
    job: JobSpec,
    server: ParameterServer,
    spec: TensorSpec,
    on_round: Callable[[ServerRecord], None] | None = None,
) -> list[ServerRecord]:
    """The parameter server's loop: ``job.rounds`` rounds of gather, average, broadcast.

    Raises:
        RoundFailed: a worker disappeared or failed.
    """
    out: list[ServerRecord] = []
    t0 = time.monotonic()
    for r in range(job.rounds):
        sr = server.run_round(r, spec)
        rec = ServerRecord(
            r,
            sr.bound,
            sr.gather_s * 1e3,
            sr.broadcast_s * 1e3,
            sr.delivered_fraction,
            sr.grad_norm,
            server.phase.in_clr,
            time.monotonic() - t0,
            max((s.attempts for s in sr.broadcast.values()), default=1),
            sr.start_mono,
        )
        out.append(rec)
        if on_round is not None:
            on_round(rec)
    return out


class NetworkActions:
    """What a job's events do to the network (the emulator, or the fabric's controller in the
    experiment driver). Subclasses override all four."""

    def burst(self, loss_pct: float) -> None:
        raise NotImplementedError

    def clear_burst(self) -> None:
        raise NotImplementedError

    def fail_plane(self, plane: int) -> None:
        raise NotImplementedError

    def restore_plane(self, plane: int) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class FaultRecord:
    """When one of a job's network events was asked for and when it was in place
    (``time.monotonic()``, which every namespace of the machine shares)."""

    round: int
    kind: str  # an EventKind value, or "clear_burst"
    value: float
    requested_mono: float
    applied_mono: float


def apply_round_state(job: JobSpec, actions: NetworkActions, round_: int) -> list[FaultRecord]:
    """Bring the network into round ``round_``'s burst state (a burst on, or off again), if it
    changes there; the records of what was applied."""
    if not job.gated(round_):
        return []
    pct = job.burst_pct(round_)
    t0 = time.monotonic()
    if pct > 0:
        actions.burst(pct)
    else:
        actions.clear_burst()
    kind = EventKind.BURST.value if pct > 0 else "clear_burst"
    return [FaultRecord(round_, kind, pct, t0, time.monotonic())]


def _fail(actions: NetworkActions, value: float) -> None:
    actions.fail_plane(int(value))


def _restore(actions: NetworkActions, value: float) -> None:
    actions.restore_plane(int(value))


TRIGGERED: dict[EventKind, Callable[[NetworkActions, float], None]] = {
    EventKind.FAIL_PLANE: _fail,
    EventKind.RESTORE_PLANE: _restore,
}
"""How each triggered (not round-aligned) event kind acts on the network."""


def apply_triggers(
    job: JobSpec, actions: NetworkActions, round_: int, requested_mono: float
) -> list[FaultRecord]:
    """Apply the events triggered at the start of ``round_`` (plane failures, restores)."""
    out = []
    for ev in job.triggers(round_):
        TRIGGERED[ev.kind](actions, ev.value)
        out.append(FaultRecord(round_, ev.kind.value, ev.value, requested_mono, time.monotonic()))
    return out


class RoundNetwork(Protocol):
    """Where a job's rounds meet its network events (see the module docstring)."""

    def enter_round(self, round_: int) -> None:
        """The coordinator starts ``round_``: once every worker waits for it (gated rounds),
        put the network into the round's state and return once it is there; trigger the
        round's other events."""

    def await_round(self, round_: int) -> None:
        """Return once the network is in ``round_``'s state (called in gated rounds only)."""


class EventHooks:
    """The parameter server's round hooks playing a job's events through a
    :class:`RoundNetwork` (what changes at a round's end is the next round's state)."""

    def __init__(self, network: RoundNetwork) -> None:
        self.network = network

    def round_start(self, round_: int) -> None:
        self.network.enter_round(round_)

    def round_end(self, round_: int) -> None:
        pass
