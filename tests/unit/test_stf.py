"""The STF runner: parsing p4c's .stf format, and running it against a small fake switch."""

from __future__ import annotations

import io
import sys
import types
from pathlib import Path

import pytest

from switch import stf as stf_module
from switch.errors import ParseError, Span, StfError
from switch.pipeline.state import SwitchState
from switch.schema import (
    ActionCall,
    ActionProfileSpec,
    ActionRef,
    ActionScope,
    ActionSpec,
    CounterSpec,
    CounterUnit,
    DirectCounterSpec,
    KeySpec,
    MatchKind,
    ParamSpec,
    ProgramSchema,
    RegisterSpec,
    TableSpec,
)
from switch.stf import (
    AddCmd,
    CheckCounterCmd,
    CliCmd,
    ExpectCmd,
    NoPacketCmd,
    PacketCmd,
    RemoveCmd,
    SetDefaultCmd,
    StfRunner,
    WaitCmd,
    main_stf,
    parse_stf,
    run_stf,
)

# ------------------------------------------------------------------------------------------
# A fake switch: a few tables and externs, and a process() written in Python.

FWD = ActionSpec("MyIngress.fwd", (ParamSpec(1, "port", 9),))
MCAST = ActionSpec("MyIngress.mcast", (ParamSpec(1, "grp", 16),))
DROP = ActionSpec("MyIngress.drop", ())
NOACTION = ActionSpec("NoAction", ())
SETV = ActionSpec("MyIngress.set_vrf", (ParamSpec(1, "vrf", 4), ParamSpec(2, "tag", 8)))
REFS = (
    ActionRef(FWD.name),
    ActionRef(MCAST.name),
    ActionRef(DROP.name),
    ActionRef("NoAction"),
    ActionRef(SETV.name, ActionScope.TABLE_AND_DEFAULT),
)


def _table(name: str, keys: list[tuple[str, int, MatchKind]], **kw: object) -> TableSpec:
    args: dict[str, object] = {
        "name": name,
        "keys": tuple(KeySpec(i + 1, n, w, k) for i, (n, w, k) in enumerate(keys)),
        "actions": REFS,
        "default_action": ActionCall("NoAction"),
        "const_default_action": False,
        "size": 64,
        "is_const": False,
    }
    args.update(kw)
    return TableSpec(**args)  # type: ignore[arg-type]


E, L, T, R, OPT = (
    MatchKind.EXACT,
    MatchKind.LPM,
    MatchKind.TERNARY,
    MatchKind.RANGE,
    MatchKind.OPTIONAL,
)

SCHEMA = ProgramSchema(
    actions=[FWD, MCAST, DROP, NOACTION, SETV],
    tables=[
        _table("MyIngress.acl", [("hdr.ethernet.etherType", 16, T), ("hdr.vlan[0].vid", 12, R)]),
        _table(
            "MyIngress.dmac",
            [("hdr.ethernet.dstAddr", 48, E)],
            default_action=ActionCall("MyIngress.drop"),
            direct_counter="MyIngress.dmac_hits",
        ),
        _table(
            "MyIngress.kinds",
            [("meta.vrf", 4, E), ("hdr.ipv4.dstAddr", 32, L), ("hdr.ipv4.isValid()", 1, E)],
        ),
        _table("MyIngress.tern", [("hdr.ipv4.dstAddr", 32, T), ("meta.opt", 8, OPT)]),
        _table("MyIngress.x.acl2", [("k", 8, E)]),
        _table("MyEgress.acl2", [("k", 8, E)]),
        _table(
            "MyIngress.ecmp", [("hdr.ethernet.dstAddr", 48, E)], implementation="MyIngress.ecmp_ap"
        ),
    ],
    action_profiles=[ActionProfileSpec("MyIngress.ecmp_ap", 16, ("MyIngress.ecmp",), False)],
    counters=[CounterSpec("MyIngress.port_pkts", 16, CounterUnit.BOTH)],
    direct_counters=[DirectCounterSpec("MyIngress.dmac_hits", CounterUnit.BOTH, "MyIngress.dmac")],
    registers=[RegisterSpec("MyIngress.last_len", 4, 32)],
)


