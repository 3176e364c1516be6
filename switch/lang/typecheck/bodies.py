"""Declarations with parameters and a body: functions, actions, parsers and controls.

Each body is checked in its own scope and :class:`~switch.lang.typecheck.context.Context`, which
decides what its statements may do (no ``exit`` in a function, no tables applied in an action...).
Parser and control parameters live in the generated module's globals (``storage="global"``) so
that actions reach them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from switch.lang import ast
from switch.lang import types as T
from switch.lang.desugar import instantiate_direct_calls
from switch.lang.symbols import Scope, Sym
from switch.lang.typecheck.coercion import coerce
from switch.lang.typecheck.context import Context, err
from switch.lang.typecheck.keysets import check_select_keyset
from switch.lang.typecheck.statements import always_returns

if TYPE_CHECKING:
    from switch.lang.typecheck.checker import Checker


def declare_params(
    ck: Checker, params: list[ast.Param], scope: Scope, storage: str, owner: Any
) -> None:
    """Declare ``params`` in ``scope`` (checking their default values)."""
    for p in params:
        pt = ck.resolve_type(p.typ, scope)
        if p.default is not None:
            ck.check_expr(p.default, scope, pt)
            coerce(ck, p.default, pt, "default parameter value")
        sym = Sym(p.name, "param", pt, p, direction=p.direction, storage=storage, owner=owner)
        ck.declare(scope, sym, p)
        p.ref = sym


def check_function(ck: Checker, d: ast.FunctionDecl, scope: Scope) -> None:
    fscope = Scope(scope, owner=d)
    declare_params(ck, d.params, fscope, "local", d)
    ret = ck.resolve_type(d.ret, fscope)
    d.ret_type = ret
    with ck.inside(Context.FUNCTION, ret):
        ck.check_block(d.body, fscope)
    if ret is not T.VOID and not always_returns(d.body):
        raise err(f"function '{d.name}' does not return a value on every path", d)


def check_action(ck: Checker, d: ast.ActionDecl, scope: Scope) -> None:
    ascope = Scope(scope, owner=scope.owner)
    seen_data = False
    for p in d.params:
        if p.direction == "":
            seen_data = True
        elif seen_data:
            raise err("directional action parameters must come before action data parameters", p)
    declare_params(ck, d.params, ascope, "local", d)
    for p in d.params:
        pt = p.sym.type
        assert pt is not None
        if (
            p.direction == ""
            and not T.is_fixed(pt)
            and pt is not T.BOOL
            and not (isinstance(pt, T.EnumT) and pt.underlying is not None)
        ):
            raise err(
                f"action data parameter '{p.name}' must be bit<W>, int<W>, bool or a "
                f"serializable enum, not {pt}",
                p,
            )
    with ck.inside(Context.ACTION):
        ck.check_block(d.body, ascope)


def check_parser(ck: Checker, d: ast.ParserDecl, scope: Scope) -> None:
    pscope = Scope(scope, owner=d)
    declare_params(ck, d.params, pscope, "local", d)
    declare_params(ck, d.ctor_params, pscope, "local", d)
    instantiate_direct_calls(d, pscope)
    for loc in d.locals:
        ck.check_local(loc, pscope, "local")
    names = {s.name for s in d.states}
    seen: set[str] = set()
    for st in d.states:
        if st.name in ("accept", "reject"):
            raise err(f"state '{st.name}' is predefined", st)
        if st.name in seen:
            raise err(f"duplicate state '{st.name}'", st)
        seen.add(st.name)
    if "start" not in names:
        raise err(f"parser '{d.name}' has no 'start' state", d)
    valid_targets = names | {"accept", "reject"}
    with ck.inside(Context.PARSER):
        for st in d.states:
            sscope = Scope(pscope)
            for s in st.stmts:
                ck.check_stmt(s, sscope)
            if st.transition is not None:
                _check_transition(ck, st.transition, valid_targets, sscope)


def _check_transition(ck: Checker, tr: ast.Transition, targets: set[str], scope: Scope) -> None:
    if tr.state is not None:
        if tr.state not in targets:
            raise err(f"unknown parser state '{tr.state}'", tr)
        return
    assert tr.select is not None
    key_types = []
    for e in tr.select:
        kt = ck.check_expr(e, scope)
        if kt is T.INFINT:
            raise err("select expression needs a width", e)
        if isinstance(kt, T.VarbitT):
            raise err(f"cannot select on a {kt} value", e)
        key_types.append(kt)
    for case in tr.cases:
        if case.state not in targets:
            raise err(f"unknown parser state '{case.state}'", case.state_span)
        check_select_keyset(ck, case.keyset, key_types, scope)


def check_control(ck: Checker, d: ast.ControlDecl, scope: Scope) -> None:
    cscope = Scope(scope, owner=d)
    declare_params(ck, d.params, cscope, "global", d)
    declare_params(ck, d.ctor_params, cscope, "global", d)
    instantiate_direct_calls(d, cscope)
    with ck.inside(Context.CONTROL):
        for loc in d.locals:
            ck.check_local(loc, cscope, "global")
        with ck.inside(Context.APPLY):
            ck.check_block(d.body, Scope(cscope))
