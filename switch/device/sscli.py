"""simple_switch_CLI-compatible runtime commands, one row per command.

Used by ``tf-switch``'s runtime CLI (``tf-switch-cli``) and by the STF runner's pass-through
commands. Each handler takes the switch's :class:`SwitchState`, its traffic manager (None where
there is none, e.g. in STF tests) and the command's words, and returns the text to print.
Unknown commands and bad arguments raise :class:`CliError` with a message that lists the valid
names; nothing is changed by a command that fails.
"""

from __future__ import annotations

import difflib
import ipaddress
from collections.abc import Callable
from dataclasses import dataclass

from switch.device.tm import TrafficManager
from switch.errors import P4Error
from switch.pipeline.drops import BY_NAME, REASONS
from switch.pipeline.state import SwitchState
from switch.pipeline.tables import TableEntry
from switch.schema import ActionCall, KeySpec, MatchKind


class CliError(P4Error):
    """A runtime CLI command that cannot be run."""


Handler = Callable[[SwitchState, "TrafficManager | None", list[str]], str]


@dataclass(frozen=True)
class Command:
    usage: str
    min_args: int
    max_args: int | None  # None: any number
    handler: Handler
    help: str


def _int(s: str, what: str) -> int:
    try:
        return int(s, 0)
    except ValueError:
        raise CliError(f"{what} must be an integer, got '{s}'") from None


def _tm(tm: TrafficManager | None) -> TrafficManager:
    if tm is None:
        raise CliError("this switch has no traffic manager (queue commands need tf-switch)")
    return tm


# -- queues -------------------------------------------------------------------------------


def set_queue_depth(st: SwitchState, tm: TrafficManager | None, a: list[str]) -> str:
    t = _tm(tm)
    depth = _int(a[0], "depth")
    port = _int(a[1], "port") if len(a) > 1 else None
    prio = _int(a[2], "priority") if len(a) > 2 else None
    try:
        t.set_depth(depth, port, prio)
    except ValueError as e:
        raise CliError(str(e)) from None
    return ""


def parse_rate(text: str) -> tuple[float, str]:
    """``1000`` or ``1000pps`` (packets/s, as BMv2) or ``100mbps``/``1gbps``/``64kbps``/``8bps``."""
    low = text.lower()
    unit, mult = "pps", 1.0
    for suffix, m, u in (
        ("gbps", 1e9, "bps"),
        ("mbps", 1e6, "bps"),
        ("kbps", 1e3, "bps"),
        ("bps", 1.0, "bps"),
        ("pps", 1.0, "pps"),
    ):
        if low.endswith(suffix):
            low, unit, mult = low[: -len(suffix)], u, m
            break
    try:
        rate = float(low) * mult
    except ValueError:
        raise CliError(
            f"rate must be a number (optionally with pps/bps/kbps/mbps/gbps), got '{text}'"
        ) from None
    if rate < 0:
        raise CliError("rate must not be negative")
    return rate, unit


def set_queue_rate(st: SwitchState, tm: TrafficManager | None, a: list[str]) -> str:
    """set_queue_rate <rate>[pps|bps|mbps|...] [port]: packets/s like BMv2, or bits/s."""
    t = _tm(tm)
    rate, unit = parse_rate(a[0])
    port = _int(a[1], "port") if len(a) > 1 else None
    try:
        t.set_rate(rate, port, unit)
    except ValueError as e:
        raise CliError(str(e)) from None
    return ""


def show_queues(st: SwitchState, tm: TrafficManager | None, a: list[str]) -> str:
    t = _tm(tm)
    lines = ["port  depth  max_depth  enqueued  dequeued  drops  rate"]
    for port, pq in sorted(t.ports.items()):
        rate = (
            f"{pq.rate_bps:.0f} bps"
            if pq.rate_bps
            else f"{pq.rate_pps:.0f} pps"
            if pq.rate_pps
            else "unlimited"
        )
        lines.append(
            f"{port:>4}  {t.depth_of(port):>5}  {pq.max_depth_seen:>9}  {pq.enqueued:>8}  "
            f"{pq.dequeued:>8}  {pq.drops:>5}  {rate}"
        )
    return "\n".join(lines)


