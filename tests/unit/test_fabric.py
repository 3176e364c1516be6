"""p4/fabric.p4 on the software target: micro-SIDs, SRv6, ECMP, port state, congestion signals,
loss injection, microburst digests and controller packets (scapy-built frames).

The address plan is the one documented at the top of p4/fabric.p4: block fcbb:bb00::/32,
leaf uSIDs 0x1PLL, spine 0x2PSS, NIC 0x8HHN, node-local uA 0xE0pp.
"""

from __future__ import annotations

import ipaddress
import math
import random
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from p4.config.v1 import p4info_pb2
from scapy.layers.inet6 import TCP, UDP, IPv6, IPv6ExtHdrSegmentRouting
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from switch.compile import load_program
from switch.compile.package import load_device_config, make_device_config
from switch.device.device import Device, Pipeline
from switch.device.sscli import run_command
from switch.p4info import build_p4info, read_p4info
from switch.pipeline.tables import TableEntry
from switch.pipeline.v1model import V1Switch
from switch.schema import ActionCall

ROOT = Path(__file__).resolve().parents[2]
P4 = ROOT / "p4" / "fabric.p4"
CPU_PORT = 255

BLOCK = 0xFCBB_BB00
LEAF1, LEAF2 = 0x1001, 0x1002  # plane 0, leaves 1 and 2
SPINE1, SPINE2 = 0x2001, 0x2002
NIC_SRC, NIC_DST = 0x8010, 0x8021  # host 1 NIC 0, host 2 NIC 1

# drop_reasons indices and packet_in reasons of fabric.p4
DROP_PARSER_ERROR, DROP_NOT_IPV6, DROP_HOP_LIMIT, DROP_NO_ROUTE = 1, 2, 3, 4
DROP_SRH_MALFORMED, DROP_SRH_TOO_DEEP, DROP_PORT_DOWN, DROP_INJECTED_LOSS = 5, 6, 7, 8
PUNT_LINK_PROBE, PUNT_LOCAL, PUNT_LINK_LOCAL = 1, 2, 3
TRIM_DSCP = 63

MAC_A, MAC_B = "02:00:00:00:00:0a", "02:00:00:00:00:0b"


class Fabric:
    """The compiled program (with a short repr: pytest prints arguments of failing tests)."""

    def __init__(self) -> None:
        self.program = load_program(P4)

    def new_switch(self, seed: int = 0) -> V1Switch:
        return V1Switch(self.program, seed=seed)

    def __repr__(self) -> str:
        return "<fabric.p4>"


@pytest.fixture(scope="module")
def prog() -> Fabric:
    return Fabric()


# ----------------------------------------------------------------------------- helpers


def carrier(*usids: int) -> int:
    """block | usids... as a 128-bit integer (zero-filled)."""
    assert len(usids) <= 6
    value = BLOCK
    for u in usids:
        value = (value << 16) | u
    return value << (16 * (6 - len(usids)))


def addr(value: int) -> str:
    return str(ipaddress.IPv6Address(value))


def ip(text: str) -> int:
    return int(ipaddress.IPv6Address(text))


def sid48(usid: int) -> tuple[int, int]:
    return carrier(usid), 48


def shift(da: int) -> int:
    """Reference uN shift: block | argument << 16 (what Linux' next-csid End does)."""
    block = da >> 96
    arg = da & ((1 << 80) - 1)
    return (block << 96) | (arg << 16)


def entry(match: tuple[object, ...], action: str, *args: int, priority: int = 0) -> TableEntry:
    return TableEntry(match, priority, action=ActionCall(action, tuple(args)))


def add_sid(sw: V1Switch, usid: int, action: str = "FabricIngress.usid_un", *args: int) -> None:
    sw.state.table("my_sid").insert(entry((sid48(usid),), action, *args))


def add_route(sw: V1Switch, prefix: int, plen: int, port: int) -> None:
    sw.state.table("routes").insert(entry(((prefix, plen),), "FabricIngress.set_egress_port", port))


def udp_frame(
    dst: int,
    *,
    src: int = carrier(NIC_SRC),
    hlim: int = 64,
    sport: int = 49152,
    dport: int = 4791,
    tc: int = 0,
    fl: int = 0,
    payload: bytes = b"tailfabric" * 4,
    srh: IPv6ExtHdrSegmentRouting | None = None,
) -> bytes:
    ip6 = IPv6(src=addr(src), dst=addr(dst), hlim=hlim, tc=tc, fl=fl)
    l4 = UDP(sport=sport, dport=dport, chksum=0x1234) / Raw(payload)
    pkt = Ether(dst=MAC_A, src=MAC_B) / ip6
    pkt = pkt / srh / l4 if srh is not None else pkt / l4
    return bytes(pkt)


def make_srh(segments: list[int], segleft: int, nh: int = 17) -> IPv6ExtHdrSegmentRouting:
    """An SRH whose Segment List[i] is segments[i] (segments[0] is the last segment)."""
    return IPv6ExtHdrSegmentRouting(
        nh=nh, addresses=[addr(s) for s in segments], segleft=segleft, lastentry=len(segments) - 1
    )


