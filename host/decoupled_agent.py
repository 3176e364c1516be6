"""One process of a Decoupled DiLoCo or elastic data-parallel job on a fabric:
``python -m host.decoupled_agent``.

An experiment driver (:mod:`experiments.decoupled_fabric`) starts one agent per *process
slot* (a host and a slot number) inside the host's network namespace and gives it one role of
one job after another; its chaos kills the process (SIGKILL: a new agent on the same slot
restarts the role from the checkpoint file), pauses it (SIGSTOP / SIGCONT) and slows it (the
``slow`` command). Several slots share a host, each with an MRC endpoint of its own: host id
``index + SLOT_STRIDE · slot`` (:func:`slot_host_id`) on UDP port ``MRC_UDP_PORT + 1 + slot``
(:func:`slot_port`) of the host's plane NICs, routes over every micro-SID path of the
topology to the peers it talks to (a member to its hub, a hub to its members)::

    python -m host.decoupled_agent --topology results/fabric/topology.json --host h1 \
        --slot 0 --out DIR

Roles (:data:`ROLES`): ``learner`` and ``syncer`` (:mod:`host.train.decoupled.learner`,
:mod:`~host.train.decoupled.syncer`), ``worker`` and ``coordinator`` (elastic data
parallel, :mod:`~host.train.decoupled.elastic`). JSON lines both ways; nothing read is
unpickled or evaluated:

* stdin, one command per line (:data:`COMMANDS`):

  - ``{"cmd": "run", "run": NAME, "role": ROLE, "job": {...}, "rank": R, "members":
    [[HOST, SLOT], ...], "hub": [HOST, SLOT], "origin": T, "incarnation": I}``: the JSON
    form of the job (:func:`~host.train.decoupled.config.job_to_json`, read back with every
    check), where every member and the hub run, ``origin`` the job's ``time.monotonic()``
    start on the driver (every namespace shares the clock), ``incarnation`` > 0 for a
    restarted member (it restores its checkpoint and catches up);
  - ``{"cmd": "slow", "factor": F}``: every step takes F times as long from now on (1: as
    usual);
  - ``{"cmd": "stop"}``: the end of the job (as the emulator's slots are stopped): a
    running learner ends its step and hands its unreported steps over (final reports), any
    other member stops at its next step boundary; a syncer merges until its live learners
    have left (at most ``drain_s``), a hub merges what it holds, evaluates and writes;
  - ``{"cmd": "quit"}`` or stdin closed: stop whatever runs, then exit.

* stdout, events: ``ready`` (once), ``started`` (the role's endpoint is open), ``progress``
  (every :data:`PROGRESS_S` while a role runs: its step, round or merges), ``finished``
  (``finished``, ``stopped`` or ``failed``, with the error), ``refused`` (a command that
  cannot run, with the reason; the agent reads on), ``done`` (exit).

Under ``DIR/<run>/`` a role leaves ``<role>-<rank>.jsonl`` (members, appended by every
incarnation: one line per step or attempt as it is kept, so a SIGKILL loses none, then
:class:`~host.train.decoupled.records.MemberEnd`), ``<role>.jsonl`` (hubs: merges,
evaluations, liveness or commits and re-formations, then
:class:`~host.train.decoupled.records.HubSummary`) and ``ckpt-<role>-<rank>.npz`` (a
member's checkpoint).

A member whose connection to its hub ends while it is not being stopped connects again
(at most :data:`RECONNECTS` times, :data:`RECONNECT_S` apart) and catches up: a busy machine
makes the job slower, not failed.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import IO, Any

import torch

from host.agent_common import (
    STARTUP_ERRORS,
    AgentError,
    Handler,
    check_hosts,
    check_origin,
    check_run_name,
    mrc_endpoint,
    serve_agent,
    serve_commands,
)
from host.api import MessageEndpoint
from host.collectives import job_fingerprint
from host.errors import TransportError
from host.paths import MRC_UDP_PORT, RouteTable, fabric_evs, fabric_nics, host_id
from host.train.decoupled.config import (
    MAX_INCARNATIONS,
    DecoupledConfig,
    ElasticConfig,
    JobConfig,
    job_from_json,
    job_to_json,
)
from host.train.decoupled.elastic import (
    Coordinator,
    CoordinatorCore,
    WorkerLog,
    WorkerRun,
    WorkerState,
)
from host.train.decoupled.errors import DecoupledError, Killed, LinkError
from host.train.decoupled.fragments import fragment_model
from host.train.decoupled.learner import LearnerLog, LearnerRun, LearnerState
from host.train.decoupled.link import Hub, Refusal, Uplink, by_reason
from host.train.decoupled.member import MemberLog, MemberState, run_member
from host.train.decoupled.process import Life
from host.train.decoupled.records import HubSummary, MemberEnd, json_number, record_line
from host.train.decoupled.syncer import Syncer, SyncerCore
from host.train.diloco.errors import ConfigError
from host.train.diloco.task import bind
from host.train.job import TASK_NAMES
from host.train_agent import Console
from topologies.model import Fabric

SLOT_STRIDE = 256
"""Host ids of slot s are the fabric host index + SLOT_STRIDE · s (the wire's u16)."""
MAX_SLOTS = 16
PROGRESS_S = 2.0
"""A running role says how far it is this often (the driver hears it is alive)."""
RECONNECTS = 5
RECONNECT_S = 0.5
ROLE_STOP_WAIT_S = 60.0
"""A run command waits this long for the previous job's stopped role to finish closing."""

Slot = tuple[str, int]
"""(host name, slot number): one process of a job."""


def slot_host_id(fabric: Fabric, slot: Slot) -> int:
    """The transport's host id of a process slot."""
    return host_id(fabric, slot[0]) + SLOT_STRIDE * slot[1]


def slot_port(slot: int) -> int:
    """The UDP port of slot ``slot``'s endpoint on every plane NIC of its host."""
    return MRC_UDP_PORT + 1 + slot


def slot_endpoint(
    fabric: Fabric, me: Slot, peers: Iterable[Slot]
) -> AbstractContextManager[MessageEndpoint]:
    """An MRC endpoint for slot ``me`` with routes to ``peers`` (on other hosts), settings for
    the topology's link rate.

    Raises:
        AgentError: a peer on this slot's own host (the fabric has no path to itself).
        TransportError: a socket cannot be bound.
    """
    routes = RouteTable()
    for peer in peers:
        if peer[0] == me[0]:
            raise AgentError(f"slot {peer} is on this host ({me[0]}): no fabric path to it")
        routes.add(
            slot_host_id(fabric, peer),
            fabric_evs(fabric, me[0], peer[0], port=slot_port(peer[1])),
        )
    nics = fabric_nics(fabric, me[0], port=slot_port(me[1]))
    return mrc_endpoint(fabric, nics, slot_host_id(fabric, me), routes)


# -- commands ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Role:
    """One role: the kind of job it takes, whether it is the hub, how it runs."""

    job_kind: str
    hub: bool
    run: Callable[[Agent, RunCommand], str]
    """Runs the role to its end; returns its status ("finished" | "stopped")."""


@dataclass(frozen=True)
class RunCommand:
    """One ``run`` command, checked."""

    run: str
    role: str
    job: JobConfig
    rank: int
    members: tuple[Slot, ...]
    hub: Slot
    origin: float
    incarnation: int

    @property
    def fingerprint(self) -> bytes:
        """The job's identity: the hub refuses members of any other."""
        return job_fingerprint(f"{ROLES[self.role].job_kind} {self.run} {job_to_json(self.job)}")

    @property
    def name(self) -> str:
        return self.role if ROLES[self.role].hub else f"{self.role}-{self.rank}"

    @classmethod
    def from_message(cls, msg: Mapping[str, Any], fabric: Fabric, me: Slot) -> RunCommand:
        """Raises: AgentError (a field missing or wrong, a host not in the fabric, this slot
        not the role's)."""
        run = check_run_name(msg.get("run"))
        role = str(msg.get("role"))
        spec = ROLES.get(role)
        if spec is None:
            raise AgentError(f"run {run}: role {role!r:.40}; valid: {', '.join(ROLES)}")
        try:
            job = job_from_json(spec.job_kind, json.dumps(msg.get("job")))
        except ConfigError as e:
            raise AgentError(f"run {run}: {e}") from None
        n = job.learners if isinstance(job, DecoupledConfig) else job.workers
        members = _slots(msg.get("members"), f"run {run}: members")
        hub = _slots([msg.get("hub")], f"run {run}: hub")[0]
        if len(members) != n:
            raise AgentError(f"run {run}: {n} members in the job, {len(members)} slots named")
        if len(set(members) | {hub}) != n + 1:
            raise AgentError(f"run {run}: every member and the hub need a slot of their own")
        origin, inc = msg.get("origin"), msg.get("incarnation", 0)
        rank = msg.get("rank")
        if spec.hub:
            rank = n
        if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank <= n:
            raise AgentError(f"run {run}: rank must be in 0..{n - 1}, got {rank!r}")
        if rank == n and not spec.hub:
            raise AgentError(f"run {run}: rank must be in 0..{n - 1}, got {rank!r}")
        mine = hub if spec.hub else members[rank]
        if mine != me:
            raise AgentError(f"run {run}: {role} {rank} runs on slot {mine}, this is {me}")
        start = check_origin(run, origin)
        if not isinstance(inc, int) or isinstance(inc, bool) or not 0 <= inc < MAX_INCARNATIONS:
            raise AgentError(f"run {run}: incarnation must be in 0..{MAX_INCARNATIONS - 1}")
        check_hosts(fabric, run, (h for h, _s in (*members, hub)))
        return cls(run, role, job, rank, members, hub, start, inc)

    def to_message(self) -> dict[str, Any]:
        """The command as the driver sends it."""
        return {
            "cmd": "run",
            "run": self.run,
            "role": self.role,
            "job": json.loads(job_to_json(self.job)),
            "rank": self.rank,
            "members": [list(m) for m in self.members],
            "hub": list(self.hub),
            "origin": self.origin,
            "incarnation": self.incarnation,
        }


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _slots(value: object, what: str) -> tuple[Slot, ...]:
    if not isinstance(value, list):
        raise AgentError(f"{what}: a list of [host, slot] pairs, got {value!r:.60}")
    out: list[Slot] = []
    for v in value:
        if (
            not isinstance(v, list)
            or len(v) != 2
            or not isinstance(v[0], str)
            or not _is_int(v[1])
            or not 0 <= v[1] < MAX_SLOTS
        ):
            raise AgentError(f"{what}: [host, slot 0..{MAX_SLOTS - 1}] pairs, got {v!r:.60}")
        out.append((v[0], v[1]))
    return tuple(out)


# -- the agent ---------------------------------------------------------------------------------

EndpointFactory = Callable[[Sequence[Slot]], AbstractContextManager[MessageEndpoint]]
"""Opens this slot's endpoint with routes to the given peers (closed when the role ends)."""


class Agent:
    """Runs the roles of one process slot, one after another.

    Args:
        fabric: the topology (host names → ids).
        me: this process's slot.
        out_dir: where each run's directory goes.
        console: JSON events on stdout.
        open_endpoint: opens the endpoint of one role.
    """

    def __init__(
        self,
        fabric: Fabric,
        me: Slot,
        out_dir: str | pathlib.Path,
        console: Console,
        open_endpoint: EndpointFactory,
    ) -> None:
        self.fabric = fabric
        self.me = me
        self.out_dir = pathlib.Path(out_dir)
        self.console = console
        self.open_endpoint = open_endpoint
        self.factor = 1.0
        self.stopping = threading.Event()
        self.life: Life | None = None
        self.progress: Callable[[], dict[str, object]] = dict
        self._thread: threading.Thread | None = None
        self._records: IO[str] | None = None
        self._lock = threading.Lock()

    # -- what roles use --------------------------------------------------------------------

    def write(self, record: object) -> None:
        """One record to the role's file, flushed (a SIGKILL loses none that were written)."""
        with self._lock:
            if self._records is not None:
                self._records.write(record_line(record) + "\n")
                self._records.flush()

    def new_life(self, incarnation: int) -> Life:
        life = self.life = Life(incarnation, lambda: self.factor)
        if self.stopping.is_set():
            life.kill("stopped at the end of the job")
        return life

    def host_of(self, slot: Slot) -> int:
        return slot_host_id(self.fabric, slot)

    # -- commands --------------------------------------------------------------------------

    def serve(self, lines: Iterable[str]) -> None:
        """Handle commands until ``quit`` or the end of ``lines``; then stop the role."""
        try:
            serve_commands(self, lines, self.console, COMMANDS)
        finally:
            self._stop()
            self.join()

    def join(self) -> None:
        t = self._thread
        if t is not None:
            t.join()

    def _run_command(self, msg: Mapping[str, Any]) -> bool:
        t = self._thread
        if t is not None and t.is_alive() and self.stopping.is_set():
            # the last job's role was told to stop and may still be closing its connections
            # after it reported: the next job waits for it instead of being refused
            t.join(ROLE_STOP_WAIT_S)
        if self._thread is not None and self._thread.is_alive():
            self.console.emit("refused", run=msg.get("run"), message="a role is running")
            return True
        try:
            cmd = RunCommand.from_message(msg, self.fabric, self.me)
        except AgentError as e:
            self.console.emit("refused", run=msg.get("run"), message=str(e))
            return True
        self.stopping.clear()
        self.factor = 1.0
        self.progress = dict
        self._thread = threading.Thread(target=self.run, args=(cmd,), name="role", daemon=True)
        self._thread.start()
        return True

    def _slow(self, msg: Mapping[str, Any]) -> bool:
        f = msg.get("factor")
        if not isinstance(f, int | float) or isinstance(f, bool) or not 1.0 <= f < 1e3:
            self.console.emit("refused", message=f"slow: factor in [1, 1000), got {f!r:.40}")
            return True
        self.factor = float(f)
        return True

    def _stop(self) -> None:
        self.stopping.set()
        life = self.life
        if life is not None:  # a learner hands its last steps over; the others die
            life.finish("stopped at the end of the job")

    def _stop_command(self, msg: Mapping[str, Any]) -> bool:
        self._stop()
        return True

    def _quit(self, msg: Mapping[str, Any]) -> bool:
        return False

    # -- one role --------------------------------------------------------------------------

    def run(self, cmd: RunCommand) -> str:
        """Run one role to its end; its status (also reported)."""
        where = self.out_dir / cmd.run
        where.mkdir(parents=True, exist_ok=True)
        status, error = "failed", ""
        ticker = threading.Thread(target=self._tick, args=(cmd,), daemon=True)
        with (where / f"{cmd.name}.jsonl").open("a") as records:
            with self._lock:
                self._records = records
            ticker.start()
            try:
                status = ROLES[cmd.role].run(self, cmd)
            except (DecoupledError, TransportError, AgentError, OSError) as e:
                error = f"{type(e).__name__}: {e}"
            finally:
                self.stopping.set()
                with self._lock:
                    self._records = None
        ticker.join()
        self.console.emit(
            "finished", run=cmd.run, role=cmd.role, rank=cmd.rank, status=status, error=error
        )
        return status

    def _tick(self, cmd: RunCommand) -> None:
        while not self.stopping.wait(PROGRESS_S):
            self.console.emit(
                "progress", run=cmd.run, role=cmd.role, rank=cmd.rank, **self.progress()
            )


COMMANDS: dict[str, Handler[Agent]] = {
    "run": Agent._run_command,
    "slow": Agent._slow,
    "stop": Agent._stop_command,
    "quit": Agent._quit,
}
"""Command name → handler (False: stop reading)."""


# -- the roles ---------------------------------------------------------------------------------


def _member(
    agent: Agent,
    cmd: RunCommand,
    state: MemberState,
    log: MemberLog,
    body: Callable[[Uplink, Life, bool], None],
    setup_timeout_s: float,
) -> str:
    """A learner or worker: connect (again after a lost connection), run ``body``
    (link, life, whether it must catch up), write how it ended."""
    life = agent.new_life(cmd.incarnation)
    status, error = "failed", ""
    try:
        with agent.open_endpoint([cmd.hub]) as endpoint:
            agent.console.emit("started", run=cmd.run, role=cmd.role, rank=cmd.rank)
            for attempt in range(RECONNECTS + 1):
                catch_up = attempt > 0 or cmd.incarnation > 0

                def one(link: Uplink, catch_up: bool = catch_up) -> None:
                    body(link, life, catch_up)

                try:
                    run_member(
                        state,
                        log,
                        life,
                        endpoint,
                        one,
                        hub_host=agent.host_of(cmd.hub),
                        hub=len(cmd.members),
                        fingerprint=cmd.fingerprint,
                        timeout_s=setup_timeout_s,
                        restore=attempt == 0,
                    )
                    status = "stopped" if life.finishing else "finished"
                    break
                except LinkError as e:
                    if attempt == RECONNECTS:
                        raise
                    log.counts["reconnects"] += 1
                    error = str(e)
                    life.sleep(RECONNECT_S)
    except Killed:
        status = "stopped"
    except (DecoupledError, TransportError, AgentError, OSError) as e:
        error = f"{type(e).__name__}: {e}"
    state.flush()  # the background checkpoint write, before the process may exit
    if state.writer is not None and state.writer.errors:
        log.counts["checkpoint_write_errors"] += len(state.writer.errors)
    agent.write(
        MemberEnd(
            cmd.role,
            cmd.rank,
            cmd.incarnation,
            status,
            error if status == "failed" else "",
            dict(log.counts),
            log.bytes_sent,
            log.bytes_received,
        )
    )
    if status == "failed":
        raise LinkError(error)
    return status


def _learner(agent: Agent, cmd: RunCommand) -> str:
    cfg = cmd.job
    assert isinstance(cfg, DecoupledConfig)
    path = agent.out_dir / cmd.run / f"ckpt-{cmd.name}.npz"
    state = LearnerState(cfg, cmd.rank, path)
    log = LearnerLog(listener=agent.write)

    def progress() -> dict[str, object]:
        last = log.steps[-1] if log.steps else None
        return {
            "step": state.step,
            "train_loss": json_number(last.train_loss) if last else None,
            "merges_applied": log.counts["merges_applied"],
        }

    def body(link: Uplink, life: Life, catch_up: bool) -> None:
        run = LearnerRun(cfg, state, link, life, log, cmd.origin)
        if catch_up:
            run.catch_up()
        elif life.incarnation == 0:
            run.wait_for_start()
        run.train()

    agent.progress = progress
    return _member(agent, cmd, state, log, body, cfg.setup_timeout_s)


def _worker(agent: Agent, cmd: RunCommand) -> str:
    cfg = cmd.job
    assert isinstance(cfg, ElasticConfig)
    path = agent.out_dir / cmd.run / f"ckpt-{cmd.name}.npz"
    state = WorkerState(cfg, cmd.rank, path)
    log = WorkerLog(listener=agent.write)

    def progress() -> dict[str, object]:
        return {"round": state.round, "attempts": len(log.attempts)}

    def body(link: Uplink, life: Life, catch_up: bool) -> None:
        WorkerRun(cfg, state, link, life, log, cmd.origin).rounds()

    agent.progress = progress
    return _member(agent, cmd, state, log, body, cfg.setup_timeout_s)


def _hub(
    agent: Agent,
    cmd: RunCommand,
    serve: Callable[[Hub], Callable[[threading.Event], None]],
    summary: Callable[[Hub], HubSummary],
) -> str:
    hosts = {r: agent.host_of(m) for r, m in enumerate(cmd.members)}
    with (
        agent.open_endpoint(cmd.members) as endpoint,
        Hub(endpoint, len(cmd.members), hosts, cmd.fingerprint) as hub,
    ):
        loop = serve(hub)
        agent.console.emit("started", run=cmd.run, role=cmd.role, rank=cmd.rank)
        loop(agent.stopping)
        agent.write(summary(hub))
    return "finished"


def _hub_summary(
    cmd: RunCommand,
    hub: Hub,
    refused: Counter[Refusal],
    counts: Counter[str],
    tokens_merged: float,
    unsent: int,
) -> HubSummary:
    """A hub's summary at the end of the job: what it and its core refused, and its counts."""
    return HubSummary(
        cmd.role,
        "finished",
        "",
        time.monotonic() - cmd.origin,
        tokens_merged,
        dict(by_reason(refused, hub.refused)),
        dict(counts),
        unsent,
    )


def _syncer(agent: Agent, cmd: RunCommand) -> str:
    cfg = cmd.job
    assert isinstance(cfg, DecoupledConfig)
    task = bind(cfg.reference(), 0)
    model = task.run.model
    tokens_per_step = int(task.run.batch(0)[1].numel())
    core = SyncerCore(
        cfg,
        fragment_model(model, cfg.fragments),
        list(model.parameters()),
        tokens_per_step,
        now=max(0.0, time.monotonic() - cmd.origin),
    )
    agent.progress = lambda: {"merges": len(core.merges), "tokens": core.tokens_merged}
    servers: list[Syncer] = []

    def serve(hub: Hub) -> Callable[[threading.Event], None]:
        servers.append(Syncer(core, hub, task, origin=cmd.origin))
        return servers[0].run

    def summary(hub: Hub) -> HubSummary:
        syncer = servers[0]
        for rec in (*core.merges, *syncer.evals, *core.liveness):
            agent.write(rec)
        return _hub_summary(cmd, hub, core.refused, core.counts, core.tokens_merged, syncer.unsent)

    return _hub(agent, cmd, serve, summary)


def _coordinator(agent: Agent, cmd: RunCommand) -> str:
    cfg = cmd.job
    assert isinstance(cfg, ElasticConfig)
    tokens_per_step = int(bind(cfg.reference(), 0).run.batch(0)[1].numel())
    core = CoordinatorCore(cfg, tokens_per_step)
    agent.progress = lambda: {"round": core.round, "group": sorted(core.group)}
    servers: list[Coordinator] = []

    def serve(hub: Hub) -> Callable[[threading.Event], None]:
        servers.append(Coordinator(core, hub, origin=cmd.origin))
        return servers[0].run

    def summary(hub: Hub) -> HubSummary:
        for rec in (*core.commits, *core.reforms):
            agent.write(rec)
        tokens = float(sum(c.tokens for c in core.commits))
        return _hub_summary(cmd, hub, core.refused, core.counts, tokens, servers[0].unsent)

    return _hub(agent, cmd, serve, summary)


ROLES: dict[str, Role] = {
    "learner": Role("decoupled", False, _learner),
    "syncer": Role("decoupled", True, _syncer),
    "worker": Role("elastic", False, _worker),
    "coordinator": Role("elastic", True, _coordinator),
}
"""Role name → the job it takes, whether it is the hub, and how it runs."""


# -- the command line --------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m host.decoupled_agent", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--topology", required=True, help="the fabric's topology JSON")
    ap.add_argument("--host", required=True, help="this process's host (h1, h2, ...)")
    ap.add_argument(
        "--slot", type=int, default=0, help=f"its slot on the host (0..{MAX_SLOTS - 1})"
    )
    ap.add_argument("--out", required=True, help="directory of the runs' outputs")
    return ap


def warm_up() -> None:
    """Bind every task once before saying ``ready``: the datasets' loaders and the optimizers'
    lazy imports cost a fresh process ~5 s of CPU on its first role (measured on the 2-core
    machine). Paid there, a replacement agent that is "ready" joined a job seconds late: every
    learner waited for it at START, and a restarted learner's down time grew by those
    seconds on the shared cores, beyond what the chaos schedule said."""
    for task in TASK_NAMES:
        LearnerState(DecoupledConfig(task=task, learners=1), 0)


def prepare() -> None:
    """What a process does once before it serves (also :mod:`host.forkserver`'s preparation,
    so forked agents inherit it): one torch thread (the hosts share the machine's cores) and
    :func:`warm_up`."""
    torch.set_num_threads(1)
    warm_up()


def main(argv: Sequence[str] | None = None, inp: IO[str] = sys.stdin) -> int:
    args = build_parser().parse_args(argv)
    console = Console()
    me: Slot = (args.host, args.slot)
    try:
        fabric = Fabric.load(args.topology)
        host_id(fabric, args.host)
        if not 0 <= args.slot < MAX_SLOTS:
            raise ValueError(f"slot must be in 0..{MAX_SLOTS - 1}, got {args.slot}")
    except STARTUP_ERRORS as e:
        console.emit("error", host=args.host, slot=args.slot, message=f"{type(e).__name__}: {e}")
        return 2
    prepare()
    agent = Agent(
        fabric,
        me,
        args.out,
        console,
        lambda peers: slot_endpoint(fabric, me, peers),
    )
    return serve_agent(agent, console, inp, host=args.host, slot=args.slot)


__all__ = [
    "ROLES",
    "Agent",
    "AgentError",
    "RunCommand",
    "main",
    "slot_endpoint",
    "slot_host_id",
    "slot_port",
]

if __name__ == "__main__":
    sys.exit(main())