def show_drops(st: SwitchState, tm: TrafficManager | None, a: list[str]) -> str:
    """show_drops [port]: packets dropped by reason, port and queue (nonzero counts only)."""
    t = _tm(tm)
    port = _int(a[0], "port") if a else None
    lines = ["reason               port  queue  packets  charged  what"]
    total = 0
    for c in t.drop_cells():
        if port is not None and c.port != port:
            continue
        info = REASONS[c.reason]
        q = "-" if c.queue is None else str(c.queue)
        lines.append(
            f"{info.name:<20} {c.port:>5}  {q:>5}  {c.packets:>7}  {info.charged:<7}  {info.help}"
        )
        total += c.packets
    lines.append(f"total {total} packets dropped")
    if not total:
        lines.append(f"reasons counted: {', '.join(BY_NAME)}")
    return "\n".join(lines)


# -- replication engine ---------------------------------------------------------------------


def _pre_call(method: str, kinds: str) -> Handler:
    def run(st: SwitchState, tm: TrafficManager | None, a: list[str]) -> str:
        vals = [_int(x, "argument") for x in a]
        fn = getattr(st.pre, method)
        if kinds == "NN*":
            out = fn(vals[0], vals[1:])
        else:
            out = fn(*vals)
        if method == "mc_node_create":
            return f"node was created with handle {out}"
        if method == "mirroring_get":
            return str(out)
        return ""

    return run


def mc_dump(st: SwitchState, tm: TrafficManager | None, a: list[str]) -> str:
    lines = []
    for grp in sorted(st.pre.groups):
        reps = ", ".join(f"port {p} rid {r}" for p, r in st.pre.replicas(grp))
        lines.append(f"group {grp}: {reps or '(empty)'}")
    for sid, s in sorted(st.pre.sessions.items()):
        lines.append(f"clone session {sid}: {s}")
    return "\n".join(lines) or "(no groups or sessions)"


# -- externs --------------------------------------------------------------------------------


def register_read(st: SwitchState, tm: TrafficManager | None, a: list[str]) -> str:
    r = st.register(a[0])
    if len(a) > 1:
        i = _int(a[1], "index")
        return f"{r.name}[{i}]= {r.control_read(i)}"
    return f"{r.name}= " + ", ".join(str(r.control_read(i)) for i in range(r.spec.size))


def register_write(st: SwitchState, tm: TrafficManager | None, a: list[str]) -> str:
    st.register(a[0]).control_write(_int(a[1], "index"), _int(a[2], "value"))
    return ""


def register_reset(st: SwitchState, tm: TrafficManager | None, a: list[str]) -> str:
    st.register(a[0]).reset()
    return ""


def counter_read(st: SwitchState, tm: TrafficManager | None, a: list[str]) -> str:
    c = st.counter(a[0])
    i = _int(a[1], "index")
    packets, nbytes = c.read(i)
    return f"{c.name}[{i}]= (packets={packets}, bytes={nbytes})"


def counter_write(st: SwitchState, tm: TrafficManager | None, a: list[str]) -> str:
    st.counter(a[0]).write(_int(a[1], "index"), _int(a[2], "packets"), _int(a[3], "bytes"))
    return ""


def counter_reset(st: SwitchState, tm: TrafficManager | None, a: list[str]) -> str:
    st.counter(a[0]).reset()
    return ""


def _rates(pairs: list[str]) -> list[tuple[float, int]]:
    out = []
    for p in pairs:
        r, _, b = p.partition(":")
        try:
            out.append((float(r), int(b)))
        except ValueError:
            raise CliError(f"meter rates are written rate:burst, got '{p}'") from None
    return out


def meter_set_rates(st: SwitchState, tm: TrafficManager | None, a: list[str]) -> str:
    st.meter(a[0]).set_rates(_int(a[1], "index"), _rates(a[2:]))
    return ""


def meter_array_set_rates(st: SwitchState, tm: TrafficManager | None, a: list[str]) -> str:
    st.meter(a[0]).set_all_rates(_rates(a[1:]))
    return ""


