"""Statements: one rule per node type (:data:`STATEMENTS`), and the "does it always return" rule.

Blocks, ``if`` branches and switch cases open a new scope; declarations in statement position are
checked as local declarations (``Checker.check_local``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from switch.lang import ast
from switch.lang import types as T
from switch.lang.symbols import Scope
from switch.lang.typecheck.coercion import coerce
from switch.lang.typecheck.context import Context, err
from switch.lang.typecheck.lvalues import check_lvalue

if TYPE_CHECKING:
    from switch.lang.typecheck.checker import Checker

StmtRule = Callable[["Checker", Any, Scope], None]
"""(checker, statement of the row's type, scope)."""


def _block(ck: Checker, s: ast.Block, scope: Scope) -> None:
    ck.check_block(s, Scope(scope))


def _assign(ck: Checker, s: ast.Assign, scope: Scope) -> None:
    lt = ck.check_expr(s.lhs, scope)
    check_lvalue(s.lhs)
    ck.check_expr(s.rhs, scope, lt)
    coerce(ck, s.rhs, lt, "assignment")


def _call(ck: Checker, s: ast.CallStmt, scope: Scope) -> None:
    ck.check_expr(s.call, scope)


def _if(ck: Checker, s: ast.If, scope: Scope) -> None:
    ck.check_expr(s.cond, scope, T.BOOL)
    coerce(ck, s.cond, T.BOOL, "if condition")
    ck.check_stmt(s.then, Scope(scope))
    if s.other is not None:
        ck.check_stmt(s.other, Scope(scope))


def _switch(ck: Checker, s: ast.Switch, scope: Scope) -> None:
    st = ck.check_expr(s.expr, scope)
    seen: set[Any] = set()
    for i, case in enumerate(s.cases):
        for label in case.labels:
            if isinstance(label, ast.Default):
                if i != len(s.cases) - 1:
                    raise err("'default' must be the last switch case", label)
                continue
            if isinstance(st, T.ActionRunT):
                key: Any = _action_label(label, st)
            else:
                if not (T.is_fixed(st) or isinstance(st, T.EnumT) or st is T.ERROR):
                    raise err(f"cannot switch on a value of type {st}", s.expr)
                ck.check_expr(label, scope, st)
                coerce(ck, label, st, "switch label")
                key = ck.eval_const(label)
            if key in seen:
                raise err("duplicate switch label", label)
            seen.add(key)
        if case.body is not None:
            ck.check_block(case.body, Scope(scope))
        elif i == len(s.cases) - 1:
            raise err("the last switch case needs a body", case)


def _action_label(label: ast.Expr, st: T.ActionRunT) -> str:
    """A label of a switch on ``t.apply().action_run``: an action of the table."""
    if not isinstance(label, ast.Name):
        raise err("switch on action_run needs action names as labels", label)
    acts = {a.name: a for a in st.table.action_decls}
    if label.name not in acts:
        raise err(f"'{label.name}' is not an action of table '{st.table.name}'", label)
    label.ref = acts[label.name]
    return label.name


def _for(ck: Checker, s: ast.For, scope: Scope) -> None:
    _no_loop_in_parser(ck, s)
    lscope = Scope(scope)  # the loop's own variables
    for st in s.init:
        ck.check_stmt(st, lscope)
    ck.check_expr(s.cond, lscope, T.BOOL)
    coerce(ck, s.cond, T.BOOL, "for condition")
    for st in s.update:
        if isinstance(st, (ast.VarDecl, ast.ConstDecl)):
            raise err("the update part of a for loop cannot declare a variable", st)
        ck.check_stmt(st, lscope)
    _loop_body(ck, s.body, lscope)


def _for_in(ck: Checker, s: ast.ForIn, scope: Scope) -> None:
    _no_loop_in_parser(ck, s)
    lscope = Scope(scope)
    vt = ck.resolve_type(s.var.typ, scope)
    where = s.var
    coll = s.collection
    if isinstance(coll, ast.Range):
        if not T.is_fixed(vt):
            raise err(f"a for loop over a range needs a bit<W> or int<W> variable, not {vt}", where)
        for end in (coll.lo, coll.hi):
            ck.check_expr(end, scope, vt)
            coerce(ck, end, vt, "range bound")
    else:
        ct = ck.check_expr(coll, scope)
        if not isinstance(ct, T.StackT):
            raise err(
                f"a for loop can iterate over a range (a .. b) or a header stack, not {ct}", coll
            )
        if not T.same_type(ct.elem, vt) and not (isinstance(vt, T.StructLikeT) and vt is ct.elem):
            raise err(f"loop variable of type {vt} over a stack of {ct.elem}", where)
    ck.check_local(s.var, lscope, "local")
    _loop_body(ck, s.body, lscope)


def _no_loop_in_parser(ck: Checker, s: ast.Stmt) -> None:
    if ck.context is Context.PARSER:
        # P4-16's grammar has no for statement among a parser state's statements
        raise err("for loops are not allowed in a parser state", s)


def _loop_body(ck: Checker, body: ast.Stmt, scope: Scope) -> None:
    ck.loop_depth += 1
    try:
        ck.check_stmt(body, Scope(scope))
    finally:
        ck.loop_depth -= 1


def _break(ck: Checker, s: ast.Break | ast.Continue, scope: Scope) -> None:
    if ck.loop_depth == 0:
        word = "break" if isinstance(s, ast.Break) else "continue"
        raise err(f"'{word}' outside a for loop", s)


def _exit(ck: Checker, s: ast.Exit, scope: Scope) -> None:
    if ck.context in (Context.PARSER, Context.FUNCTION):
        raise err("'exit' is not allowed here", s)


def _return(ck: Checker, s: ast.Return, scope: Scope) -> None:
    ret = ck.ret_stack[-1] if ck.ret_stack else None
    if s.value is not None:
        if ret is None or ret is T.VOID:
            raise err("this 'return' cannot return a value", s)
        ck.check_expr(s.value, scope, ret)
        coerce(ck, s.value, ret, "return value")
    elif ret is not None and ret is not T.VOID:
        raise err(f"'return' needs a value of type {ret}", s)
    if ck.context is Context.PARSER:
        raise err("'return' is not allowed in a parser", s)


def _declaration(ck: Checker, s: ast.VarDecl | ast.ConstDecl, scope: Scope) -> None:
    ck.check_local(s, scope, "local")


def _empty(ck: Checker, s: ast.Empty, scope: Scope) -> None:
    return None


STATEMENTS: dict[type[ast.Stmt], StmtRule] = {
    ast.Block: _block,
    ast.Assign: _assign,
    ast.CallStmt: _call,
    ast.If: _if,
    ast.Switch: _switch,
    ast.Exit: _exit,
    ast.Return: _return,
    ast.For: _for,
    ast.ForIn: _for_in,
    ast.Break: _break,
    ast.Continue: _break,
    ast.VarDecl: _declaration,
    ast.ConstDecl: _declaration,
    ast.Empty: _empty,
}
"""Every statement node type: its rule."""


def always_returns(s: ast.Stmt) -> bool:
    """Whether every path through ``s`` ends in ``return`` or ``exit``."""
    if isinstance(s, (ast.Return, ast.Exit)):
        return True
    if isinstance(s, ast.Block):
        return any(always_returns(x) for x in s.stmts)
    if isinstance(s, ast.If):
        return s.other is not None and always_returns(s.then) and always_returns(s.other)
    if isinstance(s, ast.Switch):
        return any(isinstance(lbl, ast.Default) for c in s.cases for lbl in c.labels) and all(
            c.body is None or always_returns(c.body) for c in s.cases
        )
    return False
