"""Programs that must be rejected get file:line:col errors, never a traceback.

Each file in tests/p4err starts with ``// expect-error: LINE:COL: SUBSTRING`` (COL may be *).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from switch.compile import compile_source, load_program
from switch.errors import P4Error

ERR_DIR = Path(__file__).resolve().parents[1] / "p4err"
CASES = sorted(ERR_DIR.glob("*.p4"))
EXPECT = re.compile(r"//\s*expect-error:\s*(\d+):(\d+|\*):\s*(.*)")


def _expectation(path: Path) -> tuple[int, int | None, str]:
    m = EXPECT.match(path.read_text().splitlines()[0])
    assert m, f"{path} lacks an expect-error line"
    col = None if m.group(2) == "*" else int(m.group(2))
    return int(m.group(1)), col, m.group(3).strip()


@pytest.mark.parametrize("path", CASES, ids=[c.stem for c in CASES])
def test_bad_program_is_rejected_at_the_right_place(path: Path) -> None:
    line, col, text = _expectation(path)
    with pytest.raises(P4Error) as info:
        load_program(path)
    err = info.value
    assert err.span is not None
    assert err.span.file == str(path)
    assert err.span.line == line, err.render()
    if col is not None:
        assert err.span.col == col, err.render()
    assert text.lower() in err.message.lower(), err.render()
    rendered = err.render().splitlines()
    assert rendered[0].startswith(f"{path}:{line}:")
    assert rendered[-1].strip() == "^"


def test_cli_prints_position_and_source_line_without_traceback() -> None:
    path = ERR_DIR / "unknown_field.p4"
    r = subprocess.run(
        [sys.executable, "-m", "switch.cli", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    first = r.stderr.splitlines()[0]
    assert re.match(rf"{re.escape(str(path))}:\d+:\d+: ", first)


PROGRAM_TAIL = """
struct m_t {}
parser P(packet_in p, out H h, inout m_t m, inout standard_metadata_t sm) {
    state start { p.extract(h.h); transition accept; }
}
control V(inout H h, inout m_t m) { apply {} }
control E(inout H h, inout m_t m, inout standard_metadata_t sm) { apply {} }
control C(inout H h, inout m_t m) { apply {} }
control D(packet_out p, in H h) { apply { p.emit(h.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def _prog(ingress_body: str, decls: str = "") -> str:
    return (
        "#include <v1model.p4>\nheader h_t { bit<8> a; bit<16> b; int<8> s; bit<8> c; }\n"
        "struct H { h_t h; }\n"
        + decls
        + "control I(inout H h, inout m_t m, inout standard_metadata_t sm) {\n"
        + ingress_body
        + "\n}\n"
    ).replace(
        "struct H { h_t h; }\n", "struct H { h_t h; }\nstruct m_t {}\n"
    ) + PROGRAM_TAIL.replace("struct m_t {}\n", "")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("apply { h.h.a = h.h.b; }", "expected bit<8>, got bit<16>"),
        ("apply { h.h.a = h.h.a + h.h.b; }", "width mismatch"),
        ("apply { h.h.a = h.h.s; }", "expected bit<8>, got int<8>"),
        ("apply { h.h.a = h.h.a ++ 1; }", "needs operands with a width"),
        ("apply { h.h.a = h.h.b[16:1]; }", "out of range"),
        ("apply { if (h.h.a) { } }", "expected bool"),
        ("apply { h.h.zz = 1; }", "has no field 'zz'"),
        ("apply { mark_to_drop(sm, sm); }", "wrong number of arguments"),
        ("action a(bit<8> x) {} apply { a(); }", "missing 'x'"),
        ("apply { h.h.a = h.h.a << h.h.s; }", "shift amount must be unsigned"),
        ("apply { bit<8> x = 300; h.h.a = 8w256; }", "does not fit in 8 bits"),
        (
            "table t { key = { h.h.a: exact; } actions = { NoAction; } default_action = nope(); }"
            " apply { t.apply(); }",
            "unknown action 'nope'",
        ),
        ("apply { h.h.setValid(1); }", "takes no arguments"),
        ("apply { break; }", "'break' outside a for loop"),
        ("apply { if (true) { continue; } }", "'continue' outside a for loop"),
        ("apply { for (bit<8> i in h.h) {} }", "a range (a .. b) or a header stack"),
        ("apply { for (bool i in 1 .. 2) {} }", "needs a bit<W> or int<W> variable"),
        ("apply { for (bit<8> i = 0; i < 2; bit<8> j = 1) {} }", "cannot declare"),
        ("apply { for (bit<8> i = 0; i; i = i + 1) {} }", "for condition"),
    ],
)
def test_type_errors_are_reported(body: str, message: str) -> None:
    with pytest.raises(P4Error) as info:
        compile_source(_prog(body), "prog.p4")
    assert message in info.value.message, info.value.render()
    assert info.value.span is not None and info.value.span.file == "prog.p4"


def test_valid_program_compiles() -> None:
    prog = compile_source(
        _prog("apply { h.h.a = h.h.a |+| 8w1; h.h.b = h.h.a ++ h.h.c; }"), "prog.p4"
    )
    assert prog.schema.tables == []


def test_unsupported_constructs_say_which() -> None:
    src = _prog("apply { }").replace(
        "header h_t { bit<8> a;", "struct V { varbit<16> v; }\nheader h_t { V v; bit<8> a;"
    )
    with pytest.raises(P4Error) as info:
        compile_source(src, "prog.p4")
    assert "varbit" in info.value.message and "not supported" in info.value.message


def test_missing_include_is_reported_at_the_directive() -> None:
    with pytest.raises(P4Error) as info:
        compile_source('#include "nope.p4"\n', "prog.p4")
    assert info.value.span is not None and info.value.span.line == 1