def dst_of(frame: bytes) -> int:
    return int.from_bytes(frame[38:54], "big")


def one(out: list[tuple[int, bytes]]) -> tuple[int, bytes]:
    assert len(out) == 1, out
    return out[0]


def counter(sw: V1Switch, name: str, index: int) -> int:
    return sw.state.counter(name).read(index)[0]


# ---------------------------------------------------------------------- micro-SID (uN, uA)


def leaf1(prog: Fabric) -> V1Switch:
    sw = prog.new_switch(seed=1)
    add_sid(sw, LEAF1)
    add_route(sw, *sid48(SPINE1), 5)  # uplink to spine 1
    add_route(sw, *sid48(SPINE2), 6)  # uplink to spine 2
    add_route(sw, *sid48(NIC_SRC), 1)  # the local host
    return sw


def spine1(prog: Fabric) -> V1Switch:
    sw = prog.new_switch(seed=2)
    add_sid(sw, SPINE1)
    add_route(sw, *sid48(LEAF1), 1)
    add_route(sw, *sid48(LEAF2), 2)
    return sw


def leaf2(prog: Fabric) -> V1Switch:
    sw = prog.new_switch(seed=3)
    add_sid(sw, LEAF2)
    add_route(sw, *sid48(SPINE1), 5)
    add_route(sw, *sid48(NIC_DST), 7)  # the destination host
    sw.state.table("port_mac").insert(
        entry((7,), "FabricEgress.set_macs", 0x02000000AA07, 0x02000000BB07)
    )
    return sw


def test_usid_path_across_three_switches(prog: Fabric) -> None:
    hops = [leaf1(prog), spine1(prog), leaf2(prog)]
    da = carrier(LEAF1, SPINE1, LEAF2, NIC_DST)
    frame = udp_frame(da)
    port = 1
    seen = []
    for sw, want_port in zip(hops, (5, 2, 7)):
        port, frame = one(sw.process(port, frame))
        assert port == want_port
        seen.append(dst_of(frame))
    assert seen == [carrier(SPINE1, LEAF2, NIC_DST), carrier(LEAF2, NIC_DST), carrier(NIC_DST)]
    got = Ether(frame)
    assert got[IPv6].hlim == 61 and got[IPv6].dst == "fcbb:bb00:8021::"
    assert got.dst == "02:00:00:00:bb:07" and got.src == "02:00:00:00:aa:07"
    assert bytes(got[UDP].payload) == b"tailfabric" * 4 and got[UDP].chksum == 0x1234
    assert [counter(sw, "FabricEgress.port_tx", p) for sw, p in zip(hops, (5, 2, 7))] == [1, 1, 1]


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_un_shift_matches_reference_for_every_carrier_length(prog: Fabric, n: int) -> None:
    sw = prog.new_switch()
    add_sid(sw, LEAF1)
    sw.state.table("routes").insert(entry(((BLOCK << 96, 32),), "FabricIngress.set_egress_port", 9))
    usids = [LEAF1] + [0x2000 + i for i in range(1, n)]
    da = carrier(*usids)
    _, out = one(sw.process(1, udp_frame(da)))
    assert dst_of(out) == shift(da)
    assert dst_of(out) & 0xFFFF == 0  # the tail is zero-filled


def test_ua_forwards_to_its_port_without_a_route(prog: Fabric) -> None:
    sw = prog.new_switch()
    add_sid(sw, 0xE006, "FabricIngress.usid_ua", 6)  # node-local End.X to port 6
    da = carrier(0xE006, LEAF2, NIC_DST)
    port, out = one(sw.process(1, udp_frame(da)))
    assert port == 6 and dst_of(out) == carrier(LEAF2, NIC_DST)
    assert Ether(out)[IPv6].hlim == 63


def test_ua_with_empty_argument_does_end_x_on_the_srh(prog: Fabric) -> None:
    sw = prog.new_switch()
    add_sid(sw, 0xE006, "FabricIngress.usid_ua", 6)
    final = carrier(NIC_DST)
    srh = make_srh([final, carrier(0xE006)], segleft=1)
    port, out = one(sw.process(1, udp_frame(carrier(0xE006), srh=srh)))
    got = Ether(out)
    assert port == 6 and got[IPv6].dst == addr(final)
    assert got[IPv6ExtHdrSegmentRouting].segleft == 0


def test_un_with_empty_argument_and_srh_loads_next_container(prog: Fabric) -> None:
    sw = prog.new_switch()
    add_sid(sw, LEAF1)
    add_route(sw, *sid48(SPINE2), 6)
    nxt = carrier(SPINE2, LEAF2, NIC_DST)
    srh = make_srh([nxt, carrier(LEAF1)], segleft=1)
    port, out = one(sw.process(1, udp_frame(carrier(LEAF1), srh=srh)))
    got = Ether(out)
    assert port == 6 and dst_of(out) == nxt
    assert got[IPv6ExtHdrSegmentRouting].segleft == 0  # End without PSP keeps the SRH


