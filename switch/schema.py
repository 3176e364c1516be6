"""The control-plane view of a compiled P4 program: every object a controller can name.

The compiler (:mod:`switch.compile`) produces one :class:`ProgramSchema` per program. The
pipeline state (:mod:`switch.pipeline`), the P4Info writer (:mod:`switch.p4info`), the P4Runtime
server (:mod:`switch.p4rt`) and the STF runner read it; none of them looks at the syntax tree. Names are fully qualified the way p4c writes them in P4Info
(``MyIngress.ipv4_lpm``, ``MyIngress.c1.t`` for a nested control instance ``c1``, ``NoAction``
for a top-level action), after ``@name`` annotations have been applied.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class MatchKind(enum.Enum):
    """Match kinds of table keys (core.p4's exact/ternary/lpm, v1model's range/optional/selector)."""

    EXACT = "exact"
    LPM = "lpm"
    TERNARY = "ternary"
    RANGE = "range"
    OPTIONAL = "optional"
    SELECTOR = "selector"


class ActionScope(enum.Enum):
    """Where an action of a table may be used (P4Info ``ActionRef.Scope``)."""

    TABLE_AND_DEFAULT = 0
    TABLE_ONLY = 1  # @tableonly
    DEFAULT_ONLY = 2  # @defaultonly


class CounterUnit(enum.Enum):
    """``CounterType`` of v1model (P4Info ``CounterSpec.Unit``)."""

    BYTES = "bytes"
    PACKETS = "packets"
    BOTH = "packets_and_bytes"


class MeterUnit(enum.Enum):
    """``MeterType`` of v1model (P4Info ``MeterSpec.Unit``)."""

    BYTES = "bytes"
    PACKETS = "packets"


@dataclass(frozen=True)
class Annotation:
    """A P4 annotation: ``@name("x")`` has name "name" and body ("\\"x\\"",) as source tokens."""

    name: str
    body: tuple[str, ...] = ()


@dataclass(frozen=True)
class ParamSpec:
    """An action parameter supplied by the control plane (action data)."""

    id: int  # 1..n in declaration order
    name: str
    width: int
    annotations: tuple[Annotation, ...] = ()


@dataclass(frozen=True)
class ActionSpec:
    """An action, with only its directionless (action-data) parameters listed."""

    name: str  # fully qualified, e.g. "MyIngress.ipv4_forward" or "NoAction"
    params: tuple[ParamSpec, ...]
    annotations: tuple[Annotation, ...] = ()


@dataclass(frozen=True)
class KeySpec:
    """One key element of a table."""

    id: int  # 1..n in declaration order
    name: str  # the key expression as p4c writes it ("hdr.ipv4.dstAddr") or its @name
    width: int
    kind: MatchKind
    annotations: tuple[Annotation, ...] = ()


@dataclass(frozen=True)
class ActionRef:
    """An action listed in a table's ``actions``."""

    name: str  # fully qualified action name
    scope: ActionScope = ActionScope.TABLE_AND_DEFAULT
    annotations: tuple[Annotation, ...] = ()


@dataclass(frozen=True)
class ActionCall:
    """An action with its action-data arguments, as used in entries and defaults."""

    name: str
    args: tuple[int, ...] = ()


@dataclass(frozen=True)
class ConstEntry:
    """An entry of a table's ``entries`` list.

    ``match`` has one value per key element, in the encodings of
    :mod:`switch.pipeline.tables`: EXACT int; LPM (value, prefix_len); TERNARY (value, mask);
    RANGE (lo, hi); OPTIONAL int or None for a wildcard. ``priority`` follows P4Runtime (a
    larger number wins) and is already converted from the source's order, ``priority=`` (with
    ``largest_priority_wins``/``priority_delta``) or ``@priority``. ``is_const``: the control
    plane may not modify or delete it (every entry of ``const entries``; those marked
    ``const`` in a mutable ``entries`` list).
    """

    match: tuple[object, ...]
    action: ActionCall
    priority: int
    is_const: bool = True


