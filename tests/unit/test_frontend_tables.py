"""The front-end's dispatch tables cover every case, like the P4Runtime entity table does.

The type checker and the code generator dispatch on the syntax node's type (expressions,
statements, written types, declarations), on the call kind and on the operator; constant folding
and assignment targets too. A node type, call kind or operator without a row would surface as an
"unsupported" error on a valid program, so each table is checked against what the parser can
produce. The rest pins the plumbing of the compile driver: the architecture's extern emitters are
passed to the code generator, and elaboration leaves a complete schema (digests included).
"""

from __future__ import annotations

import pytest

from switch.compile import compile_source
from switch.compile.codegen import CodeGen, ExternEmitters
from switch.compile.codegen import calls as gen_calls
from switch.compile.codegen import expressions as gen_exprs
from switch.compile.codegen import places as gen_places
from switch.compile.codegen import statements as gen_stmts
from switch.compile.elaborate import Elaborated, elaborate
from switch.compile.v1model_externs import EXTERN_FUNCTIONS, EXTERN_METHODS
from switch.errors import UnsupportedError
from switch.lang import ast, constfold
from switch.lang.lexer import Lexer
from switch.lang.parser import BINARY_LEVELS, COMPOUND_ASSIGN, Parser
from switch.lang.preprocess import preprocess_text
from switch.lang.typecheck import calls as check_calls
from switch.lang.typecheck import check_program
from switch.lang.typecheck import declarations as check_decls
from switch.lang.typecheck import expressions as check_exprs
from switch.lang.typecheck import lvalues as check_lvalues
from switch.lang.typecheck import statements as check_stmts
from switch.lang.typecheck import typerefs as check_typerefs
from switch.lang.types import CallKind


