"""Statements: one rule per node type (:data:`STATEMENTS`). Assignment targets are places
(:mod:`switch.compile.codegen.places`).

A rule writes lines to the :class:`~switch.compile.codegen.emitter.Emitter` it is given, after the
statements its expressions need (``CodeGen.flush``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from switch.compile.codegen.classes import default_value, is_composite
from switch.compile.codegen.emitter import Emitter, tuple_code
from switch.lang import ast
from switch.lang import types as T

if TYPE_CHECKING:
    from switch.compile.codegen.generator import CodeGen

StmtRule = Callable[["CodeGen", Any, Emitter], None]
"""(generator, statement of the row's type, output)."""


def _block(gen: CodeGen, s: ast.Block, out: Emitter) -> None:
    gen.g_block(s.stmts, out)


def _assign(gen: CodeGen, s: ast.Assign, out: Emitter) -> None:
    # the left side first, to an l-value (P4-16 "Assignment statement"); a compound assignment
    # `a op= b` is parsed as `a = a op b` sharing the node `a`, which is read from the saved
    # l-value instead of being evaluated again
    place = gen.g_place(s.lhs)
    gen.memo[id(s.lhs)] = place.read
    try:
        v = gen.g_expr(s.rhs)
    finally:
        del gen.memo[id(s.lhs)]
    gen.flush(out)
    place.write(v, out)


def _call(gen: CodeGen, s: ast.CallStmt, out: Emitter) -> None:
    inner = Emitter(out.level)
    r = gen.g_call(s.call, want_value=False, out=inner)
    gen.flush(out)
    out.lines.extend(inner.lines)
    if r:
        out.line(r)


def _if(gen: CodeGen, s: ast.If, out: Emitter) -> None:
    c = gen.g_expr(s.cond)
    gen.flush(out)
    out.line(f"if {c}:")
    out.indent()
    gen.g_block([s.then], out)
    out.dedent()
    if s.other is not None:
        out.line("else:")
        out.indent()
        gen.g_block([s.other], out)
        out.dedent()


def _switch(gen: CodeGen, s: ast.Switch, out: Emitter) -> None:
    v = gen.g_expr(s.expr)
    gen.flush(out)
    var = gen.tmp("sw")
    out.line(f"{var} = {v}")
    st = s.expr.type
    groups: list[tuple[list[ast.Expr], ast.Block]] = []
    pending: list[ast.Expr] = []
    for c in s.cases:
        pending.extend(c.labels)
        if c.body is not None:
            groups.append((pending, c.body))
            pending = []
    first = True
    for labels, body in groups:
        conds = []
        is_default = False
        for lbl in labels:
            if isinstance(lbl, ast.Default):
                is_default = True
            elif isinstance(st, T.ActionRunT):
                assert isinstance(lbl, ast.Name)
                fq = gen.table_inst(st.table).action_fq[id(lbl.ref)]
                conds.append(f"{var} == {fq!r}")
            else:
                conds.append(f"{var} == {gen.g_expr(lbl)}")
        if is_default:
            out.line("if True:" if first else "else:")
        else:
            out.line(("if " if first else "elif ") + " or ".join(conds) + ":")
        out.indent()
        gen.g_block(body.stmts, out)
        out.dedent()
        first = False


def _for(gen: CodeGen, s: ast.For, out: Emitter) -> None:
    # init; then `while True` whose first step (skipped on the first pass) is the update, so
    # that `continue` (Python's, to the top of the loop) runs the update as P4 says
    gen.g_block(list(s.init), out)
    again = gen.tmp("again") if s.update else None
    if again is not None:
        out.line(f"{again} = False")
    out.line("while True:")
    out.indent()
    if again is not None:
        out.line(f"if {again}:")
        out.indent()
        gen.g_block(list(s.update), out)
        out.dedent()
        out.line(f"{again} = True")
    c = gen.g_expr(s.cond)
    gen.flush(out)
    if c != "True":
        out.line(f"if not {c}: break")
    gen.g_block([s.body], out)
    out.dedent()


def _for_in(gen: CodeGen, s: ast.ForIn, out: Emitter) -> None:
    name = gen.var_name(s.var.sym)
    coll = s.collection
    if isinstance(coll, ast.Range):
        # both bounds are evaluated once, before the first iteration
        lo, hi = gen.tmp("lo"), gen.tmp("hi")
        lv = gen.g_expr(coll.lo)
        gen.flush(out)
        out.line(f"{lo} = {lv}")
        hv = gen.g_expr(coll.hi)
        gen.flush(out)
        out.line(f"{hi} = {hv}")
        out.line(f"for {name} in range({lo}, {hi} + 1):")
        out.indent()
    else:
        v = gen.g_expr(coll)
        gen.flush(out)
        item = gen.tmp("it")
        out.line(f"for {item} in {v}.items:")
        out.indent()
        out.line(f"{name} = {item}.copy()")  # the loop variable is a copy of the element
    gen.g_block([s.body], out)
    out.dedent()


def _break(gen: CodeGen, s: ast.Break, out: Emitter) -> None:
    out.line("break")


def _continue(gen: CodeGen, s: ast.Continue, out: Emitter) -> None:
    out.line("continue")


def _exit(gen: CodeGen, s: ast.Exit, out: Emitter) -> None:
    out.line("raise _ExitSignal()")


def _return(gen: CodeGen, s: ast.Return, out: Emitter) -> None:
    parts = []
    if s.value is not None:
        parts.append(gen.g_expr(s.value))
        gen.flush(out)
    fn = gen.fn
    parts.extend(fn.outs)
    if fn.kind in ("action", "function") and (fn.has_ret or fn.outs):
        if fn.has_ret and not fn.outs:
            out.line(f"return {parts[0]}")
        else:
            out.line("return " + tuple_code(parts))
    else:
        out.line("return")


def _variable(gen: CodeGen, s: ast.VarDecl, out: Emitter) -> None:
    sym = s.sym
    name = gen.var_name(sym)
    t = sym.type
    if s.init is None:
        out.line(f"{name} = {default_value(t, gen)}")
        return
    v = gen.g_expr(s.init)
    gen.flush(out)
    if is_composite(t):
        out.line(f"{name} = {default_value(t, gen)}")
        out.line(f"{name}._set({v})")
    else:
        out.line(f"{name} = {v}")


def _nothing(gen: CodeGen, s: ast.Stmt, out: Emitter) -> None:
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
    ast.Continue: _continue,
    ast.VarDecl: _variable,
    ast.ConstDecl: _nothing,  # constants are folded where they are used
    ast.Empty: _nothing,
}
"""Every statement node type: its rule."""
