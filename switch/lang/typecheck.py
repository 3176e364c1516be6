"""Name resolution and type checking of P4-16, annotating the syntax tree in place.

After :func:`check_program` every expression has a ``type``, every name a ``ref`` (a
:class:`~switch.lang.symbols.Sym`) and every call a ``ref`` (a
:class:`~switch.lang.symbols.CallInfo`); integer literals and other arbitrary-precision
expressions that meet a fixed-width context have been given that width. Errors are
:class:`~switch.errors.TypeError_` (or :class:`~switch.errors.UnsupportedError`) with the position
of the offending construct.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from switch.errors import Span, TypeError_, UnsupportedError
from switch.lang import ast
from switch.lang import types as T
from switch.lang.desugar import instantiate_direct_calls
from switch.lang.symbols import CallInfo, Scope, Sym

ARITH_OPS = {"+", "-", "*", "/", "%", "|+|", "|-|"}
BIT_OPS = {"&", "|", "^"}
CMP_OPS = {"<", ">", "<=", ">="}
EQ_OPS = {"==", "!="}
SHIFT_OPS = {"<<", ">>"}
LOGIC_OPS = {"&&", "||"}


def _err(msg: str, node: ast.Node | Span | None) -> TypeError_:
    span = node if isinstance(node, Span) else (node.span if node is not None else None)
    return TypeError_(msg, span)


def wrap_bits(value: int, width: int) -> int:
    return value & ((1 << width) - 1)


def wrap_signed(value: int, width: int) -> int:
    half = 1 << (width - 1)
    return ((value + half) & ((1 << width) - 1)) - half


def fit_value(value: int, t: T.Type) -> int:
    if isinstance(t, T.BitT):
        return wrap_bits(value, t.width)
    if isinstance(t, T.IntT):
        return wrap_signed(value, t.width)
    return value


@dataclass
class CheckedProgram:
    """The annotated program plus the tables the later phases need."""

    program: ast.Program
    root: Scope
    errors: dict[str, int]  # error member -> code
    match_kinds: set[str]
    main: ast.Instantiation | None
    types: dict[str, T.Type] = field(default_factory=dict)


class Checker:
    def __init__(self) -> None:
        self.root = Scope()
        self.errors: dict[str, int] = {}
        self.match_kinds: set[str] = set()
        self.main: ast.Instantiation | None = None
        self.types: dict[str, T.Type] = {}
        self.ret_stack: list[T.Type | None] = []  # return type of the enclosing function
        self.context_stack: list[str] = []  # 'parser' | 'control' | 'action' | 'function' | 'apply'
        self.packet_in_t: T.Type | None = None

    # -- top level ---------------------------------------------------------------------

    def check(self, program: ast.Program) -> CheckedProgram:
        for decl in program.decls:
            self.check_top(decl)
        return CheckedProgram(
            program, self.root, self.errors, self.match_kinds, self.main, self.types
        )

    def declare(self, scope: Scope, sym: Sym, node: ast.Node) -> Sym:
        existing = scope.names.get(sym.name)
        if existing is not None:
            if sym.kind == "extern_func" and existing.kind == "extern_func":
                existing.overloads.extend(sym.overloads)
                return existing
            if sym.kind == "action" and existing.kind == "action" and scope is self.root:
                pass
            raise _err(f"'{sym.name}' is already declared in this scope", node)
        scope.names[sym.name] = sym
        return sym

    def check_top(self, d: ast.Node) -> None:
        scope = self.root
        if isinstance(d, ast.TypedefDecl):
            t = self.resolve_type(d.typ, scope)
            self.declare(scope, Sym(d.name, "type", t, d), d)
            self.types[d.name] = t
        elif isinstance(d, (ast.HeaderDecl, ast.StructDecl, ast.HeaderUnionDecl)):
            self.check_struct_like(d, scope)
        elif isinstance(d, ast.EnumDecl):
            self.check_enum(d, scope)
        elif isinstance(d, ast.ErrorDecl):
            for name, span in d.members:
                if name in self.errors:
                    raise _err(f"error member '{name}' is already declared", span)
                self.errors[name] = len(self.errors)
            if scope.names.get("error") is None:
                scope.names["error"] = Sym("error", "type", T.ERROR, d)
        elif isinstance(d, ast.MatchKindDecl):
            for name, span in d.members:
                if name in self.match_kinds:
                    raise _err(f"match kind '{name}' is already declared", span)
                self.match_kinds.add(name)
        elif isinstance(d, ast.ConstDecl):
            self.check_const(d, scope, storage="global")
        elif isinstance(d, ast.ExternDecl):
            t = T.ExternT(d)
            self.declare(scope, Sym(d.name, "type", t, d), d)
            self.types[d.name] = t
        elif isinstance(d, ast.ExternFuncDecl):
            sym = Sym(d.name, "extern_func", None, d, overloads=[d])
            self.declare(scope, sym, d)
        elif isinstance(d, ast.FunctionDecl):
            sym = Sym(d.name, "function", T.FuncT("function", d), d)
            self.check_function(d, scope)
            self.declare(scope, sym, d)
        elif isinstance(d, ast.ActionDecl):
            self.declare(scope, Sym(d.name, "action", T.FuncT("action", d), d), d)
            self.check_action(d, scope)
        elif isinstance(d, (ast.ParserTypeDecl, ast.ControlTypeDecl, ast.PackageDecl)):
            kind = {
                ast.ParserTypeDecl: "parser",
                ast.ControlTypeDecl: "control",
                ast.PackageDecl: "package",
            }[type(d)]
            t = T.BlockT(kind, d)
            self.declare(scope, Sym(d.name, "type", t, d), d)
            self.types[d.name] = t
        elif isinstance(d, ast.ParserDecl):
            t = T.BlockT("parser", d)
            self.declare(scope, Sym(d.name, "type", t, d), d)
            self.types[d.name] = t
            self.check_parser(d, scope)
        elif isinstance(d, ast.ControlDecl):
            t = T.BlockT("control", d)
            self.declare(scope, Sym(d.name, "type", t, d), d)
            self.types[d.name] = t
            self.check_control(d, scope)
        elif isinstance(d, ast.Instantiation):
            t = self.check_instantiation(d, scope)
            sym = Sym(d.name, "instance", t, d, storage="global")
            self.declare(scope, sym, d)
            if d.name == "main":
                self.main = d
        elif isinstance(d, ast.VarDecl):
            raise UnsupportedError("variables at the top level are not allowed in P4-16", d.span)
        else:
            raise UnsupportedError(f"unsupported top-level declaration {type(d).__name__}", d.span)

    # -- types -------------------------------------------------------------------------

    def resolve_type(self, tr: ast.TypeRef, scope: Scope) -> T.Type:
        if isinstance(tr, ast.BaseTypeRef):
            if tr.kind in ("bit", "int", "varbit"):
                if tr.width is None:
                    if tr.kind == "int":
                        return T.INFINT
                    raise _err(f"{tr.kind} needs a width", tr)
                w = self.const_int(tr.width, scope, "a type width")
                if w <= 0 and not (tr.kind == "bit" and w == 0):
                    raise _err(f"type width must be positive, got {w}", tr.width)
                if tr.kind == "bit":
                    return T.BitT(w)
                if tr.kind == "int":
                    return T.IntT(w)
                return T.VarbitT(w)
            return {
                "bool": T.BOOL,
                "error": T.ERROR,
                "string": T.STRING,
                "match_kind": T.MATCH_KIND,
                "void": T.VOID,
            }[tr.kind]
        if isinstance(tr, ast.NamedTypeRef):
            sym = scope.lookup(tr.name)
            if sym is None or sym.kind != "type":
                raise _err(f"unknown type '{tr.name}'{scope.suggest(tr.name)}", tr)
            t = sym.type
            assert t is not None
            if tr.type_args:
                args = [self.resolve_type(a, scope) for a in tr.type_args]
                if isinstance(t, T.ExternT):
                    params = t.decl.type_params
                    if len(args) > len(params):
                        raise _err(
                            f"'{tr.name}' takes {len(params)} type arguments, got {len(args)}", tr
                        )
                    return T.ExternT(t.decl, dict(zip(params, args)))
                if isinstance(t, T.BlockT):
                    return T.BlockT(t.kind, t.decl, dict(zip(t.decl.type_params, args)))
                if isinstance(t, T.StructLikeT):
                    raise UnsupportedError("generic structs and headers are not supported", tr.span)
                raise _err(f"type '{tr.name}' takes no type arguments", tr)
            return t
        if isinstance(tr, ast.StackTypeRef):
            elem = self.resolve_type(tr.elem, scope)
            size = self.const_int(tr.size, scope, "a header stack size")
            if not (isinstance(elem, T.StructLikeT) and elem.kind in ("header", "header_union")):
                raise _err(f"header stacks need a header element type, not {elem}", tr)
            if size <= 0:
                raise _err("header stack size must be positive", tr.size)
            return T.StackT(elem, size)
        if isinstance(tr, ast.TupleTypeRef):
            return T.TupleT(tuple(self.resolve_type(e, scope) for e in tr.elems))
        if isinstance(tr, ast.DontCareTypeRef):
            return T.DONTCARE
        raise _err("unsupported type", tr)

    def check_struct_like(self, d: ast.Decl, scope: Scope) -> None:
        kind = {
            ast.HeaderDecl: "header",
            ast.StructDecl: "struct",
            ast.HeaderUnionDecl: "header_union",
        }[type(d)]
        if getattr(d, "type_params", None):
            raise UnsupportedError(f"generic {kind} types are not supported", d.span)
        t = T.StructLikeT(kind, d.name, annotations=d.annotations)
        self.declare(scope, Sym(d.name, "type", t, d), d)
        self.types[d.name] = t
        for f in d.fields:  # type: ignore[attr-defined]
            if f.name in t.fields:
                raise _err(f"duplicate field '{f.name}' in {kind} {d.name}", f)
            ft = self.resolve_type(f.typ, scope)
            if kind == "header":
                if not (
                    isinstance(ft, (T.BitT, T.IntT, T.VarbitT))
                    or ft is T.BOOL
                    or (isinstance(ft, T.EnumT) and ft.underlying is not None)
                    or (isinstance(ft, T.StructLikeT) and ft.kind == "struct")
                ):
                    raise _err(f"header field '{f.name}' cannot have type {ft}", f)
                if isinstance(ft, T.VarbitT):
                    raise UnsupportedError(
                        "varbit header fields are not supported by this target", f.span
                    )
            if kind == "header_union" and not (isinstance(ft, T.StructLikeT) and ft.is_header):
                raise _err(f"header union members must be headers, '{f.name}' is {ft}", f)
            t.fields[f.name] = ft
            t.field_annotations[f.name] = f.annotations
        if kind == "header":
            w = T.width_of(t)
            if w % 8 != 0:
                raise UnsupportedError(
                    f"header {d.name} is {w} bits long; this target (like BMv2) needs headers "
                    "whose size is a multiple of 8 bits",
                    d.span,
                )

    def check_enum(self, d: ast.EnumDecl, scope: Scope) -> None:
        underlying: T.BitT | T.IntT | None = None
        if d.underlying is not None:
            ut = self.resolve_type(d.underlying, scope)
            if not isinstance(ut, (T.BitT, T.IntT)):
                raise _err("an enum's underlying type must be bit<W> or int<W>", d.underlying)
            underlying = ut
        t = T.EnumT(d.name, [m[0] for m in d.members], underlying)
        for i, (name, value, span) in enumerate(d.members):
            if name in t.values:
                raise _err(f"duplicate enum member '{name}'", span)
            if underlying is not None:
                if value is None:
                    raise _err(f"member '{name}' of serializable enum needs a value", span)
                v = self.const_value(value, scope, underlying)
                t.values[name] = fit_value(int(v), underlying)
            else:
                t.values[name] = i
        self.declare(scope, Sym(d.name, "type", t, d), d)
        self.types[d.name] = t

    # -- constants ---------------------------------------------------------------------

    def check_const(self, d: ast.ConstDecl, scope: Scope, storage: str = "local") -> Sym:
        t = self.resolve_type(d.typ, scope)
        self.check_expr(d.value, scope, t)
        self.coerce(d.value, t, "constant initializer")
        value = self.eval_const(d.value, scope)
        sym = Sym(d.name, "const", t, d, value=value, storage=storage)
        self.declare(scope, sym, d)
        return sym

    def const_int(self, e: ast.Expr, scope: Scope, what: str) -> int:
        v = self.const_value(e, scope, None)
        if isinstance(v, bool) or not isinstance(v, int):
            raise _err(f"{what} must be an integer constant", e)
        return v

    def const_value(self, e: ast.Expr, scope: Scope, target: T.Type | None) -> Any:
        self.check_expr(e, scope, target)
        if target is not None:
            self.coerce(e, target, "constant")
        return self.eval_const(e, scope)

    def eval_const(self, e: ast.Expr, scope: Scope) -> Any:
        v = self.try_eval_const(e)
        if v is None:
            raise _err("expression is not a compile-time constant", e)
        return v

    def try_eval_const(self, e: ast.Expr) -> Any:
        """Evaluate a checked constant expression; None if it is not constant."""
        t = e.type
        if isinstance(e, ast.IntLit):
            return fit_value(e.value, t)
        if isinstance(e, ast.BoolLit):
            return e.value
        if isinstance(e, ast.StrLit):
            return e.value
        if isinstance(e, ast.Name):
            sym = e.ref
            if isinstance(sym, Sym) and sym.kind == "const":
                return (
                    fit_value(sym.value, t)
                    if isinstance(sym.value, int) and not isinstance(sym.value, bool)
                    else sym.value
                )
            return None
        if isinstance(e, ast.Member):
            if isinstance(e.ref, tuple) and e.ref[0] in ("enum", "error"):
                return e.ref[1]
            return None
        if isinstance(e, ast.Cast):
            v = self.try_eval_const(e.expr)
            if v is None:
                return None
            return cast_value(v, e.expr.type, t)
        if isinstance(e, ast.Unary):
            v = self.try_eval_const(e.expr)
            if v is None:
                return None
            if e.op == "!":
                return not v
            if e.op == "-":
                return fit_value(-v, t)
            if e.op == "+":
                return v
            if e.op == "~":
                return fit_value(~v, t)
        if isinstance(e, ast.Binary):
            a = self.try_eval_const(e.left)
            if a is None:
                return None
            if e.op in LOGIC_OPS:
                if e.op == "&&" and a is False:
                    return False
                if e.op == "||" and a is True:
                    return True
            b = self.try_eval_const(e.right)
            if b is None:
                return None
            return binary_value(e.op, a, b, e.left.type, e.right.type, t)
        if isinstance(e, ast.Mux):
            c = self.try_eval_const(e.cond)
            if c is None:
                return None
            return self.try_eval_const(e.then if c else e.other)
        if isinstance(e, ast.Slice):
            v = self.try_eval_const(e.expr)
            if v is None:
                return None
            hi, lo = self.try_eval_const(e.hi), self.try_eval_const(e.lo)
            return (v >> lo) & ((1 << (hi - lo + 1)) - 1)
        if isinstance(e, ast.ListExpr):
            vals = [self.try_eval_const(i) for i in e.items]
            if any(v is None for v in vals):
                return None
            return tuple(vals)
        return None

    # -- functions, actions ----------------------------------------------------------------

    def declare_params(
        self,
        params: list[ast.Param],
        scope: Scope,
        storage: str,
        owner: Any,
        allow_directionless: bool = True,
    ) -> list[T.Type]:
        out: list[T.Type] = []
        for p in params:
            pt = self.resolve_type(p.typ, scope)
            if p.default is not None:
                self.check_expr(p.default, scope, pt)
                self.coerce(p.default, pt, "default parameter value")
            kind = "param"
            sym = Sym(p.name, kind, pt, p, direction=p.direction, storage=storage, owner=owner)
            self.declare(scope, sym, p)
            p.ref = sym  # type: ignore[attr-defined]
            out.append(pt)
        return out

    def check_function(self, d: ast.FunctionDecl, scope: Scope) -> None:
        if d.type_params:
            raise UnsupportedError("generic functions are not supported by this target", d.span)
        fscope = Scope(scope, owner=d)
        self.declare_params(d.params, fscope, "local", d)
        ret = self.resolve_type(d.ret, fscope)
        d.ret_type = ret  # type: ignore[attr-defined]
        self.ret_stack.append(ret)
        self.context_stack.append("function")
        try:
            self.check_block(d.body, fscope)
        finally:
            self.ret_stack.pop()
            self.context_stack.pop()
        if ret is not T.VOID and not _always_returns(d.body):
            raise _err(f"function '{d.name}' does not return a value on every path", d)

    def check_action(self, d: ast.ActionDecl, scope: Scope) -> None:
        ascope = Scope(scope, owner=scope.owner)
        seen_data = False
        for p in d.params:
            if p.direction == "":
                seen_data = True
            elif seen_data:
                raise _err(
                    "directional action parameters must come before action data parameters", p
                )
        self.declare_params(d.params, ascope, "local", d)
        for p in d.params:
            if (
                p.direction == ""
                and not T.is_fixed(p.ref.type)
                and p.ref.type is not T.BOOL
                and not (isinstance(p.ref.type, T.EnumT) and p.ref.type.underlying is not None)
            ):
                raise _err(
                    f"action data parameter '{p.name}' must be bit<W>, int<W>, bool or a "
                    f"serializable enum, not {p.ref.type}",
                    p,
                )
        self.ret_stack.append(None)
        self.context_stack.append("action")
        try:
            self.check_block(d.body, ascope)
        finally:
            self.ret_stack.pop()
            self.context_stack.pop()

    # -- parsers -----------------------------------------------------------------------

    def check_parser(self, d: ast.ParserDecl, scope: Scope) -> None:
        if d.type_params:
            raise UnsupportedError("generic parsers are not supported by this target", d.span)
        pscope = Scope(scope, owner=d)
        self.declare_params(d.params, pscope, "local", d)
        self.declare_params(d.ctor_params, pscope, "local", d)
        instantiate_direct_calls(d, pscope)
        for loc in d.locals:
            self.check_local(loc, pscope, "local")
        names = {s.name for s in d.states}
        seen: set[str] = set()
        for st in d.states:
            if st.name in ("accept", "reject"):
                raise _err(f"state '{st.name}' is predefined", st)
            if st.name in seen:
                raise _err(f"duplicate state '{st.name}'", st)
            seen.add(st.name)
        if "start" not in names:
            raise _err(f"parser '{d.name}' has no 'start' state", d)
        valid_targets = names | {"accept", "reject"}
        self.context_stack.append("parser")
        try:
            for st in d.states:
                sscope = Scope(pscope)
                for s in st.stmts:
                    self.check_stmt(s, sscope)
                tr = st.transition
                if tr is None:
                    continue
                if tr.state is not None:
                    if tr.state not in valid_targets:
                        raise _err(f"unknown parser state '{tr.state}'", tr)
                    continue
                assert tr.select is not None
                key_types = []
                for e in tr.select:
                    kt = self.check_expr(e, sscope)
                    if kt is T.INFINT:
                        raise _err("select expression needs a width", e)
                    key_types.append(kt)
                for case in tr.cases:
                    if case.state not in valid_targets:
                        raise _err(f"unknown parser state '{case.state}'", case.state_span)
                    self.check_keyset(case.keyset, key_types, sscope)
        finally:
            self.context_stack.pop()

    def check_keyset(self, ks: ast.Expr, key_types: list[T.Type], scope: Scope) -> None:
        if isinstance(ks, (ast.Default, ast.DontCare)):
            ks.type = T.DONTCARE
            return
        if len(key_types) > 1:
            if not isinstance(ks, ast.ListExpr):
                # a value set can match a tuple
                if isinstance(ks, ast.Name):
                    sym = scope.lookup(ks.name)
                    if sym is not None and sym.kind == "value_set":
                        ks.ref = sym
                        ks.type = sym.type
                        return
                raise _err(f"keyset must have {len(key_types)} elements", ks)
            if len(ks.items) != len(key_types):
                raise _err(f"keyset has {len(ks.items)} elements, select has {len(key_types)}", ks)
            for item, kt in zip(ks.items, key_types):
                self.check_simple_keyset(item, kt, scope)
            ks.type = T.TupleT(tuple(key_types))
            return
        if isinstance(ks, ast.ListExpr) and len(ks.items) == 1:
            self.check_simple_keyset(ks.items[0], key_types[0], scope)
            ks.type = T.TupleT(tuple(key_types))
            return
        self.check_simple_keyset(ks, key_types[0], scope)

    def check_simple_keyset(self, ks: ast.Expr, kt: T.Type, scope: Scope) -> None:
        if isinstance(ks, (ast.Default, ast.DontCare)):
            ks.type = T.DONTCARE
            return
        if isinstance(ks, ast.Mask):
            self.check_expr(ks.value, scope, kt)
            self.coerce(ks.value, kt, "keyset value")
            self.check_expr(ks.mask, scope, kt)
            self.coerce(ks.mask, kt, "keyset mask")
            ks.type = kt
            return
        if isinstance(ks, ast.Range):
            self.check_expr(ks.lo, scope, kt)
            self.coerce(ks.lo, kt, "range bound")
            self.check_expr(ks.hi, scope, kt)
            self.coerce(ks.hi, kt, "range bound")
            ks.type = kt
            return
        if isinstance(ks, ast.Name):
            sym = scope.lookup(ks.name)
            if sym is not None and sym.kind == "value_set":
                ks.ref = sym
                ks.type = sym.type
                return
        self.check_expr(ks, scope, kt)
        self.coerce(ks, kt, "keyset value")

    # -- controls ----------------------------------------------------------------------

    def check_control(self, d: ast.ControlDecl, scope: Scope) -> None:
        if d.type_params:
            raise UnsupportedError("generic controls are not supported by this target", d.span)
        cscope = Scope(scope, owner=d)
        self.declare_params(d.params, cscope, "global", d)
        self.declare_params(d.ctor_params, cscope, "global", d)
        instantiate_direct_calls(d, cscope)
        self.context_stack.append("control")
        try:
            for loc in d.locals:
                self.check_local(loc, cscope, "global")
            self.context_stack.append("apply")
            self.ret_stack.append(None)
            try:
                self.check_block(d.body, Scope(cscope))
            finally:
                self.context_stack.pop()
                self.ret_stack.pop()
        finally:
            self.context_stack.pop()

    def check_local(self, loc: ast.Node, scope: Scope, storage: str) -> None:
        if isinstance(loc, ast.VarDecl):
            t = self.resolve_type(loc.typ, scope)
            if loc.init is not None:
                self.check_expr(loc.init, scope, t)
                self.coerce(loc.init, t, "initializer")
            sym = Sym(loc.name, "var", t, loc, storage=storage, owner=scope.owner)
            loc.ref = sym  # type: ignore[attr-defined]
            self.declare(scope, sym, loc)
        elif isinstance(loc, ast.ConstDecl):
            self.check_const(loc, scope)
        elif isinstance(loc, ast.Instantiation):
            t = self.check_instantiation(loc, scope)
            sym = Sym(loc.name, "instance", t, loc, storage=storage, owner=scope.owner)
            self.declare(scope, sym, loc)
        elif isinstance(loc, ast.ActionDecl):
            self.declare(
                scope, Sym(loc.name, "action", T.FuncT("action", loc), loc, owner=scope.owner), loc
            )
            self.check_action(loc, scope)
        elif isinstance(loc, ast.TableDecl):
            self.check_table(loc, scope)
            self.declare(scope, Sym(loc.name, "table", T.TableT(loc), loc, owner=scope.owner), loc)
        elif isinstance(loc, ast.ValueSetDecl):
            et = self.resolve_type(loc.elem, scope)
            size = self.const_int(loc.size, scope, "value_set size")
            loc.elem_type = et  # type: ignore[attr-defined]
            loc.size_value = size  # type: ignore[attr-defined]
            self.declare(scope, Sym(loc.name, "value_set", et, loc, owner=scope.owner), loc)
        else:
            raise UnsupportedError(f"unsupported local declaration {type(loc).__name__}", loc.span)

    def check_instantiation(self, d: ast.Instantiation, scope: Scope) -> T.Type:
        t = self.resolve_type(d.typ, scope)
        info = self.check_constructor_call(t, d.args, scope, d)
        d.ref = info  # type: ignore[attr-defined]
        d.inst_type = info.decl_type  # type: ignore[attr-defined]
        return info.decl_type  # type: ignore[no-any-return]

    def check_constructor_call(
        self, t: T.Type, args: list[ast.Arg], scope: Scope, node: ast.Node
    ) -> Any:
        if isinstance(t, T.ExternT):
            ctors = [m for m in t.decl.methods if m.ret is None]
            if not ctors:
                raise _err(f"extern '{t.decl.name}' has no constructor", node)
            bindings = dict(t.type_args)
            ctor = self.pick_overload(ctors, args, node, f"constructor of '{t.decl.name}'")
            info = self.bind_args(
                ctor, ctor.params, args, scope, node, bindings, t.decl.type_params
            )
            missing = [p for p in t.decl.type_params if p not in bindings]
            if missing:
                raise _err(
                    f"cannot infer type argument(s) {', '.join(missing)} of "
                    f"'{t.decl.name}'; write them explicitly",
                    node,
                )
            info.kind = "constructor"
            info.decl_type = T.ExternT(t.decl, {k: bindings[k] for k in t.decl.type_params})
            return info
        if isinstance(t, T.BlockT):
            decl = t.decl
            if isinstance(decl, (ast.ParserTypeDecl, ast.ControlTypeDecl)):
                raise _err(f"cannot instantiate the type declaration '{decl.name}'", node)
            params = decl.params if isinstance(decl, ast.PackageDecl) else decl.ctor_params
            bindings = dict(t.type_args)
            info = self.bind_args(
                decl, params, args, scope, node, bindings, getattr(decl, "type_params", [])
            )
            info.kind = "constructor"
            info.decl_type = T.BlockT(t.kind, decl, bindings)
            return info
        raise _err(f"type {t} cannot be instantiated", node)

    def check_table(self, d: ast.TableDecl, scope: Scope) -> None:
        seen: set[str] = set()
        for p in d.properties:
            if p.name in seen:
                raise _err(f"duplicate table property '{p.name}'", p)
            seen.add(p.name)
        actions_prop = d.prop("actions")
        if actions_prop is None or actions_prop.actions is None:
            raise _err(f"table '{d.name}' has no 'actions' property", d)
        key_types: list[T.Type] = []
        key_prop = d.prop("key")
        if key_prop is not None and key_prop.keys is not None:
            for k in key_prop.keys:
                kt = self.check_expr(k.expr, scope)
                if k.match_kind not in self.match_kinds:
                    raise _err(
                        f"unknown match kind '{k.match_kind}'; valid: "
                        f"{', '.join(sorted(self.match_kinds))}",
                        k,
                    )
                if not (
                    T.is_fixed(kt)
                    or kt is T.BOOL
                    or kt is T.ERROR
                    or (isinstance(kt, T.EnumT) and kt.underlying is not None)
                    or isinstance(kt, T.EnumT)
                ):
                    raise _err(f"table key cannot have type {kt}", k.expr)
                key_types.append(kt)
        d.key_types = key_types  # type: ignore[attr-defined]
        action_decls: list[ast.ActionDecl] = []
        for ref in actions_prop.actions:
            a = self.resolve_action_ref(ref, scope, in_list=True)
            action_decls.append(a)
        d.action_decls = action_decls  # type: ignore[attr-defined]
        da = d.prop("default_action")
        if da is not None:
            if da.value is None:
                raise _err("default_action needs an action", da)
            ref = self.action_ref_from_expr(da.value)
            a = self.resolve_action_ref(ref, scope, in_list=False)
            if a not in action_decls:
                raise _err(f"default action '{a.name}' is not in the table's actions", da.value)
            da.action_ref = ref  # type: ignore[attr-defined]
        for pname in ("size", "max_group_size"):
            sp = d.prop(pname)
            if sp is not None:
                assert sp.value is not None
                v = self.const_int(sp.value, scope, f"table {pname}")
                if v < 0:
                    raise _err(f"table {pname} must not be negative", sp.value)
        for pname in ("implementation", "counters", "meters"):
            sp = d.prop(pname)
            if sp is None:
                continue
            assert sp.value is not None
            if isinstance(sp.value, ast.Call):
                # an anonymous instantiation: implementation = action_selector(...)
                fn = sp.value.func
                tsym = scope.lookup(fn.name) if isinstance(fn, ast.Name) else None
                if tsym is None or tsym.kind != "type":
                    raise _err(f"table property '{pname}' must name an extern instance", sp.value)
                info = self.check_constructor_call(tsym.type, sp.value.args, scope, sp.value)
                sp.value.ref = info
                sp.value.type = info.decl_type
            else:
                pt = self.check_expr(sp.value, scope)
                if not isinstance(pt, T.ExternT):
                    raise _err(f"table property '{pname}' must name an extern instance", sp.value)
        st = d.prop("support_timeout")
        if st is not None and st.value is not None:
            self.check_expr(st.value, scope, T.BOOL)
        ent = d.prop("entries")
        if ent is not None and ent.entries is not None:
            for e in ent.entries:
                if (
                    len(e.keyset) == 1
                    and len(key_types) > 1
                    and isinstance(e.keyset[0], ast.ListExpr)
                ):
                    e.keyset = e.keyset[0].items
                if len(e.keyset) != len(key_types):
                    raise _err(
                        f"entry has {len(e.keyset)} key values, the table has "
                        f"{len(key_types)} keys",
                        e,
                    )
                for ks, kt in zip(e.keyset, key_types):
                    self.check_simple_keyset(ks, kt, scope)
                a = self.resolve_action_ref(e.action, scope, in_list=False)
                if a not in action_decls:
                    raise _err(f"action '{a.name}' is not in the table's actions", e.action)
                if e.priority is not None:
                    self.const_int(e.priority, scope, "entry priority")

    def action_ref_from_expr(self, e: ast.Expr) -> ast.ActionRefSyntax:
        if isinstance(e, ast.Call):
            return ast.ActionRefSyntax(e.func, e.args, span=e.span)
        if isinstance(e, (ast.Name, ast.Member)):
            return ast.ActionRefSyntax(e, [], span=e.span)
        raise _err("expected an action", e)

    def resolve_action_ref(
        self, ref: ast.ActionRefSyntax, scope: Scope, in_list: bool
    ) -> ast.ActionDecl:
        name_e = ref.name
        if isinstance(name_e, ast.Name):
            sym = self.root.lookup(name_e.name) if name_e.top_level else scope.lookup(name_e.name)
            label = name_e.name
        else:
            raise UnsupportedError("qualified action names are not supported", name_e.span)
        if sym is None:
            raise _err(f"unknown action '{label}'{scope.suggest(label)}", name_e)
        if sym.kind != "action":
            raise _err(f"'{label}' is not an action", name_e)
        decl: ast.ActionDecl = sym.decl
        name_e.ref = sym
        name_e.type = sym.type
        ref.ref = sym
        params = decl.params
        if in_list:
            # only directional parameters may (must) be bound in the actions list
            dir_params = [p for p in params if p.direction]
            if ref.args and len(ref.args) != len(dir_params):
                raise _err(
                    f"action '{label}' takes {len(dir_params)} directional argument(s) "
                    f"here, got {len(ref.args)}",
                    ref,
                )
            if not ref.args and dir_params:
                raise _err(
                    f"action '{label}' needs its directional argument(s) in the actions list", ref
                )
            bind_params = dir_params
        else:
            bind_params = params
            if ref.args or params:
                if len(ref.args) != len(params):
                    raise _err(
                        f"action '{label}' takes {len(params)} argument(s), got {len(ref.args)}",
                        ref,
                    )
        info = self.bind_args(decl, bind_params, ref.args, scope, ref, {}, [])
        info.kind = "action"
        if not in_list:
            for p, a in zip(bind_params, ref.args):
                if (
                    p.direction == ""
                    and a.value is not None
                    and self.try_eval_const(a.value) is None
                ):
                    raise _err(
                        f"action data argument '{p.name}' must be a compile-time constant", a
                    )
        ref.call_info = info  # type: ignore[attr-defined]
        return decl

    # -- statements --------------------------------------------------------------------

    def check_block(self, b: ast.Block, scope: Scope) -> None:
        for s in b.stmts:
            self.check_stmt(s, scope)

    def check_stmt(self, s: ast.Stmt, scope: Scope) -> None:
        if isinstance(s, ast.Block):
            self.check_block(s, Scope(scope))
        elif isinstance(s, ast.Assign):
            lt = self.check_expr(s.lhs, scope)
            self.check_lvalue(s.lhs, scope)
            self.check_expr(s.rhs, scope, lt)
            self.coerce(s.rhs, lt, "assignment")
        elif isinstance(s, ast.CallStmt):
            self.check_expr(s.call, scope)
        elif isinstance(s, ast.If):
            if "parser" in self.context_stack[-1:]:
                pass
            self.check_expr(s.cond, scope, T.BOOL)
            self.coerce(s.cond, T.BOOL, "if condition")
            self.check_stmt(s.then, Scope(scope))
            if s.other is not None:
                self.check_stmt(s.other, Scope(scope))
        elif isinstance(s, ast.Switch):
            self.check_switch(s, scope)
        elif isinstance(s, ast.Exit):
            if self.context_stack and self.context_stack[-1] in ("parser", "function"):
                raise _err("'exit' is not allowed here", s)
        elif isinstance(s, ast.Return):
            ret = self.ret_stack[-1] if self.ret_stack else None
            if s.value is not None:
                if ret is None or ret is T.VOID:
                    raise _err("this 'return' cannot return a value", s)
                self.check_expr(s.value, scope, ret)
                self.coerce(s.value, ret, "return value")
            elif ret is not None and ret is not T.VOID:
                raise _err(f"'return' needs a value of type {ret}", s)
            if self.context_stack and self.context_stack[-1] == "parser":
                raise _err("'return' is not allowed in a parser", s)
        elif isinstance(s, ast.VarDecl):
            self.check_local(s, scope, "local")
        elif isinstance(s, ast.ConstDecl):
            self.check_const(s, scope)
        elif isinstance(s, ast.Empty):
            pass
        else:
            raise UnsupportedError(f"unsupported statement {type(s).__name__}", s.span)

    def check_switch(self, s: ast.Switch, scope: Scope) -> None:
        st = self.check_expr(s.expr, scope)
        seen: set[Any] = set()
        for i, case in enumerate(s.cases):
            for label in case.labels:
                if isinstance(label, ast.Default):
                    if i != len(s.cases) - 1:
                        raise _err("'default' must be the last switch case", label)
                    continue
                if isinstance(st, T.ActionRunT):
                    if not isinstance(label, ast.Name):
                        raise _err("switch on action_run needs action names as labels", label)
                    acts = {a.name: a for a in st.table.action_decls}
                    if label.name not in acts:
                        raise _err(
                            f"'{label.name}' is not an action of table '{st.table.name}'", label
                        )
                    label.ref = acts[label.name]
                    key: Any = label.name
                else:
                    if not (T.is_fixed(st) or isinstance(st, T.EnumT) or st is T.ERROR):
                        raise _err(f"cannot switch on a value of type {st}", s.expr)
                    self.check_expr(label, scope, st)
                    self.coerce(label, st, "switch label")
                    key = self.eval_const(label, scope)
                if key in seen:
                    raise _err("duplicate switch label", label)
                seen.add(key)
            if case.body is not None:
                self.check_block(case.body, Scope(scope))
            elif i == len(s.cases) - 1:
                raise _err("the last switch case needs a body", case)

    # -- lvalues -----------------------------------------------------------------------

    def check_lvalue(self, e: ast.Expr, scope: Scope) -> None:
        if isinstance(e, ast.Name):
            sym = e.ref
            if not isinstance(sym, Sym):
                raise _err(f"'{e.name}' cannot be assigned", e)
            if sym.kind == "const":
                raise _err(f"cannot assign to constant '{e.name}'", e)
            if sym.kind == "param" and sym.direction in ("in", ""):
                what = "an 'in' parameter" if sym.direction == "in" else "a directionless parameter"
                raise _err(f"cannot assign to '{e.name}': it is {what}", e)
            if sym.kind not in ("var", "param"):
                raise _err(f"'{e.name}' cannot be assigned", e)
            return
        if isinstance(e, ast.Member):
            if isinstance(e.ref, tuple) and not (
                e.ref[0] == "stack" and e.name in ("next", "last")
            ):
                raise _err(f"cannot assign to '{e.name}'", e)
            self.check_lvalue(e.expr, scope)
            return
        if isinstance(e, (ast.Index, ast.Slice)):
            self.check_lvalue(e.expr, scope)
            return
        raise _err("expression cannot be assigned to", e)

    # -- expressions -------------------------------------------------------------------

    def coerce(self, e: ast.Expr, target: T.Type, what: str) -> None:
        """Make ``e`` (already checked) have type ``target`` or fail."""
        src = e.type
        if src is None:
            raise _err(f"{what}: expression has no value", e)
        if T.same_type(src, target) or target is T.DONTCARE:
            return
        if isinstance(src, T.StructLikeT) and isinstance(target, T.StructLikeT) and src is target:
            return
        if src is T.INFINT and isinstance(target, (T.BitT, T.IntT)):
            self._retype_infint(e, target)
            return
        if src is T.INFINT and target is T.INFINT:
            return
        if isinstance(src, (T.ListT, T.StructInitT)) or (
            isinstance(e, ast.ListExpr) and isinstance(target, (T.StructLikeT, T.TupleT))
        ):
            self._coerce_list(e, target, what)
            return
        if isinstance(target, T.EnumT) and isinstance(src, T.EnumT) and src is target:
            return
        if isinstance(src, T.EnumT) and src.underlying is not None and src.underlying == target:
            return  # serializable enums convert implicitly to their underlying type
        if isinstance(target, T.BlockT) and isinstance(src, T.BlockT):
            why = self.block_compatible(target, src)
            if why is None:
                return
            raise _err(f"{what}: {why}", e)
        raise _err(f"{what}: type mismatch: expected {target}, got {src}", e)

    def _retype_infint(self, e: ast.Expr, target: T.Type) -> None:
        e.type = target
        if isinstance(e, ast.Mux):
            if e.then.type is T.INFINT:
                self._retype_infint(e.then, target)
            if e.other.type is T.INFINT:
                self._retype_infint(e.other, target)

    def _coerce_list(self, e: ast.Expr, target: T.Type, what: str) -> None:
        if isinstance(target, T.StructLikeT):
            ftypes = list(target.fields.items())
            if isinstance(e, ast.ListExpr):
                if len(e.items) != len(ftypes):
                    raise _err(
                        f"{what}: {target} has {len(ftypes)} fields, the list has {len(e.items)}", e
                    )
                for item, (_, ft) in zip(e.items, ftypes):
                    self.coerce(item, ft, what)
            elif isinstance(e, ast.StructInit):
                names = [n for n, _ in e.fields]
                if sorted(names) != sorted(target.fields):
                    raise _err(f"{what}: initializer fields {names} do not match {target}", e)
                for n, v in e.fields:
                    self.coerce(v, target.fields[n], what)
            else:
                raise _err(f"{what}: type mismatch: expected {target}, got {e.type}", e)
            e.type = target
            return
        if isinstance(target, T.TupleT) and isinstance(e, ast.ListExpr):
            if len(e.items) != len(target.elems):
                raise _err(
                    f"{what}: tuple has {len(target.elems)} elements, the list has {len(e.items)}",
                    e,
                )
            for item, et in zip(e.items, target.elems):
                self.coerce(item, et, what)
            e.type = target
            return
        raise _err(f"{what}: type mismatch: expected {target}, got {e.type}", e)

    def check_expr(self, e: ast.Expr, scope: Scope, expected: T.Type | None = None) -> T.Type:
        t = self._check_expr(e, scope, expected)
        e.type = t
        return t

    def _check_expr(self, e: ast.Expr, scope: Scope, expected: T.Type | None) -> T.Type:
        if isinstance(e, ast.IntLit):
            if e.width is None:
                return T.INFINT
            if e.signed:
                if e.width < 2 and e.value > 0:
                    pass
                return T.IntT(e.width)
            if e.value >= (1 << e.width):
                raise _err(f"value {e.value} does not fit in {e.width} bits", e)
            return T.BitT(e.width)
        if isinstance(e, ast.BoolLit):
            return T.BOOL
        if isinstance(e, ast.StrLit):
            return T.STRING
        if isinstance(e, ast.Name):
            return self.check_name(e, scope)
        if isinstance(e, ast.Member):
            return self.check_member(e, scope)
        if isinstance(e, ast.Index):
            bt = self.check_expr(e.expr, scope)
            if not isinstance(bt, T.StackT):
                raise _err(f"cannot index a value of type {bt}", e)
            it = self.check_expr(e.index, scope)
            if it is T.INFINT:
                idx = self.try_eval_const(e.index)
                if idx is not None and not (0 <= idx < bt.size):
                    raise _err(
                        f"index {idx} is out of bounds for a stack of size {bt.size}", e.index
                    )
                self.coerce(e.index, T.BitT(32), "stack index")
            elif not isinstance(it, (T.BitT, T.IntT)):
                # p4c accepts signed indexes too; a negative one is out of range at run time
                raise _err(f"stack index must be an integer, not {it}", e.index)
            return bt.elem
        if isinstance(e, ast.Slice):
            bt = self.check_expr(e.expr, scope)
            if not isinstance(bt, (T.BitT, T.IntT)):
                raise _err(f"cannot slice a value of type {bt}", e)
            hi = self.const_int(e.hi, scope, "slice bound")
            lo = self.const_int(e.lo, scope, "slice bound")
            if not (0 <= lo <= hi < bt.width):
                raise _err(f"slice [{hi}:{lo}] is out of range for {bt}", e)
            return T.BitT(hi - lo + 1)
        if isinstance(e, ast.Unary):
            return self.check_unary(e, scope, expected)
        if isinstance(e, ast.Binary):
            return self.check_binary(e, scope, expected)
        if isinstance(e, ast.Mux):
            self.check_expr(e.cond, scope, T.BOOL)
            self.coerce(e.cond, T.BOOL, "condition")
            a = self.check_expr(e.then, scope, expected)
            b = self.check_expr(e.other, scope, expected)
            if a is T.INFINT and b is not T.INFINT:
                self.coerce(e.then, b, "conditional branch")
                return b
            if b is T.INFINT and a is not T.INFINT:
                self.coerce(e.other, a, "conditional branch")
                return a
            if a is T.INFINT and b is T.INFINT:
                if expected is not None and T.is_fixed(expected):
                    self.coerce(e.then, expected, "conditional branch")
                    self.coerce(e.other, expected, "conditional branch")
                    return expected
                return T.INFINT
            if isinstance(a, (T.ListT, T.StructInitT)) and expected is not None:
                self.coerce(e.then, expected, "conditional branch")
                self.coerce(e.other, expected, "conditional branch")
                return expected
            if not T.same_type(a, b):
                raise _err(f"conditional branches have different types: {a} and {b}", e)
            return a
        if isinstance(e, ast.Cast):
            target = self.resolve_type(e.to, scope)
            src = self.check_expr(e.expr, scope, target)
            if isinstance(src, (T.ListT, T.StructInitT)):
                self.coerce(e.expr, target, "cast")
                return target
            if not cast_allowed(src, target):
                raise _err(f"cannot cast {src} to {target}", e)
            return target
        if isinstance(e, ast.Call):
            return self.check_call(e, scope, expected)
        if isinstance(e, ast.ListExpr):
            exp_elems: list[T.Type | None] = [None] * len(e.items)
            if isinstance(expected, T.TupleT) and len(expected.elems) == len(e.items):
                exp_elems = list(expected.elems)
            elif isinstance(expected, T.StructLikeT) and len(expected.fields) == len(e.items):
                exp_elems = list(expected.fields.values())
            elems = [self.check_expr(i, scope, x) for i, x in zip(e.items, exp_elems)]
            return T.ListT(elems)
        if isinstance(e, ast.StructInit):
            fts: dict[str, T.Type] = {}
            for n, v in e.fields:
                if n in fts:
                    raise _err(f"duplicate field '{n}' in initializer", v)
                x = expected.fields.get(n) if isinstance(expected, T.StructLikeT) else None
                fts[n] = self.check_expr(v, scope, x)
            return T.StructInitT(fts)
        if isinstance(e, (ast.Mask, ast.Range)):
            raise _err("'&&&' and '..' are only allowed in keysets", e)
        if isinstance(e, (ast.DontCare, ast.Default)):
            return T.DONTCARE
        if isinstance(e, ast.TypeExpr):
            raise _err("a type is not a value here", e)
        raise _err(f"unsupported expression {type(e).__name__}", e)

    def check_name(self, e: ast.Name, scope: Scope) -> T.Type:
        sym = self.root.lookup(e.name) if e.top_level else scope.lookup(e.name)
        if sym is None:
            if e.name == "error" and "NoError" in self.errors:
                e.ref = Sym("error", "type", T.ERROR)
                return T.TypeOnlyT(T.ERROR)
            raise _err(f"unknown name '{e.name}'{scope.suggest(e.name)}", e)
        e.ref = sym
        if sym.kind == "type":
            assert sym.type is not None
            return T.TypeOnlyT(sym.type)
        if sym.kind == "extern_func":
            return T.FuncT("extern_func", sym)
        if sym.kind == "value_set":
            raise _err(f"value set '{e.name}' can only be used as a select keyset", e)
        assert sym.type is not None, sym
        return sym.type

    def check_member(self, e: ast.Member, scope: Scope) -> T.Type:
        bt = self.check_expr(e.expr, scope)
        name = e.name
        if isinstance(bt, T.TypeOnlyT):
            inner = bt.typ
            if isinstance(inner, T.EnumT):
                if name not in inner.values:
                    raise _err(
                        f"enum {inner.name} has no member '{name}'; members: "
                        f"{', '.join(inner.members)}",
                        e,
                    )
                e.ref = ("enum", inner.values[name])
                return inner
            if inner is T.ERROR:
                if name not in self.errors:
                    raise _err(
                        f"unknown error '{name}'; declared errors: {', '.join(self.errors)}", e
                    )
                e.ref = ("error", self.errors[name])
                return T.ERROR
            if isinstance(inner, (T.StructLikeT, T.BitT, T.IntT)) and name in (
                "minSizeInBits",
                "minSizeInBytes",
                "maxSizeInBits",
                "maxSizeInBytes",
            ):
                e.ref = ("size_method", name, inner)
                return T.FuncT("size_method", inner)
            raise _err(f"type {inner} has no member '{name}'", e)
        if isinstance(bt, T.StructLikeT):
            if name in bt.fields:
                return bt.fields[name]
            if name in ("isValid", "setValid", "setInvalid") and bt.kind != "struct":
                if bt.kind == "header_union" and name != "isValid":
                    raise _err(f"header unions have no '{name}' method", e)
                e.ref = ("header_method", name)
                return T.FuncT("header_method", bt)
            if name in ("minSizeInBits", "minSizeInBytes", "maxSizeInBits", "maxSizeInBytes"):
                e.ref = ("size_method", name, bt)
                return T.FuncT("size_method", bt)
            raise _err(
                f"{bt.kind} {bt.name} has no field '{name}'; fields: {', '.join(bt.fields)}", e
            )
        if isinstance(bt, T.StackT):
            if name in ("next", "last"):
                if name == "next" and not (
                    self.context_stack and self.context_stack[-1] == "parser"
                ):
                    raise _err("'next' can only be used in a parser", e)
                e.ref = ("stack", name)
                return bt.elem
            if name in ("lastIndex", "size", "nextIndex"):
                e.ref = ("stack", name)
                if name == "size":
                    e.ref = ("stack_size", bt.size)
                return T.BitT(32)
            if name in ("push_front", "pop_front"):
                e.ref = ("stack_method", name)
                return T.FuncT("stack_method", bt)
            raise _err(f"header stacks have no member '{name}'", e)
        if isinstance(bt, T.TableT):
            if name != "apply":
                raise _err(f"tables have no member '{name}' (only apply)", e)
            return T.FuncT("table_apply", bt.decl)
        if isinstance(bt, T.ApplyResultT):
            if name in ("hit", "miss"):
                return T.BOOL
            if name == "action_run":
                return T.ActionRunT(bt.table)
            raise _err(f"a table apply result has no member '{name}' (hit, miss, action_run)", e)
        if isinstance(bt, T.BlockT):
            if name != "apply":
                raise _err(f"{bt.kind} instances have no member '{name}' (only apply)", e)
            return T.FuncT("block_apply", bt)
        if isinstance(bt, T.ExternT):
            methods = [m for m in bt.decl.methods if m.name == name and m.ret is not None]
            if not methods:
                valid = sorted({m.name for m in bt.decl.methods if m.ret is not None})
                raise _err(
                    f"extern {bt.decl.name} has no method '{name}'; methods: {', '.join(valid)}", e
                )
            return T.FuncT("extern_method", (bt, methods))
        if isinstance(bt, T.TupleT):
            raise _err("tuple elements are accessed by index, not by name", e)
        raise _err(f"a value of type {bt} has no member '{name}'", e)

    def check_unary(self, e: ast.Unary, scope: Scope, expected: T.Type | None) -> T.Type:
        t = self.check_expr(e.expr, scope, expected)
        if e.op == "!":
            if t is not T.BOOL:
                raise _err(f"'!' needs a bool operand, got {t}", e)
            return T.BOOL
        if e.op in ("-", "+"):
            if not T.is_numeric(t):
                raise _err(f"'{e.op}' needs a numeric operand, got {t}", e)
            return t
        if e.op == "~":
            if not T.is_fixed(t):
                if t is T.INFINT:
                    raise _err("'~' needs an operand with a width", e)
                raise _err(f"'~' needs a bit<W> or int<W> operand, got {t}", e)
            return t
        raise _err(f"unknown operator {e.op}", e)

    def _unify_numeric(self, e: ast.Binary) -> T.Type:
        for side in (e.left, e.right):
            st = side.type
            if isinstance(st, T.EnumT) and st.underlying is not None:
                side.type = st.underlying  # implicit cast to the underlying type
        a, b = e.left.type, e.right.type
        if a is T.INFINT and b is T.INFINT:
            return T.INFINT
        if a is T.INFINT and T.is_fixed(b):
            self.coerce(e.left, b, f"operand of '{e.op}'")
            return b
        if b is T.INFINT and T.is_fixed(a):
            self.coerce(e.right, a, f"operand of '{e.op}'")
            return a
        if T.is_fixed(a) and T.is_fixed(b):
            if a != b:
                if type(a) is type(b):
                    raise _err(f"width mismatch in '{e.op}': {a} and {b}; cast one side", e)
                raise _err(f"signedness mismatch in '{e.op}': {a} and {b}; cast one side", e)
            return a
        bad = a if not T.is_numeric(a) else b
        raise _err(f"'{e.op}' needs numeric operands, got {bad}", e)

    def check_binary(self, e: ast.Binary, scope: Scope, expected: T.Type | None) -> T.Type:
        op = e.op
        sub_exp = expected if op in ARITH_OPS | BIT_OPS else None
        a = self.check_expr(e.left, scope, sub_exp)
        b = self.check_expr(e.right, scope, sub_exp if op not in SHIFT_OPS else None)
        if op in LOGIC_OPS:
            if a is not T.BOOL or b is not T.BOOL:
                raise _err(f"'{op}' needs bool operands, got {a} and {b}", e)
            return T.BOOL
        if op in ARITH_OPS | BIT_OPS:
            t = self._unify_numeric(e)
            if (
                t is T.INFINT
                and expected is not None
                and T.is_fixed(expected)
                and op in ("|+|", "|-|")
            ):
                pass
            if op in ("/", "%") and isinstance(t, T.IntT):
                raise _err(f"'{op}' is not defined on signed int<W> values", e)
            if op in ("|+|", "|-|") and t is T.INFINT:
                raise _err(f"'{op}' needs operands with a width", e)
            return t
        if op in SHIFT_OPS:
            if not T.is_numeric(a):
                raise _err(f"'{op}' needs a numeric left operand, got {a}", e)
            if isinstance(b, T.IntT):
                raise _err(f"shift amount must be unsigned, got {b}", e.right)
            if not T.is_numeric(b):
                raise _err(f"shift amount must be numeric, got {b}", e.right)
            if b is T.INFINT:
                v = self.try_eval_const(e.right)
                if v is not None and v < 0:
                    raise _err("shift amount must not be negative", e.right)
            if a is T.INFINT and expected is not None and T.is_fixed(expected):
                self.coerce(e.left, expected, "shifted value")
                return expected
            return a
        if op == "++":
            for side, st in ((e.left, a), (e.right, b)):
                if st is T.INFINT:
                    raise _err("'++' needs operands with a width; write e.g. 8w1", side)
                if not T.is_fixed(st):
                    raise _err(f"'++' needs bit<W> or int<W> operands, got {st}", side)
            assert isinstance(a, (T.BitT, T.IntT)) and isinstance(b, (T.BitT, T.IntT))
            return type(a)(a.width + b.width)
        if op in CMP_OPS:
            self._unify_numeric(e)
            return T.BOOL
        if op in EQ_OPS:
            if isinstance(a, T.EnumT) and a.underlying is not None and not isinstance(b, T.EnumT):
                e.left.type = a = a.underlying
            if isinstance(b, T.EnumT) and b.underlying is not None and not isinstance(a, T.EnumT):
                e.right.type = b = b.underlying
            if a is T.INFINT and b is not T.INFINT:
                self.coerce(e.left, b, f"operand of '{op}'")
            elif b is T.INFINT and a is not T.INFINT:
                self.coerce(e.right, a, f"operand of '{op}'")
            elif isinstance(a, (T.ListT, T.StructInitT)):
                self.coerce(e.left, b, f"operand of '{op}'")
            elif isinstance(b, (T.ListT, T.StructInitT)):
                self.coerce(e.right, a, f"operand of '{op}'")
            elif not T.same_type(a, b):
                raise _err(f"cannot compare {a} with {b}", e)
            return T.BOOL
        raise _err(f"unknown operator '{op}'", e)

    # -- calls -------------------------------------------------------------------------

    def pick_overload(
        self, decls: list[Any], args: list[ast.Arg], node: ast.Node, what: str
    ) -> Any:
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
            raise _err(f"wrong number of arguments to {what}: expected {exp}, got {n}", node)
        if len(fits) > 1:
            exact = [d for d in fits if len(d.params) == n]
            if exact:
                return exact[0]
        return fits[0]

    def check_call(self, e: ast.Call, scope: Scope, expected: T.Type | None) -> T.Type:
        ft = self.check_expr(e.func, scope)
        if isinstance(ft, T.TypeOnlyT):
            inner = ft.typ
            if isinstance(inner, (T.ExternT, T.BlockT)):
                # constructor call used as an expression (e.g. package arguments)
                info = self.check_constructor_call(inner, e.args, scope, e)
                e.ref = info
                return info.decl_type  # type: ignore[no-any-return]
            raise _err(f"type {inner} cannot be called", e)
        if not isinstance(ft, T.FuncT):
            raise _err(f"a value of type {ft} cannot be called", e)
        if e.type_args:
            targs = [self.resolve_type(t, scope) for t in e.type_args]
        else:
            targs = []
        kind = ft.kind
        if kind == "action":
            decl = ft.decl
            if self.context_stack and self.context_stack[-1] == "parser":
                raise _err("actions cannot be called from a parser", e)
            info = self.bind_args(decl, decl.params, e.args, scope, e, {}, [])
            info.kind = "action"
            info.name = decl.name
            e.ref = info
            return T.VOID
        if kind == "function":
            decl = ft.decl
            info = self.bind_args(decl, decl.params, e.args, scope, e, {}, [])
            info.kind = "function"
            info.name = decl.name
            e.ref = info
            return decl.ret_type  # type: ignore[no-any-return]
        if kind == "extern_func":
            sym: Sym = ft.decl
            decl = self.pick_overload(sym.overloads, e.args, e, f"'{sym.name}'")
            bindings: dict[str, T.Type] = {}
            if targs:
                bindings.update(zip(decl.type_params, targs))
            info = self.bind_args(decl, decl.params, e.args, scope, e, bindings, decl.type_params)
            info.kind = "extern_func"
            info.name = decl.name
            e.ref = info
            return self.subst(self.resolve_type_in(decl.ret, decl.type_params, bindings, scope))
        if kind == "extern_method":
            ext, methods = ft.decl
            member = e.func
            assert isinstance(member, ast.Member)
            decl = self.pick_overload(methods, e.args, e, f"'{ext.decl.name}.{member.name}'")
            bindings = dict(ext.type_args)
            if targs:
                bindings.update(zip(decl.type_params, targs))
            tparams = list(ext.decl.type_params) + list(decl.type_params)
            info = self.bind_args(decl, decl.params, e.args, scope, e, bindings, tparams)
            is_packet = ext.decl.name in ("packet_in", "packet_out")
            info.kind = "packet_method" if is_packet else "extern_method"
            info.name = member.name
            info.extern_name = ext.decl.name
            info.target = member.expr
            e.ref = info
            if is_packet and member.name == "extract" and e.args:
                self.check_extract_target(e, decl)
            if is_packet and member.name == "lookahead":
                if not e.type_args:
                    raise _err("lookahead needs a type argument: lookahead<T>()", e)
            return self.subst(self.resolve_type_in(decl.ret, tparams, bindings, scope))
        if kind == "header_method":
            member = e.func
            assert isinstance(member, ast.Member)
            if e.args:
                raise _err(f"'{member.name}' takes no arguments", e)
            e.ref = CallInfo("header_method", member.name, target=member.expr)
            return T.BOOL if member.name == "isValid" else T.VOID
        if kind == "stack_method":
            member = e.func
            assert isinstance(member, ast.Member)
            if len(e.args) != 1 or e.args[0].value is None:
                raise _err(f"'{member.name}' takes one argument (a count)", e)
            count = self.const_int(e.args[0].value, scope, f"{member.name} count")
            if count < 0:
                raise _err(f"{member.name} count must not be negative", e.args[0])
            e.ref = CallInfo("stack_method", member.name, target=member.expr, args=[count])
            return T.VOID
        if kind == "size_method":
            member = e.func
            assert isinstance(member, ast.Member)
            _, mname, t = member.ref
            w = T.width_of(t)
            value = w if mname.endswith("Bits") else (w + 7) // 8
            e.ref = CallInfo("size_method", mname, args=[value])
            return T.INFINT
        if kind == "table_apply":
            if e.args:
                raise _err("table apply takes no arguments", e)
            if self.context_stack and self.context_stack[-1] not in ("apply",):
                if self.context_stack[-1] == "action":
                    raise _err("tables cannot be applied inside actions", e)
            member = e.func
            assert isinstance(member, ast.Member)
            e.ref = CallInfo("table_apply", ft.decl.name, decl=ft.decl, target=member.expr)
            return T.ApplyResultT(ft.decl)
        if kind == "block_apply":
            bt: T.BlockT = ft.decl
            member = e.func
            assert isinstance(member, ast.Member)
            decl = bt.decl
            info = self.bind_args(
                decl, decl.params, e.args, scope, e, dict(bt.type_args), decl.type_params
            )
            info.kind = "block_apply"
            info.name = decl.name
            info.target = member.expr
            e.ref = info
            return T.VOID
        raise _err(f"cannot call {ft}", e)

    def check_extract_target(self, e: ast.Call, decl: Any) -> None:
        a = e.args[0].value
        if a is None or not (isinstance(a.type, T.StructLikeT) and a.type.kind == "header"):
            raise _err("extract needs a header", e.args[0])
        if len(e.args) == 2:
            raise UnsupportedError(
                "two-argument extract (varbit headers) is not supported by this target", e.span
            )

    def resolve_type_in(
        self,
        tr: ast.TypeRef | None,
        tparams: Iterable[str],
        bindings: dict[str, T.Type],
        scope: Scope,
    ) -> T.Type:
        if tr is None:
            return T.VOID
        tscope = Scope(scope)
        for p in tparams:
            tscope.names[p] = Sym(p, "type", bindings.get(p, T.TypeVar(p)))
        return self.resolve_type(tr, tscope)

    def subst(self, t: T.Type) -> T.Type:
        if isinstance(t, T.TypeVar):
            raise TypeError_(f"cannot infer type parameter {t.name}", None)
        return t

    def bind_args(
        self,
        decl: Any,
        params: list[ast.Param],
        args: list[ast.Arg],
        scope: Scope,
        node: ast.Node,
        bindings: dict[str, T.Type],
        tparams: Iterable[str],
    ) -> CallInfo:
        """Match arguments to parameters, infer type parameters, check directions and types."""
        tparams = list(tparams)
        name = getattr(decl, "name", "?")
        by_pos: list[ast.Arg | None] = [None] * len(params)
        named = any(a.name for a in args)
        if named:
            index = {p.name: i for i, p in enumerate(params)}
            for a in args:
                if a.name is None:
                    raise _err("cannot mix named and positional arguments", a)
                if a.name not in index:
                    raise _err(
                        f"'{name}' has no parameter '{a.name}'; parameters: {', '.join(index)}", a
                    )
                by_pos[index[a.name]] = a
        else:
            if len(args) > len(params):
                raise _err(
                    f"wrong number of arguments to '{name}': expected {len(params)}, got "
                    f"{len(args)}",
                    node,
                )
            for i, a in enumerate(args):
                by_pos[i] = a
        for p, a in zip(params, by_pos):
            optional = p.default is not None or any(x.name == "optional" for x in p.annotations)
            if (
                (a is None or a.value is None)
                and not optional
                and (a is None or p.direction != "out")
            ):
                if a is None:
                    raise _err(f"wrong number of arguments to '{name}': missing '{p.name}'", node)
        # resolve parameter types with type variables
        tscope = Scope(scope)
        for tp in tparams:
            tscope.names[tp] = Sym(tp, "type", T.TypeVar(tp))
        ptypes = [self.resolve_type(p.typ, tscope) for p in params]
        # first pass: check typed arguments and bind type variables
        for _p, pt, a in zip(params, ptypes, by_pos):
            if a is None or a.value is None:
                continue
            exp = self.apply_bindings(pt, bindings)
            at = self.check_expr(a.value, scope, exp if not isinstance(exp, T.TypeVar) else None)
            if isinstance(exp, T.TypeVar):
                if at is T.INFINT:
                    continue  # bind later from another argument
                if isinstance(at, T.ListT):
                    tt = T.TupleT(tuple(at.elems))
                    if any(x is T.INFINT for x in tt.elems):
                        raise _err("list elements passed to a generic parameter need widths", a)
                    bindings[exp.name] = tt
                    self.coerce(a.value, tt, "argument")
                    continue
                bindings[exp.name] = at
            elif isinstance(exp, T.BlockT):
                self.unify_block(exp, at, bindings, scope)
        final_types: list[T.Type] = []
        for p, pt, a in zip(params, ptypes, by_pos):
            exp = self.apply_bindings(pt, bindings)
            final_types.append(exp)
            if a is None or a.value is None:
                continue
            if isinstance(exp, T.TypeVar):
                raise _err(
                    f"cannot infer type parameter '{exp.name}' of '{name}' from an "
                    "integer without a width; write e.g. 8w1 or a cast",
                    a,
                )
            if isinstance(p.typ, ast.BaseTypeRef) and exp is T.INFINT:
                pass
            self.coerce(a.value, exp, f"argument '{p.name}' of '{name}'")
            if p.direction in ("out", "inout"):
                self.check_lvalue(a.value, scope)
            elif p.direction == "" and isinstance(decl, (ast.MethodDecl, ast.ExternFuncDecl)):
                pass
        return CallInfo(
            "",
            name,
            decl,
            list(params),
            final_types,
            [a.value if a is not None else None for a in by_pos],
            bindings=dict(bindings),
        )

    def block_param_types(self, bt: T.BlockT, scope: Scope) -> list[T.Type]:
        decl = bt.decl
        if isinstance(decl, (ast.ParserTypeDecl, ast.ControlTypeDecl, ast.PackageDecl)):
            return [
                self.resolve_type_in(p.typ, decl.type_params, dict(bt.type_args), scope)
                for p in decl.params
            ]
        return [p.ref.type for p in decl.params]  # type: ignore[attr-defined]

    def unify_block(
        self, exp: T.BlockT, at: T.Type, bindings: dict[str, T.Type], scope: Scope
    ) -> None:
        """Infer type arguments from a parser/control passed where its type is expected."""
        if not isinstance(at, T.BlockT) or at.kind != exp.kind:
            return
        if len(exp.decl.params) != len(at.decl.params):
            return
        for pt, apt in zip(self.block_param_types(exp, scope), self.block_param_types(at, scope)):
            if isinstance(pt, T.TypeVar) and pt.name not in bindings:
                bindings[pt.name] = apt

    def block_compatible(self, target: T.BlockT, src: T.BlockT) -> str | None:
        """None if ``src`` (a parser/control) fits the type ``target``, else the reason."""
        if src.kind != target.kind:
            return f"expected a {target.kind}, got a {src.kind}"
        tp, sp = target.decl.params, src.decl.params
        if len(tp) != len(sp):
            return f"{src.decl.name} has {len(sp)} parameters, {target.decl.name} has {len(tp)}"
        tt = self.block_param_types(target, self.root)
        st = self.block_param_types(src, self.root)
        for a, b, x, y in zip(tp, sp, tt, st):
            if a.direction != b.direction:
                return f"parameter '{b.name}' of {src.decl.name} should be '{a.direction or 'directionless'}'"
            if not (T.same_type(x, y) or isinstance(x, T.TypeVar) or x is y):
                return f"parameter '{b.name}' of {src.decl.name} has type {y}, expected {x}"
        return None

    def apply_bindings(self, t: T.Type, bindings: dict[str, T.Type]) -> T.Type:
        if isinstance(t, T.TypeVar):
            return bindings.get(t.name, t)
        if isinstance(t, T.ExternT):
            return T.ExternT(
                t.decl, {k: self.apply_bindings(v, bindings) for k, v in t.type_args.items()}
            )
        if isinstance(t, T.BlockT):
            return T.BlockT(
                t.kind,
                t.decl,
                {k: self.apply_bindings(v, bindings) for k, v in t.type_args.items()},
            )
        if isinstance(t, T.TupleT):
            return T.TupleT(tuple(self.apply_bindings(x, bindings) for x in t.elems))
        return t


def _always_returns(s: ast.Stmt) -> bool:
    if isinstance(s, (ast.Return, ast.Exit)):
        return True
    if isinstance(s, ast.Block):
        return any(_always_returns(x) for x in s.stmts)
    if isinstance(s, ast.If):
        return s.other is not None and _always_returns(s.then) and _always_returns(s.other)
    if isinstance(s, ast.Switch):
        return any(isinstance(lbl, ast.Default) for c in s.cases for lbl in c.labels) and all(
            c.body is None or _always_returns(c.body) for c in s.cases
        )
    return False


def cast_allowed(src: T.Type, dst: T.Type) -> bool:
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


def cast_value(v: Any, src: T.Type | None, dst: T.Type) -> Any:
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


def binary_value(op: str, a: Any, b: Any, ta: Any, tb: Any, t: Any) -> Any:
    """Compute a binary operator on constant values with P4 semantics (result type ``t``)."""
    if op == "&&":
        return a and b
    if op == "||":
        return a or b
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    if op == "<":
        return a < b
    if op == ">":
        return a > b
    if op == "<=":
        return a <= b
    if op == ">=":
        return a >= b
    if op == "++":
        return (
            fit_value((a << tb.width) | wrap_bits(b, tb.width), t)
            if isinstance(t, T.IntT)
            else (wrap_bits(a, ta.width) << tb.width) | wrap_bits(b, tb.width)
        )
    if op == "|+|" or op == "|-|":
        r = a + b if op == "|+|" else a - b
        if isinstance(t, T.BitT):
            return max(0, min(r, (1 << t.width) - 1))
        if isinstance(t, T.IntT):
            return max(-(1 << (t.width - 1)), min(r, (1 << (t.width - 1)) - 1))
        return r
    if op == "+":
        r = a + b
    elif op == "-":
        r = a - b
    elif op == "*":
        r = a * b
    elif op == "/":
        if b == 0:
            raise TypeError_("division by zero in a constant expression", None)
        r = a // b if (a >= 0) == (b >= 0) else -(abs(a) // abs(b))
    elif op == "%":
        if b == 0:
            raise TypeError_("division by zero in a constant expression", None)
        r = a - b * (a // b if (a >= 0) == (b >= 0) else -(abs(a) // abs(b)))
    elif op == "&":
        r = a & b
    elif op == "|":
        r = a | b
    elif op == "^":
        r = a ^ b
    elif op == "<<":
        r = a << b
    elif op == ">>":
        r = a >> b
    else:
        raise TypeError_(f"unknown operator {op}", None)
    return fit_value(r, t)


def check_program(program: ast.Program) -> CheckedProgram:
    return Checker().check(program)
