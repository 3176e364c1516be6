"""The multi-plane Clos model: deterministic names, ports, micro-SIDs, paths and validation."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest

from topologies.model import (
    Fabric,
    FabricSpec,
    TopologyError,
    build_fabric,
    leaf_usid,
    nic_usid,
    spine_usid,
    usid_address,
)


def test_default_fabric_shape() -> None:
    f = build_fabric(FabricSpec())
    assert [h.name for h in f.hosts] == ["h1", "h2", "h3", "h4"]
    assert [s.name for s in f.switches] == [
        "p0l0",
        "p0l1",
        "p0s0",
        "p0s1",
        "p1l0",
        "p1l1",
        "p1s0",
        "p1s1",
    ]
    assert len(f.links) == 4 * 2 + 2 * 2 * 2
    leaf = f.switch("p0l0")
    assert leaf.ports == {1: "h1", 2: "h2", 3: "p0s0", 4: "p0s1"}
    assert f.switch("p1s1").ports == {1: "p1l0", 2: "p1l1"}
    assert len({s.grpc_port for s in f.switches}) == len(f.switches)


def test_micro_sid_address_layout() -> None:
    addr = usid_address(leaf_usid(0, 0), spine_usid(0, 1), leaf_usid(0, 1), nic_usid(3, 0))
    assert addr == ipaddress.IPv6Address("fcbb:bb00:1000:2001:1001:8030::")


@pytest.mark.parametrize("planes,spines", [(1, 1), (2, 2), (4, 3), (8, 4)])
def test_every_pair_has_planes_times_spines_disjoint_paths(planes: int, spines: int) -> None:
    f = build_fabric(FabricSpec(planes=planes, leaves=3, spines=spines, hosts_per_leaf=2))
    for a in f.hosts:
        for b in f.hosts:
            if a is b:
                continue
            paths = f.paths(a.name, b.name)
            assert len(paths) == planes * spines
            assert len({p.address for p in paths}) == len(paths)
            # disjoint: no two paths share a spine, and each plane's paths use its own NIC
            assert len({p.hops[1] for p in paths}) == len(paths)
            for p in paths:
                assert p.src_nic == a.nics[p.plane].ifname
    a, b = f.hosts[0].name, f.hosts[-1].name
    assert len(f.paths(a, b, planes={0})) == spines


def test_json_round_trip(tmp_path: Path) -> None:
    f = build_fabric(FabricSpec(planes=3, leaves=2, spines=2, hosts_per_leaf=3))
    path = tmp_path / "topo.json"
    f.to_json(path)
    g = Fabric.load(path)
    assert g.to_dict() == f.to_dict() or json.loads(g.to_json()) == json.loads(f.to_json())
    doc = json.loads(path.read_text())
    doc["hosts"][0]["name"] = "x"
    path.write_text(json.dumps(doc))
    with pytest.raises(TopologyError, match="does not match"):
        Fabric.load(path)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (FabricSpec(planes=0), "planes must be a positive integer"),
        (FabricSpec(planes=17), "at most 16"),
        (FabricSpec(leaves=300), "at most 256"),
        (FabricSpec(hosts_per_leaf=63, spines=2), "host ports"),
        (FabricSpec(leaves=256, hosts_per_leaf=3), "at most 512"),
        (FabricSpec(link_mbps=0), "positive"),
    ],
)
def test_validation_errors_are_clear(spec: FabricSpec, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        build_fabric(spec)


def test_unknown_names_list_the_valid_ones() -> None:
    f = build_fabric(FabricSpec())
    with pytest.raises(TopologyError, match="hosts: h1, h2, h3, h4"):
        f.host("h9")
