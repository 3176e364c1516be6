"""Tensor messages between DiLoCo workers: a validated 28-byte header, then raw bytes.

Every message (one reliable transport message) is, big-endian::

    0  magic   u16  0x7444 ("tD")            12 tensor  u32  which tensor of the round
    2  version u8   1                                        (data parallel: the inner step;
                                                             decoupled: the fragment)
    3  kind    u8   MessageKind               16 dtype   u8   DType of the elements
    4  round   u32  the round it belongs to   17 flags   u8   0
                    (decoupled: the fragment's
                    version)
    8  sender  u16  the sender's rank         18 rsvd    u16  0
    10 part    u16  ring all-reduce step      20 count   u32  number of elements
                    (0 otherwise)             24 crc     u32  CRC-32 of bytes [0, 24) and
                                                              of everything after byte 28
    28 counters: n × i64, the kind's named counters (:data:`KIND_COUNTERS`; n = 0 for the
                 kinds of DiLoCo and gossip, so their messages are header and payload only)
    28 + 8n payload: count × itemsize bytes, the elements in little-endian order

HELLO and ABORT carry bytes (dtype UINT8): the job fingerprint, or the reason as UTF-8. What
each kind may carry is :data:`KIND_DTYPES`; which counters it carries, in order, is
:data:`KIND_COUNTERS` (Decoupled DiLoCo's learner reports carry their step and the steps and
tokens since the fragment's last sync; elastic data parallel's messages the sender's
incarnation and group facts). The CRC covers the counters too. :func:`decode` checks magic,
version, kind, dtype, the declared length against the actual one, the fields and the CRC,
and raises :class:`MessageError` with a :class:`DropReason`; the mesh counts and drops such
messages. Nothing received is unpickled or evaluated: the payload becomes a NumPy array over
the bytes, the counters plain integers.
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from host.train.diloco.errors import DilocoError

MAGIC = 0x7444
VERSION = 1
_HEAD = struct.Struct("!HBBIHHIBBHI")
_CRC = struct.Struct("!I")
_COUNTER = struct.Struct("!q")
COUNTER_BYTES = _COUNTER.size
CRC_OFFSET = _HEAD.size
HEADER_BYTES = _HEAD.size + _CRC.size
MAX_ELEMENTS = 1 << 30


class MessageKind(enum.IntEnum):
    HELLO = 1  # setup: the job fingerprint (both directions)
    ABORT = 2  # the sender stopped; the payload says why, ``round`` says when
    GRAD_REDUCE = 3  # data parallel: a ring all-reduce segment of a gradient
    OUTER_REDUCE = 4  # DiLoCo or global Mix2: a ring all-reduce segment of an outer gradient
    MIX1 = 5  # gossip: the sender's round-start parameters
    MIX1_REDUCE = 6  # gossip: a ring all-reduce segment of round-start parameters
    MIX2 = 7  # gossip: the sender's outer gradient (local Mix2)
    REPORT = 8  # decoupled: a learner's copy of one fragment (tensor), from base version (round)
    MERGED = 9  # decoupled: a fragment after a merge that took the recipient's report
    FRAGMENT = 10  # decoupled: the syncer's current fragment, answering PULL (catch-up)
    PULL = 11  # decoupled: a (re)started learner asks for every fragment
    JOIN = 12  # elastic DP: a worker asks to be admitted to the group
    GRADIENT = 13  # elastic DP: a member's gradient of one round, to the coordinator
    MEAN = 14  # elastic DP: the group's mean gradient of a round
    RETRY = 15  # elastic DP: the round failed (redo it) or the sender is no member (join)
    STATE = 16  # elastic DP: parameters and optimizer state, donor → coordinator → joiner
    START = 17  # decoupled: every learner is connected; first incarnations take their first step


class DType(enum.IntEnum):
    UINT8 = 1
    FLOAT32 = 2
    FLOAT64 = 3


NP_DTYPES: dict[DType, np.dtype[np.generic]] = {
    DType.UINT8: np.dtype(np.uint8),
    DType.FLOAT32: np.dtype("<f4"),
    DType.FLOAT64: np.dtype("<f8"),
}
_FLOATS = frozenset({DType.FLOAT32, DType.FLOAT64})
KIND_DTYPES: dict[MessageKind, frozenset[DType]] = {
    MessageKind.HELLO: frozenset({DType.UINT8}),
    MessageKind.ABORT: frozenset({DType.UINT8}),
    MessageKind.GRAD_REDUCE: _FLOATS,
    MessageKind.OUTER_REDUCE: _FLOATS,
    MessageKind.MIX1: _FLOATS,
    MessageKind.MIX1_REDUCE: _FLOATS,
    MessageKind.MIX2: _FLOATS,
    MessageKind.REPORT: _FLOATS,
    MessageKind.MERGED: _FLOATS,
    MessageKind.FRAGMENT: _FLOATS,
    MessageKind.PULL: frozenset({DType.UINT8}),
    MessageKind.JOIN: frozenset({DType.UINT8}),
    MessageKind.GRADIENT: _FLOATS,
    MessageKind.MEAN: _FLOATS,
    MessageKind.RETRY: frozenset({DType.UINT8}),
    MessageKind.STATE: _FLOATS,
    MessageKind.START: frozenset({DType.UINT8}),
}
"""What each kind may carry (a test checks every kind has a row)."""
KIND_COUNTERS: dict[MessageKind, tuple[str, ...]] = {
    MessageKind.HELLO: (),
    MessageKind.ABORT: (),
    MessageKind.GRAD_REDUCE: (),
    MessageKind.OUTER_REDUCE: (),
    MessageKind.MIX1: (),
    MessageKind.MIX1_REDUCE: (),
    MessageKind.MIX2: (),
    MessageKind.REPORT: ("step", "steps_since_sync", "tokens_since_sync", "incarnation"),
    MessageKind.MERGED: ("quorum",),
    MessageKind.FRAGMENT: (),
    MessageKind.PULL: ("incarnation",),
    MessageKind.JOIN: ("incarnation",),
    MessageKind.GRADIENT: ("incarnation",),
    MessageKind.MEAN: ("group", "donor", "evaluate"),
    MessageKind.RETRY: ("member",),
    MessageKind.STATE: ("carried",),
    MessageKind.START: (),
}
"""The signed 64-bit counters each kind carries after the header, by name and in order (a test
checks every kind has a row). REPORT: the learner's step count, the steps and tokens since it
last received this fragment, its incarnation (restarts so far); MERGED: how many reports the
merge took; PULL, JOIN, GRADIENT: the sender's incarnation; MEAN: the group's size, 1 if the
recipient must send its state to a joiner, 1 if it should evaluate; RETRY: 1 if the recipient
is still a member (redo round ``round``), 0 if it must JOIN; STATE: 1 if the payload is the
state, 0 if the joiner keeps its own (no member was left to copy from)."""
_KINDS = {int(k): k for k in MessageKind}
_DTYPES = {int(d): d for d in DType}


class DropReason(enum.Enum):
    """Why a received message was dropped (counted per worker)."""

    SHORT = "short"
    BAD_MAGIC = "bad_magic"
    BAD_VERSION = "bad_version"
    BAD_KIND = "bad_kind"
    BAD_DTYPE = "bad_dtype"
    BAD_LENGTH = "bad_length"
    BAD_FIELD = "bad_field"
    BAD_CHECKSUM = "bad_checksum"
    WRONG_SENDER = "wrong_sender"  # the sender field is not the connection's peer
    LATE = "late"  # a gossip message for a round already mixed without it
    DUPLICATE = "duplicate"


class MessageError(DilocoError):
    """A malformed message; ``reason`` says which check failed."""

    def __init__(self, reason: DropReason, detail: str = "") -> None:
        super().__init__(f"{reason.value}: {detail}" if detail else reason.value)
        self.reason = reason


@dataclass(frozen=True)
class Key:
    """What a receiver waits for: one message of one kind, round, tensor, part and sender."""

    kind: MessageKind
    round: int
    sender: int
    tensor: int = 0
    part: int = 0


@dataclass(frozen=True)
class TensorMessage:
    kind: MessageKind
    round: int
    sender: int
    tensor: int
    part: int
    array: np.ndarray  # read-only, over the received bytes
    counters: tuple[int, ...] = ()  # the kind's KIND_COUNTERS, in order

    def counter(self, name: str) -> int:
        """The counter ``name`` of this message's kind.

        Raises:
            KeyError: the kind has no such counter (the message names the ones it has).
        """
        names = KIND_COUNTERS[self.kind]
        if name not in names:
            raise KeyError(f"{self.kind.name} has no counter {name!r}; it has {list(names)}")
        return self.counters[names.index(name)]

    @property
    def key(self) -> Key:
        return Key(self.kind, self.round, self.sender, self.tensor, self.part)


def encode(
    kind: MessageKind,
    round_: int,
    sender: int,
    array: np.ndarray,
    *,
    tensor: int = 0,
    part: int = 0,
    counters: Sequence[int] | None = None,
) -> bytes:
    """One message carrying ``array`` (flattened; its dtype must be one of :class:`DType`)
    and the kind's counters (:data:`KIND_COUNTERS`; None: all zero).

    Raises:
        ValueError: a field out of range, a dtype the kind cannot carry, or not the kind's
            number of counters.
    """
    dtype = next((k for k, v in NP_DTYPES.items() if array.dtype == v), None)
    if dtype is None or dtype not in KIND_DTYPES[kind]:
        raise ValueError(f"{kind.name} cannot carry {array.dtype}")
    if array.size > MAX_ELEMENTS:
        raise ValueError(f"{array.size} elements > {MAX_ELEMENTS}")
    names = KIND_COUNTERS[kind]
    values = tuple(counters) if counters is not None else (0,) * len(names)
    if len(values) != len(names):
        raise ValueError(f"{kind.name} carries {len(names)} counters {list(names)}, got {values}")
    if any(not -(1 << 63) <= v < 1 << 63 for v in values):
        raise ValueError(f"{kind.name} counters {values} outside the signed 64-bit range")
    payload = np.ascontiguousarray(array.reshape(-1), dtype=NP_DTYPES[dtype]).tobytes()
    head = _HEAD.pack(MAGIC, VERSION, kind, round_, sender, part, tensor, dtype, 0, 0, array.size)
    extra = b"".join(_COUNTER.pack(v) for v in values)
    crc = zlib.crc32(payload, zlib.crc32(extra, zlib.crc32(head)))
    return b"".join((head, _CRC.pack(crc), extra, payload))


def encode_bytes(
    kind: MessageKind,
    round_: int,
    sender: int,
    data: bytes,
    *,
    counters: Sequence[int] | None = None,
) -> bytes:
    """A message of a UINT8 kind (HELLO, ABORT, PULL, JOIN, RETRY) carrying ``data``."""
    return encode(kind, round_, sender, np.frombuffer(data, dtype=np.uint8), counters=counters)


def decode(buf: bytes) -> TensorMessage:
    """Validate and decode one message.

    Raises:
        MessageError: the message is malformed; ``reason`` tells which check failed.
    """
    if len(buf) < HEADER_BYTES:
        raise MessageError(DropReason.SHORT, f"{len(buf)} < {HEADER_BYTES} bytes")
    magic, version, kind, round_, sender, part, tensor, dt, flags, rsvd, count = _HEAD.unpack_from(
        buf
    )
    if magic != MAGIC:
        raise MessageError(DropReason.BAD_MAGIC, f"0x{magic:04x}")
    if version != VERSION:
        raise MessageError(DropReason.BAD_VERSION, str(version))
    mkind = _KINDS.get(kind)
    if mkind is None:
        raise MessageError(DropReason.BAD_KIND, str(kind))
    dtype = _DTYPES.get(dt)
    if dtype is None or dtype not in KIND_DTYPES[mkind]:
        raise MessageError(DropReason.BAD_DTYPE, f"{dt} in {mkind.name}")
    if flags or rsvd or count > MAX_ELEMENTS:
        raise MessageError(DropReason.BAD_FIELD, f"flags {flags} rsvd {rsvd} count {count}")
    np_dtype = NP_DTYPES[dtype]
    extra = len(KIND_COUNTERS[mkind]) * COUNTER_BYTES
    if len(buf) != HEADER_BYTES + extra + count * np_dtype.itemsize:
        raise MessageError(
            DropReason.BAD_LENGTH,
            f"{extra} B of counters and {count} × {np_dtype.itemsize} B declared, "
            f"{len(buf) - HEADER_BYTES} B carried",
        )
    view = memoryview(buf)
    (crc,) = _CRC.unpack_from(buf, CRC_OFFSET)
    if zlib.crc32(view[HEADER_BYTES:], zlib.crc32(view[:CRC_OFFSET])) != crc:
        raise MessageError(DropReason.BAD_CHECKSUM)
    counters = tuple(
        _COUNTER.unpack_from(buf, HEADER_BYTES + i * COUNTER_BYTES)[0]
        for i in range(len(KIND_COUNTERS[mkind]))
    )
    array = np.frombuffer(buf, dtype=np_dtype, count=count, offset=HEADER_BYTES + extra)
    return TensorMessage(mkind, round_, sender, tensor, part, array, counters)


def message_bytes(elements: int, dtype: DType = DType.FLOAT32, *, counters: int = 0) -> int:
    """Size of a message of ``elements`` elements and ``counters`` counters."""
    return HEADER_BYTES + counters * COUNTER_BYTES + elements * NP_DTYPES[dtype].itemsize