def _node_classes(base: type[ast.Node]) -> list[type[ast.Node]]:
    """Every concrete syntax node class below ``base`` (the classes the parser builds)."""
    found: list[type[ast.Node]] = []
    todo = list(base.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if not cls.__subclasses__():
            found.append(cls)
    return sorted(found, key=lambda c: c.__name__)


EXPR_CLASSES = _node_classes(ast.Expr)
STMT_CLASSES = _node_classes(ast.Stmt)
TYPEREF_CLASSES = _node_classes(ast.TypeRef)
BINARY_OPS = sorted({op for level in BINARY_LEVELS for op in level} | set(COMPOUND_ASSIGN.values()))
UNARY_OPS = ["!", "+", "-", "~"]  # Parser.parse_unary
TOP_LEVEL_CLASSES = [
    ast.TypedefDecl,
    ast.HeaderDecl,
    ast.HeaderUnionDecl,
    ast.StructDecl,
    ast.EnumDecl,
    ast.ErrorDecl,
    ast.MatchKindDecl,
    ast.ConstDecl,
    ast.ExternDecl,
    ast.ExternFuncDecl,
    ast.FunctionDecl,
    ast.ActionDecl,
    ast.ParserTypeDecl,
    ast.ControlTypeDecl,
    ast.PackageDecl,
    ast.ParserDecl,
    ast.ControlDecl,
    ast.Instantiation,
    ast.VarDecl,
]  # Parser.parse_declaration
LOCAL_CLASSES = [
    ast.VarDecl,
    ast.ConstDecl,
    ast.Instantiation,
    ast.ActionDecl,
    ast.TableDecl,
    ast.ValueSetDecl,
]  # Parser.parse_parser / parse_control bodies, and declarations as statements


def test_node_class_discovery_sees_the_tree() -> None:
    assert ast.Call in EXPR_CLASSES and ast.IntLit in EXPR_CLASSES
    assert ast.Switch in STMT_CLASSES and ast.VarDecl in STMT_CLASSES


@pytest.mark.parametrize("cls", EXPR_CLASSES, ids=lambda c: c.__name__)
def test_every_expression_node_has_a_checker_and_a_codegen_row(cls: type[ast.Expr]) -> None:
    assert cls in check_exprs.EXPRESSIONS
    assert cls in gen_exprs.EXPRESSIONS


@pytest.mark.parametrize("cls", STMT_CLASSES, ids=lambda c: c.__name__)
def test_every_statement_node_has_a_checker_and_a_codegen_row(cls: type[ast.Stmt]) -> None:
    assert cls in check_stmts.STATEMENTS
    assert cls in gen_stmts.STATEMENTS


@pytest.mark.parametrize("cls", TYPEREF_CLASSES, ids=lambda c: c.__name__)
def test_every_written_type_has_a_row(cls: type[ast.TypeRef]) -> None:
    assert cls in check_typerefs.TYPE_REFS


@pytest.mark.parametrize("cls", TOP_LEVEL_CLASSES, ids=lambda c: c.__name__)
def test_every_top_level_declaration_has_a_row(cls: type[ast.Node]) -> None:
    assert cls in check_decls.TOP_LEVEL


@pytest.mark.parametrize("cls", LOCAL_CLASSES, ids=lambda c: c.__name__)
def test_every_local_declaration_has_a_row(cls: type[ast.Node]) -> None:
    assert cls in check_decls.LOCALS


@pytest.mark.parametrize("kind", list(CallKind), ids=str)
def test_every_call_kind_has_a_checker_and_a_codegen_row(kind: CallKind) -> None:
    assert kind in check_calls.CALLS
    assert kind in gen_calls.CALLS


@pytest.mark.parametrize("op", BINARY_OPS)
def test_every_binary_operator_has_a_checker_codegen_and_folding_row(op: str) -> None:
    assert op in check_exprs.BINARY_OPS
    assert op in gen_exprs.BINARY_OPS
    assert op in constfold.BINARY


@pytest.mark.parametrize("op", UNARY_OPS)
def test_every_unary_operator_has_a_checker_codegen_and_folding_row(op: str) -> None:
    assert op in check_exprs.UNARY_OPS
    assert op in gen_exprs.UNARY_OPS
    assert op in constfold.UNARY


def test_folding_rows_are_expression_nodes() -> None:
    assert set(constfold.FOLDERS) <= set(EXPR_CLASSES)


def test_what_the_checker_lets_be_assigned_the_generator_can_assign() -> None:
    assert set(check_lvalues.LVALUES) == set(gen_places.PLACES)


# -- the compile driver's plumbing ---------------------------------------------------------------

PROGRAM = """#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct H { h_t h; }
struct M {}
struct learn_t { bit<8> a; }
parser P(packet_in p, out H h, inout M m, inout standard_metadata_t sm) {
    state start { p.extract(h.h); transition accept; }
}
control V(inout H h, inout M m) { apply {} }
control I(inout H h, inout M m, inout standard_metadata_t sm) {
    apply {
        digest<learn_t>(1, { h.h.a });
        digest(2, { h.h.a, h.h.b });
        mark_to_drop(sm);
    }
}
control E(inout H h, inout M m, inout standard_metadata_t sm) { apply {} }
control C(inout H h, inout M m) { apply {} }
control D(packet_out p, in H h) { apply { p.emit(h.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def _elaborated(src: str) -> Elaborated:
    pre = preprocess_text(src, "prog.p4")
    program = Parser(Lexer(pre.text, "prog.p4", pre.files).tokenize()).parse_program()
    return elaborate(check_program(program))


def test_elaboration_names_every_digest_before_code_generation() -> None:
    elab = _elaborated(PROGRAM)
    assert [(d.name, [f.name for f in d.fields]) for d in elab.schema.digests] == [
        ("learn_t", ["a"]),
        ("digest_1", ["f0", "f1"]),
    ]


def test_code_generation_leaves_the_schema_as_elaboration_made_it() -> None:
    elab = _elaborated(PROGRAM)
    before = list(elab.schema.digests)
    source = CodeGen(elab, ExternEmitters(EXTERN_FUNCTIONS, EXTERN_METHODS)).generate()
    assert elab.schema.digests == before
    assert "_rt.digest_late('learn_t'" not in source  # a list: copied at the call
    assert "_rt.digest('learn_t'" in source and "_rt.digest('digest_1'" in source


def test_code_generator_calls_the_extern_emitters_it_is_given() -> None:
    elab = _elaborated(PROGRAM)
    functions = {k: v for k, v in EXTERN_FUNCTIONS.items() if k != "mark_to_drop"}
    with pytest.raises(UnsupportedError, match="extern function 'mark_to_drop' is not supported"):
        CodeGen(elab, ExternEmitters(functions, EXTERN_METHODS)).generate()


def test_compile_source_still_compiles_through_the_driver() -> None:
    prog = compile_source(PROGRAM, "prog.p4")
    assert [d.name for d in prog.schema.digests] == ["learn_t", "digest_1"]
