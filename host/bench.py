"""Transport benchmark: goodput and message completion time, MRC vs single path vs TCP.

:func:`loopback_bench` (the loopback rows of ``make bench-transport``, see
:mod:`experiments.bench_transport`) runs each transport on loopback between this process
(sender) and a child process (receiver), so the two ends use two cores as two hosts would. For
every message size it measures

* goodput: ``depth`` messages kept outstanding, total bytes / time from the first send to the
  last completion (a completion = the receiver acknowledged every byte);
* completion time: one message at a time, from ``send`` to its completion (p50 and p99 by
  ``numpy.percentile``, linear interpolation).

MRC runs over 2 planes × 2 "spines" = 4 EVs (one ``::1`` socket per plane; see
``host.paths``), single path over one hashed EV of the same set, TCP over one ``::1``
connection.

:func:`measure` is the measurement itself; the stream agent (:mod:`host.stream_agent`) runs it
between two hosts of a fabric.
"""

from __future__ import annotations

import csv
import multiprocessing as mp
import os
import pathlib
import resource
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from multiprocessing.connection import Connection as Pipe

import numpy as np

from host.api import MessageConnection
from host.baseline import TcpEndpoint, single_path_config
from host.errors import TransportError, TransportTimeout
from host.mrc.config import FABRIC_PAYLOAD_BYTES, MrcConfig, fabric_config, loopback_config
from host.mrc.endpoint import Endpoint
from host.network import UdpNetwork
from host.paths import RouteTable, loopback_evs, loopback_nics

TRANSPORTS = ("mrc", "single_path", "tcp")
DEFAULT_SIZES = (4 * 1024, 64 * 1024, 1024 * 1024, 16 * 1024 * 1024)
PLANES, SPINES = 2, 2


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
        ep = Endpoint(
            net, 1, RouteTable({0: loopback_evs(pipe.recv(), SPINES)}), _config(transport)
        )
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


def send_windowed(
    conn: MessageConnection, payload: bytes, n: int, depth: int, timeout_s: float
) -> None:
    """Send ``payload`` ``n`` times keeping ``depth`` messages outstanding; wait for all."""
    window = []
    for _ in range(n):
        window.append(conn.send(payload, timeout=timeout_s))
        if len(window) >= depth:
            window.pop(0).wait(timeout_s)
    for h in window:
        h.wait(timeout_s)


