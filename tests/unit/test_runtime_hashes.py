"""BMv2-exact hash algorithms, hash input packing and v1model's hash() result rule."""

from __future__ import annotations

import pytest

from switch.pipeline.errors import Code, StateError
from switch.pipeline.hashes import (
    CrcConfig,
    compute_hash,
    crc,
    csum16,
    output_width,
    pack_bits,
    v1model_hash_result,
)

CHECK = b"123456789"


@pytest.mark.parametrize(
    ("algo", "expected"),
    [
        ("crc16", 0xBB3D),  # CRC-16/ARC: BMv2's crc16
        ("crc32", 0xCBF43926),  # CRC-32/ISO-HDLC
        ("crc16_custom", 0xBB3D),  # BMv2 default custom config = crc16
        ("crc32_custom", 0xCBF43926),  # BMv2 default custom config = crc32
        ("identity", int.from_bytes(b"12345678", "big")),  # first 8 bytes only
    ],
)
def test_algorithm_check_values(algo: str, expected: int) -> None:
    assert compute_hash(algo, CHECK) == expected


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (CrcConfig(16, 0x1021, 0xFFFF, 0x0000, False, False), 0x29B1),  # CCITT-FALSE
        (CrcConfig(16, 0x1021, 0x0000, 0x0000, False, False), 0x31C3),  # XMODEM
        (CrcConfig(16, 0x1021, 0x0000, 0x0000, True, True), 0x2189),  # KERMIT
        (CrcConfig(16, 0x8005, 0xFFFF, 0x0000, True, True), 0x4B37),  # MODBUS
        (CrcConfig(16, 0x8005, 0xFFFF, 0xFFFF, True, True), 0xB4C8),  # USB
        (CrcConfig(32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, True, True), 0xE3069283),  # CRC-32C
        (CrcConfig(32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, False, False), 0xFC891918),  # BZIP2
        (CrcConfig(32, 0x04C11DB7, 0xFFFFFFFF, 0x00000000, False, False), 0x0376E6E7),  # MPEG-2
        (CrcConfig(32, 0x04C11DB7, 0x00000000, 0xFFFFFFFF, False, False), 0x765E7680),  # POSIX
        (CrcConfig(12, 0x80F, 0x000, 0x000, False, True), 0xDAF),  # UMTS: reflect out only
    ],
)
def test_custom_crc_catalogue_check_values(config: CrcConfig, expected: int) -> None:
    assert crc(config, CHECK) == expected


def test_custom_crc_config_is_used_by_compute_hash() -> None:
    ccitt = CrcConfig(16, 0x1021, 0xFFFF, 0, False, False)
    assert compute_hash("crc16_custom", CHECK, ccitt) == 0x29B1


def test_custom_crc_width_mismatch_is_invalid() -> None:
    with pytest.raises(StateError) as err:
        compute_hash("crc32_custom", CHECK, CrcConfig(16, 0x1021, 0, 0, False, False))
    assert err.value.code is Code.INVALID_ARGUMENT


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (bytes.fromhex("450000730000400040110000c0a80001c0a800c7"), 0xB861),  # IPv4 header
        (bytes.fromhex("4500007300004000401100000000"), 0x3A7B),
        (b"\x01", 0xFEFF),  # odd length: padded with a zero byte at the end
        (b"", 0xFFFF),
        (b"\xff\xff", 0x0000),
    ],
)
def test_csum16_is_rfc1071(data: bytes, expected: int) -> None:
    assert csum16(data) == expected
    assert compute_hash("csum16", data) == expected


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (bytes.fromhex("12345678"), 0x444C),
        (bytes.fromhex("123456"), 0x4434),  # tail byte padded at the end
        (b"", 0),
    ],
)
def test_xor16_of_big_endian_words(data: bytes, expected: int) -> None:
    assert compute_hash("xor16", data) == expected


def test_identity_reads_big_endian() -> None:
    assert compute_hash("identity", b"\x01\x02") == 0x0102


def test_random_is_unimplemented_and_unknown_is_invalid() -> None:
    with pytest.raises(StateError) as err:
        compute_hash("random", b"x")
    assert err.value.code is Code.UNIMPLEMENTED
    with pytest.raises(StateError) as err:
        compute_hash("crc64", b"x")
    assert err.value.code is Code.INVALID_ARGUMENT


@pytest.mark.parametrize(("algo", "width"), [("crc16", 16), ("crc32", 32), ("identity", 64)])
def test_output_width(algo: str, width: int) -> None:
    assert output_width(algo) == width


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ([(1, 1), (0, 3), (0xF, 4)], b"\x8f"),
        ([(0x5, 3)], b"\xa0"),  # padding zeros at the end, not the front
        ([(0xABC, 12)], b"\xab\xc0"),
        ([(0x0A000001, 32), (0x11, 8)], bytes.fromhex("0a00000111")),
        ([(0x1FF, 8)], b"\xff"),  # value wider than its field is truncated
        ([], b""),
    ],
)
def test_pack_bits_msb_first_with_trailing_padding(
    fields: list[tuple[int, int]], expected: bytes
) -> None:
    assert pack_bits(fields) == expected


@pytest.mark.parametrize(
    ("h", "base", "max_", "width", "expected"),
    [
        (0x1234, 10, 16, 16, 14),
        (0x1234, 7, 0, 16, 7),  # max 0 behaves as 1 (BMv2): result is base
        (0x1234, 7, 1, 16, 7),
        (1, 0xFF, 0x100, 8, 0),  # base + h % max truncated to the output width
        (0xFFFFFFFF, 0, 1 << 32, 32, 0xFFFFFFFF),
    ],
)
def test_v1model_hash_result(h: int, base: int, max_: int, width: int, expected: int) -> None:
    assert v1model_hash_result(h, base, max_, width) == expected
