"""Entity handlers keyed by a table entry: ``TableEntry``, ``DirectCounterEntry``, ``DirectMeterEntry``.

Rules of the specification implemented here ("TableEntry", "Default Entry", "Constant Tables",
"Direct Resources", "Wildcard Reads"): the default entry is only MODIFYed (``is_default_action``,
empty match, priority 0; no action resets it; a const default is PERMISSION_DENIED); const tables
and const entries only accept MODIFYs of their direct resources; a MODIFY without an action keeps
the action; ``meter_config`` unset on MODIFY resets the meter, ``counter_data`` unset keeps the
counts; reads filter on table id, match, priority, action id and cookies, and attach counter data
and meter configuration only when the request sets those fields. A pipeline table entry keeps
one integer cookie; both P4Runtime cookies (``controller_metadata`` and ``metadata``) are packed
into it.

One-shot action selector programming ("One Shot Action Selector Programming"): an entry of a
table with an action selector may give an ``ActionProfileActionSet``; the selector makes a hidden
group and members for it (:meth:`~switch.pipeline.profiles.ActionProfile.insert_one_shot`), the
entry reads back as the set it was written with, and a MODIFY or DELETE lets the old ones go.
Tables without a selector, weights below 1, a set bigger than ``max_group_size`` (its weights
added up, or its actions counted under ``sum_of_members``, where no weight may pass
``max_member_weight``) and mixing with client-written members/groups are INVALID_ARGUMENT;
watch ports are UNIMPLEMENTED.

Idle timeouts ("Idle-timeout"): ``idle_timeout_ns`` only on tables with ``support_timeout``
(else INVALID_ARGUMENT), never on default or const entries, ``time_since_last_hit`` never in a
write; reads always return ``idle_timeout_ns`` and give ``time_since_last_hit`` (device clock)
when the request sets it. The notifications themselves come from :mod:`switch.p4rt.idle`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from p4.v1 import p4runtime_pb2

from switch.p4rt.codec import (
    decode_action,
    decode_counter_data,
    decode_match,
    decode_meter_config,
    encode_action,
    encode_counter_data,
    encode_match,
    encode_meter_config,
)
from switch.p4rt.pipeline_view import TableView
from switch.p4rt.status import (
    INVALID_ARGUMENT,
    PERMISSION_DENIED,
    UNIMPLEMENTED,
    P4RTError,
)
from switch.p4rt.target import Target
from switch.pipeline.profiles import is_one_shot_id
from switch.pipeline.tables import Table, TableEntry
from switch.pipeline.trtcm import MeterCell, MeterConfig
from switch.schema import ActionCall

INSERT = p4runtime_pb2.Update.INSERT
MODIFY = p4runtime_pb2.Update.MODIFY
DELETE = p4runtime_pb2.Update.DELETE

MAX_METADATA_BYTES = 65536
_COOKIE_BITS = 64


def pack_cookie(controller_metadata: int, metadata: bytes) -> int:
    """Both P4Runtime cookies in one integer (``metadata`` keeps its leading zero bytes)."""
    if len(metadata) > MAX_METADATA_BYTES:
        raise P4RTError(INVALID_ARGUMENT, f"metadata is longer than {MAX_METADATA_BYTES} bytes")
    if not metadata:
        return controller_metadata
    return controller_metadata | (int.from_bytes(b"\x01" + metadata, "big") << _COOKIE_BITS)


def unpack_cookie(cookie: int) -> tuple[int, bytes]:
    high = cookie >> _COOKIE_BITS
    metadata = high.to_bytes((high.bit_length() + 7) // 8, "big")[1:] if high else b""
    return cookie & ((1 << _COOKIE_BITS) - 1), metadata


def _owner(tv: TableView) -> str:
    return f"table '{tv.name}'"


def _check_writable_fields(tv: TableView, te: p4runtime_pb2.TableEntry, update_type: int) -> None:
    if te.is_const:
        raise P4RTError(INVALID_ARGUMENT, "is_const must be false in a write")
    if update_type == DELETE:
        return  # only the key counts
    if te.idle_timeout_ns or te.HasField("time_since_last_hit"):
        if not tv.spec.support_timeout:
            raise P4RTError(INVALID_ARGUMENT, f"{_owner(tv)} does not support idle timeout")
        if te.HasField("time_since_last_hit"):
            raise P4RTError(INVALID_ARGUMENT, "time_since_last_hit must be unset in a write")
        if te.is_default_action:
            raise P4RTError(INVALID_ARGUMENT, "default entries take no idle timeout")
    if te.HasField("meter_counter_data"):
        raise P4RTError(UNIMPLEMENTED, "per-colour meter counters are not implemented")


def _direct_config(
    tv: TableView, te: p4runtime_pb2.TableEntry
) -> tuple[tuple[int, int] | None, MeterConfig | None]:
    """The (packets, bytes) and meter configuration a write gives, after validation."""
    counts = None
    meter = None
    if te.HasField("counter_data"):
        if tv.direct_counter is None:
            raise P4RTError(INVALID_ARGUMENT, f"{_owner(tv)} has no direct counter")
        counts = decode_counter_data(te.counter_data, tv.direct_counter.unit, _owner(tv))
    if te.HasField("meter_config"):
        if tv.direct_meter is None:
            raise P4RTError(INVALID_ARGUMENT, f"{_owner(tv)} has no direct meter")
        meter = decode_meter_config(te.meter_config, _owner(tv))
    return counts, meter


def _set_meter(entry: TableEntry, config: MeterConfig | None) -> None:
    entry.meter_config = config
    entry.meter_cell = None if config is None else MeterCell(config)


def locate(target: Target, te: p4runtime_pb2.TableEntry) -> tuple[TableView, TableEntry]:
    """The view and stored entry a ``TableEntry`` key names (NOT_FOUND if there is none)."""
    tv = target.view.table(te.table_id)
    if te.is_default_action:
        raise P4RTError(UNIMPLEMENTED, "direct resources of default entries are not implemented")
    table = target.state.tables[tv.name]
    return tv, table.get(decode_match(tv, te.match), te.priority)


class TableEntries:
    """``TableEntry``: match entries and default entries of every table."""

    def write(self, target: Target, update_type: int, te: p4runtime_pb2.TableEntry) -> None:
        tv = target.view.table(te.table_id)
        table = target.state.tables[tv.name]
        _check_writable_fields(tv, te, update_type)
        if te.is_default_action:
            self._write_default(target, tv, table, update_type, te)
            return
        match = decode_match(tv, te.match)
        if update_type == DELETE:
            table.delete(match, te.priority)  # a one-shot group goes with its entry
        elif update_type == INSERT:
            if not te.HasField("action"):
                raise P4RTError(INVALID_ARGUMENT, f"{_owner(tv)}: INSERT needs an action")
            entry = self._entry(target, tv, te, match, None)
            try:
                table.insert(entry)
            except BaseException:
                _drop_unused_one_shot(table, entry)
                raise
        else:
            self._modify(target, tv, table, te, match)

    def _action(
        self, target: Target, tv: TableView, te: p4runtime_pb2.TableEntry, stored: TableEntry | None
    ) -> tuple[ActionCall | None, int | None, int | None]:
        which = te.action.WhichOneof("type") if te.HasField("action") else None
        if which is None:
            if stored is None:
                raise P4RTError(INVALID_ARGUMENT, f"{_owner(tv)}: entry has no action")
            return stored.action, stored.member_id, stored.group_id
        if tv.spec.implementation is None:
            if which != "action":
                raise P4RTError(
                    INVALID_ARGUMENT, f"{_owner(tv)} is a direct table; entries take an action"
                )
            call = decode_action(target.view, te.action.action, tv.actions, _owner(tv))
            return call, None, None
        if which == "action_profile_action_set":
            return None, None, _one_shot_group(target, tv, te.action.action_profile_action_set)
        if which == "action":
            raise P4RTError(
                INVALID_ARGUMENT,
                f"{_owner(tv)} uses action profile "
                f"'{tv.spec.implementation}'; entries take a member or group id",
            )
        if which == "action_profile_member_id":
            return None, te.action.action_profile_member_id, None
        return None, None, te.action.action_profile_group_id

    def _entry(
        self,
        target: Target,
        tv: TableView,
        te: p4runtime_pb2.TableEntry,
        match: tuple[object, ...],
        stored: TableEntry | None,
    ) -> TableEntry:
        action, member, group = self._action(target, tv, te, stored)
        counts, meter = _direct_config(tv, te)
        packets, nbytes = counts if counts is not None else (0, 0)
        return TableEntry(
            match=match,
            priority=te.priority,
            action=action,
            member_id=member,
            group_id=group,
            packets=packets,
            bytes=nbytes,
            meter_config=meter,
            controller_metadata=pack_cookie(te.controller_metadata, te.metadata),
            idle_timeout_ns=te.idle_timeout_ns,
        )

    def _modify(
        self,
        target: Target,
        tv: TableView,
        table: Table,
        te: p4runtime_pb2.TableEntry,
        match: tuple[object, ...],
    ) -> None:
        stored = table.get(match, te.priority)
        if tv.spec.is_const or stored.is_const:
            if te.idle_timeout_ns:
                raise P4RTError(
                    INVALID_ARGUMENT, f"{_owner(tv)}: const entries take no idle timeout"
                )
            if te.HasField("action"):
                raise P4RTError(
                    PERMISSION_DENIED,
                    f"{_owner(tv)}: const entries only take "
                    "changes of their direct resources, without an action",
                )
            counts, meter = _direct_config(tv, te)
            if tv.spec.direct_meter is not None:
                _set_meter(stored, meter)
            if counts is not None:
                stored.packets, stored.bytes = counts
            return
        entry = self._entry(target, tv, te, match, stored)
        try:
            table.modify(dataclasses.replace(entry, packets=0, bytes=0))
        except BaseException:
            _drop_unused_one_shot(table, entry)
            raise
        if te.HasField("counter_data"):
            stored.packets, stored.bytes = entry.packets, entry.bytes

    def _write_default(
        self,
        target: Target,
        tv: TableView,
        table: Table,
        update_type: int,
        te: p4runtime_pb2.TableEntry,
    ) -> None:
        owner = _owner(tv)
        if update_type != MODIFY:
            raise P4RTError(INVALID_ARGUMENT, f"{owner}: the default entry can only be modified")
        if len(te.match) or te.priority:
            raise P4RTError(
                INVALID_ARGUMENT, f"{owner}: the default entry has an empty match and priority 0"
            )
        if tv.spec.const_default_action:
            raise P4RTError(PERMISSION_DENIED, f"{owner} has a const default action")
        if te.HasField("counter_data") or te.HasField("meter_config"):
            raise P4RTError(
                UNIMPLEMENTED, "direct resources of default entries are not implemented"
            )
        cookie = pack_cookie(te.controller_metadata, te.metadata)
        if not te.HasField("action"):
            table.reset_default()
            target.extras.default_cookies.pop(tv.name, None)
            return
        if te.action.WhichOneof("type") != "action":
            raise P4RTError(INVALID_ARGUMENT, f"{owner}: the default entry takes an action")
        call = decode_action(target.view, te.action.action, tv.actions, owner, for_default=True)
        table.set_default(call)
        if cookie:
            target.extras.default_cookies[tv.name] = (table.default, cookie)
        else:
            target.extras.default_cookies.pop(tv.name, None)

    # ----- reads

    def read(self, target: Target, te: p4runtime_pb2.TableEntry) -> Iterator[p4runtime_pb2.Entity]:
        if te.table_id == 0:
            if len(te.match):
                raise P4RTError(INVALID_ARGUMENT, "a read of all tables cannot filter on match")
            views = list(target.view.tables.values())
        else:
            views = [target.view.table(te.table_id)]
        for tv in views:
            yield from self._read_table(target, tv, te)

    def _read_table(
        self, target: Target, tv: TableView, te: p4runtime_pb2.TableEntry
    ) -> Iterator[p4runtime_pb2.Entity]:
        table = target.state.tables[tv.name]
        if te.is_default_action:
            yield p4runtime_pb2.Entity(table_entry=self._default_entry(target, tv, table))
            return
        if te.HasField("time_since_last_hit") and not tv.spec.support_timeout:
            if te.table_id:
                raise P4RTError(INVALID_ARGUMENT, f"{_owner(tv)} does not support idle timeout")
            te = _without_hit_time(te)  # a wildcard read: only idle-timeout tables answer it
        match = decode_match(tv, te.match) if len(te.match) else None
        action_id = 0
        if te.HasField("action") and te.action.WhichOneof("type") == "action":
            action_id = te.action.action.action_id
        for e in table.entries():
            if match is not None and e.match != match:
                continue
            if te.priority and e.priority != te.priority:
                continue
            controller_metadata, metadata = unpack_cookie(e.controller_metadata)
            if te.controller_metadata and controller_metadata != te.controller_metadata:
                continue
            if te.metadata and metadata != te.metadata:
                continue
            if action_id and (
                e.action is None or target.view.action_ids.get(e.action.name) != action_id
            ):
                continue
            yield p4runtime_pb2.Entity(table_entry=self.encode(target, tv, e, te))

    @staticmethod
    def encode(
        target: Target, tv: TableView, e: TableEntry, request: p4runtime_pb2.TableEntry
    ) -> p4runtime_pb2.TableEntry:
        out = p4runtime_pb2.TableEntry(
            table_id=tv.id, match=encode_match(tv, e.match), priority=e.priority
        )
        if e.action is not None:
            out.action.action.CopyFrom(encode_action(target.view, e.action))
        elif e.member_id is not None:
            out.action.action_profile_member_id = e.member_id
        elif e.group_id is not None and is_one_shot_id(e.group_id):
            profile = target.state.tables[tv.name].profile
            assert profile is not None
            action_set = out.action.action_profile_action_set
            action_set.SetInParent()  # an empty set reads back as one too
            for call, weight in profile.one_shot_actions(e.group_id):
                action_set.action_profile_actions.add(
                    action=encode_action(target.view, call), weight=weight
                )
        elif e.group_id is not None:
            out.action.action_profile_group_id = e.group_id
        out.controller_metadata, out.metadata = unpack_cookie(e.controller_metadata)
        out.idle_timeout_ns = e.idle_timeout_ns
        if request.HasField("time_since_last_hit"):
            elapsed = target.now_us() * 1000 - e.last_hit_ns
            out.time_since_last_hit.elapsed_ns = max(0, elapsed)
        if request.HasField("counter_data") and tv.direct_counter is not None:
            out.counter_data.CopyFrom(
                encode_counter_data(e.packets, e.bytes, tv.direct_counter.unit)
            )
        if request.HasField("meter_config") and e.meter_config is not None:
            out.meter_config.CopyFrom(encode_meter_config(e.meter_config))
        out.is_const = e.is_const or tv.spec.is_const
        return out

    @staticmethod
    def _default_entry(target: Target, tv: TableView, table: Table) -> p4runtime_pb2.TableEntry:
        out = p4runtime_pb2.TableEntry(table_id=tv.id, is_default_action=True)
        out.action.action.CopyFrom(encode_action(target.view, table.default))
        saved = target.extras.default_cookies.get(tv.name)
        if saved is not None and saved[0] == table.default:
            out.controller_metadata, out.metadata = unpack_cookie(saved[1])
        out.is_const = tv.spec.const_default_action
        return out


def _without_hit_time(te: p4runtime_pb2.TableEntry) -> p4runtime_pb2.TableEntry:
    out = p4runtime_pb2.TableEntry()
    out.CopyFrom(te)
    out.ClearField("time_since_last_hit")
    return out


def _watched(action: p4runtime_pb2.ActionProfileAction) -> bool:
    """Whether a one-shot action names a watch port (an empty ``watch_port`` names none)."""
    kind = action.WhichOneof("watch_kind")
    return kind == "watch" or (kind == "watch_port" and bool(action.watch_port))


def _one_shot_group(
    target: Target, tv: TableView, action_set: p4runtime_pb2.ActionProfileActionSet
) -> int:
    """Validate a one-shot action set and make its hidden group; returns the group id."""
    owner = _owner(tv)
    if tv.profile_id is None:
        raise P4RTError(INVALID_ARGUMENT, f"{owner} has no action selector for a one-shot set")
    pv = target.view.profile(tv.profile_id)
    if not pv.spec.with_selector:
        raise P4RTError(
            INVALID_ARGUMENT,
            f"{owner} uses action profile '{pv.name}', which has no selector: "
            "one-shot action sets need an action selector",
        )
    pairs = []
    for i, a in enumerate(action_set.action_profile_actions):
        if _watched(a):
            raise P4RTError(UNIMPLEMENTED, "watch ports are not implemented by this target")
        if a.weight < 1:
            raise P4RTError(
                INVALID_ARGUMENT,
                f"{owner}: one-shot action {i} has weight {a.weight} (must be >= 1)",
            )
        if not a.HasField("action"):
            raise P4RTError(INVALID_ARGUMENT, f"{owner}: one-shot action {i} has no action")
        pairs.append((decode_action(target.view, a.action, tv.actions, owner), a.weight))
    if pv.sum_of_members:
        size, unit = len(pairs), "actions"
        heavy = [w for _c, w in pairs if pv.max_member_weight and w > pv.max_member_weight]
        if heavy:
            raise P4RTError(
                INVALID_ARGUMENT,
                f"{owner}: one-shot weight {heavy[0]} is more than max_member_weight "
                f"{pv.max_member_weight} of '{pv.name}'",
            )
    else:
        size, unit = sum(w for _c, w in pairs), "in weight"
    if pv.max_group_size and size > pv.max_group_size:
        raise P4RTError(
            INVALID_ARGUMENT,
            f"{owner}: the one-shot set has {size} {unit}, more than max_group_size "
            f"{pv.max_group_size} of '{pv.name}'",
        )
    profile = target.state.action_profiles[pv.name]
    return profile.insert_one_shot(pairs)


def _drop_unused_one_shot(table: Table, entry: TableEntry) -> None:
    """After a refused write: the one-shot group made for it, if no entry took it."""
    if table.profile is not None and entry.group_id is not None and is_one_shot_id(entry.group_id):
        table.profile.drop_one_shot(entry.group_id)


def _key_of(tv: TableView, e: TableEntry) -> p4runtime_pb2.TableEntry:
    return p4runtime_pb2.TableEntry(
        table_id=tv.id, match=encode_match(tv, e.match), priority=e.priority
    )


def _direct_targets(
    target: Target, te: p4runtime_pb2.TableEntry | None, what: str, has_resource: str
) -> Iterator[tuple[TableView, TableEntry]]:
    """The (table, entry) pairs a direct counter/meter read names, wildcards expanded."""
    if te is None or te.table_id == 0:
        views = [tv for tv in target.view.tables.values() if getattr(tv, has_resource)]
    else:
        tv = target.view.table(te.table_id)
        if getattr(tv, has_resource) is None:
            raise P4RTError(INVALID_ARGUMENT, f"{_owner(tv)} has no {what}")
        if len(te.match) or te.is_default_action:
            yield locate(target, te)
            return
        views = [tv]
    for tv in views:
        for e in target.state.tables[tv.name].entries():
            yield tv, e


class DirectCounterEntries:
    """``DirectCounterEntry``: the counts of one table entry (MODIFY and reads only)."""

    def write(
        self, target: Target, update_type: int, msg: p4runtime_pb2.DirectCounterEntry
    ) -> None:
        if update_type != MODIFY:
            raise P4RTError(INVALID_ARGUMENT, "direct counter entries can only be modified")
        if not msg.HasField("table_entry"):
            raise P4RTError(INVALID_ARGUMENT, "DirectCounterEntry needs its table_entry")
        tv = target.view.table(msg.table_entry.table_id)
        if tv.direct_counter is None:
            raise P4RTError(INVALID_ARGUMENT, f"{_owner(tv)} has no direct counter")
        _, stored = locate(target, msg.table_entry)
        if msg.HasField("data"):
            stored.packets, stored.bytes = decode_counter_data(
                msg.data, tv.direct_counter.unit, _owner(tv)
            )

    def read(
        self, target: Target, msg: p4runtime_pb2.DirectCounterEntry
    ) -> Iterator[p4runtime_pb2.Entity]:
        te = msg.table_entry if msg.HasField("table_entry") else None
        for tv, e in _direct_targets(target, te, "direct counter", "direct_counter"):
            assert tv.direct_counter is not None
            data = encode_counter_data(e.packets, e.bytes, tv.direct_counter.unit)
            out = p4runtime_pb2.DirectCounterEntry(table_entry=_key_of(tv, e), data=data)
            yield p4runtime_pb2.Entity(direct_counter_entry=out)


class DirectMeterEntries:
    """``DirectMeterEntry``: the meter configuration of one table entry."""

    def write(self, target: Target, update_type: int, msg: p4runtime_pb2.DirectMeterEntry) -> None:
        if update_type != MODIFY:
            raise P4RTError(INVALID_ARGUMENT, "direct meter entries can only be modified")
        if not msg.HasField("table_entry"):
            raise P4RTError(INVALID_ARGUMENT, "DirectMeterEntry needs its table_entry")
        if msg.HasField("counter_data"):
            raise P4RTError(UNIMPLEMENTED, "per-colour meter counters are not implemented")
        tv = target.view.table(msg.table_entry.table_id)
        if tv.direct_meter is None:
            raise P4RTError(INVALID_ARGUMENT, f"{_owner(tv)} has no direct meter")
        config = decode_meter_config(msg.config, _owner(tv)) if msg.HasField("config") else None
        _, stored = locate(target, msg.table_entry)
        _set_meter(stored, config)

    def read(
        self, target: Target, msg: p4runtime_pb2.DirectMeterEntry
    ) -> Iterator[p4runtime_pb2.Entity]:
        if msg.HasField("counter_data"):
            raise P4RTError(UNIMPLEMENTED, "per-colour meter counters are not implemented")
        te = msg.table_entry if msg.HasField("table_entry") else None
        for tv, e in _direct_targets(target, te, "direct meter", "direct_meter"):
            out = p4runtime_pb2.DirectMeterEntry(table_entry=_key_of(tv, e))
            if e.meter_config is not None:
                out.config.CopyFrom(encode_meter_config(e.meter_config))
            yield p4runtime_pb2.Entity(direct_meter_entry=out)
