"""The threaded MRC endpoint over the in-process emulated fabric (host.linkemu): the blocking
API, impairment, plane failure (MRC vs single path), fuzzed input, bounded memory, idle CPU."""

from __future__ import annotations

import os
import random
import resource
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from host.baseline import SinglePathEndpoint
from host.errors import ConnectionClosed, MessageTooLarge, TransportTimeout
from host.linkemu import EmuNetwork, LinkProfile
from host.mrc.config import MrcConfig
from host.mrc.endpoint import Endpoint
from host.mrc.evs import EvState
from host.mrc.recorder import EventKind
from host.paths import RouteTable
from host.wire import DropReason, PacketType, encode_probe
from topologies.model import Fabric, FabricSpec, build_fabric

FABRIC = build_fabric(FabricSpec(planes=2, leaves=2, spines=2, hosts_per_leaf=1))
CFG = MrcConfig(rto_min_ms=20)


class Pair:
    def __init__(self, emu: EmuNetwork, a: Endpoint, b: Endpoint) -> None:
        self.emu, self.a, self.b = emu, a, b


def make_pair(
    profile: LinkProfile,
    cfg: MrcConfig = CFG,
    *,
    single_path: bool = False,
    fabric: Fabric = FABRIC,
    seed: int = 1,
) -> Pair:
    emu = EmuNetwork.for_fabric(fabric, profile, seed=seed)
    kind = SinglePathEndpoint if single_path else Endpoint
    a = kind(emu.port(0), 0, RouteTable.from_fabric(fabric, "h1"), cfg, sample_interval_ms=5)
    b = kind(emu.port(1), 1, RouteTable.from_fabric(fabric, "h2"), cfg)
    return Pair(emu, a, b)


@pytest.fixture
def closing() -> Iterator[list[Pair]]:
    pairs: list[Pair] = []
    yield pairs
    for p in pairs:
        p.a.close()
        p.b.close()
        p.emu.close()


def test_messages_arrive_intact_and_in_order_over_a_hostile_network(closing: list[Pair]) -> None:
    bad = LinkProfile(
        delay_ms=0.3,
        jitter_ms=0.3,
        loss=0.2,
        duplicate=0.05,
        corrupt=0.05,
        reorder=0.1,
        reorder_delay_ms=2.0,
    )
    p = make_pair(bad)
    closing.append(p)
    rng = random.Random(5)
    msgs = [rng.randbytes(rng.choice([0, 10, 1384, 1385, 9_000, 60_000])) for _ in range(120)]
    conn = p.a.connect(1)
    handles = [conn.send(m) for m in msgs]
    peer = p.b.accept(timeout=5)
    assert [peer.recv(timeout=30) for _ in msgs] == msgs
    for h in handles:
        h.wait(timeout=10)
    c = p.emu.counters
    assert c["dropped_loss"] > 100 and c["corrupted"] > 20 and c["duplicated"] > 10
    for ep in (p.a, p.b):
        st = ep.stats()
        assert st.internal_errors == 0
    drops = p.b.stats().drops
    assert drops.get("bad_payload_checksum", 0) + drops.get("bad_checksum", 0) > 0
    assert conn.stats().retransmits > 0 and peer.stats().duplicates_received > 0


