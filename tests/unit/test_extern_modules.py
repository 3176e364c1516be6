"""User-declared extern functions run from Python modules loaded with --load-modules (the
equivalent of BMv2's C++ modules): tests/extern_funcs/user_externs.p4 passes its STF test with
its module loaded (as a file and as a dotted name), is refused without it with an error naming
the function at its declaration, implementations that misbehave are reported by name, and
parameter types a Python implementation cannot take are refused at compile time."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from switch.compile import compile_source
from switch.errors import P4Error
from switch.pipeline import extern_modules as X
from switch.stf import main_stf

DIR = Path(__file__).resolve().parents[1] / "extern_funcs"
PROG = DIR / "user_externs.p4"
STF = DIR / "user_externs.stf"
IMPL = DIR / "user_externs_impl.py"
NAMES = ("mix", "swap_add", "is_odd", "negate", "classify", "f")


@pytest.fixture(autouse=True)
def clean_registry() -> Iterator[None]:
    for n in NAMES:
        X.unregister_extern_function(n)
    yield
    for n in NAMES:
        X.unregister_extern_function(n)


def test_program_runs_with_its_module_loaded_from_a_file(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc = main_stf(str(PROG), str(STF), load_modules=[str(IMPL)])
    out = capsys.readouterr()
    assert rc == 0, out.out + out.err
    assert "PASS: 5 packet(s)" in out.out
    assert X.registered_extern_functions() == sorted(NAMES[:5])


def test_program_runs_with_its_module_loaded_by_dotted_name() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "switch.cli", "stf", str(PROG), str(STF)]
        + ["--load-modules", "tests.extern_funcs.user_externs_impl"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=DIR.parents[1],
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS" in r.stdout


def test_without_a_module_the_program_is_refused_naming_the_function(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc = main_stf(str(PROG), str(STF))
    err = capsys.readouterr().err
    assert rc == 1
    decl_line = 1 + next(
        i for i, line in enumerate(PROG.read_text().splitlines()) if "extern bit<16> mix" in line
    )
    first = err.splitlines()[0]
    assert first.startswith(f"{PROG}:{decl_line}:16: extern function 'mix' has no implementation")
    assert "--load-modules" in first and "Traceback" not in err


def _run_with(fn: X.ExternImpl, name: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    X.load_extern_modules([str(IMPL)])
    X.register_extern_function(name, fn)
    rc = main_stf(str(PROG), str(STF))
    return rc, capsys.readouterr().out


def test_a_value_that_does_not_fit_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _run_with(lambda x, y, s: (300, x, 0), "swap_add", capsys)
    assert rc == 1
    assert (
        "extern function 'swap_add' returned 300 for its inout parameter 'x', "
        "which is not a bit<8>" in out
    )


def test_the_wrong_number_of_values_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _run_with(lambda x, y, s: (y, x), "swap_add", capsys)
    assert rc == 1
    assert "'swap_add' returned 2 value(s), expected 3" in out


def test_an_exception_in_an_implementation_is_reported(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, out = _run_with(lambda a, b: 1 // 0, "mix", capsys)
    assert rc == 1
    assert "extern function 'mix' raised ZeroDivisionError" in out


def test_a_bool_result_must_be_a_bool(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _run_with(lambda v: v & 1, "is_odd", capsys)
    assert rc == 1
    assert "returned 1 for its result, which is not a bool" in out


def test_modules_that_cannot_be_loaded(tmp_path: Path) -> None:
    with pytest.raises(X.ExternFunctionError, match="no such file"):
        X.load_extern_modules([str(tmp_path / "missing.py")])
    with pytest.raises(X.ExternFunctionError, match="ModuleNotFoundError"):
        X.load_extern_modules(["no_such_package.no_module"])
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(X.ExternFunctionError, match="RuntimeError: boom"):
        X.load_extern_modules([str(broken)])
    with pytest.raises(X.ExternFunctionError, match="not callable"):
        X.register_extern_function("f", 3)  # type: ignore[arg-type]


def test_tf_switch_refuses_a_module_it_cannot_load(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "switch.daemon", "--load-modules", str(tmp_path / "m.py")]
        + ["--no-p4"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1
    assert f"tf-switch: error: --load-modules {tmp_path / 'm.py'}: no such file" in r.stderr


HEAD = """#include <v1model.p4>
header h_t { bit<8> a; }
struct H { h_t h; }
struct M { }
DECL
parser P(packet_in p, out H h, inout M m, inout standard_metadata_t sm) {
    state start { p.extract(h.h); transition accept; }
}
control I(inout H h, inout M m, inout standard_metadata_t sm) { apply { CALL } }
control V(inout H h, inout M m) { apply {} }
control Eg(inout H h, inout M m, inout standard_metadata_t sm) { apply {} }
control C(inout H h, inout M m) { apply {} }
control D(packet_out p, in H h) { apply { p.emit(h.h); } }
V1Switch(P(), V(), I(), Eg(), C(), D()) main;
"""


@pytest.mark.parametrize(
    ("decl", "call", "message"),
    [
        ("extern void f(inout h_t x);", "f(h.h);", "parameter 'x' has type h_t"),
        ("extern h_t f();", "h.h = f();", "extern function 'f' returns h_t"),
        ("extern T f<T>(in T x);", "h.h.a = f(h.h.a);", "generic user extern functions"),
    ],
)
def test_types_an_implementation_cannot_take_are_refused(
    decl: str, call: str, message: str
) -> None:
    src = HEAD.replace("DECL", decl).replace("CALL", call)
    with pytest.raises(P4Error) as info:
        compile_source(src, "prog.p4")
    err = info.value
    assert message in err.message, err.render()
    assert err.span is not None and err.span.line == 9
    assert err.render().startswith(f"prog.p4:9:{err.span.col}:")
