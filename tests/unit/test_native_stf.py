"""Every STF program of tests/stf the native executor accepts behaves as the Python one.

Both executors run the same STF script; every packet's outputs (ports and bytes), the
counters, registers, digests and drop counts must be identical, and both must pass the test.
Programs the C generator does not support are skipped with its reason; the list of programs
that must run natively keeps that set from shrinking unnoticed.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from switch.compile import CompiledProgram, load_program
from switch.native import native_reason
from switch.pipeline.v1model import V1Switch
from switch.stf import parse_stf, run_stf
from tests.unit.native_diff import assert_same_state, pair

STF_DIR = Path(__file__).resolve().parents[1] / "stf"
P4_DIR = Path(__file__).resolve().parents[2] / "p4"
CASES = sorted(STF_DIR.glob("*.stf"))

MUST_RUN_NATIVELY = {
    "arith_signed",
    "arith_unsigned",
    "checksum_payload",
    "compound_assign",
    "drop",
    "dont_care_args",
    "enum_in_metadata",
    "enum_keysets",
    "enum_typedef_const",
    "eval_order",
    "eval_order_effects",
    "exit_copy_out",
    "exit_in_condition",
    "fabric",
    "hash_algos",
    "header_validity",
    "ipv4_checksum",
    "ipv6_router",
    "nested_control",
    "parser_errors",
    "parser_lookahead",
    "parser_select",
    "random_log_digest",
    "registers",
    "slices_concat",
    "stack_ops",
    "stack_parse",
    "table_action_run",
    "table_const_entries",
    "table_entry_priority",
    "table_exact",
    "table_initial_entries",
    "table_lpm",
    "table_ternary",
    "truncate",
}

_programs: dict[Path, CompiledProgram] = {}


def program_for(stf: Path) -> CompiledProgram:
    local = stf.with_suffix(".p4")
    path = local if local.exists() else P4_DIR / local.name
    if path not in _programs:
        _programs[path] = load_program(path)
    return _programs[path]


class Recorder:
    """The STF runner's switch: records every packet's outputs."""

    def __init__(self, sw: V1Switch) -> None:
        self.sw = sw
        self.state = sw.state
        self.outputs: list[list[tuple[int, bytes]]] = []

    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        out = self.sw.process(port, data)
        self.outputs.append(out)
        return out


@pytest.mark.parametrize("stf", CASES, ids=[c.stem for c in CASES])
def test_stf_program_same_on_both_executors(stf: Path) -> None:
    program = program_for(stf)
    reason = native_reason(program)
    if reason is not None:
        assert stf.stem not in MUST_RUN_NATIVELY, reason
        pytest.skip(reason)
    commands = parse_stf(stf.read_text(), str(stf))
    py, nat = pair(program)
    a, b = Recorder(py), Recorder(nat)
    report_py, report_nat = io.StringIO(), io.StringIO()
    assert run_stf(a, commands, report_py, False) == 0, report_py.getvalue()
    assert run_stf(b, commands, report_nat, False) == 0, report_nat.getvalue()
    assert a.outputs, "the STF test sends no packet"
    assert a.outputs == b.outputs
    assert_same_state(py, nat)


def test_programs_users_run_are_native() -> None:
    for name in ("fabric", "ipv6_router"):
        assert native_reason(load_program(P4_DIR / f"{name}.p4")) is None
