"""Entity handlers of indexed externs and configs: counters, meters, registers, value sets, digests.

``CounterEntry``, ``MeterEntry``, ``RegisterEntry`` and ``ValueSetEntry`` are only MODIFYed
(INSERT and DELETE are INVALID_ARGUMENT); an absent index means every cell, a negative index is
INVALID_ARGUMENT and one past the end OUT_OF_RANGE. A meter write without ``config`` resets the
cells to the default (every packet GREEN). Registers are written and read as ``P4Data``
bitstrings; unlike PI's BMv2 back-end (which answers UNIMPLEMENTED), this target supports them.
``DigestEntry`` INSERT enables a digest with its configuration, MODIFY changes it and DELETE
disables it (NOT_FOUND / ALREADY_EXISTS when the digest is not / already enabled).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from p4.v1 import p4runtime_pb2

from switch.p4rt.bytestrings import decode_uint, encode_uint
from switch.p4rt.codec import (
    decode_bitstring,
    decode_counter_data,
    decode_meter_config,
    encode_bitstring,
    encode_counter_data,
    encode_meter_config,
)
from switch.p4rt.pipeline_view import DigestView, ExternView, ValueSetView
from switch.p4rt.status import (
    ALREADY_EXISTS,
    INVALID_ARGUMENT,
    NOT_FOUND,
    OUT_OF_RANGE,
    UNIMPLEMENTED,
    P4RTError,
)
from switch.p4rt.target import Target
from switch.pipeline.state import DigestConfig

INSERT = p4runtime_pb2.Update.INSERT
MODIFY = p4runtime_pb2.Update.MODIFY
DELETE = p4runtime_pb2.Update.DELETE


def _modify_only(update_type: int, what: str) -> None:
    if update_type != MODIFY:
        raise P4RTError(INVALID_ARGUMENT, f"{what} entries can only be modified")


def _indexes(ev: ExternView, msg: Any, what: str) -> Sequence[int]:
    """The cells a request names: its ``index``, or every cell when that is unset."""
    if not msg.HasField("index"):
        return range(ev.size)
    i = msg.index.index
    if i < 0:
        raise P4RTError(INVALID_ARGUMENT, f"{what} '{ev.name}': negative index {i}")
    if i >= ev.size:
        raise P4RTError(OUT_OF_RANGE, f"{what} '{ev.name}': index {i} is outside 0..{ev.size - 1}")
    return [i]


def _all_or_one(
    objects: dict[int, ExternView], pid: int, lookup: Callable[[int], ExternView]
) -> list[ExternView]:
    """Every object of a kind for the wildcard id 0, else the one ``pid`` names."""
    if pid == 0:
        return list(objects.values())
    return [lookup(pid)]


class Counters:
    """``CounterEntry``: packet and byte counts of indexed counters."""

    def write(self, target: Target, update_type: int, msg: p4runtime_pb2.CounterEntry) -> None:
        _modify_only(update_type, "counter")
        ev = target.view.counter(msg.counter_id)
        cells = _indexes(ev, msg, "counter")
        if not msg.HasField("data"):
            return
        packets, nbytes = decode_counter_data(msg.data, ev.unit, f"counter '{ev.name}'")
        counter = target.state.counters[ev.name]
        for i in cells:
            counter.write(i, packets, nbytes)

    def read(
        self, target: Target, msg: p4runtime_pb2.CounterEntry
    ) -> Iterator[p4runtime_pb2.Entity]:
        for ev in _all_or_one(target.view.counters, msg.counter_id, target.view.counter):
            counter = target.state.counters[ev.name]
            for i in _indexes(ev, msg, "counter"):
                packets, nbytes = counter.read(i)
                out = p4runtime_pb2.CounterEntry(
                    counter_id=ev.id,
                    index=p4runtime_pb2.Index(index=i),
                    data=encode_counter_data(packets, nbytes, ev.unit),
                )
                yield p4runtime_pb2.Entity(counter_entry=out)


class Meters:
    """``MeterEntry``: configurations of indexed two-rate three-colour meters."""

    def write(self, target: Target, update_type: int, msg: p4runtime_pb2.MeterEntry) -> None:
        _modify_only(update_type, "meter")
        if msg.HasField("counter_data"):
            raise P4RTError(UNIMPLEMENTED, "per-colour meter counters are not implemented")
        ev = target.view.meter(msg.meter_id)
        cells = _indexes(ev, msg, "meter")
        meter = target.state.meters[ev.name]
        if not msg.HasField("config"):
            for i in cells:
                meter.reset(i)
            return
        c = msg.config
        decode_meter_config(c, f"meter '{ev.name}'")
        for i in cells:
            meter.set_config(i, c.cir, c.cburst, c.pir, c.pburst)

    def read(self, target: Target, msg: p4runtime_pb2.MeterEntry) -> Iterator[p4runtime_pb2.Entity]:
        if msg.HasField("counter_data"):
            raise P4RTError(UNIMPLEMENTED, "per-colour meter counters are not implemented")
        for ev in _all_or_one(target.view.meters, msg.meter_id, target.view.meter):
            meter = target.state.meters[ev.name]
            for i in _indexes(ev, msg, "meter"):
                out = p4runtime_pb2.MeterEntry(meter_id=ev.id, index=p4runtime_pb2.Index(index=i))
                config = meter.get_config(i)
                if config is not None:
                    out.config.CopyFrom(encode_meter_config(config))
                yield p4runtime_pb2.Entity(meter_entry=out)


class Registers:
    """``RegisterEntry``: register cells as ``P4Data`` bitstrings."""

    def write(self, target: Target, update_type: int, msg: p4runtime_pb2.RegisterEntry) -> None:
        _modify_only(update_type, "register")
        ev = target.view.register(msg.register_id)
        cells = _indexes(ev, msg, "register")
        if not msg.HasField("data"):
            raise P4RTError(INVALID_ARGUMENT, f"register '{ev.name}': data is required")
        value = decode_bitstring(msg.data, ev.width, ev.signed, f"register '{ev.name}'")
        register = target.state.registers[ev.name]
        for i in cells:
            register.control_write(i, value)

    def read(
        self, target: Target, msg: p4runtime_pb2.RegisterEntry
    ) -> Iterator[p4runtime_pb2.Entity]:
        for ev in _all_or_one(target.view.registers, msg.register_id, target.view.register):
            register = target.state.registers[ev.name]
            for i in _indexes(ev, msg, "register"):
                out = p4runtime_pb2.RegisterEntry(
                    register_id=ev.id,
                    index=p4runtime_pb2.Index(index=i),
                    data=encode_bitstring(register.control_read(i), ev.signed),
                )
                yield p4runtime_pb2.Entity(register_entry=out)


def _value_set_member(
    vv: ValueSetView, member: p4runtime_pb2.ValueSetMember
) -> tuple[tuple[int, int], ...]:
    fields: list[tuple[int, int] | None] = [None] * len(vv.field_ids)
    for fm in member.match:
        hit = vv.fields.get(fm.field_id)
        what = f"value set '{vv.name}' field {fm.field_id}"
        if hit is None:
            raise P4RTError(INVALID_ARGUMENT, f"value set '{vv.name}' has no field {fm.field_id}")
        pos, width = hit
        if fields[pos] is not None:
            raise P4RTError(INVALID_ARGUMENT, f"{what} is given twice")
        kind = fm.WhichOneof("field_match_type")
        full = (1 << width) - 1
        if kind == "exact":
            fields[pos] = (decode_uint(fm.exact.value, width, what), full)
        elif kind == "ternary":
            v = decode_uint(fm.ternary.value, width, what)
            m = decode_uint(fm.ternary.mask, width, what + " mask")
            if m == 0 or v & ~m:
                raise P4RTError(INVALID_ARGUMENT, f"{what}: bad ternary value/mask")
            fields[pos] = (v, m)
        else:
            raise P4RTError(INVALID_ARGUMENT, f"{what}: expected an exact or ternary match")
    if any(f is None for f in fields):
        raise P4RTError(INVALID_ARGUMENT, f"value set '{vv.name}': member misses a field")
    return tuple(f for f in fields if f is not None)


class ValueSets:
    """``ValueSetEntry``: the members of a parser value set, written all at once."""

    def write(self, target: Target, update_type: int, msg: p4runtime_pb2.ValueSetEntry) -> None:
        _modify_only(update_type, "value set")
        vv = target.view.value_set(msg.value_set_id)
        members = [_value_set_member(vv, m) for m in msg.members]
        if len(set(members)) != len(members):
            raise P4RTError(ALREADY_EXISTS, f"value set '{vv.name}': duplicate members")
        target.state.value_sets[vv.name].set_members(members)

    def read(
        self, target: Target, msg: p4runtime_pb2.ValueSetEntry
    ) -> Iterator[p4runtime_pb2.Entity]:
        views = (
            list(target.view.value_sets.values())
            if msg.value_set_id == 0
            else [target.view.value_set(msg.value_set_id)]
        )
        for vv in views:
            out = p4runtime_pb2.ValueSetEntry(value_set_id=vv.id)
            for member in target.state.value_sets[vv.name].members:
                m = out.members.add()
                for mid, (v, k) in zip(vv.field_ids, member):
                    width = vv.fields[mid][1]
                    if k == (1 << width) - 1:
                        m.match.add(field_id=mid, exact={"value": encode_uint(v)})
                    else:
                        m.match.add(
                            field_id=mid, ternary={"value": encode_uint(v), "mask": encode_uint(k)}
                        )
            yield p4runtime_pb2.Entity(value_set_entry=out)


class Digests:
    """``DigestEntry``: enable, reconfigure and disable the streaming of a digest."""

    def write(self, target: Target, update_type: int, msg: p4runtime_pb2.DigestEntry) -> None:
        dv = target.view.digest(msg.digest_id)
        current = target.state.digest_config.get(dv.name)
        if update_type == INSERT and current is not None:
            raise P4RTError(ALREADY_EXISTS, f"digest '{dv.name}' is already enabled")
        if update_type != INSERT and current is None:
            raise P4RTError(NOT_FOUND, f"digest '{dv.name}' is not enabled")
        if update_type == DELETE:
            target.state.configure_digest(dv.name, None)
        else:
            c = msg.config
            if c.max_timeout_ns < 0 or c.ack_timeout_ns < 0 or c.max_list_size < 0:
                raise P4RTError(
                    INVALID_ARGUMENT, f"digest '{dv.name}': negative configuration value"
                )
            target.state.configure_digest(
                dv.name, DigestConfig(c.max_timeout_ns, c.max_list_size, c.ack_timeout_ns)
            )
        target.on_digest_config(dv.name)

    def read(
        self, target: Target, msg: p4runtime_pb2.DigestEntry
    ) -> Iterator[p4runtime_pb2.Entity]:
        views: list[DigestView]
        if msg.digest_id == 0:
            views = [
                dv
                for dv in target.view.digests.values()
                if target.state.digest_config.get(dv.name) is not None
            ]
        else:
            dv = target.view.digest(msg.digest_id)
            if target.state.digest_config.get(dv.name) is None:
                raise P4RTError(NOT_FOUND, f"digest '{dv.name}' is not enabled")
            views = [dv]
        for dv in views:
            c = target.state.digest_config[dv.name]
            assert c is not None
            out = p4runtime_pb2.DigestEntry(digest_id=dv.id)
            out.config.max_timeout_ns = c.max_timeout_ns
            out.config.max_list_size = c.max_list_size
            out.config.ack_timeout_ns = c.ack_timeout_ns
            yield p4runtime_pb2.Entity(digest_entry=out)
