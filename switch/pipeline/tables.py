"""Match-action tables: validated writes and a fast lookup with BMv2's matching semantics.

Match values use one encoding per key kind (see :class:`switch.schema.ConstEntry`): EXACT int;
LPM ``(value, prefix_len)``; TERNARY ``(value, mask)``; RANGE ``(lo, hi)``; OPTIONAL int or None
(wildcard). Priorities follow P4Runtime: a larger number wins, and only tables with a ternary,
range or optional key carry one (others use 0).

Lookup mirrors BMv2: all-exact tables use a hash map; a table whose only non-exact key is one LPM
key picks the longest matching prefix; any ternary/range/optional key makes every entry a masked
compare (LPM then acts as a ternary with a prefix mask) and the highest priority wins, ties going
to the entry inserted first. Non-exact tables keep a bounded cache of recent lookups, dropped on
every write.

Idle timeouts (``support_timeout = true``): an entry keeps its TTL (``idle_timeout_ns``, 0 = none)
and the time it was last hit (``last_hit_ns``, set when it is inserted). The table has no clock
of its own: whoever runs it sets :attr:`Table.hit_clock_us` (the device's microsecond clock, the
one that stamps packets) and every lookup that hits an entry records the time; an executor that
does its own lookups reports hits through :meth:`Table.note_hit`. Finding and reporting idle
entries is the P4Runtime server's job.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import cast

from switch.pipeline.errors import Code, StateError, unknown
from switch.pipeline.hashes import pack_bits
from switch.pipeline.profiles import ActionProfile
from switch.pipeline.trtcm import MeterCell, MeterConfig, check_config
from switch.pipeline.validate import check_action_call, check_key_value, invalid, prefix_mask
from switch.schema import ActionCall, ActionSpec, MatchKind, TableSpec

CACHE_LIMIT = 4096

_EXACT, _LPM, _TERNARY, _KEYLESS = range(4)


@dataclass
class TableEntry:
    """One table entry; ``match`` has a value per match key (selector keys excluded)."""

    match: tuple[object, ...]
    priority: int = 0
    action: ActionCall | None = None
    member_id: int | None = None  # indirect tables: an action profile member ...
    group_id: int | None = None  # ... or a selector group
    packets: int = 0  # direct counter
    bytes: int = 0
    meter_config: MeterConfig | None = None  # direct meter; None = unconfigured (all GREEN)
    controller_metadata: int = 0
    is_const: bool = False
    meter_cell: MeterCell | None = field(default=None, repr=False, compare=False)
    idle_timeout_ns: int = 0  # TTL of an idle-timeout table's entry; 0 = never idle
    last_hit_ns: int = field(default=0, compare=False)  # hit_clock time of the last hit

    @property
    def key(self) -> tuple[tuple[object, ...], int]:
        """(match, priority): what names the entry in its table (see :meth:`Table.note_hit`)."""
        return (self.match, self.priority)


class _Masked:
    """An entry compiled for the masked-compare (ternary) lookup."""

    __slots__ = ("entry", "value", "mask", "ranges", "rank")

    def __init__(
        self,
        entry: TableEntry,
        value: int,
        mask: int,
        ranges: tuple[tuple[int, int, int], ...],
        rank: tuple[int, int],
    ) -> None:
        self.entry = entry
        self.value = value
        self.mask = mask
        self.ranges = ranges
        self.rank = rank


class Table:
    """One table's entries, default action and lookup structures."""

    def __init__(
        self,
        spec: TableSpec,
        actions: Mapping[str, ActionSpec],
        profile: ActionProfile | None = None,
    ) -> None:
        self.spec = spec
        self.name = spec.name
        self._actions = actions
        self._refs = {r.name: r for r in spec.actions}
        self.profile = profile
        if spec.implementation is not None and profile is None:
            raise StateError(
                Code.INVALID_ARGUMENT,
                f"table '{spec.name}' needs its action profile '{spec.implementation}'",
            )
        self._keys = spec.match_keys
        self._sel_widths = tuple(k.width for k in spec.selector_keys)
        self._needs_priority = spec.needs_priority
        kinds = [k.kind for k in self._keys]
        lpms = [i for i, k in enumerate(kinds) if k is MatchKind.LPM]
        if not self._keys:
            self._mode = _KEYLESS
        elif self._needs_priority:
            self._mode = _TERNARY
        elif not lpms:
            self._mode = _EXACT
        elif len(lpms) == 1:
            self._mode = _LPM
        else:
            raise StateError(
                Code.UNIMPLEMENTED,
                f"table '{spec.name}' has {len(lpms)} lpm keys (at most one allowed)",
            )
        self._lpm_index = lpms[0] if lpms else -1
        self._lpm_width = self._keys[self._lpm_index].width if lpms else 0
        # Offsets of non-range keys inside one combined integer, for masked compares.
        self._offsets: list[tuple[int, int]] = []
        off = 0
        for i in reversed(range(len(self._keys))):
            if kinds[i] is not MatchKind.RANGE:
                self._offsets.append((i, off))
                off += self._keys[i].width
        self._entries: dict[tuple[tuple[object, ...], int], TableEntry] = {}
        self._exact: dict[tuple[object, ...], TableEntry] = {}
        self._lpm: dict[int, dict[tuple[tuple[int, ...], int], TableEntry]] = {}
        self._lpm_lengths: list[int] = []  # descending
        # Masked-compare entries without range keys, grouped by mask (tuple space search):
        # mask -> masked value -> entries, best (lowest rank) first. Ranged entries are scanned.
        self._by_mask: dict[int, dict[int, list[_Masked]]] = {}
        self._ranged: list[_Masked] = []  # ascending rank
        self._masked_by_entry: dict[int, _Masked] = {}
        self._cache: dict[tuple[int, ...], TableEntry | None] = {}
        self._seq = itertools.count()
        self._timed: dict[tuple[tuple[object, ...], int], TableEntry] = {}  # TTL > 0
        self.timed_version = 0  # changes whenever an entry gains, changes or loses a TTL
        # Microseconds now (set by the owner for idle-timeout tables; None: hits are not timed).
        self.hit_clock_us: Callable[[], int] | None = None
        self.default: ActionCall = spec.default_action
        # called after every change of the entries or the default action (the native
        # executor, switch.native, reloads its copy of the table then)
        self.listeners: list[Callable[[], None]] = []
        for c in spec.const_entries:
            prio = c.priority if self._needs_priority else 0
            entry = self._validated(
                TableEntry(match=tuple(c.match), priority=prio, action=c.action)
            )
            entry.is_const = c.is_const
            self._add(entry)

    # ----- validation

    def _validated(self, entry: TableEntry) -> TableEntry:
        """A normalized copy of ``entry`` after every write-path check."""
        if not isinstance(entry, TableEntry):
            raise invalid(f"table '{self.name}': expected a TableEntry, got {entry!r}")
        match = self._check_match(entry.match)
        prio = self._check_priority(entry.priority)
        spec = self.spec
        owner = f"table '{self.name}'"
        action = entry.action
        if spec.implementation is None:
            if entry.member_id is not None or entry.group_id is not None:
                raise invalid(f"{owner} has no action profile; entries need an action")
            if action is None:
                raise invalid(f"{owner}: entry has no action")
            action = check_action_call(owner, action, self._refs, self._actions, for_default=False)
        else:
            if action is not None:
                raise invalid(
                    f"{owner} uses action profile '{spec.implementation}'; "
                    "entries give a member_id or group_id, not an action"
                )
            if (entry.member_id is None) == (entry.group_id is None):
                raise invalid(f"{owner}: entry needs exactly one of member_id and group_id")
            if entry.group_id is not None and self.profile is not None:
                if not self.profile.spec.with_selector:
                    raise invalid(f"{owner}: action profile '{spec.implementation}' has no groups")
        if entry.meter_config is not None:
            if spec.direct_meter is None:
                raise invalid(f"{owner} has no direct meter; entry must not carry meter_config")
            check_config(owner, entry.meter_config)
        if (entry.packets or entry.bytes) and spec.direct_counter is None:
            raise invalid(f"{owner} has no direct counter; entry must not carry counter data")
        if entry.packets < 0 or entry.bytes < 0:
            raise invalid(f"{owner}: negative counter data")
        ttl = entry.idle_timeout_ns
        if not isinstance(ttl, int) or ttl < 0:
            raise invalid(f"{owner}: idle_timeout_ns must be a non-negative integer, got {ttl!r}")
        if ttl and not spec.support_timeout:
            raise invalid(f"{owner} does not support idle timeout (no support_timeout = true)")
        return dataclasses.replace(
            entry,
            match=match,
            priority=prio,
            action=action,
            is_const=False,
            meter_cell=None if entry.meter_config is None else MeterCell(entry.meter_config),
        )

    def _check_match(self, match: object) -> tuple[object, ...]:
        if not isinstance(match, tuple | list):
            raise invalid(f"table '{self.name}': match must be a tuple, got {match!r}")
        if len(match) != len(self._keys):
            names = ", ".join(k.name for k in self._keys) or "none"
            raise invalid(
                f"table '{self.name}' has {len(self._keys)} match key(s) ({names}), "
                f"got {len(match)} value(s)"
            )
        owner = f"table '{self.name}'"
        return tuple(check_key_value(owner, k, v) for k, v in zip(self._keys, match))

    def _check_priority(self, priority: object) -> int:
        if not isinstance(priority, int):
            raise invalid(f"table '{self.name}': priority must be an integer")
        if self._needs_priority:
            if priority <= 0 or priority >> 31:
                raise invalid(
                    f"table '{self.name}' has ternary/range/optional keys; entries need a "
                    f"priority in 1..2**31-1, got {priority}"
                )
        elif priority != 0:
            raise invalid(
                f"table '{self.name}' has no ternary/range/optional key; priority must be 0, "
                f"got {priority}"
            )
        return priority

    # ----- writes

    def _check_mutable(self, e: TableEntry) -> None:
        if e.is_const:
            raise StateError(
                Code.PERMISSION_DENIED,
                f"table '{self.name}': this entry is declared const and cannot be changed",
            )

    def _check_writable(self) -> None:
        if self.spec.is_const:
            raise StateError(
                Code.PERMISSION_DENIED,
                f"table '{self.name}' has const entries and cannot be written",
            )

    def insert(self, entry: TableEntry) -> None:
        self._check_writable()
        if self._mode == _KEYLESS:
            raise invalid(f"table '{self.name}' has no match keys; only its default can be set")
        e = self._validated(entry)
        key = (e.match, e.priority)
        if key in self._entries:
            raise StateError(
                Code.ALREADY_EXISTS,
                f"table '{self.name}': an entry with this match and priority exists",
            )
        if len(self._entries) >= self.spec.size:
            raise StateError(
                Code.RESOURCE_EXHAUSTED, f"table '{self.name}' is full ({self.spec.size} entries)"
            )
        if self.profile is not None:
            self.profile.retain(e.member_id, e.group_id)
        e.last_hit_ns = self.now_ns()
        self._add(e)

    def modify(self, entry: TableEntry) -> None:
        """Replace the action (or member/group), meter config and controller metadata of an
        existing entry; its direct counter values are kept."""
        self._check_writable()
        e = self._validated(entry)
        old = self._find_stored(e.match, e.priority)
        self._check_mutable(old)
        if self.profile is not None:
            self.profile.retain(e.member_id, e.group_id)
            self.profile.release(old.member_id, old.group_id)
        old.action = e.action
        old.member_id = e.member_id
        old.group_id = e.group_id
        old.meter_config = e.meter_config
        old.meter_cell = e.meter_cell
        old.controller_metadata = e.controller_metadata
        if old.idle_timeout_ns or e.idle_timeout_ns:
            self.timed_version += 1
        old.idle_timeout_ns = e.idle_timeout_ns
        if e.idle_timeout_ns:
            self._timed[old.key] = old
        else:
            self._timed.pop(old.key, None)
        self._cache.clear()
        self._changed()

    def delete(self, match: tuple[object, ...], priority: int = 0) -> None:
        self._check_writable()
        e = self._find_stored(self._check_match(match), self._check_priority(priority))
        self._check_mutable(e)
        if self.profile is not None:
            self.profile.release(e.member_id, e.group_id)
        self._remove(e)

    def get(self, match: tuple[object, ...], priority: int = 0) -> TableEntry:
        """The stored entry (live: the data plane updates its counters)."""
        return self._find_stored(self._check_match(match), self._check_priority(priority))

    def entries(self) -> list[TableEntry]:
        """All entries, const ones included, in insertion order."""
        return list(self._entries.values())

    def clear(self) -> None:
        """Delete every non-const entry."""
        for e in [e for e in self._entries.values() if not e.is_const]:
            if self.profile is not None:
                self.profile.release(e.member_id, e.group_id)
            self._remove(e)

    def set_default(self, action: ActionCall) -> None:
        if self.spec.const_default_action and action != self.spec.default_action:
            raise StateError(
                Code.PERMISSION_DENIED, f"table '{self.name}' has a const default action"
            )
        self.default = check_action_call(
            f"table '{self.name}'", action, self._refs, self._actions, for_default=True
        )
        self._changed()

    def reset_default(self) -> None:
        self.default = self.spec.default_action
        self._changed()

    def _changed(self) -> None:
        for fn in self.listeners:
            fn()

    def __len__(self) -> int:
        return len(self._entries)

    # ----- idle timeouts

    def now_ns(self) -> int:
        """The hit clock's time in nanoseconds (0 when no clock is set)."""
        clock = self.hit_clock_us
        return 0 if clock is None else clock() * 1000

    def note_hit(self, entry_key: tuple[tuple[object, ...], int], now_ns: int) -> None:
        """Record that a packet hit the entry ``entry_key`` ((match, priority), as
        :attr:`TableEntry.key`) at ``now_ns`` (the device clock, in ns). Unknown keys are
        ignored: the entry may have been deleted since the lookup."""
        e = self._entries.get(entry_key)
        if e is not None:
            e.last_hit_ns = now_ns

    def timed_entries(self) -> list[TableEntry]:
        """The entries with a TTL (idle_timeout_ns > 0), in insertion order."""
        return list(self._timed.values())

    # ----- structures

    def _find_stored(self, match: tuple[object, ...], priority: int) -> TableEntry:
        try:
            return self._entries[(match, priority)]
        except KeyError:
            raise unknown(f"entry of table '{self.name}'", _describe(match, priority)) from None

    def _add(self, e: TableEntry) -> None:
        key = (e.match, e.priority)
        if key in self._entries:
            raise StateError(
                Code.ALREADY_EXISTS, f"table '{self.name}': duplicate const entry {_describe(*key)}"
            )
        self._entries[key] = e
        if e.idle_timeout_ns:
            self._timed[key] = e
            self.timed_version += 1
        mode = self._mode
        if mode == _EXACT:
            self._exact[e.match] = e
        elif mode == _LPM:
            value, plen = _ints(e.match[self._lpm_index])
            rest = self._rest(e.match)
            if plen not in self._lpm:
                self._lpm[plen] = {}
                self._lpm_lengths = sorted(self._lpm, reverse=True)
            self._lpm[plen][(rest, value)] = e
        elif mode == _TERNARY:
            m = self._compile(e, next(self._seq))
            if m.ranges:
                target = self._ranged
            else:
                target = self._by_mask.setdefault(m.mask, {}).setdefault(m.value, [])
            bisect.insort(target, m, key=_rank)
            self._masked_by_entry[id(e)] = m
        self._cache.clear()
        self._changed()

    def _remove(self, e: TableEntry) -> None:
        del self._entries[(e.match, e.priority)]
        if self._timed.pop((e.match, e.priority), None) is not None:
            self.timed_version += 1
        mode = self._mode
        if mode == _EXACT:
            del self._exact[e.match]
        elif mode == _LPM:
            value, plen = _ints(e.match[self._lpm_index])
            bucket = self._lpm[plen]
            del bucket[(self._rest(e.match), value)]
            if not bucket:
                del self._lpm[plen]
                self._lpm_lengths = sorted(self._lpm, reverse=True)
        elif mode == _TERNARY:
            m = self._masked_by_entry.pop(id(e))
            if m.ranges:
                self._ranged.remove(m)
            else:
                by_value = self._by_mask[m.mask]
                same = by_value[m.value]
                same.remove(m)
                if not same:
                    del by_value[m.value]
                    if not by_value:
                        del self._by_mask[m.mask]
        self._cache.clear()
        self._changed()

    def _rest(self, values: tuple[object, ...]) -> tuple[int, ...]:
        i = self._lpm_index
        return cast(tuple[int, ...], values[:i] + values[i + 1 :])

    def _compile(self, e: TableEntry, seq: int) -> _Masked:
        value = 0
        mask = 0
        ranges = tuple(
            (i, *_ints(e.match[i])) for i, k in enumerate(self._keys) if k.kind is MatchKind.RANGE
        )
        for i, off in self._offsets:
            k = self._keys[i]
            v = e.match[i]
            full = (1 << k.width) - 1
            if k.kind is MatchKind.EXACT:
                kv, km = cast(int, v), full
            elif k.kind is MatchKind.TERNARY:
                kv, km = _ints(v)
            elif k.kind is MatchKind.LPM:
                kv, plen = _ints(v)
                km = prefix_mask(plen, k.width)
            else:  # OPTIONAL
                kv, km = (0, 0) if v is None else (cast(int, v), full)
            value |= kv << off
            mask |= km << off
        return _Masked(e, value, mask, ranges, (-e.priority, seq))

    # ----- the hot path

    def _find(self, key: tuple[int, ...]) -> TableEntry | None:
        mode = self._mode
        if mode == _EXACT:
            return self._exact.get(key)
        if mode == _KEYLESS:
            return None
        cache = self._cache
        if key in cache:
            return cache[key]
        found: TableEntry | None = None
        if mode == _LPM:
            i = self._lpm_index
            rest = key[:i] + key[i + 1 :]
            v = key[i]
            width = self._lpm_width
            for plen in self._lpm_lengths:
                hit = self._lpm[plen].get((rest, v & prefix_mask(plen, width)))
                if hit is not None:
                    found = hit
                    break
        else:
            combined = 0
            for i, off in self._offsets:
                combined |= key[i] << off
            best: _Masked | None = None
            for mask, bucket in self._by_mask.items():
                same = bucket.get(combined & mask)
                if same is not None and (best is None or same[0].rank < best.rank):
                    best = same[0]
            for m in self._ranged:
                if best is not None and m.rank > best.rank:
                    break
                if combined & m.mask == m.value and all(
                    lo <= key[i] <= hi for i, lo, hi in m.ranges
                ):
                    best = m
                    break
            found = None if best is None else best.entry
        if len(cache) >= CACHE_LIMIT:
            cache.clear()
        cache[key] = found
        return found

    def lookup(
        self, key: tuple[int, ...], selector_key: tuple[int, ...] = ()
    ) -> tuple[TableEntry | None, str, tuple[int, ...]]:
        """Match ``key`` (one int per match key); return (entry or None, action, args).

        ``key`` must be a tuple of in-range ints (it is not validated here). ``selector_key``
        holds the selector key values, hashed to pick a group member. An entry pointing to an
        empty group behaves as a miss. The entry is the stored one: the caller updates its
        direct counter (``packets``/``bytes``) and runs its direct meter.
        """
        e = self._exact.get(key) if self._mode == _EXACT else self._find(key)
        if e is not None:
            if self.hit_clock_us is not None:
                e.last_hit_ns = self.hit_clock_us() * 1000
            a = e.action
            if a is not None:
                return e, a.name, a.args
            profile = self.profile
            assert profile is not None
            if e.member_id is not None:
                a = profile.members[e.member_id]
            else:
                assert e.group_id is not None
                data = pack_bits(list(zip(selector_key, self._sel_widths)))
                a = profile.choose(e.group_id, data)
            if a is not None:
                return e, a.name, a.args
        d = self.default
        return None, d.name, d.args


def _rank(m: _Masked) -> tuple[int, int]:
    return m.rank


def _ints(pair: object) -> tuple[int, int]:
    """A validated (value, prefix_len|mask|hi) match pair."""
    return cast(tuple[int, int], pair)


def _describe(match: tuple[object, ...], priority: int) -> str:
    return f"match={match!r} priority={priority}"
