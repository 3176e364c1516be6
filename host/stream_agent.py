"""The per-host process of the MRC experiments: an MRC, single-path or TCP endpoint that streams.

The fabric experiments and the transport benchmark (``make bench-transport``) start one of
these per host, in the host's network namespace (:class:`experiments.hosts.HostProcess`:
``mnexec -a <host pid>``, the pid from ``results/fabric/state.json``)::

    python -m host.stream_agent --topology results/fabric/topology.json --host h1 \\
        --transport mrc --send-to h3 --msg-bytes 65536 --depth 8 --duration-s 3 --out-dir DIR
    python -m host.stream_agent --topology ... --host h3 --transport mrc --expect 1 --out-dir DIR

A process opens its endpoint (MRC: ``UdpNetwork`` on the host's plane NICs with ECN, the
micro-SID EVs of ``RouteTable.from_fabric``; single path: the baseline addresses, one hashed
EV per connection, the switches' ECMP picks the spine; TCP: the plane-0 baseline address),
accepts ``--expect`` connections and, once told to start, streams messages to every host of
``--send-to`` for ``--duration-s`` with ``--depth`` messages outstanding per connection and
no faster than ``--rate-mbps`` if given (or runs the transport benchmark with
``--bench-sizes``). It talks JSON lines: on stdout the
events ``ready``, ``path`` (the planes a connection sent on since its previous ``path``
event: once 0.3 s after the start, then on each ``report``), ``bench_row``, ``sent`` and
``done``; on stdin the commands ``{"cmd": "start", "at": T}`` (``time.monotonic()``, which all
namespaces share), ``{"cmd": "report"}`` and ``{"cmd": "stop"}`` (also: stdin closed). On
stop it writes, under
``--out-dir``, ``<host>_sent.csv`` (one row per message sent), ``<host>_recv.csv`` (one row per
message delivered), ``<host>_samples.csv`` and ``<host>_events.csv`` (the MRC recorder: per-EV
state and acknowledged bytes every ``--sample-ms``, EV state changes, RTOs, re-hashes).

Each message starts with its sequence number and send time (16 bytes), so receivers check
order and completeness and measure delivery latency on the shared clock.

The endpoint's only random choice is a new connection's id (MRC and single path), which picks
the single path's plane (a hash of the hosts and the id). ``--seed S`` fixes it
(:func:`conn_id_for`); without it the id is random.

:func:`host_args` writes the command line of a :class:`RunSpec`, which :func:`parse_args` reads
back. Settings of the emulated links: :mod:`host.mrc.emulated`.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import pathlib
import random
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import IO, TypeVar

from host.api import MessageConnection, SendHandleLike
from host.baseline import TcpEndpoint, single_path_config
from host.bench import measure
from host.errors import PeerClosed, TransportError, TransportTimeout
from host.mrc.config import fabric_config
from host.mrc.emulated import emulated_fabric_config
from host.mrc.endpoint import Endpoint
from host.mrc.recorder import Recorder
from host.network import UdpNetwork
from host.paths import RouteTable, fabric_nics, host_id
from topologies.model import Fabric

TRANSPORTS = ("mrc", "single_path", "tcp")
TCP_PORT = 4794
HEADER = struct.Struct("!Qd")  # sequence number, send time (time.monotonic)
MIN_MESSAGE_BYTES = HEADER.size
DRAIN_TIMEOUT_S = 30.0
PATH_REPORT_AFTER_S = 0.3


# -- the process inside a host ----------------------------------------------------------------


@dataclass(frozen=True)
class RunSpec:
    """What one host process does (the command line, parsed)."""

    topology: str
    host: str
    transport: str = "mrc"
    send_to: tuple[str, ...] = ()
    expect: int = 0
    """Connections to accept from peers (their messages are received and checked)."""
    msg_bytes: int = 65536
    depth: int = 8
    """Messages outstanding per connection."""
    duration_s: float = 3.0
    sample_ms: float = 1.0
    """Per-EV samples this often (MRC and single path; 0 = none)."""
    out_dir: str = ""
    tcp_port: int = TCP_PORT
    bench_sizes: tuple[int, ...] = ()
    """Run ``host.bench.measure`` for these sizes against ``send_to[0]`` instead of streaming."""
    bench_goodput_bytes: int = 4 * 1024 * 1024
    bench_mct_messages: int = 10
    fixed_window_bytes: int = 0
    """MRC and single path: a fixed window of this many bytes instead of NSCC (0: NSCC)."""
    plain_cc: bool = False
    """Use ``fabric_config()`` as it is, not :func:`emulated_fabric_config`."""
    rate_mbps: float = 0.0
    """Offered load per connection: message i is sent no earlier than i x size / rate after
    the start (0: as fast as ``depth`` allows)."""
    seed: int | None = None
    """Fixes the ids of the connections this host opens (:func:`conn_id_for`); None: random."""


@dataclass(frozen=True)
class SentRow:
    flow: str
    seq: int
    msg_bytes: int
    send_t_s: float
    done_t_s: float
    mct_ms: float
    retransmits: int


@dataclass(frozen=True)
class RecvRow:
    flow: str
    seq: int
    msg_bytes: int
    send_t_s: float
    recv_t_s: float
    latency_ms: float
    in_order: int


_Row = TypeVar("_Row", SentRow, RecvRow)


@dataclass
class _Shared:
    out: IO[str]
    lock: threading.Lock = field(default_factory=threading.Lock)
    start_at: float | None = None
    started: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)
    sent: list[SentRow] = field(default_factory=list)
    recv: list[RecvRow] = field(default_factory=list)
    senders: dict[str, MessageConnection] = field(default_factory=dict)
    last_sent: dict[str, dict[int, int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def emit(self, event: str, **fields_: object) -> None:
        with self.lock:
            self.out.write(json.dumps({"event": event, **fields_}) + "\n")
            self.out.flush()


class _Transport:
    """One endpoint of the chosen kind, with the host names of the fabric."""

    def __init__(self, spec: RunSpec, fabric: Fabric, recorder: Recorder) -> None:
        self.spec = spec
        self.fabric = fabric
        self.names = {host_id(fabric, h.name): h.name for h in fabric.hosts}
        me = host_id(fabric, spec.host)
        self.mrc: Endpoint | None = None
        self.tcp: TcpEndpoint | None = None
        if spec.transport == "tcp":
            peers = {
                host_id(fabric, h.name): (h.nics[0].baseline_address, spec.tcp_port)
                for h in fabric.hosts
                if h.name != spec.host
            }
            listen = (fabric.host(spec.host).nics[0].baseline_address, spec.tcp_port)
            self.tcp = TcpEndpoint(me, listen, peers)
            return
        baseline = spec.transport == "single_path"
        cfg = fabric_config() if spec.plain_cc else emulated_fabric_config(fabric.spec.link_mbps)
        if baseline:
            cfg = single_path_config(cfg)
        if spec.fixed_window_bytes:
            cfg = replace(
                cfg, cc=replace(cfg.cc, enabled=False, initial_cwnd_bytes=spec.fixed_window_bytes)
            )
        net = UdpNetwork(fabric_nics(fabric, spec.host, baseline=baseline), ecn=True)
        routes = RouteTable.from_fabric(fabric, spec.host, baseline=baseline)
        self.mrc = Endpoint(
            net, me, routes, cfg, recorder=recorder, sample_interval_ms=spec.sample_ms
        )

    def connect(self, peer: str) -> MessageConnection:
        pid = host_id(self.fabric, peer)
        if self.tcp is not None:
            return self.tcp.connect(pid)
        assert self.mrc is not None
        if self.spec.seed is None:
            return self.mrc.connect(pid)
        return self.mrc.connect(pid, conn_id=conn_id_for(self.spec.seed, self.spec.host, peer))

    def accept(self, timeout: float) -> MessageConnection:
        if self.tcp is not None:
            return self.tcp.accept(timeout)
        assert self.mrc is not None
        return self.mrc.accept(timeout)

    def close(self) -> None:
        if self.tcp is not None:
            self.tcp.close()
        if self.mrc is not None:
            self.mrc.close()


def conn_id_for(seed: int, src: str, dst: str) -> int:
    """The id of ``src``'s connection to ``dst`` under ``seed`` (32 bits, the same on every
    run): it decides the single path's plane, so a seed fixes which flows share one."""
    return random.Random(f"conn:{seed}:{src}->{dst}").getrandbits(32)


