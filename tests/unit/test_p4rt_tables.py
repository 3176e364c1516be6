"""P4Runtime table entries over gRPC: every match kind, defaults, const tables, direct resources,
batch error reporting and RPC-level checks."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2
from p4rt_helpers import (
    DELETE,
    DEVICE_ID,
    INSERT,
    MODIFY,
    Harness,
    aid,
    details,
    exact_entry,
    packet,
    running,
    tid,
    uint128,
    update,
)

from switch.p4rt.entities import HANDLERS

FM = p4runtime_pb2.FieldMatch
TE = p4runtime_pb2.TableEntry


def codes(err: grpc.RpcError) -> list[int]:
    return [e.canonical_code for e in details(err)]


def write_codes(h: Harness, *updates: p4runtime_pb2.Update) -> list[int]:
    with pytest.raises(grpc.RpcError) as err:
        h.write(*updates)
    assert err.value.code() == grpc.StatusCode.UNKNOWN
    return codes(err.value)


def read_table(h: Harness, table: str, **fields: object) -> list[TE]:
    ents = h.read(p4runtime_pb2.Entity(table_entry=TE(table_id=tid(table), **fields)))
    return [e.table_entry for e in ents]


def test_every_entity_kind_has_a_handler() -> None:
    kinds = {f.name for f in p4runtime_pb2.Entity.DESCRIPTOR.oneofs_by_name["entity"].fields}
    assert set(HANDLERS) == kinds


def test_exact_entries_insert_read_modify_delete() -> None:
    with running() as h:
        h.write(update(INSERT, table_entry=exact_entry(5, "MyIngress.set_out", 0x42)))
        [got] = read_table(h, "MyIngress.t_exact")
        assert got == exact_entry(5, "MyIngress.set_out", 0x42)
        h.write(update(MODIFY, table_entry=exact_entry(5, "MyIngress.fwd", 7)))
        [got] = read_table(h, "MyIngress.t_exact")
        assert got.action.action.action_id == aid("MyIngress.fwd")
        h.write(update(DELETE, table_entry=exact_entry(5)))
        assert read_table(h, "MyIngress.t_exact") == []
        assert write_codes(h, update(MODIFY, table_entry=exact_entry(5))) == [code_pb2.NOT_FOUND]
        assert write_codes(h, update(DELETE, table_entry=exact_entry(5))) == [code_pb2.NOT_FOUND]


def test_zero_padded_values_are_accepted_and_read_back_canonical() -> None:
    with running() as h:
        te = exact_entry(0)
        te.match[0].exact.value = b"\x00\x00\x05"
        te.action.action.params.add(param_id=1, value=b"\x00\x09")
        h.write(update(INSERT, table_entry=te))
        [got] = read_table(h, "MyIngress.t_exact")
        assert got.match[0].exact.value == b"\x05"
        assert got.action.action.params[0].value == b"\x09"
        too_wide = exact_entry(0, "MyIngress.set_out", 1)
        too_wide.match[0].exact.value = b"\x01\x05"
        assert write_codes(h, update(INSERT, table_entry=too_wide)) == [code_pb2.OUT_OF_RANGE]


def _entry(table: str, *fms: FM, priority: int = 0, v: int = 1) -> TE:
    te = TE(table_id=tid(table), match=list(fms), priority=priority)
    te.action.action.action_id = aid("MyIngress.set_out")
    te.action.action.params.add(param_id=1, value=bytes([v]))
    return te


KIND3 = FM(field_id=2, exact=FM.Exact(value=b"\x03"))
LPM_ENTRY = TE(
    table_id=tid("MyIngress.t_lpm"),
    match=[FM(field_id=1, lpm=FM.LPM(value=b"\x0a\x00\x00\x00", prefix_len=8))],
)
LPM_ENTRY.action.action.action_id = aid("MyIngress.set_out_rated")
LPM_ENTRY.action.action.params.add(param_id=1, value=b"\x01")
NON_EXACT_ENTRIES = [
    LPM_ENTRY,
    _entry(
        "MyIngress.t_ternary",
        FM(field_id=1, ternary=FM.Ternary(value=b"\x01\x00", mask=b"\xff\x00")),
        KIND3,
        priority=10,
    ),
    _entry("MyIngress.t_ternary", KIND3, priority=5),  # ternary field omitted: don't care
    _entry(
        "MyIngress.t_range",
        FM(field_id=1, range=FM.Range(low=b"\x10", high=b"\x01\x00")),
        priority=3,
    ),
    _entry(
        "MyIngress.t_optional",
        FM(field_id=1, optional=FM.Optional(value=b"\x07")),
        KIND3,
        priority=2,
    ),
    _entry("MyIngress.t_optional", KIND3, priority=1),
]


@pytest.mark.parametrize("entry", NON_EXACT_ENTRIES, ids=lambda e: str(e.table_id))
def test_each_match_kind_reads_back_as_written(entry: TE) -> None:
    with running() as h:
        h.write(update(INSERT, table_entry=entry))
        got = h.read(p4runtime_pb2.Entity(table_entry=TE(table_id=entry.table_id)))
        assert [e.table_entry for e in got] == [entry]
        h.write(update(DELETE, table_entry=entry))
        assert h.read(p4runtime_pb2.Entity(table_entry=TE(table_id=entry.table_id))) == []


def test_priorities_are_required_exactly_for_ternary_range_optional() -> None:
    with running() as h:
        no_prio = _entry("MyIngress.t_ternary", KIND3, priority=0)
        prio_on_exact = exact_entry(1, "MyIngress.set_out", 1)
        prio_on_exact.priority = 5
        negative = _entry("MyIngress.t_range", priority=-1)
        assert (
            write_codes(
                h,
                update(INSERT, table_entry=no_prio),
                update(INSERT, table_entry=prio_on_exact),
                update(INSERT, table_entry=negative),
            )
            == [code_pb2.INVALID_ARGUMENT] * 3
        )


def test_wildcard_and_filtered_reads() -> None:
    with running() as h:
        h.write(
            update(INSERT, table_entry=exact_entry(1, "MyIngress.set_out", 1)),
            update(INSERT, table_entry=exact_entry(2, "MyIngress.fwd", 2)),
            *[update(INSERT, table_entry=e) for e in NON_EXACT_ENTRIES[1:3]],
        )
        everything = h.read(p4runtime_pb2.Entity(table_entry=TE()))
        assert len(everything) == 5  # + the const entry of t_const
        assert any(e.table_entry.is_const for e in everything)
        one = read_table(h, "MyIngress.t_exact", match=exact_entry(2).match)
        assert [e.match[0].exact.value for e in one] == [b"\x02"]
        by_action = read_table(
            h,
            "MyIngress.t_exact",
            action=p4runtime_pb2.TableAction(
                action=p4runtime_pb2.Action(action_id=aid("MyIngress.fwd"))
            ),
        )
        assert len(by_action) == 1
        assert len(read_table(h, "MyIngress.t_ternary", priority=10)) == 1
        assert read_table(h, "MyIngress.t_exact", match=exact_entry(9).match) == []


def test_cookies_are_stored_and_filter_reads() -> None:
    with running() as h:
        te = exact_entry(1, "MyIngress.set_out", 1)
        te.controller_metadata = 77
        te.metadata = b"\x00opaque"
        h.write(
            update(INSERT, table_entry=te),
            update(INSERT, table_entry=exact_entry(2, "MyIngress.set_out", 1)),
        )
        [got] = read_table(h, "MyIngress.t_exact", metadata=b"\x00opaque")
        assert (got.controller_metadata, got.metadata) == (77, b"\x00opaque")
        assert len(read_table(h, "MyIngress.t_exact", controller_metadata=77)) == 1


def test_default_entry_rules() -> None:
    with running() as h:
        default = TE(table_id=tid("MyIngress.t_exact"), is_default_action=True)
        [got] = read_table(h, "MyIngress.t_exact", is_default_action=True)
        assert got.action.action.action_id == aid("MyIngress.miss")
        new = TE(table_id=tid("MyIngress.t_exact"), is_default_action=True)
        new.action.action.action_id = aid("MyIngress.fwd")
        new.action.action.params.add(param_id=1, value=b"\x03")
        h.write(update(MODIFY, table_entry=new))
        [got] = read_table(h, "MyIngress.t_exact", is_default_action=True)
        assert got == new
        assert read_table(h, "MyIngress.t_exact") == []  # the default is not a match entry
        table_only = TE(table_id=tid("MyIngress.t_exact"), is_default_action=True)
        table_only.action.action.action_id = aid("MyIngress.hit_only")
        with_match = TE(
            table_id=tid("MyIngress.t_exact"),
            is_default_action=True,
            match=exact_entry(1).match,
            action=new.action,
        )
        const_default = TE(table_id=tid("MyIngress.t_const_default"), is_default_action=True)
        const_default.action.action.action_id = aid("NoAction")
        assert write_codes(
            h,
            update(MODIFY, table_entry=table_only),
            update(INSERT, table_entry=new),
            update(DELETE, table_entry=default),
            update(MODIFY, table_entry=with_match),
            update(MODIFY, table_entry=const_default),
        ) == [
            code_pb2.PERMISSION_DENIED,
            code_pb2.INVALID_ARGUMENT,
            code_pb2.INVALID_ARGUMENT,
            code_pb2.INVALID_ARGUMENT,
            code_pb2.PERMISSION_DENIED,
        ]
        h.write(update(MODIFY, table_entry=default))  # no action: back to the program's default
        [got] = read_table(h, "MyIngress.t_exact", is_default_action=True)
        assert got.action.action.action_id == aid("MyIngress.miss")
        [got] = read_table(h, "MyIngress.t_const_default", is_default_action=True)
        assert got.is_const


def test_entry_only_and_default_only_action_scopes() -> None:
    with running() as h:
        assert write_codes(h, update(INSERT, table_entry=exact_entry(1, "MyIngress.miss"))) == [
            code_pb2.PERMISSION_DENIED
        ]
        h.write(update(INSERT, table_entry=exact_entry(1, "MyIngress.hit_only")))


def test_const_tables_refuse_entry_writes() -> None:
    with running() as h:
        [const] = read_table(h, "MyIngress.t_const")
        assert const.is_const and const.match[0].exact.value == b"\xc0"
        new = exact_entry(1, "MyIngress.set_out", 1, table="MyIngress.t_const")
        assert (
            write_codes(
                h,
                update(INSERT, table_entry=new),
                update(
                    MODIFY,
                    table_entry=exact_entry(
                        0xC0, "MyIngress.set_out", 2, table="MyIngress.t_const"
                    ),
                ),
                update(DELETE, table_entry=exact_entry(0xC0, table="MyIngress.t_const")),
            )
            == [code_pb2.PERMISSION_DENIED] * 3
        )
        bad = exact_entry(0xC0, "MyIngress.set_out", 2, table="MyIngress.t_const")
        bad.is_const = True
        assert write_codes(h, update(MODIFY, table_entry=bad)) == [code_pb2.INVALID_ARGUMENT]


def test_batch_errors_are_reported_per_update_in_order() -> None:
    with running() as h:
        h.write(update(INSERT, table_entry=exact_entry(1, "MyIngress.set_out", 1)))
        with pytest.raises(grpc.RpcError) as err:
            h.write(
                update(INSERT, table_entry=exact_entry(2, "MyIngress.set_out", 2)),
                update(INSERT, table_entry=exact_entry(1, "MyIngress.set_out", 3)),
                update(INSERT, table_entry=exact_entry(3, "MyIngress.set_out", 4)),
                update(INSERT, table_entry=TE(table_id=12345)),
                p4runtime_pb2.Update(type=INSERT),
                p4runtime_pb2.Update(
                    type=p4runtime_pb2.Update.UNSPECIFIED,
                    entity=p4runtime_pb2.Entity(table_entry=exact_entry(4, "MyIngress.drop")),
                ),
            )
        assert err.value.code() == grpc.StatusCode.UNKNOWN
        errs = details(err.value)
        assert [e.canonical_code for e in errs] == [
            code_pb2.OK,
            code_pb2.ALREADY_EXISTS,
            code_pb2.OK,
            code_pb2.INVALID_ARGUMENT,
            code_pb2.INVALID_ARGUMENT,
            code_pb2.INVALID_ARGUMENT,
        ]
        assert errs[0].message == "" and errs[1].message
        kinds = sorted(e.match[0].exact.value for e in read_table(h, "MyIngress.t_exact"))
        assert kinds == [b"\x01", b"\x02", b"\x03"]
        [one] = read_table(h, "MyIngress.t_exact", match=exact_entry(1).match)
        assert one.action.action.params[0].value == b"\x01"  # the failed insert changed nothing


def test_failed_modify_leaves_the_entry_unchanged() -> None:
    with running() as h:
        h.write(update(INSERT, table_entry=exact_entry(1, "MyIngress.set_out", 1)))
        before = read_table(h, "MyIngress.t_exact")
        bad = exact_entry(1, "MyIngress.fwd", 0x300)  # 0x300 does not fit bit<9>
        assert write_codes(h, update(MODIFY, table_entry=bad)) == [code_pb2.OUT_OF_RANGE]
        assert read_table(h, "MyIngress.t_exact") == before


def test_direct_counter_via_table_entry_and_direct_counter_entry() -> None:
    with running() as h:
        te = exact_entry(1, "MyIngress.set_out", 1)
        te.counter_data.packet_count = 10
        te.counter_data.byte_count = 1000
        h.write(update(INSERT, table_entry=te))
        with h.device.lock:
            h.device.receive(1, packet(kind=1))
        [got] = read_table(h, "MyIngress.t_exact", counter_data=p4runtime_pb2.CounterData())
        assert got.counter_data.packet_count == 11
        assert got.counter_data.byte_count > 1000
        [plain] = read_table(h, "MyIngress.t_exact")
        assert not plain.HasField("counter_data")
        dce = p4runtime_pb2.DirectCounterEntry(table_entry=exact_entry(1))
        dce.data.packet_count = 3
        dce.data.byte_count = 4
        h.write(update(MODIFY, direct_counter_entry=dce))
        [ent] = h.read(
            p4runtime_pb2.Entity(
                direct_counter_entry=p4runtime_pb2.DirectCounterEntry(
                    table_entry=TE(table_id=tid("MyIngress.t_exact"))
                )
            )
        )
        assert (
            ent.direct_counter_entry.data.packet_count,
            ent.direct_counter_entry.data.byte_count,
        ) == (3, 4)
        h.write(update(MODIFY, table_entry=exact_entry(1, "MyIngress.fwd", 2)))  # keeps counts
        [got] = read_table(h, "MyIngress.t_exact", counter_data=p4runtime_pb2.CounterData())
        assert got.counter_data.packet_count == 3
        no_counter = _entry("MyIngress.t_range", priority=1)
        no_counter.counter_data.packet_count = 1
        missing = p4runtime_pb2.DirectCounterEntry(table_entry=exact_entry(9))
        assert write_codes(
            h,
            update(INSERT, table_entry=no_counter),
            update(MODIFY, direct_counter_entry=missing),
            update(INSERT, direct_counter_entry=dce),
        ) == [code_pb2.INVALID_ARGUMENT, code_pb2.NOT_FOUND, code_pb2.INVALID_ARGUMENT]


def test_direct_meter_via_table_entry_and_direct_meter_entry() -> None:
    with running() as h:
        te = TE()
        te.CopyFrom(LPM_ENTRY)
        te.meter_config.CopyFrom(
            p4runtime_pb2.MeterConfig(cir=1000, cburst=100, pir=2000, pburst=200)
        )
        h.write(update(INSERT, table_entry=te))
        [got] = read_table(h, "MyIngress.t_lpm", meter_config=p4runtime_pb2.MeterConfig())
        assert got.meter_config == te.meter_config
        dme = p4runtime_pb2.DirectMeterEntry(table_entry=TE(table_id=te.table_id, match=te.match))
        [ent] = h.read(p4runtime_pb2.Entity(direct_meter_entry=dme))
        assert ent.direct_meter_entry.config == te.meter_config
        dme.config.CopyFrom(p4runtime_pb2.MeterConfig(cir=5, cburst=5, pir=6, pburst=6))
        h.write(update(MODIFY, direct_meter_entry=dme))
        [ent] = h.read(p4runtime_pb2.Entity(direct_meter_entry=dme))
        assert ent.direct_meter_entry.config.pir == 6
        plain = TE()
        plain.CopyFrom(LPM_ENTRY)
        h.write(update(MODIFY, table_entry=plain))  # meter_config unset: back to the default
        [got] = read_table(h, "MyIngress.t_lpm", meter_config=p4runtime_pb2.MeterConfig())
        assert not got.HasField("meter_config")
        bad = TE()
        bad.CopyFrom(te)
        bad.meter_config.cir = 5000  # above pir
        assert write_codes(h, update(MODIFY, table_entry=bad)) == [code_pb2.INVALID_ARGUMENT]


def test_rpc_level_checks() -> None:
    with running(primary=False, pipeline=False) as h:
        with pytest.raises(grpc.RpcError) as err:
            h.write(update(INSERT, table_entry=exact_entry(1, "MyIngress.drop")))
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        h.primary(election=5)
        with pytest.raises(grpc.RpcError) as err:
            h.write(update(INSERT, table_entry=exact_entry(1, "MyIngress.drop")), election=5)
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "No forwarding pipeline config set" in (err.value.details() or "")
        with pytest.raises(grpc.RpcError) as err:
            h.read(p4runtime_pb2.Entity(table_entry=TE()))
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        h.set_pipeline(election=5)
        with pytest.raises(grpc.RpcError) as err:
            h.write(update(INSERT, table_entry=exact_entry(1, "MyIngress.drop")), election=4)
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        req = p4runtime_pb2.WriteRequest(device_id=DEVICE_ID + 1, election_id=uint128(5))
        with pytest.raises(grpc.RpcError) as err:
            h.stub.Write(req)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.RpcError) as err:
            list(h.stub.Read(p4runtime_pb2.ReadRequest(device_id=7)))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        req = p4runtime_pb2.WriteRequest(device_id=DEVICE_ID, election_id=uint128(5), role="nobody")
        with pytest.raises(grpc.RpcError) as err:
            h.stub.Write(req)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        req = p4runtime_pb2.WriteRequest(
            device_id=DEVICE_ID,
            election_id=uint128(5),
            atomicity=p4runtime_pb2.WriteRequest.ROLLBACK_ON_ERROR,
        )
        with pytest.raises(grpc.RpcError) as err:
            h.stub.Write(req)
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
        h.write(update(INSERT, table_entry=exact_entry(1, "MyIngress.drop")), election=5)


def test_read_batch_with_a_bad_request_returns_the_rest_and_details() -> None:
    with running() as h:
        h.write(update(INSERT, table_entry=exact_entry(1, "MyIngress.drop")))
        req = p4runtime_pb2.ReadRequest(
            device_id=DEVICE_ID,
            entities=[
                p4runtime_pb2.Entity(table_entry=TE(table_id=tid("MyIngress.t_exact"))),
                p4runtime_pb2.Entity(table_entry=TE(table_id=999)),
                p4runtime_pb2.Entity(),
            ],
        )
        got = []
        with pytest.raises(grpc.RpcError) as err:
            for rep in h.stub.Read(req):
                got.extend(rep.entities)
        assert len(got) == 1
        assert err.value.code() == grpc.StatusCode.UNKNOWN
        assert codes(err.value) == [
            code_pb2.OK,
            code_pb2.INVALID_ARGUMENT,
            code_pb2.INVALID_ARGUMENT,
        ]


def test_entries_forward_packets() -> None:
    with running() as h:
        h.write(
            update(INSERT, table_entry=exact_entry(4, "MyIngress.fwd", 9)),
            update(INSERT, table_entry=NON_EXACT_ENTRIES[3]),
        )  # t_range sets out=1
        with h.device.lock:
            h.device.receive(1, packet(kind=4, rport=0x20))
            [(port, data)] = h.device.service_queues()
        assert port == 9
        assert data[-1] == 1
