"""Target-specific entities: the switch's drop counters, read as P4Runtime ``ExternEntry``.

P4Runtime leaves what an architecture or target adds to ``ExternEntry`` (``extern_type_id`` in
the ``OTHER_EXTERNS`` range, 0x80..0xfe, its entry a ``google.protobuf.Any``). tf-switch serves
one such type, read only:

==================  ======================================================================
``extern_type_id``  ``0x81`` (:data:`DROP_COUNTERS_TYPE_ID`), "tf_switch.drop_counters"
``extern_id``       a :class:`~switch.pipeline.drops.DropReason` code; 0 in a read: every
                    reason
``entry``           ``Any`` packing a ``google.protobuf.Struct``, one entity per (reason, port,
                    queue) with a nonzero count: ``{"reason": "tail_drop", "code": 10,
                    "port": 3, "queue": 0, "charged": "egress", "program": false,
                    "packets": 213}``; ``queue`` only for per-queue reasons (tail drops)
==================  ======================================================================

``reason`` is the stable name of :data:`~switch.pipeline.drops.REASONS`, ``charged`` says
whether ``port`` is where the packet came in or was to leave, ``program`` whether the P4
program decided the drop (so the program's own counters may tell it apart further). Counts are
packets since the switch started, exact up to 2**53 (Struct numbers are doubles). A write is
INVALID_ARGUMENT (read only); another extern type or an unknown reason code is NOT_FOUND.
BMv2 answers UNIMPLEMENTED to these reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from google.protobuf import struct_pb2
from p4.v1 import p4runtime_pb2

from switch.p4rt.status import INVALID_ARGUMENT, NOT_FOUND, P4RTError
from switch.p4rt.target import Target
from switch.pipeline.drops import REASONS, DropCell, DropReason

#: ``extern_type_id`` of the drop counters (the first id after OTHER_EXTERNS_START, 0x80).
DROP_COUNTERS_TYPE_ID = 0x81
DROP_COUNTERS_TYPE_NAME = "tf_switch.drop_counters"


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
    st = struct_pb2.Struct()
    st.update(fields)
    entity = p4runtime_pb2.Entity()
    ee = entity.extern_entry
    ee.extern_type_id = DROP_COUNTERS_TYPE_ID
    ee.extern_id = int(cell.reason)
    ee.entry.Pack(st)
    return entity


class TargetExterns:
    """``ExternEntry``: the target's drop counters (read only)."""

    def write(self, target: Target, update_type: int, msg: p4runtime_pb2.ExternEntry) -> None:
        raise P4RTError(
            INVALID_ARGUMENT,
            f"extern type {msg.extern_type_id:#x}: tf-switch's target externs are read only",
        )

    def read(self, target: Target, msg: p4runtime_pb2.ExternEntry) -> Iterator[Any]:
        if msg.extern_type_id not in (0, DROP_COUNTERS_TYPE_ID):
            raise P4RTError(
                NOT_FOUND,
                f"unknown extern type {msg.extern_type_id:#x} (tf-switch serves "
                f"{DROP_COUNTERS_TYPE_ID:#x}, {DROP_COUNTERS_TYPE_NAME})",
            )
        reason: DropReason | None = None
        if msg.extern_id:
            try:
                reason = DropReason(msg.extern_id)
            except ValueError:
                raise P4RTError(
                    NOT_FOUND,
                    f"{DROP_COUNTERS_TYPE_NAME}: no drop reason {msg.extern_id} "
                    f"(1..{max(DropReason)})",
                ) from None
        for cell in target.drop_cells():
            if reason is None or cell.reason == reason:
                yield encode_drop_cell(cell)
