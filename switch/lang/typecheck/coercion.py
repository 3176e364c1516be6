"""Implicit conversions: making a checked expression have the type its context needs.

:func:`coerce` is the one place implicit conversions happen (integer literals taking a width,
brace lists becoming structs, headers or tuples, serializable enums becoming their underlying
type, parsers/controls fitting a parser/control type); :func:`cast_allowed` says which explicit
casts are legal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from switch.lang import ast
from switch.lang import types as T
from switch.lang.typecheck.context import err
from switch.lang.typecheck.typerefs import block_param_types

if TYPE_CHECKING:
    from switch.lang.typecheck.checker import Checker


def coerce(ck: Checker, e: ast.Expr, target: T.Type, what: str) -> None:
    """Make ``e`` (already checked) have type ``target`` or fail.

    Raises:
        TypeError_: ``e`` cannot become a ``target``; the message starts with ``what``.
    """
    src = e.type
    if src is None:
        raise err(f"{what}: expression has no value", e)
    if T.same_type(src, target) or target is T.DONTCARE:
        return
    if isinstance(src, T.StructLikeT) and isinstance(target, T.StructLikeT) and src is target:
        return
    if isinstance(src, T.InvalidHeaderT):
        if isinstance(target, T.StructLikeT) and target.kind in ("header", "header_union"):
            e.type = target
            return
        raise err(f"{what}: {{#}} is an invalid header or header union, not a {target}", e)
    if src is T.INFINT and isinstance(target, (T.BitT, T.IntT)):
        _retype_infint(e, target)
        return
    if src is T.INFINT and target is T.INFINT:
        return
    if isinstance(src, (T.ListT, T.StructInitT)) or (
        isinstance(e, ast.ListExpr) and isinstance(target, (T.StructLikeT, T.TupleT))
    ):
        _coerce_list(ck, e, target, what)
        return
    if isinstance(target, T.EnumT) and isinstance(src, T.EnumT) and src is target:
        return
    if isinstance(src, T.EnumT) and src.underlying is not None and src.underlying == target:
        return  # serializable enums convert implicitly to their underlying type
    if isinstance(target, T.BlockT) and isinstance(src, T.BlockT):
        why = block_compatible(ck, target, src)
        if why is None:
            return
        raise err(f"{what}: {why}", e)
    raise err(f"{what}: type mismatch: expected {target}, got {src}", e)


def _retype_infint(e: ast.Expr, target: T.Type) -> None:
    e.type = target
    if isinstance(e, ast.Mux):
        if e.then.type is T.INFINT:
            _retype_infint(e.then, target)
        if e.other.type is T.INFINT:
            _retype_infint(e.other, target)


def _coerce_list(ck: Checker, e: ast.Expr, target: T.Type, what: str) -> None:
    if isinstance(target, T.StructLikeT):
        ftypes = list(target.fields.items())
        if isinstance(e, ast.ListExpr):
            if len(e.items) != len(ftypes):
                raise err(
                    f"{what}: {target} has {len(ftypes)} fields, the list has {len(e.items)}", e
                )
            for item, (_, ft) in zip(e.items, ftypes):
                coerce(ck, item, ft, what)
        elif isinstance(e, ast.StructInit):
            names = [n for n, _ in e.fields]
            if sorted(names) != sorted(target.fields):
                raise err(f"{what}: initializer fields {names} do not match {target}", e)
            for n, v in e.fields:
                coerce(ck, v, target.fields[n], what)
        else:
            raise err(f"{what}: type mismatch: expected {target}, got {e.type}", e)
        e.type = target
        return
    if isinstance(target, T.TupleT) and isinstance(e, ast.ListExpr):
        if len(e.items) != len(target.elems):
            raise err(
                f"{what}: tuple has {len(target.elems)} elements, the list has {len(e.items)}", e
            )
        for item, et in zip(e.items, target.elems):
            coerce(ck, item, et, what)
        e.type = target
        return
    raise err(f"{what}: type mismatch: expected {target}, got {e.type}", e)


def block_compatible(ck: Checker, target: T.BlockT, src: T.BlockT) -> str | None:
    """None if ``src`` (a parser/control) fits the type ``target``, else the reason."""
    if src.kind != target.kind:
        return f"expected a {target.kind}, got a {src.kind}"
    tp, sp = target.decl.params, src.decl.params
    if len(tp) != len(sp):
        return f"{src.decl.name} has {len(sp)} parameters, {target.decl.name} has {len(tp)}"
    tt = block_param_types(ck, target, ck.root)
    st = block_param_types(ck, src, ck.root)
    for a, b, x, y in zip(tp, sp, tt, st):
        if a.direction != b.direction:
            return (
                f"parameter '{b.name}' of {src.decl.name} should be "
                f"'{a.direction or 'directionless'}'"
            )
        if not (T.same_type(x, y) or isinstance(x, T.TypeVar) or x is y):
            return f"parameter '{b.name}' of {src.decl.name} has type {y}, expected {x}"
    return None


def cast_allowed(src: T.Type, dst: T.Type) -> bool:
    """Whether ``(dst) e`` is legal for an ``e`` of type ``src``."""
    if T.same_type(src, dst):
        return True
    if src is T.INFINT:
        return (
            isinstance(dst, (T.BitT, T.IntT))
            or dst is T.BOOL
            or (isinstance(dst, T.EnumT) and dst.underlying is not None)
        )
    if isinstance(src, T.BitT):
        if isinstance(dst, T.BitT):
            return True
        if isinstance(dst, T.IntT):
            return src.width == dst.width
        if dst is T.BOOL:
            return src.width == 1
        if isinstance(dst, T.EnumT) and dst.underlying is not None:
            return dst.underlying == src
    if isinstance(src, T.IntT):
        if isinstance(dst, T.IntT):
            return True
        if isinstance(dst, T.BitT):
            return src.width == dst.width
    if src is T.BOOL and isinstance(dst, T.BitT):
        return dst.width == 1
    if isinstance(src, T.EnumT) and src.underlying is not None:
        return isinstance(dst, (T.BitT, T.IntT)) or (
            isinstance(dst, T.EnumT) and dst.underlying == src.underlying
        )
    return False
