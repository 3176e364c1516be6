"""The MRC connection state machine in virtual time (host.mrc.sim): delivery under heavy
impairment, SACK and NACK retransmission, RTO backoff, unreliable mode, the FLOOR, failover,
bounded memory and end-to-end digests."""

from __future__ import annotations

import math
import os
import random
import struct
import zlib
from dataclasses import replace

import pytest

from host.linkemu import LinkProfile
from host.mrc.config import CcConfig, EvPolicy, MrcConfig
from host.mrc.evs import EvState
from host.mrc.receiver import Receiver, digest_of
from host.mrc.recorder import EventKind, Recorder
from host.mrc.sender import LossCause
from host.mrc.sim import CorePair
from host.paths import Ev
from host.wire import (
    DATA_HEADER_BYTES,
    NO_EV,
    AckPacket,
    DataPacket,
    Flag,
    PacketType,
    decode,
    encode_data,
)

CFG = MrcConfig(payload_bytes=1000)
# a 64 KB window over a 1 ms RTT: 64 MB/s, so a few MB take long enough to fail a plane midway
PACED = replace(CFG, rto_min_ms=20, cc=CcConfig(initial_cwnd_bytes=64_000, max_cwnd_bytes=64_000))
LOSSY = LinkProfile(
    delay_ms=0.5,
    jitter_ms=0.5,
    loss=0.25,
    duplicate=0.1,
    corrupt=0.1,
    reorder=0.2,
    reorder_delay_ms=3.0,
)


def submit(pair: CorePair, msgs: list[bytes], reliable: bool = True, side: int = 0) -> None:
    for i, m in enumerate(msgs):
        pair.cores[side].submit(i, m, digest_of(m), reliable, pair.now)


def all_done(n: int):  # type: ignore[no-untyped-def]
    return lambda p: len(p.a.sender.completed) == n and len(p.b.receiver.ready) == n


def data_psn(data: bytes) -> int | None:
    return struct.unpack_from("!Q", data, 20)[0] if data[3] == PacketType.DATA else None


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_reliable_delivery_is_exact_under_loss_reordering_duplication_corruption(seed: int) -> None:
    rng = random.Random(seed)
    msgs = [rng.randbytes(rng.choice([0, 1, 999, 1000, 1001, 20_000, 150_000])) for _ in range(40)]
    pair = CorePair(CFG, default=LOSSY, seed=seed)
    submit(pair, msgs)
    pair.run(all_done(len(msgs)))
    assert list(pair.b.receiver.ready) == msgs
    assert pair.counters["lost"] > 200 and pair.counters["corrupted"] > 50
    assert sum(pair.decode_errors.values()) > 0  # corrupted datagrams were caught by checksums
    assert pair.a.failed is None and pair.b.failed is None
    done = sorted(pair.a.sender.completed, key=lambda o: o.token)
    assert [o.msg_len for o in done] == [len(m) for m in msgs]


def test_both_directions_at_once() -> None:
    pair = CorePair(CFG, default=LOSSY)
    there = [os.urandom(30_000) for _ in range(5)]
    back = [os.urandom(25_000) for _ in range(5)]
    submit(pair, there, side=0)
    submit(pair, back, side=1)
    pair.run(lambda p: len(p.b.receiver.ready) == 5 and len(p.a.receiver.ready) == 5)
    assert list(pair.b.receiver.ready) == there and list(pair.a.receiver.ready) == back


