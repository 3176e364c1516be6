"""Processes inside the hosts of a running fabric, driven from the root namespace.

:func:`read_running_state` reads and checks the state file of the fabric of ``make fabric-up``
(or of :func:`topologies.emulation.bringup.own_fabric`): the one reader for every experiment.
:func:`start_in_host` runs ``python -m <module>`` in one host's namespace (``mnexec -a <host
pid>``) with JSON lines on its stdin and stdout; :class:`HostProcess` drives
:mod:`host.stream_agent` that way, reading its events and sending it commands.

Drivers of many agents at once (:mod:`experiments.fabric_job`, :mod:`experiments.gossip`) read
them without threads: :class:`AgentProcess` is one agent whose stdout the driver selects on,
and :func:`drive_agents` is the one select loop: it hands every JSON line to the driver as it
arrives, tells it when an agent's stdout ends, and stops when the driver is done or when no
agent has said anything for a while (:class:`AgentsSilent`).
"""

from __future__ import annotations

import json
import os
import pathlib
import queue
import selectors
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, Protocol

from host.errors import FabricNotRunning, TransportError

STATE_FILE = pathlib.Path("fabric") / "state.json"
"""A fabric's state file, relative to its results directory."""
FABRIC_MESSAGE = "needs a running fabric (make fabric-up)"


@dataclass(frozen=True)
class FabricState:
    """What the experiments use of a running fabric's ``state.json``."""

    topology: pathlib.Path
    """Its ``topology.json``."""
    p4info: str | None
    """The P4Info of the program on its switches (None: the state file does not say)."""
    hosts: Mapping[str, int]
    """Host name -> pid of the host's Mininet shell (whose namespaces a host process joins)."""
    link_mbps: float
    """The switches' queue drain rate (0.0: the state file does not say)."""