def test_plane_failure_loses_no_message_and_moves_traffic_without_a_timeout(
    closing: list[Pair],
) -> None:
    # an RTO far above any stall of a shared machine: if failover waited for one, it shows
    cfg = replace(CFG, rto_min_ms=1000)
    p = make_pair(LinkProfile(delay_ms=0.5, rate_mbps=100, queue_bytes=512 * 1024), cfg)
    closing.append(p)
    conn = p.a.connect(1)
    msgs = [os.urandom(20_000) for _ in range(300)]
    arrivals: list[float] = []

    def receive() -> None:
        peer = p.b.accept(timeout=5)
        for m in msgs:
            assert peer.recv(timeout=30) == m
            arrivals.append(time.monotonic())

    rx = threading.Thread(target=receive)
    rx.start()
    handles = []
    fail_at = 0.0
    for i, m in enumerate(msgs):
        handles.append(conn.send(m))
        if i == 100:
            p.emu.fail(plane=1)
            fail_at = time.monotonic()
        if i >= 8:
            handles[i - 8].wait(timeout=30)  # keep 8 messages in flight
    for h in handles:
        h.wait(timeout=30)
    rx.join(timeout=30)
    assert len(arrivals) == len(msgs)
    after = [t for t in arrivals if t >= fail_at]
    gap = max(b - a for a, b in zip([fail_at, *after], after))
    marked = [
        e.t_s - fail_at
        for e in p.a.recorder.events(EventKind.EV_STATE)
        if "assumed_bad" in e.detail and e.t_s >= fail_at
    ]
    print(
        f"\nMRC plane failure on the emulator: plane-1 EVs ASSUMED_BAD after "
        f"{[f'{1e3 * t:.1f} ms' for t in marked[:2]]}, longest delivery gap {1e3 * gap:.1f} ms"
    )
    states = {e.ev_id: e.state for e in conn.ev_stats()}
    assert states[2] is EvState.ASSUMED_BAD and states[3] is EvState.ASSUMED_BAD
    assert states[0] is EvState.GOOD or states[1] is EvState.GOOD
    # plane 1 was found failed by later packets' ACKs (RACK), its packets in flight were resent
    # on plane 0 at once (EV down), and no retransmission timeout was needed
    first: dict[int, str] = {}
    for e in p.a.recorder.events(EventKind.EV_STATE):
        if e.t_s >= fail_at:
            first.setdefault(e.ev, e.detail)
    assert first[2] == first[3] == "good->assumed_bad rack", first
    st = conn.stats()
    assert st.losses_ev_down > 0 and st.rto_events == 0 and st.losses_rto == 0
    samples = p.a.recorder.samples(conn.conn_id)
    assert {s.plane for s in samples} == {0, 1} and samples[-1].bytes_acked > 0


def test_single_path_baseline_stalls_until_the_rto(closing: list[Pair]) -> None:
    cfg = replace(CFG, rto_min_ms=100)
    p = make_pair(LinkProfile(delay_ms=0.5), cfg, single_path=True)
    closing.append(p)
    conn = p.a.connect(1)
    conn.send(b"warm up").wait(timeout=5)
    peer = p.b.accept(timeout=5)
    peer.recv(timeout=5)
    [used] = [e for e in conn.ev_stats() if e.packets_sent]
    p.emu.fail(plane=used.plane)
    t0 = time.monotonic()
    h = conn.send(os.urandom(50_000))
    assert peer.recv(timeout=10)
    delivered_at = time.monotonic()
    h.wait(timeout=10)
    print(f"\nsingle path: plane failure stalled delivery {1e3 * (delivered_at - t0):.0f} ms")
    # no ACK came to tell a loss (RACK): only the retransmission timeout found the losses, and
    # the message arrived after the first one re-hashed the flow
    st = conn.stats()
    assert st.rto_events >= 1 and st.losses_rto > 0 and st.losses_rack == 0
    rtos = [e.t_s for e in p.a.recorder.events(EventKind.RTO) if e.t_s >= t0]
    assert rtos and rtos[0] <= delivered_at
    assert len({e.ev_id for e in conn.ev_stats() if e.packets_sent}) >= 2  # re-hashed


def test_malformed_and_foreign_datagrams_are_counted_and_dropped(closing: list[Pair]) -> None:
    p = make_pair(LinkProfile(delay_ms=0.2))
    closing.append(p)
    conn = p.a.connect(1)
    msgs = [os.urandom(5_000) for _ in range(50)]
    handles = [conn.send(m) for m in msgs]
    rng = random.Random(3)
    junk_probe = encode_probe(ev=0, src_host=0, dst_host=7, conn_id=1, probe_seq=1, ts_us=0)
    stranger = encode_probe(ev=0, src_host=9, dst_host=1, conn_id=1, probe_seq=1, ts_us=0)
    for i in range(3_000):
        match i % 5:
            case 0:
                data = rng.randbytes(rng.randrange(200))
            case 1:
                data = junk_probe  # addressed to host 7
            case 2:
                data = stranger  # host 9 has no route: not accepted
            case 3:
                data = bytes([0x74, 0x46, 1, rng.choice(list(PacketType))]) + rng.randbytes(80)
            case _:
                data = bytes([0x74, 0x46]) + rng.randbytes(rng.randrange(100))
        p.emu.inject(1, data)
    peer = p.b.accept(timeout=5)
    assert [peer.recv(timeout=10) for _ in msgs] == msgs
    for h in handles:
        h.wait(timeout=10)
    deadline = time.monotonic() + 5
    while True:  # the junk may still be queued behind the last message
        st = p.b.stats()
        if st.drops.get(DropReason.FOREIGN.value, 0) >= 600 or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    assert st.internal_errors == 0 and st.connections == 1
    assert st.drops[DropReason.FOREIGN.value] == 600
    assert st.drops[DropReason.UNKNOWN_CONNECTION.value] == 600
    assert sum(st.drops.values()) >= 3_000


