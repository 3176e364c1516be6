"""Target-specific entities: the switch's drop and packet counters, read as ``ExternEntry``.

P4Runtime leaves what an architecture or target adds to ``ExternEntry`` (``extern_type_id`` in
the ``OTHER_EXTERNS`` range, 0x80..0xfe, its entry a ``google.protobuf.Any``). tf-switch serves
two such types, read only, each entry an ``Any`` packing a ``google.protobuf.Struct``:

``0x81`` "tf_switch.drop_counters" (:data:`DROP_COUNTERS_TYPE_ID`)
    ``extern_id``: a :class:`~switch.pipeline.drops.DropReason` code (0 in a read: every
    reason). One entity per (reason, port, queue) with a nonzero count: ``{"reason":
    "tail_drop", "code": 10, "port": 3, "queue": 0, "charged": "egress", "program": false,
    "packets": 213}``; ``queue`` only for per-queue reasons (tail drops). ``reason`` is the
    stable name of :data:`~switch.pipeline.drops.REASONS`, ``charged`` whether ``port`` is
    where the packet came in or was to leave, ``program`` whether the P4 program decided the
    drop (so the program's own counters may tell it apart further).
``0x82`` "tf_switch.packet_counters" (:data:`PACKET_COUNTERS_TYPE_ID`)
    ``extern_id`` 1: the switch, ``{"rx_pkts", "tx_pkts", "from_cpu_pkts", "to_cpu_pkts",
    "copies_pkts", "queued_pkts"}``; ``extern_id`` 2: one entity per port with an interface,
    ``{"port", "in_pkts", "rx_pkts", "tx_pkts"}`` (0 in a read: both). With them a reader
    checks conservation: ``in + from_cpu + copies = tx + to_cpu + drops + queued``, summing
    the ports' ``in_pkts`` and ``tx_pkts`` (or the switch's ``rx_pkts``/``tx_pkts`` when there
    are no port entities, e.g. a switch without interfaces).

Counts are packets since the switch started, exact up to 2**53 (Struct numbers are doubles).
A write is INVALID_ARGUMENT (read only); another extern type or an unknown ``extern_id`` is
NOT_FOUND. BMv2 answers UNIMPLEMENTED to these reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Any

from google.protobuf import struct_pb2
from p4.v1 import p4runtime_pb2

from switch.p4rt.status import INVALID_ARGUMENT, NOT_FOUND, P4RTError
from switch.p4rt.target import Target
from switch.pipeline.drops import REASONS, DropCell, DropReason

#: ``extern_type_id`` of the drop counters (the first id after OTHER_EXTERNS_START, 0x80).
DROP_COUNTERS_TYPE_ID = 0x81
DROP_COUNTERS_TYPE_NAME = "tf_switch.drop_counters"
#: ``extern_type_id`` of the packet counters; their ``extern_id``s.
PACKET_COUNTERS_TYPE_ID = 0x82
PACKET_COUNTERS_TYPE_NAME = "tf_switch.packet_counters"
PACKETS_SWITCH = 1
PACKETS_PORTS = 2


def _entity(type_id: int, extern_id: int, fields: dict[str, Any]) -> p4runtime_pb2.Entity:
    st = struct_pb2.Struct()
    st.update(fields)
    entity = p4runtime_pb2.Entity()
    ee = entity.extern_entry
    ee.extern_type_id = type_id
    ee.extern_id = extern_id
    ee.entry.Pack(st)
    return entity


def encode_drop_cell(cell: DropCell) -> p4runtime_pb2.Entity:
    """One drop counter cell as the ``Entity`` a read returns."""
    info = REASONS[cell.reason]
    fields: dict[str, Any] = {
        "reason": info.name,
        "code": int(cell.reason),
        "port": cell.port,
        "charged": str(info.charged),
        "program": info.program,
        "packets": cell.packets,
    }
    if cell.queue is not None:
        fields["queue"] = cell.queue
    return _entity(DROP_COUNTERS_TYPE_ID, int(cell.reason), fields)


def read_drops(target: Target, extern_id: int) -> Iterator[p4runtime_pb2.Entity]:
    reason: DropReason | None = None
    if extern_id:
        try:
            reason = DropReason(extern_id)
        except ValueError:
            raise P4RTError(
                NOT_FOUND,
                f"{DROP_COUNTERS_TYPE_NAME}: no drop reason {extern_id} (1..{max(DropReason)})",
            ) from None
    for cell in target.drop_cells():
        if reason is None or cell.reason == reason:
            yield encode_drop_cell(cell)


def read_packets(target: Target, extern_id: int) -> Iterator[p4runtime_pb2.Entity]:
    if extern_id not in (0, PACKETS_SWITCH, PACKETS_PORTS):
        raise P4RTError(
            NOT_FOUND,
            f"{PACKET_COUNTERS_TYPE_NAME}: no instance {extern_id} "
            f"({PACKETS_SWITCH}: the switch, {PACKETS_PORTS}: its ports)",
        )
    if target.packet_totals is None:
        return
    totals = target.packet_totals()
    if extern_id in (0, PACKETS_SWITCH):
        fields = {k: v for k, v in asdict(totals).items() if k != "ports"}
        yield _entity(PACKET_COUNTERS_TYPE_ID, PACKETS_SWITCH, fields)
    if extern_id in (0, PACKETS_PORTS):
        for p in totals.ports:
            yield _entity(PACKET_COUNTERS_TYPE_ID, PACKETS_PORTS, asdict(p))


#: The extern types this target serves, by ``extern_type_id``.
READERS: dict[int, Callable[[Target, int], Iterator[p4runtime_pb2.Entity]]] = {
    DROP_COUNTERS_TYPE_ID: read_drops,
    PACKET_COUNTERS_TYPE_ID: read_packets,
}


class TargetExterns:
    """``ExternEntry``: the target's drop and packet counters (read only)."""

    def write(self, target: Target, update_type: int, msg: p4runtime_pb2.ExternEntry) -> None:
        raise P4RTError(
            INVALID_ARGUMENT,
            f"extern type {msg.extern_type_id:#x}: tf-switch's target externs are read only",
        )

    def read(self, target: Target, msg: p4runtime_pb2.ExternEntry) -> Iterator[Any]:
        if msg.extern_type_id == 0:  # wildcard: every type, every instance
            for each in READERS.values():
                yield from each(target, 0)
            return
        reader = READERS.get(msg.extern_type_id)
        if reader is None:
            served = ", ".join(f"{t:#x}" for t in READERS)
            raise P4RTError(
                NOT_FOUND,
                f"unknown extern type {msg.extern_type_id:#x} (tf-switch serves {served})",
            )
        yield from reader(target, msg.extern_id)
