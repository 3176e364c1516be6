"""Parsers, controls and tables as Python functions.

A parser is ``P_<instance>(params)``: a ``while`` loop over state numbers, whose transitions are
``if`` chains over the select keys (:data:`KEYSETS` has the keyset forms). A control is
``C_<instance>(params)``; its parameters and locals are module globals so that its actions reach
them. A table is ``T_<table>()``: it builds the key, looks it up in the runtime table ``TBL_...``
and calls the action through the dispatch dict ``D_...`` (action name -> function of the action
data); it returns ``(hit, action name)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from switch.compile.codegen.callables import FnCtx, action_fn, emit_function
from switch.compile.codegen.calls import bind_args, invoke
from switch.compile.codegen.classes import is_composite
from switch.compile.codegen.emitter import Emitter, mask, tuple_code
from switch.compile.elaborate import BlockInst, TableInst
from switch.errors import UnsupportedError
from switch.lang import ast
from switch.lang import types as T
from switch.lang.symbols import Sym

if TYPE_CHECKING:
    from switch.compile.codegen.generator import CodeGen


def _is_top_level(gen: CodeGen, inst: BlockInst) -> bool:
    """Whether ``inst`` is one of the architecture's blocks (it passes fresh objects to them)."""
    return any(inst is b for b in gen.elab.blocks.values())


# -- parsers -----------------------------------------------------------------------------------


def gen_parser(gen: CodeGen, inst: BlockInst) -> None:
    decl = inst.decl
    assert isinstance(decl, ast.ParserDecl)
    gen.inst = inst
    pkt = "pkt"
    outs = []
    for p in decl.params:
        pt = p.sym.type
        if isinstance(pt, T.ExternT) and pt.decl.name == "packet_in":
            pkt = p.sym.pyname
        elif p.direction in ("out", "inout") and not is_composite(pt):
            outs.append(p.sym.pyname)
    gen.fn = FnCtx("parser", outs, False, pkt=pkt)
    e = Emitter(1)
    top_level = _is_top_level(gen, inst)
    for p in decl.params:
        pt = p.sym.type
        if p.direction == "out" and is_composite(pt) and not top_level:
            # 'out' starts uninitialized (headers invalid); the architecture already passes
            # fresh objects to the top-level blocks
            e.line(f"{p.sym.pyname}._set({gen.class_of(pt)}())")
    for p, v in inst.ctor_values:
        e.line(f"{p.sym.pyname} = {gen.const_repr(v)}")
    for loc in decl.locals:
        if isinstance(loc, ast.VarDecl):
            gen.g_stmt(loc, e)
    state_ids = {s.name: i for i, s in enumerate(decl.states)}
    e.line(f"_st = {state_ids['start']}")
    guard = bool(outs) and not top_level
    if guard:
        # a sub-parser that rejects still copies its outs back (to its caller's saved l-values)
        e.line("try:")
        e.indent()
    e.line("while True:")
    e.indent()
    for i, st in enumerate(decl.states):
        e.line(("if" if i == 0 else "elif") + f" _st == {i}:  # state {st.name}")
        e.indent()
        for s in st.stmts:
            gen.g_stmt(s, e)
        _transition(gen, st.transition, state_ids, e)
        e.dedent()
    e.dedent()
    if guard:
        e.dedent()
        e.line("except _ParserError as _x:")
        e.line("    _x.outs = " + tuple_code(outs))
        e.line("    raise")
    if outs:
        e.line("return " + tuple_code(outs))
    emit_function(gen, f"P_{inst.py}({', '.join(p.sym.pyname for p in decl.params)})", e)
    gen.inst = None


def _goto(state: str, ids: dict[str, int]) -> str:
    if state == "accept":
        return "break"
    if state == "reject":
        return "raise _ParserError(-1)"
    return f"_st = {ids[state]}; continue"


