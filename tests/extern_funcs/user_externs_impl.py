"""Implementations of user_externs.p4's extern functions, registered by name on import (the
module ``tf-p4 stf --load-modules`` / ``tf-switch --load-modules`` loads)."""

from __future__ import annotations

from switch.pipeline.extern_modules import register_extern_function


def mix(a: int, b: int) -> int:
    """extern bit<16> mix(in bit<8> a, in bit<8> b)"""
    return ((a << 8) | b) ^ 0x00FF


def swap_add(x: int, y: int, total: int) -> tuple[int, int, int]:
    """extern void swap_add(inout bit<8> x, inout bit<8> y, out bit<16> sum): the new x, y and
    sum (the out parameter comes in as 0)."""
    assert total == 0
    return y, x, x + y


def is_odd(v: int) -> bool:
    """extern bool is_odd(in bit<8> v)"""
    return bool(v & 1)


def negate(v: int) -> int:
    """extern int<8> negate(in int<8> v), wrapping -128 to itself"""
    return -v if v != -128 else v


def classify(v: int) -> int:
    """extern Kind classify(in bit<8> v), Kind an enum bit<8> (Small = 1, Big = 2)"""
    return 1 if v < 0x80 else 2


for _fn in (mix, swap_add, is_odd, negate, classify):
    register_extern_function(_fn.__name__, _fn)
