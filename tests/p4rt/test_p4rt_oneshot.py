"""One-shot action selector programming over gRPC (P4Runtime 1.4 "One Shot Action Selector
Programming"): the entry forwards through a hidden group, reads back as the set it was written
with, MODIFY/DELETE remove the hidden members and group, and every refusal has the spec's code."""

from __future__ import annotations

import collections

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from tests.p4rt.idle_oneshot_helpers import (
    action,
    entry,
    frame,
    one_shot,
    out_byte,
    pid,
    running,
    send,
    tid,
)
from tests.unit.p4rt_helpers import DELETE, INSERT, MODIFY, Harness, details, update

Entity = p4runtime_pb2.Entity


def write_codes(h: Harness, *updates: p4runtime_pb2.Update) -> list[int]:
    with pytest.raises(grpc.RpcError) as err:
        h.write(*updates)
    return [e.canonical_code for e in details(err.value)]


def read_entries(h: Harness, table: str) -> list[p4runtime_pb2.TableEntry]:
    ents = h.read(Entity(table_entry=p4runtime_pb2.TableEntry(table_id=tid(table))))
    return [e.table_entry for e in ents]


def hidden_counts(h: Harness) -> tuple[int, int]:
    """(members, groups) the selector holds, hidden ones included (the pipeline's own view)."""
    assert h.device.state is not None
    profile = h.device.state.action_profiles["MyIngress.ecmp"]
    return len(profile.members), len(profile.groups)


def client_view(h: Harness) -> tuple[list[Entity], list[Entity]]:
    members = h.read(Entity(action_profile_member=p4runtime_pb2.ActionProfileMember()))
    groups = h.read(Entity(action_profile_group=p4runtime_pb2.ActionProfileGroup()))
    return members, groups


def test_one_shot_entry_forwards_by_weight_and_reads_back_as_written() -> None:
    te = one_shot("t_sel", 5, (action("set_out", 0xA1), 1), (action("set_out", 0xA2), 3))
    with running() as h:
        h.write(update(INSERT, table_entry=te))
        [got] = read_entries(h, "t_sel")
        assert got.action == te.action
        assert got.match == te.match
        # hidden in the pipeline, invisible to member/group reads
        assert hidden_counts(h) == (2, 1)
        assert client_view(h) == ([], [])
        keys = range(0, 65536, 163)  # crc16 % 4 of 0..399 only ever takes two values
        picks = collections.Counter(out_byte(h.device, 5, sel) for sel in keys)
        assert set(picks) == {0xA1, 0xA2}
        assert 2 < picks[0xA2] / picks[0xA1] < 4.5  # weights 3:1 over 403 hashed keys


def test_the_same_action_twice_stays_two_members_and_reads_back_twice() -> None:
    a = action("set_out_port", 7, 3)
    te = one_shot("t_sel", 6, (a, 2), (a, 2))
    with running() as h:
        h.write(update(INSERT, table_entry=te))
        [got] = read_entries(h, "t_sel")
        assert list(got.action.action_profile_action_set.action_profile_actions) == list(
            te.action.action_profile_action_set.action_profile_actions
        )
        assert hidden_counts(h) == (2, 1)
        [(port, data)] = send(h.device, frame(6, 9))
        assert (port, data[3]) == (3, 7)


def test_modify_replaces_the_hidden_group_and_delete_removes_it() -> None:
    with running() as h:
        h.write(update(INSERT, table_entry=one_shot("t_sel", 5, (action("set_out", 1), 1))))
        new = one_shot("t_sel", 5, (action("set_out", 2), 1), (action("set_out", 3), 1))
        h.write(update(MODIFY, table_entry=new))
        assert hidden_counts(h) == (2, 1)
        [got] = read_entries(h, "t_sel")
        assert got.action == new.action
        assert {out_byte(h.device, 5, sel) for sel in range(64)} == {2, 3}
        h.write(update(DELETE, table_entry=entry("t_sel", 5)))
        assert hidden_counts(h) == (0, 0)
        assert read_entries(h, "t_sel") == []
        assert out_byte(h.device, 5) == 0  # miss: NoAction


def test_a_refused_insert_leaves_no_hidden_members_behind() -> None:
    with running() as h:
        te = one_shot("t_sel", 5, (action("set_out", 1), 1))
        h.write(update(INSERT, table_entry=te))
        assert write_codes(h, update(INSERT, table_entry=te)) == [code_pb2.ALREADY_EXISTS]
        assert hidden_counts(h) == (1, 1)
        missing = one_shot("t_sel", 9, (action("set_out", 1), 1))
        assert write_codes(h, update(MODIFY, table_entry=missing)) == [code_pb2.NOT_FOUND]
        assert hidden_counts(h) == (1, 1)


