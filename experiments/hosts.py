"""Processes inside the hosts of a running fabric, driven from the root namespace.

:func:`read_running_state` reads and checks the state file of the fabric of ``make fabric-up``
(or of :func:`topologies.emulation.bringup.own_fabric`): the one reader for every experiment.
:func:`start_in_host` runs ``python -m <module>`` in one host's namespace (``mnexec -a <host
pid>``) with JSON lines on its stdin and stdout; :class:`HostProcess` drives
:mod:`host.stream_agent` that way, reading its events and sending it commands.
"""

from __future__ import annotations

import json
import pathlib
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

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


def send_line(proc: subprocess.Popen[str], msg: Mapping[str, object]) -> None:
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
