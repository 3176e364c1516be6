"""``tf-ctl`` commands as a behaviour table: one :class:`Command` row and one handler each.

=========================================  ==================================================
``status``                                 switches (stream, primary, pipeline, entries),
                                           failures, loss events, ECN, telemetry
``routes [HOST HOST | SWITCH]``            paths per host pair / one pair's paths and where
                                           they break / one switch's entries
``fail plane N | link A B | switch S``     take down by ``port_state`` (``--phy``: Linux link)
``restore plane N | link A B | switch S``  undo; ``restore all`` clears failures and loss
``loss LINK|PORT PCT [--for MS]``          random loss on ``A-B`` (both switch ends) or
                                           ``S:P`` / ``S-ethP``; 0 removes; ``--for`` expires
``incast DST --senders N --bytes B``       a real burst from N hosts (``--plane``, ``--spine``)
``ecn K|off``                              CE-mark threshold of every port, in packets
``trim K|off``                             trim UDP packets finding K queued (MRC NACKs them)
``telemetry watch|recent``                 stream / list microburst records
``counters [SWITCH] [--by-reason]``        per-port packets, bytes, drops (the program's and
                                           the switch's: tail drops, overruns...), ECN marks,
                                           trims; ``--by-reason``: drops by reason, port, queue
``help``                                   this table
=========================================  ==================================================

Every command validates all of its arguments before it changes anything; an unknown name
fails with a "did you mean" and the list of valid names. ``--json`` / ``--csv`` anywhere in
the command line select the output format. State changes go through
:meth:`controller.fabric.FabricController.apply`, so repeating a command changes nothing.
"""

from __future__ import annotations

import itertools
import math
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from controller import program as fp
from controller.conditions import (
    Conditions,
    Fault,
    FaultKind,
    LossEvent,
    link_target,
    loss_threshold,
)
from controller.dataplane import SwitchView, path_delivers, views, working_paths
from controller.drops import (
    Balance,
    PacketTotals,
    PortDrops,
    TargetDrop,
    add_up,
    balance,
    describe,
    per_port,
    summarize,
)
from controller.entries import Group, Member, TableEntry
from controller.errors import CommandError, ControllerError
from controller.incast import plan_incast, run_incast
from controller.output import Format, Result, render, render_record, split_format
from controller.switches import SwitchSession, run_parallel
from controller.telemetry import CSV_COLUMNS, BurstRecord
from controller.wiring import suggest, unknown

if TYPE_CHECKING:
    from controller.fabric import FabricController

MAX_ECN_K = (1 << 19) - 1  # set_ecn_threshold(bit<19> k)
MAX_TRIM_K = (1 << 32) - 1  # set_trim(bit<32> threshold, ...)
MAX_LOSS_FOR_MS = 86_400_000
DEFAULT_WATCH_S = 10.0
STATUS_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Option:
    name: str
    kind: type  # bool (a flag), int, float or str
    help: str


OptionValue = bool | int | float | str
"""A parsed option: True for a flag, the number for int and float options, else the text."""


@dataclass(frozen=True)
class Parsed:
    args: tuple[str, ...]
    opts: dict[str, OptionValue]

    def opt(self, name: str, default: OptionValue) -> OptionValue:
        """Option ``name``'s value, ``default`` when it was not given."""
        return self.opts.get(name, default)


@dataclass
class Context:
    ctl: FabricController
    fmt: Format
    out: Callable[[str], None] | None
    alive: Callable[[], bool] = lambda: True  # False once a streaming client has gone


Handler = Callable[[Context, Parsed], Result]


@dataclass(frozen=True)
class Command:
    name: str
    usage: str
    summary: str
    handler: Handler
    options: tuple[Option, ...] = ()
    min_args: int = 0
    max_args: int = 0


# -- argument parsing ----------------------------------------------------------------------


