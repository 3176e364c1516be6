"""Code emitters for v1model's extern functions and extern object methods.

One row per extern: the code generator looks the callee up in :data:`EXTERN_FUNCTIONS` or
:data:`EXTERN_METHODS` (the compile driver hands it :data:`V1MODEL_EXTERNS`) and the row's
function emits the Python that implements it, calling the runtime objects (registers, counters,
meters) and the per-switch context ``_rt`` that the v1model architecture
(``switch.pipeline.v1model``) reads after each pipeline pass.
"""

from __future__ import annotations

from typing import Any

from switch.compile.codegen import CodeGen, Emit, Emitter, ExternEmitters
from switch.compile.widths import target_width
from switch.errors import TypeError_, UnsupportedError
from switch.lang import ast
from switch.lang import types as T
from switch.lang.constfold import fold
from switch.lang.symbols import CallInfo, Sym

DROP_PORT = 511


def _arg(info: CallInfo, i: int) -> ast.Expr:
    a: ast.Expr | None = info.args[i]
    if a is None:
        raise UnsupportedError(f"argument {i + 1} of '{info.name}' is required", None)
    return a


def _const(e: ast.Expr) -> Any:
    return fold(e)


def _enum_name(e: ast.Expr, what: str) -> str:
    t = e.type
    v = _const(e)
    if isinstance(t, T.EnumT) and v is not None:
        for name, val in t.values.items():
            if val == v:
                return name
    raise UnsupportedError(f"{what} must be a constant enum member", e.span)


def fields_code(gen: CodeGen, e: ast.Expr) -> str:
    """Python code for a tuple of (value, width) pairs: the bits of ``e`` in order."""
    t = e.type
    if isinstance(e, ast.ListExpr):
        parts = []
        for item in e.items:
            it = item.type
            v = gen.g_expr(item)
            if isinstance(it, (T.StructLikeT, T.StackT)):
                parts.append(f"*{v}._fields()")
            elif isinstance(it, T.TupleT):
                parts.append(f"*{fields_code(gen, item)}")
            else:
                parts.append(_scalar_pair(v, item.checked_type))
        return "(" + "".join(p + ", " for p in parts) + ")"
    v = gen.g_expr(e)
    if isinstance(t, (T.StructLikeT, T.StackT)):
        return f"{v}._fields()"
    if isinstance(t, T.TupleT):
        tmp = gen.tmp("tp")
        gen.pre.append(f"{tmp} = {v}")
        return (
            "("
            + "".join(_scalar_pair(f"{tmp}[{i}]", et) + ", " for i, et in enumerate(t.elems))
            + ")"
        )
    return "(" + _scalar_pair(v, e.checked_type) + ",)"


def _scalar_pair(v: str, t: T.Type) -> str:
    if isinstance(t, T.VarbitT):
        return v  # a varbit value is already its (value, current width) pair
    w = target_width(t)
    if t is T.BOOL:
        return f"(int({v}), 1)"
    if isinstance(t, T.IntT):
        return f"({v} & {(1 << w) - 1}, {w})"
    return f"({v}, {w})"


def _width(t: T.Type) -> int:
    return target_width(t)


# -- extern functions ------------------------------------------------------------------------


