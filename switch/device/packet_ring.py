"""PACKET_MMAP (TPACKET_V2) receive and transmit rings of an AF_PACKET socket.

The kernel and the process share the ring memory. Each slot ("frame") of ``frame_size`` bytes
starts with a ``struct tpacket2_hdr``::

    u32 tp_status; u32 tp_len; u32 tp_snaplen; u16 tp_mac; u16 tp_net;
    u32 tp_sec; u32 tp_nsec; u16 tp_vlan_tci; u16 tp_vlan_tpid; u8 pad[4]   (32 bytes)

followed by a ``struct sockaddr_ll`` (``sll_pkttype`` at byte 10 of it).

* RX: the kernel fills slots in order and sets ``TP_STATUS_USER``; the process copies the
  frame out (``tp_mac``/``tp_snaplen``) and hands the slot back by writing
  ``TP_STATUS_KERNEL``. No system call per packet; ``poll`` is only needed when the slot at the
  head is still the kernel's.
* TX: the process writes a frame at ``tp_hdrlen - sizeof(sockaddr_ll)`` into a slot whose
  status is ``TP_STATUS_AVAILABLE``, sets ``tp_len`` and ``TP_STATUS_SEND_REQUEST``; one
  ``send()`` makes the kernel transmit every requested slot. A slot is reusable once the
  kernel has set it back to available (``TP_STATUS_WRONG_FORMAT`` marks a rejected frame).

TPACKET_V2 rather than V3: V3 hands over whole blocks, and a block that is not full is only
released after a retire timeout (milliseconds), which adds latency at low load.

Ordering: the kernel publishes the status after the frame (write barrier); on x86-64 (total
store order) reading the status before the data, and writing the data before the status, from
Python is enough.
"""

from __future__ import annotations

import errno
import math
import mmap
import socket
import struct
from collections.abc import Sequence

SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_RX_RING = 5
PACKET_STATISTICS = 6
PACKET_AUXDATA = 8
PACKET_VERSION = 10
PACKET_TX_RING = 13
PACKET_LOSS = 14
PACKET_QDISC_BYPASS = 20
PACKET_IGNORE_OUTGOING = 23
PACKET_MR_PROMISC = 1
TPACKET_V2 = 1
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOCKADDR_LL_SIZE = 20

TP_STATUS_KERNEL = 0
TP_STATUS_USER = 1
TP_STATUS_COPY = 1 << 1
TP_STATUS_LOSING = 1 << 2
TP_STATUS_CSUMNOTREADY = 1 << 3
TP_STATUS_VLAN_VALID = 1 << 4
TP_STATUS_VLAN_TPID_VALID = 1 << 6
TP_STATUS_AVAILABLE = 0
TP_STATUS_SEND_REQUEST = 1
TP_STATUS_SENDING = 2
TP_STATUS_WRONG_FORMAT = 4

ETH_HLEN = 14
ETH_P_8021Q = 0x8100
TPACKET2_HDR = struct.Struct("IIIHHIIHH4x")  # 32 bytes
_RX_HEAD = struct.Struct("IIIH")  # status, len, snaplen, mac
_VLAN = struct.Struct("HH")  # tci, tpid at byte 24
_SLL_PKTTYPE = TPACKET2_HDR.size + 10
_PAGE = mmap.PAGESIZE