def parse(cmd: Command, argv: list[str]) -> Parsed:
    """Split ``argv`` into positionals and the command's ``--options``.

    Raises:
        CommandError: an unknown option, a missing value, or a wrong number of arguments.
    """
    known = {o.name: o for o in cmd.options}
    args: list[str] = []
    opts: dict[str, OptionValue] = {}
    it = iter(argv)
    for tok in it:
        if tok.startswith("--"):
            name, eq, value = tok.partition("=")
            opt = known.get(name)
            if opt is None:
                valid = ", ".join(known) or "none"
                raise CommandError(
                    f"{cmd.name}: unknown option '{name}'{suggest(name, known)} "
                    f"(its options: {valid})"
                )
            if opt.kind is bool:
                if eq:
                    raise CommandError(f"{cmd.name}: {name} takes no value")
                opts[name] = True
                continue
            if not eq:
                given = next(it, None)
                if given is None:
                    raise CommandError(f"{cmd.name}: {name} needs a value")
                value = given
            opts[name] = (
                number(value, opt.kind, f"{cmd.name} {name}") if opt.kind in (int, float) else value
            )
        else:
            args.append(tok)
    if not cmd.min_args <= len(args) <= cmd.max_args:
        raise CommandError(f"usage: {cmd.usage}")
    return Parsed(tuple(args), opts)


def number(text: str, kind: type, what: str) -> int | float:
    try:
        value = int(text) if kind is int else float(text)
    except (TypeError, ValueError):
        raise CommandError(
            f"{what}: '{text}' is not {'an integer' if kind is int else 'a number'}"
        ) from None
    if isinstance(value, float) and not math.isfinite(value):
        raise CommandError(f"{what}: '{text}' is not a finite number")
    return value


# -- status --------------------------------------------------------------------------------


def describe_conditions(ctx: Context) -> str:
    c = ctx.ctl.conditions
    faults = ", ".join(f.describe() for f in sorted(c.faults)) or "none"
    now = time.time()
    losses = (
        ", ".join(
            f"{e.switch}:{e.port} {e.percent:.2f}%"
            + (
                f" ({max(0.0, e.expires_unix_s - now) * 1000:.0f} ms left)"
                if e.expires_unix_s
                else ""
            )
            for e in c.losses
        )
        or "none"
    )
    ecn = "off" if c.ecn_threshold_pkts is None else f"{c.ecn_threshold_pkts} packets"
    trim = "off" if c.trim_threshold_pkts is None else f"{c.trim_threshold_pkts} packets"
    tel = ctx.ctl.telemetry
    bursts = (
        "off"
        if tel is None
        else f"{tel.total} bursts -> {tel.csv_path}, {tel.watcher_count} watchers"
    )
    return f"failures: {faults}\nloss: {losses}\necn: {ecn}\ntrim: {trim}\ntelemetry: {bursts}"


def cmd_status(ctx: Context, p: Parsed) -> Result:
    ctl = ctx.ctl
    pipelines = run_parallel(ctl.sessions.values(), lambda s: s.fetch_pipeline(STATUS_TIMEOUT_S))
    marked = ctl.conditions.down_ends(ctl.wiring)
    answered = [
        s
        for name, s in ctl.sessions.items()
        if not isinstance(pipelines.get(name), Exception | None) and s.schema is not None
    ]
    drops = run_parallel(answered, _switch_drop_reasons)
    rows = []
    for name, s in ctl.sessions.items():
        got = pipelines.get(name)
        if isinstance(got, Exception) or got is None:
            pipeline = "unreachable"
        elif got[0] is None:
            pipeline = "none"
        else:
            cookie = got[1]
            pipeline = "ours" if None in (ctl.cookie, cookie) or cookie == ctl.cookie else "other"
        down = sorted(port for sw, port in marked if sw == name)
        lossy = sorted(e.port for e in ctl.conditions.losses if e.switch == name)
        reasons = drops.get(name)
        if isinstance(reasons, dict):
            drop_pkts: int | str = sum(reasons.values())
            why = describe(reasons)
        else:
            drop_pkts, why = "", "unavailable" if reasons is None else f"error: {reasons}"
        rows.append(
            (
                name,
                s.switch.role,
                s.switch.plane,
                s.address,
                s.client.connected,
                s.client.is_primary,
                pipeline,
                len(s.installed),
                ",".join(map(str, down)) or "-",
                ",".join(map(str, lossy)) or "-",
                drop_pkts,
                why,
                s.last_error or "",
            )
        )
    cols = (
        "switch",
        "role",
        "plane",
        "grpc",
        "stream",
        "primary",
        "pipeline",
        "entries",
        "ports_down",
        "lossy_ports",
        "drop_pkts",
        "drops_by_reason",
        "last_error",
    )
    return Result.table(cols, rows, describe_conditions(ctx))


