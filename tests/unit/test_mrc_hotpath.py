"""The per-packet shortcuts of the MRC transport give the same results as the general code:
the inline DATA decoder, the positional ACK packer, the ECN reading of UdpNetwork, and the
CPU-per-packet benchmark's bookkeeping."""

from __future__ import annotations

import random
import socket
import time

import pytest

from host import wire
from host.bench import cpu_bench
from host.network import CE, ECT0, UdpNetwork, _ce
from host.paths import loopback_nics
from host.wire import (
    COMMON_BYTES,
    DATA_HEADER_BYTES,
    MAGIC,
    VERSION,
    DropReason,
    Packet,
    PacketType,
    WireError,
    decode,
    encode_ack,
    encode_data,
    pack_ack,
)


def reference_decode(buf: bytes) -> Packet:
    """The decoder without the inline DATA path: common checks, then the type's decoder."""
    if len(buf) < COMMON_BYTES:
        raise WireError(DropReason.SHORT)
    magic, version, ptype, flags, ev, src, dst, conn, length, crc = wire._COMMON.unpack_from(buf)
    if magic != MAGIC:
        raise WireError(DropReason.BAD_MAGIC)
    if version != VERSION:
        raise WireError(DropReason.BAD_VERSION)
    if ptype not in {int(t) for t in PacketType}:
        raise WireError(DropReason.BAD_TYPE)
    return wire._DECODERS[PacketType(ptype)](buf, (flags, ev, src, dst, conn, length), crc)


def _outcome(fn: object, buf: bytes) -> object:
    try:
        return fn(buf)  # type: ignore[operator]
    except WireError as e:
        return e.reason


