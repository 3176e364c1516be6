"""Table writes (validation, P4Runtime error codes) and lookups (BMv2 matching semantics)."""

from __future__ import annotations

import pytest
from runtime_schema_helpers import (
    ACTIONS,
    EXACT,
    LPM,
    OPTIONAL,
    RANGE,
    SELECTOR,
    TERNARY,
    fwd,
    table,
)

from switch.pipeline.errors import Code, StateError
from switch.pipeline.hashes import compute_hash, pack_bits
from switch.pipeline.profiles import ActionProfile
from switch.pipeline.tables import CACHE_LIMIT, Table, TableEntry
from switch.pipeline.trtcm import MeterConfig
from switch.schema import ActionCall, ActionProfileSpec, ConstEntry, MatchKind


def make(*key_specs: tuple[str, int, MatchKind], **kw: object) -> Table:
    return Table(table(*key_specs, **kw), ACTIONS)  # type: ignore[arg-type]


def port_of(t: Table, key: tuple[int, ...]) -> int | None:
    entry, name, args = t.lookup(key)
    return args[0] if entry is not None and name == "MyIngress.fwd" else None


def test_exact_hit_and_miss_returns_default() -> None:
    t = make(("h.a", 8, EXACT), ("h.b", 16, EXACT), default=ActionCall("MyIngress.drop"))
    t.insert(TableEntry((1, 2), action=fwd(3)))
    entry, name, args = t.lookup((1, 2))
    assert entry is not None and (name, args) == ("MyIngress.fwd", (3,))
    assert t.lookup((1, 3)) == (None, "MyIngress.drop", ())


@pytest.mark.parametrize(
    ("addr", "port"),
    [
        (0x0A010203, 3),  # 10.1.2.3 matches /8, /16 and /24: /24 wins
        (0x0A01FF01, 2),  # /8 and /16
        (0x0AFF0000, 1),  # /8 only
        (0x0B000000, 4),  # /0 catch-all
    ],
)
def test_lpm_longest_prefix_wins(addr: int, port: int) -> None:
    t = make(("ipv4.dst", 32, LPM))
    t.insert(TableEntry(((0x0A000000, 8),), action=fwd(1)))
    t.insert(TableEntry(((0x0A010200, 24),), action=fwd(3)))
    t.insert(TableEntry(((0x0A010000, 16),), action=fwd(2)))
    t.insert(TableEntry(((0, 0),), action=fwd(4)))
    assert port_of(t, (addr,)) == port


def test_lpm_with_exact_key_needs_both_to_match() -> None:
    t = make(("vrf", 4, EXACT), ("ipv4.dst", 32, LPM))
    t.insert(TableEntry((1, (0x0A000000, 8)), action=fwd(1)))
    t.insert(TableEntry((2, (0x0A010000, 16)), action=fwd(2)))
    assert port_of(t, (1, 0x0A010101)) == 1
    assert port_of(t, (2, 0x0A010101)) == 2
    assert port_of(t, (2, 0x0A020101)) is None


@pytest.mark.parametrize(
    ("key", "port"),
    [
        (0x0102, 2),  # both match: priority 20 beats 10
        (0x0302, 1),  # only the low-byte entry matches
        (0x0103, None),
    ],
)
def test_ternary_priority_larger_wins(key: int, port: int | None) -> None:
    t = make(("h.f", 16, TERNARY))
    t.insert(TableEntry(((0x0002, 0x00FF),), priority=10, action=fwd(1)))
    t.insert(TableEntry(((0x0102, 0xFFFF),), priority=20, action=fwd(2)))
    assert port_of(t, (key,)) == port


def test_ternary_priority_ties_go_to_the_first_inserted() -> None:
    t = make(("h.f", 16, TERNARY))
    t.insert(TableEntry(((0x0002, 0x00FF),), priority=5, action=fwd(1)))
    t.insert(TableEntry(((0x0100, 0xFF00),), priority=5, action=fwd(2)))
    assert port_of(t, (0x0102,)) == 1


