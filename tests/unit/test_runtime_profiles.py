"""Action profile members and selector groups, with P4Runtime error codes."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from runtime_schema_helpers import ACTIONS, REFS, fwd

from switch.pipeline.errors import Code, StateError
from switch.pipeline.profiles import ActionProfile
from switch.schema import ActionCall, ActionProfileSpec


def profile(size: int = 8, with_selector: bool = True) -> ActionProfile:
    spec = ActionProfileSpec("MyIngress.ap", size, ("MyIngress.t",), with_selector, "crc16", 16)
    return ActionProfile(spec, ACTIONS, {r.name: r for r in REFS})


def expect(code: Code, op: Callable[[], object]) -> None:
    with pytest.raises(StateError) as err:
        op()
    assert err.value.code is code


def test_member_lifecycle() -> None:
    p = profile()
    p.insert_member(1, fwd(1))
    p.modify_member(1, fwd(2))
    assert p.get_member(1) == fwd(2)
    p.delete_member(1)
    expect(Code.NOT_FOUND, lambda: p.get_member(1))


@pytest.mark.parametrize(
    ("code", "setup", "op"),
    [
        (Code.ALREADY_EXISTS, [(1, fwd(1))], lambda p: p.insert_member(1, fwd(2))),
        (Code.NOT_FOUND, [], lambda p: p.modify_member(1, fwd(2))),
        (Code.NOT_FOUND, [], lambda p: p.delete_member(1)),
        (Code.INVALID_ARGUMENT, [], lambda p: p.insert_member(1, ActionCall("MyIngress.nope"))),
        (
            Code.INVALID_ARGUMENT,
            [],
            lambda p: p.insert_member(1, ActionCall("MyIngress.only_default")),
        ),
        (Code.INVALID_ARGUMENT, [], lambda p: p.insert_member(1, ActionCall("MyIngress.fwd"))),
        (Code.INVALID_ARGUMENT, [], lambda p: p.insert_member(-1, fwd(1))),
        (Code.RESOURCE_EXHAUSTED, [(1, fwd(1)), (2, fwd(2))], lambda p: p.insert_member(3, fwd(3))),
    ],
)
def test_member_errors(
    code: Code, setup: list[tuple[int, ActionCall]], op: Callable[[ActionProfile], object]
) -> None:
    p = profile(size=2)
    for m, a in setup:
        p.insert_member(m, a)
    expect(code, lambda: op(p))


def test_deleting_a_member_in_a_group_is_failed_precondition() -> None:
    p = profile()
    p.insert_member(1, fwd(1))
    p.insert_group(10, [1])
    expect(Code.FAILED_PRECONDITION, lambda: p.delete_member(1))
    p.remove_member_from_group(10, 1)
    p.delete_member(1)


def test_deleting_a_member_used_by_an_entry_is_failed_precondition() -> None:
    p = profile()
    p.insert_member(1, fwd(1))
    p.retain(1, None)
    expect(Code.FAILED_PRECONDITION, lambda: p.delete_member(1))
    p.release(1, None)
    p.delete_member(1)


def test_deleting_a_group_used_by_an_entry_is_failed_precondition() -> None:
    p = profile()
    p.insert_group(10)
    p.retain(None, 10)
    expect(Code.FAILED_PRECONDITION, lambda: p.delete_group(10))
    p.release(None, 10)
    p.delete_group(10)
    expect(Code.NOT_FOUND, lambda: p.get_group(10))


@pytest.mark.parametrize(
    ("code", "op"),
    [
        (Code.ALREADY_EXISTS, lambda p: p.insert_group(10)),
        (Code.NOT_FOUND, lambda p: p.insert_group(11, [9])),
        (Code.INVALID_ARGUMENT, lambda p: p.insert_group(11, {1: 0})),
        (Code.RESOURCE_EXHAUSTED, lambda p: p.insert_group(11, {1: 2, 2: 2}, max_size=3)),
        (Code.NOT_FOUND, lambda p: p.modify_group(12, [1])),
        (Code.NOT_FOUND, lambda p: p.delete_group(12)),
        (Code.ALREADY_EXISTS, lambda p: p.add_member_to_group(10, 1)),
        (Code.NOT_FOUND, lambda p: p.remove_member_from_group(10, 2)),
    ],
)
def test_group_errors(code: Code, op: Callable[[ActionProfile], object]) -> None:
    p = profile()
    p.insert_member(1, fwd(1))
    p.insert_member(2, fwd(2))
    p.insert_group(10, [1])
    expect(code, lambda: op(p))


def test_groups_need_a_selector() -> None:
    p = profile(with_selector=False)
    expect(Code.INVALID_ARGUMENT, lambda: p.insert_group(1))


def test_failed_group_write_changes_nothing() -> None:
    p = profile()
    p.insert_member(1, fwd(1))
    p.insert_group(10, [1])
    expect(Code.NOT_FOUND, lambda: p.modify_group(10, [1, 5]))
    assert p.get_group(10).members == {1: 1}
    p.delete_group(10)
    p.delete_member(1)  # reference counts were not disturbed


def test_member_handles_reuse_the_lowest_free_one() -> None:
    p = profile()
    for m in (5, 6, 7):
        p.insert_member(m, fwd(m))  # handles 0, 1, 2
    p.delete_member(5)
    p.insert_member(8, fwd(8))  # takes handle 0 again: listed first in groups
    p.insert_group(1, [6, 7, 8])
    assert [p.choose(1, b"")] != [None]
    assert p._expanded[1] == (fwd(8), fwd(6), fwd(7))


def test_modify_member_updates_groups() -> None:
    p = profile()
    p.insert_member(1, fwd(1))
    p.insert_group(1, [1])
    p.modify_member(1, fwd(9))
    assert p.choose(1, b"\x00") == fwd(9)


def test_choose_from_empty_group_is_none() -> None:
    p = profile()
    p.insert_group(1)
    assert p.choose(1, b"abc") is None
