"""Compile a P4-16/v1model program once into fast Python.

``load_program(path)`` preprocesses, parses, type-checks and elaborates the program, generates
one Python module for it and compiles that module to a code object. The executor
(:class:`switch.pipeline.v1model.V1Switch`) then makes any number of independent switches (each
with its own tables and registers) from that one compilation, which is how a fabric of many
switches pays for compilation only once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import CodeType

from switch import schema as M
from switch.compile.codegen import CodeGen
from switch.compile.elaborate import Elaborated, elaborate
from switch.compile.v1model_externs import V1MODEL_EXTERNS
from switch.errors import P4Error
from switch.lang.lexer import Lexer
from switch.lang.parser import Parser
from switch.lang.preprocess import preprocess_file, preprocess_text
from switch.lang.typecheck import check_program

__all__ = ["CompiledProgram", "load_program", "compile_source", "P4Error"]


@dataclass
class CompiledProgram:
    """A program compiled for this target: its control-plane schema and executable code."""

    path: str
    schema: M.ProgramSchema
    source: str  # the generated Python module (for debugging: tf-p4 compile --emit-python)
    code: CodeType
    bindings: dict[str, tuple[str, str]]
    elaborated: Elaborated
    fingerprint: str  # sha256 of the preprocessed P4 text


def _compile(text: str, filename: str, files: Mapping[str, list[str]]) -> CompiledProgram:
    """Every phase, from preprocessed text to the compiled module of the generated code."""
    tokens = Lexer(text, filename, files).tokenize()
    program = Parser(tokens).parse_program()
    checked = check_program(program)
    elab = elaborate(checked)
    gen = CodeGen(elab, V1MODEL_EXTERNS)
    source = gen.generate()
    code = compile(source, f"<p4:{filename}>", "exec")
    fp = hashlib.sha256(text.encode()).hexdigest()
    return CompiledProgram(filename, elab.schema, source, code, dict(gen.bindings), elab, fp)


def load_program(
    path: str | Path, include_dirs: Sequence[str] = (), defines: Mapping[str, str] | None = None
) -> CompiledProgram:
    """Compile the P4 program at ``path``.

    Raises:
        P4Error: any front-end error (``err.render()`` gives ``file:line:col: message``).
    """
    pre = preprocess_file(str(path), include_dirs, defines)
    return _compile(pre.text, str(path), pre.files)


def compile_source(
    text: str,
    filename: str = "<string>",
    include_dirs: Sequence[str] = (),
    defines: Mapping[str, str] | None = None,
) -> CompiledProgram:
    """Compile P4 source text (``#include <v1model.p4>`` resolves to the built-in declarations)."""
    pre = preprocess_text(text, filename, include_dirs, defines)
    return _compile(pre.text, filename, pre.files)
