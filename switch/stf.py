"""Runs p4c's STF tests (``.stf`` packet scripts with table setup) against the software switch.

The format and its meaning follow p4c's BMv2 runner (``backends/bmv2/bmv2stf.py`` with the
grammar of ``tools/stf/stf_parser.py``), written anew here:

* ``#`` starts a comment; one command per line; keywords are case-insensitive.
* ``packet <port> <hex>`` sends a packet (spaces inside the hex are ignored).
* ``expect <port> <hex>[$]`` expects a packet on ``port``; ``*`` is a wildcard nibble. Without
  ``$`` a longer received packet still matches. Expectations are matched per port, in order, once
  all packets are sent; every port named by a ``packet`` or ``expect`` line is an interface, and
  receiving more or fewer packets there than expected fails. Packets sent to ports no line names
  are dropped (BMv2 had no interface there). ``expect <port>`` alone accepts any number of
  packets on that port.
* ``add <table> [<priority>] <key>:<value> ... <action>(<param>:<value>, ...) [= <handle>]``;
  a larger priority wins. Ternary values are hex or binary with ``*`` digits wildcarded
  (``0x****0101``: the mask covers exactly the digits written); LPM values are ``v/len`` or hex
  with trailing ``*`` digits; range values ``lo->hi`` (simple_switch_CLI) or ``lo..hi``; keys not
  mentioned are wildcards (exact keys: 0). Tables, keys and actions match by suffix (``t`` finds
  ``MyIngress.t``); ``h$0.f`` means ``h[0].f``.
* ``setdefault <table> <action>(...)``, ``remove all``, ``remove <handle>``, ``wait``,
  ``no_packet`` (the previous packet produced no output), ``check_counter <c>(<index|handle>)
  [packets|bytes] <op> <n>``, and simple_switch_CLI commands: ``mirroring_add``,
  ``mirroring_add_mc``, ``mirroring_delete``, ``mirroring_get``, ``mc_mgrp_create``,
  ``mc_mgrp_destroy``, ``mc_node_create``, ``mc_node_update``, ``mc_node_associate``,
  ``mc_node_dissociate``, ``mc_node_destroy``, ``counter_read``, ``counter_write``,
  ``counter_reset``, ``register_read``, ``register_write``, ``register_reset``,
  ``meter_get_rates``, ``meter_set_rates``, ``meter_array_set_rates``.
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TextIO

from switch.errors import P4Error, Span, StfError
from switch.pipeline.errors import StateError
from switch.pipeline.extern_modules import load_extern_modules
from switch.pipeline.state import SwitchState
from switch.pipeline.tables import Table, TableEntry
from switch.pipeline.v1model import V1Switch
from switch.pipeline.validate import prefix_mask
from switch.schema import ActionCall, KeySpec, MatchKind


class StfSwitch(Protocol):
    """What the runner needs from a switch (``V1Switch(CompiledProgram)`` provides it)."""

    state: SwitchState

    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]: ...


# ------------------------------------------------------------------------------------------
# Commands


@dataclass(frozen=True)
class PacketCmd:
    span: Span
    port: int
    data: bytes


@dataclass(frozen=True)
class ExpectCmd:
    span: Span
    port: int
    pattern: str | None  # upper-case nibbles and '*'; None: any packets on the port
    exact: bool = False  # '$': the packet must end where the pattern ends


@dataclass(frozen=True)
class NoPacketCmd:
    span: Span


@dataclass(frozen=True)
class WaitCmd:
    span: Span


@dataclass(frozen=True)
class KeyText:
    span: Span
    name: str
    value: str
    bound: str | None = None  # LPM prefix length or range high bound
    sep: str = ""  # "/", "->" or ".."


@dataclass(frozen=True)
class ActionText:
    span: Span
    name: str
    args: tuple[tuple[str, str, Span], ...] = ()


@dataclass(frozen=True)
class AddCmd:
    span: Span
    table: str
    priority: int | None
    keys: tuple[KeyText, ...]
    action: ActionText
    handle: str | None = None


@dataclass(frozen=True)
class SetDefaultCmd:
    span: Span
    table: str
    action: ActionText


@dataclass(frozen=True)
class RemoveCmd:
    span: Span
    handle: str | None  # None: remove all entries


@dataclass(frozen=True)
class CheckCounterCmd:
    span: Span
    counter: str
    index: str  # a number, or the handle of an entry (direct counters)
    kind: str = "packets"
    op: str = "=="
    value: int = 0


@dataclass(frozen=True)
class CliCmd:
    """A simple_switch_CLI command passed through (mirroring_*, mc_*, counter_*, ...)."""

    span: Span
    name: str
    args: tuple[str, ...]


StfCommand = (
    PacketCmd
    | ExpectCmd
    | NoPacketCmd
    | WaitCmd
    | AddCmd
    | SetDefaultCmd
    | RemoveCmd
    | CheckCounterCmd
    | CliCmd
)

# simple_switch_CLI commands: name -> (min args, max args or None for "any"); "N" args are ints,
# "S" names, "R" rate:burst pairs.
_CLI = {
    "mirroring_add": "NN",
    "mirroring_add_mc": "NN",
    "mirroring_delete": "N",
    "mirroring_get": "N",
    "mc_mgrp_create": "N",
    "mc_mgrp_destroy": "N",
    "mc_node_create": "NN*",
    "mc_node_update": "NN*",
    "mc_node_associate": "NN",
    "mc_node_dissociate": "NN",
    "mc_node_destroy": "N",
    "counter_read": "SN",
    "counter_write": "SNNN",
    "counter_reset": "S",
    "register_read": "SN",
    "register_write": "SNN",
    "register_reset": "S",
    "meter_get_rates": "SN",
    "meter_set_rates": "SNR*",
    "meter_array_set_rates": "SR*",
}
_KEYWORDS = (
    "packet",
    "expect",
    "no_packet",
    "wait",
    "add",
    "setdefault",
    "remove",
    "check_counter",
    *_CLI,
)


# ------------------------------------------------------------------------------------------
# Parsing

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<num>0[xX][0-9a-fA-F*]+|0[bB][01*]+|[0-9]+(?:\.[0-9]+)?)
  | (?P<name>[A-Za-z_$][A-Za-z0-9_$]*(?:\[[0-9]+\])*(?:\.[A-Za-z_$][A-Za-z0-9_$]*(?:\[[0-9]+\])*)*)
  | (?P<op>->|\.\.|==|!=|<=|>=|[():,/=<>])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Tok:
    kind: str  # "num", "name", "op", "end"
    text: str
    col: int  # 1-based


class _Line:
    """Tokens of one command line, consumed left to right, errors pointing at columns."""

    def __init__(self, filename: str, lineno: int, body: str, start: int, raw: str) -> None:
        self.filename = filename
        self.lineno = lineno
        self.text = raw
        text = body
        self.toks: list[_Tok] = []
        pos = start
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise self.error(pos + 1, f"unexpected character '{text[pos]}'")
            kind = m.lastgroup or "ws"
            if kind != "ws":
                self.toks.append(_Tok(kind, m.group(), pos + 1))
            pos = m.end()
        self.toks.append(_Tok("end", "", len(text) + 1))
        self.i = 0

    def span(self, col: int) -> Span:
        return Span(self.filename, self.lineno, col, self.text)

    def error(self, col: int, message: str) -> StfError:
        return StfError(message, self.span(col))

    def peek(self, ahead: int = 0) -> _Tok:
        return self.toks[min(self.i + ahead, len(self.toks) - 1)]

    def take(self, kind: str, what: str, text: str | None = None) -> _Tok:
        tok = self.peek()
        if tok.kind != kind or (text is not None and tok.text != text):
            found = "end of line" if tok.kind == "end" else f"'{tok.text}'"
            raise self.error(tok.col, f"expected {what}, found {found}")
        self.i += 1
        return tok

    def accept(self, text: str) -> bool:
        if self.peek().kind == "op" and self.peek().text == text:
            self.i += 1
            return True
        return False

    def done(self) -> None:
        tok = self.peek()
        if tok.kind != "end":
            raise self.error(tok.col, f"unexpected '{tok.text}' at the end of the command")


def parse_stf(text: str, filename: str = "<stf>") -> list[StfCommand]:
    """Parse a whole STF file; malformed lines raise :class:`StfError` at ``file:line:col``."""
    commands: list[StfCommand] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        cmd = _parse_line(filename, lineno, raw)
        if cmd is not None:
            commands.append(cmd)
    return commands


def _parse_line(filename: str, lineno: int, raw: str) -> StfCommand | None:
    body = raw.split("#", 1)[0].rstrip()
    m = re.match(r"\s*(\S+)", body)
    if m is None:
        return None
    word = m.group(1)
    col = m.start(1) + 1
    keyword = word.lower()
    span = Span(filename, lineno, col, raw)
    rest_at = m.end(1)
    if keyword in ("packet", "expect"):
        return _parse_packet_line(keyword, span, body, rest_at)
    line = _Line(filename, lineno, body, rest_at, raw)
    if keyword in ("no_packet", "wait"):
        line.done()
        return NoPacketCmd(span) if keyword == "no_packet" else WaitCmd(span)
    if keyword == "add":
        return _parse_add(line, span)
    if keyword == "setdefault":
        table = line.take("name", "a table name").text
        action = _parse_action(line)
        line.done()
        return SetDefaultCmd(span, table, action)
    if keyword == "remove":
        tok = line.take("name", "'all' or an entry handle")
        line.done()
        return RemoveCmd(span, None if tok.text.lower() == "all" else tok.text)
    if keyword == "check_counter":
        return _parse_check_counter(line, span)
    if keyword in _CLI:
        return _parse_cli(line, span, keyword)
    hint = difflib.get_close_matches(keyword, _KEYWORDS, n=1)
    message = f"unknown STF command '{word}'"
    if hint:
        message += f"; did you mean '{hint[0]}'?"
    raise StfError(message, span)


def _parse_packet_line(keyword: str, span: Span, body: str, rest_at: int) -> StfCommand:
    m = re.match(r"\s*(\S+)", body[rest_at:])
    if m is None:
        raise StfError(f"'{keyword}' needs a port number", _span_at(span, len(body) + 1))
    port_text = m.group(1)
    port_col = rest_at + m.start(1) + 1
    if not port_text.isdigit():
        raise StfError(f"bad port number '{port_text}'", _span_at(span, port_col))
    port = int(port_text)
    data_at = rest_at + m.end(1)
    data = body[data_at:]
    chars = "0123456789abcdefABCDEF" + ("*$" if keyword == "expect" else "")
    for i, ch in enumerate(data):
        if not ch.isspace() and ch not in chars:
            what = "expected packet data" if keyword == "expect" else "packet data"
            raise StfError(f"bad character '{ch}' in {what}", _span_at(span, data_at + i + 1))
    hexdata = "".join(data.split()).upper()
    if keyword == "expect":
        if not hexdata:
            return ExpectCmd(span, port, None)
        exact = hexdata.endswith("$")
        if exact:
            hexdata = hexdata[:-1]
        if "$" in hexdata:
            col = data_at + data.index("$") + 1
            raise StfError("'$' may only end the expected packet", _span_at(span, col))
        return ExpectCmd(span, port, hexdata, exact)
    if len(hexdata) % 2:
        first = data_at + len(data) - len(data.lstrip()) + 1
        raise StfError(
            f"packet data has an odd number of hex digits ({len(hexdata)})", _span_at(span, first)
        )
    return PacketCmd(span, port, bytes.fromhex(hexdata))


def _span_at(span: Span, col: int) -> Span:
    return Span(span.file, span.line, col, span.text)


def _parse_action(line: _Line) -> ActionText:
    name = line.take("name", "an action call like a(x:1)")
    line.take("op", "'(' after the action name", "(")
    args: list[tuple[str, str, Span]] = []
    if not line.accept(")"):
        while True:
            param = line.take("name", "an action parameter name")
            line.take("op", "':' after the parameter name", ":")
            value = line.take("num", "a parameter value")
            args.append((param.text, value.text, line.span(value.col)))
            if line.accept(")"):
                break
            line.take("op", "',' or ')'", ",")
    return ActionText(line.span(name.col), name.text, tuple(args))


def _parse_add(line: _Line, span: Span) -> AddCmd:
    table = line.take("name", "a table name").text
    priority = None
    tok = line.peek()
    if tok.kind == "num" and tok.text.isdigit():
        priority = int(tok.text)
        line.i += 1
    keys: list[KeyText] = []
    while line.peek().kind == "name" and line.peek(1).text == ":":
        name = line.take("name", "a key name")
        line.i += 1  # ':'
        value = line.take("num", f"a value for key '{name.text}'")
        bound = None
        sep = ""
        for op in ("/", "->", ".."):
            if line.accept(op):
                sep = op
                bound = line.take("num", "a prefix length" if op == "/" else "a range end").text
                break
        keys.append(KeyText(line.span(name.col), name.text, value.text, bound, sep))
    if line.peek().kind != "name" or line.peek(1).text != "(":
        tok = line.peek()
        raise line.error(tok.col, "expected a key like name:value or an action call")
    action = _parse_action(line)
    handle = None
    if line.accept("="):
        handle = line.take("name", "an entry handle name").text
    line.done()
    return AddCmd(span, table, priority, tuple(keys), action, handle)


def _parse_check_counter(line: _Line, span: Span) -> CheckCounterCmd:
    name = line.take("name", "a counter name").text
    line.take("op", "'(' after the counter name", "(")
    tok = line.peek()
    if tok.kind not in ("num", "name"):
        raise line.error(tok.col, "expected a counter index or an entry handle")
    line.i += 1
    line.take("op", "')'", ")")
    if line.peek().kind == "end":
        return CheckCounterCmd(span, name, tok.text)
    kind = line.take("name", "'packets' or 'bytes'")
    if kind.text.lower() not in ("packets", "bytes"):
        raise line.error(kind.col, f"expected 'packets' or 'bytes', found '{kind.text}'")
    op = line.peek()
    if op.text not in ("==", "!=", "<", "<=", ">", ">="):
        raise line.error(op.col, "expected a comparison (==, !=, <, <=, >, >=)")
    line.i += 1
    value = line.take("num", "a count")
    line.done()
    return CheckCounterCmd(span, name, tok.text, kind.text.lower(), op.text, _int(line, value))


def _int(line: _Line, tok: _Tok) -> int:
    value = _parse_int(tok.text)
    if value is None:
        raise line.error(tok.col, f"expected an integer, found '{tok.text}'")
    return value


def _parse_int(text: str) -> int | None:
    """Decimal (leading zeros allowed), 0x hex or 0b binary; None if not an integer."""
    try:
        return int(text, 0) if text[:2].lower() in ("0x", "0b") else int(text, 10)
    except ValueError:
        return None


def _parse_cli(line: _Line, span: Span, name: str) -> CliCmd:
    shape = _CLI[name]
    repeat = shape.endswith("*")
    kinds = shape.rstrip("*")
    args: list[str] = []
    while line.peek().kind != "end":
        j = len(args)
        k = kinds[j] if j < len(kinds) else (kinds[-1] if repeat else "")
        tok = line.peek()
        if not k:
            raise line.error(tok.col, f"too many arguments for '{name}'")
        if k == "S":
            args.append(line.take("name", "a name").text)
        elif k == "N":
            args.append(str(_int(line, line.take("num", "a number"))))
        else:  # rate:burst
            rate = line.take("num", "a rate like 0.5:100")
            line.take("op", "':' between rate and burst", ":")
            burst = line.take("num", "a burst size")
            try:
                float(rate.text)
            except ValueError:
                raise line.error(rate.col, f"bad rate '{rate.text}'") from None
            args.append(f"{rate.text}:{_int(line, burst)}")
    if len(args) < len(kinds):
        raise line.error(line.peek().col, f"'{name}' needs {len(kinds)} argument(s)")
    return CliCmd(span, name, tuple(args))


# ------------------------------------------------------------------------------------------
# Running


@dataclass
class StfResult:
    """Outcome of a run: ``failures`` are report blocks; empty means the test passed."""

    failures: list[str] = field(default_factory=list)
    sent: int = 0
    received: int = 0
    checked: int = 0

    @property
    def passed(self) -> bool:
        return not self.failures


AUTO_MEMBER_BASE = 0x40000000  # member ids the runner creates for `add` on indirect tables


class StfRunner:
    """Executes parsed STF commands against a switch and compares the outputs at the end."""

    def __init__(self, switch: StfSwitch, out: TextIO | None = None, verbose: bool = False) -> None:
        self.switch = switch
        self.state = switch.state
        self.out = out if out is not None else sys.stdout
        self.verbose = verbose
        self.result = StfResult()
        self._interfaces: set[int] = set()
        self._expected: dict[int, list[ExpectCmd]] = {}
        self._any: dict[int, ExpectCmd] = {}
        self._received: dict[int, list[bytes]] = {}
        self._dropped: dict[int, int] = {}
        self._handles: dict[str, tuple[Table, tuple[object, ...], int]] = {}
        self._members: dict[tuple[str, ActionCall], int] = {}
        self._last_output: list[tuple[int, bytes]] | None = None

    def say(self, text: str) -> None:
        print(text, file=self.out)

    def run(self, commands: Sequence[StfCommand]) -> StfResult:
        """Run every command; setup errors raise :class:`StfError` (or :class:`P4Error`)."""
        for c in commands:
            if isinstance(c, PacketCmd | ExpectCmd):
                self._interfaces.add(c.port)
        for c in commands:
            if self.verbose:
                self.say(f"{c.span.line:4}: {c.span.text.strip()}")
            try:
                self._execute(c)
            except StateError as err:
                raise StfError(err.message, c.span) from None
        self._compare()
        return self.result

    # ----- commands

    def _execute(self, c: StfCommand) -> None:
        if isinstance(c, PacketCmd):
            self._packet(c)
        elif isinstance(c, ExpectCmd):
            if c.pattern is None:
                self._any[c.port] = c
            else:
                self._expected.setdefault(c.port, []).append(c)
        elif isinstance(c, NoPacketCmd):
            self._no_packet(c)
        elif isinstance(c, AddCmd):
            self._add(c)
        elif isinstance(c, SetDefaultCmd):
            table = self._table(c.table, c.span)
            table.set_default(self._action(table, c.action))
        elif isinstance(c, RemoveCmd):
            self._remove(c)
        elif isinstance(c, CheckCounterCmd):
            self._check_counter(c)
        elif isinstance(c, CliCmd):
            self._cli(c)
        # WaitCmd: packets are processed synchronously, nothing to wait for.

    def _packet(self, c: PacketCmd) -> None:
        self.result.sent += 1
        if self.verbose:
            self.say(f"      in  port {c.port}: {_spaced(c.data.hex().upper())}")
        outputs = self.switch.process(c.port, c.data)
        self._last_output = list(outputs)
        for port, data in outputs:
            if self.verbose:
                self.say(f"      out port {port}: {_spaced(bytes(data).hex().upper())}")
            if port in self._interfaces:
                self._received.setdefault(port, []).append(bytes(data))
                self.result.received += 1
            else:
                self._dropped[port] = self._dropped.get(port, 0) + 1

    def _no_packet(self, c: NoPacketCmd) -> None:
        if self._last_output is None:
            raise StfError("'no_packet' must follow a 'packet' command", c.span)
        if self._last_output:
            ports = ", ".join(str(p) for p, _ in self._last_output)
            self.result.failures.append(
                f"{c.span}: no_packet: the previous packet produced {len(self._last_output)} "
                f"packet(s), on port(s) {ports}"
            )

    # ----- names

    def _table(self, name: str, span: Span) -> Table:
        return self.state.tables[_resolve("table", name, list(self.state.tables), span)]

    def _action(self, table: Table, text: ActionText) -> ActionCall:
        names = [r.name for r in table.spec.actions]
        fqn = _resolve(f"action of table '{table.name}'", text.name, names, text.span)
        spec = self.state.actions[fqn]
        given: dict[str, int] = {}
        for pname, value, vspan in text.args:
            if pname in given:
                raise StfError(f"parameter '{pname}' given twice", vspan)
            if pname not in {p.name for p in spec.params}:
                raise StfError(
                    _unknown_msg(
                        f"parameter of action '{fqn}'", pname, [p.name for p in spec.params]
                    ),
                    vspan,
                )
            param = next(p for p in spec.params if p.name == pname)
            number = _plain_number(value, vspan)
            if number >> param.width:
                raise StfError(
                    f"value {value} does not fit parameter '{pname}' ({param.width} bits)", vspan
                )
            given[pname] = number
        missing = [p.name for p in spec.params if p.name not in given]
        if missing:
            raise StfError(f"action '{fqn}' needs parameter(s) {', '.join(missing)}", text.span)
        return ActionCall(fqn, tuple(given[p.name] for p in spec.params))

    # ----- table writes

    def _add(self, c: AddCmd) -> None:
        table = self._table(c.table, c.span)
        keys = table.spec.match_keys
        values: dict[int, object] = {}
        for kt in c.keys:
            i = _resolve_key(table, kt)
            if i in values:
                raise StfError(f"key '{keys[i].name}' given twice", kt.span)
            values[i] = _key_value(keys[i], kt)
        match = tuple(values[i] if i in values else _wildcard(k) for i, k in enumerate(keys))
        priority = 0
        if table.spec.needs_priority:
            # STF priority p maps to p + 1 so that 0 stays valid; a larger number wins as in
            # p4c's runner (it hands BMv2 10000 - p, where BMv2's lowest number wins).
            priority = (c.priority if c.priority is not None else 0) + 1
        call = self._action(table, c.action)
        entry = TableEntry(match, priority, call)
        if table.profile is not None:
            entry = TableEntry(match, priority, member_id=self._member(table, call))
        table.insert(entry)
        if c.handle is not None:
            self._handles[c.handle] = (table, match, priority)

    def _member(self, table: Table, call: ActionCall) -> int:
        profile = table.profile
        assert profile is not None
        key = (profile.name, call)
        member = self._members.get(key)
        if member is None:
            member = AUTO_MEMBER_BASE + len(self._members)
            profile.insert_member(member, call)
            self._members[key] = member
        return member

    def _remove(self, c: RemoveCmd) -> None:
        if c.handle is None:
            for t in self.state.tables.values():
                t.clear()
            return
        target = self._handles.pop(c.handle, None)
        if target is None:
            raise StfError(_unknown_msg("entry handle", c.handle, list(self._handles)), c.span)
        table, match, priority = target
        table.delete(match, priority)

    # ----- counters and CLI commands

    def _check_counter(self, c: CheckCounterCmd) -> None:
        names = list(self.state.counters) + list(self.state.direct_counters)
        fqn = _resolve("counter", c.counter, names, c.span)
        if fqn in self.state.counters:
            index = _parse_int(c.index)
            if index is None:
                raise StfError(
                    f"counter '{fqn}' is indexed; give a number, not '{c.index}'", c.span
                )
            packets, nbytes = self.state.counters[fqn].read(index)
        else:
            target = self._handles.get(c.index)
            if target is None:
                raise StfError(
                    f"direct counter '{fqn}' needs the handle of an entry (add ... = {c.index})",
                    c.span,
                )
            table, match, priority = target
            entry = table.get(match, priority)
            packets, nbytes = entry.packets, entry.bytes
        actual = packets if c.kind == "packets" else nbytes
        self.result.checked += 1
        if not _compare_op(actual, c.op, c.value):
            self.result.failures.append(
                f"{c.span}: check_counter {c.counter}({c.index}) {c.kind} {c.op} {c.value} "
                f"failed: the counter is {actual}"
            )

    def _cli(self, c: CliCmd) -> None:
        from switch.device.sscli import run_command

        out = run_command(self.state, None, [c.name, *c.args])
        if out and (self.verbose or c.name.endswith(("_read", "_get", "_get_rates"))):
            self.say(out if c.name != "mc_node_create" else f"      {out}")

    # ----- comparison

    def _compare(self) -> None:
        for port in sorted(self._dropped):
            self.say(
                f"note: {self._dropped[port]} packet(s) went to port {port}, which no "
                "packet/expect line names; they were dropped as BMv2 would"
            )
        for port in sorted(set(self._expected) | set(self._received) | set(self._any)):
            if port in self._any:
                if port in self._expected:
                    self.say(
                        f"note: port {port} has expect lines with and without data; "
                        "any packets are accepted there"
                    )
                continue
            self._compare_port(port, self._expected.get(port, []), self._received.get(port, []))

    def _compare_port(self, port: int, expected: list[ExpectCmd], got: list[bytes]) -> None:
        lines: list[str] = []
        bad = len(expected) != len(got)
        for i in range(max(len(expected), len(got))):
            e = expected[i] if i < len(expected) else None
            g = got[i] if i < len(got) else None
            tag = f"  #{i + 1}"
            if e is None:
                assert g is not None
                lines.append(f"{tag} unexpected: {_spaced(g.hex().upper())}")
                continue
            if g is None:
                lines.append(f"{tag} missing ({e.span}): expected {_spaced(_pattern(e))}")
                continue
            self.result.checked += 1
            diff = _diff(e, g)
            if diff is None:
                lines.append(f"{tag} ok")
            else:
                bad = True
                lines.append(f"{tag} differs ({e.span}):")
                lines.extend("    " + d for d in diff)
        if bad:
            head = f"port {port}: expected {len(expected)} packet(s), received {len(got)}"
            self.result.failures.append("\n".join([head, *lines]))


def _compare_op(actual: int, op: str, value: int) -> bool:
    return {
        "==": actual == value,
        "!=": actual != value,
        "<": actual < value,
        "<=": actual <= value,
        ">": actual > value,
        ">=": actual >= value,
    }[op]


# ------------------------------------------------------------------------------------------
# Names, keys and values


def _unknown_msg(kind: str, name: str, candidates: Sequence[str]) -> str:
    message = f"unknown {kind} '{name}'"
    hint = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.5)
    if not hint:
        last = {c.rsplit(".", 1)[-1]: c for c in candidates}
        near = difflib.get_close_matches(name.rsplit(".", 1)[-1], list(last), n=1, cutoff=0.5)
        hint = [last[near[0]]] if near else []
    if hint:
        message += f"; did you mean '{hint[0]}'?"
    return message


def _resolve(kind: str, name: str, names: Sequence[str], span: Span) -> str:
    """p4c's lookup: the exact name, else a unique suffix (at a dot first, then anywhere)."""
    if name in names:
        return name
    for hits in (
        [n for n in names if n.endswith("." + name)],
        [n for n in names if n.endswith(name)],
    ):
        if len(hits) == 1:
            return hits[0]
        if hits:
            raise StfError(f"{kind} name '{name}' is ambiguous: {', '.join(sorted(hits))}", span)
    raise StfError(_unknown_msg(kind, name, names), span)


