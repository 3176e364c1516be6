"""``tf-switch --native on`` refuses a program the C generator does not support, with the reason."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from switch.daemon import main
from switch.native import default_mode, set_default_mode
from tests.unit.test_native_fabric import UNION_PROGRAM


@pytest.fixture(autouse=True)
def _restore_mode() -> Iterator[None]:
    saved = default_mode()  # main() sets the process-wide mode
    yield
    set_default_mode(saved)


def test_native_on_fails_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prog = tmp_path / "union.p4"
    prog.write_text(UNION_PROGRAM)
    rc = main(["--native", "on", "--thrift-port", "0", str(prog)])
    err = capsys.readouterr().err
    assert rc == 1
    assert "--native on" in err and "header union" in err
    assert "Traceback" not in err


def test_native_mode_is_checked(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--native", "fast", "--no-p4"])
    assert exc.value.code == 2
    assert "--native" in capsys.readouterr().err


def test_prebuild_command_says_which_programs_run_natively(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from switch.native.__main__ import main as prebuild

    root = Path(__file__).resolve().parents[2]
    fabric, union = root / "p4" / "fabric.p4", root / "tests" / "stf" / "header_union.p4"
    assert prebuild([str(fabric), str(union)]) == 0
    out = capsys.readouterr().out
    assert f"{fabric}: native" in out
    assert f"{union}: Python executor" in out and "header union" in out
    assert prebuild(["--strict", str(union)]) == 1
