"""C-style preprocessor for P4 sources: ``#include``, ``#define``, ``#if`` and friends.

The output has exactly one line per source line: directive lines and lines of skipped conditional
blocks become empty lines, so line numbers stay in sync and gcc-style markers
(``# <line> "<file>"``, the line number of the next output line) are only needed where the output
switches files (start, entering and returning from an ``#include``) and after ``#line``. Lines in
which no macro is expanded are copied verbatim, so their columns are exact. Comments outside
directives are left in the output for the lexer to skip.

Every problem raises :class:`~switch.errors.PreprocessError` carrying the ``Span`` of the offending
token (file, 1-based line and column, source line text).
"""

from __future__ import annotations

import bisect
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from switch.errors import PreprocessError, Span
from switch.p4include import INCLUDE_DIR

SYSTEM_INCLUDE_DIR: str = str(INCLUDE_DIR)
"""Where core.p4 and v1model.p4 live; searched last for both kinds of ``#include``."""

MAX_INCLUDE_DEPTH = 64
"""Deepest allowed ``#include`` nesting; deeper means a recursive include without a guard."""

PREDEFINED: dict[str, str] = {"__TARGET_BMV2__": "1", "__TAILFABRIC__": "1"}


@dataclass
class PreprocessedSource:
    """Preprocessed text plus the original lines of every file that was read."""

    text: str
    files: dict[str, list[str]] = field(default_factory=dict)


# ----------------------------------------------------------------------------------------------
# Tokens


_TOKEN_RE = re.compile(
    r"""
      (?P<ws>[ \t\f\v\r]+)
    | (?P<lcomment>//.*)
    | (?P<bcomment>/\*)
    | (?P<str>"(?:[^"\\]|\\.)*"?)
    | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<num>[0-9][A-Za-z0-9_]*)
    | (?P<punct>\.\.\.|<<=|>>=|\#\#|<<|>>|<=|>=|==|!=|&&|\|\||->|\+\+|--|[-+*/%&|^]=|::|.)
    """,
    re.VERBOSE | re.DOTALL,
)

_WS_KINDS = ("ws", "comment")


@dataclass(slots=True)
class _Tok:
    """A preprocessing token; ``line``/``col`` are 0-based and physical in the current file."""

    kind: str  # ws, comment, str, id, num, punct, mark (placemarker of '##')
    text: str
    line: int
    col: int
    hide: frozenset[str] = frozenset()
    from_macro: bool = False


def _scan(text: str, in_comment: bool) -> tuple[list[tuple[str, str, int]], bool, int]:
    """Split one logical line into (kind, text, offset) triples.

    Returns the triples, whether a block comment is still open at the end of the line and the
    offset where that comment opened (-1 when it opened on an earlier line).
    """
    out: list[tuple[str, str, int]] = []
    pos = 0
    if in_comment:
        end = text.find("*/")
        if end < 0:
            return ([("comment", text, 0)] if text else []), True, -1
        out.append(("comment", text[: end + 2], 0))
        pos = end + 2
    n = len(text)
    while pos < n:
        m = _TOKEN_RE.match(text, pos)
        assert m is not None and m.lastgroup is not None  # the last alternative matches anything
        kind = m.lastgroup
        if kind == "bcomment":
            end = text.find("*/", pos + 2)
            if end < 0:
                out.append(("comment", text[pos:], pos))
                return out, True, pos
            out.append(("comment", text[pos : end + 2], pos))
            pos = end + 2
            continue
        out.append(("comment" if kind == "lcomment" else kind, m.group(), pos))
        pos = m.end()
    return out, False, -1


def _would_merge(a: str, b: str) -> bool:
    """Whether writing ``a`` right before ``b`` would lex as something other than a, b."""
    toks, _, _ = _scan(a + b, False)
    return not toks or toks[0][1] != a


def _nonws(toks: Sequence[_Tok]) -> list[_Tok]:
    return [t for t in toks if t.kind not in _WS_KINDS]


def _strip(toks: list[_Tok]) -> list[_Tok]:
    lo, hi = 0, len(toks)
    while lo < hi and toks[lo].kind in _WS_KINDS:
        lo += 1
    while hi > lo and toks[hi - 1].kind in _WS_KINDS:
        hi -= 1
    return toks[lo:hi]


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


# ----------------------------------------------------------------------------------------------
# Files and logical lines


