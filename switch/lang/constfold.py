"""Constant folding: the compile-time value of a type-checked expression, with P4 semantics.

:func:`fold` evaluates an expression the checker has annotated (types and references filled in)
and returns its value, or None if it is not a compile-time constant. Values are Python ints for
``bit<W>``/``int<W>``/``int`` and enums and errors, bools, strings, and tuples of these for lists;
the P4 type of the expression says which, so values are typed ``Any`` here. Every rule is one row
of :data:`FOLDERS` (by node type), :data:`UNARY` or :data:`BINARY` (by operator).

The type checker, elaboration and the code generator all fold through this module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from switch.errors import TypeError_
from switch.lang import ast
from switch.lang import types as T
from switch.lang.symbols import EnumMember, ErrorMember, Sym


@dataclass(frozen=True)
class StructValue:
    """The constant value of a struct, header or header union: its fields' values by name in
    declaration order, and (for a header) whether it is valid."""

    fields: tuple[tuple[str, Any], ...]
    valid: bool = True

    def field(self, name: str) -> Any:
        """The value of the field ``name``."""
        return dict(self.fields).get(name)


def default_const(t: T.Type | None) -> Any:
    """The default value (P4-16 "Default values") of ``t`` as a constant, or None."""
    if t is T.INFINT or isinstance(t, (T.BitT, T.IntT)):
        return 0
    if t is T.BOOL:
        return False
    if isinstance(t, T.EnumT):
        return 0 if t.underlying is not None else t.values.get(t.members[0], 0)
    if isinstance(t, T.TupleT):
        elems = [default_const(x) for x in t.elems]
        return None if any(v is None for v in elems) else tuple(elems)
    if isinstance(t, T.StructLikeT):
        vals = [(n, default_const(ft)) for n, ft in t.fields.items()]
        if any(v is None for _, v in vals):
            return None
        return StructValue(tuple(vals), valid=t.kind == "struct")
    return None


def wrap_bits(value: int, width: int) -> int:
    """``value`` as a ``bit<width>`` (modulo 2**width)."""
    return value & ((1 << width) - 1)


def wrap_signed(value: int, width: int) -> int:
    """``value`` as an ``int<width>`` (two's complement wrap-around)."""
    half = 1 << (width - 1)
    return ((value + half) & ((1 << width) - 1)) - half


def fit_value(value: int, t: T.Type | None) -> int:
    """``value`` wrapped into the range of ``t`` (unchanged unless ``t`` is fixed-width)."""
    if isinstance(t, T.BitT):
        return wrap_bits(value, t.width)
    if isinstance(t, T.IntT):
        return wrap_signed(value, t.width)
    return value


def cast_value(v: Any, src: T.Type | None, dst: T.Type | None) -> Any:
    """The value of ``(dst) v`` where ``v`` has type ``src``."""
    if dst is T.BOOL:
        return bool(v)
    if isinstance(v, bool):
        v = int(v)
    if isinstance(dst, T.BitT):
        return wrap_bits(v, dst.width)
    if isinstance(dst, T.IntT):
        return wrap_signed(v, dst.width)
    if isinstance(dst, T.EnumT) and dst.underlying is not None:
        return fit_value(v, dst.underlying)
    return v


# -- operators ---------------------------------------------------------------------------------

UnaryFold = Callable[[Any, T.Type | None], Any]
BinaryFold = Callable[[Any, Any, Any, Any, Any], Any]  # (a, b, type of a, type of b, result type)

UNARY: dict[str, UnaryFold] = {
    "!": lambda v, t: not v,
    "-": lambda v, t: fit_value(-v, t),
    "+": lambda v, t: v,
    "~": lambda v, t: fit_value(~v, t),
}


def _div(a: int, b: int) -> int:
    """P4 division: truncates toward zero."""
    if b == 0:
        raise TypeError_("division by zero in a constant expression", None)
    return a // b if (a >= 0) == (b >= 0) else -(abs(a) // abs(b))


def _mod(a: int, b: int) -> int:
    if b == 0:
        raise TypeError_("division by zero in a constant expression", None)
    return a - b * _div(a, b)


def _concat(a: int, b: int, ta: T.BitT | T.IntT, tb: T.BitT | T.IntT, t: T.Type) -> int:
    if isinstance(t, T.IntT):
        return fit_value((a << tb.width) | wrap_bits(b, tb.width), t)
    return (wrap_bits(a, ta.width) << tb.width) | wrap_bits(b, tb.width)


def _saturate(r: int, t: Any) -> int:
    if isinstance(t, T.BitT):
        return max(0, min(r, (1 << t.width) - 1))
    if isinstance(t, T.IntT):
        return max(-(1 << (t.width - 1)), min(r, (1 << (t.width - 1)) - 1))
    return r


def _wrapping(op: Callable[[int, int], int]) -> BinaryFold:
    """An arithmetic operator whose result wraps into the result type."""
    return lambda a, b, ta, tb, t: fit_value(op(a, b), t)


BINARY: dict[str, BinaryFold] = {
    "&&": lambda a, b, ta, tb, t: a and b,
    "||": lambda a, b, ta, tb, t: a or b,
    "==": lambda a, b, ta, tb, t: a == b,
    "!=": lambda a, b, ta, tb, t: a != b,
    "<": lambda a, b, ta, tb, t: a < b,
    ">": lambda a, b, ta, tb, t: a > b,
    "<=": lambda a, b, ta, tb, t: a <= b,
    ">=": lambda a, b, ta, tb, t: a >= b,
    "++": _concat,
    "|+|": lambda a, b, ta, tb, t: _saturate(a + b, t),
    "|-|": lambda a, b, ta, tb, t: _saturate(a - b, t),
    "+": _wrapping(lambda a, b: a + b),
    "-": _wrapping(lambda a, b: a - b),
    "*": _wrapping(lambda a, b: a * b),
    "/": _wrapping(_div),
    "%": _wrapping(_mod),
    "&": _wrapping(lambda a, b: a & b),
    "|": _wrapping(lambda a, b: a | b),
    "^": _wrapping(lambda a, b: a ^ b),
    "<<": _wrapping(lambda a, b: a << b),
    ">>": _wrapping(lambda a, b: a >> b),
}


def binary_value(op: str, a: Any, b: Any, ta: Any, tb: Any, t: Any) -> Any:
    """Compute a binary operator on constant values with P4 semantics (result type ``t``)."""
    rule = BINARY.get(op)
    if rule is None:
        raise TypeError_(f"unknown operator {op}", None)
    return rule(a, b, ta, tb, t)


# -- expressions -------------------------------------------------------------------------------


def _int_lit(e: ast.IntLit) -> Any:
    return fit_value(e.value, e.type)


def _literal(e: ast.BoolLit | ast.StrLit) -> Any:
    return e.value


def _name(e: ast.Name) -> Any:
    sym = e.ref
    if isinstance(sym, Sym) and sym.kind == "const":
        if isinstance(sym.value, int) and not isinstance(sym.value, bool):
            return fit_value(sym.value, e.type)
        return sym.value
    return None


def _member(e: ast.Member) -> Any:
    if isinstance(e.ref, (EnumMember, ErrorMember)):
        return e.ref.value
    if e.ref is None and isinstance(e.expr.type, T.StructLikeT):
        v = fold(e.expr)
        if isinstance(v, StructValue):
            return v.field(e.name)
    return None


def _cast(e: ast.Cast) -> Any:
    v = fold(e.expr)
    if v is None:
        return None
    return cast_value(v, e.expr.type, e.type)


def _unary(e: ast.Unary) -> Any:
    v = fold(e.expr)
    rule = UNARY.get(e.op)
    if v is None or rule is None:
        return None
    return rule(v, e.type)


def _binary(e: ast.Binary) -> Any:
    a = fold(e.left)
    if a is None:
        return None
    if (e.op == "&&" and a is False) or (e.op == "||" and a is True):
        return a
    b = fold(e.right)
    if b is None:
        return None
    return binary_value(e.op, a, b, e.left.type, e.right.type, e.type)


def _mux(e: ast.Mux) -> Any:
    c = fold(e.cond)
    if c is None:
        return None
    return fold(e.then if c else e.other)


def _slice(e: ast.Slice) -> Any:
    v = fold(e.expr)
    if v is None:
        return None
    hi, lo = fold(e.hi), fold(e.lo)
    return (v >> lo) & ((1 << (hi - lo + 1)) - 1)


def _indexed_slice(e: ast.IndexedSlice) -> Any:
    v, lo, w = fold(e.expr), fold(e.base), fold(e.width)
    if v is None or lo is None or w is None:
        return None
    t = e.expr.type
    if isinstance(t, (T.BitT, T.IntT)):
        v = wrap_bits(v, t.width)
    return (v >> lo) & ((1 << w) - 1)


def _index(e: ast.Index) -> Any:
    v = fold(e.expr)
    if not isinstance(v, tuple) or not isinstance(e.expr.type, T.TupleT):
        return None
    i = fold(e.index)
    return v[i] if isinstance(i, int) and 0 <= i < len(v) else None


def _default_init(e: ast.DefaultInit) -> Any:
    return default_const(e.type)


def _list(e: ast.ListExpr) -> Any:
    vals = [fold(i) for i in e.items]
    if any(v is None for v in vals):
        return None
    t = e.type
    if isinstance(t, T.StructLikeT):
        if t.kind == "header_union":
            return None
        return StructValue(tuple(zip(t.fields, vals)))
    return tuple(vals)


def _struct_init(e: ast.StructInit) -> Any:
    t = e.type
    if not isinstance(t, T.StructLikeT) or t.kind == "header_union":
        return None
    given = {n: fold(v) for n, v in e.fields}
    if any(v is None for v in given.values()):
        return None
    return StructValue(tuple((n, given.get(n)) for n in t.fields))


FOLDERS: dict[type[ast.Expr], Callable[[Any], Any]] = {
    ast.IntLit: _int_lit,
    ast.BoolLit: _literal,
    ast.StrLit: _literal,
    ast.Name: _name,
    ast.Member: _member,
    ast.Cast: _cast,
    ast.Unary: _unary,
    ast.Binary: _binary,
    ast.Mux: _mux,
    ast.Slice: _slice,
    ast.IndexedSlice: _indexed_slice,
    ast.DefaultInit: _default_init,
    ast.Index: _index,
    ast.ListExpr: _list,
    ast.StructInit: _struct_init,
}
"""Node types that can be constant; every other expression (calls, indexes...) is not."""


def fold(e: ast.Expr) -> Any:
    """The value of the checked expression ``e``, or None if it is not a compile-time constant.

    Raises:
        TypeError_: division by zero.
    """
    rule = FOLDERS.get(type(e))
    return rule(e) if rule is not None else None
