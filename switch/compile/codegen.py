"""Code generation: the elaborated, type-checked program becomes one Python module.

The module is compiled once per program (``compile()``), then executed once per switch instance
with that switch's runtime objects bound as globals. Per packet nothing walks a syntax tree:
headers are ``__slots__`` classes, parsers are ``while`` loops over state numbers, field
extraction is one ``int.from_bytes`` plus shifts, table lookups call the runtime table directly
and actions are plain functions.

Conventions of the generated code:
- P4 values: ``bit<W>`` is a Python int in ``[0, 2**W)``, ``int<W>`` an int in two's complement
  range, ``bool`` a Python bool, enums and errors ints.
- Struct/header fields are attributes named ``f_<name>``; headers carry ``_v`` (validity).
- Composite assignment is in place (``dst._set(src)``), so objects handed over by the
  architecture stay the same objects.
- Control parameters and control-level declarations are module globals (actions reach them);
  everything else is a Python local. Scalar ``out``/``inout`` parameters of actions and functions
  are returned as a tuple and written back by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from switch.compile.elaborate import BlockInst, Elaborated, ExternInst, TableInst
from switch.errors import TypeError_, UnsupportedError
from switch.lang import ast
from switch.lang import types as T
from switch.lang.symbols import CallInfo, Sym


class Emitter:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.level = 0

    def line(self, text: str) -> None:
        self.lines.append("    " * self.level + text)

    def indent(self) -> None:
        self.level += 1

    def dedent(self) -> None:
        self.level -= 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _mask(width: int) -> int:
    return (1 << width) - 1


def is_composite(t: Any) -> bool:
    return isinstance(t, (T.StructLikeT, T.StackT))


def default_value(t: Any, gen: CodeGen) -> str:
    if is_composite(t):
        return f"{gen.class_of(t)}()"
    if t is T.BOOL:
        return "False"
    if isinstance(t, T.TupleT):
        return "(" + "".join(default_value(e, gen) + ", " for e in t.elems) + ")"
    return "0"


@dataclass
class FnCtx:
    """What the generator knows about the function it is emitting."""

    kind: str  # 'action' | 'function' | 'control' | 'parser'
    outs: list[str] = field(default_factory=list)  # Python names of scalar out/inout params
    has_ret: bool = False
    pkt: str = "pkt"  # Python name of the packet_in / packet_out object
    globals: set[str] = field(default_factory=set)


class CodeGen:
    def __init__(self, elab: Elaborated) -> None:
        self.elab = elab
        self.checked = elab.checked
        self.errors = self.checked.errors
        self.out = Emitter()
        self.classes: dict[Any, str] = {}  # StructLikeT / (elem, size) -> class name
        self.class_defs: list[str] = []
        self.inst: BlockInst | None = None
        self.fn = FnCtx("function")
        self.pre: list[str] = []
        self.tmp_n = 0
        self.bindings: dict[str, tuple[str, str]] = {}  # py global -> (kind, fqname)
        self.generated_actions: set[str] = set()
        self.generated_functions: set[int] = set()
        self.field_lists: dict[int, list[tuple[str, Any]]] = {}
        self.old_field_lists: list[Any] = []
        self.digests: dict[str, Any] = {}
        self.meta_type: Any = None
        self.top_params: dict[int, str] = {}  # id(param sym) -> 'hdr' | 'meta' | 'sm'

    # -- helpers -----------------------------------------------------------------------

    def tmp(self, base: str = "t") -> str:
        self.tmp_n += 1
        return f"_{base}{self.tmp_n}"

    def err_code(self, name: str) -> int:
        return self.errors.get(name, 0)

    def class_of(self, t: Any) -> str:
        if isinstance(t, T.StackT):
            key: Any = ("stack", id(t.elem), t.size)
            if key not in self.classes:
                self.class_of(t.elem)
                name = f"K_{t.elem.name}_{t.size}"
                self.classes[key] = name
                self.gen_stack_class(name, t)
            return self.classes[key]
        if isinstance(t, T.StructLikeT):
            if id(t) not in self.classes:
                name = f"S_{t.name}"
                self.classes[id(t)] = name
                for ft in t.fields.values():
                    if is_composite(ft):
                        self.class_of(ft)
                self.gen_struct_class(name, t)
            return self.classes[id(t)]
        raise TypeError_(f"no class for {t}", None)

    # -- classes for headers, structs, stacks --------------------------------------------

    def gen_struct_class(self, name: str, t: T.StructLikeT) -> None:
        e = Emitter()
        fields = list(t.fields.items())
        slots = [f"f_{n}" for n, _ in fields]
        is_hdr = t.kind == "header"
        if is_hdr:
            slots = ["_v"] + slots
        e.line(f"class {name}:")
        e.indent()
        e.line(f"__slots__ = {tuple(slots)!r}")
        e.line(f"_kind = {t.kind!r}")
        # A header's scalar fields start unset and read as their default through __getattr__
        # (reached only for a field never written): a packet creates many headers (whole
        # stacks) it never touches, so construction sets only validity and nested objects.
        # Structs (metadata) are read constantly, so their fields are set eagerly.
        lazy = is_hdr
        e.line("def __init__(self):")
        e.indent()
        body = 0
        if is_hdr:
            e.line("self._v = False")
            body += 1
        for n, ft in fields:
            if is_composite(ft) or not lazy:
                e.line(f"self.f_{n} = {default_value(ft, self)}")
                body += 1
        if not body:
            e.line("pass")
        e.dedent()
        if lazy:
            scalars = {
                f"f_{n}": default_value(ft, self) for n, ft in fields if not is_composite(ft)
            }
            e.line("_DEFAULTS = {" + ", ".join(f"{k!r}: {v}" for k, v in scalars.items()) + "}")
            e.line("def __getattr__(self, name):")
            e.indent()
            e.line("try:")
            e.line("    return self._DEFAULTS[name]")
            e.line("except KeyError:")
            e.line("    raise AttributeError(name) from None")
            e.dedent()
        e.line("def _set(self, o):")
        e.indent()
        if is_hdr:
            e.line("self._v = o._v")
        for n, ft in fields:
            if is_composite(ft):
                e.line(f"self.f_{n}._set(o.f_{n})")
            else:
                e.line(f"self.f_{n} = o.f_{n}")
        if not fields and not is_hdr:
            e.line("pass")
        e.dedent()
        _emit_copy(e, name)
        e.line("def _eq(self, o):")
        e.indent()
        parts = []
        for n, ft in fields:
            if is_composite(ft):
                parts.append(f"self.f_{n}._eq(o.f_{n})")
            else:
                parts.append(f"self.f_{n} == o.f_{n}")
        if is_hdr:
            e.line("if not self._v and not o._v: return True")
            parts = ["self._v == o._v"] + parts
        if t.kind == "header_union":
            parts = [f"self.f_{n}._eq(o.f_{n})" for n, _ in fields]
        e.line("return " + (" and ".join(parts) if parts else "True"))
        e.dedent()
        # flattened (value, width) pairs, for hashing/checksums/digests
        e.line("def _fields(self):")
        e.indent()
        items = []
        for n, ft in fields:
            if is_composite(ft):
                items.append(f"*self.f_{n}._fields()")
            else:
                w = T.width_of(ft)
                v = f"self.f_{n}"
                if ft is T.BOOL:
                    v = f"int({v})"
                elif isinstance(ft, T.IntT):
                    v = f"({v} & {_mask(w)})"
                items.append(f"({v}, {w})")
        e.line("return (" + "".join(i + ", " for i in items) + ")")
        e.dedent()
        if t.kind == "header_union":
            e.line("@property")
            e.line("def _v(self):")
            e.indent()
            e.line("return " + (" or ".join(f"self.f_{n}._v" for n, _ in fields) or "False"))
            e.dedent()
        if is_hdr:
            self.gen_header_codec(e, t)
        e.dedent()
        self.class_defs.append(e.text())

    def gen_header_codec(self, e: Emitter, t: T.StructLikeT) -> None:
        total = T.width_of(t)
        nbytes = total // 8
        e.line(f"_nbytes = {nbytes}")
        # extraction from the header's bytes as one big-endian integer
        e.line("def _ext(self, x):")
        e.indent()
        shift = total
        flat = list(self._flat_fields(t))
        for path, ft in flat:
            w = T.width_of(ft)
            shift -= w
            v = f"(x >> {shift})" if shift else "x"
            if shift + w < total:
                v = f"({v} & {_mask(w)})"
            if ft is T.BOOL:
                v = f"bool({v})"
            elif isinstance(ft, T.IntT):
                v = f"_to_signed({v}, {w})"
            e.line(f"self.{path} = {v}")
        e.line("self._v = True")
        e.dedent()
        e.line("def _bytes(self):")
        e.indent()
        shift = total
        parts = []
        for path, ft in flat:
            w = T.width_of(ft)
            shift -= w
            v = f"self.{path}"
            if ft is T.BOOL:
                v = f"int({v})"
            elif isinstance(ft, T.IntT):
                v = f"({v} & {_mask(w)})"
            parts.append(f"({v} << {shift})" if shift else v)
        if not parts:
            e.line("return b''")
        else:
            e.line(f"return ({' | '.join(parts)}).to_bytes({nbytes}, 'big')")
        e.dedent()

    def _flat_fields(self, t: T.StructLikeT, prefix: str = ""):  # type: ignore[no-untyped-def]
        for n, ft in t.fields.items():
            if isinstance(ft, T.StructLikeT):
                yield from self._flat_fields(ft, f"{prefix}f_{n}.")
            else:
                yield f"{prefix}f_{n}", ft

    def gen_stack_class(self, name: str, t: T.StackT) -> None:
        ec = self.class_of(t.elem)
        e = Emitter()
        e.line(f"class {name}:")
        e.indent()
        e.line("__slots__ = ('items', 'nextIndex')")
        e.line("_kind = 'stack'")
        e.line("def __init__(self):")
        e.indent()
        e.line(f"self.items = [{ec}() for _ in range({t.size})]")
        e.line("self.nextIndex = 0")
        e.dedent()
        e.line("def _set(self, o):")
        e.indent()
        e.line("for a, b in zip(self.items, o.items): a._set(b)")
        e.line("self.nextIndex = o.nextIndex")
        e.dedent()
        _emit_copy(e, name)
        e.line("def _eq(self, o):")
        e.indent()
        e.line("return all(a._eq(b) for a, b in zip(self.items, o.items))")
        e.dedent()
        e.line("def scratch(self):")
        e.indent()
        e.line(f"return {ec}()")
        e.dedent()
        e.line("def _fields(self):")
        e.indent()
        e.line("return tuple(f for h in self.items for f in h._fields())")
        e.dedent()
        e.dedent()
        self.class_defs.append(e.text())

    # -- names ---------------------------------------------------------------------------

    def var_name(self, sym: Sym) -> str:
        if sym.storage == "global":
            if isinstance(sym.owner, ast.ControlDecl):
                assert self.inst is not None
                name = f"G_{self.inst.py}__{sym.pyname}"
                self.fn.globals.add(name)
                return name
        return sym.pyname

    def extern_inst(self, sym: Sym) -> ExternInst:
        decl = sym.decl
        if self.inst is not None and id(decl) in self.inst.externs:
            return self.inst.externs[id(decl)]
        if id(decl) in self.elab.global_externs:
            return self.elab.global_externs[id(decl)]
        raise TypeError_(
            f"'{sym.name}' is not an extern instance here", getattr(decl, "span", None)
        )

    def table_inst(self, decl: ast.TableDecl) -> TableInst:
        assert self.inst is not None
        return self.inst.tables[id(decl)]

    # -- expressions ---------------------------------------------------------------------

    def const_repr(self, v: Any) -> str:
        if isinstance(v, tuple):
            return "(" + "".join(self.const_repr(x) + ", " for x in v) + ")"
        return repr(v)

    def g_expr(self, e: ast.Expr) -> str:
        t = e.type
        if isinstance(e, ast.IntLit):
            v = e.value
            if isinstance(t, T.BitT):
                v &= _mask(t.width)
            elif isinstance(t, T.IntT):
                v = _signed(v, t.width)
            return repr(v)
        if isinstance(e, ast.BoolLit):
            return "True" if e.value else "False"
        if isinstance(e, ast.StrLit):
            return repr(e.value)
        if isinstance(e, ast.Name):
            sym = e.ref
            if not isinstance(sym, Sym):
                raise TypeError_(f"'{e.name}' is not a value", e.span)
            if sym.kind == "const":
                v = sym.value
                if isinstance(v, int) and not isinstance(v, bool):
                    v = _fit(v, t)
                return self.const_repr(v)
            if sym.kind in ("var", "param"):
                return self.var_name(sym)
            raise TypeError_(f"'{e.name}' is not a value", e.span)
        if isinstance(e, ast.Member):
            return self.g_member(e)
        if isinstance(e, ast.Index):
            base = self.g_expr(e.expr)
            if isinstance(e.index, ast.IntLit) or e.index.type is T.INFINT:
                idx = self.const_index(e.index)
                if idx is not None:
                    return f"{base}.items[{idx}]"
            return f"_stack_at({base}, {self.g_expr(e.index)})"
        if isinstance(e, ast.Slice):
            hi, lo = self.const_index(e.hi), self.const_index(e.lo)
            assert hi is not None and lo is not None
            base = self.g_expr(e.expr)
            m = _mask(hi - lo + 1)
            return f"(({base} >> {lo}) & {m})" if lo else f"({base} & {m})"
        if isinstance(e, ast.Unary):
            return self.g_unary(e)
        if isinstance(e, ast.Binary):
            return self.g_binary(e)
        if isinstance(e, ast.Mux):
            return self.g_mux(e)
        if isinstance(e, ast.Cast):
            return self.g_cast(self.g_expr(e.expr), e.expr.type, t)
        if isinstance(e, ast.Call):
            r = self.g_call(e, want_value=True)
            assert r is not None
            return r
        if isinstance(e, ast.ListExpr):
            return self.g_list(e, t)
        if isinstance(e, ast.StructInit):
            return self.g_struct_init(e, t)
        raise UnsupportedError(f"expression {type(e).__name__} is not supported here", e.span)

    def const_index(self, e: ast.Expr) -> int | None:
        from switch.lang.typecheck import Checker

        v = Checker().try_eval_const(e)
        return int(v) if v is not None else None

    def g_list(self, e: ast.ListExpr, t: Any) -> str:
        items = [self.g_expr(i) for i in e.items]
        if isinstance(t, T.StructLikeT):
            cls = self.class_of(t)
            tmp = self.tmp("s")
            self.pre.append(f"{tmp} = {cls}()")
            if t.kind == "header":
                self.pre.append(f"{tmp}._v = True")
            for (n, ft), v in zip(t.fields.items(), items):
                if is_composite(ft):
                    self.pre.append(f"{tmp}.f_{n}._set({v})")
                else:
                    self.pre.append(f"{tmp}.f_{n} = {v}")
            return tmp
        return "(" + "".join(i + ", " for i in items) + ")"

    def g_struct_init(self, e: ast.StructInit, t: Any) -> str:
        if not isinstance(t, T.StructLikeT):
            raise UnsupportedError("structure initializer without a struct type", e.span)
        cls = self.class_of(t)
        tmp = self.tmp("s")
        self.pre.append(f"{tmp} = {cls}()")
        if t.kind == "header":
            self.pre.append(f"{tmp}._v = True")
        for n, v in e.fields:
            code = self.g_expr(v)
            if is_composite(t.fields[n]):
                self.pre.append(f"{tmp}.f_{n}._set({code})")
            else:
                self.pre.append(f"{tmp}.f_{n} = {code}")
        return tmp

    def g_member(self, e: ast.Member) -> str:
        ref = e.ref
        if isinstance(ref, tuple):
            kind = ref[0]
            if kind in ("enum", "error"):
                return repr(ref[1])
            if kind == "stack_size":
                return repr(ref[1])
            if kind == "stack":
                base = self.g_expr(e.expr)
                if e.name == "next":
                    return f"_stack_next({base}, {self.err_code('StackOutOfBounds')})"
                if e.name == "last":
                    return f"_stack_last({base}, {self.err_code('StackOutOfBounds')})"
                if e.name == "lastIndex":
                    return f"(({base}.nextIndex - 1) & 0xffffffff)"
                if e.name == "nextIndex":
                    return f"{base}.nextIndex"
        bt = e.expr.type
        if isinstance(bt, T.ApplyResultT):
            call = self.g_expr(e.expr)
            if e.name == "hit":
                return f"{call}[0]"
            if e.name == "miss":
                return f"(not {call}[0])"
            return f"{call}[1]"
        base = self.g_expr(e.expr)
        return f"{base}.f_{e.name}"

    def g_unary(self, e: ast.Unary) -> str:
        t = e.type
        v = self.g_expr(e.expr)
        if e.op == "!":
            return f"(not {v})"
        if e.op == "+":
            return v
        if e.op == "-":
            if isinstance(t, T.BitT):
                return f"((-{v}) & {_mask(t.width)})"
            if isinstance(t, T.IntT):
                return f"_to_signed(-{v}, {t.width})"
            return f"(-{v})"
        if e.op == "~":
            if isinstance(t, T.BitT):
                return f"({v} ^ {_mask(t.width)})"
            return f"(~{v})"
        raise UnsupportedError(f"operator {e.op}", e.span)

    def g_lazy(self, e: ast.Expr) -> tuple[str, list[str]]:
        """Code for an operand that may not be evaluated, and the statements it needs first."""
        saved = self.pre
        self.pre = []
        v = self.g_expr(e)
        lazy, self.pre = self.pre, saved
        return v, lazy

    def guarded(self, cond: str, branches: list[tuple[str, list[str]]]) -> str:
        """Hoist `if cond: <pre 0>; t = v0 else: <pre 1>; t = v1` so side effects stay lazy."""
        t = self.tmp("c")
        for i, (v, lazy) in enumerate(branches):
            self.pre.append(f"if {cond}:" if i == 0 else "else:")
            self.pre.extend("    " + line for line in lazy)
            self.pre.append(f"    {t} = {v}")
        return t

    def g_short_circuit(self, e: ast.Binary) -> str:
        a = self.g_expr(e.left)
        b, lazy = self.g_lazy(e.right)
        py = "and" if e.op == "&&" else "or"
        if not lazy:
            return f"({a} {py} {b})"
        # the right operand has statements (calls with out/inout arguments): run them
        # only when the left operand does not decide the result
        if e.op == "&&":
            return self.guarded(a, [(b, lazy), ("False", [])])
        return self.guarded(a, [("True", []), (b, lazy)])

    def g_mux(self, e: ast.Mux) -> str:
        c = self.g_expr(e.cond)
        a, lazy_a = self.g_lazy(e.then)
        b, lazy_b = self.g_lazy(e.other)
        if not lazy_a and not lazy_b:
            return f"({a} if {c} else {b})"
        return self.guarded(c, [(a, lazy_a), (b, lazy_b)])

    def g_binary(self, e: ast.Binary) -> str:
        op = e.op
        if op in ("&&", "||"):
            return self.g_short_circuit(e)
        t = e.type
        lt, rt = e.left.type, e.right.type
        a = self.g_expr(e.left)
        b, effects = self.g_lazy(e.right)
        if effects:
            # the right operand calls something with out/inout arguments: the left operand is
            # evaluated first (P4 evaluates left to right), so keep its value before the call
            if not isinstance(e.left, (ast.IntLit, ast.BoolLit)):
                keep = self.tmp("l")
                self.pre.append(f"{keep} = {a}")
                a = keep
            self.pre.extend(effects)
        if op in ("==", "!="):
            if is_composite(lt) or isinstance(lt, T.TupleT):
                r = f"_eq({a}, {b})"
                return r if op == "==" else f"(not {r})"
            return f"({a} {op} {b})"
        if op in ("<", ">", "<=", ">="):
            return f"({a} {op} {b})"
        if op == "++":
            assert isinstance(rt, (T.BitT, T.IntT)) and isinstance(lt, (T.BitT, T.IntT))
            bv = b if isinstance(rt, T.BitT) else f"({b} & {_mask(rt.width)})"
            av = a if isinstance(lt, T.BitT) else f"({a} & {_mask(lt.width)})"
            r = f"(({av} << {rt.width}) | {bv})"
            if isinstance(t, T.IntT):
                return f"_to_signed({r}, {t.width})"
            return r
        width = t.width if isinstance(t, (T.BitT, T.IntT)) else None
        if op in ("|+|", "|-|"):
            s = "+" if op == "|+|" else "-"
            assert width is not None
            if isinstance(t, T.BitT):
                if s == "+":
                    return f"min({a} + {b}, {_mask(width)})"
                return f"max({a} - {b}, 0)"
            lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
            return f"max(min({a} {s} {b}, {hi}), {lo})"
        if op == "<<":
            if width is None:
                return f"({a} << {b})"
            sh = (
                self.const_index(e.right)
                if rt is T.INFINT or isinstance(e.right, ast.IntLit)
                else None
            )
            if sh is not None:
                if sh >= width:
                    return "0"
                r = f"(({a} << {sh}) & {_mask(width)})"
            else:
                r = f"_shl({a}, {b}, {width})"
            if isinstance(t, T.IntT):
                return f"_to_signed({r} & {_mask(width)}, {width})"
            return r
        if op == ">>":
            return f"({a} >> {b})"
        if op in ("&", "|", "^"):
            r = f"({a} {op} {b})"
            if lt is T.INFINT and rt is T.INFINT and width is not None:
                return _fit_code(r, t)
            return r
        if op in ("+", "-", "*"):
            r = f"({a} {op} {b})"
            if width is None:
                return r
            return _fit_code(r, t)
        if op in ("/", "%"):
            r = f"_div({a}, {b})" if op == "/" else f"_mod({a}, {b})"
            if lt is T.INFINT and rt is T.INFINT and width is not None:
                return _fit_code(r, t)
            return r
        raise UnsupportedError(f"operator {op}", e.span)

    def g_cast(self, v: str, src: Any, dst: Any) -> str:
        if T.same_type(src, dst) and src is not T.INFINT:
            return v
        if dst is T.BOOL:
            return f"({v} != 0)" if src is not T.BOOL else v
        if src is T.BOOL:
            return f"(1 if {v} else 0)"
        if isinstance(dst, T.EnumT):
            return _fit_code(v, dst.underlying) if dst.underlying is not None else v
        if isinstance(src, T.EnumT):
            src = src.underlying
        if isinstance(dst, T.BitT):
            if isinstance(src, T.BitT) and src.width <= dst.width:
                return v
            return f"({v} & {_mask(dst.width)})"
        if isinstance(dst, T.IntT):
            if isinstance(src, T.IntT) and src.width <= dst.width:
                return v
            return f"_to_signed({v}, {dst.width})"
        return v

    # -- lvalues -------------------------------------------------------------------------

    def g_assign(self, lhs: ast.Expr, value: str, out: Emitter, fresh: bool = False) -> None:
        t = lhs.type
        if is_composite(t):
            target = self.g_expr(lhs)
            out.line(f"{target}._set({value})")
            return
        if isinstance(lhs, ast.Name):
            out.line(f"{self.g_expr(lhs)} = {value}")
            return
        if isinstance(lhs, ast.Member):
            if isinstance(lhs.ref, tuple) and lhs.ref[0] == "stack":
                raise UnsupportedError("cannot assign a scalar to a stack property", lhs.span)
            base = self.g_expr(lhs.expr)
            out.line(f"{base}.f_{lhs.name} = {value}")
            return
        if isinstance(lhs, ast.Slice):
            hi, lo = self.const_index(lhs.hi), self.const_index(lhs.lo)
            assert hi is not None and lo is not None
            bt = lhs.expr.type
            cur = self.g_expr(lhs.expr)
            m = _mask(hi - lo + 1) << lo
            w = bt.width
            full = _mask(w)
            new = f"(({cur} & {full ^ m}) | (({value}) << {lo} & {m}))"
            if isinstance(bt, T.IntT):
                new = f"_to_signed(({cur} & {full ^ m}) | (({value}) << {lo} & {m}), {w})"
            self.g_assign(lhs.expr, new, out)
            return
        if isinstance(lhs, ast.Index):
            raise UnsupportedError("assigning a scalar to a stack element", lhs.span)
        raise UnsupportedError(f"cannot assign to {type(lhs).__name__}", lhs.span)

    # -- statements ----------------------------------------------------------------------

    def g_block(self, stmts: list[ast.Stmt], out: Emitter) -> None:
        n = len(out.lines)
        for s in stmts:
            self.g_stmt(s, out)
        if len(out.lines) == n:
            out.line("pass")

    def flush(self, out: Emitter) -> None:
        for p in self.pre:
            out.line(p)
        self.pre = []

    def g_stmt(self, s: ast.Stmt, out: Emitter) -> None:
        self.pre = []
        if isinstance(s, ast.Block):
            self.g_block(s.stmts, out)
        elif isinstance(s, ast.Assign):
            inner = Emitter()
            inner.level = out.level
            v = self.g_expr(s.rhs)
            if is_composite(s.lhs.type) and isinstance(s.rhs, (ast.ListExpr, ast.StructInit)):
                pass
            self.g_assign(s.lhs, v, inner)
            self.flush(out)
            out.lines.extend(inner.lines)
        elif isinstance(s, ast.CallStmt):
            inner = Emitter()
            inner.level = out.level
            r = self.g_call(s.call, want_value=False, out=inner)
            self.flush(out)
            out.lines.extend(inner.lines)
            if r:
                out.line(r)
        elif isinstance(s, ast.If):
            c = self.g_expr(s.cond)
            self.flush(out)
            out.line(f"if {c}:")
            out.indent()
            self.g_block([s.then], out)
            out.dedent()
            if s.other is not None:
                out.line("else:")
                out.indent()
                self.g_block([s.other], out)
                out.dedent()
        elif isinstance(s, ast.Switch):
            self.g_switch(s, out)
        elif isinstance(s, ast.Exit):
            out.line("raise _ExitSignal()")
        elif isinstance(s, ast.Return):
            self.g_return(s, out)
        elif isinstance(s, ast.VarDecl):
            sym: Sym = s.ref  # type: ignore[attr-defined]
            name = self.var_name(sym)
            t = sym.type
            if s.init is not None:
                v = self.g_expr(s.init)
                self.flush(out)
                if is_composite(t):
                    out.line(f"{name} = {default_value(t, self)}")
                    out.line(f"{name}._set({v})")
                else:
                    out.line(f"{name} = {v}")
            else:
                out.line(f"{name} = {default_value(t, self)}")
        elif isinstance(s, (ast.ConstDecl, ast.Empty)):
            pass
        else:
            raise UnsupportedError(f"statement {type(s).__name__}", s.span)

    def g_return(self, s: ast.Return, out: Emitter) -> None:
        parts = []
        if s.value is not None:
            parts.append(self.g_expr(s.value))
            self.flush(out)
        parts.extend(self.fn.outs)
        if self.fn.kind in ("action", "function") and (self.fn.has_ret or self.fn.outs):
            if self.fn.has_ret and not self.fn.outs:
                out.line(f"return {parts[0]}")
            else:
                out.line("return (" + "".join(p + ", " for p in parts) + ")")
        else:
            out.line("return")

    def g_switch(self, s: ast.Switch, out: Emitter) -> None:
        v = self.g_expr(s.expr)
        self.flush(out)
        var = self.tmp("sw")
        out.line(f"{var} = {v}")
        is_action = isinstance(s.expr.type, T.ActionRunT)
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
                elif is_action:
                    assert isinstance(lbl, ast.Name)
                    ti = self.table_inst(s.expr.type.table)
                    fq = ti.action_fq[id(lbl.ref)]
                    conds.append(f"{var} == {fq!r}")
                else:
                    conds.append(f"{var} == {self.g_expr(lbl)}")
            if is_default:
                if first:
                    out.line("if True:")
                else:
                    out.line("else:")
            else:
                out.line(("if " if first else "elif ") + " or ".join(conds) + ":")
            out.indent()
            self.g_block(body.stmts, out)
            out.dedent()
            first = False

    # -- calls ---------------------------------------------------------------------------

    def g_call(self, e: ast.Call, want_value: bool, out: Emitter | None = None) -> str | None:
        info: CallInfo = e.ref
        if out is None:
            # expression context: statements go to self.pre
            out = Emitter()
            res = self._g_call(e, info, want_value, out)
            self.pre.extend(out.lines)
            return res
        return self._g_call(e, info, want_value, out)

    def _g_call(self, e: ast.Call, info: CallInfo, want_value: bool, out: Emitter) -> str | None:
        kind = info.kind
        if kind == "header_method":
            target = info.target
            h = self.g_expr(target)
            if info.name == "isValid":
                return f"{h}._v"
            if info.name == "setValid":
                self.union_siblings_invalidate(target, out)
                out.line(f"{h}._v = True")
            else:
                out.line(f"{h}._v = False")
            return None
        if kind == "stack_method":
            s = self.g_expr(info.target)
            fn = "_push_front" if info.name == "push_front" else "_pop_front"
            out.line(f"{fn}({s}, {info.args[0]})")
            return None
        if kind == "size_method":
            return repr(info.args[0])
        if kind == "table_apply":
            ti = self.table_inst(info.decl)
            return f"T_{ti.py}()"
        if kind == "packet_method":
            return self.g_packet_method(e, info, out)
        if kind in ("action", "function"):
            return self.g_direct_call(e, info, out, want_value)
        if kind == "block_apply":
            return self.g_block_apply(e, info, out)
        if kind == "extern_func":
            from switch.compile.v1model_externs import EXTERN_FUNCTIONS

            emit = EXTERN_FUNCTIONS.get(info.name)
            if emit is None:
                raise UnsupportedError(
                    f"extern function '{info.name}' is not supported by this target", e.span
                )
            return emit(self, e, info, out)
        if kind == "extern_method":
            from switch.compile.v1model_externs import EXTERN_METHODS

            emit_m = EXTERN_METHODS.get((info.extern_name, info.name))
            if emit_m is None:
                raise UnsupportedError(
                    f"method '{info.extern_name}.{info.name}' is not supported by this target",
                    e.span,
                )
            return emit_m(self, e, info, out)
        raise UnsupportedError(f"call of kind {kind}", e.span)

    def union_siblings_invalidate(self, target: ast.Expr, out: Emitter) -> None:
        if (
            isinstance(target, ast.Member)
            and isinstance(target.expr.type, T.StructLikeT)
            and (target.expr.type.kind == "header_union")
        ):
            u = self.g_expr(target.expr)
            for n in target.expr.type.fields:
                if n != target.name:
                    out.line(f"{u}.f_{n}._v = False")

    def arg_value(self, p: ast.Param, pt: Any, a: ast.Expr | None) -> str:
        if a is None:
            if p.default is not None:
                return self.g_expr(p.default)
            return default_value(pt, self)
        v = self.g_expr(a)
        if p.direction in ("", "in") and is_composite(pt):
            return f"{v}.copy()"
        return v

    def ordered_args(self, info: CallInfo) -> list[str]:
        """Argument values, left to right: an `in` argument keeps its value from before the
        side effects (calls with out/inout arguments) of the arguments after it."""
        args: list[str] = []
        for p, pt, a in zip(info.params, info.param_types, info.args):
            saved = self.pre
            self.pre = []
            v = self.arg_value(p, pt, a)
            effects, self.pre = self.pre, saved
            if effects:
                for i, (q, prev) in enumerate(zip(info.params, args)):
                    if q.direction in ("", "in"):
                        keep = self.tmp("a")
                        self.pre.append(f"{keep} = {prev}")
                        args[i] = keep
                self.pre.extend(effects)
            args.append(v)
        return args

    def g_direct_call(
        self, e: ast.Call, info: CallInfo, out: Emitter, want_value: bool
    ) -> str | None:
        decl = info.decl
        if info.kind == "action":
            fname = self.action_fn(decl)
        else:
            fname = self.function_fn(decl)
        args = self.ordered_args(info)
        outs = [
            (p, a)
            for p, pt, a in zip(info.params, info.param_types, info.args)
            if p.direction in ("out", "inout") and not is_composite(pt)
        ]
        has_ret = info.kind == "function" and decl.ret_type is not T.VOID
        call = f"{fname}({', '.join(args)})"
        if not outs:
            if has_ret and want_value:
                return call
            out.line(call)
            return None
        r = self.tmp("r")
        out.line(f"{r} = {call}")
        base = 1 if has_ret else 0
        for i, (_p, a) in enumerate(outs):
            if a is not None:
                self.g_assign(a, f"{r}[{base + i}]", out)
        if has_ret:
            return f"{r}[0]"
        return None

    def g_block_apply(self, e: ast.Call, info: CallInfo, out: Emitter) -> str | None:
        target = info.target
        if not (isinstance(target, ast.Name) and isinstance(target.ref, Sym)):
            raise UnsupportedError("apply of a block that is not a local instance", e.span)
        assert self.inst is not None
        child = self.inst.children[id(target.ref.decl)]
        args = []
        for p, pt, a in zip(info.params, info.param_types, info.args):
            if isinstance(pt, T.ExternT) and pt.decl.name in ("packet_in", "packet_out"):
                args.append(self.fn.pkt)
            else:
                args.append(self.arg_value(p, pt, a))
        outs = [
            (p, a)
            for p, pt, a in zip(info.params, info.param_types, info.args)
            if p.direction in ("out", "inout") and not is_composite(pt)
        ]
        prefix = "P_" if isinstance(child.decl, ast.ParserDecl) else "C_"
        call = f"{prefix}{child.py}({', '.join(args)})"
        if isinstance(child.decl, ast.ParserDecl):
            if outs:
                r = self.tmp("r")
                out.line(f"{r} = {call}")
                for i, (_p, a) in enumerate(outs):
                    if a is not None:
                        self.g_assign(a, f"{r}[{i}]", out)
            else:
                out.line(call)
            return None
        out.line(call)
        # the callee's own parameters (the call may go through a control *type* declaration
        # when the instance was passed as a constructor argument)
        own = {id(p): q for p, q in zip(info.params, child.decl.params)}
        for p, a in outs:
            if a is not None:
                q = own[id(p)]
                self.g_assign(a, f"G_{child.py}__{q.ref.pyname}", out)  # type: ignore[attr-defined]
        return None

    def g_packet_method(self, e: ast.Call, info: CallInfo, out: Emitter) -> str | None:
        pkt = self.fn.pkt
        name = info.name
        if info.extern_name == "packet_out":
            if name == "emit":
                a = info.args[0]
                assert a is not None
                self.g_emit(self.g_expr(a), a.type, out)
                return None
        else:
            if name == "extract":
                a = info.args[0]
                assert a is not None
                if isinstance(a, ast.Member) and a.ref == ("stack", "next"):
                    stack = self.g_expr(a.expr)
                    h = self.tmp("h")
                    out.line(f"{h} = _stack_next({stack}, {self.err_code('StackOutOfBounds')})")
                    self.g_extract(h, a.type, out)
                    out.line(f"{stack}.nextIndex += 1")
                else:
                    h = self.g_expr(a)
                    self.flush(out)
                    self.union_siblings_invalidate(a, out)
                    self.g_extract(h, a.type, out)
                return None
            if name == "lookahead":
                lt = info.bindings.get("T") if info.bindings else None
                if lt is None:
                    raise UnsupportedError("lookahead without a type", e.span)
                w = T.width_of(lt)
                if w % 8:
                    v = self.tmp("la")
                    nb = (w + 7) // 8
                    out.line(
                        f"if {pkt}.off + {nb} > {pkt}.n: raise _ParserError({self.err_code('PacketTooShort')})"
                    )
                    out.line(
                        f"{v} = int.from_bytes({pkt}.buf[{pkt}.off:{pkt}.off + {nb}], 'big') >> {nb * 8 - w}"
                    )
                else:
                    nb = w // 8
                    v = self.tmp("la")
                    out.line(
                        f"if {pkt}.off + {nb} > {pkt}.n: raise _ParserError({self.err_code('PacketTooShort')})"
                    )
                    out.line(f"{v} = int.from_bytes({pkt}.buf[{pkt}.off:{pkt}.off + {nb}], 'big')")
                if isinstance(lt, T.StructLikeT) and lt.kind == "header":
                    h = self.tmp("lh")
                    out.line(f"{h} = {self.class_of(lt)}()")
                    out.line(f"{h}._ext({v})")
                    return h
                if isinstance(lt, T.StructLikeT) and lt.kind == "struct":
                    return self.g_unpack_struct(lt, v, w, out, e)
                if lt is T.BOOL:
                    return f"({v} != 0)"
                if isinstance(lt, T.IntT):
                    return f"_to_signed({v}, {w})"
                if isinstance(lt, T.BitT):
                    return v
                raise UnsupportedError(f"lookahead of {lt}", e.span)
            if name == "advance":
                a = info.args[0]
                assert a is not None
                n = self.g_expr(a)
                bits = self.tmp("adv")
                out.line(f"{bits} = {n}")
                out.line(
                    f"if {bits} % 8: raise _ParserError({self.err_code('ParserInvalidArgument')})"
                )
                out.line(
                    f"if {pkt}.off + {bits} // 8 > {pkt}.n: raise _ParserError({self.err_code('PacketTooShort')})"
                )
                out.line(f"{pkt}.off += {bits} // 8")
                return None
            if name == "length":
                return f"({pkt}.n & 0xffffffff)"
        raise UnsupportedError(f"packet method '{name}'", e.span)

    def g_unpack_struct(self, t: T.StructLikeT, v: str, w: int, out: Emitter, e: ast.Expr) -> str:
        """A struct of bit/int/bool fields filled from the big-endian integer `v` (lookahead)."""
        st = self.tmp("ls")
        out.line(f"{st} = {self.class_of(t)}()")
        shift = w
        for path, ft in self._flat_fields(t):
            if not (ft is T.BOOL or isinstance(ft, (T.BitT, T.IntT))):
                raise UnsupportedError(
                    f"lookahead of a struct with a {ft} field is not supported", e.span
                )
            fw = T.width_of(ft)
            shift -= fw
            fv = f"(({v} >> {shift}) & {_mask(fw)})"
            if ft is T.BOOL:
                fv = f"bool({fv})"
            elif isinstance(ft, T.IntT):
                fv = f"_to_signed({fv}, {fw})"
            out.line(f"{st}.{path} = {fv}")
        return st

    def g_extract(self, h: str, t: Any, out: Emitter) -> None:
        nb = T.width_of(t) // 8
        pkt = self.fn.pkt
        o = self.tmp("o")
        out.line(f"{o} = {pkt}.off + {nb}")
        out.line(f"if {o} > {pkt}.n: raise _ParserError({self.err_code('PacketTooShort')})")
        out.line(f"{h}._ext(_from_bytes({pkt}.buf[{pkt}.off:{o}], 'big'))")
        out.line(f"{pkt}.off = {o}")

    def g_emit(self, v: str, t: Any, out: Emitter) -> None:
        pkt = self.fn.pkt
        if isinstance(t, T.StructLikeT):
            if t.kind == "header":
                out.line(f"if {v}._v: {pkt}.append({v}._bytes())")
                return
            for n, ft in t.fields.items():
                self.g_emit(f"{v}.f_{n}", ft, out)
            return
        if isinstance(t, T.StackT):
            out.line(f"for _eh in {v}.items:")
            out.indent()
            out.line(f"if _eh._v: {pkt}.append(_eh._bytes())")
            out.dedent()
            return
        raise UnsupportedError(
            f"emit of a {t} (only headers, stacks, unions and structs of them)", None
        )

    # -- functions and actions -------------------------------------------------------------

    def action_fn(self, decl: ast.ActionDecl) -> str:
        """The Python function for an action in the current instance (generated on demand)."""
        owner_block = self.inst is not None and any(loc is decl for loc in self.inst.decl.locals)
        if owner_block:
            assert self.inst is not None
            name = f"A_{self.inst.py}__{decl.name}"
        else:
            name = f"A__{decl.name}_{id(decl) % 100000}"
        if name not in self.generated_actions:
            self.generated_actions.add(name)
            self.gen_callable(
                name,
                decl,
                decl.params,
                decl.body,
                "action",
                False,
                self.inst if owner_block else None,
            )
        return name

    def function_fn(self, decl: ast.FunctionDecl) -> str:
        name = f"F__{decl.name}_{id(decl) % 100000}"
        if id(decl) not in self.generated_functions:
            self.generated_functions.add(id(decl))
            self.gen_callable(
                name, decl, decl.params, decl.body, "function", decl.ret_type is not T.VOID, None
            )  # type: ignore[attr-defined]
        return name

    def gen_callable(
        self,
        name: str,
        decl: Any,
        params: list[ast.Param],
        body: ast.Block,
        kind: str,
        has_ret: bool,
        inst: BlockInst | None,
    ) -> None:
        saved = (self.inst, self.fn, self.pre)
        self.inst = inst
        outs = [
            p.ref.pyname
            for p in params  # type: ignore[attr-defined]
            if p.direction in ("out", "inout") and not is_composite(p.ref.type)
        ]  # type: ignore[attr-defined]
        self.fn = FnCtx(kind, outs, has_ret)
        self.pre = []
        e = Emitter()
        e.level = 1
        for p in params:
            if p.direction == "out" and not is_composite(p.ref.type):  # type: ignore[attr-defined]
                e.line(f"{p.ref.pyname} = {default_value(p.ref.type, self)}")  # type: ignore[attr-defined]
        self.g_block(body.stmts, e)
        if outs:
            e.line("return (" + "".join(o + ", " for o in outs) + ")")
        head = f"def {name}({', '.join(p.ref.pyname for p in params)}):"  # type: ignore[attr-defined]
        lines = [head]
        if self.fn.globals:
            lines.append("    global " + ", ".join(sorted(self.fn.globals)))
        lines.extend(e.lines)
        self.function_defs.append("\n".join(lines) + "\n")
        self.inst, self.fn, self.pre = saved

    # -- parsers -------------------------------------------------------------------------

    def gen_parser(self, inst: BlockInst) -> None:
        decl: ast.ParserDecl = inst.decl  # type: ignore[assignment]
        self.inst = inst
        pkt_param = None
        outs = []
        for p in decl.params:
            pt = p.ref.type  # type: ignore[attr-defined]
            if isinstance(pt, T.ExternT) and pt.decl.name == "packet_in":
                pkt_param = p
            elif p.direction in ("out", "inout") and not is_composite(pt):
                outs.append(p.ref.pyname)  # type: ignore[attr-defined]
        self.fn = FnCtx("parser", outs, False, pkt=pkt_param.ref.pyname if pkt_param else "pkt")  # type: ignore[attr-defined]
        e = Emitter()
        e.level = 1
        top_level = any(inst is b for b in self.elab.blocks.values())
        for p in decl.params:
            pt = p.ref.type  # type: ignore[attr-defined]
            if p.direction == "out" and is_composite(pt) and not top_level:
                # 'out' starts uninitialized (headers invalid); the architecture already passes
                # fresh objects to the top-level blocks
                e.line(f"{p.ref.pyname}._set({self.class_of(pt)}())")  # type: ignore[attr-defined]
        for p, v in inst.ctor_values:
            e.line(f"{p.ref.pyname} = {self.const_repr(v)}")  # type: ignore[attr-defined]
        for loc in decl.locals:
            if isinstance(loc, ast.VarDecl):
                self.g_stmt(loc, e)
        state_ids = {s.name: i for i, s in enumerate(decl.states)}
        e.line(f"_st = {state_ids['start']}")
        e.line("while True:")
        e.indent()
        for i, st in enumerate(decl.states):
            e.line(("if" if i == 0 else "elif") + f" _st == {i}:  # state {st.name}")
            e.indent()
            for s in st.stmts:
                self.g_stmt(s, e)
            self.g_transition(st.transition, state_ids, e)
            e.dedent()
        e.dedent()
        if outs:
            e.line("return (" + "".join(o + ", " for o in outs) + ")")
        params = [p.ref.pyname for p in decl.params]  # type: ignore[attr-defined]
        lines = [f"def P_{inst.py}({', '.join(params)}):"]
        lines.extend(e.lines)
        self.function_defs.append("\n".join(lines) + "\n")
        self.inst = None

    def g_transition(self, tr: ast.Transition | None, ids: dict[str, int], e: Emitter) -> None:
        def goto(name: str) -> str:
            if name == "accept":
                return "break"
            if name == "reject":
                return "raise _ParserError(-1)"
            return f"_st = {ids[name]}; continue"

        if tr is None:
            e.line(goto("reject"))
            return
        if tr.state is not None:
            e.line(goto(tr.state))
            return
        assert tr.select is not None
        keys = [self.g_expr(x) for x in tr.select]
        self.flush(e)
        kvars = []
        for k in keys:
            kv = self.tmp("k")
            e.line(f"{kv} = {k}")
            kvars.append(kv)
        first = True
        for case in tr.cases:
            cond = self.keyset_cond(case.keyset, kvars, [x.type for x in tr.select])
            self.flush(e)
            if cond == "True":
                e.line("if True:" if first else "else:")
            else:
                e.line(("if " if first else "elif ") + cond + ":")
            e.indent()
            e.line(goto(case.state))
            e.dedent()
            first = False
            if cond == "True":
                break
        else:
            e.line(f"raise _ParserError({self.err_code('NoMatch')})")

    def keyset_cond(self, ks: ast.Expr, kvars: list[str], ktypes: list[Any]) -> str:
        if isinstance(ks, ast.Name) and isinstance(ks.ref, Sym) and ks.ref.kind == "value_set":
            vs = self.value_set_py(ks.ref)
            key = "(" + "".join(k + ", " for k in kvars) + ")"
            return f"{vs}.contains({key})"
        if len(kvars) > 1:
            items = ks.items if isinstance(ks, ast.ListExpr) else None
            if items is None:
                if isinstance(ks, (ast.Default, ast.DontCare)):
                    return "True"
                raise UnsupportedError("tuple keyset", ks.span)
            conds = [self.simple_keyset_cond(i, k, t) for i, k, t in zip(items, kvars, ktypes)]
            conds = [c for c in conds if c != "True"]
            return " and ".join(conds) if conds else "True"
        if isinstance(ks, ast.ListExpr):
            ks = ks.items[0]
        return self.simple_keyset_cond(ks, kvars[0], ktypes[0])

    def simple_keyset_cond(self, ks: ast.Expr, k: str, kt: Any) -> str:
        if isinstance(ks, (ast.Default, ast.DontCare)):
            return "True"
        if isinstance(ks, ast.Mask):
            v, m = self.g_expr(ks.value), self.g_expr(ks.mask)
            return f"({k} & {m}) == ({v} & {m})"
        if isinstance(ks, ast.Range):
            return f"{self.g_expr(ks.lo)} <= {k} <= {self.g_expr(ks.hi)}"
        return f"{k} == {self.g_expr(ks)}"

    def value_set_py(self, sym: Sym) -> str:
        fq = sym.decl.fqname
        py = "VS_" + "".join(c if c.isalnum() else "_" for c in fq)
        self.bindings[py] = ("value_set", fq)
        return py

    # -- controls ------------------------------------------------------------------------

    def gen_control(self, inst: BlockInst) -> None:
        decl: ast.ControlDecl = inst.decl  # type: ignore[assignment]
        self.inst = inst
        self.fn = FnCtx("control")
        e = Emitter()
        e.level = 1
        top_level = any(inst is b for b in self.elab.blocks.values())
        pnames = []
        for p in decl.params:
            sym: Sym = p.ref  # type: ignore[attr-defined]
            g = self.var_name(sym)
            if isinstance(sym.type, T.ExternT) and sym.type.decl.name == "packet_out":
                self.fn.pkt = g
            pnames.append(sym.pyname)
            pt = sym.type
            if p.direction == "out" and is_composite(pt) and not top_level:
                e.line(f"{sym.pyname}._set({self.class_of(pt)}())")
            e.line(f"{g} = {sym.pyname}")
        for loc in decl.locals:
            if isinstance(loc, ast.VarDecl):
                self.g_stmt(loc, e)
        self.g_block(decl.body.stmts, e)
        for p, v in inst.ctor_values:
            self.function_defs.append(f"{self.var_name(p.ref)} = {self.const_repr(v)}\n")
        lines = [f"def C_{inst.py}({', '.join(pnames)}):"]
        if self.fn.globals:
            lines.append("    global " + ", ".join(sorted(self.fn.globals)))
        lines.extend(e.lines)
        self.function_defs.append("\n".join(lines) + "\n")
        for ti in inst.tables.values():
            self.gen_table(ti, inst)
        self.inst = None

    def gen_table(self, ti: TableInst, inst: BlockInst) -> None:
        d = ti.decl
        spec = ti.spec
        assert spec is not None
        self.inst = inst
        self.fn = FnCtx("control")
        self.pre = []
        e = Emitter()
        e.level = 1
        kp = d.prop("key")
        match_keys: list[str] = []
        sel_keys: list[str] = []
        for k in kp.keys if kp is not None and kp.keys else []:
            v = self.g_expr(k.expr)
            kt = k.expr.type
            if kt is T.BOOL:
                v = f"int({v})"
            elif isinstance(kt, T.IntT):
                v = f"({v} & {_mask(kt.width)})"
            (sel_keys if k.match_kind == "selector" else match_keys).append(v)
        self.flush(e)
        tbl = f"TBL_{ti.py}"
        self.bindings[tbl] = ("table", ti.fqname)
        key = "(" + "".join(k + ", " for k in match_keys) + ")"
        if sel_keys:
            sel = "(" + "".join(k + ", " for k in sel_keys) + ")"
            e.line(f"_e, _a, _args = {tbl}.lookup({key}, {sel})")
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
                self.bindings[dm] = ("direct_meter", spec.direct_meter)
                e.line(f"_rt.dm_color = {dm}.execute(_e, _rt.now_us, _rt.pkt_len)")
            e.dedent()
            if spec.direct_meter:
                e.line("else:")
                e.line("    _rt.dm_color = 0")
        dispatch = f"D_{ti.py}"
        e.line(f"{dispatch}[_a](*_args)")
        e.line("return (_e is not None, _a)")
        lines = [f"def T_{ti.py}():"]
        if self.fn.globals:
            lines.append("    global " + ", ".join(sorted(self.fn.globals)))
        lines.extend(e.lines)
        self.function_defs.append("\n".join(lines) + "\n")
        # dispatch table: action name -> function taking the action data
        ap = d.prop("actions")
        assert ap is not None and ap.actions is not None
        entries = []
        for i, (ref, adecl) in enumerate(zip(ap.actions, d.action_decls)):  # type: ignore[attr-defined]
            fq = ti.action_fq[id(adecl)]
            fn = self.action_wrapper(ti, i, ref, adecl)
            entries.append(f"{fq!r}: {fn}")
        if spec.default_action.name not in ti.action_fq.values():
            # implicit `default_action = NoAction()` of a table that does not list it
            entries.append(f"{spec.default_action.name!r}: _noop")
        self.dispatch_defs.append(f"{dispatch} = {{{', '.join(entries)}}}\n")
        self.inst = None

    def action_wrapper(
        self, ti: TableInst, i: int, ref: ast.ActionRefSyntax, adecl: ast.ActionDecl
    ) -> str:
        """The function the table calls with the action data; binds directional arguments."""
        fn = self.action_fn(adecl)
        dir_params = [p for p in adecl.params if p.direction]
        data_params = [p for p in adecl.params if not p.direction]
        needs_conv = any(
            p.ref.type is T.BOOL or isinstance(p.ref.type, T.IntT)  # type: ignore[attr-defined]
            for p in data_params
        )
        if not dir_params and not needs_conv:
            return fn
        name = f"W_{ti.py}_{i}"
        saved = (self.fn, self.pre)
        self.fn = FnCtx("control")
        self.pre = []
        e = Emitter()
        e.level = 1
        info = ref.call_info  # type: ignore[attr-defined]
        args = []
        for p, pt, a in zip(info.params, info.param_types, info.args):
            args.append(self.arg_value(p, pt, a))
        dnames = [f"d{j}" for j in range(len(data_params))]
        for p, dn in zip(data_params, dnames):
            pt = p.ref.type  # type: ignore[attr-defined]
            if pt is T.BOOL:
                args.append(f"bool({dn})")
            elif isinstance(pt, T.IntT):
                args.append(f"_to_signed({dn}, {pt.width})")
            else:
                args.append(dn)
        self.flush(e)
        outs = [
            (p, a)
            for p, pt, a in zip(info.params, info.param_types, info.args)
            if p.direction in ("out", "inout") and not is_composite(pt)
        ]
        call = f"{fn}({', '.join(args)})"
        if outs:
            e.line(f"_r = {call}")
            for j, (_p, a) in enumerate(outs):
                self.g_assign(a, f"_r[{j}]", e)
        else:
            e.line(call)
        lines = [f"def {name}({', '.join(dnames)}):"]
        if self.fn.globals:
            lines.append("    global " + ", ".join(sorted(self.fn.globals)))
        lines.extend(e.lines)
        self.function_defs.append("\n".join(lines) + "\n")
        self.fn, self.pre = saved
        return name

    # -- whole program -----------------------------------------------------------------

    def generate(self) -> str:
        self.function_defs: list[str] = []
        self.dispatch_defs: list[str] = []
        blocks = self.elab.blocks
        ing = blocks["ingress"].decl
        # the user metadata type M of V1Switch<H, M> and the standard_metadata type
        self.hdr_type = ing.params[0].ref.type  # type: ignore[attr-defined]
        self.meta_type = ing.params[1].ref.type  # type: ignore[attr-defined]
        self.sm_type = ing.params[2].ref.type  # type: ignore[attr-defined]
        for inst in self.elab.all_blocks:
            for ext in inst.externs.values():
                self.bindings[ext.py] = ("extern", ext.fqname)
        for ext in self.elab.global_externs.values():
            self.bindings[ext.py] = ("extern", ext.fqname)
        for inst in self.elab.all_blocks:
            if isinstance(inst.decl, ast.ParserDecl):
                self.gen_parser(inst)
            else:
                self.gen_control(inst)
        self.class_of(self.hdr_type)
        self.class_of(self.meta_type)
        self.class_of(self.sm_type)
        fl = self.gen_field_lists()
        out: list[str] = [
            "# generated by tailfabric's P4 compiler; do not edit",
            "_from_bytes = int.from_bytes",
            "def _noop(*_args):\n    pass\n",
        ]
        out.extend(self.class_defs)
        out.extend(self.function_defs)
        out.extend(self.dispatch_defs)
        out.append(fl)
        names = {role: ("P_" if role in ("parser",) else "C_") + b.py for role, b in blocks.items()}
        # a control whose apply block is empty has no effect: the architecture skips the call
        for role, b in blocks.items():
            if isinstance(b.decl, ast.ControlDecl) and not b.decl.body.stmts and role != "deparser":
                names[role] = "None"
        out.append("ENTRY = {" + ", ".join(f"{r!r}: {n}" for r, n in names.items()) + "}")
        out.append(f"NEW_HEADERS = {self.class_of(self.hdr_type)}")
        out.append(f"NEW_META = {self.class_of(self.meta_type)}")
        out.append(f"NEW_SM = {self.class_of(self.sm_type)}")
        return "\n".join(out) + "\n"

    def gen_field_lists(self) -> str:
        """Save/restore functions for @field_list(N) metadata (resubmit, recirculate, clone)."""
        lists: dict[int, list[str]] = {}

        def walk(t: T.StructLikeT, path: str) -> None:
            for n, ft in t.fields.items():
                if isinstance(ft, T.StructLikeT) and ft.kind == "struct":
                    walk(ft, f"{path}.f_{n}")
                    continue
                for a in t.field_annotations.get(n, []):
                    if a.name == "field_list":
                        for tok in a.tokens:
                            if tok.kind.name == "INT":
                                lists.setdefault(tok.value[0], []).append(f"{path}.f_{n}")

        if isinstance(self.meta_type, T.StructLikeT):
            walk(self.meta_type, "m")
        lines = []
        for idx, paths in sorted(lists.items()):
            lines.append(f"def FL_SAVE_{idx}(m):")
            lines.append("    return (" + "".join(p + ", " for p in paths) + ")")
            lines.append(f"def FL_LOAD_{idx}(m, v):")
            for i, p in enumerate(paths):
                lines.append(f"    {p} = v[{i}]")
            if not paths:
                lines.append("    pass")
        for idx, (save, load) in enumerate(self.old_field_lists):
            lines.append(f"def FL_SAVE_OLD{idx}(m, sm):")
            lines.append("    return (" + "".join(p + ", " for p in save) + ")")
            lines.append(f"def FL_LOAD_OLD{idx}(m, sm, v):")
            for i, p in enumerate(load):
                lines.append(f"    {p} = v[{i}]")
            if not load:
                lines.append("    pass")
        ids = sorted(lists)
        lines.append(
            "FIELD_LISTS = {" + ", ".join(f"{i}: (FL_SAVE_{i}, FL_LOAD_{i})" for i in ids) + "}"
        )
        lines.append(
            "OLD_FIELD_LISTS = ["
            + ", ".join(
                f"(FL_SAVE_OLD{i}, FL_LOAD_OLD{i})" for i in range(len(self.old_field_lists))
            )
            + "]"
        )
        return "\n".join(lines) + "\n"


def _emit_copy(e: Emitter, name: str) -> None:
    """``copy()`` of a generated header/struct/stack class: a new object ``_set`` from this one."""
    e.line("def copy(self):")
    e.indent()
    e.line(f"n = {name}()")
    e.line("n._set(self)")
    e.line("return n")
    e.dedent()


def _signed(v: int, width: int) -> int:
    half = 1 << (width - 1)
    return ((v + half) & ((1 << width) - 1)) - half


def _fit(v: int, t: Any) -> int:
    if isinstance(t, T.BitT):
        return v & _mask(t.width)
    if isinstance(t, T.IntT):
        return _signed(v, t.width)
    return v


def _fit_code(code: str, t: Any) -> str:
    if isinstance(t, T.BitT):
        return f"({code} & {_mask(t.width)})"
    if isinstance(t, T.IntT):
        return f"_to_signed({code}, {t.width})"
    return code
