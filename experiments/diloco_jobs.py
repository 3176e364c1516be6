"""DiLoCo jobs for an experiment, on a fabric or on the in-process emulator, with failures on
the driver's clock; one result type for both.

* :class:`AgentPool`: one :mod:`host.diloco_agent` per host of a running fabric, started once
  and given one job after another (importing torch and opening a process costs seconds per
  host, more than a short job's setup). :meth:`AgentPool.run` sends every rank its ``run``
  command, reads the agents' events in :func:`experiments.hosts.drive_agents` (printing a
  line per round), applies the run's :class:`~experiments.faults.TimedAction` s on their own
  clock (:class:`~experiments.faults.TimedFaults`), and reads back the records and
  observations the agents wrote. An agent that exits mid-run is reported with its host and
  the last round it completed; the others finish (gossip) or stop once they notice (DiLoCo),
  and the pool starts a new agent on that host before the next job. :meth:`AgentPool.close`
  asks every agent to quit and ends any that does not.
* :class:`EmuJobs`: every worker a thread of this process over an emulated fabric whose links
  run at ``link_mbps`` (:func:`host.train.diloco.run.run_emu_job`).

Both give a :class:`JobRun`: every worker's round records, how each ended, the figures that
need every worker (:func:`host.train.diloco.observe.round_figures`) and the failures applied.
:data:`FABRIC_FAILURES` and :data:`EMU_FAILURES` say what each failure scenario does on each
network.
"""

from __future__ import annotations

import contextlib
import math
import pathlib
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, Protocol

from experiments.agent_forks import ForkError, ForkServers
from experiments.agent_pool import (
    AGENTS_LOG,
    LAUNCHES,
    JobsError,
    agent_argv,
    alive,
    await_ready,
    drive_job,
    open_agent_log,
    quit_agents,
    start_agent,
)
from experiments.faults import AppliedAction, TimedAction, TimedFaults
from experiments.hosts import AgentProcess
from host.diloco_agent import RunCommand, read_job_records
from host.linkemu import EmuNetwork, LinkProfile
from host.train.diloco.config import DilocoConfig
from host.train.diloco.errors import WorkerFailed
from host.train.diloco.observe import (
    MeanModel,
    MemoryObserver,
    Observations,
    RoundFigures,
    read_observations,
    round_figures,
)
from host.train.diloco.run import cluster_for, mrc_for, run_emu_job
from host.train.diloco.worker import RoundRecord
from topologies.model import Fabric

AGENT_MODULE = "host.diloco_agent"
"""The per-host agent of DiLoCo jobs (:mod:`host.diloco_agent`)."""

STALL_TIMEOUT_S = 600.0
"""A job fails when no agent said anything for this long (a round under a failure on a busy
machine takes tens of seconds; a hung job says nothing at all)."""
QUIT_TIMEOUT_S = 30.0
EMU_QUEUE_BYTES = 1 << 20


@dataclass(frozen=True)
class WorkerEnd:
    """How one worker of a job ended."""

    rank: int
    host: str
    status: str  # "finished", "died" (it failed itself or its process exited), "stopped"
    last_round: int  # the last round it completed (-1: none)
    error: str

    def describe(self) -> str:
        where = f"worker {self.rank} (host {self.host})"
        if self.status == "finished":
            return f"{where} finished round {self.last_round}"
        return (
            f"{where} {self.status} in round {self.last_round + 1} "
            f"(last completed round {self.last_round}): {self.error}"
        )


@dataclass
class JobRun:
    """One job's measurements, whichever network ran it."""

    name: str
    config: DilocoConfig
    network: str  # "fabric" | "emu"
    link_mbps: float
    records: tuple[RoundRecord, ...]
    ends: dict[int, WorkerEnd]
    figures: dict[int, RoundFigures] = field(default_factory=dict)
    faults: tuple[AppliedAction, ...] = ()

    @property
    def failed(self) -> list[WorkerEnd]:
        """Workers that did not finish, those that died first."""
        bad = [e for e in self.ends.values() if e.status != "finished"]
        return sorted(bad, key=lambda e: (e.status != "died", e.last_round, e.rank))

    @property
    def failure(self) -> str:
        """The first worker that did not finish ("" when every one did)."""
        bad = self.failed
        return bad[0].describe() if bad else ""


@dataclass(frozen=True)
class FailurePlan:
    """A failure scenario at a time of a run."""

    scenario: str
    at_s: float  # seconds after the run's start
    duration_s: float


class Jobs(Protocol):
    """Runs jobs on one network at one link rate."""

    network: str
    link_mbps: float

    def run(self, name: str, cfg: DilocoConfig, failure: FailurePlan | None = None) -> JobRun:
        """Raises: JobsError (the network could not run it at all)."""
        ...