def test_lpm_in_ternary_table_uses_priority_not_prefix_length() -> None:
    t = make(("ipv4.dst", 32, LPM), ("h.f", 8, TERNARY))
    t.insert(TableEntry(((0x0A000000, 8), (0, 0)), priority=100, action=fwd(1)))
    t.insert(TableEntry(((0x0A010000, 16), (0, 0)), priority=1, action=fwd(2)))
    assert port_of(t, (0x0A010101, 7)) == 1


@pytest.mark.parametrize(
    ("value", "port"), [(9, 2), (10, 1), (15, 1), (20, 1), (21, 2), (99, 2), (100, None)]
)
def test_range_bounds_are_inclusive(value: int, port: int | None) -> None:
    t = make(("h.port", 16, RANGE))
    t.insert(TableEntry(((10, 20),), priority=2, action=fwd(1)))
    t.insert(TableEntry(((0, 99),), priority=1, action=fwd(2)))
    assert port_of(t, (value,)) == port


def test_optional_none_is_a_wildcard() -> None:
    t = make(("h.a", 8, OPTIONAL), ("h.b", 8, EXACT))
    t.insert(TableEntry((None, 1), priority=1, action=fwd(1)))
    t.insert(TableEntry((5, 1), priority=2, action=fwd(2)))
    assert port_of(t, (5, 1)) == 2
    assert port_of(t, (6, 1)) == 1
    assert port_of(t, (6, 2)) is None


def test_keyless_table_always_runs_the_default() -> None:
    t = make(default=ActionCall("MyIngress.drop"))
    assert t.lookup(()) == (None, "MyIngress.drop", ())
    with pytest.raises(StateError) as err:
        t.insert(TableEntry((), action=fwd(1)))
    assert err.value.code is Code.INVALID_ARGUMENT


def test_insert_duplicate_is_already_exists() -> None:
    t = make(("h.a", 8, EXACT))
    t.insert(TableEntry((1,), action=fwd(1)))
    with pytest.raises(StateError) as err:
        t.insert(TableEntry((1,), action=fwd(2)))
    assert err.value.code is Code.ALREADY_EXISTS


def test_same_ternary_match_with_other_priority_is_a_distinct_entry() -> None:
    t = make(("h.f", 8, TERNARY))
    t.insert(TableEntry(((1, 0xFF),), priority=1, action=fwd(1)))
    t.insert(TableEntry(((1, 0xFF),), priority=2, action=fwd(2)))
    assert len(t) == 2
    assert port_of(t, (1,)) == 2
    t.delete(((1, 0xFF),), 2)
    assert port_of(t, (1,)) == 1


@pytest.mark.parametrize("op", ["modify", "delete", "get"])
def test_missing_entry_is_not_found(op: str) -> None:
    t = make(("h.a", 8, EXACT))
    with pytest.raises(StateError) as err:
        if op == "modify":
            t.modify(TableEntry((1,), action=fwd(1)))
        elif op == "delete":
            t.delete((1,))
        else:
            t.get((1,))
    assert err.value.code is Code.NOT_FOUND


KEYS = (("h.e", 8, EXACT), ("h.l", 16, LPM), ("h.t", 8, TERNARY), ("h.r", 8, RANGE))
OK_MATCH = (1, (0x1200, 8), (1, 0xFF), (2, 3))


