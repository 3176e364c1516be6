"""P4Info (``p4.config.v1.P4Info``) for a program's control-plane schema, laid out as p4c does.

:func:`build_p4info` turns a :class:`switch.schema.ProgramSchema` into the message that
``p4c --arch v1model --p4runtime-files x.p4info.txtpb`` writes, so that a controller written
against p4c's P4Info (ids, names, aliases, field ids) works unchanged against this target.
:class:`P4InfoIndex` is the lookup helper the P4Runtime server, the STF runner and controllers
share.

What this module follows from p4c (``control-plane/p4RuntimeSymbolTable.cpp``,
``p4RuntimeSerializer.cpp``, ``p4RuntimeArchStandard.h``/``.cpp``, ``p4RuntimeArchHandler.h``
and the ``testdata/p4_16_samples_outputs/*.p4info.txtpb`` reference outputs):

* **Ids.** ``(prefix << 24) | (jenkins_one_at_a_time(name) & 0xffffff)``. An ``@id(N)``
  annotation wins (the prefix byte is added when ``N`` has none; a wrong prefix or an id used
  twice is an error) and is reserved before any hashing. Then, per resource type in ascending
  prefix order, the names without ``@id`` are hashed in *byte-wise sorted* order (p4c keeps
  them in a ``std::map<cstring, ...>``, whose ``<`` is ``strcmp``). A collision is resolved by
  linear probing on the full 32-bit hash (``value + 1``, wrapping at 2**32), re-masking the low
  24 bits each time; nothing is skipped (an id whose low 24 bits are 0 is valid). Controller
  headers hash the header *type* name; digests hash the digested struct type name and ignore
  ``@id``.
* **Aliases.** The shortest suffix of dot-separated components that is unique among *all*
  symbols of the program, of every type together (tables, actions, action profiles, counters,
  direct counters, meters, direct meters, registers, digests, value sets and controller-header
  *type* names), each distinct name counted once. A ``controller_packet_metadata`` preamble
  uses the ``@controller_header`` value as both name and alias.
* **Annotations.** ``@name``, ``@id``, ``@brief`` and ``@description`` are not repeated (the
  last two become ``doc``); the others are written as in the source, an unparsed body's tokens
  joined by single spaces (``@refers_to(t , f)``) and an empty body without parentheses
  (``@oneshot()`` -> ``"@oneshot"``). An action profile's ``@max_group_size``,
  ``@selector_size_semantics`` and ``@max_member_weight`` become fields instead.
* **Tables.** Selector keys are not match fields (but still use up their position's field id);
  ``const_default_action_id`` for a ``const default_action``; ``initial_default_action`` (with
  every argument as a big-endian byte string of ``ceil(bitwidth / 8)`` bytes) for every table,
  const or not, NoAction when the program gives none (current p4c; pass
  ``initial_default_action=False`` for the output of p4c releases before it);
  ``is_const_table`` for ``const entries``; ``has_initial_entries`` when entries are given;
  ``direct_resource_ids`` counter first, then meter; ``idle_timeout_behavior: NOTIFY_CONTROL``
  for ``support_timeout = true``.
* **Ordering.** Text format prints the ``P4Info`` fields in field-number order. Within each
  list the order is p4c's walk of the evaluated program, which this module takes from the
  schema's lists as they are, except that direct counters and direct meters are listed in the
  order of their tables (p4c emits them while emitting the table) and an action profile's
  ``table_ids`` are sorted by table *name* (p4c keeps them in a ``std::set<cstring>``).

Assumptions about the :class:`~switch.schema.ProgramSchema` (the compiler's side of the
contract):

* ``actions`` holds exactly the actions p4c lists: those left in the controls after its mid-end
  (unused ones removed), in control order with the control's localized top-level actions
  (``NoAction``) first, each once. ``tables``, ``action_profiles``, ``counters``, ``meters``,
  ``registers``, ``digests``, ``controller_headers`` and ``value_sets`` are in p4c's order too.
* Compiler-generated ``@hidden`` tables and actions are absent. p4c gives them ids and puts
  them in the alias set although it does not list them; pass their names as
  ``hidden_symbols`` to :func:`build_p4info` if an exact match matters.
* A :class:`~switch.schema.ValueSetSpec` of a plain ``bit<W>`` has one field whose name is
  ``""``; a ``bool`` struct member is a 1-bit field (``StructField`` cannot tell it apart).
"""

from __future__ import annotations

import difflib
import enum
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from google.protobuf import json_format, text_format
from p4.config.v1 import p4info_pb2, p4types_pb2

from switch.errors import P4Error, RuntimeConfigError
from switch.schema import (
    ActionProfileSpec,
    ActionRef,
    ActionScope,
    ActionSpec,
    Annotation,
    ControllerHeaderSpec,
    CounterSpec,
    CounterUnit,
    DirectCounterSpec,
    DirectMeterSpec,
    MatchKind,
    MeterSpec,
    MeterUnit,
    ProgramSchema,
    StructField,
    TableSpec,
)