def _figures(cfg: DilocoConfig, obs: Observations, model: MeanModel | None) -> dict[int, Any]:
    return round_figures(cfg, obs, model) if obs else {}


# -- failure scenarios -------------------------------------------------------------------------

Commands = list[list[str]]


def _host_links(fabric: Fabric, hosts: Sequence[str]) -> tuple[Commands, Commands]:
    """The last worker's host loses every link (one per plane)."""
    h = fabric.host(hosts[-1])
    return (
        [["fail", "link", h.name, n.leaf] for n in h.nics],
        [["restore", "link", h.name, n.leaf] for n in h.nics],
    )


def _plane(fabric: Fabric, hosts: Sequence[str]) -> tuple[Commands, Commands]:
    """The last plane fails (the others carry everything)."""
    p = str(fabric.spec.planes - 1)
    return [["fail", "plane", p]], [["restore", "plane", p]]


def _outage(fabric: Fabric, hosts: Sequence[str]) -> tuple[Commands, Commands]:
    """Every plane fails: no host reaches any other."""
    planes = [str(p) for p in range(fabric.spec.planes)]
    return [["fail", "plane", p] for p in planes], [["restore", "plane", p] for p in planes]


FABRIC_FAILURES: dict[str, Callable[[Fabric, Sequence[str]], tuple[Commands, Commands]]] = {
    "host": _host_links,
    "plane": _plane,
    "outage": _outage,
}
"""Scenario -> (controller commands at the failure, commands at the restore)."""

EmuChange = Callable[[EmuNetwork], None]


def _emu_planes(planes: Sequence[int]) -> tuple[list[EmuChange], list[EmuChange]]:
    def fail(p: int) -> EmuChange:
        def change(emu: EmuNetwork) -> None:
            emu.fail(p)

        return change

    def restore(p: int) -> EmuChange:
        def change(emu: EmuNetwork) -> None:
            emu.restore(p)

        return change

    return [fail(p) for p in planes], [restore(p) for p in planes]


EMU_FAILURES: dict[str, tuple[list[EmuChange], list[EmuChange]]] = {
    "plane": _emu_planes([1]),
    "outage": _emu_planes([0, 1]),
}
"""Scenario -> (changes at the failure, at the restore) on the emulated fabric (2 planes).
The emulator has no per-host links: scenario ``host`` is fabric-only."""


def failure_scenarios(network: str) -> list[str]:
    return list(FABRIC_FAILURES if network == "fabric" else EMU_FAILURES)


def _timed(
    plan: FailurePlan, fail: Sequence[Callable[[], object]], restore: Sequence[Callable[[], object]]
) -> list[TimedAction]:
    label = f"{plan.scenario} "
    out = [TimedAction(plan.at_s, label + "fail", _all(fail))]
    out.append(TimedAction(plan.at_s + plan.duration_s, label + "restore", _all(restore), True))
    return out


def _all(calls: Sequence[Callable[[], object]]) -> Callable[[], None]:
    def run() -> None:
        for c in calls:
            c()

    return run


# -- the emulator ------------------------------------------------------------------------------


class EmuJobs:
    """Jobs with every worker a thread of this process, on links of ``link_mbps``."""

    network = "emu"

    def __init__(
        self, link_mbps: float, *, rounds_log: Callable[[str], None] | None = None
    ) -> None:
        self.link_mbps = link_mbps
        self.rounds_log = rounds_log
        self._model: tuple[DilocoConfig, MeanModel] | None = None

    def _mean_model(self, cfg: DilocoConfig) -> MeanModel:
        if self._model is None or self._model[0] != cfg:
            self._model = (cfg, MeanModel(cfg))
        return self._model[1]

    def run(self, name: str, cfg: DilocoConfig, failure: FailurePlan | None = None) -> JobRun:
        link = LinkProfile(rate_mbps=self.link_mbps, queue_bytes=EMU_QUEUE_BYTES)
        obs = MemoryObserver()
        actions: list[TimedAction] = []
        with cluster_for(cfg.workers, link, mrc_for(link)) as cl:
            if failure is not None:
                fail, restore = EMU_FAILURES[failure.scenario]
                emu = cl.emu
                actions = _timed(
                    failure, [partial(c, emu) for c in fail], [partial(c, emu) for c in restore]
                )
            t0 = time.monotonic()
            with TimedFaults(actions, t0) as timed:
                try:
                    result = run_emu_job(
                        cfg, cluster=cl, observer=obs, on_round=_printer(self.rounds_log)
                    )
                except WorkerFailed as e:
                    result = e.result
            applied = tuple(timed.applied)
        ends = {
            r: WorkerEnd(r, f"h{o.host + 1}", o.status.value, o.last_round, o.error)
            for r, o in result.outcomes.items()
        }
        records = tuple(rec for o in result.outcomes.values() for rec in o.records)
        figures = _figures(cfg, obs.observations, self._mean_model(cfg))
        return JobRun(name, cfg, self.network, self.link_mbps, records, ends, figures, applied)