@dataclass
class _Line:
    """A logical line: physical lines ``first..last`` joined at backslash-newlines."""

    first: int
    last: int
    text: str
    toks: list[_Tok]
    starts_in_comment: bool

    def is_directive(self) -> bool:
        if self.starts_in_comment:
            return False
        for t in self.toks:
            if t.kind not in _WS_KINDS:
                return t.kind == "punct" and t.text == "#"
        return False


@dataclass
class _Cond:
    """One open ``#if``/``#ifdef``/``#ifndef`` group."""

    directive: str
    span: Span  # of the directive name, for 'unterminated' errors
    parent_active: bool
    taken: bool  # some branch of the group was already selected
    active: bool  # the current branch is being output
    seen_else: bool = False


class _File:
    """Reading state of one source file."""

    def __init__(self, display: str, lines: list[str], real: str | None) -> None:
        self.display = display
        self.lines = lines
        self.real = real
        self.i = 0
        self.in_comment = False
        self.comment_open = Span(display, 0, 0)  # where the open block comment began
        self.presumed_file = display
        self.line_delta = 0  # presumed line = physical index + 1 + line_delta (#line)
        self.conds: list[_Cond] = []

    def span(self, line: int, col: int) -> Span:
        text = self.lines[line] if 0 <= line < len(self.lines) else ""
        return Span(self.presumed_file, line + 1 + self.line_delta, col + 1, text)

    def error(self, message: str, tok: _Tok) -> PreprocessError:
        return PreprocessError(message, self.span(tok.line, tok.col))

    def read_line(self) -> _Line | None:
        if self.i >= len(self.lines):
            return None
        first = self.i
        parts: list[str] = []
        starts: list[int] = []
        size = 0
        while True:
            raw = self.lines[self.i]
            self.i += 1
            starts.append(size)
            if raw.endswith("\\"):
                parts.append(raw[:-1])
                size += len(raw) - 1
                if self.i < len(self.lines):
                    continue
            else:
                parts.append(raw)
            break
        text = "".join(parts)
        start_in_comment = self.in_comment
        raw_toks, self.in_comment, open_at = _scan(text, self.in_comment)

        def loc(offset: int) -> tuple[int, int]:
            k = bisect.bisect_right(starts, offset) - 1
            return first + k, offset - starts[k]

        toks = [_Tok(kind, t, *loc(off)) for kind, t, off in raw_toks]
        if open_at >= 0:
            self.comment_open = self.span(*loc(open_at))
        return _Line(first, self.i - 1, text, toks, start_in_comment)


# ----------------------------------------------------------------------------------------------
# Macros


@dataclass
class _Macro:
    name: str
    params: list[str] | None  # None: object-like
    variadic: bool
    body: list[_Tok]
    builtin: bool = False  # __LINE__ / __FILE__


class _NeedMore(Exception):
    """A macro's argument list continues past the end of the tokens at hand."""

    def __init__(self, tok: _Tok) -> None:
        super().__init__(tok.text)
        self.tok = tok


# ----------------------------------------------------------------------------------------------
# #if expressions

_BINARY_PREC = {
    "||": 1,
    "&&": 2,
    "|": 3,
    "^": 4,
    "&": 5,
    "==": 6,
    "!=": 6,
    "<": 7,
    "<=": 7,
    ">": 7,
    ">=": 7,
    "<<": 8,
    ">>": 8,
    "+": 9,
    "-": 9,
    "*": 10,
    "/": 10,
    "%": 10,
}
_INT_RE = re.compile(r"(0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)[uUlL]*")


def _wrap64(v: int) -> int:
    return ((v + (1 << 63)) % (1 << 64)) - (1 << 63)


