"""Calls: one rule per call kind (:data:`CALLS`), one per packet method (:data:`PACKET_METHODS`).

Extern functions and extern object methods are the architecture's: their rows look the callee
up in the :class:`~switch.compile.codegen.generator.ExternEmitters` the compile driver gave the
generator. Actions and functions are Python functions (generated on first call); their scalar
``out``/``inout`` arguments come back as a tuple that the caller writes back (:func:`bind_args`
and :func:`invoke` implement the calling convention for every kind of call).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from switch.compile.codegen.callables import action_fn, function_fn
from switch.compile.codegen.classes import default_value, flat_fields, is_composite
from switch.compile.codegen.effects import overlap, root_symbol, storage_path
from switch.compile.codegen.emitter import Emitter, mask
from switch.compile.codegen.places import Place, is_path, saved_object
from switch.errors import UnsupportedError
from switch.lang import ast
from switch.lang import types as T
from switch.lang.preprocess import SYSTEM_INCLUDE_DIR
from switch.lang.symbols import CallInfo, StackProperty, Sym
from switch.lang.types import CallKind

if TYPE_CHECKING:
    from switch.compile.codegen.generator import CodeGen


CallRule = Callable[["CodeGen", ast.Call, CallInfo, Emitter, bool], "str | None"]
"""(generator, call, call info, output, whether the value is used) -> code of the value."""


def _header_method(
    gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter, want_value: bool
) -> str | None:
    target = info.target
    union = _union_of(target)
    if union is not None:
        u = saved_object(gen, union)
        assert isinstance(target, ast.Member)
        h = f"{u}.f_{target.name}"
    else:
        h = gen.g_expr(target)
    if info.name == "isValid":
        return f"{h}._v"
    if info.name == "setValid":
        if union is not None:
            _invalidate_siblings(u, union, h, out)
        out.line(f"{h}._v = True")
    else:
        out.line(f"{h}._v = False")
    return None


def _union_of(target: ast.Expr) -> ast.Expr | None:
    """The header union ``target`` is a member of, if it is one."""
    if (
        isinstance(target, ast.Member)
        and isinstance(target.expr.type, T.StructLikeT)
        and target.expr.type.kind == "header_union"
    ):
        return target.expr
    return None


def _invalidate_siblings(u: str, union: ast.Expr, member: str, out: Emitter) -> None:
    """Making a member of a header union valid makes the other members invalid."""
    ut = union.type
    assert isinstance(ut, T.StructLikeT)
    for n in ut.fields:
        if f"{u}.f_{n}" != member:
            out.line(f"{u}.f_{n}._v = False")


def _stack_method(
    gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter, want_value: bool
) -> str | None:
    s = gen.g_expr(info.target)
    fn = "_push_front" if info.name == "push_front" else "_pop_front"
    out.line(f"{fn}({s}, {info.args[0]})")
    return None


def _size_method(
    gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter, want_value: bool
) -> str | None:
    if info.args[0] is None:  # sizeInBits/sizeInBytes of a header with a varbit field
        n = f"{gen.g_expr(info.target)}._nbits()"
        return n if info.name.endswith("Bits") else f"(({n} + 7) // 8)"
    return repr(info.args[0])


def _table_apply(
    gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter, want_value: bool
) -> str | None:
    return f"T_{gen.table_inst(info.decl).py}()"


# -- actions, functions, blocks ----------------------------------------------------------------


def arg_value(gen: CodeGen, p: ast.Param, pt: T.Type | None, a: ast.Expr | None) -> str:
    """Code for the argument ``a`` of parameter ``p`` (its default if omitted)."""
    if a is None:
        if p.default is not None:
            return gen.g_expr(p.default)
        return default_value(pt, gen)
    v = gen.g_expr(a)
    if p.direction in ("", "in") and is_composite(pt):
        return f"{v}.copy()"
    return v


@dataclass(frozen=True)
class CopyOut:
    """An ``out``/``inout`` argument to copy back after the call: its saved l-value, and the
    temporary passed in its place (None for a scalar, which the callee returns)."""

    place: Place
    param: ast.Param
    temp: str | None
    slot: int = -1  # a scalar's position among the callee's scalar out/inout parameters


def _is_literal(code: str) -> bool:
    return code.lstrip("-").isdigit() or code in ("True", "False")


def _is_packet(pt: T.Type | None) -> bool:
    return isinstance(pt, T.ExternT) and pt.decl.name in ("packet_in", "packet_out")


def textual_order(info: CallInfo, call_args: list[ast.Arg] | None) -> list[int]:
    """Parameter indices in the order their arguments appear in the call (named arguments may
    come in any order); omitted ones (defaults) last."""
    n = len(info.params)
    if not call_args:
        return list(range(n))
    position = {id(a): j for j, a in enumerate(info.args) if a is not None}
    order = [position[id(a.value)] for a in call_args if id(a.value) in position]
    return order + [j for j in range(n) if j not in order]


def bind_args(
    gen: CodeGen,
    info: CallInfo,
    reached: frozenset[int],
    call_args: list[ast.Arg] | None = None,
) -> tuple[list[str], list[CopyOut]]:
    """The P4-16 calling convention up to the call ("Calling convention: call by copy in /
    copy out"): arguments evaluated left to right as written (``call_args``, the call's own
    arguments, give that order when some are named), the l-value of each ``out``/``inout``
    argument saved before the next argument is evaluated, values read before the side effects
    of later arguments. Returns the code passed for each parameter (in parameter order) and
    what to copy back (left to right as written).

    A composite ``out``/``inout`` argument is passed by reference (the callee updates it in
    place) unless that could differ from copy-in/copy-out: when the callee names the same
    storage (``reached``: the control-level symbols it uses), when another such argument shares
    its storage, or when a later argument has side effects. Then a copy is passed and copied
    back after the call.
    """
    triples = list(zip(info.params, info.param_types, info.args))
    # the storage of every out/inout argument, to find arguments that share it
    paths = {
        i: storage_path(a)
        for i, (p, _pt, a) in enumerate(triples)
        if a is not None and p.direction in ("out", "inout")
    }
    # a scalar's position in the callee's returned tuple of scalar out/inout parameters
    slots: dict[int, int] = {}
    for i, (p, pt, _a) in enumerate(triples):
        if p.direction in ("out", "inout") and not is_composite(pt):
            slots[i] = len(slots)
    order = [i for i in textual_order(info, call_args) if i < len(triples)]
    evaluated: dict[int, tuple[str, list[str], Place | None, bool]] = {}
    for i in order:
        p, pt, a = triples[i]
        saved = gen.pre
        gen.pre = []
        place: Place | None = None
        copy = False
        if _is_packet(pt):
            v = gen.fn.pkt
        elif p.direction in ("out", "inout") and a is not None:
            place = gen.g_place(a)
            if is_composite(pt):
                r = root_symbol(a)
                copy = (
                    r is None
                    or id(r) in reached
                    or any(j != i and overlap(paths[i], q) for j, q in paths.items())
                )
                v = place.read
            else:
                v = place.read if p.direction == "inout" else default_value(pt, gen)
        else:
            v = arg_value(gen, p, pt, a)
        effects, gen.pre = gen.pre, saved
        evaluated[i] = (v, effects, place, copy)
    values = [""] * len(triples)
    outs: list[CopyOut] = []
    for k, i in enumerate(order):
        p, pt, _a = triples[i]
        v, effects, place, copy = evaluated[i]
        gen.pre.extend(effects)
        later = any(evaluated[j][1] for j in order[k + 1 :])
        if place is not None and is_composite(pt):
            if copy or later:
                t = gen.tmp("a")
                init = f"{v}.copy()" if p.direction == "inout" else f"{gen.class_of(pt)}()"
                gen.pre.append(f"{t} = {init}")
                outs.append(CopyOut(place, p, t))
                v = t
        else:
            if later and not _is_literal(v) and not _is_packet(pt):
                t = gen.tmp("a")
                gen.pre.append(f"{t} = {v}")
                v = t
            if place is not None:
                outs.append(CopyOut(place, p, None, slots[i]))
        values[i] = v
    return values, outs


def invoke(
    gen: CodeGen,
    call: str,
    outs: list[CopyOut],
    source: Callable[[CopyOut], str],
    result: str | None,
    may_exit: bool,
    out: Emitter,
    signal: str = "_ExitSignal",
) -> None:
    """Emit ``call`` (assigned to ``result`` if given), then copy the ``outs`` back to their
    saved l-values from ``source(out)``, on return and on ``exit`` alike (P4-16 "Exit
    statement"). A callee that may exit attaches its scalar outs to the ``_ExitSignal`` as
    ``outs``, laid out as its return value; a sub-parser that rejects does the same with its
    ``_ParserError`` (``signal``)."""
    line = f"{result} = {call}" if result else call
    if may_exit and outs:
        out.line("try:")
        out.line(f"    {line}")
        out.line(f"except {signal} as _x:")
        out.indent()
        if result and any(o.temp is None for o in outs):
            out.line(f"{result} = _x.outs")
        _copy_back(outs, source, out)
        out.line("raise")
        out.dedent()
    else:
        out.line(line)
    _copy_back(outs, source, out)


def _copy_back(outs: list[CopyOut], source: Callable[[CopyOut], str], out: Emitter) -> None:
    for o in outs:
        o.place.write(o.temp if o.temp is not None else source(o), out)


def scalar_outs(info: CallInfo) -> list[tuple[ast.Param, ast.Expr | None]]:
    """(parameter, argument) of the scalar out/inout parameters: returned by the callee."""
    return [
        (p, a)
        for p, pt, a in zip(info.params, info.param_types, info.args)
        if p.direction in ("out", "inout") and not is_composite(pt)
    ]


def _direct_call(
    gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter, want_value: bool
) -> str | None:
    decl = info.decl
    fname = action_fn(gen, decl) if info.kind is CallKind.ACTION else function_fn(gen, decl)
    args, outs = bind_args(gen, info, gen.effects.globals_reached(decl), e.args)
    has_ret = info.kind is CallKind.FUNCTION and decl.ret_type is not T.VOID
    call = f"{fname}({', '.join(args)})"
    if not outs:
        if has_ret and want_value:
            # every out argument discarded (`_`): the callee still returns its scalar outs
            return f"{call}[0]" if scalar_outs(info) else call
        out.line(call)
        return None
    # the callee returns (value, scalar outs...) when it has scalar outs, else its value
    scalars = [o for o in outs if o.temp is None]
    base = 1 if has_ret else 0
    r = gen.tmp("r") if scalars or has_ret else None
    invoke(
        gen,
        call,
        outs,
        lambda o: f"{r}[{base + o.slot}]",
        r,
        gen.effects.may_exit(decl),
        out,
    )
    if has_ret:
        return f"{r}[0]" if scalars else r
    return None


def _block_apply(
    gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter, want_value: bool
) -> str | None:
    target = info.target
    if not (isinstance(target, ast.Name) and isinstance(target.ref, Sym)):
        raise UnsupportedError("apply of a block that is not a local instance", e.span)
    assert gen.inst is not None
    child = gen.inst.children[id(target.ref.decl)]
    args, outs = bind_args(gen, info, frozenset(), e.args)
    is_parser = isinstance(child.decl, ast.ParserDecl)
    call = f"{'P_' if is_parser else 'C_'}{child.py}({', '.join(args)})"
    if is_parser:
        # the sub-parser returns its scalar outs, and hands them over when it rejects: the
        # spec copies out on reject too (p4c issue 5524: BMv2 does not, yet)
        scalars = [o for o in outs if o.temp is None]
        r = gen.tmp("r") if scalars else None
        invoke(gen, call, outs, lambda o: f"{r}[{o.slot}]", r, True, out, "_ParserError")
        return None
    # the child control's parameters are its module globals (the call may go through a
    # control *type* declaration when the instance was passed as a constructor argument)
    own = {id(p): q for p, q in zip(info.params, child.decl.params)}
    invoke(
        gen,
        call,
        outs,
        lambda o: f"G_{child.py}__{own[id(o.param)].sym.pyname}",
        None,
        gen.effects.may_exit(child.decl),
        out,
    )
    return None


# -- externs -----------------------------------------------------------------------------------


def _extern_func(
    gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter, want_value: bool
) -> str | None:
    emit = gen.externs.functions.get(info.name)
    if emit is None:
        return _user_extern_func(gen, e, info, out, want_value)
    return _with_saved_lvalues(gen, info, lambda: emit(gen, e, info, out))


def _scalar_spec(t: T.Type | None) -> tuple[str, int] | None:
    """A scalar type as the extern-function registry describes it, or None."""
    if isinstance(t, T.EnumT) and t.underlying is not None:
        t = t.underlying
    if isinstance(t, T.BitT):
        return ("bit", t.width)
    if isinstance(t, T.IntT):
        return ("int", t.width)
    if t is T.BOOL:
        return ("bool", 1)
    return None


def _user_extern_func(
    gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter, want_value: bool
) -> str | None:
    """A call of an extern function the program declares itself: it runs the Python
    implementation a module loaded with --load-modules registers
    (switch/pipeline/extern_modules.py), bound when the program is loaded into a switch."""
    decl = info.decl
    name = info.name
    if not isinstance(decl, ast.ExternFuncDecl) or decl.span.file.startswith(SYSTEM_INCLUDE_DIR):
        # the architecture's own (declared in core.p4/v1model.p4) that this target lacks
        raise UnsupportedError(f"extern function '{name}' is not supported by this target", e.span)
    if decl.type_params:
        raise UnsupportedError(
            f"extern function '{name}': generic user extern functions are not supported "
            "(a Python implementation takes plain values)",
            e.span,
        )
    params = []
    for p, pt in zip(info.params, info.param_types):
        spec = _scalar_spec(pt)
        if spec is None:
            raise UnsupportedError(
                f"extern function '{name}': parameter '{p.name}' has type {pt}; only bit<W>, "
                "int<W>, bool and serializable enum values can be passed to an implementation",
                e.span,
            )
        params.append((p.name, p.direction or "in", spec))
    ret_spec = None
    if e.type is not T.VOID and e.type is not None:
        ret_spec = _scalar_spec(e.type)
        if ret_spec is None:
            raise UnsupportedError(
                f"extern function '{name}' returns {e.type}; only bit<W>, int<W>, bool and "
                "serializable enum results can come from an implementation",
                e.span,
            )
    fname = gen.user_extern(name, params, ret_spec, decl.span)
    args, outs = bind_args(gen, info, frozenset(), e.args)
    call = f"{fname}({', '.join(args)})"
    has_outs = any(d in ("out", "inout") for _n, d, _t in params)
    if not has_outs:
        if ret_spec is not None and want_value:
            return call
        out.line(call)
        return None
    base = 1 if ret_spec is not None else 0
    r = gen.tmp("r")
    invoke(gen, call, outs, lambda o: f"{r}[{base + o.slot}]", r, False, out)
    return f"{r}[0]" if ret_spec is not None else None


def _extern_method(
    gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter, want_value: bool
) -> str | None:
    emit = gen.externs.methods.get((info.extern_name, info.name))
    if emit is None:
        raise UnsupportedError(
            f"method '{info.extern_name}.{info.name}' is not supported by this target", e.span
        )
    return _with_saved_lvalues(gen, info, lambda: emit(gen, e, info, out))


def _with_saved_lvalues(gen: CodeGen, info: CallInfo, emit: Callable[[], str | None]) -> str | None:
    """Run an extern's emitter with the l-values of its out/inout arguments saved first, in
    argument order (calling convention step 3): the emitter's reads of an inout argument and
    its stores into any of them use the saved places, whatever it evaluates in between."""
    saved: list[ast.Expr] = []
    for p, a in zip(info.params, info.args):
        if a is not None and p.direction in ("out", "inout") and not is_path(a):
            place = gen.g_place(a)
            gen.saved_places[id(a)] = place
            gen.memo[id(a)] = place.read
            saved.append(a)
    try:
        return emit()
    finally:
        for a in saved:
            del gen.saved_places[id(a)]
            del gen.memo[id(a)]


def _packet_method(
    gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter, want_value: bool
) -> str | None:
    rule = PACKET_METHODS.get((info.extern_name, info.name))
    if rule is None:
        raise UnsupportedError(f"packet method '{info.name}'", e.span)
    return rule(gen, e, info, out)


def _not_code(
    gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter, want_value: bool
) -> str | None:
    raise UnsupportedError(f"call of kind {info.kind}", e.span)


CALLS: dict[CallKind, CallRule] = {
    CallKind.ACTION: _direct_call,
    CallKind.FUNCTION: _direct_call,
    CallKind.EXTERN_FUNC: _extern_func,
    CallKind.EXTERN_METHOD: _extern_method,
    CallKind.PACKET_METHOD: _packet_method,
    CallKind.HEADER_METHOD: _header_method,
    CallKind.STACK_METHOD: _stack_method,
    CallKind.SIZE_METHOD: _size_method,
    CallKind.TABLE_APPLY: _table_apply,
    CallKind.BLOCK_APPLY: _block_apply,
    CallKind.CONSTRUCTOR: _not_code,  # instances are made by elaboration, not by code
}
"""Every call kind: its rule."""


# -- packet_in / packet_out --------------------------------------------------------------------

PacketRule = Callable[["CodeGen", ast.Call, CallInfo, Emitter], "str | None"]


def _arg0(info: CallInfo) -> ast.Expr:
    a: ast.Expr | None = info.args[0]
    assert a is not None
    return a


def _emit(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> str | None:
    a = _arg0(info)
    emit_headers(gen, gen.g_expr(a), a.type, out)
    return None


def emit_headers(gen: CodeGen, v: str, t: T.Type | None, out: Emitter) -> None:
    """``packet_out.emit(v)``: append the valid headers in ``v`` (a header, a header union, a
    stack of either, or a struct of those), in field order."""
    pkt = gen.fn.pkt
    if isinstance(t, T.StructLikeT):
        if t.kind == "header":
            out.line(f"if {v}._v: {pkt}.append({v}._bytes())")
            return
        for n, ft in t.fields.items():
            emit_headers(gen, f"{v}.f_{n}", ft, out)
        return
    if isinstance(t, T.StackT):
        item = gen.tmp("eh")
        out.line(f"for {item} in {v}.items:")
        out.indent()
        emit_headers(gen, item, t.elem, out)
        out.dedent()
        return
    raise UnsupportedError(
        f"emit of a {t} (only headers, stacks, unions and structs of them)", None
    )


def _extract(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> str | None:
    if info.args[0] is None:
        # extract<H>(_): the header is read (length checked, packet advanced) and dropped
        t = info.bindings.get("T")
        assert t is not None
        h = gen.tmp("h")
        size = _varbit_size(gen, info, out)
        out.line(f"{h} = {gen.class_of(t)}()")
        _extract_into(gen, h, t, out, size)
        return None
    a = _arg0(info)
    size = _varbit_size(gen, info, out)
    union = _union_of(a)
    if isinstance(a, ast.Member) and a.ref == StackProperty("next"):
        stack = gen.g_expr(a.expr)
        h = gen.tmp("h")
        out.line(f"{h} = _stack_next({stack}, {gen.err_code('StackOutOfBounds')})")
        _extract_into(gen, h, a.checked_type, out, size)
        out.line(f"{stack}.nextIndex += 1")
    elif (
        union is not None
        and isinstance(union, ast.Member)
        and union.ref == StackProperty("next")
        and isinstance(a, ast.Member)
    ):
        # extract(s.next.member) of a stack of header unions: that member of the next
        # element, then the stack advances as with a header stack
        stack = gen.g_expr(union.expr)
        gen.flush(out)
        u = gen.tmp("h")
        out.line(f"{u} = _stack_next({stack}, {gen.err_code('StackOutOfBounds')})")
        _invalidate_siblings(u, union, f"{u}.f_{a.name}", out)
        _extract_into(gen, f"{u}.f_{a.name}", a.checked_type, out, size)
        out.line(f"{stack}.nextIndex += 1")
    elif union is not None and isinstance(a, ast.Member):
        u = saved_object(gen, union)
        gen.flush(out)
        _invalidate_siblings(u, union, f"{u}.f_{a.name}", out)
        _extract_into(gen, f"{u}.f_{a.name}", a.checked_type, out, size)
    else:
        h = gen.g_expr(a)
        gen.flush(out)
        _extract_into(gen, h, a.checked_type, out, size)
    return None


def _varbit_size(gen: CodeGen, info: CallInfo, out: Emitter) -> str | None:
    """The run-time size argument of a two-argument extract, evaluated once into a temporary
    (before the header argument's place is used: arguments go left to right, and the
    header's l-value was saved by then), or None."""
    if len(info.args) < 2 or info.args[1] is None:
        return None
    v = gen.g_expr(info.args[1])
    gen.flush(out)
    n = gen.tmp("vbn")
    out.line(f"{n} = {v}")
    return n


def _extract_into(gen: CodeGen, h: str, t: T.Type, out: Emitter, size: str | None = None) -> None:
    if size is not None:
        _extract_varbit(gen, h, t, out, size)
        return
    nb = T.width_of(t) // 8
    pkt = gen.fn.pkt
    o = gen.tmp("o")
    out.line(f"{o} = {pkt}.off + {nb}")
    out.line(f"if {o} > {pkt}.n: raise _ParserError({gen.err_code('PacketTooShort')})")
    out.line(f"{h}._ext(_from_bytes({pkt}.buf[{pkt}.off:{o}], 'big'))")
    out.line(f"{pkt}.off = {o}")


def _extract_varbit(gen: CodeGen, h: str, t: T.Type, out: Emitter, size: str) -> None:
    """extract(h, size) for a header with a varbit field, with the errors of v1model:
    HeaderTooShort for a size above the field's maximum (nothing is consumed),
    ParserInvalidArgument for a header that would not be a whole number of bytes,
    PacketTooShort when the packet ends first."""
    assert isinstance(t, T.StructLikeT)
    vb = T.varbit_field(t)
    assert vb is not None
    fixed = T.fixed_width(t)
    pkt = gen.fn.pkt
    out.line(f"if {size} > {vb[1].max_width}: raise _ParserError({gen.err_code('HeaderTooShort')})")
    if fixed % 8:
        cond = f"({size} + {fixed % 8}) % 8"
    else:
        cond = f"{size} % 8"
    out.line(f"if {cond}: raise _ParserError({gen.err_code('ParserInvalidArgument')})")
    o = gen.tmp("o")
    out.line(f"{o} = {pkt}.off + ({size} + {fixed}) // 8")
    out.line(f"if {o} > {pkt}.n: raise _ParserError({gen.err_code('PacketTooShort')})")
    out.line(f"{h}._ext(_from_bytes({pkt}.buf[{pkt}.off:{o}], 'big'), {size})")
    out.line(f"{pkt}.off = {o}")


def _lookahead(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> str | None:
    pkt = gen.fn.pkt
    lt = info.bindings.get("T") if info.bindings else None
    if lt is None:
        raise UnsupportedError("lookahead without a type", e.span)
    w = T.width_of(lt)
    too_short = f"raise _ParserError({gen.err_code('PacketTooShort')})"
    v = gen.tmp("la")
    nb = (w + 7) // 8
    out.line(f"if {pkt}.off + {nb} > {pkt}.n: {too_short}")
    peek = f"int.from_bytes({pkt}.buf[{pkt}.off:{pkt}.off + {nb}], 'big')"
    out.line(f"{v} = {peek} >> {nb * 8 - w}" if w % 8 else f"{v} = {peek}")
    if isinstance(lt, T.StructLikeT) and lt.kind == "header":
        h = gen.tmp("lh")
        out.line(f"{h} = {gen.class_of(lt)}()")
        out.line(f"{h}._ext({v})")
        return h
    if isinstance(lt, T.StructLikeT) and lt.kind == "struct":
        return _unpack_struct(gen, lt, v, w, out, e)
    if lt is T.BOOL:
        return f"({v} != 0)"
    if isinstance(lt, T.IntT):
        return f"_to_signed({v}, {w})"
    if isinstance(lt, T.BitT):
        return v
    raise UnsupportedError(f"lookahead of {lt}", e.span)


def _unpack_struct(
    gen: CodeGen, t: T.StructLikeT, v: str, w: int, out: Emitter, e: ast.Expr
) -> str:
    """A struct of bit/int/bool fields filled from the big-endian integer `v` (lookahead)."""
    st = gen.tmp("ls")
    out.line(f"{st} = {gen.class_of(t)}()")
    shift = w
    for path, ft in flat_fields(t):
        if not (ft is T.BOOL or isinstance(ft, (T.BitT, T.IntT))):
            raise UnsupportedError(
                f"lookahead of a struct with a {ft} field is not supported", e.span
            )
        fw = T.width_of(ft)
        shift -= fw
        fv = f"(({v} >> {shift}) & {mask(fw)})"
        if ft is T.BOOL:
            fv = f"bool({fv})"
        elif isinstance(ft, T.IntT):
            fv = f"_to_signed({fv}, {fw})"
        out.line(f"{st}.{path} = {fv}")
    return st


def _advance(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> str | None:
    pkt = gen.fn.pkt
    n = gen.g_expr(_arg0(info))
    bits = gen.tmp("adv")
    out.line(f"{bits} = {n}")
    out.line(f"if {bits} % 8: raise _ParserError({gen.err_code('ParserInvalidArgument')})")
    out.line(
        f"if {pkt}.off + {bits} // 8 > {pkt}.n: "
        f"raise _ParserError({gen.err_code('PacketTooShort')})"
    )
    out.line(f"{pkt}.off += {bits} // 8")
    return None


def _length(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> str | None:
    return f"({gen.fn.pkt}.n & 0xffffffff)"


PACKET_METHODS: dict[tuple[str, str], PacketRule] = {
    ("packet_out", "emit"): _emit,
    ("packet_in", "extract"): _extract,
    ("packet_in", "lookahead"): _lookahead,
    ("packet_in", "advance"): _advance,
    ("packet_in", "length"): _length,
}
