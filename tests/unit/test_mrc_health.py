"""An endpoint's shared path-health view (host.mrc.health): one connection's path timeout takes
the same (plane, spine) out on the endpoint's other connections at once (floor kept, probes
bring it back), two spines of a plane take the plane, and a congestion loss stays local."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from host.linkemu import LinkProfile
from host.mrc.cc import NsccWindow
from host.mrc.config import CcConfig, EvConfig, EvPolicy, MrcConfig
from host.mrc.evs import EvState, EvTable
from host.mrc.health import ANY_SPINE, PathHealth
from host.mrc.receiver import digest_of
from host.mrc.recorder import EventKind, Recorder
from host.mrc.sender import Sender
from host.mrc.sim import CorePair, sim_evs
from host.paths import Ev
from host.wire import AckPacket, PacketType

CFG = MrcConfig(
    payload_bytes=1000,
    rto_min_ms=200,  # far above every path timeout here: no verdict comes from an RTO
    cc=CcConfig(initial_cwnd_bytes=64_000, max_cwnd_bytes=64_000),
    ev=EvConfig(share_verdicts=True),
)
OFF = replace(CFG, ev=replace(CFG.ev, share_verdicts=False))


def test_single_path_verdicts_stay_until_two_paths_of_a_plane_are_silent() -> None:
    h = PathHealth(EvConfig())
    heard: list[tuple[int, int]] = []
    h.subscribe(1, lambda p, s, t: heard.append((p, s)), 0.0)
    h.report(2, 0, 1, 0.010)
    h.report(3, 1, 0, 0.011)
    assert heard == [] and h.suspect(0, 1, 0.012)  # one congested path is no verdict
    h.report(3, 0, 0, 0.012)
    assert heard == [(0, ANY_SPINE)] and h.plane_verdicts == 1


def test_a_verdict_reaches_the_others_and_two_spines_of_a_plane_take_the_plane() -> None:
    h = PathHealth(EvConfig(probe_timeout_ms=50, share_single_paths=True))
    heard: dict[int, list[tuple[int, int]]] = {1: [], 2: []}
    h.subscribe(1, lambda p, s, t: heard[1].append((p, s)), 0.0)
    h.subscribe(2, lambda p, s, t: heard[2].append((p, s)), 0.0)
    h.report(1, 0, 1, 0.010)
    assert heard == {1: [], 2: [(0, 1)]}  # not back to the one that found it
    assert h.suspect(0, 1, 0.011) and not h.suspect(0, 0, 0.011)
    h.report(2, 0, -1, 0.020)  # the plane's leaf-local path too: the local leaf is suspect
    assert heard[1] == [(0, -1), (0, ANY_SPINE)] and heard[2][-1] == (0, ANY_SPINE)
    assert h.suspect(0, 0, 0.021) and not h.suspect(1, 0, 0.021)
    # a connection opened meanwhile hears what is current
    late: list[tuple[int, int]] = []
    h.subscribe(3, lambda p, s, t: late.append((p, s)), 0.030)
    assert set(late) == {(0, 1), (0, -1), (0, ANY_SPINE)}
    # a probe that came back on one path clears it and the plane; the rest expire
    h.clear(0, 1)
    assert not h.suspect(0, 1, 0.031) and h.suspect(0, -1, 0.031)
    assert not h.suspect(0, -1, 0.020 + 0.050)


def test_plane_escalation_is_a_setting() -> None:
    h = PathHealth(EvConfig(share_plane_after=0, share_single_paths=True))
    heard: list[tuple[int, int]] = []
    h.subscribe(1, lambda p, s, t: heard.append((p, s)), 0.0)
    h.report(2, 1, 0, 0.0)
    h.report(2, 1, 1, 0.0)
    assert heard == [(1, 0), (1, 1)] and h.plane_verdicts == 0


def test_shared_verdicts_keep_the_floor_and_leave_denied_evs_alone() -> None:
    events: list[tuple[object, ...]] = []
    t = EvTable(
        sim_evs(2, 2),
        EvConfig(min_active=2, share_verdicts=True),
        notify=lambda *e: events.append(e),
    )
    t.deny(3, 0.0)
    assert t.on_shared(0, ANY_SPINE, 1.0) == [0]  # EV 1 would leave one GOOD EV: the floor
    assert [p.state for p in t.paths] == [
        EvState.ASSUMED_BAD,
        EvState.GOOD,
        EvState.GOOD,
        EvState.DENIED,
    ]
    assert (EventKind.EV_STATE, 0, 0.0, "good->assumed_bad shared") in events
    assert (EventKind.FLOOR, 1, 2.0, "shared") in events
    assert t.on_shared(1, 1, 1.0) == []  # DENIED stays DENIED
    # nor does a shared verdict take the last plane in use (its own losses still may)
    t2 = EvTable(
        sim_evs(2, 2),
        EvConfig(min_active=1, share_verdicts=True),
        notify=lambda *e: events.append(e),
    )
    assert t2.on_shared(0, ANY_SPINE, 1.0) == [0, 1]
    assert t2.on_shared(1, 0, 1.0) == []
    assert (EventKind.FLOOR, 2, 1.0, "shared last plane") in events
    assert t2.on_loss(2, 1.0, "rack") and t2.by_id[2].state is EvState.ASSUMED_BAD


@pytest.mark.parametrize(
    "cfg",
    [EvConfig(), EvConfig(policy=EvPolicy.HASHED, share_verdicts=True)],
    ids=str,
)
def test_a_connection_without_sharing_neither_hears_nor_tells(cfg: EvConfig) -> None:
    told: list[int] = []
    t = EvTable(sim_evs(2, 2), cfg)
    t.on_verdict = lambda p, now: told.append(p.ev.ev_id)
    assert t.on_shared(0, ANY_SPINE, 1.0) == []
    t.on_loss(2, 1.0, "rack", shareable=True)
    assert told == [] and all(p.state is EvState.GOOD for p in t.paths[:2])


def test_a_path_that_echoed_ecn_lately_keeps_its_silence_to_itself() -> None:
    told: list[int] = []
    t = EvTable(sim_evs(2, 2), EvConfig(penalty_half_life_ms=20, share_verdicts=True))
    t.on_verdict = lambda p, now: told.append(p.ev.ev_id)
    t.on_ce(1, 1.0)
    t.on_loss(1, 1.005, "rack", shareable=True)  # a queue may hold its packets
    t.on_ce(2, 1.0)
    t.on_loss(2, 1.100, "rack", shareable=True)  # five half-lives later: a silent path
    assert told == [2]
    assert t.by_id[1].state is EvState.ASSUMED_BAD  # for the connection that saw it, as before


# -- two connections of one host in virtual time ------------------------------------------------


def two_connections(cfg: MrcConfig, **tap: object) -> tuple[PathHealth, CorePair, CorePair]:
    """Host 0's connections to a near peer (0.5 ms paths) and a far one (5 ms paths)."""
    health = PathHealth(cfg.ev)
    near = CorePair(cfg, default=LinkProfile(delay_ms=0.5), health=health, conn_id=1, **tap)  # type: ignore[arg-type]
    far = CorePair(cfg, default=LinkProfile(delay_ms=5.0), health=health, conn_id=2)
    for pair in (near, far):
        pair.a.recorder = Recorder()
        for i in range(400):
            m = os.urandom(20_000)
            pair.a.submit(i, m, digest_of(m), True, 0.0)
    return health, near, far