def test_sack_bitmap_reports_holes_and_only_they_are_resent_on_another_ev() -> None:
    dropped: dict[int, int] = {}  # psn -> EV of the dropped first transmission

    def tap(side: int, ev: Ev, data: bytes) -> bytes | None:
        psn = data_psn(data)
        if side == 0 and psn in (3, 5) and psn not in dropped:
            dropped[psn] = ev.ev_id
            return None
        return data

    pair = CorePair(replace(CFG, ack_every_packets=1), tap=tap)
    msg = os.urandom(10_000)  # 10 packets
    submit(pair, [msg])
    pair.run(lambda p: p.b.receiver.cum >= 3 or bool(p.b.receiver.mask))
    pair.run(lambda p: p.b.receiver.cum == 3 and p.b.receiver.mask.bit_length() >= 6)
    assert pair.b.receiver.mask & 0b10 == 0  # PSN 5 = cum+1+1 still missing
    pair.run(all_done(1))
    assert list(pair.b.receiver.ready) == [msg]
    s = pair.a.sender
    assert s.retransmits == 2 and s.packets_sent == 12
    for ev in dropped.values():
        assert pair.a.evs.by_id[ev].losses >= 1
    assert pair.b.receiver.duplicates == 0


def test_trimmed_packets_are_nacked_and_resent_at_once_without_marking_the_ev_bad() -> None:
    trimmed_ev = 1
    pair = CorePair(CFG, profiles={trimmed_ev: LinkProfile(delay_ms=0.1, trim=True)})
    msgs = [os.urandom(50_000) for _ in range(3)]
    submit(pair, msgs)
    pair.run(all_done(3))
    assert list(pair.b.receiver.ready) == msgs
    st = pair.a.stats()
    assert st.nacks_received > 0 and st.losses_nack == st.nacks_received
    assert st.losses_rack == 0 and st.rto_events == 0
    ev = pair.a.evs.by_id[trimmed_ev]
    assert ev.state is EvState.GOOD and ev.nacks > 0 and ev.penalty > 0
    assert pair.b.receiver.trimmed == pair.counters["trimmed"]


def test_rto_backs_off_exponentially_while_nothing_gets_through() -> None:
    cfg = replace(CFG, rto_min_ms=10, rto_initial_ms=10, dead_peer_timeout_s=100)
    pair = CorePair(cfg)
    rec = Recorder()
    pair.a.recorder = rec
    pair.fail(0.0, 1.0)  # every EV, both directions, for one second
    submit(pair, [os.urandom(5000)])
    pair.run(all_done(1), max_s=5)
    rtos = [e.value for e in rec.events(EventKind.RTO)]
    assert len(rtos) >= 5
    for a, b in zip(rtos, rtos[1:]):
        assert b == pytest.approx(2 * a)
    assert pair.now > 1.0 and len(pair.b.receiver.ready) == 1


def test_silent_peer_fails_the_connection() -> None:
    cfg = replace(CFG, dead_peer_timeout_s=0.5)
    pair = CorePair(cfg)
    pair.fail(0.0)
    submit(pair, [b"hello"])
    pair.run(lambda p: p.a.failed is not None, max_s=5)
    assert "silent" in (pair.a.failed or "")


def test_a_connection_idle_past_the_dead_peer_timeout_is_not_failed_by_its_next_message() -> None:
    # a peer that had nothing to answer is not silent: the clock starts when data is sent
    pair = CorePair(replace(CFG, dead_peer_timeout_s=0.5))
    submit(pair, [b"hello"])
    pair.run(lambda p: len(p.b.receiver.ready) == 1 and not p.a.sender.outstanding())
    pair.run(max_s=pair.now + 2.0)  # four timeouts with nothing to send and nothing heard
    pair.a.submit(1, b"again", digest_of(b"again"), True, pair.now)
    pair.run(lambda p: len(p.b.receiver.ready) == 2 or p.a.failed is not None, max_s=pair.now + 1)
    assert pair.a.failed is None
    assert list(pair.b.receiver.ready) == [b"hello", b"again"]