class FakeSwitch:
    """acl (etherType, vlan id) then dmac; mcast through the PRE; clone session 1 mirrors."""

    def __init__(self) -> None:
        self.state = SwitchState(SCHEMA)
        self.sent: list[tuple[int, bytes]] = []

    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        self.sent.append((port, data))
        st = self.state
        st.counters["MyIngress.port_pkts"].count(port, len(data))
        st.registers["MyIngress.last_len"].write(0, len(data))
        etype = int.from_bytes(data[12:14], "big")
        vid = int.from_bytes(data[14:16], "big") & 0xFFF if etype == 0x8100 else 0
        out: list[tuple[int, bytes]] = []
        _, name, args = st.tables["MyIngress.acl"].lookup((etype, vid))
        if name != "MyIngress.fwd":
            entry, name, args = st.tables["MyIngress.dmac"].lookup(
                (int.from_bytes(data[:6], "big"),)
            )
            if entry is not None:
                entry.packets += 1
                entry.bytes += len(data)
        if name == "MyIngress.fwd":
            out.append((args[0], data))
        elif name == "MyIngress.mcast":
            out += [(p, data) for p, _ in st.pre.replicas(args[0])]
        mirror = st.pre.clone_replicas(1)
        if mirror:
            out += [(p, data) for p, _ in mirror]
        return out


class ScriptedSwitch:
    """Answers each packet with the next scripted output list."""

    def __init__(self, *outputs: list[tuple[int, bytes]]) -> None:
        self.state = SwitchState(SCHEMA)
        self.outputs = list(outputs)

    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        return self.outputs.pop(0) if self.outputs else []


PKT = "000000000002 000000000001 0800 4500"  # dst 2, src 1, IPv4


def run(text: str, switch: object | None = None, verbose: bool = False) -> tuple[int, str]:
    out = io.StringIO()
    sw = switch if switch is not None else FakeSwitch()
    code = run_stf(sw, parse_stf(text, "t.stf"), out, verbose)  # type: ignore[arg-type]
    return code, out.getvalue()


# ------------------------------------------------------------------------------------------
# Parsing


def test_comments_blank_lines_and_keyword_case_are_ignored() -> None:
    cmds = parse_stf("# a test\n\n  PACKET 0 0102 # trailing\nWait\n", "t.stf")
    assert [type(c) for c in cmds] == [PacketCmd, WaitCmd]
    assert cmds[0].span.line == 3 and cmds[0].span.col == 3


@pytest.mark.parametrize(
    ("line", "port", "data"),
    [
        ("packet 0 0102 0304", 0, b"\x01\x02\x03\x04"),
        ("packet 12 01020304", 12, b"\x01\x02\x03\x04"),
        ("packet 1 aB cD", 1, b"\xab\xcd"),
    ],
)
def test_packet_hex_ignores_spaces(line: str, port: int, data: bytes) -> None:
    (cmd,) = parse_stf(line)
    assert isinstance(cmd, PacketCmd) and (cmd.port, cmd.data) == (port, data)


@pytest.mark.parametrize(
    ("line", "pattern", "exact"),
    [
        ("expect 1 0102 **04", "0102**04", False),
        ("expect 1 0102 0304 $", "01020304", True),
        ("expect 1 0102$", "0102", True),
        ("expect 1 ab*", "AB*", False),
        ("expect 3", None, False),
    ],
)
def test_expect_patterns(line: str, pattern: str | None, exact: bool) -> None:
    (cmd,) = parse_stf(line)
    assert isinstance(cmd, ExpectCmd) and (cmd.pattern, cmd.exact) == (pattern, exact)


