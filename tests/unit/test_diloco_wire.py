"""Tensor messages: round trips for every kind and dtype, a specific drop reason for each
malformed field, and fuzzing (random bytes, single-byte mutations) that only ever raises
MessageError."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from host.train.diloco import wire
from host.train.diloco.wire import (
    HEADER_BYTES,
    KIND_DTYPES,
    NP_DTYPES,
    DropReason,
    MessageError,
    MessageKind,
    decode,
    encode,
)


@pytest.mark.parametrize("kind", list(MessageKind))
def test_every_kind_round_trips_with_each_dtype_it_may_carry(kind: MessageKind) -> None:
    for dtype in KIND_DTYPES[kind]:
        arr = (np.arange(11) * 3).astype(NP_DTYPES[dtype])
        msg = decode(encode(kind, 70_000, 3, arr, tensor=9, part=4))
        assert (msg.kind, msg.round, msg.sender, msg.tensor, msg.part) == (kind, 70_000, 3, 9, 4)
        assert msg.array.dtype == NP_DTYPES[dtype]
        np.testing.assert_array_equal(msg.array, arr)


def test_a_kind_refuses_a_dtype_it_cannot_carry() -> None:
    with pytest.raises(ValueError, match="HELLO cannot carry float32"):
        encode(MessageKind.HELLO, 0, 0, np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="MIX1 cannot carry int64"):
        encode(MessageKind.MIX1, 0, 0, np.zeros(3, np.int64))


def test_message_size_is_header_plus_raw_elements() -> None:
    data = encode(MessageKind.OUTER_REDUCE, 1, 0, np.zeros(1000, np.float32))
    assert len(data) == wire.message_bytes(1000) == HEADER_BYTES + 4000 == 4028


def _patched(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    buf = bytearray(data)
    struct.pack_into(fmt, buf, offset, value)
    return bytes(buf)


GOOD = encode(MessageKind.MIX1, 5, 1, np.linspace(0, 1, 16, dtype=np.float32))


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (GOOD[:10], DropReason.SHORT),
        (_patched(GOOD, 0, "!H", 0x1234), DropReason.BAD_MAGIC),
        (_patched(GOOD, 2, "!B", 2), DropReason.BAD_VERSION),
        (_patched(GOOD, 3, "!B", 99), DropReason.BAD_KIND),
        (_patched(GOOD, 16, "!B", 1), DropReason.BAD_DTYPE),  # MIX1 cannot carry UINT8
        (_patched(GOOD, 16, "!B", 77), DropReason.BAD_DTYPE),
        (_patched(GOOD, 17, "!B", 1), DropReason.BAD_FIELD),
        (_patched(GOOD, 20, "!I", 17), DropReason.BAD_LENGTH),
        (GOOD[:-4], DropReason.BAD_LENGTH),
        (_patched(GOOD, 4, "!I", 6), DropReason.BAD_CHECKSUM),
        (GOOD[:-1] + bytes([GOOD[-1] ^ 1]), DropReason.BAD_CHECKSUM),
    ],
)
def test_each_malformed_field_has_its_drop_reason(data: bytes, reason: DropReason) -> None:
    with pytest.raises(MessageError) as info:
        decode(data)
    assert info.value.reason is reason


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120))
def test_random_bytes_only_raise_message_error(data: bytes) -> None:
    try:
        decode(data)
    except MessageError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(GOOD) - 1), st.integers(1, 255))
def test_a_mutated_byte_is_always_caught(pos: int, flip: int) -> None:
    buf = bytearray(GOOD)
    buf[pos] ^= flip
    with pytest.raises(MessageError):
        decode(bytes(buf))
