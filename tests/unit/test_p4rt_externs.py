"""P4Runtime action profiles, counters, meters, registers, value sets, the PRE and digest
configuration over gRPC."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4data_pb2, p4runtime_pb2
from p4rt_helpers import (
    DELETE,
    INSERT,
    MODIFY,
    Harness,
    aid,
    details,
    exact_entry,
    names,
    packet,
    running,
    tid,
    update,
)

E = p4runtime_pb2.Entity


def write_codes(h: Harness, *updates: p4runtime_pb2.Update) -> list[int]:
    with pytest.raises(grpc.RpcError) as err:
        h.write(*updates)
    return [e.canonical_code for e in details(err.value)]


def oid(kind: str, name: str) -> int:
    return names().id_of(kind, name)


def member(mid: int, port: int) -> p4runtime_pb2.ActionProfileMember:
    m = p4runtime_pb2.ActionProfileMember(
        action_profile_id=oid("action_profiles", "ecmp"), member_id=mid
    )
    m.action.action_id = aid("MyIngress.fwd")
    m.action.params.add(param_id=1, value=bytes([port]))
    return m


def group(
    gid: int, *members: tuple[int, int], max_size: int = 0
) -> p4runtime_pb2.ActionProfileGroup:
    g = p4runtime_pb2.ActionProfileGroup(
        action_profile_id=oid("action_profiles", "ecmp"), group_id=gid, max_size=max_size
    )
    for mid, weight in members:
        g.members.add(member_id=mid, weight=weight)
    return g


def sel_entry(kind: int, *, member_id: int = 0, group_id: int = 0) -> p4runtime_pb2.TableEntry:
    te = p4runtime_pb2.TableEntry(table_id=tid("MyIngress.t_sel"))
    te.match.add(field_id=1, exact=p4runtime_pb2.FieldMatch.Exact(value=bytes([kind])))
    if member_id:
        te.action.action_profile_member_id = member_id
    if group_id:
        te.action.action_profile_group_id = group_id
    return te


def test_action_selector_members_groups_and_indirect_entries() -> None:
    with running() as h:
        h.write(
            update(INSERT, action_profile_member=member(1, 7)),
            update(INSERT, action_profile_member=member(2, 8)),
        )
        h.write(update(INSERT, action_profile_group=group(10, (1, 1), (2, 3))))
        h.write(
            update(INSERT, table_entry=sel_entry(1, member_id=1)),
            update(INSERT, table_entry=sel_entry(2, group_id=10)),
        )
        members = h.read(E(action_profile_member=p4runtime_pb2.ActionProfileMember()))
        assert [m.action_profile_member for m in members] == [member(1, 7), member(2, 8)]
        [g] = h.read(
            E(
                action_profile_group=p4runtime_pb2.ActionProfileGroup(
                    action_profile_id=oid("action_profiles", "ecmp")
                )
            )
        )
        assert g.action_profile_group == group(10, (1, 1), (2, 3))
        entries = h.read(E(table_entry=p4runtime_pb2.TableEntry(table_id=tid("MyIngress.t_sel"))))
        assert [e.table_entry for e in entries] == [
            sel_entry(1, member_id=1),
            sel_entry(2, group_id=10),
        ]
        with h.device.lock:
            h.device.receive(1, packet(kind=1))
            h.device.receive(1, packet(kind=2, tport=5))
            ports = sorted(p for p, _ in h.device.service_queues())
        assert ports[0] == 7 and ports[1] in (7, 8)
        direct = exact_entry(3, "MyIngress.fwd", 1, table="MyIngress.t_sel")
        assert write_codes(
            h,
            update(DELETE, action_profile_member=member(1, 7)),  # used by an entry and the group
            update(INSERT, table_entry=sel_entry(3, member_id=99)),
            update(INSERT, table_entry=direct),
            update(INSERT, action_profile_member=member(1, 7)),
            update(INSERT, action_profile_group=group(11, (1, 0))),
            update(INSERT, action_profile_group=group(12, (1, 1), (1, 2))),
            update(MODIFY, action_profile_group=group(10, (1, 1), max_size=5)),
            update(INSERT, action_profile_group=group(13, (42, 1))),
            update(INSERT, action_profile_member=member(0, 7)),
        ) == [
            code_pb2.FAILED_PRECONDITION,
            code_pb2.NOT_FOUND,
            code_pb2.INVALID_ARGUMENT,
            code_pb2.ALREADY_EXISTS,
            code_pb2.INVALID_ARGUMENT,
            code_pb2.INVALID_ARGUMENT,
            code_pb2.INVALID_ARGUMENT,
            code_pb2.NOT_FOUND,
            code_pb2.INVALID_ARGUMENT,
        ]
        h.write(update(MODIFY, action_profile_group=group(10, (2, 1))))
        h.write(update(DELETE, table_entry=sel_entry(1)), update(DELETE, table_entry=sel_entry(2)))
        h.write(update(DELETE, action_profile_group=group(10)))
        h.write(
            update(DELETE, action_profile_member=member(1, 0)),
            update(DELETE, action_profile_member=member(2, 0)),
        )
        assert h.read(E(action_profile_member=p4runtime_pb2.ActionProfileMember())) == []


def test_indexed_counters() -> None:
    cid = oid("counters", "kind_count")
    with running() as h:
        with h.device.lock:
            h.device.receive(1, packet(kind=3))
        [c] = h.read(
            E(
                counter_entry=p4runtime_pb2.CounterEntry(
                    counter_id=cid, index=p4runtime_pb2.Index(index=3)
                )
            )
        )
        assert c.counter_entry.data.packet_count == 1
        assert len(h.read(E(counter_entry=p4runtime_pb2.CounterEntry(counter_id=cid)))) == 16
        assert len(h.read(E(counter_entry=p4runtime_pb2.CounterEntry()))) == 16
        ce = p4runtime_pb2.CounterEntry(counter_id=cid, index=p4runtime_pb2.Index(index=2))
        ce.data.packet_count, ce.data.byte_count = 5, 50
        h.write(update(MODIFY, counter_entry=ce))
        [c] = h.read(
            E(
                counter_entry=p4runtime_pb2.CounterEntry(
                    counter_id=cid, index=p4runtime_pb2.Index(index=2)
                )
            )
        )
        assert (c.counter_entry.data.packet_count, c.counter_entry.data.byte_count) == (5, 50)
        everything = p4runtime_pb2.CounterEntry(counter_id=cid)
        everything.data.packet_count = 0
        h.write(update(MODIFY, counter_entry=everything))  # index unset: every cell
        assert all(
            c.counter_entry.data.packet_count == 0
            for c in h.read(E(counter_entry=p4runtime_pb2.CounterEntry(counter_id=cid)))
        )
        assert write_codes(
            h,
            update(INSERT, counter_entry=ce),
            update(
                MODIFY,
                counter_entry=p4runtime_pb2.CounterEntry(
                    counter_id=cid, index=p4runtime_pb2.Index(index=16)
                ),
            ),
            update(
                MODIFY,
                counter_entry=p4runtime_pb2.CounterEntry(
                    counter_id=cid, index=p4runtime_pb2.Index(index=-1)
                ),
            ),
            update(
                MODIFY,
                counter_entry=p4runtime_pb2.CounterEntry(
                    counter_id=oid("direct_counters", "exact_hits")
                ),
            ),
        ) == [
            code_pb2.INVALID_ARGUMENT,
            code_pb2.OUT_OF_RANGE,
            code_pb2.INVALID_ARGUMENT,
            code_pb2.INVALID_ARGUMENT,
        ]


def test_indexed_meters() -> None:
    mid = oid("meters", "kind_rate")
    with running() as h:
        me = p4runtime_pb2.MeterEntry(meter_id=mid, index=p4runtime_pb2.Index(index=1))
        me.config.CopyFrom(p4runtime_pb2.MeterConfig(cir=10, cburst=1, pir=20, pburst=2))
        h.write(update(MODIFY, meter_entry=me))
        [got] = h.read(
            E(
                meter_entry=p4runtime_pb2.MeterEntry(
                    meter_id=mid, index=p4runtime_pb2.Index(index=1)
                )
            )
        )
        assert got.meter_entry == me
        unconfigured = h.read(
            E(
                meter_entry=p4runtime_pb2.MeterEntry(
                    meter_id=mid, index=p4runtime_pb2.Index(index=0)
                )
            )
        )
        assert not unconfigured[0].meter_entry.HasField("config")
        h.write(
            update(
                MODIFY,
                meter_entry=p4runtime_pb2.MeterEntry(
                    meter_id=mid, index=p4runtime_pb2.Index(index=1)
                ),
            )
        )  # no config: reset
        [got] = h.read(
            E(
                meter_entry=p4runtime_pb2.MeterEntry(
                    meter_id=mid, index=p4runtime_pb2.Index(index=1)
                )
            )
        )
        assert not got.meter_entry.HasField("config")
        bad = p4runtime_pb2.MeterEntry(meter_id=mid)
        bad.config.CopyFrom(p4runtime_pb2.MeterConfig(cir=10, cburst=1, pir=20, pburst=2, eburst=3))
        assert (
            write_codes(h, update(MODIFY, meter_entry=bad), update(DELETE, meter_entry=me))
            == [code_pb2.INVALID_ARGUMENT] * 2
        )


def test_registers_are_supported() -> None:
    rid = oid("registers", "last_dst")
    with running() as h:
        with h.device.lock:
            h.device.receive(1, packet(kind=2, dst=0x0A000001))
        [got] = h.read(
            E(
                register_entry=p4runtime_pb2.RegisterEntry(
                    register_id=rid, index=p4runtime_pb2.Index(index=2)
                )
            )
        )
        assert got.register_entry.data.bitstring == b"\x0a\x00\x00\x01"
        re = p4runtime_pb2.RegisterEntry(
            register_id=rid,
            index=p4runtime_pb2.Index(index=5),
            data=p4data_pb2.P4Data(bitstring=b"\x00\x00\x12\x34"),
        )
        h.write(update(MODIFY, register_entry=re))
        [got] = h.read(
            E(
                register_entry=p4runtime_pb2.RegisterEntry(
                    register_id=rid, index=p4runtime_pb2.Index(index=5)
                )
            )
        )
        assert got.register_entry.data.bitstring == b"\x12\x34"
        assert len(h.read(E(register_entry=p4runtime_pb2.RegisterEntry()))) == 16
        too_big = p4runtime_pb2.RegisterEntry(
            register_id=rid, data=p4data_pb2.P4Data(bitstring=b"\x01" * 5)
        )
        not_bits = p4runtime_pb2.RegisterEntry(register_id=rid, data=p4data_pb2.P4Data(bool=True))
        assert write_codes(
            h,
            update(MODIFY, register_entry=too_big),
            update(MODIFY, register_entry=not_bits),
            update(MODIFY, register_entry=p4runtime_pb2.RegisterEntry(register_id=rid)),
        ) == [code_pb2.OUT_OF_RANGE, code_pb2.INVALID_ARGUMENT, code_pb2.INVALID_ARGUMENT]


def test_value_sets() -> None:
    vid = oid("value_sets", "special_kinds")
    with running() as h:
        vs = p4runtime_pb2.ValueSetEntry(value_set_id=vid)
        vs.members.add().match.add(field_id=1, exact={"value": b"\x09"})
        h.write(update(MODIFY, value_set_entry=vs))
        [got] = h.read(E(value_set_entry=p4runtime_pb2.ValueSetEntry(value_set_id=vid)))
        assert got.value_set_entry == vs
        with h.device.lock:
            h.device.receive(1, packet(kind=9))
            [(port, _)] = h.device.service_queues()
        assert port == 6
        dup = p4runtime_pb2.ValueSetEntry(value_set_id=vid)
        dup.members.add().match.add(field_id=1, exact={"value": b"\x01"})
        dup.members.add().match.add(field_id=1, exact={"value": b"\x01"})
        full = p4runtime_pb2.ValueSetEntry(value_set_id=vid)
        for v in range(5):
            full.members.add().match.add(field_id=1, exact={"value": bytes([v])})
        assert write_codes(
            h,
            update(MODIFY, value_set_entry=dup),
            update(MODIFY, value_set_entry=full),
            update(INSERT, value_set_entry=vs),
        ) == [code_pb2.ALREADY_EXISTS, code_pb2.RESOURCE_EXHAUSTED, code_pb2.INVALID_ARGUMENT]


def test_multicast_groups_and_clone_sessions() -> None:
    with running() as h:
        mg = p4runtime_pb2.MulticastGroupEntry(multicast_group_id=5, metadata=b"m")
        mg.replicas.add(egress_port=3, instance=1)
        mg.replicas.add(egress_port=2, instance=1)
        mg.replicas.add(port=b"\x00\x04", instance=0)
        h.write(update(INSERT, packet_replication_engine_entry={"multicast_group_entry": mg}))
        [got] = h.read(
            E(
                packet_replication_engine_entry={
                    "multicast_group_entry": p4runtime_pb2.MulticastGroupEntry()
                }
            )
        )
        assert [
            (r.egress_port, r.instance)
            for r in got.packet_replication_engine_entry.multicast_group_entry.replicas
        ] == [(3, 1), (2, 1), (4, 0)]
        assert got.packet_replication_engine_entry.multicast_group_entry.metadata == b"m"
        mg2 = p4runtime_pb2.MulticastGroupEntry(multicast_group_id=5)
        mg2.replicas.add(egress_port=9)
        h.write(update(MODIFY, packet_replication_engine_entry={"multicast_group_entry": mg2}))
        [got] = h.read(
            E(
                packet_replication_engine_entry={
                    "multicast_group_entry": p4runtime_pb2.MulticastGroupEntry(multicast_group_id=5)
                }
            )
        )
        assert got.packet_replication_engine_entry.multicast_group_entry == mg2
        cs = p4runtime_pb2.CloneSessionEntry(
            session_id=7, class_of_service=2, packet_length_bytes=64
        )
        cs.replicas.add(egress_port=CPU, instance=1)
        h.write(update(INSERT, packet_replication_engine_entry={"clone_session_entry": cs}))
        [got] = h.read(
            E(
                packet_replication_engine_entry={
                    "clone_session_entry": p4runtime_pb2.CloneSessionEntry()
                }
            )
        )
        assert got.packet_replication_engine_entry.clone_session_entry == cs
        zero = p4runtime_pb2.MulticastGroupEntry(multicast_group_id=0)
        bad_port = p4runtime_pb2.MulticastGroupEntry(multicast_group_id=6)
        bad_port.replicas.add(egress_port=100000)
        assert write_codes(
            h,
            update(INSERT, packet_replication_engine_entry={"multicast_group_entry": mg}),
            update(INSERT, packet_replication_engine_entry={"multicast_group_entry": zero}),
            update(INSERT, packet_replication_engine_entry={"multicast_group_entry": bad_port}),
            update(
                DELETE,
                packet_replication_engine_entry={
                    "clone_session_entry": p4runtime_pb2.CloneSessionEntry(session_id=8)
                },
            ),
            update(INSERT, packet_replication_engine_entry={}),
        ) == [
            code_pb2.ALREADY_EXISTS,
            code_pb2.INVALID_ARGUMENT,
            code_pb2.INVALID_ARGUMENT,
            code_pb2.NOT_FOUND,
            code_pb2.INVALID_ARGUMENT,
        ]
        h.write(
            update(DELETE, packet_replication_engine_entry={"multicast_group_entry": mg2}),
            update(DELETE, packet_replication_engine_entry={"clone_session_entry": cs}),
        )
        assert (
            h.read(
                E(
                    packet_replication_engine_entry={
                        "multicast_group_entry": p4runtime_pb2.MulticastGroupEntry()
                    }
                )
            )
            == []
        )


CPU = 255


def test_digest_entries() -> None:
    did = oid("digests", "learn_t")
    with running() as h:
        de = p4runtime_pb2.DigestEntry(digest_id=did)
        de.config.max_list_size = 4
        de.config.max_timeout_ns = 1000
        h.write(update(INSERT, digest_entry=de))
        [got] = h.read(E(digest_entry=p4runtime_pb2.DigestEntry()))
        assert got.digest_entry == de
        de.config.max_list_size = 1
        h.write(update(MODIFY, digest_entry=de))
        assert write_codes(h, update(INSERT, digest_entry=de)) == [code_pb2.ALREADY_EXISTS]
        h.write(update(DELETE, digest_entry=de))
        assert h.read(E(digest_entry=p4runtime_pb2.DigestEntry())) == []
        assert write_codes(
            h,
            update(MODIFY, digest_entry=de),
            update(INSERT, digest_entry=p4runtime_pb2.DigestEntry(digest_id=1)),
        ) == [code_pb2.NOT_FOUND, code_pb2.INVALID_ARGUMENT]


def test_extern_entries_are_read_only_target_counters() -> None:
    # the target's drop counters (tests/unit/test_drop_counters.py) are its only extern type
    with running() as h:
        assert write_codes(h, update(INSERT, extern_entry=p4runtime_pb2.ExternEntry())) == [
            code_pb2.INVALID_ARGUMENT
        ]