def _sent_per_plane(conn: MessageConnection) -> dict[int, int]:
    """Packets sent so far on each plane (TCP: everything on the plane-0 baseline address)."""
    ev_stats = getattr(conn, "ev_stats", None)
    if not callable(ev_stats):
        return {0: 1}
    out: dict[int, int] = {}
    for s in ev_stats():
        out[s.plane] = out.get(s.plane, 0) + s.packets_sent
    return out


def _report_paths(shared: _Shared) -> None:
    """One ``path`` event per sending connection (``{"cmd": "report"}``)."""
    with shared.lock:
        conns = list(shared.senders.items())
    for flow, conn in conns:
        _report_paths_of(shared, flow, conn)


def _report_paths_of(shared: _Shared, flow: str, conn: MessageConnection) -> None:
    """The ``path`` event of one connection: the planes it sent on since its last report."""
    try:
        now = _sent_per_plane(conn)
    except TransportError:
        return
    before = shared.last_sent.get(flow, {})
    shared.last_sent[flow] = now
    planes = sorted(p for p, n in now.items() if n > before.get(p, 0))
    shared.emit("path", flow=flow, planes=planes, conn_id=conn.conn_id)


def _retransmits(conn: MessageConnection) -> int:
    stats = getattr(conn, "stats", None)
    return int(getattr(stats(), "retransmits", 0)) if callable(stats) else 0


