"""C code generation: the elaborated program becomes one C translation unit.

The generated C runs a packet exactly as :meth:`switch.pipeline.v1model.V1Switch.process` does
for the constructs it supports; anything else raises :class:`Unsupported` with the reason, and
the caller keeps the Python executor. Conventions:

- Every scalar value is computed as ``u128`` (``unsigned __int128``) and kept within its P4
  width; fields are stored as ``uint64_t`` (up to 64 bits) or ``u128``. ``int<W>``, ``varbit``,
  header unions, tuples and fields wider than 128 bits are not supported.
- Headers are C structs with ``valid`` and ``f_<name>`` fields; stacks are ``{s[N], next}``.
  ``hdr``, user metadata and ``standard_metadata`` live in the switch context ``X``, as do
  control- and parser-level variables (actions reach them); other variables are C locals.
- Tables call :c:func:`table_apply` of the hand-written runtime
  (:mod:`switch.native.runtime_c`) and dispatch the action by its index in the table's list;
  ``exit`` sets ``X->exited`` and returns, and callers return when it is set.
- Registers (up to 64 bits, unsigned) and counters use arrays shared with the Python objects of
  :class:`switch.pipeline.state.SwitchState` (bound by :mod:`switch.native.executor`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from switch.compile import CompiledProgram
from switch.compile.elaborate import BlockInst, ExternInst, TableInst
from switch.compile.widths import target_width
from switch.lang import ast, constfold
from switch.lang import types as T
from switch.lang.symbols import (
    EnumMember,
    ErrorMember,
    StackProperty,
    StackSize,
    Sym,
)
from switch.native.runtime_c import DRIVER, RUNTIME
from switch.schema import MatchKind

DROP_PORT = 511
ROLES = ("parser", "verify_checksum", "ingress", "egress", "compute_checksum", "deparser")


class Unsupported(Exception):
    """A construct the C generator does not translate (the message says which, and where)."""


@dataclass
class NativeTable:
    """What the Python loader needs to fill one table of the generated code."""

    index: int
    fqname: str
    actions: dict[str, int]  # fully qualified action name -> index in the C dispatch
    kinds: tuple[MatchKind, ...]  # match keys (selector keys excluded)
    widths: tuple[int, ...]
    nargs: int
    selector: bool


@dataclass
class NativeProgram:
    """The generated C source and the layout the executor binds to it."""

    source: str
    tables: list[NativeTable]
    externs: list[tuple[str, str, int]]  # (kind 'counter' | 'register', fq name, size)
    digests: list[tuple[str, int]]  # (digest name, number of fields)
    digest_stride: int  # uint64 words per digest record: index + (hi, lo) per field
    max_header_bytes: int


@dataclass
class _Fn:
    """The function being generated."""

    kind: str  # 'parser' | 'control' | 'action' | 'function' | 'table' | 'deparser'
    role: str = ""


def _lit(v: int) -> str:
    if v < 0:
        raise Unsupported(f"negative constant {v}")
    if v >> 128:
        raise Unsupported(f"constant {v:#x} wider than 128 bits")
    if v >> 64:
        return f"U128({v >> 64:#x}ull, {v & ((1 << 64) - 1):#x}ull)"
    return f"((u128){v:#x}ull)"


def _mask(w: int) -> str:
    return _lit((1 << w) - 1)


def _where(node: Any) -> str:
    span = getattr(node, "span", None)
    if span is None:
        return ""
    line = getattr(span, "line", None)
    return f" (line {line})" if line else ""


def _scalar_width(t: T.Type | None, what: str = "value") -> int:
    if t is T.BOOL:
        return 1
    if isinstance(t, T.BitT):
        w = t.width
    elif t is T.ERROR:
        w = target_width(t)
    elif isinstance(t, T.EnumT):
        if isinstance(t.underlying, T.IntT):
            raise Unsupported(f"signed enum {t.name}")
        w = target_width(t)
    elif isinstance(t, T.IntT):
        w = t.width  # kept as its two's complement bit pattern
    else:
        raise Unsupported(f"{what} of type {t}")
    if w > 128:
        raise Unsupported(f"{what} of {w} bits (at most 128)")
    return w


def _ctype_scalar(t: T.Type | None) -> str:
    return "u128" if _scalar_width(t) > 64 else "u64"


class CGen:
    """Generates the C translation unit of one compiled program."""

    def __init__(self, program: CompiledProgram) -> None:
        self.program = program
        self.elab = program.elaborated
        self.errors = self.elab.checked.errors
        self.types: dict[int | tuple[int, int], str] = {}
        self.type_defs: list[str] = []
        self.codecs: list[str] = []
        self.vars: dict[int, str] = {}
        self.ctx_fields: list[str] = []
        self.protos: list[str] = []
        self.funcs: list[str] = []
        self.tables: list[NativeTable] = []
        self.table_ids: dict[int, int] = {}  # id(TableInst) -> index
        self.table_defs: list[str] = []
        self.table_inits: list[str] = []
        self.externs: list[tuple[str, str, int]] = []
        self.extern_ids: dict[str, int] = {}
        self.digests: list[tuple[str, int]] = []
        self.digest_ids: dict[str, int] = {}
        self.digest_readers: list[str] = []
        self.actions: dict[tuple[int, str], str] = {}
        self.functions: dict[int, str] = {}
        self.nested: dict[int, str] = {}  # id(BlockInst) -> C function of a nested control
        self.hoist: ast.Expr | None = None  # a call that may run before the statement
        # True while generating an expression with side effects (table applies, function
        # calls): every operand is then computed into a temporary, in P4's left-to-right order
        self.seq = False
        # id(node) -> C value of an l-value already evaluated: a compound assignment
        # `a op= b` is parsed as `a = a op b` sharing the node `a`, evaluated only once
        self.memo: dict[int, str] = {}
        self.action_exits: dict[int, bool] = {}
        self.inst: BlockInst | None = None
        self.fn = _Fn("control")
        self.n = 0
        self.out: list[str] = []
        self.ind = 0
        self.scratch: dict[str, str] = {}  # header C type -> X field for out-of-range indexes
        ing = self.elab.blocks["ingress"].decl
        self.hdr_type = ing.params[0].sym.type
        self.meta_type = ing.params[1].sym.type
        self.sm_type = ing.params[2].sym.type
        self.max_fields = 1

    # -- small helpers ---------------------------------------------------------------------

    def fresh(self, base: str) -> str:
        self.n += 1
        return f"{base}{self.n}"

    def line(self, s: str) -> None:
        self.out.append("    " * self.ind + s)

    def err(self, name: str) -> int:
        return int(self.errors.get(name, 0))

    # -- types -----------------------------------------------------------------------------

    def ctype(self, t: T.Type | None) -> str:
        if isinstance(t, T.StackT):
            key: int | tuple[int, int] = (id(t.elem), t.size)
            if key not in self.types:
                el = self.ctype(t.elem)
                name = f"K{len(self.types)}"
                self.types[key] = name
                self.type_defs.append(
                    f"typedef struct {{ {el} s[{t.size}]; uint32_t next; }} {name};"
                )
                self.codecs.append(
                    f"static inline {el} *at_{name}({name} *k, u128 i, {el} *scr) {{\n"
                    f"    if (i < {t.size}) return &k->s[(int)i];\n"
                    f"    memset(scr, 0, sizeof *scr);\n    return scr;\n}}"
                )
            return self.types[key]
        if isinstance(t, T.StructLikeT):
            if t.kind == "header_union":
                raise Unsupported(f"header union {t.name}")
            if id(t) not in self.types:
                fields = []
                for n, ft in t.fields.items():
                    if isinstance(ft, (T.StructLikeT, T.StackT)):
                        fields.append(f"{self.ctype(ft)} f_{n};")
                    else:
                        if isinstance(ft, T.VarbitT):
                            raise Unsupported(f"varbit field {t.name}.{n}")
                        fields.append(f"{_ctype_scalar(ft)} f_{n};")
                name = ("H" if t.kind == "header" else "S") + str(len(self.types))
                self.types[id(t)] = name
                valid = "u8 valid; " if t.kind == "header" else ""
                body = valid + " ".join(fields) if fields or valid else "u8 unused_;"
                self.type_defs.append(f"typedef struct {{ {body} }} {name};")
                if t.kind == "header":
                    self._codec(name, t)
            return self.types[id(t)]
        return _ctype_scalar(t)

    def _codec(self, name: str, t: T.StructLikeT) -> None:
        """``ext_H``/``emit_H``: the header as big-endian 64-bit words, each field made of (or
        put into) the words it overlaps with shifts known at compile time."""
        total = T.width_of(t)
        if total % 8:
            raise Unsupported(f"header {t.name} of {total} bits (not whole bytes)")
        nb = total // 8
        nw = (total + 63) // 64
        fields: list[tuple[str, int, int]] = []  # (name, bit offset, width)
        off = 0
        for n, ft in t.fields.items():
            w = _scalar_width(ft, f"field {t.name}.{n}")
            fields.append((n, off, w))
            off += w
        ext = [f"    u64 w{k} = be64(p + {8 * k});" for k in range(nw)]
        parts: list[list[str]] = [[] for _ in range(nw)]
        for n, s, w in fields:
            pieces = []
            for k in range(s // 64, (s + w - 1) // 64 + 1):
                d = 64 * k + 64 - s - w  # field bit i is word bit i + d
                pieces.append(f"((u128)w{k} >> {d})" if d >= 0 else f"((u128)w{k} << {-d})")
                parts[k].append(
                    f"(u64)((u128)h->f_{n} << {d})" if d >= 0 else f"(u64)((u128)h->f_{n} >> {-d})"
                )
            value = " | ".join(pieces)
            ext.append(f"    h->f_{n} = ({value}) & {_mask(w)};")
        emit = [
            f"    put_be64(p + {8 * k}, {' | '.join(ps) if ps else '0'});"
            for k, ps in enumerate(parts)
        ]
        self.codecs.append(
            f"static inline void ext_{name}({name} *h, const u8 *src) {{\n"
            + f"    u8 p[{8 * nw + 8}];\n"
            + f"    memcpy(p, src, {nb}); memset(p + {nb}, 0, {8 * nw + 8 - nb});\n"
            + "\n".join(ext)
            + "\n    h->valid = 1;\n}\n"
            + "/* writes whole 64-bit words: up to 7 bytes past the header are overwritten */\n"
            + f"static inline void emit_{name}(const {name} *h, u8 *p) {{\n"
            + "\n".join(emit)
            + "\n}"
        )

    @staticmethod
    def header_bytes(t: T.Type | None) -> int:
        if isinstance(t, T.StackT):
            return t.size * CGen.header_bytes(t.elem)
        if isinstance(t, T.StructLikeT):
            if t.kind == "header":
                return T.width_of(t) // 8
            return sum(CGen.header_bytes(ft) for ft in t.fields.values())
        return 0

    # -- variables -------------------------------------------------------------------------

    def ctx_var(self, sym: Sym) -> str:
        name = self.fresh("L")
        self.ctx_fields.append(f"{self.ctype(sym.type)} {name};")
        self.vars[id(sym)] = f"X->{name}"
        return f"X->{name}"

    def var(self, sym: Sym, node: Any) -> str:
        v = self.vars.get(id(sym))
        if v is None:
            raise Unsupported(f"variable '{sym.name}' is not reachable here{_where(node)}")
        return v

    def bind_params(self, decl: ast.ParserDecl | ast.ControlDecl) -> None:
        for p in decl.params:
            sym = p.sym
            t = sym.type
            if isinstance(t, T.ExternT):
                continue
            if t is self.hdr_type:
                self.vars[id(sym)] = "X->hdr"
            elif t is self.meta_type:
                self.vars[id(sym)] = "X->meta"
            elif t is self.sm_type:
                self.vars[id(sym)] = "X->sm"
            else:
                raise Unsupported(f"parameter '{p.name}' of block {decl.name}")

    def extern_inst(self, sym: Sym, node: Any) -> ExternInst:
        decl = sym.decl
        if self.inst is not None and id(decl) in self.inst.externs:
            return self.inst.externs[id(decl)]
        if id(decl) in self.elab.global_externs:
            return self.elab.global_externs[id(decl)]
        raise Unsupported(f"extern instance '{sym.name}'{_where(node)}")

    def extern_index(self, kind: str, fq: str, size: int) -> int:
        if fq not in self.extern_ids:
            self.extern_ids[fq] = len(self.externs)
            self.externs.append((kind, fq, size))
        return self.extern_ids[fq]

    # -- expressions -----------------------------------------------------------------------

    def lv(self, e: ast.Expr) -> str:
        """An l-value (scalar or composite) as C."""
        if isinstance(e, ast.Name):
            sym = e.ref
            if not isinstance(sym, Sym) or sym.kind not in ("var", "param"):
                raise Unsupported(f"'{e.name}' is not a variable{_where(e)}")
            return self.var(sym, e)
        if isinstance(e, ast.Member):
            if isinstance(e.ref, StackProperty) and e.ref.name in ("last", "next"):
                return self._stack_element(e, e.ref.name)
            if e.ref is not None:
                raise Unsupported(f"member '{e.name}' as an l-value{_where(e)}")
            return f"{self.lv(e.expr)}.f_{e.name}"
        if isinstance(e, ast.Index):
            base = self.lv(e.expr)
            st = e.expr.type
            assert isinstance(st, T.StackT)
            idx = constfold.fold(e.index)
            if idx is not None and not isinstance(idx, bool):
                i = int(idx)
                if 0 <= i < st.size:
                    return f"{base}.s[{i}]"
            k = self.ctype(st)
            el = self.ctype(st.elem)
            scr = self.scratch.get(el)
            if scr is None:
                scr = f"scr_{el}"
                self.scratch[el] = scr
                self.ctx_fields.append(f"{el} {scr};")
            return f"(*at_{k}(&{base}, {self.expr(e.index)}, &X->{scr}))"
        raise Unsupported(f"l-value {type(e).__name__}{_where(e)}")

    def _stack_element(self, e: ast.Member, which: str) -> str:
        """``s.last`` / ``s.next`` in a parser: StackOutOfBounds when there is none."""
        if self.fn.kind != "parser":
            raise Unsupported(f"stack '{which}' outside a parser{_where(e)}")
        st = self.lv(e.expr)
        stt = e.expr.type
        assert isinstance(stt, T.StackT)
        code = self.err("StackOutOfBounds")
        if which == "last":
            self.line(
                f"if ({st}.next == 0 || {st}.next > {stt.size}) {{ X->perr = {code}; goto done; }}"
            )
            return f"{st}.s[{st}.next - 1]"
        self.line(f"if ({st}.next >= {stt.size}) {{ X->perr = {code}; goto done; }}")
        return f"{st}.s[{st}.next]"

    def expr(self, e: ast.Expr) -> str:
        """A scalar expression as C (a u128 value within the expression's width).

        C leaves the order of operands unspecified (and ``&&``/``||``/``?:`` would run a later
        table apply after an ``exit``); P4 evaluates left to right. So an expression with side
        effects is generated in sequenced mode: the lines emitted before the statement compute
        every operand into a temporary, in P4's order, check the exit flag after each table
        apply that may exit, and lower short-circuit operators to ``if`` blocks; the C
        expression returned then only combines temporaries and constants."""
        rule = getattr(self, "x_" + type(e).__name__, None)
        if rule is None:
            raise Unsupported(f"expression {type(e).__name__}{_where(e)}")
        if id(e) in self.memo:
            return self.spill(self.memo[id(e)])
        if self.seq or not _has_effects(e):
            code: str = rule(e)
            return code
        with self._sequenced(True):
            code = rule(e)
        return code

    @contextlib.contextmanager
    def _sequenced(self, on: bool) -> Iterator[None]:
        """Generate in (``on``) or out of sequenced mode, then back to the mode before."""
        seq, self.seq = self.seq, on
        try:
            yield
        finally:
            self.seq = seq

    def spill(self, code: str, ctype: str = "u128") -> str:
        """In sequenced mode, ``code`` computed now into a temporary (else ``code`` itself)."""
        if not self.seq:
            return code
        t = self.fresh("e")
        self.line(f"{ctype} {t} = {code};")
        return t

    def captured(self, e: ast.Expr) -> tuple[str, list[str]]:
        """``expr(e)`` and the lines it emitted (not added to the current function)."""
        saved = (self.out, self.ind)
        self.out, self.ind = [], 0
        try:
            code = self.expr(e)
            return code, self.out
        finally:
            self.out, self.ind = saved

    def _lowered(self, first: str, test: str, rest: list[ast.Expr]) -> str:
        """``r = first; if (test(r)) { r = rest... }``: the later operands only evaluated when
        their turn comes (``&&``, ``||`` and ``?:`` whose later operands have effects)."""
        r = self.fresh("e")
        self.line(f"u128 {r} = {first};")
        self.line(f"if ({test.format(r)}) {{")
        self.ind += 1
        self.line(f"{r} = {self.expr(rest[0])};")
        self.ind -= 1
        if len(rest) > 1:
            self.line("} else {")
            self.ind += 1
            self.line(f"{r} = {self.expr(rest[1])};")
            self.ind -= 1
        self.line("}")
        return r

    def x_IntLit(self, e: ast.IntLit) -> str:
        t = e.type
        v = e.value
        if isinstance(t, (T.BitT, T.IntT)):
            v &= (1 << t.width) - 1  # int<W>: the two's complement pattern
        return _lit(v)

    def x_BoolLit(self, e: ast.BoolLit) -> str:
        return _lit(1 if e.value else 0)

    def x_Name(self, e: ast.Name) -> str:
        sym = e.ref
        if not isinstance(sym, Sym):
            raise Unsupported(f"'{e.name}' as a value{_where(e)}")
        if sym.kind == "const":
            v = sym.value
            if isinstance(v, bool):
                return _lit(int(v))
            if isinstance(v, int):
                t = e.type
                if isinstance(t, (T.BitT, T.IntT)):
                    v &= (1 << t.width) - 1
                return _lit(v)
            raise Unsupported(f"constant '{e.name}' of type {e.type}{_where(e)}")
        if sym.kind in ("var", "param"):
            _scalar_width(e.type, f"'{e.name}'")
            return self.spill(f"((u128){self.var(sym, e)})")
        raise Unsupported(f"'{e.name}' as a value{_where(e)}")

    def x_Member(self, e: ast.Member) -> str:
        ref = e.ref
        if isinstance(ref, (EnumMember, ErrorMember)):
            return _lit(int(ref.value))
        if isinstance(ref, StackSize):
            return _lit(ref.size)
        if isinstance(ref, StackProperty):
            base = self.lv(e.expr)
            if ref.name == "nextIndex":
                return self.spill(f"((u128){base}.next)")
            if ref.name == "lastIndex":
                return self.spill(f"((u128)(uint32_t)({base}.next - 1))")
            raise Unsupported(f"stack property '{ref.name}' in an expression{_where(e)}")
        if ref is not None:
            raise Unsupported(f"member '{e.name}'{_where(e)}")
        if isinstance(e.expr.type, T.ApplyResultT):
            call = e.expr
            assert isinstance(call, ast.Call)
            r = self.spill(self.table_call(call), "int")
            if self.seq:
                self.exit_check(call)
            if e.name == "hit":
                return f"((u128)(({r} >> 16) & 1))"
            if e.name == "miss":
                return f"((u128)!(({r} >> 16) & 1))"
            raise Unsupported(f"'{e.name}' of a table result{_where(e)}")
        _scalar_width(e.type, f"field '{e.name}'")
        return self.spill(f"((u128){self.lv(e.expr)}.f_{e.name})")

    def x_Index(self, e: ast.Index) -> str:
        raise Unsupported(f"a header stack element as a value{_where(e)}")

    def x_Slice(self, e: ast.Slice) -> str:
        hi, lo = constfold.fold(e.hi), constfold.fold(e.lo)
        if hi is None or lo is None:
            raise Unsupported(f"slice bounds{_where(e)}")
        base = self.expr(e.expr)
        return f"(({base} >> {int(lo)}) & {_mask(int(hi) - int(lo) + 1)})"

    def x_Unary(self, e: ast.Unary) -> str:
        v = self.expr(e.expr)
        if e.op == "!":
            return f"((u128)!{v})"
        if e.op == "+":
            return v
        w = _scalar_width(e.type)
        if e.op == "-":
            return f"((-{v}) & {_mask(w)})"
        if e.op == "~":
            return f"({v} ^ {_mask(w)})"
        raise Unsupported(f"operator {e.op}{_where(e)}")

    def x_Binary(self, e: ast.Binary) -> str:
        op = e.op
        lt, rt, t = e.left.type, e.right.type, e.type
        if isinstance(lt, (T.StructLikeT, T.StackT, T.TupleT)):
            raise Unsupported(f"'{op}' of composite values{_where(e)}")
        signed = next((x for x in (lt, rt, t) if isinstance(x, T.IntT)), None)
        if signed is not None:
            return self._signed_binary(e, signed.width)
        a = self.expr(e.left)
        if op in ("&&", "||") and self.seq and _has_effects(e.right):
            return self._lowered(f"((u128)({a} != 0))", "{}" if op == "&&" else "!{}", [e.right])
        b = self.expr(e.right)
        if op in ("&&", "||"):
            return f"((u128)({a} {op} {b}))"
        if op in ("==", "!=", "<", ">", "<=", ">="):
            return f"((u128)({a} {op} {b}))"
        w = None if t is T.INFINT else _scalar_width(t)
        if op == "++":
            wb = _scalar_width(rt)
            return f"(({a} << {wb}) | {b})"
        if w is None:
            v = constfold.fold(e)
            if isinstance(v, int) and not isinstance(v, bool):
                return _lit(v)
            raise Unsupported(f"arbitrary-precision arithmetic{_where(e)}")
        if op == "|+|":
            return f"sat_add({a}, {b}, {_mask(w)})"
        if op == "|-|":
            return f"sat_sub({a}, {b})"
        if op == "<<":
            sh = constfold.fold(e.right)
            if isinstance(sh, int) and not isinstance(sh, bool):
                return "((u128)0)" if sh >= w else f"(({a} << {sh}) & {_mask(w)})"
            return f"shl({a}, {b}, {w})"
        if op == ">>":
            sh = constfold.fold(e.right)
            if isinstance(sh, int) and not isinstance(sh, bool):
                return "((u128)0)" if sh >= 128 else f"({a} >> {sh})"
            return f"shr({a}, {b})"
        if op in ("&", "|", "^"):
            return f"(({a} {op} {b}) & {_mask(w)})"
        if op in ("+", "-", "*"):
            return f"(({a} {op} {b}) & {_mask(w)})"
        if op == "/":
            return f"divz({a}, {b})"
        if op == "%":
            return f"modz({a}, {b})"
        raise Unsupported(f"operator {op}{_where(e)}")

    def _operand(self, x: ast.Expr, w: int) -> str:
        """An operand of a signed operation as a ``w``-bit pattern (constants folded)."""
        if x.type is T.INFINT:
            v = constfold.fold(x)
            if isinstance(v, int) and not isinstance(v, bool):
                return _lit(v & ((1 << w) - 1))
        return self.expr(x)

    def _signed_binary(self, e: ast.Binary, w: int) -> str:
        """int<W> operators on two's complement patterns (``sext`` for what needs the sign)."""
        op = e.op
        m = _mask(w)
        if op == "++":
            lt, rt = e.left.type, e.right.type
            wa, wb = _scalar_width(lt), _scalar_width(rt)
            return f"((({self.expr(e.left)} & {_mask(wa)}) << {wb}) | ({self.expr(e.right)} & {_mask(wb)}))"
        a = self._operand(e.left, w)
        if op in ("<<", ">>"):
            wa = _scalar_width(e.left.type)
            b = self.expr(e.right) if e.right.type is not T.INFINT else self._operand(e.right, 128)
            if op == "<<":
                return f"shl({a}, {b}, {wa})"
            return f"((u128)sar(sext({a}, {wa}), {b}) & {_mask(wa)})"
        b = self._operand(e.right, w)
        if op in ("==", "!="):
            return f"((u128)({a} {op} {b}))"
        if op in ("<", ">", "<=", ">="):
            return f"((u128)(sext({a}, {w}) {op} sext({b}, {w})))"
        if op in ("+", "-", "*", "&", "|", "^"):
            return f"(({a} {op} {b}) & {m})"
        if op in ("|+|", "|-|"):
            s = "+" if op == "|+|" else "-"
            return f"((u128)sat_signed(sext({a}, {w}) {s} sext({b}, {w}), {w}) & {m})"
        raise Unsupported(f"signed operator {op}{_where(e)}")

    def x_Mux(self, e: ast.Mux) -> str:
        c = self.expr(e.cond)
        if self.seq and (_has_effects(e.then) or _has_effects(e.other)):
            return self._lowered(c, "{}", [e.then, e.other])
        return f"({c} ? {self.expr(e.then)} : {self.expr(e.other)})"

    def x_Cast(self, e: ast.Cast) -> str:
        src, dst = e.expr.type, e.checked_type
        if src is T.INFINT and isinstance(dst, (T.BitT, T.IntT)):
            v0 = constfold.fold(e.expr)
            if isinstance(v0, int) and not isinstance(v0, bool):
                return _lit(v0 & ((1 << dst.width) - 1))
        v = self.expr(e.expr)
        if dst is T.BOOL:
            return v if src is T.BOOL else f"((u128)({v} != 0))"
        if src is T.BOOL:
            return v
        w = _scalar_width(dst, "cast")
        if isinstance(src, T.IntT) and src.width < w:
            return f"((u128)sext({v}, {src.width}) & {_mask(w)})"  # sign extension
        if isinstance(src, (T.BitT, T.IntT)) and src.width <= w:
            return v
        return f"({v} & {_mask(w)})"

    def x_Call(self, e: ast.Call) -> str:
        info = e.ref
        if info is not None and info.kind == T.CallKind.HEADER_METHOD and info.name == "isValid":
            target = info.target
            if isinstance(target.type, T.StructLikeT) and target.type.kind == "header":
                return self.spill(f"((u128){self.lv(target)}.valid)")
        if info is not None and info.kind == T.CallKind.TABLE_APPLY:
            r = self.spill(self.table_call(e), "int")
            if self.seq:
                self.exit_check(e)
            return r
        if info is not None and info.kind == T.CallKind.FUNCTION:
            return self.function_value(e)
        if (
            info is not None
            and info.kind == T.CallKind.PACKET_METHOD
            and info.name == "lookahead"
            and self.fn.kind == "parser"
        ):
            return self._lookahead(e)
        raise Unsupported(f"call of '{info.name if info else '?'}' as a value{_where(e)}")

    def _lookahead(self, e: ast.Call) -> str:
        info = e.ref
        assert info is not None
        lt = info.bindings.get("T") if info.bindings else None
        if not (lt is T.BOOL or isinstance(lt, T.BitT)):
            raise Unsupported(f"lookahead of {lt}{_where(e)}")
        w = _scalar_width(lt, "lookahead")
        nb = (w + 7) // 8
        v = self.fresh("la")
        code = self.err("PacketTooShort")
        self.line(f"if (X->off + {nb} > X->in_len) {{ X->perr = {code}; goto done; }}")
        self.line(f"u128 {v};")
        self.line(f"{{ u8 b[{nb + 16}]; memcpy(b, X->in + X->off, {nb}); memset(b + {nb}, 0, 16);")
        self.line(f"  {v} = getbits(b, 0, {w}); }}")
        return f"((u128)({v} != 0))" if lt is T.BOOL else v

    # -- calls and effects -----------------------------------------------------------------

    def action_may_exit(self, decl: ast.ActionDecl) -> bool:
        got = self.action_exits.get(id(decl))
        if got is None:
            self.action_exits[id(decl)] = False
            got = any(self._stmt_exits(s) for s in decl.body.stmts)
            self.action_exits[id(decl)] = got
        return got

    def _stmt_exits(self, s: Any) -> bool:
        for node in _walk(s):
            if isinstance(node, ast.Exit):
                return True
            if isinstance(node, ast.Call) and node.ref is not None:
                if node.ref.kind == T.CallKind.ACTION and isinstance(node.ref.decl, ast.ActionDecl):
                    if self.action_may_exit(node.ref.decl):
                        return True
                if node.ref.kind == T.CallKind.TABLE_APPLY:
                    ti = self.table_inst_of(node)
                    if any(self.action_may_exit(a) for a in ti.decl.action_decls):
                        return True
                if node.ref.kind == T.CallKind.BLOCK_APPLY:
                    return True  # a nested control may exit (checked after every apply)
        return False

    def table_inst_of(self, call: ast.Call) -> TableInst:
        info = call.ref
        assert info is not None
        decl = info.decl
        if self.inst is None or id(decl) not in self.inst.tables:
            raise Unsupported(f"table apply outside its control{_where(call)}")
        return self.inst.tables[id(decl)]

    def table_call(self, call: ast.Call) -> str:
        ti = self.table_inst_of(call)
        idx = self.table(ti)
        return f"T{idx}(X)"

    def exit_check(self, node: Any) -> None:
        if self.fn.kind in ("control", "action") and self._stmt_exits(node):
            self.line("if (X->exited) return;")

    # -- statements ------------------------------------------------------------------------

    def stmts(self, body: list[ast.Stmt]) -> None:
        for s in body:
            self.stmt(s)

    def stmt(self, s: ast.Stmt) -> None:
        rule = getattr(self, "s_" + type(s).__name__, None)
        if rule is None:
            raise Unsupported(f"statement {type(s).__name__}{_where(s)}")
        rule(s)

    def s_Empty(self, s: ast.Empty) -> None:
        pass

    def s_ConstDecl(self, s: ast.ConstDecl) -> None:
        pass

    def s_Block(self, s: ast.Block) -> None:
        self.line("{")
        self.ind += 1
        self.stmts(s.stmts)
        self.ind -= 1
        self.line("}")

    def s_VarDecl(self, s: ast.VarDecl) -> None:
        sym = s.sym
        name = self.fresh("l")
        self.line(f"{self.ctype(sym.type)} {name};")
        self.vars[id(sym)] = name
        self._init(name, sym.type, s.init, s)

    def _init(self, target: str, t: T.Type | None, init: ast.Expr | None, node: Any) -> None:
        if isinstance(t, (T.StructLikeT, T.StackT)):
            if init is None:
                self.line(f"memset(&{target}, 0, sizeof {target});")
            else:
                self._assign_composite(target, t, init, node)
            return
        self.hoist = init
        value = "((u128)0)" if init is None else self.expr(init)
        self.hoist = None
        self.line(f"{target} = {value};")
        if init is not None:
            self.exit_check(init)

    def s_Assign(self, s: ast.Assign) -> None:
        t = s.lhs.type
        self._check_lvalue(s.lhs)
        if isinstance(t, (T.StructLikeT, T.StackT)):
            self._assign_composite(self.lv(s.lhs), t, s.rhs, s)
            return
        _scalar_width(t, "assignment")
        if isinstance(s.lhs, ast.Slice):
            hi, lo = constfold.fold(s.lhs.hi), constfold.fold(s.lhs.lo)
            if hi is None or lo is None:
                raise Unsupported(f"slice bounds{_where(s)}")
            self._check_lvalue(s.lhs.expr)
            base = self.lv(s.lhs.expr)
            if any(isinstance(n, ast.Call) for n in _walk(s.rhs)):
                q = self.fresh("q")
                self.line(f"__typeof__({base}) *{q} = &({base});")
                base = f"(*{q})"
            m = (1 << (int(hi) - int(lo) + 1)) - 1
            v = self.fresh("v")
            self.hoist = s.rhs
            self.memo[id(s.lhs)] = f"((((u128){base}) >> {int(lo)}) & {_lit(m)})"
            try:
                value = self.expr(s.rhs)
            finally:
                self.hoist = None
                del self.memo[id(s.lhs)]
            self.line(f"{{ u128 {v} = {value};")
            self.line(
                f"  {base} = ((u128){base} & ~{_lit(m << int(lo))}) | (({v} & {_lit(m)}) << {lo}); }}"
            )
            self.exit_check(s.rhs)
            return
        target = self.lv(s.lhs)
        if any(isinstance(n, ast.Call) for n in _walk(s.rhs)):
            # P4 evaluates the l-value first: a call on the right may change its index
            q = self.fresh("q")
            self.line(f"__typeof__({target}) *{q} = &({target});")
            target = f"(*{q})"
        self.hoist = s.rhs
        self.memo[id(s.lhs)] = f"((u128){target})"
        try:
            value = self.expr(s.rhs)
        finally:
            self.hoist = None
            del self.memo[id(s.lhs)]
        self.line(f"{target} = {value};")
        self.exit_check(s.rhs)

    def _assign_composite(self, target: str, t: T.Type, rhs: ast.Expr, node: Any) -> None:
        if isinstance(rhs, ast.InvalidHeader):
            self.line(f"memset(&{target}, 0, sizeof {target});")
            return
        if isinstance(rhs, (ast.Name, ast.Member, ast.Index)):
            self.line(f"{target} = {self.lv(rhs)};")
            return
        if isinstance(t, T.StructLikeT) and isinstance(rhs, (ast.ListExpr, ast.StructInit)):
            if isinstance(rhs, ast.ListExpr):
                items = list(zip(t.fields, rhs.items))
            else:
                items = list(rhs.fields)
            tmp = self.fresh("s")
            self.line(f"{{ {self.ctype(t)} {tmp}; memset(&{tmp}, 0, sizeof {tmp});")
            for name, value in items:
                ft = t.fields[name]
                if isinstance(ft, (T.StructLikeT, T.StackT)):
                    self._assign_composite(f"{tmp}.f_{name}", ft, value, node)
                else:
                    self.line(f"  {tmp}.f_{name} = {self.expr(value)};")
            if t.kind == "header":
                self.line(f"  {tmp}.valid = 1;")
            self.line(f"  {target} = {tmp}; }}")
            return
        raise Unsupported(f"composite value {type(rhs).__name__}{_where(node)}")

    def _bind_out(
        self,
        direction: str,
        a: ast.Expr | None,
        ct: str,
        t: str,
        pre: list[str],
        post: list[str],
    ) -> str:
        """An ``out``/``inout`` argument ``a`` through temporary ``t`` of C type ``ct``: its
        address taken and the copy-in in ``pre``, the copy-back in ``post`` (``a`` None: a
        don't-care, a zeroed scratch). The C argument (``&t``)."""
        if a is None:
            pre.append(f"{ct} {t}; memset(&{t}, 0, sizeof {t});")
            return f"&{t}"
        if not isinstance(a, (ast.Name, ast.Member, ast.Index)):
            raise Unsupported(f"{direction} argument {type(a).__name__}{_where(a)}")
        self._check_lvalue(a)
        q = self.fresh("q")
        pre.append(f"__typeof__({self.lv(a)}) *{q} = &({self.lv(a)});")
        if direction == "inout":
            pre.append(f"{ct} {t} = *{q};")
        else:
            pre.append(f"{ct} {t}; memset(&{t}, 0, sizeof {t});")
        post.append(f"*{q} = {t};")
        return f"&{t}"

    def _check_lvalue(self, e: ast.Expr) -> None:
        if isinstance(e, ast.Member) and e.name == "mcast_grp" and e.expr.type is self.sm_type:
            raise Unsupported(f"multicast (standard_metadata.mcast_grp written){_where(e)}")

    def s_If(self, s: ast.If) -> None:
        c = self.expr(s.cond)
        if self._stmt_exits(s.cond):
            tmp = self.fresh("c")
            self.line(f"u128 {tmp} = {c};")
            self.line("if (X->exited) return;")
            c = tmp
        self.line(f"if ({c}) {{")
        self.ind += 1
        self.stmt(s.then)
        self.ind -= 1
        if s.other is not None:
            self.line("} else {")
            self.ind += 1
            self.stmt(s.other)
            self.ind -= 1
        self.line("}")

    def s_Switch(self, s: ast.Switch) -> None:
        tmp = self.fresh("sw")
        by_action = isinstance(s.expr, ast.Member) and s.expr.name == "action_run"
        ti: TableInst | None = None
        if by_action:
            call = s.expr.expr  # type: ignore[attr-defined]
            assert isinstance(call, ast.Call)
            ti = self.table_inst_of(call)
            self.line(f"int {tmp} = {self.table_call(call)} & 0xFFFF;")
            self.exit_check(call)
        else:
            self.line(f"u128 {tmp} = {self.expr(s.expr)};")
            self.exit_check(s.expr)
        pending: list[str] = []
        first = True
        default_body: ast.Block | None = None
        has_default = False
        for case in s.cases:
            for label in case.labels:
                if isinstance(label, ast.Default):
                    has_default = True
                    continue
                if by_action:
                    assert ti is not None
                    pending.append(f"{tmp} == {self._action_label(ti, label)}")
                else:
                    pending.append(f"{tmp} == {self.expr(label)}")
            if case.body is None:
                continue
            if has_default:
                default_body = case.body
                break
            if not pending:
                continue
            self.line(("if (" if first else "} else if (") + " || ".join(pending) + ") {")
            first = False
            pending = []
            self.ind += 1
            self.stmt(case.body)
            self.ind -= 1
        if default_body is not None:
            if first:
                self.line("{")
            else:
                self.line("} else {")
            self.ind += 1
            self.stmt(default_body)
            self.ind -= 1
            self.line("}")
        elif not first:
            self.line("}")

    def _action_label(self, ti: TableInst, label: ast.Expr) -> int:
        ref = label.ref if isinstance(label, ast.Name) else None
        for i, adecl in enumerate(ti.decl.action_decls):
            if ref is adecl or (isinstance(ref, Sym) and ref.decl is adecl):
                return i
        raise Unsupported(f"switch label {label}{_where(label)}")

    def s_Exit(self, s: ast.Exit) -> None:
        if self.fn.kind not in ("control", "action"):
            raise Unsupported(f"exit in a {self.fn.kind}{_where(s)}")
        self.line("X->exited = 1; return;")

    def s_Return(self, s: ast.Return) -> None:
        if self.fn.kind == "function" and s.value is not None:
            self.hoist = s.value
            self.line(f"return {self.expr(s.value)};")
            self.hoist = None
            return
        if s.value is not None or self.fn.kind not in ("control", "action", "function"):
            raise Unsupported(f"return in a {self.fn.kind}{_where(s)}")
        self.line("return;")

    def s_CallStmt(self, s: ast.CallStmt) -> None:
        call = s.call
        info = call.ref
        if info is None or info.kind is None:
            raise Unsupported(f"call{_where(s)}")
        k = info.kind
        if k == T.CallKind.TABLE_APPLY:
            self.line(f"{self.table_call(call)};")
        elif k == T.CallKind.ACTION:
            self.action_call(call)
        elif k == T.CallKind.FUNCTION:
            if not isinstance(info.decl, ast.FunctionDecl):
                raise Unsupported(f"call of '{info.name}'{_where(s)}")
            for line in self.invoke(info.decl, list(info.args), call):
                self.line(line)
            return
        elif k == T.CallKind.HEADER_METHOD:
            self.header_method(call)
            return
        elif k == T.CallKind.EXTERN_FUNC:
            self.extern_func(call)
        elif k == T.CallKind.EXTERN_METHOD:
            self.extern_method(call)
        elif k == T.CallKind.PACKET_METHOD:
            self.packet_method(call)
            return
        elif k == T.CallKind.BLOCK_APPLY:
            self.block_apply(call)
        elif k == T.CallKind.STACK_METHOD:
            self.stack_method(call)
            return
        else:
            raise Unsupported(f"call of {k} '{info.name}'{_where(s)}")
        self.exit_check(call)

    def stack_method(self, call: ast.Call) -> None:
        """push_front/pop_front(count) with P4-16's semantics (as support.push_front)."""
        info = call.ref
        assert info is not None
        st = info.target.type
        if not isinstance(st, T.StackT) or not isinstance(info.args[0], int):
            raise Unsupported(f"stack method {info.name}{_where(call)}")
        k = info.args[0]
        s = self.lv(info.target)
        n = st.size
        if info.name == "push_front":
            for i in range(n - 1, -1, -1):
                if i >= k:
                    self.line(f"{s}.s[{i}] = {s}.s[{i - k}];")
                else:
                    self.line(f"{s}.s[{i}].valid = 0;")
            self.line(f"{s}.next = {s}.next + {k} < {n} ? {s}.next + {k} : {n};")
        elif info.name == "pop_front":
            for i in range(n):
                if i + k < n:
                    self.line(f"{s}.s[{i}] = {s}.s[{i + k}];")
                else:
                    self.line(f"{s}.s[{i}].valid = 0;")
            self.line(f"{s}.next = {s}.next > {k} ? {s}.next - {k} : 0;")
        else:
            raise Unsupported(f"stack method {info.name}{_where(call)}")

    def header_method(self, call: ast.Call) -> None:
        info = call.ref
        assert info is not None
        t = info.target.type
        if not (isinstance(t, T.StructLikeT) and t.kind == "header"):
            raise Unsupported(f"{info.name} of a {t}{_where(call)}")
        h = self.lv(info.target)
        if info.name == "setValid":
            self.line(f"{h}.valid = 1;")
        elif info.name == "setInvalid":
            self.line(f"{h}.valid = 0;")
        elif info.name != "isValid":
            raise Unsupported(f"header method {info.name}{_where(call)}")

    def action_call(self, call: ast.Call) -> None:
        info = call.ref
        assert info is not None
        decl = info.decl
        if not isinstance(decl, ast.ActionDecl):
            raise Unsupported(f"action '{info.name}'{_where(call)}")
        for line in self.invoke(decl, list(info.args), call):
            self.line(line)

    def invoke(
        self,
        decl: ast.ActionDecl | ast.FunctionDecl,
        args: list[ast.Expr | str | None],
        node: Any,
        result: str | None = None,
    ) -> list[str]:
        """The C lines calling action (or function) ``decl`` with ``args`` (expressions, C
        code of action data, or None for a don't-care): copy-in/copy-out of scalar
        ``out``/``inout`` arguments through temporaries, the argument's l-value taken once,
        written back after the call (also after an ``exit``), as the Python executor does.
        ``result``: a variable to store a function's value in."""
        fn = self.action(decl) if isinstance(decl, ast.ActionDecl) else self.function(decl)
        pre: list[str] = []
        post: list[str] = []
        values = []
        # an argument with side effects: every argument is computed in order before the call
        # (C's own order of arguments is unspecified), inout ones copied in at their turn
        ordered = any(isinstance(a, ast.Expr) and _has_effects(a) for a in args)
        for p, a in zip(decl.params, args):
            pt = p.sym.type
            composite = isinstance(pt, (T.StructLikeT, T.StackT))
            ct = self.ctype(pt) if composite else "u128"
            if isinstance(a, str):
                values.append(a)
            elif p.direction in ("out", "inout"):
                values.append(self._bind_out(p.direction, a, ct, self.fresh("t"), pre, post))
            elif composite:
                if not isinstance(a, (ast.Name, ast.Member, ast.Index)):
                    raise Unsupported(f"argument {type(a).__name__}{_where(node)}")
                t = self.fresh("t")
                pre.append(f"{ct} {t} = {self.lv(a)};")
                values.append(f"&{t}")
            elif a is None:
                raise Unsupported(f"missing action argument{_where(node)}")
            elif ordered:
                code, lines = self.captured(a)
                t = self.fresh("t")
                pre.extend(lines)
                pre.append(f"u128 {t} = {code};")
                values.append(t)
            else:
                values.append(self.expr(a))
        call = f"{fn}({', '.join(['X', *values])});"
        if result is not None:
            call = f"{result} = {call}"
        if not pre:
            return [call]
        return ["{", *("  " + x for x in pre), "  " + call, *("  " + x for x in post), "}"]

    def _arg(self, call: ast.Call, i: int) -> ast.Expr:
        info = call.ref
        assert info is not None
        a: ast.Expr | None = info.args[i] if i < len(info.args) else None
        if a is None:
            raise Unsupported(f"missing argument {i} of {info.name}{_where(call)}")
        return a

    def extern_func(self, call: ast.Call) -> None:
        info = call.ref
        assert info is not None
        name = info.name
        if name == "mark_to_drop":
            sm = self.lv(self._arg(call, 0)) if info.args else "X->sm"
            self.line(f"{sm}.f_egress_spec = {DROP_PORT}; {sm}.f_mcast_grp = 0;")
        elif name == "truncate":
            self.line(f"X->trunc = (u64){self.expr(self._arg(call, 0))};")
        elif name == "random":
            res = self._arg(call, 0)
            if isinstance(res.type, T.IntT):
                raise Unsupported(f"random of a signed value{_where(call)}")
            w = _scalar_width(res.type, "random result")
            if w > 64:
                raise Unsupported(f"random of {w} bits{_where(call)}")
            lo, hi = self.expr(self._arg(call, 1)), self.expr(self._arg(call, 2))
            self._check_lvalue(res)
            self.line(f"{self.lv(res)} = tf_py_random(X->handle, (u64){lo}, (u64){hi});")
        elif name == "digest":
            self.digest(call)
        elif name == "log_msg":
            pass  # the Python executor only logs it
        elif name == "verify" and self.fn.kind == "parser":
            c = self.expr(self._arg(call, 0))
            err = self.expr(self._arg(call, 1))
            self.line(f"if (!{c}) {{ X->perr = (int){err}; goto done; }}")
        elif name == "hash":
            self._hash(call)
        elif name in (
            "verify_checksum",
            "update_checksum",
            "verify_checksum_with_payload",
            "update_checksum_with_payload",
        ):
            self._checksum(call, name)
        else:
            raise Unsupported(f"extern function {name}{_where(call)}")

    def extern_method(self, call: ast.Call) -> None:
        info = call.ref
        assert info is not None
        target = info.target
        if not (isinstance(target, ast.Name) and isinstance(target.ref, Sym)):
            raise Unsupported(f"extern method on {target}{_where(call)}")
        inst = self.extern_inst(target.ref, call)
        ext = info.extern_name
        key = (ext, info.name)
        if key == ("counter", "count"):
            size = inst.args[0]
            k = self.extern_index("counter", inst.fqname, size)
            i = self.fresh("i")
            self.line(f"{{ u128 {i} = {self.expr(self._arg(call, 0))};")
            self.line(
                f"  if ({i} < {size}) {{ X->ext_a[{k}][(int){i}]++; "
                f"X->ext_b[{k}][(int){i}] += X->pkt_len; }}"
            )
            self.line(f"  else {{ X->ext_err[{k}]++; X->stats[ST_EXT_ERRORS]++; }} }}")
        elif key in (("register", "read"), ("register", "write")):
            elem = inst.type.type_args.get("T")
            if isinstance(elem, T.IntT):
                raise Unsupported(f"register {inst.fqname} of signed values")
            w = _scalar_width(elem, "register element")
            if w > 64:
                raise Unsupported(f"register {inst.fqname} of {w}-bit values")
            size = inst.args[0]
            k = self.extern_index("register", inst.fqname, size)
            i = self.fresh("i")
            if info.name == "read":
                res = self._arg(call, 0)
                self._check_lvalue(res)
                self.line(f"{{ u128 {i} = {self.expr(self._arg(call, 1))};")
                self.line(f"  if ({i} < {size}) {self.lv(res)} = X->ext_a[{k}][(int){i}];")
                self.line(
                    f"  else {{ {self.lv(res)} = 0; X->ext_err[{k}]++; "
                    "X->stats[ST_EXT_ERRORS]++; } }"
                )
            else:
                self.line(f"{{ u128 {i} = {self.expr(self._arg(call, 0))};")
                v = self.expr(self._arg(call, 1))
                self.line(f"  if ({i} < {size}) X->ext_a[{k}][(int){i}] = (u64)({v} & {_mask(w)});")
                self.line(f"  else {{ X->ext_err[{k}]++; X->stats[ST_EXT_ERRORS]++; }} }}")
        elif key == ("direct_counter", "count"):
            raise Unsupported("direct counters")
        else:
            raise Unsupported(f"extern method {ext}.{info.name}{_where(call)}")

    # -- hashes and checksums --------------------------------------------------------------

    def _field_values(self, e: ast.Expr) -> list[tuple[str, int]]:
        """(C value, width) of every scalar in ``e`` (a list, header, struct, stack, scalar),
        in order: the input of hashes and checksums (headers whatever their validity)."""
        if isinstance(e, ast.ListExpr):
            out: list[tuple[str, int]] = []
            for item in e.items:
                out.extend(self._field_values(item))
            return out
        t = e.type
        if isinstance(t, (T.StructLikeT, T.StackT)):
            return self._composite_values(self.lv(e), t, e)
        return [(self.expr(e), _scalar_width(e.type, "hash input"))]

    def _composite_values(self, code: str, t: T.Type, node: Any) -> list[tuple[str, int]]:
        if isinstance(t, T.StackT):
            out: list[tuple[str, int]] = []
            for i in range(t.size):
                out.extend(self._composite_values(f"{code}.s[{i}]", t.elem, node))
            return out
        assert isinstance(t, T.StructLikeT)
        if t.kind == "header_union":
            raise Unsupported(f"hash of a header union{_where(node)}")
        out = []
        for n, ft in t.fields.items():
            if isinstance(ft, (T.StructLikeT, T.StackT)):
                out.extend(self._composite_values(f"{code}.f_{n}", ft, node))
            else:
                out.append((f"((u128){code}.f_{n})", _scalar_width(ft, "hash input")))
        return out

    def _algo(self, e: ast.Expr) -> str:
        v = constfold.fold(e)
        t = e.type
        name = None
        if isinstance(t, T.EnumT) and v is not None:
            name = next((n for n, val in t.values.items() if val == v), None)
        algos = {
            "crc16": "ALGO_CRC16",
            "crc32": "ALGO_CRC32",
            "identity": "ALGO_IDENTITY",
            "csum16": "ALGO_CSUM16",
            "xor16": "ALGO_XOR16",
        }
        if name not in algos:
            raise Unsupported(f"hash algorithm {name or '(not constant)'}{_where(e)}")
        return algos[name]

    def _hash_of(self, data: ast.Expr, algo: str, payload: bool) -> str:
        """Statements computing the hash into a fresh variable; its name."""
        vals = self._field_values(data)
        if sum(w for _, w in vals) > 8 * 4096:
            raise Unsupported(f"hash/checksum input over 4 KiB{_where(data)}")
        h = self.fresh("h")
        n = len(vals)
        self.line(f"u64 {h};")
        self.line("{")
        if n:
            self.line(f"  u128 hv[{n}] = {{{', '.join(v for v, _ in vals)}}};")
            self.line(f"  static const int hw[{n}] = {{{', '.join(str(w) for _, w in vals)}}};")
            self.line(f"  int nb = pack_fields(X->hbuf, hv, hw, {n});")
        else:
            self.line("  int nb = 0;")
        if payload:
            self.line("  if (nb + X->plen <= (int)sizeof X->hbuf - 16) {")
            self.line("    memcpy(X->hbuf + nb, X->payload, (size_t)X->plen); nb += X->plen; }")
        self.line(f"  {h} = hash_bytes({algo}, X->hbuf, nb);")
        self.line("}")
        return h

    def _hash(self, call: ast.Call) -> None:
        res = self._arg(call, 0)
        algo = self._algo(self._arg(call, 1))
        base = self.expr(self._arg(call, 2))
        mx = self.expr(self._arg(call, 4))
        w = _scalar_width(res.type, "hash result")
        h = self._hash_of(self._arg(call, 3), algo, False)
        self._check_lvalue(res)
        sz = self.fresh("sz")
        self.line(f"{{ u128 {sz} = {mx}; if (!{sz}) {sz} = 1;")
        self.line(f"  {self.lv(res)} = ({base} + (u128){h} % {sz}) & {_mask(w)}; }}")

    def _checksum(self, call: ast.Call, name: str) -> None:
        cond = self.expr(self._arg(call, 0))
        csum = self._arg(call, 2)
        algo = self._algo(self._arg(call, 3))
        w = _scalar_width(csum.type, "checksum")
        self.line(f"if ({cond}) {{")
        self.ind += 1
        h = self._hash_of(self._arg(call, 1), algo, name.endswith("_with_payload"))
        if name.startswith("verify"):
            self.line(f"if (((u128){h} & {_mask(w)}) != {self.expr(csum)}) X->csum_err = 1;")
        else:
            self._check_lvalue(csum)
            self.line(f"{self.lv(csum)} = (u128){h} & {_mask(w)};")
        self.ind -= 1
        self.line("}")

    # -- digests ---------------------------------------------------------------------------

    def _leaves(self, e: ast.Expr, code: str, t: T.Type | None) -> Iterator[str]:
        if isinstance(t, T.StructLikeT):
            if t.kind != "struct":
                raise Unsupported(f"digest of a {t.kind}{_where(e)}")
            for n, ft in t.fields.items():
                yield from self._leaves(e, f"{code}.f_{n}", ft)
            return
        if isinstance(t, T.StackT):
            raise Unsupported(f"digest of a header stack{_where(e)}")
        _scalar_width(t, "digest field")
        yield f"((u128){code})"

    def digest(self, call: ast.Call) -> None:
        if self.fn.role != "ingress":
            if self.fn.role == "egress":
                self.line("X->stats[ST_EGRESS_DIGESTS_IGNORED]++;")
                return
            raise Unsupported(f"digest in {self.fn.role or 'a nested block'}{_where(call)}")
        assert self.inst is not None
        name = self.elab.digest_names[(self.inst.py, id(call))]
        data = self._arg(call, 1)
        late = _is_lvalue_path(data)
        values: list[str] = []
        if isinstance(data, ast.ListExpr):
            for item in data.items:
                if isinstance(item.type, T.StructLikeT):
                    values.extend(self._leaves(item, self.lv(item), item.type))
                else:
                    _scalar_width(item.type, "digest field")
                    values.append(self.expr(item))
        elif isinstance(data.type, T.StructLikeT):
            values.extend(self._leaves(data, self.lv(data), data.type))
        else:
            _scalar_width(data.type, "digest value")
            values.append(self.expr(data))
        if late and any(v.find("X->") < 0 for v in values):
            late = False  # a local variable: read it now (it is gone when ingress ends)
        if name not in self.digest_ids:
            self.digest_ids[name] = len(self.digests)
            self.digests.append((name, len(values)))
        d = self.digest_ids[name]
        self.max_fields = max(self.max_fields, len(values))
        if late:
            k = len(self.digest_readers)
            body = [f"static void DR{k}(tf_sw *X, u64 *rec) {{", f"    rec[0] = {d};"]
            for j, v in enumerate(values):
                body.append(f"    {{ u128 v = {v}; rec[{1 + 2 * j}] = (u64)(v >> 64);")
                body.append(f"      rec[{2 + 2 * j}] = (u64)v; }}")
            body.append("}")
            self.digest_readers.append("\n".join(body))
            self.line(f"X->dig_req = {k};")
        else:
            self.line("X->dig_req = -1;")
            self.line(f"X->dig_now[0] = {d};")
            for j, v in enumerate(values):
                self.line(f"{{ u128 v = {v}; X->dig_now[{1 + 2 * j}] = (u64)(v >> 64);")
                self.line(f"  X->dig_now[{2 + 2 * j}] = (u64)v; }}")
            self.line("X->dig_req = -2;")

    # -- packet methods --------------------------------------------------------------------

    def packet_method(self, call: ast.Call) -> None:
        info = call.ref
        assert info is not None
        if info.name == "advance" and self.fn.kind == "parser":
            bits = self.fresh("adv")
            self.line(f"{{ u128 {bits} = {self.expr(self._arg(call, 0))};")
            self.line(
                f"  if ({bits} % 8) {{ X->perr = {self.err('ParserInvalidArgument')}; goto done; }}"
            )
            self.line(
                f"  if ((u128)X->off + {bits} / 8 > (u128)X->in_len) "
                f"{{ X->perr = {self.err('PacketTooShort')}; goto done; }}"
            )
            self.line(f"  X->off += (int)({bits} / 8); }}")
            return
        if info.name == "extract" and self.fn.kind == "parser":
            if len(info.args) != 1:
                raise Unsupported(f"extract with {len(info.args)} arguments{_where(call)}")
            a = info.args[0]
            if a is None:  # extract<H>(_): read and dropped
                ht = info.bindings.get("T") if info.bindings else None
                if not (isinstance(ht, T.StructLikeT) and ht.kind == "header"):
                    raise Unsupported(f"extract of {ht}{_where(call)}")
                h = self.fresh("h")
                self.line(f"{{ {self.ctype(ht)} {h};")
                self._extract(h, ht)
                self.line("}")
                return
            if isinstance(a, ast.Member) and a.ref == StackProperty("next"):
                st = self.lv(a.expr)
                stt = a.expr.type
                assert isinstance(stt, T.StackT)
                h = self.fresh("h")
                el = self.ctype(stt.elem)
                code = self.err("StackOutOfBounds")
                self.line(f"if ({st}.next >= {stt.size}) {{ X->perr = {code}; goto done; }}")
                self.line(f"{{ {el} *{h} = &{st}.s[{st}.next];")
                self._extract(f"(*{h})", stt.elem)
                self.line(f"  {st}.next++; }}")
                return
            t = a.type
            if not (isinstance(t, T.StructLikeT) and t.kind == "header"):
                raise Unsupported(f"extract of a {t}{_where(call)}")
            self._extract(self.lv(a), t)
            return
        if info.name == "emit" and self.fn.kind == "deparser":
            a = self._arg(call, 0)
            self._emit(self.lv(a), a.type, call)
            return
        raise Unsupported(f"packet method {info.name}{_where(call)}")

    def _extract(self, h: str, t: T.Type) -> None:
        nb = T.width_of(t) // 8
        name = self.ctype(t)
        code = self.err("PacketTooShort")
        self.line(f"if (X->off + {nb} > X->in_len) {{ X->perr = {code}; goto done; }}")
        self.line(f"ext_{name}(&{h}, X->in + X->off); X->off += {nb};")

    def _emit(self, v: str, t: T.Type | None, node: Any) -> None:
        if isinstance(t, T.StructLikeT):
            if t.kind == "header":
                nb = T.width_of(t) // 8
                name = self.ctype(t)
                self.line(
                    f"if ({v}.valid) {{ emit_{name}(&{v}, X->out + X->olen); X->olen += {nb}; }}"
                )
                return
            if t.kind == "header_union":
                raise Unsupported(f"emit of a header union{_where(node)}")
            for n, ft in t.fields.items():
                self._emit(f"{v}.f_{n}", ft, node)
            return
        if isinstance(t, T.StackT):
            for i in range(t.size):
                self._emit(f"{v}.s[{i}]", t.elem, node)
            return
        raise Unsupported(f"emit of a {t}{_where(node)}")

    # -- actions and tables ----------------------------------------------------------------

    def action(self, decl: ast.ActionDecl) -> str:
        with self._sequenced(False):  # apart from the expression that may have asked for it
            return self._action(decl)

    def _action(self, decl: ast.ActionDecl) -> str:
        key = (id(decl), self.inst.py if self.inst is not None else "")
        name = self.actions.get(key)
        if name is not None:
            return name
        name = f"A{len(self.actions)}"
        self.actions[key] = name
        saved = (self.out, self.ind, self.fn)
        self.out, self.ind = [], 1
        self.fn = _Fn("action", saved[2].role)
        params = []
        for p in decl.params:
            pn = self.fresh("a")
            pt = p.sym.type
            if isinstance(pt, (T.StructLikeT, T.StackT)) and p.direction:
                self.vars[id(p.sym)] = f"(*{pn})"  # a copy made by the caller
                params.append(f"{self.ctype(pt)} *{pn}")
                continue
            _scalar_width(pt, f"action '{decl.name}': parameter '{p.name}'")
            if p.direction in ("out", "inout"):
                self.vars[id(p.sym)] = f"(*{pn})"
                params.append(f"u128 *{pn}")
            else:
                self.vars[id(p.sym)] = pn
                params.append(f"u128 {pn}")
        self.stmts(decl.body.stmts)
        sig = f"static void {name}({', '.join(['tf_sw *X', *params])})"
        self.protos.append(sig + ";")
        self.funcs.append(sig + " {\n" + "\n".join(self.out) + "\n}")
        self.out, self.ind, self.fn = saved
        return name

    def function(self, decl: ast.FunctionDecl) -> str:
        with self._sequenced(False):  # apart from the expression that may have asked for it
            return self._function(decl)

    def _function(self, decl: ast.FunctionDecl) -> str:
        name = self.functions.get(id(decl))
        if name is not None:
            return name
        if decl.type_params:
            raise Unsupported(f"generic function '{decl.name}'")
        name = f"F{len(self.functions)}"
        self.functions[id(decl)] = name
        ret = decl.ret_type
        void = ret is None or str(ret) == "void"
        if not void:
            _scalar_width(ret, f"result of function '{decl.name}'")
        saved = (self.out, self.ind, self.fn)
        self.out, self.ind = [], 1
        self.fn = _Fn("function", saved[2].role)
        params = []
        for p in decl.params:
            pn = self.fresh("a")
            _scalar_width(p.sym.type, f"function '{decl.name}': parameter '{p.name}'")
            if p.direction in ("out", "inout"):
                self.vars[id(p.sym)] = f"(*{pn})"
                params.append(f"u128 *{pn}")
            else:
                self.vars[id(p.sym)] = pn
                params.append(f"u128 {pn}")
        self.stmts(decl.body.stmts)
        if not void:
            self.line("return 0;")
        sig = f"static {'void' if void else 'u128'} {name}({', '.join(['tf_sw *X', *params])})"
        self.protos.append(sig + ";")
        self.funcs.append(sig + " {\n    (void)X;\n" + "\n".join(self.out) + "\n}")
        self.out, self.ind, self.fn = saved
        return name

    def function_value(self, e: ast.Call) -> str:
        """A function call as a value: inline when it has only ``in`` parameters, else
        (the whole right-hand side of an assignment) through copy-in/copy-out first."""
        info = e.ref
        assert info is not None
        decl = info.decl
        if not isinstance(decl, ast.FunctionDecl):
            raise Unsupported(f"call of '{info.name}'{_where(e)}")
        if all(p.direction in ("", "in") for p in decl.params):
            fn = self.function(decl)
            args = []
            for a in info.args:
                if a is None:
                    raise Unsupported(f"missing argument of '{info.name}'{_where(e)}")
                args.append(self.expr(a))
            return self.spill(f"{fn}({', '.join(['X', *args])})")
        if self.hoist is not e and not self.seq:
            raise Unsupported(f"function '{info.name}' with out/inout arguments in an expression")
        r = self.fresh("r")
        self.line(f"u128 {r};")
        for line in self.invoke(decl, list(info.args), e, r):
            self.line(line)
        return r

    def table(self, ti: TableInst) -> int:
        with self._sequenced(False):  # apart from the expression that may have asked for it
            return self._table(ti)

    def _table(self, ti: TableInst) -> int:
        if id(ti) in self.table_ids:
            return self.table_ids[id(ti)]
        spec = ti.spec
        assert spec is not None
        if spec.direct_counter or spec.direct_meter:
            raise Unsupported(f"table {ti.fqname}: direct counters/meters")
        idx = len(self.tables)
        self.table_ids[id(ti)] = idx
        d = ti.decl
        kp = d.prop("key")
        keys: list[str] = []
        sels: list[str] = []
        key_lines: list[str] = []  # what key expressions with calls compute first
        for k in kp.keys if kp is not None and kp.keys else []:
            v, lines = self.captured(k.expr)
            key_lines.extend("    " + x for x in lines)
            (sels if k.match_kind == "selector" else keys).append(v)
        mkeys = spec.match_keys
        if len(mkeys) > 16 or len(sels) > 16:
            raise Unsupported(f"table {ti.fqname}: more than 16 keys")
        for mk in spec.keys:
            if mk.width > 128:
                raise Unsupported(f"table {ti.fqname}: key {mk.name} wider than 128 bits")
        ap = d.prop("actions")
        assert ap is not None and ap.actions is not None
        actions: dict[str, int] = {}
        calls: list[str] = []
        nargs = 0
        saved = (self.out, self.ind, self.fn)
        self.out, self.ind = [], 1
        self.fn = _Fn("table", saved[2].role)
        for i, (ref, adecl) in enumerate(zip(ap.actions, d.action_decls)):
            actions[ti.action_fq[id(adecl)]] = i
            args: list[ast.Expr | str | None] = []
            data = 0
            bound = [a.value for a in ref.args]
            for p in adecl.params:
                if p.direction:
                    if not bound:
                        raise Unsupported(f"table {ti.fqname}: unbound action parameter")
                    args.append(bound.pop(0))
                else:
                    args.append(f"a[{data}]")
                    data += 1
            nargs = max(nargs, data)
            lines = self.invoke(adecl, args, ref)
            calls.append(f"    case {i}: {' '.join(lines)} break;")
        self.out, self.ind, self.fn = saved
        impl = None
        algo = "ALGO_NONE"
        if spec.implementation is not None:
            impl = next(
                (p for p in self.program.schema.action_profiles if p.name == spec.implementation),
                None,
            )
            if impl is not None and impl.with_selector:
                name = impl.algorithm or "crc16"
                algos = {"crc16": "ALGO_CRC16", "crc32": "ALGO_CRC32", "identity": "ALGO_IDENTITY"}
                if name not in algos:
                    raise Unsupported(f"table {ti.fqname}: selector hash {name}")
                algo = algos[name]
        nk = len(keys)
        ns = len(sels)
        kinit = ", ".join(keys) if keys else "0"
        sinit = ", ".join(sels) if sels else "0"
        body = [
            f"static int T{idx}(tf_sw *X) {{",
            *key_lines,
            f"    u128 key[{max(nk, 1)}] = {{{kinit}}};",
            f"    u128 sel[{max(ns, 1)}] = {{{sinit}}};",
            "    const u128 *a;",
            f"    int r = table_apply(&X->tables[{idx}], key, sel, &a);",
            "    (void)a; (void)sel;",
            "    switch (r & 0xFFFF) {",
            *calls,
            "    default: break;",
            "    }",
            "    return r;",
            "}",
        ]
        self.protos.append(f"static int T{idx}(tf_sw *X);")
        self.funcs.append("\n".join(body))
        is_range = ", ".join("1" if k.kind is MatchKind.RANGE else "0" for k in mkeys) or "0"
        selw = ", ".join(str(k.width) for k in spec.selector_keys) or "0"
        self.table_defs.append(
            f"static const u8 TR{idx}[] = {{{is_range}}};\nstatic const int TS{idx}[] = {{{selw}}};"
        )
        self.table_inits.append(
            f"    X->tables[{idx}].nk = {nk}; X->tables[{idx}].nargs = {max(nargs, 1)};\n"
            f"    X->tables[{idx}].nsel = {ns}; X->tables[{idx}].algo = {algo};\n"
            f"    X->tables[{idx}].is_range = TR{idx}; X->tables[{idx}].selw = TS{idx};\n"
            f"    X->tables[{idx}].def_act = -1;"
        )
        self.tables.append(
            NativeTable(
                idx,
                ti.fqname,
                actions,
                tuple(k.kind for k in mkeys),
                tuple(k.width for k in mkeys),
                max(nargs, 1),
                bool(spec.selector_keys),
            )
        )
        return idx

    # -- blocks ----------------------------------------------------------------------------

    def block_locals(self, decl: ast.ParserDecl | ast.ControlDecl) -> None:
        """Control/parser-level variables live in X (actions reach them); set at each start."""
        for loc in decl.locals:
            if isinstance(loc, ast.VarDecl):
                target = self.ctx_var(loc.sym)
                self._init(target, loc.sym.type, loc.init, loc)
            elif isinstance(loc, (ast.ConstDecl, ast.ActionDecl, ast.TableDecl)):
                continue
            elif isinstance(loc, ast.Instantiation):
                continue  # externs: bound by name; nested blocks are rejected earlier
            else:
                raise Unsupported(f"declaration {type(loc).__name__} in {decl.name}")

    def gen_parser(self, inst: BlockInst) -> None:
        decl = inst.decl
        assert isinstance(decl, ast.ParserDecl)
        self.inst = inst
        self.fn = _Fn("parser", "parser")
        self.out, self.ind = [], 1
        self.bind_params(decl)
        self.block_locals(decl)
        names = {s.name for s in decl.states}
        self.line("goto S_start;")
        for st in decl.states:
            self.line(f"S_{st.name}: {{")
            self.ind += 1
            self.stmts(st.stmts)
            self.transition(st.transition, names)
            self.ind -= 1
            self.line("}")
        self.line("done: ;")
        self.funcs.append("static void P_parser(tf_sw *X) {\n" + "\n".join(self.out) + "\n}")
        self.inst = None

    def _goto(self, state: str) -> str:
        if state == "accept":
            return "goto done;"
        if state == "reject":
            return "{ X->perr = -1; goto done; }"
        return f"goto S_{state};"

    def transition(self, tr: ast.Transition | None, names: set[str]) -> None:
        if tr is None:
            self.line(self._goto("reject"))
            return
        if tr.state is not None:
            self.line(self._goto(tr.state))
            return
        assert tr.select is not None
        ks = []
        for x in tr.select:
            k = self.fresh("k")
            self.line(f"u128 {k} = {self.expr(x)};")
            ks.append(k)
        for case in tr.cases:
            cond = self._keyset(case.keyset, ks)
            self.line(f"if ({cond}) {self._goto(case.state)}")
            if cond == "1":
                return
        self.line(f"{{ X->perr = {self.err('NoMatch')}; goto done; }}")

    def _keyset(self, ks: ast.Expr, kvars: list[str]) -> str:
        if isinstance(ks, (ast.Default, ast.DontCare)):
            return "1"
        if isinstance(ks, ast.Name) and isinstance(ks.ref, Sym) and ks.ref.kind == "value_set":
            raise Unsupported(f"parser value sets{_where(ks)}")
        items = ks.items if isinstance(ks, ast.ListExpr) else [ks]
        if len(items) != len(kvars):
            raise Unsupported(f"keyset shape{_where(ks)}")
        conds = []
        for item, k in zip(items, kvars):
            if isinstance(item, (ast.Default, ast.DontCare)):
                continue
            if isinstance(item, ast.Mask):
                m = self.expr(item.mask)
                conds.append(f"(({k} & {m}) == ({self.expr(item.value)} & {m}))")
            elif isinstance(item, ast.Range) and isinstance(item.lo.type, T.IntT):
                raise Unsupported(f"signed range keyset{_where(item)}")
            elif isinstance(item, ast.Range):
                conds.append(f"({self.expr(item.lo)} <= {k} && {k} <= {self.expr(item.hi)})")
            elif (
                isinstance(item, ast.Name)
                and isinstance(item.ref, Sym)
                and (item.ref.kind == "value_set")
            ):
                raise Unsupported(f"parser value sets{_where(item)}")
            else:
                conds.append(f"({k} == {self.expr(item)})")
        return " && ".join(conds) if conds else "1"

    def block_apply(self, call: ast.Call) -> None:
        """``c.apply(args)`` of a nested control: a C function of its own, its arguments
        copied in and out through temporaries (P4-16's calling convention; also on exit)."""
        info = call.ref
        assert info is not None
        target = info.target
        sym = target.ref if isinstance(target, ast.Name) else None
        if self.inst is None or not isinstance(sym, Sym) or id(sym.decl) not in self.inst.children:
            raise Unsupported(f"apply of {info.name}{_where(call)}")
        child = self.inst.children[id(sym.decl)]
        decl = child.decl
        if not isinstance(decl, ast.ControlDecl) or self.fn.kind not in ("control", "action"):
            raise Unsupported(f"nested parser {child.path}")
        fn = self.nested_control(child)
        pre: list[str] = []
        post: list[str] = []
        values: list[str] = []
        for p, a in zip(decl.params, info.args):
            pt = p.sym.type
            if isinstance(pt, T.ExternT):
                raise Unsupported(f"{pt} argument of {child.path}")
            composite = isinstance(pt, (T.StructLikeT, T.StackT))
            t = self.fresh("t")
            ct = self.ctype(pt) if composite else "u128"
            if p.direction in ("out", "inout"):
                values.append(self._bind_out(p.direction, a, ct, t, pre, post))
            elif a is None:
                raise Unsupported(f"missing argument of {child.path}{_where(call)}")
            elif composite:
                if not isinstance(a, (ast.Name, ast.Member, ast.Index)):
                    raise Unsupported(f"argument {type(a).__name__}{_where(a)}")
                pre.append(f"{ct} {t} = {self.lv(a)};")
                values.append(f"&{t}")
            else:
                values.append(self.expr(a))
        self.line("{")
        for x in pre:
            self.line("  " + x)
        self.line(f"  {fn}({', '.join(['X', *values])});")
        for x in post:
            self.line("  " + x)
        self.line("}")

    def nested_control(self, inst: BlockInst) -> str:
        name = self.nested.get(id(inst))
        if name is not None:
            return name
        if inst.children and any(
            not isinstance(c.decl, ast.ControlDecl) for c in inst.children.values()
        ):
            raise Unsupported(f"nested parser in {inst.path}")
        decl = inst.decl
        assert isinstance(decl, ast.ControlDecl)
        if decl.type_params:
            raise Unsupported(f"generic control {decl.name}")
        name = f"N{len(self.nested)}"
        self.nested[id(inst)] = name
        saved = (self.out, self.ind, self.fn, self.inst)
        self.out, self.ind = [], 1
        self.fn = _Fn("control", saved[2].role)
        self.inst = inst
        params = []
        for p in decl.params:
            # kept in X: the control's actions and tables reach its parameters too
            pt = p.sym.type
            pn = self.fresh("p")
            if isinstance(pt, (T.StructLikeT, T.StackT)):
                ct = self.ctype(pt)
            else:
                _scalar_width(pt, f"parameter '{p.name}' of {inst.path}")
                ct = "u128"
            if isinstance(pt, (T.StructLikeT, T.StackT)) or p.direction in ("out", "inout"):
                params.append(f"{ct} *{pn}")
                self.ctx_fields.append(f"{ct} *{pn};")
                self.vars[id(p.sym)] = f"(*X->{pn})"
            else:
                params.append(f"u128 {pn}")
                self.ctx_fields.append(f"u128 {pn};")
                self.vars[id(p.sym)] = f"X->{pn}"
            self.line(f"X->{pn} = {pn};")
        self._ctor_values(inst)
        self.block_locals(decl)
        self.stmts(decl.body.stmts)
        sig = f"static void {name}({', '.join(['tf_sw *X', *params])})"
        self.protos.append(sig + ";")
        self.funcs.append(sig + " {\n" + "\n".join(self.out) + "\n}")
        self.out, self.ind, self.fn, self.inst = saved
        return name

    def _ctor_values(self, inst: BlockInst) -> None:
        for p, v in inst.ctor_values:
            if isinstance(v, bool) or not isinstance(v, int):
                raise Unsupported(f"constructor argument '{p.name}' of {inst.path}")
            self.vars[id(p.sym)] = _lit(v)

    def gen_control(self, role: str, inst: BlockInst) -> None:
        decl = inst.decl
        assert isinstance(decl, ast.ControlDecl)
        self.inst = inst
        self.fn = _Fn("deparser" if role == "deparser" else "control", role)
        self.out, self.ind = [], 1
        self.bind_params(decl)
        self._ctor_values(inst)
        self.block_locals(decl)
        self.stmts(decl.body.stmts)
        self.funcs.append(f"static void C_{role}(tf_sw *X) {{\n" + "\n".join(self.out) + "\n}")
        self.inst = None

    # -- the whole unit --------------------------------------------------------------------

    def generate(self) -> NativeProgram:
        for role in ROLES:
            if role not in self.elab.blocks:
                raise Unsupported(f"no {role} block")
        for inst in self.elab.all_blocks:
            if any(not isinstance(c.decl, ast.ControlDecl) for c in inst.children.values()):
                raise Unsupported(f"nested parser instances in {inst.path}")
        for name in ("hdr", "meta", "sm"):
            t = {"hdr": self.hdr_type, "meta": self.meta_type, "sm": self.sm_type}[name]
            if not isinstance(t, T.StructLikeT):
                raise Unsupported(f"{name} of type {t}")
        htype, mtype, stype = (
            self.ctype(self.hdr_type),
            self.ctype(self.meta_type),
            self.ctype(self.sm_type),
        )
        self.gen_parser(self.elab.blocks["parser"])
        for role in ("verify_checksum", "ingress", "egress", "compute_checksum", "deparser"):
            self.gen_control(role, self.elab.blocks[role])
        smf = self.sm_type.fields  # type: ignore[union-attr]
        need = ("ingress_port", "egress_spec", "egress_port", "packet_length", "mcast_grp")
        for f in need:
            if f not in smf:
                raise Unsupported(f"standard_metadata without {f}")
        stride = 1 + 2 * self.max_fields
        max_hdr = self.header_bytes(self.hdr_type)
        return NativeProgram(
            self._unit(htype, mtype, stype, stride, max_hdr, smf),
            self.tables,
            self.externs,
            self.digests,
            stride,
            max_hdr,
        )

    def _unit(
        self, htype: str, mtype: str, stype: str, stride: int, max_hdr: int, smf: dict[str, Any]
    ) -> str:
        nt = max(len(self.tables), 1)
        ne = max(len(self.externs), 1)

        def sm_set(f: str, v: str) -> str:
            return f"X->sm.f_{f} = {v};" if f in smf else ""

        parts = [
            "/* generated by switch.native.cgen from " + self.program.path + " */",
            RUNTIME,
            f"#define NTABLES {nt}",
            f"#define NEXTERNS {ne}",
            f"#define MAX_HEADER_BYTES {max_hdr}",
            f"#define DIGEST_STRIDE {stride}",
            *self.type_defs,
            "struct tf_sw {",
            f"    {htype} hdr; {mtype} meta; {stype} sm;",
            "    const u8 *in; int in_len; int off; int perr; u8 *out; int olen;",
            "    u64 pkt_len; u64 trunc; int exited; int dig_req; int csum_err;",
            "    const u8 *payload; int plen;",
            "    u8 hbuf[16384 + 4096];",
            f"    u64 dig_now[{stride}];",
            f"    tf_table tables[{nt}];",
            f"    u64 *ext_a[{ne}]; u64 *ext_b[{ne}];",
            "    u64 *stats; u64 *ext_err; u64 *dig; int dig_cap;",
            "    void *handle;",
            *("    " + f for f in self.ctx_fields),
            "};",
            *self.codecs,
            *self.table_defs,
            "static void tf_init_tables(tf_sw *X) {",
            *self.table_inits,
            "    (void)X;",
            "}",
            *self.protos,
            *self.digest_readers,
            *self.funcs,
            "static void flush_digest(tf_sw *X) {",
            "    u64 *rec = X->dig + X->stats[ST_DIGESTS] * DIGEST_STRIDE;",
            "    if (X->dig_req == -2) memcpy(rec, X->dig_now, sizeof X->dig_now);",
        ]
        for k in range(len(self.digest_readers)):
            parts.append(f"    else if (X->dig_req == {k}) DR{k}(X, rec);")
        parts += [
            "    X->stats[ST_DIGESTS]++;",
            "}",
            "/* parser, verify, ingress: 1 (| 16 on a parser error) drop, else 0 with r[1] the",
            "   egress port, r[2] the payload offset, X->trunc the ingress truncation */",
            "static int ingress_part(tf_sw *X, int port, const u8 *data, int len, u64 now, int *r) {",
            "    memset(&X->hdr, 0, sizeof X->hdr);",
            "    memset(&X->meta, 0, sizeof X->meta);",
            "    memset(&X->sm, 0, sizeof X->sm);",
            "    " + sm_set("ingress_port", "(u64)port"),
            "    " + sm_set("packet_length", "(u64)len"),
            "    " + sm_set("ingress_global_timestamp", "now & 0xFFFFFFFFFFFFull"),
            "    X->in = data; X->in_len = len; X->off = 0; X->perr = -2;",
            "    X->pkt_len = (u64)len; X->trunc = 0; X->dig_req = -1; X->exited = 0;",
            "    P_parser(X);",
            "    if (X->perr >= 0) {",
            "        " + sm_set("parser_error", "(u64)X->perr"),
            "        X->stats[ST_PARSER_ERRORS]++;",
            "    }",
            "    r[2] = X->off;",
            "    X->payload = data + X->off; X->plen = len - X->off; X->csum_err = 0;",
            "    X->exited = 0; C_verify_checksum(X);",
            "    " + sm_set("checksum_error", "(u64)X->csum_err"),
            "    X->exited = 0; C_ingress(X);",
            "    if (X->dig_req != -1) flush_digest(X);",
            "    r[1] = (int)X->sm.f_ingress_port;",
            f"    if (X->sm.f_egress_spec == {DROP_PORT})",
            "        return 1 | "
            + ("(X->sm.f_parser_error ? 16 : 0);" if "parser_error" in smf else "0;"),
            "    " + sm_set("instance_type", "0"),
            "    r[1] = (int)X->sm.f_egress_spec;",
            "    return 0;",
            "}",
            "/* egress, checksums, deparser on the state in X: 2 drop, else 0 with r[3] bytes */",
            "static int egress_part(tf_sw *X, int eport, u64 itrunc, const u8 *payload, int plen,",
            "                       u64 now, u8 *out, int *r) {",
            "    X->sm.f_egress_port = (u64)eport; X->sm.f_egress_spec = 0;",
            "    " + sm_set("egress_global_timestamp", "now & 0xFFFFFFFFFFFFull"),
            "    X->pkt_len = X->sm.f_packet_length; X->trunc = 0; X->exited = 0;",
            "    X->payload = payload; X->plen = plen;",
            "    C_egress(X);",
            "    r[1] = eport;",
            f"    if (X->sm.f_egress_spec == {DROP_PORT}) return 2;",
            "    X->exited = 0; C_compute_checksum(X);",
            "    X->out = out; X->olen = 0;",
            "    C_deparser(X);",
            "    memcpy(out + X->olen, payload, (size_t)plen);",
            "    u64 n = (u64)(X->olen + plen);",
            "    if (X->trunc && n > X->trunc) n = X->trunc;",
            "    if (itrunc && n > itrunc) n = itrunc;",
            "    r[3] = (int)n;",
            "    return 0;",
            "}",
            "static int run_packet(tf_sw *X, int port, const u8 *data, int len, u64 now,",
            "                      u8 *out, int *r) {",
            "    int st = ingress_part(X, port, data, len, now, r);",
            "    if (st) return st;",
            "    return egress_part(X, r[1], X->trunc, data + r[2], len - r[2], now, out, r);",
            "}",
            "/* the traffic manager's split: a packet's state between ingress and egress */",
            "typedef struct {",
            f"    {htype} hdr; {mtype} meta; {stype} sm; u64 itrunc;",
            "} tf_state;",
            "int tf_state_size(void) { return (int)sizeof(tf_state); }",
            "/* standard_metadata.priority after ingress (0 when the program has none) */",
            "static inline int sm_priority(tf_sw *X) {",
            "    return " + ("(int)X->sm.f_priority;" if "priority" in smf else "0;"),
            "    (void)X;",
            "}",
            "/* the traffic manager's metadata: enq_timestamp, enq_qdepth, deq_timedelta,",
            "   deq_qdepth (has_enq 2: the first two; 0: none) */",
            "static inline void set_enq(tf_sw *X, const u64 *enq, int has_enq) {",
            "    if (has_enq) {",
            "        " + sm_set("enq_timestamp", "enq[0] & 0xFFFFFFFFull"),
            "        " + sm_set("enq_qdepth", "enq[1] & 0x7FFFFull"),
            "    }",
            "    if (has_enq == 1) {",
            "        " + sm_set("deq_timedelta", "enq[2] & 0xFFFFFFFFull"),
            "        " + sm_set("deq_qdepth", "enq[3] & 0x7FFFFull"),
            "    }",
            "    (void)X; (void)enq;",
            "}",
            "int tf_ingress(tf_sw *X, int port, const uint8_t *data, int len, uint64_t now,",
            "               uint8_t *state, int *res) {",
            "    int r[4] = {0, 0, 0, 0};",
            "    X->stats[ST_RECEIVED]++;",
            "    int st = ingress_part(X, port, data, len, now, r);",
            "    res[0] = st; res[1] = r[1]; res[2] = r[2];",
            "    res[3] = " + ("(int)X->sm.f_priority;" if "priority" in smf else "0;"),
            "    if (st) { X->stats[ST_DROPPED]++; return st; }",
            "    tf_state *S = (tf_state *)state;",
            "    memcpy(&S->hdr, &X->hdr, sizeof X->hdr);",
            "    memcpy(&S->meta, &X->meta, sizeof X->meta);",
            "    memcpy(&S->sm, &X->sm, sizeof X->sm);",
            "    S->itrunc = X->trunc;",
            "    return 0;",
            "}",
            "/* enq: enq_timestamp, enq_qdepth, deq_timedelta, deq_qdepth (has_enq 2: the first two) */",
            "int tf_egress(tf_sw *X, const uint8_t *state, const uint8_t *payload, int plen,",
            "              int eport, uint64_t now, const uint64_t *enq, int has_enq,",
            "              uint8_t *out, int *res) {",
            "    const tf_state *S = (const tf_state *)state;",
            "    memcpy(&X->hdr, &S->hdr, sizeof X->hdr);",
            "    memcpy(&X->meta, &S->meta, sizeof X->meta);",
            "    memcpy(&X->sm, &S->sm, sizeof X->sm);",
            "    set_enq(X, enq, has_enq);",
            "    int r[4] = {0, 0, 0, 0};",
            "    int st = egress_part(X, eport, S->itrunc, payload, plen, now, out, r);",
            "    res[0] = st; res[1] = r[3];",
            "    if (st) X->stats[ST_DROPPED]++; else X->stats[ST_SENT]++;",
            "    return st;",
            "}",
            DRIVER,
        ]
        return "\n".join(parts) + "\n"


def _is_lvalue_path(e: ast.Expr) -> bool:
    while isinstance(e, (ast.Member, ast.Index)):
        if isinstance(e, ast.Member) and e.ref is not None:
            return False
        e = e.expr
    return isinstance(e, ast.Name) and isinstance(e.ref, Sym) and e.ref.kind in ("var", "param")


def _has_effects(e: ast.Expr) -> bool:
    """Whether evaluating ``e`` may change state (a table apply or a function call in it)."""
    for n in _walk(e):
        if isinstance(n, ast.Call) and n.ref is not None:
            if n.ref.kind in (T.CallKind.TABLE_APPLY, T.CallKind.FUNCTION):
                return True
    return False


def _walk(node: Any) -> Iterator[Any]:
    """Every syntax node under ``node`` (itself included)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, ast.Node):
            stack.extend(ast.children(n))


def generate_c(program: CompiledProgram) -> NativeProgram:
    """The C translation unit of ``program``.

    Raises:
        Unsupported: the program uses a construct the C generator does not translate.
    """
    return CGen(program).generate()


__all__ = ["generate_c", "NativeProgram", "NativeTable", "Unsupported"]