@pytest.mark.parametrize(
    ("text", "line", "col", "needle"),
    [
        ("packet 0 010", 1, 10, "odd number of hex digits"),
        ("\npacket 0 01 0g", 2, 14, "bad character 'g'"),
        ("packet x 01", 1, 8, "bad port number"),
        ("expect 1 01$02", 1, 12, "'$' may only end"),
        ("expect 1 01**zz", 1, 14, "bad character 'z'"),
        ("add dmac dstAddr:2 fwd(port:1", 1, 30, "expected ',' or ')'"),
        ("add dmac dstAddr:2 fwd port:1)", 1, 20, "expected a key like name:value"),
        ("add dmac dstAddr=2 fwd(port:1)", 1, 10, "expected a key like name:value"),
        ("add dmac dstAddr:2 fwd(port:1) extra", 1, 32, "unexpected 'extra'"),
        ("setdefault dmac", 1, 16, "expected an action call"),
        ("remove", 1, 7, "expected 'all' or an entry handle"),
        ("check_counter c(1) packets = 2", 1, 28, "expected a comparison"),
        ("mc_node_create 1", 1, 17, "needs 2 argument(s)"),
        ("mirroring_add 1 2 3", 1, 19, "too many arguments"),
        ("meter_set_rates m 0 fast:10", 1, 21, "expected a rate"),
        ("pakcet 0 01", 1, 1, "did you mean 'packet'"),
        ("add t k:1 a() @", 1, 15, "unexpected character '@'"),
    ],
)
def test_malformed_lines_are_stf_errors_with_position(
    text: str, line: int, col: int, needle: str
) -> None:
    with pytest.raises(StfError) as err:
        parse_stf(text, "bad.stf")
    assert err.value.span is not None
    assert (err.value.span.file, err.value.span.line, err.value.span.col) == ("bad.stf", line, col)
    assert needle in err.value.message
    assert err.value.render().startswith(f"bad.stf:{line}:{col}: ")


def test_add_with_priority_keys_action_and_handle() -> None:
    (cmd,) = parse_stf("add acl 5 etherType:0x08** vlan$0.vid:10->20 fwd(port:3) = A1")
    assert isinstance(cmd, AddCmd)
    assert (cmd.table, cmd.priority, cmd.handle) == ("acl", 5, "A1")
    assert [(k.name, k.value, k.sep, k.bound) for k in cmd.keys] == [
        ("etherType", "0x08**", "", None),
        ("vlan$0.vid", "10", "->", "20"),
    ]
    assert cmd.action.name == "fwd" and [a[:2] for a in cmd.action.args] == [("port", "3")]


def test_add_without_priority_and_with_lpm_and_several_args() -> None:
    (cmd,) = parse_stf("add kinds hdr.ipv4.dstAddr:0x0a000000/8 set_vrf(vrf:1, tag:0b1010)")
    assert isinstance(cmd, AddCmd) and cmd.priority is None
    assert (cmd.keys[0].value, cmd.keys[0].sep, cmd.keys[0].bound) == ("0x0a000000", "/", "8")
    assert [a[:2] for a in cmd.action.args] == [("vrf", "1"), ("tag", "0b1010")]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("check_counter cnt(3)", ("cnt", "3", "packets", "==", 0)),
        ("check_counter cnt(3) bytes >= 128", ("cnt", "3", "bytes", ">=", 128)),
        ("check_counter hits(A1) packets == 0x2", ("hits", "A1", "packets", "==", 2)),
    ],
)
def test_check_counter_forms(line: str, expected: tuple[object, ...]) -> None:
    (cmd,) = parse_stf(line)
    assert isinstance(cmd, CheckCounterCmd)
    assert (cmd.counter, cmd.index, cmd.kind, cmd.op, cmd.value) == expected


@pytest.mark.parametrize(
    ("line", "name", "args"),
    [
        ("mc_node_create 0 1 2 3", "mc_node_create", ("0", "1", "2", "3")),
        ("mirroring_add 5 0x10", "mirroring_add", ("5", "16")),
        ("register_write MyIngress.r 1 010", "register_write", ("MyIngress.r", "1", "10")),
        ("meter_set_rates m 0 0.5:100 1:200", "meter_set_rates", ("m", "0", "0.5:100", "1:200")),
    ],
)
def test_simple_switch_cli_commands(line: str, name: str, args: tuple[str, ...]) -> None:
    (cmd,) = parse_stf(line)
    assert isinstance(cmd, CliCmd) and (cmd.name, cmd.args) == (name, args)


def test_other_commands() -> None:
    cmds = parse_stf("setdefault dmac fwd(port:1)\nremove all\nremove A\nno_packet")
    assert isinstance(cmds[0], SetDefaultCmd)
    assert isinstance(cmds[1], RemoveCmd) and cmds[1].handle is None
    assert isinstance(cmds[2], RemoveCmd) and cmds[2].handle == "A"
    assert isinstance(cmds[3], NoPacketCmd)


# ------------------------------------------------------------------------------------------
# Running


def test_matching_packets_pass() -> None:
    code, out = run(f"""
        add dmac hdr.ethernet.dstAddr:0x000000000002 fwd(port:3)
        packet 0 {PKT}
        expect 3 {PKT}
    """)
    assert code == 0
    assert out.strip().endswith("PASS: 1 packet(s) sent, 1 received, 1 check(s)")


