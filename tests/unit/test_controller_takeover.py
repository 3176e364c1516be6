"""Two controllers without a service (issue 19, part 3): a standalone ``tf-ctl`` says on stderr
that it takes the switches over; a ``telemetry watch`` whose switches another controller takes
over says so while it happens, and again when it is primary once more. In-process tf-switch
P4Runtime servers on 127.0.0.1 (the default fabric), ~5 s.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from controller.cli import run_line
from controller.errors import CommandError
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
