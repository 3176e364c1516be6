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
from dataclasses import dataclass, field

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


#: ``extern_type_id`` of tf-switch's packet counters and their instances.
PACKET_COUNTERS_TYPE_ID = 0x82
PACKETS_SWITCH = 1
PACKETS_PORTS = 2


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
class PortPackets:
    """One port's packets, as the target counts them."""

    port: int
    in_pkts: int  # arrived (kernel receive-ring overruns included)
    rx_pkts: int  # of them, read from the ring
    tx_pkts: int  # sent


@dataclass(frozen=True)
class PacketTotals:
    """Packets into and out of one switch, as its target counts them."""

    in_pkts: int  # arrived at its ports (kernel overruns included) + PacketOuts + copies made
    out_pkts: int  # sent by its ports + PacketIns
    queued_pkts: int  # still in its queues
    copies_pkts: int = 0  # of in_pkts: clones and multicast replicas the switch made
    ports: tuple[PortPackets, ...] = field(default=(), compare=False)  # when counted per port


@dataclass(frozen=True)
class Balance:
    """``in = out + drops + queued``, and what that leaves unexplained (0 when it balances)."""

    in_pkts: int = 0
    out_pkts: int = 0
    drop_pkts: int = 0
    queued_pkts: int = 0

    @property
    def unexplained_pkts(self) -> int:
        return self.in_pkts - self.out_pkts - self.drop_pkts - self.queued_pkts

    def __add__(self, other: Balance) -> Balance:
        return Balance(
            self.in_pkts + other.in_pkts,
            self.out_pkts + other.out_pkts,
            self.drop_pkts + other.drop_pkts,
            self.queued_pkts + other.queued_pkts,
        )

    def describe(self) -> str:
        return (
            f"packets in {self.in_pkts} = out {self.out_pkts} + dropped {self.drop_pkts} "
            f"+ queued {self.queued_pkts}, unexplained {self.unexplained_pkts}"
        )


def packets_read() -> p4runtime_pb2.Entity:
    """The read request of the switch's packet counters (the switch and every port)."""
    entity = p4runtime_pb2.Entity()
    entity.extern_entry.extern_type_id = PACKET_COUNTERS_TYPE_ID
    return entity


def _struct(ee: p4runtime_pb2.ExternEntry) -> dict[str, object]:
    st = struct_pb2.Struct()
    if not ee.entry.Unpack(st):
        raise DropDecodeError(f"target counter entry of type {ee.entry.type_url}, not a Struct")
    return dict(json_format.MessageToDict(st))


def decode_packets(entities: Iterable[p4runtime_pb2.Entity]) -> PacketTotals | None:
    """A packet counter read (None: it held no switch entity).

    Raises:
        DropDecodeError: an entity without the documented fields.
    """
    switch: dict[str, object] | None = None
    ports: list[dict[str, object]] = []
    for e in entities:
        if e.WhichOneof("entity") != "extern_entry":
            continue
        ee = e.extern_entry
        if ee.extern_type_id != PACKET_COUNTERS_TYPE_ID:
            continue
        if ee.extern_id == PACKETS_SWITCH:
            switch = _struct(ee)
        elif ee.extern_id == PACKETS_PORTS:
            ports.append(_struct(ee))
    if switch is None:
        return None

    def n(d: dict[str, object], key: str) -> int:
        v = d.get(key)
        if not isinstance(v, int | float):
            raise DropDecodeError(f"packet counters {d}: no number '{key}'")
        return int(v)

    copies = n(switch, "copies_pkts")
    arrived = sum(n(p, "in_pkts") for p in ports) if ports else n(switch, "rx_pkts")
    sent = sum(n(p, "tx_pkts") for p in ports) if ports else n(switch, "tx_pkts")
    return PacketTotals(
        arrived + n(switch, "from_cpu_pkts") + copies,
        sent + n(switch, "to_cpu_pkts"),
        n(switch, "queued_pkts"),
        copies,
        tuple(
            PortPackets(n(p, "port"), n(p, "in_pkts"), n(p, "rx_pkts"), n(p, "tx_pkts"))
            for p in sorted(ports, key=lambda p: n(p, "port"))
        ),
    )


def balance(packets: PacketTotals, drops: Iterable[TargetDrop]) -> Balance:
    """One switch's packets in against out, drops (every reason) and queued."""
    return Balance(
        packets.in_pkts,
        packets.out_pkts,
        sum(d.packets for d in drops),
        packets.queued_pkts,
    )


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
