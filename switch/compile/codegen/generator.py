"""The code generator: its state, the dispatch through the rule tables, and the whole module.

:class:`CodeGen` holds what the generation of one program shares (the generated classes and
functions, the runtime objects the module binds, the function being emitted) and looks nodes up
in the rule tables of the other modules of this package:

=============  ===============================================================
``g_expr``     :data:`~switch.compile.codegen.expressions.EXPRESSIONS`
``g_stmt``     :data:`~switch.compile.codegen.statements.STATEMENTS`
``g_place``    :data:`~switch.compile.codegen.places.PLACES` (l-values, evaluated once)
``g_call``     :data:`~switch.compile.codegen.calls.CALLS` (by call kind); extern functions and
               methods through the :class:`ExternEmitters` the compile driver passes in
=============  ===============================================================

Expressions are generated as code strings; statements an expression needs first (calls with
``out`` arguments, temporaries) collect in ``pre`` and are flushed before the statement. ``memo``
maps an expression node already evaluated (the l-value of a compound assignment) to the code of
its value, so that it is not evaluated a second time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from switch.compile.codegen.blocks import gen_control, gen_parser
from switch.compile.codegen.callables import FnCtx
from switch.compile.codegen.calls import CALLS
from switch.compile.codegen.classes import stack_class, struct_class
from switch.compile.codegen.effects import Effects
from switch.compile.codegen.emitter import Emitter, tuple_code
from switch.compile.codegen.expressions import EXPRESSIONS
from switch.compile.codegen.places import PLACES, Place
from switch.compile.codegen.statements import STATEMENTS
from switch.compile.elaborate import BlockInst, Elaborated, ExternInst, TableInst
from switch.errors import Span, TypeError_, UnsupportedError
from switch.lang import ast, constfold
from switch.lang import types as T
from switch.lang.symbols import CallInfo, Sym

Emit = Callable[["CodeGen", ast.Call, CallInfo, Emitter], "str | None"]
"""An extern's emitter: (generator, call, call info, output) -> the call's value, if any."""


@dataclass(frozen=True)
class ExternEmitters:
    """The architecture's externs: emitters by function name and by (extern, method) name."""

    functions: Mapping[str, Emit]
    methods: Mapping[tuple[str, str], Emit]


