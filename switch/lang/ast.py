"""Syntax tree of P4-16 programs.

Every node has a ``span`` (its first token's position in the original file). Expression nodes get a
``type`` slot that the type checker fills in, and name-like nodes a ``ref`` slot pointing at the
declaration they resolve to. Nodes are plain mutable dataclasses because the type checker
annotates them in place; the parser never shares a node between two parents. The slots the
checker fills in (besides ``type`` and ``ref``) are keyword-only fields marked :data:`FILLED_IN`,
so tree walkers can skip them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from switch.errors import NO_SPAN, Span
from switch.lang.lexer import Token

if TYPE_CHECKING:
    from switch.lang import types as T
    from switch.lang.symbols import CallInfo, MemberRef, Sym

FILLED_IN = {"filled_in": True}
"""``metadata`` of the fields the type checker fills in (not children of the node)."""


def children(node: Node) -> Iterator[Node]:
    """The syntax nodes directly below ``node`` in source order (in lists, and in the pairs
    of lists like a struct initialiser's ``(name, expr)``), skipping ``ref``, ``type``,
    ``span`` and the :data:`FILLED_IN` slots."""
    for f in dataclasses.fields(node):
        if f.name in ("ref", "type", "span") or f.metadata.get("filled_in"):
            continue
        yield from _nodes_in(getattr(node, f.name))


def _nodes_in(v: Any) -> Iterator[Node]:
    if isinstance(v, Node):
        yield v
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _nodes_in(x)


@dataclass(eq=False)
class Node:
    span: Span = field(default=NO_SPAN, kw_only=True, repr=False)


@dataclass(eq=False)
class Annotation(Node):
    name: str
    tokens: list[Token] = field(default_factory=list)  # the raw body tokens

    def string_arg(self) -> str | None:
        """The body as a single string literal (``@name("x")`` -> "x"), else None."""
        toks = self.tokens
        if len(toks) == 1 and isinstance(toks[0].value, str) and toks[0].kind.name == "STRING":
            return toks[0].value
        return None

    def int_arg(self) -> int | None:
        """The body as a single integer literal, possibly negated (``@priority(-1)``), else None."""
        toks = self.tokens
        neg = False
        if toks and toks[0].text == "-":
            neg, toks = True, toks[1:]
        if len(toks) == 1 and toks[0].kind.name == "INT":
            v = toks[0].int_literal()[0]
            return -v if neg else v
        return None


def find_annotation(annotations: list[Annotation], name: str) -> Annotation | None:
    for a in annotations:
        if a.name == name:
            return a
    return None


# ---------------------------------------------------------------------------------------------
# Types (as written in the source)


@dataclass(eq=False)
class TypeRef(Node):
    pass


@dataclass(eq=False)
class BaseTypeRef(TypeRef):
    """bit<W>, int<W>, varbit<W>, bool, error, string, match_kind, void, int (arbitrary)."""

    kind: str
    width: Expr | None = None


@dataclass(eq=False)
class NamedTypeRef(TypeRef):
    name: str
    type_args: list[TypeRef] = field(default_factory=list)
    ref: Any = None


@dataclass(eq=False)
class StackTypeRef(TypeRef):
    elem: TypeRef
    size: Expr


@dataclass(eq=False)
class TupleTypeRef(TypeRef):
    elems: list[TypeRef]


@dataclass(eq=False)
class DontCareTypeRef(TypeRef):
    pass


# ---------------------------------------------------------------------------------------------
# Expressions


@dataclass(eq=False)
class Expr(Node):
    type: T.Type | None = field(default=None, kw_only=True, repr=False)

    @property
    def checked_type(self) -> T.Type:
        """The type the checker gave this expression."""
        assert self.type is not None, self
        return self.type


@dataclass(eq=False)
class IntLit(Expr):
    value: int
    width: int | None = None
    signed: bool = False


@dataclass(eq=False)
class BoolLit(Expr):
    value: bool


@dataclass(eq=False)
class StrLit(Expr):
    value: str


@dataclass(eq=False)
class Name(Expr):
    name: str
    top_level: bool = False  # written as '.name'
    ref: Sym | ActionDecl | None = None  # an action for a label of a switch on action_run


@dataclass(eq=False)
class Member(Expr):
    expr: Expr
    name: str
    ref: MemberRef | None = None  # None for a field


@dataclass(eq=False)
class Index(Expr):
    expr: Expr
    index: Expr


@dataclass(eq=False)
class Slice(Expr):
    expr: Expr
    hi: Expr
    lo: Expr


@dataclass(eq=False)
class IndexedSlice(Expr):
    """``e[lo +: w]``: ``w`` bits of ``e`` from bit ``lo`` up; ``lo`` may be a run-time value,
    ``w`` is a compile-time constant (P4-16 1.2.4 "Operations on fixed-width bit types")."""

    expr: Expr
    base: Expr
    width: Expr


@dataclass(eq=False)
class Unary(Expr):
    op: str  # '-', '+', '!', '~'
    expr: Expr


@dataclass(eq=False)
class Binary(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass(eq=False)
class Mux(Expr):
    cond: Expr
    then: Expr
    other: Expr


@dataclass(eq=False)
class Cast(Expr):
    to: TypeRef
    expr: Expr


@dataclass(eq=False)
class Arg(Node):
    value: Expr | None  # None for a don't-care '_' argument
    name: str | None = None


@dataclass(eq=False)
class Call(Expr):
    func: Expr
    type_args: list[TypeRef] = field(default_factory=list)
    args: list[Arg] = field(default_factory=list)
    ref: CallInfo | None = None  # resolved callee information


@dataclass(eq=False)
class ListExpr(Expr):
    """``{a, b}``: tuple / header / struct initializer by position."""

    items: list[Expr]


@dataclass(eq=False)
class InvalidHeader(Expr):
    """``{#}``: an invalid header or header union, its type given by the context (P4-16
    "Operations on headers", "Operations on header unions")."""


@dataclass(eq=False)
class StructInit(Expr):
    """``{f = a, g = b}``."""

    fields: list[tuple[str, Expr]]
    type_name: TypeRef | None = None
    rest: bool = False  # ends with ``...``: the other fields take their default values


@dataclass(eq=False)
class Mask(Expr):
    """``a &&& b`` in a keyset."""

    value: Expr
    mask: Expr


@dataclass(eq=False)
class Range(Expr):
    """``a .. b`` in a keyset."""

    lo: Expr
    hi: Expr


@dataclass(eq=False)
class DontCare(Expr):
    """``_``"""


@dataclass(eq=False)
class DefaultInit(Expr):
    """``...``: the default value of the type the context expects (P4-16 "Default values")."""


@dataclass(eq=False)
class Default(Expr):
    """``default``"""


@dataclass(eq=False)
class TypeExpr(Expr):
    """A type used where an expression is expected (e.g. ``bit<8>.minSizeInBits``)."""

    typ: TypeRef


# ---------------------------------------------------------------------------------------------
# Statements


@dataclass(eq=False)
class Stmt(Node):
    pass


@dataclass(eq=False)
class Assign(Stmt):
    lhs: Expr
    rhs: Expr


@dataclass(eq=False)
class CallStmt(Stmt):
    call: Call


@dataclass(eq=False)
class If(Stmt):
    cond: Expr
    then: Stmt
    other: Stmt | None = None


@dataclass(eq=False)
class Block(Stmt):
    stmts: list[Stmt]


@dataclass(eq=False)
class SwitchCase(Node):
    labels: list[Expr]  # Name (action/enum member), IntLit, Default
    body: Block | None  # None: falls through to the next case


@dataclass(eq=False)
class Switch(Stmt):
    expr: Expr
    cases: list[SwitchCase]


@dataclass(eq=False)
class Exit(Stmt):
    pass


@dataclass(eq=False)
class For(Stmt):
    """``for (init; cond; update) body``."""

    init: list[Stmt]
    cond: Expr
    update: list[Stmt]
    body: Stmt
    annotations: list[Annotation] = field(default_factory=list)


@dataclass(eq=False)
class ForIn(Stmt):
    """``for (T x in collection) body``: ``collection`` is a :class:`Range` (both ends
    included) or a header stack (each element in turn, copied into ``x``)."""

    var: VarDecl
    collection: Expr
    body: Stmt
    annotations: list[Annotation] = field(default_factory=list)


@dataclass(eq=False)
class Break(Stmt):
    pass


@dataclass(eq=False)
class Continue(Stmt):
    pass


@dataclass(eq=False)
class Return(Stmt):
    value: Expr | None = None


@dataclass(eq=False)
class Empty(Stmt):
    pass


@dataclass(eq=False)
class VarDecl(Stmt):
    """Also used for declarations outside statements (control locals, parser locals)."""

    typ: TypeRef
    name: str
    init: Expr | None = None
    annotations: list[Annotation] = field(default_factory=list)
    ref: Sym | None = field(default=None, kw_only=True, repr=False, metadata=FILLED_IN)

    @property
    def sym(self) -> Sym:
        """The variable's symbol (after type checking)."""
        assert self.ref is not None, self.name
        return self.ref


@dataclass(eq=False)
class ConstDecl(Stmt):
    typ: TypeRef
    name: str
    value: Expr
    annotations: list[Annotation] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Declarations


@dataclass(eq=False)
class Decl(Node):
    name: str
    annotations: list[Annotation] = field(default_factory=list, kw_only=True)


@dataclass(eq=False)
class Param(Node):
    direction: str  # '', 'in', 'out', 'inout'
    typ: TypeRef
    name: str
    default: Expr | None = None
    annotations: list[Annotation] = field(default_factory=list)
    ref: Sym | None = field(default=None, kw_only=True, repr=False, metadata=FILLED_IN)

    @property
    def sym(self) -> Sym:
        """The parameter's symbol (after type checking)."""
        assert self.ref is not None, self.name
        return self.ref


@dataclass(eq=False)
class FieldDecl(Node):
    typ: TypeRef
    name: str
    annotations: list[Annotation] = field(default_factory=list)


@dataclass(eq=False)
class TypedefDecl(Decl):
    typ: TypeRef
    is_newtype: bool = False


@dataclass(eq=False)
class HeaderDecl(Decl):
    fields: list[FieldDecl]
    type_params: list[str] = field(default_factory=list)


@dataclass(eq=False)
class HeaderUnionDecl(Decl):
    fields: list[FieldDecl]
    type_params: list[str] = field(default_factory=list)


@dataclass(eq=False)
class StructDecl(Decl):
    fields: list[FieldDecl]
    type_params: list[str] = field(default_factory=list)


@dataclass(eq=False)
class EnumDecl(Decl):
    members: list[tuple[str, Expr | None, Span]]
    underlying: TypeRef | None = None


@dataclass(eq=False)
class ErrorDecl(Decl):
    members: list[tuple[str, Span]]


@dataclass(eq=False)
class MatchKindDecl(Decl):
    members: list[tuple[str, Span]]


@dataclass(eq=False)
class MethodDecl(Decl):
    ret: TypeRef | None  # None for constructors
    type_params: list[str]
    params: list[Param]
    is_abstract: bool = False


@dataclass(eq=False)
class ExternDecl(Decl):
    type_params: list[str]
    methods: list[MethodDecl]


@dataclass(eq=False)
class ExternFuncDecl(Decl):
    ret: TypeRef
    type_params: list[str]
    params: list[Param]


@dataclass(eq=False)
class FunctionDecl(Decl):
    ret: TypeRef
    type_params: list[str]
    params: list[Param]
    body: Block
    ret_type: T.Type | None = field(default=None, kw_only=True, repr=False, metadata=FILLED_IN)


@dataclass(eq=False)
class ActionDecl(Decl):
    params: list[Param]
    body: Block


@dataclass(eq=False)
class KeyElement(Node):
    expr: Expr
    match_kind: str
    annotations: list[Annotation] = field(default_factory=list)


@dataclass(eq=False)
class ActionRefSyntax(Node):
    """An action in a table's ``actions`` list or ``default_action``, possibly with arguments."""

    name: Expr  # Name or Member (e.g. '.NoAction' or 'c.a')
    args: list[Arg] = field(default_factory=list)
    annotations: list[Annotation] = field(default_factory=list)
    ref: Sym | None = None
    call_info: CallInfo | None = field(default=None, kw_only=True, repr=False, metadata=FILLED_IN)


@dataclass(eq=False)
class EntrySyntax(Node):
    keyset: list[Expr]  # one per key element (a single tuple is unpacked)
    action: ActionRefSyntax
    priority: Expr | None = None
    annotations: list[Annotation] = field(default_factory=list)
    is_const: bool = False  # `const` before the entry (in a mutable `entries` list)


@dataclass(eq=False)
class TableProperty(Node):
    name: str
    is_const: bool = False
    keys: list[KeyElement] | None = None
    actions: list[ActionRefSyntax] | None = None
    entries: list[EntrySyntax] | None = None
    value: Expr | None = None  # for all other properties
    annotations: list[Annotation] = field(default_factory=list)
    action_ref: ActionRefSyntax | None = field(  # default_action's value as an action reference
        default=None, kw_only=True, repr=False, metadata=FILLED_IN
    )


@dataclass(eq=False)
class TableDecl(Decl):
    properties: list[TableProperty]
    key_types: list[T.Type] = field(
        default_factory=list, kw_only=True, repr=False, metadata=FILLED_IN
    )
    action_decls: list[ActionDecl] = field(
        default_factory=list, kw_only=True, repr=False, metadata=FILLED_IN
    )

    def prop(self, name: str) -> TableProperty | None:
        for p in self.properties:
            if p.name == name:
                return p
        return None


@dataclass(eq=False)
class Instantiation(Decl):
    typ: TypeRef
    args: list[Arg]
    # e.g. 'V1Switch(p(), ...) main;' or 'counter(1024, CounterType.packets) c;'
    ref: CallInfo | None = field(default=None, kw_only=True, repr=False, metadata=FILLED_IN)
    inst_type: T.Type | None = field(default=None, kw_only=True, repr=False, metadata=FILLED_IN)
    # the instance of a direct invocation C.apply(x) of a generic C without type arguments: they
    # are inferred from the apply's arguments when that call is checked
    infer_type_args: bool = field(default=False, kw_only=True, repr=False)

    @property
    def ctor(self) -> CallInfo:
        """The constructor call (after type checking)."""
        assert self.ref is not None, self.name
        return self.ref


@dataclass(eq=False)
class ValueSetDecl(Decl):
    elem: TypeRef
    size: Expr
    elem_type: T.Type | None = field(default=None, kw_only=True, repr=False, metadata=FILLED_IN)
    size_value: int = field(default=0, kw_only=True, repr=False, metadata=FILLED_IN)


@dataclass(eq=False)
class SelectCase(Node):
    keyset: Expr  # a ListExpr for tuples, Default, DontCare, Mask, Range, or a value
    state: str
    state_span: Span = NO_SPAN


@dataclass(eq=False)
class Transition(Node):
    state: str | None = None  # direct transition
    select: list[Expr] | None = None  # select expressions
    cases: list[SelectCase] = field(default_factory=list)


@dataclass(eq=False)
class ParserState(Decl):
    stmts: list[Stmt]
    transition: Transition | None


@dataclass(eq=False)
class ParserTypeDecl(Decl):
    type_params: list[str]
    params: list[Param]


@dataclass(eq=False)
class ControlTypeDecl(Decl):
    type_params: list[str]
    params: list[Param]


@dataclass(eq=False)
class PackageDecl(Decl):
    type_params: list[str]
    params: list[Param]


@dataclass(eq=False)
class ParserDecl(Decl):
    type_params: list[str]
    params: list[Param]
    ctor_params: list[Param]
    locals: list[Node]  # VarDecl, ConstDecl, Instantiation, ValueSetDecl
    states: list[ParserState]


@dataclass(eq=False)
class ControlDecl(Decl):
    type_params: list[str]
    params: list[Param]
    ctor_params: list[Param]
    locals: list[Node]  # VarDecl, ConstDecl, Instantiation, ActionDecl, TableDecl
    body: Block


@dataclass(eq=False)
class Program(Node):
    decls: list[Node]
