"""Cheaper wakeups of the MRC endpoint's I/O thread: connections are polled only when touched
(a datagram, a command, a shared verdict) or due, and that skips nothing a full poll would do."""

from __future__ import annotations

import heapq
import itertools
import math
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from host.linkemu import EmuNetwork, LinkProfile
from host.mrc.config import CcConfig, MrcConfig
from host.mrc.endpoint import Endpoint
from host.mrc.receiver import digest_of
from host.mrc.sim import CorePair, sim_evs
from host.paths import Ev, RouteTable
from host.wire import DataPacket, PacketType, ProbePacket, WireError, decode
from topologies.model import FabricSpec, build_fabric

CFG = MrcConfig(payload_bytes=1000)
FABRIC = build_fabric(FabricSpec(planes=2, leaves=2, spines=2, hosts_per_leaf=1))


def _skipped_poll_is_idle(pair: CorePair, max_s: float, check: Callable[[], None]) -> int:
    """CorePair.run's loop, polling every core at every step (the reference), but first, for
    each core the endpoint would skip (untouched, before the deadline it reported after its
    last poll), checks that the poll changes nothing: no datagram, same statistics, same
    deadline. The loop also wakes at random moments, as other connections' traffic wakes the
    endpoint's. Returns how many polls were checked that way."""
    sent: list[bytes] = []
    txs = [pair._transmit(0), pair._transmit(1)]

    def recording(side: int) -> Callable[[Ev, bytes], bool]:
        def tx(ev: Ev, data: bytes) -> bool:
            sent.append(data)
            return txs[side](ev, data)

        return tx

    rec = (recording(0), recording(1))
    due = [-math.inf, -math.inf]
    checked = 0
    rng = random.Random(5)
    while pair.now < max_s:
        for side, core in enumerate(pair.cores):
            skip = not core.touched and due[side] > pair.now
            before = core.stats() if skip else None
            n = len(sent)
            core.poll(pair.now, rec[side])
            if skip:
                checked += 1
                assert len(sent) == n, f"side {side} sent at {pair.now} before {due[side]}"
                assert core.stats() == before
                assert core.next_deadline(pair.now) == due[side]
            assert not core.touched
            due[side] = core.next_deadline(pair.now)
        check()
        t = min(pair._heap[0][0] if pair._heap else math.inf, *due)
        if t == math.inf:
            break
        # other connections of the endpoint wake the loop at arbitrary times too
        t = min(t, pair.now + rng.uniform(0.0, 0.0008))
        pair.now = max(pair.now, min(t, max_s))
        while pair._heap and pair._heap[0][0] <= pair.now:
            _t, _s, dst, ev, data = heapq.heappop(pair._heap)
            if any(w.covers(ev, pair.now) for w in pair.failures):
                continue
            try:
                pkt = decode(data)
            except WireError:
                continue
            pair.cores[dst].on_packet(pkt, False, pair.now)
            assert pair.cores[dst].touched
    return checked


LAZY_ACKS = replace(
    CFG, ack_every_packets=64, ack_delay_ms=0.2, ack_on_reorder=False, pacing_gain=1.0
)
SMALL_WINDOW = replace(CFG, cc=CcConfig(enabled=False, initial_cwnd_bytes=16_000))
PACED = replace(CFG, pacing_gain=1.5, cc=CcConfig(initial_cwnd_bytes=32_000))


