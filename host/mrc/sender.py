"""Send side of a connection: messages cut into packets, the scoreboard, loss detection.

Each message gets consecutive PSNs (packet sequence numbers). The scoreboard keeps every
packet not yet acknowledged (``unacked``, PSN order) and those of them in flight (``flight``,
transmission order). ACKs carry a cumulative PSN and a SACK bitmap; a retransmission keeps its
PSN. A packet is declared lost by

* **NACK**: the receiver got it trimmed (congestion: the EV is penalised, not marked bad);
* **RACK** (time-ordered): a packet sent later has been acknowledged and this packet's EV
  RTT plus a reorder window has passed (a path-failure signal: the EV goes ASSUMED_BAD);
* **RTO**: nothing acknowledged for the retransmission timeout (doubling per expiry);
* **EV down**: its EV was just marked ASSUMED_BAD (a loss on it) or DENIED (the controller)
  while the packet was in flight. A failed path loses everything on it, so the rest of its
  packets go out again on other EVs at once instead of each waiting for its own RACK deadline.

Lost reliable packets are resent on another EV; lost unreliable packets are *abandoned*,
and a FLOOR datagram tells the receiver not to wait for them. Message completion (every packet
acknowledged, or for unreliable ones acknowledged or abandoned) is reported as a
:class:`SendOutcome`. Nothing here does I/O or reads a clock: ``now`` is passed in.
"""

from __future__ import annotations

import enum
import math
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from host.mrc.cc import NsccWindow
from host.mrc.config import MrcConfig
from host.mrc.evs import EvTable
from host.mrc.recorder import EventKind
from host.mrc.rtt import RttEstimator
from host.wire import NO_EV, AckPacket, Flag, PacketType, packet_count, payload_length

Notify = Callable[[EventKind, int, float, str], None]
MAX_RTT_SAMPLE_S = 30.0
_CE = int(Flag.CE)  # a plain int: IntFlag's operators run Python code, per ACK


class LossCause(enum.Enum):
    NACK = "nack"
    RACK = "rack"
    RTO = "rto"
    EV_DOWN = "ev_down"


class OutMessage:
    __slots__ = (
        "token",
        "msg_id",
        "reliable",
        "data",
        "msg_len",
        "digest",
        "stride",
        "npkts",
        "submitted",
        "next_index",
        "first_psn",
        "acked",
        "abandoned",
        "acked_flags",
        "retransmits",
        "done",
    )

    def __init__(
        self,
        token: int,
        msg_id: int,
        reliable: bool,
        data: bytes,
        digest: bytes,
        stride: int,
        submitted: float,
    ) -> None:
        self.token = token
        self.msg_id = msg_id
        self.reliable = reliable
        self.data = data
        self.msg_len = len(data)
        self.digest = digest
        self.stride = stride if data else 0
        self.npkts = packet_count(len(data), self.stride)
        self.submitted = submitted
        self.next_index = 0
        self.first_psn = -1
        self.acked = 0
        self.abandoned = 0
        self.acked_flags = bytearray(0 if reliable else self.npkts)
        self.retransmits = 0
        self.done = False


class SentPacket:
    __slots__ = (
        "psn",
        "msg",
        "index",
        "length",
        "pcrc",
        "ev",
        "xmit",
        "xmit_seq",
        "ts_us",
        "tx_count",
    )

    def __init__(self, psn: int, msg: OutMessage, index: int, length: int) -> None:
        self.psn = psn
        self.msg = msg
        self.index = index
        self.length = length
        self.pcrc: int | None = None
        self.ev = -1
        self.xmit = -math.inf
        self.xmit_seq = -1  # transmission order (a burst shares one time)
        self.ts_us = 0
        self.tx_count = 0

    @property
    def payload(self) -> memoryview:
        off = self.index * self.msg.stride
        return memoryview(self.msg.data)[off : off + self.length]


@dataclass(frozen=True)
class SendOutcome:
    """How a sent message ended (what ``SendHandle.wait`` returns)."""

    token: int
    msg_id: int
    reliable: bool
    msg_len: int
    packets: int
    acked: tuple[int, ...]  # packet indices the receiver acknowledged (all, when reliable)
    completion_s: float  # from send() to the last acknowledgement
    retransmits: int


