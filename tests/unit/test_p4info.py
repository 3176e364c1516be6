"""Tests of switch.p4info: p4c-compatible ids, aliases, layout, file formats and lookups."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from google.protobuf import json_format, text_format
from p4.config.v1 import p4info_pb2
from p4runtime_sh import context

from switch.p4info import (
    P4INFO_TEXT_HEADER,
    P4InfoError,
    P4InfoIndex,
    P4InfoLookupError,
    Prefix,
    build_p4info,
    compute_ids,
    jenkins_one_at_a_time,
    make_id,
    p4info_text,
    read_p4info,
    render_annotation,
    shortest_unique_suffixes,
    write_p4info,
)
from switch.schema import (
    ActionCall,
    ActionProfileSpec,
    ActionRef,
    ActionScope,
    ActionSpec,
    Annotation,
    ConstEntry,
    ControllerHeaderSpec,
    CounterSpec,
    CounterUnit,
    DigestSpec,
    DirectCounterSpec,
    DirectMeterSpec,
    KeySpec,
    MatchKind,
    MeterSpec,
    MeterUnit,
    ParamSpec,
    ProgramSchema,
    RegisterSpec,
    StructField,
    TableSpec,
    ValueSetSpec,
)


def _quoted(text: str) -> tuple[str, ...]:
    return (f'"{text}"',)


NO_WARN = Annotation("noWarn", _quoted("unused"))


def basic_router() -> ProgramSchema:
    """The control-plane schema of the P4 tutorials' basic.p4 (an IPv4 LPM router)."""
    return ProgramSchema(
        actions=[
            ActionSpec("NoAction", (), (NO_WARN,)),
            ActionSpec("MyIngress.drop", ()),
            ActionSpec(
                "MyIngress.ipv4_forward",
                (ParamSpec(1, "dstAddr", 48), ParamSpec(2, "port", 9)),
            ),
        ],
        tables=[
            TableSpec(
                name="MyIngress.ipv4_lpm",
                keys=(KeySpec(1, "hdr.ipv4.dstAddr", 32, MatchKind.LPM),),
                actions=(
                    ActionRef("MyIngress.ipv4_forward"),
                    ActionRef("MyIngress.drop"),
                    ActionRef("NoAction"),
                ),
                default_action=ActionCall("MyIngress.drop"),
                const_default_action=False,
                size=1024,
                is_const=False,
            )
        ],
    )


# What p4c (current, v1model) writes for basic.p4, rebuilt by hand from its documented output:
# ids from the hash, LPM key id 1 width 32, action refs in the table's order, actions with
# the localized NoAction first, the non-const default as initial_default_action and an empty
# type_info at the end.
BASIC_P4INFO = """\
pkg_info {
  arch: "v1model"
}
tables {
  preamble {
    id: 37375156
    name: "MyIngress.ipv4_lpm"
    alias: "ipv4_lpm"
  }
  match_fields {
    id: 1
    name: "hdr.ipv4.dstAddr"
    bitwidth: 32
    match_type: LPM
  }
  action_refs {
    id: 28792405
  }
  action_refs {
    id: 25652968
  }
  action_refs {
    id: 21257015
  }
  initial_default_action {
    action_id: 25652968
  }
  size: 1024
}
actions {
  preamble {
    id: 21257015
    name: "NoAction"
    alias: "NoAction"
    annotations: "@noWarn(\\"unused\\")"
  }
}
actions {
  preamble {
    id: 25652968
    name: "MyIngress.drop"
    alias: "drop"
  }
}
actions {
  preamble {
    id: 28792405
    name: "MyIngress.ipv4_forward"
    alias: "ipv4_forward"
  }
  params {
    id: 1
    name: "dstAddr"
    bitwidth: 48
  }
  params {
    id: 2
    name: "port"
    bitwidth: 9
  }
}
type_info {
}
"""


# ------------------------------------------------------------------------------------ ids


