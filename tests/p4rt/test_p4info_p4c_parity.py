"""P4Info parity with p4c: ``tf-p4 info`` against p4c's own committed P4Info outputs.

p4c's samples are not copied into this repository. Point ``P4C_SRC`` at a p4c checkout (one with
``testdata/p4_16_samples`` and ``testdata/p4_16_samples_outputs``; checked against p4c commit
34b86e9) and the samples below are compiled with this project's front-end and their P4Info
compared, message for message, with p4c's ``<sample>.p4info.txtpb``; without it they skip.
``MATCHING`` covers every P4Info object kind that matches today (action selectors, direct
counters, registers, controller headers, type info, const/initial entries, every match kind,
default-action arguments). ``NEEDS_ACTION_ORDER`` match since the compiler lists actions as
p4c does (directly called actions, the localized NoAction first, ``@defaultonly NoAction`` in
tables without a default action).

The facts those rules rest on are also checked without p4c, on this repository's programs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from switch.compile import load_program
from switch.p4info import build_p4info
from tests.p4rt.idle_oneshot_helpers import PROGRAM, p4info

P4C_SRC_ENV = "P4C_SRC"

MATCHING = [
    "action_selector_unused-bmv2.p4",
    "arith-bmv2.p4",
    "checksum1-bmv2.p4",
    "crc32-bmv2.p4",
    "default-action-arg-bmv2.p4",
    "enum-bmv2.p4",
    "header-stack-ops-bmv2.p4",
    "init-entries-bmv2.p4",
    "issue1097-bmv2.p4",
    "issue1520-bmv2.p4",
    "issue2905-bmv2.p4",
    "issue3329-bmv2.p4",
    "issue364-bmv2.p4",
    "table-entries-exact-ternary-bmv2.p4",
    "table-entries-lpm-bmv2.p4",
    "table-entries-optional-bmv2.p4",
    "table-entries-priority-bmv2.p4",
    "table-entries-range-bmv2.p4",
    "union-bmv2.p4",
    "unused-counter-bmv2.p4",
    "v1model-const-entries-bmv2.p4",
]

NEEDS_ACTION_ORDER = [
    "action_profile_sum_of_members_annotation.p4",
    "action_selector_shared-bmv2.p4",
    "basic2-bmv2.p4",
    "basic_routing-bmv2.p4",
    "checksum-l4-bmv2.p4",
    "control-hs-index-test5.p4",
    "copyprop1.p4",
    "flowlet_switching-bmv2.p4",
    "issue1352-bmv2.p4",
    "issue1834-bmv2.p4",
    "issue461-bmv2.p4",
    "named_meter_bmv2.p4",
    "pvs-struct-1-bmv2.p4",
    "use-priority-as-name.p4",
    "v1model-special-ops-bmv2.p4",
    "xor_test.p4",
]


def _p4c_testdata() -> Path | None:
    src = os.environ.get(P4C_SRC_ENV)
    return Path(src) / "testdata" if src else None


needs_p4c_src = pytest.mark.skipif(
    _p4c_testdata() is None, reason=f"{P4C_SRC_ENV} does not name a p4c checkout"
)


def _compare(sample: str) -> None:
    testdata = _p4c_testdata()
    assert testdata is not None
    theirs = p4info_pb2.P4Info()
    text_format.Parse(
        (testdata / "p4_16_samples_outputs" / f"{sample}.p4info.txtpb").read_text(), theirs
    )
    ours = build_p4info(load_program(str(testdata / "p4_16_samples" / sample)).schema)
    assert text_format.MessageToString(ours) == text_format.MessageToString(theirs)


@needs_p4c_src
@pytest.mark.parametrize("sample", MATCHING)
def test_p4info_is_p4cs(sample: str) -> None:
    _compare(sample)


@needs_p4c_src
@pytest.mark.parametrize("sample", NEEDS_ACTION_ORDER)
def test_p4info_lists_actions_in_p4cs_order_and_set(sample: str) -> None:
    _compare(sample)


def test_noaction_has_p4cs_nowarn_annotation() -> None:
    """p4c's core.p4 declares ``@noWarn("unused") action NoAction()``; P4Info repeats it."""
    [no_action] = [a for a in p4info().actions if a.preamble.name == "NoAction"]
    assert list(no_action.preamble.annotations) == ['@noWarn("unused")']


def test_support_timeout_tables_say_notify_control() -> None:
    info = build_p4info(load_program(str(PROGRAM)).schema)
    behaviour = {t.preamble.name: t.idle_timeout_behavior for t in info.tables}
    assert behaviour == {
        "MyIngress.t_idle": p4info_pb2.Table.NOTIFY_CONTROL,
        "MyIngress.t_sel": p4info_pb2.Table.NOTIFY_CONTROL,
        "MyIngress.t_selm": p4info_pb2.Table.NO_TIMEOUT,
        "MyIngress.t_prof": p4info_pb2.Table.NO_TIMEOUT,
        "MyIngress.t_plain": p4info_pb2.Table.NO_TIMEOUT,
    }