def test_mismatch_marks_the_differing_nibbles() -> None:
    code, out = run(f"""
        add dmac dstAddr:2 fwd(port:3)
        packet 0 {PKT}
        expect 3 000000000002 000000000001 0806 4500
    """)
    assert code == 1
    assert "port 3: expected 1 packet(s), received 1" in out
    lines = out.splitlines()
    recv = next(i for i, line in enumerate(lines) if "received 00 00" in line)
    assert "expected 00 00 00 00 00 02 00 00 00 00 00 01 08 06 45 00" in lines[recv - 1]
    marker = lines[recv + 1]
    assert marker.count("^") == 1
    assert lines[recv][marker.index("^")] == "0"  # received 08 00 vs expected 08 06
    assert lines[recv - 1][marker.index("^")] == "6"
    assert "t.stf:4:" in out


@pytest.mark.parametrize(
    ("expect", "code"),
    [
        (PKT, 0),
        ("000000000002 ************ 0800", 0),  # wildcards, and a longer packet still matches
        ("000000000002 000000000001 0800 4500 $", 0),
        ("000000000002 000000000001 0800 $", 1),  # '$': the received packet is too long
        ("000000000002 000000000001 0800 4500 00", 1),  # received too short
        ("0000000000*3", 1),
    ],
)
def test_expect_wildcards_and_exact_length(expect: str, code: int) -> None:
    got, out = run(f"add dmac dstAddr:2 fwd(port:3)\npacket 0 {PKT}\nexpect 3 {expect}")
    assert got == code, out


def test_unexpected_and_missing_packets_fail() -> None:
    code, out = run(f"""
        add dmac dstAddr:2 fwd(port:3)
        packet 0 {PKT}
        packet 0 {PKT}
        expect 3 {PKT}
        expect 4 {PKT}
    """)
    assert code == 1
    assert "port 3: expected 1 packet(s), received 2" in out and "#2 unexpected" in out
    assert "port 4: expected 1 packet(s), received 0" in out and "#1 missing (t.stf:6:" in out


def test_packets_on_ports_no_line_names_are_dropped() -> None:
    code, out = run(f"add dmac dstAddr:2 fwd(port:7)\npacket 0 {PKT}")
    assert code == 0
    assert "1 packet(s) went to port 7" in out


def test_expect_without_data_accepts_any_packets() -> None:
    code, _ = run(f"add dmac dstAddr:2 fwd(port:3)\npacket 0 {PKT}\npacket 0 {PKT}\nexpect 3")
    assert code == 0


def test_ordering_is_per_port() -> None:
    sw = ScriptedSwitch([(2, b"\x02"), (1, b"\x01")], [(1, b"\x11")])
    code, out = run("packet 0 00\npacket 0 00\nexpect 1 01\nexpect 2 02\nexpect 1 11", sw)
    assert code == 0, out
    sw = ScriptedSwitch([(1, b"\x11"), (1, b"\x01")])
    code, _ = run("packet 0 00\nexpect 1 01\nexpect 1 11", sw)
    assert code == 1


@pytest.mark.parametrize(
    ("entries", "port"),
    [
        ("add acl 10 etherType:0x0800 fwd(port:1)\nadd acl 20 etherType:0x08** fwd(port:2)", 2),
        ("add acl 20 etherType:0x0800 fwd(port:1)\nadd acl 10 etherType:0x08** fwd(port:2)", 1),
        ("add acl 0 etherType:0x0800 fwd(port:1)\nadd acl 1 etherType:0x08** fwd(port:2)", 2),
        ("add acl 3 etherType:0x0800 fwd(port:1)\nadd acl 3 etherType:0x08** fwd(port:2)", 1),
    ],
)
def test_larger_stf_priority_wins(entries: str, port: int) -> None:
    code, out = run(f"{entries}\npacket 0 {PKT}\nexpect {port} {PKT}")
    assert code == 0, out


def entries_of(text: str, table: str) -> list[tuple[tuple[object, ...], int, ActionCall | None]]:
    sw = FakeSwitch()
    StfRunner(sw, io.StringIO()).run(parse_stf(text))
    return [(e.match, e.priority, e.action) for e in sw.state.tables[table].entries()]