def test_un_with_nothing_left_goes_to_the_cpu(prog: Fabric) -> None:
    sw = prog.new_switch()
    add_sid(sw, LEAF1)
    frame = udp_frame(carrier(LEAF1))
    port, out = one(sw.process(3, frame))
    assert port == CPU_PORT
    pin = int.from_bytes(out[:3], "big")
    assert pin >> 15 == 3 and (pin >> 7) & 0xFF == PUNT_LOCAL
    assert out[3:] == frame  # not forwarded: hop limit untouched


def test_hop_limit_one_is_dropped_and_counted(prog: Fabric) -> None:
    sw = leaf1(prog)
    da = carrier(LEAF1, SPINE1, LEAF2, NIC_DST)
    assert sw.process(1, udp_frame(da, hlim=1)) == []
    assert sw.process(1, udp_frame(da, hlim=0)) == []
    port, out = one(sw.process(1, udp_frame(da, hlim=2)))
    assert port == 5 and Ether(out)[IPv6].hlim == 1
    assert counter(sw, "drop_reasons", DROP_HOP_LIMIT) == 2
    assert counter(sw, "rx_drops", 1) == 2


def test_no_route_and_non_ipv6_are_dropped_and_counted(prog: Fabric) -> None:
    sw = leaf1(prog)
    assert sw.process(2, udp_frame(carrier(LEAF1, 0x2999, NIC_DST))) == []
    assert sw.process(2, bytes(Ether(dst=MAC_A, src=MAC_B, type=0x0800) / Raw(b"\x45" * 30))) == []
    assert counter(sw, "drop_reasons", DROP_NO_ROUTE) == 1
    assert counter(sw, "drop_reasons", DROP_NOT_IPV6) == 1
    assert counter(sw, "rx_drops", 2) == 2
    assert counter(sw, "FabricIngress.port_rx", 2) == 2


# -------------------------------------------------------------------------- classic SRv6


def test_srh_end_decrements_sl_and_loads_the_next_segment(prog: Fabric) -> None:
    sw = prog.new_switch()
    me, nxt, last = ip("fc00:0:1::"), ip("fc00:0:2::"), ip("2001:db8::5")
    sw.state.table("my_sid").insert(entry(((me, 48),), "FabricIngress.srv6_end"))
    add_route(sw, ip("fc00:0:2::"), 48, 4)
    frame = udp_frame(me, srh=make_srh([last, nxt, me], segleft=2))
    port, out = one(sw.process(1, frame))
    got = Ether(out)
    assert port == 4 and got[IPv6].dst == addr(nxt) and got[IPv6].hlim == 63
    s = got[IPv6ExtHdrSegmentRouting]
    assert s.segleft == 1 and s.lastentry == 2 and len(out) == len(frame)
    assert got[UDP].chksum == 0x1234


def test_srh_end_psp_pops_the_srh_at_the_penultimate_segment(prog: Fabric) -> None:
    sw = prog.new_switch()
    me, last = ip("fc00:0:1::"), ip("2001:db8::5")
    sw.state.table("my_sid").insert(entry(((me, 48),), "FabricIngress.srv6_end_psp"))
    add_route(sw, ip("2001:db8::"), 32, 4)
    frame = udp_frame(me, srh=make_srh([last, me], segleft=1))
    port, out = one(sw.process(1, frame))
    want = udp_frame(last, hlim=63)
    assert port == 4 and out == want  # next header UDP, payload length 40 bytes less


def test_srh_end_psp_keeps_the_srh_while_segments_remain(prog: Fabric) -> None:
    sw = prog.new_switch()
    me, nxt, last = ip("fc00:0:1::"), ip("fc00:0:2::"), ip("2001:db8::5")
    sw.state.table("my_sid").insert(entry(((me, 48),), "FabricIngress.srv6_end_psp"))
    add_route(sw, ip("fc00::"), 16, 4)
    port, out = one(sw.process(1, udp_frame(me, srh=make_srh([last, nxt, me], segleft=2))))
    assert Ether(out)[IPv6ExtHdrSegmentRouting].segleft == 1 and dst_of(out) == nxt


def test_reduced_srh_with_sl_equal_to_last_entry_plus_one_is_accepted(prog: Fabric) -> None:
    sw = prog.new_switch()
    me, nxt, last = ip("fc00:0:1::"), ip("fc00:0:2::"), ip("2001:db8::5")
    sw.state.table("my_sid").insert(entry(((me, 48),), "FabricIngress.srv6_end"))
    add_route(sw, ip("fc00::"), 16, 4)
    # the first segment (me) is only in the DA: Segment List = [last, nxt], SL = 2
    port, out = one(sw.process(1, udp_frame(me, srh=make_srh([last, nxt], segleft=2))))
    assert port == 4 and dst_of(out) == nxt