def run_both(pairs: tuple[CorePair, ...], until_s: float, step_s: float = 0.0005) -> None:
    t = 0.0
    while t < until_s:
        t += step_s
        for p in pairs:
            p.run(max_s=t)


def marked(pair: CorePair, plane: int) -> dict[int, tuple[float, str]]:
    """EV id -> (time, why) of its first GOOD -> ASSUMED_BAD after the start."""
    rec = pair.a.recorder
    assert rec is not None
    out: dict[int, tuple[float, str]] = {}
    for e in rec.events(EventKind.EV_STATE):
        ev = pair.evs[e.ev]
        if ev.plane == plane and "good->assumed_bad" in e.detail:
            out.setdefault(e.ev, (e.t_s, e.detail.split()[-1]))
    return out


@pytest.mark.parametrize("share", [True, False])
def test_the_far_connection_leaves_a_failed_plane_when_the_near_one_finds_it(share: bool) -> None:
    health, near, far = two_connections(CFG if share else OFF)
    for pair in (near, far):
        pair.fail(0.05, plane=1)
    run_both((near, far), 0.2)
    found = marked(near, 1)
    assert set(found) == {2, 3} and {why for _t, why in found.values()} <= {"rack", "shared"}
    first = min(t for t, _why in found.values())
    far_marks = marked(far, 1)
    assert set(far_marks) == {2, 3}
    if share:
        # at the near connection's verdicts, not after its own path timeout (> 2 x 10 ms)
        assert all(why == "shared" for _t, why in far_marks.values()), far_marks
        last = max(t for t, _why in found.values())
        assert max(t for t, _why in far_marks.values()) - last < 0.001
        assert far.a.stats().losses_ev_down > 0  # what it had in flight there went out again
        assert health.reports >= 1
    else:
        assert all(why == "rack" for _t, why in far_marks.values()), far_marks
        assert min(t for t, _why in far_marks.values()) - first > 0.010
        assert health.reports == 0
    # plane 0 carries on for both, the shared EVs come back by their own probes once it is up
    assert all(p.state is EvState.GOOD for p in far.a.evs.paths if p.ev.plane == 0)
    for pair in (near, far):
        pair.failures.clear()
    run_both((near, far), 0.8)
    assert all(p.state is EvState.GOOD for p in far.a.evs.paths), far.a.ev_stats(far.now)


