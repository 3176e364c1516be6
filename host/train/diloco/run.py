"""A whole DiLoCo job in one process over the emulated fabric, its result table, calibration.

:func:`run_emu_job` runs worker ``r`` on host ``r`` of an :class:`~host.train.cluster.EmuCluster`
(each a thread with its own MRC endpoint; rate-limited links through a
:class:`~host.linkemu.LinkProfile`), the emulator fallback of the fabric experiment and what
the tests use. A :class:`ConsensusBoard` collects every worker's parameters and output
distributions of each evaluated round and computes the consensus distance and the
Jensen–Shannon divergence. :class:`DilocoResult` joins them with the workers' round records
into one row per (round, worker) (:class:`RoundRow`, :meth:`DilocoResult.write_csv`). A worker
that died or stopped makes the job raise :class:`~host.train.diloco.errors.WorkerFailed`,
naming the first one to die (host, last completed round), with the partial result attached.

:func:`calibrate` measures the task's per-step compute time on one core and derives the link
rates at which a round's communication takes a given multiple of its compute (the paper's
0.89 and 1.78). ``python -m host.train.diloco.run`` runs either from the command line.
"""

from __future__ import annotations

import argparse
import csv
import math
import pathlib
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace

import numpy as np
import torch

from host.dblp.config import DblpConfig
from host.linkemu import LinkProfile
from host.mrc import MrcConfig
from host.mrc.emulated import emulated_fabric_config
from host.train.cluster import EmuCluster, job_dblp_config, job_mrc_config
from host.train.diloco import metrics
from host.train.diloco.config import Algorithm, DilocoConfig, variant
from host.train.diloco.errors import ConfigError, WorkerFailed
from host.train.diloco.task import bind
from host.train.diloco.wire import message_bytes
from host.train.diloco.worker import (
    RoundObserver,
    RoundRecord,
    WorkerOutcome,
    WorkerStatus,
    inner_optimizer,
    run_worker,
)
from topologies.model import FabricSpec, build_fabric

PAPER_RATIOS = (0.89, 1.78)
"""Communication/compute per round in the Factored Gossip paper at 200 and 100 Mbit/s."""


@dataclass(frozen=True)
class ConsensusPoint:
    """How far the workers are apart after one round."""

    round: int
    distances: dict[int, float]  # rank -> ‖x_i − x̄‖₂
    consensus_rms_l2: float
    js_divergence_nats: float


class ConsensusBoard:
    """The in-process observer: computes a round's figures once every worker reported it
    (:meth:`finish` computes rounds some workers never reported, from those that did)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._lock = threading.Lock()
        self._pending: dict[int, dict[int, tuple[np.ndarray, np.ndarray]]] = {}
        self.points: dict[int, ConsensusPoint] = {}

    def observe(self, rank: int, round_: int, params: np.ndarray, probs: np.ndarray) -> None:
        with self._lock:
            got = self._pending.setdefault(round_, {})
            got[rank] = (params.copy(), probs)
            if len(got) < self.workers:
                return
            del self._pending[round_]
        self._compute(round_, got)

    def _compute(self, round_: int, got: dict[int, tuple[np.ndarray, np.ndarray]]) -> None:
        distances = metrics.consensus_distances({r: p for r, (p, _q) in got.items()})
        js = metrics.js_divergence([q for _r, (_p, q) in sorted(got.items())])
        point = ConsensusPoint(round_, distances, metrics.consensus_rms(distances), js)
        with self._lock:
            self.points[round_] = point

    def finish(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, {}
        for round_, got in pending.items():
            self._compute(round_, got)


@dataclass(frozen=True)
class RoundRow:
    """One (round, worker) row of the experiment CSV: the worker's record, its consensus
    distance and the round's JS divergence (nan where not evaluated)."""

    record: RoundRecord
    consensus_l2: float
    consensus_rms_l2: float
    js_divergence_nats: float

    def as_dict(self) -> dict[str, object]:
        return {
            **asdict(self.record),
            "consensus_l2": self.consensus_l2,
            "consensus_rms_l2": self.consensus_rms_l2,
            "js_divergence_nats": self.js_divergence_nats,
        }


CSV_COLUMNS = (
    *(f.name for f in fields(RoundRecord)),
    "consensus_l2",
    "consensus_rms_l2",
    "js_divergence_nats",
)


