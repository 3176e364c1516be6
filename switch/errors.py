"""Error types of the software P4 target, each carrying a source position where one is known.

Every front-end error renders as ``file:line:col: message`` followed by the offending source line
and a caret, the way C compilers report; the command-line tools print that and exit non-zero,
never a Python traceback.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Span:
    """A position in an original source file (after undoing preprocessing).

    ``line`` and ``col`` are 1-based. ``text`` is the source line (without newline), kept so
    that errors can show it even when the file is not at hand.
    """

    file: str
    line: int
    col: int
    text: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NO_SPAN = Span("<builtin>", 0, 0, "")


class P4Error(Exception):
    """Base class of every error the software P4 target raises on purpose."""

    def __init__(self, message: str, span: Span | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.span = span

    def render(self) -> str:
        """``file:line:col: message`` plus the source line and a caret under the column."""
        if self.span is None or self.span.line == 0:
            return f"error: {self.message}"
        out = f"{self.span}: {self.message}"
        if self.span.text:
            caret = " " * (max(self.span.col, 1) - 1) + "^"
            out += f"\n{self.span.text}\n{caret}"
        return out

    def __str__(self) -> str:
        return self.render()


class PreprocessError(P4Error):
    """#include / #define / #if problems."""


class LexError(P4Error):
    """A character sequence that is no P4 token."""


class ParseError(P4Error):
    """A syntax error."""


class TypeError_(P4Error):
    """Unknown names, width and type mismatches, wrong argument counts."""


class UnsupportedError(P4Error):
    """A valid P4 construct that this target does not implement."""


class RuntimeConfigError(P4Error):
    """A bad control-plane request (unknown table, bad key, ...) to the runtime API."""


class StfError(P4Error):
    """A malformed STF test file."""
