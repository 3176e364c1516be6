"""Expressions: one rule per node type (:data:`EXPRESSIONS`), per operator and per member kind.

Each rule returns a Python expression (a string). Operands whose evaluation has statements
(calls with ``out`` arguments) are generated with ``CodeGen.g_lazy`` so that those statements
run only when P4 would evaluate the operand, and in P4's left-to-right order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from switch.compile.codegen.classes import default_value, is_composite
from switch.compile.codegen.emitter import fit_code, mask, tuple_code
from switch.errors import TypeError_, UnsupportedError
from switch.lang import ast
from switch.lang import types as T
from switch.lang.constfold import StructValue, fit_value, wrap_signed
from switch.lang.symbols import EnumMember, ErrorMember, StackProperty, StackSize, Sym

if TYPE_CHECKING:
    from switch.compile.codegen.generator import CodeGen

ExprRule = Callable[["CodeGen", Any], str]
"""(generator, expression of the row's type) -> Python code for its value."""


# -- leaves ------------------------------------------------------------------------------------


def _int_lit(gen: CodeGen, e: ast.IntLit) -> str:
    t = e.type
    v = e.value
    if isinstance(t, T.BitT):
        v &= mask(t.width)
    elif isinstance(t, T.IntT):
        v = wrap_signed(v, t.width)
    return repr(v)


def _bool_lit(gen: CodeGen, e: ast.BoolLit) -> str:
    return "True" if e.value else "False"


def _str_lit(gen: CodeGen, e: ast.StrLit) -> str:
    return repr(e.value)


def _name(gen: CodeGen, e: ast.Name) -> str:
    sym = e.ref
    if not isinstance(sym, Sym):
        raise TypeError_(f"'{e.name}' is not a value", e.span)
    if sym.kind == "const":
        v = sym.value
        if isinstance(v, int) and not isinstance(v, bool):
            v = fit_value(v, e.type)
        if isinstance(e.type, (T.StructLikeT, T.TupleT)):
            return const_code(gen, v, e.type)
        return gen.const_repr(v)
    if sym.kind in ("var", "param"):
        return gen.var_name(sym)
    raise TypeError_(f"'{e.name}' is not a value", e.span)


def const_code(gen: CodeGen, v: Any, t: T.Type | None) -> str:
    """Code for the constant ``v`` of type ``t``: a struct or header constant is a fresh object
    each time it is used (built in ``pre``), so no use can change another."""
    if isinstance(v, StructValue) and isinstance(t, T.StructLikeT):
        tmp = gen.tmp("c")
        gen.pre.append(f"{tmp} = {gen.class_of(t)}()")
        if t.kind == "header":
            gen.pre.append(f"{tmp}._v = {v.valid!r}")
        for n, ft in t.fields.items():
            code = const_code(gen, v.field(n), ft)
            gen.pre.append(
                f"{tmp}.f_{n}._set({code})" if is_composite(ft) else f"{tmp}.f_{n} = {code}"
            )
        return tmp
    if isinstance(v, tuple) and isinstance(t, T.TupleT):
        return tuple_code([const_code(gen, x, et) for x, et in zip(v, t.elems)])
    if isinstance(v, int) and not isinstance(v, bool):
        v = fit_value(v, t)
    return gen.const_repr(v)


def _unsupported(gen: CodeGen, e: ast.Expr) -> str:
    raise UnsupportedError(f"expression {type(e).__name__} is not supported here", e.span)


# -- members -----------------------------------------------------------------------------------


def _member(gen: CodeGen, e: ast.Member) -> str:
    ref = e.ref
    if ref is not None:
        rule = MEMBER_REFS.get(type(ref))
        if rule is not None:
            return rule(gen, e, ref)
    if isinstance(e.expr.type, T.ApplyResultT):
        call = gen.g_expr(e.expr)
        if e.name == "hit":
            return f"{call}[0]"
        if e.name == "miss":
            return f"(not {call}[0])"
        return f"{call}[1]"
    return f"{gen.g_expr(e.expr)}.f_{e.name}"


def _constant_member(gen: CodeGen, e: ast.Member, ref: EnumMember | ErrorMember) -> str:
    return repr(ref.value)


def _stack_size(gen: CodeGen, e: ast.Member, ref: StackSize) -> str:
    return repr(ref.size)


def _stack_property(gen: CodeGen, e: ast.Member, ref: StackProperty) -> str:
    base = gen.g_expr(e.expr)
    return STACK_PROPERTIES[ref.name](gen, base)


STACK_PROPERTIES: dict[str, Callable[[CodeGen, str], str]] = {
    "next": lambda gen, s: f"_stack_next({s}, {gen.err_code('StackOutOfBounds')})",
    "last": lambda gen, s: f"_stack_last({s}, {gen.err_code('StackOutOfBounds')})",
    "lastIndex": lambda gen, s: f"(({s}.nextIndex - 1) & 0xffffffff)",
    "nextIndex": lambda gen, s: f"{s}.nextIndex",
}

MEMBER_REFS: dict[type, Callable[[CodeGen, ast.Member, Any], str]] = {
    EnumMember: _constant_member,
    ErrorMember: _constant_member,
    StackSize: _stack_size,
    StackProperty: _stack_property,
}
"""Members that are not fields (methods are generated with their call)."""


# -- indexing ----------------------------------------------------------------------------------


def _index(gen: CodeGen, e: ast.Index) -> str:
    base = gen.g_expr(e.expr)
    if isinstance(e.expr.type, T.TupleT):  # a Python tuple; the index is a constant
        return f"{base}[{gen.const_index(e.index)}]"
    if isinstance(e.index, ast.IntLit) or e.index.type is T.INFINT:
        idx = gen.const_index(e.index)
        if idx is not None:
            return f"{base}.items[{idx}]"
    return f"_stack_at({base}, {gen.g_expr(e.index)})"


def _slice(gen: CodeGen, e: ast.Slice) -> str:
    hi, lo = gen.const_index(e.hi), gen.const_index(e.lo)
    assert hi is not None and lo is not None
    base = gen.g_expr(e.expr)
    m = mask(hi - lo + 1)
    return f"(({base} >> {lo}) & {m})" if lo else f"({base} & {m})"


def _indexed_slice(gen: CodeGen, e: ast.IndexedSlice) -> str:
    w = gen.const_index(e.width)
    assert w is not None
    base = gen.g_expr(e.expr)
    bt = e.expr.type
    if isinstance(bt, T.IntT):
        base = f"({base} & {mask(bt.width)})"
    lo = gen.g_expr(e.base)
    return f"(({base} >> {lo}) & {mask(w)})"


def _default_init(gen: CodeGen, e: ast.DefaultInit) -> str:
    t = e.type
    if isinstance(t, T.EnumT):
        # P4-16 "Default values": 0 for a serializable enum, else its first member
        return "0" if t.underlying is not None else repr(t.values.get(t.members[0], 0))
    if t is T.ERROR:
        return repr(gen.err_code("NoError"))
    if is_composite(t):
        tmp = gen.tmp("s")
        gen.pre.append(f"{tmp} = {default_value(t, gen)}")
        return tmp
    return default_value(t, gen)


# -- operators ---------------------------------------------------------------------------------


def _unary(gen: CodeGen, e: ast.Unary) -> str:
    v = gen.g_expr(e.expr)
    rule = UNARY_OPS.get(e.op)
    if rule is None:
        raise UnsupportedError(f"operator {e.op}", e.span)
    return rule(v, e.type)


def _negate(v: str, t: T.Type | None) -> str:
    if isinstance(t, T.BitT):
        return f"((-{v}) & {mask(t.width)})"
    if isinstance(t, T.IntT):
        return f"_to_signed(-{v}, {t.width})"
    return f"(-{v})"


def _complement(v: str, t: T.Type | None) -> str:
    if isinstance(t, T.BitT):
        return f"({v} ^ {mask(t.width)})"
    return f"(~{v})"


UNARY_OPS: dict[str, Callable[[str, T.Type | None], str]] = {
    "!": lambda v, t: f"(not {v})",
    "+": lambda v, t: v,
    "-": _negate,
    "~": _complement,
}


def guarded(gen: CodeGen, cond: str, branches: list[tuple[str, list[str]]]) -> str:
    """Hoist `if cond: <pre 0>; t = v0 else: <pre 1>; t = v1` so side effects stay lazy."""
    t = gen.tmp("c")
    for i, (v, lazy) in enumerate(branches):
        gen.pre.append(f"if {cond}:" if i == 0 else "else:")
        gen.pre.extend("    " + line for line in lazy)
        gen.pre.append(f"    {t} = {v}")
    return t


def _binary(gen: CodeGen, e: ast.Binary) -> str:
    rule = BINARY_OPS.get(e.op)
    if rule is None:
        raise UnsupportedError(f"operator {e.op}", e.span)
    return rule(gen, e)


def _short_circuit(gen: CodeGen, e: ast.Binary) -> str:
    a = gen.g_expr(e.left)
    b, lazy = gen.g_lazy(e.right)
    py = "and" if e.op == "&&" else "or"
    if not lazy:
        return f"({a} {py} {b})"
    # the right operand has statements (calls with out/inout arguments): run them
    # only when the left operand does not decide the result
    if e.op == "&&":
        return guarded(gen, a, [(b, lazy), ("False", [])])
    return guarded(gen, a, [("True", []), (b, lazy)])


def _operands(gen: CodeGen, e: ast.Binary) -> tuple[str, str]:
    """Code for both operands of a strict operator, evaluated left to right."""
    a = gen.g_expr(e.left)
    b, effects = gen.g_lazy(e.right)
    if effects:
        # the right operand calls something with out/inout arguments: the left operand is
        # evaluated first (P4 evaluates left to right), so keep its value before the call
        if not isinstance(e.left, (ast.IntLit, ast.BoolLit)):
            keep = gen.tmp("l")
            copy = ".copy()" if is_composite(e.left.type) else ""  # a header is an object
            gen.pre.append(f"{keep} = {a}{copy}")
            a = keep
        gen.pre.extend(effects)
    return a, b


def _width(t: T.Type | None) -> int | None:
    return t.width if isinstance(t, (T.BitT, T.IntT)) else None


def _both_infint(e: ast.Binary) -> bool:
    return e.left.type is T.INFINT and e.right.type is T.INFINT


def _equality(gen: CodeGen, e: ast.Binary) -> str:
    a, b = _operands(gen, e)
    lt = e.left.type
    if is_composite(lt) or isinstance(lt, T.TupleT):
        r = f"_eq({a}, {b})"
        return r if e.op == "==" else f"(not {r})"
    return f"({a} {e.op} {b})"


def _compare(gen: CodeGen, e: ast.Binary) -> str:
    a, b = _operands(gen, e)
    return f"({a} {e.op} {b})"


def _concat(gen: CodeGen, e: ast.Binary) -> str:
    a, b = _operands(gen, e)
    t, lt, rt = e.type, e.left.type, e.right.type
    assert isinstance(rt, (T.BitT, T.IntT)) and isinstance(lt, (T.BitT, T.IntT))
    bv = b if isinstance(rt, T.BitT) else f"({b} & {mask(rt.width)})"
    av = a if isinstance(lt, T.BitT) else f"({a} & {mask(lt.width)})"
    r = f"(({av} << {rt.width}) | {bv})"
    if isinstance(t, T.IntT):
        return f"_to_signed({r}, {t.width})"
    return r


def _saturating(gen: CodeGen, e: ast.Binary) -> str:
    a, b = _operands(gen, e)
    t = e.type
    width = _width(t)
    s = "+" if e.op == "|+|" else "-"
    assert width is not None
    if isinstance(t, T.BitT):
        if s == "+":
            return f"min({a} + {b}, {mask(width)})"
        return f"max({a} - {b}, 0)"
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    return f"max(min({a} {s} {b}, {hi}), {lo})"


def _shift_left(gen: CodeGen, e: ast.Binary) -> str:
    a, b = _operands(gen, e)
    t = e.type
    width = _width(t)
    if width is None:
        return f"({a} << {b})"
    sh = (
        gen.const_index(e.right)
        if e.right.type is T.INFINT or isinstance(e.right, ast.IntLit)
        else None
    )
    if sh is not None:
        if sh >= width:
            return "0"
        r = f"(({a} << {sh}) & {mask(width)})"
    else:
        r = f"_shl({a}, {b}, {width})"
    if isinstance(t, T.IntT):
        return f"_to_signed({r} & {mask(width)}, {width})"
    return r


def _shift_right(gen: CodeGen, e: ast.Binary) -> str:
    a, b = _operands(gen, e)
    return f"({a} >> {b})"


def _bitwise(gen: CodeGen, e: ast.Binary) -> str:
    a, b = _operands(gen, e)
    r = f"({a} {e.op} {b})"
    if _both_infint(e) and _width(e.type) is not None:
        return fit_code(r, e.type)
    return r


def _arithmetic(gen: CodeGen, e: ast.Binary) -> str:
    a, b = _operands(gen, e)
    r = f"({a} {e.op} {b})"
    if _width(e.type) is None:
        return r
    return fit_code(r, e.type)


def _divide(gen: CodeGen, e: ast.Binary) -> str:
    a, b = _operands(gen, e)
    r = f"_div({a}, {b})" if e.op == "/" else f"_mod({a}, {b})"
    if _both_infint(e) and _width(e.type) is not None:
        return fit_code(r, e.type)
    return r


BINARY_OPS: dict[str, Callable[[CodeGen, ast.Binary], str]] = {
    "&&": _short_circuit,
    "||": _short_circuit,
    "==": _equality,
    "!=": _equality,
    "<": _compare,
    ">": _compare,
    "<=": _compare,
    ">=": _compare,
    "++": _concat,
    "|+|": _saturating,
    "|-|": _saturating,
    "<<": _shift_left,
    ">>": _shift_right,
    "&": _bitwise,
    "|": _bitwise,
    "^": _bitwise,
    "+": _arithmetic,
    "-": _arithmetic,
    "*": _arithmetic,
    "/": _divide,
    "%": _divide,
}


# -- composite expressions ---------------------------------------------------------------------


def _mux(gen: CodeGen, e: ast.Mux) -> str:
    c = gen.g_expr(e.cond)
    a, lazy_a = gen.g_lazy(e.then)
    b, lazy_b = gen.g_lazy(e.other)
    if not lazy_a and not lazy_b:
        return f"({a} if {c} else {b})"
    return guarded(gen, c, [(a, lazy_a), (b, lazy_b)])


def _cast(gen: CodeGen, e: ast.Cast) -> str:
    return cast_code(gen.g_expr(e.expr), e.expr.type, e.checked_type)


def cast_code(v: str, src: T.Type | None, dst: T.Type) -> str:
    """Code converting the value ``v`` of type ``src`` to ``dst``."""
    if src is not None and T.same_type(src, dst) and src is not T.INFINT:
        return v
    if dst is T.BOOL:
        return f"({v} != 0)" if src is not T.BOOL else v
    if src is T.BOOL:
        return f"(1 if {v} else 0)"
    if isinstance(dst, T.EnumT):
        return fit_code(v, dst.underlying) if dst.underlying is not None else v
    if isinstance(src, T.EnumT):
        src = src.underlying
    if isinstance(dst, T.BitT):
        if isinstance(src, T.BitT) and src.width <= dst.width:
            return v
        return f"({v} & {mask(dst.width)})"
    if isinstance(dst, T.IntT):
        if isinstance(src, T.IntT) and src.width <= dst.width:
            return v
        return f"_to_signed({v}, {dst.width})"
    return v


def _call(gen: CodeGen, e: ast.Call) -> str:
    r = gen.g_call(e, want_value=True)
    assert r is not None
    return r


def ordered(gen: CodeGen, exprs: list[ast.Expr]) -> list[str]:
    """Code for ``exprs`` evaluated left to right: a value read before a later expression's
    side effects (calls with out/inout arguments) is kept in a temporary first."""
    parts = [gen.g_lazy(x) for x in exprs]
    codes: list[str] = []
    for i, (v, effects) in enumerate(parts):
        gen.pre.extend(effects)
        if any(later for _v, later in parts[i + 1 :]) and not isinstance(
            exprs[i], (ast.IntLit, ast.BoolLit)
        ):
            keep = gen.tmp("l")
            copy = ".copy()" if is_composite(exprs[i].type) else ""
            gen.pre.append(f"{keep} = {v}{copy}")
            v = keep
        codes.append(v)
    return codes


def _list(gen: CodeGen, e: ast.ListExpr) -> str:
    items = ordered(gen, e.items)
    t = e.type
    if not isinstance(t, T.StructLikeT):
        return tuple_code(items)
    cls = gen.class_of(t)
    tmp = gen.tmp("s")
    gen.pre.append(f"{tmp} = {cls}()")
    if t.kind == "header":
        gen.pre.append(f"{tmp}._v = True")
    for (n, ft), v in zip(t.fields.items(), items):
        gen.pre.append(f"{tmp}.f_{n}._set({v})" if is_composite(ft) else f"{tmp}.f_{n} = {v}")
    return tmp


def _struct_init(gen: CodeGen, e: ast.StructInit) -> str:
    t = e.type
    if not isinstance(t, T.StructLikeT):
        raise UnsupportedError("structure initializer without a struct type", e.span)
    cls = gen.class_of(t)
    tmp = gen.tmp("s")
    gen.pre.append(f"{tmp} = {cls}()")
    if t.kind == "header":
        gen.pre.append(f"{tmp}._v = True")
    # after the temporary: nested initializers number after it
    codes = ordered(gen, [v for _n, v in e.fields])
    for (n, _v), code in zip(e.fields, codes):
        if is_composite(t.fields[n]):
            gen.pre.append(f"{tmp}.f_{n}._set({code})")
        else:
            gen.pre.append(f"{tmp}.f_{n} = {code}")
    return tmp


def _invalid_header(gen: CodeGen, e: ast.InvalidHeader) -> str:
    if not isinstance(e.type, T.StructLikeT):
        raise TypeError_("{#} needs a header or header union type here; cast it", e.span)
    return f"{gen.class_of(e.type)}()"  # a new header or union is invalid


EXPRESSIONS: dict[type[ast.Expr], ExprRule] = {
    ast.IntLit: _int_lit,
    ast.BoolLit: _bool_lit,
    ast.StrLit: _str_lit,
    ast.Name: _name,
    ast.Member: _member,
    ast.Index: _index,
    ast.Slice: _slice,
    ast.IndexedSlice: _indexed_slice,
    ast.DefaultInit: _default_init,
    ast.Unary: _unary,
    ast.Binary: _binary,
    ast.Mux: _mux,
    ast.Cast: _cast,
    ast.Call: _call,
    ast.ListExpr: _list,
    ast.StructInit: _struct_init,
    ast.InvalidHeader: _invalid_header,
    # keysets (generated by the parser's select) and types are not values
    ast.Mask: _unsupported,
    ast.Range: _unsupported,
    ast.DontCare: _unsupported,
    ast.Default: _unsupported,
    ast.TypeExpr: _unsupported,
}
"""Every expression node type: its rule."""
