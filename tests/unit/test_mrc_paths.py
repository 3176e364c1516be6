"""EVs from the topology: one per (plane NIC, spine) path, bound to the plane's NIC."""

from __future__ import annotations

import pytest

from host.errors import RouteError
from host.paths import (
    MRC_UDP_PORT,
    RouteTable,
    fabric_baseline_evs,
    fabric_evs,
    fabric_nics,
    loopback_evs,
)
from topologies.model import FabricSpec, build_fabric


def test_fabric_evs_are_the_micro_sid_paths_bound_to_their_plane_nic() -> None:
    fab = build_fabric(FabricSpec(planes=2, leaves=2, spines=3, hosts_per_leaf=2))
    evs = fabric_evs(fab, "h1", "h4")
    paths = fab.paths("h1", "h4")
    assert [e.ev_id for e in evs] == list(range(6))
    for ev, path in zip(evs, paths):
        assert ev.dest == (path.address, MRC_UDP_PORT)
        assert (ev.plane, ev.spine, ev.hops) == (path.plane, path.spine, path.hops)
        nic = fab.host("h1").nics[ev.plane]
        assert ev.src_address == nic.address and ev.ifname == nic.ifname
    assert len({e.dest for e in evs}) == len(evs)


def test_ev_ids_name_the_same_plane_and_spine_in_both_directions() -> None:
    fab = build_fabric(FabricSpec(planes=3, leaves=2, spines=2, hosts_per_leaf=1))
    there, back = fabric_evs(fab, "h1", "h2"), fabric_evs(fab, "h2", "h1")
    assert [(e.plane, e.spine) for e in there] == [(e.plane, e.spine) for e in back]


def test_leaf_local_evs_turn_at_the_shared_leaf_and_leave_other_pairs_alone() -> None:
    fab = build_fabric(FabricSpec(planes=2, leaves=2, spines=2, hosts_per_leaf=2))
    there = fabric_evs(fab, "h1", "h2", leaf_local=True)
    back = fabric_evs(fab, "h2", "h1", leaf_local=True)
    assert [(e.ev_id, e.plane, e.spine) for e in there] == [(0, 0, -1), (1, 1, -1)]
    assert [(e.ev_id, e.plane) for e in back] == [(0, 0), (1, 1)]
    for ev in there:
        leaf = fab.host("h1").leaf_index
        assert ev.hops == (f"p{ev.plane}l{leaf}",)
        # fcbb:bb00:<leaf uSID>:<h2's NIC uSID>:: (the leaf shifts, then routes to its port)
        assert ev.dest[0] == f"fcbb:bb00:1{ev.plane}0{leaf}:80{1}{ev.plane}::"
        assert ev.ifname == fab.host("h1").nics[ev.plane].ifname
    assert [e.ev_id for e in fabric_evs(fab, "h1", "h2", leaf_local=True, planes=[1])] == [1]
    # another leaf: the spine paths, as without the option
    assert fabric_evs(fab, "h1", "h3", leaf_local=True) == fabric_evs(fab, "h1", "h3")


def test_plane_subset_keeps_the_full_list_ids() -> None:
    fab = build_fabric(FabricSpec(planes=2, leaves=2, spines=2, hosts_per_leaf=1))
    assert [e.ev_id for e in fabric_evs(fab, "h1", "h2", planes=[1])] == [2, 3]


def test_nics_and_baseline_evs_follow_the_address_plan() -> None:
    fab = build_fabric(FabricSpec(planes=2, leaves=1, spines=1, hosts_per_leaf=2))
    nics = fabric_nics(fab, "h2")
    assert [n.address for n in nics] == [n.address for n in fab.host("h2").nics]
    assert [n.ifname for n in nics] == ["h2-eth0", "h2-eth1"]
    base = fabric_baseline_evs(fab, "h1", "h2")
    assert [e.dest[0] for e in base] == [n.baseline_address for n in fab.host("h2").nics]


def test_route_table_lookups_and_errors() -> None:
    fab = build_fabric(FabricSpec(planes=2, leaves=2, spines=2, hosts_per_leaf=1))
    table = RouteTable.from_fabric(fab, "h1")
    assert 1 in table and 0 not in table
    assert len(table.evs(1)) == 4
    with pytest.raises(RouteError, match="no route to host 5; known peers: 1"):
        table.evs(5)
    with pytest.raises(RouteError, match="distinct"):
        table.add(2, loopback_evs([1, 2], spines=1) * 2)


def test_loopback_evs_share_a_plane_socket_per_plane() -> None:
    evs = loopback_evs([4000, 4001], spines=2)
    assert [(e.ev_id, e.plane, e.dest[1]) for e in evs] == [
        (0, 0, 4000),
        (1, 0, 4000),
        (2, 1, 4001),
        (3, 1, 4001),
    ]


def test_messages_may_be_any_buffer_or_a_tensor_like_object() -> None:
    import array

    from host.api import as_bytes

    floats = array.array("f", [1.0, 2.0, 3.0])
    assert as_bytes(floats) == floats.tobytes()
    assert as_bytes(memoryview(b"abcdef")[::2]) == b"ace"

    class FakeTensor:  # what torch offers: detach().cpu().contiguous().numpy()
        def detach(self) -> FakeTensor:
            return self

        def cpu(self) -> FakeTensor:
            return self

        def contiguous(self) -> FakeTensor:
            return self

        def numpy(self) -> array.array[float]:
            return floats

    assert as_bytes(FakeTensor()) == floats.tobytes()
    with pytest.raises(TypeError, match="cannot send a int"):
        as_bytes(3)