def measure(
    conn: MessageConnection,
    msg_bytes: int,
    *,
    transport: str,
    network: str,
    depth: int = 8,
    goodput_bytes: int = 48 * 1024 * 1024,
    min_messages: int = 8,
    mct_messages: int = 30,
    timeout_s: float = 120.0,
) -> BenchRow:
    """Goodput with ``depth`` messages outstanding, then completion times one at a time."""
    payload = os.urandom(msg_bytes)
    n = max(min_messages, min(4000, goodput_bytes // msg_bytes))
    cpu0 = _cpu_s()
    retx0 = _retransmits(conn)
    t0 = time.monotonic()
    send_windowed(conn, payload, n, depth, timeout_s)
    elapsed = time.monotonic() - t0
    m = max(5, min(mct_messages, (64 * 1024 * 1024) // msg_bytes))
    mcts = []
    for _ in range(m):
        t = time.monotonic()
        conn.send(payload, timeout=timeout_s).wait(timeout_s)
        mcts.append(time.monotonic() - t)
    rate = n * msg_bytes / elapsed
    return BenchRow(
        transport,
        network,
        msg_bytes,
        n,
        depth,
        round(rate * 8 / 1e6, 1),
        round(rate / 1e6, 2),
        round(float(np.percentile(mcts, 50)) * 1e3, 3),
        round(float(np.percentile(mcts, 99)) * 1e3, 3),
        m,
        _retransmits(conn) - retx0,
        round(_cpu_s() - cpu0, 2),
    )


def _cpu_s() -> float:
    user, system = _cpu_times()
    return user + system


def _cpu_times() -> tuple[float, float]:
    """This process's CPU seconds so far: (user + system, system)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime, r.ru_stime


def _retransmits(conn: MessageConnection) -> int:
    stats = getattr(conn, "stats", None)
    return int(getattr(stats(), "retransmits", 0)) if callable(stats) else 0


def loopback_bench(
    transports: Sequence[str] = TRANSPORTS, sizes: Sequence[int] = DEFAULT_SIZES, **kw: int
) -> list[BenchRow]:
    """Every transport × size on loopback, receiver in a child process."""
    rows: list[BenchRow] = []
    ctx = mp.get_context("spawn")
    for transport in transports:
        if transport not in TRANSPORTS:
            raise ValueError(
                f"unknown transport {transport!r}; choose from {', '.join(TRANSPORTS)}"
            )
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
    with Endpoint(
        net, 0, RouteTable({1: loopback_evs(peer_ports, SPINES)}), _config(transport)
    ) as ep:
        return _run_sizes(ep.connect(1), transport, sizes, **kw)


def _run_sizes(
    conn: MessageConnection, transport: str, sizes: Sequence[int], **kw: int
) -> list[BenchRow]:
    for _ in range(20):  # warm up: connection set-up, window growth
        conn.send(os.urandom(65536)).wait(30)
    rows = []
    for size in sizes:
        row = measure(conn, size, transport=transport, network="loopback", **kw)
        print(
            f"{row.transport:12s} {row.msg_bytes:>9d} B  {row.goodput_mbyte_s:7.1f} MB/s  "
            f"mct p50 {row.mct_p50_ms:8.2f} ms  p99 {row.mct_p99_ms:8.2f} ms  "
            f"retx {row.retransmits}",
            flush=True,
        )
        rows.append(row)
    return rows


def write_csv(rows: Sequence[BenchRow], path: str | pathlib.Path) -> None:
    _write_rows(rows, BenchRow, path)


def _write_rows(
    rows: Sequence[BenchRow] | Sequence[CpuRow],
    row_type: type[BenchRow] | type[CpuRow],
    path: str | pathlib.Path,
) -> None:
    """``rows`` as a CSV with one column per field of ``row_type``."""
    p = pathlib.Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[fl.name for fl in fields(row_type)])
        w.writeheader()
        for r in rows:
            w.writerow(asdict(r))


# -- CPU per packet -------------------------------------------------------------------------


@dataclass(frozen=True)
class CpuRow:
    """One bulk transfer through two MRC endpoints on loopback: CPU time per packet, each side.

    ``*_us_per_packet`` = the process's CPU time (user + system, every thread) during the
    transfer ÷ the DATA packets it carried (sent, resp. received); the ACKs the receiver sends
    and the sender takes in are part of that cost.
    """

    label: str
    payload_bytes: int
    msg_bytes: int
    messages: int
    depth: int
    data_packets: int
    sender_datagrams: int  # datagrams the sender sent and received
    receiver_datagrams: int
    elapsed_s: float
    sender_cpu_s: float
    sender_sys_s: float  # of which in the kernel
    receiver_cpu_s: float
    receiver_sys_s: float
    sender_us_per_packet: float
    receiver_us_per_packet: float
    retransmits: int


_Snap = tuple[float, float, int, int, int]  # CPU s, of which system, datagrams in, out, DATA


def _cpu_receiver(payload_bytes: int, pipe: Pipe) -> None:
    """The child of :func:`cpu_bench`: accept, consume, answer ``"cpu"`` with a snapshot of
    (CPU seconds, datagrams in, datagrams out, DATA packets received)."""
    net = UdpNetwork(loopback_nics(PLANES), ecn=True)
    pipe.send(net.ports)
    cfg = fabric_config(payload_bytes=payload_bytes)
    ep = Endpoint(net, 1, RouteTable({0: loopback_evs(pipe.recv(), SPINES)}), cfg)
    try:
        conn = ep.accept(timeout=30)
        while True:
            try:
                conn.recv(timeout=0.05)
            except TransportTimeout:
                pass
            except TransportError:
                break
            if pipe.poll():
                if pipe.recv() != "cpu":
                    break
                st, cs = ep.stats(), conn.stats()
                pipe.send((*_cpu_times(), st.datagrams_in, st.datagrams_out, cs.packets_received))
    finally:
        ep.close()


def cpu_bench(
    *,
    payload_bytes: int = FABRIC_PAYLOAD_BYTES,
    msg_bytes: int = 1024 * 1024,
    total_bytes: int = 64 * 1024 * 1024,
    depth: int = 4,
    label: str = "",
    timeout_s: float = 120.0,
) -> CpuRow:
    """CPU per DATA packet of a bulk transfer between two endpoints on loopback, sender in
    this process and receiver in a child (UDP sockets with ECN reading on, as on a fabric
    host; MRC over 2 planes × 2 spines with :func:`fabric_config`)."""
    ctx = mp.get_context("spawn")
    mine, theirs = ctx.Pipe()
    proc = ctx.Process(target=_cpu_receiver, args=(payload_bytes, theirs), daemon=True)
    proc.start()
    try:
        if not mine.poll(30):
            raise TransportError("benchmark receiver did not start")
        net = UdpNetwork(loopback_nics(PLANES), ecn=True)
        peer_ports = mine.recv()
        mine.send(net.ports)
        cfg = fabric_config(payload_bytes=payload_bytes)
        with Endpoint(net, 0, RouteTable({1: loopback_evs(peer_ports, SPINES)}), cfg) as ep:
            conn = ep.connect(1)
            payload = os.urandom(msg_bytes)
            for _ in range(8):  # warm up: connection set-up, window growth
                conn.send(payload, timeout=timeout_s).wait(timeout_s)

            def snapshot() -> tuple[float, float, int, int, int, int, _Snap]:
                mine.send("cpu")
                if not mine.poll(timeout_s):
                    raise TransportError("benchmark receiver did not answer")
                theirs_now: _Snap = mine.recv()
                st, cs = ep.stats(), conn.stats()
                return (
                    *_cpu_times(),
                    st.datagrams_in,
                    st.datagrams_out,
                    cs.packets_sent,
                    cs.retransmits,
                    theirs_now,
                )

            n = max(1, total_bytes // msg_bytes)
            s0 = snapshot()
            t0 = time.monotonic()
            send_windowed(conn, payload, n, depth, timeout_s)
            elapsed = time.monotonic() - t0
            s1 = snapshot()
        r0, r1 = s0[6], s1[6]
        sent = s1[4] - s0[4]
        received = r1[4] - r0[4]
        tx_cpu, rx_cpu = s1[0] - s0[0], r1[0] - r0[0]
        return CpuRow(
            label,
            payload_bytes,
            msg_bytes,
            n,
            depth,
            sent,
            (s1[2] - s0[2]) + (s1[3] - s0[3]),
            (r1[2] - r0[2]) + (r1[3] - r0[3]),
            round(elapsed, 3),
            round(tx_cpu, 3),
            round(s1[1] - s0[1], 3),
            round(rx_cpu, 3),
            round(r1[1] - r0[1], 3),
            round(tx_cpu / max(1, sent) * 1e6, 2),
            round(rx_cpu / max(1, received) * 1e6, 2),
            s1[5] - s0[5],
        )
    finally:
        mine.send("stop")
        proc.join(timeout=10)
        if proc.is_alive():
            proc.terminate()


def write_cpu_csv(rows: Sequence[CpuRow], path: str | pathlib.Path) -> None:
    _write_rows(rows, CpuRow, path)
