"""The digests a program sends: every ``digest<T>(receiver, data)`` call its code will run.

P4Info lists one digest per digested type: a struct's digest is named after the struct, any
other data gets ``digest_<n>``. Elaboration finds them (so that the schema is complete before
code generation) by walking the code the generator will emit, in the generator's order: the
blocks in elaboration order; in each, its variables, body (parser states) and tables; an action
or function when it is first called, in the instance it is generated for. The code generator
looks the name of each call up in :attr:`Digests.names`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from switch.errors import UnsupportedError
from switch.lang import ast
from switch.lang import types as T
from switch.lang.symbols import CallInfo
from switch.lang.types import CallKind

if TYPE_CHECKING:
    from switch.compile.elaborate import BlockInst


@dataclass
class Digests:
    """The digests of a program, in the order P4Info lists them."""

    types: dict[str, T.Type] = field(default_factory=dict)  # name -> digested type
    names: dict[tuple[str, int], str] = field(default_factory=dict)
    """(Python name of the instance whose code makes the call, or '', id(call)) -> name."""


def find_digests(blocks: Iterable[BlockInst]) -> Digests:
    """The digests sent by the code of ``blocks`` (all the program's instances, in order)."""
    finder = _DigestFinder()
    for inst in blocks:
        finder.block(inst)
    return finder.digests


class _DigestFinder:
    def __init__(self) -> None:
        self.digests = Digests()
        self.inst: BlockInst | None = None  # the instance whose code is being walked
        self.generated: set[tuple[str, int]] = set()  # actions and functions already walked

    def block(self, inst: BlockInst) -> None:
        self.inst = inst
        decl = inst.decl
        for loc in decl.locals:
            if isinstance(loc, ast.VarDecl):
                self.node(loc)
        if isinstance(decl, ast.ParserDecl):
            for st in decl.states:
                self.nodes(st.stmts)
                if st.transition is not None:
                    self.nodes(st.transition.select or [])
                    self.nodes([c.keyset for c in st.transition.cases])
        else:
            self.node(decl.body)
            for ti in inst.tables.values():
                self.table(ti.decl)

    def table(self, d: ast.TableDecl) -> None:
        kp = d.prop("key")
        self.nodes([k.expr for k in kp.keys or []] if kp is not None else [])
        ap = d.prop("actions")
        refs = (ap.actions or []) if ap is not None else []
        for ref, adecl in zip(refs, d.action_decls):
            self.callable(adecl, CallKind.ACTION)
            if ref.call_info is not None:
                self.arguments(ref.call_info)

    def nodes(self, nodes: Iterable[ast.Node]) -> None:
        for n in nodes:
            self.node(n)

    def node(self, n: ast.Node) -> None:
        if isinstance(n, ast.ConstDecl):
            return  # folded: no code
        if isinstance(n, ast.Call):
            self.call(n)
        elif isinstance(n, ast.Assign):
            self.node(n.rhs)  # the value is generated before the target
            self.node(n.lhs)
        else:
            self.nodes(ast.children(n))

    def call(self, e: ast.Call) -> None:
        info = e.ref
        if info is None:
            return
        if info.kind in (CallKind.ACTION, CallKind.FUNCTION):
            self.callable(info.decl, info.kind)
            self.arguments(info)
        elif info.kind is CallKind.EXTERN_FUNC and info.name == "digest":
            data = info.args[1]
            if data is not None:  # else the generator reports the missing argument
                t = data.type
                if isinstance(t, T.VarbitT) or (
                    isinstance(t, T.StructLikeT)
                    and any(isinstance(f, T.VarbitT) for f in t.fields.values())
                ):
                    raise UnsupportedError(
                        f"a digest of {t}, which has a varbit field, is not supported by this "
                        "target (digest fields have fixed widths here)",
                        data.span,
                    )
                self.add(e, data.type)
                self.node(data)
        else:
            if isinstance(info.target, ast.Node):
                self.node(info.target)
            self.nodes(a for a in info.args if isinstance(a, ast.Node))

    def arguments(self, info: CallInfo) -> None:
        for p, a in zip(info.params, info.args):
            if a is not None:
                self.node(a)
            elif p.default is not None:
                self.node(p.default)

    def callable(self, decl: ast.ActionDecl | ast.FunctionDecl, kind: CallKind) -> None:
        """An action or function, walked where and when the generator generates it."""
        inst = self.inst
        owner = None
        if kind is CallKind.ACTION and inst is not None:
            owner = inst if any(loc is decl for loc in inst.decl.locals) else None
        key = (owner.py if owner is not None else "", id(decl))
        if key in self.generated:
            return
        self.generated.add(key)
        self.inst = owner
        self.node(decl.body)
        self.inst = inst

    def add(self, call: ast.Call, t: T.Type) -> None:
        types = self.digests.types
        name = t.name if isinstance(t, T.StructLikeT) else f"digest_{len(types)}"
        types.setdefault(name, t)
        self.digests.names[(self.inst.py if self.inst is not None else "", id(call))] = name
