"""Varbit, for loops, enum keysets and generic declarations: misuse is refused at its
``file:line:col`` with a message that says what is wrong, and the features compile to what the
specification says (the packet-level tests are tests/stf/varbit, for_loops, enum_keysets and
generics)."""

from __future__ import annotations

import pytest

from switch.compile import compile_source
from switch.errors import P4Error

HEAD = """#include <v1model.p4>
header v_t { bit<8> len; varbit<32> opt; }
header h_t { bit<8> a; bit<16> b; }
enum bit<8> E { A = 1, B = 2 }
enum bit<8> F { A = 1 }
struct pair<T> { T x; T y; }
T zero<T>() { return 0; }
T id<T>(in T v) { return v; }
control G<T>(inout T v) { apply { } }
struct H { h_t h; v_t v; }
struct m_t { E e; }
"""

TAIL = """
parser P(packet_in p, out H h, inout m_t m, inout standard_metadata_t sm) {
    state start { p.extract(h.h); p.extract(h.v, 8); transition accept; }
}
control I(inout H h, inout m_t m, inout standard_metadata_t sm) {
    DECLS
    apply { BODY }
}
control V(inout H h, inout m_t m) { apply {} }
control Eg(inout H h, inout m_t m, inout standard_metadata_t sm) { apply {} }
control C(inout H h, inout m_t m) { apply {} }
control D(packet_out p, in H h) { apply { p.emit(h.h); p.emit(h.v); } }
V1Switch(P(), V(), I(), Eg(), C(), D()) main;
"""


def _prog(body: str, decls: str = "", head_extra: str = "") -> str:
    return HEAD + head_extra + TAIL.replace("DECLS", decls).replace("BODY", body)


def test_the_base_program_compiles() -> None:
    compile_source(_prog("h.h.a = id(h.h.a); g.apply(h.h.a);", "G<bit<8>>() g;"), "prog.p4")


@pytest.mark.parametrize(
    ("body", "decls", "head_extra", "where", "message"),
    [
        # varbit
        ("h.h.b = h.v.opt + 1;", "", "", "BODY", "numeric"),
        ("", "", "header w_t { varbit<8> a; varbit<8> b; }\n", 1, "more than one varbit"),
        ("", "", "struct sv { varbit<8> a; }\nheader w_t { sv s; }\n", 2, "not supported"),
        ("digest<v_t>(1, h.v);", "", "", "BODY", "has a varbit field, is not supported"),
        (
            "",
            "register<varbit<8>>(4) r;",
            "",
            "DECLS",
            "registers of varbit values are not supported",
        ),
        # for loops
        ("break;", "", "", "BODY", "'break' outside a for loop"),
        ("for (bit<8> i in h.h) { }", "", "", "BODY", "a range (a .. b) or a header stack"),
        ("for (;;) { }", "", "", "BODY", "a for loop needs a condition"),
        # enum keysets
        (
            "t.apply();",
            "action a() {} table t { key = { m.e: ternary; } actions = { a; } "
            "const entries = { F.A &&& E.A: a(); } }",
            "",
            "DECLS",
            "a member of F for a key of type E",
        ),
        # generics
        ("pair p; ", "", "", "BODY", "needs type arguments"),
        ("pair<bit<8>, bit<8>> p; ", "", "", "BODY", "takes 1 type argument"),
        ("h.h.a = zero();", "", "", "BODY", "cannot infer type argument(s) T of 'zero'"),
        ("", "G() g;", "", "DECLS", "cannot infer type argument(s) T of 'G'"),
        ("h.h.a = id<bit<16>>(h.h.a);", "", "", "BODY", "expected bit<16>, got bit<8>"),
        # indexed slices e[lo +: w]
        ("h.h.a = (bit<8>) h.h.b[4 +: 20];", "", "", "BODY", "slice width 20 is out of range"),
        ("h.h.a = h.h.b[10 +: 8];", "", "", "BODY", "slice [10 +: 8] is out of range for bit<16>"),
        ("h.h.a = h.h.b[h.h.a +: h.h.a];", "", "", "BODY", "is not a compile-time constant"),
        ("int<8> s = 1; h.h.a = h.h.b[s +: 8];", "", "", "BODY", "must be an unsigned integer"),
        ("h.h.b[h.h.a +: 8] = 16w1;", "", "", "BODY", "expected bit<8>, got bit<16>"),
        # default initializers
        ("if (... == 8w1) { }", "", "", "BODY", "'...' needs the type its context expects"),
        # constants of struct and tuple type; tuple elements
        ("", "const pair<bit<8>> c = { h.h.a, 1 };", "", "DECLS", "not a compile-time constant"),
        (
            "tuple<bit<8>, h_t> t = {1, h.h}; t[1].a = 2;",
            "",
            "",
            "BODY",
            "changing a header, struct or stack inside a tuple is not supported",
        ),
        ("tuple<bit<8>, bool> t = {1, true}; h.h.a = t[2];", "", "", "BODY", "out of bounds"),
    ],
)
def test_misuse_is_refused_where_it_is(
    body: str, decls: str, head_extra: str, where: str | int, message: str
) -> None:
    src = _prog(body, decls, head_extra)
    with pytest.raises(P4Error) as info:
        compile_source(src, "prog.p4")
    err = info.value
    assert message in err.message, err.render()
    assert err.span is not None and err.span.file == "prog.p4"
    lines = src.splitlines()
    if isinstance(where, int):
        expected_line = len(HEAD.splitlines()) + where
    else:
        expected_line = 1 + next(
            i for i, line in enumerate(lines) if (body if where == "BODY" else decls) in line
        )
    if (where == "BODY" and body) or (where == "DECLS" and decls) or isinstance(where, int):
        assert err.span.line == expected_line, err.render()
    assert err.render().splitlines()[0].startswith(f"prog.p4:{err.span.line}:{err.span.col}:")


