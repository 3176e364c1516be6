"""The generated classes of headers, structs, header unions and header stacks.

A header is a ``__slots__`` class with ``_v`` (validity), one ``f_<name>`` attribute per field,
``_ext`` (fill from the header's bytes as one big-endian integer) and ``_bytes``. Every class has
``_set`` (in-place copy), ``copy``, ``_eq`` and ``_fields`` (flattened ``(value, width)`` pairs
for hashes, checksums and digests).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from switch.compile.codegen.emitter import Emitter, mask, tuple_code
from switch.compile.widths import target_width
from switch.lang import types as T

if TYPE_CHECKING:
    from switch.compile.codegen.generator import CodeGen


def is_composite(t: T.Type | None) -> bool:
    """Whether values of ``t`` are objects of a generated class (assigned in place)."""
    return isinstance(t, (T.StructLikeT, T.StackT))


def default_value(t: T.Type | None, gen: CodeGen) -> str:
    """Code for the initial value of a variable of type ``t``."""
    if is_composite(t):
        return f"{gen.class_of(t)}()"
    if t is T.BOOL:
        return "False"
    if isinstance(t, T.TupleT):
        return tuple_code([default_value(e, gen) for e in t.elems])
    if isinstance(t, T.VarbitT):
        return "(0, 0)"  # a varbit value is a (value, current width in bits) pair
    return "0"


def flat_fields(t: T.StructLikeT, prefix: str = "") -> Iterator[tuple[str, T.Type]]:
    """(attribute path, type) of every scalar field, nested structs flattened, in order."""
    for n, ft in t.fields.items():
        if isinstance(ft, T.StructLikeT):
            yield from flat_fields(ft, f"{prefix}f_{n}.")
        else:
            yield f"{prefix}f_{n}", ft


def struct_class(gen: CodeGen, name: str, t: T.StructLikeT) -> str:
    """The class of a header, struct or header union (its composite fields' classes exist)."""
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
            e.line(f"self.f_{n} = {default_value(ft, gen)}")
            body += 1
    if not body:
        e.line("pass")
    e.dedent()
    if lazy:
        scalars = {f"f_{n}": default_value(ft, gen) for n, ft in fields if not is_composite(ft)}
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
            if isinstance(ft, T.VarbitT):
                items.append(f"self.f_{n}")  # already a (value, width) pair
                continue
            w = target_width(ft)
            v = f"self.f_{n}"
            if ft is T.BOOL:
                v = f"int({v})"
            elif isinstance(ft, T.IntT):
                v = f"({v} & {mask(w)})"
            items.append(f"({v}, {w})")
    e.line("return " + tuple_code(items))
    e.dedent()
    if t.kind == "header_union":
        # valid when a member is; making it invalid (stack push_front/pop_front, `out`
        # initialisation) invalidates every member
        e.line("def _get_v(self):")
        e.indent()
        e.line("return " + (" or ".join(f"self.f_{n}._v" for n, _ in fields) or "False"))
        e.dedent()
        e.line("def _put_v(self, v):")
        e.indent()
        e.line("if v: raise ValueError('a header union cannot be made valid as a whole')")
        for n, _ in fields:
            e.line(f"self.f_{n}._v = False")
        e.dedent()
        e.line("_v = property(_get_v, _put_v)")
    if is_hdr:
        _header_codec(e, t)
    e.dedent()
    return e.text()


def _header_codec(e: Emitter, t: T.StructLikeT) -> None:
    if T.varbit_field(t) is not None:
        _varbit_codec(e, t)
        return
    total = T.width_of(t)
    nbytes = total // 8
    e.line(f"_nbytes = {nbytes}")
    # extraction from the header's bytes as one big-endian integer
    e.line("def _ext(self, x):")
    e.indent()
    shift = total
    flat = list(flat_fields(t))
    for path, ft in flat:
        w = T.width_of(ft)
        shift -= w
        v = f"(x >> {shift})" if shift else "x"
        if shift + w < total:
            v = f"({v} & {mask(w)})"
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
            v = f"({v} & {mask(w)})"
        parts.append(f"({v} << {shift})" if shift else v)
    if not parts:
        e.line("return b''")
    else:
        e.line(f"return ({' | '.join(parts)}).to_bytes({nbytes}, 'big')")
    e.dedent()


def _varbit_codec(e: Emitter, t: T.StructLikeT) -> None:
    """``_ext(x, vw)`` / ``_bytes()`` / ``_nbits()`` of a header with a varbit field: the
    fields after the varbit one sit at shifts that depend on its current width ``vw``."""
    fixed = T.fixed_width(t)
    e.line(f"_fixed_bits = {fixed}")
    e.line("def _ext(self, x, vw):")
    e.indent()
    after = fixed  # bits of fixed fields still to come, plus the varbit's once it is passed
    seen_varbit = False
    for n, ft in t.fields.items():
        if isinstance(ft, T.VarbitT):
            seen_varbit = True
            e.line(f"self.f_{n} = ((x >> {after}) & ((1 << vw) - 1), vw)")
            continue
        w = T.width_of(ft)
        after -= w
        shift = f"({after} + vw)" if not seen_varbit else str(after)
        v = f"((x >> {shift}) & {mask(w)})"
        if ft is T.BOOL:
            v = f"bool({v})"
        elif isinstance(ft, T.IntT):
            v = f"_to_signed({v}, {w})"
        e.line(f"self.f_{n} = {v}")
    e.line("self._v = True")
    e.dedent()
    e.line("def _nbits(self):")
    e.indent()
    vb = T.varbit_field(t)
    assert vb is not None
    e.line(f"return {fixed} + self.f_{vb[0]}[1]")
    e.dedent()
    e.line("def _bytes(self):")
    e.indent()
    e.line("x = 0")
    for n, ft in t.fields.items():
        if isinstance(ft, T.VarbitT):
            e.line(f"v, vw = self.f_{n}")
            e.line("x = (x << vw) | v")
            continue
        w = T.width_of(ft)
        v = f"self.f_{n}"
        if ft is T.BOOL:
            v = f"int({v})"
        elif isinstance(ft, T.IntT):
            v = f"({v} & {mask(w)})"
        e.line(f"x = (x << {w}) | {v}")
    e.line("return x.to_bytes(self._nbits() // 8, 'big')")
    e.dedent()


def stack_class(gen: CodeGen, name: str, t: T.StackT) -> str:
    """The class of a header stack (its element's class exists)."""
    ec = gen.class_of(t.elem)
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
    return e.text()


def _emit_copy(e: Emitter, name: str) -> None:
    """``copy()`` of a generated header/struct/stack class: a new object ``_set`` from this one."""
    e.line("def copy(self):")
    e.indent()
    e.line(f"n = {name}()")
    e.line("n._set(self)")
    e.line("return n")
    e.dedent()