__all__ = [
    "ACTION_SCOPES",
    "COUNTER_METER_KINDS",
    "MATCH_TYPES",
    "P4INFO_TEXT_HEADER",
    "UNITS",
    "CounterMeterKind",
    "CounterMeterSpec",
    "P4Info",
    "P4InfoError",
    "P4InfoIndex",
    "P4InfoLookupError",
    "Prefix",
    "build_p4info",
    "compute_ids",
    "jenkins_one_at_a_time",
    "make_id",
    "owner_table",
    "p4info_text",
    "read_p4info",
    "render_annotation",
    "schema_symbols",
    "shortest_unique_suffixes",
    "write_p4info",
]

P4Info: TypeAlias = p4info_pb2.P4Info

#: What current p4c writes before the text-format message.
P4INFO_TEXT_HEADER = (
    "# proto-file: p4/config/v1/p4info.proto\n# proto-message: p4.config.v1.P4Info\n\n"
)


class Prefix(enum.IntEnum):
    """The 8-bit resource-type prefix of a P4Runtime id (``p4info.proto`` ``P4Ids.Prefix``)."""

    ACTION = 0x01
    TABLE = 0x02
    VALUE_SET = 0x03
    CONTROLLER_HEADER = 0x04
    ACTION_PROFILE = 0x11
    COUNTER = 0x12
    DIRECT_COUNTER = 0x13
    METER = 0x14
    DIRECT_METER = 0x15
    REGISTER = 0x16
    DIGEST = 0x17


class P4InfoError(P4Error):
    """The schema cannot be turned into a P4Info (bad ``@id``, duplicate name, dangling ref)."""


class P4InfoLookupError(RuntimeConfigError, KeyError):
    """An unknown or ambiguous name or id asked of a :class:`P4InfoIndex`."""


# --------------------------------------------------------------------------------------------
# Schema values as P4Info enums

#: ``MatchField.MatchType`` of each match kind (selector keys are not match fields).
MATCH_TYPES: dict[MatchKind, int] = {
    MatchKind.EXACT: p4info_pb2.MatchField.EXACT,
    MatchKind.LPM: p4info_pb2.MatchField.LPM,
    MatchKind.TERNARY: p4info_pb2.MatchField.TERNARY,
    MatchKind.RANGE: p4info_pb2.MatchField.RANGE,
    MatchKind.OPTIONAL: p4info_pb2.MatchField.OPTIONAL,
}
#: ``ActionRef.Scope`` of each action scope.
ACTION_SCOPES: dict[ActionScope, int] = {
    ActionScope.TABLE_AND_DEFAULT: p4info_pb2.ActionRef.TABLE_AND_DEFAULT,
    ActionScope.TABLE_ONLY: p4info_pb2.ActionRef.TABLE_ONLY,
    ActionScope.DEFAULT_ONLY: p4info_pb2.ActionRef.DEFAULT_ONLY,
}
#: ``CounterSpec.Unit`` of each counter unit, ``MeterSpec.Unit`` of each meter unit.
UNITS: dict[CounterUnit | MeterUnit, int] = {
    CounterUnit.BYTES: p4info_pb2.CounterSpec.BYTES,
    CounterUnit.PACKETS: p4info_pb2.CounterSpec.PACKETS,
    CounterUnit.BOTH: p4info_pb2.CounterSpec.BOTH,
    MeterUnit.BYTES: p4info_pb2.MeterSpec.BYTES,
    MeterUnit.PACKETS: p4info_pb2.MeterSpec.PACKETS,
}


# --------------------------------------------------------------------------------------------
# Counters and meters: one row per kind

#: A counter or meter of the schema, indexed (``size`` cells) or direct (owned by ``table``).
CounterMeterSpec = CounterSpec | DirectCounterSpec | MeterSpec | DirectMeterSpec


@dataclass(frozen=True)
class CounterMeterKind:
    """One of the four counter and meter kinds of P4Info.

    The P4Info writer (:func:`build_p4info`) and the P4Runtime pipeline view
    (:mod:`switch.p4rt.pipeline_view`) handle every kind with one function, driven by this row.
    """

    field: str
    """The list's name, the same in ``P4Info``, :class:`ProgramSchema` and the pipeline view."""
    prefix: Prefix
    """The id prefix of the kind."""
    what: str
    """The kind in messages: ``"direct counter"``."""
    specs: Callable[[ProgramSchema], Sequence[CounterMeterSpec]]
    """The schema's declarations of the kind, in the schema's order."""


def owner_table(spec: CounterMeterSpec) -> str:
    """The table a direct counter or meter belongs to; ``""`` for an indexed one."""
    return spec.table if isinstance(spec, (DirectCounterSpec, DirectMeterSpec)) else ""


COUNTER_METER_KINDS: tuple[CounterMeterKind, ...] = (
    CounterMeterKind("counters", Prefix.COUNTER, "counter", lambda s: s.counters),
    CounterMeterKind(
        "direct_counters", Prefix.DIRECT_COUNTER, "direct counter", lambda s: s.direct_counters
    ),
    CounterMeterKind("meters", Prefix.METER, "meter", lambda s: s.meters),
    CounterMeterKind(
        "direct_meters", Prefix.DIRECT_METER, "direct meter", lambda s: s.direct_meters
    ),
)


