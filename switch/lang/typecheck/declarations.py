"""Declarations: one rule per node type at the top level (:data:`TOP_LEVEL`) and inside parsers
and controls (:data:`LOCALS`).

This module checks the declarations that introduce names and types (typedefs, headers, structs,
enums, errors, match kinds, constants, externs, instantiations, value sets); declarations with a
body are in :mod:`~switch.lang.typecheck.bodies`, tables in :mod:`~switch.lang.typecheck.tables`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from switch.errors import UnsupportedError
from switch.lang import ast
from switch.lang import types as T
from switch.lang.constfold import fit_value
from switch.lang.symbols import Scope, Sym
from switch.lang.typecheck.bodies import check_action, check_control, check_function, check_parser
from switch.lang.typecheck.calls import check_constructor_call
from switch.lang.typecheck.coercion import coerce
from switch.lang.typecheck.context import err
from switch.lang.typecheck.tables import check_table

if TYPE_CHECKING:
    from switch.lang.typecheck.checker import Checker

TopLevelRule = Callable[["Checker", Any], None]
"""(checker, declaration of the row's type), declared in the checker's root scope."""
LocalRule = Callable[["Checker", Any, Scope, str], None]
"""(checker, declaration of the row's type, scope, storage of variables and instances)."""


def _declare_type(ck: Checker, d: ast.Decl, t: T.Type) -> None:
    ck.declare(ck.root, Sym(d.name, "type", t, d), d)
    ck.types[d.name] = t


# -- types ---------------------------------------------------------------------------------------


def _typedef(ck: Checker, d: ast.TypedefDecl) -> None:
    _declare_type(ck, d, ck.resolve_type(d.typ, ck.root))


STRUCT_KINDS: dict[type[ast.Decl], str] = {
    ast.HeaderDecl: "header",
    ast.StructDecl: "struct",
    ast.HeaderUnionDecl: "header_union",
}


def _struct_like(ck: Checker, d: ast.HeaderDecl | ast.StructDecl | ast.HeaderUnionDecl) -> None:
    kind = STRUCT_KINDS[type(d)]
    if d.type_params:
        # checked once per list of type arguments (switch.lang.typecheck.generics)
        ck.declare(ck.root, Sym(d.name, "type", T.GenericT(d), d), d)
        return
    t = T.StructLikeT(kind, d.name, annotations=d.annotations)
    _declare_type(ck, d, t)
    fill_struct(ck, d, t, ck.root)


def fill_struct(
    ck: Checker,
    d: ast.HeaderDecl | ast.StructDecl | ast.HeaderUnionDecl,
    t: T.StructLikeT,
    scope: Scope,
) -> None:
    """The fields of the struct-like type ``t`` declared by ``d``, resolved in ``scope``."""
    kind = t.kind
    for f in d.fields:
        if f.name in t.fields:
            raise err(f"duplicate field '{f.name}' in {kind} {d.name}", f)
        ft = ck.resolve_type(f.typ, scope)
        if kind == "header":
            _check_header_field(f, ft)
            if isinstance(ft, T.VarbitT) and T.varbit_field(t) is not None:
                raise err(f"header {d.name} has more than one varbit field", f)
        if kind == "header_union" and not (isinstance(ft, T.StructLikeT) and ft.is_header):
            raise err(f"header union members must be headers, '{f.name}' is {ft}", f)
        t.fields[f.name] = ft
        t.field_annotations[f.name] = f.annotations
    if kind == "header" and T.varbit_field(t) is not None:
        if any(isinstance(ft, T.StructLikeT) for ft in t.fields.values()):
            raise UnsupportedError(
                f"header {d.name} has a varbit field and a struct field: not supported by "
                "this target (varbit only in headers of scalar fields)",
                d.span,
            )
    if kind == "header":
        w = T.width_of(t)
        if w % 8 != 0:
            raise UnsupportedError(
                f"header {d.name} is {w} bits long; this target (like BMv2) needs headers "
                "whose size is a multiple of 8 bits",
                d.span,
            )


def _check_header_field(f: ast.FieldDecl, ft: T.Type) -> None:
    if not (
        isinstance(ft, (T.BitT, T.IntT, T.VarbitT))
        or ft is T.BOOL
        or (isinstance(ft, T.EnumT) and ft.underlying is not None)
        or (isinstance(ft, T.StructLikeT) and ft.kind == "struct")
    ):
        raise err(f"header field '{f.name}' cannot have type {ft}", f)
    if isinstance(ft, T.StructLikeT) and any(isinstance(x, T.VarbitT) for x in ft.fields.values()):
        raise UnsupportedError(
            f"header field '{f.name}' is a struct with a varbit field: not supported by this "
            "target (a header's varbit field must be one of its own fields)",
            f.span,
        )


def _enum(ck: Checker, d: ast.EnumDecl) -> None:
    underlying: T.BitT | T.IntT | None = None
    if d.underlying is not None:
        ut = ck.resolve_type(d.underlying, ck.root)
        if not isinstance(ut, (T.BitT, T.IntT)):
            raise err("an enum's underlying type must be bit<W> or int<W>", d.underlying)
        underlying = ut
    t = T.EnumT(d.name, [m[0] for m in d.members], underlying)
    for i, (name, value, span) in enumerate(d.members):
        if name in t.values:
            raise err(f"duplicate enum member '{name}'", span)
        if underlying is not None:
            if value is None:
                raise err(f"member '{name}' of serializable enum needs a value", span)
            v = ck.const_value(value, ck.root, underlying)
            t.values[name] = fit_value(int(v), underlying)
        else:
            t.values[name] = i
    _declare_type(ck, d, t)


def _error(ck: Checker, d: ast.ErrorDecl) -> None:
    for name, span in d.members:
        if name in ck.errors:
            raise err(f"error member '{name}' is already declared", span)
        ck.errors[name] = len(ck.errors)
    if ck.root.names.get("error") is None:
        ck.root.names["error"] = Sym("error", "type", T.ERROR, d)


def _match_kind(ck: Checker, d: ast.MatchKindDecl) -> None:
    for name, span in d.members:
        if name in ck.match_kinds:
            raise err(f"match kind '{name}' is already declared", span)
        ck.match_kinds.add(name)


BLOCK_TYPE_KINDS: dict[type[ast.Decl], str] = {
    ast.ParserTypeDecl: "parser",
    ast.ControlTypeDecl: "control",
    ast.PackageDecl: "package",
}


def _block_type(ck: Checker, d: ast.ParserTypeDecl | ast.ControlTypeDecl | ast.PackageDecl) -> None:
    _declare_type(ck, d, T.BlockT(BLOCK_TYPE_KINDS[type(d)], d))


def _extern(ck: Checker, d: ast.ExternDecl) -> None:
    _declare_type(ck, d, T.ExternT(d))


def _extern_func(ck: Checker, d: ast.ExternFuncDecl) -> None:
    ck.declare(ck.root, Sym(d.name, "extern_func", None, d, overloads=[d]), d)


# -- constants -----------------------------------------------------------------------------------


def check_const(ck: Checker, d: ast.ConstDecl, scope: Scope, storage: str = "local") -> Sym:
    """A constant: its value is folded now and kept in its symbol."""
    t = ck.resolve_type(d.typ, scope)
    ck.check_expr(d.value, scope, t)
    coerce(ck, d.value, t, "constant initializer")
    value = ck.eval_const(d.value)
    sym = Sym(d.name, "const", t, d, value=value, storage=storage)
    ck.declare(scope, sym, d)
    return sym


def _global_const(ck: Checker, d: ast.ConstDecl) -> None:
    check_const(ck, d, ck.root, storage="global")


def _local_const(ck: Checker, d: ast.ConstDecl, scope: Scope, storage: str) -> None:
    check_const(ck, d, scope)  # constants are folded into the code: where they live is moot


# -- blocks and instances ------------------------------------------------------------------------


def _function(ck: Checker, d: ast.FunctionDecl) -> None:
    sym = Sym(d.name, "function", T.FuncT(T.CallKind.FUNCTION, d), d)
    if not d.type_params:  # a generic one is checked per call's type arguments
        check_function(ck, d, ck.root)
    ck.declare(ck.root, sym, d)


def _global_action(ck: Checker, d: ast.ActionDecl) -> None:
    ck.declare(ck.root, Sym(d.name, "action", T.FuncT(T.CallKind.ACTION, d), d), d)
    check_action(ck, d, ck.root)


def _parser(ck: Checker, d: ast.ParserDecl) -> None:
    _declare_type(ck, d, T.BlockT("parser", d))
    if not d.type_params:  # a generic one is checked per instantiation's type arguments
        check_parser(ck, d, ck.root)


def _control(ck: Checker, d: ast.ControlDecl) -> None:
    _declare_type(ck, d, T.BlockT("control", d))
    if not d.type_params:
        check_control(ck, d, ck.root)


def check_instantiation(ck: Checker, d: ast.Instantiation, scope: Scope) -> T.Type:
    """``Type(args) name;``: the instance's type."""
    t = ck.resolve_type(d.typ, scope)
    info = check_constructor_call(ck, t, d.args, scope, d)
    d.ref = info
    d.inst_type = info.decl_type
    assert info.decl_type is not None
    return info.decl_type


def _global_instance(ck: Checker, d: ast.Instantiation) -> None:
    t = check_instantiation(ck, d, ck.root)
    ck.declare(ck.root, Sym(d.name, "instance", t, d, storage="global"), d)
    if d.name == "main":
        ck.main = d


def _global_variable(ck: Checker, d: ast.VarDecl) -> None:
    raise UnsupportedError("variables at the top level are not allowed in P4-16", d.span)


TOP_LEVEL: dict[type[ast.Node], TopLevelRule] = {
    ast.TypedefDecl: _typedef,
    ast.HeaderDecl: _struct_like,
    ast.StructDecl: _struct_like,
    ast.HeaderUnionDecl: _struct_like,
    ast.EnumDecl: _enum,
    ast.ErrorDecl: _error,
    ast.MatchKindDecl: _match_kind,
    ast.ConstDecl: _global_const,
    ast.ExternDecl: _extern,
    ast.ExternFuncDecl: _extern_func,
    ast.FunctionDecl: _function,
    ast.ActionDecl: _global_action,
    ast.ParserTypeDecl: _block_type,
    ast.ControlTypeDecl: _block_type,
    ast.PackageDecl: _block_type,
    ast.ParserDecl: _parser,
    ast.ControlDecl: _control,
    ast.Instantiation: _global_instance,
    ast.VarDecl: _global_variable,
}
"""Every declaration the parser produces at the top level: its rule."""


# -- locals of parsers and controls --------------------------------------------------------------


def _variable(ck: Checker, d: ast.VarDecl, scope: Scope, storage: str) -> None:
    t = ck.resolve_type(d.typ, scope)
    if d.init is not None:
        ck.check_expr(d.init, scope, t)
        coerce(ck, d.init, t, "initializer")
    sym = Sym(d.name, "var", t, d, storage=storage, owner=scope.owner)
    d.ref = sym
    ck.declare(scope, sym, d)


def _instance(ck: Checker, d: ast.Instantiation, scope: Scope, storage: str) -> None:
    if d.infer_type_args:
        # C.apply(x) of a generic C: the instance's type is settled by that apply (calls.py)
        t = ck.resolve_type(d.typ, scope)
        ck.declare(scope, Sym(d.name, "instance", t, d, storage=storage, owner=scope.owner), d)
        return
    t = check_instantiation(ck, d, scope)
    ck.declare(scope, Sym(d.name, "instance", t, d, storage=storage, owner=scope.owner), d)


def _action(ck: Checker, d: ast.ActionDecl, scope: Scope, storage: str) -> None:
    action_t = T.FuncT(T.CallKind.ACTION, d)
    ck.declare(scope, Sym(d.name, "action", action_t, d, owner=scope.owner), d)
    check_action(ck, d, scope)


def _table(ck: Checker, d: ast.TableDecl, scope: Scope, storage: str) -> None:
    check_table(ck, d, scope)
    ck.declare(scope, Sym(d.name, "table", T.TableT(d), d, owner=scope.owner), d)


def _value_set(ck: Checker, d: ast.ValueSetDecl, scope: Scope, storage: str) -> None:
    d.elem_type = ck.resolve_type(d.elem, scope)
    d.size_value = ck.const_int(d.size, scope, "value_set size")
    ck.declare(scope, Sym(d.name, "value_set", d.elem_type, d, owner=scope.owner), d)


LOCALS: dict[type[ast.Node], LocalRule] = {
    ast.VarDecl: _variable,
    ast.ConstDecl: _local_const,
    ast.Instantiation: _instance,
    ast.ActionDecl: _action,
    ast.TableDecl: _table,
    ast.ValueSetDecl: _value_set,
}
"""Every declaration the parser produces inside a parser or control body (or as a statement)."""
