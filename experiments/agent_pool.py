"""What the pools of training agents on a running fabric's hosts share.

:class:`experiments.diloco_jobs.AgentPool` (one DiLoCo agent per host) and
:class:`experiments.decoupled_fabric.SlotPool` (one Decoupled DiLoCo agent per process slot)
both keep their agents' stderr in ``<out_dir>/agents.log`` (:func:`open_agent_log`), start an
agent as ``python -m <module> --topology T --host H ... --out <out_dir>`` in its host's
namespaces (:func:`start_agent`; :func:`alive`: it still runs), wait until fresh agents said ``ready``
(:func:`await_ready`), read a job's agents in :func:`experiments.hosts.drive_agents` with
silence reported as a :class:`JobsError` (:func:`drive_job`), and ask every agent to quit at
the end, ending those that do not (:func:`quit_agents`).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

from experiments.hosts import AgentProcess, AgentsSilent, drive_agents

READY_TIMEOUT_S = 300.0
"""How long agents may take to start (import torch, read the topology) on a busy machine."""
AGENTS_LOG = "agents.log"
LAUNCHES = ("fork", "exec")
"""How a pool starts agents: forked by a fork server per host
(:class:`experiments.agent_forks.ForkServer`), or one ``python -m`` process each."""


class JobsError(RuntimeError):
    """Jobs cannot run (agents did not start, a job hung); the message says where to look."""


def alive(a: AgentProcess | None) -> bool:
    """``a`` is an agent whose process runs."""
    return a is not None and not a.closed and a.proc.poll() is None


def open_agent_log(out_dir: pathlib.Path) -> IO[bytes]:
    """``<out_dir>/agents.log`` (the folder made), appended to: every agent's stderr."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return (out_dir / AGENTS_LOG).open("ab")


def start_agent(
    module: str,
    name: str,
    host: str,
    host_pids: Mapping[str, int],
    topology: str | pathlib.Path,
    out_dir: pathlib.Path,
    log: IO[bytes],
    *args: str,
) -> AgentProcess:
    """``python -m <module> ARGS`` (:func:`agent_argv`) in ``host``, called ``name``, its
    stderr into ``log``."""
    argv = agent_argv(host, topology, out_dir, *args)
    return AgentProcess.in_host(name, host_pids[host], module, argv, log)


def agent_argv(
    host: str, topology: str | pathlib.Path, out_dir: pathlib.Path, *args: str
) -> list[str]:
    """An agent's command line: ``--topology T --host H ARGS --out <out_dir>``."""
    return ["--topology", str(topology), "--host", host, *args, "--out", str(out_dir)]


def await_ready(
    fresh: Sequence[AgentProcess],
    ready: set[AgentProcess],
    out_dir: pathlib.Path,
    *,
    timeout_s: float = READY_TIMEOUT_S,
) -> None:
    """Read ``fresh`` agents until each said ``ready`` (added to ``ready``).

    Raises:
        JobsError: an agent said ``error``, exited, or none said anything for ``timeout_s``.
    """

    def handle(a: AgentProcess, ev: dict[str, Any]) -> None:
        if ev.get("event") == "ready":
            ready.add(a)
        elif ev.get("event") == "error":
            raise JobsError(f"agent on {a.name} cannot start: {ev.get('message')}")

    def exited(a: AgentProcess) -> None:
        raise JobsError(
            f"agent on {a.name} exited ({a.proc.wait()}) before it was ready; see "
            f"{out_dir / AGENTS_LOG}"
        )

    try:
        drive_agents(
            fresh,
            handle,
            lambda: all(a in ready for a in fresh),
            on_exit=exited,
            stall_timeout_s=timeout_s,
        )
    except AgentsSilent as e:
        raise JobsError(f"agents did not start: {e}") from e


def drive_job(
    job: str,
    agents: Sequence[AgentProcess],
    handle: Callable[[AgentProcess, dict[str, Any]], None],
    done: Callable[[], bool],
    out_dir: pathlib.Path,
    *,
    on_exit: Callable[[AgentProcess], None],
    check: Callable[[], None] | None = None,
    stall_timeout_s: float,
    poll_s: float = 1.0,
) -> None:
    """:func:`experiments.hosts.drive_agents` over one job's agents.

    Raises:
        JobsError: no agent said anything for ``stall_timeout_s``.
        whatever ``handle``, ``on_exit`` or ``check`` raise.
    """
    try:
        drive_agents(
            agents,
            handle,
            done,
            on_exit=on_exit,
            check=check,
            stall_timeout_s=stall_timeout_s,
            poll_s=poll_s,
        )
    except AgentsSilent as e:
        raise JobsError(f"job {job}: {e}; see {out_dir / AGENTS_LOG}") from e


def quit_agents(agents: Sequence[AgentProcess], timeout_s: float) -> None:
    """Ask every agent to quit (continuing a stopped one first) and give them ``timeout_s``
    together; end those still running."""
    for a in agents:
        if a.proc.poll() is None:
            with contextlib.suppress(OSError):
                os.kill(a.proc.pid, signal.SIGCONT)
        a.answer(cmd="quit")
    deadline = time.monotonic() + timeout_s
    for a in agents:
        with contextlib.suppress(Exception):
            a.proc.wait(max(0.1, deadline - time.monotonic()))
        a.stop()
