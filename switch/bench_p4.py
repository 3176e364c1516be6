"""``make bench-p4``: packets per second of the software P4 target, in process, on one core.

Runs whole v1model pipeline passes (parser, ingress, egress, deparser) with
:meth:`V1Switch.process` in a loop and writes ``results/bench_p4.csv``:

* ``ipv6_router``: ``p4/ipv6_router.p4`` with 1,000 /64 routes plus a few shorter prefixes, 1,024
  distinct destinations cycling (BMv2's published stress test reaches about 80,000 packets/s
  end to end; this project's target for this program is at least 100,000).
* ``fabric``: ``p4/fabric.p4`` as a fabric leaf, set up by :mod:`switch.bench_fabric`.

``--native`` runs the same cases on the native executor (:mod:`switch.native`: the program's
generated C), feeding it batches of ``--batch`` packets per call (:meth:`NativeSwitch.process_frames`,
a receive batch of one port;
``--batch 1`` measures ``process`` one packet at a time). The ``executor`` column says which ran.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from switch.bench_fabric import setup_fabric
from switch.compile import load_program
from switch.native import NativeSwitch, NativeUnavailable, make_switch
from switch.pipeline.tables import TableEntry
from switch.pipeline.v1model import V1Switch
from switch.schema import ActionCall

ROOT = Path(__file__).resolve().parents[1]
P4_DIR = ROOT / "p4"


@dataclass
class Result:
    program: str
    entries: int
    flows: int
    packets: int
    seconds: float
    pps: float
    cpu_us: float = 0.0  # CPU time per packet (what a busy machine does not distort)


def _ipv6_frames(dsts: list[int]) -> list[bytes]:
    out = []
    for d in dsts:
        eth = bytes.fromhex("0000000000aa0000000000bb86dd")
        ip6 = (
            bytes.fromhex("6000000000101140")
            + bytes.fromhex("20010db8ffff" + "00" * 9 + "01")
            + d.to_bytes(16, "big")
        )
        udp = bytes.fromhex("04d2162e00100000")
        out.append(eth + ip6 + udp + bytes(64 - 8))
    return out


def setup_ipv6_router(sw: V1Switch, rng: random.Random, flows: int) -> tuple[int, list[bytes]]:
    t = sw.state.table("ipv6_lpm")
    prefixes: set[int] = set()
    while len(prefixes) < 1000:
        prefixes.add((0x20010DB8 << 96) | (rng.getrandbits(32) << 64))
    routes = sorted(prefixes)
    for i, p in enumerate(routes):
        t.insert(
            TableEntry(
                ((p, 64),),
                action=ActionCall("MyIngress.ipv6_forward", (0x020000000000 + i, 1 + i % 4)),
            )
        )
    for plen, p in ((32, 0x20010DB8 << 96), (48, (0x20010DB8 << 96) | (1 << 80))):
        t.insert(
            TableEntry(
                ((p, plen),), action=ActionCall("MyIngress.ipv6_forward", (0x020000000099, 5))
            )
        )
    dsts = [routes[rng.randrange(len(routes))] | rng.getrandbits(64) for _ in range(flows)]
    return len(routes) + 2, _ipv6_frames(dsts)


def measure(sw: V1Switch, frames: list[bytes], seconds: float) -> tuple[int, float]:
    process = sw.process
    n = 0
    nf = len(frames)
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for i in range(1024):
            out = process(1, frames[i % nf])
            if not out:
                raise RuntimeError("benchmark packet was dropped: the setup is wrong")
        n += 1024
        if time.perf_counter() >= deadline:
            break
    return n, time.perf_counter() - start


def measure_batches(
    sw: NativeSwitch, frames: list[bytes], seconds: float, batch: int
) -> tuple[int, float]:
    """Like :func:`measure`, ``batch`` packets per call into the native executor."""
    nf = len(frames)
    batches = [[frames[(b + i) % nf] for i in range(batch)] for b in range(0, nf, batch)]
    process_frames = sw.process_frames
    n = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for pkts in batches:
            out = process_frames(1, pkts)
            if len(out) != len(pkts):
                raise RuntimeError("benchmark packet was dropped: the setup is wrong")
            n += len(pkts)
        if time.perf_counter() >= deadline:
            break
    return n, time.perf_counter() - start


def run_one(
    name: str,
    path: Path,
    setup: Callable[[V1Switch, random.Random, int], tuple[int, list[bytes]]],
    seconds: float,
    repeats: int,
    flows: int,
    native: bool = False,
    batch: int = 256,
) -> Result:
    prog = load_program(path)
    sw = make_switch(prog, seed=1, mode="on") if native else V1Switch(prog, seed=1)
    entries, frames = setup(sw, random.Random(7), flows)

    def one(secs: float) -> tuple[int, float]:
        if isinstance(sw, NativeSwitch) and batch > 1:
            return measure_batches(sw, frames, secs, batch)
        return measure(sw, frames, secs)

    one(0.3)  # warm-up (lookup caches, allocator)
    runs = []
    cpu = []
    for _ in range(repeats):
        c0 = time.process_time()
        n, dt = one(seconds)
        cpu.append((time.process_time() - c0) / n * 1e6)
        runs.append((n, dt))
    rates = [n / dt for n, dt in runs]
    best = statistics.median(rates)
    total_n = sum(n for n, _ in runs)
    total_t = sum(dt for _, dt in runs)
    return Result(name, entries, flows, total_n, total_t, best, statistics.median(cpu))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/bench_p4.csv")
    ap.add_argument("--seconds", type=float, default=3.0, help="length of one run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--flows", type=int, default=1024)
    ap.add_argument(
        "--native", action="store_true", help="run the generated C (switch.native) instead"
    )
    ap.add_argument("--batch", type=int, default=256, help="packets per call with --native")
    args = ap.parse_args(argv)
    if args.batch < 1:
        ap.error("--batch must be at least 1")
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})  # one core
    cases = [
        ("ipv6_router", P4_DIR / "ipv6_router.p4", setup_ipv6_router),
        ("fabric", P4_DIR / "fabric.p4", setup_fabric),
    ]
    try:
        results = [
            run_one(n, p, s, args.seconds, args.repeats, args.flows, args.native, args.batch)
            for n, p, s in cases
        ]
    except NativeUnavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    executor = f"native (batch {args.batch})" if args.native else "python"
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "program",
                "table_entries",
                "flows",
                "packets",
                "seconds",
                "pps",
                "us_per_packet",
                "cpu_us_per_packet",
                "python",
                "machine",
                "executor",
            ]
        )
        for r in results:
            w.writerow(
                [
                    r.program,
                    r.entries,
                    r.flows,
                    r.packets,
                    f"{r.seconds:.3f}",
                    f"{r.pps:.0f}",
                    f"{1e6 / r.pps:.2f}",
                    f"{r.cpu_us:.3f}",
                    platform.python_version(),
                    platform.machine(),
                    executor,
                ]
            )
    for r in results:
        print(
            f"{r.program}: {r.pps:,.0f} packets/s ({1e6 / r.pps:.2f} us/packet, "
            f"{r.cpu_us:.3f} us CPU/packet, "
            f"{r.entries} table entries, {r.flows} flows, {executor})"
        )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