class Sender:
    """Send state of one connection (owned by the endpoint's I/O thread)."""

    def __init__(
        self, cfg: MrcConfig, evs: EvTable, cc: NsccWindow, notify: Notify, now: float
    ) -> None:
        self.cfg = cfg
        self.evs = evs
        self.cc = cc
        self._notify = notify
        self.queue: deque[OutMessage] = deque()  # not yet fully cut into packets
        self.unacked: OrderedDict[int, SentPacket] = OrderedDict()
        self.flight: OrderedDict[int, SentPacket] = OrderedDict()
        self.pending: deque[SentPacket] = deque()  # lost (reliable) or refused by the network
        self.next_psn = 0
        self.una = 0  # the receiver's cumulative ack
        self.sacked = 0  # bit i = PSN una+i selectively acknowledged
        self.inflight_bytes = 0
        self.rack_seq = -1  # the latest transmission acknowledged (RACK), in send order
        self.ev_rack_seq: dict[int, int] = {}  # the same per EV
        self.rack_rtt = 0.0  # the RTT of that transmission (RACK's rack.rtt)
        self.xmit_count = 0
        self.rack_deadline = math.inf
        self.rtt = RttEstimator()  # the connection's, for the retransmission timeout
        self.rto_base = cfg.rto_initial_ms / 1e3
        self.backoff = 0
        self.last_progress = now
        self.peer_credit = cfg.max_recv_buffer_bytes
        self.started_bytes = 0
        self.queued_bytes = 0
        self.rel_next_id = 0
        self.unrel_next_id = 0
        self.unrel_open: OrderedDict[int, OutMessage] = OrderedDict()
        self.unrel_done = 0
        self.unrel_done_bytes = 0
        self.peer_unrel_done = 0
        self.floor_needed = False
        self.floor_announced = 0
        self.unrel_done_announced = 0
        self.floor_sent_at = -math.inf
        self.send_blocked = False
        self.retry_at = -math.inf
        self.completed: list[SendOutcome] = []
        self.packets_sent = self.retransmits = self.nacks = self.rto_events = 0
        self.losses = {c: 0 for c in LossCause}

    # -- submitting and sending ------------------------------------------------------------

    def submit(self, token: int, data: bytes, digest: bytes, reliable: bool, now: float) -> int:
        """Queue a message; returns its message id (reliable and unreliable ids count apart)."""
        if reliable:
            msg_id, self.rel_next_id = self.rel_next_id, self.rel_next_id + 1
        else:
            msg_id, self.unrel_next_id = self.unrel_next_id, self.unrel_next_id + 1
        msg = OutMessage(token, msg_id, reliable, data, digest, self.cfg.payload_bytes, now)
        if not reliable:
            self.unrel_open[msg_id] = msg
        self.queue.append(msg)
        self.queued_bytes += len(data)
        self.send_blocked = False
        return msg_id

    def has_data(self) -> bool:
        return bool(self.queue or self.pending)

    def ready(self, now: float) -> bool:
        """Whether :meth:`next_to_send` may return a packet now."""
        return self.has_data() and not self.send_blocked and now >= self.retry_at

    def next_to_send(self) -> SentPacket | None:
        """The next packet to transmit (a retransmission first), or None when the window,
        the peer's credit or the PSN window is closed (``send_blocked`` is then set)."""
        cwnd = self.cc.window_bytes
        while self.pending:
            p = self.pending[0]
            if p.psn not in self.unacked or p.psn in self.flight:
                self.pending.popleft()
                continue
            if self.inflight_bytes and self.inflight_bytes + p.length > cwnd:
                self.send_blocked = True
                return None
            return self.pending.popleft()
        if not self.queue:
            return None
        msg = self.queue[0]
        if self.next_psn - self.una >= self.cfg.window_packets:
            self.send_blocked = True
            return None
        if msg.first_psn < 0 and self.started_bytes + msg.msg_len > self.peer_credit:
            self.send_blocked = True
            return None
        length = payload_length(msg.msg_len, msg.stride, msg.next_index)
        if self.inflight_bytes and self.inflight_bytes + length > cwnd:
            self.send_blocked = True
            return None
        if msg.first_psn < 0:
            msg.first_psn = self.next_psn
            self.started_bytes += msg.msg_len
        p = SentPacket(self.next_psn, msg, msg.next_index, length)
        self.next_psn += 1
        msg.next_index += 1
        if msg.next_index >= msg.npkts:
            self.queue.popleft()
        self.unacked[p.psn] = p
        return p

    def unsend(self, p: SentPacket, now: float, retry_after_s: float = 0.0) -> None:
        """The packet could not go out (no usable EV, local queue full): try it again later."""
        self.pending.appendleft(p)
        self.send_blocked = retry_after_s <= 0
        self.retry_at = now + retry_after_s

    def on_transmitted(self, p: SentPacket, ev_id: int, ts_us: int, now: float) -> None:
        if not self.flight:
            self.last_progress = now  # the retransmission timer starts with the first packet
        if p.tx_count:
            self.retransmits += 1
            p.msg.retransmits += 1
        p.ev, p.xmit, p.ts_us, p.xmit_seq = ev_id, now, ts_us, self.xmit_count
        self.xmit_count += 1
        p.tx_count += 1
        self.flight[p.psn] = p
        self.inflight_bytes += p.length
        self.packets_sent += 1

    # -- acknowledgements --------------------------------------------------------------------

    def on_ack(self, a: AckPacket, now: float, now_us: int) -> None:
        """An ACK, NACK or PROBE_ACK from the peer."""
        self.send_blocked = False
        if a.credit > self.peer_credit:
            self.peer_credit = a.credit
        if a.unrel_done > self.peer_unrel_done:
            self.peer_unrel_done = a.unrel_done
        newly = self._newly_acked(a)
        acked_bytes = 0
        for p in newly:
            if self.flight.pop(p.psn, None) is not None:
                self.inflight_bytes -= p.length
            acked_bytes += p.length
            # RACK advances only on an acknowledgement of this very transmission: for a resent
            # packet, only an ACK that echoes the resend's timestamp. Otherwise it may be the
            # original's (often: an EV just marked bad had delivered it, and its in-flight
            # packets were resent at once); taken as the resend's, it would make the resend's
            # EV look as if it had overtaken its earlier packets, and RACK declare them lost.
            if p.tx_count == 1 or (a.echo_psn == p.psn and a.echo_ts == p.ts_us):
                if p.xmit_seq > self.rack_seq:
                    self.rack_seq = p.xmit_seq
                    self.rack_rtt = now - p.xmit
                if p.xmit_seq > self.ev_rack_seq.get(p.ev, -1):
                    self.ev_rack_seq[p.ev] = p.xmit_seq
            self.evs.on_acked(p.ev, p.length)
            msg = p.msg
            msg.acked += 1
            if not msg.reliable:
                msg.acked_flags[p.index] = 1
            self._maybe_complete(msg, now)
        rtt: float | None = None
        if a.echo_ev != NO_EV and a.ptype is not PacketType.PROBE_ACK:
            sample = ((now_us - a.echo_ts) & 0xFFFFFFFF) / 1e6
            if sample < MAX_RTT_SAMPLE_S:
                rtt = sample
                self.evs.on_rtt(a.echo_ev, rtt)
                self._update_rto(rtt)
        ce = bool(a.flags & _CE)
        if ce:
            self.evs.on_ce(a.echo_ev, now)
        if newly or rtt is not None:
            self.cc.on_ack(now, acked_bytes, rtt, ce, self.inflight_bytes + acked_bytes)
        if newly:
            self.backoff = 0
            self.last_progress = now
        if a.ptype is PacketType.NACK:
            self._on_nack(a, now)
        if newly:
            self.detect_losses(now)

    def _newly_acked(self, a: AckPacket) -> list[SentPacket]:
        newly: list[SentPacket] = []
        unacked = self.unacked
        if a.cum > self.una:
            while unacked:
                psn = next(iter(unacked))
                if psn >= a.cum:
                    break
                newly.append(unacked.pop(psn))
            self.sacked >>= a.cum - self.una
            self.una = a.cum
        if a.bitmap:
            base = a.cum + 1
            bits = (
                a.bitmap << (base - self.una) if base >= self.una else a.bitmap >> (self.una - base)
            )
            new = bits & ~self.sacked
            if new:
                self.sacked |= new
                una = self.una
                while new:
                    low = new & -new
                    new ^= low
                    p = unacked.pop(una + low.bit_length() - 1, None)
                    if p is not None:
                        newly.append(p)
        return newly

    def _on_nack(self, a: AckPacket, now: float) -> None:
        self.nacks += 1
        self.evs.on_nack(a.echo_ev, now)
        p = self.unacked.get(a.echo_psn)
        if p is None or p.psn not in self.flight or p.ts_us != a.echo_ts:
            return  # acknowledged since, or already resent
        self._declare_lost(p, now, LossCause.NACK)
        self.cc.on_nack(now, p.length)

    def _update_rto(self, rtt: float) -> None:
        est = self.rtt
        est.update_rtt(rtt)
        self.rto_base = min(
            max(self.cfg.rto_min_ms / 1e3, est.srtt + 4 * est.rttvar), self.cfg.rto_max_ms / 1e3
        )

    # -- loss detection ----------------------------------------------------------------------

    @property
    def srtt(self) -> float:
        """The connection's smoothed RTT (s); 0 before the first sample."""
        return self.rtt.srtt

    @property
    def rto(self) -> float:
        return min(self.rto_base * (1 << min(self.backoff, 16)), self.cfg.rto_max_ms / 1e3)

    def rto_deadline(self) -> float:
        return self.last_progress + self.rto if self.flight else math.inf

    def detect_losses(self, now: float) -> None:
        """RACK, two-tier. A packet sent before the latest acknowledged one is lost once
        its EV's smoothed RTT plus a window has passed: the reorder window when a later packet
        *on the same EV* was acknowledged (a path is FIFO, so that is evidence of loss), a
        path timeout (RTT + 4 deviations, at least one RTT) when only other EVs delivered
        (different paths have different queues); there the RTT is at least that of the latest
        transmission acknowledged, so a queue building everywhere is not taken for a loss.
        Arms ``rack_deadline`` for the others."""
        self.rack_deadline = math.inf
        if self.rack_seq < 0:
            return
        default = self.srtt or self.cfg.rto_initial_ms / 1e3
        reo_min = self.cfg.reorder_min_ms / 1e3
        ev_rack = self.ev_rack_seq
        lost: list[tuple[SentPacket, bool]] = []  # (packet, its EV silent: a path timeout)
        overtaken: dict[int, int] = {}  # per EV: packets in flight sent before rack_seq
        for p in self.flight.values():
            if p.xmit_seq > self.rack_seq:
                break
            overtaken[p.ev] = overtaken.get(p.ev, 0) + 1
            srtt, var = self.evs.expected_rtt(p.ev, default)
            silent = ev_rack.get(p.ev, -1) <= p.xmit_seq
            if not silent:
                deadline = p.xmit + srtt + max(reo_min, srtt / 4, 2 * var)
            else:
                # the packet that overtook this one took rack_rtt: when queues grow fast (a
                # failed plane's load arriving), that is ahead of this EV's smoothed RTT
                deadline = p.xmit + max(srtt, self.rack_rtt) + max(4 * var, srtt) + reo_min
            if now >= deadline:
                lost.append((p, silent))
            elif deadline < self.rack_deadline:
                self.rack_deadline = deadline
        # a path timeout is shared only when the silent EV owes several packets: one packet
        # that a congested queue dropped is no verdict on the path for other connections
        several = self.cfg.ev.share_min_losses
        for p, silent in lost:
            shared = silent and overtaken.get(p.ev, 0) >= several
            self._declare_lost(p, now, LossCause.RACK, path_timeout=shared)

    def on_rto(self, now: float) -> None:
        """The retransmission timer expired: everything in flight for longer than the timeout
        (at least the oldest packet) is lost; the timeout doubles."""
        self.rto_events += 1
        limit = self.rto
        lost = [p for p in self.flight.values() if now - p.xmit >= limit]
        if not lost and self.flight:
            lost = [next(iter(self.flight.values()))]
        self._notify(EventKind.RTO, lost[0].ev if lost else -1, limit, f"{len(lost)} packets")
        for p in lost:
            self._declare_lost(p, now, LossCause.RTO)
        self.backoff += 1
        self.last_progress = now
        self.evs.on_rto(now)
        self.cc.on_rto(now)
        self.send_blocked = False

    def _declare_lost(
        self, p: SentPacket, now: float, cause: LossCause, *, path_timeout: bool = False
    ) -> None:
        """``path_timeout``: RACK found the packet's EV silent (nothing sent later on it was
        acknowledged, several packets on it overtaken by others): a verdict the endpoint's
        other connections may share."""
        if self.flight.pop(p.psn, None) is None:
            return
        self.inflight_bytes -= p.length
        self.losses[cause] += 1
        evacuate = (
            cause is not LossCause.NACK
            and cause is not LossCause.EV_DOWN
            and self.evs.on_loss(p.ev, now, cause.value, shareable=path_timeout)
        )
        self._notify(EventKind.LOSS, p.ev, float(p.psn), cause.value)
        self.send_blocked = False
        if p.msg.reliable:
            self.pending.append(p)
        else:
            self.unacked.pop(p.psn, None)
            p.msg.abandoned += 1
            self.floor_needed = True
            self._maybe_complete(p.msg, now)
        if evacuate:
            self.evacuate(p.ev, now)

    def evacuate(self, ev_id: int, now: float) -> None:
        """Declare lost every packet in flight on ``ev_id`` (it has just stopped carrying
        data)."""
        for q in [q for q in self.flight.values() if q.ev == ev_id]:
            self._declare_lost(q, now, LossCause.EV_DOWN)

    # -- completion and the floor ---------------------------------------------------------------

    def _maybe_complete(self, msg: OutMessage, now: float) -> None:
        if msg.done or msg.next_index < msg.npkts or msg.acked + msg.abandoned < msg.npkts:
            return
        msg.done = True
        self.queued_bytes -= msg.msg_len
        acked = (
            tuple(range(msg.npkts))
            if msg.reliable
            else tuple(i for i, f in enumerate(msg.acked_flags) if f)
        )
        self.completed.append(
            SendOutcome(
                msg.token,
                msg.msg_id,
                msg.reliable,
                msg.msg_len,
                msg.npkts,
                acked,
                now - msg.submitted,
                msg.retransmits,
            )
        )
        msg.data = b""
        if not msg.reliable:
            while self.unrel_open:
                first = next(iter(self.unrel_open.values()))
                if not first.done:
                    break
                self.unrel_open.popitem(last=False)
                self.unrel_done = first.msg_id + 1
                self.unrel_done_bytes += first.msg_len
            self.floor_needed = True

    def floor(self) -> int:
        """Every PSN below this is acknowledged or abandoned."""
        return next(iter(self.unacked)) if self.unacked else self.next_psn

    def floor_due(self, now: float) -> bool:
        """Whether to send a FLOOR datagram now (news, or the last one not yet confirmed)."""
        if self.floor_needed:
            return True
        unconfirmed = (
            self.una < self.floor_announced or self.peer_unrel_done < self.unrel_done_announced
        )
        return unconfirmed and now >= self.floor_sent_at + self.rto

    def floor_deadline(self) -> float:
        if self.floor_needed:
            return -math.inf
        if self.una < self.floor_announced or self.peer_unrel_done < self.unrel_done_announced:
            return self.floor_sent_at + self.rto
        return math.inf

    def floor_sent(self, floor: int, now: float) -> None:
        self.floor_needed = False
        self.floor_announced = floor
        self.unrel_done_announced = self.unrel_done
        self.floor_sent_at = now

    def outstanding(self) -> bool:
        return bool(self.unacked or self.queue)
