"""Hand-built control-plane schemas for the runtime-state unit tests."""

from __future__ import annotations

from switch.schema import (
    ActionCall,
    ActionRef,
    ActionScope,
    ActionSpec,
    ConstEntry,
    KeySpec,
    MatchKind,
    ParamSpec,
    TableSpec,
)

EXACT = MatchKind.EXACT
LPM = MatchKind.LPM
TERNARY = MatchKind.TERNARY
RANGE = MatchKind.RANGE
OPTIONAL = MatchKind.OPTIONAL
SELECTOR = MatchKind.SELECTOR

NOACTION = ActionSpec("NoAction", ())
FWD = ActionSpec("MyIngress.fwd", (ParamSpec(1, "port", 9),))
SET2 = ActionSpec("MyIngress.set2", (ParamSpec(1, "a", 8), ParamSpec(2, "b", 16)))
DROP = ActionSpec("MyIngress.drop", ())
ONLY_DEFAULT = ActionSpec("MyIngress.only_default", ())
ONLY_TABLE = ActionSpec("MyIngress.only_table", ())
ACTIONS = {a.name: a for a in (NOACTION, FWD, SET2, DROP, ONLY_DEFAULT, ONLY_TABLE)}

NOACTION_CALL = ActionCall("NoAction")

REFS = (
    ActionRef("MyIngress.fwd"),
    ActionRef("MyIngress.set2"),
    ActionRef("MyIngress.drop"),
    ActionRef("NoAction"),
    ActionRef("MyIngress.only_default", ActionScope.DEFAULT_ONLY),
    ActionRef("MyIngress.only_table", ActionScope.TABLE_ONLY),
)


def keys(*specs: tuple[str, int, MatchKind]) -> tuple[KeySpec, ...]:
    return tuple(KeySpec(i + 1, n, w, k) for i, (n, w, k) in enumerate(specs))


def table(
    *key_specs: tuple[str, int, MatchKind],
    name: str = "MyIngress.t",
    size: int = 1024,
    const_entries: tuple[ConstEntry, ...] = (),
    const_default: bool = False,
    default: ActionCall = NOACTION_CALL,
    implementation: str | None = None,
    direct_counter: str | None = None,
    direct_meter: str | None = None,
) -> TableSpec:
    return TableSpec(
        name=name,
        keys=keys(*key_specs),
        actions=REFS,
        default_action=default,
        const_default_action=const_default,
        size=size,
        is_const=bool(const_entries),
        const_entries=const_entries,
        implementation=implementation,
        direct_counter=direct_counter,
        direct_meter=direct_meter,
    )


def fwd(port: int) -> ActionCall:
    return ActionCall("MyIngress.fwd", (port,))
