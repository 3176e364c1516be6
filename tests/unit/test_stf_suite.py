"""Every STF test of the project's conformance corpus (tests/stf) passes on the executor."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from switch.stf import main_stf

STF_DIR = Path(__file__).resolve().parents[1] / "stf"
P4_DIR = Path(__file__).resolve().parents[2] / "p4"  # the project's programs have STF tests too
CASES = sorted(STF_DIR.glob("*.stf"))


def program_of(stf: Path) -> Path:
    local = stf.with_suffix(".p4")
    return local if local.exists() else P4_DIR / local.name


@pytest.mark.parametrize("stf", CASES, ids=[c.stem for c in CASES])
def test_stf_case_passes(stf: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main_stf(str(program_of(stf)), str(stf))
    out = capsys.readouterr()
    assert rc == 0, out.out + out.err


def test_corpus_is_not_empty() -> None:
    assert len(CASES) >= 25


def test_tf_p4_stf_reports_a_mismatch_with_a_diff(tmp_path: Path) -> None:
    prog = STF_DIR / "table_exact.p4"
    good = (STF_DIR / "table_exact.stf").read_text().splitlines()
    # flip the last nibble of the first expectation
    bad = []
    flipped = False
    for line in good:
        if not flipped and line.startswith("expect"):
            parts = line.rstrip().split()
            data = parts[-1] if parts[-1] != "$" else parts[-2]
            new = data[:-1] + ("0" if data[-1] != "0" else "1")
            line = line.replace(data, new, 1)
            flipped = True
        bad.append(line)
    stf = tmp_path / "bad.stf"
    stf.write_text("\n".join(bad) + "\n")
    r = subprocess.run(
        [sys.executable, "-m", "switch.cli", "stf", str(prog), str(stf)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1
    assert "FAIL" in r.stdout and "^" in r.stdout
    assert "Traceback" not in r.stderr
