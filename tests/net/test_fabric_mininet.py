"""The default fabric in Mininet: real tf-switch processes, the controller's routes, every path.

Brings up 2 planes x (2 leaves + 2 spines) with 4 hosts, checks all 48 (pair, plane, spine)
paths in both directions and fails a plane through the controller to see exactly that plane's
paths fail. Teardown, ``tf-topo down`` and ``make clean`` after a crash are in
``test_fabric_lifecycle.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.netkit import NET_MARKS
from topologies.emulation import cleanup
from topologies.emulation.bringup import PHASES, BringUp, bring_up
from topologies.emulation.fabricnet import FabricNetOptions
from topologies.emulation.mnfabric import SwitchOptions
from topologies.model import FabricSpec, build_fabric

pytestmark = [
    *NET_MARKS,
    pytest.mark.skipif(shutil.which("mnexec") is None, reason="Mininet's mnexec is not installed"),
]


@pytest.fixture(scope="module", autouse=True)
def _no_fabric_running() -> None:
    if Path("/sys/class/net/p0l0-eth1").exists():
        pytest.skip("a fabric is already running on this machine (p0l0-eth1 exists)")


def _options(results: Path) -> FabricNetOptions:
    return FabricNetOptions(
        switch=SwitchOptions(log_dir=str(results / "fabric" / "logs")), results_dir=str(results)
    )


def assert_nothing_left(state: dict[str, Any]) -> None:
    """No host namespace, switch port, switch process or fork server of ``state`` remains."""
    deadline = time.monotonic() + 5
    while True:
        alive = [p for p in cleanup.state_processes(state) if cleanup.process_alive(p)]
        ports = [n for n in state["interfaces"] if Path(f"/sys/class/net/{n}").exists()]
        if not alive and not ports:
            break
        assert time.monotonic() < deadline, f"left behind: processes {alive}, interfaces {ports}"
        time.sleep(0.05)
    for pid in [s["pid"] for s in state["switches"].values()]:
        assert not Path(f"/proc/{pid}").exists()
    assert not [p for p in cleanup.stray_switch_processes() if p in cleanup.state_processes(state)]


@pytest.fixture(scope="module")
def fabric_up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BringUp]:
    results = tmp_path_factory.mktemp("results")
    up = bring_up(build_fabric(FabricSpec()), _options(results))
    try:
        yield up
    finally:
        up.stop()


def test_default_fabric_is_up_with_every_path_verified(fabric_up: BringUp) -> None:
    up = fabric_up
    assert len(up.results) == 4 * 3 * 2 * 2
    assert up.verified, [r for r in up.results if not r.ok]
    # every phase is timed; how long they take is `make bench-fabric`'s to show, not a test's
    assert {*PHASES, "total"} <= set(up.timings), up.timings
    assert all(r.rtt_ms is not None and r.rtt_ms > 0 for r in up.results)


def test_state_file_names_live_processes(fabric_up: BringUp) -> None:
    state = json.loads(fabric_up.net.state_path.read_text())
    assert state["ready"] is True
    assert state["paths_ok"] == state["paths"] == 48
    assert set(state["hosts"]) == {"h1", "h2", "h3", "h4"}
    for h in state["hosts"].values():
        assert os.stat(f"/proc/{h['pid']}/ns/net").st_ino != os.stat("/proc/self/ns/net").st_ino
    assert len(state["switches"]) == 8
    for name, s in state["switches"].items():
        assert Path(f"/proc/{s['pid']}/comm").read_text().strip() == "tf-switch"
        assert s["grpc"].startswith("127.0.0.1:") and Path(s["log"]).exists()
        assert s["interfaces"]["1"] == f"{name}-eth1"
    for n in state["interfaces"]:
        assert Path(f"/sys/class/net/{n}").exists()
        assert Path(f"/proc/sys/net/ipv6/conf/{n}/disable_ipv6").read_text().strip() == "1"
    assert Path(state["topology"]).exists() and Path(state["config"]).exists()


def test_failing_a_plane_fails_exactly_its_paths(fabric_up: BringUp) -> None:
    ctl = fabric_up.controller
    assert ctl is not None
    ctl.run_command(["fail", "plane", "1"])
    try:
        results = fabric_up.net.check(timeout_s=0.6)
        failed = {(r.src, r.dst, r.plane, r.spine) for r in results if not r.ok}
        expected = {(r.src, r.dst, r.plane, r.spine) for r in results if r.plane == 1}
        assert failed == expected and len(expected) == 24
    finally:
        ctl.run_command(["restore", "plane", "1"])
    after = fabric_up.net.check()
    assert all(r.ok for r in after), [r for r in after if not r.ok]


def test_some_pairs_on_one_plane(fabric_up: BringUp) -> None:
    results = fabric_up.net.check(pairs=[("h1", "h4"), ("h4", "h1")], planes={0})
    assert [(r.src, r.plane, r.spine) for r in results] == [
        ("h1", 0, 0),
        ("h1", 0, 1),
        ("h4", 0, 0),
        ("h4", 0, 1),
    ]
    assert all(r.ok for r in results)
