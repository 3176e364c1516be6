"""The checker: the state of one type-checking run and the dispatch through the rule tables.

:class:`Checker` holds what the whole program shares (the root scope, error codes, match kinds,
named types, ``main``) and the stack of bodies being checked. Its ``check_*`` methods look the
node's type up in the rule tables of the other modules of this package and run the row:

=======================  ==================================================
``check_expr``           :data:`~switch.lang.typecheck.expressions.EXPRESSIONS`
``check_stmt``           :data:`~switch.lang.typecheck.statements.STATEMENTS`
``check_top``            :data:`~switch.lang.typecheck.declarations.TOP_LEVEL`
``check_local``          :data:`~switch.lang.typecheck.declarations.LOCALS`
``resolve_type``         :data:`~switch.lang.typecheck.typerefs.TYPE_REFS`
=======================  ==================================================
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from switch.errors import UnsupportedError
from switch.lang import ast, constfold
from switch.lang import types as T
from switch.lang.symbols import Scope, Sym
from switch.lang.typecheck.coercion import coerce
from switch.lang.typecheck.context import Context, err
from switch.lang.typecheck.declarations import LOCALS, TOP_LEVEL
from switch.lang.typecheck.expressions import EXPRESSIONS
from switch.lang.typecheck.generics import specialise
from switch.lang.typecheck.statements import STATEMENTS
from switch.lang.typecheck.typerefs import TYPE_REFS


@dataclass
class CheckedProgram:
    """The annotated program plus the tables the later phases need."""

    program: ast.Program
    root: Scope
    errors: dict[str, int]  # error member -> code
    match_kinds: set[str]
    main: ast.Instantiation | None
    types: dict[str, T.Type] = field(default_factory=dict)


class Checker:
    """One run of the type checker over one program."""

    def __init__(self) -> None:
        self.root = Scope()
        self.errors: dict[str, int] = {}
        self.match_kinds: set[str] = set()
        self.main: ast.Instantiation | None = None
        self.types: dict[str, T.Type] = {}
        self.ret_stack: list[T.Type | None] = []  # return type of the enclosing body
        self.context_stack: list[Context] = []
        self.loop_depth = 0  # for loops around the statement being checked (break/continue)
        # monomorphised generic declarations (switch.lang.typecheck.generics)
        self.specialised: dict[Any, Any] = {}
        self.specialisation_count: dict[int, int] = {}

    def check(self, program: ast.Program) -> CheckedProgram:
        for decl in program.decls:
            self.check_top(decl)
        return CheckedProgram(
            program, self.root, self.errors, self.match_kinds, self.main, self.types
        )

    # -- scopes and bodies -------------------------------------------------------------------

    def declare(self, scope: Scope, sym: Sym, node: ast.Node) -> Sym:
        """Add ``sym`` to ``scope`` (extern functions may be overloaded)."""
        existing = scope.names.get(sym.name)
        if existing is not None:
            if sym.kind == "extern_func" and existing.kind == "extern_func":
                existing.overloads.extend(sym.overloads)
                return existing
            raise err(f"'{sym.name}' is already declared in this scope", node)
        scope.names[sym.name] = sym
        return sym

    @property
    def context(self) -> Context | None:
        """The kind of the innermost body being checked (None at the top level)."""
        return self.context_stack[-1] if self.context_stack else None

    @contextmanager
    def inside(self, context: Context, ret: T.Type | None = None) -> Iterator[None]:
        """Check a body of kind ``context`` whose ``return`` gives a ``ret`` (None: no value)."""
        self.context_stack.append(context)
        self.ret_stack.append(ret)
        loops, self.loop_depth = self.loop_depth, 0
        try:
            yield
        finally:
            self.context_stack.pop()
            self.ret_stack.pop()
            self.loop_depth = loops

    # -- dispatch ----------------------------------------------------------------------------

    def check_top(self, d: ast.Node) -> None:
        rule = TOP_LEVEL.get(type(d))
        if rule is None:
            raise UnsupportedError(f"unsupported top-level declaration {type(d).__name__}", d.span)
        rule(self, d)

    def check_local(self, d: ast.Node, scope: Scope, storage: str) -> None:
        """A declaration inside a parser or control, or in statement position."""
        rule = LOCALS.get(type(d))
        if rule is None:
            raise UnsupportedError(f"unsupported local declaration {type(d).__name__}", d.span)
        rule(self, d, scope, storage)

    def check_block(self, b: ast.Block, scope: Scope) -> None:
        for s in b.stmts:
            self.check_stmt(s, scope)

    def check_stmt(self, s: ast.Stmt, scope: Scope) -> None:
        rule = STATEMENTS.get(type(s))
        if rule is None:
            raise UnsupportedError(f"unsupported statement {type(s).__name__}", s.span)
        rule(self, s, scope)

    def check_expr(self, e: ast.Expr, scope: Scope, expected: T.Type | None = None) -> T.Type:
        """The type of ``e`` (also stored in ``e.type``); ``expected`` is what the context wants."""
        rule = EXPRESSIONS.get(type(e))
        if rule is None:
            raise err(f"unsupported expression {type(e).__name__}", e)
        t = rule(self, e, scope, expected)
        e.type = t
        return t

    def specialise(self, decl: Any, args: list[T.Type], node: ast.Node) -> Any:
        """The copy of a generic declaration for ``args`` (see
        :mod:`~switch.lang.typecheck.generics`)."""
        return specialise(self, decl, args, node)

    def resolve_type(self, tr: ast.TypeRef, scope: Scope) -> T.Type:
        """The semantic type of a written type."""
        rule = TYPE_REFS.get(type(tr))
        if rule is None:
            raise err("unsupported type", tr)
        return rule(self, tr, scope)

    # -- constants ---------------------------------------------------------------------------

    def const_int(self, e: ast.Expr, scope: Scope, what: str) -> int:
        """Check ``e`` as an integer constant and return its value."""
        v = self.const_value(e, scope, None)
        if isinstance(v, bool) or not isinstance(v, int):
            raise err(f"{what} must be an integer constant", e)
        return v

    def const_value(self, e: ast.Expr, scope: Scope, target: T.Type | None) -> Any:
        """Check ``e`` (as a ``target`` if given) and return its constant value."""
        self.check_expr(e, scope, target)
        if target is not None:
            coerce(self, e, target, "constant")
        return self.eval_const(e)

    def eval_const(self, e: ast.Expr) -> Any:
        """The value of the checked expression ``e``, which must be a compile-time constant."""
        v = constfold.fold(e)
        if v is None:
            raise err("expression is not a compile-time constant", e)
        return v
