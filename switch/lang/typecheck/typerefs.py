"""Types as written (``bit<8>``, ``H[4]``, ``register<bit<32>>``) to semantic types.

:data:`TYPE_REFS` has one row per kind of written type. Type parameters of generic externs,
functions and blocks are bound here too: :func:`resolve_type_in` resolves a written type with some
type variables bound, :func:`apply_bindings` substitutes inferred ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from switch.errors import TypeError_
from switch.lang import ast
from switch.lang import types as T
from switch.lang.symbols import Scope, Sym
from switch.lang.typecheck.context import err

if TYPE_CHECKING:
    from switch.lang.typecheck.checker import Checker

TypeRefRule = Callable[["Checker", Any, Scope], T.Type]

SIZED_TYPES: dict[str, Callable[[int], T.Type]] = {
    "bit": T.BitT,
    "int": T.IntT,
    "varbit": T.VarbitT,
}
UNSIZED_TYPES: dict[str, T.Type] = {
    "bool": T.BOOL,
    "error": T.ERROR,
    "string": T.STRING,
    "match_kind": T.MATCH_KIND,
    "void": T.VOID,
}


def _base(ck: Checker, tr: ast.BaseTypeRef, scope: Scope) -> T.Type:
    make = SIZED_TYPES.get(tr.kind)
    if make is None:
        return UNSIZED_TYPES[tr.kind]
    if tr.width is None:
        if tr.kind == "int":
            return T.INFINT
        if tr.kind == "bit":
            return T.BitT(1)  # P4-16: `bit` alone is bit<1>
        raise err(f"{tr.kind} needs a width", tr)
    w = ck.const_int(tr.width, scope, "a type width")
    if w <= 0 and not (tr.kind == "bit" and w == 0):
        raise err(f"type width must be positive, got {w}", tr.width)
    return make(w)


def _named(ck: Checker, tr: ast.NamedTypeRef, scope: Scope) -> T.Type:
    sym = scope.lookup(tr.name)
    if sym is None or sym.kind != "type":
        raise err(f"unknown type '{tr.name}'{scope.suggest(tr.name)}", tr)
    t = sym.type
    assert t is not None
    if isinstance(t, T.GenericT):
        if not tr.type_args:
            raise err(f"generic type '{tr.name}' needs type arguments: {t}", tr)
        st: T.Type = ck.specialise(t.decl, [ck.resolve_type(a, scope) for a in tr.type_args], tr)
        return st
    if not tr.type_args:
        return t
    args = [ck.resolve_type(a, scope) for a in tr.type_args]
    if isinstance(t, T.ExternT):
        params = t.decl.type_params
        if len(args) > len(params):
            raise err(f"'{tr.name}' takes {len(params)} type arguments, got {len(args)}", tr)
        return T.ExternT(t.decl, dict(zip(params, args)))
    if isinstance(t, T.BlockT):
        return T.BlockT(t.kind, t.decl, dict(zip(t.decl.type_params, args)))
    raise err(f"type '{tr.name}' takes no type arguments", tr)


def _stack(ck: Checker, tr: ast.StackTypeRef, scope: Scope) -> T.Type:
    elem = ck.resolve_type(tr.elem, scope)
    size = ck.const_int(tr.size, scope, "a header stack size")
    if not (isinstance(elem, T.StructLikeT) and elem.kind in ("header", "header_union")):
        raise err(f"header stacks need a header element type, not {elem}", tr)
    if size <= 0:
        raise err("header stack size must be positive", tr.size)
    return T.StackT(elem, size)


def _tuple(ck: Checker, tr: ast.TupleTypeRef, scope: Scope) -> T.Type:
    return T.TupleT(tuple(ck.resolve_type(e, scope) for e in tr.elems))


def _dont_care(ck: Checker, tr: ast.DontCareTypeRef, scope: Scope) -> T.Type:
    return T.DONTCARE


TYPE_REFS: dict[type[ast.TypeRef], TypeRefRule] = {
    ast.BaseTypeRef: _base,
    ast.NamedTypeRef: _named,
    ast.StackTypeRef: _stack,
    ast.TupleTypeRef: _tuple,
    ast.DontCareTypeRef: _dont_care,
}


def resolve_type_in(
    ck: Checker,
    tr: ast.TypeRef | None,
    tparams: Iterable[str],
    bindings: dict[str, T.Type],
    scope: Scope,
) -> T.Type:
    """``tr`` with the type parameters ``tparams`` bound (unbound ones become type variables)."""
    if tr is None:
        return T.VOID
    tscope = Scope(scope)
    for p in tparams:
        tscope.names[p] = Sym(p, "type", bindings.get(p, T.TypeVar(p)))
    return ck.resolve_type(tr, tscope)


def no_type_vars(t: T.Type) -> T.Type:
    """``t``, which must not be an uninferred type variable."""
    if isinstance(t, T.TypeVar):
        raise TypeError_(f"cannot infer type parameter {t.name}", None)
    return t


def apply_bindings(t: T.Type, bindings: dict[str, T.Type]) -> T.Type:
    """``t`` with the inferred type variables substituted."""
    if isinstance(t, T.TypeVar):
        return bindings.get(t.name, t)
    if isinstance(t, T.ExternT):
        return T.ExternT(t.decl, {k: apply_bindings(v, bindings) for k, v in t.type_args.items()})
    if isinstance(t, T.BlockT):
        return T.BlockT(
            t.kind, t.decl, {k: apply_bindings(v, bindings) for k, v in t.type_args.items()}
        )
    if isinstance(t, T.TupleT):
        return T.TupleT(tuple(apply_bindings(x, bindings) for x in t.elems))
    return t


def block_param_types(ck: Checker, bt: T.BlockT, scope: Scope) -> list[T.Type]:
    """The apply parameters' types of a parser/control (type) with its type arguments bound."""
    decl = bt.decl
    if isinstance(decl, (ast.ParserTypeDecl, ast.ControlTypeDecl, ast.PackageDecl)):
        return [
            resolve_type_in(ck, p.typ, decl.type_params, dict(bt.type_args), scope)
            for p in decl.params
        ]
    return [_sym_type(p) for p in decl.params]


def _sym_type(p: ast.Param) -> T.Type:
    t = p.sym.type
    assert t is not None
    return t