def test_a_peer_that_came_back_from_a_long_silence_gets_ten_times_it_before_it_is_dead() -> None:
    # a blackout of 0.8 s the connection survives (limit 1 s), then one of 5 s: survived too,
    # since the peer has shown it can be silent that long and come back (limit now ~8 s)
    pair = CorePair(replace(CFG, dead_peer_timeout_s=1.0))
    pair.fail(0.0, 0.8)
    submit(pair, [b"first"])
    pair.run(lambda p: len(p.b.receiver.ready) == 1 or p.a.failed is not None, max_s=3.0)
    assert pair.a.failed is None and 0.7 < pair.a.longest_silence_s < 1.0
    pair.fail(pair.now, pair.now + 5.0)
    pair.a.submit(1, b"second", digest_of(b"second"), True, pair.now)
    pair.run(lambda p: len(p.b.receiver.ready) == 2 or p.a.failed is not None, max_s=20.0)
    assert pair.a.failed is None and list(pair.b.receiver.ready) == [b"first", b"second"]
    # a peer that is gone for good is still found, after the stretched limit
    start = pair.now
    pair.fail(start)
    pair.a.submit(2, b"third", digest_of(b"third"), True, pair.now)
    pair.run(lambda p: p.a.failed is not None, max_s=start + 120.0)
    assert "silent" in (pair.a.failed or "")
    assert 10 * 4.0 < pair.now - start <= 10 * 6.0 + 1.0


def test_unreliable_mode_reports_exactly_the_packets_that_arrived() -> None:
    drop = {0: {1, 4}, 1: set(), 2: {0, 1, 2, 3, 4}, 3: {4}}  # message -> packet indices

    def tap(side: int, ev: Ev, data: bytes) -> bytes | None:
        pkt = decode(data)
        if side == 0 and pkt.__class__.__name__ == "DataPacket":
            assert pkt.flags & 1  # UNRELIABLE
            if pkt.index in drop[pkt.msg_id]:  # type: ignore[union-attr]
                return None
        return data

    pair = CorePair(CFG, tap=tap)
    msgs = [os.urandom(4500) for _ in range(4)]  # 5 packets each
    submit(pair, msgs, reliable=False)
    pair.run(lambda p: len(p.a.sender.completed) == 4 and len(p.b.receiver.partial) == 4)
    sent = {o.msg_id: o for o in pair.a.sender.completed}
    got = {m.msg_id: m for m in pair.b.receiver.partial}
    for mid, lost in drop.items():
        arrived = tuple(sorted(set(range(5)) - lost))
        assert sent[mid].acked == arrived
        assert got[mid].arrived == arrived
        if arrived:
            for i in range(5):
                chunk = got[mid].data[i * 1000 : (i + 1) * 1000]
                assert chunk == (
                    msgs[mid][i * 1000 : (i + 1) * 1000] if i in arrived else bytes(len(chunk))
                )
        else:
            assert got[mid].msg_len is None and got[mid].data == b""
    assert got[1].complete and got[1].digest_ok and got[1].data == msgs[1]
    assert pair.a.sender.retransmits == 0


def test_unreliable_credit_does_not_leak_when_whole_messages_are_lost() -> None:
    cfg = replace(CFG, max_recv_buffer_bytes=20_000)
    pair = CorePair(cfg, default=LinkProfile(delay_ms=0.2, loss=0.5), seed=5)
    msgs = [os.urandom(10_000) for _ in range(30)]  # 300 KB through a 20 KB window
    submit(pair, msgs, reliable=False)

    def consume(p: CorePair) -> bool:
        r = p.b.receiver
        while r.partial:
            m = r.partial.popleft()
            if m.msg_len:
                r.release(m.msg_len)
        return len(p.a.sender.completed) == 30 and r.unrel_done == 30

    pair.run(consume, max_s=30)
    assert pair.b.receiver.buffered_bytes == 0


