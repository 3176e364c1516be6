"""Priorities and mutability of a table's initial entries (P4-16 "Entry priorities", p4c's
``@priority``), and which entries the control plane may change."""

from __future__ import annotations

import pytest

from switch.compile import compile_source
from switch.compile.elaborate import entry_priorities
from switch.errors import P4Error
from switch.p4info import build_p4info
from switch.pipeline.errors import Code, StateError
from switch.pipeline.state import SwitchState


@pytest.mark.parametrize(
    ("given", "annotated", "largest_wins", "delta", "expected"),
    [
        # no priorities: the first entry wins, whatever the convention
        ([None] * 3, [None] * 3, True, 1, [3, 2, 1]),
        ([None] * 3, [None] * 3, True, 10, [21, 11, 1]),
        ([None] * 3, [None] * 3, False, 10, [21, 11, 1]),
        # the spec's example (smallest wins, delta 10): 10, 20, 30, 40, 40, 50 mirrored
        ([10, None, None, None, 40, None], [None] * 6, False, 10, [41, 31, 21, 11, 11, 1]),
        # largest wins: entries without a priority count down from the previous one
        (
            [1000, None, None, None, 901, None],
            [None] * 6,
            True,
            100,
            [1000, 900, 800, 700, 901, 801],
        ),
        # p4c's @priority(n), BMv2's smallest-wins convention; unannotated = position
        ([None] * 3, [3, None, 1], True, 1, [1, 2, 3]),
    ],
)
def test_entry_priorities_follow_the_spec_and_p4c(
    given: list[int | None],
    annotated: list[int | None],
    largest_wins: bool,
    delta: int,
    expected: list[int],
) -> None:
    assert entry_priorities(given, annotated, largest_wins, delta) == expected


PROGRAM = """#include <v1model.p4>
header h_t { bit<8> k; }
struct H { h_t h; }
struct M {}
parser P(packet_in p, out H h, inout M m, inout standard_metadata_t sm) {
    state start { p.extract(h.h); transition accept; } }
control I(inout H h, inout M m, inout standard_metadata_t sm) {
    action a(bit<8> v) { }
    table t_mut {
        key = { h.h.k: exact; }
        actions = { a; }
        ENTRIES
    }
    apply { t_mut.apply(); }
}
control E(inout H h, inout M m, inout standard_metadata_t sm) { apply { } }
control V(inout H h, inout M m) { apply { } }
control C(inout H h, inout M m) { apply { } }
control D(packet_out p, in H h) { apply { p.emit(h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_initial_entries_are_mutable_except_those_marked_const() -> None:
    src = PROGRAM.replace("ENTRIES", "entries = { 1 : a(1); const 2 : a(2); }")
    prog = compile_source(src)
    state = SwitchState(prog.schema)
    t = state.table("I.t_mut")
    t.delete((1,))
    with pytest.raises(StateError) as err:
        t.delete((2,))
    assert err.value.code is Code.PERMISSION_DENIED
    info = build_p4info(prog.schema)
    assert not info.tables[0].is_const_table


def test_const_entries_make_the_table_const() -> None:
    prog = compile_source(PROGRAM.replace("ENTRIES", "const entries = { 1 : a(1); }"))
    assert build_p4info(prog.schema).tables[0].is_const_table
    with pytest.raises(StateError) as err:
        SwitchState(prog.schema).table("I.t_mut").delete((1,))
    assert err.value.code is Code.PERMISSION_DENIED


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ("entries = { 1 : a(1); priority=3: 2 : a(2); }", "the first entry must give one"),
        ("priority_delta = 0; entries = { 1 : a(1); }", "priority_delta must be positive"),
        ("largest_priority_wins = 1; entries = { 1 : a(1); }", "bool"),
    ],
)
def test_bad_priority_properties_are_rejected(entries: str, message: str) -> None:
    with pytest.raises(P4Error) as err:
        compile_source(PROGRAM.replace("ENTRIES", entries))
    assert message in str(err.value)
