"""Processes inside the hosts of a running fabric, driven from the root namespace.

:func:`read_running_state` finds the fabric of ``make fabric-up`` (or of
:func:`topologies.emulation.bringup.own_fabric`) through its state file; :class:`HostProcess`
runs ``python -m host.stream_agent`` in one host's namespace (``mnexec -a <host pid>``), reads
its JSON-line events and sends it commands.
"""

from __future__ import annotations

import json
import pathlib
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO, Any

from host.errors import FabricNotRunning, TransportError


def read_running_state(topology: str | pathlib.Path) -> dict[str, Any]:
    """The ``state.json`` next to ``topology`` of a fabric that is up and verified.

    Raises:
        FabricNotRunning: no state file, not ready, or its host processes are gone.
    """
    path = pathlib.Path(topology).parent / "state.json"
    try:
        state = dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        raise FabricNotRunning(f"needs a running fabric (make fabric-up): no {path}") from None
    if not state.get("ready"):
        raise FabricNotRunning(f"the fabric of {path} is not ready yet")
    dead = [
        h
        for h, d in state.get("hosts", {}).items()
        if not pathlib.Path(f"/proc/{d['pid']}").exists()
    ]
    if dead or not state.get("hosts"):
        raise FabricNotRunning(f"the fabric of {path} is gone (hosts {dead or 'none'})")
    return state


class HostProcess:
    """``python -m host.stream_agent ARGS`` inside a fabric host's namespace (context manager).

    Args:
        host_pid: the Mininet host's shell pid (``state["hosts"][name]["pid"]``).
        args: the command line after ``python -m host.stream_agent``.
        log: where its stderr goes.
    """

    def __init__(self, host_pid: int, args: Sequence[str], log: IO[bytes] | None = None) -> None:
        cmd = ["mnexec", "-a", str(host_pid), sys.executable, "-m", "host.stream_agent", *args]
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log if log is not None else subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
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
                f"host process {' '.join(self.proc.args[3:7])} said nothing "
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
        if self.proc.stdin is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps(cmd) + "\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                pass

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