def test_srh_with_sl_zero_at_its_end_sid_goes_to_the_cpu(prog: Fabric) -> None:
    sw = prog.new_switch()
    me = ip("fc00:0:1::")
    sw.state.table("my_sid").insert(entry(((me, 48),), "FabricIngress.srv6_end"))
    port, _ = one(sw.process(1, udp_frame(me, srh=make_srh([me, ip("fc00:0:9::")], segleft=0))))
    assert port == CPU_PORT


def _raw_srh(nh: int, ext_len: int, rtype: int, sl: int, le: int, segments: list[int]) -> bytes:
    head = bytes([nh, ext_len, rtype, sl, le, 0, 0, 0])
    return head + b"".join(s.to_bytes(16, "big") for s in segments)


def _frame_with_raw_rh(dst: int, rh: bytes, tail: bytes = b"\x00" * 24) -> bytes:
    ip6 = IPv6(src=addr(carrier(NIC_SRC)), dst=addr(dst), nh=43, hlim=64, plen=len(rh) + len(tail))
    return bytes(Ether(dst=MAC_A, src=MAC_B) / ip6) + rh + tail


ME = 0xFC00_0000_0001 << 80
SEGS = [ip("2001:db8::5"), ip("fc00:0:2::"), ME]


@pytest.mark.parametrize(
    ("rh", "reason"),
    [
        pytest.param(
            _raw_srh(17, 6, 4, 4, 2, SEGS), DROP_SRH_MALFORMED, id="sl-above-last-entry+1"
        ),
        pytest.param(
            _raw_srh(17, 4, 4, 2, 2, SEGS), DROP_SRH_MALFORMED, id="hdr-ext-len-too-small"
        ),
        pytest.param(_raw_srh(17, 6, 0, 1, 2, SEGS), DROP_SRH_MALFORMED, id="routing-type-0"),
        pytest.param(_raw_srh(17, 18, 4, 5, 8, [ME] * 9), DROP_SRH_TOO_DEEP, id="nine-segments"),
        pytest.param(_raw_srh(17, 6, 4, 2, 2, SEGS)[:40], DROP_PARSER_ERROR, id="truncated"),
    ],
)
def test_malformed_srh_is_dropped_and_counted(prog: Fabric, rh: bytes, reason: int) -> None:
    sw = prog.new_switch()
    sw.state.table("my_sid").insert(entry(((ME, 48),), "FabricIngress.srv6_end"))
    add_route(sw, 0, 0, 4)
    frame = _frame_with_raw_rh(ME, rh, b"" if reason == DROP_PARSER_ERROR else b"\x00" * 24)
    assert sw.process(3, frame) == []
    assert counter(sw, "drop_reasons", reason) == 1
    assert counter(sw, "rx_drops", 3) == 1


def test_deep_srh_passes_a_transit_switch_untouched(prog: Fabric) -> None:
    sw = spine1(prog)
    da = carrier(SPINE1, LEAF2, NIC_DST)
    rh = _raw_srh(17, 18, 4, 5, 8, [ME] * 9)
    frame = _frame_with_raw_rh(da, rh)
    port, out = one(sw.process(1, frame))
    assert port == 2 and dst_of(out) == shift(da)
    assert out[54:] == frame[54:]  # the SRH and the payload unchanged


def test_srh_insert_adds_two_or_three_segments_for_plain_ipv6(prog: Fabric) -> None:
    sw = prog.new_switch()
    via1, via2 = carrier(SPINE1, LEAF2), carrier(0xE005)
    tbl = sw.state.table("srh_insert")
    tbl.insert(entry((1, (carrier(NIC_DST), 48)), "FabricIngress.srh_insert_2", via1))
    tbl.insert(entry((2, (carrier(NIC_DST), 48)), "FabricIngress.srh_insert_3", via2, via1))
    add_route(sw, BLOCK << 96, 32, 5)
    frame = udp_frame(carrier(NIC_DST), tc=0x12, fl=0xBEEF)
    for in_port, segs in ((1, [carrier(NIC_DST), via1]), (2, [carrier(NIC_DST), via1, via2])):
        _, out = one(sw.process(in_port, frame))
        got = Ether(out)
        s = got[IPv6ExtHdrSegmentRouting]
        assert got[IPv6].nh == 43 and s.nh == 17 and s.type == 4
        assert s.len == 2 * len(segs) and s.lastentry == s.segleft == len(segs) - 1
        assert [ip(a) for a in s.addresses] == segs
        assert dst_of(out) == segs[-1]
        assert got[IPv6].plen == len(out) - 54 and len(out) == len(frame) + 8 + 16 * len(segs)
        assert got[UDP].chksum == 0x1234 and bytes(got[UDP].payload) == b"tailfabric" * 4
    # another ingress port: no policy, plain forwarding
    _, out = one(sw.process(3, frame))
    assert Ether(out)[IPv6].nh == 17


# ------------------------------------------------------------------------------------ ECMP


