"""Decoupled DiLoCo and elastic data parallel in one process over the emulated fabric, under
a chaos schedule: the emulator fallback of the fabric experiment, and what the tests use.

:func:`run_decoupled`: learner m runs on host m of an
:class:`~host.train.cluster.EmuCluster` as a :class:`~host.train.decoupled.process.Slot`
(each incarnation a thread with the host's MRC endpoint), the syncer on host M (a thread
over a :class:`~host.train.decoupled.link.Hub`). :func:`run_elastic`: the same with elastic
workers and the coordinator. A chaos thread applies the schedule's actions at their times
(:data:`APPLY`: kill, start, stop, cont, slow on the slots; spine and plane failures on the
emulated network). The run ends when every learner has done its steps (killed ones restart
when the schedule says) or after ``max_wall_s``; then the slots are stopped, the network is
restored, the syncer merges what is left, and the result holds every record, the
refusals and a :class:`~host.train.decoupled.metrics.Summary` (goodput, uptime, tokens).

``python -m host.train.decoupled.run`` runs both from the command line and writes CSVs.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import pathlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import torch

from host.collectives import job_fingerprint
from host.linkemu import LinkProfile
from host.train.cluster import EmuCluster
from host.train.decoupled import metrics
from host.train.decoupled.chaos import Action, ChaosAction, Schedule, schedule
from host.train.decoupled.config import (
    Averaging,
    ChaosConfig,
    DecoupledConfig,
    ElasticConfig,
    SyncerConfig,
)
from host.train.decoupled.elastic import (
    AttemptRecord,
    Commit,
    Coordinator,
    CoordinatorCore,
    Reform,
    WorkerLog,
    WorkerState,
    run_worker,
)
from host.train.decoupled.errors import ConfigError, RunFailed
from host.train.decoupled.fragments import Fragmentation, fragment_model
from host.train.decoupled.learner import LearnerLog, LearnerState, StepRecord, run_learner
from host.train.decoupled.link import Hub, Refusal, by_reason
from host.train.decoupled.process import Slot
from host.train.decoupled.syncer import EvalPoint, LivenessEvent, MergeRecord, Syncer, SyncerCore
from host.train.diloco.run import cluster_for, mrc_for
from host.train.diloco.task import bind
from host.train.diloco.worker import get_flat

POLL_S = 0.02
JOIN_S = 30.0


@dataclass(frozen=True)
class Applied:
    """A chaos action as the run applied it."""

    at_s: float  # when it took effect, since the job's origin
    action: ChaosAction
    changed: bool  # False: nothing to do (a pause of a dead learner, a start of a live one)


class _Harness:
    """Slots, a hub thread and a chaos thread on one emulated cluster."""

    def __init__(self, cluster: EmuCluster, slots: list[Slot], chaos: Schedule | None) -> None:
        self.cluster = cluster
        self.slots = slots
        self.chaos = chaos
        self.applied: list[Applied] = []
        self._failed: set[tuple[str, int, int]] = set()  # ("plane"|"spine", plane, spine)
        self.done = threading.Event()

    def _apply(self, origin: float) -> None:
        if self.chaos is None:
            return
        for a in self.chaos.actions():
            if self.done.wait(max(0.0, origin + a.at_s - time.monotonic())):
                return
            changed = APPLY[a.action](self, a)
            self.applied.append(Applied(time.monotonic() - origin, a, changed))

    def run(self, origin: float, max_wall_s: float) -> float:
        """Start every slot, apply the chaos, wait for the end; the wall time.

        Raises:
            RunFailed: a slot's body failed with an error of its own.
        """
        chaos = threading.Thread(target=self._apply, args=(origin,), name="chaos", daemon=True)
        for s in self.slots:
            s.start()
        chaos.start()
        try:
            while not all(s.finished.is_set() for s in self.slots):
                bad = [s for s in self.slots if s.errors]
                if bad:
                    e = bad[0].errors[0]
                    raise RunFailed(f"{bad[0].name}: {type(e).__name__}: {e}") from e
                if time.monotonic() - origin >= max_wall_s:
                    break
                time.sleep(POLL_S)
            return time.monotonic() - origin
        finally:
            self.done.set()
            chaos.join(JOIN_S)
            for s in self.slots:  # all at once, as the fabric's agents get "stop"
                s.finish()
            for s in self.slots:
                s.stop()
            for what, plane, spine in sorted(self._failed):
                self.cluster.emu.restore(plane, None if what == "plane" else spine)

    def slot(self, a: ChaosAction) -> Slot | None:
        return self.slots[a.target] if 0 <= a.target < len(self.slots) else None


def _on_slot(fn: Callable[[Slot, ChaosAction], bool]) -> Callable[[_Harness, ChaosAction], bool]:
    def apply(h: _Harness, a: ChaosAction) -> bool:
        s = h.slot(a)
        return s is not None and fn(s, a)

    return apply


def _slow(s: Slot, a: ChaosAction) -> bool:
    s.set_slow(a.factor)
    return True


def _unslow(s: Slot, a: ChaosAction) -> bool:
    s.set_slow(1.0)
    return True


def _fail(what: str) -> Callable[[_Harness, ChaosAction], bool]:
    def apply(h: _Harness, a: ChaosAction) -> bool:
        spine = a.spine if what == "spine" else None
        h.cluster.emu.fail(a.target, spine)
        h._failed.add((what, a.target, a.spine if what == "spine" else -1))
        return True

    return apply


def _restore(what: str) -> Callable[[_Harness, ChaosAction], bool]:
    def apply(h: _Harness, a: ChaosAction) -> bool:
        h.cluster.emu.restore(a.target, a.spine if what == "spine" else None)
        h._failed.discard((what, a.target, a.spine if what == "spine" else -1))
        return True

    return apply


APPLY: dict[Action, Callable[[_Harness, ChaosAction], bool]] = {
    Action.KILL: _on_slot(lambda s, a: s.kill()),
    Action.START: _on_slot(lambda s, a: s.start()),
    Action.STOP: _on_slot(lambda s, a: s.pause()),
    Action.CONT: _on_slot(lambda s, a: s.resume()),
    Action.SLOW: _on_slot(_slow),
    Action.UNSLOW: _on_slot(_unslow),
    Action.FAIL_SPINE: _fail("spine"),
    Action.RESTORE_SPINE: _restore("spine"),
    Action.FAIL_PLANE: _fail("plane"),
    Action.RESTORE_PLANE: _restore("plane"),
}
"""How the emulator applies each chaos action (True: it changed something; a test checks
every action has a row)."""


@contextlib.contextmanager
def _emu_job(
    members: int,
    what: str,
    chaos: Schedule | None,
    link: LinkProfile | None,
    cluster: EmuCluster | None,
) -> Iterator[EmuCluster]:
    """The cluster a job of ``members`` (``what``: "learners", "workers") and a hub runs on,
    ``cluster`` or one of its own (closed after), with torch on one thread meanwhile.

    Raises:
        ConfigError: a schedule for another number of members, or too few hosts.
    """
    if chaos is not None and chaos.targets != members:
        raise ConfigError(
            f"a chaos schedule for {chaos.targets} targets, the job has {members} {what}"
        )
    if cluster is not None and cluster.hosts < members + 1:
        raise ConfigError(
            f"{members} members and a hub need {members + 1} hosts, the cluster has {cluster.hosts}"
        )
    lk = link or LinkProfile()
    cl = cluster if cluster is not None else cluster_for(members + 1, lk, mrc_for(lk))
    threads_before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield cl
    finally:
        torch.set_num_threads(threads_before)
        if cluster is None:
            cl.close()


def _intervals(slots: Sequence[Slot], kind: str) -> float:
    return sum(i.end_s - i.start_s for s in slots for i in s.intervals if i.kind == kind)


def _counts(members: Sequence[Counter[str]], hub: Counter[str], unsent: int) -> Counter[str]:
    """The members' and the hub's counters summed, with what the hub left unsent."""
    counts: Counter[str] = Counter()
    for c in members:
        counts.update(c)
    counts.update(hub)
    counts["unsent"] = unsent
    return counts


@dataclass
class _Ran:
    """What :func:`_run_members` leaves for the job's result."""

    wall_s: float
    slots: list[Slot]
    applied: tuple[Applied, ...]
    hub_refused: Counter[Refusal]