def _stream(shared: _Shared, spec: RunSpec, conn: MessageConnection, flow: str) -> None:
    """Keep ``spec.depth`` messages outstanding from ``start_at`` for ``duration_s`` (and send
    no faster than ``spec.rate_mbps`` when it is set)."""
    shared.started.wait()
    assert shared.start_at is not None
    delay = shared.start_at - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    buf = bytearray(os.urandom(spec.msg_bytes))
    end = shared.start_at + spec.duration_s
    window: list[tuple[int, float, SendHandleLike]] = []
    seq = 0
    rows: list[SentRow] = []

    def finish(entry: tuple[int, float, SendHandleLike]) -> None:
        s, t, handle = entry
        outcome = handle.wait(DRAIN_TIMEOUT_S)
        done = t + outcome.completion_s
        rows.append(
            SentRow(
                flow,
                s,
                spec.msg_bytes,
                round(t, 6),
                round(done, 6),
                round(outcome.completion_s * 1e3, 3),
                outcome.retransmits,
            )
        )

    gap_s = spec.msg_bytes * 8 / (spec.rate_mbps * 1e6) if spec.rate_mbps > 0 else 0.0
    try:
        while time.monotonic() < end and not shared.stop.is_set():
            wait = shared.start_at + seq * gap_s - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            t = time.monotonic()
            HEADER.pack_into(buf, 0, seq, t)
            window.append((seq, t, conn.send(bytes(buf), timeout=DRAIN_TIMEOUT_S)))
            seq += 1
            if len(window) >= spec.depth:
                finish(window.pop(0))
        for entry in window:
            finish(entry)
    except TransportError as e:
        shared.errors.append(f"{flow}: {e}")
    with shared.lock:
        shared.sent.extend(rows)
    shared.emit(
        "sent", flow=flow, messages=seq, completed=len(rows), retransmits=_retransmits(conn)
    )


def _receive(shared: _Shared, conn: MessageConnection, flow: str) -> None:
    """Take messages until stopped; check sequence numbers."""
    expected = 0
    rows: list[RecvRow] = []
    while not shared.stop.is_set():
        try:
            msg = conn.recv(timeout=0.2)
        except TransportTimeout:
            continue
        except PeerClosed:
            break  # the sender finished first (TCP): the end of the stream
        except TransportError as e:
            if not shared.stop.is_set():
                shared.errors.append(f"{flow}: {e}")
            break
        now = time.monotonic()
        if len(msg) < MIN_MESSAGE_BYTES:
            shared.errors.append(f"{flow}: a {len(msg)}-byte message")
            continue
        seq, sent_t = HEADER.unpack_from(msg, 0)
        rows.append(
            RecvRow(
                flow,
                seq,
                len(msg),
                round(sent_t, 6),
                round(now, 6),
                round((now - sent_t) * 1e3, 3),
                int(seq == expected),
            )
        )
        expected = seq + 1
    with shared.lock:
        shared.recv.extend(rows)


def _accept_loop(
    shared: _Shared, tr: _Transport, spec: RunSpec, threads: list[threading.Thread]
) -> None:
    accepted = 0
    while accepted < spec.expect and not shared.stop.is_set():
        try:
            conn = tr.accept(timeout=0.2)
        except TransportTimeout:
            continue
        except TransportError as e:
            shared.errors.append(f"accept: {e}")
            return
        accepted += 1
        flow = f"{tr.names.get(conn.peer, conn.peer)}->{spec.host}"
        th = threading.Thread(target=_receive, args=(shared, conn, flow), daemon=True)
        th.start()
        threads.append(th)