def test_one_dropped_packet_is_not_a_verdict_for_the_other_connections() -> None:
    dropped: list[int] = []

    def drop_one(side: int, ev: Ev, data: bytes) -> bytes | None:
        if side == 0 and ev.ev_id == 1 and data[3] == PacketType.DATA and len(dropped) < 1:
            dropped.append(ev.ev_id)
            return None
        return data

    health, near, far = two_connections(CFG, tap=drop_one)
    run_both((near, far), 0.1)
    assert dropped == [1] and near.a.stats().losses_rack >= 1
    assert health.reports == 0
    assert all(p.state is EvState.GOOD for p in far.a.evs.paths)
    assert far.a.stats().losses_ev_down == 0


def sender_with(evs_of_packets: list[int]) -> tuple[Sender, list[int]]:
    """A sender with one packet in flight per entry, on that EV, sent 1 ms apart."""
    told: list[int] = []
    evs = EvTable(sim_evs(2, 2), CFG.ev)
    evs.on_verdict = lambda p, now: told.append(p.ev.ev_id)
    s = Sender(CFG, evs, NsccWindow(CFG.cc), lambda *e: None, 0.0)
    s.submit(0, os.urandom(1000 * len(evs_of_packets)), b"\0" * 8, True, 0.0)
    for i, ev in enumerate(evs_of_packets):
        p = s.next_to_send()
        assert p is not None
        s.on_transmitted(p, ev, i * 1000, i / 1000)
    return s, told


def ack(psn: int, sent_ms: int) -> AckPacket:
    """A SACK of PSN ``psn`` alone (cum stays 0)."""
    return AckPacket(
        PacketType.ACK, 0, 0, 1, 0, 7, 0, 1 << 30, psn, sent_ms * 1000, 0, 0, 1 << (psn - 1), 64
    )


@pytest.mark.parametrize("owed", [1, 2])
def test_a_path_timeout_is_shared_only_when_the_silent_ev_owes_several_packets(owed: int) -> None:
    # PSN 0 (and with owed=2 PSN 1) on EV 3, the rest on EV 0; EV 0's last one is acknowledged
    layout = [3] * owed + [0, 0]
    s, told = sender_with(layout)
    last = len(layout) - 1
    s.on_ack(ack(last, last), 0.010, 10_000)
    s.detect_losses(1.0)  # long past every deadline: EV 3 delivered nothing
    assert s.evs.by_id[3].state is EvState.ASSUMED_BAD
    assert told == ([3] if owed >= CFG.ev.share_min_losses else [])
