"""Symbols and scopes of the type checker, and what it attaches to member and call expressions.

:class:`Sym` is what a name denotes; :class:`MemberRef` subclasses say what a member expression
denotes when it is not a field; :class:`CallInfo` says what a call calls.
"""

from __future__ import annotations

import difflib
import itertools
from dataclasses import dataclass, field
from typing import Any

from switch.lang.types import CallKind, Type

_counter = itertools.count(1)


def fresh_pyname(name: str) -> str:
    """A Python identifier unique in the whole compilation, derived from a P4 name."""
    safe = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return f"v{next(_counter)}_{safe}"


@dataclass(eq=False)
class Sym:
    """Something a name can denote.

    kind: 'const' | 'var' | 'param' | 'type' | 'action' | 'table' | 'instance' | 'function'
          | 'extern_func' | 'value_set'
    storage: 'local' (a Python local of the generated function) or 'global' (a module global of
    the generated code, used for control parameters and control-level declarations that actions
    can reach).
    """

    name: str
    kind: str
    type: Type | None
    decl: Any = None
    value: Any = None
    direction: str = ""
    storage: str = "local"
    pyname: str = ""
    owner: Any = None  # the enclosing parser/control declaration, if any
    overloads: list[Any] = field(default_factory=list)  # extern functions with several forms

    def __post_init__(self) -> None:
        if not self.pyname:
            self.pyname = fresh_pyname(self.name)


class Scope:
    """Names declared in one block; ``owner`` is the enclosing parser/control/function."""

    def __init__(self, parent: Scope | None = None, owner: Any = None) -> None:
        self.parent = parent
        self.names: dict[str, Sym] = {}
        self.owner: Any = owner if owner is not None else (parent.owner if parent else None)

    def lookup(self, name: str) -> Sym | None:
        s: Scope | None = self
        while s is not None:
            sym = s.names.get(name)
            if sym is not None:
                return sym
            s = s.parent
        return None

    def all_names(self) -> list[str]:
        out: list[str] = []
        s: Scope | None = self
        while s is not None:
            out.extend(s.names)
            s = s.parent
        return out

    def suggest(self, name: str) -> str:
        close = difflib.get_close_matches(name, self.all_names(), n=1)
        return f"; did you mean '{close[0]}'?" if close else ""


@dataclass(frozen=True)
class MemberRef:
    """What a member expression denotes when it is not a field of a struct or header."""


@dataclass(frozen=True)
class EnumMember(MemberRef):
    """``E.m``: a member of an enum (its runtime value)."""

    value: int


@dataclass(frozen=True)
class ErrorMember(MemberRef):
    """``error.m``: an error code."""

    value: int


@dataclass(frozen=True)
class StackProperty(MemberRef):
    """``s.next``, ``s.last``, ``s.lastIndex`` or ``s.nextIndex`` of a header stack."""

    name: str


@dataclass(frozen=True)
class StackSize(MemberRef):
    """``s.size`` of a header stack: a constant."""

    size: int


@dataclass(frozen=True)
class HeaderMethod(MemberRef):
    """``h.isValid``, ``h.setValid`` or ``h.setInvalid`` (called)."""

    name: str


@dataclass(frozen=True)
class StackMethod(MemberRef):
    """``s.push_front`` or ``s.pop_front`` (called)."""

    name: str


@dataclass(frozen=True)
class SizeMethod(MemberRef):
    """``minSizeInBits`` and friends of a type or value (called)."""

    name: str
    type: Type


@dataclass(eq=False)
class CallInfo:
    """What a call expression calls, for the code generator.

    params: the callee's parameters in order (with ``args`` aligned to them: None where an
    optional/default parameter was omitted or '_' given).
    """

    kind: CallKind | None  # None until the checker says which kind of call it is
    name: str
    decl: Any = None
    params: list[Any] = field(default_factory=list)
    param_types: list[Type] = field(default_factory=list)
    args: list[Any] = field(default_factory=list)
    target: Any = None  # the object expression for methods
    bindings: dict[str, Type] = field(default_factory=dict)
    extern_name: str = ""  # for extern methods: the extern type's name
    decl_type: Type | None = None  # for constructor calls: the type of the instance