def ecmp_switch(prog: Fabric, ports: tuple[int, ...] = (11, 12, 13, 14)) -> V1Switch:
    sw = prog.new_switch()
    prof = sw.state.action_profile("ecmp_selector")
    for i, p in enumerate(ports):
        prof.insert_member(i + 1, ActionCall("FabricIngress.set_egress_port", (p,)))
    prof.insert_group(100, [i + 1 for i in range(len(ports))])
    sw.state.table("ecmp_routes").insert(TableEntry(((ip("2001:db8:2::"), 48),), group_id=100))
    sw.state.table("ecmp_routes").insert(TableEntry(((ip("2001:db8:3::"), 48),), member_id=1))
    return sw


def test_ecmp_spreads_flows_and_keeps_each_flow_on_one_path(prog: Fabric) -> None:
    sw = ecmp_switch(prog)
    dst, src = ip("2001:db8:2::7"), ip("2001:db8:1::7")
    by_port: dict[int, int] = {}
    for sport in range(40000, 40400):
        ports = {one(sw.process(1, udp_frame(dst, src=src, sport=sport)))[0] for _ in range(3)}
        assert len(ports) == 1  # one flow, one path
        p = ports.pop()
        by_port[p] = by_port.get(p, 0) + 1
    assert set(by_port) == {11, 12, 13, 14}
    assert min(by_port.values()) >= 60  # 400 flows over 4 paths: roughly 100 each
    # the flow label and TCP ports are part of the flow too
    rng = random.Random(1)
    labels = {
        one(sw.process(1, udp_frame(dst, src=src, fl=rng.getrandbits(20))))[0] for _ in range(64)
    }
    assert len(labels) >= 3
    tcp = [
        bytes(
            Ether(dst=MAC_A, src=MAC_B)
            / IPv6(src=addr(src), dst=addr(dst))
            / TCP(sport=s, dport=80)
        )
        for s in range(1000, 1064)
    ]
    assert len({one(sw.process(1, f))[0] for f in tcp}) >= 3


def test_routes_take_precedence_over_ecmp_and_single_members_work(prog: Fabric) -> None:
    sw = ecmp_switch(prog)
    add_route(sw, ip("2001:db8:2::9"), 128, 20)
    assert one(sw.process(1, udp_frame(ip("2001:db8:2::9"))))[0] == 20
    assert {one(sw.process(1, udp_frame(ip("2001:db8:3::1"), sport=s)))[0] for s in range(50)} == {
        11
    }


# ------------------------------------------------------------------------------ port state


def test_port_down_drops_and_counts_and_port_up_restores(prog: Fabric) -> None:
    sw = leaf1(prog)
    da = carrier(LEAF1, SPINE1, LEAF2, NIC_DST)
    assert one(sw.process(1, udp_frame(da)))[0] == 5
    down = entry((5,), "FabricIngress.port_down")
    sw.state.table("port_state").insert(down)
    for _ in range(3):
        assert sw.process(1, udp_frame(da)) == []
    # the other plane-local uplink still works
    assert one(sw.process(1, udp_frame(carrier(LEAF1, SPINE2, LEAF2, NIC_DST))))[0] == 6
    assert counter(sw, "tx_drops", 5) == 3
    assert counter(sw, "drop_reasons", DROP_PORT_DOWN) == 3
    assert counter(sw, "rx_drops", 1) == 0
    sw.state.table("port_state").delete((5,))
    assert one(sw.process(1, udp_frame(da)))[0] == 5


# ----------------------------------------------------------------- device (queues, clock)


class Clock:
    def __init__(self) -> None:
        self.t = 1000

    def __call__(self) -> int:
        return self.t


def fabric_device(priority_queues: int = 1) -> tuple[Device, Clock]:
    clock = Clock()
    dev = Device(device_id=1, cpu_port=CPU_PORT, priority_queues=priority_queues, clock=clock)
    cfg = make_device_config(P4)
    program = load_device_config(cfg)
    dev.commit(Pipeline(program, build_p4info(program.schema), cfg, 1))
    assert dev.state is not None
    dev.state.table("routes").insert(
        entry(((ip("2001:db8:2::"), 48),), "FabricIngress.set_egress_port", 2)
    )
    return dev, clock


def drain(dev: Device, clock: Clock, steps: int, step_us: int = 1000) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    for _ in range(steps):
        out += dev.service_queues()
        clock.t += step_us
    return out


def test_ecn_marks_exactly_from_the_threshold_on() -> None:
    dev, clock = fabric_device()
    assert dev.state is not None
    k = 4
    dev.state.table("ecn_config").insert(entry((2,), "FabricEgress.set_ecn_threshold", k))
    run_command(dev.state, dev.tm, "set_queue_rate 1000 2")  # one packet per ms
    dst = ip("2001:db8:2::1")
    for i in range(10):  # ECT(0), ECT(1), Not-ECT, ECT(0), ...
        ecn = (0b10, 0b01, 0b00)[i % 3]
        assert dev.receive(1, udp_frame(dst, tc=ecn, sport=1000 + i)) == 1
    out = drain(dev, clock, 12)
    assert len(out) == 10
    for i, (port, frame) in enumerate(out):
        sent_ecn = (0b10, 0b01, 0b00)[i % 3]
        got = Ether(frame)[IPv6].tc & 3
        assert port == 2 and Ether(frame)[UDP].sport == 1000 + i
        want = 0b11 if (i >= k and sent_ecn != 0) else sent_ecn  # enq_qdepth of packet i is i
        assert got == want, (i, got)
    marked = sum(1 for i in range(k, 10) if i % 3 != 2)
    assert dev.state.counter("ecn_marks").read(2)[0] == marked


