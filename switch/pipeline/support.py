"""Helpers the generated per-program code calls at run time.

Kept small and allocation-free on the common path: the generated code inlines most operations
(field extraction, masking, table key building) and only calls out here for rare or bulky ones
(shifts by run-time amounts, header stack operations, checksum input packing).
"""

from __future__ import annotations

from typing import Any

from switch.pipeline.hashes import compute_hash, pack_bits, v1model_hash_result

__all__ = [
    "ParserError",
    "ExitSignal",
    "PacketIn",
    "shl",
    "div",
    "mod",
    "to_signed",
    "stack_next",
    "stack_last",
    "stack_at",
    "push_front",
    "pop_front",
    "pack_bits",
    "compute_hash",
    "v1model_hash_result",
    "eq",
]


class ParserError(Exception):
    """Raised by generated parser code to end parsing with an error code."""

    __slots__ = ("code",)

    def __init__(self, code: int) -> None:
        self.code = code


class ExitSignal(Exception):
    """``exit``: ends the enclosing top-level control."""


class PacketIn:
    """The ``packet_in`` the generated parser reads: bytes and a byte offset."""

    __slots__ = ("buf", "off", "n")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.off = 0
        self.n = len(buf)


def shl(a: int, b: int, width: int) -> int:
    """``a << b`` for ``bit<width>``/``int<width>``, without building huge integers."""
    if b >= width:
        return 0
    return (a << b) & ((1 << width) - 1)


def div(a: int, b: int) -> int:
    # BMv2 does not define division by zero; answer 0 instead of crashing the pipeline
    return a // b if b else 0


def mod(a: int, b: int) -> int:
    return a % b if b else 0


def to_signed(v: int, width: int) -> int:
    half = 1 << (width - 1)
    return ((v + half) & ((1 << width) - 1)) - half


def stack_next(stack: Any, code: int) -> Any:
    if stack.nextIndex >= len(stack.items):
        raise ParserError(code)
    return stack.items[stack.nextIndex]


def stack_last(stack: Any, code: int) -> Any:
    if stack.nextIndex == 0 or stack.nextIndex > len(stack.items):
        raise ParserError(code)
    return stack.items[stack.nextIndex - 1]


def stack_at(stack: Any, index: int) -> Any:
    """``s[i]`` with a run-time index: out of range reads/writes a scratch header (no effect)."""
    if 0 <= index < len(stack.items):
        return stack.items[index]
    return stack.scratch()


def push_front(stack: Any, count: int) -> None:
    items = stack.items
    n = len(items)
    for i in range(n - 1, -1, -1):
        if i >= count:
            items[i]._set(items[i - count])
        else:
            items[i]._v = False
    stack.nextIndex = min(stack.nextIndex + count, n)


def pop_front(stack: Any, count: int) -> None:
    items = stack.items
    n = len(items)
    for i in range(n):
        if i + count < n:
            items[i]._set(items[i + count])
        else:
            items[i]._v = False
    stack.nextIndex = max(stack.nextIndex - count, 0)


def eq(a: Any, b: Any) -> bool:
    """Equality of headers, structs, stacks and tuples as P4 defines it."""
    if isinstance(a, tuple):
        return len(a) == len(b) and all(eq(x, y) for x, y in zip(a, b))
    if hasattr(a, "_eq"):
        return bool(a._eq(b))
    return bool(a == b)
