"""A fork server for agents: one process per fabric host that imports an agent module once
and then forks a ready agent in milliseconds.

A fresh agent process (``python -m host.decoupled_agent``) spends 3.5–4 s of CPU importing
torch and binding every task before it can say ``ready``; a chaos experiment that replaces
killed agents pays that for every replacement, on the cores its runs share. This server
(``python -m host.forkserver --module M --socket PATH``, started inside a host's namespaces)
imports ``M``, calls ``M.prepare()`` when the module has one (the agent's warm-up: torch's
thread count, datasets, lazy imports), starts no thread of its own, and listens on a Unix
socket. Each child is an ordinary agent process (its own pid and GIL, process name ``agent``)
that runs ``M.main(argv)`` with exactly the command line the module would get; what the
preparation cached is already there (copy-on-write).

Protocol, per agent: the client connects to the socket and sends one message of JSON
``{"argv": [...]}`` (at most :data:`MAX_REQUEST` bytes) carrying three file descriptors
(``SCM_RIGHTS``): the child's stdin, stdout and stderr. The server forks, answers
``{"pid": N}\\n`` (or ``{"error": "..."}\\n`` for a bad request) on the connection, keeps it
open, and when the child exits writes ``{"rc": R}\\n`` (R as :attr:`subprocess.Popen.returncode`:
``-signal`` for a signal) and closes it. The server says ``{"event": "ready", "pid": N}`` on
its stdout once it listens; when its stdin closes (the client ended or crashed) it stops every
child it started (SIGTERM, then SIGKILL after :data:`STOP_GRACE_S`) and exits, so no agent
outlives the experiment that owns it. Nothing received is unpickled or evaluated: argv is a
list of strings handed to the module's argument parser.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib
import json
import os
import select
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any, NoReturn

STOP_GRACE_S = 2.0
DIR_PREFIX = "tailfabric-forks-"
"""A fork server's socket lives in a private temporary folder named with this prefix
(:func:`stale_dirs` finds the ones whose server is gone)."""
SOCKET_NAME = "agents.sock"
MAX_REQUEST = 64 * 1024
"""Largest request (JSON bytes); an agent's command line is well under 1 KiB."""
FDS_PER_REQUEST = 3
PROCESS_NAME = b"agent"
_PR_SET_NAME = 15
_PR_SET_PDEATHSIG = 1


class RequestError(ValueError):
    """A request the server refuses (the message is sent back)."""


def parse_request(data: bytes, fds: Sequence[int]) -> list[str]:
    """The argv of one request, checked.

    Raises:
        RequestError: not JSON, not ``{"argv": [str, ...]}``, or not exactly three fds.
    """
    if len(fds) != FDS_PER_REQUEST:
        raise RequestError(f"a request carries {FDS_PER_REQUEST} file descriptors, got {len(fds)}")
    try:
        doc = json.loads(data)
    except ValueError as e:
        raise RequestError(f"a request is one JSON object: {e}") from None
    argv = doc.get("argv") if isinstance(doc, dict) else None
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise RequestError('a request is {"argv": [strings]}')
    return argv


def exit_code(status: int) -> int:
    """A wait status as :attr:`subprocess.Popen.returncode` gives it."""
    return os.waitstatus_to_exitcode(status)


@dataclass
class _Child:
    pid: int
    pidfd: int
    conn: socket.socket


def run_child(
    name: bytes,
    std_fds: Callable[[], Sequence[int]],
    sys_argv: list[str],
    main: Callable[[], int],
    *,
    close: Sequence[int] = (),
    new_session: bool = False,
) -> NoReturn:
    """In a forked child of a fork server: close the server's ``close`` descriptors, become
    process ``name`` (SIGTERM when the server dies, default signal handlers; its own session
    with ``new_session``), take ``std_fds()`` as stdin, stdout and stderr, run ``main()`` with
    ``sys.argv`` set and exit with its status. Never returns into the server, whatever fails
    (also what ``std_fds`` opens); a traceback goes to stderr. :mod:`topologies.emulation.swlaunch`
    starts its switches with it too."""
    rc = 1
    try:
        for fd in close:
            with contextlib.suppress(OSError):
                os.close(fd)
        if new_session:
            os.setsid()  # Ctrl-C in the terminal that owns the server must not reach the child
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        fds = list(std_fds())
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in set(fds) - {0, 1, 2}:
            os.close(fd)
        sys.stdin = open(0, buffering=1, closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.argv = sys_argv
        rc = main()
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - report and exit, never return into the server
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(rc)


def _reply(conn: socket.socket, **msg: object) -> None:
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps(msg).encode() + b"\n")