@dataclass(frozen=True)
class DilocoResult:
    config: DilocoConfig
    outcomes: dict[int, WorkerOutcome]
    consensus: dict[int, ConsensusPoint] = field(default_factory=dict)

    def rows(self) -> list[RoundRow]:
        out = []
        for rank in sorted(self.outcomes):
            for rec in self.outcomes[rank].records:
                point = self.consensus.get(rec.round)
                out.append(
                    RoundRow(
                        rec,
                        point.distances.get(rank, math.nan) if point else math.nan,
                        point.consensus_rms_l2 if point else math.nan,
                        point.js_divergence_nats if point else math.nan,
                    )
                )
        return sorted(out, key=lambda row: (row.record.round, row.record.rank))

    def write_csv(self, path: str | pathlib.Path) -> None:
        p = pathlib.Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        with p.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(CSV_COLUMNS))
            w.writeheader()
            for row in self.rows():
                w.writerow(row.as_dict())

    def parameters(self, rank: int) -> np.ndarray:
        """Worker ``rank``'s final parameters.

        Raises:
            KeyError: it did not finish.
        """
        params = self.outcomes[rank].parameters
        if params is None:
            raise KeyError(f"worker {rank} did not finish")
        return params

    def failures(self) -> list[WorkerOutcome]:
        """Workers that did not finish, those that died first."""
        bad = [o for o in self.outcomes.values() if o.status is not WorkerStatus.FINISHED]
        return sorted(bad, key=lambda o: (o.status is not WorkerStatus.DIED, o.last_round, o.rank))


def cluster_for(
    workers: int, link: LinkProfile | None = None, mrc: MrcConfig | None = None
) -> EmuCluster:
    """An emulated fabric (2 planes, 2 leaves) with at least ``workers`` hosts."""
    spec = FabricSpec(hosts_per_leaf=max(2, math.ceil(workers / 2)))
    return EmuCluster(build_fabric(spec), link, config=mrc)


def mrc_for(link: LinkProfile) -> MrcConfig:
    """MRC settings for the links: the emulated fabric's (paced, in packet times) on
    rate-limited links, the DBLP jobs' fixed window otherwise."""
    return emulated_fabric_config(link.rate_mbps) if link.rate_mbps > 0 else job_mrc_config("emu")


def run_emu_job(
    cfg: DilocoConfig,
    *,
    link: LinkProfile | None = None,
    cluster: EmuCluster | None = None,
    dblp: DblpConfig | None = None,
    observer: RoundObserver | None = None,
    on_round: Callable[[RoundRecord], None] | None = None,
) -> DilocoResult:
    """Run ``cfg`` with every worker a thread of this process (worker r on host r).

    Args:
        link: impairments and rate of every path (ignored when ``cluster`` is given).
        cluster: emulated hosts to use (default: a new one, closed afterwards).
        dblp: DBLP timers (reduce transport 'dblp').
        observer: also gets every evaluated round's parameters and distributions.
        on_round: called with every worker's record as its round ends (from its thread).
    Raises:
        ConfigError: the cluster has fewer hosts than workers (before anything starts).
        WorkerFailed: a worker died or stopped (the first to die is named; the partial
            result is attached).
    """
    link = link or LinkProfile()
    own = cluster is None
    cl = cluster if cluster is not None else cluster_for(cfg.workers, link, mrc_for(link))
    try:
        if cl.hosts < cfg.workers:
            raise ConfigError(
                f"{cfg.workers} workers need {cfg.workers} hosts, the cluster has {cl.hosts}"
            )
        dblp = dblp or job_dblp_config("emu", peer_timeout_s=cfg.peer_timeout_s)
        return _run(cfg, cl, dblp, observer, on_round)
    finally:
        if own:
            cl.close()


class _Both:
    """Hands every report to two observers."""

    def __init__(self, first: RoundObserver, second: RoundObserver) -> None:
        self.first, self.second = first, second

    def observe(self, rank: int, round_: int, params: np.ndarray, probs: np.ndarray) -> None:
        self.first.observe(rank, round_, params, probs)
        self.second.observe(rank, round_, params, probs)


