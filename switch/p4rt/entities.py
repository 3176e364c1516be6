"""The table of P4Runtime entity kinds: one handler per ``Entity`` oneof field, and dispatch.

Every handler has ``write(target, update_type, message)`` (raising :class:`P4RTError`) and
``read(target, message)`` (yielding ``Entity`` messages). Kinds this target does not serve have
an :class:`Unsupported` row, so every field of the ``Entity`` oneof has exactly one row.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol, TypeAlias

from p4.v1 import p4runtime_pb2

from switch.p4rt.entity_externs import Counters, Digests, Meters, Registers, ValueSets
from switch.p4rt.entity_pre import ReplicationEntries
from switch.p4rt.entity_profiles import ProfileGroups, ProfileMembers
from switch.p4rt.entity_tables import DirectCounterEntries, DirectMeterEntries, TableEntries
from switch.p4rt.entity_target import TargetExterns
from switch.p4rt.status import INVALID_ARGUMENT, UNIMPLEMENTED, P4RTError
from switch.p4rt.target import Target

Entity: TypeAlias = p4runtime_pb2.Entity


class EntityHandler(Protocol):
    def write(self, target: Target, update_type: int, msg: Any) -> None: ...

    def read(self, target: Target, msg: Any) -> Iterator[Entity]: ...


class Unsupported:
    """A kind of entity this target does not implement: UNIMPLEMENTED for writes and reads."""

    def __init__(self, why: str) -> None:
        self.why = why

    def write(self, target: Target, update_type: int, msg: Any) -> None:
        raise P4RTError(UNIMPLEMENTED, self.why)

    def read(self, target: Target, msg: Any) -> Iterator[Entity]:
        raise P4RTError(UNIMPLEMENTED, self.why)


HANDLERS: dict[str, EntityHandler] = {
    "extern_entry": TargetExterns(),
    "table_entry": TableEntries(),
    "action_profile_member": ProfileMembers(),
    "action_profile_group": ProfileGroups(),
    "meter_entry": Meters(),
    "direct_meter_entry": DirectMeterEntries(),
    "counter_entry": Counters(),
    "direct_counter_entry": DirectCounterEntries(),
    "packet_replication_engine_entry": ReplicationEntries(),
    "value_set_entry": ValueSets(),
    "register_entry": Registers(),
    "digest_entry": Digests(),
}

UPDATE_TYPES = frozenset(
    {p4runtime_pb2.Update.INSERT, p4runtime_pb2.Update.MODIFY, p4runtime_pb2.Update.DELETE}
)


def _kind(entity: Entity) -> str:
    kind = entity.WhichOneof("entity")
    if kind is None:
        raise P4RTError(INVALID_ARGUMENT, "the entity is empty (no entity kind is set)")
    return str(kind)


def apply_update(target: Target, update: p4runtime_pb2.Update) -> None:
    """Apply one update of a Write batch (raises :class:`P4RTError` when it is refused)."""
    if update.type not in UPDATE_TYPES:
        raise P4RTError(
            INVALID_ARGUMENT, f"update type {update.type} is not INSERT, MODIFY or DELETE"
        )
    kind = _kind(update.entity)
    HANDLERS[kind].write(target, update.type, getattr(update.entity, kind))


def read_entity(target: Target, entity: Entity) -> list[Entity]:
    """Every entity one read request selects (wildcards expanded)."""
    kind = _kind(entity)
    return list(HANDLERS[kind].read(target, getattr(entity, kind)))
