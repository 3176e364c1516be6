"""P4Runtime binary strings: decoding with the specification's range checks, canonical encoding.

A received string may be longer than ``ceil(W / 8)`` bytes (zero-padded, or sign-extended for
``int<W>``) as long as the value fits the ``W``-bit type; an empty string or a value that does not
fit is ``OUT_OF_RANGE`` ("Bytestrings" section of the specification). Replies always use the
canonical form: the shortest string holding the value, one ``\\x00`` byte for zero.
"""

from __future__ import annotations

from switch.p4rt.status import OUT_OF_RANGE, P4RTError


def decode_uint(data: bytes, width: int, what: str) -> int:
    """The unsigned value of ``data`` for a ``bit<width>`` object named ``what``."""
    if not data:
        raise P4RTError(OUT_OF_RANGE, f"{what}: empty bytestring")
    value = int.from_bytes(data, "big")
    if value >> width:
        raise P4RTError(OUT_OF_RANGE, f"{what}: value 0x{data.hex()} does not fit in {width} bits")
    return value


def decode_sint(data: bytes, width: int, what: str) -> int:
    """The two's complement value of ``data`` for an ``int<width>`` object named ``what``."""
    if not data:
        raise P4RTError(OUT_OF_RANGE, f"{what}: empty bytestring")
    value = int.from_bytes(data, "big", signed=True)
    if width <= 0 or not -(1 << (width - 1)) <= value < (1 << (width - 1)):
        raise P4RTError(OUT_OF_RANGE, f"{what}: value 0x{data.hex()} does not fit in int<{width}>")
    return value


def encode_uint(value: int) -> bytes:
    """The canonical string of a non-negative integer."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def encode_sint(value: int) -> bytes:
    """The canonical (shortest two's complement) string of a signed integer."""
    bits = (value if value >= 0 else ~value).bit_length() + 1
    return value.to_bytes(max(1, (bits + 7) // 8), "big", signed=True)
