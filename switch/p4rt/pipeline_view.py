"""The P4Runtime view of a program: the ids of the controller's P4Info mapped onto the schema.

Requests name objects by the ids of the P4Info the controller pushed with
``SetForwardingPipelineConfig``; the pipeline state (:mod:`switch.pipeline`) names them by fully
qualified name.
:func:`build_view` checks that a P4Info agrees with the compiled program -- every object it lists
exists with the same match fields (names, kinds, widths), action parameters, sizes and units; the
ids may be the controller's own -- and returns the maps every entity handler uses. Objects of the
program that the P4Info leaves out are simply not addressable.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from p4.config.v1 import p4info_pb2

from switch.p4info import (
    ACTION_SCOPES,
    COUNTER_METER_KINDS,
    MATCH_TYPES,
    UNITS,
    CounterMeterKind,
    P4InfoIndex,
)
from switch.p4rt.status import INVALID_ARGUMENT, P4RTError
from switch.schema import (
    ActionProfileSpec,
    ActionScope,
    ActionSpec,
    DirectCounterSpec,
    DirectMeterSpec,
    KeySpec,
    ParamSpec,
    ProgramSchema,
    StructField,
    TableSpec,
    ValueSetSpec,
)

V = TypeVar("V")

#: The action scope of each P4Info ``ActionRef.Scope``.
SCOPES = {wire: scope for scope, wire in ACTION_SCOPES.items()}
MAX_PROBLEMS_SHOWN = 8


class PipelineMismatch(Exception):
    """The P4Info does not describe the compiled program; ``problems`` says where."""

    def __init__(self, problems: list[str]) -> None:
        shown = "; ".join(problems[:MAX_PROBLEMS_SHOWN])
        more = len(problems) - MAX_PROBLEMS_SHOWN
        if more > 0:
            shown += f"; and {more} more"
        super().__init__(f"P4Info does not match the P4 program: {shown}")
        self.problems = problems


@dataclass(frozen=True)
class FieldView:
    """A match field: its P4Info id and its position in the pipeline's match tuple."""

    id: int
    index: int
    key: KeySpec


@dataclass(frozen=True)
class ParamView:
    id: int
    index: int
    spec: ParamSpec


@dataclass
class ActionView:
    id: int
    name: str
    spec: ActionSpec
    params: dict[int, ParamView]  # by P4Info param id
    param_ids: tuple[int, ...]  # P4Info id of each argument of an ActionCall, in order


@dataclass
class ExternView:
    """A counter, meter, register (or their direct forms): id, name, size, unit, element type."""

    id: int
    name: str
    size: int = 0
    unit: int = 0  # p4info CounterSpec.Unit / MeterSpec.Unit
    width: int = 0
    signed: bool = False
    table: str = ""  # the owning table of a direct counter or meter


@dataclass
class TableView:
    id: int
    name: str
    spec: TableSpec
    fields: dict[int, FieldView]  # by P4Info match field id
    field_ids: tuple[int, ...]  # P4Info id of each match key of the pipeline, in order
    actions: dict[int, ActionScope] = field(default_factory=dict)  # action id -> scope
    profile_id: int | None = None
    direct_counter: ExternView | None = None
    direct_meter: ExternView | None = None


@dataclass
class ProfileView:
    id: int
    name: str
    spec: ActionProfileSpec
    actions: dict[int, ActionScope]  # actions its tables allow in entries
    max_group_size: int = 0
    sum_of_members: bool = False  # selector_size_semantics: members count, not weights
    max_member_weight: int = 0  # with sum_of_members; 0 = no limit


@dataclass
class DigestView:
    id: int
    name: str
    fields: tuple[StructField, ...]


@dataclass
class ValueSetView:
    id: int
    name: str
    spec: ValueSetSpec
    field_ids: tuple[int, ...]
    fields: dict[int, tuple[int, int]]  # match id -> (position, width)


@dataclass
class PacketMetaView:
    """A controller header: P4Info metadata ids mapped onto the header's fields (1-based)."""

    id: int
    by_id: dict[int, tuple[int, int]]  # metadata id -> (field number, width)
    ids: dict[int, int]  # field number -> metadata id


