"""The same controller, unchanged, against BMv2's ``simple_switch_grpc`` with p4c's output.

Skipped (with the reason) where ``p4c-bm2-ss`` or ``simple_switch_grpc`` is not on PATH, which
is the case on this project's machines; this is the check to run where they are installed.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from controller.fabric import FabricController
from topologies.model import FabricSpec, build_fabric

ROOT = Path(__file__).resolve().parents[2]
P4C = shutil.which("p4c-bm2-ss")
SIMPLE_SWITCH_GRPC = shutil.which("simple_switch_grpc")

pytestmark = [
    pytest.mark.requires_p4c,
    pytest.mark.requires_bmv2,
    pytest.mark.skipif(P4C is None, reason="p4c-bm2-ss is not on PATH"),
    pytest.mark.skipif(SIMPLE_SWITCH_GRPC is None, reason="simple_switch_grpc is not on PATH"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"simple_switch_grpc does not listen on {port}")


def test_controller_pushes_and_installs_on_simple_switch_grpc(tmp_path: Path) -> None:
    p4info, bmv2_json = tmp_path / "fabric.p4info.txtpb", tmp_path / "fabric.json"
    subprocess.run(
        [
            str(P4C),
            "--p4runtime-files",
            str(p4info),
            "-o",
            str(bmv2_json),
            str(ROOT / "p4" / "fabric.p4"),
        ],
        check=True,
        timeout=300,
    )
    fabric = build_fabric(FabricSpec(planes=1, leaves=1, spines=1, hosts_per_leaf=1))
    procs, addresses = [], {}
    try:
        for sw in fabric.switches:
            grpc = free_port()
            procs.append(
                subprocess.Popen(
                    [
                        str(SIMPLE_SWITCH_GRPC),
                        "--no-p4",
                        "--device-id",
                        str(sw.device_id),
                        "--thrift-port",
                        str(free_port()),
                        "--",
                        "--cpu-port",
                        "255",
                        "--grpc-server-addr",
                        f"127.0.0.1:{grpc}",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            addresses[sw.name] = f"127.0.0.1:{grpc}"
            wait_listening(grpc)
        with FabricController(
            fabric, p4info, bmv2_json, results_dir=tmp_path, addresses=addresses
        ) as ctl:
            ctl.connect()
            ctl.push_pipeline()
            result = ctl.install_routes()
            assert result.inserted == sum(len(s.installed) for s in ctl.sessions.values()) > 0
            report = ctl.check_paths()
            assert report.ok, report.summary()
            assert "failed" in ctl.run_command(["fail", "link", "p0l0", "p0s0"])
            assert "loss" in ctl.run_command(["loss", "p0l0:2", "5", "--for", "100"])
            ctl.start_telemetry()
            ctl.wait_for_expiries(5)
            assert ctl.check_paths().drift == {"p0l0": 0, "p0s0": 0}
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
