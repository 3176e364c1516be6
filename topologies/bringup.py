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
another factory with the same methods (:class:`RouteController`). This module imports it only
when a fabric is brought up, so the topology package stays usable without it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from topologies import probe
from topologies.fabricnet import FabricNet, FabricNetOptions
from topologies.mnfabric import FabricNetError
from topologies.model import Fabric

PHASES = ("mininet", "switches", "program", "pipeline", "routes", "check")


class RouteController(Protocol):
    """What bring-up needs from a controller (``controller.fabric.FabricController``)."""

    def connect(self) -> Any: ...

    def push_pipeline(self) -> Any: ...

    def install_routes(self) -> Any: ...

    def run_command(self, argv: list[str]) -> str: ...

    def close(self) -> Any: ...


ControllerFactory = Callable[[Fabric, str, str, str], RouteController]


def default_controller_factory() -> ControllerFactory:
    """``FabricController(fabric, p4info, config, results_dir=...)`` from ``controller.fabric``.

    Raises:
        FabricNetError: the controller package is not installed or not written yet.
    """
    try:
        from controller.fabric import FabricController
    except ImportError as e:
        raise FabricNetError(f"the fabric controller is not available ({e}): bring-up needs "
                             "controller.fabric.FabricController to push the pipeline and "
                             "install routes") from None  # fmt: skip

    def make(fabric: Fabric, p4info: str, config: str, results_dir: str) -> RouteController:
        return FabricController(fabric, p4info, config, results_dir=results_dir)  # type: ignore[no-any-return]

    return make


@dataclass
class BringUp:
    """A fabric that is up: its network, its controller (connected) and how long it took."""

    net: FabricNet
    controller: RouteController | None
    timings: dict[str, float] = field(default_factory=dict)
    results: list[probe.ProbeResult] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        return bool(self.results) and all(r.ok for r in self.results)

    def close_controller(self) -> None:
        """Disconnect the controller; the switches keep their tables (idempotent)."""
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


def bring_up(fabric: Fabric, options: FabricNetOptions | None = None, *,
             controller_factory: ControllerFactory | None = None, check: bool = True,
             check_timeout_s: float = 3.0) -> BringUp:  # fmt: skip
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
        net.write_state(ready=True, extra={"bringup_s": {k: round(v, 4) for k, v in up.timings.items()},
                                           "paths_ok": sum(r.ok for r in up.results),
                                           "paths": len(up.results)})  # fmt: skip
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
    return (f"fabric: {s.planes} planes x ({s.leaves} leaves + {s.spines} spines), "
            f"{len(fabric.hosts)} hosts ({s.hosts_per_leaf} per leaf, one NIC per plane), "
            f"{len(fabric.switches)} switches ({target}); links {options.switch.link_mbps:g} "
            f"Mbit/s, queues {options.switch.queue_depth} packets")  # fmt: skip


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
    lines = [describe(up.net.fabric, up.net.options),
             format_timings(up.timings, up.net.program_cached)]  # fmt: skip
    if up.results:
        lines.append(probe.summarize(up.results))
    lines.append(f"state: {up.net.state_path}  topology: {up.net.topology_path}")
    return "\n".join(lines)