def meter_get_rates(st: SwitchState, tm: TrafficManager | None, a: list[str]) -> str:
    m = st.meter(a[0])
    config = m.get_config(_int(a[1], "index"))
    if config is None:
        return f"{m.name}[{a[1]}]: unconfigured"
    return f"{m.name}[{a[1]}]: CIR {config.cir}:{config.cburst} PIR {config.pir}:{config.pburst}"


def parse_value(text: str, width: int, what: str) -> int:
    """A simple_switch_CLI value: decimal/0x/0b integer, MAC, IPv4 or IPv6 address."""
    t = text.strip()
    try:
        if ":" in t and all(len(x) <= 2 for x in t.split(":")) and t.count(":") == 5:
            v = int(t.replace(":", ""), 16)
        elif ":" in t:
            v = int(ipaddress.IPv6Address(t))
        elif t.count(".") == 3:
            v = int(ipaddress.IPv4Address(t))
        else:
            v = int(t, 0)
    except ValueError:
        raise CliError(
            f"{what}: cannot read '{text}' (integer, MAC, IPv4 or IPv6 address)"
        ) from None
    if v < 0 or v >= 1 << width:
        raise CliError(f"{what}: {text} does not fit in {width} bits")
    return v


def _match_value(spec: KeySpec, text: str) -> object:
    what = f"key '{spec.name}'"
    k = spec.kind
    if k is MatchKind.EXACT:
        return parse_value(text, spec.width, what)
    if k is MatchKind.LPM:
        v, _, plen = text.partition("/")
        n = int(plen) if plen else spec.width
        if not 0 <= n <= spec.width:
            raise CliError(f"{what}: prefix length {plen} out of range")
        mask = ((1 << n) - 1) << (spec.width - n)
        return (parse_value(v, spec.width, what) & mask, n)  # host bits are ignored, as BMv2's CLI
    if k is MatchKind.TERNARY:
        v, sep, m = text.partition("&&&")
        mask = parse_value(m, spec.width, what) if sep else (1 << spec.width) - 1
        return (parse_value(v, spec.width, what) & mask, mask)
    if k is MatchKind.RANGE:
        lo, sep, hi = text.partition("->")
        if not sep:
            raise CliError(f"{what}: a range is written lo->hi")
        return (parse_value(lo, spec.width, what), parse_value(hi, spec.width, what))
    if k is MatchKind.OPTIONAL:
        return None if text in ("*", "_") else parse_value(text, spec.width, what)
    raise CliError(f"{what}: match kind {k.value} cannot be added from the CLI")


def _action(st: SwitchState, table: str, name: str, params: list[str]) -> ActionCall:
    t = st.table(table)
    names = [r.name for r in t.spec.actions]
    fq = next((n for n in names if n == name or n.endswith("." + name)), None)
    if fq is None:
        raise CliError(f"table '{t.spec.name}' has no action '{name}'; actions: {', '.join(names)}")
    spec = st.actions[fq]
    if len(params) != len(spec.params):
        raise CliError(
            f"action '{fq}' takes {len(spec.params)} parameter(s) "
            f"({', '.join(p.name for p in spec.params)}), got {len(params)}"
        )
    return ActionCall(
        fq,
        tuple(
            parse_value(v, p.width, f"parameter '{p.name}'") for v, p in zip(params, spec.params)
        ),
    )


def table_add(st: SwitchState, tm: TrafficManager | None, a: list[str]) -> str:
    """table_add <table> <action> <match...> => <params...> [priority]"""
    if "=>" not in a:
        raise CliError(
            "usage: table_add <table> <action> <match fields> => <action parameters> [priority]"
        )
    i = a.index("=>")
    table, action, matches, rest = a[0], a[1], a[2:i], a[i + 1 :]
    t = st.table(table)
    keys = t.spec.match_keys
    if len(matches) != len(keys):
        raise CliError(
            f"table '{t.spec.name}' has {len(keys)} match field(s) "
            f"({', '.join(k.name for k in keys)}), got {len(matches)}"
        )
    prio = 0
    if t.spec.needs_priority:
        if not rest:
            raise CliError(f"table '{t.spec.name}' needs a priority after the action parameters")
        prio = parse_value(rest[-1], 31, "priority")
        rest = rest[:-1]
    call = _action(st, table, action, rest)
    entry = TableEntry(tuple(_match_value(k, m) for k, m in zip(keys, matches)), prio, action=call)
    t.insert(entry)
    return f"Entry has been added with handle {len(t) - 1}"


