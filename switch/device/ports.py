"""Packet I/O of the switch on Linux interfaces: one AF_PACKET socket per port.

:class:`Port` binds a raw packet socket (``ETH_P_ALL``) to one interface, in promiscuous mode,
non-blocking, and receives only what comes *in* on it: ``PACKET_IGNORE_OUTGOING`` (and, on
kernels without it, a ``PACKET_OUTGOING`` check) keeps the switch from seeing its own
transmissions. Receive goes through a PACKET_MMAP TPACKET_V2 ring
(:mod:`switch.device.packet_ring`): frames are copied out in batches without a system call
each, and ``poll`` is only needed when the ring is empty. If the ring cannot be set up, plain
``recvmsg``/``send`` are used instead (``Port.mode`` says which).

Transmit: a batch of at least ``ring_min_batch`` (3) frames for a port is written into a
PACKET_MMAP TX ring and sent with one ``send()``; single frames and pairs go out with one
``send`` each on a second socket of the port (cheaper below three frames, measured on veths:
see ``switch.bench_net``). ``tx_ring=False`` uses plain ``send`` only.

What the kernel does to frames before a packet socket sees them, and what this module does:

* VLAN tags are taken out of received frames by the kernel (into packet metadata) on every
  device; they are put back, so the switch sees the frame as it was on the wire (as libpcap
  does for BMv2).
* Frames longer than a ring slot (GRO/LRO on the port, TSO/GSO at a sender) and runts shorter
  than an Ethernet header are dropped and counted as ``malformed``; so are frames to send that
  are shorter than 14 bytes or longer than MTU + 14 (MTU + 18 with a VLAN tag). Send errors
  are counted (``tx_errors``), never raised.
* Frames with an unfinished checksum (the sender's ``tx-checksumming`` on) are passed on as
  they are and counted in ``csum_partial``. :func:`disable_offloads` turns these offloads off;
  call it for the switch's interfaces, and for the hosts' veths (:mod:`switch.device.netns` does).
* A link that goes down leaves an error on the socket, which makes ``poll`` report it ready
  until it is read: :meth:`PortSet.wait` reads it (counter ``errors``); a caller that polls
  the descriptors itself calls :meth:`Port.clear_error` on ``POLLERR``.
"""

from __future__ import annotations

import fcntl
import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from typing import TypedDict, Unpack

from switch.device.offloads import disable_offloads
from switch.device.packet_ring import (
    ETH_HLEN,
    ETH_P_ALL,
    PACKET_ADD_MEMBERSHIP,
    PACKET_AUXDATA,
    PACKET_IGNORE_OUTGOING,
    PACKET_MR_PROMISC,
    PACKET_OUTGOING,
    PACKET_QDISC_BYPASS,
    PACKET_STATISTICS,
    SOL_PACKET,
    TP_STATUS_CSUMNOTREADY,
    TP_STATUS_VLAN_TPID_VALID,
    TP_STATUS_VLAN_VALID,
    PacketRings,
    insert_vlan,
)
from switch.pipeline.drops import DropCell, DropReason

__all__ = ["Port", "PortCounters", "PortOptions", "PortPackets", "PortSet", "disable_offloads"]

SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33
SIOCGIFMTU = 0x8921
VLAN_ROOM = 4  # a tagged frame may be MTU + 14 + 4 bytes
DEFAULT_RX_FRAMES = 4096
DEFAULT_TX_FRAMES = 512
DEFAULT_BUFFER = 8 << 20
DEFAULT_RING_MIN_BATCH = 3
_AUX_FLAGS = TP_STATUS_VLAN_VALID | TP_STATUS_CSUMNOTREADY
_VLAN_TYPES = (b"\x81\x00", b"\x88\xa8")
_AUXDATA = struct.Struct("IIIHHHH")  # struct tpacket_auxdata