def _switch_drop_reasons(s: SwitchSession) -> dict[str, int]:
    """One switch's drops by reason (the target's and the program's, each packet once)."""
    program = program_reasons(s.read_counters([fp.DROP_REASONS]))
    return summarize(s.read_target_drops(), program, fp.CPU_PORT)


def program_reasons(counters: dict[tuple[str, int], tuple[int, int]]) -> dict[str, int]:
    """fabric.p4's ``drop_reasons`` counter by reason name."""
    return {
        label: counters.get((fp.DROP_REASONS, code), (0, 0))[0]
        for code, label in fp.DROP_REASON_NAMES.items()
    }


# -- routes --------------------------------------------------------------------------------


def _installed_views(ctl: FabricController) -> dict[str, SwitchView]:
    return views({n: s.installed for n, s in ctl.sessions.items()})


def cmd_routes(ctx: Context, p: Parsed) -> Result:
    ctl = ctx.ctl
    down = ctl.conditions.down_ends(ctl.wiring, phy=True)
    sws = _installed_views(ctl)
    if len(p.args) == 1:
        sw = ctl.wiring.check_switch(p.args[0])
        order = {Member: 0, Group: 1, TableEntry: 2}
        entities = sorted(
            ctl.sessions[sw.name].installed.values(), key=lambda e: (order[type(e)], repr(e.key))
        )
        rows = [
            (type(e).__name__.replace("TableEntry", "entry").lower(), e.render()) for e in entities
        ]
        return Result.table(("kind", "entity"), rows, f"{sw.name}: {len(rows)} entities installed")
    if len(p.args) == 2:
        a, b = (ctl.wiring.check_host(x).name for x in p.args)
        if a == b:
            raise CommandError("routes: give two different hosts")
        path_rows: list[tuple[int, int, str, str, str, str]] = []
        for path in ctl.fabric.paths(a, b):
            ok, outcomes = path_delivers(ctl.wiring, sws, a, b, path, extra_down=down)
            detail = "; ".join(o.describe() for o in outcomes)
            path_rows.append(
                (
                    path.plane,
                    path.spine,
                    path.address,
                    " ".join(path.hops),
                    "up" if ok else "down",
                    detail,
                )
            )
        up = sum(1 for r in path_rows if r[4] == "up")
        return Result.table(
            ("plane", "spine", "address", "hops", "state", "detail"),
            path_rows,
            f"{a} -> {b}: {up} of {len(path_rows)} paths up",
        )
    total = ctl.fabric.spec.planes * ctl.fabric.spec.spines
    pair_rows = [
        (a, b, len(working_paths(ctl.wiring, sws, a, b, extra_down=down)), total)
        for a, b in itertools.permutations([h.name for h in ctl.fabric.hosts], 2)
    ]
    degraded = sum(1 for r in pair_rows if r[2] < total)
    msg = (
        f"all {len(pair_rows)} host pairs have {total} paths"
        if not degraded
        else f"{degraded} of {len(pair_rows)} host pairs have fewer than {total} paths"
    )
    return Result.table(("src", "dst", "paths_up", "paths_total"), pair_rows, msg)


# -- failures ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    kind: FaultKind
    nargs: int
    check: Callable[[FabricController, tuple[str, ...]], tuple[str, ...]]