class CodeGen:
    """Generates the Python module of one elaborated program."""

    def __init__(self, elab: Elaborated, externs: ExternEmitters) -> None:
        self.elab = elab
        self.externs = externs
        self.errors = elab.checked.errors
        # id(StructLikeT) or ('stack', id(element type), size) -> generated class name
        self.classes: dict[int | tuple[str, int, int], str] = {}
        self.class_defs: list[str] = []
        self.function_defs: list[str] = []
        self.dispatch_defs: list[str] = []
        self.inst: BlockInst | None = None  # the instance whose code is being generated
        self.fn = FnCtx("function")
        self.pre: list[str] = []
        self.memo: dict[int, str] = {}  # id(expression) -> code of its already computed value
        self.saved_places: dict[int, Place] = {}  # id(lvalue) -> its place, saved before a call
        self.effects = Effects()  # what callees may do (exit, names they reach)
        self.tmp_n = 0
        self.bindings: dict[str, tuple[str, str]] = {}  # py global -> (kind, fqname)
        self.generated_actions: set[str] = set()
        self.generated_functions: set[int] = set()
        self.callable_names: dict[int, str] = {}  # id(decl) -> its top-level Python name
        self.old_field_lists: list[tuple[list[str], list[str]]] = []  # (save, load) paths
        self.user_externs: dict[str, str] = {}  # user extern function -> its binding's line
        ing = elab.blocks["ingress"].decl
        # the types H, M of V1Switch<H, M> and standard_metadata_t
        self.hdr_type = _param_type(ing.params[0])
        self.meta_type = _param_type(ing.params[1])
        self.sm_type = _param_type(ing.params[2])

    # -- helpers -----------------------------------------------------------------------------

    def tmp(self, base: str = "t") -> str:
        """A fresh Python name for a temporary."""
        self.tmp_n += 1
        return f"_{base}{self.tmp_n}"

    def callable_name(self, prefix: str, decl: ast.ActionDecl | ast.FunctionDecl) -> str:
        """The Python name of a top-level action or function: numbered in the order the
        generator meets them, so the generated module is the same on every run."""
        name = self.callable_names.get(id(decl))
        if name is None:
            name = f"{prefix}__{decl.name}_{len(self.callable_names)}"
            self.callable_names[id(decl)] = name
        return name

    def user_extern(
        self,
        name: str,
        params: list[tuple[str, str, tuple[str, int]]],
        result: tuple[str, int] | None,
        span: Span | None,
    ) -> str:
        """The Python name of a user-declared extern function: bound, when the module runs, to
        the implementation a loaded module registered (switch/pipeline/extern_modules.py)."""
        py = f"X__{name}"
        if name not in self.user_externs:
            where = (span.file, span.line, span.col, span.text) if span else ("", 0, 0, "")
            self.user_externs[name] = (
                f"{py} = _bind_extern({name!r}, {tuple(params)!r}, {result!r}, {where!r})"
            )
        return py

    def err_code(self, name: str) -> int:
        return self.errors.get(name, 0)

    def class_of(self, t: T.Type | None) -> str:
        """The generated class of a header, struct, union or stack type (generated on demand)."""
        if isinstance(t, T.StackT):
            key = ("stack", id(t.elem), t.size)
            if key not in self.classes:
                self.class_of(t.elem)
                name = f"K_{t.elem.name}_{t.size}"
                self.classes[key] = name
                self.class_defs.append(stack_class(self, name, t))
            return self.classes[key]
        if isinstance(t, T.StructLikeT):
            if id(t) not in self.classes:
                name = f"S_{t.name}"
                self.classes[id(t)] = name
                for ft in t.fields.values():
                    if isinstance(ft, (T.StructLikeT, T.StackT)):
                        self.class_of(ft)
                self.class_defs.append(struct_class(self, name, t))
            return self.classes[id(t)]
        raise TypeError_(f"no class for {t}", None)

    def var_name(self, sym: Sym) -> str:
        """The Python name of a variable or parameter (control-level ones are module globals)."""
        if sym.storage == "global" and isinstance(sym.owner, ast.ControlDecl):
            assert self.inst is not None
            name = f"G_{self.inst.py}__{sym.pyname}"
            self.fn.globals.add(name)
            return name
        return sym.pyname

    def extern_inst(self, sym: Sym) -> ExternInst:
        decl = sym.decl
        if self.inst is not None and id(decl) in self.inst.externs:
            return self.inst.externs[id(decl)]
        if id(decl) in self.elab.global_externs:
            return self.elab.global_externs[id(decl)]
        raise TypeError_(
            f"'{sym.name}' is not an extern instance here", getattr(decl, "span", None)
        )

    def table_inst(self, decl: ast.TableDecl) -> TableInst:
        assert self.inst is not None
        return self.inst.tables[id(decl)]

    def digest_name(self, call: ast.Call) -> str:
        """The name elaboration gave the digest this ``digest()`` call sends."""
        return self.elab.digest_names[(self.inst.py if self.inst else "", id(call))]

    def const_repr(self, v: Any) -> str:
        if isinstance(v, tuple):
            return tuple_code([self.const_repr(x) for x in v])
        return repr(v)

    def const_index(self, e: ast.Expr) -> int | None:
        """The value of a constant integer expression, else None."""
        v = constfold.fold(e)
        return int(v) if v is not None else None

    def flush(self, out: Emitter) -> None:
        """Write the pending statements (``pre``) to ``out``."""
        for p in self.pre:
            out.line(p)
        self.pre = []

    def g_lazy(self, e: ast.Expr) -> tuple[str, list[str]]:
        """Code for an operand that may not be evaluated, and the statements it needs first."""
        saved = self.pre
        self.pre = []
        v = self.g_expr(e)
        lazy, self.pre = self.pre, saved
        return v, lazy

    # -- dispatch ----------------------------------------------------------------------------

    def g_expr(self, e: ast.Expr) -> str:
        """Code for the value of ``e`` (statements it needs first go to ``pre``)."""
        if self.memo:
            done = self.memo.get(id(e))
            if done is not None:
                return done
        rule = EXPRESSIONS.get(type(e))
        if rule is None:
            raise UnsupportedError(f"expression {type(e).__name__} is not supported here", e.span)
        return rule(self, e)

    def g_stmt(self, s: ast.Stmt, out: Emitter) -> None:
        self.pre = []
        rule = STATEMENTS.get(type(s))
        if rule is None:
            raise UnsupportedError(f"statement {type(s).__name__}", s.span)
        rule(self, s, out)

    def g_block(self, stmts: list[ast.Stmt], out: Emitter) -> None:
        """``stmts`` (``pass`` if they generate nothing)."""
        n = len(out.lines)
        for s in stmts:
            self.g_stmt(s, out)
        if len(out.lines) == n:
            out.line("pass")

    def g_place(self, lhs: ast.Expr) -> Place:
        """The l-value ``lhs``, evaluated once (its binding statements go to ``pre``)."""
        rule = PLACES.get(type(lhs))
        if rule is None:
            raise UnsupportedError(f"cannot assign to {type(lhs).__name__}", lhs.span)
        return rule(self, lhs)

    def g_assign(self, lhs: ast.Expr, value: str, out: Emitter) -> None:
        """Store the code ``value`` into the lvalue ``lhs`` (evaluated now, into ``out``, unless
        its l-value was saved before the call that stores into it)."""
        done = self.saved_places.get(id(lhs))
        if done is not None:
            done.write(value, out)
            return
        saved = self.pre
        self.pre = []
        place = self.g_place(lhs)
        for line in self.pre:
            out.line(line)
        self.pre = saved
        place.write(value, out)

    def g_call(self, e: ast.Call, want_value: bool, out: Emitter | None = None) -> str | None:
        """A call; returns its value's code if it has one. Without ``out`` (an expression), its
        statements go to ``pre``."""
        info = e.ref
        assert info is not None and info.kind is not None
        rule = CALLS[info.kind]
        if out is None:
            out = Emitter()
            res = rule(self, e, info, out, want_value)
            self.pre.extend(out.lines)
            return res
        return rule(self, e, info, out, want_value)

    # -- the module --------------------------------------------------------------------------

    def generate(self) -> str:
        """The Python module of the program."""
        blocks = self.elab.blocks
        for inst in self.elab.all_blocks:
            for ext in inst.externs.values():
                self.bindings[ext.py] = ("extern", ext.fqname)
        for ext in self.elab.global_externs.values():
            self.bindings[ext.py] = ("extern", ext.fqname)
        for inst in self.elab.all_blocks:
            if isinstance(inst.decl, ast.ParserDecl):
                gen_parser(self, inst)
            else:
                gen_control(self, inst)
        self.class_of(self.hdr_type)
        self.class_of(self.meta_type)
        self.class_of(self.sm_type)
        fl = self._field_lists()
        out: list[str] = [
            "# generated by tailfabric's P4 compiler; do not edit",
            "_from_bytes = int.from_bytes",
            "def _noop(*_args):\n    pass\n",
        ]
        out.extend(self.user_externs.values())
        out.extend(self.class_defs)
        out.extend(self.function_defs)
        out.extend(self.dispatch_defs)
        out.append(fl)
        names = {role: ("P_" if role == "parser" else "C_") + b.py for role, b in blocks.items()}
        # a control whose apply block is empty has no effect: the architecture skips the call
        for role, b in blocks.items():
            if isinstance(b.decl, ast.ControlDecl) and not b.decl.body.stmts and role != "deparser":
                names[role] = "None"
        out.append("ENTRY = {" + ", ".join(f"{r!r}: {n}" for r, n in names.items()) + "}")
        out.append(f"NEW_HEADERS = {self.class_of(self.hdr_type)}")
        out.append(f"NEW_META = {self.class_of(self.meta_type)}")
        out.append(f"NEW_SM = {self.class_of(self.sm_type)}")
        return "\n".join(out) + "\n"

    def _field_lists(self) -> str:
        """Save/restore functions for @field_list(N) metadata (resubmit, recirculate, clone)."""
        lists: dict[int, list[str]] = {}

        def walk(t: T.StructLikeT, path: str) -> None:
            for n, ft in t.fields.items():
                if isinstance(ft, T.StructLikeT) and ft.kind == "struct":
                    walk(ft, f"{path}.f_{n}")
                    continue
                for a in t.field_annotations.get(n, []):
                    if a.name == "field_list":
                        for tok in a.tokens:
                            if tok.kind.name == "INT":
                                lists.setdefault(tok.int_literal()[0], []).append(f"{path}.f_{n}")

        if isinstance(self.meta_type, T.StructLikeT):
            walk(self.meta_type, "m")
        lines = []
        for idx, paths in sorted(lists.items()):
            lines.extend(_save_load(f"FL_SAVE_{idx}", f"FL_LOAD_{idx}", "m", paths, paths))
        for idx, (save, load) in enumerate(self.old_field_lists):
            lines.extend(_save_load(f"FL_SAVE_OLD{idx}", f"FL_LOAD_OLD{idx}", "m, sm", save, load))
        ids = sorted(lists)
        lines.append(
            "FIELD_LISTS = {" + ", ".join(f"{i}: (FL_SAVE_{i}, FL_LOAD_{i})" for i in ids) + "}"
        )
        lines.append(
            "OLD_FIELD_LISTS = ["
            + ", ".join(
                f"(FL_SAVE_OLD{i}, FL_LOAD_OLD{i})" for i in range(len(self.old_field_lists))
            )
            + "]"
        )
        return "\n".join(lines) + "\n"


def _save_load(
    save_fn: str, load_fn: str, params: str, save: list[str], load: list[str]
) -> list[str]:
    """A field list's save function (returns the values) and load function (writes them)."""
    lines = [f"def {save_fn}({params}):", "    return " + tuple_code(save)]
    lines.append(f"def {load_fn}({params}, v):")
    lines.extend(f"    {p} = v[{i}]" for i, p in enumerate(load))
    if not load:
        lines.append("    pass")
    return lines


def _param_type(p: ast.Param) -> T.Type:
    t = p.sym.type
    assert t is not None
    return t
