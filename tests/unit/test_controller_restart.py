"""A switch that restarts gets everything back (issue 19, part 4): the controller notices its
stream end, reconnects (retrying while nothing answers), pushes the pipeline the new process
lacks, and installs the entities of the current conditions -- routes, a failed link, injected
loss, a changed ECN threshold -- and the digest subscription. In-process tf-switch P4Runtime
servers on 127.0.0.1 (the restarted one on the same port, after a pause), ~5 s.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller import program as fp
from controller.config import ControllerConfig
from controller.fabric import FabricController
from controller.routes import desired_entities
from switch.device.device import Device
from switch.p4rt import P4RuntimeServer
from topologies.model import FabricSpec, build_fabric

ROOT = Path(__file__).resolve().parents[2]
RESTARTED = "p0l0"


class Switches:
    """One in-process tf-switch per fabric switch; :meth:`restart` replaces one by a new,
    empty one on the same port."""

    def __init__(self, spec: FabricSpec) -> None:
        self.fabric = build_fabric(spec)
        self.servers: dict[str, P4RuntimeServer] = {}
        self.devices: dict[str, Device] = {}
        for sw in self.fabric.switches:
            self._start(sw.name, "127.0.0.1:0")

    def _start(self, name: str, address: str) -> None:
        dev = Device(self.fabric.switch(name).device_id, cpu_port=fp.CPU_PORT)
        self.devices[name] = dev
        self.servers[name] = P4RuntimeServer(dev, address).start()

    @property
    def addresses(self) -> dict[str, str]:
        return {n: f"127.0.0.1:{s.port}" for n, s in self.servers.items()}

    def stop(self, name: str) -> int:
        port = self.servers[name].port
        self.servers[name].stop(grace=0)
        return port

    def start_again(self, name: str, port: int) -> None:
        self._start(name, f"127.0.0.1:{port}")

    def close(self) -> None:
        for s in self.servers.values():
            s.stop(grace=0)


@pytest.fixture
def switches() -> Iterator[Switches]:
    sw = Switches(FabricSpec())
    try:
        yield sw
    finally:
        sw.close()


def wait_for(what: str, ok: object, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ok():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_restarted_switch_gets_pipeline_routes_failures_and_loss_back(
    switches: Switches, pipeline_files: tuple[Path, Path], tmp_path: Path
) -> None:
    config = ControllerConfig(connect_timeout_s=2.0)
    with FabricController(
        switches.fabric,
        *pipeline_files,
        results_dir=tmp_path,
        addresses=switches.addresses,
        config=config,
    ) as ctl:
        ctl.connect()
        ctl.push_pipeline()
        ctl.install_routes()
        ctl.start_telemetry()
        for cmd in (["fail", "link", "p0l0", "p0s1"], ["loss", "p0l0:3", "10"], ["ecn", "10"]):
            ctl.run_command(cmd)
        session = ctl.sessions[RESTARTED]
        port = switches.stop(RESTARTED)
        wait_for("the stream to end", lambda: not session.client.connected)
        time.sleep(1.0)  # nothing answers meanwhile: the controller keeps retrying
        assert RESTARTED not in ctl.reconnects
        assert session.last_error, "the controller did not notice"
        switches.start_again(RESTARTED, port)
        wait_for("the reconnect", lambda: ctl.reconnects.get(RESTARTED) == 1)
        assert session.client.is_primary and session.last_error == ""
        # the new process holds exactly what the current conditions compute
        wanted = desired_entities(ctl.wiring, ctl.config, ctl.conditions)[RESTARTED]
        assert session.read_installed() == wanted
        report = ctl.check_paths()
        assert not any(report.drift.values()), report.drift
        assert "p0l0:3 10.00%" in ctl.run_command(["status"])
        # the digest subscription is back on the new switch
        schema = session.need_schema()
        probe = schema.digest_entry(
            fp.BURST_DIGEST, max_timeout_ns=0, max_list_size=0, ack_timeout_ns=0
        )
        [got] = session.client.read([probe])
        assert got.digest_entry.config.max_list_size == config.digest_max_list_size
        # and commands reach it again
        ctl.run_command(["restore", "all"])
        assert ctl.check_paths().ok
    assert ctl.reconnects == {RESTARTED: 1}
