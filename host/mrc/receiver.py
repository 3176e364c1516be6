"""Receive side of a connection: PSN tracking, placement into message buffers, delivery, ACKs.

Received PSNs are tracked as a cumulative PSN ``cum`` (all below received) plus a bitmask of
the PSNs above it (bit i = PSN cum+1+i), which is also the SACK bitmap the ACKs carry. Each
DATA packet says where its payload goes (message id, length, packet index × stride), so it is
copied straight into that message's buffer whatever order packets arrive in. A reliable
message is delivered, in message order, once complete and its BLAKE2b digest matches; an
unreliable one is delivered as a :class:`PartialMessage` (missing packets zero-filled, the
exact set of arrived packet indices) once complete or once the sender's FLOOR says the rest
will never come.

Memory is bounded: a packet more than ``window_packets`` PSNs ahead is dropped, and a new
message is only accepted while the buffered bytes (being reassembled or waiting for ``recv``)
stay within ``max_recv_buffer_bytes``. The ACKs advertise a cumulative *credit* (bytes of
messages the sender may have started) that grows as the application consumes messages.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter, deque
from dataclasses import dataclass
from typing import NamedTuple

from host.mrc.config import MrcConfig
from host.wire import (
    DIGEST_BYTES,
    NO_EV,
    DataPacket,
    DropReason,
    Flag,
    FloorPacket,
    PacketType,
    packet_count,
)

# Flag bits as plain ints: ``IntFlag`` operators run Python code, and these run per packet.
_CE = int(Flag.CE)
_DUPLICATE = int(Flag.DUPLICATE)
_ACK_NOW = int(Flag.ACK_NOW)
_UNRELIABLE = int(Flag.UNRELIABLE)


@dataclass(frozen=True)
class PartialMessage:
    """An unreliable message as it arrived."""

    msg_id: int
    data: bytes  # msg_len bytes, missing packets zero-filled (empty if nothing arrived)
    msg_len: int | None  # None: not one packet arrived, so the length is unknown
    stride: int  # payload bytes per packet
    packets: int  # packets the message was cut into (0 if unknown)
    arrived: tuple[int, ...]  # indices of the packets that arrived, ascending
    digest_ok: bool | None  # end-to-end digest check (None unless every packet arrived)

    @property
    def complete(self) -> bool:
        return self.packets > 0 and len(self.arrived) == self.packets

    @property
    def fraction(self) -> float:
        return len(self.arrived) / self.packets if self.packets else 0.0


class Reply(NamedTuple):
    """An acknowledgement to send: echoes one packet (or none: ``echo_ev`` = NO_EV). A named
    tuple: one is built per received packet, and a tuple is the cheapest record to build."""

    ptype: PacketType
    flags: int
    echo_psn: int
    echo_ts: int
    echo_ev: int


def digest_of(data: bytes | bytearray | memoryview) -> bytes:
    return hashlib.blake2b(data, digest_size=DIGEST_BYTES).digest()


class InMessage:
    __slots__ = (
        "msg_id",
        "reliable",
        "msg_len",
        "stride",
        "npkts",
        "digest",
        "first_psn",
        "buf",
        "got",
        "count",
    )

    def __init__(self, p: DataPacket, reliable: bool) -> None:
        self.msg_id = p.msg_id
        self.reliable = reliable
        self.msg_len = p.msg_len
        self.stride = p.stride
        self.npkts = packet_count(p.msg_len, p.stride)
        self.digest = p.digest
        self.first_psn = p.psn - p.index
        self.buf = bytearray(p.msg_len)
        self.got = bytearray(self.npkts)
        self.count = 0

    def matches(self, p: DataPacket) -> bool:
        return (
            p.msg_len == self.msg_len
            and p.stride == self.stride
            and p.digest == self.digest
            and p.psn - p.index == self.first_psn
        )


class Receiver:
    """Receive state of one connection (owned by the endpoint's I/O thread)."""

    def __init__(self, cfg: MrcConfig) -> None:
        self.cfg = cfg
        self.cum = 0
        self.mask = 0
        self.rel: dict[int, InMessage] = {}
        self.rel_complete: dict[int, InMessage] = {}
        self.rel_next = 0
        self.unrel: dict[int, InMessage] = {}
        self.unrel_done = 0  # FLOOR news processed: unreliable ids below are final
        self.unrel_done_bytes = 0
        self.unrel_seen_len: dict[int, int] = {}
        self.unrel_reported: set[int] = set()
        self.buffered_bytes = 0
        self.released_bytes = 0
        self.ready: deque[bytes] = deque()
        self.partial: deque[PartialMessage] = deque()
        self.failed: str | None = None
        self.replies: list[Reply] = []
        self.ack_pending = 0
        self.ack_due = math.inf
        self.ack_now = False
        self.ack_spread = False  # also send the next ACK on another plane (tail protection)
        self.echo: Reply | None = None
        self.drops: Counter[DropReason] = Counter()
        self.duplicates = 0
        self.trimmed = 0
        self.packets_received = 0
        self.messages_delivered = 0
        self.bytes_delivered = 0

    @property
    def credit(self) -> int:
        return self.released_bytes + self.cfg.max_recv_buffer_bytes

    def _received(self, psn: int) -> bool:
        d = psn - self.cum
        return d < 0 or (d > 0 and (self.mask >> (d - 1)) & 1 == 1)

    def _rebase(self, m: int, base: int) -> None:
        """``m`` has bit 0 = PSN ``base``: advance ``cum`` over the received run from there."""
        ones = (~m & (m + 1)).bit_length() - 1
        self.cum = base + ones
        self.mask = m >> (ones + 1)

    # -- DATA ------------------------------------------------------------------------------

    def on_data(self, p: DataPacket, ce: bool, now: float) -> None:
        self.packets_received += 1
        flags = _CE if ce else 0
        psn = p.psn
        if p.trimmed:
            self.trimmed += 1
            kind = PacketType.ACK if self._received(psn) else PacketType.NACK
            self.replies.append(Reply(kind, flags, psn, p.ts_us, p.ev))
            return
        d = psn - self.cum
        if d < 0 or (d > 0 and (self.mask >> (d - 1)) & 1):  # received before
            self.duplicates += 1
            self.replies.append(Reply(PacketType.ACK, flags | _DUPLICATE, psn, p.ts_us, p.ev))
            return
        if d > self.cfg.window_packets:
            self.drops[DropReason.OUT_OF_WINDOW] += 1
            return
        reason = self._place(p)
        if reason is not None:
            self.drops[reason] += 1
            return
        in_order = d == 0
        if in_order:
            self._rebase((self.mask << 1) | 1, psn)
        else:
            self.mask |= 1 << (d - 1)
        echo = Reply(PacketType.ACK, flags, psn, p.ts_us, p.ev)
        cfg = self.cfg
        if ce and cfg.ack_every_ce:
            self.replies.append(echo)  # an ACK of its own keeps the EV attribution exact
            return
        held = self.echo
        if held is not None and held.flags & _CE and not ce:
            echo = held  # a mark not echoed yet goes on the delayed ACK, with its own EV
        self.ack_pending += 1
        if self.ack_pending >= cfg.ack_every_packets:
            # its own ACK, on this packet's EV: a batch's ACKs spread over the paths
            self.replies.append(echo)
            self.ack_pending = 0
            self.echo = None
            self.ack_due = math.inf
            return
        self.echo = echo
        if p.flags & _ACK_NOW:
            self.ack_now = self.ack_spread = True
        elif not in_order and cfg.ack_on_reorder:
            self.ack_now = True
        elif self.ack_due == math.inf:
            self.ack_due = now + cfg.ack_delay_ms / 1e3

    def _place(self, p: DataPacket) -> DropReason | None:
        reliable = not p.flags & _UNRELIABLE
        table = self.rel if reliable else self.unrel
        m = table.get(p.msg_id)
        if m is None:
            if (
                (p.msg_id < self.rel_next or p.msg_id in self.rel_complete)
                if reliable
                else (p.msg_id < self.unrel_done or p.msg_id in self.unrel_reported)
            ):
                return DropReason.INCONSISTENT
            if (
                p.msg_len > self.cfg.max_message_bytes
                or self.buffered_bytes + p.msg_len > self.cfg.max_recv_buffer_bytes
            ):
                return DropReason.NO_BUFFER
            m = table[p.msg_id] = InMessage(p, reliable)
            self.buffered_bytes += p.msg_len
            if not reliable:
                self.unrel_seen_len[p.msg_id] = p.msg_len
        elif not m.matches(p):
            return DropReason.INCONSISTENT
        if m.got[p.index]:
            return DropReason.INCONSISTENT  # same packet under another PSN
        off = p.index * p.stride
        m.buf[off : off + len(p.payload)] = p.payload
        m.got[p.index] = 1
        m.count += 1
        if m.count == m.npkts:
            self._complete(m)
        return None

    def _complete(self, m: InMessage) -> None:
        self.ack_now = self.ack_spread = True
        if not m.reliable:
            self._finalize_unreliable(m)
            return
        del self.rel[m.msg_id]
        if digest_of(m.buf) != m.digest:
            self.drops[DropReason.DIGEST_MISMATCH] += 1
            self.buffered_bytes -= m.msg_len
            self.failed = f"message {m.msg_id}: end-to-end digest mismatch (not delivered)"
            return
        self.rel_complete[m.msg_id] = m
        while self.rel_next in self.rel_complete:
            done = self.rel_complete.pop(self.rel_next)
            self.ready.append(bytes(done.buf))
            self.rel_next += 1
            self.messages_delivered += 1
            self.bytes_delivered += done.msg_len

    def _finalize_unreliable(self, m: InMessage) -> None:
        self.unrel.pop(m.msg_id, None)
        self.unrel_reported.add(m.msg_id)
        arrived = tuple(i for i, g in enumerate(m.got) if g)
        ok = digest_of(m.buf) == m.digest if m.count == m.npkts else None
        self.partial.append(
            PartialMessage(m.msg_id, bytes(m.buf), m.msg_len, m.stride, m.npkts, arrived, ok)
        )
        self.messages_delivered += 1
        self.bytes_delivered += m.msg_len

    # -- FLOOR -----------------------------------------------------------------------------

    def on_floor(self, f: FloorPacket) -> None:
        """The sender abandoned every unacknowledged PSN below ``floor`` and finished every
        unreliable message below ``unrel_done``: stop waiting for them."""
        if f.floor > self.cum:
            if f.floor - self.cum > 2 * self.cfg.window_packets:
                self.drops[DropReason.OUT_OF_WINDOW] += 1
                return
            self._rebase(self.mask >> (f.floor - self.cum - 1), f.floor)
        for m in [m for m in self.unrel.values() if m.first_psn + m.npkts <= self.cum]:
            self._finalize_unreliable(m)
        if f.unrel_done > self.unrel_done:
            seen = 0
            for mid in [mid for mid in self.unrel_seen_len if mid < f.unrel_done]:
                seen += self.unrel_seen_len.pop(mid)
            never_seen = (f.unrel_done_bytes - self.unrel_done_bytes) - seen
            self.released_bytes += max(0, never_seen)
            for mid in range(self.unrel_done, f.unrel_done):
                if mid in self.unrel:
                    self._finalize_unreliable(self.unrel[mid])
                elif mid not in self.unrel_reported:
                    self.partial.append(PartialMessage(mid, b"", None, 0, 0, (), None))
            self.unrel_reported = {mid for mid in self.unrel_reported if mid >= f.unrel_done}
            self.unrel_done, self.unrel_done_bytes = f.unrel_done, f.unrel_done_bytes
        self.ack_now = True

    # -- the application side ------------------------------------------------------------------

    def release(self, nbytes: int) -> None:
        """The application consumed a delivered message of ``nbytes``: widen the credit."""
        self.buffered_bytes -= nbytes
        self.released_bytes += nbytes
        self.ack_now = True

    def take_ack(self) -> tuple[Reply, bool]:
        """The coalesced ACK to send now (echoing the latest packet, if any is new), and
        whether to send a copy on another plane too (it completes a message: if its path just
        failed, nothing later would repair the loss before a timeout)."""
        echo = self.echo or Reply(PacketType.ACK, 0, 0, 0, NO_EV)
        spread = self.ack_spread
        self.echo = None
        self.ack_pending = 0
        self.ack_due = math.inf
        self.ack_now = self.ack_spread = False
        return echo, spread
