"""p4/fabric.p4 on the native executor: identical to the Python one, tables writable at run time.

The leaf of :mod:`switch.bench_fabric` (the controller's entries for a leaf: uN/uA SIDs, routes,
an ECMP group, per-port MACs, ECN, trimming, bursts, ports down) gets the benchmark's frames and
a fuzz of scapy-built packets (plain IPv6, SRv6 with 1-8 segments, UDP/TCP, link probes,
packet-outs from the CPU port, hop limits 0-2) with random corruptions and truncations, plus
random bytes. Outputs (port and bytes) and all state must match packet for packet. Then table
entries, defaults and the ECMP group change between packets and the native path must follow.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path

import pytest
from scapy.layers.inet import TCP, UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrSegmentRouting
from scapy.layers.l2 import Ether

from switch.bench_fabric import BLOCK, UPLINK_BASE, carrier, setup_fabric, spine_usid
from switch.compile import CompiledProgram, compile_source, load_program
from switch.native import NativeSwitch, NativeUnavailable, make_switch
from switch.pipeline.tables import TableEntry
from switch.pipeline.v1model import V1Switch
from switch.schema import ActionCall
from tests.unit.native_diff import assert_same_state, pair

FABRIC = Path(__file__).resolve().parents[2] / "p4" / "fabric.p4"
CPU_PORT = 255


@pytest.fixture(scope="module")
def program() -> CompiledProgram:
    return load_program(FABRIC)


def _leaves(program: CompiledProgram) -> tuple[V1Switch, NativeSwitch, list[bytes]]:
    py, nat = pair(program, seed=5)
    _, frames = setup_fabric(py, random.Random(7), 64)
    _, frames2 = setup_fabric(nat, random.Random(7), 64)
    assert frames == frames2
    return py, nat, frames


def _ip6(rng: random.Random) -> int:
    choice = rng.randrange(5)
    if choice == 0:  # inside the block: a SID of this leaf, a spine, or the ECMP fallback
        return (BLOCK << 96) | rng.getrandbits(96)
    if choice == 1:
        return carrier(spine_usid(0, rng.randrange(64)), rng.getrandbits(16))
    if choice == 2:
        return (0xFE80 << 112) | rng.getrandbits(64)
    if choice == 3:
        return carrier(0xE000 | (UPLINK_BASE + rng.randrange(64)))
    return rng.getrandbits(128)


def _addr(v: int) -> str:
    return ":".join(f"{(v >> (112 - 16 * i)) & 0xFFFF:x}" for i in range(8))


def _scapy_packet(rng: random.Random) -> bytes:
    eth = Ether(dst="02:00:00:00:01:01", src="02:00:00:00:aa:01")
    if rng.random() < 0.08:
        return (
            bytes(eth / bytes(range(rng.randrange(20, 60))))
            if rng.random() < 0.5
            else bytes(
                Ether(dst="02:00:00:00:01:01", src="02:00:00:00:aa:01", type=0x88B5) / b"probe!"
            )
        )
    ip = IPv6(
        src=_addr(_ip6(rng)),
        dst=_addr(_ip6(rng)),
        hlim=rng.choice([0, 1, 2, 64]),
        fl=rng.getrandbits(20),
        tc=rng.getrandbits(8),
    )
    l4 = (
        UDP(sport=rng.randrange(65536), dport=rng.randrange(65536))
        if rng.random() < 0.7
        else TCP(sport=rng.randrange(65536), dport=rng.randrange(65536))
    )
    payload = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 300)))
    if rng.random() < 0.5:
        n = rng.randrange(1, 10)
        segs = [_addr(_ip6(rng)) for _ in range(n)]
        srh = IPv6ExtHdrSegmentRouting(addresses=segs, segleft=rng.randrange(n + 1))
        if rng.random() < 0.2:
            srh.lastentry = rng.randrange(12)
        pkt = eth / ip / srh / l4 / payload
    else:
        pkt = eth / ip / l4 / payload
    return bytes(pkt)


def _corrupt(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randrange(3)):
        i = rng.randrange(len(b))
        b[i] = rng.randrange(256)
    if rng.random() < 0.15:
        b = b[: rng.randrange(len(b) + 1)]
    return bytes(b)


def _packet_out(rng: random.Random, inner: bytes) -> bytes:
    port = rng.choice([1, 7, UPLINK_BASE + 3])
    routed = rng.randrange(2)
    return ((port << 7) | (routed << 6)).to_bytes(2, "big") + inner


def test_benchmark_frames_and_fuzz_identical(program: CompiledProgram) -> None:
    py, nat, frames = _leaves(program)
    rng = random.Random(11)
    packets: list[tuple[int, bytes]] = [(1, f) for f in frames]
    for _ in range(1500):
        kind = rng.random()
        if kind < 0.15:
            data = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 120)))
        elif kind < 0.3:
            data = _corrupt(rng, rng.choice(frames))
        else:
            data = _scapy_packet(rng)
            if rng.random() < 0.2:
                data = _corrupt(rng, data)
        port = rng.choice([1, 2, 5, UPLINK_BASE, UPLINK_BASE + 17])
        if rng.random() < 0.1:
            port, data = CPU_PORT, _packet_out(rng, data)
        packets.append((port, data))
    sent = 0
    for port, data in packets:
        a = py.process(port, data)
        b = nat.process(port, data)
        assert a == b, f"port {port} packet {data.hex()}"
        sent += len(a)
    assert sent > len(frames)  # not everything dropped
    assert py.counters.dropped > 0 and py.counters.parser_errors > 0  # the fuzz reaches those
    assert_same_state(py, nat)
    # one more round through the batch entry point: the same as one by one
    py2, nat2, _ = _leaves(program)
    want = [o for port, data in packets for o in py2.process(port, data)]
    assert nat2.process_batch(packets) == want
    assert_same_state(py2, nat2)


def test_trimming_bursts_and_ecn_state_identical(program: CompiledProgram) -> None:
    """Deep queues (the egress registers) change what egress does: same on both."""
    py, nat, frames = _leaves(program)
    for sw in (py, nat):
        sw.state.register("qdepth_estimate").control_write(UPLINK_BASE + 1, 100)
    for i, f in enumerate(frames * 3):
        assert py.process(1 + i % 3, f) == nat.process(1 + i % 3, f)
    assert_same_state(py, nat)


def _route_packet(dst: int) -> bytes:
    ip = IPv6(src=_addr(carrier(0x8021)), dst=_addr(dst), hlim=64)
    eth = Ether(dst="02:00:00:00:01:01", src="02:00:00:00:aa:01")
    return bytes(eth / ip / UDP() / (b"x" * 8))


def test_tables_written_at_run_time_are_seen(program: CompiledProgram) -> None:
    py, nat, _ = _leaves(program)
    dst = carrier(0x7777, 0x1)  # no route: the ECMP group over the uplinks
    pkt = _route_packet(dst)

    def both() -> list[tuple[int, bytes]]:
        a, b = py.process(1, pkt), nat.process(1, pkt)
        assert a == b
        return b

    ecmp = both()
    assert ecmp and UPLINK_BASE <= ecmp[0][0] < UPLINK_BASE + 64
    route = TableEntry(
        ((carrier(0x7777), 48),), action=ActionCall("FabricIngress.set_egress_port", (9,))
    )
    for sw in (py, nat):
        sw.state.table("routes").insert(route)
    assert both()[0][0] == 9
    moved = TableEntry(
        ((carrier(0x7777), 48),), action=ActionCall("FabricIngress.set_egress_port", (12,))
    )
    for sw in (py, nat):
        sw.state.table("routes").modify(moved)
    assert both()[0][0] == 12
    for sw in (py, nat):
        sw.state.table("routes").delete(((carrier(0x7777), 48),))
    assert both() == ecmp
    # the ECMP group shrinks to one member: every flow takes it
    for sw in (py, nat):
        sw.state.action_profile("ecmp_selector").modify_group(1, [5])
    assert both()[0][0] == UPLINK_BASE + 4
    # no route at all: dropped (DROP_NO_ROUTE), same drop counts
    for sw in (py, nat):
        sw.state.table("ecmp_routes").delete(((BLOCK << 96, 32),))
    assert both() == []
    # a default action written at run time: port 9 loses its MAC entry, then gets a default
    for sw in (py, nat):
        sw.state.table("routes").insert(route)
        sw.state.table("port_mac").delete((9,))
    plain = both()
    assert plain[0][0] == 9
    for sw in (py, nat):
        sw.state.table("port_mac").set_default(
            ActionCall("FabricEgress.set_macs", (0x0A0000000001, 0x0B0000000002))
        )
    macs = both()
    assert macs[0][1][:12] == bytes.fromhex("0b00000000020a0000000001")
    for sw in (py, nat):
        sw.state.table("port_mac").reset_default()
    assert both() == plain
    assert_same_state(py, nat)


def test_counter_and_register_writes_from_the_control_plane_are_shared(
    program: CompiledProgram,
) -> None:
    py, nat, frames = _leaves(program)
    nat.state.counters["FabricIngress.port_rx"].write(1, 1000, 5000)
    nat.process(1, frames[0])
    assert nat.state.counters["FabricIngress.port_rx"].read(1) == (1001, 5000 + len(frames[0]))
    nat.state.counters["FabricIngress.port_rx"].reset()
    nat.process(1, frames[0])
    assert nat.state.counters["FabricIngress.port_rx"].read(1) == (1, len(frames[0]))


def test_modes_and_fallback_reasons(
    program: CompiledProgram, caplog: pytest.LogCaptureFixture
) -> None:
    assert type(make_switch(program, mode="off")) is V1Switch
    assert isinstance(make_switch(program, mode="auto"), NativeSwitch)
    union = compile_source(UNION_PROGRAM, "union_test.p4")
    with pytest.raises(NativeUnavailable, match="header union"):
        make_switch(union, mode="on")
    with caplog.at_level(logging.WARNING, logger="tailfabric.switch"):
        sw = make_switch(union, mode="auto")
    assert type(sw) is V1Switch
    assert "header union" in caplog.text
    with pytest.raises(ValueError, match="native mode"):
        make_switch(program, mode="fast")


def test_without_a_compiler_python_is_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no gcc, no cc
    monkeypatch.setenv("CC", "gcc")
    monkeypatch.setenv("TF_NATIVE_CACHE", str(tmp_path / "cache"))
    prog = compile_source(PLAIN_PROGRAM + f"// {tmp_path}\n", "nocc.p4")  # a fresh build
    with caplog.at_level(logging.WARNING, logger="tailfabric.switch"):
        sw = make_switch(prog, mode="auto")
    assert type(sw) is V1Switch
    assert "compiler" in caplog.text
    with pytest.raises(NativeUnavailable, match="compiler"):
        make_switch(prog, mode="on")


PLAIN_PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; }
struct H { h_t h; }
struct M { }
parser P(packet_in pkt, out H hdr, inout M m, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control V(inout H hdr, inout M m) { apply { } }
control I(inout H hdr, inout M m, inout standard_metadata_t sm) {
    apply { sm.egress_spec = 2; hdr.h.a = hdr.h.a + 1; }
}
control E(inout H hdr, inout M m, inout standard_metadata_t sm) { apply { } }
control C(inout H hdr, inout M m) { apply { } }
control D(packet_out pkt, in H hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""

UNION_PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header a_t { bit<8> a; }
header b_t { bit<16> b; }
header_union u_t { a_t a; b_t b; }
struct H { u_t u; }
struct M { }
parser P(packet_in pkt, out H hdr, inout M m, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.u.a); transition accept; }
}
control V(inout H hdr, inout M m) { apply { } }
control I(inout H hdr, inout M m, inout standard_metadata_t sm) { apply { sm.egress_spec = 1; } }
control E(inout H hdr, inout M m, inout standard_metadata_t sm) { apply { } }
control C(inout H hdr, inout M m) { apply { } }
control D(packet_out pkt, in H hdr) { apply { pkt.emit(hdr.u); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


TIMEOUT_PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct H { h_t h; }
struct M { }
parser P(packet_in pkt, out H hdr, inout M m, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control V(inout H hdr, inout M m) { apply { } }
control I(inout H hdr, inout M m, inout standard_metadata_t sm) {
    action fwd(bit<9> port, bit<8> b) { sm.egress_spec = port; hdr.h.b = b; }
    table t {
        key = { hdr.h.a: exact; }
        actions = { fwd; NoAction; }
        default_action = NoAction();
        support_timeout = true;
    }
    apply { sm.egress_spec = 1; t.apply(); }
}
control E(inout H hdr, inout M m, inout standard_metadata_t sm) { apply { } }
control C(inout H hdr, inout M m) { apply { } }
control D(packet_out pkt, in H hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_idle_timeout_hits_are_reported() -> None:
    prog = compile_source(TIMEOUT_PROGRAM, "timeout.p4")
    py, nat = pair(prog)
    for sw in (py, nat):
        t = sw.state.table("I.t")
        t.hit_clock_us = lambda: 5000
        t.insert(TableEntry((7,), action=ActionCall("I.fwd", (4, 9))))
        t.insert(TableEntry((8,), action=ActionCall("I.fwd", (5, 9))))
        t.hit_clock_us = lambda: 9000
    assert py.process(0, b"\x07\x00") == nat.process(0, b"\x07\x00") == [(4, b"\x07\x09")]
    for sw in (py, nat):
        t = sw.state.table("I.t")
        assert t.get((7,)).last_hit_ns == 9_000_000  # hit now
        assert t.get((8,)).last_hit_ns == 5_000_000  # not hit since its insertion


def test_ingress_and_egress_passes_identical(program: CompiledProgram) -> None:
    """The traffic manager's split (switch.device): ingress, queue depths, egress."""
    py, nat, frames = _leaves(program)
    rng = random.Random(5)
    packets = [(1, f) for f in frames] + [(2, _scapy_packet(rng)) for _ in range(300)]
    for i, (port, data) in enumerate(packets):
        now = 1000 + 10 * i
        a = py.ingress_pass(port, data, now=now)
        b = nat.ingress_pass(port, data, now=now)
        assert [(j.port, j.priority, j.payload) for j in a] == [
            (j.port, j.priority, j.payload) for j in b
        ]
        for ja, jb in zip(a, b):
            depth = rng.randrange(0, 64)
            info = (now & 0xFFFFFFFF, depth, rng.randrange(100), rng.randrange(64))
            for job in (ja, jb):  # what the device does before egress
                job.sm.f_enq_timestamp = info[0]
                job.sm.f_enq_qdepth = depth
            assert py.egress_pass(ja, info, now + 5) == nat.egress_pass(jb, info, now + 5)
    assert_same_state(py, nat)