def _key_candidates(name: str) -> list[str]:
    """Spellings of an STF key name: ``h$0.f`` is ``h[0].f``; ``h.$valid$``, ``h.$valid`` and
    ``h.valid`` are the validity bit ``h.isValid()`` (BMv2 JSON spells it ``h.$valid$``)."""
    base = re.sub(r"\$([0-9]+)", r"[\1]", name)
    out = [base]
    for suffix in (".$valid$", ".$valid", ".valid"):
        if base.endswith(suffix):
            stem = base[: -len(suffix)]
            out += [stem + ".isValid()", stem + ".$valid$"]
    return out


def _resolve_key(table: Table, kt: KeyText) -> int:
    names = [k.name for k in table.spec.match_keys]
    for cand in _key_candidates(kt.name):
        if cand in names:
            return names.index(cand)
        for hits in (
            [n for n in names if n.endswith("." + cand)],
            [n for n in names if n.endswith(cand)],
        ):
            if len(hits) == 1:
                return names.index(hits[0])
            if hits:
                raise StfError(
                    f"key name '{kt.name}' is ambiguous in table '{table.name}': {', '.join(hits)}",
                    kt.span,
                )
    raise StfError(_unknown_msg(f"key of table '{table.name}'", kt.name, names), kt.span)


def _wildcard(key: KeySpec) -> object:
    """The value p4c's runner gives a key the add command leaves out."""
    kind = key.kind
    if kind is MatchKind.LPM or kind is MatchKind.TERNARY:
        return (0, 0)
    if kind is MatchKind.RANGE:
        return (0, (1 << key.width) - 1)
    if kind is MatchKind.OPTIONAL:
        return None
    return 0


