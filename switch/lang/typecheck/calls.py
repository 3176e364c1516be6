"""Calls: one rule per kind of callee (:data:`CALLS`), argument binding and constructors.

:func:`check_call` checks the callee expression, whose type (a :class:`~switch.lang.types.FuncT`)
says which kind of thing is called, and hands the call to that kind's row. Every row leaves a
:class:`~switch.lang.symbols.CallInfo` in ``call.ref`` for the code generator. :func:`bind_args`
matches arguments to parameters (by position or name), infers type parameters and checks
directions; :func:`check_constructor_call` does the same for instantiations.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from switch.lang import ast
from switch.lang import types as T
from switch.lang.symbols import CallInfo, Scope, SizeMethod, Sym
from switch.lang.typecheck.coercion import coerce
from switch.lang.typecheck.context import Context, err
from switch.lang.typecheck.lvalues import check_lvalue
from switch.lang.typecheck.typerefs import (
    apply_bindings,
    block_param_types,
    no_type_vars,
    resolve_type_in,
)
from switch.lang.types import CallKind

if TYPE_CHECKING:
    from switch.lang.typecheck.checker import Checker


CallRule = Callable[["Checker", ast.Call, T.FuncT, list[T.Type], Scope], T.Type]
"""(checker, call, callee type, explicit type arguments, scope) -> the call's type."""


def check_call(ck: Checker, e: ast.Call, scope: Scope, expected: T.Type | None) -> T.Type:
    """The expression rule for calls: check the callee, then its kind's row."""
    ft = ck.check_expr(e.func, scope)
    if isinstance(ft, T.TypeOnlyT):
        inner = ft.typ
        if isinstance(inner, (T.ExternT, T.BlockT)):
            # constructor call used as an expression (e.g. package arguments)
            if isinstance(inner, T.BlockT) and getattr(inner.decl, "type_params", None):
                inner = _block_type_args(ck, e, inner, scope, expected)
            info = check_constructor_call(ck, inner, e.args, scope, e)
            e.ref = info
            assert info.decl_type is not None
            return info.decl_type
        raise err(f"type {inner} cannot be called", e)
    if not isinstance(ft, T.FuncT):
        raise err(f"a value of type {ft} cannot be called", e)
    targs = [ck.resolve_type(t, scope) for t in e.type_args] if e.type_args else []
    return CALLS[ft.kind](ck, e, ft, targs, scope)


def _block_type_args(
    ck: Checker, e: ast.Call, bt: T.BlockT, scope: Scope, expected: T.Type | None
) -> T.BlockT:
    """``C<A>(...)`` or ``C(...)`` of a generic parser/control as an expression: the type
    arguments written, else those its apply parameters get from the expected type (a package
    parameter such as V1Switch's ``Egress<H, M>``, with H and M known from earlier arguments)."""
    decl = bt.decl
    bindings = dict(bt.type_args)
    if e.type_args:
        args = [ck.resolve_type(t, scope) for t in e.type_args]
        bindings.update(zip(decl.type_params, args))
    elif (
        isinstance(expected, T.BlockT)
        and expected.kind == bt.kind
        and len(getattr(expected.decl, "params", [])) == len(decl.params)
    ):
        tscope = Scope(scope)
        for tp in decl.type_params:
            tscope.names[tp] = Sym(tp, "type", T.TypeVar(tp))
        for p, want in zip(decl.params, block_param_types(ck, expected, scope)):
            pt = ck.resolve_type(p.typ, tscope)
            if isinstance(pt, T.TypeVar) and pt.name not in bindings:
                if not isinstance(want, T.TypeVar):
                    bindings[pt.name] = want
    return T.BlockT(bt.kind, decl, bindings)


def _method_of(e: ast.Call) -> ast.Member:
    member = e.func
    assert isinstance(member, ast.Member)
    return member


def _action(ck: Checker, e: ast.Call, ft: T.FuncT, targs: list[T.Type], scope: Scope) -> T.Type:
    decl = ft.decl
    if ck.context is Context.PARSER:
        raise err("actions cannot be called from a parser", e)
    info = bind_args(ck, decl, decl.params, e.args, scope, e, {}, [])
    info.kind = CallKind.ACTION
    info.name = decl.name
    e.ref = info
    return T.VOID


