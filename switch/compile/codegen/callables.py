"""Actions and functions as Python functions, generated on their first use.

An action declared in a control is generated once per control instance (it reaches that
instance's globals); a top-level action or a function once per program. Scalar ``out`` and
``inout`` parameters are returned as a tuple (after the return value of a function), and
attached to the ``_ExitSignal`` as ``outs`` when the body may ``exit``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from switch.compile.codegen.classes import default_value, is_composite
from switch.compile.codegen.emitter import Emitter, tuple_code
from switch.compile.elaborate import BlockInst
from switch.lang import ast
from switch.lang import types as T

if TYPE_CHECKING:
    from switch.compile.codegen.generator import CodeGen


@dataclass
class FnCtx:
    """What the generator knows about the Python function it is emitting."""

    kind: str  # 'action' | 'function' | 'control' | 'parser'
    outs: list[str] = field(default_factory=list)  # Python names of scalar out/inout params
    has_ret: bool = False
    pkt: str = "pkt"  # Python name of the packet_in / packet_out object
    globals: set[str] = field(default_factory=set)  # module globals it assigns


def action_fn(gen: CodeGen, decl: ast.ActionDecl) -> str:
    """The Python function of an action in the current instance (generated on demand)."""
    inst = gen.inst
    owner = inst if inst is not None and any(loc is decl for loc in inst.decl.locals) else None
    if owner is not None:
        name = f"A_{owner.py}__{decl.name}"
    else:
        name = gen.callable_name("A", decl)
    if name not in gen.generated_actions:
        gen.generated_actions.add(name)
        _gen_callable(gen, name, decl.params, decl.body, "action", False, owner, decl)
    return name


def function_fn(gen: CodeGen, decl: ast.FunctionDecl) -> str:
    """The Python function of a function (generated on demand)."""
    name = gen.callable_name("F", decl)
    if id(decl) not in gen.generated_functions:
        gen.generated_functions.add(id(decl))
        has_ret = decl.ret_type is not T.VOID
        _gen_callable(gen, name, decl.params, decl.body, "function", has_ret, None, decl)
    return name


def _gen_callable(
    gen: CodeGen,
    name: str,
    params: list[ast.Param],
    body: ast.Block,
    kind: str,
    has_ret: bool,
    inst: BlockInst | None,
    decl: ast.ActionDecl | ast.FunctionDecl,
) -> None:
    saved = (gen.inst, gen.fn, gen.pre)
    gen.inst = inst
    outs = [
        p.sym.pyname
        for p in params
        if p.direction in ("out", "inout") and not is_composite(p.sym.type)
    ]
    gen.fn = FnCtx(kind, outs, has_ret)
    gen.pre = []
    e = Emitter(1)
    for p in params:
        if p.direction != "out":
            continue
        if is_composite(p.sym.type):
            # an `out` header, union or stack starts invalid (P4-16 "Calling convention")
            e.line(f"{p.sym.pyname}._set({gen.class_of(p.sym.type)}())")
        else:
            e.line(f"{p.sym.pyname} = {default_value(p.sym.type, gen)}")
    guard = bool(outs) and gen.effects.may_exit(decl)
    if guard:
        # on `exit` the caller still copies the outs back: hand them over with the signal
        e.line("try:")
        e.indent()
    gen.g_block(body.stmts, e)
    if guard:
        e.dedent()
        e.line("except _ExitSignal as _x:")
        e.line("    _x.outs = " + tuple_code((["None"] if has_ret else []) + outs))
        e.line("    raise")
    if outs:
        e.line("return " + tuple_code(outs))
    emit_function(gen, f"{name}({', '.join(p.sym.pyname for p in params)})", e)
    gen.inst, gen.fn, gen.pre = saved


def emit_function(gen: CodeGen, signature: str, body: Emitter) -> None:
    """Add ``def <signature>:`` with ``body`` (and the globals it assigns) to the module."""
    lines = [f"def {signature}:"]
    if gen.fn.globals:
        lines.append("    global " + ", ".join(sorted(gen.fn.globals)))
    lines.extend(body.lines)
    gen.function_defs.append("\n".join(lines) + "\n")