@pytest.mark.parametrize(
    ("prefix", "name", "expected"),
    [
        (Prefix.TABLE, "MyIngress.ipv4_lpm", 37375156),
        (Prefix.ACTION, "MyIngress.drop", 25652968),
        (Prefix.ACTION, "NoAction", 21257015),
        (Prefix.ACTION, "MyIngress.ipv4_forward", 28792405),
        (Prefix.DIRECT_COUNTER, "IngressPipeImpl.srv6_my_sid_table_counter", 321813123),
        (Prefix.ACTION_PROFILE, "IngressPipeImpl.ecmp_selector", 299582234),
        (Prefix.CONTROLLER_HEADER, "cpu_in_header_t", 69098127),
        # p4c testdata action_selector_shared-bmv2.p4
        (Prefix.ACTION_PROFILE, "IngressI.as", 291652621),
        (Prefix.TABLE, "IngressI.indirect_ws_1", 33951097),
    ],
)
def test_known_p4c_ids(prefix: Prefix, name: str, expected: int) -> None:
    assert make_id(prefix, name) == expected
    assert compute_ids({prefix: [name]})[prefix][name] == expected


def test_jenkins_reference_values() -> None:
    assert jenkins_one_at_a_time(b"") == 0
    # Reference values of the one-at-a-time hash (Wikipedia's test vector).
    assert jenkins_one_at_a_time(b"a") == 0xCA2E9442
    assert jenkins_one_at_a_time(b"The quick brown fox jumps over the lazy dog") == 0x519E91F5


def test_real_collision_probes_in_sorted_order() -> None:
    # These two names collide in the low 24 bits of their hashes (0xaecb97).
    a, b = "MyIngress.t959", "MyIngress.t8641"
    assert jenkins_one_at_a_time(a.encode()) & 0xFFFFFF == 0xAECB97
    assert jenkins_one_at_a_time(b.encode()) & 0xFFFFFF == 0xAECB97
    # p4c hashes names in byte order ("...t8641" < "...t959"), whatever order they came in.
    for order in ([a, b], [b, a]):
        ids = compute_ids({Prefix.TABLE: order})[Prefix.TABLE]
        assert ids[b] == (0x02 << 24) | 0xAECB97
        assert ids[a] == (0x02 << 24) | 0xAECB98


def test_probing_wraps_without_skipping_zero() -> None:
    def constant(_: bytes) -> int:
        return 0xFFFFFFFF

    ids = compute_ids({Prefix.ACTION: ["c", "a", "b"]}, hash_fn=constant)[Prefix.ACTION]
    assert ids == {"a": 0x01FFFFFF, "b": 0x01000000, "c": 0x01000001}


def test_probing_is_per_prefix() -> None:
    ids = compute_ids({Prefix.ACTION: ["x"], Prefix.TABLE: ["x"]}, hash_fn=lambda _: 7)
    assert ids[Prefix.ACTION]["x"] == 0x01000007
    assert ids[Prefix.TABLE]["x"] == 0x02000007


def test_explicit_ids_are_reserved_first() -> None:
    hashed = make_id(Prefix.TABLE, "c.t")
    ids = compute_ids(
        {Prefix.TABLE: ["c.t", "c.u"]},
        {(Prefix.TABLE, "c.u"): hashed & 0xFFFFFF},  # no prefix byte: p4c adds it
    )[Prefix.TABLE]
    assert ids["c.u"] == hashed
    assert ids["c.t"] == hashed + 1


def test_explicit_id_errors() -> None:
    with pytest.raises(P4InfoError, match="wrong 8-bit prefix"):
        compute_ids({Prefix.TABLE: ["t"]}, {(Prefix.TABLE, "t"): 0x01000005})
    with pytest.raises(P4InfoError, match="multiple declarations"):
        compute_ids(
            {Prefix.TABLE: ["t", "u"]},
            {(Prefix.TABLE, "t"): 5, (Prefix.TABLE, "u"): 0x02000005},
        )


def test_id_annotation_on_schema_objects() -> None:
    schema = basic_router()
    t = schema.tables[0]
    schema.tables[0] = replace(t, annotations=(Annotation("id", ("0x0200_0001",)),))
    schema.actions[1] = ActionSpec("MyIngress.drop", (), (Annotation("id", ("17",)),))
    info = build_p4info(schema)
    assert info.tables[0].preamble.id == 0x02000001
    assert info.tables[0].preamble.annotations == []  # @id is not repeated
    assert info.actions[1].preamble.id == 0x01000011
    assert info.tables[0].action_refs[1].id == 0x01000011


