"""Commands compute and write only the switches they change (issue 19, part 4).

:func:`controller.routes.affected_switches` is sound: across random sequences of failures
(plane, link, switch, host link; marked or phy), loss events, ECN and trim changes on three
fabric shapes, every switch it leaves out has exactly the same computed entities before and
after. It is also tight where it matters: a plane failure touches that plane's switches only.
Against 32 in-process tf-switches (4 planes), ``fail plane 1`` syncs only plane 1's 8 switches
and every switch still holds exactly the entities computed for the whole fabric.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from controller.conditions import Conditions, Fault, FaultKind, LossEvent, link_target
from controller.config import ControllerConfig
from controller.fabric import FabricController
from controller.routes import affected_switches, desired_entities
from controller.switches import SyncResult
from controller.wiring import Wiring
from tests.unit.p4rt_helpers import fabric_servers
from topologies.model import FabricSpec, build_fabric

ROOT = Path(__file__).resolve().parents[2]
SHAPES = [
    FabricSpec(),
    FabricSpec(planes=4, leaves=4, spines=4, hosts_per_leaf=2),
    FabricSpec(planes=1, leaves=3, spines=2, hosts_per_leaf=1),
]


def random_change(wiring: Wiring, c: Conditions, rng: random.Random) -> Conditions:
    fabric = wiring.fabric
    switches = [s.name for s in fabric.switches]
    kind = rng.choice(["plane", "link", "host", "switch", "loss", "ecn", "trim", "restore"])
    phy = rng.random() < 0.3
    match kind:
        case "plane":
            return c.with_fault(
                Fault(FaultKind.PLANE, (str(rng.randrange(fabric.spec.planes)),), phy)
            )
        case "link" | "host":
            a = rng.choice(switches)
            ports = sorted(wiring.switches[a].ports)
            end = wiring.peer(a, rng.choice(ports))
            assert end is not None
            return c.with_fault(Fault(FaultKind.LINK, link_target(a, end.name), phy))
        case "switch":
            return c.with_fault(Fault(FaultKind.SWITCH, (rng.choice(switches),), phy))
        case "loss":
            a = rng.choice(switches)
            port = rng.choice(sorted(wiring.switches[a].ports))
            return c.with_losses([LossEvent(a, port, rng.choice((655, 6554, 0x8000)))])
        case "ecn":
            return c.with_ecn(rng.choice((None, 10, 20)))
        case "trim":
            return c.with_trim(rng.choice((None, 8, 16)))
    if c.faults and rng.random() < 0.7:
        f = rng.choice(sorted(c.faults))
        return c.without_fault(f.kind, f.target)
    return c.cleared()


@pytest.mark.parametrize("spec", SHAPES, ids=lambda s: f"{s.planes}p{s.leaves}l{s.spines}s")
def test_switches_left_out_compute_the_same_entities(spec: FabricSpec) -> None:
    wiring = Wiring(build_fabric(spec))
    config = ControllerConfig()
    rng = random.Random(19)
    old = Conditions(ecn_threshold_pkts=config.ecn_threshold_pkts)
    before = desired_entities(wiring, config, old)
    for _ in range(60):
        new = random_change(wiring, old, rng)
        after = desired_entities(wiring, config, new)
        touched = affected_switches(wiring, config, old, new)
        for name in set(before) - touched:
            assert before[name] == after[name], (name, old, new)
        assert desired_entities(wiring, config, new, touched) == {n: after[n] for n in touched}
        old, before = new, after


def test_a_plane_failure_touches_only_that_planes_switches() -> None:
    wiring = Wiring(build_fabric(SHAPES[1]))
    config = ControllerConfig()
    old = Conditions(ecn_threshold_pkts=20)
    for phy in (False, True):
        new = old.with_fault(Fault(FaultKind.PLANE, ("1",), phy))
        plane = {s.name for s in wiring.fabric.switches if s.plane == 1}
        leaves = {s.name for s in wiring.fabric.switches if s.plane == 1 and s.role == "leaf"}
        # phy: port_state stays; only plane 1's leaves regroup their ECMP members
        assert affected_switches(wiring, config, old, new) == (leaves if phy else plane)
    assert affected_switches(wiring, config, old, old) == set()
    assert len(affected_switches(wiring, config, old, old.with_ecn(10))) == 32


def test_fail_plane_syncs_only_that_plane_and_every_switch_stays_exact(
    pipeline_files: tuple[Path, Path], tmp_path: Path
) -> None:
    fabric = build_fabric(SHAPES[1])
    with fabric_servers(fabric) as addresses:
        with FabricController(
            fabric, *pipeline_files, results_dir=tmp_path, addresses=addresses
        ) as ctl:
            ctl.connect()
            ctl.push_pipeline()
            ctl.install_routes()
            synced: list[str] = []
            for s in ctl.sessions.values():
                real = s.sync

                def spy(desired: dict, real=real, name=s.name) -> SyncResult:  # type: ignore[type-arg]
                    synced.append(name)
                    return real(desired)

                s.sync = spy  # type: ignore[method-assign]
            out = ctl.run_command(["fail", "plane", "1"])
            assert sorted(synced) == sorted(s.name for s in fabric.switches if s.plane == 1), out
            assert ctl.last_sync.total > 0
            synced.clear()
            ctl.run_command(["fail", "link", "p0l0", "p0s0"])
            # port_state on p0l0 and p0s0; the ECMP groups of plane 0's leaves
            leaves = {s.name for s in fabric.switches if s.plane == 0 and s.role == "leaf"}
            assert set(synced) == leaves | {"p0s0"}
            ctl.run_command(["restore", "all"])
            report = ctl.check_paths(hosts=["h1", "h5"])
            assert report.ok, report.summary()
