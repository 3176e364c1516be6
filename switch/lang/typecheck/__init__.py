"""Name resolution and type checking of P4-16, annotating the syntax tree in place.

After :func:`check_program` every expression has a ``type``, every name a ``ref`` (a
:class:`~switch.lang.symbols.Sym`), every member that is not a field a ``ref`` (a
:class:`~switch.lang.symbols.MemberRef`) and every call a ``ref`` (a
:class:`~switch.lang.symbols.CallInfo`); integer literals and other arbitrary-precision
expressions that meet a fixed-width context have been given that width. Errors are
:class:`~switch.errors.TypeError_` (or :class:`~switch.errors.UnsupportedError`) with the position
of the offending construct.

The checker is a set of rule tables, one row per node type (or operator, or call kind), and a
:class:`~switch.lang.typecheck.checker.Checker` that dispatches through them:

- ``checker``: the checker's state and dispatch; ``common``: the error helper and body contexts
- ``declarations``: top-level and local declarations; ``bodies``: functions, actions, parsers,
  controls; ``tables``: match-action tables and action references
- ``statements``, ``expressions``, ``calls`` (one rule per call kind), ``keysets``, ``lvalues``
- ``typerefs``: written types to semantic types; ``coercion``: implicit conversions and casts

Constant folding is :mod:`switch.lang.constfold`.
"""

from __future__ import annotations

from switch.lang import ast
from switch.lang.typecheck.checker import CheckedProgram, Checker

__all__ = ["CheckedProgram", "Checker", "check_program"]


def check_program(program: ast.Program) -> CheckedProgram:
    """Type-check ``program`` in place.

    Raises:
        TypeError_: a type error, at its position.
        UnsupportedError: a construct this target does not support.
    """
    return Checker().check(program)
