"""A running fabric: Mininet hosts and links, switch processes, the compiled program, state file.

:class:`FabricNet` is a context manager. :meth:`FabricNet.start` runs, as parallel as it can:

1. the program build (``tf-p4 compile`` once per fabric, skipped while ``build/`` is newer than
   its sources) and the ``tf-switch`` fork server's imports, both in the background;
2. the Mininet build (host namespaces, switch nodes, veth pairs with the model's MACs);
3. every switch process at once (``--no-p4``), then, while they start, the host scripts (in
   parallel) and the switch-side ports; then it waits until every switch serves gRPC;
4. ``results/fabric/state.json`` (what the controller and host agents read) and the topology
   JSON next to it.

It never talks P4Runtime: the controller pushes the pipeline and installs routes (see
:mod:`topologies.emulation.bringup`). :meth:`FabricNet.stop` ends everything it started
(idempotent) and removes the state file; :mod:`topologies.emulation.cleanup` handles what a
crashed run left behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mininet.net import Mininet

from switch.device.netns import netns_of_pid
from topologies.emulation import probe
from topologies.emulation.cleanup import clear_dead_fabric
from topologies.emulation.mnfabric import (
    FabricNetError,
    MininetFabric,
    SwitchOptions,
    build_mininet,
    configure_hosts,
    configure_switch_ports,
    release_ports,
    reserve_ports,
    switch_ifnames,
    teardown,
    wait_switches_ready,
)
from topologies.emulation.swlaunch import SwitchLauncher
from topologies.model import Fabric, port_ifname

STATE_VERSION = 1
REPO_ROOT = Path(__file__).resolve().parents[2]
P4_PROGRAM = str(REPO_ROOT / "p4" / "fabric.p4")
P4C_BMV2 = "p4c-bm2-ss"


@dataclass(frozen=True)
class FabricNetOptions:
    """Where a fabric keeps its files and how its switches start."""

    switch: SwitchOptions = field(default_factory=SwitchOptions)
    results_dir: str = "results"
    """``<results_dir>/fabric/``: state.json, topology.json, logs/, hosts/, pcap/."""
    p4_program: str = P4_PROGRAM
    build_dir: str = "build"
    ready_timeout_s: float = 30.0
    """How long every switch may take to serve gRPC."""
    host_napi: str = "auto"
    """How host NICs receive (:data:`~topologies.emulation.mnfabric.HOST_NAPI_MODES`)."""

    @property
    def run_dir(self) -> Path:
        return Path(self.results_dir) / "fabric"


def fabric_dir(results_dir: str = "results") -> Path:
    return Path(results_dir) / "fabric"


def state_path(results_dir: str = "results") -> Path:
    return fabric_dir(results_dir) / "state.json"


def read_state(results_dir: str = "results") -> dict[str, Any] | None:
    """The state file of the fabric running from ``results_dir``, or None."""
    try:
        return dict(json.loads(state_path(results_dir).read_text()))
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class Program:
    """The compiled fabric program: what the controller pushes."""

    p4info: str
    config: str


class _Build:
    """A program build running in the background (or already up to date)."""

    def __init__(self, options: FabricNetOptions) -> None:
        self.options = options
        out = Path(options.build_dir)
        src = Path(options.p4_program)
        if options.switch.target == "tf":
            self.program = Program(str(out / "fabric.p4info.txtpb"), str(out / "fabric.tfp4.json"))
            cmd = [
                options.switch.python,
                "-m",
                "switch.cli",
                "compile",
                str(src),
                "-o",
                self.program.config,
                "--p4info",
                self.program.p4info,
            ]
            sw_dir = REPO_ROOT / "switch"
            sources = [src, *sw_dir.rglob("*.py"), *(sw_dir / "p4include").glob("*.p4")]
        else:
            bdir = out / "bmv2"
            self.program = Program(str(bdir / "fabric.p4info.txtpb"), str(bdir / "fabric.json"))
            p4c = shutil.which(P4C_BMV2)
            if p4c is None and not _up_to_date([Path(self.program.config)], [src]):
                raise FabricNetError(
                    f"TARGET=bmv2 needs {self.program.config}, built by "
                    f"{P4C_BMV2} (p4lang/p4c), which is not on PATH"
                )
            cmd = [
                p4c or P4C_BMV2,
                "--p4runtime-files",
                self.program.p4info,
                "-o",
                self.program.config,
                str(src),
            ]
            sources = [src]
        targets = [Path(self.program.p4info), Path(self.program.config)]
        self.proc: subprocess.Popen[str] | None = None
        self.cached = _up_to_date(targets, sources)
        if not self.cached:
            Path(self.program.config).parent.mkdir(parents=True, exist_ok=True)
            self.proc = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
        self.cmd = cmd

    def wait(self) -> Program:
        if self.proc is not None:
            out, _ = self.proc.communicate()
            if self.proc.returncode != 0:
                raise FabricNetError(
                    f"building {self.options.p4_program} failed ({' '.join(self.cmd)}):\n{out}"
                )
            self.proc = None
        return self.program

    def cancel(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _up_to_date(targets: Iterable[Path], sources: Iterable[Path]) -> bool:
    try:
        oldest = min(t.stat().st_mtime for t in targets)
    except (OSError, ValueError):
        return False
    return all(s.stat().st_mtime <= oldest for s in sources if s.exists())


FABRIC_LOCK = Path("/run/lock/tailfabric-fabric.lock")
"""Held (flock) by the process that runs a fabric, from before its first interface exists
until its last one is gone: fabrics use machine-global interface names, so a second one must
wait for the first instead of colliding with it half-built."""


class FabricLock:
    """The machine's fabric lock (:data:`FABRIC_LOCK`), taken without blocking."""

    def __init__(self, path: Path = FABRIC_LOCK) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        """Raises: FabricNetError: another process holds it (its pid in the message)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise FabricNetError(
                f"another fabric is running or being built on this machine (pid {holder}, "
                f"lock {self.path}): stop it first with 'make fabric-down' or wait"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Idempotent."""
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None


