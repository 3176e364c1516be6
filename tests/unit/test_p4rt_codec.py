"""P4Runtime bytestrings and match/action codecs: the specification's accept/reject tables."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from p4.v1 import p4runtime_pb2
from p4rt_helpers import aid, full_config, full_p4info, tid

from switch.compile.package import load_device_config
from switch.p4rt.bytestrings import decode_sint, decode_uint, encode_sint, encode_uint
from switch.p4rt.codec import decode_action, decode_match, encode_action, encode_match
from switch.p4rt.entity_tables import pack_cookie, unpack_cookie
from switch.p4rt.pipeline_view import PipelineView, build_view
from switch.p4rt.status import INVALID_ARGUMENT, OUT_OF_RANGE, PERMISSION_DENIED, P4RTError
from switch.schema import ActionCall

FM = p4runtime_pb2.FieldMatch


@pytest.fixture(scope="module")
def view() -> PipelineView:
    return build_view(full_p4info(), load_device_config(full_config()).schema)


# The valid and invalid examples of the "Bytestrings" section of the specification.
@pytest.mark.parametrize(
    ("width", "data", "value"),
    [
        (8, b"\x63", 99),
        (16, b"\x00\x63", 99),
        (16, b"\x63", 99),
        (16, b"\x30\x64", 12388),
        (16, b"\x00\x30\x64", 12388),
        (12, b"\x00\x63", 99),
        (12, b"\x63", 99),
        (12, b"\x00\x00\x63", 99),
    ],
)
def test_unsigned_bytestrings_that_fit_are_accepted(width: int, data: bytes, value: int) -> None:
    assert decode_uint(data, width, "f") == value


@pytest.mark.parametrize(
    ("width", "data"),
    [
        (8, b"\x01\x63"),
        (8, b""),
        (16, b"\x01\x00\x63"),
        (12, b"\x10\x63"),
        (12, b"\x01\x00\x63"),
        (12, b"\x00\x40\x63"),
    ],
)
def test_unsigned_bytestrings_that_do_not_fit_are_out_of_range(width: int, data: bytes) -> None:
    with pytest.raises(P4RTError) as err:
        decode_uint(data, width, "f")
    assert err.value.code == OUT_OF_RANGE


@pytest.mark.parametrize(
    ("width", "data", "value"),
    [
        (8, b"\x63", 99),
        (8, b"\x9d", -99),
        (8, b"\xff\x9d", -99),
        (12, b"\xfd\x1d", -739),
        (16, b"\x00\x00", 0),
        (16, b"\x00", 0),
    ],
)
def test_signed_bytestrings(width: int, data: bytes, value: int) -> None:
    assert decode_sint(data, width, "f") == value


@pytest.mark.parametrize(("width", "data"), [(8, b"\x00\x9d"), (12, b"\x8d\x1d"), (16, b"")])
def test_signed_bytestrings_out_of_range(width: int, data: bytes) -> None:
    with pytest.raises(P4RTError) as err:
        decode_sint(data, width, "f")
    assert err.value.code == OUT_OF_RANGE


@pytest.mark.parametrize(
    ("value", "data"), [(0, b"\x00"), (1, b"\x01"), (255, b"\xff"), (256, b"\x01\x00")]
)
def test_canonical_unsigned_encoding(value: int, data: bytes) -> None:
    assert encode_uint(value) == data


@pytest.mark.parametrize(
    ("value", "data"),
    [
        (0, b"\x00"),
        (-1, b"\xff"),
        (-128, b"\x80"),
        (127, b"\x7f"),
        (128, b"\x00\x80"),
        (-739, b"\xfd\x1d"),
    ],
)
def test_canonical_signed_encoding(value: int, data: bytes) -> None:
    assert encode_sint(value) == data


@given(st.integers(min_value=0, max_value=(1 << 128) - 1), st.integers(min_value=0, max_value=3))
def test_uint_roundtrip_with_padding(value: int, pad: int) -> None:
    data = b"\x00" * pad + encode_uint(value)
    assert decode_uint(data, 128, "f") == value


@given(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1))
def test_sint_roundtrip(value: int) -> None:
    assert decode_sint(encode_sint(value), 64, "f") == value


@given(st.integers(min_value=0, max_value=(1 << 64) - 1), st.binary(max_size=20))
def test_cookie_packing_keeps_both_cookies(controller_metadata: int, metadata: bytes) -> None:
    assert unpack_cookie(pack_cookie(controller_metadata, metadata)) == (
        controller_metadata,
        metadata,
    )


# ----- match keys


def _lpm(value: bytes, plen: int) -> FM:
    return FM(field_id=1, lpm=FM.LPM(value=value, prefix_len=plen))


def test_lpm_match_roundtrip_and_dont_care(view: PipelineView) -> None:
    tv = view.table(tid("MyIngress.t_lpm"))
    assert decode_match(tv, [_lpm(b"\x0a\x00\x00\x00", 8)]) == ((0x0A000000, 8),)
    assert decode_match(tv, []) == ((0, 0),)
    assert encode_match(tv, ((0x0A000000, 8),)) == [_lpm(b"\x0a\x00\x00\x00", 8)]
    assert encode_match(tv, ((0, 0),)) == []


@pytest.mark.parametrize(
    ("fm", "code"),
    [
        (_lpm(b"\x0a\x00\x00\x01", 8), INVALID_ARGUMENT),  # bits beyond the prefix
        (_lpm(b"\x0a", 0), INVALID_ARGUMENT),  # don't care must be omitted
        (_lpm(b"\x0a", 33), INVALID_ARGUMENT),
        (_lpm(b"\x01\x0a\x00\x00\x00", 8), OUT_OF_RANGE),  # wider than 32 bits
        (FM(field_id=1, exact=FM.Exact(value=b"\x01")), INVALID_ARGUMENT),  # wrong kind
        (FM(field_id=9, lpm=FM.LPM(value=b"\x01", prefix_len=32)), INVALID_ARGUMENT),
    ],
)
def test_bad_lpm_matches(view: PipelineView, fm: FM, code: int) -> None:
    with pytest.raises(P4RTError) as err:
        decode_match(view.table(tid("MyIngress.t_lpm")), [fm])
    assert err.value.code == code


def test_ternary_rules(view: PipelineView) -> None:
    tv = view.table(tid("MyIngress.t_ternary"))
    kind = FM(field_id=2, exact=FM.Exact(value=b"\x01"))
    ok = FM(field_id=1, ternary=FM.Ternary(value=b"\x01\x00", mask=b"\xff\x00"))
    assert decode_match(tv, [ok, kind]) == ((0x100, 0xFF00), 1)
    assert decode_match(tv, [kind]) == ((0, 0), 1)
    for bad in (
        FM(field_id=1, ternary=FM.Ternary(value=b"\x01\x01", mask=b"\xff\x00")),
        FM(field_id=1, ternary=FM.Ternary(value=b"\x00", mask=b"\x00")),
    ):
        with pytest.raises(P4RTError) as err:
            decode_match(tv, [bad, kind])
        assert err.value.code == INVALID_ARGUMENT
    with pytest.raises(P4RTError) as err:
        decode_match(tv, [ok])  # the exact field is missing
    assert err.value.code == INVALID_ARGUMENT
    with pytest.raises(P4RTError):
        decode_match(tv, [ok, ok, kind])  # a field twice


def test_range_and_optional_rules(view: PipelineView) -> None:
    tv = view.table(tid("MyIngress.t_range"))
    rng = FM(field_id=1, range=FM.Range(low=b"\x10", high=b"\x20"))
    assert decode_match(tv, [rng]) == ((0x10, 0x20),)
    assert decode_match(tv, []) == ((0, 0xFFFF),)
    assert encode_match(tv, ((0, 0xFFFF),)) == []
    for bad in (
        FM(field_id=1, range=FM.Range(low=b"\x20", high=b"\x10")),
        FM(field_id=1, range=FM.Range(low=b"\x00", high=b"\xff\xff")),
    ):
        with pytest.raises(P4RTError) as err:
            decode_match(tv, [bad])
        assert err.value.code == INVALID_ARGUMENT
    tv = view.table(tid("MyIngress.t_optional"))
    kind = FM(field_id=2, exact=FM.Exact(value=b"\x03"))
    assert decode_match(tv, [kind]) == (None, 3)
    opt = FM(field_id=1, optional=FM.Optional(value=b"\x07"))
    assert decode_match(tv, [opt, kind]) == (7, 3)
    assert encode_match(tv, (None, 3)) == [kind]


def test_actions_check_table_membership_scope_and_params(view: PipelineView) -> None:
    tv = view.table(tid("MyIngress.t_exact"))
    act = p4runtime_pb2.Action(action_id=aid("MyIngress.fwd"))
    act.params.add(param_id=1, value=b"\x00\x05")
    call = decode_action(view, act, tv.actions, "t")
    assert call == ActionCall("MyIngress.fwd", (5,))
    assert encode_action(view, call).params[0].value == b"\x05"  # canonical on the way back

    def code_of(action: p4runtime_pb2.Action, for_default: bool = False) -> int:
        with pytest.raises(P4RTError) as err:
            decode_action(view, action, tv.actions, "t", for_default=for_default)
        return err.value.code

    assert (
        code_of(p4runtime_pb2.Action(action_id=aid("MyIngress.set_out_rated"))) == INVALID_ARGUMENT
    )  # not an action of t_exact
    assert code_of(p4runtime_pb2.Action(action_id=aid("MyIngress.miss"))) == PERMISSION_DENIED
    assert (
        code_of(p4runtime_pb2.Action(action_id=aid("MyIngress.hit_only")), for_default=True)
        == PERMISSION_DENIED
    )
    assert code_of(p4runtime_pb2.Action(action_id=aid("MyIngress.fwd"))) == INVALID_ARGUMENT
    big = p4runtime_pb2.Action(action_id=aid("MyIngress.fwd"))
    big.params.add(param_id=1, value=b"\x02\x00")  # 512 does not fit bit<9>
    assert code_of(big) == OUT_OF_RANGE
    extra = p4runtime_pb2.Action(action_id=aid("MyIngress.fwd"))
    extra.params.add(param_id=1, value=b"\x01")
    extra.params.add(param_id=2, value=b"\x01")
    assert code_of(extra) == INVALID_ARGUMENT