def _plane(ctl: FabricController, args: tuple[str, ...]) -> tuple[str, ...]:
    return (str(ctl.wiring.check_plane(args[0])),)


def _link(ctl: FabricController, args: tuple[str, ...]) -> tuple[str, ...]:
    ctl.wiring.link_ends(args[0], args[1])
    return link_target(args[0], args[1])


def _switch(ctl: FabricController, args: tuple[str, ...]) -> tuple[str, ...]:
    return (ctl.wiring.check_switch(args[0]).name,)


TARGETS: dict[str, Target] = {
    "plane": Target(FaultKind.PLANE, 1, _plane),
    "link": Target(FaultKind.LINK, 2, _link),
    "switch": Target(FaultKind.SWITCH, 1, _switch),
}


def _target(
    verb: str, p: Parsed, ctx: Context, extra: tuple[str, ...] = ()
) -> tuple[Target, tuple[str, ...]]:
    what = p.args[0]
    if what not in TARGETS:
        raise unknown(f"thing to {verb}", what, [*TARGETS, *extra])
    t = TARGETS[what]
    if len(p.args) - 1 != t.nargs:
        names = {"plane": "N", "link": "A B", "switch": "S"}[what]
        raise CommandError(f"usage: {verb} {what} {names}")
    return t, t.check(ctx.ctl, p.args[1:])


def _applied(ctx: Context, new: Conditions, done: str, same: str) -> Result:
    ctl = ctx.ctl
    if new == ctl.conditions:
        return Result(f"{same} (nothing to do)")
    result = ctl.apply(new)
    marked = len(new.down_ends(ctl.wiring, phy=False))
    return Result(
        f"{done}: {result.total} entities written; {marked} switch ports marked down in all"
    )


def cmd_fail(ctx: Context, p: Parsed) -> Result:
    t, target = _target("fail", p, ctx)
    phy = bool(p.opt("--phy", False))
    fault = Fault(t.kind, target, phy)
    new = ctx.ctl.conditions.with_fault(fault)
    return _applied(ctx, new, f"{fault.describe()} failed", f"{fault.describe()} is already down")


def cmd_restore(ctx: Context, p: Parsed) -> Result:
    if p.args[0] == "all":
        if len(p.args) != 1:
            raise CommandError("usage: restore all")
        return _applied(
            ctx,
            ctx.ctl.conditions.cleared(),
            "all failures and loss cleared",
            "no failures and no loss",
        )
    t, target = _target("restore", p, ctx, extra=("all",))
    name = f"{t.kind.value} {' '.join(target)}"
    new = ctx.ctl.conditions.without_fault(t.kind, target)
    return _applied(ctx, new, f"{name} restored", f"{name} is not failed")


# -- loss, ecn -----------------------------------------------------------------------------


def loss_ends(ctl: FabricController, text: str) -> list[tuple[str, int]]:
    """``A-B`` (a link: its switch ends) or ``S:P`` / ``S-ethP`` (one egress port)."""
    if ":" in text or "-eth" in text:
        return [ctl.wiring.parse_port(text)]
    if "-" in text:
        a, _, b = text.partition("-")
        return ctl.wiring.link_ends(a, b)
    raise CommandError(f"loss: '{text}' is neither a link (A-B) nor a port (SWITCH:PORT)")


def cmd_loss(ctx: Context, p: Parsed) -> Result:
    ctl = ctx.ctl
    ends = loss_ends(ctl, p.args[0])
    pct = float(number(p.args[1], float, "loss PCT"))
    if not 0 <= pct <= 100:
        raise CommandError(f"loss PCT must be 0..100, got {p.args[1]}")
    for_ms = p.opts.get("--for")
    if for_ms is not None and not 0 < float(for_ms) <= MAX_LOSS_FOR_MS:
        raise CommandError(f"loss --for must be 1..{MAX_LOSS_FOR_MS} ms, got {for_ms}")
    where = ", ".join(f"{s}:{q}" for s, q in ends)
    if pct == 0:
        new = ctl.conditions.without_losses(ends)
        return _applied(ctx, new, f"loss removed from {where}", f"no loss on {where}")
    expires = None if for_ms is None else time.time() + float(for_ms) / 1000.0
    threshold = loss_threshold(pct)
    new = ctl.conditions.with_losses([LossEvent(s, q, threshold, expires) for s, q in ends])
    span = f" for {float(for_ms):g} ms" if for_ms is not None else ""
    return _applied(
        ctx, new, f"loss {pct:g}% on {where}{span}", f"loss {pct:g}% already on {where}"
    )


