"""``tf-run``: launch a command as the ranks of a torch.distributed job, like ``torchrun``.

::

    tf-run --local 4 -- python examples/ddp_digits.py --backend tailfabric
    tf-run --hosts h1,h2,h3,h4 -- python examples/ddp_digits.py --backend gloo

Rank i runs on the i-th host of ``--hosts`` (inside that Mininet host's namespaces, of the
fabric ``make fabric-up`` started; one rank per host) or, with ``--local N``, as N local
processes. Each gets ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``,
``MASTER_ADDR`` and ``MASTER_PORT``; on fabric hosts also ``TAILFABRIC_TOPOLOGY`` and
``TAILFABRIC_HOST`` (the ``tailfabric`` backend's paths) and ``GLOO_SOCKET_IFNAME`` (gloo
talks over the host's plane-0 NIC; ``MASTER_ADDR`` is rank 0's plane-0 address, which rank 0
reaches through ``lo``: the fabric's host set-up brings it up, and tf-run makes sure). Every line a
rank prints (stdout and stderr) comes out prefixed with ``[rank i host]``; when a rank fails
(non-zero exit) or on Ctrl-C the others are terminated, then killed after a grace period, and
tf-run exits with the first failure's status (0 when every rank succeeded).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO

from experiments.hosts import STATE_FILE, read_running_state
from host.errors import FabricNotRunning
from topologies.model import Fabric, TopologyError

DEFAULT_MASTER_PORT = 29500
GRACE_S = 5.0
"""After a rank failed (or Ctrl-C), how long the others get to exit before SIGKILL."""
POLL_S = 0.1


class LaunchError(Exception):
    """The ranks cannot be started; the message says why."""


@dataclass(frozen=True)
class RankSpec:
    """How to start one rank."""

    rank: int
    where: str  # host name, or "local"
    prefix: tuple[str, ...]  # what enters the host's namespaces (empty: run here)
    env: Mapping[str, str]


def local_plan(n: int, master_port: int) -> list[RankSpec]:
    """N local ranks, rendezvous on 127.0.0.1."""
    if n < 1:
        raise LaunchError(f"--local needs at least 1 rank, got {n}")
    return [RankSpec(r, "local", (), _env(r, r, n, n, "127.0.0.1", master_port)) for r in range(n)]


def fabric_plan(
    fabric: Fabric,
    topology: pathlib.Path,
    hosts: Sequence[str],
    host_pids: Mapping[str, int],
    master_port: int,
    enter: Sequence[str],
) -> list[RankSpec]:
    """One rank per host of ``hosts`` (rank order), entering each host's namespaces with
    ``enter + [pid]``.

    Raises:
        LaunchError: an unknown or repeated host, or a host the fabric state has no pid for.
    """
    if not hosts:
        raise LaunchError("--hosts needs at least one host")
    if len(set(hosts)) != len(hosts):
        raise LaunchError(f"--hosts names a host twice: {','.join(hosts)} (one rank per host)")
    try:
        nics = [fabric.host(h).nics[0] for h in hosts]
    except (KeyError, TopologyError) as e:
        raise LaunchError(str(e)) from None
    missing = [h for h in hosts if h not in host_pids]
    if missing:
        raise LaunchError(f"the running fabric has no process for host(s) {missing}")
    master = nics[0].baseline_address
    out = []
    for r, (h, nic) in enumerate(zip(hosts, nics)):
        env = dict(_env(r, 0, len(hosts), 1, master, master_port))
        env.update(
            TAILFABRIC_TOPOLOGY=str(topology), TAILFABRIC_HOST=h, GLOO_SOCKET_IFNAME=nic.ifname
        )
        out.append(RankSpec(r, h, (*enter, str(host_pids[h])), env))
    return out


def _env(
    rank: int, local_rank: int, world: int, local_world: int, addr: str, port: int
) -> dict[str, str]:
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(local_rank),
        "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(local_world),
        "MASTER_ADDR": addr,
        "MASTER_PORT": str(port),
    }


def free_port() -> int:
    """A TCP port free on this machine now (the fabric hosts' namespaces have their own)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def enter_command() -> list[str]:
    """Mininet's ``mnexec -a`` (all namespaces of a pid), or ``nsenter`` without Mininet."""
    mnexec = shutil.which("mnexec")
    return [mnexec, "-a"] if mnexec else ["nsenter", "-n", "-t"]


class Launch:
    """The running ranks: start, relay output, supervise, clean up."""

    def __init__(self, plan: Sequence[RankSpec], command: Sequence[str], out: IO[str]) -> None:
        self.plan = plan
        self.command = list(command)
        self.out = out
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self._lock = threading.Lock()
        self._readers: list[threading.Thread] = []
        self.first_failure: int | None = None
        """The rank whose failure stopped the others (None: none failed on its own)."""

    def start(self) -> None:
        base = dict(os.environ)
        for spec in self.plan:
            if spec.prefix:
                _loopback_up(spec)
            argv = [*spec.prefix, *self.command]
            if spec.prefix:
                argv = [*spec.prefix, "env", "-C", os.getcwd(), *self.command]
            try:
                p = subprocess.Popen(
                    argv,
                    env={**base, **spec.env},
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # Ctrl-C reaches tf-run only; it ends the ranks
                )
            except OSError as e:
                self.stop()
                raise LaunchError(f"cannot start rank {spec.rank} ({argv[0]}): {e}") from None
            self.procs[spec.rank] = p
            t = threading.Thread(target=self._relay, args=(spec, p), daemon=True)
            t.start()
            self._readers.append(t)

    def _relay(self, spec: RankSpec, p: subprocess.Popen[bytes]) -> None:
        assert p.stdout is not None
        tag = f"[rank {spec.rank} {spec.where}] "
        for raw in p.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self._lock:
                self.out.write(tag + line + "\n")
                self.out.flush()

    def supervise(self) -> dict[int, int]:
        """Wait for every rank; on the first failure end the others. Exit codes by rank."""
        while True:
            codes = {r: p.poll() for r, p in self.procs.items()}
            if self.first_failure is None and any(c not in (None, 0) for c in codes.values()):
                bad = min(r for r, c in codes.items() if c not in (None, 0))
                self.first_failure = bad
                if all(c is not None for c in codes.values()):
                    break
                self._say(f"rank {bad} exited with {codes[bad]}: stopping the other ranks")
                self.stop()
            if all(c is not None for c in codes.values()):
                break
            time.sleep(POLL_S)
        for t in self._readers:
            t.join(timeout=2.0)
        return {r: int(p.returncode) for r, p in self.procs.items()}

    def stop(self, grace_s: float = GRACE_S) -> None:
        """SIGTERM every running rank's process group, SIGKILL what outlives ``grace_s``."""
        for p in self.procs.values():
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for p in self.procs.values():
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    def _say(self, msg: str) -> None:
        with self._lock:
            self.out.write(f"tf-run: {msg}\n")
            self.out.flush()


def _loopback_up(spec: RankSpec) -> None:
    """Bring up ``lo`` in the rank's host (the fabric's set-up does; a fabric brought up by an
    older checkout left it down): rank 0 reaches its own rendezvous server through it
    (``MASTER_ADDR`` is its own address).

    Raises:
        LaunchError: ``ip`` failed in that host.
    """
    done = subprocess.run(
        [*spec.prefix, "ip", "link", "set", "dev", "lo", "up"], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise LaunchError(f"cannot bring up lo in {spec.where}: {done.stderr.strip()[:200]}")


def exit_status(codes: Mapping[int, int], first: int | None = None) -> int:
    """0 when every rank exited 0; else the status of rank ``first`` (the one that failed
    first) or of the lowest failing rank; 128 + signal for a rank killed by a signal."""
    for r in ([first] if first is not None else []) + sorted(codes):
        c = codes[r]
        if c != 0:
            return 128 - c if c < 0 else c
    return 0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="tf-run", description="Launch a command as the ranks of a torch.distributed job."
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--local", type=int, metavar="N", help="N ranks on this machine")
    where.add_argument("--hosts", help="comma-separated fabric hosts, one rank each (h1,h2,...)")
    p.add_argument("--results", default="results", help="the fabric's results directory")
    p.add_argument("--master-port", type=int, default=0, help="rendezvous port (0: pick one)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to run")
    args = p.parse_args(argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        p.error("no command: tf-run ... -- python train.py")
    if not 0 <= args.master_port < 65536:
        p.error("--master-port must be in 0..65535")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.local is not None:
            plan = local_plan(args.local, args.master_port or free_port())
        else:
            state = read_running_state(pathlib.Path(args.results) / STATE_FILE)
            fabric = Fabric.load(state.topology)
            hosts = [h.strip() for h in args.hosts.split(",") if h.strip()]
            port = args.master_port or DEFAULT_MASTER_PORT
            plan = fabric_plan(fabric, state.topology, hosts, state.hosts, port, enter_command())
    except (LaunchError, FabricNotRunning, OSError, TopologyError) as e:
        print(f"tf-run: {e}", file=sys.stderr)
        return 2
    launch = Launch(plan, args.command, sys.stdout)
    try:
        launch.start()
        codes = launch.supervise()
    except LaunchError as e:
        print(f"tf-run: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        launch._say("interrupted: stopping every rank")
        launch.stop()
        return 130
    for spec in plan:
        launch._say(f"rank {spec.rank} ({spec.where}) exited with {codes[spec.rank]}")
    return exit_status(codes, launch.first_failure)


if __name__ == "__main__":
    sys.exit(main())