def test_receiver_that_never_reads_bounds_memory_and_stalls_the_sender() -> None:
    cfg = replace(CFG, max_recv_buffer_bytes=100_000)
    pair = CorePair(cfg)
    msgs = [os.urandom(30_000) for _ in range(20)]
    submit(pair, msgs)
    peak = 0

    def watch(p: CorePair) -> bool:
        nonlocal peak
        peak = max(peak, p.b.receiver.buffered_bytes)
        return False

    pair.run(watch, max_s=2.0)
    assert peak <= 100_000
    assert len(pair.b.receiver.ready) == 3 and len(pair.a.sender.completed) == 3
    assert pair.a.failed is None  # persist probes keep it alive
    r = pair.b.receiver
    got: list[bytes] = []

    def read_all(p: CorePair) -> bool:  # now the application reads everything
        while r.ready:
            got.append(r.ready.popleft())
            r.release(len(got[-1]))
        return len(got) == 20 and len(p.a.sender.completed) == 20

    pair.run(read_all, max_s=10)
    assert got == msgs


def test_wrong_bytes_with_valid_checksums_are_never_delivered() -> None:
    def tap(side: int, ev: Ev, data: bytes) -> bytes | None:
        if side == 0 and data_psn(data) == 2:  # forge the payload, fix its CRC and header CRC
            pkt = decode(data)
            forged = bytes(len(pkt.payload))  # type: ignore[union-attr]
            return encode_data(
                flags=pkt.flags,
                ev=pkt.ev,
                src_host=pkt.src_host,
                dst_host=pkt.dst_host,
                conn_id=pkt.conn_id,
                psn=pkt.psn,  # type: ignore[union-attr]
                msg_id=pkt.msg_id,
                msg_len=pkt.msg_len,
                index=pkt.index,  # type: ignore[union-attr]
                ts_us=pkt.ts_us,
                stride=pkt.stride,
                digest=pkt.digest,  # type: ignore[union-attr]
                payload=forged,
            )
        return data

    pair = CorePair(CFG, tap=tap)
    submit(pair, [os.urandom(5000)])
    pair.run(lambda p: p.b.failed is not None, max_s=2)
    assert "digest mismatch" in (pair.b.failed or "")
    assert not pair.b.receiver.ready


def _progress_gap_after(pair: CorePair, n: int, fail_at: float) -> tuple[float, list[float]]:
    times: list[float] = []

    def watch(p: CorePair) -> bool:
        while len(times) < len(p.b.receiver.ready):
            times.append(p.now)
        return len(p.a.sender.completed) == n and len(times) == n

    pair.run(watch, max_s=30)
    after = [t for t in times if t >= fail_at]
    gap = max(b - a for a, b in zip([fail_at, *after], after))
    return gap, times


def test_plane_failure_loses_nothing_and_moves_traffic_within_milliseconds() -> None:
    pair = CorePair(PACED, default=LinkProfile(delay_ms=0.5))
    rec = Recorder()
    pair.a.recorder = rec
    msgs = [os.urandom(20_000) for _ in range(200)]
    submit(pair, msgs)
    pair.fail(0.02, plane=1)
    gap, _ = _progress_gap_after(pair, len(msgs), 0.02)
    assert list(pair.b.receiver.ready) == msgs
    marked = {e.ev: e.t_s for e in rec.events(EventKind.EV_STATE) if "assumed_bad" in e.detail}
    assert set(marked) == {2, 3}
    assert max(marked.values()) - 0.02 < 0.01
    assert gap < 0.015
    assert pair.a.stats().rto_events == 0
    assert all(p.state is EvState.GOOD for p in pair.a.evs.paths if p.ev.plane == 0)


def test_single_path_stalls_until_the_rto_in_the_same_failure() -> None:
    cfg = PACED.with_policy(EvPolicy.HASHED)
    pair = CorePair(cfg, default=LinkProfile(delay_ms=0.5))
    rec = Recorder()
    pair.a.recorder = rec
    used = pair.a.evs.pick(0.0)
    assert used is not None
    msgs = [os.urandom(20_000) for _ in range(100)]
    submit(pair, msgs)
    pair.fail(0.02, plane=used.ev.plane)
    _, times = _progress_gap_after(pair, len(msgs), 0.02)
    assert list(pair.b.receiver.ready) == msgs
    # nothing moves until the retransmission timeout re-hashes the flow (virtual time): no ACK
    # tells of a loss, and no message is delivered between the failure and the first RTO
    rtos = [e.t_s for e in rec.events(EventKind.RTO)]
    assert rtos and pair.a.stats().losses_rack == 0
    first_rto = rtos[0]
    assert not [t for t in times if 0.02 < t <= first_rto]
    assert any(t > first_rto for t in times)


