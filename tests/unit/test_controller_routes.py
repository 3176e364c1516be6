"""Route computation, proved by walking packets through the computed entries (controller.dataplane).

Every host pair of a P-plane, S-spine fabric has P x S micro-SID paths that deliver, pairwise
disjoint in the fabric core; with a plane failed exactly (P-1) x S deliver; link and switch
failures remove exactly the paths through them; the ECMP baseline delivers on every member and
reroutes around failures; uA SIDs pin links; port_mac names each port's peer.
"""

from __future__ import annotations

import itertools
import json

import pytest

from controller import program as fp
from controller.conditions import Conditions, Fault, FaultKind, LossEvent, link_target
from controller.config import ControllerConfig
from controller.dataplane import Verdict, path_delivers, send, views, working_paths
from controller.entries import Group, Lpm, Member, TableEntry, diff, mac_int
from controller.routes import desired_entities
from controller.wiring import Wiring
from topologies.model import Fabric, FabricSpec, Path, build_fabric, usid_address

SPECS = [
    FabricSpec(),  # 2 planes, 2 leaves, 2 spines, 2 hosts per leaf: the default 8 switches
    FabricSpec(planes=4, leaves=3, spines=2, hosts_per_leaf=1),
    FabricSpec(planes=1, leaves=2, spines=4, hosts_per_leaf=3),
    FabricSpec(planes=3, leaves=4, spines=3, hosts_per_leaf=2),
]


def ids(spec: FabricSpec) -> str:
    return f"P{spec.planes}L{spec.leaves}S{spec.spines}H{spec.hosts_per_leaf}"


def pairs(fabric: Fabric) -> list[tuple[str, str]]:
    return [(a.name, b.name) for a, b in itertools.permutations(fabric.hosts, 2)]


def core_links(path: Path) -> set[frozenset[str]]:
    """The switch-to-switch links a path uses (undirected)."""
    return {frozenset(pair) for pair in zip(path.hops, path.hops[1:])}


def tables(
    fabric: Fabric, conditions: Conditions | None = None, config: ControllerConfig | None = None
) -> tuple[Wiring, dict]:  # type: ignore[type-arg]
    wiring = Wiring(fabric)
    return wiring, views(desired_entities(wiring, config, conditions))


@pytest.mark.parametrize("spec", SPECS, ids=ids)
def test_every_host_pair_has_p_times_s_disjoint_paths(spec: FabricSpec) -> None:
    fabric = build_fabric(spec)
    wiring, sws = tables(fabric)
    for a, b in pairs(fabric):
        good = working_paths(wiring, sws, a, b)
        assert len(good) == spec.planes * spec.spines, (a, b)
        for p, q in itertools.combinations(good, 2):
            assert not core_links(p) & core_links(q), (a, b, p, q)
        assert len({(p.plane, p.spine) for p in good}) == len(good)


@pytest.mark.parametrize("spec", SPECS, ids=ids)
def test_a_failed_plane_leaves_p_minus_one_times_s_paths(spec: FabricSpec) -> None:
    fabric = build_fabric(spec)
    failed = spec.planes - 1
    cond = Conditions().with_fault(Fault(FaultKind.PLANE, (str(failed),)))
    wiring, sws = tables(fabric, cond)
    for a, b in pairs(fabric):
        good = working_paths(wiring, sws, a, b)
        assert len(good) == (spec.planes - 1) * spec.spines
        assert all(p.plane != failed for p in good)


def test_plane_failure_by_phy_is_simulated_without_port_state_entries() -> None:
    fabric = build_fabric(FabricSpec())
    wiring = Wiring(fabric)
    cond = Conditions().with_fault(Fault(FaultKind.PLANE, ("0",), phy=True))
    desired = desired_entities(wiring, None, cond)
    assert not any(
        isinstance(e, TableEntry) and e.table == fp.PORT_STATE
        for m in desired.values()
        for e in m.values()
    )
    down = cond.down_ends(wiring, phy=True)
    assert len(working_paths(wiring, views(desired), "h1", "h3", extra_down=down)) == 2


def test_a_failed_link_removes_exactly_the_paths_through_it() -> None:
    fabric = build_fabric(FabricSpec())
    link = link_target("p0l0", "p0s1")
    cond = Conditions().with_fault(Fault(FaultKind.LINK, link))
    wiring, sws = tables(fabric, cond)
    for a, b in pairs(fabric):
        good = {(p.plane, p.spine) for p in working_paths(wiring, sws, a, b)}
        uses = {(p.plane, p.spine) for p in fabric.paths(a, b) if frozenset(link) in core_links(p)}
        assert good == {(p.plane, p.spine) for p in fabric.paths(a, b)} - uses, (a, b)


