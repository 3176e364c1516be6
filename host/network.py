"""Pluggable datagram I/O: the :class:`Network` interface and its UDP-socket implementation.

An endpoint owns one ``Network``: it sends a datagram on a plane to a destination (the EV's
address) and receives datagrams from whichever plane they arrive on, with the ECN
Congestion-Experienced bit when the network reports it. :class:`UdpNetwork` binds one UDP socket
per plane NIC (on a fabric host: the NIC's micro-SID address, optionally pinned to the NIC's
interface; on loopback: ``::1``). ``host.linkemu`` implements the same interface in process.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Sequence
from fcntl import ioctl
from termios import FIONREAD
from typing import Protocol

from host.errors import TransportError
from host.paths import Address, LocalNic

RECV_BUFFER_BYTES = 4 * 1024 * 1024
SEND_BUFFER_BYTES = 4 * 1024 * 1024
ECT0 = 0x02
CE = 0x03
_MAX_UDP = 65_535

Received = tuple[bytes, int, bool]  # datagram, local plane, ECN CE


class Selectable(Protocol):
    def fileno(self) -> int: ...


class Network(Protocol):
    """What the MRC endpoint needs from the network below it."""

    def selectables(self) -> Sequence[Selectable]:
        """Objects to wait on for readability (one per plane socket, or one wakeup)."""
        ...

    def receive(self, source: Selectable, max_count: int) -> list[Received]:
        """Up to ``max_count`` datagrams that are ready on ``source``, without blocking."""
        ...

    def send(self, plane: int, dest: Address, data: bytes) -> bool:
        """Send one datagram; False when the local queue is full (try again shortly)."""
        ...

    def close(self) -> None: ...


SOL_UDP = 17
UDP_NO_CHECK6_TX = 101  # linux/udp.h: send with a zero checksum
UDP_NO_CHECK6_RX = 102  # accept datagrams with a zero checksum


class UdpNetwork:
    """One non-blocking UDP socket per local plane NIC.

    Args:
        nics: the planes to open; a ``port`` of 0 lets the kernel choose (see :attr:`ports`).
        ecn: send ECT(0) and read the traffic class of received datagrams (CE = congestion).
    Raises:
        TransportError: a socket cannot be bound (address missing, no permission to pin a device).
    """

    def __init__(
        self,
        nics: Sequence[LocalNic],
        *,
        ecn: bool = False,
        recv_buffer_bytes: int = RECV_BUFFER_BYTES,
        send_buffer_bytes: int = SEND_BUFFER_BYTES,
    ) -> None:
        self.ecn = ecn
        self.send_errors = 0
        self._socks: dict[int, socket.socket] = {}
        self._plane_of: dict[int, int] = {}
        try:
            for nic in nics:
                sock = self._open(nic, recv_buffer_bytes, send_buffer_bytes)
                self._socks[nic.plane] = sock
                self._plane_of[sock.fileno()] = nic.plane
        except BaseException:
            self.close()
            raise

    def _open(self, nic: LocalNic, rcvbuf: int, sndbuf: int) -> socket.socket:
        family = (
            socket.AF_INET if "." in nic.address and ":" not in nic.address else socket.AF_INET6
        )
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
            if nic.ifname:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, nic.ifname.encode())
            if family == socket.AF_INET6:
                # The destination address is the micro-SID path and changes at every hop, so
                # the UDP checksum (computed over the first address) cannot verify at the host;
                # integrity comes from the datagram's own CRC-32 and the message digest
                # (RFC 6935/6936 zero UDP checksums for IPv6).
                sock.setsockopt(SOL_UDP, UDP_NO_CHECK6_TX, 1)
                sock.setsockopt(SOL_UDP, UDP_NO_CHECK6_RX, 1)
            if self.ecn and family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, ECT0)
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVTCLASS, 1)
            elif self.ecn:
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, ECT0)
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
            sock.bind((nic.address, nic.port))
            sock.setblocking(False)
        except OSError as e:
            sock.close()
            where = f"{nic.address}:{nic.port}" + (f" on {nic.ifname}" if nic.ifname else "")
            raise TransportError(f"plane {nic.plane}: cannot bind {where}: {e}") from e
        return sock

    @property
    def ports(self) -> list[int]:
        """The bound UDP port of each plane, in plane order."""
        return [self._socks[p].getsockname()[1] for p in sorted(self._socks)]

    def selectables(self) -> Sequence[Selectable]:
        return list(self._socks.values())

    def receive(self, source: Selectable, max_count: int) -> list[Received]:
        plane = self._plane_of[source.fileno()]
        sock = self._socks[plane]
        out: list[Received] = []
        if max_count <= 0:
            return out
        append = out.append
        try:
            if not self.ecn:
                recv = sock.recv
                append((recv(_MAX_UDP), plane, False))
                # At fabric link rates a wakeup finds one datagram: asking the queue whether
                # another waits is cheaper than the read that fails (an OSError raised);
                # in a burst, one question per burst.
                if max_count > 1 and ioctl(sock.fileno(), FIONREAD, _NONE_WAITING) != (
                    _NONE_WAITING
                ):
                    for _ in range(max_count - 1):
                        append((recv(_MAX_UDP), plane, False))
            else:
                recvmsg = sock.recvmsg
                for i in range(max_count):
                    if i == 1 and ioctl(sock.fileno(), FIONREAD, _NONE_WAITING) == _NONE_WAITING:
                        break  # as above
                    data, anc, _flags, _addr = recvmsg(_MAX_UDP, _CMSG_SPACE)
                    if anc:
                        # the usual case: one traffic-class item whose first byte holds the
                        # ECN bits (a 4-byte int, read little-endian like _ce, or 1 byte)
                        level, kind, value = anc[0]
                        if len(anc) == 1 and (level, kind) in _TOS_CMSGS and value:
                            append((data, plane, value[0] & CE == CE))
                            continue
                    append((data, plane, _ce(anc)))
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as e:  # e.g. ICMP errors reported on the socket: not data
            if e.errno not in (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH):
                raise
        return out

    def send(self, plane: int, dest: Address, data: bytes) -> bool:
        try:
            self._socks[plane].sendto(data, dest)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as e:
            if e.errno == errno.ENOBUFS:
                return False
            self.send_errors += 1  # unreachable, down: lost on the wire, as far as MRC knows
        return True

    def close(self) -> None:
        for sock in self._socks.values():
            sock.close()
        self._socks.clear()
        self._plane_of.clear()

    def __enter__(self) -> UdpNetwork:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_CMSG_SPACE = socket.CMSG_SPACE(4)
_NONE_WAITING = bytes(4)
"""FIONREAD's answer (an int) when no datagram waits: the first one's length, else 0. An empty
datagram also reads 0: it stays queued, and the level-triggered wait reports the socket again."""
_TOS_CMSGS = frozenset(
    ((socket.IPPROTO_IPV6, socket.IPV6_TCLASS), (socket.IPPROTO_IP, socket.IP_TOS))
)


def _ce(ancillary: list[tuple[int, int, bytes]]) -> bool:
    for level, kind, value in ancillary:
        if (level, kind) in _TOS_CMSGS and value:
            return (
                value[0] & CE == CE
                if len(value) == 1
                else int.from_bytes(value[:4], "little") & CE == CE
            )
    return False