class _Expr:
    """Evaluates the integer constant expression of ``#if``/``#elif`` (C semantics, int64)."""

    def __init__(self, toks: list[_Tok], end: _Tok, err: Callable[[str, _Tok], Exception]) -> None:
        self.toks = toks
        self.pos = 0
        self.end = end
        self.err = err

    def _peek(self) -> _Tok | None:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def run(self) -> int:
        v = self._cond(True)
        t = self._peek()
        if t is not None:
            raise self.err(f"missing binary operator before token '{t.text}'", t)
        return v

    def _cond(self, ev: bool) -> int:
        c = self._binary(1, ev)
        t = self._peek()
        if t is None or t.text != "?":
            return c
        self.pos += 1
        a = self._cond(ev and c != 0)
        t = self._peek()
        if t is None or t.text != ":":
            raise self.err("expected ':' in conditional expression", t or self.end)
        self.pos += 1
        b = self._cond(ev and c == 0)
        return a if c else b

    def _binary(self, min_prec: int, ev: bool) -> int:
        lhs = self._unary(ev)
        while True:
            t = self._peek()
            if t is None or t.kind != "punct" or t.text not in _BINARY_PREC:
                return lhs
            prec = _BINARY_PREC[t.text]
            if prec < min_prec:
                return lhs
            self.pos += 1
            if t.text == "&&":
                rhs = self._binary(prec + 1, ev and lhs != 0)
                lhs = int(lhs != 0 and rhs != 0)
            elif t.text == "||":
                rhs = self._binary(prec + 1, ev and lhs == 0)
                lhs = int(lhs != 0 or rhs != 0)
            else:
                rhs = self._binary(prec + 1, ev)
                lhs = self._apply(t, lhs, rhs, ev)

    def _apply(self, op: _Tok, a: int, b: int, ev: bool) -> int:
        o = op.text
        if o in ("/", "%"):
            if b == 0:
                if ev:
                    raise self.err("division by zero in #if", op)
                return 0
            q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # C truncates toward 0
            return _wrap64(q if o == "/" else a - b * q)
        if o in ("<<", ">>"):
            if o == ">>":
                b = -b
            if b >= 64:
                return 0
            if b <= -64:
                return -1 if a < 0 else 0
            return _wrap64(a << b if b >= 0 else a >> -b)
        results = {
            "+": lambda: a + b,
            "-": lambda: a - b,
            "*": lambda: a * b,
            "&": lambda: a & b,
            "|": lambda: a | b,
            "^": lambda: a ^ b,
            "==": lambda: int(a == b),
            "!=": lambda: int(a != b),
            "<": lambda: int(a < b),
            "<=": lambda: int(a <= b),
            ">": lambda: int(a > b),
            ">=": lambda: int(a >= b),
        }
        return _wrap64(results[o]())

    def _unary(self, ev: bool) -> int:
        t = self._peek()
        if t is None:
            raise self.err("expected value in expression", self.end)
        self.pos += 1
        if t.kind == "punct" and t.text in ("+", "-", "~", "!"):
            v = self._unary(ev)
            return {"+": v, "-": _wrap64(-v), "~": ~v, "!": int(v == 0)}[t.text]
        if t.kind == "punct" and t.text == "(":
            v = self._cond(ev)
            close = self._peek()
            if close is None or close.text != ")":
                raise self.err("missing ')' in expression", close or self.end)
            self.pos += 1
            return v
        if t.kind == "num":
            m = _INT_RE.fullmatch(t.text)
            if m is None:
                raise self.err(f"invalid integer constant '{t.text}' in #if", t)
            digits = m.group(1)
            if len(digits) > 1 and digits[0] == "0" and digits[1] not in "xXbB":
                return _wrap64(int(digits, 8))
            return _wrap64(int(digits, 0))
        if t.kind == "id":
            return 0  # an identifier that is not a macro
        raise self.err(f"token '{t.text}' is not valid in preprocessor expressions", t)


# ----------------------------------------------------------------------------------------------
# The preprocessor


@dataclass
class _DirectiveLine:
    """A directive being run: its file, name (``d``: '' if not an identifier) and arguments."""

    f: _File
    d: str
    name: _Tok
    args: list[_Tok]
    last: int  # the last physical line of the directive
    depth: int  # the include depth