def test_a_failed_spine_removes_its_paths_and_restore_brings_them_back() -> None:
    fabric = build_fabric(FabricSpec())
    failed = Conditions().with_fault(Fault(FaultKind.SWITCH, ("p1s0",)))
    wiring, sws = tables(fabric, failed)
    good = working_paths(wiring, sws, "h1", "h4")
    assert {(p.plane, p.spine) for p in good} == {(0, 0), (0, 1), (1, 1)}
    restored = failed.without_fault(FaultKind.SWITCH, ("p1s0",))
    assert restored == Conditions()
    _, sws = tables(fabric, restored)
    assert len(working_paths(wiring, sws, "h1", "h4")) == 4


def test_a_host_link_failure_blocks_delivery_to_that_host_only() -> None:
    fabric = build_fabric(FabricSpec())
    cond = Conditions().with_fault(Fault(FaultKind.LINK, link_target("h1", "p0l0")))
    wiring, sws = tables(fabric, cond)
    assert {p.plane for p in working_paths(wiring, sws, "h3", "h1")} == {1}
    assert len(working_paths(wiring, sws, "h1", "h3")) == 4  # h1 still sends (ingress is open)


def test_path_walk_visits_the_path_hops_and_delivers_the_nic_address() -> None:
    fabric = build_fabric(FabricSpec())
    wiring, sws = tables(fabric)
    path = fabric.paths("h1", "h4")[3]  # plane 1, spine 1
    ok, outcomes = path_delivers(wiring, sws, "h1", "h4", path)
    assert ok
    [o] = outcomes
    assert [h.split(":")[0] for h in o.hops] == list(path.hops)
    assert o.address == int(usid_address(fabric.host("h4").nics[1].usid))


def test_ua_sids_pin_the_links_of_a_path() -> None:
    fabric = build_fabric(FabricSpec())
    wiring, sws = tables(fabric)
    leaf, spine = fabric.switch("p0l0"), fabric.switch("p0s1")
    up = wiring.port_toward(leaf.name, spine.name)
    down = wiring.port_toward(spine.name, "p0l1")
    assert up is not None and down is not None
    nic = fabric.host("h3").nics[0]
    addr = usid_address(0xE000 | up, 0xE000 | down, nic.usid)
    [o] = send(wiring, sws, "h1", 0, str(addr))
    assert o.verdict is Verdict.DELIVERED and o.at == "h3"
    assert o.hops == (f"p0l0:{up}", f"p0s1:{down}", f"p0l1:{nic.leaf_port}")


def test_without_ua_sids_a_ua_address_finds_no_route() -> None:
    fabric = build_fabric(FabricSpec())
    wiring, sws = tables(fabric, config=ControllerConfig(uA_sids=False))
    [o] = send(wiring, sws, "h1", 0, str(usid_address(0xE003, 0x8020)))
    assert o.verdict is Verdict.NO_ROUTE


def test_baseline_ecmp_delivers_on_every_member() -> None:
    fabric = build_fabric(FabricSpec())
    wiring, sws = tables(fabric)
    for a, b in pairs(fabric):
        for nic in fabric.host(b).nics:
            outcomes = send(wiring, sws, a, nic.plane, nic.baseline_address)
            assert outcomes and all(
                o.verdict is Verdict.DELIVERED and o.at == b for o in outcomes
            ), (a, b)
            remote = fabric.host(a).leaf_index != fabric.host(b).leaf_index
            assert len(outcomes) == (fabric.spec.spines if remote else 1)


@pytest.mark.parametrize("reroute", [True, False])
def test_baseline_ecmp_groups_drop_failed_uplinks_when_rerouting(reroute: bool) -> None:
    fabric = build_fabric(FabricSpec())
    cond = Conditions().with_fault(Fault(FaultKind.LINK, link_target("p0s0", "p0l1")))
    wiring, sws = tables(fabric, cond, ControllerConfig(ecmp_reroute=reroute))
    outcomes = send(wiring, sws, "h1", 0, fabric.host("h3").nics[0].baseline_address)
    verdicts = sorted(o.verdict.value for o in outcomes)
    if reroute:
        assert verdicts == ["delivered"]
    else:
        assert verdicts == ["delivered", "port down"]


