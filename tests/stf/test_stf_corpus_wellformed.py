"""Shape checks of the conformance corpus (tests/stf and tests/p4err).

These do not run any P4 program; they only keep the corpus well formed: every
program has its STF file, STF lines use the BMv2 STF commands and well-formed
packet data, and every tests/p4err program starts with a usable
``// expect-error: <line>:<col>: <substring>`` header pointing into the file.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

STF_DIR = Path(__file__).resolve().parent
ERR_DIR = STF_DIR.parent / "p4err"

STF_COMMANDS = {
    "add",
    "setdefault",
    "packet",
    "expect",
    "wait",
    "check_counter",
    "remove",
    "mirroring_add",
    "mirroring_add_mc",
    "mirroring_delete",
    "mirroring_get",
    "mc_mgrp_create",
    "mc_node_create",
    "mc_node_update",
    "mc_node_associate",
    "counter_read",
    "counter_write",
    "register_read",
    "register_write",
    "register_reset",
    "meter_get_rates",
    "meter_set_rates",
    "meter_array_set_rates",
}

PROGRAMS = sorted(STF_DIR.glob("*.p4"))
ERR_PROGRAMS = sorted(ERR_DIR.glob("*.p4"))


def test_corpus_is_not_empty() -> None:
    assert len(PROGRAMS) >= 25
    assert len(ERR_PROGRAMS) >= 20


@pytest.mark.parametrize("p4", PROGRAMS, ids=lambda p: p.stem)
def test_program_shape(p4: Path) -> None:
    src = p4.read_text()
    assert src.isascii()
    assert src.startswith("// "), "header comment saying what the program tests"
    assert "#include <core.p4>" in src and "#include <v1model.p4>" in src
    assert re.search(r"V1Switch\s*\(.*\)\s*main\s*;", src, re.S)
    assert p4.with_suffix(".stf").is_file()


@pytest.mark.parametrize("p4", PROGRAMS, ids=lambda p: p.stem)
def test_stf_lines(p4: Path) -> None:
    src = p4.read_text()
    stf = p4.with_suffix(".stf").read_text()
    packets = 0
    for n, line in enumerate(stf.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        words = s.split()
        assert words[0] in STF_COMMANDS, f"line {n}: {s}"
        if words[0] in ("packet", "expect"):
            assert words[1].isdigit(), f"line {n}: port"
            data = "".join(words[2:])
            if words[0] == "expect":
                assert data.endswith("$"), f"line {n}: expected packets are exact-length"
                data = data[:-1]
            assert re.fullmatch(r"[0-9A-Fa-f]+", data), f"line {n}: packet data"
            assert len(data) % 2 == 0, f"line {n}: odd number of hex digits"
            packets += words[0] == "packet"
        if words[0] in ("add", "setdefault"):
            table = words[1].split(".")[-1]
            assert re.search(rf"\btable\s+{table}\b", src), f"line {n}: table {table}"
            action = re.search(r"([\w.]+)\([^()]*\)\s*(=\s*\w+\s*)?$", s)
            assert action, f"line {n}: action call"
            name = action.group(1).split(".")[-1]
            assert name == "NoAction" or re.search(rf"\baction\s+{name}\s*\(", src)
    assert packets > 0


@pytest.mark.parametrize("p4", ERR_PROGRAMS, ids=lambda p: p.stem)
def test_p4err_header(p4: Path) -> None:
    lines = p4.read_text().splitlines()
    m = re.fullmatch(r"// expect-error: (\d+):(\d+|\*): (\S.*)", lines[0])
    assert m, "first line must be // expect-error: <line>:<col>: <substring>"
    line_no = int(m.group(1))
    assert 1 < line_no <= len(lines)
    if m.group(2) != "*":
        col = int(m.group(2))
        assert 1 <= col <= len(lines[line_no - 1])
        assert not lines[line_no - 1][col - 1].isspace()