@dataclass
class PipelineView:
    """Every P4Info object of a running pipeline, by id, with its schema counterpart."""

    tables: dict[int, TableView] = field(default_factory=dict)
    actions: dict[int, ActionView] = field(default_factory=dict)
    profiles: dict[int, ProfileView] = field(default_factory=dict)
    counters: dict[int, ExternView] = field(default_factory=dict)
    direct_counters: dict[int, ExternView] = field(default_factory=dict)
    meters: dict[int, ExternView] = field(default_factory=dict)
    direct_meters: dict[int, ExternView] = field(default_factory=dict)
    registers: dict[int, ExternView] = field(default_factory=dict)
    digests: dict[int, DigestView] = field(default_factory=dict)
    value_sets: dict[int, ValueSetView] = field(default_factory=dict)
    packet_in: PacketMetaView | None = None
    packet_out: PacketMetaView | None = None
    action_ids: dict[str, int] = field(default_factory=dict)
    digest_ids: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def _get(objects: dict[int, V], pid: int, what: str) -> V:
        try:
            return objects[pid]
        except KeyError:
            raise P4RTError(INVALID_ARGUMENT, f"{pid} is not a valid {what} id") from None

    def table(self, pid: int) -> TableView:
        return self._get(self.tables, pid, "table")

    def action(self, pid: int) -> ActionView:
        return self._get(self.actions, pid, "action")

    def profile(self, pid: int) -> ProfileView:
        return self._get(self.profiles, pid, "action profile")

    def counter(self, pid: int) -> ExternView:
        if pid in self.direct_counters:
            raise P4RTError(INVALID_ARGUMENT, f"{pid} is a direct counter; use DirectCounterEntry")
        return self._get(self.counters, pid, "counter")

    def meter(self, pid: int) -> ExternView:
        if pid in self.direct_meters:
            raise P4RTError(INVALID_ARGUMENT, f"{pid} is a direct meter; use DirectMeterEntry")
        return self._get(self.meters, pid, "meter")

    def register(self, pid: int) -> ExternView:
        return self._get(self.registers, pid, "register")

    def digest(self, pid: int) -> DigestView:
        return self._get(self.digests, pid, "digest")

    def value_set(self, pid: int) -> ValueSetView:
        return self._get(self.value_sets, pid, "value set")

    def action_id(self, name: str) -> int:
        try:
            return self.action_ids[name]
        except KeyError:
            raise P4RTError(INVALID_ARGUMENT, f"action '{name}' is not in the P4Info") from None


