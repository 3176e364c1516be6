"""``make bench-transport``: MRC vs single path vs TCP, on loopback and through the fabric.

The loopback rows come from :func:`host.bench.loopback_bench`. :func:`fabric_bench` is the same
measurement between two hosts of a running emulated fabric (receiver and sender in the hosts'
namespaces, :mod:`host.stream_agent`); ``--fabric auto`` (``make bench-transport``) adds those
rows after the loopback ones, on the fabric of ``make fabric-up`` if one runs, else (root) on a
default fabric with ``--link-mbps`` links brought up for the benchmark. Fabric rows carry
``capacity_mbps``: the link rate times the planes into the receiver.

``--cpu`` measures the MRC transport's CPU time per packet instead (:func:`host.bench.cpu_bench`:
a bulk transfer between two endpoints on loopback, sender and receiver side) into
``results/bench_transport_cpu.csv``. ``--cpu-link-mbps`` (root) runs it in a private network
namespace whose loopback a token bucket limits to that rate: packets then arrive one at a time,
as at a fabric's link rates, and each costs a wakeup of the receiving I/O thread.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import IO, TypedDict, Unpack

from experiments.hosts import FABRIC_MESSAGE, STATE_FILE, HostProcess, read_running_state
from host.bench import (
    DEFAULT_SIZES,
    TRANSPORTS,
    BenchRow,
    CpuRow,
    cpu_bench,
    loopback_bench,
    write_cpu_csv,
    write_csv,
)
from host.errors import FabricNotRunning, TransportError
from host.stream_agent import RunSpec, host_args
from topologies.emulation.bringup import own_fabric
from topologies.emulation.mnfabric import FabricNetError
from topologies.model import Fabric, FabricSpec

FABRIC_SIZES = (4 * 1024, 64 * 1024, 1024 * 1024)
FABRIC_GOODPUT_BYTES = 2 * 1024 * 1024
FABRIC_MCT_MESSAGES = 10
FABRIC_LINK_MBPS = 5.0
FABRIC_ROW_TIMEOUT_S = 300.0


def fabric_bench(
    topology: str | pathlib.Path,
    *,
    src: str = "h1",
    dst: str | None = None,
    transports: Sequence[str] = TRANSPORTS,
    sizes: Sequence[int] = FABRIC_SIZES,
    depth: int = 8,
    goodput_bytes: int = FABRIC_GOODPUT_BYTES,
    mct_messages: int = FABRIC_MCT_MESSAGES,
    log: IO[bytes] | None = None,
) -> list[BenchRow]:
    """The same measurement between two hosts of a running emulated fabric.

    The receiver runs in ``dst``'s Mininet namespace and the sender in ``src``'s
    (``host.stream_agent``, started with ``mnexec``): MRC over every micro-SID path with
    ``fabric_config()``, single path over the baseline addresses (one plane per connection,
    the switches' ECMP picks the spine), TCP over the plane-0 baseline addresses.

    Args:
        topology: the running fabric's ``topology.json`` (its ``state.json`` is beside it).
        dst: default: the first host on another leaf than ``src`` (its paths cross a spine).
    Raises:
        FabricNotRunning: no fabric is up there.
    """
    state = read_running_state(pathlib.Path(topology).with_name(STATE_FILE.name))
    fabric = Fabric.load(topology)
    if dst is None:
        leaf = fabric.host(src).leaf_index
        dst = next(
            (h.name for h in fabric.hosts if h.leaf_index != leaf),
            next(h.name for h in fabric.hosts if h.name != src),
        )
    pids = state.hosts
    capacity = (state.link_mbps or fabric.spec.link_mbps) * fabric.spec.planes
    rows: list[BenchRow] = []
    for transport in transports:
        if transport not in TRANSPORTS:
            raise ValueError(
                f"unknown transport {transport!r}; choose from {', '.join(TRANSPORTS)}"
            )
        rx_spec = RunSpec(str(topology), dst, transport, expect=1, sample_ms=0)
        tx_spec = RunSpec(
            str(topology),
            src,
            transport,
            send_to=(dst,),
            depth=depth,
            sample_ms=0,
            bench_sizes=tuple(sizes),
            bench_goodput_bytes=goodput_bytes,
            bench_mct_messages=mct_messages,
        )
        with (
            HostProcess(pids[dst], host_args(rx_spec), log) as rx,
            HostProcess(pids[src], host_args(tx_spec), log) as tx,
        ):
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
    return (
        f"{row.transport:12s} {row.network:16s} {row.msg_bytes:>9d} B  "
        f"{row.goodput_mbyte_s:7.2f} MB/s  mct p50 {row.mct_p50_ms:8.2f} ms  "
        f"p99 {row.mct_p99_ms:8.2f} ms  retx {row.retransmits}"
    )


class FabricBenchOptions(TypedDict, total=False):
    """:func:`fabric_bench`'s settings that :func:`auto_fabric_bench` passes on."""

    src: str
    dst: str | None
    transports: Sequence[str]
    sizes: Sequence[int]
    depth: int
    goodput_bytes: int
    mct_messages: int


def auto_fabric_bench(
    results_dir: str, *, link_mbps: float = FABRIC_LINK_MBPS, **kw: Unpack[FabricBenchOptions]
) -> list[BenchRow]:
    """:func:`fabric_bench` on the fabric of ``make fabric-up`` if one runs, else on a default
    fabric brought up (and stopped) for it.

    Raises:
        FabricNotRunning: none runs and none can be brought up (not root, another one busy).
    """
    try:
        read_running_state(pathlib.Path(results_dir) / STATE_FILE)
    except FabricNotRunning:
        pass
    else:
        return fabric_bench(pathlib.Path(results_dir) / "fabric" / "topology.json", **kw)
    if os.geteuid() != 0:
        raise FabricNotRunning(f"{FABRIC_MESSAGE}, or run as root to bring one up")
    log_path = pathlib.Path(results_dir) / "bench_transport_fabric.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with own_fabric(FabricSpec(link_mbps=link_mbps), results_dir) as up, log_path.open("wb") as log:
        print(f"fabric up for the benchmark: links {link_mbps:g} Mbit/s", flush=True)
        return fabric_bench(up.net.topology_path.resolve(), log=log, **kw)


CPU_PAYLOADS = (1384, 8192)
CPU_RUNS = 3


def cpu_main(args: argparse.Namespace) -> int:
    """``--cpu``: CPU per packet, ``--cpu-runs`` transfers per payload size."""
    if args.cpu_link_mbps and not args.in_netns:
        return _in_limited_netns(args.cpu_link_mbps)
    label = f"lo {args.cpu_link_mbps:g} Mbit/s" if args.cpu_link_mbps else "lo unlimited"
    rows: list[CpuRow] = []
    for payload in [int(p) for p in args.cpu_payloads.split(",") if p]:
        for _ in range(args.cpu_runs):
            try:
                row = cpu_bench(
                    payload_bytes=payload,
                    total_bytes=args.cpu_mbytes * 1024 * 1024,
                    label=label,
                )
            except TransportError as e:
                print(f"bench-transport --cpu: {e}", file=sys.stderr)
                return 2
            print(
                f"{label:18s} payload {payload:5d} B  {row.data_packets:7d} packets  "
                f"sender {row.sender_us_per_packet:6.2f} us/packet  "
                f"receiver {row.receiver_us_per_packet:6.2f} us/packet  retx {row.retransmits}",
                flush=True,
            )
            rows.append(row)
    write_cpu_csv(rows, args.cpu_out)
    print(f"wrote {args.cpu_out}")
    return 0


def _in_limited_netns(mbps: float) -> int:
    """Run this command again in a new network namespace (``unshare -n``) whose loopback is
    limited to ``mbps`` by a token bucket (both directions and planes share it)."""
    if os.geteuid() != 0:
        print("bench-transport: --cpu-link-mbps needs root (a private network namespace)",
              file=sys.stderr)  # fmt: skip
        return 2
    again = shlex.join([sys.executable, "-m", "experiments.bench_transport", *sys.argv[1:]])
    script = (
        "ip link set lo up && "
        f"tc qdisc add dev lo root tbf rate {mbps:g}mbit burst 32kb latency 20ms && "
        f"exec {again} --in-netns"
    )
    return subprocess.run(["unshare", "-n", "sh", "-c", script], check=False).returncode


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m experiments.bench_transport", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--out", default="results/bench_transport.csv")
    ap.add_argument("--transports", default=",".join(TRANSPORTS))
    ap.add_argument(
        "--sizes",
        default=",".join(str(s) for s in DEFAULT_SIZES),
        help="message sizes in bytes, comma-separated",
    )
    ap.add_argument("--depth", type=int, default=8, help="messages outstanding (goodput)")
    ap.add_argument("--goodput-mbytes", type=int, default=48, help="bytes per goodput run, MB")
    ap.add_argument(
        "--fabric",
        metavar="TOPOLOGY.json|auto",
        help="measure through a running fabric only; 'auto': loopback, then the "
        "running fabric or (root) a default one brought up for it",
    )
    ap.add_argument("--fabric-sizes", default=",".join(str(s) for s in FABRIC_SIZES))
    ap.add_argument("--fabric-goodput-kbytes", type=int, default=FABRIC_GOODPUT_BYTES // 1024)
    ap.add_argument(
        "--link-mbps",
        type=float,
        default=FABRIC_LINK_MBPS,
        help="'auto' without a running fabric: its link rate",
    )
    ap.add_argument("--results", default="results", help="where fabrics keep their state")
    ap.add_argument("--cpu", action="store_true", help="CPU per packet of MRC instead")
    ap.add_argument("--cpu-out", default="results/bench_transport_cpu.csv")
    ap.add_argument("--cpu-payloads", default=",".join(str(p) for p in CPU_PAYLOADS))
    ap.add_argument("--cpu-mbytes", type=int, default=64, help="bytes per transfer, MB")
    ap.add_argument("--cpu-runs", type=int, default=CPU_RUNS)
    ap.add_argument(
        "--cpu-link-mbps",
        type=float,
        default=0.0,
        help="root: limit loopback to this rate (a private network namespace)",
    )
    ap.add_argument("--in-netns", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.cpu:
        return cpu_main(args)
    transports = [t for t in args.transports.split(",") if t]
    sizes = [int(s) for s in args.sizes.split(",") if s]
    fabric_kw = FabricBenchOptions(
        transports=transports,
        depth=args.depth,
        sizes=[int(s) for s in args.fabric_sizes.split(",") if s],
        goodput_bytes=args.fabric_goodput_kbytes * 1024,
    )
    rows: list[BenchRow] = []
    try:
        if args.fabric and args.fabric != "auto":
            rows = fabric_bench(args.fabric, **fabric_kw)
        else:
            rows = loopback_bench(
                transports, sizes, depth=args.depth, goodput_bytes=args.goodput_mbytes * 1024 * 1024
            )
            if args.fabric == "auto":
                try:
                    rows += auto_fabric_bench(args.results, link_mbps=args.link_mbps, **fabric_kw)
                except (FabricNotRunning, FabricNetError) as e:
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