def test_unreliable_messages_report_what_arrived(closing: list[Pair]) -> None:
    p = make_pair(LinkProfile(delay_ms=0.3, loss=0.2), seed=4)
    closing.append(p)
    conn = p.a.connect(1)
    msgs = [os.urandom(30_000) for _ in range(20)]
    handles = [conn.send(m, reliable=False) for m in msgs]
    outcomes = [h.wait(timeout=10) for h in handles]
    peer = p.b.accept(timeout=5)
    got = {}
    while len(got) < len(msgs):
        m = peer.recv_partial(timeout=10)
        got[m.msg_id] = m
    total = 0
    for i, (msg, out) in enumerate(zip(msgs, outcomes)):
        part = got[out.msg_id]
        assert set(out.acked) <= set(part.arrived)
        total += len(part.arrived)
        if part.msg_len is None:
            continue
        for j in range(part.packets):
            chunk = slice(j * part.stride, (j + 1) * part.stride)
            expect = msg[chunk] if j in part.arrived else bytes(len(msg[chunk]))
            assert part.data[chunk] == expect, (i, j)
    assert 0.6 < total / sum(o.packets for o in outcomes) < 0.95  # about 80 % got through
    assert conn.stats().retransmits == 0


def test_receiver_that_never_reads_bounds_memory_and_pushes_back(closing: list[Pair]) -> None:
    cfg = replace(CFG, max_recv_buffer_bytes=200_000, max_send_queue_bytes=300_000)
    p = make_pair(LinkProfile(delay_ms=0.2), cfg)
    closing.append(p)
    conn = p.a.connect(1)
    with pytest.raises(MessageTooLarge):
        conn.send(bytes(200_001))
    sent = 0
    with pytest.raises(TransportTimeout):
        for _ in range(100):
            conn.send(os.urandom(50_000), timeout=0.5)
            sent += 1
    peer = p.b.accept(timeout=5)
    time.sleep(0.2)
    assert peer.stats().recv_buffered_bytes <= 200_000
    assert 4 <= sent <= 10
    got = [peer.recv(timeout=10) for _ in range(sent)]  # reading drains everything
    assert len(got) == sent and peer.stats().recv_buffered_bytes == 0


def test_controller_denial_and_per_ev_statistics(closing: list[Pair]) -> None:
    p = make_pair(LinkProfile(delay_ms=0.2))
    closing.append(p)
    conn = p.a.connect(1)
    conn.deny_ev(0)
    for _ in range(20):
        conn.send(bytearray(os.urandom(10_000)))
    conn.send(memoryview(os.urandom(10_000))).wait(timeout=5)
    conn.flush(timeout=5)
    stats = {e.ev_id: e for e in conn.ev_stats()}
    assert stats[0].state is EvState.DENIED and stats[0].packets_sent == 0
    assert all(stats[i].packets_acked > 0 for i in (1, 2, 3))
    conn.allow_ev(0)
    assert {e.ev_id: e.state for e in conn.ev_stats()}[0] is EvState.ASSUMED_BAD


def test_close_is_idempotent_and_fails_what_is_pending(closing: list[Pair]) -> None:
    p = make_pair(LinkProfile(delay_ms=0.2))
    closing.append(p)
    p.emu.fail(plane=0)
    p.emu.fail(plane=1)
    conn = p.a.connect(1)
    h = conn.send(b"never delivered")
    conn.close()
    conn.close()
    with pytest.raises(ConnectionClosed):
        h.wait(timeout=1)
    with pytest.raises(ConnectionClosed):
        conn.recv(timeout=1)
    p.a.close()
    p.a.close()
    with pytest.raises(ConnectionClosed):
        p.a.connect(1)


def test_idle_endpoint_does_not_spin(closing: list[Pair]) -> None:
    p = make_pair(LinkProfile(delay_ms=0.2))
    closing.append(p)
    conn = p.a.connect(1)
    conn.send(b"x").wait(timeout=5)
    p.b.accept(timeout=5).recv(timeout=5)
    before = resource.getrusage(resource.RUSAGE_SELF)
    time.sleep(0.5)
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert cpu < 0.1