@pytest.mark.parametrize(
    ("keys", "match"),
    [
        ("hdr.ipv4.dstAddr:0x0a000000/8", (0, (0x0A000000, 8), 0)),
        ("hdr.ipv4.dstAddr:0x0a0b****", (0, (0x0A0B0000, 16), 0)),
        ("hdr.ipv4.dstAddr:0x0a0b0c0d", (0, (0x0A0B0C0D, 32), 0)),
        ("hdr.ipv4.dstAddr:167772161", (0, (0x0A000001, 32), 0)),
        ("hdr.ipv4.dstAddr:0x0a0b0c0d/16", (0, (0x0A0B0000, 16), 0)),  # host bits masked off
        ("meta.vrf:3", (3, (0, 0), 0)),  # keys left out: lpm /0, exact 0
        ("vrf:0b11 hdr.ipv4.$valid$:1", (3, (0, 0), 1)),
        ("ipv4.valid:1", (0, (0, 0), 1)),
    ],
)
def test_lpm_and_exact_key_values(keys: str, match: tuple[object, ...]) -> None:
    got = entries_of(f"add kinds {keys} set_vrf(vrf:1, tag:2)", "MyIngress.kinds")
    assert got == [(match, 0, ActionCall("MyIngress.set_vrf", (1, 2)))]


@pytest.mark.parametrize(
    ("keys", "match"),
    [
        ("dstAddr:0x****0101", ((0x00000101, 0x0000FFFF), None)),  # mask from the digits written
        ("dstAddr:0x0101", ((0x0101, 0xFFFF), None)),  # only 4 digits: the upper half is wild
        ("dstAddr:0b1*1", ((0b101, 0b101), None)),
        ("dstAddr:258", ((258, 0xFFFFFFFF), None)),  # decimal: exact
        ("dstAddr:0x0a000000/8", ((0x0A000000, 0xFF000000), None)),
        ("opt:0x**", ((0, 0), None)),  # optional wildcard
        ("opt:7", ((0, 0), 7)),
    ],
)
def test_ternary_and_optional_key_values(keys: str, match: tuple[object, ...]) -> None:
    got = entries_of(f"add tern 1 {keys} fwd(port:1)", "MyIngress.tern")
    assert got == [(match, 2, ActionCall("MyIngress.fwd", (1,)))]


@pytest.mark.parametrize(
    ("keys", "match"),
    [
        ("vlan$0.vid:10->20", ((0, 0), (10, 20))),
        ("hdr.vlan[0].vid:10..0x14", ((0, 0), (10, 20))),
        ("vid:5", ((0, 0), (5, 5))),
        ("etherType:0x8100", ((0x8100, 0xFFFF), (0, 0xFFF))),  # a range left out: all values
        ("vid:0x***", ((0, 0), (0, 0xFFF))),
    ],
)
def test_range_key_values_and_header_stack_names(keys: str, match: tuple[object, ...]) -> None:
    assert entries_of(f"add acl 1 {keys} NoAction()", "MyIngress.acl")[0][0] == match


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("add nosuch k:1 NoAction()", "unknown table 'nosuch'"),
        ("add dmacc dstAddr:1 NoAction()", "did you mean 'MyIngress.dmac'"),
        ("add acl2 k:1 NoAction()", "ambiguous: MyEgress.acl2, MyIngress.x.acl2"),
        ("add dmac dstAdr:1 NoAction()", "did you mean 'hdr.ethernet.dstAddr'"),
        ("add dmac dstAddr:1 dstAddr:2 NoAction()", "given twice"),
        ("add dmac dstAddr:0x1000000000000 NoAction()", "does not fit key"),
        ("add dmac dstAddr:0x1* NoAction()", "wildcards are not allowed"),
        ("add dmac dstAddr:1 forward(port:1)", "unknown action of table"),
        ("add dmac dstAddr:1 fwd(prt:1)", "did you mean 'port'"),
        ("add dmac dstAddr:1 fwd()", "needs parameter(s) port"),
        ("add dmac dstAddr:1 fwd(port:512)", "does not fit parameter 'port'"),
        ("add kinds hdr.ipv4.dstAddr:1/33 NoAction()", "prefix length 33 exceeds"),
        (
            "add dmac dstAddr:1 NoAction()\nadd dmac dstAddr:1 NoAction()",
            "an entry with this match and priority exists",
        ),
        ("remove H", "unknown entry handle 'H'"),
        ("setdefault dmac set_vrf(vrf:1)", "needs parameter(s) tag"),
        ("mc_node_associate 1 0", "unknown multicast group '1'"),
        ("register_read MyIngress.last_len 9", "index 9 is outside 0..3"),
        ("meter_set_rates nosuch 0 1:1 2:2", "unknown meter 'nosuch'"),
        ("check_counter dmac_hits(1)", "needs the handle of an entry"),
        ("no_packet", "must follow a 'packet'"),
    ],
)
def test_setup_errors_stop_the_test_with_a_position(line: str, needle: str) -> None:
    code, out = run(line)
    assert code == 1
    assert needle in out, out
    assert "t.stf:" in out and "FAIL: the test stopped at this command" in out


