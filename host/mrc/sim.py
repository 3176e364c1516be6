"""Two connection cores joined by emulated paths, in virtual time: deterministic and fast.

The cores are the same :class:`~host.mrc.connection.ConnectionCore` the endpoint drives; here a
discrete-event loop plays the endpoint: it delivers datagrams at their arrival times (after
:class:`~host.linkemu.LinkProfile` impairments per EV: loss, duplication, corruption, delay,
jitter, reordering, failure windows), runs both cores' timers, and advances a virtual clock.
Unit tests use it to check retransmission, SACK/NACK, RTO backoff and EV states exactly, and
what-if runs use it to explore settings without threads.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from host.linkemu import LinkProfile
from host.mrc.config import MrcConfig
from host.mrc.connection import ConnectionCore
from host.mrc.health import PathHealth
from host.paths import Ev
from host.wire import DATA_HEADER_BYTES, PacketType, WireError, decode


def sim_evs(planes: int = 2, spines: int = 2) -> tuple[Ev, ...]:
    """Synthetic EVs: ``planes`` × ``spines`` paths named by their (plane, spine)."""
    return tuple(
        Ev(p * spines + s, p, s, (f"sim:p{p}s{s}", 0), f"sim:p{p}", "")
        for p in range(planes)
        for s in range(spines)
    )


@dataclass
class Window:
    """A failure window of one EV (or every EV of a plane): datagrams are dropped."""

    start_s: float
    end_s: float = math.inf
    ev: int | None = None
    plane: int | None = None

    def covers(self, ev: Ev, t: float) -> bool:
        return (
            self.start_s <= t < self.end_s
            and (self.ev is None or self.ev == ev.ev_id)
            and (self.plane is None or self.plane == ev.plane)
        )


Tap = Callable[[int, Ev, bytes], bytes | None]  # (sender side 0/1, EV, datagram) -> keep/rewrite


class CorePair:
    """Side 0 and side 1 of one connection over shared EVs, in virtual time.

    Args:
        profiles: per EV id impairments (others use ``default``), applied in both directions.
        tap: sees every datagram before the link; returns it (possibly rewritten) or None to drop.
        health: side 0's endpoint-wide path-health view (shared with other pairs' side 0, it
            plays one host with several connections).
        conn_id: the connection's id (several pairs on one ``health`` need different ones).
    """

    def __init__(
        self,
        cfg: MrcConfig | tuple[MrcConfig, MrcConfig],
        evs: Sequence[Ev] | None = None,
        *,
        default: LinkProfile | None = None,
        profiles: dict[int, LinkProfile] | None = None,
        seed: int = 1,
        tap: Tap | None = None,
        health: PathHealth | None = None,
        conn_id: int = 7,
    ) -> None:
        cfgs = cfg if isinstance(cfg, tuple) else (cfg, cfg)
        self.evs = tuple(evs or sim_evs())
        self.now = 0.0
        self.cores = (
            ConnectionCore(
                cfgs[0],
                local_host=0,
                peer_host=1,
                conn_id=conn_id,
                evs=self.evs,
                now=0.0,
                health=health,
            ),
            ConnectionCore(
                cfgs[1], local_host=1, peer_host=0, conn_id=conn_id, evs=self.evs, now=0.0
            ),
        )
        self.default = default or LinkProfile(delay_ms=0.1)
        self.profiles = dict(profiles or {})
        self.failures: list[Window] = []
        self.tap = tap
        self.counters: Counter[str] = Counter()
        self.decode_errors: Counter[str] = Counter()
        self._rng = random.Random(seed)
        self._heap: list[tuple[float, int, int, Ev, bytes]] = []
        self._seq = itertools.count()

    @property
    def a(self) -> ConnectionCore:
        return self.cores[0]

    @property
    def b(self) -> ConnectionCore:
        return self.cores[1]

    def fail(
        self,
        start_s: float,
        end_s: float = math.inf,
        *,
        ev: int | None = None,
        plane: int | None = None,
    ) -> None:
        self.failures.append(Window(start_s, end_s, ev, plane))

    def _transmit(self, side: int) -> Callable[[Ev, bytes], bool]:
        def tx(ev: Ev, data: bytes) -> bool:
            c, rng = self.counters, self._rng
            c["sent"] += 1
            if self.tap is not None:
                tapped = self.tap(side, ev, data)
                if tapped is None:
                    c["tapped"] += 1
                    return True
                data = tapped
            if any(w.covers(ev, self.now) for w in self.failures):
                c["failed"] += 1
                return True
            prof = self.profiles.get(ev.ev_id, self.default)
            if prof.loss and rng.random() < prof.loss:
                c["lost"] += 1
                return True
            copies = 2 if prof.duplicate and rng.random() < prof.duplicate else 1
            for _ in range(copies):
                d = data
                if prof.corrupt and rng.random() < prof.corrupt:
                    buf = bytearray(d)
                    bit = rng.randrange(len(buf) * 8)
                    buf[bit // 8] ^= 1 << (bit % 8)
                    d = bytes(buf)
                    c["corrupted"] += 1
                if prof.trim and len(d) > DATA_HEADER_BYTES and d[3] == PacketType.DATA:
                    d = d[:DATA_HEADER_BYTES]
                    c["trimmed"] += 1
                t = self.now + prof.delay_ms / 1e3 + rng.random() * prof.jitter_ms / 1e3
                if prof.reorder and rng.random() < prof.reorder:
                    t += prof.reorder_delay_ms / 1e3
                heapq.heappush(self._heap, (t, next(self._seq), 1 - side, ev, d))
            return True

        return tx

    def run(
        self,
        until: Callable[[CorePair], bool] | None = None,
        *,
        max_s: float = 60.0,
        max_steps: int = 2_000_000,
    ) -> float:
        """Advance virtual time until ``until(self)`` holds (checked after each step) or
        ``max_s`` virtual seconds have passed; returns the virtual time reached."""
        txs = (self._transmit(0), self._transmit(1))
        for _ in range(max_steps):
            for side, core in enumerate(self.cores):
                core.poll(self.now, txs[side])
            if until is not None and until(self):
                return self.now
            t = min(
                self._heap[0][0] if self._heap else math.inf,
                *(core.next_deadline(self.now) for core in self.cores),
            )
            if t > max_s:
                self.now = max_s
                return self.now
            self.now = max(self.now, t)
            while self._heap and self._heap[0][0] <= self.now:
                _t, _s, dst, ev, data = heapq.heappop(self._heap)
                if any(w.covers(ev, self.now) for w in self.failures):
                    self.counters["failed"] += 1
                    continue
                try:
                    pkt = decode(data)
                except WireError as e:
                    self.decode_errors[e.reason.value] += 1
                    continue
                self.cores[dst].on_packet(pkt, False, self.now)
        raise RuntimeError(f"simulation did not finish in {max_steps} steps (t={self.now:.3f} s)")