def _function(ck: Checker, e: ast.Call, ft: T.FuncT, targs: list[T.Type], scope: Scope) -> T.Type:
    decl: ast.FunctionDecl = ft.decl
    if decl.type_params:
        return _generic_function(ck, e, decl, targs, scope)
    info = bind_args(ck, decl, decl.params, e.args, scope, e, {}, [])
    info.kind = CallKind.FUNCTION
    info.name = decl.name
    e.ref = info
    assert decl.ret_type is not None
    return decl.ret_type


def _generic_function(
    ck: Checker, e: ast.Call, decl: ast.FunctionDecl, targs: list[T.Type], scope: Scope
) -> T.Type:
    """A call of a generic function: its type arguments (written, or inferred from the
    arguments) pick the function's copy for them, which the call then calls."""
    bindings = dict(zip(decl.type_params, targs))
    info = bind_args(ck, decl, decl.params, e.args, scope, e, bindings, decl.type_params)
    missing = [p for p in decl.type_params if p not in bindings]
    if missing:
        raise err(
            f"cannot infer type argument(s) {', '.join(missing)} of '{decl.name}'; "
            "write them explicitly",
            e,
        )
    spec: ast.FunctionDecl = ck.specialise(decl, [bindings[p] for p in decl.type_params], e)
    info.kind = CallKind.FUNCTION
    info.name = spec.name
    info.decl = spec
    info.params = list(spec.params)
    e.ref = info
    assert spec.ret_type is not None
    return spec.ret_type


def _extern_func(
    ck: Checker, e: ast.Call, ft: T.FuncT, targs: list[T.Type], scope: Scope
) -> T.Type:
    sym: Sym = ft.decl
    decl = pick_overload(sym.overloads, e.args, e, f"'{sym.name}'")
    bindings: dict[str, T.Type] = {}
    if targs:
        bindings.update(zip(decl.type_params, targs))
    info = bind_args(ck, decl, decl.params, e.args, scope, e, bindings, decl.type_params)
    info.kind = CallKind.EXTERN_FUNC
    info.name = decl.name
    e.ref = info
    return no_type_vars(resolve_type_in(ck, decl.ret, decl.type_params, bindings, scope))


def _extern_method(
    ck: Checker, e: ast.Call, ft: T.FuncT, targs: list[T.Type], scope: Scope
) -> T.Type:
    ext, methods = ft.decl
    member = _method_of(e)
    decl = pick_overload(methods, e.args, e, f"'{ext.decl.name}.{member.name}'")
    bindings = dict(ext.type_args)
    if targs:
        bindings.update(zip(decl.type_params, targs))
    tparams = list(ext.decl.type_params) + list(decl.type_params)
    info = bind_args(ck, decl, decl.params, e.args, scope, e, bindings, tparams)
    is_packet = ext.decl.name in ("packet_in", "packet_out")
    info.kind = CallKind.PACKET_METHOD if is_packet else CallKind.EXTERN_METHOD
    info.name = member.name
    info.extern_name = ext.decl.name
    info.target = member.expr
    e.ref = info
    if is_packet and member.name == "extract" and e.args:
        _check_extract_target(e, bindings.get("T"))
    if is_packet and member.name == "lookahead" and not e.type_args:
        raise err("lookahead needs a type argument: lookahead<T>()", e)
    if is_packet and member.name == "lookahead" and _has_varbit(bindings.get("T")):
        raise err("lookahead needs a fixed-size type; this one has a varbit field", e)
    return no_type_vars(resolve_type_in(ck, decl.ret, tparams, bindings, scope))


def _has_varbit(t: T.Type | None) -> bool:
    if isinstance(t, T.VarbitT):
        return True
    if isinstance(t, T.StructLikeT):
        return any(_has_varbit(f) for f in t.fields.values())
    return False


def _check_extract_target(e: ast.Call, bound: T.Type | None) -> None:
    a = e.args[0].value
    if a is None:
        # `extract<H>(_)`: a don't-care argument skips a header of type H
        if not (isinstance(bound, T.StructLikeT) and bound.kind == "header"):
            raise err("extract into '_' needs a header type argument: extract<H>(_)", e.args[0])
        ht: T.Type = bound
    else:
        if not (isinstance(a.type, T.StructLikeT) and a.type.kind == "header"):
            raise err("extract needs a header", e.args[0])
        ht = a.type
    vb = T.varbit_field(ht)
    if len(e.args) == 2 and vb is None:
        raise err(
            f"two-argument extract needs a header with a varbit field; {ht} has none", e.args[0]
        )
    if len(e.args) == 1 and vb is not None:
        raise err(
            f"header {ht} has a varbit field ('{vb[0]}'): extract it with its size in bits, "
            "extract(hdr, bits)",
            e.args[0],
        )