# --------------------------------------------------------------------------------------------
# Ids


def jenkins_one_at_a_time(data: bytes) -> int:
    """Bob Jenkins' one-at-a-time hash of ``data`` as an unsigned 32-bit integer."""
    h = 0
    for byte in data:
        h = (h + byte) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    h = (h + (h << 15)) & 0xFFFFFFFF
    return h


def make_id(prefix: int, name: str) -> int:
    """The id p4c gives ``name`` of type ``prefix`` when nothing collides with it."""
    return (prefix << 24) | (jenkins_one_at_a_time(name.encode()) & 0xFFFFFF)


def _name_key(name: str) -> bytes:
    return name.encode()


def compute_ids(
    names_by_prefix: Mapping[int, Iterable[str]],
    explicit: Mapping[tuple[int, str], int] | None = None,
    *,
    hash_fn: Callable[[bytes], int] = jenkins_one_at_a_time,
) -> dict[int, dict[str, int]]:
    """Assign P4Runtime ids the way p4c's ``P4RuntimeSymbolTable`` does.

    ``names_by_prefix`` maps a :class:`Prefix` to the names of that type (duplicates are
    ignored, as p4c does). ``explicit`` maps ``(prefix, name)`` to an ``@id`` value; those are
    reserved first, in the mapping's order. The result maps each prefix to ``{name: id}``.
    """
    result: dict[int, dict[str, int]] = {}
    assigned: set[int] = set()
    for (prefix, name), raw in (explicit or {}).items():
        high = raw & 0xFF000000
        if raw < 0 or raw > 0xFFFFFFFF:
            raise P4InfoError(f"{name}: @id {raw} is not an unsigned 32-bit integer")
        if high and high != prefix << 24:
            raise P4InfoError(f"{name}: @id {raw:#010x} has the wrong 8-bit prefix")
        pid = raw | (prefix << 24)
        if pid in assigned:
            raise P4InfoError(f"@id {pid} is assigned to multiple declarations")
        table = result.setdefault(prefix, {})
        if name in table:
            continue
        assigned.add(pid)
        table[name] = pid
    for prefix in sorted(names_by_prefix):
        table = result.setdefault(prefix, {})
        pending = sorted({n for n in names_by_prefix[prefix] if n not in table}, key=_name_key)
        for name in pending:
            start = hash_fn(name.encode()) & 0xFFFFFFFF
            value = start
            for _ in range(1 << 24):
                candidate = (prefix << 24) | (value & 0xFFFFFF)
                if candidate not in assigned:
                    break
                value = (value + 1) & 0xFFFFFFFF
            else:
                raise P4InfoError(f"no available id to represent {name} in P4Runtime")
            assigned.add(candidate)
            table[name] = candidate
    return result


# --------------------------------------------------------------------------------------------
# Aliases


def shortest_unique_suffixes(names: Iterable[str]) -> dict[str, str]:
    """For each distinct name, its shortest dot-component suffix unique within ``names``.

    p4c's ``P4SymbolSuffixSet``: with ``a.b.c``, ``b.c`` and ``a.d.c``, the aliases are
    ``a.b.c``, ``b.c`` and ``d.c``.
    """
    distinct = list(dict.fromkeys(names))
    counts: Counter[tuple[str, ...]] = Counter()
    split = {name: tuple(name.split(".")) for name in distinct}
    for parts in split.values():
        for k in range(1, len(parts) + 1):
            counts[parts[-k:]] += 1
    aliases: dict[str, str] = {}
    for name, parts in split.items():
        needed = len(parts)
        for k in range(1, len(parts) + 1):
            if counts[parts[-k:]] < 2:
                needed = k
                break
        aliases[name] = ".".join(parts[-needed:])
    return aliases


# --------------------------------------------------------------------------------------------
# Annotations

_NOT_REPEATED = frozenset({"name", "id", "brief", "description"})
_PROFILE_FIELDS = frozenset({"max_group_size", "selector_size_semantics", "max_member_weight"})


def render_annotation(annotation: Annotation) -> str:
    """An annotation as p4c writes it into P4Info: ``@name`` or ``@name(tok tok ...)``."""
    if not annotation.body:
        return f"@{annotation.name}"
    return f"@{annotation.name}({' '.join(annotation.body)})"


def _find(annotations: Sequence[Annotation], name: str) -> Annotation | None:
    for a in annotations:
        if a.name == name:
            return a
    return None


def _unquote(body: Sequence[str]) -> str:
    """The value of a string-literal annotation body such as ``('"packet_in"',)``."""
    text = " ".join(body).strip()
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        text = text[1:-1]
        return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "r": "\r"}.get(m[1], m[1]), text)
    return text


_P4_INT = re.compile(
    r"^(?:(\d+)([ws]))?(0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|0[dD][\d_]+|[\d_]+)$"
)