def test_burst_digest_reports_start_end_peak_and_packets() -> None:
    dev, clock = fabric_device()
    assert dev.state is not None
    dev.state.table("burst_config").insert(entry((2,), "FabricEgress.track_bursts", 8, 2))
    run_command(dev.state, dev.tm, "set_queue_rate 1000 2")
    dst = ip("2001:db8:2::1")
    for i in range(20):  # a burst of 20 packets at t = 1000 us
        dev.receive(1, udp_frame(dst, sport=2000 + i))
    out = drain(dev, clock, 25)  # departures at 1000, 2000, ... leave 19, 18, ... behind them
    assert len(out) == 20
    assert not dev.state.digests  # reported by the next ingress pass
    dev.receive(1, udp_frame(dst))
    assert len(dev.state.digests) == 1
    name, values = dev.state.digests.popleft()
    assert name == "burst_digest_t"
    port, start, end, peak, packets = values
    # starts with the first departure (19 queued >= 8) and ends with the departure that
    # leaves 2 (<= 2) behind: packet 17, at 1000 + 17 * 1000 us
    assert (port, start, end, peak, packets) == (2, 1000, 18000, 19, 18)
    # a second, smaller burst is reported too; one below the high watermark is not
    for i in range(5):
        dev.receive(1, udp_frame(dst, sport=3000 + i))
    drain(dev, clock, 8)
    for i in range(12):
        dev.receive(1, udp_frame(dst, sport=4000 + i))
    t0 = clock.t
    drain(dev, clock, 15)
    dev.receive(3, udp_frame(dst))
    assert [v for _, v in dev.state.digests] == [(2, t0, t0 + 9000, 11, 10)]


def test_trimming_cuts_to_the_headers_marks_and_jumps_the_queue() -> None:
    dev, clock = fabric_device(priority_queues=2)
    assert dev.state is not None
    dev.state.table("trim_config").insert(entry((2,), "FabricIngress.set_trim", 4, 16, 1))
    run_command(dev.state, dev.tm, "set_queue_rate 1000 2")
    dst = ip("2001:db8:2::1")
    payload = bytes(range(200))
    for i in range(8):
        dev.receive(1, udp_frame(dst, sport=5000 + i, payload=payload, tc=0b10))
    out = drain(dev, clock, 10)
    sports = [Ether(f)[UDP].sport for _, f in out]
    # 4..7 found >= 4 packets queued: trimmed, they overtake the queued full-size 0..3
    assert sports == [5004, 5005, 5006, 5007, 5000, 5001, 5002, 5003]
    for _, f in out:
        got = Ether(f)
        if got[UDP].sport >= 5004:
            assert len(f) == 14 + 40 + 8 + 16
            assert (
                got[IPv6].plen == 24 and got[UDP].len == 24 and got[IPv6].tc == TRIM_DSCP << 2 | 2
            )
            assert bytes(got[UDP].payload) == payload[:16]
        else:
            assert len(f) == 14 + 40 + 8 + 200 and got[IPv6].tc == 0b10
    assert dev.state.counter("FabricEgress.trims").read(2)[0] == 4


def test_trimming_accounts_for_an_srh() -> None:
    dev, clock = fabric_device(priority_queues=2)
    assert dev.state is not None
    dev.state.table("trim_config").insert(entry((2,), "FabricIngress.set_trim", 0, 12, 1))
    srh = make_srh([ip("2001:db8:2::1"), ip("2001:db8:2::2")], segleft=1)
    dev.receive(1, udp_frame(ip("2001:db8:2::2"), srh=srh, payload=bytes(300)))
    _, f = one(drain(dev, clock, 2))
    got = Ether(f)
    assert len(f) == 14 + 40 + 40 + 8 + 12 and got[IPv6].plen == 40 + 8 + 12
    assert got[IPv6ExtHdrSegmentRouting].segleft == 1 and got[UDP].len == 20


# ------------------------------------------------------------------------ loss injection