def test_probes_bring_a_recovered_plane_back() -> None:
    pair = CorePair(PACED, default=LinkProfile(delay_ms=0.5))
    msgs = [os.urandom(20_000) for _ in range(300)]
    submit(pair, msgs)
    pair.fail(0.01, 0.03, plane=0)
    pair.run(all_done(len(msgs)), max_s=30)
    assert all(p.state is EvState.GOOD for p in pair.a.evs.paths)
    assert all(p.probes_ok >= 1 for p in pair.a.evs.paths if p.ev.plane == 0)


def test_denied_ev_carries_nothing() -> None:
    pair = CorePair(CFG)
    pair.a.deny(1, 0.0)
    submit(pair, [os.urandom(50_000)])
    pair.run(all_done(1))
    assert pair.a.evs.by_id[1].packets_sent == 0 and pair.a.evs.by_id[1].probes_sent == 0


def test_window_never_exceeds_cwnd_and_ecn_marks_shrink_it() -> None:
    def mark(side: int, ev: Ev, data: bytes) -> bytes | None:
        return data

    pair = CorePair(CFG, default=LinkProfile(delay_ms=0.5), tap=mark)
    b = pair.b
    orig = b.on_packet
    b.on_packet = lambda pkt, ce, now: orig(pkt, True, now)  # type: ignore[method-assign]
    start = pair.a.cc.window_bytes
    submit(pair, [os.urandom(300_000)])
    peak = 0

    def watch(p: CorePair) -> bool:
        nonlocal peak
        peak = max(peak, p.a.sender.inflight_bytes - p.a.cc.window_bytes)
        return len(p.a.sender.completed) == 1

    pair.run(watch)
    assert peak <= CFG.payload_bytes  # at most one packet beyond the window
    assert pair.a.cc.window_bytes <= start
    assert all(p.ecn_marks > 0 for p in pair.a.evs.paths)


def test_checksum_of_a_trimmed_header_still_verifies() -> None:
    raw = encode_data(
        flags=0,
        ev=0,
        src_host=0,
        dst_host=1,
        conn_id=1,
        psn=0,
        msg_id=0,
        msg_len=10,
        index=0,
        ts_us=0,
        stride=10,
        digest=bytes(16),
        payload=b"x" * 10,
    )
    assert (
        zlib.crc32(raw[DATA_HEADER_BYTES:])
        == struct.unpack_from("!I", raw, DATA_HEADER_BYTES - 4)[0]
    )


def test_an_ev_marked_bad_has_all_its_in_flight_packets_resent_at_once() -> None:
    pair = CorePair(PACED, default=LinkProfile(delay_ms=5.0))
    msg = os.urandom(60_000)
    submit(pair, [msg])
    pair.run(lambda p: len(p.a.sender.flight) >= 20, max_s=1)
    s = pair.a.sender
    on_ev = [q for q in s.flight.values() if q.ev == 2]
    assert len(on_ev) >= 3
    s._declare_lost(on_ev[0], pair.now, LossCause.RACK)  # the first loss seen on EV 2
    assert pair.a.evs.by_id[2].state is EvState.ASSUMED_BAD
    assert not any(q.ev == 2 for q in s.flight.values())
    assert {q.psn for q in on_ev} <= {q.psn for q in s.pending}
    assert pair.a.stats().losses_ev_down == len(on_ev) - 1
    pair.run(all_done(1), max_s=5)
    assert list(pair.b.receiver.ready) == [msg]


