"""Write-path checks shared by tables and action profiles: widths, match encodings, actions."""

from __future__ import annotations

from collections.abc import Mapping

from switch.pipeline.errors import Code, StateError, unknown
from switch.schema import ActionCall, ActionRef, ActionScope, ActionSpec, KeySpec, MatchKind


def invalid(message: str) -> StateError:
    return StateError(Code.INVALID_ARGUMENT, message)


def check_uint(what: str, value: object, width: int) -> int:
    """``value`` as an int in [0, 2**width), else INVALID_ARGUMENT naming ``what``."""
    if not isinstance(value, int):
        raise invalid(f"{what}: expected an integer, got {value!r}")
    if value < 0 or value >> width:
        raise invalid(f"{what}: value {value:#x} does not fit in {width} bits")
    return int(value)


def prefix_mask(prefix_len: int, width: int) -> int:
    """The mask selecting the top ``prefix_len`` bits of a ``width``-bit value."""
    return ((1 << prefix_len) - 1) << (width - prefix_len)


def check_key_value(owner: str, key: KeySpec, value: object) -> object:
    """Validate one match value in the encoding of ``key.kind``; return it normalized."""
    what = f"{owner}: key '{key.name}' ({key.kind.value}, {key.width} bits)"
    width = key.width
    kind = key.kind
    if kind is MatchKind.EXACT:
        return check_uint(what, value, width)
    if kind is MatchKind.OPTIONAL:
        return None if value is None else check_uint(what, value, width)
    pair = _pair(what, value, _SECOND.get(kind, "mask"))
    if kind is MatchKind.LPM:
        v = check_uint(what, pair[0], width)
        plen = pair[1]
        if not isinstance(plen, int) or plen < 0 or plen > width:
            raise invalid(f"{what}: prefix length {plen!r} is outside 0..{width}")
        if v & ~prefix_mask(plen, width):
            raise invalid(f"{what}: value {v:#x} has bits set beyond the /{plen} prefix")
        return (v, int(plen))
    if kind is MatchKind.TERNARY:
        v = check_uint(what, pair[0], width)
        m = check_uint(what + " mask", pair[1], width)
        if v & ~m:
            raise invalid(f"{what}: value {v:#x} has bits set outside the mask {m:#x}")
        return (v, m)
    if kind is MatchKind.RANGE:
        lo = check_uint(what, pair[0], width)
        hi = check_uint(what, pair[1], width)
        if lo > hi:
            raise invalid(f"{what}: empty range {lo:#x}..{hi:#x} (low bound above high bound)")
        return (lo, hi)
    raise invalid(f"{what}: selector keys take no match value")


_SECOND = {MatchKind.LPM: "prefix_len", MatchKind.RANGE: "hi"}


def _pair(what: str, value: object, second: str) -> tuple[object, object]:
    if isinstance(value, tuple | list) and len(value) == 2:
        return (value[0], value[1])
    first = "lo" if second == "hi" else "value"
    raise invalid(f"{what}: expected a ({first}, {second}) pair, got {value!r}")


def check_action_call(
    owner: str,
    call: ActionCall,
    refs: Mapping[str, ActionRef],
    actions: Mapping[str, ActionSpec],
    *,
    for_default: bool,
) -> ActionCall:
    """Check that ``call`` is allowed in ``owner`` (a table or action profile) with fitting args.

    ``refs`` are the owner's actions by name. An entry may not use a ``@defaultonly`` action, a
    default action may not be ``@tableonly``.
    """
    if not isinstance(call, ActionCall):
        raise invalid(f"{owner}: expected an ActionCall, got {call!r}")
    ref = refs.get(call.name)
    if ref is None:
        err = unknown(f"action of {owner}", call.name, refs)
        raise StateError(Code.INVALID_ARGUMENT, err.message)
    if for_default and ref.scope is ActionScope.TABLE_ONLY:
        raise invalid(f"{owner}: action '{call.name}' is @tableonly and cannot be the default")
    if not for_default and ref.scope is ActionScope.DEFAULT_ONLY:
        raise invalid(f"{owner}: action '{call.name}' is @defaultonly and cannot be in an entry")
    spec = actions.get(call.name)
    if spec is None:
        raise unknown("action", call.name, actions)
    if len(call.args) != len(spec.params):
        raise invalid(
            f"{owner}: action '{call.name}' takes {len(spec.params)} argument(s), "
            f"got {len(call.args)}"
        )
    args = tuple(
        check_uint(f"{owner}: action '{call.name}' parameter '{p.name}'", a, p.width)
        for p, a in zip(spec.params, call.args)
    )
    return call if args == call.args else ActionCall(call.name, args)
