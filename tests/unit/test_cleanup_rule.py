"""Which namespaces and shells ``make clean`` treats as the project's (pure rules, no root)."""

from __future__ import annotations

import json

import pytest

from topologies.emulation.cleanup import Link, fabric_host_wiring, mininet_shell_name, parse_links

# the root namespace: a fabric switch port, a plain-mn switch port, an unrelated NIC
ROOT = {
    link.ifindex: link
    for link in [
        Link("p0l0-eth1", 1297, peer_ifindex=2, peer_elsewhere=True),
        Link("s1-eth1", 1300, peer_ifindex=2, peer_elsewhere=True),
        Link("eth0", 3),
    ]
}


@pytest.mark.parametrize(
    ("nic", "wired"),
    [
        (Link("h1-eth0", 2, peer_ifindex=1297, peer_elsewhere=True), [("h1-eth0", "p0l0-eth1")]),
        # plain mn: h1-eth0 <-> s1-eth1
        (Link("h1-eth0", 2, peer_ifindex=1300, peer_elsewhere=True), []),
        # the switch port's peer is some other interface (index 2), not this NIC
        (Link("h1-eth0", 5, peer_ifindex=1297, peer_elsewhere=True), []),
        # a peer in the same namespace: the index means something else there
        (Link("h1-eth0", 2, peer_ifindex=1297, peer_elsewhere=False), []),
        # not a host NIC name
        (Link("veth0", 2, peer_ifindex=1297, peer_elsewhere=True), []),
        (Link("h1-eth0x", 2, peer_ifindex=1297, peer_elsewhere=True), []),
        # peer not in the root namespace at all
        (Link("h1-eth0", 2, peer_ifindex=999, peer_elsewhere=True), []),
        (Link("h1-eth0", 2), []),
    ],
)
def test_only_nics_wired_to_a_fabric_switch_port_make_a_fabric_host(
    nic: Link, wired: list[tuple[str, str]]
) -> None:
    assert fabric_host_wiring([Link("lo", 1), nic], ROOT) == wired


def test_a_switch_port_peering_inside_the_root_namespace_proves_nothing() -> None:
    root = {7: Link("p0l0-eth1", 7, peer_ifindex=2, peer_elsewhere=False)}
    assert fabric_host_wiring([Link("h1-eth0", 2, peer_ifindex=7, peer_elsewhere=True)], root) == []


def test_parse_links_reads_ip_json() -> None:
    text = json.dumps(
        [
            {"ifindex": 1, "ifname": "lo"},
            {"ifindex": 2, "link_index": 1297, "ifname": "h1-eth0", "link_netnsid": 0},
            {"ifname": "broken"},
        ]
    )
    assert parse_links(text) == [
        Link("lo", 1),
        Link("h1-eth0", 2, peer_ifindex=1297, peer_elsewhere=True),
    ]
    assert parse_links("") == []


@pytest.mark.parametrize(
    ("argv", "node"),
    [
        (["bash", "--norc", "--noediting", "-is", "mininet:h1"], "h1"),
        (["/bin/bash", "--norc", "--noediting", "-is", "mininet:p0l0"], "p0l0"),
        (["bash", "-c", "echo mininet:h1"], None),
        (["sleep", "300"], None),
        (["bash", "--norc", "-is", "h1"], None),
        ([], None),
    ],
)
def test_mininet_shells_are_known_by_their_command_line(argv: list[str], node: str | None) -> None:
    assert mininet_shell_name(argv) == node
