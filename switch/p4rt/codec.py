"""Conversions between P4Runtime messages and pipeline values, with the specification's checks.

Match keys (``FieldMatch`` lists <-> the match tuples of :mod:`switch.pipeline.tables`: EXACT
int; LPM (value, prefix); TERNARY (value, mask); RANGE (lo, hi); OPTIONAL int or None), actions,
counter data, meter configurations and ``P4Data``. Decoding enforces the "Match Format" rules: "don't care" matches
must be omitted, LPM bits beyond the prefix and ternary bits outside the mask must be zero, and an
exact field is never omitted; bytestrings follow :mod:`switch.p4rt.bytestrings`. Encoding is
canonical and omits "don't care" fields, so reads give back what was written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeAlias

from p4.config.v1 import p4info_pb2
from p4.v1 import p4data_pb2, p4runtime_pb2

from switch.p4rt.bytestrings import decode_sint, decode_uint, encode_sint, encode_uint
from switch.p4rt.pipeline_view import PipelineView, TableView
from switch.p4rt.status import INVALID_ARGUMENT, PERMISSION_DENIED, P4RTError
from switch.pipeline.trtcm import MeterConfig
from switch.pipeline.validate import prefix_mask
from switch.schema import ActionCall, ActionScope, KeySpec, MatchKind, StructField

FieldMatch: TypeAlias = p4runtime_pb2.FieldMatch

# ----- match keys


def _what(tv: TableView, key: KeySpec) -> str:
    return f"table '{tv.name}' match field '{key.name}'"


def _exact(fm: FieldMatch, key: KeySpec, what: str) -> object:
    return decode_uint(fm.exact.value, key.width, what)


def _lpm(fm: FieldMatch, key: KeySpec, what: str) -> object:
    value = decode_uint(fm.lpm.value, key.width, what)
    plen = fm.lpm.prefix_len
    if plen == 0:
        raise P4RTError(
            INVALID_ARGUMENT, f"{what}: a prefix length of 0 is a don't-care match; omit the field"
        )
    if not 0 < plen <= key.width:
        raise P4RTError(INVALID_ARGUMENT, f"{what}: prefix length {plen} is outside 1..{key.width}")
    if value & ~prefix_mask(plen, key.width):
        raise P4RTError(INVALID_ARGUMENT, f"{what}: value has bits set beyond the /{plen} prefix")
    return (value, plen)


def _ternary(fm: FieldMatch, key: KeySpec, what: str) -> object:
    value = decode_uint(fm.ternary.value, key.width, what)
    mask = decode_uint(fm.ternary.mask, key.width, what + " mask")
    if mask == 0:
        raise P4RTError(
            INVALID_ARGUMENT, f"{what}: a zero mask is a don't-care match; omit the field"
        )
    if value & ~mask:
        raise P4RTError(INVALID_ARGUMENT, f"{what}: value has bits set outside the mask")
    return (value, mask)


def _range(fm: FieldMatch, key: KeySpec, what: str) -> object:
    lo = decode_uint(fm.range.low, key.width, what + " low")
    hi = decode_uint(fm.range.high, key.width, what + " high")
    if lo > hi:
        raise P4RTError(INVALID_ARGUMENT, f"{what}: low bound {lo} is above high bound {hi}")
    if lo == 0 and hi == (1 << key.width) - 1:
        raise P4RTError(
            INVALID_ARGUMENT,
            f"{what}: a range of every value is a don't-care match; omit the field",
        )
    return (lo, hi)


def _optional(fm: FieldMatch, key: KeySpec, what: str) -> object:
    return decode_uint(fm.optional.value, key.width, what)


def _dont_care_required(key: KeySpec, what: str) -> object:
    raise P4RTError(INVALID_ARGUMENT, f"{what}: exact match fields cannot be omitted")


# Per match kind: (FieldMatch oneof name, decoder, value of an omitted field).
_MATCH_DECODERS: dict[
    MatchKind,
    tuple[str, Callable[[FieldMatch, KeySpec, str], object], Callable[[KeySpec, str], object]],
] = {
    MatchKind.EXACT: ("exact", _exact, _dont_care_required),
    MatchKind.LPM: ("lpm", _lpm, lambda k, w: (0, 0)),
    MatchKind.TERNARY: ("ternary", _ternary, lambda k, w: (0, 0)),
    MatchKind.RANGE: ("range", _range, lambda k, w: (0, (1 << k.width) - 1)),
    MatchKind.OPTIONAL: ("optional", _optional, lambda k, w: None),
}


def decode_match(tv: TableView, fields: Iterable[FieldMatch]) -> tuple[object, ...]:
    """The pipeline's match tuple of a ``TableEntry.match`` list."""
    values: list[object] = [None] * len(tv.field_ids)
    given = [False] * len(tv.field_ids)
    for fm in fields:
        fv = tv.fields.get(fm.field_id)
        if fv is None:
            raise P4RTError(
                INVALID_ARGUMENT, f"table '{tv.name}' has no match field id {fm.field_id}"
            )
        what = _what(tv, fv.key)
        if given[fv.index]:
            raise P4RTError(INVALID_ARGUMENT, f"{what} is given twice")
        oneof, decoder, _ = _MATCH_DECODERS[fv.key.kind]
        kind = fm.WhichOneof("field_match_type")
        if kind != oneof:
            raise P4RTError(
                INVALID_ARGUMENT, f"{what} is a {fv.key.kind.value} match, not {kind or 'unset'}"
            )
        values[fv.index] = decoder(fm, fv.key, what)
        given[fv.index] = True
    for fv in (tv.fields[fid] for fid in tv.field_ids):
        if not given[fv.index]:
            values[fv.index] = _MATCH_DECODERS[fv.key.kind][2](fv.key, _what(tv, fv.key))
    return tuple(values)


