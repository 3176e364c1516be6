"""Match-action tables: their properties (:data:`TABLE_PROPERTIES`, one rule per property, checked
in the table's order) and references to actions.

After checking, a table declaration knows its key types (``key_types``) and action declarations
(``action_decls``); every action reference in it has its ``CallInfo`` (``call_info``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from switch.errors import UnsupportedError
from switch.lang import ast, constfold
from switch.lang import types as T
from switch.lang.symbols import Scope
from switch.lang.typecheck.calls import bind_args, check_constructor_call
from switch.lang.typecheck.context import err
from switch.lang.typecheck.keysets import check_simple_keyset

if TYPE_CHECKING:
    from switch.lang.typecheck.checker import Checker

PropertyRule = Callable[["Checker", ast.TableDecl, ast.TableProperty, Scope], None]


def check_table(ck: Checker, d: ast.TableDecl, scope: Scope) -> None:
    seen: set[str] = set()
    for p in d.properties:
        if p.name in seen:
            raise err(f"duplicate table property '{p.name}'", p)
        seen.add(p.name)
    actions_prop = d.prop("actions")
    if actions_prop is None or actions_prop.actions is None:
        raise err(f"table '{d.name}' has no 'actions' property", d)
    for name, rule in TABLE_PROPERTIES.items():
        prop = d.prop(name)
        if prop is not None:
            rule(ck, d, prop, scope)


def _key(ck: Checker, d: ast.TableDecl, prop: ast.TableProperty, scope: Scope) -> None:
    for k in prop.keys or []:
        kt = ck.check_expr(k.expr, scope)
        if k.match_kind not in ck.match_kinds:
            raise err(
                f"unknown match kind '{k.match_kind}'; valid: {', '.join(sorted(ck.match_kinds))}",
                k,
            )
        if not (T.is_fixed(kt) or kt is T.BOOL or kt is T.ERROR or isinstance(kt, T.EnumT)):
            raise err(f"table key cannot have type {kt}", k.expr)
        d.key_types.append(kt)


def _actions(ck: Checker, d: ast.TableDecl, prop: ast.TableProperty, scope: Scope) -> None:
    assert prop.actions is not None
    for ref in prop.actions:
        d.action_decls.append(resolve_action_ref(ck, ref, scope, in_list=True))


def _default_action(ck: Checker, d: ast.TableDecl, prop: ast.TableProperty, scope: Scope) -> None:
    if prop.value is None:
        raise err("default_action needs an action", prop)
    ref = _action_ref_from_expr(prop.value)
    a = resolve_action_ref(ck, ref, scope, in_list=False)
    if a not in d.action_decls:
        raise err(f"default action '{a.name}' is not in the table's actions", prop.value)
    prop.action_ref = ref


def _count(ck: Checker, d: ast.TableDecl, prop: ast.TableProperty, scope: Scope) -> None:
    assert prop.value is not None
    v = ck.const_int(prop.value, scope, f"table {prop.name}")
    if v < 0:
        raise err(f"table {prop.name} must not be negative", prop.value)


def _extern_instance(ck: Checker, d: ast.TableDecl, prop: ast.TableProperty, scope: Scope) -> None:
    value = prop.value
    assert value is not None
    if isinstance(value, ast.Call):
        # an anonymous instantiation: implementation = action_selector(...)
        fn = value.func
        tsym = scope.lookup(fn.name) if isinstance(fn, ast.Name) else None
        if tsym is None or tsym.kind != "type" or tsym.type is None:
            raise err(f"table property '{prop.name}' must name an extern instance", value)
        info = check_constructor_call(ck, tsym.type, value.args, scope, value)
        value.ref = info
        value.type = info.decl_type
    else:
        pt = ck.check_expr(value, scope)
        if not isinstance(pt, T.ExternT):
            raise err(f"table property '{prop.name}' must name an extern instance", value)


def _support_timeout(ck: Checker, d: ast.TableDecl, prop: ast.TableProperty, scope: Scope) -> None:
    if prop.value is not None:
        ck.check_expr(prop.value, scope, T.BOOL)


def _entries(ck: Checker, d: ast.TableDecl, prop: ast.TableProperty, scope: Scope) -> None:
    key_types = d.key_types
    for e in prop.entries or []:
        if len(e.keyset) == 1 and len(key_types) > 1 and isinstance(e.keyset[0], ast.ListExpr):
            e.keyset = e.keyset[0].items
        if len(e.keyset) != len(key_types):
            raise err(
                f"entry has {len(e.keyset)} key values, the table has {len(key_types)} keys", e
            )
        for ks, kt in zip(e.keyset, key_types):
            check_simple_keyset(ck, ks, kt, scope)
        a = resolve_action_ref(ck, e.action, scope, in_list=False)
        if a not in d.action_decls:
            raise err(f"action '{a.name}' is not in the table's actions", e.action)
        if e.priority is not None:
            if ck.const_int(e.priority, scope, "entry priority") < 0:
                raise err("entry priorities must not be negative", e.priority)
    given = [e.priority is not None for e in prop.entries or []]
    if any(given) and not given[0]:
        # P4-16 "Entry priorities": the others count from the first one
        raise err(
            "when entries give priorities, the first entry must give one", (prop.entries or [])[0]
        )


def _priority_delta(ck: Checker, d: ast.TableDecl, prop: ast.TableProperty, scope: Scope) -> None:
    assert prop.value is not None
    if ck.const_int(prop.value, scope, "table priority_delta") <= 0:
        raise err("table priority_delta must be positive", prop.value)


def _boolean(ck: Checker, d: ast.TableDecl, prop: ast.TableProperty, scope: Scope) -> None:
    assert prop.value is not None
    if not isinstance(ck.const_value(prop.value, scope, T.BOOL), bool):
        raise err(f"table {prop.name} must be a compile-time boolean", prop.value)


TABLE_PROPERTIES: dict[str, PropertyRule] = {
    "key": _key,
    "actions": _actions,
    "default_action": _default_action,
    "size": _count,
    "max_group_size": _count,
    "implementation": _extern_instance,
    "counters": _extern_instance,
    "meters": _extern_instance,
    "support_timeout": _support_timeout,
    "largest_priority_wins": _boolean,
    "priority_delta": _priority_delta,
    "entries": _entries,
}
"""The properties the checker knows, in the order it checks them (others are not checked)."""


def _action_ref_from_expr(e: ast.Expr) -> ast.ActionRefSyntax:
    if isinstance(e, ast.Call):
        return ast.ActionRefSyntax(e.func, e.args, span=e.span)
    if isinstance(e, (ast.Name, ast.Member)):
        return ast.ActionRefSyntax(e, [], span=e.span)
    raise err("expected an action", e)


def resolve_action_ref(
    ck: Checker, ref: ast.ActionRefSyntax, scope: Scope, in_list: bool
) -> ast.ActionDecl:
    """The action ``ref`` names, with its arguments bound (``ref.call_info``).

    In a table's ``actions`` list (``in_list``) only directional parameters are bound; elsewhere
    (default action, entries) all are, and action data must be constant.
    """
    name_e = ref.name
    if not isinstance(name_e, ast.Name):
        raise UnsupportedError("qualified action names are not supported", name_e.span)
    sym = ck.root.lookup(name_e.name) if name_e.top_level else scope.lookup(name_e.name)
    label = name_e.name
    if sym is None:
        raise err(f"unknown action '{label}'{scope.suggest(label)}", name_e)
    if sym.kind != "action":
        raise err(f"'{label}' is not an action", name_e)
    decl: ast.ActionDecl = sym.decl
    name_e.ref = sym
    name_e.type = sym.type
    ref.ref = sym
    params = decl.params
    if in_list:
        # only directional parameters may (must) be bound in the actions list
        dir_params = [p for p in params if p.direction]
        if ref.args and len(ref.args) != len(dir_params):
            raise err(
                f"action '{label}' takes {len(dir_params)} directional argument(s) "
                f"here, got {len(ref.args)}",
                ref,
            )
        if not ref.args and dir_params:
            raise err(
                f"action '{label}' needs its directional argument(s) in the actions list", ref
            )
        bind_params = dir_params
    else:
        bind_params = params
        if (ref.args or params) and len(ref.args) != len(params):
            raise err(f"action '{label}' takes {len(params)} argument(s), got {len(ref.args)}", ref)
    info = bind_args(ck, decl, bind_params, ref.args, scope, ref, {}, [])
    info.kind = T.CallKind.ACTION
    if not in_list:
        for p, a in zip(bind_params, ref.args):
            if p.direction == "" and a.value is not None and constfold.fold(a.value) is None:
                raise err(f"action data argument '{p.name}' must be a compile-time constant", a)
    ref.call_info = info
    return decl