# -------------------------------------------------------------------------------- aliases


def test_aliases_follow_p4c_suffix_rule() -> None:
    assert shortest_unique_suffixes(["a.b.c", "b.c", "a.d.c"]) == {
        "a.b.c": "a.b.c",
        "b.c": "b.c",
        "a.d.c": "d.c",
    }
    assert shortest_unique_suffixes(["d.a.c", "e.b.c"]) == {"d.a.c": "a.c", "e.b.c": "b.c"}
    assert shortest_unique_suffixes(["NoAction", "x", "x"]) == {"NoAction": "NoAction", "x": "x"}


def test_aliases_are_unique_across_all_object_types() -> None:
    schema = basic_router()
    schema.actions.append(ActionSpec("MyEgress.drop", ()))
    schema.counters.append(CounterSpec("MyEgress.ipv4_lpm", 16, CounterUnit.PACKETS))
    info = build_p4info(schema)
    aliases = {a.preamble.name: a.preamble.alias for a in info.actions}
    assert aliases["MyIngress.drop"] == "MyIngress.drop"
    assert aliases["MyEgress.drop"] == "MyEgress.drop"
    assert aliases["MyIngress.ipv4_forward"] == "ipv4_forward"
    # The table shares its last component with a counter, so neither gets the short alias.
    assert info.tables[0].preamble.alias == "MyIngress.ipv4_lpm"
    assert info.counters[0].preamble.alias == "MyEgress.ipv4_lpm"


# ----------------------------------------------------------------------- basic.p4 layout


def test_basic_router_matches_p4c_output() -> None:
    info = build_p4info(basic_router())
    expected = text_format.Parse(BASIC_P4INFO, p4info_pb2.P4Info())
    assert info == expected
    assert text_format.MessageToString(info) == BASIC_P4INFO
    assert p4info_text(basic_router()) == P4INFO_TEXT_HEADER + BASIC_P4INFO


def test_basic_router_field_by_field() -> None:
    info = build_p4info(basic_router())
    assert info.pkg_info.arch == "v1model"
    (table,) = info.tables
    assert (table.preamble.id, table.preamble.name, table.preamble.alias) == (
        37375156,
        "MyIngress.ipv4_lpm",
        "ipv4_lpm",
    )
    (mf,) = table.match_fields
    assert (mf.id, mf.name, mf.bitwidth, mf.match_type) == (
        1,
        "hdr.ipv4.dstAddr",
        32,
        p4info_pb2.MatchField.LPM,
    )
    assert [r.id for r in table.action_refs] == [28792405, 25652968, 21257015]
    assert all(r.scope == p4info_pb2.ActionRef.TABLE_AND_DEFAULT for r in table.action_refs)
    assert table.const_default_action_id == 0
    assert table.initial_default_action.action_id == 25652968
    assert table.size == 1024
    assert not table.is_const_table and not table.has_initial_entries
    assert [a.preamble.name for a in info.actions] == [
        "NoAction",
        "MyIngress.drop",
        "MyIngress.ipv4_forward",
    ]
    fwd = info.actions[2]
    assert [(p.id, p.name, p.bitwidth) for p in fwd.params] == [(1, "dstAddr", 48), (2, "port", 9)]
    assert info.HasField("type_info")


def test_legacy_layout_without_initial_defaults() -> None:
    info = build_p4info(basic_router(), initial_default_action=False)
    assert not info.tables[0].HasField("initial_default_action")


def test_text_round_trip() -> None:
    text = p4info_text(basic_router())
    parsed = text_format.Parse(text, p4info_pb2.P4Info())
    assert parsed == build_p4info(basic_router())
    assert P4INFO_TEXT_HEADER + text_format.MessageToString(parsed) == text