def _run_members(
    cl: EmuCluster,
    members: int,
    fingerprint: bytes,
    serve: Callable[[Hub], Callable[[threading.Event], None]],
    bodies: Sequence[Callable[..., None]],
    *,
    hub_name: str,
    member_name: str,
    chaos: Schedule | None,
    max_wall_s: float,
    origin: float,
) -> _Ran:
    """The hub on host ``members`` (``serve(hub)`` gives its loop, run in a thread until the
    members are done), member r a slot running ``bodies[r]`` on host r, under ``chaos``.

    Raises:
        RunFailed: a member or the hub failed with an error of its own.
    """
    stop = threading.Event()
    errors: list[BaseException] = []
    with Hub(cl.endpoints[members], members, {r: r for r in range(members)}, fingerprint) as hub:
        loop = serve(hub)

        def run_hub() -> None:
            try:
                loop(stop)
            except BaseException as e:  # re-raised by the main thread
                errors.append(e)

        server = threading.Thread(target=run_hub, name=hub_name)
        server.start()
        slots = [
            Slot(f"{member_name}-{r}", partial(body, endpoint=cl.endpoints[r]))
            for r, body in enumerate(bodies)
        ]
        harness = _Harness(cl, slots, chaos)
        try:
            wall = harness.run(origin, max_wall_s)
        finally:
            stop.set()
            server.join(JOIN_S)
        if errors:
            raise RunFailed(f"{hub_name}: {type(errors[0]).__name__}: {errors[0]}") from errors[0]
        return _Ran(wall, slots, tuple(harness.applied), Counter(hub.refused))


