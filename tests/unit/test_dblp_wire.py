"""DBLP wire formats: tensor chunks and control messages round-trip, and every malformed
field is rejected with its reason (nothing received is unpickled or evaluated)."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from host.dblp.chunks import (
    CHUNK_HEADER_BYTES,
    NUMPY_DTYPES,
    ChunkDrop,
    DType,
    TensorSpec,
    chunk_count,
    chunk_elems_for,
    decode_chunk,
    encode_chunks,
)
from host.dblp.control import (
    _BODY_RULES,
    CONTROL_HEADER_BYTES,
    Control,
    ControlKind,
    decode_control,
    encode_control,
    pack_bitmap,
)
from host.dblp.errors import DblpWireError


def reassemble(chunks: list[bytes], spec: TensorSpec) -> np.ndarray:
    parts = [np.frombuffer(decode_chunk(c).payload, dtype=spec.np_dtype) for c in chunks]
    return np.concatenate(parts).reshape(spec.shape)


@pytest.mark.parametrize("dtype", list(DType))
@pytest.mark.parametrize("shape", [(), (1,), (1000,), (7, 13), (2, 3, 4, 5)])
def test_chunks_round_trip_every_dtype_and_shape(dtype: DType, shape: tuple[int, ...]) -> None:
    x = (np.arange(int(np.prod(shape)), dtype=np.float64) % 200).astype(NUMPY_DTYPES[dtype])
    x = x.reshape(shape)
    spec = TensorSpec.of(3, x)
    elems = chunk_elems_for(1384, dtype)
    chunks = encode_chunks(7, spec, x, elems, 0.408)
    assert len(chunks) == chunk_count(spec.numel, elems)
    assert all(len(c) <= 1384 for c in chunks)
    first = decode_chunk(chunks[0])
    assert (first.round, first.spec, first.bound_ppm) == (7, spec, 408_000)
    np.testing.assert_array_equal(reassemble(chunks, spec), x)


def test_chunk_payload_fills_the_packet() -> None:
    assert CHUNK_HEADER_BYTES == 52
    assert chunk_elems_for(1384, DType.FLOAT32) == (1384 - 52) // 4


def _chunk(**override: int) -> bytes:
    """A valid float32 chunk with header fields replaced (the CRC recomputed)."""
    x = np.ones(100, dtype=np.float32)
    data = bytearray(encode_chunks(5, TensorSpec.of(0, x), x, 30, 0.1)[1])
    fields = list(struct.unpack_from("!HBBIHBB4IIIIHHI", data))
    names = [
        "magic",
        "version",
        "kind",
        "round",
        "tensor_id",
        "dtype",
        "ndim",
        "d0",
        "d1",
        "d2",
        "d3",
        "index",
        "count",
        "elems",
        "plen",
        "rsvd",
        "ppm",
    ]
    for k, v in override.items():
        fields[names.index(k)] = v
    struct.pack_into("!HBBIHBB4IIIIHHI", data, 0, *fields)
    struct.pack_into("!I", data, 48, zlib.crc32(bytes(data[52:]), zlib.crc32(bytes(data[:48]))))
    return bytes(data)


@pytest.mark.parametrize(
    ("override", "reason"),
    [
        ({"magic": 0x1234}, ChunkDrop.BAD_MAGIC),
        ({"version": 2}, ChunkDrop.BAD_VERSION),
        ({"kind": 9}, ChunkDrop.BAD_KIND),
        ({"dtype": 99}, ChunkDrop.BAD_DTYPE),
        ({"ndim": 5}, ChunkDrop.BAD_SHAPE),
        ({"ndim": 1, "d1": 4}, ChunkDrop.BAD_SHAPE),  # a dimension beyond ndim
        ({"count": 3}, ChunkDrop.BAD_SHAPE),  # 100 elements in chunks of 30 are 4 chunks
        ({"elems": 0}, ChunkDrop.BAD_SHAPE),
        ({"index": 4}, ChunkDrop.BAD_INDEX),
        ({"plen": 119}, ChunkDrop.BAD_LENGTH),
        ({"index": 3}, ChunkDrop.BAD_LENGTH),  # the last chunk holds 10 elements, not 30
        ({"ppm": 1_000_000}, ChunkDrop.BAD_BOUND),
    ],
)
def test_malformed_chunk_fields_are_rejected_with_their_reason(
    override: dict[str, int], reason: ChunkDrop
) -> None:
    with pytest.raises(DblpWireError) as e:
        decode_chunk(_chunk(**override))
    assert e.value.reason == reason.value


def test_chunk_crc_catches_every_single_bit_flip() -> None:
    good = _chunk()
    for bit in range(0, len(good) * 8, 7):
        bad = bytearray(good)
        bad[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(DblpWireError):
            decode_chunk(bytes(bad))


def test_truncated_chunk_is_short_or_bad_crc() -> None:
    good = _chunk()
    with pytest.raises(DblpWireError) as e:
        decode_chunk(good[:40])
    assert e.value.reason == ChunkDrop.SHORT.value
    with pytest.raises(DblpWireError) as e:
        decode_chunk(good[:-4])
    assert e.value.reason == ChunkDrop.BAD_CRC.value


def test_every_control_kind_has_a_body_rule() -> None:
    assert set(_BODY_RULES) == set(ControlKind)


@pytest.mark.parametrize(
    "ctrl",
    [
        Control(ControlKind.PROBE, 9, 1, 3, 17, 0, 8000, 42),
        Control(
            ControlKind.BITMAP, 9, 1, 3, 17, 5, 8000, 42, pack_bitmap([True, False] * 8 + [True])
        ),
        Control(ControlKind.STOP, 2**32 - 1, 65535, 0, 17, 17, 0),
        Control(ControlKind.HELLO, tensor_id=2, body=bytes(range(16))),
        Control(ControlKind.READY, tensor_id=2, body=bytes(16)),
        Control(ControlKind.ABORT, body="worker 2 vanished ✗".encode()),
    ],
)
def test_control_messages_round_trip(ctrl: Control) -> None:
    assert decode_control(encode_control(ctrl)) == ctrl


def test_bitmap_flags_are_lsb_first() -> None:
    flags = [True, False, False, True, True, False, True, False, True]
    c = Control(ControlKind.BITMAP, chunks=len(flags), body=pack_bitmap(flags))
    assert c.body == bytes([0b01011001, 0b1])
    assert decode_control(encode_control(c)).bitmap() == flags


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"Dc", "short"),
        (b"\x00" * CONTROL_HEADER_BYTES, "bad_magic"),
    ],
)
def test_malformed_control_is_rejected(data: bytes, reason: str) -> None:
    with pytest.raises(DblpWireError) as e:
        decode_control(data)
    assert e.value.reason == reason


def test_control_with_wrong_body_or_counts_is_rejected() -> None:
    good = encode_control(Control(ControlKind.BITMAP, chunks=16, body=bytes(2)))
    with pytest.raises(DblpWireError) as e:
        decode_control(good + b"\x00")
    assert e.value.reason == "bad_length"
    bad = bytearray(encode_control(Control(ControlKind.STOP, chunks=4, received=4)))
    struct.pack_into("!I", bad, 16, 5)  # received > chunks
    struct.pack_into("!I", bad, 32, zlib.crc32(bytes(bad[:32])))
    with pytest.raises(DblpWireError) as e:
        decode_control(bytes(bad))
    assert e.value.reason == "bad_field"
    flipped = bytearray(good)
    flipped[5] ^= 0x10
    with pytest.raises(DblpWireError) as e:
        decode_control(bytes(flipped))
    assert e.value.reason == "bad_crc"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_raise_only_wire_errors(data: bytes) -> None:
    for decode in (decode_chunk, decode_control):
        try:
            decode(data)
        except DblpWireError:
            pass


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 3000), st.integers(1, 700))
def test_any_tensor_size_splits_and_reassembles(numel: int, elems: int) -> None:
    x = np.arange(numel, dtype=np.float32)
    spec = TensorSpec.of(0, x)
    chunks = encode_chunks(0, spec, x, elems, 0.0)
    assert len(chunks) == chunk_count(numel, elems)
    np.testing.assert_array_equal(reassemble(chunks, spec), x)