def cmd_ecn(ctx: Context, p: Parsed) -> Result:
    text = p.args[0]
    if text == "off":
        k = None
    else:
        k = int(number(text, int, "ecn K"))
        if not 1 <= k <= MAX_ECN_K:
            raise CommandError(f"ecn K must be 1..{MAX_ECN_K} packets or 'off', got {text}")
    new = ctx.ctl.conditions.with_ecn(k)
    what = "ECN marking off" if k is None else f"ECN threshold {k} packets on every port"
    return _applied(ctx, new, what, what)


def cmd_trim(ctx: Context, p: Parsed) -> Result:
    text = p.args[0]
    if text == "off":
        k = None
    else:
        k = int(number(text, int, "trim K"))
        if not 1 <= k <= MAX_TRIM_K:
            raise CommandError(f"trim K must be at least 1 packet or 'off', got {text}")
    new = ctx.ctl.conditions.with_trim(k)
    keep = ctx.ctl.config.trim_keep_bytes
    what = (
        "trimming off"
        if k is None
        else f"trim at {k} packets queued on every port (keep {keep} payload bytes)"
    )
    return _applied(ctx, new, what, what)


# -- counters, telemetry, incast -----------------------------------------------------------


COUNTER_COLUMNS = (
    "switch",
    "port",
    "peer",
    "rx_pkts",
    "rx_bytes",
    "tx_pkts",
    "tx_bytes",
    "rx_drop_pkts",
    "tx_drop_pkts",
    "tail_drop_pkts",
    "switch_drop_pkts",
    "ecn_marked_pkts",
    "trimmed_pkts",
)
DROP_COLUMNS = ("switch", "port", "peer", "queue", "source", "reason", "drop_pkts")


@dataclass(frozen=True)
class SwitchCounters:
    """What ``counters`` reads from one switch: the program's counters, the target's drops."""

    program: dict[tuple[str, int], tuple[int, int]]
    target: tuple[TargetDrop, ...] | None  # None: the target has no drop counters (BMv2)
    packets: PacketTotals | None = None  # None: the target does not count them (BMv2)

    def program_reasons(self) -> dict[str, int]:
        return program_reasons(self.program)

    def reasons(self) -> dict[str, int]:
        return summarize(self.target, self.program_reasons(), fp.CPU_PORT)


def read_switch_counters(ctl: FabricController, names: list[str]) -> dict[str, SwitchCounters]:
    """Every port counter and drop reason of ``names``, all switches in parallel.

    Raises:
        ControllerError: a switch did not answer.
    """

    def one(s: SwitchSession) -> SwitchCounters:
        ports = ctl.wiring.switch_ports(s.name)
        program = {
            **s.read_counters(fp.PORT_COUNTERS, ports),
            **s.read_counters([fp.DROP_REASONS]),
        }
        return SwitchCounters(program, s.read_target_drops(), s.read_target_packets())

    read = run_parallel([ctl.sessions[n] for n in names], one)
    out: dict[str, SwitchCounters] = {}
    for name in names:
        c = read[name]
        if isinstance(c, Exception):
            raise ControllerError(f"{name}: {c}")
        out[name] = c
    return out


