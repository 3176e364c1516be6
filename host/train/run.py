"""A whole job in one process over the emulated fabric, and the job's result tables.

:func:`run_emu_job` starts the parameter server (host index 0) and the workers (hosts 1..W),
or for a ring the workers on hosts 0..W−1, each in a thread with its own MRC endpoint of an
:class:`~host.train.cluster.EmuCluster`; the server's round hooks play the job's events on
the emulator. :class:`JobResult` merges the server's and the workers' records into one row
per round (what ``results/microburst_latency.csv`` holds) and the job summary. The fabric
runs the same functions in one agent process per host (:mod:`host.train_agent`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from host.collectives import (
    ParameterServer,
    PsWorker,
    RingAllReduce,
    accept_workers,
    connect_ring,
    connect_worker,
    job_fingerprint,
)
from host.dblp.config import DblpConfig
from host.dblp.errors import DblpError, RoundFailed
from host.dblp.phase import PhaseController
from host.train.cluster import EmuCluster, job_dblp_config
from host.train.job import Collective, JobSpec
from host.train.loop import (
    EventHooks,
    NetworkActions,
    ServerRecord,
    WorkerResult,
    gradient_spec,
    serve,
    train_worker,
)
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
    fp = job_fingerprint(job.to_json())
    results: dict[str, object] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()
    eps = cluster.endpoints

    def guarded(name: str, fn: Callable[[], object]) -> Callable[[], None]:
        def run() -> None:
            try:
                out = fn()
                with lock:
                    results[name] = out
            except BaseException as e:  # reported to the caller below
                with lock:
                    errors.append(e)

        return run

    def note(kind: str) -> Callable[[object], None]:
        return lambda rec: on_round(kind, rec) if on_round is not None else None

    threads: list[threading.Thread] = []
    if job.collective is Collective.PS:
        spec = gradient_spec(job)
        hooks = EventHooks(job, EmuActions(cluster, background_loss))

        def server() -> list[ServerRecord]:
            links = accept_workers(
                eps[SERVER_HOST], set(range(job.workers)), fp, cfg, job.setup_timeout_s
            )
            ps = ParameterServer(links, PhaseController(job.policy, job.phase), hooks)
            try:
                return serve(job, ps, spec, note("server"))
            finally:
                ps.close()

        def worker(rank: int) -> WorkerResult:
            link = connect_worker(eps[rank + 1], SERVER_HOST, rank, fp, cfg, job.setup_timeout_s)
            w = PsWorker(link)
            try:
                return train_worker(
                    job, rank, w.allreduce, evaluate=rank == 0, on_round=note("worker")
                )
            finally:
                w.close()

        threads.append(threading.Thread(target=guarded("server", server), name="ps-server"))
    else:
        hosts = list(range(job.workers))

        def worker(rank: int) -> WorkerResult:
            to_next, from_prev = connect_ring(eps[rank], rank, hosts, fp, cfg, job.setup_timeout_s)
            ring = RingAllReduce(
                rank, job.workers, to_next, from_prev, PhaseController(job.policy, job.phase)
            )
            try:
                return train_worker(
                    job, rank, ring.allreduce, evaluate=rank == 0, on_round=note("worker")
                )
            finally:
                ring.close()

    for rank in range(job.workers):
        threads.append(
            threading.Thread(
                target=guarded(f"worker{rank}", lambda r=rank: worker(r)), name=f"worker{rank}"
            )
        )
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
    server_recs = results.get("server", [])
    workers = {r: results[f"worker{r}"] for r in range(job.workers)}
    return JobResult(replace(job), tuple(server_recs), workers)  # type: ignore[arg-type]
