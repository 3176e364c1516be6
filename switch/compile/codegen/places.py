"""L-values evaluated once: :class:`Place` and one rule per lvalue node type (:data:`PLACES`).

The P4-16 spec evaluates the left side of an assignment to an l-value *before* the right side
("Assignment statement"), evaluates the l-value of a compound assignment ``a op= b`` only once,
and saves the l-value of every ``out``/``inout`` argument before the following arguments are
evaluated ("Calling convention: call by copy in / copy out", step 3). A :class:`Place` is that
saved l-value: the parts of the lvalue that can change or have side effects (run-time stack
indices, ``next``/``last``, calls inside an index) are computed once into temporaries (in
``CodeGen.pre``); afterwards ``read`` is a plain Python expression and ``write`` stores into the
same location however many times it is used.

Composite values (headers, structs, unions, stacks) are objects of generated classes: saving
their l-value means keeping the object, and writing them copies in place (``_set``). Assigning a
header to a member of a header union keeps the union's rule that at most one member is valid.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from switch.compile.codegen.classes import is_composite
from switch.compile.codegen.emitter import Emitter, mask
from switch.errors import UnsupportedError
from switch.lang import ast
from switch.lang import types as T
from switch.lang.symbols import StackProperty

if TYPE_CHECKING:
    from switch.compile.codegen.generator import CodeGen


@dataclass(frozen=True)
class Place:
    """A saved l-value: code that reads it and the way to store into it.

    ``read`` has no side effects and may be evaluated any number of times. ``siblings`` are
    the other members of the header union ``read`` is a member of (invalidated when a valid
    header is stored). ``base`` and ``bits`` describe a slice: the place of the sliced value and
    its ``(hi, lo)``.
    """

    read: str
    type: T.Type | None
    siblings: tuple[str, ...] = ()
    base: Place | None = None
    bits: tuple[int, int] | None = None
    composite: bool = field(default=False)
    shift: str | None = None  # an indexed slice: ``bits`` is (width - 1, 0) moved up by this
    tuple_index: int | None = None  # a scalar element of the tuple ``base``

    def write(self, value: str, out: Emitter) -> None:
        """Store the code ``value`` (evaluated once) into this place."""
        if self.base is not None and self.tuple_index is not None:
            # a Python tuple is immutable: the tuple is stored again with the element replaced
            i, t = self.tuple_index, self.base.read
            self.base.write(f"({t}[:{i}] + (({value}),) + {t}[{i + 1}:])", out)
            return
        if self.base is not None and self.bits is not None:
            hi, lo = self.bits
            bt = self.base.type
            assert isinstance(bt, (T.BitT, T.IntT))
            m = mask(hi - lo + 1) << lo
            keep = mask(bt.width) ^ m
            new = f"(({self.base.read} & {keep}) | (({value}) << {lo} & {m}))"
            if self.shift is not None:
                # bits moved past the top of the value are dropped
                sm = f"({mask(hi + 1)} << {self.shift})"
                old = f"({self.base.read} & {mask(bt.width)} & ~{sm})"
                new = f"(({old} | ((({value}) << {self.shift}) & {sm})) & {mask(bt.width)})"
            if isinstance(bt, T.IntT):
                new = f"_to_signed({new}, {bt.width})"
            self.base.write(new, out)
            return
        if not self.composite:
            out.line(f"{self.read} = {value}")
            return
        out.line(f"{self.read}._set({value})")
        if self.siblings:
            # u.h = e with e valid is u.h.setValid(); u.h = e (P4-16 "Operations on header
            # unions"): the other members become invalid
            out.line(f"if {self.read}._v:")
            for s in self.siblings:
                out.line(f"    {s}._v = False")


def is_path(e: ast.Expr) -> bool:
    """Whether ``e`` names storage without computing anything (names, fields, constant
    indices): its code can be evaluated again and still denote the same location."""
    if isinstance(e, ast.Name):
        return True
    if isinstance(e, ast.Member):
        return e.ref is None and is_path(e.expr)
    if isinstance(e, ast.Index):
        return (isinstance(e.index, ast.IntLit) or e.index.type is T.INFINT) and is_path(e.expr)
    return False


def saved_object(gen: CodeGen, e: ast.Expr) -> str:
    """Code for the composite object ``e`` denotes, bound to a temporary (in ``pre``) unless
    ``e`` is a plain path."""
    code = gen.g_expr(e)
    if is_path(e):
        return code
    t = gen.tmp("p")
    gen.pre.append(f"{t} = {code}")
    return t


PlaceRule = Callable[["CodeGen", Any], Place]
"""(generator, lvalue of the row's type) -> its place (binding statements go to ``pre``)."""


def _name_place(gen: CodeGen, e: ast.Name) -> Place:
    return Place(gen.g_expr(e), e.type, composite=is_composite(e.type))


def _member_place(gen: CodeGen, e: ast.Member) -> Place:
    if isinstance(e.ref, StackProperty):
        if e.ref.name not in ("next", "last"):
            raise UnsupportedError(f"cannot assign to the stack property '{e.name}'", e.span)
        return Place(saved_object(gen, e), e.type, composite=True)
    obj = saved_object(gen, e.expr)
    read = f"{obj}.f_{e.name}"
    bt = e.expr.type
    siblings: tuple[str, ...] = ()
    if isinstance(bt, T.StructLikeT) and bt.kind == "header_union":
        siblings = tuple(f"{obj}.f_{n}" for n in bt.fields if n != e.name)
    return Place(read, e.type, siblings, composite=is_composite(e.type))


def _element_place(gen: CodeGen, e: ast.Index) -> Place:
    if isinstance(e.expr.type, T.TupleT):  # the index is a constant
        i = gen.const_index(e.index)
        assert i is not None
        base = gen.g_place(e.expr)
        if is_composite(e.type):
            # tuples share their element objects when copied: changing one in place could
            # change another tuple too
            raise UnsupportedError(
                "assigning to a header, struct or stack inside a tuple is not supported "
                "(assign the whole tuple)",
                e.span,
            )
        return Place(f"{base.read}[{i}]", e.type, base=base, tuple_index=i)
    return Place(saved_object(gen, e), e.type, composite=True)


def _slice_place(gen: CodeGen, e: ast.Slice) -> Place:
    hi, lo = gen.const_index(e.hi), gen.const_index(e.lo)
    assert hi is not None and lo is not None
    base = gen.g_place(e.expr)
    m = mask(hi - lo + 1)
    read = f"(({base.read} >> {lo}) & {m})" if lo else f"({base.read} & {m})"
    return Place(read, e.type, base=base, bits=(hi, lo))


def _indexed_slice_place(gen: CodeGen, e: ast.IndexedSlice) -> Place:
    w = gen.const_index(e.width)
    assert w is not None
    base = gen.g_place(e.expr)
    lo = gen.g_expr(e.base)
    if gen.const_index(e.base) is None:
        t = gen.tmp("lo")
        gen.pre.append(f"{t} = {lo}")
        lo = t
    bt = e.expr.type
    v = f"({base.read} & {mask(bt.width)})" if isinstance(bt, T.IntT) else base.read
    read = f"(({v} >> {lo}) & {mask(w)})"
    return Place(read, e.type, base=base, bits=(w - 1, 0), shift=lo)


PLACES: dict[type[ast.Expr], PlaceRule] = {
    ast.Name: _name_place,
    ast.Member: _member_place,
    ast.Index: _element_place,
    ast.Slice: _slice_place,
    ast.IndexedSlice: _indexed_slice_place,
}
"""Every lvalue node type (the same as the type checker's ``LVALUES``): its place."""
