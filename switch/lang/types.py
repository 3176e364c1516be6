"""Semantic types of P4-16 as the type checker computes them.

Fixed-width types are frozen values (``BitT(8) == BitT(8)``); named aggregate types (headers,
structs, enums, externs, parsers, controls) are compared by identity, as P4 uses name
equivalence for them. ``InfIntT`` is the type of integer literals without a width, which convert
implicitly to any fixed-width type.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Type:
    def __str__(self) -> str:  # pragma: no cover - overridden
        return type(self).__name__


@dataclass(frozen=True)
class BitT(Type):
    width: int

    def __str__(self) -> str:
        return f"bit<{self.width}>"


@dataclass(frozen=True)
class IntT(Type):
    width: int

    def __str__(self) -> str:
        return f"int<{self.width}>"


@dataclass(frozen=True)
class VarbitT(Type):
    max_width: int

    def __str__(self) -> str:
        return f"varbit<{self.max_width}>"


@dataclass(frozen=True)
class _Simple(Type):
    name: str

    def __str__(self) -> str:
        return self.name


BOOL = _Simple("bool")
STRING = _Simple("string")
ERROR = _Simple("error")
MATCH_KIND = _Simple("match_kind")
VOID = _Simple("void")
INFINT = _Simple("int")  # arbitrary-precision integer (literals, compile-time constants)
DONTCARE = _Simple("_")


@dataclass(eq=False)
class StructLikeT(Type):
    """header, struct or header_union."""

    kind: str  # 'header' | 'struct' | 'header_union'
    name: str
    fields: dict[str, Type] = field(default_factory=dict)
    annotations: list[Any] = field(default_factory=list)
    field_annotations: dict[str, list[Any]] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.name

    @property
    def is_header(self) -> bool:
        return self.kind == "header"


@dataclass(frozen=True)
class StackT(Type):
    elem: StructLikeT
    size: int

    def __str__(self) -> str:
        return f"{self.elem}[{self.size}]"


@dataclass(frozen=True)
class TupleT(Type):
    elems: tuple[Type, ...]

    def __str__(self) -> str:
        return "tuple<" + ", ".join(map(str, self.elems)) + ">"


@dataclass(eq=False)
class ListT(Type):
    """The type of a brace list whose target type is not known yet."""

    elems: list[Type]

    def __str__(self) -> str:
        return "{" + ", ".join(map(str, self.elems)) + "}"


class InvalidHeaderT(Type):
    """The type of ``{#}`` whose header or header union type is not known yet."""

    def __str__(self) -> str:
        return "{#}"


@dataclass(eq=False)
class StructInitT(Type):
    fields: dict[str, Type]

    def __str__(self) -> str:
        return "{" + ", ".join(f"{k} = {v}" for k, v in self.fields.items()) + "}"


@dataclass(eq=False)
class EnumT(Type):
    name: str
    members: list[str]
    underlying: BitT | IntT | None = None
    values: dict[str, int] = field(default_factory=dict)  # member -> runtime value

    def __str__(self) -> str:
        return self.name


@dataclass(eq=False)
class TypeVar(Type):
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(eq=False)
class GenericT(Type):
    """A generic struct, header or header union: a type only with its type arguments, each
    list of which makes its own (monomorphised) :class:`StructLikeT`."""

    decl: Any  # ast.StructDecl | ast.HeaderDecl | ast.HeaderUnionDecl

    def __str__(self) -> str:
        return f"{self.decl.name}<{', '.join(self.decl.type_params)}>"


@dataclass(eq=False)
class ExternT(Type):
    decl: Any  # ast.ExternDecl
    type_args: dict[str, Type] = field(default_factory=dict)

    def __str__(self) -> str:
        if self.type_args:
            return f"{self.decl.name}<{', '.join(map(str, self.type_args.values()))}>"
        return str(self.decl.name)


@dataclass(eq=False)
class BlockT(Type):
    """A parser, control or package type (the declaration or type declaration)."""

    kind: str  # 'parser' | 'control' | 'package'
    decl: Any
    type_args: dict[str, Type] = field(default_factory=dict)

    def __str__(self) -> str:
        return str(self.decl.name)


@dataclass(eq=False)
class TableT(Type):
    decl: Any

    def __str__(self) -> str:
        return f"table {self.decl.name}"


@dataclass(eq=False)
class ApplyResultT(Type):
    """``t.apply()``: has ``hit``, ``miss`` and ``action_run``."""

    table: Any

    def __str__(self) -> str:
        return f"apply_result({self.table.name})"


@dataclass(eq=False)
class ActionRunT(Type):
    table: Any

    def __str__(self) -> str:
        return f"action_list({self.table.name})"


class CallKind(enum.StrEnum):
    """Kinds of callable things, and so of calls (the rows of the checker's and code
    generator's call tables)."""

    ACTION = "action"
    FUNCTION = "function"
    EXTERN_FUNC = "extern_func"
    EXTERN_METHOD = "extern_method"
    PACKET_METHOD = "packet_method"  # a method of packet_in / packet_out
    HEADER_METHOD = "header_method"
    STACK_METHOD = "stack_method"
    SIZE_METHOD = "size_method"
    TABLE_APPLY = "table_apply"
    BLOCK_APPLY = "block_apply"
    CONSTRUCTOR = "constructor"


@dataclass(eq=False)
class FuncT(Type):
    """Actions, functions, extern functions and methods (callable things).

    ``decl`` depends on ``kind``: the action or function declaration, the extern function's
    symbol, ``(extern type, method overloads)``, the header/stack/type of a built-in method, the
    table declaration or the parser/control type.
    """

    kind: CallKind
    decl: Any

    def __str__(self) -> str:
        return f"{self.kind} {self.decl.name}"


@dataclass(eq=False)
class TypeOnlyT(Type):
    """A name that denotes a type (``MyEnum``, ``error``) used as the base of a member access."""

    typ: Type

    def __str__(self) -> str:
        return f"type {self.typ}"


def is_fixed(t: Type) -> bool:
    return isinstance(t, (BitT, IntT))


def is_numeric(t: Type) -> bool:
    return isinstance(t, (BitT, IntT)) or t is INFINT


def width_of(t: Type) -> int:
    """Width in bits of a serializable type (headers: sum of fields)."""
    if isinstance(t, (BitT, IntT)):
        return t.width
    if t is BOOL:
        return 1
    if isinstance(t, VarbitT):
        return t.max_width
    if isinstance(t, EnumT) and t.underlying is not None:
        return t.underlying.width
    if isinstance(t, StructLikeT):
        return sum(width_of(f) for f in t.fields.values())
    if isinstance(t, StackT):
        return width_of(t.elem) * t.size
    if isinstance(t, TupleT):
        return sum(width_of(e) for e in t.elems)
    if t is ERROR:
        return 0
    raise ValueError(f"type {t} has no width")


def same_type(a: Type, b: Type) -> bool:
    if a is b:
        return True
    if isinstance(a, (BitT, IntT, VarbitT, StackT, TupleT)) or isinstance(a, _Simple):
        return a == b
    if isinstance(a, ExternT) and isinstance(b, ExternT):
        return a.decl is b.decl
    if isinstance(a, BlockT) and isinstance(b, BlockT):
        return a.decl is b.decl
    return False


def varbit_field(t: Type) -> tuple[str, VarbitT] | None:
    """The varbit field of a header (a header has at most one), or None."""
    if isinstance(t, StructLikeT):
        for n, ft in t.fields.items():
            if isinstance(ft, VarbitT):
                return n, ft
    return None


def fixed_width(t: StructLikeT) -> int:
    """Width in bits of a header without its varbit field (its ``minSizeInBits``)."""
    return sum(0 if isinstance(f, VarbitT) else width_of(f) for f in t.fields.values())
