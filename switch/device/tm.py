"""Traffic manager: per-egress-port FIFO queues with depth, drain rate and strict priorities.

Like BMv2's simple_switch: every egress port has ``priority_queues`` FIFO queues (1 unless
configured), each holding at most ``depth`` packets (64 by default) and drained at ``rate``
(packets per second, or bits per second when given in bps; unlimited by default). A packet
arriving at a full queue is tail-dropped and counted (per port and queue, in the device's
:class:`~switch.pipeline.drops.DropCounters` as ``tail_drop``; a priority without a queue as
``no_queue``). ``standard_metadata.priority`` selects the
queue; a higher priority is served first (strict priority). Queue depths seen at enqueue and
dequeue and the time spent in the queue become ``enq_qdepth``, ``deq_qdepth`` and
``deq_timedelta`` (microseconds).

It keeps no clock of its own: the caller (:class:`~switch.device.device.Device`) passes the
time in microseconds.

A rate-limited port sends its next packet at ``next_free_us`` (the previous departure plus the
previous packet's transmission time). ``burst_us`` lets packets leave up to that many
microseconds before their exact departure time: a software data path runs in rounds, and with
fast links (a 1,400-byte packet takes 1.1 us at 10 Gbit/s) an exact schedule would let one
packet per port leave per round. The long-run rate stays the configured one (departures still
advance ``next_free_us`` by each packet's cost); only bursts of up to ``burst_us`` worth of
packets become possible. 0 (the default) keeps the exact schedule.

A busy port whose queued packets leave late (the data path woke up after their time: timer
slack, a core busy with other switches) catches up what it owes, at most ``catchup_us`` back
(``burst_us`` unless given) and not before the packet came, instead of losing the gap; so after
a late wake-up up to ``burst_us + catchup_us`` worth may leave at once. An idle port gets no
credit (a packet that cuts through starts its schedule now).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from switch.pipeline.drops import MAX_QUEUES, DropCell, DropCounters, DropReason

DEFAULT_DEPTH = 64


@dataclass
class PortQueue:
    """The queues of one egress port."""

    queues: list[deque[tuple[int, Any]]]  # per priority: (enq_us, item)
    depth: list[int]
    rate_pps: float = 0.0  # 0: unlimited
    rate_bps: float = 0.0  # 0: unlimited (used instead of rate_pps when set)
    next_free_us: float = 0.0  # when the port may send the next packet
    drops: int = 0
    enqueued: int = 0
    dequeued: int = 0
    max_depth_seen: int = 0
    prio_drops: list[int] = field(default_factory=list)

    def size(self) -> int:
        return sum(len(q) for q in self.queues)


class TrafficManager:
    def __init__(
        self,
        priority_queues: int = 1,
        depth: int = DEFAULT_DEPTH,
        drops: DropCounters | None = None,
        burst_us: float = 0.0,
        catchup_us: float | None = None,
    ) -> None:
        if priority_queues < 1 or priority_queues > MAX_QUEUES:
            raise ValueError(f"priority_queues must be between 1 and {MAX_QUEUES}")
        if burst_us < 0 or (catchup_us is not None and catchup_us < 0):
            raise ValueError("burst_us and catchup_us must not be negative")
        self.burst_us = burst_us
        self.catchup_us = burst_us if catchup_us is None else catchup_us
        self.nq = priority_queues
        self.drops = drops if drops is not None else DropCounters()
        # What ``show_drops`` reads: these counts; the device adds its ports' (ring overruns,
        # send failures) by replacing it with :meth:`~switch.device.device.Device.drop_cells`.
        self.drop_cells: Callable[[], list[DropCell]] = self.drops.cells
        self.default_depth = depth
        self.default_rate_pps = 0.0
        self.default_rate_bps = 0.0
        self.ports: dict[int, PortQueue] = {}
        self.backlog = 0  # packets in all queues
        # Bumped by every change of a queue's depth, rate or schedule (``next_free_us``) and by
        # every new port's queue: a caller that mirrors them elsewhere (the native data path)
        # knows when to look again.
        self.version = 0
        # Packets of a port waiting outside these queues (the native data path's queues in
        # C, :class:`switch.device.device.Device` sets it): part of the depth ``stats`` shows.
        self.held_at: Callable[[int], int] = lambda port: 0

    def port(self, port: int) -> PortQueue:
        pq = self.ports.get(port)
        if pq is None:
            pq = PortQueue(
                [deque() for _ in range(self.nq)],
                [self.default_depth] * self.nq,
                self.default_rate_pps,
                self.default_rate_bps,
                prio_drops=[0] * self.nq,
            )
            self.ports[port] = pq
            self.version += 1
        return pq

    # -- configuration (simple_switch_CLI set_queue_depth / set_queue_rate) --------------

    def set_depth(self, depth: int, port: int | None = None, priority: int | None = None) -> None:
        if depth < 0:
            raise ValueError("queue depth must not be negative")
        self.version += 1
        if port is None:
            self.default_depth = depth
            for pq in self.ports.values():
                pq.depth = [depth] * self.nq
            return
        pq = self.port(port)
        if priority is None:
            pq.depth = [depth] * self.nq
        else:
            pq.depth[self._qindex(priority)] = depth

    def set_rate(self, rate: float, port: int | None = None, unit: str = "pps") -> None:
        """Drain rate of a port (or of every port): packets/s (``pps``) or bits/s (``bps``)."""
        if rate < 0:
            raise ValueError("queue rate must not be negative")
        pps, bps = (rate, 0.0) if unit == "pps" else (0.0, rate)
        if unit not in ("pps", "bps"):
            raise ValueError("rate unit must be 'pps' or 'bps'")
        self.version += 1
        if port is None:
            self.default_rate_pps, self.default_rate_bps = pps, bps
            for pq in self.ports.values():
                pq.rate_pps, pq.rate_bps = pps, bps
            return
        pq = self.port(port)
        pq.rate_pps, pq.rate_bps = pps, bps

    def _qindex(self, priority: int) -> int:
        if not 0 <= priority < self.nq:
            raise ValueError(f"priority {priority} out of range 0..{self.nq - 1}")
        return priority

    # -- data path ---------------------------------------------------------------------

    def enqueue(self, port: int, priority: int, item: Any, now_us: int) -> int | None:
        """Queue ``item``; return the port's depth before it (enq_qdepth), or None if dropped."""
        pq = self.ports.get(port) or self.port(port)
        if priority >= self.nq:
            # BMv2 drops packets whose priority has no queue
            pq.drops += 1
            self.drops.count(DropReason.NO_QUEUE, port)
            return None
        q = pq.queues[priority]
        if len(q) >= pq.depth[priority]:
            pq.drops += 1
            pq.prio_drops[priority] += 1
            self.drops.count(DropReason.TAIL_DROP, port, priority)
            return None
        depth = pq.size()
        q.append((now_us, item))
        pq.enqueued += 1
        self.backlog += 1
        if depth + 1 > pq.max_depth_seen:
            pq.max_depth_seen = depth + 1
        return depth

    def dequeue_ready(self, now_us: int, limit: int = 64) -> list[tuple[int, Any, int, int]]:
        """Packets whose port may send now: (port, item, enq_us, deq_qdepth), up to ``limit``."""
        out: list[tuple[int, Any, int, int]] = []
        if not self.backlog:
            return out
        progress = True
        horizon = now_us + self.burst_us
        while progress and len(out) < limit:
            progress = False
            for port, pq in self.ports.items():
                if pq.next_free_us > horizon:
                    continue
                for q in reversed(pq.queues):  # highest priority first
                    if q:
                        enq_us, item = q.popleft()
                        self.backlog -= 1
                        pq.dequeued += 1
                        out.append((port, item, enq_us, pq.size()))
                        self._charge(pq, item, now_us, enq_us)
                        progress = True
                        break
                if len(out) >= limit:
                    break
        return out

    def may_send_now(self, pq: PortQueue, now_us: int) -> bool:
        """Whether a packet arriving at ``pq`` now may leave at once: its queues are empty and
        the port is unlimited or (with a ``burst_us``) free within ``burst_us``. The caller then sends it and charges
        the port (:meth:`charge`), as if it had been queued and dequeued in the same instant."""
        if pq.rate_pps or pq.rate_bps:
            if not self.burst_us or pq.next_free_us > now_us + self.burst_us:
                return False  # exact schedule: every packet of a rate-limited port queues
        return not any(pq.queues)

    def charge(self, pq: PortQueue, item: Any, now_us: int) -> None:
        """Account for ``item`` leaving ``pq`` now (advances the port's next departure)."""
        self._charge(pq, item, now_us)

    def _charge(self, pq: PortQueue, item: Any, now_us: int, since_us: float | None = None) -> None:
        if pq.rate_bps:
            nbytes = getattr(item, "nbytes", 0) or 64  # approximate: payload + typical headers
            cost = nbytes * 8 * 1e6 / pq.rate_bps
        elif pq.rate_pps:
            cost = 1e6 / pq.rate_pps
        else:
            return
        start = pq.next_free_us
        if start <= now_us - cost:
            if since_us is None:
                start = now_us
            else:
                # A queued packet late by more than a packet's time (the loop woke up after
                # its departure time): the port catches up, at most ``catchup_us`` back from
                # now and not before the packet came.
                start = max(start, now_us - self.catchup_us, since_us)
        pq.next_free_us = start + cost
        self.version += 1

    def next_departure_us(self) -> float | None:
        """Earliest time a queued packet may leave (None when all queues are empty)."""
        if not self.backlog:
            return None
        best: float | None = None
        for pq in self.ports.values():
            if any(pq.queues):
                t = pq.next_free_us
                if best is None or t < best:
                    best = t
        return best

    def depth_of(self, port: int) -> int:
        """Packets waiting for ``port``: in its queues here and (native path) in C."""
        pq = self.ports.get(port)
        return (pq.size() if pq is not None else 0) + self.held_at(port)

    def stats(self) -> dict[int, dict[str, int]]:
        return {
            p: {
                "depth": self.depth_of(p),
                "drops": pq.drops,
                "enqueued": pq.enqueued,
                "dequeued": pq.dequeued,
                "max_depth": pq.max_depth_seen,
            }
            for p, pq in sorted(self.ports.items())
        }
