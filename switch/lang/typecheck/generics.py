"""Generic user-defined declarations, monomorphised at compile time.

A generic struct, header or header union (``struct pair<T> { T a; T b; }``), function
(``T max<T>(in T a, in T b)``), parser or control (``control C<T>(inout T x)``) is not checked
on its own. Each distinct list of type arguments it is used with (written, or inferred from a
call's arguments) gets its own copy: a new :class:`~switch.lang.types.StructLikeT` named
``<name>_<n>`` (as p4c names its specialisations), or a deep copy of the function, parser or
control declaration, checked with the type parameters bound to the arguments as if they were
typedefs. The later phases only ever see those copies, which are ordinary declarations.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from switch.errors import P4Error, UnsupportedError
from switch.lang import ast
from switch.lang import types as T
from switch.lang.symbols import Scope, Sym
from switch.lang.typecheck.bodies import check_control, check_function, check_parser
from switch.lang.typecheck.context import err
from switch.lang.typecheck.declarations import STRUCT_KINDS, fill_struct

if TYPE_CHECKING:
    from switch.lang.typecheck.checker import Checker

BODY_CHECKS: dict[type[ast.Node], Any] = {
    ast.FunctionDecl: check_function,
    ast.ParserDecl: check_parser,
    ast.ControlDecl: check_control,
}
"""Declarations with a body: the check of one copy."""


def _key(t: T.Type) -> Any:
    """A dictionary key for a type argument: its value for the frozen (value) types, its
    identity for the named ones (compared by name equivalence)."""
    try:
        hash(t)
    except TypeError:
        return ("id", id(t))
    return t


def _mentions_type_var(t: T.Type) -> bool:
    if isinstance(t, T.TypeVar):
        return True
    if isinstance(t, T.TupleT):
        return any(_mentions_type_var(e) for e in t.elems)
    if isinstance(t, T.StackT):
        return _mentions_type_var(t.elem)
    return False


def specialise(ck: Checker, decl: Any, args: list[T.Type], node: ast.Node) -> Any:
    """The copy of the generic ``decl`` for the type arguments ``args``: a
    :class:`~switch.lang.types.StructLikeT` for a struct-like declaration, else a checked
    declaration of the same kind (made once per distinct ``args``)."""
    params = list(decl.type_params)
    if len(args) != len(params):
        raise err(
            f"'{decl.name}' takes {len(params)} type argument(s) ({', '.join(params)}), "
            f"got {len(args)}",
            node,
        )
    for a in args:
        if _mentions_type_var(a):
            raise UnsupportedError(
                f"the type arguments of '{decl.name}' cannot be inferred through it; "
                "write them explicitly",
                node.span,
            )
    key = (id(decl), tuple(_key(a) for a in args))
    done = ck.specialised.get(key)
    if done is not None:
        return done
    scope = Scope(ck.root)
    for name, t in zip(params, args):
        scope.names[name] = Sym(name, "type", t, decl)
    n = ck.specialisation_count.get(id(decl), 0)
    ck.specialisation_count[id(decl)] = n + 1
    kind = STRUCT_KINDS.get(type(decl))
    check = BODY_CHECKS.get(type(decl))
    if kind is None and check is None:
        raise err(f"'{decl.name}' cannot take type arguments", node)
    try:
        if kind is not None:
            t = T.StructLikeT(kind, f"{decl.name}_{n}", annotations=decl.annotations)
            ck.specialised[key] = t
            ck.types[t.name] = t
            fill_struct(ck, decl, t, scope)
            return t
        assert check is not None
        clone = copy.deepcopy(decl)
        clone.type_params = []
        ck.specialised[key] = clone
        check(ck, clone, scope)
        return clone
    except P4Error as e:
        # the error is in the generic declaration's text: say which use of it made it
        where = f" at {node.span}" if node.span.line else ""
        e.message += f" (in {decl.name}<{', '.join(map(str, args))}>, used{where})"
        e.args = (e.message,)
        raise