def _transition(gen: CodeGen, tr: ast.Transition | None, ids: dict[str, int], e: Emitter) -> None:
    if tr is None:
        e.line(_goto("reject", ids))
        return
    if tr.state is not None:
        e.line(_goto(tr.state, ids))
        return
    assert tr.select is not None
    keys = [gen.g_expr(x) for x in tr.select]
    gen.flush(e)
    kvars = []
    for k in keys:
        kv = gen.tmp("k")
        e.line(f"{kv} = {k}")
        kvars.append(kv)
    first = True
    for case in tr.cases:
        cond = _keyset_cond(gen, case.keyset, kvars)
        gen.flush(e)
        if cond == "True":
            e.line("if True:" if first else "else:")
        else:
            e.line(("if " if first else "elif ") + cond + ":")
        e.indent()
        e.line(_goto(case.state, ids))
        e.dedent()
        first = False
        if cond == "True":
            break
    else:
        e.line(f"raise _ParserError({gen.err_code('NoMatch')})")


def _keyset_cond(gen: CodeGen, ks: ast.Expr, kvars: list[str]) -> str:
    """The condition under which the select keys ``kvars`` match the keyset ``ks``."""
    if isinstance(ks, ast.Name) and isinstance(ks.ref, Sym) and ks.ref.kind == "value_set":
        vs = _value_set_py(gen, ks.ref)
        return f"{vs}.contains({tuple_code(kvars)})"
    if len(kvars) > 1:
        items = ks.items if isinstance(ks, ast.ListExpr) else None
        if items is None:
            if isinstance(ks, (ast.Default, ast.DontCare)):
                return "True"
            raise UnsupportedError("tuple keyset", ks.span)
        conds = [_simple_keyset_cond(gen, i, k) for i, k in zip(items, kvars)]
        conds = [c for c in conds if c != "True"]
        return " and ".join(conds) if conds else "True"
    if isinstance(ks, ast.ListExpr):
        ks = ks.items[0]
    return _simple_keyset_cond(gen, ks, kvars[0])


def _mask_cond(gen: CodeGen, ks: ast.Mask, k: str) -> str:
    v, m = gen.g_expr(ks.value), gen.g_expr(ks.mask)
    return f"({k} & {m}) == ({v} & {m})"


def _range_cond(gen: CodeGen, ks: ast.Range, k: str) -> str:
    return f"{gen.g_expr(ks.lo)} <= {k} <= {gen.g_expr(ks.hi)}"


KEYSETS: dict[type[ast.Expr], Callable[[CodeGen, Any, str], str]] = {
    ast.Default: lambda gen, ks, k: "True",
    ast.DontCare: lambda gen, ks, k: "True",
    ast.Mask: _mask_cond,
    ast.Range: _range_cond,
}
"""Keyset forms with their own condition; any other expression is a value the key must equal."""


def _simple_keyset_cond(gen: CodeGen, ks: ast.Expr, k: str) -> str:
    rule = KEYSETS.get(type(ks))
    if rule is not None:
        return rule(gen, ks, k)
    return f"{k} == {gen.g_expr(ks)}"


def _value_set_py(gen: CodeGen, sym: Sym) -> str:
    fq = gen.elab.value_sets[id(sym.decl)]
    py = "VS_" + "".join(c if c.isalnum() else "_" for c in fq)
    gen.bindings[py] = ("value_set", fq)
    return py


# -- controls ----------------------------------------------------------------------------------


def gen_control(gen: CodeGen, inst: BlockInst) -> None:
    decl = inst.decl
    assert isinstance(decl, ast.ControlDecl)
    gen.inst = inst
    gen.fn = FnCtx("control")
    e = Emitter(1)
    top_level = _is_top_level(gen, inst)
    pnames = []
    for p in decl.params:
        sym = p.sym
        g = gen.var_name(sym)
        if isinstance(sym.type, T.ExternT) and sym.type.decl.name == "packet_out":
            gen.fn.pkt = g
        pnames.append(sym.pyname)
        pt = sym.type
        if p.direction == "out" and is_composite(pt) and not top_level:
            e.line(f"{sym.pyname}._set({gen.class_of(pt)}())")
        e.line(f"{g} = {sym.pyname}")
    for loc in decl.locals:
        if isinstance(loc, ast.VarDecl):
            gen.g_stmt(loc, e)
    gen.g_block(decl.body.stmts, e)
    for p, v in inst.ctor_values:
        gen.function_defs.append(f"{gen.var_name(p.sym)} = {gen.const_repr(v)}\n")
    emit_function(gen, f"C_{inst.py}({', '.join(pnames)})", e)
    for ti in inst.tables.values():
        _gen_table(gen, ti, inst)
    gen.inst = None


# -- tables ------------------------------------------------------------------------------------