# -- Decoupled DiLoCo ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DecoupledResult:
    config: DecoupledConfig
    chaos: Schedule | None
    wall_s: float
    steps: tuple[StepRecord, ...]
    merges: tuple[MergeRecord, ...]
    evals: tuple[EvalPoint, ...]
    liveness: tuple[LivenessEvent, ...]
    refused: dict[str, int]
    counts: dict[str, int]
    incarnations: tuple[int, ...]  # per learner: incarnations run
    fragmentation: Fragmentation
    summary: metrics.Summary
    chaos_log: tuple[Applied, ...]
    parameters: np.ndarray = field(compare=False)  # the global model at the end
    learner_parameters: tuple[np.ndarray, ...] = field(compare=False, default=())

    def fragment_stats(self) -> list[metrics.FragmentStats]:
        return metrics.fragment_stats(self.merges, self.config.fragments)

    def curve(self) -> list[metrics.CurvePoint]:
        return metrics.decoupled_curve(self.evals)

    def write_csvs(self, directory: str | pathlib.Path, prefix: str = "decoupled") -> None:
        d = pathlib.Path(directory)
        metrics.write_rows(d / f"{prefix}_summary.csv", [self.summary])
        for name, rows in (
            ("steps", self.steps),
            ("merges", self.merges),
            ("fragments", self.fragment_stats()),
            ("curve", self.curve()),
        ):
            if rows:
                metrics.write_rows(d / f"{prefix}_{name}.csv", list(rows))


def _fingerprint(what: str, cfg: object) -> bytes:
    return job_fingerprint(f"{what} {cfg!r}")


def run_decoupled(
    cfg: DecoupledConfig,
    *,
    chaos: Schedule | None = None,
    link: LinkProfile | None = None,
    cluster: EmuCluster | None = None,
) -> DecoupledResult:
    """Run ``cfg``: learner m on host m, the syncer on host M.

    Raises:
        ConfigError: too few hosts, or a schedule for another number of learners.
        RunFailed: a learner or the syncer failed with an error of its own.
    """
    with _emu_job(cfg.learners, "learners", chaos, link, cluster) as cl:
        return _run_decoupled(cfg, cl, chaos)


