"""The P4Runtime server driven by the real client, p4runtime-shell, as an operator would use it.

p4runtime-shell keeps its connection and P4Info in module globals; every test sets it up against
its own server and tears it down again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import p4runtime_sh.p4runtime as p4rt
import p4runtime_sh.shell as sh
import pytest
from p4rt_helpers import CPU_PORT, DEVICE_ID, DataPath, full_config, packet

from switch.compile.package import load_device_config
from switch.device.device import Device
from switch.p4info import write_p4info
from switch.p4rt import P4RuntimeServer


@dataclass
class Switch:
    device: Device
    server: P4RuntimeServer
    datapath: DataPath


@pytest.fixture
def switch(tmp_path: Path) -> Iterator[Switch]:
    p4info = tmp_path / "p4rt_full.p4info.txtpb"
    write_p4info(load_device_config(full_config()).schema, str(p4info))
    config = tmp_path / "p4rt_full.json"
    config.write_bytes(full_config())
    device = Device(DEVICE_ID, cpu_port=CPU_PORT)
    server = P4RuntimeServer(device, "127.0.0.1:0").start()
    datapath = DataPath(device).start()
    sh.setup(
        device_id=DEVICE_ID,
        grpc_addr=f"127.0.0.1:{server.port}",
        election_id=(0, 1),
        config=sh.FwdPipeConfig(str(p4info), str(config)),
        verbose=False,
    )
    try:
        yield Switch(device, server, datapath)
    finally:
        sh.teardown()
        datapath.stop()
        server.stop()


def entries(table: str) -> list[object]:
    return list(sh.TableEntry(table).read())


def match_values(msg: object) -> list[tuple[int, str, tuple[int, ...]]]:
    """A TableEntry's match as integers (the shell may send zero-padded bytestrings)."""
    out = []
    for fm in msg.match:  # type: ignore[attr-defined]
        kind = fm.WhichOneof("field_match_type")
        sub = getattr(fm, kind)
        values = tuple(
            int.from_bytes(v, "big") if isinstance(v, bytes) else v for _, v in sub.ListFields()
        )
        out.append((fm.field_id, kind, values))
    return out


def test_setup_pushes_the_pipeline(switch: Switch) -> None:
    assert switch.device.pipeline is not None
    assert sh.APIVersion() == "1.3.0"


def test_exact_entries(switch: Switch) -> None:
    te = sh.TableEntry("MyIngress.t_exact")(action="MyIngress.fwd")
    te.match["hdr.h.kind"] = "5"
    te.action["port"] = "3"
    te.insert()
    [got] = entries("MyIngress.t_exact")
    assert got.match["hdr.h.kind"].exact.value == b"\x05"
    assert got.action.msg().params[0].value == b"\x03"
    te.action["port"] = "4"
    te.modify()
    [got] = entries("MyIngress.t_exact")
    assert got.action.msg().params[0].value == b"\x04"
    with pytest.raises(p4rt.P4RuntimeWriteException) as err:
        te.insert()
    assert "ALREADY_EXISTS" in str(err.value)
    te.delete()
    assert entries("MyIngress.t_exact") == []


@pytest.mark.parametrize(
    ("table", "field", "value", "priority"),
    [
        ("MyIngress.t_lpm", "hdr.h.dst", "10.1.0.0/16", 0),
        ("MyIngress.t_ternary", "hdr.h.tport", "0x100&&&0xff00", 10),
        ("MyIngress.t_range", "hdr.h.rport", "0x10..0x100", 5),
        ("MyIngress.t_optional", "hdr.h.opt", "7", 3),
    ],
)
def test_every_match_kind(
    switch: Switch, table: str, field: str, value: str, priority: int
) -> None:
    action = "MyIngress.set_out_rated" if table.endswith("lpm") else "MyIngress.set_out"
    te = sh.TableEntry(table)(action=action)
    te.match[field] = value
    if table.endswith(("ternary", "optional")):
        te.match["hdr.h.kind"] = "1"
    te.action["v"] = "0x33"
    if priority:
        te.priority = priority
    te.insert()
    [got] = entries(table)
    assert match_values(got.msg()) == match_values(te.msg())
    assert got.priority == priority
    te.action["v"] = "0x34"
    te.modify()
    [got] = entries(table)
    assert got.action.msg().params[0].value == b"\x34"
    te.delete()
    assert entries(table) == []


def test_default_action(switch: Switch) -> None:
    te = sh.TableEntry("MyIngress.t_exact")(is_default=True, action="MyIngress.fwd")
    te.action["port"] = "2"
    te.modify()
    [got] = list(sh.TableEntry("MyIngress.t_exact")(is_default=True).read())
    assert got.action.action_name == "MyIngress.fwd"
    sh.TableEntry("MyIngress.t_exact")(is_default=True).modify()  # back to the P4 default
    [got] = list(sh.TableEntry("MyIngress.t_exact")(is_default=True).read())
    assert got.action.action_name == "MyIngress.miss"
    const = sh.TableEntry("MyIngress.t_const_default")(is_default=True, action="NoAction")
    with pytest.raises(p4rt.P4RuntimeWriteException) as err:
        const.modify()
    assert "PERMISSION_DENIED" in str(err.value)


