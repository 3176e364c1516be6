"""Errors of the pipeline state's control-plane API, each carrying a google.rpc status code as P4Runtime uses."""

from __future__ import annotations

import difflib
import enum
from collections.abc import Iterable

from switch.errors import RuntimeConfigError


class Code(enum.IntEnum):
    """The google.rpc.Code values a P4Runtime server reports for a failed write or read."""

    OK = 0
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13


class StateError(RuntimeConfigError):
    """A rejected control-plane request; ``code`` says why, as P4Runtime would."""

    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code = code

    def render(self) -> str:
        return f"error: {self.code.name}: {self.message}"


def nearest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate most similar to ``name`` (also comparing last dotted components)."""
    names = list(candidates)
    if not names:
        return None
    hit = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    if hit:
        return hit[0]
    last = {n.rsplit(".", 1)[-1]: n for n in names}
    hit = difflib.get_close_matches(name.rsplit(".", 1)[-1], list(last), n=1, cutoff=0.5)
    return last[hit[0]] if hit else None


def unknown(kind: str, name: object, candidates: Iterable[str] = ()) -> StateError:
    """A NOT_FOUND error for ``name``, suggesting the nearest valid name if one is close."""
    message = f"unknown {kind} '{name}'"
    if isinstance(name, str):
        hint = nearest(name, candidates)
        if hint is not None:
            message += f"; did you mean '{hint}'?"
    return StateError(Code.NOT_FOUND, message)