def _p4_int(body: Sequence[str], what: str) -> int:
    """An integer-literal annotation argument (``5``, ``0x0200_0001``, ``32w7``)."""
    text = "".join(body).strip()
    m = _P4_INT.match(text)
    if not m:
        raise P4InfoError(f"{what}: expected an integer literal, not {text!r}")
    digits = m[3].replace("_", "")
    if digits[:2].lower() == "0d":
        return int(digits[2:], 10)
    return int(digits, 0) if digits[:2].lower() in ("0x", "0b", "0o") else int(digits, 10)


def _explicit_id(annotations: Sequence[Annotation], what: str) -> int | None:
    a = _find(annotations, "id")
    return None if a is None else _p4_int(a.body, f"{what}: @id")


def _set_annotations(
    message: Any, annotations: Sequence[Annotation], skip: frozenset[str] = frozenset()
) -> None:
    """Fill ``annotations`` and ``doc`` of a P4Info message from P4 annotations."""
    for a in annotations:
        if a.name in _NOT_REPEATED or a.name in skip:
            continue
        message.annotations.append(render_annotation(a))
    brief = _find(annotations, "brief")
    description = _find(annotations, "description")
    if brief is not None:
        message.doc.brief = _unquote(brief.body)
    if description is not None:
        message.doc.description = _unquote(description.body)


def _set_preamble(
    preamble: p4info_pb2.Preamble,
    pid: int,
    name: str,
    alias: str,
    annotations: Sequence[Annotation],
    skip: frozenset[str] = frozenset(),
) -> None:
    preamble.id = pid
    preamble.name = name
    preamble.alias = alias
    _set_annotations(preamble, annotations, skip)


# --------------------------------------------------------------------------------------------
# Symbols of a schema


def schema_symbols(
    schema: ProgramSchema,
) -> tuple[dict[int, list[str]], dict[tuple[int, str], int]]:
    """The schema's P4Runtime symbols: names per prefix, and the ``@id`` values given."""
    names: dict[int, list[str]] = {}
    explicit: dict[tuple[int, str], int] = {}

    def add(
        prefix: Prefix, name: str, annotations: Sequence[Annotation] = (), ids: bool = True
    ) -> None:
        names.setdefault(int(prefix), []).append(name)
        if ids:
            pid = _explicit_id(annotations, name)
            if pid is not None and (int(prefix), name) not in explicit:
                explicit[(int(prefix), name)] = pid

    for action in schema.actions:
        add(Prefix.ACTION, action.name, action.annotations)
    for table in schema.tables:
        add(Prefix.TABLE, table.name, table.annotations)
    for profile in schema.action_profiles:
        add(Prefix.ACTION_PROFILE, profile.name, profile.annotations)
    for kind in COUNTER_METER_KINDS:
        for spec in kind.specs(schema):
            add(kind.prefix, spec.name, spec.annotations)
    for register in schema.registers:
        add(Prefix.REGISTER, register.name, register.annotations)
    for digest in schema.digests:
        add(Prefix.DIGEST, digest.name, ids=False)
    for header in schema.controller_headers:
        add(Prefix.CONTROLLER_HEADER, header.type_name, header.annotations)
    for value_set in schema.value_sets:
        add(Prefix.VALUE_SET, value_set.name, value_set.annotations)
    return names, explicit


# --------------------------------------------------------------------------------------------
# Building


def _bitstring(spec: p4types_pb2.P4DataTypeSpec, width: int, signed: bool) -> None:
    if signed:
        spec.bitstring.int.bitwidth = width
    else:
        spec.bitstring.bit.bitwidth = width


def _value_bytes(value: int, width: int) -> bytes:
    """``value`` as p4c writes action data in P4Info: big-endian, ``ceil(width / 8)`` bytes."""
    nbytes = max(1, math.ceil(width / 8))
    return (value & ((1 << (nbytes * 8)) - 1)).to_bytes(nbytes, "big")