def _encode_field(fid: int, key: KeySpec, value: object) -> FieldMatch | None:
    kind = key.kind
    if kind is MatchKind.EXACT:
        return FieldMatch(field_id=fid, exact=FieldMatch.Exact(value=encode_uint(_int(value))))
    if kind is MatchKind.OPTIONAL:
        if value is None:
            return None
        return FieldMatch(
            field_id=fid, optional=FieldMatch.Optional(value=encode_uint(_int(value)))
        )
    a, b = _pair(value)
    if kind is MatchKind.LPM:
        if b == 0:
            return None
        return FieldMatch(field_id=fid, lpm=FieldMatch.LPM(value=encode_uint(a), prefix_len=b))
    if kind is MatchKind.TERNARY:
        if b == 0:
            return None
        return FieldMatch(
            field_id=fid, ternary=FieldMatch.Ternary(value=encode_uint(a), mask=encode_uint(b))
        )
    if a == 0 and b == (1 << key.width) - 1:
        return None
    return FieldMatch(field_id=fid, range=FieldMatch.Range(low=encode_uint(a), high=encode_uint(b)))


def _int(value: object) -> int:
    assert isinstance(value, int)
    return value


def _pair(value: object) -> tuple[int, int]:
    assert isinstance(value, tuple) and len(value) == 2
    return int(value[0]), int(value[1])


def encode_match(tv: TableView, match: Sequence[object]) -> list[FieldMatch]:
    """The canonical ``FieldMatch`` list of a pipeline match tuple (don't-care fields omitted)."""
    out: list[FieldMatch] = []
    for fid in tv.field_ids:
        fv = tv.fields[fid]
        fm = _encode_field(fid, fv.key, match[fv.index])
        if fm is not None:
            out.append(fm)
    return out


# ----- actions


def decode_action(
    view: PipelineView,
    action: p4runtime_pb2.Action,
    allowed: dict[int, ActionScope],
    owner: str,
    *,
    for_default: bool = False,
) -> ActionCall:
    """The :class:`~switch.schema.ActionCall` of ``action``, one of ``allowed`` (action id -> scope) in ``owner``."""
    scope = allowed.get(action.action_id)
    if scope is None:
        raise P4RTError(
            INVALID_ARGUMENT, f"{owner}: action id {action.action_id} is not one of its actions"
        )
    av = view.action(action.action_id)
    if for_default and scope is ActionScope.TABLE_ONLY:
        raise P4RTError(
            PERMISSION_DENIED, f"{owner}: action '{av.name}' is @tableonly, not a default action"
        )
    if not for_default and scope is ActionScope.DEFAULT_ONLY:
        raise P4RTError(
            PERMISSION_DENIED, f"{owner}: action '{av.name}' is @defaultonly, not an entry action"
        )
    args: list[int | None] = [None] * len(av.spec.params)
    for p in action.params:
        pv = av.params.get(p.param_id)
        if pv is None:
            raise P4RTError(
                INVALID_ARGUMENT, f"action '{av.name}' has no parameter id {p.param_id}"
            )
        if args[pv.index] is not None:
            raise P4RTError(
                INVALID_ARGUMENT, f"action '{av.name}' parameter '{pv.spec.name}' is given twice"
            )
        args[pv.index] = decode_uint(
            p.value, pv.spec.width, f"action '{av.name}' parameter '{pv.spec.name}'"
        )
    missing = [av.spec.params[i].name for i, a in enumerate(args) if a is None]
    if missing:
        raise P4RTError(
            INVALID_ARGUMENT, f"action '{av.name}' is missing parameter(s) {', '.join(missing)}"
        )
    return ActionCall(av.name, tuple(a for a in args if a is not None))


