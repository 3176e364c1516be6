"""An in-process emulated multi-plane network for tests: loss, delay, reordering, duplication,
corruption, rate limits with ECN marking or trimming, and path/plane failures at given times.

:class:`EmuNetwork` knows where every destination address leads (for a topology: each
micro-SID path address → destination host, plane, spine; each baseline address → host and
plane, the spine chosen by an ECMP-style hash of the datagram's host and connection ids).
Each host gets an :class:`EmuPort` that implements :class:`host.network.Network`, so the
same endpoint code runs on it as on UDP sockets. A scheduler thread hands datagrams over at
their delivery time (``time.monotonic``).

Link model per datagram, on the (plane, spine) path it takes: fault → drop; ``loss`` → drop;
``duplicate`` → two copies; ``corrupt`` → one random bit flipped; with ``rate_mbps`` a FIFO
queue per (plane, destination host) — the leaf-to-NIC downlink — adds serialisation and
queuing delay, marks CE above ``ecn_threshold_bytes`` and, when full, drops the datagram or
(``trim``) forwards only its DATA header; then ``delay_ms`` + ``jitter_ms``, and with
probability ``reorder`` an extra ``reorder_delay_ms``.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
import socket
import threading
import time
import zlib
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass

from host.network import Received, Selectable
from host.paths import Address, RouteTable
from host.wire import DATA_HEADER_BYTES, PacketType
from topologies.model import Fabric


@dataclass(frozen=True)
class LinkProfile:
    """Impairments of a path (probabilities per datagram, times in milliseconds)."""

    delay_ms: float = 0.05
    jitter_ms: float = 0.0
    loss: float = 0.0
    duplicate: float = 0.0
    corrupt: float = 0.0
    reorder: float = 0.0
    reorder_delay_ms: float = 1.0
    rate_mbps: float = 0.0
    """Capacity of the downlink queue; 0 = unlimited (no queue)."""
    queue_bytes: int = 256 * 1024
    ecn_threshold_bytes: int = 0
    """Mark CE when the queue holds more than this; 0 = never."""
    trim: bool = False
    """A full queue forwards the DATA header only (the receiver NACKs) instead of dropping."""


@dataclass(frozen=True)
class Route:
    host: int
    plane: int
    spine: int  # -1: chosen by hashing (the baseline's ECMP)


@dataclass(frozen=True)
class Fault:
    plane: int
    spine: int | None  # None: the whole plane
    start_s: float  # monotonic
    end_s: float  # monotonic; inf = until restored

    def covers(self, plane: int, spine: int, t: float) -> bool:
        return (
            self.plane == plane
            and (self.spine is None or self.spine == spine)
            and self.start_s <= t < self.end_s
        )


class EmuNetwork:
    """The emulated network shared by the endpoints of one test.

    Args:
        default: the profile of every path without its own.
        spines: how many spines each plane has (for the baseline's hashing).
        seed: of the impairment random draws.
    """

    def __init__(
        self, default: LinkProfile | None = None, *, spines: int = 1, seed: int = 1
    ) -> None:
        self.default = default or LinkProfile()
        self.spines = spines
        self.counters: Counter[str] = Counter()
        self._rng = random.Random(seed)
        self._routes: dict[str, Route] = {}
        self._profiles: dict[tuple[int, int | None], LinkProfile] = {}
        self._faults: list[Fault] = []
        self._ports: dict[int, EmuPort] = {}
        self._queues: dict[tuple[int, int], float] = {}  # (plane, host) -> busy until
        self._heap: list[tuple[float, int, int, bytes, int, bool, int, int]] = []
        self._seq = itertools.count()
        self._cv = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="linkemu", daemon=True)
        self._thread.start()

    # -- building --------------------------------------------------------------------------

    @classmethod
    def for_fabric(
        cls, fabric: Fabric, default: LinkProfile | None = None, *, seed: int = 1
    ) -> EmuNetwork:
        """Routes for every micro-SID path and every baseline NIC address of ``fabric``."""
        emu = cls(default, spines=fabric.spec.spines, seed=seed)
        for a in fabric.hosts:
            for nic in a.nics:
                emu.add_route(nic.baseline_address, Route(a.index, nic.plane, -1))
            for b in fabric.hosts:
                if a is not b:
                    for p in fabric.paths(b.name, a.name):
                        emu.add_route(p.address, Route(a.index, p.plane, p.spine))
        return emu

    def add_route(self, address: str, route: Route) -> None:
        self._routes[address] = route

    def port(self, host: int) -> EmuPort:
        """The network interface of host ``host`` (one per host)."""
        if host in self._ports:
            raise ValueError(f"host {host} already has a port")
        port = self._ports[host] = EmuPort(self, host)
        return port

    @staticmethod
    def routes(fabric: Fabric, host: str, *, baseline: bool = False) -> RouteTable:
        return RouteTable.from_fabric(fabric, host, baseline=baseline)

    def set_profile(
        self, profile: LinkProfile, *, plane: int | None = None, spine: int | None = None
    ) -> None:
        """Impairments of one plane, one (plane, spine) path, or (no plane) the default."""
        with self._cv:
            if plane is None:
                self.default = profile
            else:
                self._profiles[(plane, spine)] = profile

    def fail(
        self,
        plane: int,
        spine: int | None = None,
        *,
        after_s: float = 0.0,
        duration_s: float = math.inf,
    ) -> Fault:
        """Drop everything on a plane (or one spine of it) from ``after_s`` seconds from now,
        for ``duration_s`` (datagrams already in flight there are lost too)."""
        start = time.monotonic() + after_s
        fault = Fault(plane, spine, start, start + duration_s)
        with self._cv:
            self._faults.append(fault)
        return fault

    def restore(self, plane: int, spine: int | None = None) -> None:
        now = time.monotonic()
        with self._cv:
            self._faults = [
                f
                if not (f.plane == plane and f.spine == spine)
                else Fault(f.plane, f.spine, f.start_s, min(f.end_s, now))
                for f in self._faults
            ]

    def inject(self, host: int, data: bytes, plane: int = 0) -> None:
        """Deliver raw bytes to a host at once (malformed-datagram tests)."""
        self._ports[host]._deliver([(data, plane, False)])

    # -- the data path -----------------------------------------------------------------------

    def _profile(self, plane: int, spine: int) -> LinkProfile:
        p = self._profiles
        return p.get((plane, spine)) or p.get((plane, None)) or self.default

    def _failed(self, plane: int, spine: int, t: float) -> bool:
        return any(f.covers(plane, spine, t) for f in self._faults)

    def transmit(self, src: int, plane: int, dest: Address, data: bytes) -> None:
        now = time.monotonic()
        c = self.counters
        c["sent"] += 1
        route = self._routes.get(dest[0])
        if route is None or route.host not in self._ports:
            c["unroutable"] += 1
            return
        if route.plane != plane:
            c["wrong_plane"] += 1
            return
        spine = route.spine
        if spine < 0:  # ECMP: hash of the header's src, dst host and connection id
            spine = zlib.crc32(data[6:14]) % max(1, self.spines)
        rng = self._rng
        with self._cv:
            if self._failed(plane, spine, now):
                c["dropped_fault"] += 1
                return
            prof = self._profile(plane, spine)
            if prof.loss and rng.random() < prof.loss:
                c["dropped_loss"] += 1
                return
            copies = 2 if prof.duplicate and rng.random() < prof.duplicate else 1
            c["duplicated"] += copies - 1
            for _ in range(copies):
                self._enqueue(prof, route.host, plane, spine, data, now)
            self._cv.notify()

    def _enqueue(
        self, prof: LinkProfile, host: int, plane: int, spine: int, data: bytes, now: float
    ) -> None:
        rng, c = self._rng, self.counters
        if prof.corrupt and rng.random() < prof.corrupt and data:
            buf = bytearray(data)
            bit = rng.randrange(len(buf) * 8)
            buf[bit // 8] ^= 1 << (bit % 8)
            data = bytes(buf)
            c["corrupted"] += 1
        t, ce = now, False
        if prof.rate_mbps > 0:
            bps = prof.rate_mbps * 1e6 / 8
            busy = max(now, self._queues.get((plane, host), now))
            backlog = (busy - now) * bps
            if backlog + len(data) > prof.queue_bytes:
                if prof.trim and len(data) > DATA_HEADER_BYTES and data[3] == PacketType.DATA:
                    data = data[:DATA_HEADER_BYTES]
                    c["trimmed"] += 1
                else:
                    c["dropped_queue"] += 1
                    return
            ce = prof.ecn_threshold_bytes > 0 and backlog > prof.ecn_threshold_bytes
            c["ce_marked"] += ce
            busy += len(data) / bps
            self._queues[(plane, host)] = busy
            t = busy
        t += prof.delay_ms / 1e3
        if prof.jitter_ms:
            t += rng.random() * prof.jitter_ms / 1e3
        if prof.reorder and rng.random() < prof.reorder:
            t += prof.reorder_delay_ms / 1e3
            c["reordered"] += 1
        heapq.heappush(self._heap, (t, next(self._seq), host, data, plane, ce, plane, spine))

    def _run(self) -> None:
        while True:
            batch: list[tuple[float, int, int, bytes, int, bool, int, int]] = []
            with self._cv:
                while not self._closed and not self._heap:
                    self._cv.wait()
                if self._closed:
                    return
                now = time.monotonic()
                if self._heap[0][0] > now:
                    self._cv.wait(self._heap[0][0] - now)
                    continue
                while self._heap and self._heap[0][0] <= now:
                    batch.append(heapq.heappop(self._heap))
                faults = list(self._faults)
            by_host: dict[int, list[Received]] = {}
            for _t, _s, host, data, plane, ce, fplane, fspine in batch:
                if any(f.covers(fplane, fspine, now) for f in faults):
                    self.counters["dropped_fault"] += 1
                    continue
                by_host.setdefault(host, []).append((data, plane, ce))
            for host, items in by_host.items():
                port = self._ports.get(host)
                if port is not None:
                    self.counters["delivered"] += len(items)
                    port._deliver(items)

    def close(self) -> None:
        with self._cv:
            if self._closed:
                return
            self._closed = True
            self._cv.notify_all()
        self._thread.join(timeout=5.0)
        for port in list(self._ports.values()):
            port.close()

    def __enter__(self) -> EmuNetwork:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EmuPort:
    """One host's interface to an :class:`EmuNetwork` (implements ``host.network.Network``)."""

    def __init__(self, emu: EmuNetwork, host: int) -> None:
        self._emu = emu
        self.host = host
        self._inbox: deque[Received] = deque()
        self._r, self._w = socket.socketpair()
        self._r.setblocking(False)
        self._w.setblocking(False)
        self._pending = False
        self._closed = False

    def selectables(self) -> Sequence[Selectable]:
        return [self._r]

    def receive(self, source: Selectable, max_count: int) -> list[Received]:
        try:
            while self._r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass
        self._pending = False
        out: list[Received] = []
        inbox = self._inbox
        while inbox and len(out) < max_count:
            out.append(inbox.popleft())
        if inbox:
            self._signal()
        return out

    def send(self, plane: int, dest: Address, data: bytes) -> bool:
        if not self._closed:
            self._emu.transmit(self.host, plane, dest, data)
        return True

    def _deliver(self, items: list[Received]) -> None:
        if self._closed:
            return
        self._inbox.extend(items)
        self._signal()

    def _signal(self) -> None:
        if not self._pending:
            self._pending = True
            try:
                self._w.send(b"\0")
            except (BlockingIOError, OSError):
                pass

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._emu._ports.pop(self.host, None)
        self._r.close()
        self._w.close()
