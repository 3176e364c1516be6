"""The v1model hash algorithms with BMv2's exact parameters, and the input/result rules.

Parameters come from BMv2's ``calculations.cpp``: ``crc16`` is CRC-16/ARC (poly 0x8005, init 0,
reflected in and out, no final xor), ``crc32`` is the Ethernet CRC-32/ISO-HDLC, the custom CRCs
default to those same parameters, ``identity`` is the first (up to) 8 input bytes read big-endian,
``csum16`` the RFC 1071 ones'-complement checksum and ``xor16`` the xor of big-endian 16-bit
words (an odd tail byte padded with zero at the end). BMv2 has no ``random`` hash.
"""

from __future__ import annotations

import array
import binascii
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache, reduce
from operator import xor

from switch.pipeline.errors import Code, StateError


@dataclass(frozen=True)
class CrcConfig:
    """A CRC in the Rocksoft model, as BMv2's ``set_crc{16,32}_parameters`` configures it."""

    width: int
    polynomial: int
    init: int
    xor_out: int
    reflect_data: bool
    reflect_remainder: bool


CRC16_ARC = CrcConfig(16, 0x8005, 0x0000, 0x0000, True, True)
CRC32_ISO_HDLC = CrcConfig(32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, True, True)
CRC16_CUSTOM_DEFAULT = CRC16_ARC  # BMv2's crc_custom<uint16_t> initial config
CRC32_CUSTOM_DEFAULT = CRC32_ISO_HDLC  # BMv2's crc_custom<uint32_t> initial config

ALGORITHMS = (
    "crc32",
    "crc32_custom",
    "crc16",
    "crc16_custom",
    "random",
    "identity",
    "csum16",
    "xor16",
)
_OUTPUT_WIDTH = {
    "crc32": 32,
    "crc32_custom": 32,
    "crc16": 16,
    "crc16_custom": 16,
    "identity": 64,
    "csum16": 16,
    "xor16": 16,
}


def output_width(algo: str) -> int:
    """Width in bits of the raw value :func:`compute_hash` returns for ``algo``."""
    try:
        return _OUTPUT_WIDTH[algo]
    except KeyError:
        raise _unknown_algo(algo) from None


def _reflect(value: int, nbits: int) -> int:
    out = 0
    for _ in range(nbits):
        out = (out << 1) | (value & 1)
        value >>= 1
    return out


@lru_cache(maxsize=16)
def _table(width: int, polynomial: int, reflected: bool) -> tuple[int, ...]:
    """Byte-at-a-time table: MSB-first for plain CRCs, LSB-first (reversed poly) for reflected."""
    mask = (1 << width) - 1
    out = []
    if reflected:
        rpoly = _reflect(polynomial, width)
        for byte in range(256):
            r = byte
            for _ in range(8):
                r = (r >> 1) ^ rpoly if r & 1 else r >> 1
            out.append(r)
    else:
        top = 1 << (width - 1)
        for byte in range(256):
            r = byte << (width - 8)
            for _ in range(8):
                r = ((r << 1) ^ polynomial) & mask if r & top else (r << 1) & mask
            out.append(r)
    return tuple(out)


def crc(config: CrcConfig, data: bytes) -> int:
    """The CRC of ``data`` under ``config`` (any width from 8 to 64 bits)."""
    if config == CRC32_ISO_HDLC:
        return binascii.crc32(data)
    width = config.width
    if width < 8 or width > 64:
        raise StateError(Code.INVALID_ARGUMENT, f"CRC width {width} is outside 8..64")
    mask = (1 << width) - 1
    if config.reflect_data:
        # Reflecting every input byte and running MSB-first equals running LSB-first on the
        # reflected register with the reflected polynomial.
        table = _table(width, config.polynomial, True)
        reg = _reflect(config.init & mask, width)
        for b in data:
            reg = table[(reg ^ b) & 0xFF] ^ (reg >> 8)
        out = reg if config.reflect_remainder else _reflect(reg, width)
    else:
        table = _table(width, config.polynomial, False)
        reg = config.init & mask
        shift = width - 8
        for b in data:
            reg = table[((reg >> shift) ^ b) & 0xFF] ^ ((reg << 8) & mask)
        out = _reflect(reg, width) if config.reflect_remainder else reg
    return (out ^ config.xor_out) & mask


def _words16(data: bytes) -> array.array[int]:
    if len(data) % 2:
        data = data + b"\x00"
    words = array.array("H", data)
    if sys.byteorder == "little":
        words.byteswap()
    return words


def csum16(data: bytes) -> int:
    """RFC 1071 Internet checksum of ``data`` (odd length padded with a zero byte at the end)."""
    total = sum(_words16(data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def xor16(data: bytes) -> int:
    """Xor of the big-endian 16-bit words of ``data``, an odd tail byte padded at the end."""
    return reduce(xor, _words16(data), 0)


def identity(data: bytes) -> int:
    """BMv2's ``identity``: the first (up to) 8 bytes of ``data`` as a big-endian number."""
    return int.from_bytes(data[:8], "big")


def _unknown_algo(algo: str) -> StateError:
    if algo == "random":
        return StateError(
            Code.UNIMPLEMENTED, "HashAlgorithm.random is not a deterministic hash (BMv2 has none)"
        )
    known = ", ".join(a for a in ALGORITHMS if a != "random")
    return StateError(Code.INVALID_ARGUMENT, f"unknown hash algorithm '{algo}' (known: {known})")


def compute_hash(algo: str, data: bytes, custom: CrcConfig | None = None) -> int:
    """Hash ``data`` with the v1model ``HashAlgorithm`` member named ``algo``.

    ``custom`` configures ``crc16_custom`` / ``crc32_custom`` (BMv2's defaults otherwise).
    """
    if algo == "crc16":
        return crc(CRC16_ARC, data)
    if algo == "crc32":
        return binascii.crc32(data)
    if algo == "crc16_custom" or algo == "crc32_custom":
        width = 16 if algo == "crc16_custom" else 32
        config = custom or (CRC16_CUSTOM_DEFAULT if width == 16 else CRC32_CUSTOM_DEFAULT)
        if config.width != width:
            raise StateError(
                Code.INVALID_ARGUMENT,
                f"{algo} needs a {width}-bit CRC config, got {config.width} bits",
            )
        return crc(config, data)
    if algo == "identity":
        return identity(data)
    if algo == "csum16":
        return csum16(data)
    if algo == "xor16":
        return xor16(data)
    raise _unknown_algo(algo)


def pack_bits(fields: Sequence[tuple[int, int]]) -> bytes:
    """Concatenate ``(value, width)`` fields MSB-first into bytes, as BMv2 builds hash input.

    When the total width is not a multiple of 8, BMv2's ``BufBuilder`` leaves the padding zero
    bits at the *end* of the last byte (fields start at bit 0 of the buffer).
    """
    acc = 0
    total = 0
    for value, width in fields:
        acc = (acc << width) | (value & ((1 << width) - 1))
        total += width
    pad = -total % 8
    return (acc << pad).to_bytes((total + pad) // 8, "big")


def v1model_hash_result(h: int, base: int, max_: int, out_width: int) -> int:
    """v1model ``hash()``'s result: ``base + h % max`` truncated to the output width.

    As in BMv2's ``modify_field_with_hash_based_offset``, a ``max`` of 0 is treated as 1, so the
    result is then ``base``.
    """
    size = max_ if max_ > 0 else 1
    return (base + h % size) & ((1 << out_width) - 1)
