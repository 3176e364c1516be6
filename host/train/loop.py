"""One worker's data-parallel training loop and the parameter server's loop.

Every round a worker takes a batch of its shard, computes the gradient, hands the flattened
gradient to the collective (``allreduce``: PS or ring, any loss policy), writes the returned
average (zeros where chunks were lost) back into ``.grad`` and steps its optimizer. All
workers start from the same weights (same seed). The worker that ``evaluates`` (rank 0)
measures test accuracy or validation perplexity every ``eval_every`` rounds and after the
last one. Records are plain frozen dataclasses; the runner turns them into CSV rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

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
    allreduce_ms: float  # the whole collective call
    delivered_fraction: float
    loss_bound: float
    wall_s: float  # since the worker's first round started


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
    gather_ms: float
    broadcast_ms: float
    delivered_fraction: float
    grad_norm: float
    in_clr: bool
    wall_s: float


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


def gradient_spec(job: JobSpec) -> TensorSpec:
    """The flattened gradient every worker sends (the server needs it to receive)."""
    n = sum(p.numel() for p in bind_task(job, 0).model.parameters())
    return TensorSpec(0, DType.FLOAT32, (n,))


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
) -> WorkerResult:
    """Run ``job.rounds`` rounds as worker ``rank``.

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
        res = allreduce(r, flat_grad(model))
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
        )
        out.append(rec)
        if on_round is not None:
            on_round(rec)
    return out


class NetworkActions:
    """What the coordinator's events do to the network (the emulator or, through the
    experiment driver, the fabric's controller). Subclasses override all four."""

    def burst(self, loss_pct: float) -> None:
        raise NotImplementedError

    def clear_burst(self) -> None:
        raise NotImplementedError

    def fail_plane(self, plane: int) -> None:
        raise NotImplementedError

    def restore_plane(self, plane: int) -> None:
        raise NotImplementedError


class EventHooks:
    """Round hooks that play a job's events: a burst covers exactly its round's
    communication (on at the round's start, off at its end); plane events stay."""

    def __init__(self, job: JobSpec, actions: NetworkActions) -> None:
        self.job = job
        self.actions = actions
        self._table: dict[EventKind, Callable[[float], None]] = {
            EventKind.BURST: actions.burst,
            EventKind.FAIL_PLANE: lambda v: actions.fail_plane(int(v)),
            EventKind.RESTORE_PLANE: lambda v: actions.restore_plane(int(v)),
        }

    def round_start(self, round_: int) -> None:
        for ev in self.job.events_at(round_):
            self._table[ev.kind](ev.value)

    def round_end(self, round_: int) -> None:
        if self.job.burst_pct(round_) > 0:
            self.actions.clear_burst()