@dataclass
class PortCounters:
    """Per-port counters since the port was opened."""

    rx: int = 0  # frames handed to the caller
    tx: int = 0  # frames handed to the kernel
    rx_dropped: int = 0  # dropped by the kernel: ring or receive buffer full (PACKET_STATISTICS)
    tx_errors: int = 0  # frames the kernel refused or had no room for
    malformed: int = 0  # runts, truncated (too large) frames, frames to send of a bad size
    tx_malformed: int = 0  # of those, the frames to send
    csum_partial: int = 0  # received with an unfinished checksum (sender offloads on)
    errors: int = 0  # socket errors reported by the kernel (link went down, device removed)

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class PortPackets:
    """What one port took in and sent out, for packet conservation (``in = out + drops``)."""

    port: int
    in_pkts: int  # frames that arrived: handed to the switch, malformed, or ring overruns
    rx_pkts: int  # of those, handed to the switch
    tx_pkts: int  # frames the kernel took to send


def _interface_mtu(sock: socket.socket, ifname: str) -> int:
    ifreq = struct.pack("16si20x", ifname.encode(), 0)
    return int(struct.unpack_from("i", fcntl.ioctl(sock.fileno(), SIOCGIFMTU, ifreq), 16)[0])


def _set_buffer(sock: socket.socket, force_opt: int, opt: int, size: int) -> None:
    try:
        sock.setsockopt(socket.SOL_SOCKET, force_opt, size)  # root: beyond net.core.*mem_max
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, opt, size)


