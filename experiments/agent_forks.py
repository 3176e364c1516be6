"""Agents forked by a fork server in their host (:mod:`host.forkserver`), driven like any
agent process.

:class:`ForkServer` starts ``python -m host.forkserver`` in one host's namespaces, waits
until it has imported and prepared the agent module, and :meth:`ForkServer.spawn` asks it for
one agent: the driver makes the agent's stdin and stdout pipes and hands their far ends (and
the agent log) to the server over its Unix socket, so the agent's JSON lines flow straight
between the driver and the agent as with :func:`experiments.hosts.start_in_host`. The agent is
a :class:`ForkedProcess`, which behaves as the :class:`subprocess.Popen` the drivers know
(pid, stdin, stdout, poll, wait, kill, terminate), its exit status reported by the server.
Closing the server (or the driver dying) closes its stdin: it stops every agent it started.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import IO

from experiments.hosts import start_in_host
from host.forkserver import DIR_PREFIX, SOCKET_NAME, stale_dirs

READY_TIMEOUT_S = 300.0
"""How long a fork server may take to import and prepare its module on a busy machine."""
SPAWN_TIMEOUT_S = 30.0
"""How long a running fork server may take to answer a request for an agent."""
STALE_AGE_S = 600.0
"""A new fork server removes the folders of servers gone for good: without a listener and
older than this (a server of another driver may still be starting in a younger one)."""


class ForkError(RuntimeError):
    """A fork server could not start, or refused or failed to start an agent."""


class ForkedProcess:
    """One agent started by a fork server, used as a :class:`subprocess.Popen` (text pipes).

    Its exit status arrives on ``conn`` (``{"rc": R}``); a server that ends without saying
    gives ``-SIGKILL`` (its agents got their parent-death signal).
    """

    def __init__(self, pid: int, conn: socket.socket, stdin: IO[str], stdout: IO[str]) -> None:
        self.pid = pid
        self.stdin: IO[str] | None = stdin
        self.stdout: IO[str] | None = stdout
        self.returncode: int | None = None
        self._conn = conn
        self._buf = b""
        conn.setblocking(False)

    def _read_status(self, timeout_s: float) -> None:
        if self.returncode is not None:
            return
        readable, _, _ = select.select([self._conn], [], [], max(0.0, timeout_s))
        if not readable:
            return
        try:
            chunk = self._conn.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        self._buf += chunk
        for line in self._buf.split(b"\n")[:-1]:
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                rc = json.loads(line).get("rc")
                if isinstance(rc, int):
                    self.returncode = rc
        if not chunk and self.returncode is None:
            self.returncode = -signal.SIGKILL
        if self.returncode is not None:
            self._conn.close()

    def poll(self) -> int | None:
        self._read_status(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = 1.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(f"agent {self.pid}", timeout or 0.0)
            self._read_status(min(left, 1.0))
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class ForkServer:
    """``python -m host.forkserver --module <module>`` in the host of shell ``host_pid``
    (context manager); its stderr goes to ``log``.

    Args:
        name: what messages call it (its host's name).
    """

    def __init__(self, name: str, host_pid: int, module: str, log: IO[bytes]) -> None:
        self.name = name
        for stale in stale_dirs(min_age_s=STALE_AGE_S):  # a killed driver's
            shutil.rmtree(stale, ignore_errors=True)
        self._dir = tempfile.mkdtemp(prefix=DIR_PREFIX)
        self.socket_path = os.path.join(self._dir, SOCKET_NAME)
        self._log = log
        self.proc = start_in_host(
            host_pid, "host.forkserver", ["--module", module, "--socket", self.socket_path], log
        )
        self.ready = False

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until the server said ``ready``.

        Raises:
            ForkError: it said ``error``, exited, or said nothing for ``timeout_s``.
        """
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        while not self.ready:
            left = deadline - time.monotonic()
            readable, _, _ = select.select([self.proc.stdout], [], [], max(0.0, left))
            if not readable:
                raise ForkError(f"the fork server on {self.name} said nothing for {timeout_s:g} s")
            line = self.proc.stdout.readline()
            if not line:
                raise ForkError(
                    f"the fork server on {self.name} exited ({self.proc.wait()}) before it was ready"
                )
            with contextlib.suppress(ValueError, AttributeError):
                ev = json.loads(line)
                if ev.get("event") == "error":
                    raise ForkError(f"the fork server on {self.name}: {ev.get('message')}")
                self.ready = ev.get("event") == "ready"

    def spawn(self, argv: Sequence[str]) -> ForkedProcess:
        """One agent running the module's ``main(argv)``.

        Raises:
            ForkError: the server is not ready, gone, or refused.
        """
        if not self.ready:
            self.wait_ready()
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            pid = self._request(conn, argv, [in_r, out_w, self._log.fileno()])
        except BaseException:
            conn.close()
            os.close(in_w)
            os.close(out_r)
            raise
        finally:
            os.close(in_r)
            os.close(out_w)
        stdin = open(in_w, "w", buffering=1)  # noqa: SIM115 - owned by the ForkedProcess
        stdout = open(out_r)  # noqa: SIM115
        return ForkedProcess(pid, conn, stdin, stdout)

    def _request(self, conn: socket.socket, argv: Sequence[str], fds: list[int]) -> int:
        """Ask for one agent over ``conn`` with ``fds``; its pid.

        Raises:
            ForkError: the server is gone, refused, or answered nonsense.
        """
        try:
            conn.settimeout(SPAWN_TIMEOUT_S)
            conn.connect(self.socket_path)
            socket.send_fds(conn, [json.dumps({"argv": list(argv)}).encode()], fds)
            answer = b""
            while not answer.endswith(b"\n"):
                chunk = conn.recv(4096)
                if not chunk:
                    break
                answer += chunk
            doc = json.loads(answer) if answer else {}
        except (OSError, ValueError) as e:
            raise ForkError(f"the fork server on {self.name}: {type(e).__name__}: {e}") from e
        if not isinstance(doc, dict) or not isinstance(doc.get("pid"), int):
            why = doc.get("error") if isinstance(doc, dict) else None
            raise ForkError(f"the fork server on {self.name} did not start an agent: {why}")
        return int(doc["pid"])

    def close(self, timeout_s: float = 10.0) -> None:
        """Close its stdin (it stops its agents and exits); end it if it does not (idempotent)."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout_s)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ForkServers:
    """A pool's fork servers: one per host, started on first use, closed together.

    Args:
        host_pids: host name -> the pid of its Mininet shell.
        module: the agent module every server prepares.
        log: where the servers' stderr goes.
    """

    def __init__(self, host_pids: Mapping[str, int], module: str, log: IO[bytes]) -> None:
        self._host_pids = host_pids
        self._module = module
        self._log = log
        self._servers: dict[str, ForkServer] = {}

    def get(self, host: str) -> ForkServer:
        """``host``'s server, started now if it was not (not waited for)."""
        server = self._servers.get(host)
        if server is None:
            server = ForkServer(host, self._host_pids[host], self._module, self._log)
            self._servers[host] = server
        return server

    def start(self, hosts: Iterable[str]) -> None:
        """Start the servers of ``hosts`` that are not running, all at once (each imports the
        agent module on its own: started together, they import in parallel)."""
        for h in sorted(hosts):
            self.get(h)

    def close(self) -> None:
        """Close every server (idempotent)."""
        servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.close()
