"""What a callee may do, for the calling convention: ``exit``, and which control-level storage it
reaches by name.

* :meth:`Effects.may_exit`: whether running ``decl`` can end in ``exit`` (its own ``exit`` statements,
  or those of the actions, tables and controls it calls). Only then does a call site need the
  copy-out-on-exit code (P4-16 "Exit statement": the copy-out of the enclosing action or control
  and all its callers is still performed).
* :meth:`Effects.globals_reached`: the control-level variables and parameters an action reads or writes
  by name (directly or through the actions it calls). A composite ``out``/``inout`` argument is
  passed by reference only when the callee cannot reach the same storage by another name, which
  is when reference and copy-in/copy-out give the same result.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from switch.lang import ast
from switch.lang.symbols import CallInfo, Sym
from switch.lang.types import CallKind


def _walk(node: ast.Node) -> Iterator[ast.Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(ast.children(n))


def _body(decl: Any) -> ast.Node | None:
    body = getattr(decl, "body", None)
    return body if isinstance(body, ast.Node) else None


class Effects:
    """The answers for one program (cached by declaration; one instance per code generator)."""

    def __init__(self) -> None:
        self._exits: dict[int, bool] = {}
        self._reached: dict[int, frozenset[int]] = {}

    def may_exit(self, decl: Any) -> bool:
        """Whether running the action, function or control ``decl`` may execute ``exit``.

        A control known only by its type (a constructor parameter) may exit.
        """
        key = id(decl)
        if key in self._exits:
            return self._exits[key]
        body = _body(decl)
        if body is None:
            return isinstance(decl, ast.ControlDecl)
        self._exits[key] = False  # P4 has no recursion; this only stops a malformed cycle
        result = any(self._node_may_exit(n) for n in _walk(body))
        self._exits[key] = result
        return result

    def _node_may_exit(self, n: ast.Node) -> bool:
        if isinstance(n, ast.Exit):
            return True
        if not isinstance(n, ast.Call):
            return False
        info = n.ref
        if not isinstance(info, CallInfo):
            return False
        if info.kind in (CallKind.ACTION, CallKind.FUNCTION, CallKind.BLOCK_APPLY):
            return not isinstance(info.decl, ast.ParserDecl) and self.may_exit(info.decl)
        if info.kind is CallKind.TABLE_APPLY and isinstance(info.decl, ast.TableDecl):
            return any(self.may_exit(a) for a in info.decl.action_decls)
        return False

    def globals_reached(self, decl: Any) -> frozenset[int]:
        """``id`` of every control-level symbol the action or function ``decl`` names (with
        those of the actions it calls). Empty for a control or parser: it cannot name its
        caller's storage."""
        if isinstance(decl, (ast.ControlDecl, ast.ParserDecl)):
            return frozenset()
        key = id(decl)
        if key in self._reached:
            return self._reached[key]
        body = _body(decl)
        if body is None:
            return frozenset()
        self._reached[key] = frozenset()
        found: set[int] = set()
        for n in _walk(body):
            if isinstance(n, ast.Name) and isinstance(n.ref, Sym) and n.ref.storage == "global":
                found.add(id(n.ref))
            elif isinstance(n, ast.Call) and isinstance(n.ref, CallInfo):
                if n.ref.kind in (CallKind.ACTION, CallKind.FUNCTION):
                    found |= self.globals_reached(n.ref.decl)
        result = frozenset(found)
        self._reached[key] = result
        return result


def root_symbol(e: ast.Expr) -> Sym | None:
    """The variable or parameter an lvalue is part of (``hdr`` for ``hdr.s[i].f[3:0]``)."""
    while isinstance(e, (ast.Member, ast.Index, ast.Slice, ast.IndexedSlice)):
        e = e.expr
    return e.ref if isinstance(e, ast.Name) and isinstance(e.ref, Sym) else None


def storage_path(e: ast.Expr) -> tuple[object, ...] | None:
    """The storage an lvalue denotes as a path: ``(id(sym), "f", 2, "*")`` for
    ``hdr.f[2].x[3:0]`` is ``(id(hdr), "f", 2, "x")``; a run-time index is ``"*"`` and a slice
    stands for its whole value. None when it is not a plain lvalue."""
    parts: list[object] = []
    while True:
        if isinstance(e, (ast.Slice, ast.IndexedSlice)):
            parts.clear()
            e = e.expr
        elif isinstance(e, ast.Member):
            parts.append(e.name)
            e = e.expr
        elif isinstance(e, ast.Index):
            idx = e.index
            parts.append(idx.value if isinstance(idx, ast.IntLit) else "*")
            e = e.expr
        elif isinstance(e, ast.Name) and isinstance(e.ref, Sym):
            parts.append(id(e.ref))
            return tuple(reversed(parts))
        else:
            return None


def overlap(p: tuple[object, ...] | None, q: tuple[object, ...] | None) -> bool:
    """Whether two storage paths may share storage (unknown paths may)."""
    if p is None or q is None:
        return True
    for a, b in zip(p, q):
        if a != b and a != "*" and b != "*":
            return False
    return True
