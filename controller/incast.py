"""``incast``: N hosts send a burst at one destination at the same moment, filling a queue.

The traffic is real: one UDP socket per flow, opened inside the sending host's network namespace
(the host's pid from ``state.json``), sending ``bytes`` as datagrams to the destination NIC's
micro-SID path address as fast as it can, all flows released together by a barrier. Flows
spread over the plane's spines (flow ``i`` through spine ``i mod S``, or all through one spine
with ``--spine``), so queues build where the paths converge: the spine's downlink to the
destination leaf and the leaf's port to the destination. Senders are the other hosts in order
after the destination, reused when more flows than hosts are asked for.

Why not packet-outs from the controller: a packet-out stream from one process is paced by gRPC
and the switch's CPU port, enters only the switch it is sent to, and would not load the links a
real incast loads; host senders exercise the whole path. The datagrams carry a zero UDP checksum
(``UDP_NO_CHECK6_TX``): the path address is rewritten on the way, so a checksum computed over it
would not match at the receiver anyway (nothing listens there; the point is the queue).
"""

from __future__ import annotations

import errno
import functools
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

from controller.errors import CommandError
from controller.linux import in_netns_of
from topologies.model import Fabric

UDP_NO_CHECK6_TX = 101  # linux/udp.h
MAX_DATAGRAM_BYTES = 1452  # 1500-byte MTU - IPv6 (40) - UDP (8)
MIN_DATAGRAM_BYTES = 16
MAX_FLOWS = 64
MAX_BYTES_PER_FLOW = 1 << 30
DISCARD_PORT = 9


@dataclass(frozen=True)
class Flow:
    src: str
    plane: int
    spine: int
    address: str  # the micro-SID path address


@dataclass(frozen=True)
class IncastPlan:
    dst: str
    plane: int
    flows: tuple[Flow, ...]
    bytes_per_flow: int
    datagram_bytes: int
    udp_port: int = DISCARD_PORT


@dataclass(frozen=True)
class IncastResult:
    datagrams_sent: int
    bytes_sent: int
    send_errors: int
    duration_s: float
    started_unix_s: float


def plan_incast(
    fabric: Fabric,
    dst: str,
    senders: int,
    nbytes: int,
    *,
    plane: int = 0,
    spine: int | None = None,
    datagram_bytes: int = MAX_DATAGRAM_BYTES,
    udp_port: int = DISCARD_PORT,
) -> IncastPlan:
    """Which host sends on which path (pure).

    Raises:
        CommandError: a bad number, or a fabric with a single host.
    """
    host = fabric.host(dst)
    others = [h.name for h in fabric.hosts[host.index + 1 :] + fabric.hosts[: host.index]]
    if not others:
        raise CommandError("incast needs at least two hosts")
    if not 1 <= senders <= MAX_FLOWS:
        raise CommandError(f"--senders must be 1..{MAX_FLOWS}, got {senders}")
    if not 1 <= nbytes <= MAX_BYTES_PER_FLOW:
        raise CommandError(f"--bytes must be 1..{MAX_BYTES_PER_FLOW}, got {nbytes}")
    if not MIN_DATAGRAM_BYTES <= datagram_bytes <= MAX_DATAGRAM_BYTES:
        raise CommandError(
            f"--datagram must be {MIN_DATAGRAM_BYTES}..{MAX_DATAGRAM_BYTES} "
            f"bytes, got {datagram_bytes}"
        )
    if not 0 <= plane < fabric.spec.planes:
        raise CommandError(f"--plane must be 0..{fabric.spec.planes - 1}, got {plane}")
    if spine is not None and not 0 <= spine < fabric.spec.spines:
        raise CommandError(f"--spine must be 0..{fabric.spec.spines - 1}, got {spine}")
    if not 1 <= udp_port <= 65535:
        raise CommandError(f"--port must be 1..65535, got {udp_port}")
    flows = []
    for i in range(senders):
        src = others[i % len(others)]
        s = spine if spine is not None else i % fabric.spec.spines
        [path] = [p for p in fabric.paths(src, dst, {plane}) if p.spine == s]
        flows.append(Flow(src, plane, s, path.address))
    return IncastPlan(dst, plane, tuple(flows), nbytes, datagram_bytes, udp_port)


def _open_socket(flow: Flow, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_UDP, UDP_NO_CHECK6_TX, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * 1024 * 1024)
        sock.connect((flow.address, port))
    except OSError as e:
        sock.close()
        raise CommandError(
            f"{flow.src}: cannot send to {flow.address}: {e.strerror} (does the "
            f"host have a route for its plane-{flow.plane} paths?)"
        ) from None
    return sock


def run_incast(
    plan: IncastPlan, host_pids: Mapping[str, int], *, timeout_s: float = 60.0
) -> IncastResult:
    """Send the planned flows at once; return what was sent.

    Raises:
        CommandError: a host has no pid, or a socket cannot be opened in its namespace.
    """
    socks: list[socket.socket] = []
    try:
        for flow in plan.flows:
            pid = host_pids.get(flow.src)
            if pid is None:
                raise CommandError(f"no pid for host {flow.src} in the fabric state")
            socks.append(in_netns_of(pid, functools.partial(_open_socket, flow, plan.udp_port)))
        payload = bytes(plan.datagram_bytes)
        barrier = threading.Barrier(len(socks) + 1)
        sent = [0] * len(socks)
        errors = [0] * len(socks)
        deadline = time.monotonic() + timeout_s

        def sender(i: int, sock: socket.socket) -> None:
            barrier.wait()
            remaining = plan.bytes_per_flow
            while remaining > 0 and time.monotonic() < deadline:
                n = min(remaining, plan.datagram_bytes)
                try:
                    sock.send(payload[:n])
                except OSError as e:
                    errors[i] += 1
                    if e.errno in (errno.ENOBUFS, errno.EAGAIN):
                        time.sleep(0.0005)
                        continue
                    return
                sent[i] += 1
                remaining -= n

        threads = [
            threading.Thread(target=sender, args=(i, s), daemon=True) for i, s in enumerate(socks)
        ]
        for t in threads:
            t.start()
        started = time.time()
        t0 = time.monotonic()
        barrier.wait()
        for t in threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()) + 1.0)
        duration = time.monotonic() - t0
        nbytes = sum(min(plan.bytes_per_flow, k * plan.datagram_bytes) for k in sent)
        return IncastResult(sum(sent), nbytes, sum(errors), duration, started)
    finally:
        for s in socks:
            s.close()
