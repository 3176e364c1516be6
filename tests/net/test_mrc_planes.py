"""MRC over real per-plane NICs in network namespaces (root): two hosts joined by one veth
per plane, each endpoint binding one UDP socket per plane NIC (its micro-SID address, pinned
to the interface with SO_BINDTODEVICE, both planes routing the same fcbb:bb00::/32 block), as
on a fabric host. Taking one plane's link down must lose no message."""

from __future__ import annotations

import os
import time

from host.mrc.config import fabric_config
from host.mrc.endpoint import Endpoint
from host.mrc.evs import EvState
from host.network import UdpNetwork
from host.paths import MRC_UDP_PORT, Ev, LocalNic, RouteTable
from tests.netkit import NET_MARKS, NetKit, add_address, call_in_netns, run_in_netns
from topologies.model import FabricSpec, build_fabric

pytestmark = NET_MARKS


def test_mrc_over_two_plane_nics_survives_a_plane_link_going_down(netkit: NetKit) -> None:
    fab = build_fabric(FabricSpec(planes=2, leaves=1, spines=1, hosts_per_leaf=2))
    h1, h2 = fab.host("h1"), fab.host("h2")
    ns = {h.name: netkit.netns(h.name) for h in (h1, h2)}
    ifs: dict[tuple[str, int], str] = {}
    for p in range(2):
        pair = netkit.veth(f"a{p}", f"b{p}", ns_a=ns["h1"], ns_b=ns["h2"])
        ifs[("h1", p)], ifs[("h2", p)] = pair.a, pair.b
    for host in (h1, h2):
        for nic in host.nics:
            dev = ifs[(host.name, nic.plane)]
            add_address(str(ns[host.name]), dev, nic.address + "/128")
            run_in_netns(
                str(ns[host.name]),
                [
                    "ip",
                    "-6",
                    "route",
                    "add",
                    "fcbb:bb00::/32",
                    "dev",
                    dev,
                    "metric",
                    str(100 + nic.plane),
                ],
            )

    def nics(host: str) -> list[LocalNic]:
        return [
            LocalNic(n.plane, n.address, MRC_UDP_PORT, ifs[(host, n.plane)])
            for n in fab.host(host).nics
        ]

    def evs(src: str, dst: str) -> tuple[Ev, ...]:  # the peer NIC's own address per plane
        a, b = fab.host(src), fab.host(dst)
        return tuple(
            Ev(p, p, 0, (b.nics[p].address, MRC_UDP_PORT), a.nics[p].address, ifs[(src, p)])
            for p in range(2)
        )

    net1 = call_in_netns(str(ns["h1"]), lambda: UdpNetwork(nics("h1"), ecn=True))
    net2 = call_in_netns(str(ns["h2"]), lambda: UdpNetwork(nics("h2"), ecn=True))
    cfg = fabric_config(rto_min_ms=20)
    with (
        Endpoint(net1, 0, RouteTable({1: evs("h1", "h2")}), cfg) as a,
        Endpoint(net2, 1, RouteTable({0: evs("h2", "h1")}), cfg) as b,
    ):
        conn = a.connect(1)
        msgs = [os.urandom(30_000) for _ in range(60)]
        handles = [conn.send(m) for m in msgs[:30]]
        peer = b.accept(timeout=5)
        assert [peer.recv(timeout=10) for _ in range(30)] == msgs[:30]
        assert all(e.packets_acked > 0 for e in conn.ev_stats())
        run_in_netns(str(ns["h1"]), ["ip", "link", "set", ifs[("h1", 1)], "down"])
        t0 = time.monotonic()
        handles += [conn.send(m) for m in msgs[30:]]
        assert [peer.recv(timeout=10) for _ in range(30)] == msgs[30:]
        for h in handles:
            h.wait(timeout=10)
        print(f"\nveth plane 1 down: 30 more messages in {1e3 * (time.monotonic() - t0):.0f} ms")
        states = {e.ev_id: e.state for e in conn.ev_stats()}
        assert states == {0: EvState.GOOD, 1: EvState.ASSUMED_BAD}
        assert a.stats().internal_errors == b.stats().internal_errors == 0
