"""The switch target's own drop counters, and drops by reason put together with the program's.

A P4 program's counters see only what the program does; packets lost around it (the traffic
manager's tail drops, receive-ring overruns, send failures) need the target. tf-switch serves
them as a target-specific P4Runtime read (``switch/p4rt/entity_target.py``): ``ExternEntry``
with ``extern_type_id`` 0x81, one entity per (reason, port, queue), its entry a
``google.protobuf.Struct`` ``{"reason", "code", "port", "queue"?, "charged", "program",
"packets"}``. BMv2 has no such read (UNIMPLEMENTED): :func:`read_target_drops` returns None for
it and the read-outs say the target's drops are unavailable.

:func:`summarize` merges the two views of one switch without counting a packet twice: the
target's reasons that the program did not decide (``program`` false), plus fabric.p4's
``drop_reasons`` (port down, hop limit, no route, injected loss, ...) for the ones it did, plus
``program drop (no reason)`` for program drops that the program's counter does not explain
(``packet-out to drop port`` for those at the CPU port: the controller's telemetry flush
frames, sent to port 511 on purpose).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from google.protobuf import json_format, struct_pb2
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from controller.errors import ControllerError

#: ``extern_type_id`` of tf-switch's drop counters (``switch.p4rt.entity_target``).
DROP_COUNTERS_TYPE_ID = 0x81
#: The target reason of tail drops (the only one per queue).
TAIL_DROP = "tail_drop"
UNEXPLAINED = "program drop (no reason)"
PACKET_OUT_DROPPED = "packet-out to drop port"
#: What a target without these counters answers to their Read (google.rpc codes, per entity
#: or for the whole RPC): PI's BMv2 back end does not serve ExternEntry.
NO_TARGET_DROPS: tuple[int, ...] = (
    code_pb2.UNIMPLEMENTED,
    code_pb2.NOT_FOUND,
    code_pb2.INVALID_ARGUMENT,
)
NO_TARGET_DROPS_RPC = frozenset({"UNIMPLEMENTED", "NOT_FOUND", "INVALID_ARGUMENT"})


class DropDecodeError(ControllerError):
    """A drop counter entity that does not have the documented form."""


@dataclass(frozen=True)
class TargetDrop:
    """Packets the switch dropped for ``reason`` at ``port`` (and ``queue``, tail drops)."""

    reason: str
    code: int
    port: int
    queue: int | None
    charged: str  # "ingress", "egress" or "ingress or egress": which port ``port`` is
    program: bool  # the P4 program decided it (mark_to_drop, assert)
    packets: int


def drop_read() -> p4runtime_pb2.Entity:
    """The read request of every drop counter cell."""
    entity = p4runtime_pb2.Entity()
    entity.extern_entry.extern_type_id = DROP_COUNTERS_TYPE_ID
    return entity


def decode_drop(entity: p4runtime_pb2.Entity) -> TargetDrop | None:
    """One cell of a drop counter read (None: some other entity).

    Raises:
        DropDecodeError: an entity of the drop counter type without the documented fields.
    """
    if entity.WhichOneof("entity") != "extern_entry":
        return None
    ee = entity.extern_entry
    if ee.extern_type_id != DROP_COUNTERS_TYPE_ID:
        return None
    st = struct_pb2.Struct()
    if not ee.entry.Unpack(st):
        raise DropDecodeError(f"drop counter entry of type {ee.entry.type_url}, not a Struct")
    d = json_format.MessageToDict(st)
    try:
        queue = d.get("queue")
        return TargetDrop(
            str(d["reason"]),
            int(d["code"]),
            int(d["port"]),
            None if queue is None else int(queue),
            str(d["charged"]),
            bool(d["program"]),
            int(d["packets"]),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise DropDecodeError(f"drop counter entry {d}: {e}") from None


def decode_drops(entities: Iterable[p4runtime_pb2.Entity]) -> tuple[TargetDrop, ...]:
    out = (decode_drop(e) for e in entities)
    return tuple(d for d in out if d is not None)


@dataclass(frozen=True)
class PortDrops:
    """One port's target drops, as the ``counters`` table shows them."""

    tail: int = 0  # tail drops, every queue
    switch: int = 0  # other drops the program did not decide (overruns, send failures, ...)


def per_port(drops: Iterable[TargetDrop]) -> dict[int, PortDrops]:
    """Target drops the program did not decide, per port: tail drops and the rest."""
    acc: dict[int, list[int]] = {}
    for d in drops:
        if d.program:
            continue  # the program's own counters (rx_drops, tx_drops) show these
        cell = acc.setdefault(d.port, [0, 0])
        cell[0 if d.reason == TAIL_DROP else 1] += d.packets
    return {p: PortDrops(t, s) for p, (t, s) in acc.items()}


def summarize(
    target: Iterable[TargetDrop] | None,
    program: Mapping[str, int],
    cpu_port: int | None = None,
) -> dict[str, int]:
    """Drops of one switch by reason, each packet once (see the module docstring).

    ``target`` None: the target has no drop counters (BMv2); ``program``: the program's own
    ``drop_reasons`` by name. Program drops at ``cpu_port`` that the program does not explain
    are PacketOuts sent to the drop port (:data:`PACKET_OUT_DROPPED`: the controller's
    telemetry flush frames).
    """
    out: dict[str, int] = {}
    decided = at_cpu = 0
    for d in target or ():
        if d.program:
            decided += d.packets
            if d.port == cpu_port:
                at_cpu += d.packets
        else:
            out[d.reason] = out.get(d.reason, 0) + d.packets
    for name, n in program.items():
        if n:
            out[name] = out.get(name, 0) + n
    if target is not None:
        unexplained = decided - sum(program.values())
        flushed = min(max(unexplained, 0), at_cpu)
        if flushed:
            out[PACKET_OUT_DROPPED] = flushed
        if unexplained - flushed > 0:
            out[UNEXPLAINED] = unexplained - flushed
    return out


def add_up(parts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in parts:
        for k, v in part.items():
            out[k] = out.get(k, 0) + v
    return out


def describe(reasons: Mapping[str, int]) -> str:
    """``tail_drop 213, hop limit 2`` (largest first), or ``none``."""
    items = sorted(((k, v) for k, v in reasons.items() if v), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{k} {v}" for k, v in items) or "none"