def _header_method(
    ck: Checker, e: ast.Call, ft: T.FuncT, targs: list[T.Type], scope: Scope
) -> T.Type:
    member = _method_of(e)
    if e.args:
        raise err(f"'{member.name}' takes no arguments", e)
    e.ref = CallInfo(CallKind.HEADER_METHOD, member.name, target=member.expr)
    return T.BOOL if member.name == "isValid" else T.VOID


def _stack_method(
    ck: Checker, e: ast.Call, ft: T.FuncT, targs: list[T.Type], scope: Scope
) -> T.Type:
    member = _method_of(e)
    if len(e.args) != 1 or e.args[0].value is None:
        raise err(f"'{member.name}' takes one argument (a count)", e)
    count = ck.const_int(e.args[0].value, scope, f"{member.name} count")
    if count < 0:
        raise err(f"{member.name} count must not be negative", e.args[0])
    e.ref = CallInfo(CallKind.STACK_METHOD, member.name, target=member.expr, args=[count])
    return T.VOID


def _size_method(
    ck: Checker, e: ast.Call, ft: T.FuncT, targs: list[T.Type], scope: Scope
) -> T.Type:
    member = _method_of(e)
    ref = member.ref
    assert isinstance(ref, SizeMethod)
    if e.args:
        raise err(f"'{ref.name}' takes no arguments", e)
    t = ref.type
    is_min = ref.name.startswith("min") or ref.name.startswith("size")
    if isinstance(t, T.StructLikeT) and t.kind == "header" and T.varbit_field(t) is not None:
        if ref.name.startswith("size"):
            # the current size: the fixed fields plus the varbit field's current width
            e.ref = CallInfo(CallKind.SIZE_METHOD, ref.name, args=[None], target=member.expr)
            return T.BitT(32)
        w = T.fixed_width(t) if is_min else T.width_of(t)
    else:
        w = T.width_of(t)
    value = w if ref.name.endswith("Bits") else (w + 7) // 8
    e.ref = CallInfo(CallKind.SIZE_METHOD, ref.name, args=[value])
    return T.INFINT


def _table_apply(
    ck: Checker, e: ast.Call, ft: T.FuncT, targs: list[T.Type], scope: Scope
) -> T.Type:
    if e.args:
        raise err("table apply takes no arguments", e)
    if ck.context is Context.ACTION:
        raise err("tables cannot be applied inside actions", e)
    member = _method_of(e)
    e.ref = CallInfo(CallKind.TABLE_APPLY, ft.decl.name, decl=ft.decl, target=member.expr)
    return T.ApplyResultT(ft.decl)


def _block_apply(
    ck: Checker, e: ast.Call, ft: T.FuncT, targs: list[T.Type], scope: Scope
) -> T.Type:
    bt: T.BlockT = ft.decl
    member = _method_of(e)
    decl = bt.decl
    bindings = dict(bt.type_args)
    info = bind_args(ck, decl, decl.params, e.args, scope, e, bindings, decl.type_params)
    target = member.expr.ref if isinstance(member.expr, ast.Name) else None
    if (
        isinstance(target, Sym)
        and isinstance(target.decl, ast.Instantiation)
        and target.decl.infer_type_args
        and target.decl.ref is None
    ):
        # C.apply(x) of a generic C: its instance is of C's copy for the type arguments the
        # arguments give (P4-16 "Direct type invocation", type inference as for a call)
        inst = target.decl
        missing = [p for p in getattr(decl, "type_params", []) if p not in bindings]
        if missing:
            raise err(
                f"cannot infer type argument(s) {', '.join(missing)} of '{decl.name}' from the "
                f"arguments; write them explicitly: {decl.name}<...>.apply(...)",
                e,
            )
        ctor = check_constructor_call(ck, T.BlockT(bt.kind, decl, bindings), [], scope, inst)
        inst.ref = ctor
        inst.inst_type = ctor.decl_type
        target.type = ctor.decl_type
        assert isinstance(ctor.decl_type, T.BlockT)
        decl = ctor.decl_type.decl
        info = bind_args(ck, decl, decl.params, e.args, scope, e, {}, [])
    info.kind = CallKind.BLOCK_APPLY
    info.name = decl.name
    info.target = member.expr
    e.ref = info
    return T.VOID


def _not_callable(
    ck: Checker, e: ast.Call, ft: T.FuncT, targs: list[T.Type], scope: Scope
) -> T.Type:
    raise err(f"cannot call {ft}", e)