class _Builder:
    def __init__(self, info: p4info_pb2.P4Info, schema: ProgramSchema) -> None:
        self.info = info
        self.schema = schema
        self.problems: list[str] = []
        self.view = PipelineView()

    def problem(self, text: str) -> None:
        self.problems.append(text)

    def build(self) -> PipelineView:
        self.check_ids()
        self.add_actions()
        self.add_tables()
        self.add_profiles()
        for kind in COUNTER_METER_KINDS:
            self.add_counter_or_meter(kind)
        self.add_registers()
        self.add_digests()
        self.add_value_sets()
        self.add_packet_metadata()
        if self.problems:
            raise PipelineMismatch(self.problems)
        return self.view

    def check_ids(self) -> None:
        seen: dict[int, str] = {}
        for kind in P4InfoIndex.KINDS:
            for obj in getattr(self.info, kind):
                pid, name = obj.preamble.id, obj.preamble.name
                if pid == 0:
                    self.problem(f"'{name}' has id 0")
                elif pid in seen:
                    self.problem(f"id {pid} is used by both '{seen[pid]}' and '{name}'")
                seen[pid] = name

    def add_actions(self) -> None:
        specs = {a.name: a for a in self.schema.actions}
        for a in self.info.actions:
            name = a.preamble.name
            spec = specs.get(name)
            if spec is None:
                self.problem(f"the program has no action '{name}'")
                continue
            by_name = {p.name: p for p in spec.params}
            params: dict[int, ParamView] = {}
            ids: dict[str, int] = {}
            for p in a.params:
                ps = by_name.get(p.name)
                if ps is None:
                    self.problem(f"action '{name}' has no parameter '{p.name}'")
                elif p.bitwidth != ps.width:
                    self.problem(
                        f"action '{name}' parameter '{p.name}' is {ps.width} bits, not {p.bitwidth}"
                    )
                elif p.id in params:
                    self.problem(f"action '{name}' lists parameter id {p.id} twice")
                else:
                    params[p.id] = ParamView(p.id, spec.params.index(ps), ps)
                    ids[p.name] = p.id
            if len(a.params) != len(spec.params):
                self.problem(
                    f"action '{name}' has {len(spec.params)} parameter(s), the P4Info "
                    f"lists {len(a.params)}"
                )
                continue
            param_ids = tuple(ids.get(p.name, 0) for p in spec.params)
            self.view.actions[a.preamble.id] = ActionView(
                a.preamble.id, name, spec, params, param_ids
            )
            self.view.action_ids[name] = a.preamble.id

    def add_tables(self) -> None:
        specs = {t.name: t for t in self.schema.tables}
        profiles = {p.preamble.id: p.preamble.name for p in self.info.action_profiles}
        for t in self.info.tables:
            name = t.preamble.name
            spec = specs.get(name)
            if spec is None:
                self.problem(f"the program has no table '{name}'")
                continue
            fields = self.table_fields(name, spec, t.match_fields)
            if fields is None:
                continue
            refs = {r.name: r for r in spec.actions}
            actions: dict[int, ActionScope] = {}
            for ref in t.action_refs:
                av = self.view.actions.get(ref.id)
                if av is None:
                    self.problem(f"table '{name}' refers to unknown action id {ref.id}")
                    continue
                sref = refs.get(av.name)
                if sref is None:
                    self.problem(f"table '{name}' has no action '{av.name}'")
                    continue
                if SCOPES.get(ref.scope) is not sref.scope:
                    self.problem(f"table '{name}' action '{av.name}' has scope {sref.scope.name}")
                actions[ref.id] = sref.scope
            impl = profiles.get(t.implementation_id) if t.implementation_id else None
            if t.implementation_id and impl is None:
                self.problem(
                    f"table '{name}' refers to unknown action profile {t.implementation_id}"
                )
            elif impl != spec.implementation:
                self.problem(f"table '{name}' implementation is {spec.implementation or 'none'}")
            if t.is_const_table != spec.is_const:
                self.problem(f"table '{name}' is_const_table should be {spec.is_const}")
            if bool(t.const_default_action_id) != spec.const_default_action:
                self.problem(f"table '{name}' const default action does not match")
            field_ids = tuple(f.id for f in sorted(fields.values(), key=lambda f: f.index))
            self.view.tables[t.preamble.id] = TableView(
                t.preamble.id, name, spec, fields, field_ids, actions, t.implementation_id or None
            )

    def table_fields(
        self, name: str, spec: TableSpec, given: Iterable[p4info_pb2.MatchField]
    ) -> dict[int, FieldView] | None:
        keys = spec.match_keys
        by_name = {k.name: (i, k) for i, k in enumerate(keys)}
        fields: dict[int, FieldView] = {}
        ok = True
        listed = 0
        for mf in given:
            listed += 1
            hit = by_name.get(mf.name)
            if hit is None:
                self.problem(f"table '{name}' has no match field '{mf.name}'")
                ok = False
                continue
            i, k = hit
            if mf.bitwidth != k.width or mf.match_type != MATCH_TYPES.get(k.kind):
                self.problem(
                    f"table '{name}' match field '{mf.name}' is {k.kind.value} {k.width} bits"
                )
                ok = False
            if mf.id in fields or any(f.index == i for f in fields.values()):
                self.problem(f"table '{name}' lists match field '{mf.name}' twice")
                ok = False
            fields[mf.id] = FieldView(mf.id, i, k)
        if listed != len(keys):
            self.problem(
                f"table '{name}' has {len(keys)} match field(s), the P4Info lists {listed}"
            )
            ok = False
        return fields if ok else None

    def add_profiles(self) -> None:
        specs = {p.name: p for p in self.schema.action_profiles}
        for p in self.info.action_profiles:
            name = p.preamble.name
            spec = specs.get(name)
            if spec is None:
                self.problem(f"the program has no action profile '{name}'")
                continue
            if p.with_selector != spec.with_selector:
                self.problem(
                    f"action profile '{name}' with_selector should be {spec.with_selector}"
                )
                continue
            actions: dict[int, ActionScope] = {}
            for tv in self.view.tables.values():
                if tv.spec.implementation == name:
                    tv.profile_id = p.preamble.id
                    for aid, scope in tv.actions.items():
                        if aid not in actions or actions[aid] is ActionScope.DEFAULT_ONLY:
                            actions[aid] = scope
            self.view.profiles[p.preamble.id] = ProfileView(
                p.preamble.id,
                name,
                spec,
                actions,
                max(0, p.max_group_size),
                p.HasField("sum_of_members"),
                max(0, p.sum_of_members.max_member_weight),
            )

    def add_counter_or_meter(self, kind: CounterMeterKind) -> None:
        specs = {spec.name: spec for spec in kind.specs(self.schema)}
        views: dict[int, ExternView] = getattr(self.view, kind.field)
        for msg in getattr(self.info, kind.field):
            pid, name = msg.preamble.id, msg.preamble.name
            spec = specs.get(name)
            if spec is None:
                self.problem(f"the program has no {kind.what} '{name}'")
            elif isinstance(spec, (DirectCounterSpec, DirectMeterSpec)):
                tv = self.view.tables.get(msg.direct_table_id)
                if tv is None or tv.name != spec.table or UNITS[spec.unit] != msg.spec.unit:
                    self.problem(
                        f"{kind.what} '{name}' belongs to '{spec.table}' and is {spec.unit.value}"
                    )
                    continue
                ev = ExternView(pid, name, 0, msg.spec.unit, table=spec.table)
                if isinstance(spec, DirectCounterSpec):
                    tv.direct_counter = ev
                else:
                    tv.direct_meter = ev
                views[pid] = ev
            elif spec.size != msg.size or UNITS[spec.unit] != msg.spec.unit:
                self.problem(f"{kind.what} '{name}' is {spec.unit.value} with size {spec.size}")
            else:
                views[pid] = ExternView(pid, name, spec.size, msg.spec.unit)

    def add_registers(self) -> None:
        specs = {r.name: r for r in self.schema.registers}
        for r in self.info.registers:
            spec = specs.get(r.preamble.name)
            bs = r.type_spec.bitstring
            kind = bs.WhichOneof("type_spec")
            width = bs.bit.bitwidth if kind == "bit" else bs.int.bitwidth if kind == "int" else 0
            if spec is None:
                self.problem(f"the program has no register '{r.preamble.name}'")
            elif spec.size != r.size or spec.width != width or spec.signed != (kind == "int"):
                sign = "int" if spec.signed else "bit"
                self.problem(f"register '{spec.name}' holds {spec.size} {sign}<{spec.width}>")
            else:
                self.view.registers[r.preamble.id] = ExternView(
                    r.preamble.id, spec.name, spec.size, 0, spec.width, spec.signed
                )

    def add_digests(self) -> None:
        specs = {d.name: d for d in self.schema.digests}
        for d in self.info.digests:
            spec = specs.get(d.preamble.name)
            if spec is None:
                self.problem(f"the program has no digest '{d.preamble.name}'")
                continue
            self.view.digests[d.preamble.id] = DigestView(d.preamble.id, spec.name, spec.fields)
            self.view.digest_ids[spec.name] = d.preamble.id

    def add_value_sets(self) -> None:
        specs = {v.name: v for v in self.schema.value_sets}
        for v in self.info.value_sets:
            spec = specs.get(v.preamble.name)
            if spec is None:
                self.problem(f"the program has no value set '{v.preamble.name}'")
                continue
            widths = [mf.bitwidth for mf in v.match]
            ids = [mf.id for mf in v.match]
            if (
                widths != [f.width for f in spec.fields]
                or spec.size != v.size
                or len(set(ids)) != len(ids)
            ):
                self.problem(f"value set '{spec.name}' does not match the program")
                continue
            fields = {mid: (i, w) for i, (mid, w) in enumerate(zip(ids, widths))}
            self.view.value_sets[v.preamble.id] = ValueSetView(
                v.preamble.id, spec.name, spec, tuple(ids), fields
            )

    def add_packet_metadata(self) -> None:
        headers = {h.name: h for h in self.schema.controller_headers}
        for cpm in self.info.controller_packet_metadata:
            name = cpm.preamble.name
            spec = headers.get(name)
            if spec is None:
                self.problem(f'the program has no @controller_header("{name}")')
                continue
            numbers = {f.name: (i, f.width) for i, f in enumerate(spec.fields, start=1)}
            by_id: dict[int, tuple[int, int]] = {}
            ok = len(cpm.metadata) == len(spec.fields)
            for md in cpm.metadata:
                hit = numbers.get(md.name)
                if hit is None or hit[1] != md.bitwidth or md.id in by_id:
                    ok = False
                    continue
                by_id[md.id] = hit
            if not ok:
                self.problem(f"controller header '{name}' fields do not match the program")
                continue
            pmv = PacketMetaView(cpm.preamble.id, by_id, {n: mid for mid, (n, _w) in by_id.items()})
            if name == "packet_in":
                self.view.packet_in = pmv
            elif name == "packet_out":
                self.view.packet_out = pmv


def build_view(p4info: p4info_pb2.P4Info, schema: ProgramSchema) -> PipelineView:
    """The id maps of ``p4info`` onto ``schema``; :class:`PipelineMismatch` if they disagree."""
    return _Builder(p4info, schema).build()
