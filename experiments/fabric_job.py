"""Run a training job on the running fabric: one agent per host, the controller for events.

:func:`run_fabric_job` reads ``results/fabric/state.json`` (``make fabric-up``), starts
:mod:`host.train_agent` in each host's network namespace (``mnexec -a <host pid>``): the
parameter server on the first host, workers on the next ones (or every host of a ring). One
loop (:func:`experiments.hosts.drive_agents`) selects on every agent's stdout and handles each
event as it arrives; the job's network events are applied by a
:class:`~experiments.faults.FaultScheduler` on its own thread (through
:class:`ControllerActions`), and the agents' JSON-line records are read back into a
:class:`~host.train.run.JobResult` with the faults' request and applied times.

:class:`ControllerActions` drives the fabric's controller in this process
(``controller.fabric.FabricController``): a burst is random loss on every leaf port that faces
a host (each packet, data or control, either direction, crosses exactly one), a plane failure
is ``fail plane N``.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from experiments.faults import FaultError, FaultScheduler
from experiments.hosts import (
    STATE_FILE,
    AgentProcess,
    AgentsSilent,
    FabricState,
    drive_agents,
    read_running_state,
)
from host.dblp.errors import RoundFailed
from host.errors import FabricNotRunning
from host.train.job import Collective, JobSpec
from host.train.loop import (
    EvalPoint,
    FaultRecord,
    NetworkActions,
    ServerRecord,
    WorkerResult,
    WorkerRound,
)
from host.train.records import read_records
from host.train.run import JobResult
from topologies.emulation.bringup import busy_reason
from topologies.model import Fabric

WAIT_LOG_S = 60.0
"""While waiting for another fabric to go away, say so this often."""
STALL_TIMEOUT_S = 900.0
"""A job fails when no agent has said anything for this long (a round under a 90 % burst
on a loaded machine takes tens of seconds; a hung job says nothing at all)."""


class FabricNotReady(RuntimeError):
    """No running, verified fabric (the message says how to start one)."""


def load_state(results: str | pathlib.Path = "results") -> FabricState:
    """The running fabric of ``<results>/fabric/state.json`` (:func:`read_running_state`).

    Raises:
        FabricNotReady: no state file, not ready, or its hosts are gone.
    """
    try:
        return read_running_state(pathlib.Path(results) / STATE_FILE)
    except FabricNotRunning as e:
        raise FabricNotReady(str(e)) from e


class ControllerActions(NetworkActions):
    """Job events on the fabric through its controller (connected here, released on close).

    Args:
        background_loss_pct: loss kept on the host-facing ports outside bursts (0: none).
    """

    def __init__(
        self,
        state: FabricState,
        results: str | pathlib.Path = "results",
        background_loss_pct: float = 0.0,
    ) -> None:
        from controller.fabric import FabricController

        self.fabric = Fabric.load(state.topology)
        self.ctl = FabricController(self.fabric, state.p4info, None, results_dir=results)
        self.ctl.connect()
        self.ctl.install_routes()  # adopt the switches' tables; no failure, no loss
        self.ports = [(n.leaf, n.leaf_port) for h in self.fabric.hosts for n in h.nics]
        self.background_loss_pct = background_loss_pct
        self.changes_s: list[float] = []
        self.clear_burst()

    def _loss(self, pct: float) -> None:
        from controller.conditions import LossEvent, loss_threshold

        t0 = time.monotonic()
        c = self.ctl.conditions
        if pct > 0:
            c = c.with_losses([LossEvent(s, p, loss_threshold(pct)) for s, p in self.ports])
        else:
            c = c.without_losses(self.ports)
        self.ctl.apply(c)
        self.changes_s.append(time.monotonic() - t0)

    def burst(self, loss_pct: float) -> None:
        self._loss(loss_pct)

    def clear_burst(self) -> None:
        self._loss(self.background_loss_pct)

    def fail_plane(self, plane: int) -> None:
        self.ctl.run_command(["fail", "plane", str(plane)])

    def restore_plane(self, plane: int) -> None:
        self.ctl.run_command(["restore", "plane", str(plane)])

    def close(self) -> None:
        try:
            self.ctl.run_command(["restore", "all"])
        finally:
            self.ctl.close()


class RoundProgress:
    """Puts each round's agent events together: once every worker has reported round R, the
    round's line (latency = the slowest worker's, the server's P and delivered fraction)
    goes to ``progress``."""

    def __init__(self, workers: int, progress: Callable[[dict[str, Any]], None] | None) -> None:
        self.workers = workers
        self.progress = progress
        self._rounds: dict[int, dict[str, Any]] = {}

    def add(self, ev: dict[str, Any]) -> None:
        r = ev.get("round")
        if not isinstance(r, int):
            return
        row = self._rounds.setdefault(r, {"round": r, "latencies": []})
        if "rank" in ev:
            row["latencies"].append(float(ev.get("latency_ms", 0.0)))
            row["gate_ms"] = max(row.get("gate_ms", 0.0), float(ev.get("gate_ms", 0.0)))
        else:
            row.update({k: v for k, v in ev.items() if k not in ("event", "round")})
        if len(row["latencies"]) == self.workers and "bound" in row:
            del self._rounds[r]
            row["latency_ms"] = max(row.pop("latencies"))
            if self.progress is not None:
                self.progress(row)


def run_fabric_job(
    job: JobSpec,
    state: FabricState,
    out_dir: str | pathlib.Path,
    actions: NetworkActions,
    *,
    progress: Callable[[dict[str, Any]], None] | None = None,
    stall_timeout_s: float = STALL_TIMEOUT_S,
) -> JobResult:
    """Run ``job`` with one agent per fabric host; the merged result.

    One loop selects on every agent's stdout and handles each event as it arrives; the job's
    network events go to a :class:`~experiments.faults.FaultScheduler`. Nothing limits the
    job's total time: it fails only when an agent reports an error or exits early, or when
    no agent says anything for ``stall_timeout_s`` (a busy machine makes it slower, never
    makes it fail).

    Raises:
        RoundFailed: an agent reported an error or exited early (its message is included),
            nothing was heard for ``stall_timeout_s``, or the controller failed.
        FabricNotReady: not enough hosts.
    """
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fabric = Fabric.load(state.topology)
    names = [h.name for h in sorted(fabric.hosts, key=lambda h: h.index)]
    ps = job.collective is Collective.PS
    need = job.workers + (1 if ps else 0)
    if len(names) < need:
        raise FabricNotReady(f"the job needs {need} hosts; the fabric has {len(names)}")
    job_path = out / "job.json"
    job_path.write_text(job.to_json())
    common = ["--topology", str(state.topology), "--job", str(job_path), "--out", str(out)]
    if ps:
        server, workers = names[0], names[1:need]
        plan = [(server, ["--role", "server", "--workers", ",".join(workers)])]
        plan += [
            (w, ["--role", "worker", "--rank", str(r), "--server", server])
            for r, w in enumerate(workers)
        ]
        worker_of = {w: r for r, w in enumerate(workers)}
    else:
        ring = names[:need]
        plan = [
            (h, ["--role", "ring", "--rank", str(r), "--ring", ",".join(ring)])
            for r, h in enumerate(ring)
        ]
        worker_of = {h: r for r, h in enumerate(ring)}
    agents: list[AgentProcess] = []
    log = (out / "agents.log").open("ab")
    finished: set[str] = set()
    try:
        with FaultScheduler(job, actions) as faults:
            for name, args in plan:
                agents.append(
                    AgentProcess.in_host(
                        name,
                        state.hosts[name],
                        "host.train_agent",
                        [*common, "--host", name, *args],
                        log,
                    )
                )
            rounds = RoundProgress(job.workers, progress)
            ready: set[str] = set()

            def handle(a: AgentProcess, ev: dict[str, Any]) -> None:
                _handle(ev, a, faults, rounds, ready, finished, len(agents))

            def exited(a: AgentProcess) -> None:
                if a.name not in finished:
                    raise RoundFailed(
                        f"agent on {a.name} exited ({a.proc.wait()}) without "
                        f"finishing; see {out / 'agents.log'}"
                    )

            drive_agents(
                agents,
                handle,
                lambda: len(finished) == len(agents),
                on_exit=exited,
                check=faults.check,
                stall_timeout_s=stall_timeout_s,
            )
            for a in agents:
                a.proc.wait(30)
            fault_records = tuple(faults.faults)
    except AgentsSilent as e:
        waiting = [a.name for a in agents if a.name not in finished]
        raise RoundFailed(
            f"{e} (still running: {', '.join(waiting)}); see {out / 'agents.log'}"
        ) from e
    except FaultError as e:
        raise RoundFailed(str(e)) from e
    finally:
        for a in agents:
            a.stop()
        log.close()
    return _collect(job, out, names[0] if ps else None, worker_of, fault_records)


def _handle(
    ev: dict[str, Any],
    agent: AgentProcess,
    faults: FaultScheduler,
    rounds: RoundProgress,
    ready: set[str],
    finished: set[str],
    total: int,
) -> None:
    """One agent event: requests go to the fault scheduler, rounds to the progress lines."""
    kind = ev.get("event")
    if kind == "request":
        rid, r = ev.get("id"), int(ev.get("round", -1))

        def reply(agent: AgentProcess = agent, rid: object = rid) -> None:
            agent.answer(ack=rid)

        if ev.get("action") == "enter_round":
            faults.enter_round(r, reply)
        elif ev.get("action") == "await_round":
            faults.await_round(r, reply)
        else:
            agent.answer(abort=f"unknown request {ev.get('action')!r}")
    elif kind == "trigger":
        faults.trigger(int(ev.get("round", -1)))
    elif kind == "round":
        rounds.add(ev)
    elif kind == "ready":
        ready.add(agent.name)
    elif kind == "error":
        raise RoundFailed(f"agent on {agent.name}: {ev.get('message')}")
    elif kind == "done":
        finished.add(agent.name)


def _collect(
    job: JobSpec,
    out: pathlib.Path,
    server: str | None,
    worker_of: dict[str, int],
    faults: tuple[FaultRecord, ...],
) -> JobResult:
    server_recs: list[ServerRecord] = []
    if server is not None:
        server_recs = [
            r for r in read_records(out / f"{server}.jsonl") if isinstance(r, ServerRecord)
        ]
    workers: dict[int, WorkerResult] = {}
    for host, rank in worker_of.items():
        recs = read_records(out / f"{host}.jsonl")
        rounds = tuple(r for r in recs if isinstance(r, WorkerRound))
        evals = tuple(r for r in recs if isinstance(r, EvalPoint))
        if len(rounds) != job.rounds:
            raise RoundFailed(f"{host}: {len(rounds)} rounds recorded, expected {job.rounds}")
        workers[rank] = WorkerResult(rank, rounds, evals, rounds[-1].wall_s, 0)
    return JobResult(job, tuple(server_recs), dict(sorted(workers.items())), faults)


def fabric_available() -> str | None:
    """Why a fabric cannot be brought up here (None: it can: root and Mininet's mnexec)."""
    if os.geteuid() != 0:
        return "the fabric needs root (network namespaces, veths)"
    if shutil.which("mnexec") is None:
        return "Mininet (mnexec) is not installed"
    return None


class FabricSession:
    """The default fabric for the length of a ``with`` block.

    Uses a fabric that is already up (``make fabric-up``) and leaves it running; otherwise
    brings one up (``tf-topo up --detach``) and takes it down at the end, also on errors.

    Args:
        link_mbps: the link rate of a fabric this session starts (every experiment has its own:
            no default).
        queue_depth: its switches' egress queue depth in packets (None: the default, 64).
        wait_s: how long to wait for another fabric on this machine to go away first.
    """

    def __init__(
        self,
        results: str | pathlib.Path = "results",
        *,
        link_mbps: float,
        queue_depth: int | None = None,
        wait_s: float = 0.0,
        log: Callable[[str], None] = print,
    ) -> None:
        self.results = pathlib.Path(results)
        self.link_mbps = link_mbps
        self.queue_depth = queue_depth
        self.wait_s = wait_s
        self.log = log
        self.started = False
        self.up_s = 0.0

    def __enter__(self) -> FabricState:
        try:
            state = load_state(self.results)
            self.log(f"using the running fabric ({self.results / STATE_FILE})")
            return state
        except FabricNotReady:
            pass
        deadline = time.monotonic() + self.wait_s
        cmd = [
            sys.executable,
            "-m",
            "topologies.emulation.cli",
            "up",
            "--detach",
            "--link-mbps",
            f"{self.link_mbps:g}",
            "--results",
            str(self.results),
        ]
        if self.queue_depth is not None:
            cmd += ["--queue-depth", str(self.queue_depth)]
        t0 = said = time.monotonic()
        said -= WAIT_LOG_S  # say the first wait at once
        while True:
            reason = busy_reason(str(self.results))
            if reason is None:
                self.log("bringing up the default fabric: " + " ".join(cmd[1:]))
                t0 = time.monotonic()
                done = subprocess.run(cmd, capture_output=True, text=True)
                if done.returncode == 0:
                    break
                reason = busy_reason(str(self.results))  # another one won the race?
                if reason is None:
                    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-4:])
                    raise FabricNotReady(
                        f"the fabric did not come up (exit {done.returncode}):\n{tail}"
                    )
            if time.monotonic() >= deadline:
                raise FabricNotReady(
                    f"{reason} (not under {self.results}/: stop it with make fabric-down or "
                    "make clean, or pass its --results directory)"
                )
            if time.monotonic() - said >= WAIT_LOG_S:
                self.log(f"{reason}; waiting (up to {deadline - time.monotonic():.0f} s more)")
                said = time.monotonic()
            time.sleep(5.0)
        self.started = True
        self.up_s = time.monotonic() - t0
        self.log(f"fabric up in {self.up_s:.1f} s")
        return load_state(self.results)

    def __exit__(self, *exc: object) -> None:
        if self.started:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "topologies.emulation.cli",
                    "down",
                    "--results",
                    str(self.results),
                ],
                capture_output=True,
                text=True,
            )
            self.log("fabric down")