def mark_to_drop(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> None:
    sm = gen.g_expr(_arg(info, 0)) if info.args else "_rt.sm"
    gen.flush(out)
    out.line(f"{sm}.f_egress_spec = {DROP_PORT}")
    out.line(f"{sm}.f_mcast_grp = 0")
    return None


def hash_(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> None:
    result, algo, base, data, max_ = (info.args[i] for i in range(5))
    assert result is not None and algo is not None and data is not None
    name = _enum_name(algo, "the hash algorithm")
    fields = fields_code(gen, data)
    b = gen.g_expr(base) if base is not None else "0"
    m = gen.g_expr(max_) if max_ is not None else "0"
    value = (
        f"_v1model_hash_result(_rt.hash({name!r}, _pack_bits({fields})), {b}, {m}, "
        f"{_width(result.checked_type)})"
    )
    gen.flush(out)
    gen.g_assign(result, value, out)
    return None


def random_(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> None:
    result, lo, hi = _arg(info, 0), _arg(info, 1), _arg(info, 2)
    v = f"_rt.random({gen.g_expr(lo)}, {gen.g_expr(hi)})"
    gen.flush(out)
    gen.g_assign(result, v, out)
    return None


def digest(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> None:
    data = _arg(info, 1)
    name = gen.digest_name(e)  # named by elaboration (switch.compile.digests)
    fields = fields_code(gen, data)
    gen.flush(out)
    if _is_lvalue_path(data):
        # BMv2 reads a digest's fields when ingress ends, not when digest() runs
        out.line(f"_rt.digest_late({name!r}, lambda: tuple(_v for _v, _w in {fields}))")
    else:  # a list or a computed value: p4c copies it into a temporary at the call
        out.line(f"_rt.digest({name!r}, tuple(_v for _v, _w in {fields}))")
    return None


def _is_lvalue_path(e: ast.Expr) -> bool:
    while isinstance(e, (ast.Member, ast.Index)):
        if isinstance(e, ast.Member) and e.ref is not None:
            return False
        e = e.expr
    return isinstance(e, ast.Name) and isinstance(e.ref, Sym) and e.ref.kind in ("var", "param")


def _field_list_paths(gen: CodeGen, e: ast.Expr) -> list[str]:
    """Paths, relative to ``m`` (user metadata) and ``sm``, of the leaves named by ``e``."""
    if isinstance(e, ast.ListExpr):
        out: list[str] = []
        for item in e.items:
            out.extend(_field_list_paths(gen, item))
        return out
    if isinstance(e, ast.StructInit):
        return [p for _, v in e.fields for p in _field_list_paths(gen, v)]
    path = _rel_path(gen, e)
    return _leaves(path, e.type)


def _leaves(path: str, t: T.Type | None) -> list[str]:
    if isinstance(t, T.StructLikeT):
        out: list[str] = []
        for n, ft in t.fields.items():
            out.extend(_leaves(f"{path}.f_{n}", ft))
        return out
    if isinstance(t, T.StackT):
        raise UnsupportedError("header stacks in field lists are not supported", None)
    return [path]


def _rel_path(gen: CodeGen, e: ast.Expr) -> str:
    if isinstance(e, ast.Member):
        return f"{_rel_path(gen, e.expr)}.f_{e.name}"
    if isinstance(e, ast.Name) and isinstance(e.ref, Sym) and e.ref.kind == "param":
        t = e.ref.type
        if t is gen.meta_type:
            return "m"
        if t is gen.sm_type:
            return "sm"
    raise UnsupportedError(
        "field lists may only name fields of the user metadata or standard_metadata", e.span
    )


def _old_field_list(gen: CodeGen, data: ast.Expr | None) -> str:
    paths = _field_list_paths(gen, data) if data is not None else []
    gen.old_field_lists.append((paths, paths))
    return f"('old', {len(gen.old_field_lists) - 1})"


def _field_list_index(info: CallInfo, i: int) -> str:
    v = _const(_arg(info, i))
    if v is None:
        raise UnsupportedError("field list index must be a constant", None)
    return f"('fl', {int(v)})"


def clone(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> None:
    kind = _enum_name(_arg(info, 0), "the clone type")
    session = gen.g_expr(_arg(info, 1))
    fl = "None"
    if info.name == "clone_preserving_field_list":
        fl = _field_list_index(info, 2)
    elif info.name == "clone3":
        fl = _old_field_list(gen, info.args[2])
    gen.flush(out)
    out.line(f"_rt.clone_req = ({kind!r}, {session}, {fl})")
    return None


def resubmit(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> None:
    if info.name.endswith("_preserving_field_list"):
        fl = _field_list_index(info, 0)
    else:
        fl = _old_field_list(gen, info.args[0] if info.args else None)
    attr = "resubmit_req" if info.name.startswith("resubmit") else "recirc_req"
    out.line(f"_rt.{attr} = {fl}")
    return None


def truncate(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> None:
    v = gen.g_expr(_arg(info, 0))
    gen.flush(out)
    out.line(f"_rt.truncate_len = {v}")
    return None


def assert_(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> None:
    c = gen.g_expr(_arg(info, 0))
    gen.flush(out)
    where = f"{e.span.file}:{e.span.line}"
    out.line(f"if not {c}: _rt.assert_failed({info.name!r}, {where!r})")
    return None


def log_msg(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> None:
    msg = _arg(info, 0)
    if len(info.args) > 1 and info.args[1] is not None:
        fields = fields_code(gen, info.args[1])
        gen.flush(out)
        out.line(f"_rt.log({gen.g_expr(msg)}, tuple(_v for _v, _w in {fields}))")
    else:
        out.line(f"_rt.log({gen.g_expr(msg)}, ())")
    return None


def _checksum(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> None:
    cond, data, csum, algo = (info.args[i] for i in range(4))
    assert cond is not None and data is not None and csum is not None and algo is not None
    name = _enum_name(algo, "the checksum algorithm")
    fields = fields_code(gen, data)
    c = gen.g_expr(cond)
    payload = " + _rt.payload" if info.name.endswith("_with_payload") else ""
    value = f"(_rt.hash({name!r}, _pack_bits({fields}){payload}) & {(1 << _width(csum.checked_type)) - 1})"
    gen.flush(out)
    out.line(f"if {c}:")
    out.indent()
    if info.name.startswith("verify"):
        out.line(f"if {value} != {gen.g_expr(csum)}: _rt.checksum_error = 1")
        gen.flush(out)
    else:
        gen.g_assign(csum, value, out)
    out.dedent()
    return None


def verify(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> None:
    c = gen.g_expr(_arg(info, 0))
    err = gen.g_expr(_arg(info, 1))
    gen.flush(out)
    out.line(f"if not {c}: raise _ParserError({err})")
    return None


def static_assert(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> None:
    v = _const(_arg(info, 0))
    if v is False:
        msg = _const(info.args[1]) if len(info.args) > 1 and info.args[1] is not None else ""
        raise TypeError_(f"static_assert failed{': ' + msg if msg else ''}", e.span)
    if v is None:
        raise TypeError_("static_assert needs a compile-time constant", e.span)
    return None


EXTERN_FUNCTIONS: dict[str, Emit] = {
    "mark_to_drop": mark_to_drop,
    "hash": hash_,
    "random": random_,
    "digest": digest,
    "clone": clone,
    "clone3": clone,
    "clone_preserving_field_list": clone,
    "resubmit": resubmit,
    "resubmit_preserving_field_list": resubmit,
    "recirculate": resubmit,
    "recirculate_preserving_field_list": resubmit,
    "truncate": truncate,
    "assert": assert_,
    "assume": assert_,
    "log_msg": log_msg,
    "verify_checksum": _checksum,
    "update_checksum": _checksum,
    "verify_checksum_with_payload": _checksum,
    "update_checksum_with_payload": _checksum,
    "verify": verify,
    "static_assert": static_assert,
}


# -- extern object methods -------------------------------------------------------------------


def _obj(gen: CodeGen, info: CallInfo) -> str:
    target = info.target
    if (
        isinstance(target, ast.Name)
        and isinstance(target.ref, Sym)
        and target.ref.kind == "instance"
    ):
        return gen.extern_inst(target.ref).py
    raise UnsupportedError(
        "extern methods must be called on a declared instance", getattr(target, "span", None)
    )


def register_read(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> None:
    obj = _obj(gen, info)
    idx = gen.g_expr(_arg(info, 1))
    gen.flush(out)
    gen.g_assign(_arg(info, 0), f"{obj}.read({idx})", out)
    return None


def register_write(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> None:
    obj = _obj(gen, info)
    idx = gen.g_expr(_arg(info, 0))
    v = gen.g_expr(_arg(info, 1))
    gen.flush(out)
    out.line(f"{obj}.write({idx}, {v})")
    return None


def counter_count(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> None:
    obj = _obj(gen, info)
    idx = gen.g_expr(_arg(info, 0))
    gen.flush(out)
    out.line(f"{obj}.count({idx}, _rt.pkt_len)")
    return None


def direct_counter_count(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> None:
    # direct counters are updated by the table on every hit, as in BMv2
    return None


def meter_execute(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> None:
    obj = _obj(gen, info)
    idx = gen.g_expr(_arg(info, 0))
    gen.flush(out)
    gen.g_assign(_arg(info, 1), f"{obj}.execute({idx}, _rt.now_us, _rt.pkt_len)", out)
    return None


def direct_meter_read(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> None:
    gen.g_assign(_arg(info, 0), "_rt.dm_color", out)
    return None


def checksum16_get(gen: CodeGen, e: ast.Call, info: CallInfo, out: Emitter) -> str:
    fields = fields_code(gen, _arg(info, 0))
    return f"_rt.hash('csum16', _pack_bits({fields}))"


EXTERN_METHODS: dict[tuple[str, str], Emit] = {
    ("register", "read"): register_read,
    ("register", "write"): register_write,
    ("counter", "count"): counter_count,
    ("direct_counter", "count"): direct_counter_count,
    ("meter", "execute_meter"): meter_execute,
    ("direct_meter", "read"): direct_meter_read,
    ("Checksum16", "get"): checksum16_get,
}

V1MODEL_EXTERNS = ExternEmitters(EXTERN_FUNCTIONS, EXTERN_METHODS)
"""The v1model architecture's externs, as the compile driver passes them to the generator."""