def test_a_loss_on_a_penalised_ev_resends_only_that_packet() -> None:
    # the floor keeps the last GOOD EV usable: its other packets stay in flight
    cfg = replace(PACED, ev=replace(PACED.ev, min_active=4))
    pair = CorePair(cfg, default=LinkProfile(delay_ms=5.0))
    submit(pair, [os.urandom(60_000)])
    pair.run(lambda p: len(p.a.sender.flight) >= 20, max_s=1)
    s = pair.a.sender
    on_ev = [q for q in s.flight.values() if q.ev == 1]
    s._declare_lost(on_ev[0], pair.now, LossCause.RACK)
    assert pair.a.evs.by_id[1].state is EvState.GOOD
    assert [q.psn for q in s.flight.values() if q.ev == 1] == [q.psn for q in on_ev[1:]]
    assert pair.a.stats().losses_ev_down == 0


def test_denying_an_ev_resends_what_it_carried() -> None:
    pair = CorePair(PACED, default=LinkProfile(delay_ms=5.0))
    msg = os.urandom(60_000)
    submit(pair, [msg])
    pair.run(lambda p: len(p.a.sender.flight) >= 20, max_s=1)
    n = sum(1 for q in pair.a.sender.flight.values() if q.ev == 0)
    assert n
    pair.a.deny(0, pair.now)
    assert not any(q.ev == 0 for q in pair.a.sender.flight.values())
    assert pair.a.stats().losses_ev_down == n
    pair.run(all_done(1), max_s=5)
    assert list(pair.b.receiver.ready) == [msg]


def _data(psn: int, ev: int, payload: bytes, msg: bytes) -> DataPacket:
    return DataPacket(
        flags=0,
        ev=ev,
        src_host=1,
        dst_host=2,
        conn_id=7,
        psn=psn,
        msg_id=0,
        msg_len=len(msg),
        index=psn,
        ts_us=1000 + psn,
        stride=len(payload),
        digest=digest_of(msg),
        payload=payload,
    )


def test_reordered_packets_get_an_ack_at_once_only_when_configured() -> None:
    msg = os.urandom(400)
    for ack_on_reorder in (True, False):
        r = Receiver(replace(CFG, ack_on_reorder=ack_on_reorder))
        r.on_data(_data(1, 0, msg[100:200], msg), False, 0.0)  # PSN 0 not here yet
        assert r.ack_now is ack_on_reorder
        assert r.ack_due == (math.inf if ack_on_reorder else CFG.ack_delay_ms / 1e3)


def test_coalesced_ce_marks_ride_on_the_delayed_ack_with_their_ev() -> None:
    msg = os.urandom(400)
    every = Receiver(CFG)
    every.on_data(_data(0, 3, msg[:100], msg), True, 0.0)
    assert [(x.echo_ev, bool(x.flags & Flag.CE)) for x in every.replies] == [(3, True)]
    r = Receiver(replace(CFG, ack_every_ce=False))
    r.on_data(_data(0, 3, msg[:100], msg), True, 0.0)
    r.on_data(_data(1, 1, msg[100:200], msg), False, 0.0001)
    assert not r.replies and not r.ack_now
    echo, _spread = r.take_ack()
    assert (echo.echo_ev, echo.echo_psn, bool(echo.flags & Flag.CE)) == (3, 0, True)