@pytest.mark.parametrize("suffix", [".txt", ".txtpb", ".bin", ".json"])
def test_write_and_read_each_format(tmp_path: Path, suffix: str) -> None:
    path = str(tmp_path / f"basic.p4info{suffix}")
    write_p4info(basic_router(), path)
    assert read_p4info(path) == build_p4info(basic_router())
    if suffix == ".json":
        data = json.loads(Path(path).read_text())
        assert data["tables"][0]["preamble"]["id"] == 37375156
        assert data["tables"][0]["matchFields"][0]["matchType"] == "LPM"
        assert json_format.Parse(Path(path).read_text(), p4info_pb2.P4Info()).tables
    if suffix.startswith(".txt"):
        assert Path(path).read_text().startswith("# proto-file: p4/config/v1/p4info.proto\n")


def test_write_rejects_unknown_suffix(tmp_path: Path) -> None:
    with pytest.raises(P4InfoError, match="known suffixes"):
        write_p4info(basic_router(), str(tmp_path / "x.yaml"))


def test_empty_schema_has_no_type_info() -> None:
    info = build_p4info(ProgramSchema())
    assert not info.HasField("type_info")
    assert text_format.MessageToString(info) == 'pkg_info {\n  arch: "v1model"\n}\n'


# -------------------------------------------------------------------- a fuller program


