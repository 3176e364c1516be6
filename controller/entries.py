"""Target-neutral control-plane entities, by P4 name: what the controller wants on a switch.

Everything here is a frozen dataclass of names and integers; :mod:`controller.schema` turns them
into P4Runtime messages through a P4Info (and back, for read-back), so nothing here knows an id.

* :class:`TableEntry` -- a match (exact / LPM fields; an LPM field left out is a wildcard), a
  priority, and either a direct :class:`ActionCall` or an action-selector ``group_id``.
* :class:`Member`, :class:`Group` -- action-profile members and selector groups.

Every entity has a ``key``: two entities with the same key are the same object on the switch
(INSERT once, MODIFY when the rest differs, DELETE by key). :func:`index` and :func:`diff` work
on ``{key: entity}`` maps.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field

EntityKey = tuple[Hashable, ...]
"""What identifies an entity on a switch (its table and match, profile and id...)."""


@dataclass(frozen=True, order=True)
class Exact:
    """An exact match on ``field`` (P4Info match-field name)."""

    field: str
    value: int

    def render(self) -> str:
        return f"{self.field}={self.value}"


@dataclass(frozen=True, order=True)
class Lpm:
    """A longest-prefix match; ``value`` has no bits beyond ``prefix_len``."""

    field: str
    value: int
    prefix_len: int

    def render(self) -> str:
        return f"{self.field}={format_value(self.value, 128)}/{self.prefix_len}"


Match = Exact | Lpm


@dataclass(frozen=True)
class ActionCall:
    """An action by name and its parameters by name (in P4Info order when encoded)."""

    name: str
    params: tuple[tuple[str, int], ...] = ()

    def param(self, name: str) -> int:
        for k, v in self.params:
            if k == name:
                return v
        raise KeyError(name)

    def render(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in self.params)
        return f"{short(self.name)}({args})"


@dataclass(frozen=True)
class TableEntry:
    """One table entry: a direct action, or (for a table with a selector) a group."""

    table: str
    match: tuple[Match, ...]
    action: ActionCall | None = None
    group_id: int | None = None
    priority: int = 0

    def __post_init__(self) -> None:
        if (self.action is None) == (self.group_id is None):
            raise ValueError(f"{self.table}: an entry needs exactly one of action and group_id")
        object.__setattr__(self, "match", tuple(sorted(self.match, key=lambda m: m.field)))

    @property
    def key(self) -> EntityKey:
        return ("table", self.table, self.match, self.priority)

    def render(self) -> str:
        target = self.action.render() if self.action else f"group {self.group_id}"
        match = " ".join(m.render() for m in self.match) or "*"
        return f"{short(self.table)} {match} -> {target}"


@dataclass(frozen=True)
class Member:
    """An action-profile member."""

    profile: str
    member_id: int
    action: ActionCall

    @property
    def key(self) -> EntityKey:
        return ("member", self.profile, self.member_id)

    def render(self) -> str:
        return f"{short(self.profile)} member {self.member_id} -> {self.action.render()}"


@dataclass(frozen=True)
class Group:
    """An action-selector group of members (weight 1 each)."""

    profile: str
    group_id: int
    members: tuple[int, ...] = field(default_factory=tuple)
    max_size: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "members", tuple(sorted(self.members)))

    @property
    def key(self) -> EntityKey:
        return ("group", self.profile, self.group_id)

    def render(self) -> str:
        return f"{short(self.profile)} group {self.group_id} -> members {list(self.members)}"


Entity = TableEntry | Member | Group
EntityMap = dict[EntityKey, Entity]


def index(entities: Iterable[Entity]) -> EntityMap:
    """``{key: entity}``; a key given twice is a bug in whoever computed the entities."""
    out: EntityMap = {}
    for e in entities:
        if e.key in out and out[e.key] != e:
            raise ValueError(f"two different entities with one key: {out[e.key]} / {e}")
        out[e.key] = e
    return out


@dataclass(frozen=True)
class Diff:
    """What turns ``installed`` into ``desired``: inserts, modifies (new values), deletes."""

    inserts: tuple[Entity, ...] = ()
    modifies: tuple[Entity, ...] = ()
    deletes: tuple[Entity, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.inserts or self.modifies or self.deletes)

    def __len__(self) -> int:
        return len(self.inserts) + len(self.modifies) + len(self.deletes)


def diff(installed: Mapping[EntityKey, Entity], desired: Mapping[EntityKey, Entity]) -> Diff:
    """The updates that make ``installed`` equal ``desired`` (both keyed by entity key)."""
    inserts = tuple(e for k, e in desired.items() if k not in installed)
    modifies = tuple(e for k, e in desired.items() if k in installed and installed[k] != e)
    deletes = tuple(e for k, e in installed.items() if k not in desired)
    return Diff(inserts, modifies, deletes)


def short(name: str) -> str:
    """``FabricIngress.routes`` -> ``routes``."""
    return name.rsplit(".", 1)[-1]


def format_value(value: int, width: int) -> str:
    """An IPv6 address for 128-bit values, a MAC for 48-bit ones, else decimal."""
    if width == 128:
        return str(ipaddress.IPv6Address(value))
    if width == 48:
        return ":".join(f"{value >> s & 0xFF:02x}" for s in range(40, -8, -8))
    return str(value)


def mac_int(mac: str) -> int:
    """``02:01:00:00:00:01`` -> integer."""
    return int(mac.replace(":", ""), 16)


def prefix(text: str) -> tuple[int, int]:
    """``fcbb:bb00:1000::/48`` -> (value, prefix length), host bits cleared."""
    net = ipaddress.IPv6Network(text, strict=False)
    return int(net.network_address), net.prefixlen
