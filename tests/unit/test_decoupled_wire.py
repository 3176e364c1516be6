"""The DiLoCo wire's counters (Decoupled DiLoCo's and elastic data parallel's messages): every
kind has a row, counters round-trip in order and by name, the wrong number is refused when
encoding, and a tampered counter or a wrong length is caught when decoding."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from host.train.diloco.wire import (
    COUNTER_BYTES,
    HEADER_BYTES,
    KIND_COUNTERS,
    KIND_DTYPES,
    NP_DTYPES,
    DropReason,
    MessageError,
    MessageKind,
    decode,
    encode,
    message_bytes,
)


def test_every_kind_has_a_counters_row_and_a_dtypes_row() -> None:
    assert set(KIND_COUNTERS) == set(MessageKind) == set(KIND_DTYPES)


@pytest.mark.parametrize("kind", [k for k in MessageKind if KIND_COUNTERS[k]])
def test_counters_round_trip_by_name(kind: MessageKind) -> None:
    names = KIND_COUNTERS[kind]
    values = tuple((-1) ** i * (i + 1) * 10**12 for i in range(len(names)))
    dtype = min(KIND_DTYPES[kind])
    arr = np.arange(5).astype(NP_DTYPES[dtype])
    data = encode(kind, 3, 2, arr, tensor=1, counters=values)
    assert len(data) == message_bytes(5, dtype, counters=len(names))
    msg = decode(data)
    assert msg.counters == values
    for name, v in zip(names, values):
        assert msg.counter(name) == v
    np.testing.assert_array_equal(msg.array, arr)


def test_a_report_carries_step_counters_and_incarnation() -> None:
    vec = np.linspace(-1, 1, 7, dtype=np.float32)
    msg = decode(encode(MessageKind.REPORT, 4, 1, vec, tensor=2, counters=(96, 24, 3072, 1)))
    assert (msg.kind, msg.round, msg.sender, msg.tensor) == (MessageKind.REPORT, 4, 1, 2)
    assert (msg.counter("steps_since_sync"), msg.counter("tokens_since_sync")) == (24, 3072)
    with pytest.raises(KeyError, match="REPORT has no counter 'tokens'"):
        msg.counter("tokens")


def test_omitted_counters_are_zero_and_the_wrong_number_is_refused() -> None:
    msg = decode(encode(MessageKind.MEAN, 0, 0, np.zeros(2, np.float32)))
    assert msg.counters == (0, 0, 0)
    with pytest.raises(ValueError, match=r"REPORT carries 4 counters"):
        encode(MessageKind.REPORT, 0, 0, np.zeros(2, np.float32), counters=(1, 2))
    with pytest.raises(ValueError, match="signed 64-bit"):
        encode(MessageKind.JOIN, 0, 0, np.zeros(0, np.uint8), counters=(1 << 63,))


GOOD = encode(MessageKind.REPORT, 1, 0, np.ones(4, np.float32), counters=(8, 8, 128, 0))


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (GOOD[:-COUNTER_BYTES], DropReason.BAD_LENGTH),
        (GOOD[: HEADER_BYTES + COUNTER_BYTES], DropReason.BAD_LENGTH),
        (
            GOOD[:HEADER_BYTES] + struct.pack("!q", 9) + GOOD[HEADER_BYTES + COUNTER_BYTES :],
            DropReason.BAD_CHECKSUM,
        ),
    ],
)
def test_a_short_or_tampered_counter_is_caught(data: bytes, reason: DropReason) -> None:
    with pytest.raises(MessageError) as info:
        decode(data)
    assert info.value.reason is reason


def test_kinds_without_counters_keep_their_old_size() -> None:
    assert len(encode(MessageKind.MIX1, 0, 0, np.zeros(10, np.float32))) == HEADER_BYTES + 40
