"""Two controllers without a service (issue 19, part 3): a standalone ``tf-ctl`` says on stderr
that it takes the switches over; a ``telemetry watch`` whose switches another controller takes
over says so while it happens, and again when it is primary once more. In-process tf-switch
P4Runtime servers on 127.0.0.1 (the default fabric), ~5 s. A bad command is refused before
any takeover, and a standalone command whose switches do not listen fails at once.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from controller.cli import run_line
from controller.errors import CommandError, FabricUnavailable
from controller.fabric import FabricController
from tests.unit.p4rt_helpers import fabric_servers
from topologies.model import FabricSpec, build_fabric

ROOT = Path(__file__).resolve().parents[2]


def test_a_watch_says_when_another_controller_takes_its_switches(
    pipeline_files: tuple[Path, Path], tmp_path: Path
) -> None:
    fabric = build_fabric(FabricSpec())
    with fabric_servers(fabric) as addresses:
        with FabricController(
            fabric, *pipeline_files, results_dir=tmp_path, addresses=addresses
        ) as watcher:
            watcher.connect()
            watcher.push_pipeline()
            watcher.install_routes()
            lines: list[str] = []
            watch = threading.Thread(
                target=lambda: watcher.run_command(
                    ["telemetry", "watch", "--for", "4"], out=lines.append
                )
            )
            watch.start()
            time.sleep(0.3)
            other = FabricController(fabric, results_dir=tmp_path, addresses=addresses)
            with other:
                other.connect()  # a newer election id: primary of every switch
                other.install_routes()
                time.sleep(1.2)
            watch.join(timeout=10)
    taken = [ln for ln in lines if "another controller is primary of 8 of 8 switches" in ln]
    back = [ln for ln in lines if "primary of every switch again" in ln]
    assert taken and back and lines.index(taken[0]) < lines.index(back[0]), lines


def test_a_standalone_command_says_it_takes_over(tmp_path: Path) -> None:
    notices: list[str] = []
    with pytest.raises(CommandError, match="cannot load topology"):  # after the notice
        run_line(
            ["status"],
            str(tmp_path),
            topology=str(ROOT / "no-such-topology.json"),
            notice=notices.append,
        )
    [notice] = notices
    assert "no tf-ctl serve for" in notice
    assert "as their primary controller until this command ends" in notice
    assert "make fabric-up or tf-ctl serve runs one controller for every tf-ctl" in notice


def test_a_bad_command_is_refused_before_any_switch_is_taken_over(tmp_path: Path) -> None:
    notices: list[str] = []
    with pytest.raises(CommandError, match="unknown command 'shwo'"):
        run_line(["shwo"], str(tmp_path), notice=notices.append)
    with pytest.raises(CommandError, match="fail: unknown option '--fast'"):
        run_line(["fail", "plane", "1", "--fast"], str(tmp_path), notice=notices.append)
    assert notices == []


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def test_a_standalone_command_without_a_running_fabric_fails_at_once(tmp_path: Path) -> None:
    fabric = build_fabric(FabricSpec())
    topology = tmp_path / "topology.json"
    fabric.to_json(topology)
    ports = free_ports(len(fabric.switches))  # not the ports of a fabric that may run here
    grpc = {
        sw.name: {"grpc": f"127.0.0.1:{p}"} for sw, p in zip(fabric.switches, ports, strict=True)
    }
    (tmp_path / "fabric").mkdir()
    (tmp_path / "fabric" / "state.json").write_text(json.dumps({"switches": grpc}))
    t0 = time.monotonic()
    with pytest.raises(FabricUnavailable, match="the fabric is not running") as e:
        run_line(["status"], str(tmp_path), topology=str(topology))
    assert time.monotonic() - t0 < 5.0  # refused at once, not a gRPC connect timeout (10 s)
    assert f"({fabric.switches[0].name} at 127.0.0.1:{ports[0]}, and 7 more)" in str(e.value)
