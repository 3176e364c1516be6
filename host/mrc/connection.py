"""One MRC connection as a pure state machine: datagrams and time in, datagrams out.

:class:`ConnectionCore` joins the send side (:mod:`host.mrc.sender`), the receive side
(:mod:`host.mrc.receiver`), the EV table (:mod:`host.mrc.evs`) and the congestion window
(:mod:`host.mrc.cc`). The endpoint's I/O thread calls :meth:`ConnectionCore.on_packet` for every
valid datagram of this connection, then :meth:`ConnectionCore.poll` with a ``transmit``
function, and sleeps until :meth:`ConnectionCore.next_deadline`. Tests drive it the same way
with a fake clock.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from host.mrc.cc import NsccWindow
from host.mrc.config import MrcConfig
from host.mrc.evs import EvPath, EvStats, EvTable
from host.mrc.health import PathHealth
from host.mrc.receiver import Receiver, Reply
from host.mrc.recorder import Event, EventKind, EvSample, Recorder
from host.mrc.sender import LossCause, Sender
from host.paths import Ev
from host.wire import (
    AckPacket,
    DataPacket,
    Flag,
    FloorPacket,
    Packet,
    PacketType,
    ProbePacket,
    encode_floor,
    encode_probe,
    pack_ack,
    pack_data,
)

Transmit = Callable[[Ev, bytes], bool]  # False: the local queue is full, retry shortly
RETRY_AFTER_S = 0.0005

# DATA flags by (reliable, retransmission, last packet of the message)
_FLAGS: dict[tuple[bool, bool, bool], int] = {
    (rel, retx, last): int(
        (Flag.NONE if rel else Flag.UNRELIABLE)
        | (Flag.RETRANSMIT if retx else Flag.NONE)
        | (Flag.ACK_NOW if last else Flag.NONE)
    )
    for rel in (False, True)
    for retx in (False, True)
    for last in (False, True)
}


def us(now: float) -> int:
    """A time as the wire's 32-bit microsecond timestamp."""
    return int(now * 1e6) & 0xFFFFFFFF


@dataclass(frozen=True)
class ConnStats:
    """A snapshot of one connection's counters."""

    conn_id: int
    peer: int
    cwnd_bytes: int
    srtt_us: float
    rto_ms: float
    inflight_bytes: int
    packets_sent: int
    retransmits: int
    losses_rack: int
    losses_rto: int
    losses_nack: int
    losses_ev_down: int
    """Packets resent because their EV went ASSUMED_BAD or DENIED while they were in flight."""
    nacks_received: int
    rto_events: int
    packets_received: int
    duplicates_received: int
    trimmed_received: int
    messages_delivered: int
    bytes_delivered: int
    recv_buffered_bytes: int
    send_queued_bytes: int
    drops: dict[str, int] = field(default_factory=dict)
    cc_decreases: int = 0
    cc_quick_adapts: int = 0
    cc_delay_samples: int = 0
    cc_above_target: int = 0
    """RTT samples whose queuing delay (RTT - base RTT) was at or above the window's target."""
    min_rtt_us: float = 0.0


