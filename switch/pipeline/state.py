"""All forwarding state of one pipeline, built from a program's :class:`ProgramSchema`.

Objects are held in dicts by fully qualified name; the ``table()``, ``counter()``, ... helpers
also accept a unique dotted suffix (``ipv4_lpm`` for ``MyIngress.ipv4_lpm``) and suggest the
nearest name when one is unknown.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from switch.pipeline.errors import Code, StateError
from switch.pipeline.externs import Counter, DirectCounter, DirectMeter, Meter, Register
from switch.pipeline.names import resolve_name
from switch.pipeline.pre import PacketReplicationEngine
from switch.pipeline.profiles import ActionProfile
from switch.pipeline.tables import Table
from switch.pipeline.valuesets import ValueSet
from switch.schema import ActionRef, ActionScope, ProgramSchema

T = TypeVar("T")

DIGEST_QUEUE_LIMIT = 65536


@dataclass(frozen=True)
class DigestConfig:
    """P4Runtime ``DigestEntry.Config``."""

    max_timeout_ns: int = 0
    max_list_size: int = 1
    ack_timeout_ns: int = 0


class SwitchState:
    def __init__(self, schema: ProgramSchema) -> None:
        self.schema = schema
        self.actions = {a.name: a for a in schema.actions}
        self.action_profiles: dict[str, ActionProfile] = {}
        for p in schema.action_profiles:
            refs = _profile_refs(schema, p.tables)
            self.action_profiles[p.name] = ActionProfile(p, self.actions, refs)
        self.tables: dict[str, Table] = {}
        for t in schema.tables:
            profile = None
            if t.implementation is not None:
                profile = self._get("action profile", t.implementation, self.action_profiles)
            self.tables[t.name] = Table(t, self.actions, profile)
        self.counters = {c.name: Counter(c) for c in schema.counters}
        self.direct_counters = {c.name: DirectCounter(c) for c in schema.direct_counters}
        self.meters = {m.name: Meter(m) for m in schema.meters}
        self.direct_meters = {m.name: DirectMeter(m) for m in schema.direct_meters}
        self.registers = {r.name: Register(r) for r in schema.registers}
        self.value_sets = {v.name: ValueSet(v) for v in schema.value_sets}
        self.pre = PacketReplicationEngine()
        self.digests: deque[tuple[str, tuple[int, ...]]] = deque()
        self.digests_dropped = 0
        self.digest_config: dict[str, DigestConfig | None] = {d.name: None for d in schema.digests}

    @staticmethod
    def _get(kind: str, name: str, objects: Mapping[str, T]) -> T:
        return objects[resolve_name(kind, name, objects)]

    def table(self, name: str) -> Table:
        return self._get("table", name, self.tables)

    def action_profile(self, name: str) -> ActionProfile:
        return self._get("action profile", name, self.action_profiles)

    def counter(self, name: str) -> Counter:
        return self._get("counter", name, self.counters)

    def direct_counter(self, name: str) -> DirectCounter:
        return self._get("direct counter", name, self.direct_counters)

    def meter(self, name: str) -> Meter:
        return self._get("meter", name, self.meters)

    def direct_meter(self, name: str) -> DirectMeter:
        return self._get("direct meter", name, self.direct_meters)

    def register(self, name: str) -> Register:
        return self._get("register", name, self.registers)

    def value_set(self, name: str) -> ValueSet:
        return self._get("value set", name, self.value_sets)

    def push_digest(self, name: str, values: tuple[int, ...]) -> None:
        """Data plane: queue one digest message (dropped, and counted, when the queue is full)."""
        if len(self.digests) >= DIGEST_QUEUE_LIMIT:
            self.digests_dropped += 1
            return
        self.digests.append((name, values))

    def configure_digest(self, name: str, config: DigestConfig | None) -> None:
        key = resolve_name("digest", name, self.digest_config)
        if config is not None and config.max_list_size < 0:
            raise StateError(Code.INVALID_ARGUMENT, f"digest '{key}': negative max_list_size")
        self.digest_config[key] = config

    def reset(self) -> None:
        """Forget all forwarding state, as a P4Runtime VERIFY_AND_COMMIT of a pipeline does:
        non-const entries, defaults, members and groups, counters, meters, registers, value
        sets, multicast groups, clone sessions and queued digests."""
        for t in self.tables.values():
            t.clear()
            t.reset_default()
        for p in self.action_profiles.values():
            p.clear()
        for c in self.counters.values():
            c.reset()
        for m in self.meters.values():
            m.reset()
        for r in self.registers.values():
            r.reset()
        for v in self.value_sets.values():
            v.clear()
        for t in self.tables.values():  # const entries keep their direct state zeroed
            for e in t.entries():
                e.packets = e.bytes = 0
                e.meter_config = e.meter_cell = None
        self.pre.reset()
        self.digests.clear()
        self.digests_dropped = 0
        self.digest_config = dict.fromkeys(self.digest_config)


def _profile_refs(schema: ProgramSchema, tables: tuple[str, ...]) -> dict[str, ActionRef]:
    """The actions members of a profile may use: those its tables allow in entries."""
    refs: dict[str, ActionRef] = {}
    for name in tables:
        try:
            spec = schema.table(name)
        except KeyError:
            continue
        for r in spec.actions:
            if r.name not in refs or refs[r.name].scope is ActionScope.DEFAULT_ONLY:
                refs[r.name] = r
    return refs