def _run(
    cfg: DilocoConfig,
    cl: EmuCluster,
    dblp: DblpConfig,
    extra: RoundObserver | None,
    on_round: Callable[[RoundRecord], None] | None,
) -> DilocoResult:
    hosts = tuple(range(cfg.workers))
    board = ConsensusBoard(cfg.workers)
    observer: RoundObserver = board if extra is None else _Both(board, extra)
    outcomes: dict[int, WorkerOutcome] = {}
    lock = threading.Lock()
    origin = time.monotonic()
    threads_before = torch.get_num_threads()
    torch.set_num_threads(1)

    def work(rank: int) -> None:
        out = run_worker(
            cfg,
            cl.endpoints[rank],
            rank,
            hosts,
            dblp,
            observer=observer,
            origin=origin,
            on_round=on_round,
        )
        with lock:
            outcomes[rank] = out

    try:
        threads = [
            threading.Thread(target=work, args=(r,), name=f"diloco-w{r}")
            for r in range(cfg.workers)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        torch.set_num_threads(threads_before)
    board.finish()
    result = DilocoResult(cfg, dict(sorted(outcomes.items())), dict(sorted(board.points.items())))
    bad = result.failures()
    if bad:
        first = bad[0]
        err = WorkerFailed(first.rank, first.host, first.last_round, first.describe(), result)
        for other in bad[1:]:
            err.add_note(f"also: {other.describe()}")
        raise err
    return result


# -- calibration ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Calibration:
    """A task's size and speed on this machine, and the link rates of the paper's regimes."""

    task: str
    parameters: int
    model_message_bytes: int  # one full parameter vector as a message
    step_s: float  # median inner step (forward, backward, AdamW) on one core
    round_compute_s: float  # H × step_s
    workers: int
    inner_steps: int
    allreduce_bytes: int  # messages one worker sends (and receives) in DiLoCo's all-reduce
    allreduce_wire_bytes: int  # the same as packets on the emulator
    planes: int
    rates_mbps: dict[float, float]  # comm/compute ratio -> per-plane link rate

    def describe(self) -> str:
        lines = [
            f"task {self.task}: {self.parameters} parameters, "
            f"{self.model_message_bytes} B per full-vector message",
            f"inner step {self.step_s * 1e3:.2f} ms on one core; H = {self.inner_steps}: "
            f"{self.round_compute_s * 1e3:.0f} ms of compute per round",
            f"DiLoCo ring all-reduce, M = {self.workers}: {self.allreduce_bytes} B of messages "
            f"per worker per round, {self.allreduce_wire_bytes} B as MRC packets",
        ]
        for ratio, rate in self.rates_mbps.items():
            lines.append(
                f"comm/compute {ratio}: {rate:.2f} Mbit/s per plane link "
                f"({self.planes * rate:.2f} Mbit/s per host over {self.planes} planes)"
            )
        return "\n".join(lines)


def measure_step_s(cfg: DilocoConfig, steps: int = 30, warmup: int = 5) -> float:
    """Median wall time of one inner step of worker 0 on one core."""
    task = bind(cfg, 0)
    model, run = task.run.model, task.run
    opt = inner_optimizer(cfg, model)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    times = []
    try:
        for i in range(warmup + steps):
            t0 = time.perf_counter()
            x, y = run.batch(i)
            opt.zero_grad(set_to_none=True)
            torch.autograd.backward(run.loss(model, x, y))
            opt.step()
            if i >= warmup:
                times.append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(before)
    return statistics.median(times)


def calibrate(
    cfg: DilocoConfig,
    *,
    ratios: Sequence[float] = PAPER_RATIOS,
    planes: int = 2,
    step_s: float | None = None,
) -> Calibration:
    """Size and speed of ``cfg.task`` and the link rates giving each ratio for DiLoCo's
    ring all-reduce with ``cfg.workers`` workers and ``cfg.inner_steps`` inner steps."""
    n = bind(cfg, 0).parameters
    step = measure_step_s(cfg) if step_s is None else step_s
    compute = cfg.inner_steps * step
    diloco = replace(cfg, algorithm=Algorithm.DILOCO)
    sent = metrics.round_bytes(diloco, n)
    wire = metrics.wire_bytes(sent, messages=2 * (cfg.workers - 1))
    rates = {r: metrics.link_rate_mbps(wire, compute, r, planes=planes) for r in ratios}
    return Calibration(
        cfg.task,
        n,
        message_bytes(n),
        step,
        compute,
        cfg.workers,
        cfg.inner_steps,
        sent,
        wire,
        planes,
        rates,
    )


# -- command line -----------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m host.train.diloco.run", description=__doc__)
    ap.add_argument("--algorithm", choices=[a.value for a in Algorithm], default="diloco")
    ap.add_argument("--variant", default="GlobalM1LocalM2", help="gossip variant")
    ap.add_argument("--task", default="chars-transformer-m")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--inner-steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--rate-mbps", type=float, default=0.0, help="per plane link; 0: unlimited")
    ap.add_argument("--csv", default="results/diloco_rounds.csv")
    ap.add_argument("--calibrate", action="store_true", help="measure and print link rates only")
    args = ap.parse_args(argv)
    cfg = DilocoConfig(
        algorithm=Algorithm(args.algorithm),
        task=args.task,
        workers=args.workers,
        inner_steps=args.inner_steps,
        rounds=args.rounds,
        gossip=variant(args.variant),
    )
    if args.calibrate:
        print(calibrate(cfg).describe())
        return 0
    link = LinkProfile(rate_mbps=args.rate_mbps, queue_bytes=1 << 20)
    result = run_emu_job(cfg, link=link)
    result.write_csv(args.csv)
    for row in result.rows():
        r = row.record
        print(
            f"round {r.round} rank {r.rank}: loss {r.train_loss:.3f} val {r.val_loss:.3f} "
            f"util {r.utilization:.2f} blocked {r.blocked_s * 1e3:.0f} ms "
            f"sent {r.bytes_sent} B consensus {row.consensus_l2:.4f} "
            f"JS {row.js_divergence_nats:.2e}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
