"""Wire format of tensor chunks: raw bytes behind a validated fixed header.

A tensor (a NumPy array) is flattened and cut into chunks of ``chunk_elems`` elements; each
chunk travels as one unreliable transport message (one sprayed packet when the chunk size
is the transport's packet payload). Big-endian header, 52 bytes::

    0  magic        u16  0x4442 ("DB")        28 chunk_index  u32
    2  version      u8   1                    32 chunk_count  u32
    3  kind         u8   1 (chunk)            36 chunk_elems  u32  elements per full chunk
    4  round        u32  round counter        40 payload_len  u16  bytes that follow
    8  tensor_id    u16  transfer in round    42 reserved     u16  0
   10  dtype        u8   DType                44 bound_ppm    u32  sender's loss bound (ppm)
   11  ndim         u8   0..4                 48 crc          u32  CRC-32 of bytes [0, 48)
   12  shape[0..3]  4 x u32 (unused dims 0)                        followed by the payload

then ``payload_len`` bytes: elements ``[index*chunk_elems, ...)`` of the flattened tensor in
little-endian order. :func:`decode_chunk` checks every field (magic, version, kind, dtype,
ndim, element count against the shape, index < count, count against the shape and
chunk_elems, payload length against the declared one and the chunk's position, CRC) and raises
:class:`~host.dblp.errors.DblpWireError` with a :class:`ChunkDrop` reason. Nothing received
is unpickled or evaluated: the payload becomes numbers through ``numpy.frombuffer`` only.
"""

from __future__ import annotations

import enum
import math
import struct
import zlib
from dataclasses import dataclass

import numpy as np

from host.dblp.errors import DblpWireError

CHUNK_MAGIC = 0x4442
CHUNK_VERSION = 1
CHUNK_KIND = 1
MAX_DIMS = 4
MAX_CHUNKS = 1 << 20
PPM = 1_000_000

_HEAD = struct.Struct("!HBBIHBB4IIIIHHI")
_CRC = struct.Struct("!I")
CHUNK_HEADER_BYTES = _HEAD.size + _CRC.size


class DType(enum.IntEnum):
    """Element types a chunk may carry (little-endian on the wire)."""

    FLOAT32 = 1
    FLOAT64 = 2
    FLOAT16 = 3
    INT32 = 4
    INT64 = 5
    UINT8 = 6


NUMPY_DTYPES: dict[DType, np.dtype[np.generic]] = {
    DType.FLOAT32: np.dtype("<f4"),
    DType.FLOAT64: np.dtype("<f8"),
    DType.FLOAT16: np.dtype("<f2"),
    DType.INT32: np.dtype("<i4"),
    DType.INT64: np.dtype("<i8"),
    DType.UINT8: np.dtype("u1"),
}


class ChunkDrop(enum.Enum):
    """Why a received chunk was not used (counted per link)."""

    SHORT = "short"
    BAD_MAGIC = "bad_magic"
    BAD_VERSION = "bad_version"
    BAD_KIND = "bad_kind"
    BAD_DTYPE = "bad_dtype"
    BAD_SHAPE = "bad_shape"
    BAD_INDEX = "bad_index"
    BAD_LENGTH = "bad_length"
    BAD_CRC = "bad_crc"
    WRONG_ROUND = "wrong_round"  # a transfer already finished (late) or long gone
    FOREIGN = "foreign"  # a tensor this receiver does not expect (id, dtype, shape, chunking)
    DUPLICATE = "duplicate"
    LOST = "lost"  # the transport reports a message that never arrived
    OVERFLOW = "overflow"  # too many chunks of transfers not started yet
    BAD_BOUND = "bad_bound"


@dataclass(frozen=True)
class TensorSpec:
    """What a receiver expects: the transfer's id within the round, element type and shape."""

    tensor_id: int
    dtype: DType
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        if not 0 <= self.tensor_id <= 0xFFFF:
            raise ValueError(f"tensor_id must fit 16 bits, got {self.tensor_id}")
        if len(self.shape) > MAX_DIMS or any(d < 0 or d > 0xFFFFFFFF for d in self.shape):
            raise ValueError(f"shape {self.shape}: at most {MAX_DIMS} dims of 0..2^32-1")

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def np_dtype(self) -> np.dtype[np.generic]:
        return NUMPY_DTYPES[self.dtype]

    @classmethod
    def of(cls, tensor_id: int, array: np.ndarray) -> TensorSpec:
        """The spec of ``array`` (its dtype must be one of :class:`DType`)."""
        for kind, dt in NUMPY_DTYPES.items():
            if array.dtype == dt or array.dtype == dt.newbyteorder("="):
                return cls(tensor_id, kind, tuple(int(d) for d in array.shape))
        raise ValueError(
            f"dtype {array.dtype} cannot travel in a chunk; "
            f"valid: {', '.join(str(d) for d in NUMPY_DTYPES.values())}"
        )


@dataclass(frozen=True)
class Chunk:
    """One decoded chunk."""

    round: int
    spec: TensorSpec
    index: int
    count: int
    chunk_elems: int
    bound_ppm: int
    payload: bytes

    @property
    def key(self) -> tuple[int, int]:
        return (self.round, self.spec.tensor_id)


