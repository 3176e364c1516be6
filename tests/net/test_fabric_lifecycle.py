"""Fabric lifecycles: teardown, a background fabric (``tf-topo up --detach`` / ``down``), and
``tf-topo clean`` after the fabric's process was killed: nothing may be left behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tests.net.test_fabric_mininet import _options, assert_nothing_left
from tests.netkit import NET_MARKS
from topologies.emulation import cleanup
from topologies.emulation.bringup import bring_up
from topologies.emulation.fabricnet import FabricNetOptions
from topologies.model import FabricSpec, build_fabric

pytestmark = [
    *NET_MARKS,
    pytest.mark.skipif(shutil.which("mnexec") is None, reason="Mininet's mnexec is not installed"),
]


@pytest.fixture(autouse=True)
def _no_fabric_running() -> None:
    if Path("/sys/class/net/p0l0-eth1").exists():
        pytest.skip("a fabric is already running on this machine (p0l0-eth1 exists)")


def test_teardown_leaves_nothing(tmp_path: Path) -> None:
    up = bring_up(
        build_fabric(FabricSpec(planes=1, leaves=2, spines=1, hosts_per_leaf=1)), _options(tmp_path)
    )
    state = json.loads(up.net.state_path.read_text())
    assert up.verified
    up.stop()
    up.stop()  # idempotent
    assert_nothing_left(state)
    assert not up.net.state_path.exists()


def test_a_new_fabric_clears_the_links_a_killed_one_left(tmp_path: Path) -> None:
    # a SIGKILLed runner leaves its switch-to-switch veths (both ends in the root namespace);
    # the next fabric, holding the machine's fabric lock, knows them for a dead one's
    subprocess.run(
        ["ip", "link", "add", "p0l0-eth2", "type", "veth", "peer", "name", "p0s0-eth1"], check=True
    )
    try:
        up = bring_up(
            build_fabric(FabricSpec(planes=1, leaves=2, spines=1, hosts_per_leaf=1)),
            _options(tmp_path),
        )
    finally:
        subprocess.run(["ip", "link", "del", "p0l0-eth2"], capture_output=True)  # if still there
    try:
        assert up.verified
        assert any("deleted 2 switch ports" in line for line in up.net.cleared), up.net.cleared
    finally:
        state = json.loads(up.net.state_path.read_text())
        up.stop()
    assert_nothing_left(state)


def _tf_topo(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "topologies.emulation.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_background_fabric_up_check_down(tmp_path: Path) -> None:
    spec = ["--planes", "2", "--leaves", "1", "--spines", "1", "--hosts", "2"]
    up = _tf_topo("up", "--detach", "--results", str(tmp_path), *spec)
    assert up.returncode == 0, up.stdout + up.stderr
    assert "4/4 paths ok" in up.stdout
    state = json.loads((tmp_path / "fabric" / "state.json").read_text())
    assert cleanup.process_alive(state["runner_pid"])
    again = _tf_topo("up", "--detach", "--results", str(tmp_path), *spec)
    assert again.returncode == 2 and "already running" in again.stderr
    check = _tf_topo("check", "--results", str(tmp_path), "--pairs", "h1:h2")
    assert check.returncode == 0 and "2/2 paths ok" in check.stdout, check.stdout + check.stderr
    down = _tf_topo("down", "--results", str(tmp_path))
    assert down.returncode == 0 and "fabric stopped" in down.stdout
    assert_nothing_left(state)
    assert not cleanup.process_alive(state["runner_pid"])


def test_clean_after_the_fabric_process_was_killed(tmp_path: Path) -> None:
    up = _tf_topo(
        "up",
        "--detach",
        "--results",
        str(tmp_path),
        "--planes",
        "1",
        "--leaves",
        "2",
        "--spines",
        "1",
        "--hosts",
        "1",
    )
    assert up.returncode == 0, up.stdout + up.stderr
    state = json.loads((tmp_path / "fabric" / "state.json").read_text())
    os.kill(state["runner_pid"], signal.SIGKILL)  # a crash: no teardown ran
    clean = _tf_topo("clean", "--results", str(tmp_path))
    assert clean.returncode == 0, clean.stderr
    assert_nothing_left(state)
    assert not (tmp_path / "fabric").exists()


def _stand_in_bmv2(bindir: Path) -> None:
    """``simple_switch_grpc``, ``simple_switch_CLI`` and ``p4c-bm2-ss`` look-alikes built on
    tf-switch (which takes BMv2's command lines): the TARGET=bmv2 code path without BMv2."""
    py = sys.executable
    scripts = {
        "simple_switch_grpc": f'exec {py} -m switch.daemon "$@"',
        "simple_switch_CLI": f'exec {py} -m switch.device.control --wait 5 "$@"',
        # p4c-bm2-ss --p4runtime-files P4INFO -o OUT SRC
        "p4c-bm2-ss": f'exec {py} -m switch.cli compile "$5" -o "$4" --p4info "$2"',
    }
    bindir.mkdir()
    for name, body in scripts.items():
        path = bindir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)


def test_bmv2_target_command_lines_work_with_a_stand_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stand_in_bmv2(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    opts = _options(tmp_path)
    opts = FabricNetOptions(
        switch=replace(opts.switch, target="bmv2", link_mbps=12),
        results_dir=opts.results_dir,
        build_dir=str(tmp_path / "build"),
    )
    up = bring_up(build_fabric(FabricSpec(planes=1, leaves=2, spines=1, hosts_per_leaf=1)), opts)
    try:
        assert up.verified, up.results
        assert (tmp_path / "build" / "bmv2" / "fabric.json").exists()
        show = subprocess.run(
            ["simple_switch_CLI", "--thrift-port", "9091"],
            input="show_queues\n",
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert " 1000 pps" in show.stdout  # 12 Mbit/s in 1,500-byte packets, set over the CLI
    finally:
        state = json.loads(up.net.state_path.read_text())
        up.stop()
    assert_nothing_left(state)
