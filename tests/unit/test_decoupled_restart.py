"""The fabric driver restarts a killed member only once its killed process has been reaped: a
SIGKILLed learner can take a while to exit (uninterruptible I/O on a loaded disk), and until it
has, it holds its slot's UDP port, which its replacement binds.

Real processes stand in for the agents (each binds its slot's port on ``run``, as a learner
does); the one thing slowed is the kill's delivery, as a process in uninterruptible sleep
would take it."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from typing import IO

from experiments.decoupled_fabric import SlotPool, _Job, placement
from experiments.hosts import AgentProcess
from host.decoupled_agent import Slot
from host.train.decoupled.chaos import Action, ChaosAction
from host.train.decoupled.config import DecoupledConfig
from topologies.model import FabricSpec, build_fabric

AGENT = r"""
import json, socket, sys
port = int(sys.argv[1])
print(json.dumps({"event": "ready"}), flush=True)
held = None
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("cmd") == "quit":
        break
    if msg.get("cmd") != "run":
        continue
    try:
        held = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        held.bind(("127.0.0.1", port))
        print(json.dumps({"event": "bound", "incarnation": msg["incarnation"]}), flush=True)
    except OSError as e:
        print(json.dumps({"event": "bind_failed", "error": str(e)}), flush=True)
"""

DYING_S = 0.8


class SlowToDie:
    """A real process that takes ``DYING_S`` to act on SIGKILL (as one in uninterruptible
    sleep would); everything else is :class:`subprocess.Popen`'s."""

    def __init__(self, port: int) -> None:
        self._p = subprocess.Popen(
            [sys.executable, "-c", AGENT, str(port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.pid = self._p.pid
        self.stdin: IO[str] | None = self._p.stdin
        self.stdout: IO[str] | None = self._p.stdout
        self.killed_at: float | None = None

    def poll(self) -> int | None:
        return self._p.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self._p.wait(timeout)

    def kill(self) -> None:
        self.killed_at = time.monotonic()
        threading.Timer(DYING_S, self._p.kill).start()

    def terminate(self) -> None:
        self._p.kill()

    def send_signal(self, sig: int) -> None:
        self._p.send_signal(sig)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _event(agent: AgentProcess, timeout_s: float = 10.0) -> dict[str, object]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        events = agent.read_events()
        if events:
            return events[0]
        time.sleep(0.01)
    raise AssertionError(f"{agent.name} said nothing in {timeout_s} s")


def test_a_killed_members_replacement_runs_only_once_the_old_process_is_gone(
    tmp_path: object,
) -> None:
    fabric = build_fabric(FabricSpec())
    ports: dict[Slot, int] = {}
    started: list[AgentProcess] = []

    def start(slot: Slot) -> AgentProcess:
        port = ports.setdefault(slot, _free_port())
        agent = AgentProcess(f"{slot[0]}/{slot[1]}", SlowToDie(port))
        started.append(agent)
        return agent

    pool = SlotPool(fabric, "unused.json", {}, str(tmp_path), start=start)
    try:
        cfg = DecoupledConfig(learners=2)
        where = placement(pool.hosts, 2)
        pool.ensure(where.slots, where.members)
        job = _Job(pool, "j", cfg, where, time.monotonic(), log=lambda _: None)
        first = job.members[0].agent
        first.answer(**job.command(0, 0))
        assert _event(first)["event"] == "bound"

        job.kill(ChaosAction(0.0, Action.KILL, 0))
        job.start(ChaosAction(0.0, Action.START, 0))  # restart due at once
        replacement = job.members[0].agent
        assert replacement is not first
        ev = _event(replacement)
        assert ev == {"event": "bound", "incarnation": 1}, ev
        old = first.proc
        assert isinstance(old, SlowToDie) and old.killed_at is not None
        assert old.poll() is not None
        down = [i for i in job.intervals if i.member == 0 and i.kind == "down"]
        assert len(down) == 1 and down[0].end_s - down[0].start_s >= DYING_S * 0.9
        job.await_reaped()
    finally:
        pool.close()
        for a in started:
            if a.proc.poll() is None:
                a.proc.terminate()
                a.proc.wait(5)