def _run_decoupled(cfg: DecoupledConfig, cl: EmuCluster, chaos: Schedule | None) -> DecoupledResult:
    m = cfg.learners
    fp = _fingerprint("decoupled", cfg)
    states = [LearnerState(cfg, r) for r in range(m)]
    logs = [LearnerLog() for _ in range(m)]
    ref_task = bind(cfg.reference(), 0)
    model = ref_task.run.model
    fragmentation = fragment_model(model, cfg.fragments)
    tokens_per_step = int(ref_task.run.batch(0)[1].numel())
    origin = time.monotonic()
    core = SyncerCore(cfg, fragmentation, list(model.parameters()), tokens_per_step, now=0.0)
    servers: list[Syncer] = []

    def serve(hub: Hub) -> Callable[[threading.Event], None]:
        servers.append(Syncer(core, hub, ref_task, origin=origin))
        return servers[0].run

    bodies = [
        partial(run_learner, cfg, states[r], logs[r], syncer_host=m, fingerprint=fp, origin=origin)
        for r in range(m)
    ]
    ran = _run_members(
        cl,
        m,
        fp,
        serve,
        bodies,
        hub_name="syncer",
        member_name="learner",
        chaos=chaos,
        max_wall_s=cfg.max_wall_s,
        origin=origin,
    )
    syncer, slots, wall = servers[0], ran.slots, ran.wall_s
    refused = by_reason(core.refused, ran.hub_refused)
    steps = tuple(
        sorted((s for log in logs for s in log.steps), key=lambda s: (s.start_at_s, s.learner))
    )
    work = metrics.decoupled_work(steps, core.merges)
    counts = _counts([log.counts for log in logs], core.counts, syncer.unsent)
    counts["bytes_to_syncer"] = sum(log.bytes_sent for log in logs)
    counts["bytes_from_syncer"] = sum(log.bytes_received for log in logs)
    final = syncer.evals[-1].val_loss if syncer.evals else math.nan
    summary = metrics.summarize(
        "decoupled",
        work,
        m,
        wall,
        tokens_merged=core.tokens_merged,
        down_s=_intervals(slots, "down"),
        paused_s=_intervals(slots, "paused"),
        final_val_loss=final,
    )
    core.global_vector(list(model.parameters()))
    return DecoupledResult(
        cfg,
        chaos,
        wall,
        steps,
        tuple(core.merges),
        tuple(syncer.evals),
        tuple(core.liveness),
        dict(refused),
        dict(counts),
        tuple(s.incarnation + 1 for s in slots),
        fragmentation,
        summary,
        ran.applied,
        get_flat(model).numpy(),
        tuple(get_flat(st.model).numpy() for st in states),
    )


# -- elastic data parallel ----------------------------------------------------------------------


@dataclass(frozen=True)
class ElasticResult:
    config: ElasticConfig
    chaos: Schedule | None
    wall_s: float
    attempts: tuple[AttemptRecord, ...]
    commits: tuple[Commit, ...]
    reforms: tuple[Reform, ...]
    curve: tuple[metrics.CurvePoint, ...]
    refused: dict[str, int]
    counts: dict[str, int]
    incarnations: tuple[int, ...]
    summary: metrics.Summary
    chaos_log: tuple[Applied, ...]
    parameters: tuple[np.ndarray, ...] = field(compare=False, default=())  # per worker

    def write_csvs(self, directory: str | pathlib.Path, prefix: str = "elastic") -> None:
        d = pathlib.Path(directory)
        metrics.write_rows(d / f"{prefix}_summary.csv", [self.summary])
        for name, rows in (
            ("attempts", self.attempts),
            ("commits", self.commits),
            ("reforms", self.reforms),
            ("curve", self.curve),
        ):
            if rows:
                metrics.write_rows(d / f"{prefix}_{name}.csv", list(rows))


def run_elastic(
    cfg: ElasticConfig,
    *,
    chaos: Schedule | None = None,
    link: LinkProfile | None = None,
    cluster: EmuCluster | None = None,
) -> ElasticResult:
    """Run ``cfg``: worker w on host w, the coordinator on host ``cfg.workers``.

    Raises:
        ConfigError: too few hosts, or a schedule for another number of workers.
        RunFailed: a worker or the coordinator failed with an error of its own.
    """
    with _emu_job(cfg.workers, "workers", chaos, link, cluster) as cl:
        return _run_elastic(cfg, cl, chaos)