def test_process_frames_is_process_one_by_one(program: CompiledProgram) -> None:
    py, nat, frames = _leaves(program)
    many = frames * 9  # more than one call into C (256 per call)
    want = [o for f in many for o in py.process(1, f)]
    assert nat.process_frames(1, many) == want
    assert_same_state(py, nat)


def test_jumbo_frames_take_the_python_passes(program: CompiledProgram) -> None:
    py, nat, frames = _leaves(program)
    jumbo = frames[0] + bytes(20000)
    packets = [(1, frames[1]), (1, jumbo), (1, frames[2])]
    want = [o for port, data in packets for o in py.process(port, data)]
    assert len(want) == 3
    assert nat.process_batch(packets) == want
    assert nat.process(1, jumbo) == py.process(1, jumbo)
    assert_same_state(py, nat)


EVAL_ORDER_PROGRAM = """
#include <core.p4>
#include <v1model.p4>
bit<1> same(in bit<1> v) { return v; }
bit<8> clear_id(inout bit<1> id) { id = 0; return 1; }
bit<4> clear4(inout bit<1> id) { id = 0; return 5; }
header h_t { bit<8> a; }
header i_t { bit<1> id; bit<7> pad; }
struct H { h_t[2] h; i_t i; }
struct M { }
parser P(packet_in pkt, out H hdr, inout M m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h.next); pkt.extract(hdr.h.next); pkt.extract(hdr.i); transition accept;
    }
}
control V(inout H hdr, inout M m) { apply { } }
control I(inout H hdr, inout M m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.h[same(hdr.i.id)].a = clear_id(hdr.i.id);  // the index is taken before the call
        hdr.i.id = 1;
        hdr.h[same(hdr.i.id)].a[3:0] = clear4(hdr.i.id);
    }
}
control E(inout H hdr, inout M m, inout standard_metadata_t sm) { apply { } }
control C(inout H hdr, inout M m) { apply { } }
control D(packet_out pkt, in H hdr) { apply { pkt.emit(hdr.h); pkt.emit(hdr.i); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_left_hand_side_is_evaluated_before_a_call_on_the_right() -> None:
    prog = compile_source(EVAL_ORDER_PROGRAM, "eval_order_native.p4")
    py, nat = pair(prog)
    for data in (b"\x00\x00\x80", b"\x00\x00\x00", b"\xff\xff\xff"):
        assert py.process(0, data) == nat.process(0, data)
    assert nat.process(0, b"\x00\x00\x80") == [(1, b"\x00\x05\x00")]