CALLS: dict[CallKind, CallRule] = {
    CallKind.ACTION: _action,
    CallKind.FUNCTION: _function,
    CallKind.EXTERN_FUNC: _extern_func,
    CallKind.EXTERN_METHOD: _extern_method,
    CallKind.HEADER_METHOD: _header_method,
    CallKind.STACK_METHOD: _stack_method,
    CallKind.SIZE_METHOD: _size_method,
    CallKind.TABLE_APPLY: _table_apply,
    CallKind.BLOCK_APPLY: _block_apply,
    # no callee has these types: the extern-method row makes packet methods, and constructors
    # are called through their type (see check_call)
    CallKind.PACKET_METHOD: _not_callable,
    CallKind.CONSTRUCTOR: _not_callable,
}


# -- arguments ---------------------------------------------------------------------------------


Overload = TypeVar("Overload", ast.MethodDecl, ast.ExternFuncDecl)


def pick_overload(
    decls: list[Overload], args: list[ast.Arg], node: ast.Node, what: str
) -> Overload:
    """The overload of an extern function, method or constructor that ``args`` fit."""
    n = len(args)
    fits = []
    for d in decls:
        params = d.params
        required = [
            p
            for p in params
            if p.default is None and not any(a.name == "optional" for a in p.annotations)
        ]
        if len(required) <= n <= len(params):
            fits.append(d)
    if not fits:
        counts = sorted({len(d.params) for d in decls})
        exp = " or ".join(str(c) for c in counts)
        raise err(f"wrong number of arguments to {what}: expected {exp}, got {n}", node)
    if len(fits) > 1:
        exact = [d for d in fits if len(d.params) == n]
        if exact:
            return exact[0]
    return fits[0]


def _args_by_param(
    name: str, params: list[ast.Param], args: list[ast.Arg], node: ast.Node
) -> list[ast.Arg | None]:
    """The argument of each parameter (None where it is omitted), by name or by position."""
    by_pos: list[ast.Arg | None] = [None] * len(params)
    if any(a.name for a in args):
        index = {p.name: i for i, p in enumerate(params)}
        for a in args:
            if a.name is None:
                raise err("cannot mix named and positional arguments", a)
            if a.name not in index:
                raise err(
                    f"'{name}' has no parameter '{a.name}'; parameters: {', '.join(index)}", a
                )
            by_pos[index[a.name]] = a
    else:
        if len(args) > len(params):
            raise err(
                f"wrong number of arguments to '{name}': expected {len(params)}, got {len(args)}",
                node,
            )
        for i, a in enumerate(args):
            by_pos[i] = a
    for p, arg in zip(params, by_pos):
        optional = p.default is not None or any(x.name == "optional" for x in p.annotations)
        if arg is None and not optional:
            raise err(f"wrong number of arguments to '{name}': missing '{p.name}'", node)
    return by_pos


def bind_args(
    ck: Checker,
    decl: Any,
    params: list[ast.Param],
    args: list[ast.Arg],
    scope: Scope,
    node: ast.Node,
    bindings: dict[str, T.Type],
    tparams: Iterable[str],
) -> CallInfo:
    """Match arguments to parameters, infer type parameters, check directions and types.

    ``bindings`` (type parameter -> type) is completed in place. The returned call's ``kind`` is
    None: the caller says which kind of call it is.
    """
    name = getattr(decl, "name", "?")
    by_pos = _args_by_param(name, params, args, node)
    # resolve parameter types with type variables
    tscope = Scope(scope)
    for tp in tparams:
        # a type argument already known (written at the call) resolves as itself
        tscope.names[tp] = Sym(tp, "type", bindings.get(tp) or T.TypeVar(tp))
    ptypes = [_param_type(ck, p, tscope) for p in params]
    # first pass: check typed arguments and bind type variables
    for pt, a in zip(ptypes, by_pos):
        if a is None or a.value is None:
            continue
        exp = apply_bindings(pt, bindings)
        at = ck.check_expr(a.value, scope, exp if not isinstance(exp, T.TypeVar) else None)
        if isinstance(exp, T.TypeVar):
            if at is T.INFINT:
                continue  # bind later from another argument
            if isinstance(at, T.ListT):
                tt = T.TupleT(tuple(at.elems))
                if any(x is T.INFINT for x in tt.elems):
                    raise err("list elements passed to a generic parameter need widths", a)
                bindings[exp.name] = tt
                coerce(ck, a.value, tt, "argument")
                continue
            bindings[exp.name] = at
        elif isinstance(exp, T.BlockT):
            _unify_block(ck, exp, at, bindings, scope)
    final_types: list[T.Type] = []
    for p, pt, a in zip(params, ptypes, by_pos):
        exp = apply_bindings(pt, bindings)
        final_types.append(exp)
        if a is None or a.value is None:
            continue
        if isinstance(exp, T.TypeVar):
            raise err(
                f"cannot infer type parameter '{exp.name}' of '{name}' from an "
                "integer without a width; write e.g. 8w1 or a cast",
                a,
            )
        coerce(ck, a.value, exp, f"argument '{p.name}' of '{name}'")
        if p.direction in ("out", "inout"):
            check_lvalue(a.value)
    return CallInfo(
        None,
        name,
        decl,
        list(params),
        final_types,
        [a.value if a is not None else None for a in by_pos],
        bindings=dict(bindings),
    )


