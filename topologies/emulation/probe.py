"""All-pairs, all-paths reachability over the micro-SID paths, from one process.

One UDP socket per host NIC, opened inside the host's network namespace (a short-lived thread
joins the namespace with ``setns`` and creates the socket, which stays there) and bound to the
NIC's micro-SID address and interface. Every socket is both a prober and a reflector:

* a *request* from host a to host b on (plane p, spine s) goes to the path address
  ``fcbb:bb00:<leaf a>:<spine s>:<leaf b>:<nic b,p>::`` from a's plane-p NIC; the fabric
  delivers it to ``fcbb:bb00:<nic b,p>::``;
* b's plane-p socket answers with a *reply* to the address the request names: the reverse path
  ``fcbb:bb00:<leaf b>:<spine s>:<leaf a>:<nic a,p>::``, through the same plane and spine;
* a path counts as working when its reply comes back, so each check covers the path in both
  directions (a ping would not do: its reply goes to the sender's NIC address, which is not a
  path).

All probes are in flight at once (at most ``window`` outstanding), with a retry timer, in one
``select`` loop: the default fabric's 48 paths take a few milliseconds.

UDP checksums: a micro-SID carrier changes the destination address on the way, and the
receiver checks the checksum against the final one (RFC 8200 section 8.1), which the sender's
kernel cannot know. The probes therefore carry a zero UDP checksum (``UDP_NO_CHECK6_TX``), which
the reflector accepts (``UDP_NO_CHECK6_RX``); the probe header has its own magic and length.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import selectors
import socket
import statistics
import struct
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import cast

from switch.device.netns import NetnsError, call_in_thread, join_netns
from topologies.model import Fabric, Host, TopologyError

PROBE_PORT = 4799
TIMEOUT_S = 1.0  # how long a path may take to answer, retries included
MAGIC = b"TFPB"
REQUEST, REPLY = 1, 2
_HDR = struct.Struct("!4sBxxxIQ16s")  # magic, kind, probe id, send time (ns), reply-to address
SOL_UDP = 17
UDP_NO_CHECK6_TX = 101
UDP_NO_CHECK6_RX = 102


class ProbeError(RuntimeError):
    """A probe socket could not be opened (namespace gone, address missing...)."""


@dataclass(frozen=True)
class ProbeResult:
    """The outcome of one (source, destination, plane, spine) path check."""

    src: str
    dst: str
    plane: int
    spine: int
    address: str  # the request's destination (the forward path)
    ok: bool
    rtt_ms: float | None = None
    error: str = ""  # why a probe could not be sent (no route...)


def _join(netns_file: str) -> None:
    """Move the calling thread into ``netns_file`` (:func:`switch.device.netns.join_netns`).

    Raises:
        OSError: the namespace file is missing (the host is gone).
        ProbeError: ``setns`` failed.
    """
    try:
        join_netns(netns_file)
    except NetnsError as e:
        raise ProbeError(str(e)) from e


def _open_socket(address: str, ifname: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, ifname.encode())
        sock.setsockopt(SOL_UDP, UDP_NO_CHECK6_TX, 1)
        sock.setsockopt(SOL_UDP, UDP_NO_CHECK6_RX, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        sock.bind((address, port))
        sock.setblocking(False)
    except OSError as e:
        sock.close()
        raise ProbeError(
            f"cannot bind a probe socket to [{address}]:{port} on {ifname}: {e.strerror or e}"
        ) from e
    return sock


@dataclass(frozen=True)
class PlannedProbe:
    """One path to check: the request goes to ``address``, the reply to ``reply_to``."""

    pid: int
    key: tuple[str, str, int, int]  # (src, dst, plane, spine)
    address: str
    reply_to: bytes  # the reverse path (same plane and spine), packed


def plan_probes(
    fabric: Fabric,
    pairs: Iterable[tuple[str, str]] | None = None,
    planes: Iterable[int] | None = None,
) -> list[PlannedProbe]:
    """One probe per (pair, plane, spine): every ordered pair of distinct hosts by default."""
    if pairs is None:
        pairs = [(a.name, b.name) for a in fabric.hosts for b in fabric.hosts if a is not b]
    keep = None if planes is None else set(planes)
    out: list[PlannedProbe] = []
    for src, dst in pairs:
        back = {(p.plane, p.spine): p.address for p in fabric.paths(dst, src, keep)}
        for path in fabric.paths(src, dst, keep):
            reply_to = ipaddress.IPv6Address(back[(path.plane, path.spine)]).packed
            out.append(
                PlannedProbe(len(out), (src, dst, path.plane, path.spine), path.address, reply_to)
            )
    return out


def encode(kind: int, pid: int, sent_ns: int, reply_to: bytes) -> bytes:
    """A probe datagram (request or reply)."""
    return _HDR.pack(MAGIC, kind, pid, sent_ns, reply_to)


def decode(data: bytes) -> tuple[int, int, int, bytes] | None:
    """``(kind, pid, sent_ns, reply_to)`` of a probe datagram, or None for anything else."""
    if len(data) != _HDR.size:
        return None
    magic, kind, pid, sent_ns, reply_to = _HDR.unpack(data)
    if magic != MAGIC or kind not in (REQUEST, REPLY):
        return None
    return kind, pid, sent_ns, reply_to


@dataclass
class _Probe:
    pid: int
    key: tuple[str, str, int, int]
    address: str
    sock: socket.socket
    reply_to: bytes  # the reverse path, packed
    sent_ns: int = 0
    tries: int = 0
    done: bool = False
    rtt_ms: float | None = None
    error: str = ""


class Prober:
    """Probe sockets on every host NIC of a running fabric (context manager).

    Args:
        fabric: the topology.
        netns: host name -> network namespace file (:func:`switch.device.netns.netns_of_pid` of the host's shell).
        port: the UDP port every probe socket binds.
    Raises:
        ProbeError: a namespace or an address is missing.
    """

    def __init__(self, fabric: Fabric, netns: Mapping[str, str], *, port: int = PROBE_PORT) -> None:
        self.fabric = fabric
        self.port = port
        self._socks: dict[tuple[str, int], socket.socket] = {}
        self._sel = selectors.DefaultSelector()
        try:
            for host in fabric.hosts:
                if host.name not in netns:
                    raise ProbeError(f"no namespace for host {host.name}")

                def open_all(h: Host = host) -> list[socket.socket]:
                    return [_open_socket(n.address, n.ifname, port) for n in h.nics]

                def enter(netns_file: str = netns[host.name]) -> None:
                    _join(netns_file)

                socks = call_in_thread(enter, open_all, f"probe-{host.name}")
                for nic, sock in zip(host.nics, socks):
                    self._socks[(host.name, nic.plane)] = sock
                    self._sel.register(sock, selectors.EVENT_READ)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for sock in self._socks.values():
            try:
                self._sel.unregister(sock)
            except (KeyError, ValueError):
                pass
            sock.close()
        self._socks.clear()
        self._sel.close()

    def __enter__(self) -> Prober:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- probing -------------------------------------------------------------------------

    def run(
        self,
        pairs: Iterable[tuple[str, str]] | None = None,
        planes: Iterable[int] | None = None,
        *,
        timeout_s: float = TIMEOUT_S,
        retry_s: float = 0.2,
        window: int = 256,
    ) -> list[ProbeResult]:
        """Probe every path of ``pairs`` (all ordered pairs) on ``planes`` (all) at once.

        Args:
            timeout_s: give up on a path after this long.
            retry_s: resend a probe that got no reply for this long.
            window: at most this many probes in flight.
        Returns:
            one result per path, in (src, dst, plane, spine) order.
        """
        probes = [
            _Probe(p.pid, p.key, p.address, self._socks[(p.key[0], p.key[2])], p.reply_to)
            for p in plan_probes(self.fabric, pairs, planes)
        ]
        waiting = list(reversed(probes))  # not sent yet
        inflight: dict[int, _Probe] = {}
        deadline = time.monotonic() + timeout_s
        while waiting or inflight:
            now = time.monotonic()
            if now >= deadline:
                break
            while waiting and len(inflight) < window:
                pr = waiting.pop()
                if self._send(pr):
                    inflight[pr.pid] = pr
            resend_before = time.monotonic_ns() - int(retry_s * 1e9)
            for pr in list(inflight.values()):
                if pr.sent_ns <= resend_before:
                    self._send(pr)
            if not inflight and not waiting:
                break
            wait = max(0.0, min(retry_s / 2, deadline - time.monotonic()))
            for key, _ev in self._sel.select(wait):
                self._drain(cast(socket.socket, key.fileobj), inflight)
        for pr in probes:
            if not pr.done and not pr.error:
                pr.error = "no reply"
        return [
            ProbeResult(*pr.key, pr.address, pr.done, pr.rtt_ms, "" if pr.done else pr.error)
            for pr in probes
        ]

    def _send(self, pr: _Probe) -> bool:
        pr.tries += 1
        pr.sent_ns = time.monotonic_ns()
        data = encode(REQUEST, pr.pid, pr.sent_ns, pr.reply_to)
        try:
            pr.sock.sendto(data, (pr.address, self.port))
        except BlockingIOError:
            return True  # counts as sent; the retry timer resends it
        except OSError as e:
            pr.error = os.strerror(e.errno) if e.errno else str(e)
            return False
        return True

    def _drain(self, sock: socket.socket, inflight: dict[int, _Probe]) -> None:
        while True:
            try:
                data, _addr = sock.recvfrom(2048)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # an ICMP error queued on the socket: not a reply
                if e.errno in (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH):
                    continue
                raise
            msg = decode(data)
            if msg is None:
                continue
            kind, pid, sent_ns, reply_to = msg
            if kind == REQUEST:
                answer = encode(REPLY, pid, sent_ns, reply_to)
                try:
                    sock.sendto(answer, (str(ipaddress.IPv6Address(reply_to)), self.port))
                except OSError:
                    pass  # the prober retries; a missing route shows up as a failed path
            elif kind == REPLY and pid in inflight:
                pr = inflight.pop(pid)
                pr.done = True
                pr.rtt_ms = (time.monotonic_ns() - sent_ns) / 1e6


def check_fabric(
    fabric: Fabric,
    netns: Mapping[str, str],
    pairs: Iterable[tuple[str, str]] | None = None,
    planes: Iterable[int] | None = None,
    *,
    timeout_s: float = TIMEOUT_S,
) -> list[ProbeResult]:
    """Open the probe sockets, probe, close: see :meth:`Prober.run` for the arguments."""
    with Prober(fabric, netns) as prober:
        return prober.run(pairs, planes, timeout_s=timeout_s)


def failed(results: Iterable[ProbeResult]) -> list[ProbeResult]:
    return [r for r in results if not r.ok]


def summarize(results: list[ProbeResult]) -> str:
    """``48/48 paths ok`` plus a line per plane, and the failed paths (at most 20)."""
    if not results:
        return "no paths to check"
    ok = [r for r in results if r.ok]
    lines = [f"{len(ok)}/{len(results)} paths ok"]
    if ok:
        rtts = [r.rtt_ms for r in ok if r.rtt_ms is not None]
        lines[0] += f" (round trip median {statistics.median(rtts):.2f} ms, max {max(rtts):.2f} ms)"
    for plane in sorted({r.plane for r in results}):
        rs = [r for r in results if r.plane == plane]
        lines.append(f"  plane {plane}: {sum(r.ok for r in rs)}/{len(rs)}")
    bad = failed(results)
    for r in bad[:20]:
        lines.append(
            f"  FAILED {r.src} -> {r.dst} plane {r.plane} spine {r.spine} ({r.address}): {r.error}"
        )
    if len(bad) > 20:
        lines.append(f"  ... and {len(bad) - 20} more")
    return "\n".join(lines)


def parse_pairs(text: str, fabric: Fabric) -> list[tuple[str, str]]:
    """``h1:h2,h3:h4`` -> pairs (names checked against the fabric).

    Raises:
        TopologyError: a malformed pair or an unknown host.
    """
    pairs = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        a, sep, b = item.partition(":")
        if not sep:
            raise TopologyError(f"bad pair '{item}': write SRC:DST, e.g. h1:h2")
        pairs.append((fabric.host(a).name, fabric.host(b).name))
    return pairs