class _Builder:
    def __init__(self, schema: ProgramSchema, hidden_symbols: Iterable[tuple[int, str]]) -> None:
        self.schema = schema
        names, explicit = schema_symbols(schema)
        for prefix, name in hidden_symbols:
            names.setdefault(int(prefix), []).append(name)
        self.ids = compute_ids(names, explicit)
        self.aliases = shortest_unique_suffixes(n for group in names.values() for n in group)
        self.actions = {a.name: a for a in schema.actions}

    def id(self, prefix: Prefix, name: str, what: str) -> int:
        try:
            return self.ids[int(prefix)][name]
        except KeyError:
            known = list(self.ids.get(int(prefix), {}))
            hint = difflib.get_close_matches(name, known, n=1)
            extra = f"; did you mean '{hint[0]}'?" if hint else ""
            raise P4InfoError(
                f"{what} refers to unknown {prefix.name.lower()} '{name}'{extra}"
            ) from None

    def build(self, initial_default_action: bool) -> p4info_pb2.P4Info:
        s = self.schema
        info = p4info_pb2.P4Info()
        info.pkg_info.arch = s.arch
        for table in s.tables:
            self.add_table(info, table, initial_default_action)
        for action in s.actions:
            self.add_action(info, action)
        for profile in s.action_profiles:
            self.add_action_profile(info, profile)
        for kind in COUNTER_METER_KINDS:
            for spec in self.in_p4info_order(kind):
                self.add_counter_or_meter(info, kind, spec)
        for header in s.controller_headers:
            self.add_controller_header(info, header)
        for value_set in s.value_sets:
            vs = info.value_sets.add()
            _set_preamble(
                vs.preamble,
                self.id(Prefix.VALUE_SET, value_set.name, value_set.name),
                value_set.name,
                self.aliases[value_set.name],
                value_set.annotations,
            )
            for i, f in enumerate(value_set.fields, start=1):
                mf = vs.match.add()
                mf.id = i
                if f.name:
                    mf.name = f.name
                mf.bitwidth = f.width
                mf.match_type = p4info_pb2.MatchField.EXACT
            vs.size = value_set.size
        for register in s.registers:
            r = info.registers.add()
            _set_preamble(
                r.preamble,
                self.id(Prefix.REGISTER, register.name, register.name),
                register.name,
                self.aliases[register.name],
                register.annotations,
            )
            _bitstring(r.type_spec, register.width, register.signed)
            r.size = register.size
        for digest in s.digests:
            d = info.digests.add()
            # p4c gives digests no annotations (nor @id): they name a type, not a declaration.
            _set_preamble(
                d.preamble,
                self.id(Prefix.DIGEST, digest.name, digest.name),
                digest.name,
                self.aliases[digest.name],
                (),
            )
            d.type_spec.struct.name = digest.name
            self.add_struct(info, digest.name, digest.fields)
        if self.touches_type_info():
            info.type_info.SetInParent()
        self.check_duplicates(info)
        return info

    def touches_type_info(self) -> bool:
        """Whether p4c would have called ``mutable_type_info()`` (it then prints ``type_info {}``)."""
        s = self.schema
        return bool(
            s.tables
            or any(a.params for a in s.actions)
            or s.action_profiles
            or any(kind.specs(s) for kind in COUNTER_METER_KINDS)
            or s.registers
            or s.digests
            or any(h.fields for h in s.controller_headers)
        )

    def in_p4info_order(self, kind: CounterMeterKind) -> list[CounterMeterSpec]:
        """The schema's objects of ``kind`` in p4c's order: direct ones in their tables' order."""
        order = {t.name: i for i, t in enumerate(self.schema.tables)}
        return sorted(
            kind.specs(self.schema), key=lambda spec: order.get(owner_table(spec), len(order))
        )

    def add_counter_or_meter(
        self, info: p4info_pb2.P4Info, kind: CounterMeterKind, spec: CounterMeterSpec
    ) -> None:
        message = getattr(info, kind.field).add()
        _set_preamble(
            message.preamble,
            self.id(kind.prefix, spec.name, spec.name),
            spec.name,
            self.aliases[spec.name],
            spec.annotations,
        )
        message.spec.unit = UNITS[spec.unit]
        if isinstance(spec, (DirectCounterSpec, DirectMeterSpec)):
            message.direct_table_id = self.id(Prefix.TABLE, spec.table, spec.name)
        else:
            message.size = spec.size

    def add_struct(self, info: p4info_pb2.P4Info, name: str, fields: Sequence[StructField]) -> None:
        struct = info.type_info.structs[name]
        if struct.members:
            return
        for f in fields:
            member = struct.members.add()
            member.name = f.name
            _bitstring(member.type_spec, f.width, f.signed)

    def add_table(self, info: p4info_pb2.P4Info, table: TableSpec, with_initial: bool) -> None:
        t = info.tables.add()
        _set_preamble(
            t.preamble,
            self.id(Prefix.TABLE, table.name, table.name),
            table.name,
            self.aliases[table.name],
            table.annotations,
        )
        for key in table.keys:
            if key.kind is MatchKind.SELECTOR:
                continue
            mf = t.match_fields.add()
            mf.id = key.id
            mf.name = key.name
            _set_annotations(mf, key.annotations)
            mf.bitwidth = key.width
            mf.match_type = MATCH_TYPES[key.kind]
        for ref in table.actions:
            self.add_action_ref(t, table, ref)
        default = table.default_action
        default_id = self.id(Prefix.ACTION, default.name, f"default action of {table.name}")
        if table.const_default_action:
            t.const_default_action_id = default_id
        if with_initial:
            call = t.initial_default_action
            call.action_id = default_id
            spec = self.actions.get(default.name)
            if spec is not None and default.args:
                if len(default.args) != len(spec.params):
                    raise P4InfoError(
                        f"default action of {table.name}: {default.name} takes "
                        f"{len(spec.params)} argument(s), {len(default.args)} given"
                    )
                for param, value in zip(spec.params, default.args):
                    arg = call.arguments.add()
                    arg.param_id = param.id
                    arg.value = _value_bytes(value, param.width)
        if table.implementation is not None:
            t.implementation_id = self.id(Prefix.ACTION_PROFILE, table.implementation, table.name)
        if table.direct_counter is not None:
            t.direct_resource_ids.append(
                self.id(Prefix.DIRECT_COUNTER, table.direct_counter, table.name)
            )
        if table.direct_meter is not None:
            t.direct_resource_ids.append(
                self.id(Prefix.DIRECT_METER, table.direct_meter, table.name)
            )
        t.size = table.size
        if table.support_timeout:
            t.idle_timeout_behavior = p4info_pb2.Table.NOTIFY_CONTROL
        if table.is_const:
            t.is_const_table = True
        if with_initial and table.const_entries:
            t.has_initial_entries = True

    def add_action_ref(self, t: p4info_pb2.Table, table: TableSpec, ref: ActionRef) -> None:
        r = t.action_refs.add()
        r.id = self.id(Prefix.ACTION, ref.name, table.name)
        names = {a.name for a in ref.annotations}
        scope = ref.scope
        if scope is ActionScope.TABLE_AND_DEFAULT:
            if "tableonly" in names:
                scope = ActionScope.TABLE_ONLY
            elif "defaultonly" in names:
                scope = ActionScope.DEFAULT_ONLY
        annotations = list(ref.annotations)
        # p4c derives the scope from these annotations, so they are always there with it.
        if scope is ActionScope.TABLE_ONLY and "tableonly" not in names:
            annotations.insert(0, Annotation("tableonly"))
        if scope is ActionScope.DEFAULT_ONLY and "defaultonly" not in names:
            annotations.insert(0, Annotation("defaultonly"))
        for a in annotations:
            if a.name not in _NOT_REPEATED:
                r.annotations.append(render_annotation(a))
        r.scope = ACTION_SCOPES[scope]

    def add_action(self, info: p4info_pb2.P4Info, action: ActionSpec) -> None:
        a = info.actions.add()
        _set_preamble(
            a.preamble,
            self.id(Prefix.ACTION, action.name, action.name),
            action.name,
            self.aliases[action.name],
            action.annotations,
        )
        for param in action.params:
            p = a.params.add()
            p.id = param.id
            p.name = param.name
            _set_annotations(p, param.annotations)
            p.bitwidth = param.width

    def add_action_profile(self, info: p4info_pb2.P4Info, profile: ActionProfileSpec) -> None:
        ap = info.action_profiles.add()
        _set_preamble(
            ap.preamble,
            self.id(Prefix.ACTION_PROFILE, profile.name, profile.name),
            profile.name,
            self.aliases[profile.name],
            profile.annotations,
            _PROFILE_FIELDS,
        )
        for table in sorted(profile.tables, key=_name_key):
            ap.table_ids.append(self.id(Prefix.TABLE, table, profile.name))
        ap.with_selector = profile.with_selector
        ap.size = profile.size
        if not profile.with_selector:
            return  # p4c warns about and ignores the selector annotations here
        max_group = _find(profile.annotations, "max_group_size")
        semantics = _find(profile.annotations, "selector_size_semantics")
        max_weight = _find(profile.annotations, "max_member_weight")
        if max_group is not None:
            ap.max_group_size = _p4_int(max_group.body, f"{profile.name}: @max_group_size")
        kind = _unquote(semantics.body).lower() if semantics is not None else None
        if kind == "sum_of_members":
            ap.sum_of_members.SetInParent()
            if max_weight is not None:
                ap.sum_of_members.max_member_weight = _p4_int(
                    max_weight.body, f"{profile.name}: @max_member_weight"
                )
        elif kind == "sum_of_weights" or (kind is None and max_group is not None):
            ap.sum_of_weights.SetInParent()
        elif kind is not None:
            raise P4InfoError(
                f'{profile.name}: @selector_size_semantics must be "sum_of_weights" or '
                f'"sum_of_members", not {kind!r}'
            )

    def add_controller_header(self, info: p4info_pb2.P4Info, header: ControllerHeaderSpec) -> None:
        cpm = info.controller_packet_metadata.add()
        annotations = list(header.annotations)
        if _find(annotations, "controller_header") is None:
            annotations.insert(0, Annotation("controller_header", (f'"{header.name}"',)))
        pid = self.id(Prefix.CONTROLLER_HEADER, header.type_name, header.name)
        _set_preamble(cpm.preamble, pid, header.name, header.name, annotations)
        for i, f in enumerate(header.fields, start=1):
            md = cpm.metadata.add()
            md.id = i
            md.name = f.name
            md.bitwidth = f.width

    @staticmethod
    def check_duplicates(info: p4info_pb2.P4Info) -> None:
        for kind in P4InfoIndex.KINDS:
            seen: set[str] = set()
            for obj in getattr(info, kind):
                if obj.preamble.name in seen:
                    raise P4InfoError(
                        f"name '{obj.preamble.name}' is used for multiple {kind} in the P4Info"
                    )
                seen.add(obj.preamble.name)