def _data(rng: random.Random) -> bytes:
    stride = rng.choice([1, 7, 100, 1384])
    msg_len = rng.randrange(1, 5 * stride)
    index = rng.randrange(-(-msg_len // stride))
    n = min(stride, msg_len - index * stride)
    return encode_data(
        flags=rng.randrange(256),
        ev=rng.randrange(256),
        src_host=rng.randrange(65536),
        dst_host=rng.randrange(65536),
        conn_id=rng.getrandbits(32),
        psn=rng.getrandbits(64),
        msg_id=rng.getrandbits(32),
        msg_len=msg_len,
        index=index,
        ts_us=rng.getrandbits(32),
        stride=stride,
        digest=rng.randbytes(16),
        payload=rng.randbytes(n),
    )


def test_inline_data_decoder_agrees_with_the_general_one_on_good_and_mutated_datagrams() -> None:
    rng = random.Random(11)
    reasons: set[object] = set()
    for i in range(3_000):
        b = bytearray(_data(rng))
        if i % 3:  # mutate two thirds: flip bytes, cut, extend
            match rng.randrange(3):
                case 0:
                    for _ in range(rng.randint(1, 3)):
                        b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
                case 1:
                    b = b[: rng.randrange(len(b))]
                case _:
                    b += rng.randbytes(rng.randint(1, 9))
        raw = bytes(b)
        got, want = _outcome(decode, raw), _outcome(reference_decode, raw)
        assert got == want, raw.hex()
        reasons.add(got if isinstance(got, DropReason) else "ok")
    assert {"ok", DropReason.BAD_CHECKSUM, DropReason.BAD_PAYLOAD_CHECKSUM} <= reasons
    assert {DropReason.SHORT, DropReason.BAD_LENGTH} & reasons


def test_a_corrupted_payload_is_still_refused_on_the_inline_path() -> None:
    raw = bytearray(_data(random.Random(3)))
    raw[-1] ^= 0xFF
    with pytest.raises(WireError) as e:
        decode(bytes(raw))
    assert e.value.reason is DropReason.BAD_PAYLOAD_CHECKSUM


def test_pack_ack_is_encode_ack() -> None:
    rng = random.Random(5)
    for _ in range(500):
        args = (
            rng.choice(list(PacketType)[1:3] + [PacketType.PROBE_ACK]),
            rng.randrange(256),
            rng.randrange(255),
            rng.randrange(65536),
            rng.randrange(65536),
            rng.getrandbits(32),
            rng.getrandbits(63),
            rng.getrandbits(63),
            rng.getrandbits(63),
            rng.getrandbits(40),
            rng.randrange(256),
            rng.getrandbits(32),
            rng.getrandbits(rng.choice([0, 8, 100, 3000])),
            rng.choice([8, 64, 1024]),
        )
        ptype, flags, ev, src, dst, conn, cum, credit, epsn, ets, eev, done, bits, mx = args
        assert pack_ack(*args) == encode_ack(
            ptype=ptype,
            flags=flags,
            ev=ev,
            src_host=src,
            dst_host=dst,
            conn_id=conn,
            cum=cum,
            credit=credit,
            echo_psn=epsn,
            echo_ts=ets,
            echo_ev=eev,
            unrel_done=done,
            bitmap=bits,
            max_bits=mx,
        )


def test_ce_is_read_from_either_form_of_the_traffic_class() -> None:
    v6, v4 = (socket.IPPROTO_IPV6, socket.IPV6_TCLASS), (socket.IPPROTO_IP, socket.IP_TOS)
    assert _ce([(*v6, (CE).to_bytes(4, "little"))])
    assert not _ce([(*v6, (ECT0).to_bytes(4, "little"))])
    assert _ce([(*v4, bytes([CE | 0xB8]))])
    assert not _ce([(1, 2, b"\x03"), (*v4, bytes([0x01]))])
    assert not _ce([])


def _received(tclass: int) -> list[tuple[bytes, int, bool]]:
    with UdpNetwork(loopback_nics(2), ecn=True) as net:
        tx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        try:
            tx.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, tclass)
            for plane, port in enumerate(net.ports):
                tx.sendto(b"p%d" % plane, ("::1", port))
        finally:
            tx.close()
        out: list[tuple[bytes, int, bool]] = []
        deadline = time.monotonic() + 5
        while len(out) < 2 and time.monotonic() < deadline:
            for s in net.selectables():
                out += net.receive(s, 8)
        return sorted(out)


@pytest.mark.parametrize("tclass,ce", [(CE, True), (ECT0, False), (0xB8 | CE, True), (0, False)])
def test_udp_network_reports_the_ce_mark_of_each_datagram(tclass: int, ce: bool) -> None:
    assert _received(tclass) == [(b"p0", 0, ce), (b"p1", 1, ce)]


def test_cpu_bench_counts_the_packets_of_the_transfer() -> None:
    row = cpu_bench(msg_bytes=256 * 1024, total_bytes=1024 * 1024, depth=2, label="t")
    # 4 messages of 256 KiB in 1384-byte packets, plus any retransmissions
    assert row.messages == 4 and row.data_packets >= 4 * -(-256 * 1024 // 1384)
    assert row.data_packets - row.retransmits == 4 * -(-256 * 1024 // 1384)
    assert row.sender_datagrams > row.data_packets and row.receiver_datagrams > row.data_packets
    assert row.sender_cpu_s > 0 and row.receiver_cpu_s > 0 and row.sender_us_per_packet > 0
    assert DATA_HEADER_BYTES + row.payload_bytes <= 1452


@pytest.mark.parametrize("ecn", [False, True])
def test_receive_takes_what_waits_up_to_the_limit_and_never_blocks(ecn: bool) -> None:
    with UdpNetwork(loopback_nics(1), ecn=ecn) as net:
        (sock,) = net.selectables()
        assert net.receive(sock, 8) == []  # nothing queued: no datagram, no error
        tx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        try:
            for i in range(5):
                tx.sendto(b"d%d" % i, ("::1", net.ports[0]))
            time.sleep(0.05)
            assert net.receive(sock, 0) == []
            first = net.receive(sock, 3)
            rest = net.receive(sock, 8)
            assert [d for d, _, _ in first] == [b"d0", b"d1", b"d2"]
            assert [d for d, _, _ in rest] == [b"d3", b"d4"]
            tx.sendto(b"solo", ("::1", net.ports[0]))
            time.sleep(0.05)
            assert net.receive(sock, 8) == [(b"solo", 0, False)]
            assert net.receive(sock, 8) == []
        finally:
            tx.close()