def _drops_message(read: dict[str, SwitchCounters]) -> str:
    total = add_up(c.reasons() for c in read.values())
    msg = f"drops by reason: {describe(total)}"
    blind = [n for n, c in read.items() if c.target is None]
    if blind:
        msg += f" (switch drops unavailable from {', '.join(blind)}: no target drop counters)"
    balances = [
        balance(c.packets, c.target)
        for c in read.values()
        if c.packets is not None and c.target is not None
    ]
    if balances:
        together = sum(balances, Balance())
        n = len(balances)
        msg += f"\n{together.describe()} ({n} switch{'es' if n != 1 else ''})"
    return msg


def cmd_counters(ctx: Context, p: Parsed) -> Result:
    ctl = ctx.ctl
    names = [ctl.wiring.check_switch(p.args[0]).name] if p.args else list(ctl.sessions)
    read = read_switch_counters(ctl, names)
    if p.opts.get("--by-reason"):
        return _drops_by_reason(ctl, read)
    rows = []
    for name, sc in read.items():
        c = sc.program
        target = per_port(sc.target or ())
        for port in ctl.wiring.switch_ports(name):
            end = ctl.wiring.peer(name, port)
            cells = [c.get((counter, port), (0, 0)) for counter in fp.PORT_COUNTERS]
            (rx, rx_b), (tx, tx_b), (rxd, _), (txd, _), (ecn, _), (trim, _) = cells
            td = target.get(port, PortDrops())
            tail: int | str = td.tail if sc.target is not None else ""
            other: int | str = td.switch if sc.target is not None else ""
            rows.append(
                (
                    name,
                    port,
                    end.name if end else "",
                    rx,
                    rx_b,
                    tx,
                    tx_b,
                    rxd,
                    txd,
                    tail,
                    other,
                    ecn,
                    trim,
                )
            )
    return Result.table(COUNTER_COLUMNS, rows, _drops_message(read))


def _drops_by_reason(ctl: FabricController, read: dict[str, SwitchCounters]) -> Result:
    """``counters --by-reason``: one row per switch, port, queue and reason with drops."""
    rows: list[tuple[object, ...]] = []
    for name, sc in read.items():
        for d in sc.target or ():
            end = ctl.wiring.peer(name, d.port)
            source = "program" if d.program else "switch"
            rows.append(
                (name, d.port, end.name if end else "", d.queue, source, d.reason, d.packets)
            )
        for reason, n in sc.program_reasons().items():
            if n:
                rows.append((name, None, "", None, "program counter", reason, n))
    return Result.table(DROP_COLUMNS, rows, _drops_message(read))


BURST_COLUMNS = (*CSV_COLUMNS, "peer")


def _burst_row(ctl: FabricController, r: BurstRecord) -> tuple[object, ...]:
    end = ctl.wiring.peer(r.switch, r.port)
    return (*r.row(), end.name if end else "")


def cmd_telemetry(ctx: Context, p: Parsed) -> Result:
    ctl = ctx.ctl
    sub = p.args[0]
    subs = ("watch", "recent")
    if sub not in subs:
        raise unknown("telemetry subcommand", sub, subs)
    tel = ctl.start_telemetry()
    if sub == "recent":
        last = int(p.opt("--last", 20))
        ctl.settle_reports()  # a quiet fabric is flushed seldom: the last burst may wait
        rows = [_burst_row(ctl, r) for r in tel.recent()[-last:]] if last > 0 else []
        return Result.table(BURST_COLUMNS, rows, f"{tel.total} bursts recorded in {tel.csv_path}")
    for_s = p.opts.get("--for")
    count = p.opts.get("--count")
    if for_s is None and count is None and ctx.out is None:
        for_s = DEFAULT_WATCH_S
    deadline = None if for_s is None else time.monotonic() + float(for_s)
    q = tel.subscribe()
    ctl.watching()
    lines: list[str] = []
    emit = ctx.out or lines.append
    n = 0
    lost: set[str] = set()
    try:
        while count is None or n < int(count):
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            try:
                r = q.get(timeout=min(0.5, left) if left is not None else 0.5)
            except queue.Empty:
                if not ctx.alive():
                    break
                lost = _note_takeover(ctl, lost, emit if ctx.fmt is Format.TABLE else None)
                continue
            emit(render_record(BURST_COLUMNS, _burst_row(ctl, r), ctx.fmt, header=n == 0))
            n += 1
    finally:
        tel.unsubscribe(q)
    lines.append(f"{n} bursts" if ctx.fmt is Format.TABLE else "")
    return Result("\n".join(x for x in lines if x))