def test_injected_loss_rate_is_within_binomial_bounds(prog: Fabric) -> None:
    sw = prog.new_switch(seed=11)
    add_route(sw, ip("2001:db8::"), 32, 3)
    p = 0.1
    threshold = round(p * 65536)
    sw.state.table("loss_inject").insert(
        entry((3, (ip("2001:db8:2::"), 48)), "FabricEgress.inject_loss", threshold)
    )
    n = 2000
    lossy = udp_frame(ip("2001:db8:2::1"))
    clean = udp_frame(ip("2001:db8:7::1"))
    lost = sum(1 for _ in range(n) if not sw.process(1, lossy))
    mean, sd = n * threshold / 65536, math.sqrt(n * p * (1 - p))
    assert abs(lost - mean) <= 4.5 * sd, (lost, mean)
    assert all(sw.process(1, clean) for _ in range(200))  # other prefixes are not affected
    assert counter(sw, "tx_drops", 3) == lost
    assert counter(sw, "drop_reasons", DROP_INJECTED_LOSS) == lost
    assert counter(sw, "FabricEgress.port_tx", 3) == n - lost + 200


def test_loss_threshold_zero_and_full(prog: Fabric) -> None:
    sw = prog.new_switch(seed=5)
    add_route(sw, ip("2001:db8::"), 32, 3)
    t = sw.state.table("loss_inject")
    e = entry((3, (0, 0)), "FabricEgress.inject_loss", 0)
    t.insert(e)
    assert all(sw.process(1, udp_frame(ip("2001:db8::1"), sport=s)) for s in range(300))
    t.modify(entry((3, (0, 0)), "FabricEgress.inject_loss", 0xFFFF))
    lost = sum(1 for s in range(300) if not sw.process(1, udp_frame(ip("2001:db8::1"), sport=s)))
    assert lost >= 298  # p = 65535/65536


# ----------------------------------------------------------------- controller packets


def test_packet_out_direct_leaves_unchanged_on_its_port(prog: Fabric) -> None:
    sw = leaf1(prog)
    sw.state.table("port_state").insert(entry((6,), "FabricIngress.port_down"))
    probe = bytes(Ether(dst=MAC_A, src=MAC_B, type=0x88B5) / Raw(b"probe:leaf1:6"))
    header = ((6 << 7) | (0 << 6)).to_bytes(2, "big")  # egress_port 6, routed 0
    # even a port marked down can be probed
    assert sw.process(CPU_PORT, header + probe) == [(6, probe)]


def test_packet_out_routed_goes_through_the_pipeline(prog: Fabric) -> None:
    sw = leaf1(prog)
    frame = udp_frame(carrier(LEAF1, SPINE2, LEAF2, NIC_DST))
    header = ((0 << 7) | (1 << 6)).to_bytes(2, "big")
    port, out = one(sw.process(CPU_PORT, header + frame))
    assert port == 6 and dst_of(out) == carrier(SPINE2, LEAF2, NIC_DST)


def test_link_probe_and_link_local_are_punted_with_packet_in(prog: Fabric) -> None:
    sw = leaf1(prog)
    probe = bytes(Ether(dst=MAC_A, src=MAC_B, type=0x88B5) / Raw(b"probe:spine1:1"))
    port, out = one(sw.process(5, probe))
    pin = int.from_bytes(out[:3], "big")
    assert port == CPU_PORT and pin >> 15 == 5 and (pin >> 7) & 0xFF == PUNT_LINK_PROBE
    assert out[3:] == probe
    ns = bytes(
        Ether(dst=MAC_A, src=MAC_B)
        / IPv6(src="fe80::1", dst="ff02::1:ff00:1", hlim=255)
        / Raw(b"\x87" * 24)
    )
    port, out = one(sw.process(1, ns))
    assert port == CPU_PORT and (int.from_bytes(out[:3], "big") >> 7) & 0xFF == PUNT_LINK_LOCAL


def test_device_packet_out_and_packet_in_metadata() -> None:
    dev, clock = fabric_device()
    got: list[tuple[bytes, dict[int, int]]] = []
    dev.on_packet_in = lambda payload, meta: got.append((payload, meta))
    probe = bytes(Ether(dst=MAC_A, src=MAC_B, type=0x88B5) / Raw(b"probe"))
    assert dev.packet_out(probe, {1: 4, 2: 0}) == 1
    assert drain(dev, clock, 1) == [(4, probe)]
    dev.receive(9, probe)
    drain(dev, clock, 1)
    assert got == [(probe, {1: 9, 2: PUNT_LINK_PROBE, 3: 0})]


# ------------------------------------------------------------------------ robustness


def test_random_frames_never_crash_the_program(prog: Fabric) -> None:
    """Truncations and byte flips of valid fabric frames: the pipeline never raises."""
    sw = leaf1(prog)
    sw.state.table("my_sid").insert(entry(((ME, 48),), "FabricIngress.srv6_end_psp"))
    add_route(sw, 0, 0, 4)
    rng = random.Random(3)
    base = [
        udp_frame(carrier(LEAF1, SPINE1, LEAF2, NIC_DST)),
        udp_frame(ME, srh=make_srh(SEGS, segleft=2)),
        _frame_with_raw_rh(ME, _raw_srh(17, 18, 4, 5, 8, [ME] * 9)),
    ]
    for _ in range(600):
        f = bytearray(rng.choice(base))
        for _ in range(rng.randrange(1, 4)):
            f[rng.randrange(len(f))] = rng.randrange(256)
        f = f[: rng.randrange(10, len(f) + 1)]
        sw.process(rng.choice((1, 5, CPU_PORT)), bytes(f))