def _gen_table(gen: CodeGen, ti: TableInst, inst: BlockInst) -> None:
    d = ti.decl
    spec = ti.spec
    assert spec is not None
    gen.inst = inst
    gen.fn = FnCtx("control")
    gen.pre = []
    e = Emitter(1)
    kp = d.prop("key")
    match_keys: list[str] = []
    sel_keys: list[str] = []
    for k in kp.keys if kp is not None and kp.keys else []:
        v = gen.g_expr(k.expr)
        kt = k.expr.type
        if kt is T.BOOL:
            v = f"int({v})"
        elif isinstance(kt, T.IntT):
            v = f"({v} & {mask(kt.width)})"
        (sel_keys if k.match_kind == "selector" else match_keys).append(v)
    gen.flush(e)
    tbl = f"TBL_{ti.py}"
    gen.bindings[tbl] = ("table", ti.fqname)
    key = tuple_code(match_keys)
    if sel_keys:
        e.line(f"_e, _a, _args = {tbl}.lookup({key}, {tuple_code(sel_keys)})")
    else:
        e.line(f"_e, _a, _args = {tbl}.lookup({key})")
    if spec.direct_counter or spec.direct_meter:
        e.line("if _e is not None:")
        e.indent()
        if spec.direct_counter:
            e.line("_e.packets += 1")
            e.line("_e.bytes += _rt.pkt_len")
        if spec.direct_meter:
            dm = f"DM_{ti.py}"
            gen.bindings[dm] = ("direct_meter", spec.direct_meter)
            e.line(f"_rt.dm_color = {dm}.execute(_e, _rt.now_us, _rt.pkt_len)")
        e.dedent()
        if spec.direct_meter:
            e.line("else:")
            e.line("    _rt.dm_color = 0")
    dispatch = f"D_{ti.py}"
    e.line(f"{dispatch}[_a](*_args)")
    e.line("return (_e is not None, _a)")
    emit_function(gen, f"T_{ti.py}()", e)
    # dispatch table: action name -> function taking the action data
    ap = d.prop("actions")
    assert ap is not None and ap.actions is not None
    entries = []
    for i, (ref, adecl) in enumerate(zip(ap.actions, d.action_decls)):
        fq = ti.action_fq[id(adecl)]
        fn = _action_wrapper(gen, ti, i, ref, adecl)
        entries.append(f"{fq!r}: {fn}")
    if spec.default_action.name not in ti.action_fq.values():
        # implicit `default_action = NoAction()` of a table that does not list it
        entries.append(f"{spec.default_action.name!r}: _noop")
    gen.dispatch_defs.append(f"{dispatch} = {{{', '.join(entries)}}}\n")
    gen.inst = None


def _action_wrapper(
    gen: CodeGen, ti: TableInst, i: int, ref: ast.ActionRefSyntax, adecl: ast.ActionDecl
) -> str:
    """The function the table calls with the action data; binds directional arguments."""
    fn = action_fn(gen, adecl)
    dir_params = [p for p in adecl.params if p.direction]
    data_params = [p for p in adecl.params if not p.direction]
    needs_conv = any(p.sym.type is T.BOOL or isinstance(p.sym.type, T.IntT) for p in data_params)
    if not dir_params and not needs_conv:
        return fn
    name = f"W_{ti.py}_{i}"
    saved = (gen.fn, gen.pre)
    gen.fn = FnCtx("control")
    gen.pre = []
    e = Emitter(1)
    info = ref.call_info
    assert info is not None
    args, outs = bind_args(gen, info, gen.effects.globals_reached(adecl), ref.args)
    dnames = [f"d{j}" for j in range(len(data_params))]
    for p, dn in zip(data_params, dnames):
        pt = p.sym.type
        if pt is T.BOOL:
            args.append(f"bool({dn})")
        elif isinstance(pt, T.IntT):
            args.append(f"_to_signed({dn}, {pt.width})")
        else:
            args.append(dn)
    gen.flush(e)
    scalars = [o for o in outs if o.temp is None]
    invoke(
        gen,
        f"{fn}({', '.join(args)})",
        outs,
        lambda o: f"_r[{o.slot}]",
        "_r" if scalars else None,
        gen.effects.may_exit(adecl),
        e,
    )
    emit_function(gen, f"{name}({', '.join(dnames)})", e)
    gen.fn, gen.pre = saved
    return name
