"""The backend's message format: one fixed header in front of each tensor's raw bytes.

Every message between two ranks of a ``tailfabric`` process group is one reliable MRC
message::

    0  magic  4s  b"TFPG"              4  version u8   (1)
    5  kind   u8  Kind                  6  op      u8   Op (which collective; 0: none)
    7  dtype  u8  DTYPES code (0: none) 8  redop   u8   reduce op (RedOpType value + 1; 0)
    9  (pad)  u8                       10  src     u16  sender's rank
   12  world  u16 sender's world size  14  seq     u64  collective number, or p2p tag
   22  step   u32 algorithm step       26  piece   u32  piece of the step's tensor (or the
                                                        n-th p2p message of (peer, tag))
   30  nbytes u64 this payload's bytes 38  total   u64  the whole tensor's bytes
   46  payload

A tensor larger than :data:`PIECE_BYTES` travels as several pieces. The payload is the
tensor's bytes in the machine's byte order (both ends run the same
build); nothing is unpickled. :func:`decode_header` checks magic, version, kind, dtype code
and that ``nbytes`` is the payload's length, raising :class:`WireError` otherwise.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

import torch

MAGIC = b"TFPG"
VERSION = 1
HEADER = struct.Struct("!4sBBBBBxHHQIIQQ")
HEADER_BYTES = HEADER.size  # 46
PIECE_BYTES = 4 * 1024 * 1024
"""Largest payload of one message (MRC's receive buffer holds whole messages)."""


class Kind(enum.IntEnum):
    """What a message is."""

    HELLO = 1  # first message of a connection: body = the group's session nonce
    COLLECTIVE = 2  # one step of a collective (seq = collective number)
    P2P = 3  # send/recv (seq = tag, count = n-th message of this tag to this peer)
    HEARTBEAT = 4  # nothing: the peer is alive
    ABORT = 5  # the sender failed collective ``seq``; body = the reason (UTF-8)
    BYE = 6  # the sender shut its process group down


class Op(enum.IntEnum):
    """Which collective a COLLECTIVE message belongs to (ranks must agree)."""

    NONE = 0
    ALLREDUCE = 1
    BROADCAST = 2
    ALLGATHER = 3
    REDUCE_SCATTER = 4
    BARRIER = 5
    REDUCE = 6
    GATHER = 7
    SCATTER = 8


DTYPES: dict[torch.dtype, int] = {
    torch.float32: 1,
    torch.float64: 2,
    torch.float16: 3,
    torch.bfloat16: 4,
    torch.int8: 5,
    torch.int16: 6,
    torch.int32: 7,
    torch.int64: 8,
    torch.uint8: 9,
    torch.bool: 10,
}
"""Tensor dtypes the backend carries, and their wire codes."""
DTYPE_OF_CODE: dict[int, torch.dtype] = {code: dt for dt, code in DTYPES.items()}


class WireError(ValueError):
    """A message that is not a valid backend message."""


@dataclass(frozen=True)
class Header:
    kind: Kind
    src: int
    world: int
    seq: int = 0
    step: int = 0
    piece: int = 0
    op: Op = Op.NONE
    dtype: int = 0
    redop: int = 0
    nbytes: int = 0
    total: int = 0


def encode(h: Header, payload: bytes | memoryview = b"") -> bytes:
    """The message: header then payload (``h.nbytes`` is taken from the payload)."""
    return (
        HEADER.pack(
            MAGIC,
            VERSION,
            int(h.kind),
            int(h.op),
            h.dtype,
            h.redop,
            h.src,
            h.world,
            h.seq,
            h.step,
            h.piece,
            len(payload),
            h.total,
        )
        + payload
    )


def decode_header(msg: bytes) -> Header:
    """The header of ``msg`` (its payload is ``msg[HEADER_BYTES:]``).

    Raises:
        WireError: too short, wrong magic or version, unknown kind or dtype, or a payload
            length that disagrees with the header.
    """
    if len(msg) < HEADER_BYTES:
        raise WireError(
            f"message of {len(msg)} bytes is shorter than the {HEADER_BYTES}-byte header"
        )
    (magic, version, kind, op, dtype, redop, src, world, seq, step, piece, nbytes, total) = (
        HEADER.unpack_from(msg)
    )
    if magic != MAGIC:
        raise WireError(f"bad magic {magic!r}")
    if version != VERSION:
        raise WireError(f"version {version}, expected {VERSION}")
    try:
        k = Kind(kind)
    except ValueError:
        raise WireError(f"unknown message kind {kind}") from None
    try:
        o = Op(op)
    except ValueError:
        raise WireError(f"unknown collective {op}") from None
    if dtype and dtype not in DTYPE_OF_CODE:
        raise WireError(f"unknown dtype code {dtype}")
    if nbytes != len(msg) - HEADER_BYTES:
        raise WireError(
            f"header says {nbytes} payload bytes, message carries {len(msg) - HEADER_BYTES}"
        )
    return Header(k, src, world, seq, step, piece, o, dtype, redop, nbytes, total)