def _run_elastic(cfg: ElasticConfig, cl: EmuCluster, chaos: Schedule | None) -> ElasticResult:
    n = cfg.workers
    fp = _fingerprint("elastic", cfg)
    states = [WorkerState(cfg, r) for r in range(n)]
    logs = [WorkerLog() for _ in range(n)]
    tokens_per_step = int(bind(cfg.reference(), 0).run.batch(0)[1].numel())
    core = CoordinatorCore(cfg, tokens_per_step)
    origin = time.monotonic()
    servers: list[Coordinator] = []

    def serve(hub: Hub) -> Callable[[threading.Event], None]:
        servers.append(Coordinator(core, hub, origin=origin))
        return servers[0].run

    bodies = [
        partial(
            run_worker, cfg, states[r], logs[r], coordinator_host=n, fingerprint=fp, origin=origin
        )
        for r in range(n)
    ]
    ran = _run_members(
        cl,
        n,
        fp,
        serve,
        bodies,
        hub_name="coordinator",
        member_name="worker",
        chaos=chaos,
        max_wall_s=cfg.max_wall_s,
        origin=origin,
    )
    coordinator, slots, wall = servers[0], ran.slots, ran.wall_s
    refused = by_reason(core.refused, ran.hub_refused)
    attempts = tuple(
        sorted((a for log in logs for a in log.attempts), key=lambda a: (a.start_at_s, a.worker))
    )
    work = metrics.elastic_work(attempts)
    evals = [e for log in logs for e in log.evals]
    curve = tuple(metrics.elastic_curve(evals, core.commits))
    counts = _counts([log.counts for log in logs], core.counts, coordinator.unsent)
    summary = metrics.summarize(
        "elastic_dp",
        work,
        n,
        wall,
        tokens_merged=float(sum(c.tokens for c in core.commits)),
        down_s=_intervals(slots, "down"),
        paused_s=_intervals(slots, "paused"),
        final_val_loss=curve[-1].val_loss if curve else math.nan,
    )
    return ElasticResult(
        cfg,
        chaos,
        wall,
        attempts,
        tuple(core.commits),
        tuple(core.reforms),
        curve,
        dict(refused),
        dict(counts),
        tuple(s.incarnation + 1 for s in slots),
        summary,
        ran.applied,
        tuple(get_flat(st.model).numpy() for st in states),
    )


# -- command line -------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m host.train.decoupled.run", description=__doc__)
    ap.add_argument("--task", default="digits-mlp")
    ap.add_argument("--learners", type=int, default=4)
    ap.add_argument("--fragments", type=int, default=4)
    ap.add_argument("--sync-every-steps", type=int, default=8)
    ap.add_argument("--overlap-steps", type=int, default=2)
    ap.add_argument("--quorum", type=int, default=1)
    ap.add_argument("--averaging", choices=[a.value for a in Averaging], default="rda")
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--min-step-ms", type=float, default=20.0)
    ap.add_argument("--wall-s", type=float, default=20.0)
    ap.add_argument("--mtbi-s", type=float, default=8.0, help="per learner; 0: no chaos")
    ap.add_argument("--down-s", type=float, nargs=2, default=(1.0, 3.0))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--results", default="results/decoupled")
    args = ap.parse_args(argv)
    cfg = DecoupledConfig(
        task=args.task,
        learners=args.learners,
        fragments=args.fragments,
        sync_every_steps=args.sync_every_steps,
        overlap_steps=args.overlap_steps,
        steps=args.steps,
        min_step_s=args.min_step_ms / 1e3,
        max_wall_s=args.wall_s,
        syncer=SyncerConfig(quorum=args.quorum, averaging=Averaging(args.averaging)),
    )
    ecfg = ElasticConfig(
        task=args.task,
        workers=args.learners,
        rounds=args.steps,
        min_step_s=args.min_step_ms / 1e3,
        max_wall_s=args.wall_s,
        rendezvous_timeout_s=0.5,
    )
    sched = None
    if args.mtbi_s > 0:
        chaos = ChaosConfig(
            seed=args.seed,
            mtbi_s=args.mtbi_s,
            horizon_s=args.wall_s,
            down_min_s=args.down_s[0],
            down_max_s=args.down_s[1],
        )
        sched = schedule(chaos, args.learners)
        print(sched.describe())
    dec = run_decoupled(cfg, chaos=sched)
    dec.write_csvs(args.results)
    el = run_elastic(ecfg, chaos=sched)
    el.write_csvs(args.results)
    for s in (dec.summary, el.summary):
        print(
            f"{s.algorithm:10} M={s.members} wall {s.wall_s:.1f} s goodput {s.goodput:.2f} "
            f"uptime {s.uptime:.2f} tokens {s.tokens_merged:.0f} loss {s.final_val_loss:.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