REFUSALS = [
    ("direct table", one_shot("t_plain", 1, (action("set_out", 1), 1)), code_pb2.INVALID_ARGUMENT),
    ("no selector", one_shot("t_prof", 1, (action("set_out", 1), 1)), code_pb2.INVALID_ARGUMENT),
    ("weight 0", one_shot("t_sel", 1, (action("set_out", 1), 0)), code_pb2.INVALID_ARGUMENT),
    ("weight -1", one_shot("t_sel", 1, (action("set_out", 1), -1)), code_pb2.INVALID_ARGUMENT),
    (
        "over max_group_size",
        one_shot("t_sel", 1, (action("set_out", 1), 5), (action("set_out", 2), 4)),
        code_pb2.INVALID_ARGUMENT,
    ),
    (
        "sum_of_members: 4 actions, max_group_size 3",
        one_shot("t_selm", 1, *((action("set_out", v), 1) for v in range(4))),
        code_pb2.INVALID_ARGUMENT,
    ),
    (
        "sum_of_members: weight 6, max_member_weight 5",
        one_shot("t_selm", 1, (action("set_out", 1), 6)),
        code_pb2.INVALID_ARGUMENT,
    ),
    (
        "action the table lacks",
        one_shot("t_sel", 1, (p4runtime_pb2.Action(action_id=12345), 1)),
        code_pb2.INVALID_ARGUMENT,
    ),
]


@pytest.mark.parametrize(("why", "te", "code"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_one_shot_refusals(why: str, te: p4runtime_pb2.TableEntry, code: int) -> None:
    with running() as h:
        assert write_codes(h, update(INSERT, table_entry=te)) == [code]
        assert hidden_counts(h) == (0, 0)


def test_sum_of_members_counts_actions_not_weights() -> None:
    te = one_shot("t_selm", 1, *((action("set_out", v), 5) for v in (1, 2, 3)))
    with running() as h:
        h.write(update(INSERT, table_entry=te))  # weight 15 in all, but 3 members
        [got] = read_entries(h, "t_selm")
        assert got.action == te.action


def test_watch_ports_are_unimplemented_and_an_empty_watch_port_watches_nothing() -> None:
    with running() as h:
        te = one_shot("t_sel", 1, (action("set_out", 1), 1))
        te.action.action_profile_action_set.action_profile_actions[0].watch_port = b"\x01"
        assert write_codes(h, update(INSERT, table_entry=te)) == [code_pb2.UNIMPLEMENTED]
        te.action.action_profile_action_set.action_profile_actions[0].watch_port = b""
        h.write(update(INSERT, table_entry=te))
        assert len(read_entries(h, "t_sel")) == 1


def test_one_shot_and_client_members_do_not_mix_in_one_selector() -> None:
    member = p4runtime_pb2.ActionProfileMember(
        action_profile_id=pid("ecmp"), member_id=1, action=action("set_out", 9)
    )
    with running() as h:
        h.write(update(INSERT, table_entry=one_shot("t_sel", 1, (action("set_out", 1), 1))))
        assert write_codes(h, update(INSERT, action_profile_member=member)) == [
            code_pb2.INVALID_ARGUMENT
        ]
        h.write(update(DELETE, table_entry=entry("t_sel", 1)))
        # empty again: the client's own members are welcome, and one-shot sets are not
        h.write(update(INSERT, action_profile_member=member))
        assert write_codes(
            h, update(INSERT, table_entry=one_shot("t_sel", 2, (action("set_out", 1), 1)))
        ) == [code_pb2.INVALID_ARGUMENT]
        by_member = entry("t_sel", 3)
        by_member.action.action_profile_member_id = 1
        h.write(update(INSERT, table_entry=by_member))
        [got] = read_entries(h, "t_sel")
        assert got.action.action_profile_member_id == 1


def test_p4runtime_shell_programs_a_one_shot_entry() -> None:
    """The project's client (p4runtime-shell 0.0.6) writes and reads a one-shot entry."""
    import p4runtime_sh.shell as sh

    with running() as h:
        sh.setup(  # a higher election id: the shell becomes the primary
            device_id=1,
            grpc_addr=f"127.0.0.1:{h.server.port}",
            election_id=(0, 2),
            config=None,
            verbose=False,
        )
        try:
            te = sh.TableEntry("MyIngress.t_sel")
            te.match["hdr.h.kind"] = "4"
            oneshot = sh.Oneshot("MyIngress.t_sel")
            a1 = sh.Action("MyIngress.set_out")
            a1["v"] = "0x21"
            a2 = sh.Action("MyIngress.set_out")
            a2["v"] = "0x22"
            oneshot.add(a1, weight=2).add(a2, weight=1)
            te.oneshot = oneshot
            te.insert()
            got = list(sh.TableEntry("MyIngress.t_sel").read())
            assert len(got) == 1
            actions = got[0].msg().action.action_profile_action_set.action_profile_actions
            assert [(a.weight, a.action.params[0].value) for a in actions] == [
                (2, b"\x21"),
                (1, b"\x22"),
            ]
            got[0].delete()
            assert hidden_counts(h) == (0, 0)
        finally:
            sh.teardown()


def test_an_empty_set_is_an_empty_group_a_miss_and_reads_back_empty() -> None:
    with running() as h:
        te = one_shot("t_sel", 5)
        te.action.action_profile_action_set.SetInParent()
        h.write(update(INSERT, table_entry=te))
        [got] = read_entries(h, "t_sel")
        assert got.action.WhichOneof("type") == "action_profile_action_set"
        assert hidden_counts(h) == (0, 1)
        assert out_byte(h.device, 5) == 0  # an empty group: the default action (NoAction)
