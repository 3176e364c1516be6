"""Why the switch dropped a packet: one registry of reasons, and counters per reason and port.

Every packet the switch loses is counted exactly once, under one :class:`DropReason`, at the
port it is charged to (the ingress port for drops before the traffic manager, the egress port
after it) and, for the traffic manager's tail drops, the queue. The reasons cover the whole
path of a frame, not only the P4 program: the receive ring, the parser, ``mark_to_drop``,
the traffic manager and the send path. :data:`REASONS` describes each member (one row each,
checked by a test), so a read-out and its documentation come from one table.

:class:`DropCounters` is the storage the data path counts into: one row of per-queue counts per
(reason, port), made on the first drop there and reused after, so counting a drop allocates
nothing and forwarding a packet costs nothing. Drops that the port layer already counts (the
kernel's ring overruns, send failures, frames of a bad size) stay in its counters and are
merged into the same cells when they are read (:mod:`switch.device.device`).

A program that tells its drops apart itself (``p4/fabric.p4``'s ``drop_reasons`` counter: port
down, injected loss, hop limit, no route, ...) is read next to these; the switch sees only that
the program dropped (``ingress_drop``, ``egress_drop``) and whether the parser had failed.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

#: Queues per port (the traffic manager's ``priority_queues`` is at most this).
MAX_QUEUES = 8


class DropReason(enum.IntEnum):
    """Where in the switch a packet was lost; the value is its code on the wire."""

    RX_OVERRUN = 1
    RX_MALFORMED = 2
    NO_PIPELINE = 3
    PARSER_ERROR = 4
    INGRESS_DROP = 5
    EGRESS_DROP = 6
    ASSERT_FAILED = 7
    PASS_LIMIT = 8
    MCAST_EMPTY = 9
    TAIL_DROP = 10
    NO_QUEUE = 11
    NO_PORT = 12
    TX_MALFORMED = 13
    TX_FAILED = 14
    INTERNAL_ERROR = 15
    PACKET_IN_MALFORMED = 16


class Charged(enum.StrEnum):
    """Which port a drop is charged to."""

    INGRESS = "ingress"
    EGRESS = "egress"
    EITHER = "ingress or egress"  # where it happened


@dataclass(frozen=True)
class ReasonInfo:
    """How one reason is named, charged and explained."""

    name: str  # stable, lower case: the name on the wire and in every read-out
    charged: Charged
    program: bool  # the P4 program decided it (mark_to_drop, assert): its own counters see it
    help: str
    per_queue: bool = False


REASONS: dict[DropReason, ReasonInfo] = {
    DropReason.RX_OVERRUN: ReasonInfo(
        "rx_overrun",
        Charged.INGRESS,
        False,
        "the kernel dropped it: the port's receive ring was full (PACKET_STATISTICS tp_drops)",
    ),
    DropReason.RX_MALFORMED: ReasonInfo(
        "rx_malformed",
        Charged.INGRESS,
        False,
        "received frame shorter than an Ethernet header or longer than a ring slot",
    ),
    DropReason.NO_PIPELINE: ReasonInfo(
        "no_pipeline", Charged.INGRESS, False, "arrived before a P4 program was loaded"
    ),
    DropReason.PARSER_ERROR: ReasonInfo(
        "parser_error",
        Charged.INGRESS,
        True,
        "the parser failed (standard_metadata.parser_error set) and ingress dropped it",
    ),
    DropReason.INGRESS_DROP: ReasonInfo(
        "ingress_drop", Charged.INGRESS, True, "mark_to_drop in ingress (egress_spec 511)"
    ),
    DropReason.EGRESS_DROP: ReasonInfo(
        "egress_drop", Charged.EGRESS, True, "mark_to_drop in egress"
    ),
    DropReason.ASSERT_FAILED: ReasonInfo(
        "assert_failed", Charged.EITHER, True, "an assert() or assume() of the program failed"
    ),
    DropReason.PASS_LIMIT: ReasonInfo(
        "pass_limit", Charged.EITHER, True, "resubmitted or recirculated too many times"
    ),
    DropReason.MCAST_EMPTY: ReasonInfo(
        "mcast_empty", Charged.INGRESS, True, "sent to a multicast group without replicas"
    ),
    DropReason.TAIL_DROP: ReasonInfo(
        "tail_drop",
        Charged.EGRESS,
        False,
        "the traffic manager's egress queue was full",
        per_queue=True,
    ),
    DropReason.NO_QUEUE: ReasonInfo(
        "no_queue", Charged.EGRESS, False, "standard_metadata.priority names no queue"
    ),
    DropReason.NO_PORT: ReasonInfo(
        "no_port", Charged.EGRESS, False, "egress port with no interface attached"
    ),
    DropReason.TX_MALFORMED: ReasonInfo(
        "tx_malformed",
        Charged.EGRESS,
        False,
        "frame to send shorter than an Ethernet header or longer than the MTU",
    ),
    DropReason.TX_FAILED: ReasonInfo(
        "tx_failed", Charged.EGRESS, False, "the kernel refused to send it (no room, link down)"
    ),
    DropReason.INTERNAL_ERROR: ReasonInfo(
        "internal_error", Charged.INGRESS, False, "the switch failed processing it (a bug)"
    ),
    DropReason.PACKET_IN_MALFORMED: ReasonInfo(
        "packet_in_malformed",
        Charged.EGRESS,
        False,
        "sent to the CPU port too short for its packet_in header",
    ),
}

BY_NAME: dict[str, DropReason] = {info.name: r for r, info in REASONS.items()}


@dataclass(frozen=True, slots=True)
class DropCell:
    """Packets dropped for ``reason`` at ``port`` (and ``queue``, for per-queue reasons)."""

    reason: DropReason
    port: int
    queue: int | None
    packets: int

    @property
    def name(self) -> str:
        return REASONS[self.reason].name


class DropCounters:
    """Drop counts by (reason, port, queue); counting allocates only on a (reason, port)'s first.

    ``count`` is what the data path calls; ``cells`` and ``total`` are for read-outs.
    """

    __slots__ = ("_rows",)

    def __init__(self) -> None:
        # index: reason code (0 unused) -> port -> per-queue counts
        self._rows: list[dict[int, list[int]]] = [{} for _ in range(max(DropReason) + 1)]

    def count(self, reason: DropReason, port: int, queue: int = 0, n: int = 1) -> None:
        """Count ``n`` packets dropped for ``reason`` at ``port`` (queue 0 unless per queue)."""
        ports = self._rows[reason]
        row = ports.get(port)
        if row is None:
            row = ports[port] = [0] * MAX_QUEUES
        row[queue] += n

    def get(self, reason: DropReason, port: int, queue: int | None = None) -> int:
        """Packets dropped for ``reason`` at ``port`` (in ``queue``; None: all queues)."""
        row = self._rows[reason].get(port)
        if row is None:
            return 0
        return sum(row) if queue is None else row[queue]

    def total(self, reason: DropReason | None = None) -> int:
        """Packets dropped for ``reason`` (None: for any reason), at every port."""
        rows = self._rows if reason is None else [self._rows[reason]]
        return sum(sum(row) for ports in rows for row in ports.values())

    def cells(self) -> list[DropCell]:
        """Every nonzero count, by reason, port and queue."""
        out: list[DropCell] = []
        for reason in DropReason:
            per_queue = REASONS[reason].per_queue
            for port, row in sorted(self._rows[reason].items()):
                if per_queue:
                    out.extend(DropCell(reason, port, q, n) for q, n in enumerate(row) if n)
                elif any(row):
                    out.append(DropCell(reason, port, None, sum(row)))
        return out

    def clear(self) -> None:
        for ports in self._rows:
            ports.clear()


def merge_cells(*groups: list[DropCell]) -> list[DropCell]:
    """Cells of several sources added up per (reason, port, queue), in reason/port order."""
    acc: dict[tuple[DropReason, int, int | None], int] = {}
    for cells in groups:
        for c in cells:
            key = (c.reason, c.port, c.queue)
            acc[key] = acc.get(key, 0) + c.packets
    return [
        DropCell(r, p, q, n)
        for (r, p, q), n in sorted(acc.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or 0))
        if n
    ]