@pytest.mark.parametrize(
    ("match", "priority", "action", "needle"),
    [
        (OK_MATCH[:3], 1, fwd(1), "4 match key(s)"),
        ((256,) + OK_MATCH[1:], 1, fwd(1), "does not fit in 8 bits"),
        ((-1,) + OK_MATCH[1:], 1, fwd(1), "does not fit"),
        ((1, (0x1200, 17), (1, 0xFF), (2, 3)), 1, fwd(1), "prefix length 17"),
        ((1, (0x1234, 8), (1, 0xFF), (2, 3)), 1, fwd(1), "beyond the /8 prefix"),
        ((1, (0x1200, 8), (3, 0x01), (2, 3)), 1, fwd(1), "outside the mask"),
        ((1, (0x1200, 8), (1, 0xFF), (4, 3)), 1, fwd(1), "empty range"),
        ((1, 0x1200, (1, 0xFF), (2, 3)), 1, fwd(1), "(value, prefix_len) pair"),
        (OK_MATCH, 0, fwd(1), "need a priority"),
        (OK_MATCH, 1, ActionCall("MyIngress.nope"), "MyIngress.nope"),
        (OK_MATCH, 1, ActionCall("MyIngress.only_default"), "@defaultonly"),
        (OK_MATCH, 1, ActionCall("MyIngress.fwd", ()), "takes 1 argument(s), got 0"),
        (OK_MATCH, 1, ActionCall("MyIngress.fwd", (512,)), "does not fit in 9 bits"),
        (OK_MATCH, 1, None, "no action"),
    ],
)
def test_invalid_entries_are_invalid_argument(
    match: tuple[object, ...], priority: int, action: ActionCall | None, needle: str
) -> None:
    t = make(*KEYS)
    with pytest.raises(StateError) as err:
        t.insert(TableEntry(match, priority=priority, action=action))
    assert err.value.code is Code.INVALID_ARGUMENT
    assert needle in err.value.message
    t.insert(TableEntry(OK_MATCH, priority=1, action=fwd(1)))  # the valid one is accepted


def test_priority_on_a_table_without_ternary_keys_is_invalid() -> None:
    t = make(("h.a", 8, EXACT))
    with pytest.raises(StateError) as err:
        t.insert(TableEntry((1,), priority=3, action=fwd(1)))
    assert err.value.code is Code.INVALID_ARGUMENT


def test_unknown_action_suggests_the_nearest_name() -> None:
    t = make(("h.a", 8, EXACT))
    with pytest.raises(StateError) as err:
        t.insert(TableEntry((1,), action=ActionCall("MyIngress.fwdd", (1,))))
    assert "did you mean 'MyIngress.fwd'" in err.value.message


def test_table_full_is_resource_exhausted() -> None:
    t = make(("h.a", 8, EXACT), size=2)
    t.insert(TableEntry((1,), action=fwd(1)))
    t.insert(TableEntry((2,), action=fwd(1)))
    with pytest.raises(StateError) as err:
        t.insert(TableEntry((3,), action=fwd(1)))
    assert err.value.code is Code.RESOURCE_EXHAUSTED


def test_const_entries_are_loaded_and_immutable() -> None:
    consts = (
        ConstEntry(((0x10, 0xF0),), fwd(1), priority=2),
        ConstEntry(((0x00, 0x00),), fwd(2), priority=1),
    )
    t = make(("h.f", 8, TERNARY), const_entries=consts)
    assert port_of(t, (0x15,)) == 1
    assert port_of(t, (0x25,)) == 2
    assert all(e.is_const for e in t.entries())
    for op in (
        lambda: t.insert(TableEntry(((1, 0xFF),), priority=3, action=fwd(1))),
        lambda: t.modify(TableEntry(((0x10, 0xF0),), priority=2, action=fwd(3))),
        lambda: t.delete(((0x10, 0xF0),), 2),
    ):
        with pytest.raises(StateError) as err:
            op()
        assert err.value.code is Code.PERMISSION_DENIED
    t.clear()
    assert len(t) == 2


def test_const_default_action_change_is_permission_denied() -> None:
    t = make(("h.a", 8, EXACT), const_default=True, default=ActionCall("MyIngress.drop"))
    with pytest.raises(StateError) as err:
        t.set_default(fwd(1))
    assert err.value.code is Code.PERMISSION_DENIED
    t.set_default(ActionCall("MyIngress.drop"))  # restating it is harmless


@pytest.mark.parametrize(
    ("action", "ok"),
    [
        (ActionCall("MyIngress.only_default"), True),
        (ActionCall("MyIngress.only_table"), False),
        (fwd(7), True),
        (ActionCall("MyIngress.fwd", (1, 2)), False),
    ],
)
def test_set_default_checks_scope_and_args(action: ActionCall, ok: bool) -> None:
    t = make(("h.a", 8, EXACT))
    if ok:
        t.set_default(action)
        assert t.lookup((9,)) == (None, action.name, action.args)
        t.reset_default()
        assert t.default == ActionCall("NoAction")
    else:
        with pytest.raises(StateError) as err:
            t.set_default(action)
        assert err.value.code is Code.INVALID_ARGUMENT