@pytest.mark.parametrize(
    ("cfg", "profile", "fail"),
    [
        (CFG, LinkProfile(delay_ms=0.5, jitter_ms=0.5, loss=0.05, reorder=0.05), "plane"),
        (LAZY_ACKS, LinkProfile(delay_ms=0.3, loss=0.1), "none"),
        (PACED, LinkProfile(delay_ms=1.0, loss=0.01), "plane"),
        (SMALL_WINDOW, LinkProfile(delay_ms=0.3, loss=0.02), "all"),
    ],
)
def test_skipped_polls_would_have_done_nothing(
    cfg: MrcConfig, profile: LinkProfile, fail: str
) -> None:
    pair = CorePair(cfg, sim_evs(), default=profile, seed=3)
    if fail == "plane":
        pair.fail(0.004, 0.030, plane=1)
    elif fail == "all":  # every path: only timers (RTO, tail probes, EV probes) act
        pair.fail(0.003, 0.060)
    data = [bytes([i]) * (20_000 + 7_000 * i) for i in range(6)]
    for i, d in enumerate(data):
        pair.a.submit(i, d, digest_of(d), i % 3 != 2, 0.0)
    pair.b.submit(99, b"reply" * 3000, digest_of(b"reply" * 3000), True, 0.0)
    got: list[bytes] = []

    def collect() -> None:
        r = pair.b.receiver
        while r.ready:
            got.append(r.ready.popleft())
        r.partial.clear()

    checked = _skipped_poll_is_idle(pair, 0.5, collect)
    assert checked > 100  # the property was exercised, not vacuous
    assert got == [d for i, d in enumerate(data) if i % 3 != 2]
    assert not pair.a.failed and not pair.b.failed


def test_touched_by_input_and_shared_verdicts_cleared_by_poll() -> None:
    pair = CorePair(CFG, sim_evs())
    a = pair.a
    assert a.touched  # a new core is polled first
    a.poll(0.0, pair._transmit(0))
    assert not a.touched
    a.on_shared_verdict(1, 0, 0.001)
    assert a.touched
    a.poll(0.001, pair._transmit(0))
    assert not a.touched


@pytest.fixture
def stopped() -> Iterator[Endpoint]:
    """An endpoint whose I/O thread has ended: the test drives ``_poll_all`` itself."""
    emu = EmuNetwork.for_fabric(FABRIC, LinkProfile(), seed=1)
    ep = Endpoint(emu.port(0), 0, RouteTable.from_fabric(FABRIC, "h1"), CFG)
    ep.close()
    yield ep
    emu.close()