def test_setdefault_changes_the_miss_action() -> None:
    code, out = run(f"setdefault dmac fwd(port:5)\npacket 0 {PKT}\nexpect 5 {PKT}")
    assert code == 0, out


def test_multicast_through_mc_commands() -> None:
    code, out = run(f"""
        mc_mgrp_create 1
        mc_node_create 0 1 2
        mc_node_create 1 3
        mc_node_associate 1 0
        mc_node_associate 1 1
        add dmac dstAddr:2 mcast(grp:1)
        packet 0 {PKT}
        expect 1 {PKT}
        expect 2 {PKT}
        expect 3 {PKT}
    """)
    assert code == 0, out


def test_mirroring_add_copies_packets() -> None:
    code, out = run(f"""
        mirroring_add 1 4
        add dmac dstAddr:2 fwd(port:3)
        packet 0 {PKT}
        expect 3 {PKT}
        expect 4 {PKT}
    """)
    assert code == 0, out


def test_registers_and_counters_through_cli_commands() -> None:
    code, out = run(f"""
        register_write MyIngress.last_len 1 77
        register_read last_len 1
        packet 2 {PKT}
        register_read last_len 0
        counter_read port_pkts 2
        counter_write port_pkts 3 5 6
        counter_read port_pkts 3
    """)
    assert code == 0, out
    assert "MyIngress.last_len[1]= 77" in out and "MyIngress.last_len[0]= 16" in out
    assert "MyIngress.port_pkts[2]= (packets=1, bytes=16)" in out
    assert "MyIngress.port_pkts[3]= (packets=5, bytes=6)" in out


@pytest.mark.parametrize(
    ("check", "code"),
    [
        ("check_counter port_pkts(2) packets == 2", 0),
        ("check_counter port_pkts(2) bytes == 32", 0),
        ("check_counter port_pkts(2) packets > 2", 1),
        ("check_counter port_pkts(5)", 0),  # no comparison: packets == 0
        ("check_counter dmac_hits(H) packets == 2", 0),
        ("check_counter dmac_hits(H) bytes != 32", 1),
    ],
)
def test_check_counter(check: str, code: int) -> None:
    got, out = run(f"""
        add dmac dstAddr:2 fwd(port:3) = H
        packet 2 {PKT}
        packet 2 {PKT}
        {check}
        expect 3
    """)
    assert got == code, out
    if code:
        assert "failed: the counter is" in out


def test_remove_all_and_remove_by_handle() -> None:
    sw = FakeSwitch()
    text = """
        add dmac dstAddr:1 fwd(port:1) = A
        add dmac dstAddr:2 fwd(port:2) = B
        add dmac dstAddr:3 fwd(port:3)
        remove A
    """
    StfRunner(sw, io.StringIO()).run(parse_stf(text))
    assert [e.match for e in sw.state.tables["MyIngress.dmac"].entries()] == [(2,), (3,)]
    StfRunner(sw, io.StringIO()).run(parse_stf("remove all"))
    assert sw.state.tables["MyIngress.dmac"].entries() == []


def test_no_packet_checks_the_previous_packet() -> None:
    assert run(f"packet 0 {PKT}\nno_packet")[0] == 0  # dmac misses: drop
    code, out = run(f"add dmac dstAddr:2 fwd(port:3)\npacket 0 {PKT}\nno_packet\nexpect 3")
    assert code == 1 and "no_packet: the previous packet produced 1 packet(s)" in out


