"""Recursive-descent parser for P4-16: tokens in, :mod:`switch.lang.ast` out.

Like p4c, the parser keeps track of which identifiers name types (declarations precede uses in
P4-16), which settles the classic ambiguities: ``(T) x`` is a cast only if ``T`` is a type,
``T x;`` is a declaration, ``f<T>(x)`` a generic call. Operator precedence follows the P4-16
specification, where bitwise operators bind tighter than comparisons.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from switch.errors import ParseError, Span
from switch.lang import ast
from switch.lang.lexer import Tok, Token

R = TypeVar("R")

BASE_TYPES = {"bit", "int", "varbit", "bool", "error", "string", "match_kind", "void"}

# Binary operators by precedence level, lowest first (P4-16 spec, "Operator precedence").
BINARY_LEVELS: list[tuple[str, ...]] = [
    ("||",),
    ("&&",),
    ("==", "!="),
    ("<", ">", "<=", ">="),
    ("|",),
    ("^",),
    ("&",),
    ("<<", ">>"),
    ("++", "+", "-", "|+|", "|-|"),
    ("*", "/", "%"),
]

COMPOUND_ASSIGN = {
    "+=": "+",
    "-=": "-",
    "*=": "*",
    "/=": "/",
    "%=": "%",
    "&=": "&",
    "|=": "|",
    "^=": "^",
    "<<=": "<<",
    ">>=": ">>",
}


class _Backtrack(Exception):
    pass


@dataclass
class _BlockParts:
    """What a parser and a control declaration have in common (their body items aside)."""

    name: Token
    type_params: list[str]
    params: list[ast.Param]
    ctor_params: list[ast.Param] | None = None  # None: a type declaration ('parser P(...);')
    locals: list[ast.Node] = field(default_factory=list)
    close: Token | None = None  # the closing brace of the body


class Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.toks = tokens
        self.pos = 0
        self.type_names: set[str] = {"packet_in", "packet_out"}
        self.scoped_types: list[set[str]] = []
        self.speculating = 0
        # top-level declarations by their first keyword (anything else: a function, an
        # instantiation or a variable)
        self.declaration_parsers: dict[str, Callable[[], ast.Node]] = {
            "const": self.parse_const_decl,
            "typedef": self.parse_typedef,
            "type": self.parse_typedef,
            "header": self.parse_header,
            "header_union": self.parse_header,
            "struct": self.parse_header,
            "enum": self.parse_enum,
            "error": self.parse_error_decl,
            "match_kind": self.parse_match_kind,
            "extern": self.parse_extern,
            "parser": self.parse_parser,
            "control": self.parse_control,
            "package": self.parse_package,
            "action": self.parse_action,
        }
        # statements by their first keyword (anything else: a declaration, an assignment or a
        # call)
        self.statement_parsers: dict[str, Callable[[list[ast.Annotation]], ast.Stmt]] = {
            "if": self._parse_if,
            "exit": self._parse_exit,
            "return": self._parse_return,
            "switch": lambda anns: self.parse_switch(),
            "const": self._parse_const_stmt,
            "for": self._parse_for,
            "break": self._parse_break,
            "continue": self._parse_continue,
        }

    # -- token helpers -------------------------------------------------------------------

    @property
    def tok(self) -> Token:
        return self.toks[self.pos]

    def peek(self, k: int = 1) -> Token:
        i = min(self.pos + k, len(self.toks) - 1)
        return self.toks[i]

    def at(self, text: str) -> bool:
        t = self.tok
        return t.text == text and t.kind in (Tok.OP, Tok.IDENT)

    def at_op(self, text: str) -> bool:
        return self.tok.kind is Tok.OP and self.tok.text == text

    def advance(self) -> Token:
        t = self.tok
        if t.kind is not Tok.EOF:
            self.pos += 1
        return t

    def error(self, msg: str, tok: Token | None = None) -> ParseError:
        if self.speculating:
            raise _Backtrack()
        t = tok or self.tok
        return ParseError(f"syntax error: {msg}", t.span)

    def describe(self, t: Token) -> str:
        if t.kind is Tok.EOF:
            return "end of input"
        return f"'{t.text}'"

    def expect(self, text: str, what: str | None = None) -> Token:
        if self.tok.text == text and self.tok.kind in (Tok.OP, Tok.IDENT):
            return self.advance()
        raise self.error(
            f"expected '{text}'{' ' + what if what else ''}, found {self.describe(self.tok)}"
        )

    def accept(self, text: str) -> Token | None:
        if self.tok.text == text and self.tok.kind in (Tok.OP, Tok.IDENT):
            return self.advance()
        return None

    def ident(self, what: str = "identifier") -> Token:
        if self.tok.kind is Tok.IDENT:
            return self.advance()
        raise self.error(f"expected {what}, found {self.describe(self.tok)}")

    def is_type_name(self, name: str) -> bool:
        if name in self.type_names:
            return True
        return any(name in s for s in self.scoped_types)

    def speculate(self, fn: Callable[[], R]) -> R | None:
        saved = self.pos
        self.speculating += 1
        try:
            return fn()
        except (_Backtrack, ParseError):
            self.pos = saved
            return None
        finally:
            self.speculating -= 1

    # -- program -------------------------------------------------------------------------

    def parse_program(self) -> ast.Program:
        decls: list[ast.Node] = []
        start = self.tok.span
        while self.tok.kind is not Tok.EOF:
            if self.accept(";"):
                continue
            decls.append(self.parse_declaration())
        return ast.Program(decls, span=start)

    def parse_annotations(self) -> list[ast.Annotation]:
        anns: list[ast.Annotation] = []
        while self.at_op("@"):
            at = self.advance()
            name = self.ident("annotation name")
            toks: list[Token] = []
            if self.at_op("(") or self.at_op("["):
                open_t = self.advance().text
                close_t = ")" if open_t == "(" else "]"
                depth = 1
                while True:
                    t = self.tok
                    if t.kind is Tok.EOF:
                        raise self.error(f"unterminated annotation @{name.text}", at)
                    if t.kind is Tok.OP and t.text in ("(", "["):
                        depth += 1
                    elif t.kind is Tok.OP and t.text in (")", "]"):
                        depth -= 1
                        if depth == 0:
                            if t.text != close_t:
                                raise self.error(f"expected '{close_t}'", t)
                            self.advance()
                            break
                    toks.append(self.advance())
            anns.append(ast.Annotation(name.text, toks, span=at.span))
        return anns

    def parse_declaration(self) -> ast.Node:
        anns = self.parse_annotations()
        t = self.tok
        kw = t.text if t.kind is Tok.IDENT else ""
        handler = self.declaration_parsers.get(kw)
        if handler is not None and not (kw == "error" and self.peek().text == "."):
            decl = handler()
        else:
            decl = self.parse_function_or_instantiation()
        if isinstance(decl, (ast.Decl, ast.VarDecl, ast.ConstDecl)):
            decl.annotations = anns + decl.annotations
        return decl

    # -- types ---------------------------------------------------------------------------

    def starts_type(self) -> bool:
        t = self.tok
        if t.kind is not Tok.IDENT:
            return False
        if t.text in BASE_TYPES or t.text == "tuple":
            if t.text == "error" and self.peek().text == ".":
                return False
            return True
        return self.is_type_name(t.text)

    def parse_type(self) -> ast.TypeRef:
        t = self.tok
        if t.kind is not Tok.IDENT:
            raise self.error(f"expected a type, found {self.describe(t)}")
        typ: ast.TypeRef
        if t.text in ("bit", "int", "varbit"):
            self.advance()
            width: ast.Expr | None = None
            if self.accept("<"):
                if self.at_op("("):
                    self.advance()
                    width = self.parse_expression()
                    self.expect(")")
                else:
                    width = self.parse_primary()
                self.expect(">", "closing the type's width")
            elif t.text == "varbit":
                raise self.error("varbit needs a maximum width: varbit<W>")
            typ = ast.BaseTypeRef(t.text, width, span=t.span)
        elif t.text in ("bool", "error", "string", "match_kind", "void"):
            self.advance()
            typ = ast.BaseTypeRef(t.text, span=t.span)
        elif t.text == "tuple":
            self.advance()
            self.expect("<")
            elems = [self.parse_type()]
            while self.accept(","):
                elems.append(self.parse_type())
            self.expect(">")
            typ = ast.TupleTypeRef(elems, span=t.span)
        elif t.text == "_":
            self.advance()
            typ = ast.DontCareTypeRef(span=t.span)
        else:
            if not self.is_type_name(t.text):
                raise self.error(f"unknown type '{t.text}'")
            self.advance()
            args: list[ast.TypeRef] = []
            if self.at_op("<") and self.looks_like_type_args():
                args = self.parse_type_args()
            typ = ast.NamedTypeRef(t.text, args, span=t.span)
        while self.at_op("["):
            self.advance()
            size = self.parse_expression()
            self.expect("]")
            typ = ast.StackTypeRef(typ, size, span=t.span)
        return typ

    def looks_like_type_args(self, k: int = 1) -> bool:
        """At ``<`` (``k`` tokens before it: 1): does a type argument follow?"""
        nxt = self.peek(k)
        return (
            nxt.kind is Tok.IDENT
            and (
                nxt.text in BASE_TYPES or nxt.text in ("tuple", "_") or self.is_type_name(nxt.text)
            )
            or (nxt.kind is Tok.INT)
        )

    def parse_type_args(self) -> list[ast.TypeRef]:
        self.expect("<")
        args: list[ast.TypeRef] = []
        if not self.at_op(">"):
            args.append(self.parse_type_or_int())
            while self.accept(","):
                args.append(self.parse_type_or_int())
        self.expect(">", "closing the type arguments")
        return args

    def parse_type_or_int(self) -> ast.TypeRef:
        if self.tok.kind is Tok.INT:
            t = self.advance()
            # an integer used as a type argument (p4c allows it for generic widths): treat as bit<n>
            width = ast.IntLit(t.int_literal()[0], span=t.span)
            return ast.BaseTypeRef("bit", width, span=t.span)
        return self.parse_type()

    def parse_type_params(self) -> list[str]:
        names: list[str] = []
        if self.accept("<"):
            names.append(self.ident("type parameter").text)
            while self.accept(","):
                names.append(self.ident("type parameter").text)
            self.expect(">")
        return names

    # -- type declarations ---------------------------------------------------------------

    def parse_const_decl(self) -> ast.ConstDecl:
        self.expect("const")
        typ = self.parse_type()
        name = self.ident("constant name")
        self.expect("=")
        value = self.parse_expression()
        self.expect(";")
        return ast.ConstDecl(typ, name.text, value, span=name.span)

    def parse_typedef(self) -> ast.TypedefDecl:
        kw = self.advance()
        typ = self.parse_type()
        name = self.ident("type name")
        self.expect(";")
        self.type_names.add(name.text)
        return ast.TypedefDecl(name.text, typ, kw.text == "type", span=name.span)

    def parse_header(self) -> ast.Decl:
        kw = self.advance()
        name = self.ident(f"{kw.text} name")
        self.type_names.add(name.text)
        tparams = self.parse_type_params()
        self.scoped_types.append(set(tparams))
        try:
            self.expect("{")
            fields: list[ast.FieldDecl] = []
            while not self.at_op("}"):
                anns = self.parse_annotations()
                ftype = self.parse_type()
                fname = self.ident("field name")
                self.expect(";")
                fields.append(ast.FieldDecl(ftype, fname.text, anns, span=fname.span))
            self.expect("}")
        finally:
            self.scoped_types.pop()
        cls = {
            "header": ast.HeaderDecl,
            "header_union": ast.HeaderUnionDecl,
            "struct": ast.StructDecl,
        }[kw.text]
        return cls(name.text, fields, tparams, span=name.span)

    def parse_enum(self) -> ast.EnumDecl:
        self.expect("enum")
        underlying: ast.TypeRef | None = None
        if self.tok.text in ("bit", "int") and self.peek().text == "<":
            underlying = self.parse_type()
        name = self.ident("enum name")
        self.type_names.add(name.text)
        self.expect("{")
        members: list[tuple[str, ast.Expr | None, Span]] = []
        while not self.at_op("}"):
            self.parse_annotations()
            m = self.ident("enum member")
            value = None
            if self.accept("="):
                value = self.parse_expression()
            members.append((m.text, value, m.span))
            if not self.accept(","):
                break
        self.expect("}")
        return ast.EnumDecl(name.text, members, underlying, span=name.span)

    def parse_member_list(self) -> list[tuple[str, Span]]:
        self.expect("{")
        members: list[tuple[str, Span]] = []
        while not self.at_op("}"):
            m = self.ident()
            members.append((m.text, m.span))
            if not self.accept(","):
                break
        self.expect("}")
        return members

    def parse_error_decl(self) -> ast.ErrorDecl:
        kw = self.expect("error")
        return ast.ErrorDecl("error", self.parse_member_list(), span=kw.span)

    def parse_match_kind(self) -> ast.MatchKindDecl:
        kw = self.expect("match_kind")
        return ast.MatchKindDecl("match_kind", self.parse_member_list(), span=kw.span)

    # -- parameters ----------------------------------------------------------------------

    def parse_params(self) -> list[ast.Param]:
        self.expect("(")
        params: list[ast.Param] = []
        if not self.at_op(")"):
            params.append(self.parse_param())
            while self.accept(","):
                params.append(self.parse_param())
        self.expect(")")
        return params

    def parse_param(self) -> ast.Param:
        anns = self.parse_annotations()
        direction = ""
        if self.tok.text in ("in", "out", "inout") and self.tok.kind is Tok.IDENT:
            direction = self.advance().text
        typ = self.parse_type()
        name = self.ident("parameter name")
        default = None
        if self.accept("="):
            default = self.parse_expression()
        return ast.Param(direction, typ, name.text, default, anns, span=name.span)

    # -- externs, packages, functions ------------------------------------------------------

    def parse_extern(self) -> ast.Node:
        self.expect("extern")
        # 'extern T f<...>(...);' (a function) or 'extern Name<...> { methods }'
        if self.tok.kind is Tok.IDENT and (
            self.peek().text == "{" or (self.peek().text == "<" and self._generic_then_brace())
        ):
            name = self.advance()
            self.type_names.add(name.text)
            tparams = self.parse_type_params()
            self.scoped_types.append(set(tparams))
            try:
                self.expect("{")
                methods: list[ast.MethodDecl] = []
                while not self.at_op("}"):
                    methods.append(self.parse_method(name.text))
                self.expect("}")
            finally:
                self.scoped_types.pop()
            return ast.ExternDecl(name.text, tparams, methods, span=name.span)
        # extern function: ret name<T>(params);
        ret, name_tok, tparams = self._parse_ret_and_name()
        self.scoped_types.append(set(tparams))
        try:
            params = self.parse_params()
        finally:
            self.scoped_types.pop()
        self.expect(";")
        return ast.ExternFuncDecl(name_tok.text, ret, tparams, params, span=name_tok.span)

    def _generic_then_brace(self) -> bool:
        # after 'extern Name', is it 'Name<...> {' ?
        i = self.pos + 1
        depth = 0
        while i < len(self.toks):
            t = self.toks[i]
            if t.text == "<":
                depth += 1
            elif t.text == ">":
                depth -= 1
                if depth == 0:
                    return self.toks[i + 1].text == "{"
            elif t.text in (";", "{", "(", ")"):
                return False
            i += 1
        return False

    def _parse_ret_and_name(self) -> tuple[ast.TypeRef, Token, list[str]]:
        # The return type may mention the function's own type parameters ('T lookahead<T>()'),
        # which are declared after the name: look ahead for them first.
        tparams = self._peek_function_type_params()
        self.scoped_types.append(set(tparams))
        try:
            ret = self.parse_type()
        finally:
            self.scoped_types.pop()
        name = self.ident("function name")
        tparams = self.parse_type_params()
        return ret, name, tparams

    def _peek_function_type_params(self) -> list[str]:
        i = self.pos
        depth = 0
        while i < len(self.toks) - 2:
            t = self.toks[i]
            if t.text == "<":
                depth += 1
            elif t.text == ">":
                depth -= 1
            elif depth == 0 and t.kind is Tok.IDENT and self.toks[i + 1].text == "<":
                # name< T, U >(
                j = i + 2
                names: list[str] = []
                while j < len(self.toks) and self.toks[j].kind is Tok.IDENT:
                    names.append(self.toks[j].text)
                    if self.toks[j + 1].text == ",":
                        j += 2
                        continue
                    if self.toks[j + 1].text == ">" and self.toks[j + 2].text == "(":
                        return names
                    break
            elif t.text in ("(", ";", "{"):
                return []
            i += 1
        return []

    def parse_method(self, extern_name: str) -> ast.MethodDecl:
        anns = self.parse_annotations()
        is_abstract = bool(self.accept("abstract"))
        if self.tok.text == extern_name and self.peek().text == "(":
            name = self.advance()
            params = self.parse_params()
            self.expect(";")
            m = ast.MethodDecl(name.text, None, [], params, span=name.span)
        else:
            ret, name, tparams = self._parse_ret_and_name()
            self.scoped_types.append(set(tparams))
            try:
                params = self.parse_params()
            finally:
                self.scoped_types.pop()
            self.expect(";")
            m = ast.MethodDecl(name.text, ret, tparams, params, is_abstract, span=name.span)
        m.annotations = anns
        return m

    def parse_package(self) -> ast.PackageDecl:
        self.expect("package")
        name = self.ident("package name")
        self.type_names.add(name.text)
        tparams = self.parse_type_params()
        self.scoped_types.append(set(tparams))
        try:
            params = self.parse_params()
        finally:
            self.scoped_types.pop()
        self.expect(";")
        return ast.PackageDecl(name.text, tparams, params, span=name.span)

    def parse_function_or_instantiation(self) -> ast.Node:
        # a generic function's return type may be one of its type parameters ('T f<T>(...)')
        tparams = self._peek_function_type_params()
        self.scoped_types.append(set(tparams))
        try:
            if not self.starts_type():
                if self.tok.kind is Tok.IDENT:
                    raise self.error(f"unknown type '{self.tok.text}'")
                raise self.error(f"expected a declaration, found {self.describe(self.tok)}")
            # Instantiation: Type(args) name;  Function: RetType name(params) { ... }
            # Variable: Type name [= init];
            save = self.pos
            typ = self.parse_type()
        finally:
            self.scoped_types.pop()
        if self.at_op("("):
            args = self.parse_args()
            name = self.ident("instance name")
            self.expect(";")
            return ast.Instantiation(name.text, typ, args, span=name.span)
        name = self.ident("declaration name")
        if self.at_op("<") or self.at_op("("):
            self.pos = save
            ret, name, tparams = self._parse_ret_and_name()
            self.scoped_types.append(set(tparams))
            try:
                params = self.parse_params()
                body = self.parse_block()
            finally:
                self.scoped_types.pop()
            return ast.FunctionDecl(name.text, ret, tparams, params, body, span=name.span)
        init = None
        if self.accept("="):
            init = self.parse_expression()
        self.expect(";")
        return ast.VarDecl(typ, name.text, init, span=name.span)

    # -- parsers -----------------------------------------------------------------------

    def parse_parser(self) -> ast.Node:
        states: list[ast.ParserState] = []

        def item(anns: list[ast.Annotation]) -> ast.Node | None:
            if self.at("state"):
                st = self.parse_state()
                st.annotations = anns
                states.append(st)
                return None
            if self.at("value_set"):
                return self.parse_value_set(anns)
            return self._parse_block_local(anns)

        b = self._parse_block_declaration("parser", item)
        name, span = b.name.text, b.name.span
        if b.ctor_params is None:
            return ast.ParserTypeDecl(name, b.type_params, b.params, span=span)
        return ast.ParserDecl(
            name, b.type_params, b.params, b.ctor_params, b.locals, states, span=span
        )

    def _parse_block_declaration(
        self, keyword: str, parse_item: Callable[[list[ast.Annotation]], ast.Node | None]
    ) -> _BlockParts:
        """``parser``/``control`` NAME<T>(params) then ``;`` or (ctor params) { items }.

        ``parse_item`` parses one body item (after its annotations) and returns it if it is a
        local declaration.
        """
        self.expect(keyword)
        name = self.ident(f"{keyword} name")
        self.type_names.add(name.text)
        tparams = self.parse_type_params()
        self.scoped_types.append(set(tparams))
        try:
            b = _BlockParts(name, tparams, self.parse_params())
            if self.accept(";"):
                return b
            b.ctor_params = self.parse_params() if self.at_op("(") else []
            self.expect("{")
            while not self.at_op("}"):
                loc = parse_item(self.parse_annotations())
                if loc is not None:
                    b.locals.append(loc)
            b.close = self.expect("}")
        finally:
            self.scoped_types.pop()
        return b

    def _parse_block_local(self, anns: list[ast.Annotation]) -> ast.Node:
        """A constant, variable or instance declared in a parser or control body."""
        d = self.parse_const_decl() if self.at("const") else self.parse_local_declaration()
        if isinstance(d, (ast.Decl, ast.VarDecl, ast.ConstDecl)):
            d.annotations = anns + d.annotations
        return d

    def parse_value_set(self, anns: list[ast.Annotation]) -> ast.ValueSetDecl:
        self.expect("value_set")
        self.expect("<")
        elem = self.parse_type()
        self.expect(">")
        self.expect("(")
        size = self.parse_expression()
        self.expect(")")
        name = self.ident("value set name")
        self.expect(";")
        return ast.ValueSetDecl(name.text, elem, size, annotations=anns, span=name.span)

    def parse_state(self) -> ast.ParserState:
        self.expect("state")
        name = self.ident("state name")
        self.expect("{")
        stmts: list[ast.Stmt] = []
        transition: ast.Transition | None = None
        while not self.at_op("}"):
            if self.at("transition"):
                transition = self.parse_transition()
                break
            stmts.append(self.parse_statement())
        self.expect("}", f"closing state '{name.text}'")
        return ast.ParserState(name.text, stmts, transition, span=name.span)

    def parse_transition(self) -> ast.Transition:
        kw = self.expect("transition")
        if self.at("select"):
            self.advance()
            self.expect("(")
            exprs = [self.parse_expression()]
            while self.accept(","):
                exprs.append(self.parse_expression())
            self.expect(")")
            self.expect("{")
            cases: list[ast.SelectCase] = []
            while not self.at_op("}"):
                ks_start = self.tok
                keyset = self.parse_keyset()
                self.expect(":")
                st = self.ident("state name")
                self.expect(";")
                cases.append(ast.SelectCase(keyset, st.text, st.span, span=ks_start.span))
            self.expect("}")
            self.accept(";")
            return ast.Transition(None, exprs, cases, span=kw.span)
        st = self.ident("state name")
        self.expect(";")
        return ast.Transition(st.text, span=st.span)

    def parse_keyset(self) -> ast.Expr:
        """A keyset: a simple keyset or a parenthesised tuple of them."""
        if self.at_op("("):
            save = self.pos
            start = self.advance()
            items = [self.parse_simple_keyset()]
            if self.at_op(","):
                while self.accept(","):
                    items.append(self.parse_simple_keyset())
                self.expect(")")
                return ast.ListExpr(items, span=start.span)
            self.pos = save
        return self.parse_simple_keyset()

    def parse_simple_keyset(self) -> ast.Expr:
        t = self.tok
        if t.text == "default" and t.kind is Tok.IDENT:
            self.advance()
            return ast.Default(span=t.span)
        if t.text == "_" and t.kind is Tok.IDENT:
            self.advance()
            return ast.DontCare(span=t.span)
        e = self.parse_expression()
        if self.accept("&&&"):
            m = self.parse_expression()
            return ast.Mask(e, m, span=t.span)
        if self.accept(".."):
            hi = self.parse_expression()
            return ast.Range(e, hi, span=t.span)
        return e

    # -- controls ------------------------------------------------------------------------

    def parse_control(self) -> ast.Node:
        bodies: list[ast.Block] = []

        def item(anns: list[ast.Annotation]) -> ast.Node | None:
            if self.at("apply") and self.peek().text == "{":
                self.advance()
                bodies.append(self.parse_block())
                return None
            if self.at("action") or self.at("table"):
                d: ast.Decl = self.parse_action() if self.at("action") else self.parse_table()
                d.annotations = anns + d.annotations
                return d
            return self._parse_block_local(anns)

        b = self._parse_block_declaration("control", item)
        name, span = b.name.text, b.name.span
        if b.ctor_params is None:
            return ast.ControlTypeDecl(name, b.type_params, b.params, span=span)
        if not bodies:
            assert b.close is not None
            raise ParseError(f"control '{name}' has no apply block", b.close.span)
        return ast.ControlDecl(
            name, b.type_params, b.params, b.ctor_params, b.locals, bodies[-1], span=span
        )

    def parse_local_declaration(self) -> ast.Node:
        """A variable declaration or an instantiation inside a parser/control body."""
        if not self.starts_type():
            if self.tok.kind is Tok.IDENT:
                raise self.error(f"unknown type '{self.tok.text}'")
            raise self.error(f"expected a declaration, found {self.describe(self.tok)}")
        typ = self.parse_type()
        if self.at_op("("):
            args = self.parse_args()
            name = self.ident("instance name")
            self.expect(";")
            return ast.Instantiation(name.text, typ, args, span=name.span)
        name = self.ident("variable name")
        init = None
        if self.accept("="):
            init = self.parse_expression()
        self.expect(";")
        return ast.VarDecl(typ, name.text, init, span=name.span)

    def parse_action(self) -> ast.ActionDecl:
        self.expect("action")
        name = self.ident("action name")
        params = self.parse_params()
        body = self.parse_block()
        return ast.ActionDecl(name.text, params, body, span=name.span)

    def parse_table(self) -> ast.TableDecl:
        self.expect("table")
        name = self.ident("table name")
        self.expect("{")
        props: list[ast.TableProperty] = []
        while not self.at_op("}"):
            anns = self.parse_annotations()
            is_const = bool(self.accept("const"))
            pname = self.ident("table property")
            prop = ast.TableProperty(pname.text, is_const, annotations=anns, span=pname.span)
            if pname.text == "key":
                self.expect("=")
                self.expect("{")
                keys: list[ast.KeyElement] = []
                while not self.at_op("}"):
                    e = self.parse_expression()
                    self.expect(":")
                    mk = self.ident("match kind")
                    kanns = self.parse_annotations()
                    self.expect(";")
                    keys.append(ast.KeyElement(e, mk.text, kanns, span=mk.span))
                self.expect("}")
                self.accept(";")
                prop.keys = keys
            elif pname.text == "actions":
                self.expect("=")
                self.expect("{")
                acts: list[ast.ActionRefSyntax] = []
                while not self.at_op("}"):
                    aanns = self.parse_annotations()
                    ref = self.parse_action_ref()
                    ref.annotations = aanns
                    acts.append(ref)
                    if not self.accept(";"):
                        self.accept(",")
                self.expect("}")
                self.accept(";")
                prop.actions = acts
            elif pname.text == "entries":
                self.expect("=")
                self.expect("{")
                entries: list[ast.EntrySyntax] = []
                while not self.at_op("}"):
                    entries.append(self.parse_entry())
                self.expect("}")
                self.accept(";")
                prop.entries = entries
            else:
                self.expect("=")
                prop.value = self.parse_expression()
                self.expect(";")
            props.append(prop)
        self.expect("}")
        return ast.TableDecl(name.text, props, span=name.span)

    def parse_action_ref(self) -> ast.ActionRefSyntax:
        start = self.tok
        top = bool(self.accept("."))
        n = self.ident("action name")
        expr: ast.Expr = ast.Name(n.text, top, span=n.span)
        while self.at_op(".") and self.peek().kind is Tok.IDENT:
            self.advance()
            m = self.ident()
            expr = ast.Member(expr, m.text, span=m.span)
        args: list[ast.Arg] = []
        if self.at_op("("):
            args = self.parse_args()
        return ast.ActionRefSyntax(expr, args, span=start.span)

    def parse_entry(self) -> ast.EntrySyntax:
        anns = self.parse_annotations()
        start = self.tok
        is_const = bool(self.accept("const"))
        priority = None
        if self.at("priority") and self.peek().text == "=":
            self.advance()
            self.advance()
            priority = self.parse_expression()
            self.expect(":")
        keyset = self.parse_keyset()
        items = keyset.items if isinstance(keyset, ast.ListExpr) else [keyset]
        self.expect(":")
        action = self.parse_action_ref()
        anns = anns + self.parse_annotations()  # `... : a(1) @priority(3);` (p4c's form)
        self.expect(";")
        return ast.EntrySyntax(items, action, priority, anns, is_const, span=start.span)

    # -- statements ----------------------------------------------------------------------

    def parse_block(self) -> ast.Block:
        start = self.expect("{")
        stmts: list[ast.Stmt] = []
        while not self.at_op("}"):
            if self.tok.kind is Tok.EOF:
                raise self.error("expected '}' before end of input", self.tok)
            stmts.append(self.parse_statement())
        self.expect("}")
        return ast.Block(stmts, span=start.span)

    def parse_statement(self) -> ast.Stmt:
        anns = self.parse_annotations()
        return self._parse_simple_statement(anns, ";")

    def _parse_simple_statement(self, anns: list[ast.Annotation], end: str | None) -> ast.Stmt:
        """A statement; a declaration, assignment or call ends with ``end`` (consumed), or,
        with ``end`` None, at whatever follows it (the parts of a ``for`` header)."""
        t = self.tok
        if t.kind is Tok.OP and end is not None:
            if t.text == "{":
                return self.parse_block()
            if t.text == ";":
                self.advance()
                return ast.Empty(span=t.span)
        if t.kind is Tok.IDENT:
            keyword_parser = self.statement_parsers.get(t.text)
            if keyword_parser is not None and end is not None:
                return keyword_parser(anns)
            nxt = self.peek()
            if (
                not self.starts_type()
                and nxt.kind is Tok.IDENT
                and self.peek(2).text in ("=", ";")
                and t.text not in BASE_TYPES
            ):
                raise ParseError(f"unknown type '{t.text}'", t.span)
            if self.starts_type() and self._is_declaration():
                typ = self.parse_type()
                name = self.ident("variable name")
                init = None
                if self.accept("="):
                    init = self.parse_expression()
                self._end(end)
                return ast.VarDecl(typ, name.text, init, anns, span=name.span)
        # assignment or call
        lhs = self.parse_expression()
        if self.at_op("="):
            self.advance()
            rhs = self.parse_expression()
            self._end(end)
            return ast.Assign(lhs, rhs, span=lhs.span)
        if self.tok.kind is Tok.OP and self.tok.text in COMPOUND_ASSIGN:
            op = COMPOUND_ASSIGN[self.advance().text]
            rhs = self.parse_expression()
            self._end(end)
            return ast.Assign(lhs, ast.Binary(op, lhs, rhs, span=lhs.span), span=lhs.span)
        if (
            self.at_op(">")
            and self.peek().text == ">="
            and self.peek().offset == self.tok.offset + 1
        ):
            self.advance()
            self.advance()
            rhs = self.parse_expression()
            self._end(end)
            return ast.Assign(lhs, ast.Binary(">>", lhs, rhs, span=lhs.span), span=lhs.span)
        if isinstance(lhs, ast.Call):
            self._end(end)
            return ast.CallStmt(lhs, span=lhs.span)
        raise self.error(
            f"expected '=' or ';' after expression, found {self.describe(self.tok)}"
            if end is None or not self.at_op(";")
            else "expression statement has no effect: only assignments and calls are statements",
        )

    def _parse_if(self, anns: list[ast.Annotation]) -> ast.Stmt:
        t = self.expect("if")
        self.expect("(")
        cond = self.parse_expression()
        self.expect(")")
        then = self.parse_statement()
        other = None
        if self.accept("else"):
            other = self.parse_statement()
        return ast.If(cond, then, other, span=t.span)

    def _end(self, end: str | None) -> None:
        if end is not None:
            self.expect(end)

    def _parse_for(self, anns: list[ast.Annotation]) -> ast.Stmt:
        """``for (init; cond; update) body`` or ``for (T x in collection) body`` (P4-16
        1.2.4): init and update are comma-separated declarations, assignments or calls; the
        collection is a range ``a .. b`` or a header stack."""
        t = self.expect("for")
        self.expect("(")
        inner = self.parse_annotations()
        if self.starts_type() and self._is_for_in():
            typ = self.parse_type()
            name = self.ident("loop variable name")
            self.expect("in")
            coll = self.parse_expression()
            if self.accept(".."):
                hi = self.parse_expression()
                coll = ast.Range(coll, hi, span=coll.span)
            self.expect(")")
            var = ast.VarDecl(typ, name.text, None, inner, span=name.span)
            body = self.parse_statement()
            return ast.ForIn(var, coll, body, anns, span=t.span)
        init: list[ast.Stmt] = []
        while not self.at_op(";"):
            init.append(self._parse_simple_statement(inner if not init else [], None))
            if not self.accept(","):
                break
        self.expect(";", "after the initialisations of a for loop")
        if self.at_op(";"):
            # the grammar (P4-16 1.2.4, and p4c) has no empty condition
            raise self.error("a for loop needs a condition (write `true` for none)")
        cond = self.parse_expression()
        self.expect(";", "after the condition of a for loop")
        update: list[ast.Stmt] = []
        while not self.at_op(")"):
            update.append(self._parse_simple_statement([], None))
            if not self.accept(","):
                break
        self.expect(")", "closing the header of a for loop")
        body = self.parse_statement()
        return ast.For(init, cond, update, body, anns, span=t.span)

    def _is_for_in(self) -> bool:
        """At a type in a for header: is this ``T name in ...``?"""
        saved = self.pos
        self.speculating += 1
        try:
            self.parse_type()
            return self.tok.kind is Tok.IDENT and self.peek().text == "in"
        except (_Backtrack, ParseError):
            return False
        finally:
            self.speculating -= 1
            self.pos = saved

    def _parse_break(self, anns: list[ast.Annotation]) -> ast.Stmt:
        t = self.expect("break")
        self.expect(";")
        return ast.Break(span=t.span)

    def _parse_continue(self, anns: list[ast.Annotation]) -> ast.Stmt:
        t = self.expect("continue")
        self.expect(";")
        return ast.Continue(span=t.span)

    def _parse_exit(self, anns: list[ast.Annotation]) -> ast.Stmt:
        t = self.expect("exit")
        self.expect(";")
        return ast.Exit(span=t.span)

    def _parse_return(self, anns: list[ast.Annotation]) -> ast.Stmt:
        t = self.expect("return")
        value = None
        if not self.at_op(";"):
            value = self.parse_expression()
        self.expect(";")
        return ast.Return(value, span=t.span)

    def _parse_const_stmt(self, anns: list[ast.Annotation]) -> ast.Stmt:
        c = self.parse_const_decl()
        c.annotations = anns
        return c

    def _is_declaration(self) -> bool:
        """At a type name: is this 'Type name ...' (a declaration) rather than an expression?"""
        saved = self.pos
        self.speculating += 1
        try:
            self.parse_type()
            return self.tok.kind is Tok.IDENT and self.peek().text in ("=", ";")
        except (_Backtrack, ParseError):
            return False
        finally:
            self.speculating -= 1
            self.pos = saved

    def parse_switch(self) -> ast.Switch:
        kw = self.expect("switch")
        self.expect("(")
        expr = self.parse_expression()
        self.expect(")")
        self.expect("{")
        cases: list[ast.SwitchCase] = []
        while not self.at_op("}"):
            lt = self.tok
            label: ast.Expr
            if lt.text == "default" and lt.kind is Tok.IDENT:
                self.advance()
                label = ast.Default(span=lt.span)
            else:
                label = self.parse_expression()
            self.expect(":")
            body = self.parse_block() if self.at_op("{") else None
            cases.append(ast.SwitchCase([label], body, span=lt.span))
        self.expect("}")
        return ast.Switch(expr, cases, span=kw.span)

    # -- expressions ---------------------------------------------------------------------

    def parse_expression(self) -> ast.Expr:
        cond = self.parse_binary(0)
        if self.at_op("?"):
            q = self.advance()
            then = self.parse_expression()
            self.expect(":", "in conditional expression")
            other = self.parse_expression()
            return ast.Mux(cond, then, other, span=q.span if cond.span is None else cond.span)
        return cond

    def _binary_op_here(self, level_ops: tuple[str, ...]) -> str | None:
        t = self.tok
        if t.kind is not Tok.OP:
            return None
        if t.text == ">":
            nxt = self.peek()
            if nxt.kind is Tok.OP and nxt.text == ">" and nxt.offset == t.offset + 1:
                if self.peek(2).text == "=" and self.peek(2).offset == t.offset + 2:
                    return None  # '>>=' compound assignment
                return ">>" if ">>" in level_ops else None
            if nxt.kind is Tok.OP and nxt.text == ">=" and nxt.offset == t.offset + 1:
                return None  # '>>='
        if t.text in level_ops:
            return t.text
        return None

    def parse_binary(self, level: int) -> ast.Expr:
        if level >= len(BINARY_LEVELS):
            return self.parse_unary()
        ops = BINARY_LEVELS[level]
        left = self.parse_binary(level + 1)
        while True:
            op = self._binary_op_here(ops)
            if op is None:
                return left
            tok = self.advance()
            if op == ">>":
                self.advance()
            right = self.parse_binary(level + 1)
            left = ast.Binary(op, left, right, span=tok.span)

    def parse_unary(self) -> ast.Expr:
        t = self.tok
        if t.kind is Tok.OP and t.text in ("-", "+", "!", "~"):
            self.advance()
            operand = self.parse_unary()
            if t.text == "-" and isinstance(operand, ast.IntLit) and operand.width is None:
                return ast.IntLit(-operand.value, None, False, span=t.span)
            return ast.Unary(t.text, operand, span=t.span)
        if t.kind is Tok.OP and t.text == "(" and self._is_cast():
            self.advance()
            typ = self.parse_type()
            self.expect(")")
            operand = self.parse_unary()
            return ast.Cast(typ, operand, span=t.span)
        return self.parse_postfix(self.parse_primary())

    def _is_cast(self) -> bool:
        nxt = self.peek()
        if nxt.kind is not Tok.IDENT:
            return False
        if nxt.text in ("bit", "int", "varbit", "bool", "tuple"):
            return True
        if nxt.text == "error":
            return self.peek(2).text == ")"
        if self.is_type_name(nxt.text):
            # '(T) x' or '(T.member ...)': a cast only if a ')' closes the type
            saved = self.pos
            self.speculating += 1
            try:
                self.advance()
                self.parse_type()
                return self.at_op(")")
            except (_Backtrack, ParseError):
                return False
            finally:
                self.speculating -= 1
                self.pos = saved
        return False

    def parse_primary(self) -> ast.Expr:
        t = self.tok
        if t.kind is Tok.INT:
            self.advance()
            value, width, signed = t.int_literal()
            return ast.IntLit(value, width, signed, span=t.span)
        if t.kind is Tok.STRING:
            self.advance()
            return ast.StrLit(str(t.value), span=t.span)
        if t.kind is Tok.IDENT:
            if t.text in ("true", "false"):
                self.advance()
                return ast.BoolLit(t.text == "true", span=t.span)
            if t.text in ("bit", "int", "varbit", "bool") or (
                self.is_type_name(t.text)
                and self.peek().text == "<"
                and self.looks_like_type_args(2)
            ):
                typ = self.parse_type()
                if isinstance(typ, ast.NamedTypeRef) and typ.type_args and self.at_op("("):
                    # a constructor call with type arguments, C<A>(args)
                    name = ast.Name(typ.name, span=t.span)
                    return ast.Call(name, list(typ.type_args), self.parse_args(), span=t.span)
                return ast.TypeExpr(typ, span=t.span)
            self.advance()
            return ast.Name(t.text, span=t.span)
        if t.kind is Tok.OP:
            if t.text == "(":
                self.advance()
                e = self.parse_expression()
                self.expect(")")
                return e
            if t.text == ".":
                self.advance()
                n = self.ident()
                return ast.Name(n.text, True, span=n.span)
            if t.text == "{":
                return self.parse_brace_expr()
            if t.text == "{#}":
                self.advance()
                return ast.InvalidHeader(span=t.span)
            if t.text == "...":
                self.advance()
                return ast.DefaultInit(span=t.span)
        raise self.error(f"expected an expression, found {self.describe(t)}")

    def parse_brace_expr(self) -> ast.Expr:
        start = self.expect("{")
        if self.at_op("}"):
            self.advance()
            return ast.ListExpr([], span=start.span)
        if self.tok.kind is Tok.IDENT and self.peek().text == "=":
            fields: list[tuple[str, ast.Expr]] = []
            rest = False
            while not self.at_op("}"):
                if self.accept("..."):
                    rest = True  # {f = a, ...}: the last item
                    break
                n = self.ident("field name")
                self.expect("=")
                fields.append((n.text, self.parse_expression()))
                if not self.accept(","):
                    break
            self.expect("}")
            return ast.StructInit(fields, rest=rest, span=start.span)
        items = [self.parse_expression()]
        while self.accept(","):
            if self.at_op("}"):
                break
            items.append(self.parse_expression())
        self.expect("}")
        return ast.ListExpr(items, span=start.span)

    def parse_args(self) -> list[ast.Arg]:
        self.expect("(")
        args: list[ast.Arg] = []
        if not self.at_op(")"):
            args.append(self.parse_arg())
            while self.accept(","):
                args.append(self.parse_arg())
        self.expect(")", "closing the argument list")
        return args

    def parse_arg(self) -> ast.Arg:
        t = self.tok
        if t.kind is Tok.IDENT and t.text == "_" and self.peek().text in (",", ")"):
            self.advance()
            return ast.Arg(None, span=t.span)
        if t.kind is Tok.IDENT and self.peek().kind is Tok.OP and self.peek().text == "=":
            self.advance()
            self.advance()
            if self.tok.text == "_" and self.peek().text in (",", ")"):
                self.advance()
                return ast.Arg(None, t.text, span=t.span)
            return ast.Arg(self.parse_expression(), t.text, span=t.span)
        return ast.Arg(self.parse_expression(), span=t.span)

    def parse_postfix(self, e: ast.Expr) -> ast.Expr:
        while True:
            t = self.tok
            if t.kind is not Tok.OP:
                return e
            if t.text == ".":
                self.advance()
                n = self.ident("member name")
                e = ast.Member(e, n.text, span=n.span)
            elif t.text == "[":
                self.advance()
                hi = self.parse_expression()
                if self.accept("+:"):
                    width = self.parse_expression()
                    self.expect("]")
                    e = ast.IndexedSlice(e, hi, width, span=t.span)
                elif self.accept(":"):
                    lo = self.parse_expression()
                    self.expect("]")
                    e = ast.Slice(e, hi, lo, span=t.span)
                else:
                    self.expect("]")
                    e = ast.Index(e, hi, span=t.span)
            elif t.text == "(":
                args = self.parse_args()
                e = ast.Call(e, [], args, span=e.span)
            elif t.text == "<" and isinstance(e, (ast.Name, ast.Member)):
                targs = self.speculate(self._type_args_then_paren)
                if targs is None:
                    return e
                args = self.parse_args()
                e = ast.Call(e, targs, args, span=e.span)
            else:
                return e

    def _type_args_then_paren(self) -> list[ast.TypeRef]:
        targs = self.parse_type_args()
        if not self.at_op("("):
            raise _Backtrack()
        return targs