class _Preprocessor:
    def __init__(self, include_dirs: Sequence[str], defines: Mapping[str, str] | None) -> None:
        self.include_dirs = list(include_dirs)
        self.macros: dict[str, _Macro] = {
            "__LINE__": _Macro("__LINE__", None, False, [], builtin=True),
            "__FILE__": _Macro("__FILE__", None, False, [], builtin=True),
        }
        self.files: dict[str, list[str]] = {}
        self.out: list[str] = []
        self.once: set[str] = set()
        for name, value in {**PREDEFINED, **(defines or {})}.items():
            self._command_line_define(name, value)

    # -- driving ------------------------------------------------------------------------------

    def run(self, f: _File, depth: int) -> None:
        self.files.setdefault(f.display, f.lines)
        self.out.append(f'# 1 "{_escape(f.display)}"')
        while (ln := f.read_line()) is not None:
            if ln.is_directive():
                self._directive(f, ln, depth)
            else:
                self._text(f, ln)
        if f.in_comment:
            raise PreprocessError("unterminated comment", f.comment_open)
        if f.conds:
            c = f.conds[-1]
            raise PreprocessError(f"unterminated #{c.directive}", c.span)

    def _blanks(self, n: int) -> None:
        self.out.extend([""] * n)

    def _active(self, f: _File) -> bool:
        return not f.conds or f.conds[-1].active

    def _text(self, f: _File, ln: _Line) -> None:
        if not self._active(f):
            self._blanks(ln.last - ln.first + 1)
            return
        if not any(t.kind == "id" and t.text in self.macros for t in ln.toks):
            self.out.append(ln.text)
            self._blanks(ln.last - ln.first)
            return
        toks, last = ln.toks, ln.last
        while True:
            try:
                expanded = self._expand(f, toks, source=True)
                break
            except _NeedMore as more:
                nxt = f.read_line()
                if nxt is None or nxt.is_directive():
                    msg = f"unterminated argument list invoking macro '{more.tok.text}'"
                    raise f.error(msg, more.tok) from None
                toks = [*toks, _Tok("ws", " ", nxt.first, 0), *nxt.toks]
                last = nxt.last
        self.out.append(self._render(expanded))
        self._blanks(last - ln.first)

    @staticmethod
    def _render(toks: list[_Tok]) -> str:
        parts: list[str] = []
        prev: _Tok | None = None
        for t in toks:
            if (
                prev is not None
                and (t.from_macro or prev.from_macro)
                and t.kind not in _WS_KINDS
                and prev.kind not in _WS_KINDS
                and _would_merge(prev.text, t.text)
            ):
                parts.append(" ")
            parts.append(t.text)
            prev = t
        return "".join(parts)

    # -- directives ---------------------------------------------------------------------------

    def _directive(self, f: _File, ln: _Line, depth: int) -> None:
        toks, last = list(ln.toks), ln.last
        while f.in_comment:  # a block comment opened in the directive continues it
            nxt = f.read_line()
            if nxt is None:
                raise PreprocessError("unterminated comment in directive", f.comment_open)
            toks.extend(nxt.toks)
            last = nxt.last
        self._blanks(last - ln.first + 1)
        k = next(i for i, t in enumerate(toks) if t.kind not in _WS_KINDS)
        rest = [_Tok("ws", " ", t.line, t.col) if t.kind == "comment" else t for t in toks[k + 1 :]]
        rest = _strip(rest)
        if not rest:
            return  # the null directive
        name, args = rest[0], rest[1:]
        dv = _DirectiveLine(f, name.text if name.kind == "id" else "", name, args, last, depth)
        conditional = CONDITIONAL_DIRECTIVES.get(dv.d)
        if conditional is not None:
            conditional(self, dv)  # also in skipped regions: they track the nesting
            return
        if not self._active(f):
            return
        rule = DIRECTIVES.get(dv.d)
        if rule is None:
            raise f.error(f"invalid preprocessing directive #{name.text}", name)
        rule(self, dv)

    def _if(self, dv: _DirectiveLine) -> None:
        f, active = dv.f, self._active(dv.f)
        value = active and self._condition(f, dv.d, dv.name, dv.args)
        span = f.span(dv.name.line, dv.name.col)
        f.conds.append(_Cond(dv.d, span, active, value or not active, value))

    def _else(self, dv: _DirectiveLine) -> None:
        f, d, name = dv.f, dv.d, dv.name
        if not f.conds:
            raise f.error(f"#{d} without #if", name)
        c = f.conds[-1]
        if c.seen_else:
            raise f.error(f"#{d} after #else", name)
        if d == "else":
            c.seen_else = True
            c.active = not c.taken
            c.taken = True
        elif c.taken:
            c.active = False
        else:
            c.active = self._condition(f, "if", name, dv.args)
            c.taken = c.active

    def _endif(self, dv: _DirectiveLine) -> None:
        if not dv.f.conds:
            raise dv.f.error("#endif without #if", dv.name)
        dv.f.conds.pop()

    def _undef(self, dv: _DirectiveLine) -> None:
        ids = _nonws(dv.args)
        if not ids:
            raise dv.f.error("no macro name given in #undef directive", dv.name)
        if ids[0].kind != "id":
            raise dv.f.error("macro names must be identifiers", ids[0])
        self.macros.pop(ids[0].text, None)

    def _diagnostic(self, dv: _DirectiveLine) -> None:
        text = "".join(t.text for t in dv.args).strip()
        if dv.d == "error":
            raise dv.f.error(f"#error {text}", dv.name)
        where = dv.f.span(dv.name.line, dv.name.col)
        print(f"{where}: warning: #warning {text}", file=sys.stderr)

    def _pragma(self, dv: _DirectiveLine) -> None:
        words = _nonws(dv.args)
        if words and words[0].text == "once" and dv.f.real is not None:
            self.once.add(dv.f.real)
        # other pragmas mean nothing to P4 and are dropped

    def _condition(self, f: _File, d: str, name: _Tok, args: list[_Tok]) -> bool:
        if d in ("ifdef", "ifndef"):
            ids = _nonws(args)
            if not ids:
                raise f.error(f"no macro name given in #{d} directive", name)
            if ids[0].kind != "id":
                raise f.error("macro names must be identifiers", ids[0])
            return (ids[0].text in self.macros) == (d == "ifdef")
        pre: list[_Tok] = []
        i = 0
        while i < len(args):
            t = args[i]
            i += 1
            if t.kind != "id" or t.text != "defined":
                pre.append(t)
                continue
            rest = [(j, a) for j, a in enumerate(args[i:], i) if a.kind not in _WS_KINDS][:3]
            paren = bool(rest) and rest[0][1].text == "("
            if paren:
                rest = rest[1:]
            if not rest or rest[0][1].kind != "id":
                raise f.error(
                    "operator 'defined' requires an identifier", rest[0][1] if rest else t
                )
            ident = rest[0][1]
            i = rest[0][0] + 1
            if paren:
                if len(rest) < 2 or rest[1][1].text != ")":
                    raise f.error(
                        "missing ')' after 'defined'", rest[1][1] if len(rest) > 1 else ident
                    )
                i = rest[1][0] + 1
            pre.append(_Tok("num", "1" if ident.text in self.macros else "0", t.line, t.col))
        toks = _nonws(self._expand(f, pre, source=False))
        if not toks:
            raise f.error(f"#{name.text} with no expression", name)
        last = _nonws(args)[-1]
        end = _Tok("end", "", last.line, last.col + len(last.text))
        return _Expr(toks, end, f.error).run() != 0

    def _include(self, f: _File, name: _Tok, args: list[_Tok], last: int, depth: int) -> None:
        words = _nonws(args)
        if words and words[0].kind != "str" and words[0].text != "<":
            args = self._expand(f, args, source=False)  # computed include
            words = _nonws(args)
        if not words or (words[0].kind != "str" and words[0].text != "<"):
            raise f.error('#include expects "FILENAME" or <FILENAME>', words[0] if words else name)
        first = words[0]
        if first.kind == "str":
            if len(first.text) < 2 or not first.text.endswith('"'):
                raise f.error('missing terminating " character', first)
            fname, quoted = first.text[1:-1], True
        else:
            start = next(i for i, t in enumerate(args) if t is first)
            close = next((i for i in range(start + 1, len(args)) if args[i].text == ">"), None)
            if close is None:
                raise f.error("missing terminating > character", first)
            fname, quoted = "".join(t.text for t in args[start + 1 : close]), False
        if not fname:
            raise f.error("empty filename in #include", first)
        if depth + 1 > MAX_INCLUDE_DEPTH:
            msg = f"#include nested too deeply (more than {MAX_INCLUDE_DEPTH} levels; recursive include?)"
            raise f.error(msg, first)
        dirs = ([os.path.dirname(f.display)] if quoted else []) + self.include_dirs
        dirs.append(SYSTEM_INCLUDE_DIR)
        path = next(
            (os.path.join(d, fname) for d in dirs if os.path.isfile(os.path.join(d, fname))), None
        )
        if path is None:
            where = ", ".join(d or "." for d in dirs)
            raise f.error(f"cannot find include file '{fname}' (searched {where})", first)
        real = os.path.realpath(path)
        if real in self.once:
            return
        try:
            lines = _read_lines(path)
        except OSError as e:
            raise f.error(f"cannot read include file '{fname}': {e.strerror}", first) from None
        self.run(_File(path, lines, real), depth + 1)
        self.out.append(f'# {last + 2 + f.line_delta} "{_escape(f.presumed_file)}"')

    def _line(self, f: _File, name: _Tok, args: list[_Tok], last: int) -> None:
        words = _nonws(self._expand(f, args, source=False))
        if not words or not re.fullmatch(r"[0-9]+", words[0].text) or int(words[0].text) < 1:
            bad = words[0] if words else name
            raise f.error(f"'{bad.text}' after #line is not a positive integer", bad)
        if len(words) > 1:
            if words[1].kind != "str" or len(words[1].text) < 2 or not words[1].text.endswith('"'):
                raise f.error(f"invalid filename '{words[1].text}' in #line", words[1])
            f.presumed_file = re.sub(r"\\(.)", r"\1", words[1].text[1:-1])
        number = int(words[0].text)
        f.line_delta = number - (last + 2)
        self.out.append(f'# {number} "{_escape(f.presumed_file)}"')

    # -- macro definitions --------------------------------------------------------------------

    def _command_line_define(self, name: str, value: str) -> None:
        f = _File("<command-line>", [f"{name} {value}"], None)
        ln = f.read_line()
        assert ln is not None
        toks = [_Tok("ws", " ", t.line, t.col) if t.kind == "comment" else t for t in ln.toks]
        self._define(f, toks[0] if toks else _Tok("ws", "", 0, 0), toks)

    def _define(self, f: _File, name: _Tok, args: list[_Tok]) -> None:
        i = 0
        n = len(args)

        def skip_ws(k: int) -> int:
            while k < n and args[k].kind in _WS_KINDS:
                k += 1
            return k

        i = skip_ws(i)
        if i >= n:
            raise f.error("no macro name given in #define directive", name)
        mname = args[i]
        if mname.kind != "id":
            raise f.error("macro names must be identifiers", mname)
        if mname.text == "defined":
            raise f.error("'defined' cannot be used as a macro name", mname)
        i += 1
        params: list[str] | None = None
        variadic = False
        if i < n and args[i].text == "(":  # no space between name and '(': function-like
            params = []
            i = skip_ws(i + 1)
            if i < n and args[i].text == ")":
                i += 1
            else:
                while True:
                    i = skip_ws(i)
                    if i >= n:
                        raise f.error("missing ')' in macro parameter list", args[-1])
                    p = args[i]
                    if p.text == "...":
                        variadic = True
                        params.append("__VA_ARGS__")
                        i = skip_ws(i + 1)
                        if i >= n or args[i].text != ")":
                            raise f.error("missing ')' after '...'", args[i] if i < n else p)
                        i += 1
                        break
                    if p.kind != "id":
                        raise f.error(f"expected parameter name, found '{p.text}'", p)
                    if p.text in params:
                        raise f.error(f"duplicate macro parameter '{p.text}'", p)
                    params.append(p.text)
                    i = skip_ws(i + 1)
                    if i >= n:
                        raise f.error("missing ')' in macro parameter list", p)
                    sep = args[i]
                    i += 1
                    if sep.text == ")":
                        break
                    if sep.text != ",":
                        raise f.error(
                            f"expected ',' or ')' in parameter list, found '{sep.text}'", sep
                        )
        body: list[_Tok] = []
        for t in _strip(args[i:]):
            if t.kind in _WS_KINDS:
                if body[-1].kind != "ws":
                    body.append(_Tok("ws", " ", t.line, t.col))
            else:
                body.append(t)
        for end in (body[:1], body[-1:]):
            if end and end[0].kind == "punct" and end[0].text == "##":
                raise f.error("'##' cannot appear at either end of a macro expansion", end[0])
        if params is not None:
            for k, t in enumerate(body):
                if t.kind == "punct" and t.text == "#":
                    nxt = _nonws(body[k + 1 : k + 3])
                    if not nxt or nxt[0].kind != "id" or nxt[0].text not in params:
                        raise f.error("'#' is not followed by a macro parameter", t)
        self.macros[mname.text] = _Macro(mname.text, params, variadic, body)

    # -- macro expansion ----------------------------------------------------------------------

    def _expand(self, f: _File, toks: list[_Tok], *, source: bool) -> list[_Tok]:
        """Expand every macro in ``toks`` (rescanning replacements, hide sets against recursion).

        ``source``: the tokens end a source line, so an unfinished argument list raises
        ``_NeedMore`` (the caller appends the next line) instead of an error.
        """
        out = list(toks)
        i = 0
        while i < len(out):
            t = out[i]
            m = self.macros.get(t.text) if t.kind == "id" else None
            if m is None or t.text in t.hide:
                i += 1
                continue
            if m.builtin:
                out[i] = self._builtin(f, t)
                i += 1
                continue
            if m.params is None:
                out[i : i + 1] = self._subst(f, m, [], [], t, t.hide | {m.name})
                continue
            j = i + 1
            while j < len(out) and out[j].kind in _WS_KINDS:
                j += 1
            if j >= len(out) or out[j].text != "(":
                i += 1  # a function-like macro name without arguments is left alone
                continue
            args, k = self._collect(f, out, j, m, t, source)
            exp_args = [self._expand(f, a, source=False) for a in args]
            hide = (t.hide & out[k].hide) | {m.name}
            out[i : k + 1] = self._subst(f, m, args, exp_args, t, hide)
        return out

    def _collect(
        self, f: _File, toks: list[_Tok], lparen: int, m: _Macro, site: _Tok, source: bool
    ) -> tuple[list[list[_Tok]], int]:
        assert m.params is not None
        nparams = len(m.params)
        args: list[list[_Tok]] = []
        cur: list[_Tok] = []
        depth = 0
        for k in range(lparen + 1, len(toks)):
            t = toks[k]
            if t.kind == "punct" and t.text == ")" and depth == 0:
                args.append(_strip(cur))
                break
            if t.kind == "punct" and t.text == "," and depth == 0:
                if not (m.variadic and len(args) == nparams - 1):
                    args.append(_strip(cur))
                    cur = []
                    continue
            if t.kind == "punct" and t.text in ("(", ")"):
                depth += 1 if t.text == "(" else -1
            cur.append(_Tok("ws", " ", t.line, t.col) if t.kind == "comment" else t)
        else:
            if source:
                raise _NeedMore(site)
            raise f.error(f"unterminated argument list invoking macro '{m.name}'", site)
        given = len(args)
        if nparams == 0 and given == 1 and not args[0]:
            args = []
        elif m.variadic and given == nparams - 1:
            args.append([])
        elif given != nparams:
            if given < nparams:
                msg = f"macro '{m.name}' requires {nparams} arguments, but only {given} given"
            else:
                msg = f"macro '{m.name}' passed {given} arguments, but takes just {nparams}"
            raise f.error(msg, site)
        return args, k

    def _builtin(self, f: _File, t: _Tok) -> _Tok:
        if t.text == "__LINE__":
            return _Tok("num", str(t.line + 1 + f.line_delta), t.line, t.col, t.hide, True)
        return _Tok("str", f'"{_escape(f.presumed_file)}"', t.line, t.col, t.hide, True)

    def _subst(
        self,
        f: _File,
        m: _Macro,
        raw_args: list[list[_Tok]],
        exp_args: list[list[_Tok]],
        site: _Tok,
        hide: frozenset[str],
    ) -> list[_Tok]:
        """The replacement list of one invocation, with ``#`` and ``##`` applied."""
        index = {p: n for n, p in enumerate(m.params or [])}
        body = m.body

        def stamp(t: _Tok, own_pos: bool = False) -> _Tok:
            line, col = (t.line, t.col) if own_pos else (site.line, site.col)
            return _Tok(t.kind, t.text, line, col, t.hide | hide, True)

        def next_nonws(k: int) -> int:
            while k < len(body) and body[k].kind in _WS_KINDS:
                k += 1
            return k

        def stringify(k: int) -> tuple[_Tok, int]:
            """``#param`` at body[k]: the string token and the index after the parameter."""
            p = next_nonws(k + 1)
            parts: list[str] = []
            gap = False
            for a in raw_args[index[body[p].text]]:
                if a.kind in _WS_KINDS:
                    gap = True
                    continue
                if gap and parts:
                    parts.append(" ")
                parts.append(_escape(a.text) if a.kind == "str" else a.text)
                gap = False
            return _Tok("str", '"' + "".join(parts) + '"', site.line, site.col, hide, True), p + 1

        def is_param(t: _Tok) -> bool:
            return t.kind == "id" and t.text in index

        def is_op(t: _Tok, op: str) -> bool:
            return t.kind == "punct" and t.text == op

        res: list[_Tok] = []
        i = 0
        while i < len(body):
            t = body[i]
            if m.params is not None and is_op(t, "#"):
                tok, i = stringify(i)
                res.append(tok)
            elif is_op(t, "##"):
                while res and res[-1].kind == "ws":
                    res.pop()
                j = next_nonws(i + 1)
                r = body[j]
                if is_param(r):
                    right = [stamp(a, True) for a in raw_args[index[r.text]]]
                    i = j + 1
                elif m.params is not None and is_op(r, "#"):
                    tok, i = stringify(j)
                    right = [tok]
                else:
                    right = [stamp(r)]
                    i = j + 1
                left = res.pop() if res else None
                if left is None or left.kind == "mark":
                    res.extend(right or [_Tok("mark", "", site.line, site.col)])
                elif not right:
                    res.append(left)
                else:
                    res.append(self._paste(f, left, right[0], site, hide))
                    res.extend(right[1:])
            elif is_param(t):
                j = next_nonws(i + 1)
                if j < len(body) and is_op(body[j], "##"):
                    arg = [stamp(a, True) for a in raw_args[index[t.text]]]
                    res.extend(arg or [_Tok("mark", "", site.line, site.col)])
                else:
                    res.extend(stamp(a, True) for a in exp_args[index[t.text]])
                i += 1
            else:
                res.append(stamp(t))
                i += 1
        return [t for t in res if t.kind != "mark"]

    def _paste(self, f: _File, left: _Tok, right: _Tok, site: _Tok, hide: frozenset[str]) -> _Tok:
        text = left.text + right.text
        toks, open_comment, _ = _scan(text, False)
        if len(toks) != 1 or toks[0][0] == "comment" or open_comment:
            msg = f"pasting '{left.text}' and '{right.text}' does not give a valid preprocessing token"
            raise f.error(msg, site)
        return _Tok(toks[0][0], text, site.line, site.col, left.hide | right.hide | hide, True)