def test_modify_replaces_action_and_keeps_counters() -> None:
    t = make(("h.a", 8, EXACT), direct_counter="MyIngress.c")
    t.insert(TableEntry((1,), action=fwd(1)))
    e = t.get((1,))
    e.packets, e.bytes = 5, 500
    t.modify(TableEntry((1,), action=fwd(2)))
    assert port_of(t, (1,)) == 2
    assert (t.get((1,)).packets, t.get((1,)).bytes) == (5, 500)


def test_meter_config_needs_a_direct_meter() -> None:
    t = make(("h.a", 8, EXACT))
    with pytest.raises(StateError) as err:
        t.insert(TableEntry((1,), action=fwd(1), meter_config=MeterConfig(1.0, 10, 2.0, 20)))
    assert err.value.code is Code.INVALID_ARGUMENT
    m = make(("h.a", 8, EXACT), direct_meter="MyIngress.m")
    m.insert(TableEntry((1,), action=fwd(1), meter_config=MeterConfig(1.0, 10, 2.0, 20)))
    assert m.get((1,)).meter_cell is not None


@pytest.mark.parametrize("kind", [LPM, TERNARY])
def test_lookup_cache_is_dropped_on_every_write(kind: MatchKind) -> None:
    t = make(("h.f", 16, kind))
    prio = 1 if kind is TERNARY else 0
    wide = (0x1200, 8) if kind is LPM else (0x1200, 0xFF00)
    narrow = (0x1234, 16) if kind is LPM else (0x1234, 0xFFFF)
    t.insert(TableEntry((wide,), priority=prio, action=fwd(1)))
    assert port_of(t, (0x1234,)) == 1
    t.insert(TableEntry((narrow,), priority=prio + 1 if prio else 0, action=fwd(2)))
    assert port_of(t, (0x1234,)) == 2
    t.delete((narrow,), prio + 1 if prio else 0)
    assert port_of(t, (0x1234,)) == 1
    t.clear()
    assert port_of(t, (0x1234,)) is None


def test_lookup_cache_is_bounded() -> None:
    t = make(("h.f", 16, TERNARY))
    t.insert(TableEntry(((0, 0),), priority=1, action=fwd(1)))
    for k in range(CACHE_LIMIT + 10):
        assert port_of(t, (k,)) == 1
    assert len(t._cache) <= CACHE_LIMIT


# ----- indirect tables


def selector_table(with_selector: bool = True) -> tuple[Table, ActionProfile]:
    prof = ActionProfile(
        ActionProfileSpec(
            "MyIngress.sel",
            16,
            ("MyIngress.t",),
            with_selector,
            algorithm="crc16" if with_selector else None,
        ),
        ACTIONS,
        {r.name: r for r in table().actions},
    )
    spec = table(
        ("h.a", 8, EXACT),
        ("h.s1", 32, SELECTOR),
        ("h.s2", 16, SELECTOR),
        implementation="MyIngress.sel",
    )
    return Table(spec, ACTIONS, prof), prof


def test_indirect_entry_uses_its_member() -> None:
    t, prof = selector_table(with_selector=False)
    prof.insert_member(7, fwd(5))
    t.insert(TableEntry((1,), member_id=7))
    entry, name, args = t.lookup((1,))
    assert entry is not None and (name, args) == ("MyIngress.fwd", (5,))


@pytest.mark.parametrize(
    "entry",
    [
        TableEntry((1,), action=fwd(1)),
        TableEntry((1,)),
        TableEntry((1,), member_id=1, group_id=1),
    ],
)
def test_indirect_entry_needs_exactly_one_of_member_and_group(entry: TableEntry) -> None:
    t, prof = selector_table()
    prof.insert_member(1, fwd(1))
    prof.insert_group(1, [1])
    with pytest.raises(StateError) as err:
        t.insert(entry)
    assert err.value.code is Code.INVALID_ARGUMENT


