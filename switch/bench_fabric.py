"""The ``fabric`` case of :mod:`switch.bench_p4`: ``p4/fabric.p4`` as a leaf of a multi-plane Clos.

:func:`setup_fabric` installs what the controller gives leaf 1 of plane 0 in a fabric of 64
spines and 256 leaves per plane with 32 hosts per leaf (address plan: p4/fabric.p4's header):
its uN SID and node-local uA SIDs, /48 routes to every spine and local NIC, a baseline ECMP
group over the uplinks, per-port MACs, ECN, trimming and burst thresholds, and a few ports
marked down. The frames it returns all take the uN path: host -> leaf (shift) -> uplink.
"""

from __future__ import annotations

import random

from switch.pipeline.tables import TableEntry
from switch.pipeline.v1model import V1Switch
from switch.schema import ActionCall

BLOCK = 0xFCBB_BB00
PLANE = 0
LEAF = 1
SPINES = 64
LEAVES = 256
HOSTS = 32
UPLINK_BASE = 33  # ports 33..96 go to spines 0..63; ports 1..32 to hosts


def leaf_usid(plane: int, leaf: int) -> int:
    return 0x1000 | plane << 8 | leaf


def spine_usid(plane: int, spine: int) -> int:
    return 0x2000 | plane << 8 | spine


def nic_usid(host: int, nic: int) -> int:
    return 0x8000 | host << 4 | nic


def carrier(*usids: int) -> int:
    value = BLOCK
    for u in usids:
        value = (value << 16) | u
    return value << (16 * (6 - len(usids)))


def _frame(src: int, dst: int, sport: int, flow_label: int) -> bytes:
    eth = bytes.fromhex("02000000010102000000aa0186dd")
    ip6 = ((6 << 28) | flow_label).to_bytes(4, "big") + bytes.fromhex("00481140")
    udp = sport.to_bytes(2, "big") + bytes.fromhex("12b700480000")
    return eth + ip6 + src.to_bytes(16, "big") + dst.to_bytes(16, "big") + udp + bytes(64)


def setup_fabric(sw: V1Switch, rng: random.Random, flows: int) -> tuple[int, list[bytes]]:
    st = sw.state
    n = 0

    def add(table: str, match: tuple[object, ...], action: str, *args: int) -> None:
        nonlocal n
        st.table(table).insert(TableEntry(match, action=ActionCall(action, tuple(args))))
        n += 1

    me = leaf_usid(PLANE, LEAF)
    add("my_sid", ((carrier(me), 48),), "FabricIngress.usid_un")
    for s in range(SPINES):
        port = UPLINK_BASE + s
        add("my_sid", ((carrier(0xE000 | port), 48),), "FabricIngress.usid_ua", port)
        add("routes", ((carrier(spine_usid(PLANE, s)), 48),), "FabricIngress.set_egress_port", port)
    for h in range(HOSTS):
        host = LEAF * HOSTS + h
        add(
            "routes",
            ((carrier(nic_usid(host, PLANE)), 48),),
            "FabricIngress.set_egress_port",
            1 + h,
        )
    for port in range(1, UPLINK_BASE + SPINES):
        add(
            "port_mac",
            (port,),
            "FabricEgress.set_macs",
            0x020000010000 | port,
            0x020000020000 | port,
        )
        add("ecn_config", (port,), "FabricEgress.set_ecn_threshold", 20)
        add("burst_config", (port,), "FabricEgress.track_bursts", 32, 4)
        add("trim_config", (port,), "FabricIngress.set_trim", 48, 64, 0)
    for port in (UPLINK_BASE + SPINES, UPLINK_BASE + SPINES + 1):  # unused, marked down
        add("port_state", (port,), "FabricIngress.port_down")
    # baseline IPv6: the rest of the block goes over an ECMP group of all uplinks
    prof = st.action_profile("ecmp_selector")
    for s in range(SPINES):
        prof.insert_member(s + 1, ActionCall("FabricIngress.set_egress_port", (UPLINK_BASE + s,)))
    prof.insert_group(1, list(range(1, SPINES + 1)))
    st.table("ecmp_routes").insert(TableEntry(((BLOCK << 96, 32),), group_id=1))
    n += 1

    frames = []
    for _ in range(flows):
        src_host = LEAF * HOSTS + rng.randrange(HOSTS)
        dst_leaf = rng.randrange(LEAVES)
        dst_host = dst_leaf * HOSTS + rng.randrange(HOSTS)
        dst_host %= 512  # the NIC uSID has 9 host bits
        da = carrier(
            me,
            spine_usid(PLANE, rng.randrange(SPINES)),
            leaf_usid(PLANE, dst_leaf),
            nic_usid(dst_host, PLANE),
        )
        frames.append(
            _frame(
                carrier(nic_usid(src_host, PLANE)),
                da,
                rng.randrange(49152, 65536),
                rng.getrandbits(20),
            )
        )
    return n, frames
