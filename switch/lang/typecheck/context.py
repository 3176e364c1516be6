"""What every rule of the type checker shares: its error constructor and the context enum."""

from __future__ import annotations

import enum

from switch.errors import Span, TypeError_
from switch.lang import ast


class Context(enum.StrEnum):
    """The kind of body being checked (the innermost one decides what is allowed)."""

    PARSER = "parser"
    CONTROL = "control"
    APPLY = "apply"  # a control's apply block
    ACTION = "action"
    FUNCTION = "function"


def err(msg: str, node: ast.Node | Span | None) -> TypeError_:
    """A type error at ``node`` (or at a span)."""
    span = node if isinstance(node, Span) else (node.span if node is not None else None)
    return TypeError_(msg, span)