def test_counters_and_direct_counters(switch: Switch) -> None:
    te = sh.TableEntry("MyIngress.t_exact")(action="MyIngress.set_out")
    te.match["hdr.h.kind"] = "3"
    te.action["v"] = "1"
    te.insert()
    switch.datapath.inject(1, packet(kind=3))
    switch.datapath.frames.get(timeout=3)
    counts = list(sh.CounterEntry("MyIngress.kind_count").read())
    assert len(counts) == 16
    assert counts[3].packet_count == 1
    c = sh.CounterEntry("MyIngress.kind_count")
    c.index = 3
    c.packet_count = 100
    c.byte_count = 200
    c.modify()
    c2 = sh.CounterEntry("MyIngress.kind_count")
    c2.index = 3
    [got] = list(c2.read())
    assert (got.packet_count, got.byte_count) == (100, 200)
    dc = sh.DirectCounterEntry("MyIngress.exact_hits")
    [got] = list(dc.read())
    assert got.packet_count == 1
    dc = sh.DirectCounterEntry("MyIngress.exact_hits")
    dc.table_entry = te
    dc.packet_count = 7
    dc.byte_count = 70
    dc.modify()
    with_counts = sh.TableEntry("MyIngress.t_exact")
    assert with_counts.counter_data.packet_count == 0  # asks the read for counter data
    [got] = list(with_counts.read())
    assert (got.counter_data.packet_count, got.counter_data.byte_count) == (7, 70)


def test_meters(switch: Switch) -> None:
    m = sh.MeterEntry("MyIngress.kind_rate")
    m.index = 2
    m.cir, m.cburst, m.pir, m.pburst = 100, 10, 200, 20
    m.modify()
    m2 = sh.MeterEntry("MyIngress.kind_rate")
    m2.index = 2
    [got] = list(m2.read())
    assert (got.cir, got.cburst, got.pir, got.pburst) == (100, 10, 200, 20)


def test_action_profile_members_and_groups(switch: Switch) -> None:
    for mid, port in ((1, 7), (2, 8)):
        m = sh.ActionProfileMember("MyIngress.ecmp")(member_id=mid, action="MyIngress.fwd")
        m.action["port"] = str(port)
        m.insert()
    g = sh.ActionProfileGroup("MyIngress.ecmp")(group_id=10)
    g.add(1).add(2, weight=2)
    g.insert()
    te = sh.TableEntry("MyIngress.t_sel")
    te.match["hdr.h.kind"] = "9"
    te.group_id = 10
    te.insert()
    [got] = list(sh.ActionProfileGroup("MyIngress.ecmp").read())
    assert sorted((m.member_id, m.weight) for m in got.msg().members) == [(1, 1), (2, 2)]
    switch.datapath.inject(1, packet(kind=9))
    port, _ = switch.datapath.frames.get(timeout=3)
    assert port in (7, 8)


def test_multicast_groups_and_clone_sessions(switch: Switch) -> None:
    sh.MulticastGroupEntry(1).add(2).add(3, 1).insert()
    [got] = list(sh.MulticastGroupEntry(1).read())
    assert [(r.egress_port, r.instance) for r in got.replicas] == [(2, 0), (3, 1)]
    sh.MulticastGroupEntry(1).add(4).modify()
    [got] = list(sh.MulticastGroupEntry().read())
    assert [r.egress_port for r in got.replicas] == [4]
    sh.MulticastGroupEntry(1).delete()
    assert list(sh.MulticastGroupEntry().read()) == []
    cs = sh.CloneSessionEntry(5).add(CPU_PORT)
    cs.cos = 1
    cs.packet_length_bytes = 128
    cs.insert()
    [got] = list(sh.CloneSessionEntry(5).read())
    assert ([r.egress_port for r in got.replicas], got.cos, got.packet_length_bytes) == (
        [CPU_PORT],
        1,
        128,
    )
    with pytest.raises(p4rt.P4RuntimeWriteException):
        cs.insert()


def test_packet_out_comes_back_as_packet_in(switch: Switch) -> None:
    pin = sh.PacketIn()
    frame = packet(kind=1, payload=b"from the controller")
    sh.PacketOut(frame, egress_port=str(CPU_PORT), _pad="0").send()
    msgs = list(pin.sniff(timeout=2))
    assert len(msgs) == 1
    assert msgs[0].packet.payload == frame
    assert msgs[0].packet.metadata[0].value == bytes([CPU_PORT])
    sh.PacketOut(frame, egress_port="4", _pad="0").send()
    assert switch.datapath.frames.get(timeout=3) == (4, frame)


def test_digests_stream_and_are_acknowledged(switch: Switch) -> None:
    de = sh.DigestEntry("learn_t")
    de.max_list_size = 1
    de.ack_timeout_ns = 10**10
    de.insert()
    [got] = list(sh.DigestEntry("learn_t").read())
    assert got.max_list_size == 1
    dl = sh.DigestList()
    switch.datapath.inject(6, packet(kind=0x77))
    msgs = list(dl.sniff(timeout=2))
    assert len(msgs) == 1
    [data] = msgs[0].digest.data
    assert [m.bitstring for m in data.struct.members] == [b"\x77", b"\x06"]
    deadline = time.time() + 3  # DigestList acknowledges every list it receives
    while switch.server.service.digests.stats.acks < 1 and time.time() < deadline:
        time.sleep(0.01)
    assert switch.server.service.digests.stats.acks == 1
