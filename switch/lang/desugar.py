"""Rewrites of P4-16 shorthand into the forms the type checker and code generator handle.

Direct type invocation (P4-16 spec, "Direct type invocation"): inside a control or parser,
``C.apply(args)`` where ``C`` names a control (or parser) type rather than an instance stands for
a fresh instance ``C() c_inst;`` declared in the enclosing block and applied at that call. Each
call site gets its own instance, named after the type (``C_0``, ``C_1``, ...). The type
arguments of a generic ``C`` invoked without them come from the apply's arguments (the type
checker infers them when it checks the call).
"""

from __future__ import annotations

from collections.abc import Iterator

from switch.lang import ast
from switch.lang import types as T
from switch.lang.symbols import Scope


def _calls(node: ast.Node) -> Iterator[ast.Call]:
    """Every call below `node`, outermost first."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Call):
            yield n
        if isinstance(n, (ast.ActionDecl, ast.TableDecl, ast.FunctionDecl)):
            continue  # their bodies cannot apply blocks
        stack.extend(reversed(list(ast.children(n))))


def _invoked_type(call: ast.Call, scope: Scope) -> ast.Name | ast.TypeExpr | None:
    """The `C` of a `C.apply(...)` call where `C` names a control or parser declaration (also
    with type arguments, `C<bit<8>>.apply(...)`)."""
    f = call.func
    if not (isinstance(f, ast.Member) and f.name == "apply"):
        return None
    e = f.expr
    if isinstance(e, ast.Name):
        name = e.name
    elif isinstance(e, ast.TypeExpr) and isinstance(e.typ, ast.NamedTypeRef):
        name = e.typ.name
    else:
        return None
    sym = scope.lookup(name)
    if sym is None or sym.kind != "type" or not isinstance(sym.type, T.BlockT):
        return None
    return e if isinstance(sym.decl, (ast.ControlDecl, ast.ParserDecl)) else None


def _fresh_name(base: str, scope: Scope, taken: set[str]) -> str:
    i = 0
    while f"{base}_{i}" in taken or scope.lookup(f"{base}_{i}") is not None:
        i += 1
    name = f"{base}_{i}"
    taken.add(name)
    return name


def instantiate_direct_calls(block: ast.ControlDecl | ast.ParserDecl, scope: Scope) -> None:
    """Turn each `C.apply(...)` of a block type inside `block` into an instance plus its apply."""
    roots: list[ast.Node] = (
        [block.body] if isinstance(block, ast.ControlDecl) else list(block.states)
    )
    taken = {getattr(loc, "name", "") for loc in block.locals}
    for root in roots:
        for call in _calls(root):
            invoked = _invoked_type(call, scope)
            if invoked is None:
                continue
            if isinstance(invoked, ast.TypeExpr):
                assert isinstance(invoked.typ, ast.NamedTypeRef) and isinstance(
                    call.func, ast.Member
                )
                typ = invoked.typ
                inst = _fresh_name(typ.name, scope, taken)
                block.locals.append(ast.Instantiation(inst, typ, [], span=invoked.span))
                call.func.expr = ast.Name(inst, span=invoked.span)
                continue
            inst = _fresh_name(invoked.name, scope, taken)
            typ = ast.NamedTypeRef(invoked.name, span=invoked.span)
            sym = scope.lookup(invoked.name)
            generic = sym is not None and bool(getattr(sym.decl, "type_params", None))
            block.locals.append(
                ast.Instantiation(inst, typ, [], span=invoked.span, infer_type_args=generic)
            )
            invoked.name = inst
