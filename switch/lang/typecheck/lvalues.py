"""What may be assigned: the left side of ``=`` and the arguments of ``out``/``inout`` parameters.

:data:`LVALUES` has a row per node type that can be an lvalue; anything else cannot.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from switch.lang import ast
from switch.lang import types as T
from switch.lang.symbols import StackProperty, Sym
from switch.lang.typecheck.context import err


def _name(e: ast.Name) -> None:
    sym = e.ref
    if not isinstance(sym, Sym):
        raise err(f"'{e.name}' cannot be assigned", e)
    if sym.kind == "const":
        raise err(f"cannot assign to constant '{e.name}'", e)
    if sym.kind == "param" and sym.direction in ("in", ""):
        what = "an 'in' parameter" if sym.direction == "in" else "a directionless parameter"
        raise err(f"cannot assign to '{e.name}': it is {what}", e)
    if sym.kind not in ("var", "param"):
        raise err(f"'{e.name}' cannot be assigned", e)


def _member(e: ast.Member) -> None:
    if e.ref is not None and not (isinstance(e.ref, StackProperty) and e.name in ("next", "last")):
        raise err(f"cannot assign to '{e.name}'", e)
    check_lvalue(e.expr)


def _element(e: ast.Index | ast.Slice | ast.IndexedSlice) -> None:
    if (
        isinstance(e, ast.Index)
        and isinstance(e.expr.type, T.TupleT)
        and isinstance(e.type, (T.StructLikeT, T.StackT))
    ):
        # copies of a tuple share its composite elements: only scalar elements are assignable
        raise err(
            "changing a header, struct or stack inside a tuple is not supported "
            "(assign the whole tuple)",
            e,
        )
    check_lvalue(e.expr)


LVALUES: dict[type[ast.Expr], Callable[[Any], None]] = {
    ast.Name: _name,
    ast.Member: _member,
    ast.Index: _element,
    ast.Slice: _element,
    ast.IndexedSlice: _element,
}


def check_lvalue(e: ast.Expr) -> None:
    """Fail unless the checked expression ``e`` may be written.

    Raises:
        TypeError_: ``e`` is a constant, an ``in`` parameter, a stack property... or no lvalue.
    """
    rule = LVALUES.get(type(e))
    if rule is None:
        raise err("expression cannot be assigned to", e)
    rule(e)