def fabric_lock_held(path: Path = FABRIC_LOCK) -> bool:
    """Whether some process holds the machine's fabric lock now."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


class FabricNet:
    """A fabric in Mininet with its switch processes (context manager; :meth:`stop` is idempotent).

    Args:
        fabric: the topology.
        options: files, target and switch settings.
    """

    def __init__(self, fabric: Fabric, options: FabricNetOptions | None = None) -> None:
        self.fabric = fabric
        self.options = options or FabricNetOptions()
        self.mf: MininetFabric | None = None
        self.launcher: SwitchLauncher | None = None
        self._reserved: str | None = None  # the gRPC ports taken out of the ephemeral range
        self.program: Program | None = None
        self.program_cached = False
        self.timings: dict[str, float] = {}
        self._started = False
        self._lock = FabricLock()
        self.cleared: list[str] = []  # what a dead fabric had left, removed by start()

    # -- paths --------------------------------------------------------------------------

    @property
    def run_dir(self) -> Path:
        return self.options.run_dir

    @property
    def topology_path(self) -> Path:
        return self.run_dir / "topology.json"

    @property
    def state_path(self) -> Path:
        return self.run_dir / "state.json"

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> dict[str, float]:
        """Build and start everything up to "every switch serves gRPC" (see the module docs).

        Returns:
            seconds per phase: ``mininet``, ``switches`` (start, host and port configuration,
            gRPC ready), ``program`` (waiting for the build after that; 0 when cached).
        Raises:
            FabricNetError: what failed, with the switch log where one exists.
        """
        if self._started:
            raise FabricNetError("this fabric is already started")
        self._lock.acquire()
        self._started = True
        self.cleared = clear_dead_fabric()
        for line in self.cleared:
            print(f"left by a fabric that is gone: {line}", file=sys.stderr)
        opts = self.options
        sw = opts.switch
        sw.validate()
        self._prepare_dirs()
        t0 = time.perf_counter()
        build = _Build(opts)
        self.program_cached = build.cached
        try:
            if sw.target == "tf" and sw.launch == "fork":
                self.launcher = SwitchLauncher(sw.python)
            self.mf = build_mininet(self.fabric, sw, self.launcher)
            t1 = time.perf_counter()
            self.timings["mininet"] = t1 - t0
            # ports up before the switches open them: BMv2 opens each through libpcap, which
            # refuses a down interface and never retries (0 of 48 paths answered otherwise)
            configure_switch_ports(self.fabric)
            grpc = [s.model.grpc_port for s in self.mf.switches]
            self._reserved = reserve_ports(min(grpc), max(grpc))
            for s in self.mf.switches:
                s.start([])
            configure_hosts(self.fabric, self.mf.hosts, str(self.run_dir / "hosts"), opts.host_napi)
            if self.launcher is not None:
                pids = self.launcher.collect(len(self.mf.switches))
                for s in self.mf.switches:
                    s.switch_pid = pids[s.name]
            wait_switches_ready(self.mf.switches, opts.ready_timeout_s)
            t2 = time.perf_counter()
            self.timings["switches"] = t2 - t1
            self.program = build.wait()
            self.timings["program"] = time.perf_counter() - t2
            self.fabric.to_json(self.topology_path)
            self.write_state(ready=False)
        except BaseException:
            build.cancel()
            self.stop()
            raise
        return dict(self.timings)

    def _prepare_dirs(self) -> None:
        sw = self.options.switch
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for sub in ("logs", "hosts"):
            d = self.run_dir / sub
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
        if sw.pcap_dir:
            shutil.rmtree(sw.pcap_dir, ignore_errors=True)
            Path(sw.pcap_dir).mkdir(parents=True)

    def stop(self) -> None:
        """Stop switches, hosts, links and the fork server; remove the state file."""
        if self.mf is not None:
            teardown(self.mf)
            self.mf = None
        if self.launcher is not None:
            self.launcher.close()
            self.launcher = None
        if self._reserved is not None:
            release_ports(self._reserved)
            self._reserved = None
        with contextlib.suppress(FileNotFoundError):
            state = json.loads(self.state_path.read_text())
            if state.get("runner_pid") == os.getpid():
                self.state_path.unlink()
        self._lock.release()

    def __enter__(self) -> FabricNet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what others read ---------------------------------------------------------------

    @property
    def net(self) -> Mininet:
        """The Mininet object (for the CLI)."""
        if self.mf is None:
            raise FabricNetError("the fabric is not running")
        return self.mf.net

    def host_pids(self) -> dict[str, int]:
        if self.mf is None:
            raise FabricNetError("the fabric is not running")
        return {h.name: int(h.pid) for h in self.mf.hosts}

    def host_netns(self) -> dict[str, str]:
        return {name: netns_of_pid(pid) for name, pid in self.host_pids().items()}

    def state(self, *, ready: bool, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """The ``state.json`` document (see the README's "Fabric state file")."""
        if self.mf is None or self.program is None:
            raise FabricNetError("the fabric is not running")
        o = self.options
        doc: dict[str, Any] = {
            "version": STATE_VERSION,
            "topology": str(self.topology_path.resolve()),
            "target": o.switch.target,
            "p4info": str(Path(self.program.p4info).resolve()),
            "config": str(Path(self.program.config).resolve()),
            "runner_pid": os.getpid(),
            "launcher_pid": self.launcher.pid if self.launcher else None,
            "ready": ready,
            "link_mbps": o.switch.link_mbps,
            "queue_depth": o.switch.queue_depth,
            "pcap_dir": str(Path(o.switch.pcap_dir).resolve()) if o.switch.pcap_dir else None,
            "hosts": {
                h.name: {
                    "pid": int(h.pid),
                    "netns": netns_of_pid(int(h.pid)),
                    "nics": [n.ifname for n in self.fabric.host(h.name).nics],
                }
                for h in self.mf.hosts
            },
            "switches": {
                s.name: {
                    "pid": s.switch_pid,
                    "grpc": s.grpc_address,
                    "thrift_port": s.model.thrift_port,
                    "device_id": s.model.device_id,
                    "interfaces": {
                        str(port): port_ifname(s.name, port) for port in sorted(s.model.ports)
                    },
                    "log": str(Path(s.log_path).resolve()),
                }
                for s in self.mf.switches
            },
            "interfaces": switch_ifnames(self.fabric),
        }
        if extra:
            doc.update(extra)
        return doc

    def write_state(self, *, ready: bool, extra: dict[str, Any] | None = None) -> Path:
        """Write ``state.json`` atomically; returns its path."""
        doc = self.state(ready=ready, extra=extra)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        os.replace(tmp, self.state_path)
        return self.state_path

    def check(
        self,
        pairs: Iterable[tuple[str, str]] | None = None,
        planes: Iterable[int] | None = None,
        *,
        timeout_s: float = probe.TIMEOUT_S,
    ) -> list[probe.ProbeResult]:
        """Every path between every host pair, or of ``pairs`` on ``planes`` (see
        :meth:`topologies.emulation.probe.Prober.run`)."""
        return probe.check_fabric(
            self.fabric, self.host_netns(), pairs, planes, timeout_s=timeout_s
        )

    def configure_queues(self) -> None:
        """After the pipeline push: queue rate and depth where the command line cannot set them
        (BMv2's CLI needs a loaded program; tf-switch got them at start)."""
        if self.mf is None:
            raise FabricNetError("the fabric is not running")
        for s in self.mf.switches:
            s.configure_queues()