def ring_geometry(
    frame_size: int, frames: int, block_size: int = 1 << 16
) -> tuple[int, int, int, int]:
    """``tpacket_req`` fields (block_size, block_nr, frame_size, frame_nr) for ``frames`` slots.

    Slots never straddle blocks, so with ``block_size % frame_size == 0`` slot ``i`` starts at
    ``i * frame_size`` in the mapping.
    """
    if frame_size % 16 or frame_size < 64:
        raise ValueError("frame_size must be a multiple of 16 and at least 64")
    unit = math.lcm(frame_size, _PAGE)
    block_size = max(unit, block_size // unit * unit)
    per_block = block_size // frame_size
    blocks = max(1, -(-frames // per_block))
    return block_size, blocks, frame_size, blocks * per_block


def insert_vlan(frame: bytes, tci: int, tpid: int) -> bytes:
    """``frame`` with the 802.1Q/802.1ad tag that the kernel took out put back after the MACs."""
    return frame[:12] + struct.pack("!HH", tpid or ETH_P_8021Q, tci) + frame[12:]


class PacketRings:
    """The RX and TX rings of one AF_PACKET socket, mapped as one region (RX first).

    ``rx_frames`` or ``tx_frames`` of 0 leaves that ring out. Raises ``OSError`` when the kernel
    refuses the rings (the caller falls back to plain ``recv``/``send``).
    """

    def __init__(
        self,
        sock: socket.socket,
        *,
        frame_size: int,
        rx_frames: int,
        tx_frames: int,
        check_outgoing: bool,
    ) -> None:
        self.sock = sock
        sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V2)
        # TPACKET2_HDRLEN = TPACKET_ALIGN(sizeof(tpacket2_hdr)) + sizeof(sockaddr_ll) = 52.
        self.tx_data = TPACKET2_HDR.size + SOCKADDR_LL_SIZE - SOCKADDR_LL_SIZE
        self.frame_size = frame_size
        self.rx_frames = 0
        self.tx_frames = 0
        rx_bytes = tx_bytes = 0
        if tx_frames:
            # A frame the kernel cannot parse is marked WRONG_FORMAT instead of stopping the
            # ring (must be set before any ring exists).
            sock.setsockopt(SOL_PACKET, PACKET_LOSS, 1)
        if rx_frames:
            bs, bn, fs, fn = ring_geometry(frame_size, rx_frames)
            sock.setsockopt(SOL_PACKET, PACKET_RX_RING, struct.pack("IIII", bs, bn, fs, fn))
            self.rx_frames, rx_bytes = fn, bs * bn
        if tx_frames:
            bs, bn, fs, fn = ring_geometry(frame_size, tx_frames)
            sock.setsockopt(SOL_PACKET, PACKET_TX_RING, struct.pack("IIII", bs, bn, fs, fn))
            self.tx_frames, tx_bytes = fn, bs * bn
        self.mm = mmap.mmap(
            sock.fileno(), rx_bytes + tx_bytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE
        )
        self.u32 = memoryview(self.mm).cast("I")
        self.rx_idx = 0
        self.tx_base = rx_bytes
        self.tx_idx = 0
        self.tx_pending = 0
        self.tx_max = frame_size - self.tx_data
        self.rx_max = frame_size - 80  # tp_mac is 66 (52-byte header + 16 aligned, minus 14)
        self.check_outgoing = check_outgoing
        # Counters the owner reads and resets.
        self.malformed = 0
        self.csum_partial = 0
        self.tx_errors = 0

    # -- receive ---------------------------------------------------------------------------

    def rx_ready(self) -> bool:
        """Whether the head slot holds a frame (no system call)."""
        return bool(self.u32[(self.rx_idx * self.frame_size) >> 2] & TP_STATUS_USER)

    def read(self, out: list[tuple[int, bytes]], port: int, limit: int) -> int:
        """Append up to ``limit`` ``(port, frame)`` to ``out``; return how many were appended."""
        mm, u32 = self.mm, self.u32
        fs, nfr = self.frame_size, self.rx_frames
        idx = self.rx_idx
        unpack = _RX_HEAD.unpack_from
        check_outgoing = self.check_outgoing
        got = 0
        while got < limit:
            off = idx * fs
            word = off >> 2
            status = u32[word]
            if not status & TP_STATUS_USER:
                break
            _st, length, snap, mac = unpack(mm, off)
            if (
                (status & (TP_STATUS_VLAN_VALID | TP_STATUS_CSUMNOTREADY))
                or snap != length
                or length < ETH_HLEN
                or (check_outgoing and mm[off + _SLL_PKTTYPE] == PACKET_OUTGOING)
            ):
                frame = self._odd_frame(off, status, length, snap, mac)
            else:
                frame = mm[off + mac : off + mac + snap]
            u32[word] = TP_STATUS_KERNEL
            idx += 1
            if idx == nfr:
                idx = 0
            if frame is not None:
                out.append((port, frame))
                got += 1
        self.rx_idx = idx
        return got

    def _odd_frame(self, off: int, status: int, length: int, snap: int, mac: int) -> bytes | None:
        """The slow path: outgoing, truncated, runt, VLAN-stripped or partial-checksum frames."""
        mm = self.mm
        if self.check_outgoing and mm[off + _SLL_PKTTYPE] == PACKET_OUTGOING:
            return None
        if snap != length or length < ETH_HLEN:
            self.malformed += 1
            return None
        frame = mm[off + mac : off + mac + snap]
        if status & TP_STATUS_CSUMNOTREADY:
            self.csum_partial += 1
        if status & TP_STATUS_VLAN_VALID:
            tci, tpid = _VLAN.unpack_from(mm, off + 24)
            if not status & TP_STATUS_VLAN_TPID_VALID:
                tpid = ETH_P_8021Q
            frame = insert_vlan(frame, tci, tpid)
        return frame

    # -- transmit --------------------------------------------------------------------------

    def put_many(self, frames: Sequence[bytes]) -> int:
        """Place ``frames`` in consecutive TX slots (no system call); return how many fit.

        Stops at the first slot the kernel still holds after a :meth:`kick`. Slots the
        kernel marked ``WRONG_FORMAT`` are counted in ``tx_errors`` and reused.
        """
        mm, u32 = self.mm, self.u32
        fs, base, data, nfr = self.frame_size, self.tx_base, self.tx_data, self.tx_frames
        idx = self.tx_idx
        placed = counted = 0
        for frame in frames:
            off = base + idx * fs
            word = off >> 2
            status = u32[word]
            if status != TP_STATUS_AVAILABLE:
                if status != TP_STATUS_WRONG_FORMAT:
                    self.tx_idx = idx
                    self.tx_pending += placed - counted
                    counted = placed
                    dropped = self.kick()  # ring full: push out what is requested, look again
                    if dropped:  # the kernel refused them and the ring was rewound
                        return max(0, placed - dropped)
                    status = u32[word]
                if status == TP_STATUS_WRONG_FORMAT:
                    self.tx_errors += 1
                elif status != TP_STATUS_AVAILABLE:
                    break
            n = len(frame)
            start = off + data
            mm[start : start + n] = frame
            u32[word + 1] = n
            u32[word] = TP_STATUS_SEND_REQUEST
            idx += 1
            if idx == nfr:
                idx = 0
            placed += 1
        self.tx_idx = idx
        self.tx_pending += placed - counted
        return placed

    def put(self, frame: bytes) -> bool:
        """Place one frame (see :meth:`put_many`); False if the ring is full."""
        return self.put_many((frame,)) == 1

    def kick(self) -> int:
        """Ask the kernel to send every requested slot (one system call, never blocking).

        The kernel transmits them all before the call returns, so frames sent afterwards on
        another socket of the same interface leave after them. ``ENOBUFS`` (the device could
        not take a frame now: a veth whose peer's NAPI ring is full) stops the kernel at that
        frame, which it leaves requested: like ``EAGAIN``, the next kick sends from there. If
        the kernel refuses otherwise (link down, device gone), the requested slots are dropped
        so that they do not leave late; returns how many were dropped.
        """
        if not self.tx_pending:
            return 0
        try:
            self.sock.send(b"", socket.MSG_DONTWAIT)
        except BlockingIOError:
            return 0  # still requested: the next kick sends them
        except OSError as e:
            if e.errno == errno.ENOBUFS:
                return 0
            self.tx_pending = 0
            return self._drop_requested()
        self.tx_pending = 0
        return 0

    def _drop_requested(self) -> int:
        """Take back the requested slots and rewind to the first: the kernel's ring head stays
        on it, and it only ever sends from its head."""
        u32, fs, base, n = self.u32, self.frame_size, self.tx_base, self.tx_frames
        idx = self.tx_idx
        dropped = 0
        while dropped < n:
            prev = idx - 1 if idx else n - 1
            word = (base + prev * fs) >> 2
            if u32[word] != TP_STATUS_SEND_REQUEST:
                break
            u32[word] = TP_STATUS_AVAILABLE
            idx = prev
            dropped += 1
        self.tx_idx = idx
        self.tx_errors += dropped
        return dropped

    def close(self) -> None:
        self.u32.release()
        self.mm.close()