def build_p4info(
    schema: ProgramSchema,
    *,
    initial_default_action: bool = True,
    hidden_symbols: Iterable[tuple[int, str]] = (),
) -> p4info_pb2.P4Info:
    """The P4Info p4c would write for ``schema``.

    ``initial_default_action=False`` leaves out ``initial_default_action`` and
    ``has_initial_entries``, as p4c releases before them did. ``hidden_symbols`` are
    ``(prefix, name)`` pairs of ``@hidden`` objects that take part in id and alias assignment
    without being listed (see the module docstring).
    """
    return _Builder(schema, hidden_symbols).build(initial_default_action)


def p4info_text(schema: ProgramSchema, *, header: bool = True, **options: Any) -> str:
    """``build_p4info(schema)`` in protobuf text format, with p4c's two comment lines first."""
    body = text_format.MessageToString(build_p4info(schema, **options))
    return (P4INFO_TEXT_HEADER if header else "") + body


def _format_of(path: str) -> str:
    lower = path.lower()
    if lower.endswith((".txt", ".txtpb", ".textproto", ".pbtxt")):
        return "text"
    if lower.endswith((".bin", ".pb", ".binpb")):
        return "binary"
    if lower.endswith(".json"):
        return "json"
    raise P4InfoError(
        f"{path}: unknown P4Info file kind; known suffixes are .bin, .txt, .txtpb, .json"
    )