def fabric() -> ProgramSchema:
    """A schema exercising every P4Info object kind (in the style of the ngsdn tutorial)."""
    t_ecmp = "IngressPipeImpl.ecmp_table"
    t_sid = "IngressPipeImpl.srv6_my_sid"
    t_acl = "IngressPipeImpl.acl_table"
    t_ws = "IngressPipeImpl.another_ecmp"
    return ProgramSchema(
        actions=[
            ActionSpec("NoAction", (), (NO_WARN,)),
            ActionSpec("IngressPipeImpl.set_next_hop", (ParamSpec(1, "dmac", 48),)),
            ActionSpec("IngressPipeImpl.srv6_end", ()),
            ActionSpec(
                "IngressPipeImpl.send_to_cpu",
                (),
                (Annotation("brief", _quoted("punt")),),
            ),
            ActionSpec(
                "IngressPipeImpl.set_vlan",
                (ParamSpec(1, "vid", 12), ParamSpec(2, "pcp", 3, (Annotation("unit", ()),))),
            ),
        ],
        tables=[
            TableSpec(
                name=t_sid,
                keys=(KeySpec(1, "hdr.ipv6.dst_addr", 128, MatchKind.LPM),),
                actions=(ActionRef("IngressPipeImpl.srv6_end"),),
                default_action=ActionCall("NoAction"),
                const_default_action=False,
                size=1024,
                is_const=False,
                direct_counter="IngressPipeImpl.srv6_my_sid_table_counter",
            ),
            TableSpec(
                name=t_ecmp,
                keys=(
                    KeySpec(1, "hdr.ipv6.dst_addr", 128, MatchKind.LPM),
                    KeySpec(2, "hdr.ipv6.flow_label", 20, MatchKind.SELECTOR),
                    KeySpec(
                        3,
                        "local_metadata.l4_src_port",
                        16,
                        MatchKind.TERNARY,
                        (Annotation("format", ("HEX",)),),
                    ),
                ),
                actions=(ActionRef("IngressPipeImpl.set_next_hop"),),
                default_action=ActionCall("NoAction"),
                const_default_action=True,
                size=256,
                is_const=False,
                implementation="IngressPipeImpl.ecmp_selector",
                direct_counter="IngressPipeImpl.ecmp_table_counter",
                direct_meter="IngressPipeImpl.ecmp_meter",
                support_timeout=True,
                annotations=(Annotation("name", _quoted("IngressPipeImpl.ecmp_table")),),
            ),
            TableSpec(
                name=t_acl,
                keys=(KeySpec(1, "standard_metadata.ingress_port", 9, MatchKind.OPTIONAL),),
                actions=(
                    ActionRef("IngressPipeImpl.send_to_cpu", ActionScope.TABLE_ONLY),
                    ActionRef("IngressPipeImpl.set_vlan"),
                    ActionRef("NoAction", annotations=(Annotation("defaultonly"),)),
                ),
                default_action=ActionCall("IngressPipeImpl.set_vlan", (10, 0)),
                const_default_action=True,
                size=64,
                is_const=True,
                const_entries=(ConstEntry((1,), ActionCall("IngressPipeImpl.send_to_cpu"), 1),),
                annotations=(Annotation("oneshot"), Annotation("p4runtime_role", _quoted("sdn"))),
            ),
            TableSpec(
                name=t_ws,
                keys=(KeySpec(1, "hdr.ipv6.flow_label", 20, MatchKind.SELECTOR),),
                actions=(ActionRef("IngressPipeImpl.set_next_hop"),),
                default_action=ActionCall("NoAction"),
                const_default_action=False,
                size=1024,
                is_const=False,
                implementation="IngressPipeImpl.ecmp_selector",
            ),
        ],
        action_profiles=[
            ActionProfileSpec(
                "IngressPipeImpl.ecmp_selector",
                1024,
                (t_ecmp, t_ws),
                True,
                "crc16",
                16,
                (
                    Annotation("max_group_size", ("16",)),
                    Annotation("selector_size_semantics", _quoted("sum_of_members")),
                    Annotation("max_member_weight", ("4000",)),
                    Annotation("some_note", ("a", ",", "b")),
                ),
            ),
        ],
        counters=[
            CounterSpec("IngressPipeImpl.port_counter", 512, CounterUnit.BOTH),
        ],
        direct_counters=[
            # Declared in the opposite order to their tables: p4c lists them by table.
            DirectCounterSpec("IngressPipeImpl.ecmp_table_counter", CounterUnit.PACKETS, t_ecmp),
            DirectCounterSpec("IngressPipeImpl.srv6_my_sid_table_counter", CounterUnit.BOTH, t_sid),
        ],
        meters=[MeterSpec("IngressPipeImpl.port_meter", 32, MeterUnit.BYTES)],
        direct_meters=[DirectMeterSpec("IngressPipeImpl.ecmp_meter", MeterUnit.PACKETS, t_ecmp)],
        registers=[
            RegisterSpec("IngressPipeImpl.seen", 128, 32),
            RegisterSpec("IngressPipeImpl.delta", 8, 16, signed=True),
        ],
        digests=[
            DigestSpec(
                "mac_learn_digest_t",
                (StructField("src_addr", 48), StructField("ingress_port", 9)),
                (Annotation("id", ("5",)),),  # p4c ignores annotations of digests
            )
        ],
        controller_headers=[
            ControllerHeaderSpec(
                "packet_in",
                "cpu_in_header_t",
                (StructField("ingress_port", 9), StructField("_pad", 7)),
                (Annotation("controller_header", _quoted("packet_in")),),
            ),
            ControllerHeaderSpec(
                "packet_out",
                "cpu_out_header_t",
                (StructField("egress_port", 9), StructField("_pad", 7)),
            ),
        ],
        value_sets=[
            ValueSetSpec("ParserImpl.pvs", 4, (StructField("", 16),)),
            ValueSetSpec("ParserImpl.pvs2", 8, (StructField("proto", 8), StructField("port", 16))),
        ],
    )