def encode_action(view: PipelineView, call: ActionCall) -> p4runtime_pb2.Action:
    aid = view.action_id(call.name)
    av = view.actions[aid]
    params = [
        p4runtime_pb2.Action.Param(param_id=pid, value=encode_uint(arg))
        for pid, arg in zip(av.param_ids, call.args)
    ]
    return p4runtime_pb2.Action(action_id=aid, params=params)


# ----- counters and meters

_PACKETS = (
    p4info_pb2.CounterSpec.PACKETS,
    p4info_pb2.CounterSpec.BOTH,
    p4info_pb2.CounterSpec.UNSPECIFIED,
)
_BYTES = (
    p4info_pb2.CounterSpec.BYTES,
    p4info_pb2.CounterSpec.BOTH,
    p4info_pb2.CounterSpec.UNSPECIFIED,
)


def decode_counter_data(data: p4runtime_pb2.CounterData, unit: int, what: str) -> tuple[int, int]:
    """(packets, bytes) of a write; the count the counter's unit does not keep is zero."""
    if data.packet_count < 0 or data.byte_count < 0:
        raise P4RTError(INVALID_ARGUMENT, f"{what}: counts must not be negative")
    packets = data.packet_count if unit in _PACKETS else 0
    nbytes = data.byte_count if unit in _BYTES else 0
    return packets, nbytes


def encode_counter_data(packets: int, nbytes: int, unit: int) -> p4runtime_pb2.CounterData:
    data = p4runtime_pb2.CounterData()
    if unit in _PACKETS:
        data.packet_count = packets
    if unit in _BYTES:
        data.byte_count = nbytes
    return data


def decode_meter_config(config: p4runtime_pb2.MeterConfig, what: str) -> MeterConfig:
    """A two-rate three-colour configuration (rates per second, bursts in units)."""
    if config.eburst:
        raise P4RTError(INVALID_ARGUMENT, f"{what}: a two-rate meter takes no eburst")
    if min(config.cir, config.cburst, config.pir, config.pburst) < 0:
        raise P4RTError(INVALID_ARGUMENT, f"{what}: meter rates and bursts must be >= 0")
    if config.cir > config.pir:
        raise P4RTError(
            INVALID_ARGUMENT,
            f"{what}: committed rate {config.cir} exceeds the peak rate {config.pir}",
        )
    return MeterConfig.per_second(config.cir, config.cburst, config.pir, config.pburst)


def encode_meter_config(config: MeterConfig) -> p4runtime_pb2.MeterConfig:
    cir, cburst, pir, pburst = config.rates_per_second()
    return p4runtime_pb2.MeterConfig(cir=cir, cburst=cburst, pir=pir, pburst=pburst)


# ----- P4Data


def decode_bitstring(data: p4data_pb2.P4Data, width: int, signed: bool, what: str) -> int:
    """The integer of a ``P4Data`` that must be a ``bit<W>`` / ``int<W>`` bitstring."""
    if data.WhichOneof("data") != "bitstring":
        raise P4RTError(INVALID_ARGUMENT, f"{what}: expected a bitstring P4Data")
    if signed:
        return decode_sint(data.bitstring, width, what)
    return decode_uint(data.bitstring, width, what)


def encode_bitstring(value: int, signed: bool) -> p4data_pb2.P4Data:
    raw = encode_sint(value) if signed or value < 0 else encode_uint(value)
    return p4data_pb2.P4Data(bitstring=raw)


def encode_struct(values: Sequence[int], fields: Sequence[StructField]) -> p4data_pb2.P4Data:
    """A digest message: a struct of bitstrings, one per field."""
    members = [encode_bitstring(v, f.signed) for v, f in zip(values, fields)]
    return p4data_pb2.P4Data(struct=p4data_pb2.P4StructLike(members=members))