def _round_line(ev: Mapping[str, Any]) -> str:
    def num(k: str) -> float:
        v = ev.get(k)
        return float(v) if isinstance(v, int | float) else math.nan

    return (
        f"    round {ev.get('round'):>3}: util {num('utilization'):4.2f}, wall "
        f"{num('wall_s'):6.2f} s, blocked {num('blocked_s'):6.2f} s, train loss "
        f"{num('train_loss'):.3f}"
    )


def _printer(log: Callable[[str], None] | None) -> Callable[[RoundRecord], None] | None:
    if log is None:
        return None

    def note(rec: RoundRecord) -> None:
        if rec.rank == 0:
            log(_round_line(asdict(rec)))

    return note


# -- the fabric --------------------------------------------------------------------------------


@dataclass
class _Progress:
    """What the driver knows of one job while it runs."""

    hosts: tuple[str, ...]
    last_round: dict[str, int] = field(default_factory=dict)
    ends: dict[str, WorkerEnd] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)

    def done(self) -> bool:
        return len(self.ends) == len(self.hosts) or bool(self.refused)


class AgentPool:
    """One DiLoCo agent per host of a running fabric (context manager).

    Args:
        fabric: the topology (``fabric.spec.link_mbps`` is the links' rate).
        topology: its ``topology.json`` (what the agents read).
        host_pids: host name -> the pid of its Mininet shell.
        out_dir: where the jobs' directories go (``<out_dir>/<job name>/``).
        launch: ``"fork"`` (default: a fork server per host imports the agent module once
            and forks each agent, so a killed agent's replacement starts in milliseconds, not
            seconds of torch imports on the cores the jobs share) or ``"exec"`` (a
            ``python -m host.diloco_agent`` process each, :func:`AgentProcess.in_host`).
        start: starts the agent of one host (default: by ``launch``); tests pass their own.
    Raises:
        JobsError: the agents did not all start.
    """

    network = "fabric"

    def __init__(
        self,
        fabric: Fabric,
        topology: str | pathlib.Path,
        host_pids: Mapping[str, int],
        out_dir: str | pathlib.Path,
        *,
        log: Callable[[str], None] = print,
        rounds_log: Callable[[str], None] | None = None,
        start: Callable[[str], AgentProcess] | None = None,
        stall_timeout_s: float = STALL_TIMEOUT_S,
        keep_observations: bool = False,
        launch: str = "fork",
    ) -> None:
        if launch not in LAUNCHES:
            raise JobsError(f"unknown launch '{launch}'; valid: {', '.join(LAUNCHES)}")
        self.fabric = fabric
        self.link_mbps = fabric.spec.link_mbps
        self.out_dir = pathlib.Path(out_dir)
        self.log = log
        self.rounds_log = rounds_log
        self.stall_timeout_s = stall_timeout_s
        self.keep_observations = keep_observations
        self.names = [h.name for h in sorted(fabric.hosts, key=lambda h: h.index)]
        self._agent_log = open_agent_log(self.out_dir)
        self._model: tuple[DilocoConfig, MeanModel] | None = None
        self.controller: Callable[[list[str]], object] | None = None
        """Runs one controller command (``["fail", "plane", "1"]``): failures need it."""

        def in_host(name: str) -> AgentProcess:
            return start_agent(
                AGENT_MODULE, name, name, host_pids, topology, self.out_dir, self._agent_log
            )

        def forked(name: str) -> AgentProcess:
            server = self._servers.get(name)
            try:
                server.wait_ready()
                return AgentProcess(name, server.spawn(agent_argv(name, topology, self.out_dir)))
            except ForkError as e:
                raise JobsError(f"{e}; see {self.out_dir / AGENTS_LOG}") from e

        self._servers = ForkServers(host_pids, AGENT_MODULE, self._agent_log)
        self._forking = start is None and launch == "fork"
        self._start = start or (forked if launch == "fork" else in_host)
        self.agents: dict[str, AgentProcess] = {}
        try:
            self._start_missing()
        except BaseException:
            self.close()
            raise

    def _start_missing(self) -> None:
        missing = [n for n in self.names if not alive(self.agents.get(n))]
        if self._forking:
            self._servers.start(missing)  # all import at once; each is waited in forked()
        fresh = [self._start(n) for n in missing]
        for a in fresh:
            self.agents[a.name] = a
        await_ready(fresh, set(), self.out_dir)

    def _mean_model(self, cfg: DilocoConfig) -> MeanModel:
        if self._model is None or self._model[0] != cfg:
            self._model = (cfg, MeanModel(cfg))
        return self._model[1]

    def kill(self, host: str) -> None:
        """End the agent of ``host`` at once (SIGKILL), as a crash would."""
        self.agents[host].proc.kill()

    def failure_actions(self, plan: FailurePlan, hosts: Sequence[str]) -> list[TimedAction]:
        ctl = self.controller
        if ctl is None:
            raise JobsError("failures need the fabric's controller (AgentPool.controller)")
        fail, restore = FABRIC_FAILURES[plan.scenario](self.fabric, hosts)
        return _timed(plan, [partial(ctl, c) for c in fail], [partial(ctl, c) for c in restore])

    def run(
        self,
        name: str,
        cfg: DilocoConfig,
        failure: FailurePlan | None = None,
        *,
        actions: Sequence[TimedAction] = (),
    ) -> JobRun:
        """Run ``cfg`` with rank r on the r-th host; ``failure`` (and ``actions``) on the
        driver's clock.

        Raises:
            JobsError: not enough hosts, a job refused by an agent, or no agent said anything
                for the stall timeout (every agent is then restarted).
        """
        if cfg.workers > len(self.names):
            raise JobsError(
                f"{cfg.workers} workers need {cfg.workers} hosts; the fabric has {len(self.names)}"
            )
        self._start_missing()
        hosts = tuple(self.names[: cfg.workers])
        job_dir = self.out_dir / name
        shutil.rmtree(job_dir, ignore_errors=True)
        timed = list(actions) + (self.failure_actions(failure, hosts) if failure else [])
        progress = _Progress(hosts)
        agents = [self.agents[h] for h in hosts]
        origin = time.monotonic()
        for rank, h in enumerate(hosts):
            self.agents[h].answer(**RunCommand(name, cfg, rank, hosts, origin).to_message())
        try:
            with TimedFaults(timed, origin) as faults:
                drive_job(
                    name,
                    agents,
                    lambda a, ev: self._handle(a, ev, name, progress),
                    progress.done,
                    self.out_dir,
                    on_exit=lambda a: self._exited(a, progress),
                    check=faults.check,
                    stall_timeout_s=self.stall_timeout_s,
                )
            applied = tuple(faults.applied)
        except JobsError:  # a hung job (nothing else in it raises this): end its agents
            for a in agents:
                a.stop()
            raise
        if progress.refused:
            raise JobsError(f"job {name} refused: {'; '.join(progress.refused)}")
        return self._collect(name, cfg, hosts, progress, applied)

    def _handle(self, a: AgentProcess, ev: dict[str, Any], name: str, p: _Progress) -> None:
        kind = ev.get("event")
        if ev.get("run") not in (name, None):
            return  # a late event of an earlier job
        if kind == "round" and isinstance(ev.get("round"), int):
            p.last_round[a.name] = ev["round"]
            if ev.get("rank") == 0 and self.rounds_log is not None:
                self.rounds_log(_round_line(ev))
        elif kind == "finished":
            p.ends[a.name] = WorkerEnd(
                int(ev.get("rank", -1)),
                a.name,
                str(ev.get("status")),
                int(ev.get("last_round", -1)),
                str(ev.get("error", "")),
            )
        elif kind == "refused":
            p.refused.append(f"{a.name}: {ev.get('message')}")

    def _exited(self, a: AgentProcess, p: _Progress) -> None:
        if a.name in p.hosts and a.name not in p.ends:
            last = p.last_round.get(a.name, -1)
            code = a.proc.wait()
            p.ends[a.name] = WorkerEnd(
                p.hosts.index(a.name), a.name, "died", last, f"its agent exited (status {code})"
            )
            self.log(f"    {p.ends[a.name].describe()}")

    def _collect(
        self,
        name: str,
        cfg: DilocoConfig,
        hosts: tuple[str, ...],
        p: _Progress,
        applied: tuple[AppliedAction, ...],
    ) -> JobRun:
        job_dir = self.out_dir / name
        records: list[RoundRecord] = []
        for h in hosts:
            path = job_dir / f"{h}.jsonl"
            if path.exists():
                records += read_job_records(path)[0]
        obs = read_observations(job_dir / "obs")
        if not self.keep_observations:
            shutil.rmtree(job_dir / "obs", ignore_errors=True)
        ends = {e.rank: e for e in p.ends.values()}
        figures = _figures(cfg, obs, self._mean_model(cfg))
        return JobRun(
            name, cfg, self.network, self.link_mbps, tuple(records), ends, figures, applied
        )

    def close(self) -> None:
        """Ask every agent to quit; end those that do not (idempotent)."""
        agents, self.agents = list(self.agents.values()), {}
        quit_agents(agents, QUIT_TIMEOUT_S)
        self._servers.close()
        with contextlib.suppress(OSError):
            self._agent_log.close()

    def __enter__(self) -> AgentPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
