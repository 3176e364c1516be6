"""Multicast groups (BMv2 node model and P4Runtime view) and clone sessions."""

from __future__ import annotations

import pytest

from switch.pipeline.errors import Code, StateError
from switch.pipeline.pre import CloneSession, PacketReplicationEngine, Replica


def test_node_handles_start_at_zero_and_reuse_the_lowest_free() -> None:
    pre = PacketReplicationEngine()
    assert [pre.mc_node_create(0, [1]) for _ in range(3)] == [0, 1, 2]
    pre.mc_node_destroy(1)
    assert pre.mc_node_create(5, [2]) == 1


def test_replication_follows_association_order_then_ascending_ports() -> None:
    pre = PacketReplicationEngine()
    pre.mc_mgrp_create(1)
    a = pre.mc_node_create(7, [3, 1, 2])
    b = pre.mc_node_create(9, [0])
    pre.mc_node_associate(1, b)
    pre.mc_node_associate(1, a)
    assert pre.replicas(1) == ((0, 9), (1, 7), (2, 7), (3, 7))
    pre.mc_node_update(a, [5])
    assert pre.replicas(1) == ((0, 9), (5, 7))
    pre.mc_node_dissociate(1, b)
    assert pre.replicas(1) == ((5, 7),)


def test_unknown_group_replicates_nothing() -> None:
    assert PacketReplicationEngine().replicas(42) == ()


@pytest.mark.parametrize(
    ("code", "op"),
    [
        (Code.ALREADY_EXISTS, lambda pre: pre.mc_mgrp_create(1)),
        (Code.NOT_FOUND, lambda pre: pre.mc_node_associate(2, 0)),
        (Code.NOT_FOUND, lambda pre: pre.mc_node_associate(1, 9)),
        (Code.FAILED_PRECONDITION, lambda pre: pre.mc_node_associate(1, 0)),
        (Code.FAILED_PRECONDITION, lambda pre: pre.mc_node_dissociate(1, 1)),
        (Code.INVALID_ARGUMENT, lambda pre: pre.mc_node_create(0, [512])),
        (Code.INVALID_ARGUMENT, lambda pre: pre.mc_mgrp_create(0x10000)),
        (Code.NOT_FOUND, lambda pre: pre.mc_mgrp_destroy(3)),
    ],
)
def test_node_model_errors(code: Code, op: object) -> None:
    pre = PacketReplicationEngine()
    pre.mc_mgrp_create(1)
    pre.mc_node_associate(1, pre.mc_node_create(0, [1]))
    pre.mc_node_create(0, [2])
    with pytest.raises(StateError) as err:
        op(pre)  # type: ignore[operator]
    assert err.value.code is code


def test_p4runtime_group_round_trip() -> None:
    pre = PacketReplicationEngine()
    reps = [Replica(3, 1), Replica(1, 1), Replica(2, 2)]
    pre.insert_group(5, reps)
    assert pre.get_group(5) == [Replica(1, 1), Replica(3, 1), Replica(2, 2)]
    pre.modify_group(5, [Replica(4, 0)])
    assert pre.replicas(5) == ((4, 0),)
    assert len(pre.nodes) == 1
    pre.delete_group(5)
    assert pre.nodes == {} and pre.replicas(5) == ()


@pytest.mark.parametrize(
    ("group", "replicas", "code"),
    [
        (0, [Replica(1)], Code.INVALID_ARGUMENT),
        (5, [Replica(1), Replica(1)], Code.INVALID_ARGUMENT),
        (5, [Replica(600)], Code.INVALID_ARGUMENT),
        (6, [Replica(1)], Code.ALREADY_EXISTS),
    ],
)
def test_p4runtime_group_errors(group: int, replicas: list[Replica], code: Code) -> None:
    pre = PacketReplicationEngine()
    pre.insert_group(6, [Replica(9)])
    with pytest.raises(StateError) as err:
        pre.insert_group(group, replicas)
    assert err.value.code is code
    assert pre.get_group(6) == [Replica(9)]
    assert set(pre.groups) == {6}


def test_failed_group_modify_keeps_the_old_replicas() -> None:
    pre = PacketReplicationEngine()
    pre.insert_group(6, [Replica(9)])
    with pytest.raises(StateError):
        pre.modify_group(6, [Replica(1), Replica(1)])
    assert pre.get_group(6) == [Replica(9)]


def test_mirroring_add_sessions_unicast_and_multicast() -> None:
    pre = PacketReplicationEngine()
    assert pre.clone_replicas(5) is None
    pre.mirroring_add(5, 3)
    assert pre.clone_replicas(5) == ((3, 0),)
    pre.insert_group(2, [Replica(1, 4), Replica(2, 4)])
    pre.mirroring_add_mc(5, 2)  # replaces the session, as simple_switch does
    assert pre.clone_replicas(5) == ((1, 4), (2, 4))
    pre.mirroring_delete(5)
    assert pre.clone_replicas(5) is None
    with pytest.raises(StateError) as err:
        pre.mirroring_delete(5)
    assert err.value.code is Code.NOT_FOUND


def test_p4runtime_clone_session_keeps_truncation_and_cos() -> None:
    pre = PacketReplicationEngine()
    s = CloneSession(7, (Replica(1, 1), Replica(2, 1)), class_of_service=3, packet_length_bytes=64)
    pre.insert_clone_session(s)
    assert pre.get_clone_session(7).packet_length_bytes == 64
    assert pre.clone_replicas(7) == ((1, 1), (2, 1))
    with pytest.raises(StateError) as err:
        pre.insert_clone_session(s)
    assert err.value.code is Code.ALREADY_EXISTS
    pre.modify_clone_session(CloneSession(7, (Replica(4),)))
    assert pre.clone_replicas(7) == ((4, 0),)
    pre.reset()
    assert pre.clone_replicas(7) is None
