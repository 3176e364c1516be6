"""Bring a fabric up end to end: Mininet and switches, pipeline, routes, every path verified.

:func:`bring_up` is what ``make fabric``, ``make fabric-up``, the benchmark and the Mininet test
call. Phases, each timed (seconds, ``BringUp.timings``):

========== ================================================================================
mininet    host namespaces, switch nodes, veth pairs
switches   every switch process at once, host and switch-port configuration, gRPC ready
program    waiting for the P4 build after that (0 while ``build/`` is up to date)
pipeline   the controller connects to every switch and pushes the compiled program
routes     the controller installs the routes (and the rest of its tables)
check      every ordered host pair over every path (plane x spine), both directions
total      start -> every path verified
========== ================================================================================

The controller is tailfabric's (``controller.fabric.FabricController``); a test may pass
another factory with the same methods (:class:`RouteController`). :func:`own_fabric` is a fabric
brought up for one run (an experiment, a benchmark) and stopped after it, refused while another
one runs on this machine.
"""

from __future__ import annotations

import contextlib
import pathlib
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import Protocol

from controller.fabric import FabricController
from controller.server import ControlServer
from topologies.emulation import probe
from topologies.emulation.fabricnet import (
    FabricNet,
    FabricNetOptions,
    fabric_lock_held,
    read_state,
)
from topologies.emulation.mnfabric import FabricNetError, SwitchOptions
from topologies.model import Fabric, FabricSpec, build_fabric

PHASES = ("mininet", "switches", "program", "pipeline", "routes", "check")


class RouteController(Protocol):
    """What bring-up needs from a controller (``controller.fabric.FabricController``)."""

    def connect(self) -> object: ...

    def push_pipeline(self) -> object: ...

    def install_routes(self) -> object: ...

    def run_command(self, argv: list[str]) -> str: ...

    def close(self) -> object: ...


ControllerFactory = Callable[[Fabric, str, str, str], RouteController]


def default_controller_factory() -> ControllerFactory:
    """``FabricController(fabric, p4info, config, results_dir=...)`` from ``controller.fabric``."""

    def make(fabric: Fabric, p4info: str, config: str, results_dir: str) -> RouteController:
        return FabricController(fabric, p4info, config, results_dir=results_dir)

    return make


@dataclass
class BringUp:
    """A fabric that is up: its network, its controller (connected) and how long it took."""

    net: FabricNet
    controller: RouteController | None
    timings: dict[str, float] = field(default_factory=dict)
    results: list[probe.ProbeResult] = field(default_factory=list)
    server: ControlServer | None = None
    """The fabric's controller service (:meth:`serve`), if it runs."""

    @property
    def verified(self) -> bool:
        return bool(self.results) and all(r.ok for r in self.results)

    def serve(self, port: int = 0) -> ControlServer:
        """Make the bring-up's controller the fabric's one controller service: it stays
        primary, collects telemetry into ``results/telemetry.csv`` continuously and serves
        ``tf-ctl`` commands on 127.0.0.1 (what ``tf-ctl serve`` does; ``controller.json``
        tells ``tf-ctl`` where). Stopped with the controller (:meth:`close_controller`).

        Raises:
            FabricNetError: the controller is gone or not tailfabric's.
        """
        if self.server is not None:
            return self.server
        ctl = self.controller
        if not isinstance(ctl, FabricController):
            raise FabricNetError("no controller to serve (closed, or not a FabricController)")
        ctl.start_telemetry()
        topology = str(self.net.topology_path.resolve())
        self.server = ControlServer(ctl, port, topology=topology).start()
        return self.server

    def close_controller(self) -> None:
        """Stop the service, disconnect the controller; the switches keep their tables
        (idempotent)."""
        server, self.server = self.server, None
        if server is not None:
            server.stop()
        ctl, self.controller = self.controller, None
        if ctl is not None:
            ctl.close()

    def stop(self) -> None:
        """Controller, then switches, hosts and links (idempotent)."""
        try:
            with contextlib.suppress(Exception):
                self.close_controller()
        finally:
            self.net.stop()

    def __enter__(self) -> BringUp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def bring_up(
    fabric: Fabric,
    options: FabricNetOptions | None = None,
    *,
    controller_factory: ControllerFactory | None = None,
    check: bool = True,
    check_timeout_s: float = 3.0,
) -> BringUp:
    """Start ``fabric``, have the controller program it, verify every path.

    Args:
        controller_factory: builds the controller (default: :func:`default_controller_factory`).
        check: probe every path of every host pair (``BringUp.results``).
        check_timeout_s: how long a path may take to answer (probes are retried meanwhile).
    Returns:
        the running fabric; the caller stops it (``with bring_up(...) as up:``).
    Raises:
        FabricNetError: a phase failed; everything started so far is stopped again.
    """
    options = options or FabricNetOptions()
    factory = controller_factory or default_controller_factory()
    t0 = time.perf_counter()
    net = FabricNet(fabric, options)
    up = BringUp(net, None)
    try:
        up.timings.update(net.start())
        program = net.program
        assert program is not None
        with _timed(up.timings, "pipeline"):
            ctl = factory(fabric, program.p4info, program.config, options.results_dir)
            up.controller = ctl
            ctl.connect()
            ctl.push_pipeline()
            net.configure_queues()
        with _timed(up.timings, "routes"):
            ctl.install_routes()
        if check:
            with _timed(up.timings, "check"):
                up.results = net.check(timeout_s=check_timeout_s)
        up.timings["total"] = time.perf_counter() - t0
        net.write_state(
            ready=True,
            extra={
                "bringup_s": {k: round(v, 4) for k, v in up.timings.items()},
                "paths_ok": sum(r.ok for r in up.results),
                "paths": len(up.results),
            },
        )
    except BaseException:
        up.stop()
        raise
    return up