class Port:
    """One switch port: a non-blocking packet socket on interface ``ifname``.

    ``ring``: receive through a PACKET_MMAP ring (plain ``recvmsg`` if the kernel refuses it);
    ``tx_ring``: transmit batches through one too (plain ``send`` if refused); ``ring_error``
    says why a ring was refused. ``rx_frames``/``tx_frames``: ring slots (2 KiB each at MTU
    1500). ``buffer_bytes``: socket receive buffer without an RX ring (half of it: send
    buffer). ``netns`` opens the sockets inside a named network namespace (the rest of the
    process stays where it is). Raises ``OSError`` only if the interface cannot be opened.
    """

    def __init__(
        self,
        number: int,
        ifname: str,
        *,
        ring: bool = True,
        tx_ring: bool = True,
        rx_frames: int = DEFAULT_RX_FRAMES,
        tx_frames: int = DEFAULT_TX_FRAMES,
        buffer_bytes: int = DEFAULT_BUFFER,
        promisc: bool = True,
        qdisc_bypass: bool = False,
        netns: str | None = None,
        ring_min_batch: int = DEFAULT_RING_MIN_BATCH,
    ) -> None:
        self.number = number
        self.ifname = ifname
        self.counters = PortCounters()
        self._kernel_lock = threading.Lock()  # folding PACKET_STATISTICS (read and reset)
        self.closed = False
        self.ring_min_batch = ring_min_batch
        self._rings: PacketRings | None = None
        self.ring_error: str | None = None

        def in_ns(fn: Callable[[], socket.socket]) -> socket.socket:
            if netns is None:
                return fn()
            from switch.device.netns import call_in_netns

            return call_in_netns(netns, fn)

        def open_rx() -> socket.socket:
            return self._open(promisc, qdisc_bypass, buffer_bytes)

        self.sock = in_ns(open_rx)
        self._tx_sock = self.sock
        try:
            self.mtu = _interface_mtu(self.sock, ifname)
            self.max_untagged = self.mtu + ETH_HLEN
            self.max_frame = self.max_untagged + VLAN_ROOM  # only for 802.1Q/802.1ad frames
            self._recv_size = self.max_frame + 1  # one byte more tells a truncated frame
            frame_size = 1 << (self.max_frame + 96 - 1).bit_length()
            if ring or tx_ring:
                try:
                    self._rings = PacketRings(
                        self.sock,
                        frame_size=frame_size,
                        rx_frames=rx_frames if ring else 0,
                        tx_frames=tx_frames if tx_ring else 0,
                        check_outgoing=not self.ignores_outgoing,
                    )
                except (OSError, ValueError) as exc:
                    self.ring_error = f"{type(exc).__name__}: {exc}"
                    self.sock.close()  # a half-configured ring cannot be undone: start afresh
                    self.sock = self._tx_sock = in_ns(open_rx)
            rings = self._rings
            self.rx_mode = "ring" if rings is not None and rings.rx_frames else "plain"
            self.tx_mode = "ring" if rings is not None and rings.tx_frames else "plain"
            if self.rx_mode == "plain":
                self.sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
            self.sock.bind((ifname, ETH_P_ALL))
            # With a TX ring every send() on the socket means "send the ring", so single
            # frames and overflow go through a second socket that receives nothing.
            if self.tx_mode == "ring":
                self._tx_sock = in_ns(lambda: self._open_tx_only(buffer_bytes))
        except BaseException:
            if self._rings is not None:
                self._rings.close()
            self.sock.close()
            raise

    # -- setup -----------------------------------------------------------------------------

    def _open(self, promisc: bool, qdisc_bypass: bool, buffer_bytes: int) -> socket.socket:
        # Protocol 0 receives nothing until bind(): no frames of other interfaces slip in.
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        try:
            self.ifindex = socket.if_nametoindex(self.ifname)
            sock.setblocking(False)
            _set_buffer(sock, SO_RCVBUFFORCE, socket.SO_RCVBUF, buffer_bytes)
            _set_buffer(sock, SO_SNDBUFFORCE, socket.SO_SNDBUF, buffer_bytes // 2)
            try:
                sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
                self.ignores_outgoing = True
            except OSError:
                self.ignores_outgoing = False  # before Linux 4.20: filtered per frame
            if promisc:
                mreq = struct.pack("iHH8s", self.ifindex, PACKET_MR_PROMISC, 0, b"")
                sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)
            if qdisc_bypass:
                sock.setsockopt(SOL_PACKET, PACKET_QDISC_BYPASS, 1)
        except BaseException:
            sock.close()
            raise
        return sock

    def _open_tx_only(self, buffer_bytes: int) -> socket.socket:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)  # protocol 0: receives nothing
        try:
            sock.setblocking(False)
            _set_buffer(sock, SO_SNDBUFFORCE, socket.SO_SNDBUF, buffer_bytes // 2)
            sock.bind((self.ifname, 0))
        except BaseException:
            sock.close()
            raise
        return sock

    @property
    def mode(self) -> str:
        """``"ring"`` when receive uses the PACKET_MMAP ring, else ``"plain"``."""
        return self.rx_mode

    def fileno(self) -> int:
        return self.sock.fileno()

    # -- receive ---------------------------------------------------------------------------

    def recv_batch(self, max_frames: int = 64) -> list[bytes]:
        """Up to ``max_frames`` received frames (never blocks; ``[]`` when none are waiting)."""
        out: list[tuple[int, bytes]] = []
        self.read_into(out, max_frames)
        return [frame for _n, frame in out]

    def read_into(self, out: list[tuple[int, bytes]], limit: int) -> int:
        """Append up to ``limit`` ``(port number, frame)`` to ``out``; return how many."""
        if self.closed:
            return 0
        rings = self._rings
        if rings is not None and rings.rx_frames:
            got = rings.read(out, self.number, limit)
            if rings.malformed or rings.csum_partial:
                self.counters.malformed += rings.malformed
                self.counters.csum_partial += rings.csum_partial
                rings.malformed = rings.csum_partial = 0
        else:
            got = self._plain_read(out, limit)
        self.counters.rx += got
        return got

    def _plain_read(self, out: list[tuple[int, bytes]], limit: int) -> int:
        recvmsg = self.sock.recvmsg
        size = self._recv_size
        number = self.number
        check_outgoing = not self.ignores_outgoing
        got = 0
        while got < limit:
            try:
                data, anc, flags, addr = recvmsg(size, 64)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self.counters.errors += 1  # ENETDOWN and the like; reading it cleared it
                break
            if check_outgoing and addr[2] == PACKET_OUTGOING:
                continue
            if flags & socket.MSG_TRUNC or len(data) < ETH_HLEN:
                self.counters.malformed += 1
                continue
            if anc and anc[0][2][0] & _AUX_FLAGS:
                status, _len, _snap, _mac, _net, tci, tpid = _AUXDATA.unpack_from(anc[0][2])
                if status & TP_STATUS_CSUMNOTREADY:
                    self.counters.csum_partial += 1
                if status & TP_STATUS_VLAN_VALID:
                    data = insert_vlan(data, tci, tpid if status & TP_STATUS_VLAN_TPID_VALID else 0)
            out.append((number, data))
            got += 1
        return got

    def clear_error(self) -> int:
        """Read (and so clear) a pending socket error; count it. Returns the errno or 0.

        A packet socket whose link goes down stays "readable" for ``poll`` until its error is
        read; :meth:`PortSet.wait` calls this so the caller does not spin.
        """
        try:
            err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        except OSError:
            return 0
        if err:
            self.counters.errors += 1
        return err

    def rx_ready(self) -> bool:
        """Whether a frame is waiting (ring mode: without a system call)."""
        rings = self._rings
        if rings is not None and rings.rx_frames:
            return rings.rx_ready()
        return bool(select.select([self.sock], [], [], 0)[0])

    # -- transmit --------------------------------------------------------------------------

    def _check(self, frames: Sequence[bytes]) -> list[bytes]:
        """The frames of a sendable size; the others are counted as malformed."""
        lo, hi = ETH_HLEN, self.max_untagged
        ok = [f for f in frames if lo <= len(f) <= hi]
        if len(ok) != len(frames):
            top = self.max_frame
            ok = [
                f
                for f in frames
                if lo <= len(f) <= hi or (hi < len(f) <= top and f[12:14] in _VLAN_TYPES)
            ]
            self.counters.malformed += len(frames) - len(ok)
            self.counters.tx_malformed += len(frames) - len(ok)
        return ok

    def _send_plain(self, frames: Sequence[bytes]) -> int:
        send = self._tx_sock.send
        sent = 0
        for frame in frames:
            try:
                send(frame)
                sent += 1
            except OSError:
                self.counters.tx_errors += 1  # EAGAIN/ENOBUFS (no room), ENETDOWN...
        return sent

    def send_many(self, frames: Sequence[bytes]) -> int:
        """Transmit ``frames`` in order now; return how many the kernel took.

        With a TX ring, batches of at least ``ring_min_batch`` frames go through it with one
        system call (frames that find it full go through the plain socket after them); smaller
        batches are sent one ``send`` each, which is cheaper for one or two frames.
        """
        if self.closed:
            self.counters.tx_errors += len(frames)
            return 0
        ok = self._check(frames)
        rings = self._rings
        if rings is not None and rings.tx_frames and len(ok) >= self.ring_min_batch:
            placed = rings.put_many(ok)
            refused = rings.kick()  # nonzero only if the kernel refused them (link down)
            if refused:
                sent = max(0, placed - refused)
            else:
                sent = placed + (self._send_plain(ok[placed:]) if placed < len(ok) else 0)
        else:
            sent = self._send_plain(ok)
        self.counters.tx += sent
        return sent

    def send(self, frame: bytes) -> bool:
        """Transmit ``frame`` now; False (and a counter) when it was refused."""
        return self.send_many((frame,)) == 1

    def queue(self, frame: bytes) -> bool:
        """Put ``frame`` in the TX ring, sent at :meth:`flush` (without a ring: sent now)."""
        rings = self._rings
        if rings is None or not rings.tx_frames:
            return self.send(frame)
        if self.closed:
            self.counters.tx_errors += 1
            return False
        ok = self._check((frame,))
        if not ok:
            return False
        if rings.put_many(ok) == 1:
            self.counters.tx += 1
            return True
        self.counters.tx -= rings.kick()
        if self._send_plain(ok):  # ring full: after what it holds
            self.counters.tx += 1
            return True
        return False

    def flush(self) -> None:
        """Transmit what :meth:`queue` left in the TX ring (no-op without one)."""
        rings = self._rings
        if rings is not None and rings.tx_pending:
            self.counters.tx -= rings.kick()  # frames the kernel refused were not sent

    # -- counters and teardown -------------------------------------------------------------

    def _fold_kernel_drops(self) -> None:
        with self._kernel_lock:
            if self.closed:
                return
            try:
                _packets, drops = struct.unpack(
                    "II", self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
                )
                self.counters.rx_dropped += drops  # the kernel resets them on every read
            except OSError:
                pass

    def drop_cells(self) -> list[DropCell]:
        """This port's drops by reason: ring overruns (read from the kernel now), frames of a
        bad size, send failures. Safe from another thread than the data path's: it changes
        nothing the data path counts."""
        self._fold_kernel_drops()
        c = self.counters
        rings = self._rings
        tx_failed = c.tx_errors + (rings.tx_errors if rings is not None else 0)
        n = self.number
        return [
            DropCell(reason, n, None, count)
            for reason, count in (
                (DropReason.RX_OVERRUN, c.rx_dropped),
                (DropReason.RX_MALFORMED, c.malformed - c.tx_malformed),
                (DropReason.TX_MALFORMED, c.tx_malformed),
                (DropReason.TX_FAILED, tx_failed),
            )
            if count
        ]

    def packets(self) -> PortPackets:
        """Frames in and out of this port so far (reads the kernel's overruns now)."""
        self._fold_kernel_drops()
        c = self.counters
        rx_malformed = c.malformed - c.tx_malformed
        return PortPackets(self.number, c.rx + rx_malformed + c.rx_dropped, c.rx, c.tx)

    def read_counters(self) -> PortCounters:
        """The counters, with the kernel's drop count (``PACKET_STATISTICS``) folded in."""
        self._fold_kernel_drops()
        rings = self._rings
        if rings is not None and rings.tx_errors:
            self.counters.tx_errors += rings.tx_errors
            rings.tx_errors = 0
        return self.counters

    def close(self) -> None:
        """Flush, unmap the rings and close the socket (idempotent)."""
        if self.closed:
            return
        try:
            self.flush()
            self.read_counters()
        finally:
            self.closed = True
            if self._rings is not None:
                self._rings.close()
            if self._tx_sock is not self.sock:
                self._tx_sock.close()
            self.sock.close()

    def __enter__(self) -> Port:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Port({self.number}, {self.ifname!r}, rx={self.rx_mode}, tx={self.tx_mode})"


class PortOptions(TypedDict, total=False):
    """The keyword arguments of :class:`Port`, as :class:`PortSet` passes them on."""

    ring: bool
    tx_ring: bool
    rx_frames: int
    tx_frames: int
    buffer_bytes: int
    promisc: bool
    qdisc_bypass: bool
    netns: str | None
    ring_min_batch: int


class PortSet:
    """The switch's ports, by port number; ``port_options`` are passed to every :class:`Port`."""

    def __init__(self, **port_options: Unpack[PortOptions]) -> None:
        self._options = port_options
        self._ports: dict[int, Port] = {}
        self._order: list[Port] = []
        self._rr = 0
        self._poll = select.poll()
        self._by_fd: dict[int, Port] = {}
        self.unknown_port = 0  # frames sent to a port number that is not in the set
        self.unknown_ports: dict[int, int] = {}  # the same, by port number
        self.closed = False

    def add(self, number: int, ifname: str, **options: Unpack[PortOptions]) -> Port:
        """Open port ``number`` on ``ifname`` (``options`` override the set's)."""
        if number in self._ports:
            raise ValueError(f"port {number} already exists")
        merged: PortOptions = {**self._options, **options}
        port = Port(number, ifname, **merged)
        self._ports[number] = port
        self._order.append(port)
        self._poll.register(port.fileno(), select.POLLIN)
        self._by_fd[port.fileno()] = port
        return port

    def __getitem__(self, number: int) -> Port:
        return self._ports[number]

    def __contains__(self, number: object) -> bool:
        return number in self._ports

    def __len__(self) -> int:
        return len(self._ports)

    @property
    def ports(self) -> list[Port]:
        return list(self._order)

    def recv_batch(self, max_frames: int = 64) -> list[tuple[int, bytes]]:
        """Up to ``max_frames`` ``(port number, frame)`` from all ports; never blocks.

        Fair: each port gets an equal share per pass, the first port to be served rotates, and
        the share left over by idle ports goes to busy ones in further passes.
        """
        out: list[tuple[int, bytes]] = []
        order = self._order
        n = len(order)
        if n == 0:
            return out
        start = self._rr
        self._rr = start + 1 if start + 1 < n else 0
        room = max_frames
        while room > 0:
            quota = room // n or 1
            busy = False
            for i in range(n):
                port = order[(start + i) % n]
                take = quota if quota < room else room
                got = port.read_into(out, take)
                room -= got
                if got == take:
                    busy = True
                if room <= 0:
                    break
            if not busy:
                break
        return out

    def wait(self, timeout: float | None = None) -> bool:
        """Block until some port has a frame or ``timeout`` seconds pass; True if one may.

        Socket errors (a link that went down) are read, counted and do not count as ready.
        """
        if any(p.rx_ready() for p in self._order if p.rx_mode == "ring"):
            return True
        ms = None if timeout is None else max(0, int(timeout * 1000))
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                events = self._poll.poll(ms)
            except InterruptedError:
                return False
            if not events:
                return False
            ready = False
            for fd, ev in events:
                if ev & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
                    port = self._by_fd.get(fd)
                    if port is not None and not port.clear_error() and ev & select.POLLNVAL:
                        self._poll.unregister(fd)  # closed elsewhere: stop watching it
                if ev & select.POLLIN:
                    ready = True
            if ready:
                return True
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                ms = int(left * 1000)

    def queue(self, number: int, frame: bytes) -> bool:
        """Queue ``frame`` on port ``number`` (sent at once without a TX ring, else at flush)."""
        port = self._ports.get(number)
        if port is None:
            self._unknown(number, 1)
            return False
        return port.queue(frame)

    def send(self, number: int, frame: bytes) -> bool:
        """Transmit ``frame`` on port ``number`` now; False when refused (counted)."""
        port = self._ports.get(number)
        if port is None:
            self._unknown(number, 1)
            return False
        return port.send(frame)

    def send_batch(self, frames: Iterable[tuple[int, bytes]]) -> int:
        """Transmit ``(port number, frame)`` pairs now, in order per port; return how many left.

        Frames are grouped per port and each group goes out with :meth:`Port.send_many`.
        """
        groups: dict[int, list[bytes]] = {}
        for number, frame in frames:
            group = groups.get(number)
            if group is None:
                groups[number] = [frame]
            else:
                group.append(frame)
        ports = self._ports
        sent = 0
        for number, group in groups.items():
            port = ports.get(number)
            if port is None:
                self._unknown(number, len(group))
            else:
                sent += port.send_many(group)
        return sent

    def _unknown(self, number: int, n: int) -> None:
        self.unknown_port += n
        self.unknown_ports[number] = self.unknown_ports.get(number, 0) + n

    def flush(self) -> None:
        """Transmit whatever is queued in TX rings."""
        for port in self._order:
            port.flush()

    def counters(self) -> dict[int, PortCounters]:
        """Per-port counters (reads the kernel's drop counts)."""
        return {p.number: p.read_counters() for p in self._order}

    def packets(self) -> list[PortPackets]:
        """Frames in and out of every port (:meth:`Port.packets`)."""
        return [p.packets() for p in self._order]

    def drop_cells(self) -> list[DropCell]:
        """Drops of every port by reason (:meth:`Port.drop_cells`), and frames sent to a port
        number not in the set (``no_port``)."""
        out = [cell for p in self._order for cell in p.drop_cells()]
        out.extend(
            DropCell(DropReason.NO_PORT, port, None, n)
            for port, n in sorted(self.unknown_ports.items())
        )
        return out

    def close(self) -> None:
        """Close every port (idempotent)."""
        if self.closed:
            return
        self.closed = True
        for port in self._order:
            try:
                self._poll.unregister(port.fileno())
            except (KeyError, ValueError, OSError):
                pass
            port.close()

    def __enter__(self) -> PortSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
