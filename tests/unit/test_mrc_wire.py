"""MRC datagram formats: round trips, trimming, and malformed datagrams rejected with a reason."""

from __future__ import annotations

import random
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from host.wire import (
    ACK_HEADER_BYTES,
    DATA_HEADER_BYTES,
    AckPacket,
    DataPacket,
    DropReason,
    FloorPacket,
    Packet,
    PacketType,
    ProbePacket,
    WireError,
    decode,
    encode,
    encode_ack,
    encode_data,
    packet_count,
)

DIGEST = bytes(range(16))


def data_packet(
    payload: bytes = b"x" * 100, *, index: int = 2, stride: int = 100, msg_len: int = 1000
) -> bytes:
    return encode_data(
        flags=1,
        ev=3,
        src_host=4,
        dst_host=5,
        conn_id=0xDEADBEEF,
        psn=2**40 + 7,
        msg_id=9,
        msg_len=msg_len,
        index=index,
        ts_us=123456,
        stride=stride,
        digest=DIGEST,
        payload=payload,
    )


SAMPLES: list[Packet] = [
    DataPacket(1, 3, 4, 5, 0xDEADBEEF, 2**40 + 7, 9, 1000, 2, 123456, 100, DIGEST, b"x" * 100),
    DataPacket(0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, DIGEST, b""),  # a zero-length message
    AckPacket(PacketType.ACK, 0, 1, 5, 4, 9, 100, 2**33, 99, 77, 2, 3, 0b1011, 8),
    AckPacket(PacketType.NACK, 8, 1, 5, 4, 9, 100, 2**33, 99, 77, 2, 0, 0, 0),
    AckPacket(PacketType.PROBE_ACK, 0, 1, 5, 4, 9, 0, 0, 5, 1, 1, 0, 1 << 100, 104),
    ProbePacket(0, 2, 1, 2, 3, 42, 99),
    FloorPacket(0, 2, 1, 2, 3, 1000, 4, 12345),
]


@pytest.mark.parametrize("pkt", SAMPLES, ids=lambda p: type(p).__name__)
def test_every_packet_type_round_trips(pkt: Packet) -> None:
    decoded = decode(encode(pkt))
    if isinstance(pkt, DataPacket):
        assert isinstance(decoded, DataPacket)
        assert bytes(decoded.payload) == bytes(pkt.payload) and not decoded.trimmed
        assert decoded.offset == pkt.index * pkt.stride
    elif isinstance(pkt, AckPacket):
        assert isinstance(decoded, AckPacket)
        assert decoded.bitmap == pkt.bitmap and decoded.nbits % 8 == 0
        assert decoded.ptype is pkt.ptype
    else:
        assert decoded == pkt


def test_every_packet_type_has_a_decoder_and_a_sample() -> None:
    covered = {PacketType.DATA, PacketType.PROBE, PacketType.FLOOR}
    covered |= {p.ptype for p in SAMPLES if isinstance(p, AckPacket)}
    assert covered == set(PacketType)


def test_trimmed_data_keeps_a_valid_header_and_is_flagged() -> None:
    full = data_packet()
    pkt = decode(full[:DATA_HEADER_BYTES])
    assert isinstance(pkt, DataPacket)
    assert pkt.trimmed and pkt.payload == b"" and pkt.payload_len == 100 and pkt.psn == 2**40 + 7


def test_sack_bitmap_is_cut_to_the_bit_limit() -> None:
    raw = encode_ack(
        flags=0,
        ev=0,
        src_host=0,
        dst_host=1,
        conn_id=1,
        cum=10,
        credit=0,
        echo_psn=0,
        echo_ts=0,
        echo_ev=0,
        bitmap=(1 << 5000) | 1,
        max_bits=64,
    )
    pkt = decode(raw)
    assert isinstance(pkt, AckPacket)
    assert len(raw) == ACK_HEADER_BYTES + 8 and pkt.bitmap == 1 and pkt.nbits == 64


def _with_fixed_crc(buf: bytearray, end: int) -> bytes:
    buf[16:20] = struct.pack("!I", zlib.crc32(bytes(buf[20:end]), zlib.crc32(bytes(buf[:16]))))
    return bytes(buf)


@pytest.mark.parametrize(
    "mutate,reason",
    [
        (lambda b: b[:10], DropReason.SHORT),
        (lambda b: b"\x00\x00" + b[2:], DropReason.BAD_MAGIC),
        (lambda b: b[:2] + b"\x09" + b[3:], DropReason.BAD_VERSION),
        (lambda b: b[:3] + b"\x63" + b[4:], DropReason.BAD_TYPE),
        (lambda b: b + b"extra", DropReason.BAD_LENGTH),
        (lambda b: b[:30] + bytes([b[30] ^ 1]) + b[31:], DropReason.BAD_CHECKSUM),
        (lambda b: b[:-1] + bytes([b[-1] ^ 0x80]), DropReason.BAD_PAYLOAD_CHECKSUM),
        (lambda b: b[: DATA_HEADER_BYTES - 1], DropReason.SHORT),
    ],
)
def test_malformed_data_is_rejected_with_its_reason(mutate, reason: DropReason) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(WireError) as e:
        decode(mutate(data_packet()))
    assert e.value.reason is reason


@pytest.mark.parametrize(
    "index,stride,msg_len,payload",
    [
        (10, 100, 1000, b"x" * 100),  # offset beyond the message
        (9, 100, 950, b"x" * 100),  # last packet longer than what is left
        (0, 0, 10, b""),  # zero stride for a non-empty message
    ],
)
def test_inconsistent_placement_fields_are_rejected(
    index: int, stride: int, msg_len: int, payload: bytes
) -> None:
    buf = bytearray(data_packet(b"x" * 100))
    struct.pack_into("!IIIIH", buf, 20 + 8, 9, msg_len, index, 123456, stride)
    raw = _with_fixed_crc(buf, DATA_HEADER_BYTES)
    with pytest.raises(WireError) as e:
        decode(raw)
    assert e.value.reason is DropReason.BAD_FIELD


def test_ten_thousand_mutated_datagrams_raise_only_wire_errors() -> None:
    rng = random.Random(7)
    valid = [encode(p) for p in SAMPLES]
    reasons: set[DropReason] = set()
    accepted = 0
    for _ in range(10_000):
        b = bytearray(rng.choice(valid))
        match rng.randrange(4):
            case 0:
                b = b[: rng.randrange(len(b) + 1)]
            case 1:
                for _ in range(rng.randint(1, 4)):
                    b[rng.randrange(len(b))] = rng.randrange(256)
            case 2:
                b += bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
            case _:
                b = bytearray(rng.randbytes(rng.randrange(120)))
        try:
            decode(bytes(b))
            accepted += 1  # e.g. a truncation that looks like a trim, or a no-op mutation
        except WireError as e:
            reasons.add(e.reason)
    assert {DropReason.SHORT, DropReason.BAD_CHECKSUM, DropReason.BAD_MAGIC} <= reasons
    assert accepted < 3_000


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_raise_anything_but_wire_error(data: bytes) -> None:
    try:
        decode(data)
    except WireError:
        pass


def test_packet_count_covers_the_message() -> None:
    assert packet_count(0, 0) == 1
    assert packet_count(1, 100) == 1
    assert packet_count(100, 100) == 1
    assert packet_count(101, 100) == 2