def _note_takeover(
    ctl: FabricController, lost: set[str], emit: Callable[[str], None] | None
) -> set[str]:
    """The switches this controller is not primary of now; tells ``emit`` when that changes
    (their burst digests go to another controller meanwhile)."""
    now = {n for n, s in ctl.sessions.items() if not s.client.is_primary}
    if now != lost and emit is not None:
        if now:
            emit(
                f"note: another controller is primary of {len(now)} of {len(ctl.sessions)} "
                "switches: their bursts go to it, not here, until it leaves"
            )
        else:
            emit("note: primary of every switch again: bursts arrive here")
    return now


def cmd_incast(ctx: Context, p: Parsed) -> Result:
    ctl = ctx.ctl
    dst = ctl.wiring.check_host(p.args[0]).name
    for req in ("--senders", "--bytes"):
        if req not in p.opts:
            raise CommandError(f"incast: {req} is required (usage: {COMMANDS['incast'].usage})")
    spine = p.opts.get("--spine")
    plan = plan_incast(
        ctl.fabric,
        dst,
        int(p.opts["--senders"]),
        int(p.opts["--bytes"]),
        plane=int(p.opt("--plane", 0)),
        spine=None if spine is None else int(spine),
        datagram_bytes=int(p.opt("--datagram", 1452)),
        udp_port=int(p.opt("--port", 9)),
    )
    if ctl.processes is None or not ctl.processes.hosts:
        raise CommandError(
            "incast needs the hosts' pids from the running fabric's "
            "results/fabric/state.json (start the fabric with make fabric-up)"
        )
    settle_ms = float(p.opt("--settle-ms", 500))
    tel = ctl.start_telemetry()
    since = time.time()
    res = run_incast(plan, ctl.processes.hosts)
    time.sleep(settle_ms / 1000.0)
    ctl.settle_reports()
    plane_switches = {s.name for s in ctl.fabric.switches if s.plane == plan.plane}
    bursts = [r for r in tel.recent(since) if r.switch in plane_switches]
    rows = [_burst_row(ctl, r) for r in bursts]
    peak = max(bursts, key=lambda r: r.peak_qdepth, default=None)
    where = f", peak {peak.peak_qdepth} packets at {peak.switch}:{peak.port}" if peak else ""
    known = [r.drop_pkts for r in bursts if r.drop_pkts is not None]
    if known:
        where += f", {sum(known)} packets tail-dropped in them"
    msg = (
        f"incast to {dst} on plane {plan.plane}: {len(plan.flows)} flows from "
        f"{', '.join(sorted({f.src for f in plan.flows}))}, {res.datagrams_sent} datagrams, "
        f"{res.bytes_sent} bytes in {res.duration_s * 1000:.0f} ms "
        f"({res.send_errors} send errors); {len(bursts)} bursts{where}"
    )
    return Result.table(BURST_COLUMNS, rows, msg)


def cmd_help(ctx: Context, p: Parsed) -> Result:
    return _help()