def test_add_on_an_indirect_table_creates_a_member() -> None:
    sw = FakeSwitch()
    StfRunner(sw, io.StringIO()).run(
        parse_stf("add ecmp dstAddr:1 fwd(port:4)\nadd ecmp dstAddr:2 fwd(port:4)")
    )
    table = sw.state.tables["MyIngress.ecmp"]
    assert table.lookup((1,))[1:] == ("MyIngress.fwd", (4,))
    assert len(sw.state.action_profiles["MyIngress.ecmp_ap"].members) == 1


def test_verbose_shows_commands_and_packets() -> None:
    code, out = run(f"add dmac dstAddr:2 fwd(port:3)\npacket 0 {PKT}\nexpect 3 {PKT}", verbose=True)
    assert code == 0
    assert "   2: packet 0" in out
    assert "in  port 0: 00 00 00 00 00 02" in out and "out port 3: 00 00" in out


# ------------------------------------------------------------------------------------------
# main_stf


def test_main_stf_reports_a_malformed_stf_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stf = tmp_path / "t.stf"
    stf.write_text("packet 0 0102\nexpect 1 zz\n")
    assert main_stf("prog.p4", str(stf)) == 1
    err = capsys.readouterr().err
    assert f"{stf}:2:10: bad character 'z'" in err
    assert "Traceback" not in err


def test_main_stf_reports_an_unreadable_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main_stf("prog.p4", "/nonexistent/t.stf") == 1
    assert "cannot read /nonexistent/t.stf" in capsys.readouterr().err


def _fake_compiler(monkeypatch: pytest.MonkeyPatch, fail: bool = False) -> list[object]:
    calls: list[object] = []

    class Program:
        schema = SCHEMA

    def new_switch(program: Program, seed: int = 0) -> FakeSwitch:
        calls.append(("new_switch", seed))
        return FakeSwitch()

    def load_program(
        path: str, include_dirs: tuple[str, ...] = (), defines: object = None
    ) -> Program:
        calls.append(("load", path, include_dirs))
        if fail:
            raise ParseError("expected ';'", Span("prog.p4", 3, 7, "  x = 1"))
        return Program()

    module = types.ModuleType("switch.compile")
    module.load_program = load_program  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "switch.compile", module)
    monkeypatch.setattr(stf_module, "V1Switch", new_switch)
    return calls


def test_main_stf_runs_the_program(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = _fake_compiler(monkeypatch)
    stf = tmp_path / "t.stf"
    stf.write_text(f"add dmac dstAddr:2 fwd(port:3)\npacket 0 {PKT}\nexpect 3 {PKT}\n")
    assert main_stf("prog.p4", str(stf), ["inc"]) == 0
    assert calls == [("load", "prog.p4", ("inc",)), ("new_switch", 0)]
    assert "PASS" in capsys.readouterr().out
    stf.write_text(f"packet 0 {PKT}\nexpect 3 {PKT}\n")
    assert main_stf("prog.p4", str(stf)) == 1
    assert "FAIL" in capsys.readouterr().out


def test_main_stf_renders_compile_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fake_compiler(monkeypatch, fail=True)
    stf = tmp_path / "t.stf"
    stf.write_text("packet 0 00\n")
    assert main_stf("prog.p4", str(stf)) == 1
    err = capsys.readouterr().err
    assert err.startswith("prog.p4:3:7: expected ';'\n  x = 1\n      ^")


def test_long_packets_are_shown_in_rows_of_32_bytes() -> None:
    data = bytes(range(70))
    wanted = bytearray(data)
    wanted[40] = 0xFF
    code, out = run(f"packet 0 00\nexpect 1 {wanted.hex()} $", ScriptedSwitch([(1, data + b"\1")]))
    assert code == 1
    assert "@32   expected 20 21 22 23 24 25 26 27 FF" in out
    assert "@64   expected 40 41 42 43 44 45 $" in out
    assert "received packet is too long: 71 bytes, expected 70" in out
    markers = [line for line in out.splitlines() if line.strip() and set(line.strip()) == {"^"}]
    assert len(markers) == 2


def test_packet_without_data_is_an_empty_packet() -> None:
    # bmv2stf.py sends `packet <port>` with no bytes as a zero-length packet
    (cmd,) = parse_stf("packet 0")
    assert isinstance(cmd, PacketCmd) and cmd.data == b""