def test_entries_per_role() -> None:
    spec = FabricSpec()
    fabric = build_fabric(spec)
    desired = desired_entities(fabric)
    H, S, L = spec.hosts_per_leaf, spec.spines, spec.leaves
    leaf = desired["p0l0"].values()
    spine = desired["p0s0"].values()

    def count(entities, table: str) -> int:  # type: ignore[no-untyped-def]
        return sum(1 for e in entities if isinstance(e, TableEntry) and e.table == table)

    assert count(leaf, fp.MY_SID) == 1 + H + S
    assert count(leaf, fp.ROUTES) == S + 2 * H
    assert count(leaf, fp.ECMP_ROUTES) == H * (L - 1)
    assert sum(isinstance(e, Member) for e in leaf) == S
    assert sum(isinstance(e, Group) for e in leaf) == L - 1
    assert count(spine, fp.MY_SID) == 1 + L
    assert count(spine, fp.ROUTES) == L * (1 + H)
    assert count(spine, fp.ECMP_ROUTES) == 0
    for entities, ports in ((leaf, H + S), (spine, L)):
        for table in (fp.PORT_MAC, fp.BURST_CONFIG, fp.ECN_CONFIG):
            assert count(entities, table) == ports
        assert count(entities, fp.PORT_STATE) == count(entities, fp.LOSS_INJECT) == 0


def test_port_mac_names_each_ports_peer() -> None:
    fabric = build_fabric(FabricSpec())
    desired = desired_entities(fabric)
    macs = {
        e.match[0].value: e.action.params
        for e in desired["p1l1"].values()  # type: ignore[union-attr]
        if isinstance(e, TableEntry) and e.table == fp.PORT_MAC
    }
    sw = fabric.switch("p1l1")
    h3 = fabric.host("h3")
    assert macs[1] == (("src", mac_int(sw.mac)), ("dst", mac_int(h3.nics[1].mac)))
    assert macs[3] == (("src", mac_int(sw.mac)), ("dst", mac_int(fabric.switch("p1s0").mac)))


def test_conditions_become_port_state_and_loss_entries_and_diff_back() -> None:
    fabric = build_fabric(FabricSpec())
    base = desired_entities(fabric)
    cond = (
        Conditions(ecn_threshold_pkts=20)
        .with_fault(Fault(FaultKind.LINK, link_target("p0l0", "p0s1")))
        .with_losses([LossEvent("p0s1", 1, 3277)])
    )
    changed = desired_entities(fabric, None, cond)
    d = diff(base["p0l0"], changed["p0l0"])
    assert [e.render() for e in d.inserts] == [
        "port_state standard_metadata.egress_spec=4 -> port_down()"
    ]
    assert [e.render() for e in d.modifies] == ["ecmp_selector group 2 -> members [3]"]
    assert not d.deletes
    d = diff(base["p0s1"], changed["p0s1"])
    assert sorted(e.render() for e in d.inserts) == [
        "loss_inject standard_metadata.egress_port=1 -> inject_loss(threshold=3277)",
        "port_state standard_metadata.egress_spec=1 -> port_down()",
    ]
    assert not diff(changed["p0l1"], desired_entities(fabric, None, cond)["p0l1"])


def test_ecn_off_removes_ecn_entries() -> None:
    fabric = build_fabric(FabricSpec())
    off = desired_entities(fabric, None, Conditions(ecn_threshold_pkts=None))
    assert not any(
        isinstance(e, TableEntry) and e.table == fp.ECN_CONFIG
        for m in off.values()
        for e in m.values()
    )


def test_lpm_values_have_no_bits_beyond_their_prefix() -> None:
    for spec in SPECS:
        for entities in desired_entities(build_fabric(spec)).values():
            for e in entities.values():
                if isinstance(e, TableEntry):
                    for m in e.match:
                        if isinstance(m, Lpm):
                            assert m.value & ((1 << (128 - m.prefix_len)) - 1) == 0


def test_conditions_round_trip_through_json() -> None:
    cond = (
        Conditions(ecn_threshold_pkts=7)
        .with_fault(Fault(FaultKind.PLANE, ("1",)))
        .with_fault(Fault(FaultKind.LINK, ("p0l0", "p0s1"), phy=True))
        .with_losses([LossEvent("p0l0", 3, 100, 1e9)])
        .with_trim(24)
    )
    assert Conditions.from_json(cond.to_json()) == cond
    older = json.loads(cond.to_json())
    del older["trim_threshold_pkts"]  # written before trimming was managed
    assert Conditions.from_json(json.dumps(older)) == cond.with_trim(None)
    with pytest.raises(ValueError, match="not a conditions document"):
        Conditions.from_json('{"faults": 3}')


def test_loss_events_expire() -> None:
    cond = Conditions().with_losses([LossEvent("p0l0", 3, 100, 10.0), LossEvent("p0l0", 4, 100)])
    assert [e.port for e in cond.expire(9.0).losses] == [3, 4]
    assert [e.port for e in cond.expire(10.0).losses] == [4]