def test_endpoint_polls_touched_and_due_connections_only(
    stopped: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    ep = stopped
    sent: list[bytes] = []
    monkeypatch.setattr(ep, "_transmit", lambda ev, data: sent.append(data) or True)
    evs = ep.routes.evs(1)
    quiet, busy = ep._add_core((1, 1), evs), ep._add_core((1, 2), evs)
    polls: list[int] = []
    for core in (quiet, busy):
        orig = core.poll
        monkeypatch.setattr(
            core,
            "poll",
            lambda now, tx, orig=orig, cid=core.conn_id: (polls.append(cid), orig(now, tx))[1],
        )
    t0 = time.monotonic()
    ep._poll_all(t0)
    assert sorted(polls) == [1, 2]  # new connections are polled
    d = b"y" * 3000
    quiet.submit(0, d, digest_of(d), True, t0)  # as the endpoint's command would...
    quiet.touched = True  # ...which marks it
    polls.clear()
    deadline = ep._poll_all(t0)
    assert polls == [1] and len(sent) == 3  # only the touched one; its data went out
    assert deadline == quiet.next_deadline(t0) > t0  # the retransmission/probe timers
    polls.clear()
    busy.touched = True  # e.g. a datagram for the other connection
    assert ep._poll_all((t0 + deadline) / 2) == deadline
    assert polls == [2]  # the quiet one is not due yet
    polls.clear()
    n = len(sent)
    ep._poll_all(deadline)
    assert polls == [1]  # due: its timer runs although nothing touched it
    assert len(sent) > n  # a tail-loss probe (nothing was acknowledged)


def test_a_poll_that_touches_an_earlier_connection_wakes_the_loop_at_once(
    stopped: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    ep = stopped
    monkeypatch.setattr(ep, "_transmit", lambda ev, data: True)
    evs = ep.routes.evs(1)
    first, second = ep._add_core((1, 1), evs), ep._add_core((1, 2), evs)
    t0 = time.monotonic()
    ep._poll_all(t0)
    orig = second.poll

    def verdict_on_first(now: float, tx: Callable[[Ev, bytes], bool]) -> None:
        first.on_shared_verdict(0, 0, now)  # as PathHealth does from another connection
        orig(now, tx)

    monkeypatch.setattr(second, "poll", verdict_on_first)
    second.touched = True
    assert ep._poll_all(t0 + 0.001) == t0 + 0.001
    assert first.touched


def test_a_delayed_ack_is_a_deadline_of_its_own() -> None:
    # a quiet receiver holding a delayed ACK must be polled when it falls due: its
    # next_deadline says so (the endpoint skips a connection until then)
    pair = CorePair(LAZY_ACKS, sim_evs(), default=LinkProfile(delay_ms=0.3), seed=1)
    msg = b"x" * 3000  # three packets: only the last asks for an ACK at once
    pair.a.submit(0, msg, digest_of(msg), True, 0.0)
    sent: list[tuple[int, bytes]] = []
    txs = [pair._transmit(0), pair._transmit(1)]

    def rec(side: int) -> Callable[[Ev, bytes], bool]:
        def tx(ev: Ev, data: bytes) -> bool:
            sent.append((side, data))
            return txs[side](ev, data)

        return tx

    pair.a.poll(0.0, rec(0))
    assert [s for s, _ in sent] == [0, 0, 0]
    first = min(pair._heap)  # the first packet arrives; the other two are lost
    t, _seq, dst, _ev, data = first
    pkt = decode(data)
    assert dst == 1 and isinstance(pkt, DataPacket) and pkt.index == 0
    pair.b.on_packet(pkt, False, t)
    pair.b.poll(t, rec(1))
    assert len(sent) == 3  # the ACK is held (ack_every_packets 64, ack_delay 0.2 ms)
    due = pair.b.next_deadline(t)
    assert t < due <= t + LAZY_ACKS.ack_delay_ms / 1e3 + 1e-9
    pair.b.poll(due, rec(1))
    assert [s for s, _ in sent] == [0, 0, 0, 1]  # the delayed ACK left at its deadline
    assert decode(sent[3][1]).ptype is PacketType.ACK


def test_a_sender_blocked_by_the_peers_credit_probes_on_time() -> None:
    # data waits, nothing is in flight (the receiving application has not freed its buffer):
    # the persist probe is a deadline of its own, so it leaves every persist interval even
    # though nothing else wakes the connection
    cfg = replace(CFG, max_recv_buffer_bytes=8_000)
    pair = CorePair(cfg, sim_evs(), default=LinkProfile(delay_ms=0.3), seed=2)
    first, second = b"a" * 6_000, b"b" * 6_000
    pair.a.submit(0, first, digest_of(first), True, 0.0)
    pair.a.submit(1, second, digest_of(second), True, 0.0)  # beyond the credit until released
    probes: list[float] = []
    transmit = pair._transmit

    def recording(side: int) -> Callable[[Ev, bytes], bool]:
        tx = transmit(side)

        def rec(ev: Ev, data: bytes) -> bool:
            if side == 0 and isinstance(decode(data), ProbePacket):
                probes.append(pair.now)
            return tx(ev, data)

        return rec

    pair._transmit = recording  # type: ignore[method-assign]
    r = pair.b.receiver
    pair.run(lambda p: bool(r.ready) and not p.a.sender.flight, max_s=1.0)
    assert r.ready.popleft() == first
    probes.clear()
    pair.run(max_s=pair.now + 0.33)
    interval = cfg.persist_interval_ms / 1e3
    assert len(probes) >= 5, probes
    gaps = [b - a for a, b in itertools.pairwise(probes)]
    assert all(interval - 1e-9 <= g <= interval + 0.002 for g in gaps), gaps
    assert not r.ready  # still blocked: nothing of the second message was sent
    r.release(len(first))  # the application frees its buffer: the next ACK widens the credit
    pair.run(lambda p: bool(r.ready), max_s=pair.now + 1.0)
    assert r.ready.popleft() == second
