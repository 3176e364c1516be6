"""Drops by reason: the registry, the counts of the traffic manager, the executor and the device,
the P4Runtime read of them (real gRPC, the real server) and how the controller puts them
together with the program's own drop counters."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2
from p4rt_helpers import INSERT, details, running, update

from controller.drops import (
    DROP_COUNTERS_TYPE_ID as CONTROLLER_TYPE_ID,
)
from controller.drops import (
    PACKET_COUNTERS_TYPE_ID as CONTROLLER_PACKETS_TYPE_ID,
)
from controller.drops import (
    PACKET_OUT_DROPPED,
    UNEXPLAINED,
    PacketTotals,
    TargetDrop,
    balance,
    decode_drops,
    decode_packets,
    describe,
    drop_read,
    packets_read,
    per_port,
    summarize,
)
from switch.compile.package import load_device_config, make_device_config
from switch.device.device import Device, Pipeline
from switch.device.ports import PortPackets
from switch.device.sscli import run_command
from switch.device.tm import TrafficManager
from switch.p4info import build_p4info
from switch.p4rt.entity_target import DROP_COUNTERS_TYPE_ID, PACKET_COUNTERS_TYPE_ID
from switch.pipeline.drops import (
    BY_NAME,
    MAX_QUEUES,
    REASONS,
    DropCell,
    DropCounters,
    DropReason,
    merge_cells,
)

# Parses Ethernet + a 4-byte "tag"; ingress drops on a parser error or tag.kind 1, multicasts
# tag.kind 3 to group tag.port, sends the rest to port tag.port; egress drops tag.kind 2.
PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header tag_t { bit<8> kind; bit<8> port; bit<16> pad; }
struct headers_t { eth_t eth; tag_t tag; }
struct meta_t { }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); pkt.extract(hdr.tag); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (sm.parser_error != error.NoError || hdr.tag.kind == 1) {
            mark_to_drop(sm);
        } else if (hdr.tag.kind == 3) {
            sm.mcast_grp = (bit<16>)hdr.tag.port;
        } else {
            sm.egress_spec = (bit<9>)hdr.tag.port;
        }
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { if (hdr.tag.kind == 2) { mark_to_drop(sm); } }
}
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.tag); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def frame(kind: int = 0, port: int = 2) -> bytes:
    return b"\x02" * 6 + b"\x04" * 6 + b"\x88\xb5" + bytes([kind, port, 0, 0]) + b"x" * 50


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Pipeline:
    path = tmp_path_factory.mktemp("drops") / "drops.p4"
    path.write_text(PROGRAM)
    cfg = make_device_config(path)
    program = load_device_config(cfg)
    return Pipeline(program, build_p4info(program.schema), cfg, 0)


class Clock:
    def __init__(self) -> None:
        self.us = 0

    def __call__(self) -> int:
        return self.us


def device(pipeline: Pipeline, clock: Clock | None = None) -> Device:
    dev = Device(1, cpu_port=255, clock=clock)
    dev.commit(pipeline)
    return dev


def counts(cells: list[DropCell]) -> dict[tuple[str, int, int | None], int]:
    return {(c.name, c.port, c.queue): c.packets for c in cells}


# -- the registry ---------------------------------------------------------------------------


def test_every_reason_has_one_row_with_a_unique_name() -> None:
    assert set(REASONS) == set(DropReason)
    assert len(BY_NAME) == len(DropReason)
    assert all(info.help and info.name == info.name.lower() for info in REASONS.values())
    assert [r for r, info in REASONS.items() if info.per_queue] == [DropReason.TAIL_DROP]


def test_the_controller_reads_the_type_id_the_switch_serves() -> None:
    assert CONTROLLER_TYPE_ID == DROP_COUNTERS_TYPE_ID
    assert CONTROLLER_PACKETS_TYPE_ID == PACKET_COUNTERS_TYPE_ID
    assert 0x80 <= DROP_COUNTERS_TYPE_ID < 0xFF  # P4Runtime's OTHER_EXTERNS range


def test_counters_add_up_per_reason_port_and_queue() -> None:
    d = DropCounters()
    d.count(DropReason.TAIL_DROP, 3, 1)
    d.count(DropReason.TAIL_DROP, 3, 1, 4)
    d.count(DropReason.TAIL_DROP, 3, 0)
    d.count(DropReason.TX_FAILED, 7, n=2)
    assert d.get(DropReason.TAIL_DROP, 3) == 6 and d.get(DropReason.TAIL_DROP, 3, 1) == 5
    assert d.total() == 8 and d.total(DropReason.TX_FAILED) == 2
    assert counts(d.cells()) == {
        ("tail_drop", 3, 0): 1,
        ("tail_drop", 3, 1): 5,
        ("tx_failed", 7, None): 2,
    }
    merged = merge_cells(d.cells(), [DropCell(DropReason.TX_FAILED, 7, None, 3)])
    assert counts(merged)[("tx_failed", 7, None)] == 5


# -- where the switch counts ----------------------------------------------------------------


@pytest.mark.parametrize("depth", [0, 1, 4, 64])
def test_a_full_queue_counts_exactly_the_packets_it_drops(depth: int) -> None:
    tm = TrafficManager(priority_queues=2, depth=depth)
    accepted = sum(tm.enqueue(5, 1, i, 0) is not None for i in range(100))
    assert accepted == min(depth, 100)
    assert tm.drops.get(DropReason.TAIL_DROP, 5, 1) == 100 - accepted
    assert tm.drops.get(DropReason.TAIL_DROP, 5, 0) == 0
    assert tm.enqueue(5, MAX_QUEUES - 1, "x", 0) is None  # priority 7 has no queue here
    assert tm.drops.get(DropReason.NO_QUEUE, 5) == 1
    assert tm.ports[5].drops == tm.drops.total()  # the queue's own counter agrees


def test_parser_errors_and_program_drops_count_at_their_ports(pipeline: Pipeline) -> None:
    dev = device(pipeline)
    dev.receive(1, frame()[:16])  # the tag does not fit: parser error, ingress drops
    dev.receive(1, frame(kind=1))  # ingress mark_to_drop
    dev.receive(3, frame(kind=2, port=4))  # egress mark_to_drop, charged to port 4
    dev.receive(1, frame(port=2))  # forwarded
    sent = dev.service_queues()
    assert [p for p, _ in sent] == [2]
    assert counts(dev.drop_cells()) == {
        ("parser_error", 1, None): 1,
        ("ingress_drop", 1, None): 1,
        ("egress_drop", 4, None): 1,
    }


def test_packets_before_a_pipeline_count_as_no_pipeline() -> None:
    dev = Device(1)
    dev.receive(6, frame())
    assert counts(dev.drop_cells()) == {("no_pipeline", 6, None): 1}


def test_counts_survive_a_new_pipeline_and_merge_the_ports_own(pipeline: Pipeline) -> None:
    dev = device(pipeline)
    dev.receive(1, frame(kind=1))
    dev.commit(pipeline)
    dev.receive(1, frame(kind=1))
    dev.io_drops = lambda: [
        DropCell(DropReason.RX_OVERRUN, 1, None, 9),
        DropCell(DropReason.TX_FAILED, 2, None, 1),
    ]
    assert counts(dev.drop_cells()) == {
        ("rx_overrun", 1, None): 9,
        ("ingress_drop", 1, None): 2,
        ("tx_failed", 2, None): 1,
    }


def test_packets_in_equal_packets_out_plus_drops_through_a_small_queue(
    pipeline: Pipeline,
) -> None:
    clock = Clock()
    dev = device(pipeline, clock)
    assert dev.state is not None
    for cmd in ("mc_mgrp_create 1", "mc_node_create 0 2 3", "mc_node_associate 1 0"):
        run_command(dev.state, dev.tm, cmd)
    run_command(dev.state, dev.tm, "mc_mgrp_create 2")  # no replicas
    dev.tm.set_depth(5, port=2)
    dev.tm.set_rate(1000, port=2)  # one packet per ms
    kinds = [(0, 2), (0, 2), (1, 2), (0, 2), (2, 2), (3, 1), (3, 2), (0, 2), (0, 3), (0, 2)] * 10
    out = 0
    for i, (kind, port) in enumerate(kinds):
        dev.receive(1, frame(kind, port) if i % 13 else frame()[:15])
        if i % 4 == 0:
            clock.us += 1000
            out += len(dev.service_queues())
        if i == 50:  # a PacketOut too (ingress on the CPU port, like a frame from port 255)
            dev.packet_out(frame(0, 3), {})
    totals = dev.packet_totals()
    assert totals.queued_pkts > 0
    for _ in range(20):  # drain
        clock.us += 1000
        out += len(dev.service_queues())
    drops = dev.drop_cells()
    by = counts(drops)
    assert by[("tail_drop", 2, 0)] > 0 and by[("parser_error", 1, None)] > 0
    assert by[("mcast_empty", 1, None)] > 0
    totals = dev.packet_totals()
    assert totals.copies_pkts > 0 and totals.queued_pkts == 0 and totals.from_cpu_pkts == 1
    assert totals.rx_pkts == len(kinds) and totals.tx_pkts == out
    assert len(kinds) + 1 + totals.copies_pkts == out + sum(c.packets for c in drops)


def test_the_runtime_cli_shows_drops_by_reason(pipeline: Pipeline) -> None:
    dev = device(pipeline)
    dev.tm.set_depth(0, port=2)
    dev.receive(1, frame())
    dev.receive(1, frame(kind=1))
    assert dev.state is not None
    text = run_command(dev.state, dev.tm, "show_drops")
    assert "tail_drop" in text and "ingress_drop" in text and "total 2 packets" in text
    only = run_command(dev.state, dev.tm, "show_drops 2")
    assert "tail_drop" in only and "ingress_drop" not in only


# -- P4Runtime ------------------------------------------------------------------------------


def read_drops(h: object, extern_id: int = 0) -> list[TargetDrop]:
    e = drop_read()
    e.extern_entry.extern_id = extern_id
    return list(decode_drops(h.read(e)))  # type: ignore[attr-defined]


def test_p4runtime_reads_the_drops_as_target_extern_entries() -> None:
    with running() as h:
        assert read_drops(h) == []
        h.device.drops.count(DropReason.TAIL_DROP, 3, 1, 213)
        h.device.drops.count(DropReason.INGRESS_DROP, 1, n=2)
        h.device.io_drops = lambda: [DropCell(DropReason.RX_OVERRUN, 1, None, 7)]
        got = read_drops(h)
        assert got == [
            TargetDrop("rx_overrun", 1, 1, None, "ingress", False, 7),
            TargetDrop("ingress_drop", 5, 1, None, "ingress", True, 2),
            TargetDrop("tail_drop", 10, 3, 1, "egress", False, 213),
        ]
        assert read_drops(h, int(DropReason.TAIL_DROP)) == got[2:]
        # the wildcard Entity (type id 0) reads them as well
        wild = p4runtime_pb2.Entity(extern_entry=p4runtime_pb2.ExternEntry())
        assert len(decode_drops(h.read(wild))) == 3
        assert decode_packets(h.read(wild)) is not None  # and the packet counters


def test_p4runtime_reads_the_packet_counters_and_they_balance() -> None:
    with running() as h:
        dev = h.device
        dev.counters.rx, dev.counters.tx = 12, 3  # without ports these count
        dev.counters.from_cpu, dev.counters.to_cpu = 2, 1
        packets = decode_packets(h.read(packets_read()))
        assert packets == PacketTotals(in_pkts=14, out_pkts=4, queued_pkts=0)
        dev.io_packets = lambda: [PortPackets(1, 20, 18, 0), PortPackets(2, 0, 0, 9)]
        dev.drops.count(DropReason.TAIL_DROP, 2, 0, 7)
        dev.io_drops = lambda: [DropCell(DropReason.RX_OVERRUN, 1, None, 2)]
        packets = decode_packets(h.read(packets_read()))
        assert packets == PacketTotals(in_pkts=22, out_pkts=10, queued_pkts=0)
        b = balance(packets, decode_drops(h.read(drop_read())))
        assert (b.drop_pkts, b.unexplained_pkts) == (9, 3)
        assert "unexplained 3" in b.describe()
        e = packets_read()
        e.extern_entry.extern_id = 2  # the ports only
        assert decode_packets(h.read(e)) is None  # no switch entity: nothing to balance
        assert len(h.read(e)) == 2


@pytest.mark.parametrize(
    ("type_id", "extern_id"),
    [(0x83, 0), (DROP_COUNTERS_TYPE_ID, max(DropReason) + 1), (PACKET_COUNTERS_TYPE_ID, 3)],
)
def test_unknown_extern_types_and_reasons_are_not_found(type_id: int, extern_id: int) -> None:
    with running() as h:
        e = p4runtime_pb2.Entity()
        e.extern_entry.extern_type_id = type_id
        e.extern_entry.extern_id = extern_id
        with pytest.raises(grpc.RpcError) as err:
            h.read(e)
        assert [d.canonical_code for d in details(err.value)] == [code_pb2.NOT_FOUND]


def test_drop_counters_are_read_only() -> None:
    with running() as h:
        ee = p4runtime_pb2.ExternEntry(extern_type_id=DROP_COUNTERS_TYPE_ID)
        with pytest.raises(grpc.RpcError) as err:
            h.write(update(INSERT, extern_entry=ee))
        assert [d.canonical_code for d in details(err.value)] == [code_pb2.INVALID_ARGUMENT]


# -- the controller's view ------------------------------------------------------------------


def drop(reason: str, port: int, packets: int, program: bool = False) -> TargetDrop:
    code = int(BY_NAME[reason])
    info = REASONS[DropReason(code)]
    queue = 0 if info.per_queue else None
    return TargetDrop(reason, code, port, queue, str(info.charged), program, packets)


def test_summary_counts_each_packet_once() -> None:
    target = [
        drop("tail_drop", 2, 200),
        drop("tail_drop", 3, 13),
        drop("rx_overrun", 1, 4),
        drop("ingress_drop", 1, 5, program=True),
        drop("egress_drop", 2, 3, program=True),
    ]
    program = {"no route": 4, "injected loss": 3, "hop limit": 0}
    reasons = summarize(target, program)
    assert reasons == {
        "tail_drop": 213,
        "rx_overrun": 4,
        "no route": 4,
        "injected loss": 3,
        UNEXPLAINED: 1,
    }
    assert describe(reasons).startswith("tail_drop 213, no route 4, rx_overrun 4")
    assert summarize(None, program) == {"no route": 4, "injected loss": 3}  # BMv2
    flush = [drop("ingress_drop", 255, 6, program=True), drop("ingress_drop", 1, 4, program=True)]
    assert summarize(flush, {"no route": 3}, cpu_port=255) == {
        "no route": 3,
        PACKET_OUT_DROPPED: 6,
        UNEXPLAINED: 1,
    }
    assert describe({}) == "none"
    ports = per_port(target)
    assert (ports[2].tail, ports[2].switch, ports[1].switch) == (200, 0, 4)