DirectiveRule = Callable[[_Preprocessor, "_DirectiveLine"], None]

CONDITIONAL_DIRECTIVES: dict[str, DirectiveRule] = {
    "if": _Preprocessor._if,
    "ifdef": _Preprocessor._if,
    "ifndef": _Preprocessor._if,
    "elif": _Preprocessor._else,
    "else": _Preprocessor._else,
    "endif": _Preprocessor._endif,
}
"""Directives that open, switch or close a conditional region (run in skipped regions too)."""

DIRECTIVES: dict[str, DirectiveRule] = {
    "define": lambda pp, dv: pp._define(dv.f, dv.name, dv.args),
    "undef": _Preprocessor._undef,
    "include": lambda pp, dv: pp._include(dv.f, dv.name, dv.args, dv.last, dv.depth),
    "error": _Preprocessor._diagnostic,
    "warning": _Preprocessor._diagnostic,
    "line": lambda pp, dv: pp._line(dv.f, dv.name, dv.args, dv.last),
    "pragma": _Preprocessor._pragma,
}
"""The other directives (run only in active regions); any other name is an error there."""


def _read_lines(path: str) -> list[str]:
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        return _split_lines(fh.read())


def _split_lines(text: str) -> list[str]:
    text = text.removeprefix("\ufeff")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln.removesuffix("\r") for ln in lines]