def test_no_for_loop_in_a_parser_state() -> None:
    src = _prog("").replace("p.extract(h.h);", "for (bit<8> i in 0 .. 1) { p.extract(h.h); }")
    with pytest.raises(P4Error, match="not allowed in a parser state"):
        compile_source(src, "prog.p4")


def test_select_on_a_varbit_is_refused() -> None:
    src = _prog("").replace(
        "transition accept; }", "transition select(h.v.opt) { default: accept; } }"
    )
    with pytest.raises(P4Error, match="cannot select on a varbit<32> value"):
        compile_source(src, "prog.p4")


def test_extract_arguments_must_match_the_header() -> None:
    one_arg = _prog("").replace("p.extract(h.v, 8);", "p.extract(h.v);")
    with pytest.raises(P4Error, match="extract it with its size in bits"):
        compile_source(one_arg, "prog.p4")
    two_args = _prog("").replace("p.extract(h.h);", "p.extract(h.h, 8);")
    with pytest.raises(P4Error, match="needs a header with a varbit field"):
        compile_source(two_args, "prog.p4")
    peek = _prog("").replace("p.extract(h.h);", "v_t x = p.lookahead<v_t>();")
    with pytest.raises(P4Error, match="fixed-size type"):
        compile_source(peek, "prog.p4")


def test_sizes_of_a_varbit_header() -> None:
    prog = compile_source(
        _prog(
            "h.h.a = (bit<8>) v_t.minSizeInBits(); h.h.b = (bit<32>) v_t.maxSizeInBits();"
            " h.h.b = h.v.sizeInBits() + (bit<32>) v_t.maxSizeInBytes();"
        ).replace("bit<16> b;", "bit<32> b;"),
        "prog.p4",
    )
    # minSizeInBits of v_t is its fixed part (8 bits), maxSizeInBits adds the varbit's maximum
    # (8 + 32 = 40), both constants; sizeInBits of a value is known only at run time
    assert ".f_a = (8 & 255)\n" in prog.source
    assert ".f_b = (40 & 4294967295)\n" in prog.source
    assert ".f_v._nbits() + (5 & 4294967295))" in prog.source


def test_an_error_in_a_generic_body_names_the_use_that_made_it() -> None:
    src = _prog(
        "h.h.a = inc(h.h.a); bool b = inc(true);", head_extra="T inc<T>(in T v) { return v + 1; }\n"
    )
    with pytest.raises(P4Error) as info:
        compile_source(src, "prog.p4")
    err = info.value
    # reported in the generic function's body, with the call that instantiated it for bool
    assert err.span is not None and err.span.line == len(HEAD.splitlines()) + 1
    assert "(in inc<bool>, used at prog.p4:" in err.message, err.render()


def test_direct_invocation_of_a_generic_control() -> None:
    # C<A>.apply(...) makes one anonymous instance per call, like C.apply(...)
    prog = compile_source(_prog("G<bit<8>>.apply(h.h.a); G<bit<16>>.apply(h.h.b);"), "prog.p4")
    assert "G_0" in prog.source and "G_1" in prog.source
    # without type arguments they come from the apply's arguments: one copy per type
    prog = compile_source(_prog("G.apply(h.h.a); G.apply(h.h.b); G.apply(h.h.a);"), "prog.p4")
    defs = [ln for ln in prog.source.splitlines() if ln.startswith("def C_I_G_")]
    assert len(defs) == 3 and len({d.split("(")[1] for d in defs}) == 2, defs
    with pytest.raises(P4Error, match="cannot infer type argument.*G<...>.apply"):
        compile_source(_prog("G.apply(_);"), "prog.p4")


def test_each_type_argument_list_gets_one_copy() -> None:
    prog = compile_source(
        _prog(
            "h.h.a = id(h.h.a); h.h.a = id(h.h.a); h.h.b = id(h.h.b);"
            " g1.apply(h.h.a); g2.apply(h.h.a);",
            "G<bit<8>>() g1; G<bit<8>>() g2;",
        ),
        "prog.p4",
    )
    # id is called with bit<8> twice and bit<16> once: two generated functions
    assert prog.source.count("def F__id_") == 2
