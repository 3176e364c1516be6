"""The chaos schedule is pure data: deterministic per seed, different across seeds, each
target's interruptions one after another within the horizon, kinds by weight, every event two
actions (begin, end) in time order, the tf-ctl arguments of network actions, and a row in
every table for every kind and action."""

from __future__ import annotations

import math
import signal
from dataclasses import replace

import pytest

from host.train.decoupled.chaos import (
    CTL_VERBS,
    EVENT_ACTIONS,
    PROCESS_SIGNALS,
    Action,
    ChaosAction,
    ctl_argv,
    schedule,
)
from host.train.decoupled.config import ChaosConfig, ChaosKind
from host.train.decoupled.errors import ConfigError
from host.train.decoupled.run import APPLY

CFG = ChaosConfig(seed=7, mtbi_s=5.0, horizon_s=200.0, down_min_s=1.0, down_max_s=3.0)


def test_every_kind_and_action_has_its_rows() -> None:
    assert set(EVENT_ACTIONS) == set(ChaosKind)
    assert {a for pair in EVENT_ACTIONS.values() for a in pair} == set(Action) == set(APPLY)
    network = {a for k in (ChaosKind.SPINE, ChaosKind.PLANE) for a in EVENT_ACTIONS[k]}
    assert set(CTL_VERBS) == network
    assert PROCESS_SIGNALS[Action.STOP] is signal.SIGSTOP


def test_the_schedule_is_deterministic_per_seed() -> None:
    a, b = schedule(CFG, 4), schedule(CFG, 4)
    assert a == b and len(a.events) > 20
    assert a.actions() == b.actions()
    assert schedule(replace(CFG, seed=8), 4).events != a.events


def test_a_new_target_leaves_the_others_schedules_alone() -> None:
    three, four = schedule(CFG, 3), schedule(CFG, 4)
    for m in range(3):
        assert three.for_target(m) == four.for_target(m)


def test_interruptions_of_a_target_follow_each_other_within_the_horizon() -> None:
    s = schedule(replace(CFG, start_after_s=10.0), 3)
    for m in range(3):
        events = s.for_target(m)
        assert events and events[0].at_s >= 10.0
        for e, nxt in zip(events, events[1:]):
            assert nxt.at_s >= e.end_s
        for e in events:
            assert e.at_s <= CFG.horizon_s and CFG.down_min_s <= e.duration_s <= CFG.down_max_s
            if e.kind is ChaosKind.SLOW:
                assert CFG.slow_min <= e.factor <= CFG.slow_max
            else:
                assert e.factor == 1.0
    times = [e.at_s for e in s.events]
    assert times == sorted(times)


def test_kinds_follow_the_weights() -> None:
    only_kills = replace(CFG, process_weights=((ChaosKind.KILL, 1.0), (ChaosKind.PAUSE, 0.0)))
    assert {e.kind for e in schedule(only_kills, 3).events} == {ChaosKind.KILL}
    kinds = {e.kind for e in schedule(CFG, 3).events}
    assert kinds == {ChaosKind.KILL, ChaosKind.PAUSE, ChaosKind.SLOW}
    assert all(e.target < 3 for e in schedule(CFG, 3).events)


def test_network_failures_come_from_their_own_stream() -> None:
    cfg = replace(CFG, network_mtbi_s=10.0)
    s = schedule(cfg, 2, planes=2, spines=3)
    net = [e for e in s.events if e.kind in (ChaosKind.SPINE, ChaosKind.PLANE)]
    assert net and all(0 <= e.target < 2 for e in net)
    assert all(0 <= e.spine < 3 for e in net if e.kind is ChaosKind.SPINE)
    assert all(e.spine == -1 for e in net if e.kind is ChaosKind.PLANE)
    # the learners' own schedules do not depend on the network's
    assert [e for e in s.events if e not in net] == list(schedule(CFG, 2).events)


def test_every_event_begins_and_ends_in_time_order() -> None:
    s = schedule(CFG, 2)
    acts = s.actions()
    assert len(acts) == 2 * len(s.events)
    assert [a.at_s for a in acts] == sorted(a.at_s for a in acts)
    for e in s.events:
        begin, end = EVENT_ACTIONS[e.kind]
        assert ChaosAction(e.at_s, begin, e.target, e.factor, e.spine) in acts
        assert ChaosAction(e.end_s, end, e.target, 1.0, e.spine) in acts


@pytest.mark.parametrize(
    ("action", "argv"),
    [
        (ChaosAction(0, Action.FAIL_PLANE, 1), ["fail", "plane", "1"]),
        (ChaosAction(0, Action.RESTORE_PLANE, 0), ["restore", "plane", "0"]),
        (ChaosAction(0, Action.FAIL_SPINE, 1, spine=0), ["fail", "switch", "p1s0"]),
        (ChaosAction(0, Action.RESTORE_SPINE, 0, spine=1), ["restore", "switch", "p0s1"]),
    ],
)
def test_network_actions_are_tf_ctl_commands(action: ChaosAction, argv: list[str]) -> None:
    assert ctl_argv(action) == argv


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("mtbi_s", 0.0, "mtbi_s must be positive"),
        ("down_min_s", 5.0, "down_min_s <= down_max_s"),
        ("slow_min", 0.5, "1 <= slow_min"),
        ("process_weights", ((ChaosKind.PLANE, 1.0),), "process_weights must name"),
        ("process_weights", ((ChaosKind.KILL, 0.0),), "not all 0"),
        ("network_mtbi_s", -1.0, "network_mtbi_s"),
    ],
)
def test_bad_chaos_settings_are_refused(field: str, value: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        replace(CFG, **{field: value})
    assert math.isinf(CFG.network_mtbi_s)
