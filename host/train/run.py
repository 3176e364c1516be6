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
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import torch

from host.dblp.config import DblpConfig
from host.dblp.errors import DblpError, RoundFailed
from host.train.cluster import EmuCluster, job_dblp_config
from host.train.job import Collective, JobSpec
from host.train.loop import (
    FaultRecord,
    NetworkActions,
    ServerRecord,
    WorkerResult,
    apply_round_state,
    apply_triggers,
)
from host.train.roles import run_ps_worker, run_ring_rank, run_server
from host.train.tasks import TASKS

SERVER_HOST = 0


@dataclass(frozen=True)
class RoundRow:
    """One round of a job, as the experiment CSVs write it (times in ms).

    ``latency_ms`` is the round's communication latency: the slowest worker's time from its
    first send of the round to the last byte of the averaged result received (the one
    definition of :mod:`host.train.loop`). The phase columns say where it went: ``push_ms``
    the slowest worker's push (first chunk → the server's STOP), ``gather_ms`` and
    ``broadcast_ms`` the server's two phases, ``attempts`` the most send attempts any
    transfer of the round needed (1: no resend), ``probes`` the probes sent and answered by
    the workers. ``gate_ms`` is the longest wait for the network to enter the round's state
    (not part of the latency); ``faults`` the triggered events that were applied while the
    round's communication ran, with their time after the round's first send.
    """

    policy: str
    round: int
    burst_loss_pct: float
    latency_ms: float
    delivered_fraction: float
    loss_bound: float
    train_loss: float
    push_ms: float = 0.0
    gather_ms: float = 0.0
    broadcast_ms: float = 0.0
    attempts: int = 1
    probes: int = 0
    gate_ms: float = 0.0
    faults: str = ""


@dataclass(frozen=True)
class JobResult:
    job: JobSpec
    server: tuple[ServerRecord, ...]
    workers: dict[int, WorkerResult]
    faults: tuple[FaultRecord, ...] = field(default=())

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

    def round_window(self, r: int) -> tuple[float, float]:
        """(first send, last result received) of round ``r`` over all workers (monotonic)."""
        recs = [w.rounds[r] for w in self.workers.values()]
        return (
            min(x.start_mono for x in recs),
            max(x.start_mono + x.allreduce_ms / 1e3 for x in recs),
        )

    def fault_round(self, f: FaultRecord) -> int:
        """The round whose communication was running (or next to run) when ``f`` applied."""
        for r in range(self.job.rounds):
            if f.applied_mono <= self.round_window(r)[1]:
                return r
        return self.job.rounds - 1

    def rows(self) -> list[RoundRow]:
        out = []
        by_round = {s.round: s for s in self.server}
        hits: dict[int, list[str]] = {}
        for f in self.faults:
            if f.kind in ("burst", "clear_burst"):
                continue
            r = self.fault_round(f)
            after_ms = (f.applied_mono - self.round_window(r)[0]) * 1e3
            hits.setdefault(r, []).append(f"{f.kind} {f.value:g} @{after_ms:+.0f}ms")
        for r in range(self.job.rounds):
            recs = [w.rounds[r] for w in self.workers.values()]
            s = by_round.get(r)  # None: a ring, no server
            out.append(
                RoundRow(
                    self.job.policy.value,
                    r,
                    self.job.burst_pct(r),
                    latency_ms=max(x.allreduce_ms for x in recs),
                    delivered_fraction=(
                        s.delivered_fraction
                        if s is not None
                        else sum(x.delivered_fraction for x in recs) / len(recs)
                    ),
                    loss_bound=s.loss_bound if s is not None else recs[0].loss_bound,
                    train_loss=sum(x.train_loss for x in recs) / len(recs),
                    push_ms=max(x.push_ms for x in recs),
                    gather_ms=s.gather_ms if s is not None else 0.0,
                    broadcast_ms=s.broadcast_ms if s is not None else 0.0,
                    attempts=max(max(x.attempts for x in recs), s.broadcast_attempts if s else 1),
                    probes=sum(x.probes for x in recs),
                    gate_ms=max(x.gate_ms for x in recs),
                    faults="; ".join(hits.get(r, [])),
                )
            )
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


class EmuRounds:
    """The emulator's :class:`~host.train.loop.RoundNetwork`: the coordinator applies each
    round's state on the emulator directly (microseconds) and releases the workers waiting
    for it; applied events are recorded in :attr:`faults`.

    A gated round's state changes once the coordinator entered it *and* every worker waits
    for it (each has the round before's result), so nothing of the round before is still in
    flight when a burst goes on or off; a worker that never comes is waited for at most
    ``peer_timeout_s`` (the round's gather then reports it)."""

    def __init__(self, job: JobSpec, actions: NetworkActions) -> None:
        self.job = job
        self.actions = actions
        self.faults: list[FaultRecord] = []
        self._ready = {r: threading.Event() for r in range(job.rounds) if job.gated(r)}
        self._arrived: Counter[int] = Counter()
        self._cv = threading.Condition()
        self._failed = threading.Event()

    def enter_round(self, round_: int) -> None:
        if round_ in self._ready:
            with self._cv:
                self._cv.wait_for(
                    lambda: self._arrived[round_] >= self.job.workers, self.job.peer_timeout_s
                )
        self.faults += apply_round_state(self.job, self.actions, round_)
        if round_ in self._ready:
            self._ready[round_].set()
        self.faults += apply_triggers(self.job, self.actions, round_, time.monotonic())

    def await_round(self, round_: int) -> None:
        ready = self._ready.get(round_)
        if ready is not None:
            with self._cv:
                self._arrived[round_] += 1
                self._cv.notify_all()
        while ready is not None and not ready.wait(0.1):
            if self._failed.is_set():
                raise RoundFailed(f"round {round_}: the coordinator failed before it started")

    def fail(self) -> None:
        """The coordinator is gone: release every waiter with an error."""
        self._failed.set()


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
    rounds = EmuRounds(job, EmuActions(cluster, background_loss))
    if job.collective is Collective.PS:

        def server() -> None:
            try:
                recs = run_server(job, eps[SERVER_HOST], cfg, rounds, note("server"))
            except BaseException:
                rounds.fail()
                raise
            with lock:
                server_recs.extend(recs)

        def worker(rank: int) -> WorkerResult:
            return run_ps_worker(job, eps[rank + 1], cfg, rank, SERVER_HOST, note("worker"), rounds)

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
    return JobResult(job, tuple(server_recs), dict(sorted(workers.items())), tuple(rounds.faults))