def test_entry_with_unknown_member_is_not_found() -> None:
    t, _ = selector_table()
    with pytest.raises(StateError) as err:
        t.insert(TableEntry((1,), member_id=3))
    assert err.value.code is Code.NOT_FOUND


@pytest.mark.parametrize("sel", [(0x0A000001, 80), (0x0A000002, 443), (0xC0A80101, 53)])
def test_selector_picks_member_by_crc16_of_selector_keys(sel: tuple[int, int]) -> None:
    t, prof = selector_table()
    for m in (30, 10, 20):  # handles 0, 1, 2 follow creation order, not member ids
        prof.insert_member(m, fwd(m))
    prof.insert_group(1, {10: 1, 20: 1, 30: 1})
    t.insert(TableEntry((1,), group_id=1))
    h = compute_hash("crc16", pack_bits([(sel[0], 32), (sel[1], 16)]))
    expected = (30, 10, 20)[h % 3]
    assert t.lookup((1,), sel)[2] == (expected,)


def test_selector_weights_repeat_members() -> None:
    t, prof = selector_table()
    prof.insert_member(1, fwd(1))
    prof.insert_member(2, fwd(2))
    prof.insert_group(9, {1: 1, 2: 3})
    t.insert(TableEntry((1,), group_id=9))
    seen = {}
    for s in range(200):
        h = compute_hash("crc16", pack_bits([(s, 32), (0, 16)]))
        seen[s] = (1, 2, 2, 2)[h % 4]
    assert all(t.lookup((1,), (s, 0))[2] == (p,) for s, p in seen.items())
    assert set(seen.values()) == {1, 2}


def test_entry_pointing_to_an_empty_group_is_a_miss() -> None:
    t, prof = selector_table()
    prof.insert_group(1, [])
    t.insert(TableEntry((1,), group_id=1))
    assert t.lookup((1,), (0, 0)) == (None, "NoAction", ())


def test_deleting_an_entry_releases_its_member() -> None:
    t, prof = selector_table()
    prof.insert_member(1, fwd(1))
    t.insert(TableEntry((1,), member_id=1))
    with pytest.raises(StateError) as err:
        prof.delete_member(1)
    assert err.value.code is Code.FAILED_PRECONDITION
    t.delete((1,))
    prof.delete_member(1)


@pytest.mark.parametrize("seed", range(5))
def test_masked_lookup_agrees_with_a_linear_scan(seed: int) -> None:
    import random

    rng = random.Random(seed)
    t = make(("h.t", 8, TERNARY), ("h.r", 8, RANGE), ("h.l", 8, LPM), ("h.e", 2, EXACT))
    live: list[TableEntry] = []
    masks = [0xFF, 0xF0, 0x0F, 0x00]
    for step in range(300):
        if live and rng.random() < 0.25:
            victim = live.pop(rng.randrange(len(live)))
            t.delete(victim.match, victim.priority)
            continue
        mask = rng.choice(masks)
        lo = rng.choice([0, 0, rng.randrange(256)])
        hi = 255 if lo == 0 and rng.random() < 0.7 else rng.randrange(lo, 256)
        plen = rng.choice([0, 4, 8])
        match = (
            (rng.randrange(256) & mask, mask),
            (lo, hi),
            (rng.randrange(256) & (0xFF << (8 - plen)) & 0xFF, plen),
            rng.randrange(4),
        )
        e = TableEntry(match, priority=rng.randrange(1, 6), action=fwd(step))
        try:
            t.insert(e)
        except StateError:
            continue
        live.append(t.get(match, e.priority))
    for _ in range(500):
        key = (rng.randrange(256), rng.randrange(256), rng.randrange(256), rng.randrange(4))
        best = None
        for e in live:  # insertion order: the first of the highest priority wins
            (tv, tm), (lo, hi), (lv, lp), ev = e.match  # type: ignore[misc]
            lmask = (0xFF << (8 - lp)) & 0xFF
            if (
                key[0] & tm == tv
                and lo <= key[1] <= hi
                and key[2] & lmask == lv
                and key[3] == ev
                and (best is None or e.priority > best.priority)
            ):
                best = e
        assert t.lookup(key)[0] is best