def table_set_default(st: SwitchState, tm: TrafficManager | None, a: list[str]) -> str:
    st.table(a[0]).set_default(_action(st, a[0], a[1], a[2:]))
    return ""


def table_reset_default(st: SwitchState, tm: TrafficManager | None, a: list[str]) -> str:
    st.table(a[0]).reset_default()
    return ""


def table_clear(st: SwitchState, tm: TrafficManager | None, a: list[str]) -> str:
    st.table(a[0]).clear()
    return ""


def table_num_entries(st: SwitchState, tm: TrafficManager | None, a: list[str]) -> str:
    return str(len(st.table(a[0])))


def table_dump(st: SwitchState, tm: TrafficManager | None, a: list[str]) -> str:
    t = st.table(a[0])
    lines = [f"table {t.spec.name}: {len(t)} entries, default {t.default.name}{t.default.args}"]
    for e in t.entries():
        act = (
            f"{e.action.name}{e.action.args}"
            if e.action
            else f"member {e.member_id} group {e.group_id}"
        )
        lines.append(
            f"  match {e.match} priority {e.priority} -> {act} "
            f"(packets {e.packets}, bytes {e.bytes})"
        )
    return "\n".join(lines)


def show_tables(st: SwitchState, tm: TrafficManager | None, a: list[str]) -> str:
    return "\n".join(f"{name} ({len(t)} entries)" for name, t in sorted(st.tables.items()))


def help_(st: SwitchState, tm: TrafficManager | None, a: list[str]) -> str:
    return "\n".join(f"{c.usage:<48} {c.help}" for c in COMMANDS.values())