def test_fabric_tables() -> None:
    info = build_p4info(fabric())
    index = P4InfoIndex(info)
    sid = index.table("srv6_my_sid")
    assert list(sid.direct_resource_ids) == [321813123]
    assert sid.initial_default_action.action_id == 21257015

    ecmp = index.table("ecmp_table")
    # The selector key is not a match field, but it still used up field id 2.
    assert [(m.id, m.name, m.match_type) for m in ecmp.match_fields] == [
        (1, "hdr.ipv6.dst_addr", p4info_pb2.MatchField.LPM),
        (3, "local_metadata.l4_src_port", p4info_pb2.MatchField.TERNARY),
    ]
    assert list(ecmp.match_fields[1].annotations) == ["@format(HEX)"]
    assert list(ecmp.preamble.annotations) == []  # @name is not repeated
    assert ecmp.const_default_action_id == 21257015
    assert ecmp.implementation_id == 299582234
    assert list(ecmp.direct_resource_ids) == [
        make_id(Prefix.DIRECT_COUNTER, "IngressPipeImpl.ecmp_table_counter"),
        make_id(Prefix.DIRECT_METER, "IngressPipeImpl.ecmp_meter"),
    ]
    assert ecmp.idle_timeout_behavior == p4info_pb2.Table.NOTIFY_CONTROL
    assert ecmp.size == 256

    acl = index.table("acl_table")
    assert list(acl.preamble.annotations) == ["@oneshot", '@p4runtime_role("sdn")']
    refs = acl.action_refs
    assert refs[0].scope == p4info_pb2.ActionRef.TABLE_ONLY
    assert list(refs[0].annotations) == ["@tableonly"]
    assert refs[1].scope == p4info_pb2.ActionRef.TABLE_AND_DEFAULT
    assert refs[2].scope == p4info_pb2.ActionRef.DEFAULT_ONLY
    assert list(refs[2].annotations) == ["@defaultonly"]
    assert acl.is_const_table and acl.has_initial_entries
    default = acl.initial_default_action
    assert default.action_id == index.id_of("actions", "set_vlan")
    assert [(a.param_id, a.value) for a in default.arguments] == [(1, b"\x00\x0a"), (2, b"\x00")]
    assert acl.const_default_action_id == default.action_id
    assert acl.match_fields[0].match_type == p4info_pb2.MatchField.OPTIONAL

    ws = index.table("another_ecmp")
    assert len(ws.match_fields) == 0


def test_fabric_actions_and_externs() -> None:
    info = build_p4info(fabric())
    index = P4InfoIndex(info)
    cpu = index.action("send_to_cpu")
    assert cpu.preamble.doc.brief == "punt"
    assert list(cpu.preamble.annotations) == []
    assert list(index.param("set_vlan", "pcp").annotations) == ["@unit"]

    (profile,) = info.action_profiles
    assert profile.preamble.id == 299582234
    assert list(profile.preamble.annotations) == ["@some_note(a , b)"]
    # table_ids are sorted by table name, as p4c's std::set<cstring> keeps them.
    assert list(profile.table_ids) == [
        make_id(Prefix.TABLE, "IngressPipeImpl.another_ecmp"),
        make_id(Prefix.TABLE, "IngressPipeImpl.ecmp_table"),
    ]
    assert profile.with_selector and profile.size == 1024 and profile.max_group_size == 16
    assert profile.WhichOneof("selector_size_semantics") == "sum_of_members"
    assert profile.sum_of_members.max_member_weight == 4000

    (counter,) = info.counters
    assert counter.spec.unit == p4info_pb2.CounterSpec.BOTH and counter.size == 512
    assert [d.preamble.name for d in info.direct_counters] == [
        "IngressPipeImpl.srv6_my_sid_table_counter",
        "IngressPipeImpl.ecmp_table_counter",
    ]
    assert info.direct_counters[0].preamble.id == 321813123
    assert info.direct_counters[0].direct_table_id == index.id_of("tables", "srv6_my_sid")
    assert info.direct_counters[0].spec.unit == p4info_pb2.CounterSpec.BOTH
    assert info.meters[0].spec.unit == p4info_pb2.MeterSpec.BYTES and info.meters[0].size == 32
    assert info.direct_meters[0].direct_table_id == index.id_of("tables", "ecmp_table")
    assert info.direct_meters[0].spec.unit == p4info_pb2.MeterSpec.PACKETS

    seen, delta = info.registers
    assert seen.type_spec.bitstring.bit.bitwidth == 32 and seen.size == 128
    assert delta.type_spec.bitstring.int.bitwidth == 16

    (digest,) = info.digests
    assert digest.preamble.id == make_id(Prefix.DIGEST, "mac_learn_digest_t")
    assert list(digest.preamble.annotations) == []
    assert digest.type_spec.struct.name == "mac_learn_digest_t"
    members = info.type_info.structs["mac_learn_digest_t"].members
    assert [(m.name, m.type_spec.bitstring.bit.bitwidth) for m in members] == [
        ("src_addr", 48),
        ("ingress_port", 9),
    ]