def _help() -> Result:
    rows = [(c.name, c.usage, c.summary) for c in COMMANDS.values()]
    return Result.table(
        ("command", "usage", "what"), rows, "--json / --csv: machine-readable output"
    )


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command("status", "status", "switches, failures, loss, ECN, telemetry", cmd_status),
        Command(
            "routes",
            "routes [HOST HOST | SWITCH]",
            "paths per host pair; one pair's paths; one switch's entries",
            cmd_routes,
            max_args=2,
        ),
        Command(
            "fail",
            "fail plane N | link A B | switch S [--phy]",
            "take down by port_state (--phy: set the Linux interfaces down)",
            cmd_fail,
            (Option("--phy", bool, "Linux link down instead of port_state"),),
            2,
            3,
        ),
        Command(
            "restore",
            "restore plane N | link A B | switch S | all",
            "undo a failure",
            cmd_restore,
            (Option("--phy", bool, "accepted; restores either kind"),),
            1,
            3,
        ),
        Command(
            "loss",
            "loss LINK|PORT PCT [--for MS]",
            "random loss on a link (A-B) or egress port (S:P); 0 removes",
            cmd_loss,
            (Option("--for", float, "remove it after MS milliseconds"),),
            2,
            2,
        ),
        Command(
            "incast",
            "incast DST --senders N --bytes B [--plane P] [--spine S]",
            "N hosts send B bytes each to DST at once",
            cmd_incast,
            (
                Option("--senders", int, "flows"),
                Option("--bytes", int, "bytes per flow"),
                Option("--plane", int, "plane (default 0)"),
                Option("--spine", int, "one spine for all flows (default: spread)"),
                Option("--datagram", int, "datagram payload bytes (default 1452)"),
                Option("--port", int, "UDP port (default 9)"),
                Option("--settle-ms", float, "wait for burst reports (default 500)"),
            ),
            1,
            1,
        ),
        Command(
            "ecn",
            "ecn K|off",
            "CE-mark at K packets queued on every port",
            cmd_ecn,
            min_args=1,
            max_args=1,
        ),
        Command(
            "trim",
            "trim K|off",
            "trim UDP packets that find K packets queued, every port",
            cmd_trim,
            min_args=1,
            max_args=1,
        ),
        Command(
            "telemetry",
            "telemetry watch [--for S] [--count N] | recent [--last N]",
            "stream or list microburst records",
            cmd_telemetry,
            (
                Option("--for", float, "seconds to watch"),
                Option("--count", int, "bursts to watch"),
                Option("--last", int, "records to list"),
            ),
            1,
            1,
        ),
        Command(
            "counters",
            "counters [SWITCH] [--by-reason]",
            "per-port counters and drops (--by-reason: drops by reason, port and queue)",
            cmd_counters,
            (Option("--by-reason", bool, "one row per switch, port, queue and drop reason"),),
            max_args=1,
        ),
        Command("help", "help", "the commands", cmd_help),
    )
}


def help_text(argv: list[str]) -> str:
    """``help`` without a fabric (``tf-ctl help`` needs no switch)."""
    _rest, fmt = split_format(argv)
    return render(_help(), fmt)


def check(argv: list[str]) -> tuple[str, Parsed, Format]:
    """The command, its parsed arguments and the output format of ``argv``, checked without
    a fabric (names, options, number of arguments; values that name switches or ports are
    checked when it runs).

    Raises:
        CommandError: no command, an unknown one, or bad options or arguments.
    """
    rest, fmt = split_format(argv)
    if not rest:
        raise CommandError(f"no command given (commands: {', '.join(COMMANDS)})")
    name, args = rest[0], rest[1:]
    cmd = COMMANDS.get(name)
    if cmd is None:
        raise unknown("command", name, COMMANDS)
    return name, parse(cmd, args), fmt


def run(
    ctl: FabricController,
    argv: list[str],
    out: Callable[[str], None] | None = None,
    alive: Callable[[], bool] | None = None,
) -> str:
    """Parse and run one command line; its rendered result.

    Raises:
        CommandError: a bad command (nothing changed).
        ControllerError: a switch refused or did not answer.
    """
    name, parsed, fmt = check(argv)
    cmd = COMMANDS[name]
    ctx = Context(ctl, fmt, out, alive or (lambda: True))
    if name == "telemetry":  # streams for as long as asked: must not hold the lock
        return render(cmd.handler(ctx, parsed), fmt)
    with ctl.lock:
        return render(cmd.handler(ctx, parsed), fmt)
