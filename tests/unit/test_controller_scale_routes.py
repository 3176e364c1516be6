"""The array route computation for large fabrics (:mod:`controller.scale_routes`) makes the same
decisions as the per-entity one (:mod:`controller.routes`) on fabrics both can compute: every
leaf's ECMP group toward every remote leaf, under random plane, link, spine and leaf failures,
with and without rerouting; the micro-SID next hops; the entity count per switch; and which
planes a change touches. (The 131,072-GPU timing is ``make bench-controller``, not a test.)
"""

from __future__ import annotations

import random

import pytest

from controller import program as fp
from controller.conditions import Conditions, Fault, FaultKind, link_target
from controller.config import ControllerConfig
from controller.entries import Group, TableEntry
from controller.routes import desired_entities, usid_prefix
from controller.scale_routes import (
    ClosShape,
    ScaleFailures,
    changed_planes,
    compute_fabric,
    entities_per_switch,
)
from controller.wiring import Wiring
from topologies.model import FabricSpec, build_fabric
from topologies.scale import ScaleSpec

SHAPES = [
    FabricSpec(),
    FabricSpec(planes=2, leaves=3, spines=2, hosts_per_leaf=2),
    FabricSpec(planes=1, leaves=4, spines=3, hosts_per_leaf=1),
    FabricSpec(planes=2, leaves=3, spines=9, hosts_per_leaf=1),  # more than 8 spines: 2 bytes
]


def random_failures(
    spec: FabricSpec, rng: random.Random
) -> tuple[Conditions, ScaleFailures, list[str]]:
    """The same random failures as tf-ctl conditions and as :class:`ScaleFailures`."""
    shape = ClosShape.from_fabric(spec)
    faults: set[Fault] = set()
    planes, links, spines, leaves = [], [], [], []
    for _ in range(rng.randint(0, 4)):
        p = rng.randrange(spec.planes)
        match rng.choice(["plane", "link", "spine", "leaf"]):
            case "plane":
                planes.append(p)
                faults.add(Fault(FaultKind.PLANE, (str(p),)))
            case "link":
                leaf, s = rng.randrange(spec.leaves), rng.randrange(spec.spines)
                links.append((p, leaf, s))
                faults.add(Fault(FaultKind.LINK, link_target(f"p{p}l{leaf}", f"p{p}s{s}")))
            case "spine":
                s = rng.randrange(spec.spines)
                spines.append((p, s))
                faults.add(Fault(FaultKind.SWITCH, (f"p{p}s{s}",)))
            case "leaf":
                leaf = rng.randrange(spec.leaves)
                leaves.append((p, leaf))
                faults.add(Fault(FaultKind.SWITCH, (f"p{p}l{leaf}",)))
    scale = ScaleFailures.of(shape, planes=planes, links=links, spines=spines, leaves=leaves)
    return Conditions(faults=frozenset(faults)), scale, sorted(f.describe() for f in faults)


@pytest.mark.parametrize("reroute", [True, False])
@pytest.mark.parametrize("spec", SHAPES, ids=lambda s: f"{s.planes}p{s.leaves}l{s.spines}s")
def test_ecmp_groups_match_the_per_entity_routes(spec: FabricSpec, reroute: bool) -> None:
    wiring = Wiring(build_fabric(spec))
    shape = ClosShape.from_fabric(spec)
    config = ControllerConfig(ecmp_reroute=reroute)
    rng = random.Random(spec.leaves * 100 + spec.spines)
    for _ in range(15):
        conditions, failures, named = random_failures(spec, rng)
        desired = desired_entities(wiring, config, conditions)
        routes = compute_fabric(shape, failures, reroute=reroute)
        for sw in wiring.fabric.switches:
            if sw.role != "leaf":
                continue
            groups = {
                e.group_id: e.members for e in desired[sw.name].values() if isinstance(e, Group)
            }
            r = routes[sw.plane]
            for remote in range(spec.leaves):
                if remote == sw.index:
                    assert r.group_sizes[sw.index, remote] == 0
                    continue
                spines = r.members(sw.index, remote, spec.spines)
                ports = tuple(spec.hosts_per_leaf + 1 + s for s in spines)
                assert ports == groups[remote + 1], (sw.name, remote, named)
                assert r.group_sizes[sw.index, remote] == len(spines)


@pytest.mark.parametrize("spec", SHAPES, ids=lambda s: f"{s.planes}p{s.leaves}l{s.spines}s")
def test_usid_next_hops_and_entity_counts_match(spec: FabricSpec) -> None:
    wiring = Wiring(build_fabric(spec))
    shape = ClosShape.from_fabric(spec)
    desired = desired_entities(wiring)
    routes = compute_fabric(shape)
    counts = entities_per_switch(shape)
    for sw in wiring.fabric.switches:
        assert len(desired[sw.name]) == counts[sw.role], sw.name
        table = {
            e.match: e.action.params[0][1]
            for e in desired[sw.name].values()
            if isinstance(e, TableEntry) and e.table == fp.ROUTES and e.action is not None
        }
        r = routes[sw.plane]
        if sw.role == "leaf":
            for s in range(spec.spines):
                usid = wiring.switches[f"p{sw.plane}s{s}"].usid
                assert table[(usid_prefix(usid),)] == r.leaf_usid_ports[sw.index, s]
            for h, nic in enumerate(
                host.nics[sw.plane] for host in wiring.fabric.hosts if host.leaf_index == sw.index
            ):
                port = r.leaf_usid_ports[sw.index, spec.spines + h]
                assert table[(usid_prefix(nic.usid),)] == port
        else:
            for leaf in range(spec.leaves):
                usid = wiring.switches[f"p{sw.plane}l{leaf}"].usid
                assert table[(usid_prefix(usid),)] == r.spine_usid_ports[sw.index, leaf]


def test_a_change_touches_only_its_planes() -> None:
    shape = ClosShape.from_scale(ScaleSpec())
    assert (shape.hosts, shape.switches) == (131_072, 6_144)
    none = ScaleFailures()
    assert changed_planes(none, none) == set()
    assert changed_planes(none, ScaleFailures.of(shape, planes=[3])) == {3}
    link = ScaleFailures.of(shape, links=[(5, 17, 200)])
    assert changed_planes(none, link) == {5}
    assert changed_planes(link, ScaleFailures.of(shape, spines=[(1, 0)])) == {1, 5}
    one = compute_fabric(shape, link, planes=[5])[5]
    # leaf 17 loses spine 200 toward every remote leaf; every other leaf toward leaf 17
    assert one.rerouted == 2 * (shape.leaves - 1)
    assert 200 not in one.members(17, 3, shape.spines)
    assert one.members(3, 4, shape.spines) == list(range(shape.spines))