@dataclass(frozen=True)
class _Num:
    value: int
    mask: int | None  # None: decimal, no digit positions
    digits: int  # digits written
    stars: int  # wildcard digits
    bits_per_digit: int


def _number(text: str, span: Span) -> _Num:
    if "." in text:
        raise StfError(f"expected an integer, found '{text}'", span)
    if text[:2].lower() in ("0x", "0b"):
        bpd = 4 if text[1] in "xX" else 1
        digits = text[2:]
        full = "F" if bpd == 4 else "1"
        base = 16 if bpd == 4 else 2
        value = int(digits.replace("*", "0"), base)
        mask = int("".join("0" if d == "*" else full for d in digits), base)
        return _Num(value, mask, len(digits), digits.count("*"), bpd)
    return _Num(int(text), None, len(text), 0, 0)


def _plain_number(text: str, span: Span) -> int:
    num = _number(text, span)
    if num.stars:
        raise StfError(f"'*' wildcards are not allowed here: '{text}'", span)
    return num.value


def _fit(key: KeySpec, value: int, text: str, span: Span) -> int:
    if value >> key.width:
        raise StfError(f"value {text} does not fit key '{key.name}' ({key.width} bits)", span)
    return value


def _key_value(key: KeySpec, kt: KeyText) -> object:
    kind = key.kind
    width = key.width
    full = (1 << width) - 1
    span = kt.span
    num = _number(kt.value, span)
    if kt.sep in ("->", ".."):
        if kind is not MatchKind.RANGE:
            raise StfError(f"key '{key.name}' is {kind.value}, not range", span)
        assert kt.bound is not None
        lo = _fit(key, _plain_number(kt.value, span), kt.value, span)
        hi = _fit(key, _plain_number(kt.bound, span), kt.bound, span)
        return (lo, hi)
    if kt.sep == "/":
        assert kt.bound is not None
        plen = int(kt.bound, 0)
        if plen > width:
            raise StfError(
                f"prefix length {plen} exceeds the width of key '{key.name}' ({width} bits)", span
            )
        value = _fit(key, num.value, kt.value, span) & prefix_mask(plen, width)
        if kind is MatchKind.LPM:
            return (value, plen)
        if kind is MatchKind.TERNARY:
            return (value, prefix_mask(plen, width))
        raise StfError(f"key '{key.name}' is {kind.value}; '/' is for lpm keys", span)
    all_stars = num.stars > 0 and num.stars == num.digits
    if kind is MatchKind.EXACT:
        return _fit(key, _plain_number(kt.value, span), kt.value, span)
    if kind is MatchKind.OPTIONAL:
        return None if all_stars else _fit(key, _plain_number(kt.value, span), kt.value, span)
    if kind is MatchKind.RANGE:
        if all_stars:
            return (0, full)
        v = _fit(key, _plain_number(kt.value, span), kt.value, span)
        return (v, v)
    value = _fit(key, num.value, kt.value, span)
    if kind is MatchKind.TERNARY:
        mask = full if num.mask is None else num.mask & full
        return (value & mask, mask)
    if kind is MatchKind.LPM:
        if num.mask is None:
            plen = width
        else:
            written = num.digits * num.bits_per_digit
            plen = (num.digits - num.stars) * num.bits_per_digit - max(written - width, 0)
            plen = min(max(plen, 0), width)
        return (value & prefix_mask(plen, width), plen)
    raise StfError(f"key '{key.name}' ({kind.value}) cannot be set from an STF file", span)


