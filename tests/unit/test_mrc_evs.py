"""EV states and selection: loss marks ASSUMED_BAD at once, probes bring EVs back, the
ev_min_active floor holds, DENIED EVs are never used, signals shift the weights."""

from __future__ import annotations

from collections import Counter

import pytest

from host.mrc.config import EvConfig, EvPolicy
from host.mrc.evs import BEHAVIOURS, TRANSITIONS, EvSignal, EvState, EvTable
from host.mrc.recorder import EventKind
from host.mrc.sim import sim_evs


def table(n_planes: int = 2, spines: int = 2, **cfg: object) -> tuple[EvTable, list[tuple]]:
    events: list[tuple] = []
    t = EvTable(
        sim_evs(n_planes, spines),
        EvConfig(**cfg),  # type: ignore[arg-type]
        notify=lambda *e: events.append(e),
    )
    return t, events


def picks(t: EvTable, n: int, now: float = 0.0) -> Counter[int]:
    c: Counter[int] = Counter()
    for _ in range(n):
        p = t.pick(now)
        assert p is not None
        c[p.ev.ev_id] += 1
    return c


def test_every_state_and_signal_has_a_transition_and_every_policy_a_behaviour() -> None:
    assert set(TRANSITIONS) == {(s, g) for s in EvState for g in EvSignal}
    assert set(BEHAVIOURS) == set(EvPolicy)


def test_spraying_uses_every_good_ev_in_turn() -> None:
    t, _ = table()
    assert picks(t, 400) == {0: 100, 1: 100, 2: 100, 3: 100}
    first = [t.pick(0.0).ev.ev_id for _ in range(4)]  # type: ignore[union-attr]
    assert sorted(first) == [0, 1, 2, 3]  # interleaved, not in runs


def test_loss_marks_the_ev_assumed_bad_at_once_and_it_carries_nothing() -> None:
    t, events = table()
    t.on_loss(2, 1.0, "rack")
    assert t.by_id[2].state is EvState.ASSUMED_BAD
    assert 2 not in picks(t, 100, 1.0)
    assert (EventKind.EV_STATE, 2, 0.0, "good->assumed_bad rack") in events


def test_probe_answer_brings_the_ev_back_and_silence_backs_off() -> None:
    t, _ = table(probe_interval_ms=5, probe_timeout_ms=10, probe_max_interval_ms=40)
    t.on_loss(1, 0.0)
    assert t.probes_due(0.004) == []
    [(path, seq)] = t.probes_due(0.005)
    assert path.ev.ev_id == 1
    assert t.probes_due(0.010) == []  # outstanding
    assert t.probes_due(0.015) == []  # timed out: next probe after 10 ms
    assert t.by_id[1].probes_lost == 1
    [(_, seq2)] = t.probes_due(0.025)
    assert not t.on_probe_ack(1, seq, 0.001, 0.026)  # a stale answer does not count
    assert t.on_probe_ack(1, seq2, 0.001, 0.026)
    assert t.by_id[1].state is EvState.GOOD and 1 in picks(t, 8, 0.03)


def test_floor_keeps_min_active_evs_good() -> None:
    t, events = table(min_active=2)
    for ev in (0, 1, 2, 3):
        t.on_loss(ev, 0.0)
    assert [p.state for p in t.paths].count(EvState.GOOD) == 2
    assert sum(1 for e in events if e[0] is EventKind.FLOOR) == 2
    assert t.by_id[3].penalty > 0


def test_default_floor_is_a_quarter_of_the_evs() -> None:
    t, _ = table(n_planes=4, spines=2)
    for ev in range(8):
        t.on_loss(ev, 0.0)
    assert len(t.usable()) == 2


def test_denied_ev_is_never_used_nor_probed_and_allow_probes_it_first() -> None:
    t, _ = table()
    t.deny(0, 0.0)
    assert 0 not in picks(t, 200)
    t.on_loss(0, 0.0)
    assert t.by_id[0].state is EvState.DENIED
    assert all(p.ev.ev_id != 0 for p, _ in t.probes_due(10.0))
    assert t.for_reply(0, 0.0) is not t.by_id[0]
    t.allow(0, 11.0)
    assert t.by_id[0].state is EvState.ASSUMED_BAD
    [(path, seq)] = [x for x in t.probes_due(12.0) if x[0].ev.ev_id == 0]
    assert t.on_probe_ack(0, seq, 0.001, 12.001) and t.by_id[0].state is EvState.GOOD


def test_ecn_and_nack_penalties_steer_traffic_away_then_decay() -> None:
    t, _ = table(reweight_interval_ms=0, penalty_half_life_ms=10)
    for _ in range(3):
        t.on_ce(0, 0.0)
    t.on_nack(1, 0.0)
    share = picks(t, 1000)
    assert share[0] < share[2] / 2 and share[1] < share[2] / 2
    later = picks(t, 1000, now=1.0)  # 100 half-lives later
    assert max(later.values()) - min(later.values()) <= 10


def test_slower_evs_get_less_traffic() -> None:
    t, _ = table(reweight_interval_ms=0)
    for ev, rtt in ((0, 0.001), (1, 0.001), (2, 0.001), (3, 0.004)):
        t.on_rtt(ev, rtt)
    share = picks(t, 1300)
    assert share[3] < share[0] / 2


def test_retransmission_avoids_the_ev_it_was_lost_on() -> None:
    t, _ = table()
    assert all(t.pick(0.0, exclude=1).ev.ev_id != 1 for _ in range(50))  # type: ignore[union-attr]


def test_hashed_policy_sticks_to_one_ev_and_rehashes_only_on_rto() -> None:
    t, events = table(policy=EvPolicy.HASHED)
    [(first, n)] = picks(t, 50).items()
    assert n == 50
    t.on_loss(first, 0.0)
    assert t.by_id[first].state is EvState.GOOD and picks(t, 5) == {first: 5}
    t.on_rto(0.1)
    [(second, _)] = picks(t, 5, 0.1).items()
    assert second != first and events[-1][0] is EventKind.REHASH


@pytest.mark.parametrize("policy", list(EvPolicy))
def test_no_usable_ev_returns_none(policy: EvPolicy) -> None:
    t, _ = table(policy=policy)
    for ev in range(4):
        t.deny(ev, 0.0)
    assert t.pick(0.0) is None
