"""Start many ``tf-switch`` processes fast: a fork server that imports the switch once.

A ``tf-switch`` process spends most of its start-up importing Python modules (the compiler,
the pipeline and device layers, gRPC and the P4Runtime protobufs): about 0.45 s of CPU each, so
eight switches take 3.5 s on two cores. This server (``python -m topologies.emulation.swlaunch``)
imports them once (:data:`PRELOAD`) and then forks one child per switch; each child is an ordinary ``tf-switch`` process (its own pid,
session and GIL, process name ``tf-switch``) that runs ``switch.daemon.main`` with exactly the
command line ``tf-switch`` would get. Nothing starts a thread or a gRPC object before the fork.

Protocol (JSON lines): the client writes ``{"name": "p0l0", "argv": [...], "log": "path"}`` on
stdin; the server answers ``{"name": "p0l0", "pid": 1234}`` (or ``"error"``) on stdout. When
stdin closes (the client stopped or crashed) the server stops every child it started (SIGTERM,
then SIGKILL after :data:`STOP_GRACE_S`) and exits, so no switch outlives the fabric that owns it.

:class:`SwitchLauncher` is the client side, and :func:`exec_switch` starts a switch the plain way
(one ``python -m switch.daemon`` process) for ``--launch exec``.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType
from typing import IO, Any

from host.forkserver import run_child

STOP_GRACE_S = 2.0
PROCESS_NAME = b"tf-switch"
# Modules tf-switch imports lazily while starting and while loading a pipeline.
PRELOAD = (
    "switch.daemon",
    "switch.p4rt.server",
    "switch.device.control",
    "switch.device.ports",
    "switch.device.pcap",
    "switch.device.sscli",
    "switch.compile.package",
    "switch.p4info",
)


class LaunchError(RuntimeError):
    """The fork server died or refused to start a switch."""


# -- server ------------------------------------------------------------------------------------


def _preload() -> None:
    """Import :data:`PRELOAD`; a module that fails to import stops the server before it is
    ready (the client's :meth:`SwitchLauncher.wait_ready` raises, the traceback is on stderr)."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)


def _child(argv: list[str], log_path: str) -> None:
    """In the forked child: become a tf-switch process (its own session: Ctrl-C in the
    terminal that owns the fabric must not reach the switches) and never return."""

    def std_fds() -> list[int]:
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        return [os.open(os.devnull, os.O_RDONLY), log, log]

    def main() -> int:
        from switch.daemon import main

        return main(argv)

    run_child(PROCESS_NAME, std_fds, ["tf-switch", *argv], main, new_session=True)


def serve(inp: IO[str], out: IO[str]) -> int:
    """The fork server loop (see the module docstring)."""
    _preload()
    children: dict[int, str] = {}

    def reap() -> None:
        while children:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            children.pop(pid, None)

    stop = False

    def on_term(signum: int, frame: FrameType | None) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    out.flush()
    fd = inp.fileno()
    buf = b""
    while not stop:
        try:
            readable, _, _ = select.select([fd], [], [], 0.5)
        except InterruptedError:
            continue
        reap()
        if not readable:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            try:
                req = json.loads(line)
                argv, log, name = list(req["argv"]), str(req["log"]), str(req["name"])
            except (ValueError, KeyError, TypeError) as e:
                out.write(json.dumps({"error": f"bad request: {e}"}) + "\n")
                out.flush()
                continue
            pid = os.fork()
            if pid == 0:
                _child(argv, log)
            children[pid] = name
            out.write(json.dumps({"name": name, "pid": pid}) + "\n")
            out.flush()
    _stop_children(children)
    return 0


def _stop_children(children: dict[int, str]) -> None:
    for pid in list(children):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while children and time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid:
            children.pop(pid, None)
        else:
            time.sleep(0.02)
    for pid in list(children):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


# -- client ------------------------------------------------------------------------------------


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    # The switch's imports dominate its start-up: let Python cache their bytecode.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


class SwitchLauncher:
    """Client of the fork server (context manager; closing it stops every switch it started).

    Args:
        python: the interpreter that has the project installed.
    """

    def __init__(self, python: str = sys.executable, cwd: str | None = None) -> None:
        self.proc = subprocess.Popen(
            [python, "-m", "topologies.emulation.swlaunch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
            cwd=cwd,
            env=_child_env(),
            start_new_session=True,
        )
        self._ready = False
        self.pids: dict[str, int] = {}

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _readline(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            rc = self.proc.poll()
            raise LaunchError(f"the tf-switch fork server exited (status {rc})")
        return dict(json.loads(line))

    def wait_ready(self) -> None:
        """Block until the server has imported the switch."""
        if not self._ready:
            msg = self._readline()
            if not msg.get("ready"):
                raise LaunchError(f"unexpected message from the fork server: {msg}")
            self._ready = True

    def request(self, name: str, argv: Sequence[str], log: str) -> None:
        """Ask for a switch; :meth:`collect` returns its pid."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps({"name": name, "argv": list(argv), "log": log}) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise LaunchError("the tf-switch fork server is gone") from None

    def collect(self, count: int) -> dict[str, int]:
        """The pids of the next ``count`` switches the server started."""
        self.wait_ready()
        got: dict[str, int] = {}
        for _ in range(count):
            msg = self._readline()
            if "error" in msg:
                raise LaunchError(f"fork server: {msg['error']}")
            got[str(msg["name"])] = int(msg["pid"])
        self.pids.update(got)
        return got

    def close(self) -> None:
        """Stop every switch of this launcher and the server (idempotent)."""
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                if self.proc.stdin:
                    self.proc.stdin.close()
            try:
                self.proc.wait(timeout=STOP_GRACE_S + 3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if f:
                    f.close()

    def __enter__(self) -> SwitchLauncher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def exec_switch(
    argv: Sequence[str], log: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start a switch as its own program (``argv[0]`` is the binary); output goes to ``log``."""
    with open(log, "wb") as fh:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env or _child_env(),
        )


def main() -> int:
    return serve(sys.stdin, sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