@contextlib.contextmanager
def _timed(timings: dict[str, float], phase: str) -> Iterator[None]:
    t = time.perf_counter()
    try:
        yield
    finally:
        timings[phase] = time.perf_counter() - t


def describe(fabric: Fabric, options: FabricNetOptions) -> str:
    s = fabric.spec
    target = "tf-switch" if options.switch.target == "tf" else "BMv2 simple_switch_grpc"
    return (
        f"fabric: {s.planes} planes x ({s.leaves} leaves + {s.spines} spines), "
        f"{len(fabric.hosts)} hosts ({s.hosts_per_leaf} per leaf, one NIC per plane), "
        f"{len(fabric.switches)} switches ({target}); links {options.switch.link_mbps:g} "
        f"Mbit/s, queues {options.switch.queue_depth} packets"
    )


def format_timings(timings: dict[str, float], program_cached: bool = False) -> str:
    parts = []
    for k in PHASES:
        if k in timings:
            extra = " (cached)" if k == "program" and program_cached else ""
            parts.append(f"{k} {timings[k]:.2f}{extra}")
    total = timings.get("total")
    head = f"up and verified in {total:.2f} s" if total is not None else "up"
    return f"{head}: " + ", ".join(parts)


def summary(up: BringUp) -> str:
    """What ``make fabric`` prints: the fabric, the phase times, the path check."""
    lines = [
        describe(up.net.fabric, up.net.options),
        format_timings(up.timings, up.net.program_cached),
    ]
    if up.results:
        lines.append(probe.summarize(up.results))
    lines.append(f"state: {up.net.state_path}  topology: {up.net.topology_path}")
    return "\n".join(lines)


# -- a fabric of one's own, for one run ------------------------------------------------------


SWITCH_PORT_SIGNATURE = "/sys/class/net/p0l0-eth1"
BUSY_POLL_S = 2.0


class FabricBusy(FabricNetError):
    """Another fabric runs on this machine (the message says which and how to stop it)."""


def busy_reason(results_dir: str = "results") -> str | None:
    """Why no fabric can be brought up now (another one runs), or None."""
    state = read_state(results_dir)
    pid = state.get("runner_pid") if state else None
    if isinstance(pid, int) and pathlib.Path(f"/proc/{pid}").exists():
        return (
            f"a fabric is already running (pid {pid}, {results_dir}/fabric/state.json): "
            "stop it first with 'make fabric-down'"
        )
    if pathlib.Path(SWITCH_PORT_SIGNATURE).exists() or fabric_lock_held():
        return "another fabric is running or being built on this machine (a test?); try later"
    return None


def _raise_exit(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def own_fabric(
    spec: FabricSpec,
    results_dir: str = "results",
    *,
    wait_s: float = 0.0,
    queue_burst_us: float | None = None,
) -> Iterator[BringUp]:
    """A fabric of ``spec`` brought up (every path verified) for one run and stopped after it.

    ``wait_s``: how long to wait for another fabric on the machine to go away first.
    ``queue_burst_us``: the switches' ``--queue-burst-us`` (None: their default).

    Its state file is the usual ``<results_dir>/fabric/state.json``, so ``make fabric-up``
    refuses to start meanwhile; SIGTERM and SIGHUP stop it too.

    Raises:
        FabricBusy: another fabric is running.
        FabricNetError: the bring-up failed or some path does not work.
    """
    deadline = time.monotonic() + wait_s
    while (reason := busy_reason(results_dir)) and time.monotonic() < deadline:
        time.sleep(BUSY_POLL_S)
    if reason:
        raise FabricBusy(reason + (f" (waited {wait_s:g} s)" if wait_s else ""))
    run_dir = pathlib.Path(results_dir) / "fabric"
    options = FabricNetOptions(
        switch=SwitchOptions(
            log_dir=str(run_dir / "logs"),
            link_mbps=spec.link_mbps,
            queue_depth=spec.queue_depth,
            queue_burst_us=queue_burst_us,
        ),
        results_dir=results_dir,
    )
    old = {s: signal.signal(s, _raise_exit) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        up = bring_up(build_fabric(spec), options)
        try:
            if not up.verified:
                bad = [
                    f"{r.src}->{r.dst} plane {r.plane} spine {r.spine}"
                    for r in up.results
                    if not r.ok
                ]
                raise FabricNetError(f"{len(bad)} paths do not work: {', '.join(bad[:5])}")
            yield up
        finally:
            up.stop()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
