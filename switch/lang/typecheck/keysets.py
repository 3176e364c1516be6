"""Keysets: the labels of a parser ``select`` and the keys of constant table entries.

A simple keyset (one key) is a value, a mask (``v &&& m``), a range (``lo .. hi``), ``default``
or ``_`` (:data:`SIMPLE_KEYSETS` has the non-value forms), or the name of a parser value set.
A select on several keys takes a parenthesised tuple of simple keysets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from switch.lang import ast
from switch.lang import types as T
from switch.lang.symbols import Scope
from switch.lang.typecheck.coercion import coerce
from switch.lang.typecheck.context import err

if TYPE_CHECKING:
    from switch.lang.typecheck.checker import Checker

KeysetRule = Callable[["Checker", Any, T.Type, Scope], None]
"""(checker, keyset of the row's type, key type, scope)."""


def _any(ck: Checker, ks: ast.Default | ast.DontCare, kt: T.Type, scope: Scope) -> None:
    ks.type = T.DONTCARE


def _mask(ck: Checker, ks: ast.Mask, kt: T.Type, scope: Scope) -> None:
    _bits_of_key(ck, ks.value, kt, scope, "keyset value", False)
    _bits_of_key(ck, ks.mask, kt, scope, "keyset mask", True)
    ks.type = kt


def _range(ck: Checker, ks: ast.Range, kt: T.Type, scope: Scope) -> None:
    _bits_of_key(ck, ks.lo, kt, scope, "range bound", False)
    _bits_of_key(ck, ks.hi, kt, scope, "range bound", True)
    ks.type = kt


def _bits_of_key(
    ck: Checker, e: ast.Expr, kt: T.Type, scope: Scope, what: str, second: bool
) -> None:
    """A value, mask or bound for a key of type ``kt``. For a serializable enum key, a member
    of the enum or a value of its underlying type (``E.A &&& 0xff00``): the match is on the
    bits. As in p4c, where ``v &&& m`` and ``lo .. hi`` take the type of their left side, the
    mask and the upper bound (``second``) may also be a member of another serializable enum
    with the same underlying type."""
    t = ck.check_expr(e, scope, kt)
    if isinstance(kt, T.EnumT) and kt.underlying is not None and t is not kt:
        if isinstance(t, T.EnumT):
            if not (second and t.underlying == kt.underlying):
                raise err(f"{what}: a member of {t.name} for a key of type {kt.name}", e)
            return
        coerce(ck, e, kt.underlying, what)
        return
    coerce(ck, e, kt, what)


def _value(ck: Checker, ks: ast.Expr, kt: T.Type, scope: Scope) -> None:
    ck.check_expr(ks, scope, kt)
    coerce(ck, ks, kt, "keyset value")


def _name(ck: Checker, ks: ast.Name, kt: T.Type, scope: Scope) -> None:
    if not _value_set(ks, scope):
        _value(ck, ks, kt, scope)


SIMPLE_KEYSETS: dict[type[ast.Expr], KeysetRule] = {
    ast.Default: _any,
    ast.DontCare: _any,
    ast.Mask: _mask,
    ast.Range: _range,
    ast.Name: _name,  # a value set, or a constant
}
"""Keyset forms with their own rule; any other expression is a value of the key's type."""


def _value_set(ks: ast.Name, scope: Scope) -> bool:
    """If ``ks`` names a parser value set, resolve it and say so."""
    sym = scope.lookup(ks.name)
    if sym is not None and sym.kind == "value_set":
        ks.ref = sym
        ks.type = sym.type
        return True
    return False


def check_simple_keyset(ck: Checker, ks: ast.Expr, kt: T.Type, scope: Scope) -> None:
    """A keyset for one key of type ``kt``."""
    SIMPLE_KEYSETS.get(type(ks), _value)(ck, ks, kt, scope)


def check_select_keyset(ck: Checker, ks: ast.Expr, key_types: list[T.Type], scope: Scope) -> None:
    """The keyset of a select case, for a select on keys of types ``key_types``."""
    if isinstance(ks, (ast.Default, ast.DontCare)):
        ks.type = T.DONTCARE
        return
    if len(key_types) > 1:
        if not isinstance(ks, ast.ListExpr):
            # a value set can match a tuple
            if isinstance(ks, ast.Name) and _value_set(ks, scope):
                return
            raise err(f"keyset must have {len(key_types)} elements", ks)
        if len(ks.items) != len(key_types):
            raise err(f"keyset has {len(ks.items)} elements, select has {len(key_types)}", ks)
        for item, kt in zip(ks.items, key_types):
            check_simple_keyset(ck, item, kt, scope)
        ks.type = T.TupleT(tuple(key_types))
        return
    if isinstance(ks, ast.ListExpr) and len(ks.items) == 1:
        check_simple_keyset(ck, ks.items[0], key_types[0], scope)
        ks.type = T.TupleT(tuple(key_types))
        return
    check_simple_keyset(ck, ks, key_types[0], scope)
