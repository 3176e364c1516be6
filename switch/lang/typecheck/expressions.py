"""Expressions: one rule per node type (:data:`EXPRESSIONS`) and per operator.

Each rule returns the expression's type (the checker stores it in ``e.type``) and fills in the
references the code generator needs. ``expected`` is the type the context wants, if known: it
lets integer literals and brace lists take their type from where they are used. Member access
dispatches on the type of the base (:data:`MEMBERS`), operators on the operator
(:data:`UNARY_OPS`, :data:`BINARY_OPS`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from switch.lang import ast, constfold
from switch.lang import types as T
from switch.lang.symbols import (
    EnumMember,
    ErrorMember,
    HeaderMethod,
    Scope,
    SizeMethod,
    StackMethod,
    StackProperty,
    StackSize,
    Sym,
)
from switch.lang.typecheck.calls import check_call
from switch.lang.typecheck.coercion import cast_allowed, coerce
from switch.lang.typecheck.context import Context, err
from switch.lang.types import CallKind

if TYPE_CHECKING:
    from switch.lang.typecheck.checker import Checker


ExprRule = Callable[["Checker", Any, Scope, "T.Type | None"], T.Type]
"""(checker, expression of the row's type, scope, expected type) -> the expression's type."""

ARITH_OPS = ("+", "-", "*", "/", "%", "|+|", "|-|")
BIT_OPS = ("&", "|", "^")
CMP_OPS = ("<", ">", "<=", ">=")
EQ_OPS = ("==", "!=")
SHIFT_OPS = ("<<", ">>")
LOGIC_OPS = ("&&", "||")
SIZE_METHODS = ("minSizeInBits", "minSizeInBytes", "maxSizeInBits", "maxSizeInBytes")
VALUE_SIZE_METHODS = ("sizeInBits", "sizeInBytes")
"""Sizes of a header value: with a varbit field, its current size (known at run time)."""


# -- leaves ------------------------------------------------------------------------------------


def _int_lit(ck: Checker, e: ast.IntLit, scope: Scope, expected: T.Type | None) -> T.Type:
    if e.width is None:
        return T.INFINT
    if e.signed:
        return T.IntT(e.width)
    if e.value >= (1 << e.width):
        raise err(f"value {e.value} does not fit in {e.width} bits", e)
    return T.BitT(e.width)


def _bool_lit(ck: Checker, e: ast.BoolLit, scope: Scope, expected: T.Type | None) -> T.Type:
    return T.BOOL


def _str_lit(ck: Checker, e: ast.StrLit, scope: Scope, expected: T.Type | None) -> T.Type:
    return T.STRING


def _name(ck: Checker, e: ast.Name, scope: Scope, expected: T.Type | None) -> T.Type:
    sym = ck.root.lookup(e.name) if e.top_level else scope.lookup(e.name)
    if sym is None:
        if e.name == "error" and "NoError" in ck.errors:
            e.ref = Sym("error", "type", T.ERROR)
            return T.TypeOnlyT(T.ERROR)
        raise err(f"unknown name '{e.name}'{scope.suggest(e.name)}", e)
    e.ref = sym
    if sym.kind == "type":
        assert sym.type is not None
        return T.TypeOnlyT(sym.type)
    if sym.kind == "extern_func":
        return T.FuncT(CallKind.EXTERN_FUNC, sym)
    if sym.kind == "value_set":
        raise err(f"value set '{e.name}' can only be used as a select keyset", e)
    assert sym.type is not None, sym
    return sym.type


def _dont_care(ck: Checker, e: ast.Expr, scope: Scope, expected: T.Type | None) -> T.Type:
    return T.DONTCARE


def _keyset_only(ck: Checker, e: ast.Expr, scope: Scope, expected: T.Type | None) -> T.Type:
    raise err("'&&&' and '..' are only allowed in keysets", e)


def _type_expr(ck: Checker, e: ast.TypeExpr, scope: Scope, expected: T.Type | None) -> T.Type:
    raise err("a type is not a value here", e)


# -- members, by the type of the base ------------------------------------------------------------

MemberRule = Callable[["Checker", ast.Member, Any], T.Type]


def _member(ck: Checker, e: ast.Member, scope: Scope, expected: T.Type | None) -> T.Type:
    bt = ck.check_expr(e.expr, scope)
    rule = MEMBERS.get(type(bt))
    if rule is None:
        raise err(f"a value of type {bt} has no member '{e.name}'", e)
    return rule(ck, e, bt)


def _member_of_type(ck: Checker, e: ast.Member, bt: T.TypeOnlyT) -> T.Type:
    inner, name = bt.typ, e.name
    if isinstance(inner, T.EnumT):
        if name not in inner.values:
            raise err(
                f"enum {inner.name} has no member '{name}'; members: {', '.join(inner.members)}",
                e,
            )
        e.ref = EnumMember(inner.values[name])
        return inner
    if inner is T.ERROR:
        if name not in ck.errors:
            raise err(f"unknown error '{name}'; declared errors: {', '.join(ck.errors)}", e)
        e.ref = ErrorMember(ck.errors[name])
        return T.ERROR
    if isinstance(inner, (T.StructLikeT, T.BitT, T.IntT)) and name in SIZE_METHODS:
        e.ref = SizeMethod(name, inner)
        return T.FuncT(CallKind.SIZE_METHOD, inner)
    raise err(f"type {inner} has no member '{name}'", e)


def _member_of_struct(ck: Checker, e: ast.Member, bt: T.StructLikeT) -> T.Type:
    name = e.name
    if name in bt.fields:
        return bt.fields[name]
    if name in ("isValid", "setValid", "setInvalid") and bt.kind != "struct":
        if bt.kind == "header_union" and name != "isValid":
            raise err(f"header unions have no '{name}' method", e)
        e.ref = HeaderMethod(name)
        return T.FuncT(CallKind.HEADER_METHOD, bt)
    if name in SIZE_METHODS or (bt.kind == "header" and name in VALUE_SIZE_METHODS):
        e.ref = SizeMethod(name, bt)
        return T.FuncT(CallKind.SIZE_METHOD, bt)
    raise err(f"{bt.kind} {bt.name} has no field '{name}'; fields: {', '.join(bt.fields)}", e)


def _member_of_stack(ck: Checker, e: ast.Member, bt: T.StackT) -> T.Type:
    name = e.name
    if name in ("next", "last"):
        if name == "next" and ck.context is not Context.PARSER:
            raise err("'next' can only be used in a parser", e)
        e.ref = StackProperty(name)
        return bt.elem
    if name in ("lastIndex", "nextIndex"):
        e.ref = StackProperty(name)
        return T.BitT(32)
    if name == "size":
        e.ref = StackSize(bt.size)
        return T.BitT(32)
    if name in ("push_front", "pop_front"):
        e.ref = StackMethod(name)
        return T.FuncT(CallKind.STACK_METHOD, bt)
    raise err(f"header stacks have no member '{name}'", e)


def _member_of_table(ck: Checker, e: ast.Member, bt: T.TableT) -> T.Type:
    if e.name != "apply":
        raise err(f"tables have no member '{e.name}' (only apply)", e)
    return T.FuncT(CallKind.TABLE_APPLY, bt.decl)


def _member_of_apply_result(ck: Checker, e: ast.Member, bt: T.ApplyResultT) -> T.Type:
    if e.name in ("hit", "miss"):
        return T.BOOL
    if e.name == "action_run":
        return T.ActionRunT(bt.table)
    raise err(f"a table apply result has no member '{e.name}' (hit, miss, action_run)", e)


def _member_of_block(ck: Checker, e: ast.Member, bt: T.BlockT) -> T.Type:
    if e.name != "apply":
        raise err(f"{bt.kind} instances have no member '{e.name}' (only apply)", e)
    return T.FuncT(CallKind.BLOCK_APPLY, bt)


def _member_of_extern(ck: Checker, e: ast.Member, bt: T.ExternT) -> T.Type:
    methods = [m for m in bt.decl.methods if m.name == e.name and m.ret is not None]
    if not methods:
        valid = sorted({m.name for m in bt.decl.methods if m.ret is not None})
        raise err(f"extern {bt.decl.name} has no method '{e.name}'; methods: {', '.join(valid)}", e)
    return T.FuncT(CallKind.EXTERN_METHOD, (bt, methods))


def _member_of_tuple(ck: Checker, e: ast.Member, bt: T.TupleT) -> T.Type:
    raise err("tuple elements are accessed by index, not by name", e)


MEMBERS: dict[type[T.Type], MemberRule] = {
    T.TypeOnlyT: _member_of_type,
    T.StructLikeT: _member_of_struct,
    T.StackT: _member_of_stack,
    T.TableT: _member_of_table,
    T.ApplyResultT: _member_of_apply_result,
    T.BlockT: _member_of_block,
    T.ExternT: _member_of_extern,
    T.TupleT: _member_of_tuple,
}
"""Types whose values have members; any other type has none."""


# -- indexing ------------------------------------------------------------------------------------


def _index(ck: Checker, e: ast.Index, scope: Scope, expected: T.Type | None) -> T.Type:
    bt = ck.check_expr(e.expr, scope)
    if isinstance(bt, T.TupleT):
        # a tuple's elements have different types: the index is a compile-time constant
        i = ck.const_int(e.index, scope, "tuple index")
        if not (0 <= i < len(bt.elems)):
            raise err(f"index {i} is out of bounds for {bt}", e.index)
        return bt.elems[i]
    if not isinstance(bt, T.StackT):
        raise err(f"cannot index a value of type {bt}", e)
    it = ck.check_expr(e.index, scope)
    if it is T.INFINT:
        idx = constfold.fold(e.index)
        if idx is not None and not (0 <= idx < bt.size):
            raise err(f"index {idx} is out of bounds for a stack of size {bt.size}", e.index)
        coerce(ck, e.index, T.BitT(32), "stack index")
    elif not isinstance(it, (T.BitT, T.IntT)):
        # p4c accepts signed indexes too; a negative one is out of range at run time
        raise err(f"stack index must be an integer, not {it}", e.index)
    return bt.elem


def _slice(ck: Checker, e: ast.Slice, scope: Scope, expected: T.Type | None) -> T.Type:
    bt = ck.check_expr(e.expr, scope)
    if not isinstance(bt, (T.BitT, T.IntT)):
        raise err(f"cannot slice a value of type {bt}", e)
    hi = ck.const_int(e.hi, scope, "slice bound")
    lo = ck.const_int(e.lo, scope, "slice bound")
    if not (0 <= lo <= hi < bt.width):
        raise err(f"slice [{hi}:{lo}] is out of range for {bt}", e)
    return T.BitT(hi - lo + 1)


def _indexed_slice(
    ck: Checker, e: ast.IndexedSlice, scope: Scope, expected: T.Type | None
) -> T.Type:
    bt = ck.check_expr(e.expr, scope)
    if not isinstance(bt, (T.BitT, T.IntT)):
        raise err(f"cannot slice a value of type {bt}", e)
    w = ck.const_int(e.width, scope, "slice width")
    if not (0 < w <= bt.width):
        raise err(f"slice width {w} is out of range for {bt}", e.width)
    lt = ck.check_expr(e.base, scope)
    if lt is T.INFINT or isinstance(lt, T.BitT):
        lo = constfold.fold(e.base)
        if lo is not None and not (0 <= lo and lo + w <= bt.width):
            raise err(f"slice [{lo} +: {w}] is out of range for {bt}", e)
        if lt is T.INFINT:
            coerce(ck, e.base, T.BitT(32), "slice start")
    else:
        raise err(f"the start of a slice must be an unsigned integer (bit<W>), not {lt}", e.base)
    return T.BitT(w)


def _default_init(ck: Checker, e: ast.DefaultInit, scope: Scope, expected: T.Type | None) -> T.Type:
    if expected is None or isinstance(expected, (T.TypeVar, T.ListT, T.StructInitT)):
        raise err("'...' needs the type its context expects (an assignment or initializer)", e)
    if not default_exists(expected):
        raise err(f"'...': the type {expected} has no default value", e)
    return expected


def default_exists(t: T.Type) -> bool:
    """Whether values of ``t`` have a default value (P4-16 "Default values")."""
    if t is T.BOOL or t is T.INFINT or isinstance(t, (T.BitT, T.IntT, T.VarbitT, T.EnumT)):
        return True
    if isinstance(t, T.StructLikeT):
        return all(default_exists(f) for f in t.fields.values())
    if isinstance(t, T.TupleT):
        return all(default_exists(x) for x in t.elems)
    if isinstance(t, T.StackT):
        return default_exists(t.elem)
    return t is T.ERROR


def _expand_rest(e: ast.ListExpr, n: int) -> None:
    """``{a, ...}`` for ``n`` fields or elements: the trailing ``...`` stands for the rest."""
    if e.items and isinstance(e.items[-1], ast.DefaultInit) and len(e.items) - 1 <= n:
        dots = e.items.pop()
        e.items.extend(ast.DefaultInit(span=dots.span) for _ in range(n - len(e.items)))


# -- operators -----------------------------------------------------------------------------------


def _unary(ck: Checker, e: ast.Unary, scope: Scope, expected: T.Type | None) -> T.Type:
    t = ck.check_expr(e.expr, scope, expected)
    rule = UNARY_OPS.get(e.op)
    if rule is None:
        raise err(f"unknown operator {e.op}", e)
    return rule(e, t)


def _not(e: ast.Unary, t: T.Type) -> T.Type:
    if t is not T.BOOL:
        raise err(f"'!' needs a bool operand, got {t}", e)
    return T.BOOL


def _sign(e: ast.Unary, t: T.Type) -> T.Type:
    if not T.is_numeric(t):
        raise err(f"'{e.op}' needs a numeric operand, got {t}", e)
    return t


def _complement(e: ast.Unary, t: T.Type) -> T.Type:
    if not T.is_fixed(t):
        if t is T.INFINT:
            raise err("'~' needs an operand with a width", e)
        raise err(f"'~' needs a bit<W> or int<W> operand, got {t}", e)
    return t


UNARY_OPS: dict[str, Callable[[ast.Unary, T.Type], T.Type]] = {
    "!": _not,
    "-": _sign,
    "+": _sign,
    "~": _complement,
}

BinaryRule = Callable[["Checker", ast.Binary, T.Type, T.Type, "T.Type | None"], T.Type]
"""(checker, expression, left type, right type, expected type) -> the result type."""


def _binary(ck: Checker, e: ast.Binary, scope: Scope, expected: T.Type | None) -> T.Type:
    op = e.op
    sub_exp = expected if op in ARITH_OPS or op in BIT_OPS else None
    a = ck.check_expr(e.left, scope, sub_exp)
    b = ck.check_expr(e.right, scope, sub_exp if op not in SHIFT_OPS else None)
    rule = BINARY_OPS.get(op)
    if rule is None:
        raise err(f"unknown operator '{op}'", e)
    return rule(ck, e, a, b, expected)


def _unify_numeric(ck: Checker, e: ast.Binary) -> T.Type:
    """The common type of two numeric operands (a literal takes the other side's width)."""
    for side in (e.left, e.right):
        st = side.type
        if isinstance(st, T.EnumT) and st.underlying is not None:
            side.type = st.underlying  # implicit cast to the underlying type
    a, b = e.left.checked_type, e.right.checked_type
    if a is T.INFINT and b is T.INFINT:
        return T.INFINT
    if a is T.INFINT and T.is_fixed(b):
        coerce(ck, e.left, b, f"operand of '{e.op}'")
        return b
    if b is T.INFINT and T.is_fixed(a):
        coerce(ck, e.right, a, f"operand of '{e.op}'")
        return a
    if T.is_fixed(a) and T.is_fixed(b):
        if a != b:
            if type(a) is type(b):
                raise err(f"width mismatch in '{e.op}': {a} and {b}; cast one side", e)
            raise err(f"signedness mismatch in '{e.op}': {a} and {b}; cast one side", e)
        return a
    bad = a if not T.is_numeric(a) else b
    raise err(f"'{e.op}' needs numeric operands, got {bad}", e)


def _logic(ck: Checker, e: ast.Binary, a: T.Type, b: T.Type, expected: T.Type | None) -> T.Type:
    if a is not T.BOOL or b is not T.BOOL:
        raise err(f"'{e.op}' needs bool operands, got {a} and {b}", e)
    return T.BOOL


def _arith(ck: Checker, e: ast.Binary, a: T.Type, b: T.Type, expected: T.Type | None) -> T.Type:
    t = _unify_numeric(ck, e)
    if e.op in ("/", "%") and isinstance(t, T.IntT):
        raise err(f"'{e.op}' is not defined on signed int<W> values", e)
    if e.op in ("|+|", "|-|") and t is T.INFINT:
        raise err(f"'{e.op}' needs operands with a width", e)
    return t


def _shift(ck: Checker, e: ast.Binary, a: T.Type, b: T.Type, expected: T.Type | None) -> T.Type:
    if not T.is_numeric(a):
        raise err(f"'{e.op}' needs a numeric left operand, got {a}", e)
    if isinstance(b, T.IntT):
        raise err(f"shift amount must be unsigned, got {b}", e.right)
    if not T.is_numeric(b):
        raise err(f"shift amount must be numeric, got {b}", e.right)
    if b is T.INFINT:
        v = constfold.fold(e.right)
        if v is not None and v < 0:
            raise err("shift amount must not be negative", e.right)
    if a is T.INFINT and expected is not None and T.is_fixed(expected):
        coerce(ck, e.left, expected, "shifted value")
        return expected
    return a


def _concat(ck: Checker, e: ast.Binary, a: T.Type, b: T.Type, expected: T.Type | None) -> T.Type:
    for side, st in ((e.left, a), (e.right, b)):
        if st is T.INFINT:
            raise err("'++' needs operands with a width; write e.g. 8w1", side)
        if not T.is_fixed(st):
            raise err(f"'++' needs bit<W> or int<W> operands, got {st}", side)
    assert isinstance(a, (T.BitT, T.IntT)) and isinstance(b, (T.BitT, T.IntT))
    return type(a)(a.width + b.width)


def _compare(ck: Checker, e: ast.Binary, a: T.Type, b: T.Type, expected: T.Type | None) -> T.Type:
    _unify_numeric(ck, e)
    return T.BOOL


def _equality(ck: Checker, e: ast.Binary, a: T.Type, b: T.Type, expected: T.Type | None) -> T.Type:
    what = f"operand of '{e.op}'"
    if isinstance(a, T.EnumT) and a.underlying is not None and not isinstance(b, T.EnumT):
        e.left.type = a = a.underlying
    if isinstance(b, T.EnumT) and b.underlying is not None and not isinstance(a, T.EnumT):
        e.right.type = b = b.underlying
    if a is T.INFINT and b is not T.INFINT:
        coerce(ck, e.left, b, what)
    elif b is T.INFINT and a is not T.INFINT:
        coerce(ck, e.right, a, what)
    elif isinstance(a, (T.ListT, T.StructInitT, T.InvalidHeaderT)):
        coerce(ck, e.left, b, what)
    elif isinstance(b, (T.ListT, T.StructInitT, T.InvalidHeaderT)):
        coerce(ck, e.right, a, what)
    elif not T.same_type(a, b):
        raise err(f"cannot compare {a} with {b}", e)
    return T.BOOL


BINARY_OPS: dict[str, BinaryRule] = {
    **{op: _logic for op in LOGIC_OPS},
    **{op: _arith for op in ARITH_OPS + BIT_OPS},
    **{op: _shift for op in SHIFT_OPS},
    "++": _concat,
    **{op: _compare for op in CMP_OPS},
    **{op: _equality for op in EQ_OPS},
}


# -- composite expressions -----------------------------------------------------------------------


def _mux(ck: Checker, e: ast.Mux, scope: Scope, expected: T.Type | None) -> T.Type:
    ck.check_expr(e.cond, scope, T.BOOL)
    coerce(ck, e.cond, T.BOOL, "condition")
    a = ck.check_expr(e.then, scope, expected)
    b = ck.check_expr(e.other, scope, expected)
    if a is T.INFINT and b is not T.INFINT:
        coerce(ck, e.then, b, "conditional branch")
        return b
    if b is T.INFINT and a is not T.INFINT:
        coerce(ck, e.other, a, "conditional branch")
        return a
    if a is T.INFINT and b is T.INFINT:
        if expected is not None and T.is_fixed(expected):
            coerce(ck, e.then, expected, "conditional branch")
            coerce(ck, e.other, expected, "conditional branch")
            return expected
        return T.INFINT
    if isinstance(a, (T.ListT, T.StructInitT, T.InvalidHeaderT)) and expected is not None:
        coerce(ck, e.then, expected, "conditional branch")
        coerce(ck, e.other, expected, "conditional branch")
        return expected
    if not T.same_type(a, b):
        raise err(f"conditional branches have different types: {a} and {b}", e)
    return a


def _cast(ck: Checker, e: ast.Cast, scope: Scope, expected: T.Type | None) -> T.Type:
    target = ck.resolve_type(e.to, scope)
    src = ck.check_expr(e.expr, scope, target)
    if isinstance(src, (T.ListT, T.StructInitT)):
        coerce(ck, e.expr, target, "cast")
        return target
    if not cast_allowed(src, target):
        raise err(f"cannot cast {src} to {target}", e)
    return target


def _list(ck: Checker, e: ast.ListExpr, scope: Scope, expected: T.Type | None) -> T.Type:
    if isinstance(expected, T.TupleT):
        _expand_rest(e, len(expected.elems))
    elif isinstance(expected, T.StructLikeT):
        _expand_rest(e, len(expected.fields))
    exp_elems: list[T.Type | None] = [None] * len(e.items)
    if isinstance(expected, T.TupleT) and len(expected.elems) == len(e.items):
        exp_elems = list(expected.elems)
    elif isinstance(expected, T.StructLikeT) and len(expected.fields) == len(e.items):
        exp_elems = list(expected.fields.values())
    return T.ListT([ck.check_expr(i, scope, x) for i, x in zip(e.items, exp_elems)])


def _invalid_header(
    ck: Checker, e: ast.InvalidHeader, scope: Scope, expected: T.Type | None
) -> T.Type:
    if isinstance(expected, T.StructLikeT) and expected.kind in ("header", "header_union"):
        return expected
    return T.InvalidHeaderT()  # the type comes from the context (coercion) or a cast


def _struct_init(ck: Checker, e: ast.StructInit, scope: Scope, expected: T.Type | None) -> T.Type:
    if e.rest:
        if not isinstance(expected, T.StructLikeT):
            raise err("'...' in an initializer needs the struct or header type it initializes", e)
        named = {n for n, _ in e.fields}
        e.fields.extend(
            (n, ast.DefaultInit(span=e.span)) for n in expected.fields if n not in named
        )
        e.rest = False
    fts: dict[str, T.Type] = {}
    for n, v in e.fields:
        if n in fts:
            raise err(f"duplicate field '{n}' in initializer", v)
        x = expected.fields.get(n) if isinstance(expected, T.StructLikeT) else None
        fts[n] = ck.check_expr(v, scope, x)
    return T.StructInitT(fts)


EXPRESSIONS: dict[type[ast.Expr], ExprRule] = {
    ast.IntLit: _int_lit,
    ast.BoolLit: _bool_lit,
    ast.StrLit: _str_lit,
    ast.Name: _name,
    ast.Member: _member,
    ast.Index: _index,
    ast.Slice: _slice,
    ast.IndexedSlice: _indexed_slice,
    ast.Unary: _unary,
    ast.Binary: _binary,
    ast.Mux: _mux,
    ast.Cast: _cast,
    ast.Call: check_call,
    ast.ListExpr: _list,
    ast.InvalidHeader: _invalid_header,
    ast.StructInit: _struct_init,
    ast.Mask: _keyset_only,
    ast.Range: _keyset_only,
    ast.DontCare: _dont_care,
    ast.Default: _dont_care,
    ast.DefaultInit: _default_init,
    ast.TypeExpr: _type_expr,
}
"""Every expression node type: its rule. (Keysets in selects and entries: see keysets.py.)"""