def test_a_packet_overtaken_on_another_ev_waits_at_least_the_overtaking_rtt() -> None:
    # Queues building on every path at once (a failed plane's load arriving): a packet on
    # EV 1 is overtaken by a later one on EV 0 that took 12 ms, far above EV 1's smoothed
    # 2 ms. Lost only once the 12 ms (plus the path margin) have passed, not after ~5 ms.
    cfg = replace(PACED, ack_every_packets=1)  # an RTT sample on every EV
    pair = CorePair(cfg, default=LinkProfile(delay_ms=1.0))
    submit(pair, [os.urandom(200_000)])
    pair.run(
        lambda p: all(e.srtt > 0 for e in p.a.evs.paths) and len(p.a.sender.flight) > 8, max_s=1
    )
    s = pair.a.sender
    x = next(q for q in s.flight.values() if q.ev == 1)
    y = next(q for q in s.flight.values() if q.ev != 1 and q.xmit_seq > x.xmit_seq)
    s.rack_seq, s.rack_rtt = y.xmit_seq, 0.012
    s.ev_rack_seq = {ev: seq for ev, seq in s.ev_rack_seq.items() if seq < x.xmit_seq}
    s.detect_losses(x.xmit + 0.008)
    assert x.psn in s.flight
    s.detect_losses(x.xmit + 0.012 + 2 * pair.a.evs.by_id[1].srtt + 0.002)
    assert x.psn not in s.flight


def test_only_an_ack_echoing_the_resend_counts_for_rack() -> None:
    # EV 2 goes bad; its packet x had in fact arrived and is resent on EV 0. An ACK that
    # covers x without echoing the resend may be the original's: EV 0 must not look as if x
    # overtook its earlier packets (RACK would declare them all lost). One that echoes the
    # resend's timestamp does count.
    for echoes_resend in (False, True):
        pair = CorePair(PACED, default=LinkProfile(delay_ms=5.0))
        submit(pair, [os.urandom(200_000)])
        pair.run(lambda p: p.a.sender.srtt > 0 and len(p.a.sender.flight) >= 20, max_s=1)
        s, now = pair.a.sender, pair.now
        x = next(q for q in s.flight.values() if q.ev == 2 and q.psn > s.una)
        s._declare_lost(x, now, LossCause.RACK)
        s.pending.remove(x)
        s.on_transmitted(x, 0, 4242, now)
        before = dict(s.ev_rack_seq), s.rack_seq
        echo = (x.psn, 4242, 0) if echoes_resend else (0, 0, NO_EV)
        ack = AckPacket(
            PacketType.ACK, 0, 2, 1, 0, 7, s.una, 1 << 30, *echo, 0, 1 << (x.psn - s.una - 1), 2048
        )
        s.on_ack(ack, now + 0.001, 4242 + 1000)
        assert x.psn not in s.unacked
        assert ((dict(s.ev_rack_seq), s.rack_seq) != before) is echoes_resend
        assert (s.ev_rack_seq.get(0) == x.xmit_seq) is echoes_resend


def test_pacing_spreads_a_window_over_the_rtt_instead_of_one_burst() -> None:
    fixed = replace(CFG, cc=CcConfig(enabled=False, initial_cwnd_bytes=64_000))

    def sends(cfg: MrcConfig) -> tuple[list[float], float]:
        times: list[float] = []

        def tap(side: int, ev: Ev, data: bytes) -> bytes:
            if side == 0 and data_psn(data) is not None:
                times.append(pair.now)
            return data

        pair = CorePair(cfg, default=LinkProfile(delay_ms=5.0), tap=tap)
        submit(pair, [os.urandom(400_000)])
        done = pair.run(all_done(1))
        return times, done

    def busiest_2ms(times: list[float]) -> int:
        later = [t for t in times if t > 0.03]  # after the first RTT samples
        return max(sum(1 for u in later if t <= u < t + 0.002) for t in later)

    burst, burst_done = sends(fixed)
    paced, paced_done = sends(replace(fixed, pacing_gain=1.0, pacing_burst_packets=4))
    # 64 packets per ~11 ms RTT: about 12 in 2 ms when paced; the unpaced window goes at once
    assert busiest_2ms(burst) >= 40
    assert busiest_2ms(paced) <= 20
    assert paced_done < 1.5 * burst_done
    with pytest.raises(ValueError, match="pacing"):
        replace(CFG, pacing_gain=-1.0)