def read_running_state(path: str | pathlib.Path) -> FabricState:
    """The fabric whose state file is ``path`` (``<results>/``:data:`STATE_FILE`), up and verified.

    Raises:
        FabricNotRunning: no state file, not ready, or its host processes are gone.
    """
    path = pathlib.Path(path)
    try:
        doc = json.loads(path.read_text())
    except OSError:
        raise FabricNotRunning(f"{FABRIC_MESSAGE}: no {path}") from None
    except ValueError as e:
        raise FabricNotRunning(f"{FABRIC_MESSAGE}: {path} is not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise FabricNotRunning(f"{FABRIC_MESSAGE}: {path} is not a fabric state file")
    if not doc.get("ready"):
        raise FabricNotRunning(f"the fabric of {path} is not ready yet")
    try:
        hosts = {str(name): int(h["pid"]) for name, h in doc.get("hosts", {}).items()}
        state = FabricState(
            pathlib.Path(doc["topology"]),
            doc.get("p4info"),
            hosts,
            float(doc.get("link_mbps") or 0.0),
        )
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        raise FabricNotRunning(f"{path} is not a fabric state file ({e!r})") from None
    dead = [name for name, pid in hosts.items() if not pathlib.Path(f"/proc/{pid}").exists()]
    if dead or not hosts:
        raise FabricNotRunning(f"the fabric of {path} is gone (hosts {dead or 'none'})")
    return state


def start_in_host(
    host_pid: int, module: str, args: Sequence[str], stderr: IO[bytes] | None = None
) -> subprocess.Popen[str]:
    """``python -m <module> ARGS`` in the namespaces of the host shell ``host_pid``.

    It enters with Mininet's ``mnexec -a``, or util-linux ``nsenter -n`` where Mininet is
    missing; its stdin and stdout are line-buffered text pipes, its stderr goes to ``stderr``
    (None: discarded).
    """
    mnexec = shutil.which("mnexec")
    enter = (
        [mnexec, "-a", str(host_pid)] if mnexec else ["nsenter", "-t", str(host_pid), "-n", "--"]
    )
    return subprocess.Popen(
        [*enter, sys.executable, "-m", module, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr if stderr is not None else subprocess.DEVNULL,
        text=True,
        bufsize=1,
    )


def send_line(proc: ChildProcess, msg: Mapping[str, object]) -> None:
    """``msg`` as one JSON line on ``proc``'s stdin; nothing once it has exited."""
    if proc.stdin is not None and proc.poll() is None:
        try:
            proc.stdin.write(json.dumps(msg) + "\n")
            proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass  # it exited meanwhile: its stdout reader reports the end


class HostProcess:
    """``python -m host.stream_agent ARGS`` inside a fabric host's namespace (context manager).

    Args:
        host_pid: the Mininet host's shell pid (:attr:`FabricState.hosts`).
        args: the command line after ``python -m host.stream_agent``.
        log: where its stderr goes.
    """

    def __init__(self, host_pid: int, args: Sequence[str], log: IO[bytes] | None = None) -> None:
        self.name = " ".join([sys.executable, "-m", "host.stream_agent", *args[:1]])
        self.proc = start_in_host(host_pid, "host.stream_agent", args, log)
        self.events: list[dict[str, Any]] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def next_event(self, timeout_s: float = 30.0) -> dict[str, Any]:
        """The next JSON line from the process.

        Raises:
            TransportError: it exited or said nothing within ``timeout_s``.
        """
        try:
            line = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            line = None
        if not line:
            self._lines.put(line)  # keep reporting the end to later calls
            raise TransportError(
                f"host process {self.name} said nothing "
                f"for {timeout_s:g} s (exit status {self.proc.poll()})"
            )
        ev = dict(json.loads(line))
        self.events.append(ev)
        return ev

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def wait_event(self, name: str, timeout_s: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            ev = self.next_event(max(0.1, deadline - time.monotonic()))
            if ev.get("event") == name:
                return ev

    def command(self, **cmd: object) -> None:
        send_line(self.proc, cmd)

    def stop(self, timeout_s: float = 30.0) -> dict[str, Any] | None:
        """Tell it to stop; its ``done`` event (None if it ended without one)."""
        self.command(cmd="stop")
        try:
            return self.wait_event("done", timeout_s)
        except TransportError:
            return None
        finally:
            self.close()

    def close(self) -> None:
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except (BrokenPipeError, ValueError):
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> HostProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ChildProcess(Protocol):
    """What a driver uses of an agent's process: :class:`subprocess.Popen` (text pipes), or
    :class:`experiments.agent_forks.ForkedProcess` for an agent a fork server started."""

    @property
    def pid(self) -> int: ...
    @property
    def stdin(self) -> IO[str] | None: ...
    @property
    def stdout(self) -> IO[str] | None: ...
    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def kill(self) -> None: ...
    def terminate(self) -> None: ...


class AgentProcess:
    """One agent process read without blocking: a driver's loop selects on :meth:`fileno` and
    takes whole JSON lines with :meth:`read_events`; :meth:`answer` is safe from any thread (a
    fault scheduler answers requests from its own).

    Args:
        name: what the driver calls it (its host's name).
        proc: the process, stdin and stdout text pipes (:func:`start_in_host`, or a fork
            server's child).
    """

    def __init__(self, name: str, proc: ChildProcess) -> None:
        self.name = name
        self.proc = proc
        assert proc.stdout is not None
        self._fd = proc.stdout.fileno()
        os.set_blocking(self._fd, False)
        self._buf = b""
        self._lock = threading.Lock()
        self.closed = False  # its stdout reached the end (it exited)

    @classmethod
    def in_host(
        cls, name: str, host_pid: int, module: str, args: Sequence[str], log: IO[bytes] | None
    ) -> AgentProcess:
        """``python -m <module> ARGS`` in the namespaces of the host shell ``host_pid``."""
        return cls(name, start_in_host(host_pid, module, args, log))

    def fileno(self) -> int:
        return self._fd

    def read_events(self) -> list[dict[str, Any]]:
        """Every complete JSON line that has arrived (non-JSON lines are skipped)."""
        try:
            chunk = os.read(self._fd, 65536)
        except BlockingIOError:
            return []
        if not chunk:
            self.closed = True
        self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        out = []
        for line in lines:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if isinstance(ev, dict):
                out.append(ev)
        return out

    def answer(self, **msg: object) -> None:
        """``msg`` as one JSON line on its stdin (nothing once it has exited)."""
        with self._lock:
            send_line(self.proc, msg)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Terminate it (then kill it) unless it has exited; idempotent."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout_s)


class AgentsSilent(RuntimeError):
    """No agent said anything for ``silent_s`` seconds (a hung job)."""

    def __init__(self, silent_s: float) -> None:
        super().__init__(f"no agent said anything for {silent_s:.0f} s")
        self.silent_s = silent_s


def drive_agents(
    agents: Sequence[AgentProcess],
    handle: Callable[[AgentProcess, dict[str, Any]], None],
    done: Callable[[], bool],
    *,
    on_exit: Callable[[AgentProcess], None] | None = None,
    check: Callable[[], None] | None = None,
    stall_timeout_s: float,
    poll_s: float = 1.0,
) -> None:
    """Select on every agent's stdout until ``done()``.

    Each JSON line goes to ``handle`` as it arrives; an agent whose stdout ended goes to
    ``on_exit`` once (which may raise to stop the loop); ``check`` runs before every wait (a
    fault scheduler raises its errors there). Only silence ends the loop on its own: the
    total time is not limited, so a busy machine makes a job slower and never makes it fail.

    Raises:
        AgentsSilent: nothing arrived from any agent for ``stall_timeout_s`` (nor did any
            agent exit) while not ``done()``.
        whatever ``handle``, ``on_exit`` or ``check`` raise.
    """
    sel = selectors.DefaultSelector()
    try:
        for a in agents:
            if not a.closed:
                sel.register(a, selectors.EVENT_READ, a)
        last_heard = time.monotonic()
        while not done():
            if check is not None:
                check()
            events = sel.select(timeout=poll_s)
            now = time.monotonic()
            if not events and now - last_heard > stall_timeout_s:
                raise AgentsSilent(stall_timeout_s)
            for key, _ in events:
                agent: AgentProcess = key.data
                for ev in agent.read_events():
                    last_heard = now
                    handle(agent, ev)
                if agent.closed:
                    last_heard = now
                    sel.unregister(agent)
                    if on_exit is not None:
                        on_exit(agent)
    finally:
        sel.close()
