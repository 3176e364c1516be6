"""Transport benchmark: goodput and message completion time, MRC vs single path vs TCP.

``python -m host.bench --out results/bench_transport.csv`` (``make bench-transport``) runs each
transport on loopback between this process (sender) and a child process (receiver), so the
two ends use two cores as two hosts would. For every message size it measures

* goodput: ``depth`` messages kept outstanding, total bytes / time from the first send to the
  last completion (a completion = the receiver acknowledged every byte);
* completion time: one message at a time, from ``send`` to its completion (p50, p99).

MRC runs over 2 planes × 2 "spines" = 4 EVs (one ``::1`` socket per plane; see
``host.paths``), single path over one hashed EV of the same set, TCP over one ``::1``
connection.

``--fabric TOPOLOGY.json`` is the same measurement between two hosts of a running emulated
fabric (:func:`fabric_bench`: receiver and sender in the hosts' namespaces, see
``host.fabric_run``); ``--fabric auto`` (``make bench-transport``) adds those rows after the
loopback ones, on the fabric of ``make fabric-up`` if one runs, else (root) on a default fabric
with ``--link-mbps`` links brought up for the benchmark. Fabric rows carry ``capacity_mbps``:
the link rate times the planes into the receiver.
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing as mp
import os
import pathlib
import resource
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from multiprocessing.connection import Connection as Pipe
from typing import IO, Any

from host.api import MessageConnection
from host.baseline import TcpEndpoint, single_path_config
from host.errors import FabricNotRunning, TransportError, TransportTimeout
from host.fabric_run import HostProcess, RunSpec, host_args, own_fabric, read_running_state
from host.mrc.config import MrcConfig, loopback_config
from host.mrc.endpoint import Endpoint
from host.network import UdpNetwork
from host.paths import RouteTable, loopback_evs, loopback_nics
from topologies.model import Fabric, FabricSpec

TRANSPORTS = ("mrc", "single_path", "tcp")
DEFAULT_SIZES = (4 * 1024, 64 * 1024, 1024 * 1024, 16 * 1024 * 1024)
PLANES, SPINES = 2, 2
FABRIC_MESSAGE = "needs a running fabric (make fabric-up)"
FABRIC_SIZES = (4 * 1024, 64 * 1024, 1024 * 1024)
FABRIC_GOODPUT_BYTES = 2 * 1024 * 1024
FABRIC_MCT_MESSAGES = 10
FABRIC_LINK_MBPS = 5.0
FABRIC_ROW_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class BenchRow:
    transport: str
    network: str
    msg_bytes: int
    messages: int
    depth: int
    goodput_mbps: float
    goodput_mbyte_s: float
    mct_p50_ms: float
    mct_p99_ms: float
    mct_messages: int
    retransmits: int
    sender_cpu_s: float
    capacity_mbps: float | None = None
    """Fabric runs: link rate x planes into the receiver (the ceiling of a multipath flow)."""


def _config(transport: str) -> MrcConfig:
    cfg = loopback_config()
    return single_path_config(cfg) if transport == "single_path" else cfg


def _receiver(transport: str, pipe: Pipe) -> None:
    """The child process: accept one connection and consume messages until told to stop."""
    if transport == "tcp":
        tcp = TcpEndpoint(1)
        pipe.send(tcp.address)
        conn: MessageConnection = tcp.accept(timeout=30)
        closer = tcp.close
    else:
        net = UdpNetwork(loopback_nics(PLANES))
        pipe.send(net.ports)
        ep = Endpoint(net, 1, RouteTable({0: loopback_evs(pipe.recv(), SPINES)}), _config(transport))
        conn = ep.accept(timeout=30)
        closer = ep.close
    try:
        while True:
            try:
                conn.recv(timeout=0.2)
            except TransportTimeout:
                if pipe.poll():
                    break
            except TransportError:  # the sender closed first
                break
    finally:
        closer()


def _percentile(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def measure(conn: MessageConnection, msg_bytes: int, *, transport: str, network: str,
            depth: int = 8, goodput_bytes: int = 48 * 1024 * 1024, min_messages: int = 8,
            mct_messages: int = 30, timeout_s: float = 120.0) -> BenchRow:  # fmt: skip
    """Goodput with ``depth`` messages outstanding, then completion times one at a time."""
    payload = os.urandom(msg_bytes)
    n = max(min_messages, min(4000, goodput_bytes // msg_bytes))
    cpu0 = _cpu_s()
    retx0 = _retransmits(conn)
    t0 = time.monotonic()
    window = []
    for _ in range(n):
        window.append(conn.send(payload, timeout=timeout_s))
        if len(window) >= depth:
            window.pop(0).wait(timeout_s)
    for h in window:
        h.wait(timeout_s)
    elapsed = time.monotonic() - t0
    m = max(5, min(mct_messages, (64 * 1024 * 1024) // msg_bytes))
    mcts = []
    for _ in range(m):
        t = time.monotonic()
        conn.send(payload, timeout=timeout_s).wait(timeout_s)
        mcts.append(time.monotonic() - t)
    rate = n * msg_bytes / elapsed
    return BenchRow(transport, network, msg_bytes, n, depth, round(rate * 8 / 1e6, 1),
                    round(rate / 1e6, 2), round(statistics.median(mcts) * 1e3, 3),
                    round(_percentile(mcts, 0.99) * 1e3, 3), m, _retransmits(conn) - retx0,
                    round(_cpu_s() - cpu0, 2))  # fmt: skip


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _retransmits(conn: MessageConnection) -> int:
    stats = getattr(conn, "stats", None)
    return int(getattr(stats(), "retransmits", 0)) if callable(stats) else 0


def loopback_bench(transports: Sequence[str] = TRANSPORTS,
                   sizes: Sequence[int] = DEFAULT_SIZES, **kw: int) -> list[BenchRow]:  # fmt: skip
    """Every transport × size on loopback, receiver in a child process."""
    rows: list[BenchRow] = []
    ctx = mp.get_context("spawn")
    for transport in transports:
        if transport not in TRANSPORTS:
            raise ValueError(f"unknown transport {transport!r}; choose from {', '.join(TRANSPORTS)}")
        mine, theirs = ctx.Pipe()
        proc = ctx.Process(target=_receiver, args=(transport, theirs), daemon=True)
        proc.start()
        try:
            rows.extend(_sender(transport, mine, sizes, **kw))
        finally:
            mine.send("stop")
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
    return rows


def _sender(transport: str, pipe: Pipe, sizes: Sequence[int], **kw: int) -> list[BenchRow]:
    if not pipe.poll(30):
        raise TransportError("benchmark receiver did not start")
    if transport == "tcp":
        with TcpEndpoint(0, peers={1: pipe.recv()}) as tcp:
            return _run_sizes(tcp.connect(1), transport, sizes, **kw)
    net = UdpNetwork(loopback_nics(PLANES))
    peer_ports = pipe.recv()
    pipe.send(net.ports)
    with Endpoint(net, 0, RouteTable({1: loopback_evs(peer_ports, SPINES)}), _config(transport)) as ep:
        return _run_sizes(ep.connect(1), transport, sizes, **kw)


def _run_sizes(conn: MessageConnection, transport: str, sizes: Sequence[int],
               **kw: int) -> list[BenchRow]:  # fmt: skip
    for _ in range(20):  # warm up: connection set-up, window growth
        conn.send(os.urandom(65536)).wait(30)
    rows = []
    for size in sizes:
        row = measure(conn, size, transport=transport, network="loopback", **kw)
        print(f"{row.transport:12s} {row.msg_bytes:>9d} B  {row.goodput_mbyte_s:7.1f} MB/s  "
              f"mct p50 {row.mct_p50_ms:8.2f} ms  p99 {row.mct_p99_ms:8.2f} ms  "
              f"retx {row.retransmits}", flush=True)  # fmt: skip
        rows.append(row)
    return rows


def fabric_bench(topology: str | pathlib.Path, *, src: str = "h1", dst: str | None = None,
                 transports: Sequence[str] = TRANSPORTS, sizes: Sequence[int] = FABRIC_SIZES,
                 depth: int = 8, goodput_bytes: int = FABRIC_GOODPUT_BYTES,
                 mct_messages: int = FABRIC_MCT_MESSAGES,
                 log: IO[bytes] | None = None) -> list[BenchRow]:  # fmt: skip
    """The same measurement between two hosts of a running emulated fabric.

    The receiver runs in ``dst``'s Mininet namespace and the sender in ``src``'s
    (``host.fabric_run``, started with ``mnexec``): MRC over every micro-SID path with
    ``fabric_config()``, single path over the baseline addresses (one plane per connection,
    the switches' ECMP picks the spine), TCP over the plane-0 baseline addresses.

    Args:
        topology: the running fabric's ``topology.json`` (its ``state.json`` is beside it).
        dst: default: the first host on another leaf than ``src`` (its paths cross a spine).
    Raises:
        FabricNotRunning: no fabric is up there.
    """
    state = read_running_state(topology)
    fabric = Fabric.load(topology)
    if dst is None:
        leaf = fabric.host(src).leaf_index
        dst = next((h.name for h in fabric.hosts if h.leaf_index != leaf),
                   next(h.name for h in fabric.hosts if h.name != src))  # fmt: skip
    pids = {h: int(d["pid"]) for h, d in state["hosts"].items()}
    capacity = float(state.get("link_mbps") or fabric.spec.link_mbps) * fabric.spec.planes
    rows: list[BenchRow] = []
    for transport in transports:
        if transport not in TRANSPORTS:
            raise ValueError(f"unknown transport {transport!r}; choose from {', '.join(TRANSPORTS)}")
        rx_spec = RunSpec(str(topology), dst, transport, expect=1, sample_ms=0)
        tx_spec = RunSpec(str(topology), src, transport, send_to=(dst,), depth=depth, sample_ms=0,
                          bench_sizes=tuple(sizes), bench_goodput_bytes=goodput_bytes,
                          bench_mct_messages=mct_messages)  # fmt: skip
        with HostProcess(pids[dst], host_args(rx_spec), log) as rx, \
                HostProcess(pids[src], host_args(tx_spec), log) as tx:  # fmt: skip
            rx.wait_event("ready")
            tx.wait_event("ready")
            tx.command(cmd="start", at=time.monotonic())
            while True:
                ev = tx.next_event(timeout_s=FABRIC_ROW_TIMEOUT_S)
                if ev["event"] == "bench_row":
                    row = replace(BenchRow(**ev["row"]), capacity_mbps=capacity)
                    print(_describe(row), flush=True)
                    rows.append(row)
                elif ev["event"] == "sent":
                    break
            done = [tx.stop(), rx.stop()]
        errors = [e for d in done if d for e in d.get("errors", [])]
        if errors:
            raise TransportError(f"{transport} through the fabric: {'; '.join(errors)}")
    return rows


def _describe(row: BenchRow) -> str:
    return (f"{row.transport:12s} {row.network:16s} {row.msg_bytes:>9d} B  "
            f"{row.goodput_mbyte_s:7.2f} MB/s  mct p50 {row.mct_p50_ms:8.2f} ms  "
            f"p99 {row.mct_p99_ms:8.2f} ms  retx {row.retransmits}")  # fmt: skip


def auto_fabric_bench(results_dir: str, *, link_mbps: float = FABRIC_LINK_MBPS,
                      **kw: Any) -> list[BenchRow]:  # fmt: skip
    """:func:`fabric_bench` on the fabric of ``make fabric-up`` if one runs, else on a default
    fabric brought up (and stopped) for it.

    Raises:
        FabricNotRunning: none runs and none can be brought up (not root, another one busy).
    """
    topology = pathlib.Path(results_dir) / "fabric" / "topology.json"
    try:
        read_running_state(topology)
    except FabricNotRunning:
        pass
    else:
        return fabric_bench(topology, **kw)
    if os.geteuid() != 0:
        raise FabricNotRunning(f"{FABRIC_MESSAGE}, or run as root to bring one up")
    log_path = pathlib.Path(results_dir) / "bench_transport_fabric.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with own_fabric(FabricSpec(link_mbps=link_mbps), results_dir) as up, log_path.open("wb") as log:
        print(f"fabric up for the benchmark: links {link_mbps:g} Mbit/s", flush=True)
        return fabric_bench(up.net.topology_path.resolve(), log=log, **kw)


def write_csv(rows: Sequence[BenchRow], path: str | pathlib.Path) -> None:
    p = pathlib.Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[fl.name for fl in fields(BenchRow)])
        w.writeheader()
        for r in rows:
            w.writerow(asdict(r))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m host.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/bench_transport.csv")
    ap.add_argument("--transports", default=",".join(TRANSPORTS))
    ap.add_argument("--sizes", default=",".join(str(s) for s in DEFAULT_SIZES),
                    help="message sizes in bytes, comma-separated")  # fmt: skip
    ap.add_argument("--depth", type=int, default=8, help="messages outstanding (goodput)")
    ap.add_argument("--goodput-mbytes", type=int, default=48, help="bytes per goodput run, MB")
    ap.add_argument("--fabric", metavar="TOPOLOGY.json|auto",
                    help="measure through a running fabric only; 'auto': loopback, then the "
                         "running fabric or (root) a default one brought up for it")  # fmt: skip
    ap.add_argument("--fabric-sizes", default=",".join(str(s) for s in FABRIC_SIZES))
    ap.add_argument("--fabric-goodput-kbytes", type=int, default=FABRIC_GOODPUT_BYTES // 1024)
    ap.add_argument("--link-mbps", type=float, default=FABRIC_LINK_MBPS,
                    help="'auto' without a running fabric: its link rate")  # fmt: skip
    ap.add_argument("--results", default="results", help="where fabrics keep their state")
    args = ap.parse_args(argv)
    transports = [t for t in args.transports.split(",") if t]
    sizes = [int(s) for s in args.sizes.split(",") if s]
    fabric_kw: dict[str, Any] = {
        "transports": transports, "depth": args.depth,
        "sizes": [int(s) for s in args.fabric_sizes.split(",") if s],
        "goodput_bytes": args.fabric_goodput_kbytes * 1024,
    }  # fmt: skip
    rows: list[BenchRow] = []
    try:
        if args.fabric and args.fabric != "auto":
            rows = fabric_bench(args.fabric, **fabric_kw)
        else:
            rows = loopback_bench(transports, sizes, depth=args.depth,
                                  goodput_bytes=args.goodput_mbytes * 1024 * 1024)  # fmt: skip
            if args.fabric == "auto":
                try:
                    rows += auto_fabric_bench(args.results, link_mbps=args.link_mbps, **fabric_kw)
                except FabricNotRunning as e:
                    print(f"bench-transport: no fabric rows: {e}", file=sys.stderr)
    except TransportError as e:
        print(f"bench-transport: {e}", file=sys.stderr)
        if not rows:
            return 2
    write_csv(rows, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
