"""Bring-up time of a fabric: start -> every path verified, over a few runs (``make bench-fabric``).

Each run brings the fabric up with :func:`topologies.emulation.bringup.bring_up` (Mininet,
switches, pipeline push, routes, all-pairs all-paths check), records the phase times, and tears
it down (timed too). ``--cold`` removes the compiled program before the first run, so that run includes
the P4 build. Writes one CSV row per run (``results/bench_fabric.csv``) and prints the medians.

    python -m topologies.emulation.bench_bringup [--runs 5]
        [--planes 2 --leaves 2 --spines 2 --hosts 2] [--launch fork|exec] [--cold]
        [--out results/bench_fabric.csv]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from topologies.emulation.bringup import PHASES, bring_up
from topologies.emulation.cli import add_spec_args, spec_from
from topologies.emulation.fabricnet import FabricNetOptions
from topologies.emulation.mnfabric import SwitchOptions
from topologies.model import build_fabric

COLUMNS = (
    "run",
    "target",
    "launch",
    "planes",
    "leaves",
    "spines",
    "hosts",
    "switches",
    "paths",
    "paths_ok",
    "program_cached",
    *(f"{p}_s" for p in PHASES),
    "total_s",
    "teardown_s",
)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m topologies.emulation.bench_bringup", description=__doc__
    )
    add_spec_args(ap)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--target", default="tf", choices=("tf", "bmv2"))
    ap.add_argument("--launch", default="fork", choices=("fork", "exec"))
    ap.add_argument("--cold", action="store_true", help="rebuild the P4 program in the first run")
    ap.add_argument("--results", default="results")
    ap.add_argument("--out", default="results/bench_fabric.csv")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_bringup: needs root (Mininet)", file=sys.stderr)
        return 2
    fabric = build_fabric(spec_from(args))
    run_dir = Path(args.results) / "fabric"
    options = FabricNetOptions(
        switch=SwitchOptions(
            target=args.target,
            launch=args.launch,
            log_dir=str(run_dir / "logs"),
            link_mbps=fabric.spec.link_mbps,
            queue_depth=fabric.spec.queue_depth,
        ),
        results_dir=args.results,
    )
    if args.cold:
        for suffix in ("tfp4.json", "p4info.txtpb"):
            Path(options.build_dir, f"fabric.{suffix}").unlink(missing_ok=True)
    rows: list[dict[str, str | float]] = []
    for run in range(1, args.runs + 1):
        up = bring_up(fabric, options)
        t = time.perf_counter()
        up.stop()
        teardown = time.perf_counter() - t
        s = fabric.spec
        row: dict[str, str | float] = {  # int and bool values are floats to the type checker
            "run": run,
            "target": args.target,
            "launch": args.launch,
            "planes": s.planes,
            "leaves": s.leaves,
            "spines": s.spines,
            "hosts": len(fabric.hosts),
            "switches": len(fabric.switches),
            "paths": len(up.results),
            "paths_ok": sum(r.ok for r in up.results),
            "program_cached": up.net.program_cached,
            "total_s": round(up.timings["total"], 4),
            "teardown_s": round(teardown, 4),
        }
        for p in PHASES:
            row[f"{p}_s"] = round(up.timings.get(p, 0.0), 4)
        rows.append(row)
        print(
            f"run {run}: total {row['total_s']:.2f} s, {row['paths_ok']}/{row['paths']} paths, "
            + ", ".join(f"{p} {row[f'{p}_s']:.2f}" for p in PHASES)
            + f"; teardown {teardown:.2f} s",
            flush=True,
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    warm = [r for r in rows if r["program_cached"]] or rows
    med = {
        c: statistics.median(float(r[c]) for r in warm)
        for c in (*(f"{p}_s" for p in PHASES), "total_s")
    }
    print(
        f"median of {len(warm)} runs with the program built: total {med['total_s']:.2f} s ("
        + ", ".join(f"{p} {med[f'{p}_s']:.2f}" for p in PHASES)
        + f"); wrote {out}"
    )
    bad = [r for r in rows if r["paths_ok"] != r["paths"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
