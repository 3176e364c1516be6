"""A whole job in one process over the emulated fabric, and the job's result tables.

:func:`run_emu_job` starts the parameter server (host index 0) and the workers (hosts 1..W),
or for a ring the workers on hosts 0..W−1, each in a thread with its own MRC endpoint of an
:class:`~host.train.cluster.EmuCluster`; the server's round hooks play the job's events on
the emulator. Each thread runs its role from :mod:`host.train.roles`, which the fabric's
per-host agents (:mod:`host.train_agent`) run too. :class:`JobResult` merges the server's and
the workers' records into one row per round (what ``results/microburst_latency.csv`` holds)
and the job summary.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from host.dblp.config import DblpConfig
from host.dblp.errors import DblpError, RoundFailed
from host.train.cluster import EmuCluster, job_dblp_config
from host.train.job import Collective, JobSpec
from host.train.loop import EventHooks, NetworkActions, ServerRecord, WorkerResult
from host.train.roles import run_ps_worker, run_ring_rank, run_server
from host.train.tasks import TASKS

SERVER_HOST = 0


@dataclass(frozen=True)
class RoundRow:
    """One round of a job, as the experiment CSV writes it."""

    policy: str
    round: int
    burst_loss_pct: float
    latency_ms: float  # PS: slowest worker's push + the broadcast; ring: slowest all-reduce
    delivered_fraction: float
    loss_bound: float
    train_loss: float


@dataclass(frozen=True)
class JobResult:
    job: JobSpec
    server: tuple[ServerRecord, ...]
    workers: dict[int, WorkerResult]

    @property
    def metric_name(self) -> str:
        return TASKS[self.job.task].metric

    @property
    def total_s(self) -> float:
        return max(w.total_s for w in self.workers.values())

    @property
    def final_metric(self) -> float:
        return self.workers[0].evals[-1].metric

    @property
    def time_to_target_s(self) -> float | None:
        """Wall time until rank 0's evaluation first reached the target (None: never)."""
        task = TASKS[self.job.task]
        for ev in self.workers[0].evals:
            if task.reached(ev.metric, self.job.target_metric):
                return ev.wall_s
        return None

    def rows(self) -> list[RoundRow]:
        out = []
        by_round = {s.round: s for s in self.server}
        for r in range(self.job.rounds):
            recs = [w.rounds[r] for w in self.workers.values()]
            loss = sum(x.train_loss for x in recs) / len(recs)
            s = by_round.get(r)
            if s is not None:  # parameter server
                latency = max(x.push_ms for x in recs) + s.broadcast_ms
                row = RoundRow(
                    self.job.policy.value,
                    r,
                    self.job.burst_pct(r),
                    latency,
                    s.delivered_fraction,
                    s.loss_bound,
                    loss,
                )
            else:
                row = RoundRow(
                    self.job.policy.value,
                    r,
                    self.job.burst_pct(r),
                    max(x.allreduce_ms for x in recs),
                    sum(x.delivered_fraction for x in recs) / len(recs),
                    recs[0].loss_bound,
                    loss,
                )
            out.append(row)
        return out


class EmuActions(NetworkActions):
    """Job events on the emulator: a burst is uniform loss on every path."""

    def __init__(self, cluster: EmuCluster, background_loss: float = 0.0) -> None:
        self.cluster = cluster
        self.background_loss = background_loss

    def burst(self, loss_pct: float) -> None:
        self.cluster.set_loss(loss_pct / 100.0)

    def clear_burst(self) -> None:
        self.cluster.set_loss(self.background_loss)

    def fail_plane(self, plane: int) -> None:
        self.cluster.fail_plane(plane)

    def restore_plane(self, plane: int) -> None:
        self.cluster.restore_plane(plane)


def run_emu_job(
    job: JobSpec,
    cluster: EmuCluster,
    *,
    cfg: DblpConfig | None = None,
    background_loss: float = 0.0,
    on_round: Callable[[str, object], None] | None = None,
) -> JobResult:
    """Run ``job`` with every host a thread of this process.

    Args:
        cluster: the emulated hosts (PS needs workers + 1 of them, ring ``workers``).
        background_loss: loss probability on every path outside bursts.
        on_round: called with ("server" | "worker", record) as rounds finish.
    Raises:
        RoundFailed: a round failed (the first failure, naming the host).
    """
    cfg = cfg or job_dblp_config("emu", peer_timeout_s=job.peer_timeout_s)
    need = job.workers + (1 if job.collective is Collective.PS else 0)
    if cluster.hosts < need:
        raise ValueError(f"{job.collective.value} with {job.workers} workers needs {need} hosts")
    torch.set_num_threads(1)
    cluster.set_loss(background_loss)
    eps = cluster.endpoints
    server_recs: list[ServerRecord] = []
    workers: dict[int, WorkerResult] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as e:  # reported to the caller below
                with lock:
                    errors.append(e)

        return run

    def note(kind: str) -> Callable[[object], None]:
        return lambda rec: on_round(kind, rec) if on_round is not None else None

    threads: list[threading.Thread] = []
    if job.collective is Collective.PS:
        hooks = EventHooks(job, EmuActions(cluster, background_loss))

        def server() -> None:
            recs = run_server(job, eps[SERVER_HOST], cfg, hooks, note("server"))
            with lock:
                server_recs.extend(recs)

        def worker(rank: int) -> WorkerResult:
            return run_ps_worker(job, eps[rank + 1], cfg, rank, SERVER_HOST, note("worker"))

        threads.append(threading.Thread(target=guarded(server), name="ps-server"))
    else:
        hosts = list(range(job.workers))

        def worker(rank: int) -> WorkerResult:
            return run_ring_rank(job, eps[rank], cfg, rank, hosts, note("worker"))

    def train(rank: int) -> None:
        res = worker(rank)
        with lock:
            workers[rank] = res

    for rank in range(job.workers):
        threads.append(threading.Thread(target=guarded(partial(train, rank)), name=f"worker{rank}"))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cluster.set_loss(background_loss)
    for plane in range(cluster.fabric.spec.planes):
        cluster.restore_plane(plane)
    if errors:
        first = next((e for e in errors if isinstance(e, DblpError)), errors[0])
        for other in errors:
            if other is not first:
                first.add_note(f"also: {type(other).__name__}: {other}")
        if isinstance(first, DblpError):
            raise RoundFailed(str(first)) from first
        raise first
    return JobResult(job, tuple(server_recs), dict(sorted(workers.items())))