# ------------------------------------------------------------------------------------------
# Packet comparison and the report


def _pattern(e: ExpectCmd) -> str:
    return (e.pattern or "") + ("$" if e.exact else "")


def _spaced(nibbles: str) -> str:
    """Hex nibbles grouped by byte: 'AABBC' -> 'AA BB C'."""
    return " ".join(nibbles[i : i + 2] for i in range(0, len(nibbles), 2))


_ROW = 64  # hex digits (32 bytes) per row of a packet diff


def _diff(e: ExpectCmd, data: bytes) -> list[str] | None:
    """None if ``data`` matches the expectation, else lines showing the differing nibbles."""
    want = e.pattern or ""
    got = data.hex().upper()
    marks = [i for i, ch in enumerate(want) if i >= len(got) or (ch != "*" and ch != got[i])]
    too_long = e.exact and len(got) > len(want)
    if not marks and not too_long:
        return None
    if too_long:
        marks += list(range(len(want), len(got)))
    width = max(len(want), len(got))
    lines: list[str] = []
    for start in range(0, width, _ROW):
        row = min(_ROW, width - start)
        marker = [" "] * (row + row // 2)
        for i in marks:
            if start <= i < start + _ROW:
                marker[i - start + (i - start) // 2] = "^"
        label = f"@{start // 2:<4} " if width > _ROW else ""
        last = start < len(want) <= start + _ROW or (start == 0 and not want)
        end = " $" if e.exact and last else ""
        lines += [
            f"{label}expected {_spaced(want[start : start + _ROW])}{end}",
            f"{' ' * len(label)}received {_spaced(got[start : start + _ROW])}",
        ]
        if "^" in marker:
            lines.append(" " * (len(label) + 9) + "".join(marker).rstrip())
    if len(got) < len(want):
        lines.append(
            f"received packet is too short: {len(got) // 2} bytes, "
            f"expected at least {(len(want) + 1) // 2}"
        )
    elif too_long:
        lines.append(
            f"received packet is too long: {len(got) // 2} bytes, expected "
            f"{(len(want) + 1) // 2} ('$' ends the expected packet)"
        )
    return lines


def format_report(result: StfResult) -> str:
    """The human-readable verdict: failures first, then a one-line summary."""
    summary = f"{result.sent} packet(s) sent, {result.received} received, {result.checked} check(s)"
    if result.passed:
        return f"PASS: {summary}"
    blocks = "\n".join(f"FAIL {f}" for f in result.failures)
    return f"{blocks}\nFAIL: {len(result.failures)} failure(s); {summary}"


def run_stf(
    switch: StfSwitch,
    commands: Sequence[StfCommand],
    out: TextIO | None = None,
    verbose: bool = False,
) -> int:
    """Run parsed commands against ``switch``, print the report; 0 if the test passed."""
    out = out if out is not None else sys.stdout
    try:
        result = StfRunner(switch, out, verbose).run(commands)
    except P4Error as err:
        print(err.render(), file=out)
        print("FAIL: the test stopped at this command", file=out)
        return 1
    print(format_report(result), file=out)
    return 0 if result.passed else 1


def main_stf(
    program_path: str,
    stf_path: str,
    include_dirs: Sequence[str] = (),
    verbose: bool = False,
    load_modules: Sequence[str] = (),
) -> int:
    """``tf-p4 stf PROG.p4 TEST.stf``: compile, run the test, print the report; exit code.

    ``load_modules`` are Python modules (paths or dotted names) that register the program's own
    extern functions (switch/pipeline/extern_modules.py), as BMv2's ``--load-modules``."""
    try:
        text = Path(stf_path).read_text()
    except OSError as err:
        print(f"error: cannot read {stf_path}: {err.strerror}", file=sys.stderr)
        return 1
    try:
        commands = parse_stf(text, stf_path)
    except StfError as err:
        print(err.render(), file=sys.stderr)
        return 1
    from switch.compile import load_program  # the compiler is only needed past this point

    try:
        load_extern_modules(load_modules)
        program = load_program(program_path, tuple(include_dirs))
        switch = V1Switch(program, seed=0)
    except P4Error as err:
        print(err.render(), file=sys.stderr)
        return 1
    return run_stf(switch, commands, sys.stdout, verbose)
