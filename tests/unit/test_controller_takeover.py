"""Two controllers without a service (issue 19, part 3): a standalone ``tf-ctl`` says on stderr
that it takes the switches over; a ``telemetry watch`` whose switches another controller takes
over says so while it happens, and again when it is primary once more. In-process tf-switch
P4Runtime servers on 127.0.0.1 (the default fabric), ~5 s.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller import program as fp
from controller.cli import run_line
from controller.errors import CommandError
from controller.fabric import FabricController
from switch.compile.package import load_device_config, make_device_config
from switch.device.device import Device
from switch.p4info import p4info_text
from switch.p4rt import P4RuntimeServer
from topologies.model import Fabric, FabricSpec, build_fabric

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pipeline_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("pipeline")
    cfg = make_device_config(ROOT / "p4" / "fabric.p4")
    (d / "fabric.tfp4.json").write_bytes(cfg)
    (d / "fabric.p4info.txtpb").write_text(p4info_text(load_device_config(cfg).schema))
    return d / "fabric.p4info.txtpb", d / "fabric.tfp4.json"


@contextlib.contextmanager
def switches(fabric: Fabric) -> Iterator[dict[str, str]]:
    with contextlib.ExitStack() as stack:
        addresses = {}
        for sw in fabric.switches:
            server = P4RuntimeServer(Device(sw.device_id, cpu_port=fp.CPU_PORT), "127.0.0.1:0")
            stack.callback(server.start().stop)
            addresses[sw.name] = f"127.0.0.1:{server.port}"
        yield addresses


def test_a_watch_says_when_another_controller_takes_its_switches(
    pipeline_files: tuple[Path, Path], tmp_path: Path
) -> None:
    fabric = build_fabric(FabricSpec())
    with switches(fabric) as addresses:
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