@dataclass(frozen=True)
class TableSpec:
    name: str
    keys: tuple[KeySpec, ...]  # selector keys included, in declaration order
    actions: tuple[ActionRef, ...]
    default_action: ActionCall  # NoAction when the program gives none
    const_default_action: bool
    size: int  # 1024 when the program gives none, as p4c
    is_const: bool  # `const entries`: the entry set is immutable
    const_entries: tuple[ConstEntry, ...] = ()
    implementation: str | None = None  # fully qualified action profile/selector name
    direct_counter: str | None = None
    direct_meter: str | None = None
    support_timeout: bool = False
    annotations: tuple[Annotation, ...] = ()

    @property
    def match_keys(self) -> tuple[KeySpec, ...]:
        """Keys that take part in matching (selector keys excluded)."""
        return tuple(k for k in self.keys if k.kind is not MatchKind.SELECTOR)

    @property
    def selector_keys(self) -> tuple[KeySpec, ...]:
        return tuple(k for k in self.keys if k.kind is MatchKind.SELECTOR)

    @property
    def needs_priority(self) -> bool:
        """True when entries carry a priority (some key is ternary, range or optional)."""
        return any(
            k.kind in (MatchKind.TERNARY, MatchKind.RANGE, MatchKind.OPTIONAL) for k in self.keys
        )


@dataclass(frozen=True)
class ActionProfileSpec:
    """``action_profile(size)`` or ``action_selector(algo, size, width)``."""

    name: str
    size: int
    tables: tuple[str, ...]  # fully qualified names of the tables using it
    with_selector: bool
    algorithm: str | None = None  # HashAlgorithm member name for selectors, e.g. "crc16"
    output_width: int | None = None  # selector hash width in bits
    annotations: tuple[Annotation, ...] = ()


@dataclass(frozen=True)
class CounterSpec:
    name: str
    size: int
    unit: CounterUnit
    annotations: tuple[Annotation, ...] = ()


@dataclass(frozen=True)
class DirectCounterSpec:
    name: str
    unit: CounterUnit
    table: str  # fully qualified name of the owning table
    annotations: tuple[Annotation, ...] = ()


@dataclass(frozen=True)
class MeterSpec:
    name: str
    size: int
    unit: MeterUnit
    annotations: tuple[Annotation, ...] = ()


@dataclass(frozen=True)
class DirectMeterSpec:
    name: str
    unit: MeterUnit
    table: str
    annotations: tuple[Annotation, ...] = ()


@dataclass(frozen=True)
class RegisterSpec:
    name: str
    size: int
    width: int  # element width in bits (bit<W> or int<W> element type)
    signed: bool = False
    annotations: tuple[Annotation, ...] = ()


@dataclass(frozen=True)
class StructField:
    name: str
    width: int  # for bit<W>/int<W>/bool(1)/serializable enums; nested structs are flattened
    signed: bool = False


@dataclass(frozen=True)
class DigestSpec:
    """A ``digest<T>(receiver, data)`` call site type: P4Info names the digest by T's name."""

    name: str  # the struct type name (p4c uses the type name as the digest's name)
    fields: tuple[StructField, ...]
    annotations: tuple[Annotation, ...] = ()


@dataclass(frozen=True)
class ControllerHeaderSpec:
    """A header type annotated ``@controller_header("packet_in" | "packet_out")``."""

    name: str  # the annotation value: "packet_in" or "packet_out"
    type_name: str  # the header type name (hashed for the P4Info id, as p4c does)
    fields: tuple[StructField, ...]  # metadata ids are 1..n in this order
    annotations: tuple[Annotation, ...] = ()


@dataclass(frozen=True)
class ValueSetSpec:
    """A parser ``value_set<T>(size)``."""

    name: str
    size: int
    fields: tuple[StructField, ...]  # one per tuple/struct member, or one for a bit<W>
    annotations: tuple[Annotation, ...] = ()


@dataclass
class ProgramSchema:
    """Everything a controller can name in one program, in declaration order."""

    arch: str = "v1model"
    actions: list[ActionSpec] = field(default_factory=list)
    tables: list[TableSpec] = field(default_factory=list)
    action_profiles: list[ActionProfileSpec] = field(default_factory=list)
    counters: list[CounterSpec] = field(default_factory=list)
    direct_counters: list[DirectCounterSpec] = field(default_factory=list)
    meters: list[MeterSpec] = field(default_factory=list)
    direct_meters: list[DirectMeterSpec] = field(default_factory=list)
    registers: list[RegisterSpec] = field(default_factory=list)
    digests: list[DigestSpec] = field(default_factory=list)
    controller_headers: list[ControllerHeaderSpec] = field(default_factory=list)
    value_sets: list[ValueSetSpec] = field(default_factory=list)

    def table(self, name: str) -> TableSpec:
        for t in self.tables:
            if t.name == name:
                return t
        raise KeyError(name)

    def action(self, name: str) -> ActionSpec:
        for a in self.actions:
            if a.name == name:
                return a
        raise KeyError(name)