def write_p4info(schema: ProgramSchema, path: str, **options: Any) -> None:
    """Write ``schema``'s P4Info to ``path``: ``.txt``/``.txtpb`` text, ``.bin`` binary, ``.json``."""
    fmt = _format_of(path)
    info = build_p4info(schema, **options)
    if fmt == "binary":
        with open(path, "wb") as fh:
            fh.write(info.SerializeToString())
        return
    with open(path, "w", encoding="utf-8") as fh:
        if fmt == "text":
            fh.write(P4INFO_TEXT_HEADER + text_format.MessageToString(info))
        else:
            fh.write(json_format.MessageToJson(info, indent=2) + "\n")


def read_p4info(path: str) -> p4info_pb2.P4Info:
    """Read a P4Info file in any of the formats :func:`write_p4info` writes."""
    fmt = _format_of(path)
    info = p4info_pb2.P4Info()
    if fmt == "binary":
        with open(path, "rb") as fh:
            info.ParseFromString(fh.read())
        return info
    with open(path, encoding="utf-8") as fh:
        data = fh.read()
    if fmt == "text":
        text_format.Parse(data, info)
    else:
        json_format.Parse(data, info)
    return info


# --------------------------------------------------------------------------------------------
# Lookups


_PREFIX_OF_KIND = {
    "tables": Prefix.TABLE,
    "actions": Prefix.ACTION,
    "action_profiles": Prefix.ACTION_PROFILE,
    "counters": Prefix.COUNTER,
    "direct_counters": Prefix.DIRECT_COUNTER,
    "meters": Prefix.METER,
    "direct_meters": Prefix.DIRECT_METER,
    "controller_packet_metadata": Prefix.CONTROLLER_HEADER,
    "value_sets": Prefix.VALUE_SET,
    "registers": Prefix.REGISTER,
    "digests": Prefix.DIGEST,
}
_SINGULAR = {
    "tables": "table",
    "actions": "action",
    "action_profiles": "action profile",
    "counters": "counter",
    "direct_counters": "direct counter",
    "meters": "meter",
    "direct_meters": "direct meter",
    "controller_packet_metadata": "controller packet metadata",
    "value_sets": "value set",
    "registers": "register",
    "digests": "digest",
}