class ConnectionCore:
    """The protocol state of one connection (not thread-safe: the I/O thread owns it).

    Args:
        evs: paths to the peer; EV ids must match the peer's (same (plane, spine) per id).
        recorder: where EV state changes, RTOs and errors go (None: nowhere).
        health: the endpoint's shared path-health view (None: this connection's verdicts
            stay its own).
    """

    def __init__(
        self,
        cfg: MrcConfig,
        *,
        local_host: int,
        peer_host: int,
        conn_id: int,
        evs: Sequence[Ev],
        now: float,
        recorder: Recorder | None = None,
        health: PathHealth | None = None,
    ) -> None:
        self.cfg = cfg
        self.local_host = local_host
        self.peer_host = peer_host
        self.conn_id = conn_id
        self.recorder = recorder
        self._now = now
        key = b"%d:%d:%d" % (min(local_host, peer_host), max(local_host, peer_host), conn_id)
        self.evs = EvTable(evs, cfg.ev, notify=self._event, hash_key=key)
        self.cc = NsccWindow(cfg.cc)
        self.sender = Sender(cfg, self.evs, self.cc, self._event, now)
        self.receiver = Receiver(cfg)
        self.last_rx = now
        self.busy_since = now
        """When data last became outstanding after none was: a peer's silence counts from the
        later of this and ``last_rx`` (an idle peer had nothing to answer)."""
        self.longest_silence_s = 0.0
        """The longest silence (data outstanding) this peer has come back from."""
        self.last_persist = now
        self.pto_count = 0  # tail-loss probes sent since the peer was last heard
        self.failed: str | None = None
        self.touched = True
        """Input arrived since the last :meth:`poll` (a datagram, a shared verdict; the
        endpoint also sets it for its commands): :meth:`poll` may have work before
        :meth:`next_deadline`. Without it, a poll before the deadline computed after the last
        poll does nothing, so the endpoint polls only touched or due connections."""
        self.drops: Counter[str] = Counter()
        self._tx: Transmit = _no_transmit
        self.health = health
        if health is not None and self.evs.shares:
            me = id(self)
            self.evs.on_verdict = lambda p, t: health.report(me, p.ev.plane, p.ev.spine, t)
            self.evs.on_probe_ok = lambda p, t: health.clear(p.ev.plane, p.ev.spine)
            health.subscribe(me, self.on_shared_verdict, now)

    def on_shared_verdict(self, plane: int, spine: int, now: float) -> None:
        """Another connection of the endpoint found (plane, spine) silent (see
        :mod:`host.mrc.health`): stop sending there and resend what is in flight there."""
        self._now = now
        self.touched = True
        for ev_id in self.evs.on_shared(plane, spine, now):
            self.sender.evacuate(ev_id, now)

    def detach(self) -> None:
        """Stop hearing the endpoint's shared verdicts (the connection is forgotten)."""
        if self.health is not None:
            self.health.unsubscribe(id(self))

    # -- input -------------------------------------------------------------------------------

    def on_packet(self, pkt: Packet, ce: bool, now: float) -> None:
        """One validated datagram of this connection."""
        self._now = now
        self.touched = True
        # a silence is at most the gap since the last packet: the usual packet skips the rest
        if now - self.last_rx > self.longest_silence_s and self.sender.outstanding():
            self.longest_silence_s = max(self.longest_silence_s, now - self._silent_since())
        self.last_rx = now
        self.pto_count = 0
        match pkt:
            case DataPacket():
                self.receiver.on_data(pkt, ce, now)
                if self.receiver.failed and not self.failed:
                    self._fail(self.receiver.failed)
            case AckPacket(ptype=PacketType.PROBE_ACK):
                rtt = ((us(now) - pkt.echo_ts) & 0xFFFFFFFF) / 1e6
                self.evs.on_probe_ack(pkt.echo_ev, pkt.echo_psn, rtt, now)
                self.sender.on_ack(pkt, now, us(now))
            case AckPacket():
                self.sender.on_ack(pkt, now, us(now))
            case ProbePacket():
                self.receiver.replies.append(
                    Reply(PacketType.PROBE_ACK, 0, pkt.probe_seq, pkt.ts_us, pkt.ev)
                )
            case FloorPacket():
                self.receiver.on_floor(pkt)

    # -- output --------------------------------------------------------------------------------

    def poll(self, now: float, transmit: Transmit) -> None:
        """Run due timers and send what is due: replies, probes, FLOOR, then data."""
        self._now = now
        self.touched = False
        if self.failed:
            return
        self._tx = transmit
        r, s = self.receiver, self.sender
        if s.rack_deadline <= now:
            s.detect_losses(now)
        if s.rto_deadline() <= now:
            s.on_rto(now)
        if s.outstanding() and now >= self._silent_since() + self._dead_after_s():
            self._fail(f"peer {self.peer_host} silent for {now - self._silent_since():.1f} s")
            return
        if r.replies:
            replies, r.replies = r.replies, []
            for reply in replies:
                self._reply(reply, now)
        if r.ack_now or r.ack_due <= now:
            reply, spread = r.take_ack()
            path = self._reply(reply, now)
            if spread and path is not None:
                other = self.evs.pick_other_plane(path.ev.plane, now)
                if other is not None:
                    self._reply(reply, now, other)
        for path, seq in self.evs.probes_due(now):
            self._send(
                path,
                encode_probe(
                    ev=path.ev.ev_id,
                    src_host=self.local_host,
                    dst_host=self.peer_host,
                    conn_id=self.conn_id,
                    probe_seq=seq,
                    ts_us=us(now),
                ),
            )
        if s.floor_due(now):
            self._send_floor(now)
        if s.has_data() and not s.flight and now >= self._persist_at():
            self._persist(now)
        if s.flight and now >= self._pto_at():
            self._tail_probe(now)
        self._send_data(now)

    def _pto_at(self) -> float:
        """Tail-loss probe time: nothing heard for ~2 RTTs (doubling per unanswered probe)."""
        srtt = self.sender.srtt or self.cfg.rto_initial_ms / 1e3
        return self.last_rx + max(2 * srtt, 2 * self.cfg.reorder_min_ms / 1e3) * (
            1 << self.pto_count
        )

    def _tail_probe(self, now: float) -> None:
        """Packets are in flight but nothing came back (their ACKs may have taken a path
        that just failed): a probe on the next EV fetches the peer's SACK state."""
        self.pto_count = min(self.pto_count + 1, 16)
        path = self.evs.pick(now)
        if path is not None:
            self._send(
                path,
                encode_probe(
                    ev=path.ev.ev_id,
                    src_host=self.local_host,
                    dst_host=self.peer_host,
                    conn_id=self.conn_id,
                    probe_seq=self.evs.next_probe_seq(),
                    ts_us=us(now),
                ),
            )

    def _persist_at(self) -> float:
        return max(self.last_persist, self.last_rx) + self.cfg.persist_interval_ms / 1e3

    def _send_data(self, now: float) -> None:
        s = self.sender
        if not s.ready(now):
            return
        gain = self.cfg.pacing_gain
        if gain <= 0 or s.srtt <= 0:
            self._send_burst(now, self.cfg.max_burst_packets)
            return
        sent = self._send_burst(now, min(self.cfg.max_burst_packets, self.cfg.pacing_burst_packets))
        if sent:  # the next burst when these bytes have left at gain x cwnd / srtt
            s.retry_at = max(s.retry_at, now + sent * s.srtt / (gain * self.cc.window_bytes))

    def _send_burst(self, now: float, count: int) -> int:
        """Up to ``count`` data packets; returns the bytes sent."""
        s, evs = self.sender, self.evs
        ts = us(now)
        tx = self._tx
        src, dst, conn = self.local_host, self.peer_host, self.conn_id
        flags_of = _FLAGS
        sent = 0
        for _ in range(count):
            p = s.next_to_send()
            if p is None:
                return sent
            retx = p.tx_count > 0
            path = evs.pick(now, p.ev if retx else -1)
            if path is None:
                s.unsend(p, now)
                return sent
            msg = p.msg
            payload = p.payload
            pcrc = p.pcrc
            if pcrc is None:
                pcrc = p.pcrc = zlib.crc32(payload)
            ev = path.ev
            data = pack_data(
                flags_of[(msg.reliable, retx, p.index == msg.npkts - 1)],
                ev.ev_id,
                src,
                dst,
                conn,
                p.psn,
                msg.msg_id,
                msg.msg_len,
                p.index,
                ts,
                msg.stride,
                msg.digest,
                payload,
                pcrc,
            )
            if not tx(ev, data):
                s.unsend(p, now, RETRY_AFTER_S)
                return sent
            s.on_transmitted(p, ev.ev_id, ts, now)
            evs.on_sent(path, p.length, retx)
            sent += p.length
        return sent

    def _reply(self, reply: Reply, now: float, path: EvPath | None = None) -> EvPath | None:
        r = self.receiver
        if path is None and reply.ptype is PacketType.PROBE_ACK:
            path = self.evs.by_id.get(reply.echo_ev)  # a probe tests that very path back
        if path is None:
            path = self.evs.for_reply(reply.echo_ev, now)
        if path is None:
            return None
        ev = path.ev
        self._tx(
            ev,
            pack_ack(
                reply.ptype,
                reply.flags,
                ev.ev_id,
                self.local_host,
                self.peer_host,
                self.conn_id,
                r.cum,
                r.credit,
                reply.echo_psn,
                reply.echo_ts,
                reply.echo_ev,
                r.unrel_done,
                r.mask,
                self.cfg.sack_bits,
            ),
        )
        return path

    def _send_floor(self, now: float) -> None:
        path = self.evs.pick(now)
        if path is None:
            return
        s = self.sender
        floor = s.floor()
        self._send(
            path,
            encode_floor(
                ev=path.ev.ev_id,
                src_host=self.local_host,
                dst_host=self.peer_host,
                conn_id=self.conn_id,
                floor=floor,
                unrel_done=s.unrel_done,
                unrel_done_bytes=s.unrel_done_bytes,
            ),
        )
        s.floor_sent(floor, now)

    def _persist(self, now: float) -> None:
        """Data waits but nothing is in flight (window closed, or no EV usable): a probe on
        the next EV asks the peer for an ACK with its current credit."""
        self.last_persist = now
        path = self.evs.pick(now) or next(iter(self.evs.paths))
        self._send(
            path,
            encode_probe(
                ev=path.ev.ev_id,
                src_host=self.local_host,
                dst_host=self.peer_host,
                conn_id=self.conn_id,
                probe_seq=self.evs.next_probe_seq(),
                ts_us=us(now),
            ),
        )

    def _send(self, path: EvPath, data: bytes) -> None:
        self._tx(path.ev, data)

    # -- timers -------------------------------------------------------------------------------

    def next_deadline(self, now: float) -> float:
        """When :meth:`poll` next has something to do (``now`` or earlier: at once)."""
        if self.failed:
            return math.inf
        r, s = self.receiver, self.sender
        if r.ack_now or r.replies or s.floor_needed:
            return now
        if s.ready(now):
            return now
        t = min(
            r.ack_due,
            s.rack_deadline,
            s.rto_deadline(),
            self.evs.next_deadline(),
            s.floor_deadline(),
        )
        if s.has_data() and not s.send_blocked and s.retry_at > now:
            t = min(t, s.retry_at)
        if s.has_data() and not s.flight:
            t = min(t, self._persist_at())
        if s.flight:
            t = min(t, self._pto_at())
        if s.outstanding():
            t = min(t, self._silent_since() + self._dead_after_s())
        return t

    def _dead_after_s(self) -> float:
        """How long a silence with data outstanding lasts before the peer counts as dead."""
        return max(
            self.cfg.dead_peer_timeout_s, self.cfg.dead_peer_stretch * self.longest_silence_s
        )

    def _silent_since(self) -> float:
        """Since when the peer owes an answer and has not given one."""
        return max(self.last_rx, self.busy_since)

    # -- control and export ------------------------------------------------------------------

    def submit(self, token: int, data: bytes, digest: bytes, reliable: bool, now: float) -> int:
        if not self.sender.outstanding():
            self.busy_since = now
        return self.sender.submit(token, data, digest, reliable, now)

    def release(self, nbytes: int) -> None:
        self.receiver.release(nbytes)

    def deny(self, ev_id: int, now: float) -> None:
        self.evs.deny(ev_id, now)
        self.sender.evacuate(ev_id, now)

    def allow(self, ev_id: int, now: float) -> None:
        self.evs.allow(ev_id, now)

    def _fail(self, why: str) -> None:
        self.failed = why
        self._event(EventKind.ERROR, -1, 0.0, why)

    def _event(self, kind: EventKind, ev: int, value: float, detail: str) -> None:
        rec = self.recorder
        if rec is None or (kind is EventKind.LOSS and not rec.record_losses):
            return
        rec.add(Event(self._now, self.local_host, self.conn_id, kind, ev, value, detail))

    def ev_stats(self, now: float) -> tuple[EvStats, ...]:
        return self.evs.snapshot(now)

    def sample(self, now: float, recorder: Recorder) -> None:
        cwnd = self.cc.window_bytes
        for p in self.evs.paths:
            recorder.add_sample(
                EvSample(
                    now,
                    self.local_host,
                    self.conn_id,
                    p.ev.ev_id,
                    p.ev.plane,
                    p.state.value,
                    p.bytes_acked,
                    p.losses,
                    p.srtt * 1e6,
                    cwnd,
                )
            )

    def stats(self) -> ConnStats:
        s, r = self.sender, self.receiver
        drops = Counter({k.value: v for k, v in r.drops.items()})
        drops.update(self.drops)
        return ConnStats(
            self.conn_id,
            self.peer_host,
            self.cc.window_bytes,
            s.srtt * 1e6,
            s.rto * 1e3,
            s.inflight_bytes,
            s.packets_sent,
            s.retransmits,
            s.losses[LossCause.RACK],
            s.losses[LossCause.RTO],
            s.losses[LossCause.NACK],
            s.losses[LossCause.EV_DOWN],
            s.nacks,
            s.rto_events,
            r.packets_received,
            r.duplicates,
            r.trimmed,
            r.messages_delivered,
            r.bytes_delivered,
            r.buffered_bytes,
            s.queued_bytes,
            dict(drops),
            self.cc.decreases,
            self.cc.quick_adapts,
            self.cc.delay_samples,
            self.cc.above_target,
            self.cc.min_rtt * 1e6,
        )


def _no_transmit(ev: Ev, data: bytes) -> bool:
    return False


__all__ = ["ConnStats", "ConnectionCore", "Transmit", "us"]