def test_fabric_packet_io_and_value_sets() -> None:
    info = build_p4info(fabric())
    pin, pout = info.controller_packet_metadata
    assert (pin.preamble.id, pin.preamble.name, pin.preamble.alias) == (
        69098127,
        "packet_in",
        "packet_in",
    )
    assert list(pin.preamble.annotations) == ['@controller_header("packet_in")']
    assert [(m.id, m.name, m.bitwidth) for m in pin.metadata] == [
        (1, "ingress_port", 9),
        (2, "_pad", 7),
    ]
    assert pout.preamble.id == make_id(Prefix.CONTROLLER_HEADER, "cpu_out_header_t")
    assert list(pout.preamble.annotations) == ['@controller_header("packet_out")']

    pvs, pvs2 = info.value_sets
    assert pvs.size == 4 and pvs.preamble.id >> 24 == Prefix.VALUE_SET
    (m,) = pvs.match
    assert (m.id, m.name, m.bitwidth, m.match_type) == (1, "", 16, p4info_pb2.MatchField.EXACT)
    assert [(m.id, m.name, m.bitwidth) for m in pvs2.match] == [(1, "proto", 8), (2, "port", 16)]


def test_fabric_text_round_trip_and_ids_unique() -> None:
    info = build_p4info(fabric())
    text = text_format.MessageToString(info)
    assert text_format.Parse(text, p4info_pb2.P4Info()) == info
    assert p4info_pb2.P4Info.FromString(info.SerializeToString()) == info
    ids = [obj.preamble.id for kind in P4InfoIndex.KINDS for obj in getattr(info, kind)]
    assert len(ids) == len(set(ids))
    # Field order of the text format is P4Info's field-number order.
    positions = [
        text.index(f"\n{kind} {{")
        for kind in (
            "tables",
            "actions",
            "action_profiles",
            "counters",
            "direct_counters",
            "meters",
            "direct_meters",
            "controller_packet_metadata",
            "value_sets",
            "registers",
            "digests",
            "type_info",
        )
    ]
    assert positions == sorted(positions)


def test_selector_semantics_defaults() -> None:
    schema = basic_router()
    name = "MyIngress.ipv4_lpm"
    schema.tables[0] = replace(schema.tables[0], implementation="MyIngress.ap")
    for annos, expected in [
        ((), None),
        ((Annotation("max_group_size", ("200",)),), "sum_of_weights"),
        ((Annotation("selector_size_semantics", _quoted("sum_of_weights")),), "sum_of_weights"),
    ]:
        schema.action_profiles = [
            ActionProfileSpec("MyIngress.ap", 64, (name,), True, annotations=annos)
        ]
        (profile,) = build_p4info(schema).action_profiles
        assert profile.WhichOneof("selector_size_semantics") == expected
        assert list(profile.preamble.annotations) == []
    schema.action_profiles = [
        ActionProfileSpec(
            "MyIngress.ap", 64, (name,), False, annotations=(Annotation("max_group_size", ("9",)),)
        )
    ]
    (profile,) = build_p4info(schema).action_profiles
    assert profile.max_group_size == 0 and not profile.with_selector
    assert profile.WhichOneof("selector_size_semantics") is None


def test_dangling_references_are_reported() -> None:
    schema = basic_router()
    schema.tables[0] = replace(schema.tables[0], actions=(ActionRef("MyIngress.dorp"),))
    with pytest.raises(P4InfoError, match="did you mean 'MyIngress.drop'"):
        build_p4info(schema)


def test_duplicate_names_are_rejected() -> None:
    schema = basic_router()
    schema.counters = [CounterSpec("c", 1, CounterUnit.PACKETS)] * 2
    with pytest.raises(P4InfoError, match="multiple counters"):
        build_p4info(schema)


def test_hidden_symbols_take_part_in_ids_and_aliases() -> None:
    # p4c gives compiler-generated @hidden objects ids and aliases without listing them.
    info = build_p4info(basic_router(), hidden_symbols=[(Prefix.ACTION, "MyEgress.drop")])
    assert [a.preamble.name for a in info.actions] == [
        "NoAction",
        "MyIngress.drop",
        "MyIngress.ipv4_forward",
    ]
    assert info.actions[1].preamble.alias == "MyIngress.drop"


