"""Elaboration: from the checked program to its instance tree and control-plane schema.

Starting at ``main`` (a ``V1Switch(...)`` instantiation), every parser and control instance gets a
fully qualified path the way p4c names things in P4Info (``MyIngress``, ``MyIngress.c1``); its
tables and extern instances get fully qualified names (``MyIngress.ipv4_lpm``), honouring
``@name`` annotations. The result feeds both the code generator and :mod:`switch.schema`: the schema is complete when
elaboration returns (digests included, see :mod:`switch.compile.digests`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from switch import schema as M
from switch.compile.digests import find_digests
from switch.compile.widths import target_width
from switch.errors import TypeError_, UnsupportedError
from switch.lang import ast, constfold
from switch.lang import types as T
from switch.lang.symbols import Sym
from switch.lang.typecheck import CheckedProgram

V1SWITCH_BLOCKS = ("parser", "verify_checksum", "ingress", "egress", "compute_checksum", "deparser")


def _annotations(anns: list[ast.Annotation]) -> tuple[M.Annotation, ...]:
    return tuple(M.Annotation(a.name, tuple(t.text for t in a.tokens)) for a in anns)


def local_name(decl: Any, default: str) -> tuple[str, bool]:
    """The name from @name if present (and whether it is absolute), else ``default``."""
    ann = ast.find_annotation(getattr(decl, "annotations", []), "name")
    if ann is not None:
        s = ann.string_arg()
        if s:
            if s.startswith("."):
                return s[1:], True
            return s, False
    return default, False


def qualify(prefix: str, decl: Any, default: str) -> str:
    name, absolute = local_name(decl, default)
    if absolute or not prefix:
        return name
    return f"{prefix}.{name}"


@dataclass(eq=False)
class ExternInst:
    fqname: str
    type: T.ExternT
    args: list[Any]  # constant values of the constructor arguments (None if not constant)
    decl: Any
    py: str  # Python global name of the runtime object


@dataclass(eq=False)
class TableInst:
    decl: ast.TableDecl
    fqname: str
    spec: M.TableSpec | None
    py: str
    action_fq: dict[int, str] = field(default_factory=dict)  # id(action decl) -> fq name


@dataclass(eq=False)
class BlockInst:
    decl: ast.ParserDecl | ast.ControlDecl
    path: str
    py: str
    externs: dict[int, ExternInst] = field(default_factory=dict)  # keyed by id(decl node)
    tables: dict[int, TableInst] = field(default_factory=dict)
    children: dict[int, BlockInst] = field(default_factory=dict)  # keyed by id(instantiation)
    ctor_values: list[tuple[Any, Any]] = field(default_factory=list)  # (param, constant value)


@dataclass
class Elaborated:
    checked: CheckedProgram
    blocks: dict[str, BlockInst]  # V1Switch role -> instance
    all_blocks: list[BlockInst]
    schema: M.ProgramSchema
    global_externs: dict[int, ExternInst]
    action_names: dict[tuple[int, str], str]  # (id(action decl), instance path) -> fq name
    value_sets: dict[int, str]  # id(value set decl) -> fq name
    digest_names: dict[tuple[str, int], str]  # (instance py or '', id(digest call)) -> name


def _annotated_priority(e: ast.EntrySyntax) -> int | None:
    a = ast.find_annotation(e.annotations, "priority")
    return a.int_arg() if a is not None else None


def entry_priorities(
    given: list[int | None],
    annotated: list[int | None],
    largest_wins: bool = True,
    delta: int = 1,
) -> list[int]:
    """The P4Runtime priorities (the largest wins) of a table's ``entries`` list, in order.

    ``given``: the ``priority=N:`` values (P4-16 "Entry priorities": entries without one count
    on from the previous entry by ``delta``; all absent, the first entry wins). ``annotated``:
    p4c's ``@priority(N)`` (BMv2: N, else the 1-based position, and the smallest wins), used
    when no entry gives ``priority=``. Priorities of a smallest-wins table are mirrored into
    1.. so that the same entry wins.
    """
    n = len(given)
    prio: list[int]
    if any(g is not None for g in given):
        first = given[0]
        assert first is not None, "the type checker requires a priority on the first entry"
        prio = [first]
        for g in given[1:]:
            prio.append(g if g is not None else prio[-1] + (-delta if largest_wins else delta))
    elif any(a is not None for a in annotated):
        prio = [a if a is not None else i + 1 for i, a in enumerate(annotated)]
        largest_wins = False
    else:
        prio = [1 + (n - 1 - i) * delta if largest_wins else 1 + i * delta for i in range(n)]
    if largest_wins:
        low = min(prio, default=1)
        return [p - low + 1 if low < 1 else p for p in prio]
    top = max(prio, default=0)
    return [top + 1 - p for p in prio]


def _py_ident(path: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in path)


class Elaborator:
    def __init__(self, checked: CheckedProgram) -> None:
        self.checked = checked
        self.schema = M.ProgramSchema()
        self.all_blocks: list[BlockInst] = []
        self.global_externs: dict[int, ExternInst] = {}
        self.action_names: dict[tuple[int, str], str] = {}
        self.action_specs: dict[str, M.ActionSpec] = {}
        self.profile_tables: dict[str, list[str]] = {}
        self.profile_specs: dict[str, M.ActionProfileSpec] = {}
        self.value_sets: dict[int, str] = {}
        self.used_py: set[str] = set()

    def unique_py(self, base: str) -> str:
        py = _py_ident(base)
        n = 1
        cand = py
        while cand in self.used_py:
            n += 1
            cand = f"{py}_{n}"
        self.used_py.add(cand)
        return cand

    def run(self) -> Elaborated:
        main = self.checked.main
        if main is None:
            raise TypeError_(
                "the program has no 'main' instantiation (e.g. 'V1Switch(...) main;')", None
            )
        mt = main.inst_type
        if not (isinstance(mt, T.BlockT) and mt.kind == "package" and mt.decl.name == "V1Switch"):
            name = mt.decl.name if isinstance(mt, T.BlockT) else str(mt)
            raise UnsupportedError(
                f"package '{name}' is not supported: this target runs only the "
                "v1model architecture ('main' must be a V1Switch)",
                main.span,
            )
        for d in self.checked.program.decls:
            if isinstance(d, ast.Instantiation) and isinstance(d.inst_type, T.ExternT):
                self.global_externs[id(d)] = self.make_extern(d, "", d.inst_type)
        info = main.ctor
        if len(info.args) != 6:
            raise TypeError_("V1Switch takes six blocks", main.span)
        blocks: dict[str, BlockInst] = {}
        for role, arg in zip(V1SWITCH_BLOCKS, info.args):
            decl = self.block_decl_of(arg)
            path, _ = local_name(decl, decl.name)
            blocks[role] = self.elaborate_block(decl, path)
        self.schema.controller_headers = self.controller_headers()
        self.schema.action_profiles = list(self.profile_specs.values())
        digests = find_digests(self.all_blocks)
        self.schema.digests = [
            M.DigestSpec(name, _struct_fields(t)) for name, t in digests.types.items()
        ]
        return Elaborated(
            self.checked,
            blocks,
            self.all_blocks,
            self.schema,
            self.global_externs,
            self.action_names,
            self.value_sets,
            digests.names,
        )

    def block_decl_of(self, arg: Any) -> Any:
        if isinstance(arg, ast.Call) and isinstance(arg.type, T.BlockT):
            if arg.args:
                raise UnsupportedError(
                    "constructor arguments of top-level blocks are not supported", arg.span
                )
            return arg.type.decl
        if (
            isinstance(arg, ast.Name)
            and isinstance(arg.ref, Sym)
            and isinstance(arg.type, T.BlockT)
        ):
            return arg.type.decl
        raise UnsupportedError("V1Switch arguments must be parser/control instantiations", arg.span)

    # -- blocks ------------------------------------------------------------------------

    def block_arg(self, a: Any, inst: BlockInst) -> BlockInst:
        """The block instance passed as a constructor argument (`C2(c1) c2;`)."""
        sym = a.ref if isinstance(a, ast.Name) else None
        if isinstance(sym, Sym) and id(sym.decl) in inst.children:
            return inst.children[id(sym.decl)]
        raise UnsupportedError(
            "a parser/control constructor argument must name an instance "
            "declared in the enclosing block",
            getattr(a, "span", None),
        )

    def elaborate_block(
        self,
        decl: Any,
        path: str,
        ctor_values: list[tuple[Any, Any]] | None = None,
        block_args: dict[int, BlockInst] | None = None,
    ) -> BlockInst:
        inst = BlockInst(decl, path, self.unique_py(path), ctor_values=ctor_values or [])
        # block-typed constructor parameters resolve to instances of the enclosing block
        inst.children.update(block_args or {})
        self.all_blocks.append(inst)
        for loc in decl.locals:
            if isinstance(loc, ast.Instantiation):
                t = loc.inst_type
                if isinstance(t, T.ExternT):
                    inst.externs[id(loc)] = self.make_extern(loc, path, t)
                elif isinstance(t, T.BlockT):
                    child_path = qualify(path, loc, loc.name)
                    info = loc.ctor
                    values = []
                    blocks: dict[int, BlockInst] = {}
                    for p, a in zip(t.decl.ctor_params, info.args):
                        if isinstance(p.sym.type, T.BlockT):
                            blocks[id(p)] = self.block_arg(a, inst)
                            continue
                        v = self.const_of(a) if a is not None else self.const_of(p.default)
                        if v is None:
                            raise UnsupportedError(
                                "constructor arguments must be compile-time constants", loc.span
                            )
                        values.append((p, v))
                    inst.children[id(loc)] = self.elaborate_block(
                        t.decl, child_path, values, blocks
                    )
            elif isinstance(loc, ast.ValueSetDecl):
                fq = qualify(path, loc, loc.name)
                assert loc.elem_type is not None
                fields = _struct_fields(loc.elem_type)
                self.schema.value_sets.append(
                    M.ValueSetSpec(fq, loc.size_value, fields, _annotations(loc.annotations))
                )
                self.value_sets[id(loc)] = fq
        if isinstance(decl, ast.ControlDecl):
            for loc in decl.locals:
                if isinstance(loc, ast.TableDecl):
                    fq = qualify(path, loc, loc.name)
                    ti = TableInst(loc, fq, None, self.unique_py(fq))
                    inst.tables[id(loc)] = ti
                    ti.spec = self.table_spec(loc, fq, inst, ti)
                    self.schema.tables.append(ti.spec)
            self.list_control_actions(decl, inst)
        return inst

    def list_control_actions(self, decl: ast.ControlDecl, inst: BlockInst) -> None:
        """Add the actions a control uses to the schema in p4c's P4Info order: the top-level
        actions it uses (NoAction...) first, then its own in declaration order; an action
        counts as used when a table lists it or the apply block calls it (p4c's front-end removes
        the others, inlines calls between actions and localizes the top-level ones)."""
        used: dict[int, ast.ActionDecl] = {}
        for ti in inst.tables.values():
            for adecl in ti.decl.action_decls:
                used[id(adecl)] = adecl
        for node in _walk([decl.body]):
            info = node.ref if isinstance(node, ast.Call) else None
            if info is not None and info.kind is T.CallKind.ACTION and info.decl is not None:
                used[id(info.decl)] = info.decl
        own = [loc for loc in decl.locals if isinstance(loc, ast.ActionDecl)]
        own_ids = {id(a) for a in own}
        names: list[str] = []
        if any(
            r.name == "NoAction"
            for t in inst.tables.values()
            if t.spec is not None
            for r in t.spec.actions
        ):
            names.append("NoAction")
        for a in used.values():
            if id(a) not in own_ids:
                names.append(self.action_fqname(a, inst))
        for a in own:
            if id(a) in used:
                names.append(self.action_fqname(a, inst))
        listed = {s.name for s in self.schema.actions}
        for name in names:
            if name not in listed:
                listed.add(name)
                self.schema.actions.append(self.action_specs[name])

    def make_extern(self, d: ast.Instantiation, prefix: str, t: T.ExternT) -> ExternInst:
        fq = qualify(prefix, d, d.name)
        args = [self.const_of(a) for a in d.ctor.args]
        ext = ExternInst(fq, t, args, d, self.unique_py("X_" + fq))
        self.register_extern_spec(ext, d.annotations)
        return ext

    def const_of(self, e: ast.Expr | None) -> Any:
        """The constant value of ``e``, None if it is absent or not constant."""
        return constfold.fold(e) if e is not None else None

    def enum_member(self, value: Any, e_type: str) -> str:
        t = self.checked.types.get(e_type)
        if isinstance(t, T.EnumT):
            for k, v in t.values.items():
                if v == value:
                    return k
        raise TypeError_(f"bad {e_type} value", None)

    def register_extern_spec(self, ext: ExternInst, anns: list[ast.Annotation]) -> None:
        """The schema entry of an extern instance the control plane sees (if it has one)."""
        rule = EXTERN_SPECS.get(ext.type.decl.name)
        if rule is not None:
            rule(self, ext, _annotations(anns))

    def _counter_spec(self, ext: ExternInst, a: tuple[M.Annotation, ...]) -> None:
        unit = M.CounterUnit(self.enum_member(ext.args[1], "CounterType"))
        self.schema.counters.append(M.CounterSpec(ext.fqname, int(ext.args[0]), unit, a))

    def _meter_spec(self, ext: ExternInst, a: tuple[M.Annotation, ...]) -> None:
        unit = M.MeterUnit(self.enum_member(ext.args[1], "MeterType"))
        self.schema.meters.append(M.MeterSpec(ext.fqname, int(ext.args[0]), unit, a))

    def _register_spec(self, ext: ExternInst, a: tuple[M.Annotation, ...]) -> None:
        et = ext.type.type_args.get("T")
        if et is None:
            raise TypeError_("register needs an element type", ext.decl.span)
        if isinstance(et, T.VarbitT) or (
            isinstance(et, T.StructLikeT)
            and any(isinstance(f, T.VarbitT) for f in et.fields.values())
        ):
            raise UnsupportedError(
                f"register of {et}: registers of varbit values are not supported by this "
                "target (their cells have a fixed width)",
                ext.decl.span,
            )
        width = target_width(et)
        self.schema.registers.append(
            M.RegisterSpec(ext.fqname, int(ext.args[0]), width, isinstance(et, T.IntT), a)
        )

    def _profile_spec(self, ext: ExternInst, a: tuple[M.Annotation, ...]) -> None:
        spec = M.ActionProfileSpec(ext.fqname, int(ext.args[0]), (), False, annotations=a)
        self.profile_specs[ext.fqname] = spec  # its tables are added with them

    def _selector_spec(self, ext: ExternInst, a: tuple[M.Annotation, ...]) -> None:
        algo = self.enum_member(ext.args[0], "HashAlgorithm")
        spec = M.ActionProfileSpec(
            ext.fqname, int(ext.args[1]), (), True, algo, int(ext.args[2]), a
        )
        self.profile_specs[ext.fqname] = spec

    # -- tables --------------------------------------------------------------------------

    def action_fqname(self, decl: ast.ActionDecl, inst: BlockInst) -> str:
        owner_is_block = any(loc is decl for loc in inst.decl.locals)
        prefix = inst.path if owner_is_block else ""
        fq = qualify(prefix, decl, decl.name)
        self.action_names[(id(decl), inst.path if owner_is_block else "")] = fq
        if fq not in self.action_specs:
            params: list[M.ParamSpec] = []
            i = 0
            for p in decl.params:
                if p.direction:
                    continue
                i += 1
                pt = p.sym.type
                assert pt is not None
                params.append(M.ParamSpec(i, p.name, T.width_of(pt), _annotations(p.annotations)))
            spec = M.ActionSpec(fq, tuple(params), _annotations(decl.annotations))
            self.action_specs[fq] = spec
        return fq

    def table_spec(self, d: ast.TableDecl, fq: str, inst: BlockInst, ti: TableInst) -> M.TableSpec:
        keys: list[M.KeySpec] = []
        kp = d.prop("key")
        for i, k in enumerate(kp.keys if kp is not None and kp.keys else []):
            name = ast.find_annotation(k.annotations, "name")
            kname = name.string_arg() if name is not None else None
            kt = k.expr.checked_type
            width = target_width(kt) if kt is not T.ERROR else 32
            try:
                kind = M.MatchKind(k.match_kind)
            except ValueError:
                raise UnsupportedError(
                    f"match kind '{k.match_kind}' is not supported by this target", k.span
                ) from None
            keys.append(
                M.KeySpec(
                    i + 1, kname or key_text(k.expr), width, kind, _annotations(k.annotations)
                )
            )
        ap = d.prop("actions")
        assert ap is not None and ap.actions is not None
        refs: list[M.ActionRef] = []
        action_fq: dict[int, str] = {}
        for ref, adecl in zip(ap.actions, d.action_decls):
            afq = self.action_fqname(adecl, inst)
            action_fq[id(adecl)] = afq
            scope = M.ActionScope.TABLE_AND_DEFAULT
            anns = [a.name for a in ref.annotations]
            if "defaultonly" in anns:
                scope = M.ActionScope.DEFAULT_ONLY
            elif "tableonly" in anns:
                scope = M.ActionScope.TABLE_ONLY
            refs.append(M.ActionRef(afq, scope, _annotations(ref.annotations)))
        ti.action_fq = action_fq
        dp = d.prop("default_action")
        if dp is not None:
            assert dp.action_ref is not None
            default = self.action_call(dp.action_ref, action_fq)
            const_default = dp.is_const
        else:
            default = M.ActionCall("NoAction")
            const_default = False
            if "NoAction" not in self.action_specs:
                self.action_specs["NoAction"] = M.ActionSpec(
                    "NoAction", (), (M.Annotation("noWarn", ('"unused"',)),)
                )
            if "NoAction" not in action_fq.values():
                # p4c's front-end: a table without a default action lists @defaultonly NoAction
                refs.append(
                    M.ActionRef(
                        "NoAction", M.ActionScope.DEFAULT_ONLY, (M.Annotation("defaultonly"),)
                    )
                )
        size = 1024
        sp = d.prop("size")
        if sp is not None and sp.value is not None:
            size = int(self.const_of(sp.value))
        entries: list[M.ConstEntry] = []
        ep = d.prop("entries")
        # `const entries`: the entry set is immutable; `entries` (P4-16 1.2.4): initial entries
        # the control plane may change, except those marked `const`
        is_const = ep is not None and ep.is_const
        if ep is not None and ep.entries is not None:
            entries = self.const_entries(d, ep.entries, keys, action_fq, ep.is_const)
        impl = None
        ip = d.prop("implementation")
        if ip is not None and ip.value is not None:
            impl = self.profile_of(ip.value, inst, fq)
            self.profile_tables.setdefault(impl, []).append(fq)
            old = self.profile_specs[impl]
            self.profile_specs[impl] = M.ActionProfileSpec(
                old.name,
                old.size,
                tuple(self.profile_tables[impl]),
                old.with_selector,
                old.algorithm,
                old.output_width,
                old.annotations,
            )
        dcounter = dmeter = None
        cp = d.prop("counters")
        if cp is not None and cp.value is not None:
            ext = self.extern_of(cp.value, inst)
            if ext.type.decl.name != "direct_counter":
                raise TypeError_("'counters' must name a direct_counter", cp.value.span)
            dcounter = ext.fqname
            unit = M.CounterUnit(self.enum_member(ext.args[0], "CounterType"))
            self.schema.direct_counters.append(
                M.DirectCounterSpec(ext.fqname, unit, fq, _annotations(ext.decl.annotations))
            )
        mp = d.prop("meters")
        if mp is not None and mp.value is not None:
            ext = self.extern_of(mp.value, inst)
            if ext.type.decl.name != "direct_meter":
                raise TypeError_("'meters' must name a direct_meter", mp.value.span)
            dmeter = ext.fqname
            unit_m = M.MeterUnit(self.enum_member(ext.args[0], "MeterType"))
            self.schema.direct_meters.append(
                M.DirectMeterSpec(ext.fqname, unit_m, fq, _annotations(ext.decl.annotations))
            )
        st = d.prop("support_timeout")
        timeout = (
            bool(self.const_of(st.value)) if st is not None and st.value is not None else False
        )
        return M.TableSpec(
            fq,
            tuple(keys),
            tuple(refs),
            default,
            const_default,
            size,
            is_const,
            tuple(entries),
            impl,
            dcounter,
            dmeter,
            timeout,
            _annotations(d.annotations),
        )

    def action_call(self, ref: ast.ActionRefSyntax, action_fq: dict[int, str]) -> M.ActionCall:
        assert ref.ref is not None and ref.call_info is not None
        adecl = ref.ref.decl
        info = ref.call_info
        args = []
        for p, a in zip(info.params, info.args):
            if p.direction:
                continue
            v = self.const_of(a)
            if isinstance(v, bool):
                v = int(v)
            pt = p.sym.type
            if isinstance(pt, T.IntT) and v is not None and v < 0:
                v &= (1 << pt.width) - 1
            args.append(v)
        return M.ActionCall(action_fq[id(adecl)], tuple(args))

    def const_entries(
        self,
        d: ast.TableDecl,
        entries: list[ast.EntrySyntax],
        keys: list[M.KeySpec],
        action_fq: dict[int, str],
        all_const: bool,
    ) -> list[M.ConstEntry]:
        needs_prio = any(
            k.kind in (M.MatchKind.TERNARY, M.MatchKind.RANGE, M.MatchKind.OPTIONAL) for k in keys
        )
        prios = entry_priorities(
            [self.const_of(e.priority) if e.priority is not None else None for e in entries],
            [_annotated_priority(e) for e in entries],
            self._table_const(d, "largest_priority_wins", True),
            self._table_const(d, "priority_delta", 1),
        )
        out: list[M.ConstEntry] = []
        for e, prio in zip(entries, prios):
            match = tuple(self.keyset_value(ks, k) for ks, k in zip(e.keyset, keys))
            action = self.action_call(e.action, action_fq)
            is_const = all_const or e.is_const
            out.append(M.ConstEntry(match, action, prio if needs_prio else 0, is_const))
        return out

    def _table_const(self, d: ast.TableDecl, name: str, default: Any) -> Any:
        p = d.prop(name)
        return default if p is None or p.value is None else self.const_of(p.value)

    def keyset_value(self, ks: ast.Expr, key: M.KeySpec) -> Any:
        full = (1 << key.width) - 1
        if isinstance(ks, (ast.DontCare, ast.Default)):
            if key.kind is M.MatchKind.EXACT:
                raise TypeError_(
                    f"'_' (don't care) is not allowed for the exact key '{key.name}'", ks.span
                )
            return {
                M.MatchKind.EXACT: None,
                M.MatchKind.LPM: (0, 0),
                M.MatchKind.TERNARY: (0, 0),
                M.MatchKind.RANGE: (0, full),
                M.MatchKind.OPTIONAL: None,
            }[key.kind]
        if isinstance(ks, ast.Mask):
            v = _u(self.const_of(ks.value), key.width)
            m = _u(self.const_of(ks.mask), key.width)
            if key.kind is M.MatchKind.LPM:
                plen = bin(m).count("1")
                return (v & m, plen)
            if key.kind is not M.MatchKind.TERNARY:
                raise TypeError_("a mask is only allowed for ternary and lpm keys", ks.span)
            return (v & m, m)
        if isinstance(ks, ast.Range):
            if key.kind is not M.MatchKind.RANGE:
                raise TypeError_("a range is only allowed for range keys", ks.span)
            return (_u(self.const_of(ks.lo), key.width), _u(self.const_of(ks.hi), key.width))
        v = _u(self.const_of(ks), key.width)
        if key.kind is M.MatchKind.LPM:
            return (v, key.width)
        if key.kind is M.MatchKind.TERNARY:
            return (v, full)
        if key.kind is M.MatchKind.RANGE:
            return (v, v)
        return v

    def extern_of(self, e: ast.Expr, inst: BlockInst) -> ExternInst:
        if isinstance(e, ast.Name) and isinstance(e.ref, Sym) and e.ref.kind == "instance":
            decl = e.ref.decl
            if id(decl) in inst.externs:
                return inst.externs[id(decl)]
            if id(decl) in self.global_externs:
                return self.global_externs[id(decl)]
        if isinstance(e, ast.Call) and isinstance(e.type, T.ExternT):
            # anonymous instantiation in a table property
            key = id(e)
            if key not in inst.externs:
                fake = ast.Instantiation(
                    f"{e.type.decl.name}", ast.NamedTypeRef(e.type.decl.name), e.args, span=e.span
                )
                fake.ref = e.ref
                inst.externs[key] = self.make_extern(fake, inst.path, e.type)
            return inst.externs[key]
        raise TypeError_("expected an extern instance", e.span)

    def profile_of(self, e: ast.Expr, inst: BlockInst, table_fq: str) -> str:
        if isinstance(e, ast.Call) and isinstance(e.type, T.ExternT):
            key = id(e)
            if key not in inst.externs:
                # p4c names an anonymous implementation after the table's property
                fake = ast.Instantiation(
                    table_fq.split(".")[-1] + "_" + e.type.decl.name,
                    ast.NamedTypeRef(e.type.decl.name),
                    e.args,
                    span=e.span,
                )
                fake.ref = e.ref
                inst.externs[key] = self.make_extern(fake, inst.path, e.type)
        ext = self.extern_of(e, inst)
        if ext.type.decl.name not in ("action_profile", "action_selector"):
            raise TypeError_(
                "'implementation' must be an action_profile or action_selector", e.span
            )
        return ext.fqname

    def controller_headers(self) -> list[M.ControllerHeaderSpec]:
        out = []
        for t in self.checked.types.values():
            if isinstance(t, T.StructLikeT) and t.kind == "header":
                ann = ast.find_annotation(t.annotations, "controller_header")
                if ann is not None:
                    out.append(
                        M.ControllerHeaderSpec(
                            ann.string_arg() or "",
                            t.name,
                            _struct_fields(t),
                            _annotations(t.annotations),
                        )
                    )
        return out


def _u(v: Any, width: int) -> int:
    if isinstance(v, bool):
        return int(v)
    return int(v) & ((1 << width) - 1)


def _struct_fields(t: T.Type) -> tuple[M.StructField, ...]:
    if isinstance(t, T.StructLikeT):
        out: list[M.StructField] = []
        for n, ft in t.fields.items():
            if isinstance(ft, T.StructLikeT):
                out.extend(
                    M.StructField(f"{n}.{f.name}", f.width, f.signed) for f in _struct_fields(ft)
                )
            else:
                out.append(M.StructField(n, target_width(ft), isinstance(ft, T.IntT)))
        return tuple(out)
    if isinstance(t, T.TupleT):
        return tuple(
            M.StructField(f"f{i}", target_width(e), isinstance(e, T.IntT))
            for i, e in enumerate(t.elems)
        )
    return (M.StructField("value", target_width(t), isinstance(t, T.IntT)),)


def key_text(e: ast.Expr) -> str:
    """The name p4c gives a key: the expression as written (``hdr.ipv4.dstAddr``)."""
    rule = KEY_TEXT.get(type(e))
    return rule(e) if rule is not None else type(e).__name__


def _call_text(e: ast.Call) -> str:
    if isinstance(e.func, ast.Member) and e.func.name == "isValid":
        return f"{key_text(e.func.expr)}.$valid$"
    return f"{key_text(e.func)}()"


KEY_TEXT: dict[type[ast.Expr], Callable[[Any], str]] = {
    ast.Name: lambda e: e.name,
    ast.Member: lambda e: f"{key_text(e.expr)}.{e.name}",
    ast.Index: lambda e: f"{key_text(e.expr)}[{key_text(e.index)}]",
    ast.Slice: lambda e: f"{key_text(e.expr)}[{key_text(e.hi)}:{key_text(e.lo)}]",
    ast.IntLit: lambda e: str(e.value),
    ast.Call: _call_text,
    ast.Binary: lambda e: f"{key_text(e.left)} {e.op} {key_text(e.right)}",
    ast.Cast: lambda e: key_text(e.expr),
}
"""How a key expression is written, by node type (other expressions: their node type)."""


EXTERN_SPECS: dict[str, Callable[[Elaborator, ExternInst, tuple[M.Annotation, ...]], None]] = {
    "counter": Elaborator._counter_spec,
    "meter": Elaborator._meter_spec,
    "register": Elaborator._register_spec,
    "action_profile": Elaborator._profile_spec,
    "action_selector": Elaborator._selector_spec,
    # direct_counter / direct_meter specs are made with their table; other externs have none
}
"""v1model externs the control plane sees, by extern type: how their schema entry is made."""


def elaborate(checked: CheckedProgram) -> Elaborated:
    return Elaborator(checked).run()


def _walk(nodes: list[Any]) -> Any:
    """Every syntax node in and below ``nodes``."""
    todo = list(nodes)
    while todo:
        n = todo.pop()
        yield n
        todo.extend(ast.children(n))
