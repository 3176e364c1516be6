"""Wire format of DBLP control messages (probe, bitmap, stop, hello, abort).

Control messages go on the transport's reliable channel (plus optional unreliable copies, see
:attr:`~host.dblp.config.DblpConfig.control_copies`). Big-endian header, 36 bytes::

    0  magic      u16  0x4463 ("Dc")          16 received   u32  chunks the receiver holds
    2  version    u8   1                      20 bound_ppm  u32  loss bound in force (ppm)
    3  kind       u8   ControlKind            24 seq        u32  probe sequence (echoed)
    4  round      u32                         28 body_len   u32  bytes that follow
    8  tensor_id  u16                         32 crc        u32  CRC-32 of bytes [0, 32)
   10  attempt    u16  send attempt (0 first)                     followed by the body
   12  chunks     u32  chunk count of the transfer

Bodies: BITMAP = ``ceil(chunks / 8)`` bytes, bit i (LSB first in byte i // 8) = chunk i
received; HELLO = a 16-byte job fingerprint (``tensor_id`` carries the rank); ABORT = a UTF-8
reason of at most :data:`MAX_REASON_BYTES`; PROBE and STOP have none.
"""

from __future__ import annotations

import enum
import struct
import zlib
from dataclasses import dataclass

from host.dblp.chunks import MAX_CHUNKS, PPM
from host.dblp.errors import DblpWireError

CONTROL_MAGIC = 0x4463
CONTROL_VERSION = 1
FINGERPRINT_BYTES = 16
MAX_REASON_BYTES = 512

_HEAD = struct.Struct("!HBBIHHIIIII")
_CRC = struct.Struct("!I")
CONTROL_HEADER_BYTES = _HEAD.size + _CRC.size


class ControlKind(enum.IntEnum):
    PROBE = 1  # sender -> receiver: "I sent attempt A of this transfer; what is missing?"
    BITMAP = 2  # receiver -> sender: the chunks it holds (resend the others)
    STOP = 3  # receiver -> sender: received fraction >= 1 - P; the transfer is over
    HELLO = 4  # worker -> coordinator when a job starts (job fingerprint, rank)
    READY = 5  # coordinator -> worker: HELLO accepted
    ABORT = 6  # either way: the job stops (reason)


_BODY_RULES: dict[ControlKind, str] = {
    ControlKind.PROBE: "empty",
    ControlKind.BITMAP: "bitmap",
    ControlKind.STOP: "empty",
    ControlKind.HELLO: "fingerprint",
    ControlKind.READY: "fingerprint",
    ControlKind.ABORT: "reason",
}


@dataclass(frozen=True)
class Control:
    kind: ControlKind
    round: int = 0
    tensor_id: int = 0
    attempt: int = 0
    chunks: int = 0
    received: int = 0
    bound_ppm: int = 0
    seq: int = 0
    body: bytes = b""

    @property
    def key(self) -> tuple[int, int]:
        return (self.round, self.tensor_id)

    def bitmap(self) -> list[bool]:
        """The received flags of a BITMAP, one per chunk."""
        return [bool(self.body[i >> 3] >> (i & 7) & 1) for i in range(self.chunks)]

    @property
    def reason(self) -> str:
        return self.body.decode("utf-8", "replace")


def pack_bitmap(flags: list[bool] | bytearray) -> bytes:
    out = bytearray(-(-len(flags) // 8))
    for i, f in enumerate(flags):
        if f:
            out[i >> 3] |= 1 << (i & 7)
    return bytes(out)


def encode_control(c: Control) -> bytes:
    """The wire bytes of ``c`` (its body is checked as :func:`decode_control` would)."""
    _check_body(c.kind, c.chunks, c.body)
    head = _HEAD.pack(
        CONTROL_MAGIC,
        CONTROL_VERSION,
        c.kind,
        c.round,
        c.tensor_id,
        c.attempt & 0xFFFF,
        c.chunks,
        c.received,
        c.bound_ppm,
        c.seq & 0xFFFFFFFF,
        len(c.body),
    )
    return head + _CRC.pack(zlib.crc32(head)) + c.body


def is_control(data: bytes) -> bool:
    return len(data) >= 2 and data[0] == CONTROL_MAGIC >> 8 and data[1] == CONTROL_MAGIC & 0xFF


def decode_control(data: bytes) -> Control:
    """A validated control message.

    Raises:
        DblpWireError: reason ``short``, ``bad_magic``, ``bad_version``, ``bad_kind``,
            ``bad_crc``, ``bad_length``, ``bad_field`` or ``bad_body``.
    """
    if len(data) < CONTROL_HEADER_BYTES:
        raise DblpWireError("short", f"{len(data)} bytes")
    (magic, version, kind, round_, tensor_id, attempt, chunks, received, ppm, seq, body_len) = (
        _HEAD.unpack_from(data)
    )
    if magic != CONTROL_MAGIC:
        raise DblpWireError("bad_magic", f"{magic:#06x}")
    if version != CONTROL_VERSION:
        raise DblpWireError("bad_version", str(version))
    (crc,) = _CRC.unpack_from(data, _HEAD.size)
    if zlib.crc32(data[: _HEAD.size]) != crc:
        raise DblpWireError("bad_crc")
    try:
        k = ControlKind(kind)
    except ValueError:
        raise DblpWireError("bad_kind", str(kind)) from None
    body = bytes(data[CONTROL_HEADER_BYTES:])
    if body_len != len(body):
        raise DblpWireError("bad_length", f"declared {body_len}, carried {len(body)}")
    if chunks > MAX_CHUNKS or received > chunks or ppm >= PPM:
        raise DblpWireError("bad_field", f"chunks {chunks}, received {received}, bound {ppm} ppm")
    _check_body(k, chunks, body)
    return Control(k, round_, tensor_id, attempt, chunks, received, ppm, seq, body)


def _check_body(kind: ControlKind, chunks: int, body: bytes) -> None:
    rule = _BODY_RULES[kind]
    ok = {
        "empty": not body,
        "bitmap": len(body) == -(-chunks // 8),
        "fingerprint": len(body) == FINGERPRINT_BYTES,
        "reason": len(body) <= MAX_REASON_BYTES,
    }[rule]
    if not ok:
        raise DblpWireError("bad_body", f"{kind.name} with a {len(body)}-byte body")