def chunk_elems_for(packet_bytes: int, dtype: DType) -> int:
    """Elements per chunk so that header + payload fit ``packet_bytes``."""
    n = (min(packet_bytes, 0xFFFF + CHUNK_HEADER_BYTES) - CHUNK_HEADER_BYTES) // NUMPY_DTYPES[
        dtype
    ].itemsize
    if n < 1:
        raise ValueError(f"packet_bytes {packet_bytes} leaves no room for one {dtype.name}")
    return n


def chunk_count(numel: int, chunk_elems: int) -> int:
    """Chunks of a tensor of ``numel`` elements (an empty tensor still sends one chunk)."""
    return max(1, -(-numel // chunk_elems))


def bound_to_ppm(bound: float) -> int:
    if not 0.0 <= bound < 1.0:
        raise ValueError(f"loss bound must be in [0, 1), got {bound}")
    return round(bound * PPM)


def encode_chunks(
    round_: int, spec: TensorSpec, array: np.ndarray, chunk_elems: int, bound: float
) -> list[bytes]:
    """Every chunk of ``array`` (which must match ``spec``) as wire bytes, in index order."""
    if tuple(array.shape) != spec.shape:
        raise ValueError(f"array shape {array.shape} does not match spec {spec.shape}")
    if not 0 <= round_ <= 0xFFFFFFFF:
        raise ValueError(f"round {round_} does not fit 32 bits")
    flat = np.ascontiguousarray(array, dtype=spec.np_dtype).reshape(-1)
    raw = flat.tobytes()
    itemsize = spec.np_dtype.itemsize
    count = chunk_count(spec.numel, chunk_elems)
    if count > MAX_CHUNKS:
        raise ValueError(f"{count} chunks > {MAX_CHUNKS}: use larger packets")
    dims = list(spec.shape) + [0] * (MAX_DIMS - len(spec.shape))
    ppm = bound_to_ppm(bound)
    step = chunk_elems * itemsize
    out: list[bytes] = []
    for i in range(count):
        payload = raw[i * step : (i + 1) * step]
        head = _HEAD.pack(
            CHUNK_MAGIC,
            CHUNK_VERSION,
            CHUNK_KIND,
            round_,
            spec.tensor_id,
            spec.dtype,
            len(spec.shape),
            *dims,
            i,
            count,
            chunk_elems,
            len(payload),
            0,
            ppm,
        )
        out.append(head + _CRC.pack(zlib.crc32(payload, zlib.crc32(head))) + payload)
    return out


def is_chunk(data: bytes) -> bool:
    """Whether ``data`` starts like a chunk (magic and kind), before full validation."""
    return (
        len(data) >= 4
        and data[0] == CHUNK_MAGIC >> 8
        and data[1] == CHUNK_MAGIC & 0xFF
        and data[3] == CHUNK_KIND
    )


def decode_chunk(data: bytes) -> Chunk:
    """A validated chunk.

    Raises:
        DblpWireError: with a :class:`ChunkDrop` value as ``reason``.
    """
    if len(data) < CHUNK_HEADER_BYTES:
        raise DblpWireError(ChunkDrop.SHORT.value, f"{len(data)} bytes")
    (
        magic,
        version,
        kind,
        round_,
        tensor_id,
        dtype,
        ndim,
        d0,
        d1,
        d2,
        d3,
        index,
        count,
        elems,
        plen,
        _rsvd,
        ppm,
    ) = _HEAD.unpack_from(data)
    if magic != CHUNK_MAGIC:
        raise DblpWireError(ChunkDrop.BAD_MAGIC.value, f"{magic:#06x}")
    if version != CHUNK_VERSION:
        raise DblpWireError(ChunkDrop.BAD_VERSION.value, str(version))
    if kind != CHUNK_KIND:
        raise DblpWireError(ChunkDrop.BAD_KIND.value, str(kind))
    (crc,) = _CRC.unpack_from(data, _HEAD.size)
    payload = data[CHUNK_HEADER_BYTES:]
    if zlib.crc32(payload, zlib.crc32(data[: _HEAD.size])) != crc:
        raise DblpWireError(ChunkDrop.BAD_CRC.value)
    try:
        dt = DType(dtype)
    except ValueError:
        raise DblpWireError(ChunkDrop.BAD_DTYPE.value, str(dtype)) from None
    dims = (d0, d1, d2, d3)
    if ndim > MAX_DIMS or any(dims[ndim:]):
        raise DblpWireError(ChunkDrop.BAD_SHAPE.value, f"ndim {ndim}, dims {dims}")
    spec = TensorSpec(tensor_id, dt, dims[:ndim])
    if elems < 1 or count < 1 or count > MAX_CHUNKS or count != chunk_count(spec.numel, elems):
        raise DblpWireError(
            ChunkDrop.BAD_SHAPE.value, f"{count} chunks of {elems} for {spec.numel} elements"
        )
    if index >= count:
        raise DblpWireError(ChunkDrop.BAD_INDEX.value, f"{index} >= {count}")
    itemsize = spec.np_dtype.itemsize
    expect = max(0, min(elems, spec.numel - index * elems)) * itemsize
    if plen != len(payload) or plen != expect:
        raise DblpWireError(
            ChunkDrop.BAD_LENGTH.value,
            f"declared {plen}, carried {len(payload)}, expected {expect}",
        )
    if ppm >= PPM:
        raise DblpWireError(ChunkDrop.BAD_BOUND.value, f"{ppm} ppm")
    return Chunk(round_, spec, index, count, elems, ppm, bytes(payload))
