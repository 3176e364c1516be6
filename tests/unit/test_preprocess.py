"""Tests of the C-style preprocessor (switch.lang.preprocess) and the architecture include files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from switch.errors import PreprocessError
from switch.lang.preprocess import (
    MAX_INCLUDE_DEPTH,
    SYSTEM_INCLUDE_DIR,
    preprocess_file,
    preprocess_text,
)


def out_lines(text: str, **kw: object) -> list[str]:
    """Output lines of ``text`` without the leading marker (one per source line)."""
    res = preprocess_text(text, **kw)  # type: ignore[arg-type]
    lines = res.text.split("\n")
    assert lines[0] == '# 1 "<string>"'
    assert lines[-1] == ""
    return lines[1:-1]


def expand(text: str, **kw: object) -> str:
    """The last output line of ``text``: where the line under test goes."""
    return out_lines(text, **kw)[-1]


def error_of(text: str, **kw: object) -> PreprocessError:
    with pytest.raises(PreprocessError) as info:
        preprocess_text(text, **kw)  # type: ignore[arg-type]
    return info.value


# --------------------------------------------------------------------------------------------
# Line structure


def test_line_numbers_stay_in_sync_and_columns_are_kept() -> None:
    src = "#define W 8\n  header h_t {  bit<16>  f; }\n#if 0\nskipped\n#endif\n\tbit<W> x;\n"
    lines = out_lines(src)
    assert lines == ["", "  header h_t {  bit<16>  f; }", "", "", "", "\tbit<8> x;"]


def test_comments_are_kept_and_shield_directives_and_macros() -> None:
    src = "#define A 1\n/* A\n#define A 2\n*/ A // A\nA /* A */ A\n"
    assert out_lines(src) == ["", "/* A", "#define A 2", "*/ 1 // A", "1 /* A */ 1"]


def test_string_literals_are_not_expanded() -> None:
    assert expand('#define X 1\nlog_msg("X = {}", X);') == 'log_msg("X = {}", 1);'


def test_line_continuation_joins_lines_and_keeps_the_count() -> None:
    src = "#define SUM(a, b) \\\n    ((a) + \\\n     (b))\nx = SUM(1, 2);\n"
    assert out_lines(src) == ["", "", "", "x = ((1) + (2));"]


def test_multi_line_macro_invocation_keeps_line_numbers() -> None:
    src = "#define F(a, b) a + b\nx = F(1,\n      2);\ny\n"
    assert out_lines(src) == ["", "x = 1 + 2;", "", "y"]


def test_crlf_and_missing_final_newline() -> None:
    assert out_lines("#define A 7\r\nA\r\nB") == ["", "7", "B"]


# --------------------------------------------------------------------------------------------
# Macros


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ("#define A 42\nA", "42"),
        ("#define A\n[A]", "[]"),
        ("#define A B\n#define B 3\nA", "3"),
        ("#define F(x) (x * 2)\nF(3)", "(3 * 2)"),
        ("#define F(x, y) x - y\nF( (1, 2) , g(3, 4) )", "(1, 2) - g(3, 4)"),
        ("#define F(x) [x]\n#define G(y) F(y) F(F(y))\nG(1)", "[1] [[1]]"),
        ("#define F() done\nF() F", "done F"),
        ("#define F(x) <x>\nF()", "<>"),
        ("#define f(x) x\n#define g f\ng(5)", "5"),
        ("#define X X + 1\nX", "X + 1"),
        ("#define A B\n#define B A\nA B", "A B"),
        ("#define F(x) F(x + 1)\nF(0)", "F(0 + 1)"),
        ("#define STR(x) #x\nSTR(  a   +  b )", '"a + b"'),
        ('#define STR(x) #x\nSTR("q\\n")', '"\\"q\\\\n\\""'),
        ("#define CAT(a, b) a ## b\nCAT(my, _hdr)", "my_hdr"),
        ("#define CAT(a, b) a##b\nCAT(, x) CAT(y, ) CAT(8w, 0)", "x y 8w0"),
        ("#define CAT(a, b) a ## b\n#define AB done\nCAT(A, B)", "done"),
        ("#define XSTR(x) STR(x)\n#define STR(x) #x\n#define V 3\nSTR(V) XSTR(V)", '"V" "3"'),
        ("#define V(fmt, ...) f(fmt, __VA_ARGS__)\nV(1, 2, 3)", "f(1, 2, 3)"),
        ("#define V(fmt, ...) f(fmt __VA_ARGS__)\nV(1)", "f(1 )"),
        ("#define NEG -1\nx = -NEG;", "x = - -1;"),
        ("#define PORT 9w3\nbit<9> p = PORT;", "bit<9> p = 9w3;"),
        ("#define N 8\nselect (x) { 1..N: s; }", "select (x) { 1..8: s; }"),
        ("#define A 1\n#undef A\nA", "A"),
        ("#define L __LINE__\n\nL", "3"),
        ("__FILE__", '"<string>"'),
    ],
)
def test_macro_expansion(src: str, expected: str) -> None:
    assert expand(src) == expected


def test_predefined_macros_and_command_line_defines() -> None:
    assert expand("__TARGET_BMV2__ __TAILFABRIC__") == "1 1"
    assert expand("A __TAILFABRIC__", defines={"A": "5", "__TAILFABRIC__": "2"}) == "5 2"
    assert expand("SQ(3)", defines={"SQ(x)": "((x) * (x))"}) == "((3) * (3))"
    assert out_lines("#ifdef E\nyes\n#endif", defines={"E": ""}) == ["", "yes", ""]


# --------------------------------------------------------------------------------------------
# Conditionals


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("1", True),
        ("0", False),
        ("UNKNOWN", False),
        ("!UNKNOWN", True),
        ("defined A", True),
        ("defined(A)", True),
        ("defined ( B )", False),
        ("!defined(B) && defined A", True),
        ("defined B || A == 10", True),
        ("A > 5 ? 1 : 0", True),
        ("A < 5 ? 1 : 0", False),
        ("(1 + 2) * 3 == 9", True),
        ("1 + 2 * 3 == 7", True),
        ("10 / 3 == 3 && 10 % 3 == 1 && -7 / 2 == -3", True),
        ("0x10 == 16 && 010 == 8 && 0b101 == 5 && 20200408UL == 20200408", True),
        ("(1 << 4) == 16 && (256 >> 4) == 16", True),
        ("(6 & 3) == 2 && (6 | 3) == 7 && (6 ^ 3) == 5 && ~0 == -1", True),
        ("1 != 2 && 2 <= 2 && 3 >= 2", True),
        ("-1 < 0", True),
        ("0 && 1 / 0", False),
        ("1 || 1 / 0", True),
        ("V1MODEL_VERSION >= 20200408", False),
        ("FN(2) == 4", True),
    ],
)
def test_if_expressions(expr: str, value: bool) -> None:
    src = f"#define A 10\n#define FN(x) ((x) * 2)\n#if {expr}\nyes\n#else\nno\n#endif\n"
    assert out_lines(src) == ["", "", "", "yes" if value else "", "", "" if value else "no", ""]


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ("#ifdef A\na\n#endif\n", []),
        ("#ifndef A\na\n#endif\n", ["a"]),
        ("#if 0\na\n#elif 1\nb\n#elif 1\nc\n#else\nd\n#endif\n", ["b"]),
        ("#if 0\na\n#elif 0\nb\n#else\nd\n#endif\n", ["d"]),
        ("#if 1\n#if 0\na\n#else\nb\n#endif\n#endif\n", ["b"]),
        ("#if 0\n#if 1\na\n#else\nb\n#endif\nc\n#else\nd\n#endif\n", ["d"]),
        # directives in skipped blocks are not checked, except the conditional structure
        ("#if 0\n#include <nope.p4>\n#error no\n#bogus\n#if 1 +\n#endif\n#endif\nok\n", ["ok"]),
        ("#if 1\nok\n#elif 1 / 0\n#endif\n", ["ok"]),
        ("#define G\n#ifndef G\n#define G\nonce\n#endif\n", []),
        ("#if 0\n/*\n#endif\n*/\n#endif\nok\n", ["ok"]),
    ],
)
def test_conditional_blocks(src: str, expected: list[str]) -> None:
    assert [ln for ln in out_lines(src) if ln] == expected


# --------------------------------------------------------------------------------------------
# Other directives


def test_warning_goes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert out_lines("#warning careful now\nx\n") == ["", "x"]
    assert "<string>:1:2: warning: #warning careful now" in capsys.readouterr().err


def test_line_directive_emits_marker() -> None:
    res = preprocess_text('a\n#line 100 "other.p4"\nb\n__LINE__ __FILE__\n')
    assert res.text.split("\n") == [
        '# 1 "<string>"',
        "a",
        "",
        '# 100 "other.p4"',
        "b",
        '101 "other.p4"',
        "",
    ]


def test_pragmas_and_null_directive_are_dropped() -> None:
    assert out_lines("#pragma something odd\n#\nx\n") == ["", "", "x"]


# --------------------------------------------------------------------------------------------
# Includes


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_include_markers_and_files(tmp_path: Path) -> None:
    write(tmp_path / "inc" / "defs.p4", "#define W 16\nbit<W> f;\n")
    main = write(tmp_path / "main.p4", '// top\n#include "inc/defs.p4"\nbit<W> g;\n')
    res = preprocess_file(str(main))
    defs = os.path.join(str(tmp_path), "inc/defs.p4")
    assert res.text.split("\n") == [
        f'# 1 "{main}"',
        "// top",
        "",
        f'# 1 "{defs}"',
        "",
        "bit<16> f;",
        f'# 3 "{main}"',
        "bit<16> g;",
        "",
    ]
    assert res.files == {
        str(main): ["// top", '#include "inc/defs.p4"', "bit<W> g;"],
        defs: ["#define W 16", "bit<W> f;"],
    }


def test_include_search_order(tmp_path: Path) -> None:
    write(tmp_path / "src" / "x.p4", "local\n")
    write(tmp_path / "dir1" / "x.p4", "dir1\n")
    write(tmp_path / "dir2" / "x.p4", "dir2\n")
    write(tmp_path / "dir2" / "y.p4", "dir2 y\n")
    main = write(
        tmp_path / "src" / "main.p4", '#include "x.p4"\n#include <x.p4>\n#include "y.p4"\n'
    )
    dirs = [str(tmp_path / "dir1"), str(tmp_path / "dir2")]
    res = preprocess_file(str(main), include_dirs=dirs)
    body = [ln for ln in res.text.split("\n") if ln and not ln.startswith("#")]
    assert body == ["local", "dir1", "dir2 y"]


def test_include_guard_and_pragma_once(tmp_path: Path) -> None:
    write(tmp_path / "g.p4", "#ifndef G_P4\n#define G_P4\nguarded\n#endif\n")
    write(tmp_path / "o.p4", "#pragma once\nonce\n")
    main = write(
        tmp_path / "m.p4", '#include "g.p4"\n#include "g.p4"\n#include "o.p4"\n#include "o.p4"\n'
    )
    res = preprocess_file(str(main))
    body = [ln for ln in res.text.split("\n") if ln and not ln.startswith("#")]
    assert body == ["guarded", "once"]


def test_computed_include(tmp_path: Path) -> None:
    write(tmp_path / "h.p4", "from h\n")
    main = write(tmp_path / "m.p4", '#define HDR "h.p4"\n#include HDR\n')
    assert "from h" in preprocess_file(str(main)).text.split("\n")


def test_recursive_include_hits_the_limit(tmp_path: Path) -> None:
    main = write(tmp_path / "r.p4", 'x\n#include "r.p4"\n')
    with pytest.raises(PreprocessError) as info:
        preprocess_file(str(main))
    err = info.value
    assert "nested too deeply" in err.message and str(MAX_INCLUDE_DEPTH) in err.message
    assert err.span is not None and (err.span.line, err.span.col) == (2, 10)


def test_errors_in_included_file_name_that_file(tmp_path: Path) -> None:
    write(tmp_path / "bad.p4", "ok\n#if 1 +\n#endif\n")
    main = write(tmp_path / "m.p4", '#include "bad.p4"\n')
    with pytest.raises(PreprocessError) as info:
        preprocess_file(str(main))
    span = info.value.span
    assert span is not None
    assert (span.file, span.line, span.col, span.text) == (
        os.path.join(str(tmp_path), "bad.p4"),
        2,
        8,
        "#if 1 +",
    )


def test_missing_main_file_is_a_preprocess_error(tmp_path: Path) -> None:
    with pytest.raises(PreprocessError, match="cannot read"):
        preprocess_file(str(tmp_path / "absent.p4"))


# --------------------------------------------------------------------------------------------
# Errors and their positions


@pytest.mark.parametrize(
    ("src", "message", "line", "col"),
    [
        ('#include "nope.p4"\n', "cannot find include file 'nope.p4'", 1, 10),
        ("\n  #include <nope.p4>\n", "cannot find include file 'nope.p4'", 2, 12),
        ("#include nope\n", 'expects "FILENAME" or <FILENAME>', 1, 10),
        ("#include <x.p4\n", "missing terminating >", 1, 10),
        ("#if 1\nx\n", "unterminated #if", 1, 2),
        ("#ifdef A\n#else\n", "unterminated #ifdef", 1, 2),
        ("#else\n", "#else without #if", 1, 2),
        ("x\n#elif 1\n", "#elif without #if", 2, 2),
        ("#endif\n", "#endif without #if", 1, 2),
        ("#if 1\n#else\n#else\n#endif\n", "#else after #else", 3, 2),
        ("#if 1\n#else\n#elif 1\n#endif\n", "#elif after #else", 3, 2),
        ("#if\n#endif\n", "#if with no expression", 1, 2),
        ("#if (1 + 2\n#endif\n", "missing ')' in expression", 1, 11),
        ("#if 1 2\n#endif\n", "missing binary operator before token '2'", 1, 7),
        ("#if 1 +\n#endif\n", "expected value in expression", 1, 8),
        ("#if 1 ? 2\n#endif\n", "expected ':'", 1, 10),
        ("#if 8w3\n#endif\n", "invalid integer constant '8w3'", 1, 5),
        ('#if "s"\n#endif\n', "not valid in preprocessor expressions", 1, 5),
        ("#if 1 / 0\n#endif\n", "division by zero", 1, 7),
        ("#if defined\n#endif\n", "operator 'defined' requires an identifier", 1, 5),
        ("#if defined(A\n#endif\n", "missing ')' after 'defined'", 1, 13),
        ("#ifdef\n#endif\n", "no macro name given in #ifdef", 1, 2),
        ("#ifndef 3\n#endif\n", "macro names must be identifiers", 1, 9),
        ("#define\n", "no macro name given in #define", 1, 2),
        ("#define 3 x\n", "macro names must be identifiers", 1, 9),
        ("#define defined 1\n", "'defined' cannot be used as a macro name", 1, 9),
        ("#define F(a, a) a\n", "duplicate macro parameter 'a'", 1, 14),
        ("#define F(a b) a\n", "expected ',' or ')'", 1, 13),
        ("#define F(a,\n", "missing ')' in macro parameter list", 1, 12),
        ("#define F(1) a\n", "expected parameter name", 1, 11),
        ("#define F(a) ## a\n", "'##' cannot appear at either end", 1, 14),
        ("#define F(a) #b\n", "'#' is not followed by a macro parameter", 1, 14),
        ("#define F(a, b) a\nx F(1)\n", "macro 'F' requires 2 arguments, but only 1 given", 2, 3),
        ("#define F(a) a\n  F(1, 2)\n", "macro 'F' passed 2 arguments, but takes just 1", 2, 3),
        ("#define F() a\nF(1)\n", "macro 'F' passed 1 arguments, but takes just 0", 2, 1),
        ("#define F(a) a\nF(1\n", "unterminated argument list invoking macro 'F'", 2, 1),
        ("#define F(a) a\nF(1\n#define X\n)\n", "unterminated argument list", 2, 1),
        (
            "#define CAT(a, b) a ## b\n CAT(+, /)\n",
            "does not give a valid preprocessing token",
            2,
            2,
        ),
        ("#undef\n", "no macro name given in #undef", 1, 2),
        ("  #  error  stop: bad  config\n", "#error stop: bad  config", 1, 6),
        ("#foo\n", "invalid preprocessing directive #foo", 1, 2),
        ("#line x\n", "'x' after #line is not a positive integer", 1, 7),
        ("#line 0\n", "'0' after #line is not a positive integer", 1, 7),
        ("#line 5 x\n", "invalid filename 'x' in #line", 1, 9),
        ("x\n/* open\n\n", "unterminated comment", 2, 1),
        ("#define A 1 /* open\n\n", "unterminated comment in directive", 1, 13),
    ],
)
def test_error_positions(src: str, message: str, line: int, col: int) -> None:
    err = error_of(src)
    assert message in err.message
    assert err.span is not None
    assert (err.span.file, err.span.line, err.span.col) == ("<string>", line, col)
    assert err.span.text == src.split("\n")[line - 1]
    rendered = err.render()
    assert rendered.startswith(f"<string>:{line}:{col}: ")
    assert rendered.endswith(" " * (col - 1) + "^")


def test_error_after_line_continuation_points_at_the_physical_line() -> None:
    err = error_of("#if 1 + \\\n   (2\n#endif\n")
    assert err.span is not None and (err.span.line, err.span.col) == (2, 6)


def test_command_line_define_errors() -> None:
    err = error_of("x", defines={"F(a,a)": "a"})
    assert err.span is not None and err.span.file == "<command-line>"
    assert "duplicate macro parameter" in err.message


def test_unterminated_if_is_reported_where_it_was_written_despite_line() -> None:
    err = error_of('\n#if 1\n#line 1 "z.p4"\n')
    assert err.span is not None and (err.span.file, err.span.line) == ("<string>", 2)


_PIECES = [
    "#define ",
    "#undef ",
    "#if ",
    "#ifdef ",
    "#elif ",
    "#else",
    "#endif",
    "#include ",
    "#line ",
    "#error ",
    "A",
    "F",
    "(",
    ")",
    ",",
    "##",
    "#",
    '"s"',
    '"',
    "<",
    ">",
    "/*",
    "*/",
    "//",
    "\\",
    "1",
    "0",
    "&&",
    "?",
    ":",
    "/",
    "defined",
    "...",
    "__VA_ARGS__",
    "__LINE__",
    " ",
    "\n",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40))
def test_bad_input_only_ever_raises_preprocess_errors(pieces: list[str]) -> None:
    src = "#define A 1\n#define F(x, y) x ## y #x\n" + "".join(pieces)
    try:
        res = preprocess_text(src)
    except PreprocessError as e:
        assert e.span is not None and e.span.line >= 1 and e.span.col >= 1
        e.render()
    else:
        n_markers = sum(1 for ln in res.text.split("\n") if ln.startswith("# "))
        assert res.text.count("\n") - n_markers == len(res.files["<string>"])


def test_comment_in_directive_may_span_lines() -> None:
    assert out_lines("#define A 1 /* a\n b */ + 2\nA\n") == ["", "", "1 + 2"]


# --------------------------------------------------------------------------------------------
# Architecture files


def test_v1model_include_pulls_in_both_files(tmp_path: Path) -> None:
    main = write(tmp_path / "prog.p4", "#include <core.p4>\n#include <v1model.p4>\nstruct m_t {}\n")
    res = preprocess_file(str(main))
    core = os.path.join(SYSTEM_INCLUDE_DIR, "core.p4")
    v1 = os.path.join(SYSTEM_INCLUDE_DIR, "v1model.p4")
    assert set(res.files) == {str(main), core, v1}
    text = res.text
    assert f'# 1 "{core}"' in text and f'# 1 "{v1}"' in text
    assert text.count("extern packet_in {") == 1  # the include guard of core.p4 works
    assert "package V1Switch<H, M>(" in text
    assert "const bit<32> __v1model_version = 20180101;" in text
    assert "extern register<T> {" in text and "typedef bit<9> PortId_t;" not in text
    assert text.rstrip("\n").endswith(f'# 3 "{main}"\nstruct m_t {{}}')


@pytest.mark.parametrize("how", ["define", "option"])
def test_v1model_version_20200408(tmp_path: Path, how: str) -> None:
    head = "#define V1MODEL_VERSION 20200408\n" if how == "define" else ""
    defines = {"V1MODEL_VERSION": "20200408"} if how == "option" else None
    main = write(tmp_path / "prog.p4", head + "#include <v1model.p4>\n")
    text = preprocess_file(str(main), defines=defines).text
    assert "const bit<32> __v1model_version = 20200408;" in text
    for decl in (
        "typedef bit<9> PortId_t;",
        "extern register<T, I> {",
        "extern counter<I> {",
        "extern meter<I> {",
        "void count(in I index);",
    ):
        assert decl in text
    assert "extern register<T> {" not in text


def test_standard_metadata_fields_in_order() -> None:
    text = preprocess_text("#include <v1model.p4>\n").text
    start = text.index("struct standard_metadata_t {")
    body = text[start : text.index("}", start)]
    fields = []
    for ln in body.split("\n")[1:]:
        code = ln.split("//")[0].split()
        if len(code) == 2:
            fields.append((code[0], code[1].rstrip(";")))
    assert fields == [
        ("bit<9>", "ingress_port"),
        ("bit<9>", "egress_spec"),
        ("bit<9>", "egress_port"),
        ("bit<32>", "instance_type"),
        ("bit<32>", "packet_length"),
        ("bit<32>", "enq_timestamp"),
        ("bit<19>", "enq_qdepth"),
        ("bit<32>", "deq_timedelta"),
        ("bit<19>", "deq_qdepth"),
        ("bit<48>", "ingress_global_timestamp"),
        ("bit<48>", "egress_global_timestamp"),
        ("bit<16>", "mcast_grp"),
        ("bit<16>", "egress_rid"),
        ("bit<1>", "checksum_error"),
        ("error", "parser_error"),
        ("bit<3>", "priority"),
    ]