COMMANDS: dict[str, Command] = {
    "set_queue_depth": Command(
        "set_queue_depth <depth> [port [priority]]",
        1,
        3,
        set_queue_depth,
        "egress queue capacity in packets",
    ),
    "set_queue_rate": Command(
        "set_queue_rate <rate>[pps|bps|mbps] [port]", 1, 2, set_queue_rate, "egress drain rate"
    ),
    "show_queues": Command("show_queues", 0, 0, show_queues, "queue depths and drops"),
    "show_loop": Command(
        "show_loop",
        0,
        0,
        lambda st, tm, a: show_loop(None),  # no data-path loop given: says so
        "the data-path loop's rounds, waits and why the C loop returned",
    ),
    "show_drops": Command(
        "show_drops [port]", 0, 1, show_drops, "packets dropped by reason, port and queue"
    ),
    "mirroring_add": Command(
        "mirroring_add <session> <port>",
        2,
        2,
        _pre_call("mirroring_add", "NN"),
        "clone session to a port",
    ),
    "mirroring_add_mc": Command(
        "mirroring_add_mc <session> <mgrp>",
        2,
        2,
        _pre_call("mirroring_add_mc", "NN"),
        "clone session to a group",
    ),
    "mirroring_delete": Command(
        "mirroring_delete <session>",
        1,
        1,
        _pre_call("mirroring_delete", "N"),
        "delete a clone session",
    ),
    "mirroring_get": Command(
        "mirroring_get <session>", 1, 1, _pre_call("mirroring_get", "N"), "show a clone session"
    ),
    "mc_mgrp_create": Command(
        "mc_mgrp_create <mgrp>", 1, 1, _pre_call("mc_mgrp_create", "N"), "create a multicast group"
    ),
    "mc_mgrp_destroy": Command(
        "mc_mgrp_destroy <mgrp>",
        1,
        1,
        _pre_call("mc_mgrp_destroy", "N"),
        "destroy a multicast group",
    ),
    "mc_node_create": Command(
        "mc_node_create <rid> <port>...",
        1,
        None,
        _pre_call("mc_node_create", "NN*"),
        "create a node (rid, ports)",
    ),
    "mc_node_update": Command(
        "mc_node_update <handle> <port>...",
        1,
        None,
        _pre_call("mc_node_update", "NN*"),
        "change a node's ports",
    ),
    "mc_node_associate": Command(
        "mc_node_associate <mgrp> <handle>",
        2,
        2,
        _pre_call("mc_node_associate", "NN"),
        "add a node to a group",
    ),
    "mc_node_dissociate": Command(
        "mc_node_dissociate <mgrp> <handle>",
        2,
        2,
        _pre_call("mc_node_dissociate", "NN"),
        "remove it again",
    ),
    "mc_node_destroy": Command(
        "mc_node_destroy <handle>", 1, 1, _pre_call("mc_node_destroy", "N"), "delete a node"
    ),
    "mc_dump": Command("mc_dump", 0, 0, mc_dump, "multicast groups and clone sessions"),
    "register_read": Command("register_read <register> [index]", 1, 2, register_read, ""),
    "register_write": Command(
        "register_write <register> <index> <value>", 3, 3, register_write, ""
    ),
    "register_reset": Command("register_reset <register>", 1, 1, register_reset, ""),
    "counter_read": Command("counter_read <counter> <index>", 2, 2, counter_read, ""),
    "counter_write": Command(
        "counter_write <counter> <index> <packets> <bytes>", 4, 4, counter_write, ""
    ),
    "counter_reset": Command("counter_reset <counter>", 1, 1, counter_reset, ""),
    "meter_set_rates": Command(
        "meter_set_rates <meter> <index> <rate:burst>...",
        3,
        4,
        meter_set_rates,
        "rates in units per microsecond",
    ),
    "meter_array_set_rates": Command(
        "meter_array_set_rates <meter> <rate:burst>...", 2, 3, meter_array_set_rates, ""
    ),
    "meter_get_rates": Command("meter_get_rates <meter> <index>", 2, 2, meter_get_rates, ""),
    "table_add": Command(
        "table_add <table> <action> <match...> => <params...> [prio]",
        3,
        None,
        table_add,
        "add an entry (lpm a/len, ternary v&&&m, range lo->hi)",
    ),
    "table_set_default": Command(
        "table_set_default <table> <action> <params...>",
        2,
        None,
        table_set_default,
        "set the default action",
    ),
    "table_reset_default": Command("table_reset_default <table>", 1, 1, table_reset_default, ""),
    "table_clear": Command("table_clear <table>", 1, 1, table_clear, "remove all entries"),
    "table_num_entries": Command("table_num_entries <table>", 1, 1, table_num_entries, ""),
    "table_dump": Command("table_dump <table>", 1, 1, table_dump, ""),
    "show_tables": Command("show_tables", 0, 0, show_tables, ""),
    "help": Command("help", 0, 0, help_, "this list"),
}


def show_loop(loop: Callable[[], dict[str, int]] | None) -> str:
    """show_loop: the data-path loop's counters (rounds, waits; with the wait in C, its calls
    and why they returned: ``switch.native.loop.REASONS``)."""
    if loop is None:
        raise CliError("show_loop: no data-path loop runs here")
    stats = loop()
    width = max(map(len, stats), default=0)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in stats.items())


def run_command(
    state: SwitchState,
    tm: TrafficManager | None,
    line: str | list[str],
    *,
    loop: Callable[[], dict[str, int]] | None = None,
) -> str:
    """Run one command line; return its output. Raises CliError/P4Error, changing nothing.
    ``loop``: the data path's counters (``tf-switch``'s, for ``show_loop``)."""
    words = line.split() if isinstance(line, str) else list(line)
    if not words:
        return ""
    name, args = words[0], words[1:]
    cmd = COMMANDS.get(name)
    if cmd is None:
        close = difflib.get_close_matches(name, COMMANDS, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise CliError(f"unknown command '{name}'{hint}; valid commands: {', '.join(COMMANDS)}")
    if len(args) < cmd.min_args or (cmd.max_args is not None and len(args) > cmd.max_args):
        raise CliError(f"usage: {cmd.usage}")
    if name == "show_loop" and loop is not None:  # the data path's, given by the caller
        return show_loop(loop)
    return cmd.handler(state, tm, args)