def _param_type(ck: Checker, p: ast.Param, scope: Scope) -> T.Type:
    """A parameter's type: as checked with its declaration (which also covers the copies of
    generic declarations, whose type parameters only their own scope knows), else resolved."""
    sym = p.ref
    if sym is not None and sym.type is not None and not isinstance(sym.type, T.TypeVar):
        t: T.Type = sym.type
        return t
    return ck.resolve_type(p.typ, scope)


def _unify_block(
    ck: Checker, exp: T.BlockT, at: T.Type, bindings: dict[str, T.Type], scope: Scope
) -> None:
    """Infer type arguments from a parser/control passed where its type is expected."""
    if not isinstance(at, T.BlockT) or at.kind != exp.kind:
        return
    if len(exp.decl.params) != len(at.decl.params):
        return
    for pt, apt in zip(block_param_types(ck, exp, scope), block_param_types(ck, at, scope)):
        if isinstance(pt, T.TypeVar) and pt.name not in bindings:
            bindings[pt.name] = apt


def check_constructor_call(
    ck: Checker, t: T.Type, args: list[ast.Arg], scope: Scope, node: ast.Node
) -> CallInfo:
    """An instantiation of the extern or parser/control/package type ``t`` with ``args``.

    The result's ``decl_type`` is the instance's type, with the type arguments inferred.
    """
    if isinstance(t, T.ExternT):
        ctors = [m for m in t.decl.methods if m.ret is None]
        if not ctors:
            raise err(f"extern '{t.decl.name}' has no constructor", node)
        bindings = dict(t.type_args)
        ctor = pick_overload(ctors, args, node, f"constructor of '{t.decl.name}'")
        info = bind_args(ck, ctor, ctor.params, args, scope, node, bindings, t.decl.type_params)
        missing = [p for p in t.decl.type_params if p not in bindings]
        if missing:
            raise err(
                f"cannot infer type argument(s) {', '.join(missing)} of "
                f"'{t.decl.name}'; write them explicitly",
                node,
            )
        info.kind = CallKind.CONSTRUCTOR
        info.decl_type = T.ExternT(t.decl, {k: bindings[k] for k in t.decl.type_params})
        return info
    if isinstance(t, T.BlockT):
        decl = t.decl
        if isinstance(decl, (ast.ParserTypeDecl, ast.ControlTypeDecl)):
            raise err(f"cannot instantiate the type declaration '{decl.name}'", node)
        params = decl.params if isinstance(decl, ast.PackageDecl) else decl.ctor_params
        bindings = dict(t.type_args)
        info = bind_args(
            ck, decl, params, args, scope, node, bindings, getattr(decl, "type_params", [])
        )
        info.kind = CallKind.CONSTRUCTOR
        if isinstance(decl, (ast.ParserDecl, ast.ControlDecl)) and decl.type_params:
            # a generic parser/control: the instance is of its copy for these type arguments
            missing = [p for p in decl.type_params if p not in bindings]
            if missing:
                raise err(
                    f"cannot infer type argument(s) {', '.join(missing)} of "
                    f"'{decl.name}'; write them explicitly: {decl.name}<...>(...)",
                    node,
                )
            spec = ck.specialise(decl, [bindings[p] for p in decl.type_params], node)
            info.decl = spec
            info.params = list(spec.ctor_params)
            info.decl_type = T.BlockT(t.kind, spec, {})
            return info
        info.decl_type = T.BlockT(t.kind, decl, bindings)
        return info
    raise err(f"type {t} cannot be instantiated", node)