def preprocess_text(
    text: str,
    filename: str = "<string>",
    include_dirs: Sequence[str] = (),
    defines: Mapping[str, str] | None = None,
) -> PreprocessedSource:
    """Preprocess ``text`` as if it were the file ``filename``.

    ``defines`` works like ``-D``: name (or ``name(params)``) to replacement text; it adds to and
    overrides the predefined ``__TARGET_BMV2__`` and ``__TAILFABRIC__``.
    """
    pp = _Preprocessor(include_dirs, defines)
    real = None if filename.startswith("<") else os.path.realpath(filename)
    pp.run(_File(filename, _split_lines(text), real), 0)
    return PreprocessedSource("\n".join(pp.out) + "\n", pp.files)


def preprocess_file(
    path: str, include_dirs: Sequence[str] = (), defines: Mapping[str, str] | None = None
) -> PreprocessedSource:
    """Preprocess the file at ``path`` (see :func:`preprocess_text`)."""
    try:
        lines = _read_lines(path)
    except OSError as e:
        raise PreprocessError(f"cannot read '{path}': {e.strerror}") from None
    pp = _Preprocessor(include_dirs, defines)
    pp.run(_File(path, lines, os.path.realpath(path)), 0)
    return PreprocessedSource("\n".join(pp.out) + "\n", pp.files)