def test_render_annotation() -> None:
    assert render_annotation(Annotation("hidden")) == "@hidden"
    assert render_annotation(Annotation("noWarn", _quoted("unused"))) == '@noWarn("unused")'
    assert render_annotation(Annotation("refers_to", ("t", ",", "f"))) == "@refers_to(t , f)"


# -------------------------------------------------------------------------------- lookups


def test_index_lookups() -> None:
    index = P4InfoIndex.from_schema(basic_router())
    by_name = index.table("MyIngress.ipv4_lpm")
    assert index.table("ipv4_lpm") is by_name
    assert index.table(37375156) is by_name
    assert index.table("37375156") is by_name
    assert index.get("tables", "ipv4_lpm") is by_name
    assert index.id_of("actions", "drop") == 25652968
    assert index.name_of("actions", 21257015) == "NoAction"
    assert index.by_id(28792405) == ("actions", index.action("ipv4_forward"))
    assert index.match_field("ipv4_lpm", "hdr.ipv4.dstAddr").id == 1
    assert index.match_field("ipv4_lpm", 1).name == "hdr.ipv4.dstAddr"
    assert index.param("MyIngress.ipv4_forward", "port").bitwidth == 9
    assert index.param("ipv4_forward", 1).name == "dstAddr"
    assert [a.preamble.name for a in index.table_actions("ipv4_lpm")] == [
        "MyIngress.ipv4_forward",
        "MyIngress.drop",
        "NoAction",
    ]
    assert index.action_ref("ipv4_lpm", "drop").id == 25652968
    assert index.names("actions") == ["NoAction", "MyIngress.drop", "MyIngress.ipv4_forward"]


def test_index_errors_suggest_names() -> None:
    index = P4InfoIndex.from_schema(basic_router())
    with pytest.raises(P4InfoLookupError, match="did you mean 'ipv4_lpm'") as err:
        index.table("ipv4_lmp")
    assert isinstance(err.value, KeyError)
    with pytest.raises(P4InfoLookupError, match="did you mean 'MyIngress.ipv4_forward'"):
        index.action("MyIngress.ipv4_froward")
    with pytest.raises(P4InfoLookupError, match="unknown table id 1"):
        index.table(1)
    with pytest.raises(P4InfoLookupError, match="did you mean 'dstAddr'"):
        index.param("ipv4_forward", "dstaddr")
    with pytest.raises(P4InfoLookupError, match="not an action of table"):
        P4InfoIndex.from_schema(fabric()).action_ref("srv6_my_sid", "set_next_hop")
    with pytest.raises(P4InfoLookupError, match="did you mean 'tables'"):
        index.get("tabels", "x")
    with pytest.raises(P4InfoLookupError, match="unknown P4Runtime id"):
        index.by_id(0x02000000)


def test_index_ambiguous_suffix() -> None:
    schema = basic_router()
    schema.actions.append(ActionSpec("MyEgress.drop", ()))
    index = P4InfoIndex.from_schema(schema)
    with pytest.raises(P4InfoLookupError, match="ambiguous action name 'drop'"):
        index.action("drop")
    assert index.action("MyEgress.drop").preamble.alias == "MyEgress.drop"


# ------------------------------------------------------------------------ p4runtime-shell


def test_p4runtime_shell_context_accepts_it() -> None:
    ctx = context.Context()
    ctx.set_p4info(build_p4info(fabric()))
    table = ctx.get_table("IngressPipeImpl.ecmp_table")
    assert table is not None and table.preamble.id == ctx.get_table_id("ecmp_table")
    assert ctx.get_mf_id("IngressPipeImpl.ecmp_table", "hdr.ipv6.dst_addr") == 1
    assert ctx.get_param_id("IngressPipeImpl.set_vlan", "pcp") == 2
    assert ctx.get_obj_id(context.P4Type.action_profile, "ecmp_selector") == 299582234
    assert ctx.get_name_from_id(69098127) == "packet_in"