def _bench(shared: _Shared, spec: RunSpec, conn: MessageConnection, network: str) -> None:
    shared.started.wait()
    try:
        for _ in range(5):  # warm up: connection set-up, window growth
            conn.send(os.urandom(65536)).wait(DRAIN_TIMEOUT_S)
        for size in spec.bench_sizes:
            row = measure(
                conn,
                size,
                transport=spec.transport,
                network=network,
                depth=spec.depth,
                goodput_bytes=spec.bench_goodput_bytes,
                min_messages=4,
                mct_messages=spec.bench_mct_messages,
                timeout_s=DRAIN_TIMEOUT_S * 2,
            )
            shared.emit("bench_row", row=asdict(row))
    except TransportError as e:
        shared.errors.append(f"bench: {e}")
    shared.emit("sent", flow=f"{spec.host}->{spec.send_to[0]}", bench=True)


def _read_commands(shared: _Shared, stream: IO[str]) -> None:
    for line in stream:
        try:
            cmd = json.loads(line)
        except ValueError:
            continue
        if cmd.get("cmd") == "start":
            shared.start_at = float(cmd.get("at") or time.monotonic())
            shared.started.set()
            delay = shared.start_at + PATH_REPORT_AFTER_S - time.monotonic()
            timer = threading.Timer(max(0.0, delay), _report_paths, (shared,))
            timer.daemon = True
            timer.start()
        elif cmd.get("cmd") == "report":
            _report_paths(shared)
        elif cmd.get("cmd") == "stop":
            break
    shared.start_at = shared.start_at or time.monotonic()
    shared.started.set()
    shared.stop.set()


def run(spec: RunSpec, stdin: IO[str] = sys.stdin, stdout: IO[str] = sys.stdout) -> int:
    """The whole life of one host process (see the module docs); returns the exit status."""
    if spec.transport not in TRANSPORTS:
        raise ValueError(
            f"unknown transport {spec.transport!r}; choose from {', '.join(TRANSPORTS)}"
        )
    if spec.msg_bytes < MIN_MESSAGE_BYTES:
        raise ValueError(f"messages must be at least {MIN_MESSAGE_BYTES} bytes")
    fabric = Fabric.load(spec.topology)
    shared = _Shared(stdout)
    evs = len(fabric.paths(fabric.hosts[0].name, fabric.hosts[-1].name))
    conns_n = len(spec.send_to) + spec.expect
    per_s = conns_n * evs * 1e3 / spec.sample_ms if spec.sample_ms > 0 else 0
    recorder = Recorder(capacity=int(min(2_000_000, max(20_000, per_s * (spec.duration_s + 10)))))
    tr = _Transport(spec, fabric, recorder)
    threads: list[threading.Thread] = []
    try:
        acceptor = threading.Thread(
            target=_accept_loop, args=(shared, tr, spec, threads), daemon=True
        )
        acceptor.start()
        senders: list[threading.Thread] = []
        for peer in spec.send_to:
            conn = tr.connect(peer)
            if not spec.bench_sizes:
                shared.senders[f"{spec.host}->{peer}"] = conn
            target: Callable[[_Shared, RunSpec, MessageConnection, str], None]
            if spec.bench_sizes:
                target, flow = _bench, f"fabric {spec.host}->{peer}"
            else:
                target, flow = _stream, f"{spec.host}->{peer}"
            senders.append(
                threading.Thread(target=target, args=(shared, spec, conn, flow), daemon=True)
            )
        shared.emit("ready", host=spec.host, transport=spec.transport, pid=os.getpid())
        threading.Thread(target=_read_commands, args=(shared, stdin), daemon=True).start()
        for th in senders:
            th.start()
        for th in senders:
            th.join()
        shared.stop.wait()
        acceptor.join(timeout=2)
        for th in threads:
            th.join(timeout=2)
    finally:
        tr.close()
    if spec.out_dir:
        write_outputs(spec, shared, recorder)
    lost = _missing(shared.recv)
    shared.emit(
        "done",
        host=spec.host,
        sent=len(shared.sent),
        received=len(shared.recv),
        out_of_order=sum(1 for r in shared.recv if not r.in_order),
        missing=lost,
        errors=shared.errors,
    )
    return 1 if shared.errors else 0


