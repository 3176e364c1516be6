"""Lines of generated Python with indentation, and small helpers for the code they hold."""

from __future__ import annotations

from switch.lang import types as T


class Emitter:
    """A list of lines of Python at the current indentation level."""

    def __init__(self, level: int = 0) -> None:
        self.lines: list[str] = []
        self.level = level

    def line(self, text: str) -> None:
        self.lines.append("    " * self.level + text)

    def indent(self) -> None:
        self.level += 1

    def dedent(self) -> None:
        self.level -= 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def mask(width: int) -> int:
    """The all-ones value of ``width`` bits."""
    return (1 << width) - 1


def fit_code(code: str, t: T.Type | None) -> str:
    """Code wrapping the value of ``code`` into the range of ``t`` (a no-op for other types)."""
    if isinstance(t, T.BitT):
        return f"({code} & {mask(t.width)})"
    if isinstance(t, T.IntT):
        return f"_to_signed({code}, {t.width})"
    return code


def tuple_code(items: list[str]) -> str:
    """A Python tuple display of ``items`` (``(a, b, )``; ``()`` when empty)."""
    return "(" + "".join(i + ", " for i in items) + ")"