def serve(module_name: str, socket_path: str, inp: IO[str], out: IO[str]) -> int:
    """The fork server loop (see the module docstring)."""
    module = importlib.import_module(module_name)
    prepare = getattr(module, "prepare", None)
    if callable(prepare):
        prepare()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(socket_path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    os.chmod(socket_path, 0o600)
    listener.listen(16)
    children: dict[int, _Child] = {}  # by pidfd
    stop = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out.write(json.dumps({"event": "ready", "pid": os.getpid()}) + "\n")
    out.flush()
    stdin_fd, listen_fd = inp.fileno(), listener.fileno()
    try:
        while not stop:
            try:
                readable, _, _ = select.select([stdin_fd, listen_fd, *children], [], [], 1.0)
            except InterruptedError:
                continue
            for fd in readable:
                if fd == stdin_fd:
                    if not os.read(stdin_fd, 4096):
                        stop = True
                elif fd == listen_fd:
                    _accept(listener, module, children, stdin_fd)
                else:
                    _reap(children.pop(fd))
    finally:
        listener.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(socket_path)
        _stop_children(children)
    return 0


def _accept(
    listener: socket.socket, module: Any, children: dict[int, _Child], stdin_fd: int
) -> None:
    conn, _ = listener.accept()
    fds: list[int] = []
    try:
        conn.settimeout(5.0)
        data, fds, _flags, _addr = socket.recv_fds(conn, MAX_REQUEST, FDS_PER_REQUEST + 1)
        argv = parse_request(data, fds)
    except (OSError, RequestError) as e:
        _reply(conn, error=str(e))
        conn.close()
        for fd in fds:
            os.close(fd)
        return
    own = [stdin_fd, listener.fileno(), conn.fileno()]
    own += [fd for c in children.values() for fd in (c.pidfd, c.conn.fileno())]
    pid = os.fork()
    if pid == 0:
        run_child(
            PROCESS_NAME,
            lambda: fds,
            [module.__name__, *argv],
            lambda: int(module.main(argv, inp=sys.stdin)),
            close=own,
        )
    for fd in fds:
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    children[pidfd] = _Child(pid, pidfd, conn)
    _reply(conn, pid=pid)


def _reap(child: _Child) -> None:
    """``child`` exited: its status to its client, its connection and pidfd closed."""
    _, status = os.waitpid(child.pid, 0)
    _reply(child.conn, rc=exit_code(status))
    child.conn.close()
    os.close(child.pidfd)


def _stop_children(children: dict[int, _Child]) -> None:
    for c in children.values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(c.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while children and time.monotonic() < deadline:
        readable, _, _ = select.select(list(children), [], [], 0.05)
        for fd in readable:
            _reap(children.pop(fd))
    for c in children.values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(c.pid, signal.SIGKILL)
        _reap(c)


def stale_dirs(tmp: str | None = None, *, min_age_s: float = 0.0) -> list[str]:
    """Fork-server folders under ``tmp`` (the system's temporary folder) whose socket no
    server listens on: left by a driver that was killed (a closed server removes its own).
    ``min_age_s`` leaves out folders younger than that (a server of another driver may be
    starting in one)."""
    base = tmp or tempfile.gettempdir()
    now = time.time()
    out = []
    for name in sorted(os.listdir(base)):
        path = os.path.join(base, name)
        if not name.startswith(DIR_PREFIX) or not os.path.isdir(path):
            continue
        try:
            if now - os.stat(path).st_mtime < min_age_s:
                continue
        except OSError:
            continue
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(os.path.join(path, SOCKET_NAME))
            except OSError:
                out.append(path)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m host.forkserver", description=__doc__)
    ap.add_argument("--module", required=True, help="the agent module (has main(argv, inp))")
    ap.add_argument("--socket", required=True, help="the Unix socket to listen on")
    args = ap.parse_args(argv)
    try:
        return serve(args.module, args.socket, sys.stdin, sys.stdout)
    except (ImportError, OSError) as e:
        print(json.dumps({"event": "error", "message": f"{type(e).__name__}: {e}"}), flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