# ------------------------------------------------------------- real p4c and BMv2 (optional)

P4C = shutil.which("p4c-bm2-ss")
SIMPLE_SWITCH = shutil.which("simple_switch")
SIMPLE_SWITCH_CLI = shutil.which("simple_switch_CLI")
no_p4c = pytest.mark.skipif(P4C is None, reason="p4c-bm2-ss is not on PATH")
no_bmv2 = pytest.mark.skipif(
    SIMPLE_SWITCH is None or SIMPLE_SWITCH_CLI is None,
    reason="BMv2 simple_switch / simple_switch_CLI is not on PATH",
)


@pytest.fixture(scope="module")
def p4c_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("p4c")
    r = subprocess.run(
        [
            str(P4C),
            "--p4runtime-files",
            str(out / "fabric.p4info.txtpb"),
            "-o",
            str(out / "fabric.json"),
            str(P4),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def _summary(info: p4info_pb2.P4Info) -> dict[str, dict[str, object]]:
    """Names -> ids (plus key, parameter and metadata layouts) of every P4Info object."""
    out: dict[str, dict[str, object]] = {}
    for kind in (
        "tables",
        "actions",
        "action_profiles",
        "counters",
        "direct_counters",
        "meters",
        "direct_meters",
        "controller_packet_metadata",
        "registers",
        "digests",
        "value_sets",
    ):
        objs: dict[str, object] = {}
        for o in getattr(info, kind):
            detail: object = o.preamble.id
            if kind == "tables":
                detail = (
                    o.preamble.id,
                    [(f.id, f.name, f.bitwidth, f.match_type) for f in o.match_fields],
                    sorted(a.id for a in o.action_refs),
                    o.implementation_id,
                )
            elif kind == "actions":
                detail = (o.preamble.id, [(p.id, p.name, p.bitwidth) for p in o.params])
            elif kind == "controller_packet_metadata":
                detail = (o.preamble.id, [(m.id, m.name, m.bitwidth) for m in o.metadata])
            objs[o.preamble.name] = detail
        out[kind] = objs
    return out


@pytest.mark.requires_p4c
@no_p4c
def test_p4c_compiles_fabric_and_its_p4info_matches_tf_p4(p4c_build: Path) -> None:
    build = p4c_build
    theirs = _summary(read_p4info(str(build / "fabric.p4info.txtpb")))
    ours = _summary(build_p4info(load_program(P4).schema))
    for kind in ours:
        assert ours[kind] == theirs[kind], kind


@pytest.mark.requires_p4c
@pytest.mark.requires_bmv2
@no_p4c
@no_bmv2
def test_bmv2_loads_fabric_and_accepts_the_controller_entries(p4c_build: Path) -> None:
    build = p4c_build
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        thrift = s.getsockname()[1]
    sw = subprocess.Popen(
        [
            str(SIMPLE_SWITCH),
            "--thrift-port",
            str(thrift),
            "--device-id",
            "7",
            str(build / "fabric.json"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            assert sw.poll() is None, sw.stdout.read().decode() if sw.stdout else ""
            try:
                socket.create_connection(("127.0.0.1", thrift), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "simple_switch did not open its thrift port"
                time.sleep(0.2)
        commands = (
            "\n".join(
                [
                    "table_add FabricIngress.my_sid FabricIngress.usid_un fcbb:bb00:1001::/48 =>",
                    "table_add FabricIngress.my_sid FabricIngress.usid_ua fcbb:bb00:e006::/48 => 6",
                    "table_add FabricIngress.routes FabricIngress.set_egress_port fcbb:bb00:2001::/48 => 5",
                    "table_add FabricIngress.srh_insert FabricIngress.srh_insert_2 2 fcbb:bb00:8021::/48"
                    " => fcbb:bb00:2002:1002::",
                    "table_add FabricIngress.port_state FabricIngress.port_down 7 =>",
                    "table_add FabricIngress.trim_config FabricIngress.set_trim 5 => 32 64 1",
                    "table_add FabricEgress.ecn_config FabricEgress.set_ecn_threshold 5 => 20",
                    "table_add FabricEgress.burst_config FabricEgress.track_bursts 5 => 32 4",
                    "table_add FabricEgress.loss_inject FabricEgress.inject_loss 5 fcbb:bb00::/32 => 655",
                    "act_prof_create_member FabricIngress.ecmp_selector FabricIngress.set_egress_port 5",
                    "counter_read drop_reasons 3",
                ]
            )
            + "\n"
        )
        r = subprocess.run(
            [str(SIMPLE_SWITCH_CLI), "--thrift-port", str(thrift)],
            input=commands,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
        assert "Error" not in r.stdout and "Invalid" not in r.stdout, r.stdout
        assert r.stdout.count("Entry has been added with handle") == 9, r.stdout
    finally:
        sw.terminate()
        sw.wait(timeout=10)