def _missing(rows: Sequence[RecvRow]) -> int:
    """Sequence numbers absent below the highest one delivered, summed over flows."""
    by_flow: dict[str, set[int]] = {}
    for r in rows:
        by_flow.setdefault(r.flow, set()).add(r.seq)
    return sum(max(s) + 1 - len(s) for s in by_flow.values())


def write_outputs(spec: RunSpec, shared: _Shared, recorder: Recorder) -> None:
    out = pathlib.Path(spec.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _write(
        out / f"{spec.host}_sent.csv", SentRow, sorted(shared.sent, key=lambda r: (r.flow, r.seq))
    )
    _write(
        out / f"{spec.host}_recv.csv", RecvRow, sorted(shared.recv, key=lambda r: (r.flow, r.seq))
    )
    if spec.transport != "tcp":
        recorder.write_samples_csv(out / f"{spec.host}_samples.csv")
        recorder.write_events_csv(out / f"{spec.host}_events.csv")


def _write(path: pathlib.Path, kind: type[_Row], rows: Sequence[_Row]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[fl.name for fl in fields(kind)])
        w.writeheader()
        for r in rows:
            w.writerow(asdict(r))


def host_args(spec: RunSpec) -> list[str]:
    """The command line of ``spec`` (what the driver passes; :func:`parse_args` reads it)."""
    args = [
        "--topology",
        spec.topology,
        "--host",
        spec.host,
        "--transport",
        spec.transport,
        "--expect",
        str(spec.expect),
        "--msg-bytes",
        str(spec.msg_bytes),
        "--depth",
        str(spec.depth),
        "--duration-s",
        str(spec.duration_s),
        "--sample-ms",
        str(spec.sample_ms),
        "--tcp-port",
        str(spec.tcp_port),
    ]
    if spec.send_to:
        args += ["--send-to", ",".join(spec.send_to)]
    if spec.out_dir:
        args += ["--out-dir", spec.out_dir]
    if spec.bench_sizes:
        args += [
            "--bench-sizes",
            ",".join(str(s) for s in spec.bench_sizes),
            "--bench-goodput-bytes",
            str(spec.bench_goodput_bytes),
            "--bench-mct-messages",
            str(spec.bench_mct_messages),
        ]
    if spec.fixed_window_bytes:
        args += ["--fixed-window-bytes", str(spec.fixed_window_bytes)]
    if spec.plain_cc:
        args.append("--plain-cc")
    if spec.rate_mbps:
        args += ["--rate-mbps", str(spec.rate_mbps)]
    if spec.seed is not None:
        args += ["--seed", str(spec.seed)]
    return args


def parse_args(argv: Sequence[str] | None = None) -> RunSpec:
    ap = argparse.ArgumentParser(
        prog="python -m host.stream_agent", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--topology", required=True)
    ap.add_argument("--host", required=True)
    ap.add_argument("--transport", choices=TRANSPORTS, default="mrc")
    ap.add_argument("--send-to", default="", help="comma-separated peer hosts to stream to")
    ap.add_argument("--expect", type=int, default=0, help="connections to accept")
    ap.add_argument("--msg-bytes", type=int, default=65536)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--duration-s", type=float, default=3.0)
    ap.add_argument("--sample-ms", type=float, default=1.0)
    ap.add_argument("--out-dir", default="")
    ap.add_argument("--tcp-port", type=int, default=TCP_PORT)
    ap.add_argument("--bench-sizes", default="")
    ap.add_argument("--bench-goodput-bytes", type=int, default=4 * 1024 * 1024)
    ap.add_argument("--bench-mct-messages", type=int, default=10)
    ap.add_argument("--fixed-window-bytes", type=int, default=0, help="no NSCC: a fixed window")
    ap.add_argument("--plain-cc", action="store_true", help="fabric_config() as it is")
    ap.add_argument("--rate-mbps", type=float, default=0.0, help="offered load per connection")
    ap.add_argument("--seed", type=int, default=None, help="fix the connection ids")
    a = ap.parse_args(argv)
    return RunSpec(
        a.topology,
        a.host,
        a.transport,
        tuple(h for h in a.send_to.split(",") if h),
        a.expect,
        a.msg_bytes,
        a.depth,
        a.duration_s,
        a.sample_ms,
        a.out_dir,
        a.tcp_port,
        tuple(int(s) for s in a.bench_sizes.split(",") if s),
        a.bench_goodput_bytes,
        a.bench_mct_messages,
        a.fixed_window_bytes,
        a.plain_cc,
        a.rate_mbps,
        a.seed,
    )


def main(argv: Sequence[str] | None = None) -> int:
    return run(parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
