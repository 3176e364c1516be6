"""Datagram formats of the MRC transport: validated headers, checksums, a table of codecs.

Every datagram (UDP payload) starts with the same 20-byte common header, big-endian::

    0  magic    u16  0x7446 ("tF")          10 conn_id  u32  connection id (the connector's)
    2  version  u8   1                      14 length   u16  datagram length in bytes (declared)
    3  type     u8   PacketType             16 crc      u32  CRC-32 of the header, see below
    4  flags    u8   Flag bits
    5  ev       u8   EV id the datagram travels on (the sender's path index)
    6  src_host u16  sender host id          8 dst_host u16  receiver host id

followed by a fixed body per type and a variable part:

    DATA       psn u64, msg_id u32, msg_len u32, index u32, ts_us u32, stride u16, rsvd u16,
               digest 16 B (BLAKE2b-128 of the whole message), pcrc u32 (CRC-32 of the payload),
               then the payload: bytes [index*stride, index*stride + len) of the message
    ACK, NACK, PROBE_ACK
               cum u64 (every PSN below is received), credit u64 (cumulative message bytes the
               sender may have started), echo_psn u64, echo_ts u32, unrel_done u32 (FLOOR news
               processed), nbits u16, echo_ev u8 (255 = no echo), rsvd u8,
               then nbits/8 bytes of SACK bitmap: bit i (LSB first) = PSN cum+1+i received
    PROBE      probe_seq u64, ts_us u32
    FLOOR      floor u64 (the sender wants no PSN below), unrel_done u32, unrel_done_bytes u64

``crc`` covers bytes [0, 16) and [20, end of the fixed body) for DATA, [20, length) otherwise;
the DATA payload has its own ``pcrc`` so that a switch can *trim* a packet (cut it to its
:data:`DATA_HEADER_BYTES` header and leave the lengths and checksum alone): such a datagram is
shorter than its declared ``length``, its header still verifies, and the receiver NACKs it.
A datagram that fails any check raises :class:`WireError` with a :class:`DropReason`; the
endpoint counts it and drops it. Nothing received is ever unpickled or evaluated.
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from host.errors import TransportError

MAGIC = 0x7446
VERSION = 1
DIGEST_BYTES = 16
MAX_DATAGRAM_BYTES = 65_507  # largest UDP payload over IPv4; IPv6 jumbograms are not used
MAX_SACK_BITS = 8192
MAX_EVS = 255
NO_EV = 255  # echo_ev of an ACK that echoes no packet (a window update)

_COMMON = struct.Struct("!HBBBBHHIHI")
_HEAD16 = struct.Struct("!HBBBBHHIH")
_CRC = struct.Struct("!I")
_DATA = struct.Struct("!QIIIIHH16sI")
_ACK = struct.Struct("!QQQIIHBB")
_PROBE = struct.Struct("!QI")
_FLOOR = struct.Struct("!QIQ")

COMMON_BYTES = _COMMON.size
CRC_OFFSET = 16
DATA_HEADER_BYTES = COMMON_BYTES + _DATA.size
ACK_HEADER_BYTES = COMMON_BYTES + _ACK.size
PROBE_BYTES = COMMON_BYTES + _PROBE.size
FLOOR_BYTES = COMMON_BYTES + _FLOOR.size
MAX_PAYLOAD_BYTES = min(0xFFFF, MAX_DATAGRAM_BYTES) - DATA_HEADER_BYTES


class PacketType(enum.IntEnum):
    DATA = 1
    ACK = 2
    NACK = 3  # an ACK that also says: the echoed PSN arrived trimmed, resend it
    PROBE = 4
    PROBE_ACK = 5
    FLOOR = 6


class Flag(enum.IntFlag):
    NONE = 0
    UNRELIABLE = 0x01  # DATA: the message is sent without retransmission
    RETRANSMIT = 0x02  # DATA: not the first transmission of this PSN
    ACK_NOW = 0x04  # DATA: acknowledge at once (last packet of a message, window full)
    CE = 0x08  # ACK/NACK: the echoed packet arrived with ECN Congestion Experienced
    DUPLICATE = 0x10  # ACK: the echoed packet had been received before


class DropReason(enum.Enum):
    """Why a received datagram was dropped (counted per endpoint and per connection)."""

    SHORT = "short"
    BAD_MAGIC = "bad_magic"
    BAD_VERSION = "bad_version"
    BAD_TYPE = "bad_type"
    BAD_LENGTH = "bad_length"
    BAD_CHECKSUM = "bad_checksum"
    BAD_PAYLOAD_CHECKSUM = "bad_payload_checksum"
    BAD_FIELD = "bad_field"
    FOREIGN = "foreign"  # addressed to another host
    UNKNOWN_CONNECTION = "unknown_connection"
    BAD_EV = "bad_ev"
    OUT_OF_WINDOW = "out_of_window"
    NO_BUFFER = "no_buffer"
    INCONSISTENT = "inconsistent"  # contradicts what earlier packets of the message said
    DIGEST_MISMATCH = "digest_mismatch"
    INTERNAL_ERROR = "internal_error"


class WireError(TransportError):
    """A malformed datagram; ``reason`` says which check failed."""

    def __init__(self, reason: DropReason, detail: str = "") -> None:
        super().__init__(f"{reason.value}: {detail}" if detail else reason.value)
        self.reason = reason


@dataclass(slots=True)
class DataPacket:
    """A decoded DATA datagram. Not frozen, like :class:`AckPacket`: a frozen dataclass sets
    each field through ``object.__setattr__``, and one of these is built per packet."""

    flags: int
    ev: int
    src_host: int
    dst_host: int
    conn_id: int
    psn: int
    msg_id: int
    msg_len: int
    index: int
    ts_us: int
    stride: int
    digest: bytes
    payload: bytes | memoryview  # empty when trimmed
    trimmed: bool = False

    @property
    def offset(self) -> int:
        return self.index * self.stride

    @property
    def payload_len(self) -> int:
        """The declared payload length (also for a trimmed packet)."""
        return payload_length(self.msg_len, self.stride, self.index)


@dataclass(slots=True)
class AckPacket:
    ptype: PacketType  # ACK, NACK or PROBE_ACK
    flags: int
    ev: int
    src_host: int
    dst_host: int
    conn_id: int
    cum: int
    credit: int
    echo_psn: int
    echo_ts: int
    echo_ev: int  # NO_EV: echoes nothing
    unrel_done: int
    bitmap: int  # bit i = PSN cum+1+i received
    nbits: int


@dataclass(frozen=True, slots=True)
class ProbePacket:
    flags: int
    ev: int
    src_host: int
    dst_host: int
    conn_id: int
    probe_seq: int
    ts_us: int


@dataclass(frozen=True, slots=True)
class FloorPacket:
    flags: int
    ev: int
    src_host: int
    dst_host: int
    conn_id: int
    floor: int
    unrel_done: int
    unrel_done_bytes: int


Packet = DataPacket | AckPacket | ProbePacket | FloorPacket


def payload_length(msg_len: int, stride: int, index: int) -> int:
    """Payload bytes of packet ``index`` of a message cut into ``stride``-byte packets."""
    if stride == 0:
        return 0
    return max(0, min(stride, msg_len - index * stride))


def packet_count(msg_len: int, stride: int) -> int:
    """How many packets a message of ``msg_len`` bytes needs (a zero-length message needs one)."""
    return max(1, -(-msg_len // stride)) if stride else 1


def _head(
    ptype: PacketType, flags: int, ev: int, src: int, dst: int, conn: int, length: int
) -> bytes:
    return _HEAD16.pack(MAGIC, VERSION, ptype, flags, ev, src, dst, conn, length)


def encode_data(
    *,
    flags: int,
    ev: int,
    src_host: int,
    dst_host: int,
    conn_id: int,
    psn: int,
    msg_id: int,
    msg_len: int,
    index: int,
    ts_us: int,
    stride: int,
    digest: bytes,
    payload: bytes | memoryview,
    pcrc: int | None = None,
) -> bytes:
    """One DATA datagram. ``pcrc`` may be passed when the payload CRC is already known."""
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise ValueError(f"payload of {len(payload)} bytes exceeds {MAX_PAYLOAD_BYTES}")
    return pack_data(
        flags,
        ev,
        src_host,
        dst_host,
        conn_id,
        psn,
        msg_id,
        msg_len,
        index,
        ts_us,
        stride,
        digest,
        payload,
        zlib.crc32(payload) if pcrc is None else pcrc,
    )


def pack_data(
    flags: int,
    ev: int,
    src_host: int,
    dst_host: int,
    conn_id: int,
    psn: int,
    msg_id: int,
    msg_len: int,
    index: int,
    ts_us: int,
    stride: int,
    digest: bytes,
    payload: bytes | memoryview,
    pcrc: int,
) -> bytes:
    """:func:`encode_data` with positional arguments, the payload CRC given and no size check
    (the sender's packets are cut to at most ``MAX_PAYLOAD_BYTES``): the per-packet path."""
    head = _HEAD16.pack(
        MAGIC,
        VERSION,
        1,  # PacketType.DATA
        flags,
        ev,
        src_host,
        dst_host,
        conn_id,
        DATA_HEADER_BYTES + len(payload),
    )
    body = _DATA.pack(psn, msg_id, msg_len, index, ts_us & 0xFFFFFFFF, stride, 0, digest, pcrc)
    return b"".join((head, _CRC.pack(zlib.crc32(body, zlib.crc32(head))), body, payload))


def encode_ack(
    *,
    ptype: PacketType = PacketType.ACK,
    flags: int,
    ev: int,
    src_host: int,
    dst_host: int,
    conn_id: int,
    cum: int,
    credit: int,
    echo_psn: int,
    echo_ts: int,
    echo_ev: int,
    unrel_done: int = 0,
    bitmap: int = 0,
    max_bits: int = MAX_SACK_BITS,
) -> bytes:
    """An ACK, NACK or PROBE_ACK; the SACK bitmap is cut to ``max_bits`` (a multiple of 8)."""
    return pack_ack(
        ptype,
        flags,
        ev,
        src_host,
        dst_host,
        conn_id,
        cum,
        credit,
        echo_psn,
        echo_ts,
        echo_ev,
        unrel_done,
        bitmap,
        max_bits,
    )


def pack_ack(
    ptype: PacketType,
    flags: int,
    ev: int,
    src_host: int,
    dst_host: int,
    conn_id: int,
    cum: int,
    credit: int,
    echo_psn: int,
    echo_ts: int,
    echo_ev: int,
    unrel_done: int,
    bitmap: int,
    max_bits: int,
) -> bytes:
    """:func:`encode_ack` with positional arguments (keyword binding of 14 arguments is a
    measurable part of an ACK's cost): the per-packet path."""
    nbytes = min((bitmap.bit_length() + 7) // 8, max_bits // 8)
    if nbytes and bitmap.bit_length() > nbytes * 8:
        bitmap &= (1 << (nbytes * 8)) - 1
    bits = bitmap.to_bytes(nbytes, "little")
    head = _head(ptype, flags, ev, src_host, dst_host, conn_id, ACK_HEADER_BYTES + nbytes)
    body = _ACK.pack(
        cum, credit, echo_psn, echo_ts & 0xFFFFFFFF, unrel_done, nbytes * 8, echo_ev, 0
    )
    crc = zlib.crc32(bits, zlib.crc32(body, zlib.crc32(head)))
    return b"".join((head, _CRC.pack(crc), body, bits))


def encode_probe(
    *,
    flags: int = 0,
    ev: int,
    src_host: int,
    dst_host: int,
    conn_id: int,
    probe_seq: int,
    ts_us: int,
) -> bytes:
    head = _head(PacketType.PROBE, flags, ev, src_host, dst_host, conn_id, PROBE_BYTES)
    body = _PROBE.pack(probe_seq, ts_us & 0xFFFFFFFF)
    return b"".join((head, _CRC.pack(zlib.crc32(body, zlib.crc32(head))), body))


def encode_floor(
    *,
    flags: int = 0,
    ev: int,
    src_host: int,
    dst_host: int,
    conn_id: int,
    floor: int,
    unrel_done: int,
    unrel_done_bytes: int,
) -> bytes:
    head = _head(PacketType.FLOOR, flags, ev, src_host, dst_host, conn_id, FLOOR_BYTES)
    body = _FLOOR.pack(floor, unrel_done, unrel_done_bytes)
    return b"".join((head, _CRC.pack(zlib.crc32(body, zlib.crc32(head))), body))


def encode(pkt: Packet) -> bytes:
    """Any packet back to bytes (tests and tools; the transport calls the typed encoders)."""
    match pkt:
        case DataPacket():
            return encode_data(
                flags=pkt.flags,
                ev=pkt.ev,
                src_host=pkt.src_host,
                dst_host=pkt.dst_host,
                conn_id=pkt.conn_id,
                psn=pkt.psn,
                msg_id=pkt.msg_id,
                msg_len=pkt.msg_len,
                index=pkt.index,
                ts_us=pkt.ts_us,
                stride=pkt.stride,
                digest=pkt.digest,
                payload=pkt.payload,
            )
        case AckPacket():
            return encode_ack(
                ptype=pkt.ptype,
                flags=pkt.flags,
                ev=pkt.ev,
                src_host=pkt.src_host,
                dst_host=pkt.dst_host,
                conn_id=pkt.conn_id,
                cum=pkt.cum,
                credit=pkt.credit,
                echo_psn=pkt.echo_psn,
                echo_ts=pkt.echo_ts,
                echo_ev=pkt.echo_ev,
                unrel_done=pkt.unrel_done,
                bitmap=pkt.bitmap,
            )
        case ProbePacket():
            return encode_probe(
                flags=pkt.flags,
                ev=pkt.ev,
                src_host=pkt.src_host,
                dst_host=pkt.dst_host,
                conn_id=pkt.conn_id,
                probe_seq=pkt.probe_seq,
                ts_us=pkt.ts_us,
            )
        case FloorPacket():
            return encode_floor(
                flags=pkt.flags,
                ev=pkt.ev,
                src_host=pkt.src_host,
                dst_host=pkt.dst_host,
                conn_id=pkt.conn_id,
                floor=pkt.floor,
                unrel_done=pkt.unrel_done,
                unrel_done_bytes=pkt.unrel_done_bytes,
            )


# -- decoding ------------------------------------------------------------------------------

_Common = tuple[int, int, int, int, int, int]  # flags, ev, src, dst, conn, length


def _check_crc(buf: bytes | memoryview, end: int, crc: int) -> None:
    view = memoryview(buf)
    if zlib.crc32(view[COMMON_BYTES:end], zlib.crc32(view[:CRC_OFFSET])) != crc:
        raise WireError(DropReason.BAD_CHECKSUM)


def _exact_length(buf: bytes | memoryview, length: int, minimum: int) -> None:
    if len(buf) < minimum:
        raise WireError(DropReason.SHORT, f"{len(buf)} < {minimum} bytes")
    if length != len(buf):
        raise WireError(DropReason.BAD_LENGTH, f"declared {length}, got {len(buf)}")


def _decode_data(buf: bytes | memoryview, c: _Common, crc: int) -> DataPacket:
    flags, ev, src, dst, conn, length = c
    n = len(buf)
    if n < DATA_HEADER_BYTES:
        raise WireError(DropReason.SHORT, f"{n} < {DATA_HEADER_BYTES} bytes")
    if length < DATA_HEADER_BYTES or n > length:
        raise WireError(DropReason.BAD_LENGTH, f"declared {length}, got {n}")
    if zlib.crc32(buf[COMMON_BYTES:DATA_HEADER_BYTES], zlib.crc32(buf[:CRC_OFFSET])) != crc:
        raise WireError(DropReason.BAD_CHECKSUM)
    psn, msg_id, msg_len, index, ts, stride, _rsvd, digest, pcrc = _DATA.unpack_from(
        buf, COMMON_BYTES
    )
    declared = length - DATA_HEADER_BYTES
    if stride == 0:
        ok = msg_len == 0 and index == 0
    else:
        ok = index * stride < msg_len and declared == min(stride, msg_len - index * stride)
    if not ok or (msg_len == 0 and declared != 0):
        raise WireError(DropReason.BAD_FIELD, f"msg_len {msg_len} stride {stride} index {index}")
    trimmed = n < length
    payload: bytes | memoryview = b""
    if not trimmed:
        payload = memoryview(buf)[DATA_HEADER_BYTES:]
        if zlib.crc32(payload) != pcrc:
            raise WireError(DropReason.BAD_PAYLOAD_CHECKSUM)
    return DataPacket(
        flags, ev, src, dst, conn, psn, msg_id, msg_len, index, ts, stride, digest, payload, trimmed
    )


def _decode_ack(ptype: PacketType) -> Callable[[bytes | memoryview, _Common, int], AckPacket]:
    def decode_ack(buf: bytes | memoryview, c: _Common, crc: int) -> AckPacket:
        flags, ev, src, dst, conn, length = c
        _exact_length(buf, length, ACK_HEADER_BYTES)
        (cum, credit, echo_psn, echo_ts, unrel_done, nbits, echo_ev, _rsvd) = _ACK.unpack_from(
            buf, COMMON_BYTES
        )
        if nbits % 8 or nbits > MAX_SACK_BITS or length != ACK_HEADER_BYTES + nbits // 8:
            raise WireError(DropReason.BAD_FIELD, f"SACK of {nbits} bits in {length} bytes")
        _check_crc(buf, length, crc)
        bitmap = int.from_bytes(memoryview(buf)[ACK_HEADER_BYTES:length], "little")
        return AckPacket(
            ptype,
            flags,
            ev,
            src,
            dst,
            conn,
            cum,
            credit,
            echo_psn,
            echo_ts,
            echo_ev,
            unrel_done,
            bitmap,
            nbits,
        )

    return decode_ack


def _decode_probe(buf: bytes | memoryview, c: _Common, crc: int) -> ProbePacket:
    flags, ev, src, dst, conn, length = c
    _exact_length(buf, length, PROBE_BYTES)
    if length != PROBE_BYTES:
        raise WireError(DropReason.BAD_LENGTH, f"PROBE of {length} bytes")
    _check_crc(buf, length, crc)
    seq, ts = _PROBE.unpack_from(buf, COMMON_BYTES)
    return ProbePacket(flags, ev, src, dst, conn, seq, ts)


def _decode_floor(buf: bytes | memoryview, c: _Common, crc: int) -> FloorPacket:
    flags, ev, src, dst, conn, length = c
    _exact_length(buf, length, FLOOR_BYTES)
    if length != FLOOR_BYTES:
        raise WireError(DropReason.BAD_LENGTH, f"FLOOR of {length} bytes")
    _check_crc(buf, length, crc)
    floor, done, done_bytes = _FLOOR.unpack_from(buf, COMMON_BYTES)
    return FloorPacket(flags, ev, src, dst, conn, floor, done, done_bytes)


_DECODERS: dict[PacketType, Callable[[bytes | memoryview, _Common, int], Packet]] = {
    PacketType.DATA: _decode_data,
    PacketType.ACK: _decode_ack(PacketType.ACK),
    PacketType.NACK: _decode_ack(PacketType.NACK),
    PacketType.PROBE: _decode_probe,
    PacketType.PROBE_ACK: _decode_ack(PacketType.PROBE_ACK),
    PacketType.FLOOR: _decode_floor,
}
_BY_TYPE: dict[int, Callable[[bytes | memoryview, _Common, int], Packet]] = {
    int(t): d for t, d in _DECODERS.items()
}
_DATA_TYPE = int(PacketType.DATA)
_unpack_common = _COMMON.unpack_from
_unpack_data = _DATA.unpack_from
_crc32 = zlib.crc32


def decode(buf: bytes | memoryview) -> Packet:
    """Validate and decode one datagram.

    Raises:
        WireError: the datagram is malformed; ``reason`` tells which check failed.
    """
    n = len(buf)
    if n < COMMON_BYTES:
        raise WireError(DropReason.SHORT, f"{n} < {COMMON_BYTES} bytes")
    magic, version, ptype, flags, ev, src, dst, conn, length, crc = _unpack_common(buf)
    if magic != MAGIC:
        raise WireError(DropReason.BAD_MAGIC, f"0x{magic:04x}")
    if version != VERSION:
        raise WireError(DropReason.BAD_VERSION, str(version))
    if ptype == _DATA_TYPE and DATA_HEADER_BYTES <= n == length:
        # the usual datagram, a whole DATA packet: the checks of _decode_data, inline
        view = memoryview(buf)
        if _crc32(view[COMMON_BYTES:DATA_HEADER_BYTES], _crc32(view[:CRC_OFFSET])) == crc:
            psn, msg_id, msg_len, index, ts, stride, _rsvd, digest, pcrc = _unpack_data(
                buf, COMMON_BYTES
            )
            declared = length - DATA_HEADER_BYTES
            if (
                stride
                and index * stride < msg_len
                and declared == min(stride, msg_len - index * stride)
            ):
                payload = view[DATA_HEADER_BYTES:]
                if _crc32(payload) != pcrc:
                    raise WireError(DropReason.BAD_PAYLOAD_CHECKSUM)
                return DataPacket(
                    flags, ev, src, dst, conn, psn, msg_id, msg_len, index, ts, stride, digest,
                    payload, False,
                )  # fmt: skip
        # a bad header or an edge case (empty message): the general path says which
    decoder = _BY_TYPE.get(ptype)
    if decoder is None:
        raise WireError(DropReason.BAD_TYPE, str(ptype))
    return decoder(buf, (flags, ev, src, dst, conn, length), crc)
