"""P4-16 lexer: preprocessed text in, tokens with original-file positions out.

The preprocessor leaves gcc-style line markers (``# 12 "file.p4"``) that the lexer follows so every
token carries the file and line it came from. Integer literals are decoded here, including P4's
width-prefixed forms (``8w255``, ``4s-1`` is ``-`` then ``4s1``), bases (``0x 0b 0o 0d``) and ``_``
separators.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass

from switch.errors import LexError, Span


class Tok(enum.Enum):
    """Kinds of tokens. Keywords are IDENT tokens; the parser checks their text."""

    IDENT = "identifier"
    INT = "integer"
    STRING = "string"
    OP = "operator"
    EOF = "end of input"


IntLiteral = tuple[int, int | None, bool]
"""A decoded integer literal: (value, width or None, signed)."""


@dataclass(slots=True)
class Token:
    kind: Tok
    text: str
    span: Span
    value: IntLiteral | str | None = None  # INT: the decoded literal; STRING: the decoded text
    offset: int = 0  # character offset in the preprocessed text (adjacency checks, e.g. '>' '>')

    def __repr__(self) -> str:
        return f"Token({self.kind.name}, {self.text!r}, {self.span})"

    def int_literal(self) -> IntLiteral:
        """The decoded literal of an INT token."""
        assert isinstance(self.value, tuple), self
        return self.value


# Longest first, so that the regex alternation prefers them.
OPERATORS = [
    "{#}",  # an invalid header or header union: one token, no spaces inside
    "&&&",
    "|+|",
    "|-|",
    "<<=",
    ">>=",
    "...",  # a default initializer (P4-16 "Default values")
    "..",
    "++",
    "+:",  # an indexed slice e[lo +: w]
    "<<",
    "<=",
    ">=",
    "==",
    "!=",
    "&&",
    "||",
    "+=",
    "-=",
    "*=",
    "/=",
    "%=",
    "&=",
    "|=",
    "^=",
    "+",
    "-",
    "*",
    "/",
    "%",
    "&",
    "|",
    "^",
    "~",
    "!",
    "?",
    ":",
    ".",
    ",",
    ";",
    "=",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "<",
    ">",
    "@",
]
# '>>' is deliberately not a token: 'bit<bit<8>>' closes two angle brackets. The parser joins
# two adjacent '>' tokens into a shift.

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>[ \t\r\f\v]+)
  | (?P<nl>\n)
  | (?P<lcomment>//[^\n]*)
  | (?P<bcomment>/\*)
  | (?P<marker>^\#[ \t]*(?:line[ \t]+)?(?P<mline>\d+)(?:[ \t]+"(?P<mfile>(?:[^"\\]|\\.)*)")?[^\n]*)
  | (?P<int>\d[0-9a-zA-Z_]*)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<op>"""
    + "|".join(re.escape(o) for o in OPERATORS)
    + r""")
    """,
    re.VERBOSE | re.MULTILINE,
)

_WIDTH_RE = re.compile(r"^(\d+)([ws])(.+)$")


def _parse_int_body(body: str) -> int | None:
    body = body.replace("_", "")
    base = 10
    low = body.lower()
    if low.startswith("0x"):
        base, body = 16, body[2:]
    elif low.startswith("0b"):
        base, body = 2, body[2:]
    elif low.startswith("0o"):
        base, body = 8, body[2:]
    elif low.startswith("0d"):
        base, body = 10, body[2:]
    if not body:
        return None
    try:
        return int(body, base)
    except ValueError:
        return None


def decode_int(text: str) -> IntLiteral | None:
    """Decode a P4 integer literal into (value, width or None, signed); None if malformed."""
    m = _WIDTH_RE.match(text)
    if m and not text.lower().startswith(("0x", "0b", "0o", "0d")):
        width = int(m.group(1))
        value = _parse_int_body(m.group(3))
        if value is None:
            return None
        return value, width, m.group(2) == "s"
    value = _parse_int_body(text)
    if value is None:
        return None
    return value, None, False


class Lexer:
    """Turns preprocessed text into tokens; ``files`` maps file names to their original lines."""

    def __init__(
        self, text: str, filename: str = "<string>", files: Mapping[str, list[str]] | None = None
    ) -> None:
        self.text = text
        self.files = dict(files or {})
        self.filename = filename
        if filename not in self.files:
            self.files[filename] = text.split("\n")

    def _line_text(self, file: str, line: int, fallback: str) -> str:
        lines = self.files.get(file)
        if lines is not None and 1 <= line <= len(lines):
            return lines[line - 1]
        return fallback

    def tokenize(self) -> list[Token]:
        text = self.text
        tokens: list[Token] = []
        pos = 0
        file = self.filename
        line = 1
        line_start = 0  # offset in text of the current output line
        n = len(text)

        def span_at(offset: int) -> Span:
            end = text.find("\n", line_start)
            raw = text[line_start : end if end >= 0 else n]
            return Span(file, line, offset - line_start + 1, self._line_text(file, line, raw))

        while pos < n:
            m = _TOKEN_RE.match(text, pos)
            if m is None:
                raise LexError(f"unexpected character {text[pos]!r}", span_at(pos))
            kind = m.lastgroup
            if kind == "mfile" or kind == "mline":
                kind = "marker"
            start = pos
            pos = m.end()
            if kind == "ws" or kind == "lcomment":
                continue
            if kind == "nl":
                line += 1
                line_start = pos
                continue
            if kind == "marker":
                # '# 12 "file"': the next line is line 12 of file.
                line = int(m.group("mline")) - 1
                if m.group("mfile") is not None:
                    file = m.group("mfile").replace('\\"', '"').replace("\\\\", "\\")
                continue
            if kind == "bcomment":
                end = text.find("*/", pos)
                if end < 0:
                    raise LexError("unterminated comment", span_at(start))
                body = text[pos:end]
                nls = body.count("\n")
                if nls:
                    line += nls
                    line_start = pos + body.rfind("\n") + 1
                pos = end + 2
                continue
            tok_text = m.group(0)
            span = span_at(start)
            if kind == "int":
                decoded = decode_int(tok_text)
                if decoded is None:
                    raise LexError(f"malformed integer literal {tok_text!r}", span)
                if decoded[1] is not None and decoded[1] == 0:
                    raise LexError("integer literal width must be positive", span)
                tokens.append(Token(Tok.INT, tok_text, span, decoded, start))
            elif kind == "ident":
                tokens.append(Token(Tok.IDENT, tok_text, span, None, start))
            elif kind == "string":
                body = tok_text[1:-1]
                value = re.sub(
                    r"\\(.)", lambda mm: {"n": "\n", "t": "\t"}.get(mm.group(1), mm.group(1)), body
                )
                tokens.append(Token(Tok.STRING, tok_text, span, value, start))
            else:
                tokens.append(Token(Tok.OP, tok_text, span, None, start))
        end_span = Span(file, line, pos - line_start + 1, "")
        tokens.append(Token(Tok.EOF, "", end_span, None, n))
        return tokens