def _suggestion(key: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(key, list(dict.fromkeys(candidates)), n=3, cutoff=0.6)
    if not close:
        return ""
    return "; did you mean " + " or ".join(f"'{c}'" for c in close) + "?"


class _KindIndex:
    """Lookups within one P4Info list (tables, actions, ...)."""

    def __init__(self, kind: str, objects: Iterable[Any]) -> None:
        self.kind = kind
        self.by_id: dict[int, Any] = {}
        self.by_name: dict[str, Any] = {}
        self.by_alias: dict[str, Any] = {}
        self.by_suffix: dict[str, dict[str, Any]] = {}
        for obj in objects:
            pre = obj.preamble
            self.by_id[pre.id] = obj
            self.by_name[pre.name] = obj
            parts = pre.name.split(".")
            for k in range(1, len(parts) + 1):
                self.by_suffix.setdefault(".".join(parts[-k:]), {})[pre.name] = obj
        for obj in self.by_id.values():
            if obj.preamble.alias:
                self.by_alias.setdefault(obj.preamble.alias, obj)

    def candidates(self) -> list[str]:
        return [*self.by_name, *self.by_alias]

    def get(self, key: str | int) -> Any:
        what = _SINGULAR[self.kind]
        if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
            pid = int(key)
            if pid in self.by_id:
                return self.by_id[pid]
            raise P4InfoLookupError(f"unknown {what} id {pid}")
        obj = self.by_name.get(key) or self.by_alias.get(key)
        if obj is not None:
            return obj
        matches = self.by_suffix.get(key, {})
        if len(matches) == 1:
            return next(iter(matches.values()))
        if len(matches) > 1:
            names = ", ".join(sorted(matches))
            raise P4InfoLookupError(f"ambiguous {what} name '{key}': could be {names}")
        raise P4InfoLookupError(f"unknown {what} '{key}'{_suggestion(key, self.candidates())}")


class P4InfoIndex:
    """Find P4Info objects by fully qualified name, alias, unique suffix or id.

    Every failed lookup raises :class:`P4InfoLookupError` (a ``KeyError``) whose message names
    the closest known names (``unknown table 'ipv4_lmp'; did you mean 'ipv4_lpm'?``).
    """

    KINDS: tuple[str, ...] = tuple(_PREFIX_OF_KIND)

    def __init__(self, p4info: p4info_pb2.P4Info) -> None:
        self.p4info = p4info
        self._kinds = {kind: _KindIndex(kind, getattr(p4info, kind)) for kind in self.KINDS}

    @classmethod
    def from_schema(cls, schema: ProgramSchema, **options: Any) -> P4InfoIndex:
        return cls(build_p4info(schema, **options))

    # generic ---------------------------------------------------------------------------------

    def get(self, kind: str, key: str | int) -> Any:
        """The object of list ``kind`` (``"tables"``, ``"actions"``, ...) named or numbered ``key``."""
        return self._index(kind).get(key)

    def id_of(self, kind: str, key: str | int) -> int:
        return int(self.get(kind, key).preamble.id)

    def name_of(self, kind: str, key: str | int) -> str:
        return str(self.get(kind, key).preamble.name)

    def names(self, kind: str) -> list[str]:
        return list(self._index(kind).by_name)

    def by_id(self, pid: int) -> tuple[str, Any]:
        """``(kind, object)`` for any id, the kind told by its prefix."""
        for kind, prefix in _PREFIX_OF_KIND.items():
            if pid >> 24 == prefix and pid in self._kinds[kind].by_id:
                return kind, self._kinds[kind].by_id[pid]
        raise P4InfoLookupError(f"unknown P4Runtime id {pid} ({pid:#010x})")

    def _index(self, kind: str) -> _KindIndex:
        try:
            return self._kinds[kind]
        except KeyError:
            raise P4InfoLookupError(
                f"unknown P4Info object kind '{kind}'{_suggestion(kind, self.KINDS)}"
            ) from None

    # per kind --------------------------------------------------------------------------------

    def table(self, key: str | int) -> p4info_pb2.Table:
        return self.get("tables", key)

    def action(self, key: str | int) -> p4info_pb2.Action:
        return self.get("actions", key)

    def action_profile(self, key: str | int) -> p4info_pb2.ActionProfile:
        return self.get("action_profiles", key)

    def counter(self, key: str | int) -> p4info_pb2.Counter:
        return self.get("counters", key)

    def direct_counter(self, key: str | int) -> p4info_pb2.DirectCounter:
        return self.get("direct_counters", key)

    def meter(self, key: str | int) -> p4info_pb2.Meter:
        return self.get("meters", key)

    def direct_meter(self, key: str | int) -> p4info_pb2.DirectMeter:
        return self.get("direct_meters", key)

    def register(self, key: str | int) -> p4info_pb2.Register:
        return self.get("registers", key)

    def digest(self, key: str | int) -> p4info_pb2.Digest:
        return self.get("digests", key)

    def value_set(self, key: str | int) -> p4info_pb2.ValueSet:
        return self.get("value_sets", key)

    def controller_packet_metadata(self, key: str | int) -> p4info_pb2.ControllerPacketMetadata:
        return self.get("controller_packet_metadata", key)

    # members ---------------------------------------------------------------------------------

    def match_field(self, table: str | int, key: str | int) -> p4info_pb2.MatchField:
        t = self.table(table)
        return self._member(t.match_fields, key, f"match field of table {t.preamble.name}")

    def param(self, action: str | int, key: str | int) -> p4info_pb2.Action.Param:
        a = self.action(action)
        return self._member(a.params, key, f"parameter of action {a.preamble.name}")

    def packet_metadata(
        self, header: str | int, key: str | int
    ) -> p4info_pb2.ControllerPacketMetadata.Metadata:
        h = self.controller_packet_metadata(header)
        return self._member(h.metadata, key, f"metadata field of {h.preamble.name}")

    def table_actions(self, table: str | int) -> list[p4info_pb2.Action]:
        """The actions a table lists, in its ``action_refs`` order."""
        return [self.action(ref.id) for ref in self.table(table).action_refs]

    def action_ref(self, table: str | int, action: str | int) -> p4info_pb2.ActionRef:
        """The table's reference to ``action`` (for its scope); an error if it does not list it."""
        t = self.table(table)
        a = self.action(action)
        for ref in t.action_refs:
            if ref.id == a.preamble.id:
                return ref
        listed = [self.action(r.id).preamble.name for r in t.action_refs]
        raise P4InfoLookupError(
            f"action '{a.preamble.name}' is not an action of table {t.preamble.name} "
            f"(its actions: {', '.join(listed)})"
        )

    @staticmethod
    def _member(members: Iterable[Any], key: str | int, what: str) -> Any:
        items = list(members)
        for m in items:
            if (isinstance(key, int) and m.id == key) or m.name == key:
                return m
        if isinstance(key, int):
            raise P4InfoLookupError(f"unknown {what} with id {key}")
        raise P4InfoLookupError(
            f"unknown {what} '{key}'{_suggestion(key, [m.name for m in items])}"
        )
