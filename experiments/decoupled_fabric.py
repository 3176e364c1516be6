"""Decoupled DiLoCo and elastic data-parallel jobs on a running fabric, one process per learner
(worker), chaos applied to the processes and the network on the driver's clock.

* :class:`SlotPool`: one :mod:`host.decoupled_agent` per *process slot* (a host and a slot
  number; :func:`placement` puts the hub alone on the last host and the members round-robin on
  the others, so that every member reaches its hub over the fabric), started once and given
  one role of one job after another. A slot whose process was killed gets a new process,
  forked by its host's fork server (:mod:`experiments.agent_forks`), which imported torch and
  bound every task once.
* :func:`run_job`: the hub's ``run`` command, then (at the job's origin) every member's; the
  chaos schedule's actions (:data:`PROCESS_ACTIONS`) run in a
  :class:`~experiments.faults.TimedFaults` thread at their times: ``kill`` SIGKILLs the
  member's process; a spare agent of its slot, started before the run, replaces it and gets
  the ``run`` command (incarnation + 1: it restores its checkpoint file and catches up from
  the hub) at the ``start`` time; ``stop`` / ``cont``
  are SIGSTOP / SIGCONT; ``slow`` / ``unslow`` the agent's step-time factor; spine and plane
  failures and restores are ``tf-ctl`` commands through the controller. The driver's own
  loop (:func:`experiments.hosts.drive_agents`) only reads what the agents say. At the end
  (``wall_s`` after the origin) paused processes are continued, the network restored, every
  member stopped, then the hub (it merges what it holds and evaluates the global model).
* :class:`FabricJob`: the records the agents wrote, read back, and the down and paused
  intervals the driver measured; :meth:`FabricJob.summary` is the same
  :class:`~host.train.decoupled.metrics.Summary` as the emulator's.

A hub (syncer or coordinator) that dies is the one fatal fault (:class:`FatalFault`); a member
that dies outside the schedule is recorded and restarted like a killed one.
"""

from __future__ import annotations

import contextlib
import math
import os
import pathlib
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

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
from host.decoupled_agent import RunCommand, Slot
from host.train.decoupled import metrics
from host.train.decoupled.chaos import Action, ChaosAction, Schedule, ctl_argv
from host.train.decoupled.config import DecoupledConfig, ElasticConfig, JobConfig
from host.train.decoupled.elastic import AttemptRecord, Commit, Reform, WorkerEval
from host.train.decoupled.learner import StepRecord
from host.train.decoupled.records import HubSummary, MemberEnd, Records, read_records
from host.train.decoupled.syncer import EvalPoint, LivenessEvent, MergeRecord
from topologies.model import Fabric

STALL_TIMEOUT_S = 300.0
"""A job fails when no agent said anything for this long (a running role says how far it is
every two seconds: only a hung job is silent)."""
HUB_LEAD_S = 1.0
"""The hub is told to start this long before the job's origin (its endpoint must be open
when the members connect; the members are told at the origin, or once the hub said
``started`` if that came later). A warmed agent starts its hub in well under a second; every
run waits out the whole lead (2 s before: 80 s of a 39-run experiment)."""
STOP_TIMEOUT_S = 120.0
QUIT_TIMEOUT_S = 20.0
REAP_TIMEOUT_S = 10.0
"""How long a killed member's process may take to exit before its replacement runs anyway."""
POLL_S = 0.05
AGENT_MODULE = "host.decoupled_agent"


class FatalFault(JobsError):
    """The hub (syncer or coordinator) died: the job cannot go on."""


@dataclass(frozen=True)
class Placement:
    """Where a job's processes run."""

    members: tuple[Slot, ...]
    hub: Slot

    @property
    def slots(self) -> tuple[Slot, ...]:
        return (*self.members, self.hub)


def placement(hosts: Sequence[str], members: int) -> Placement:
    """The hub alone on the last host (slot 0), member r on host r mod (hosts − 1), slot
    r div (hosts − 1).

    Raises:
        JobsError: fewer than two hosts.
    """
    if len(hosts) < 2:
        raise JobsError(f"a hub and its members need two hosts or more, the fabric has {hosts}")
    others = hosts[:-1]
    return Placement(
        tuple((others[r % len(others)], r // len(others)) for r in range(members)),
        (hosts[-1], 0),
    )


ROLE_NAMES: dict[type[Any], tuple[str, str]] = {
    DecoupledConfig: ("learner", "syncer"),
    ElasticConfig: ("worker", "coordinator"),
}
"""Per job type: the members' role and the hub's."""


def members_of(cfg: JobConfig) -> int:
    return cfg.learners if isinstance(cfg, DecoupledConfig) else cfg.workers


# -- the agents --------------------------------------------------------------------------------


class SlotPool:
    """One decoupled agent per process slot of a running fabric (context manager).

    Agents are forked by a fork server per host (:mod:`experiments.agent_forks`): it imports
    torch and binds every task once (3.5–4 s of CPU), so a new or replacement agent is ready
    in a fraction of a second; ``launch="exec"`` starts each agent as its own
    ``python -m host.decoupled_agent`` process instead.

    Args:
        fabric: the topology.
        topology: its ``topology.json`` (what the agents read).
        host_pids: host name → the pid of its Mininet shell.
        out_dir: where the runs' directories go.
        launch: ``"fork"`` or ``"exec"`` (:data:`LAUNCHES`).
        start: starts the agent of one slot (default: by ``launch``); tests pass their own.
    """

    def __init__(
        self,
        fabric: Fabric,
        topology: str | pathlib.Path,
        host_pids: Mapping[str, int],
        out_dir: str | pathlib.Path,
        *,
        log: Callable[[str], None] = print,
        launch: str = "fork",
        start: Callable[[Slot], AgentProcess] | None = None,
    ) -> None:
        if launch not in LAUNCHES:
            raise JobsError(f"unknown launch '{launch}'; valid: {', '.join(LAUNCHES)}")
        self.fabric = fabric
        self.out_dir = pathlib.Path(out_dir)
        self.log = log
        self.hosts = [h.name for h in sorted(fabric.hosts, key=lambda h: h.index)]
        self._agent_log = open_agent_log(self.out_dir)
        self.agents: dict[Slot, AgentProcess] = {}
        self.spares: dict[Slot, AgentProcess] = {}
        self._ready: set[AgentProcess] = set()
        self._servers = ForkServers(host_pids, AGENT_MODULE, self._agent_log)
        self.controller: Callable[[list[str]], object] | None = None
        """Runs one controller command (``["fail", "plane", "1"]``): network chaos needs it."""

        def in_host(slot: Slot) -> AgentProcess:
            host, number = slot
            return start_agent(
                AGENT_MODULE,
                f"{host}/{number}",
                host,
                host_pids,
                topology,
                self.out_dir,
                self._agent_log,
                "--slot",
                str(number),
            )

        def forked(slot: Slot) -> AgentProcess:
            host, number = slot
            argv = agent_argv(host, topology, self.out_dir, "--slot", str(number))
            try:
                return AgentProcess(f"{host}/{number}", self._servers.get(host).spawn(argv))
            except ForkError as e:
                raise JobsError(f"{e}; see {self.out_dir / AGENTS_LOG}") from e

        self._start = start or (forked if launch == "fork" else in_host)
        self._forking = start is None and launch == "fork"

    def _servers_ready(self, hosts: set[str]) -> None:
        """Every host of ``hosts`` has a ready fork server (started together, then waited)."""
        if not self._forking:
            return
        self._servers.start(hosts)
        try:
            for h in sorted(hosts):
                self._servers.get(h).wait_ready()
        except ForkError as e:
            raise JobsError(f"{e}; see {self.out_dir / AGENTS_LOG}") from e

    def alive(self, slot: Slot) -> bool:
        return alive(self.agents.get(slot))

    def is_ready(self, agent: AgentProcess) -> bool:
        return agent in self._ready

    def note(self, agent: AgentProcess, ev: Mapping[str, Any]) -> None:
        """Any agent's event: a ``ready`` marks it ready."""
        if ev.get("event") == "ready":
            self._ready.add(agent)

    def replace(self, slot: Slot) -> AgentProcess:
        """The slot's spare becomes its agent (none left: a new process, not waited for).
        The next :meth:`ensure` starts a new spare, between runs: importing torch takes
        seconds of CPU that a run should not share."""
        spare = self.spares.pop(slot, None)
        self.agents[slot] = spare if alive(spare) and spare is not None else self._start(slot)
        return self.agents[slot]

    def ensure(self, slots: Sequence[Slot], spares: Sequence[Slot] = ()) -> None:
        """Every slot has a live agent, and every slot of ``spares`` a spare too (a killed
        member's replacement, already past its imports), and all of them said ``ready``.

        Raises:
            JobsError: an agent could not start.
        """
        self._servers_ready({h for h, _ in (*slots, *spares)})
        fresh = []
        for s in slots:
            if not self.alive(s):
                self.agents[s] = self._start(s)
            fresh.append(self.agents[s])
        for s in spares:
            if not alive(self.spares.get(s)):
                self.spares[s] = self._start(s)
            fresh.append(self.spares[s])
        await_ready([a for a in fresh if a not in self._ready], self._ready, self.out_dir)

    def close(self) -> None:
        """Ask every agent to quit; end those that do not (idempotent)."""
        agents = [*self.agents.values(), *self.spares.values()]
        self.agents, self.spares = {}, {}
        quit_agents(agents, QUIT_TIMEOUT_S)
        self._servers.close()
        with contextlib.suppress(OSError):
            self._agent_log.close()

    def __enter__(self) -> SlotPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- one job -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Interval:
    member: int
    kind: str  # "down" (killed until its restart was commanded) | "paused"
    start_s: float  # since the job's origin
    end_s: float


@dataclass
class _Member:
    """What the driver knows of one member while the job runs (guarded by _Job.lock)."""

    rank: int
    slot: Slot
    agent: AgentProcess
    incarnation: int = 0
    down_since: float | None = None
    paused_since: float | None = None
    restart_wanted: bool = False
    killed: set[int] = field(default_factory=set)  # pids this driver SIGKILLed
    dying: list[AgentProcess] = field(default_factory=list)  # killed, not yet reaped
    commanded: bool = False  # its agent was given the role
    ended: bool = False  # its role said "finished" (stopped or failed)


class _Job:
    """One job's processes and the chaos actions on them (called from the TimedFaults
    thread and the driver's loop)."""

    def __init__(
        self,
        pool: SlotPool,
        name: str,
        cfg: JobConfig,
        where: Placement,
        origin: float,
        log: Callable[[str], None],
    ) -> None:
        self.pool = pool
        self.name = name
        self.cfg = cfg
        self.where = where
        self.origin = origin
        self.log = log
        self.member_role, self.hub_role = ROLE_NAMES[type(cfg)]
        self.lock = threading.Lock()
        self.members = [_Member(r, s, pool.agents[s]) for r, s in enumerate(where.members)]
        self.hub = pool.agents[where.hub]
        self.intervals: list[Interval] = []
        self.notes: list[str] = []
        self.hub_done = False
        self.stopping = False
        self.changed = threading.Event()  # a new agent to read from
        self.errors: list[str] = []

    def now(self) -> float:
        return time.monotonic() - self.origin

    def command(self, rank: int, incarnation: int) -> dict[str, Any]:
        role = self.hub_role if rank < 0 else self.member_role
        return RunCommand(
            self.name,
            role,
            self.cfg,
            len(self.where.members) if rank < 0 else rank,
            self.where.members,
            self.where.hub,
            self.origin,
            incarnation,
        ).to_message()

    def agents(self) -> list[AgentProcess]:
        with self.lock:
            spares = [self.pool.spares[s] for s in self.where.members if s in self.pool.spares]
        return [self.hub, *(m.agent for m in self.members), *spares]

    # -- chaos (the TimedFaults thread) ----------------------------------------------------

    def apply(self, a: ChaosAction) -> None:
        PROCESS_ACTIONS[a.action](self, a)

    def _member(self, a: ChaosAction) -> _Member | None:
        return self.members[a.target] if 0 <= a.target < len(self.members) else None

    def kill(self, a: ChaosAction) -> None:
        with self.lock:
            m = self._member(a)
            if m is None or m.down_since is not None or self.stopping:
                return
            now = self.now()
            self._end_pause(m, now)
            m.killed.add(m.agent.proc.pid)
            with contextlib.suppress(ProcessLookupError):
                m.agent.proc.kill()
            m.down_since = now
            m.restart_wanted = False
            m.commanded = m.ended = False
            self._replace(m)

    def _replace(self, m: _Member) -> None:
        """The slot's next agent takes over from the one that ended or was killed; a thread
        reaps the old one, since the replacement may run only once the old process has
        let go of what it held (its UDP ports above all) (lock held)."""
        old = m.agent
        m.dying.append(old)
        threading.Thread(
            target=self._reap, args=(m, old), name=f"reap {old.name}", daemon=True
        ).start()
        m.agent = self.pool.replace(m.slot)
        self.changed.set()

    def _reap(self, m: _Member, old: AgentProcess) -> None:
        try:
            old.proc.wait(timeout=REAP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with self.lock:
                self.notes.append(
                    f"{self.member_role} {m.rank}: its killed process {old.proc.pid} had not "
                    f"exited after {REAP_TIMEOUT_S:.0f} s; its replacement runs anyway"
                )
        with self.lock:
            m.dying.remove(old)
            self._restart_if_due(m)

    def start(self, a: ChaosAction) -> None:
        with self.lock:
            m = self._member(a)
            if m is None or m.down_since is None or self.stopping:
                return
            m.restart_wanted = True
            self._restart_if_due(m)

    def _restart_if_due(self, m: _Member) -> None:
        """Command the replacement once its restart time has come, it is ready and every
        earlier process of its slot has been reaped (lock held)."""
        if (
            m.down_since is not None
            and m.restart_wanted
            and not m.dying
            and not self.stopping
            and self.pool.is_ready(m.agent)
        ):
            self._restart(m)

    def _restart(self, m: _Member) -> None:
        """Command the replacement (lock held)."""
        assert m.down_since is not None
        m.incarnation += 1
        m.agent.answer(**self.command(m.rank, m.incarnation))
        m.commanded = True
        self.intervals.append(Interval(m.rank, "down", m.down_since, self.now()))
        m.down_since = None
        m.restart_wanted = False

    def _signal(self, a: ChaosAction, sig: signal.Signals) -> _Member | None:
        m = self._member(a)
        if m is None or m.down_since is not None or m.ended:
            return None
        try:
            os.kill(m.agent.proc.pid, sig)
        except ProcessLookupError:
            return None
        return m

    def pause(self, a: ChaosAction) -> None:
        with self.lock:
            if self.stopping:
                return
            m = self._signal(a, signal.SIGSTOP)
            if m is not None and m.paused_since is None:
                m.paused_since = self.now()

    def cont(self, a: ChaosAction) -> None:
        with self.lock:
            m = self._signal(a, signal.SIGCONT)
            if m is not None:
                self._end_pause(m, self.now())

    def _end_pause(self, m: _Member, now: float) -> None:
        if m.paused_since is not None:
            self.intervals.append(Interval(m.rank, "paused", m.paused_since, now))
            m.paused_since = None

    def slow(self, a: ChaosAction) -> None:
        with self.lock:
            m = self._member(a)
            if m is not None and m.down_since is None:
                m.agent.answer(cmd="slow", factor=a.factor)

    def network(self, a: ChaosAction) -> None:
        ctl = self.pool.controller
        if ctl is None:
            raise JobsError("network chaos needs the fabric's controller (SlotPool.controller)")
        ctl(ctl_argv(a))

    # -- the driver's loop -----------------------------------------------------------------

    def handle(self, agent: AgentProcess, ev: dict[str, Any]) -> None:
        kind = ev.get("event")
        self.pool.note(agent, ev)
        if kind == "ready":
            with self.lock:
                for m in self.members:
                    if m.agent is agent:
                        self._restart_if_due(m)
            return
        if ev.get("run") not in (self.name, None):
            return  # a late event of an earlier job
        if kind == "finished":
            if agent is self.hub:
                self.hub_done = True
                if ev.get("status") != "finished":
                    self.errors.append(f"the {self.hub_role}: {ev.get('error')}")
                return
            with self.lock:
                for m in self.members:
                    if m.agent is agent:
                        m.ended = True
                        if ev.get("status") == "failed":
                            self.notes.append(f"{self.member_role} {m.rank}: {ev.get('error')}")
        elif kind == "refused":
            self.errors.append(f"{agent.name} refused: {ev.get('message')}")

    def exited(self, agent: AgentProcess) -> None:
        if agent is self.hub:
            if not self.hub_done:
                raise FatalFault(
                    f"the {self.hub_role} (slot {self.where.hub}) died (exit status "
                    f"{agent.proc.wait()}): the one fatal fault; see "
                    f"{self.pool.out_dir / 'agents.log'}"
                )
            return
        with self.lock:
            for m in self.members:
                if m.agent is agent and agent.proc.pid not in m.killed and not self.stopping:
                    # died on its own: recorded, restarted like a killed member
                    self.notes.append(
                        f"{self.member_role} {m.rank} exited on its own ({agent.proc.wait()})"
                    )
                    m.killed.add(agent.proc.pid)
                    self._end_pause(m, self.now())
                    m.down_since = self.now()
                    m.restart_wanted = True
                    m.commanded = m.ended = False
                    self._replace(m)

    def await_reaped(self) -> None:
        """Until every killed process has been reaped (each reaper gives up after
        :data:`REAP_TIMEOUT_S`)."""
        while True:
            with self.lock:
                if not any(m.dying for m in self.members):
                    return
            time.sleep(POLL_S)

    def finish_intervals(self) -> None:
        now = self.now()
        with self.lock:
            for m in self.members:
                self._end_pause(m, now)
                if m.down_since is not None:
                    self.intervals.append(Interval(m.rank, "down", m.down_since, now))
                    m.down_since = None


PROCESS_ACTIONS: dict[Action, Callable[[_Job, ChaosAction], None]] = {
    Action.KILL: _Job.kill,
    Action.START: _Job.start,
    Action.STOP: _Job.pause,
    Action.CONT: _Job.cont,
    Action.SLOW: _Job.slow,
    Action.UNSLOW: _Job.slow,
    Action.FAIL_SPINE: _Job.network,
    Action.RESTORE_SPINE: _Job.network,
    Action.FAIL_PLANE: _Job.network,
    Action.RESTORE_PLANE: _Job.network,
}
"""How the fabric driver applies each chaos action to processes and the network (a test
checks every action has a row)."""

ALWAYS = frozenset({Action.CONT, Action.UNSLOW, Action.RESTORE_SPINE, Action.RESTORE_PLANE})
"""Actions applied when the job ends before their time: nothing is left paused, slowed or
failed."""


def chaos_actions(job: _Job, schedule: Schedule | None) -> list[TimedAction]:
    if schedule is None:
        return []
    return [
        TimedAction(
            a.at_s,
            f"{a.action.value} {a.target}" + (f" spine {a.spine}" if a.spine >= 0 else ""),
            partial(job.apply, a),
            a.action in ALWAYS,
        )
        for a in schedule.actions()
    ]


@dataclass
class FabricJob:
    """One job's measurements on the fabric."""

    name: str
    config: JobConfig
    wall_s: float
    records: Records
    intervals: tuple[Interval, ...]
    applied: tuple[AppliedAction, ...]
    incarnations: tuple[int, ...]
    notes: tuple[str, ...]

    @property
    def hub(self) -> HubSummary | None:
        hubs = self.records.of(HubSummary)
        return hubs[-1] if hubs else None

    def down_s(self, kind: str) -> float:
        return sum(i.end_s - i.start_s for i in self.intervals if i.kind == kind)

    def summary(self) -> metrics.Summary:
        """Goodput, uptime, tokens and the final loss, as the emulator computes them."""
        hub = self.hub
        tokens = hub.tokens_merged if hub is not None else 0.0
        m = members_of(self.config)
        if isinstance(self.config, DecoupledConfig):
            steps: list[StepRecord] = self.records.of(StepRecord)
            merges: list[MergeRecord] = self.records.of(MergeRecord)
            evals: list[EvalPoint] = self.records.of(EvalPoint)
            work = metrics.decoupled_work(steps, merges)
            final = evals[-1].val_loss if evals else math.nan
            algorithm = "decoupled"
        else:
            work = metrics.elastic_work(self.records.of(AttemptRecord))
            curve = self.curve()
            final = curve[-1].val_loss if curve else math.nan
            algorithm = "elastic_dp"
        return metrics.summarize(
            algorithm,
            work,
            m,
            self.wall_s,
            tokens_merged=tokens,
            down_s=self.down_s("down"),
            paused_s=self.down_s("paused"),
            final_val_loss=final,
        )

    def curve(self) -> list[metrics.CurvePoint]:
        if isinstance(self.config, DecoupledConfig):
            return metrics.decoupled_curve(self.records.of(EvalPoint))
        return metrics.elastic_curve(self.records.of(WorkerEval), self.records.of(Commit))

    @property
    def merges(self) -> list[MergeRecord]:
        out: list[MergeRecord] = self.records.of(MergeRecord)
        return out

    @property
    def liveness(self) -> list[LivenessEvent]:
        out: list[LivenessEvent] = self.records.of(LivenessEvent)
        return out

    @property
    def reforms(self) -> list[Reform]:
        out: list[Reform] = self.records.of(Reform)
        return out

    @property
    def ends(self) -> list[MemberEnd]:
        out: list[MemberEnd] = self.records.of(MemberEnd)
        return out


def run_job(
    pool: SlotPool,
    name: str,
    cfg: JobConfig,
    *,
    wall_s: float,
    schedule: Schedule | None = None,
    log: Callable[[str], None] = print,
    stall_timeout_s: float = STALL_TIMEOUT_S,
) -> FabricJob:
    """Run ``cfg`` for ``wall_s`` seconds under ``schedule`` (actions on the driver's clock).

    Raises:
        FatalFault: the hub died.
        JobsError: not enough hosts, an agent refused a command, a controller command failed,
            or no agent said anything for ``stall_timeout_s``.
    """
    n = members_of(cfg)
    if schedule is not None and schedule.targets != n:
        raise JobsError(f"a schedule for {schedule.targets} members, the job has {n}")
    where = placement(pool.hosts, n)
    pool.ensure(where.slots, where.members if schedule is not None else ())
    shutil.rmtree(pool.out_dir / name, ignore_errors=True)
    origin = time.monotonic() + HUB_LEAD_S
    job = _Job(pool, name, cfg, where, origin, log)
    job.hub.answer(**job.command(-1, 0))
    started = threading.Event()

    def hub_started(a: AgentProcess, ev: dict[str, Any]) -> None:
        if a is job.hub and ev.get("event") == "started":
            started.set()
        job.handle(a, ev)

    _drive(job, hub_started, lambda: started.is_set() or bool(job.errors), stall_timeout_s)
    _raise(job)
    time.sleep(max(0.0, origin - time.monotonic()))
    for m in job.members:
        m.agent.answer(**job.command(m.rank, 0))
        m.commanded = True
    end = origin + wall_s
    timed = TimedFaults(chaos_actions(job, schedule), origin)
    try:
        _drive(job, job.handle, lambda: time.monotonic() >= end, stall_timeout_s, timed.check)
    finally:
        with job.lock:
            job.stopping = True
        timed.close()  # continues, unslows and restores what is still pending
    wall = job.now()
    job.finish_intervals()
    for m in job.members:
        with contextlib.suppress(OSError):
            os.kill(m.agent.proc.pid, signal.SIGCONT)
        m.agent.answer(cmd="stop")
    live = [m for m in job.members if m.commanded and m.agent.proc.poll() is None]
    deadline = time.monotonic() + STOP_TIMEOUT_S
    _drive(
        job,
        job.handle,
        lambda: all(m.ended or m.agent.closed for m in live) or time.monotonic() > deadline,
        stall_timeout_s,
    )
    job.hub.answer(cmd="stop")
    _drive(job, job.handle, lambda: job.hub_done, stall_timeout_s)
    job.await_reaped()  # the next job's members bind the same slots' ports
    _raise(job)
    where_dir = pool.out_dir / name
    records = read_records(*sorted(where_dir.glob("*.jsonl")))
    return FabricJob(
        name,
        cfg,
        wall,
        records,
        tuple(job.intervals),
        tuple(timed.applied),
        tuple(m.incarnation + 1 for m in job.members),
        tuple(job.notes),
    )


def _raise(job: _Job) -> None:
    if job.errors:
        raise JobsError(f"job {job.name}: {'; '.join(job.errors)}")


def _drive(
    job: _Job,
    handle: Callable[[AgentProcess, dict[str, Any]], None],
    done: Callable[[], bool],
    stall_timeout_s: float,
    check: Callable[[], None] | None = None,
) -> None:
    """:func:`drive_agents` over the job's agents until ``done()``, again whenever chaos
    started a new agent (the loop reads a fixed set)."""
    while not done():
        job.changed.clear()
        drive_job(
            job.name,
            [a for a in job.agents() if not a.closed],
            handle,
            lambda: done() or job.changed.is_set() or bool(job.errors),
            job.pool.out_dir,
            on_exit=job.exited,
            check=check,
            stall_timeout_s=stall_timeout_s,
            poll_s=POLL_S,
        )
        _raise(job)


def count_events(schedule: Schedule | None) -> Counter[str]:
    """The schedule's interruptions by kind."""
    return Counter(e.kind.value for e in schedule.events) if schedule else Counter()
