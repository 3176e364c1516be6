"""Controller speed (``make bench-controller``): route computation for 131,072 GPUs, and how
long a failure command takes from command to last write on a 4-plane, 32-switch fabric.

* ``routes``: :func:`controller.scale_routes.compute_fabric` for the multi-plane fabric of
  :class:`topologies.scale.ScaleSpec` (64 x 800G switches, 8 planes: 512 leaves and 256
  spines per plane, 131,072 hosts, 6,144 switches) with a plane, a spine, a leaf and a link
  failed: every leaf's ECMP group toward every remote leaf and every micro-SID next hop, all
  planes (``scope=all``) and the one plane a link failure changes (``scope=one plane``).
  Computation only: no switch, no Mininet.
* ``command``: ``fail plane 1`` / ``restore plane 1`` / ``fail link`` / ``restore all`` through
  :meth:`controller.fabric.FabricController.run_command` against 32 in-process tf-switch
  P4Runtime servers (real gRPC on 127.0.0.1; they share this process's CPU, so the figures are
  pessimistic): the time from the command to its last write acknowledged, the entities written
  and the switches synced.

One CSV row per run (``results/bench_controller.csv``); the medians are printed.

    python -m topologies.emulation.bench_controller [--runs 5] [--out results/bench_controller.csv]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from controller import program as fp
from controller.fabric import FabricController
from controller.scale_routes import ClosShape, ScaleFailures, compute_fabric
from switch.compile.package import load_device_config, make_device_config
from switch.device.device import Device
from switch.p4info import p4info_text
from switch.p4rt import P4RuntimeServer
from topologies.model import Fabric, FabricSpec, build_fabric
from topologies.scale import ScaleSpec

REPO_ROOT = Path(__file__).resolve().parents[2]
COLUMNS = (
    "kind",
    "fabric",
    "hosts",
    "switches",
    "what",
    "run",
    "ms",
    "entities",
    "switches_synced",
)
COMMAND_FABRIC = FabricSpec(planes=4, leaves=4, spines=4, hosts_per_leaf=2)
COMMANDS = (
    ("fail", "plane", "1"),
    ("restore", "plane", "1"),
    ("fail", "link", "p0l0", "p0s0"),
    ("restore", "all"),
)


def bench_routes(runs: int) -> list[tuple[object, ...]]:
    shape = ClosShape.from_scale(ScaleSpec())
    name = f"{shape.planes} planes x ({shape.leaves} leaves + {shape.spines} spines)"
    failures = ScaleFailures.of(
        shape, planes=[3], spines=[(2, 9)], leaves=[(4, 100)], links=[(1, 5, 7)]
    )
    rows: list[tuple[object, ...]] = []
    for scope, planes in (("all planes", None), ("one plane", [1])):
        for run in range(runs):
            t0 = time.perf_counter()
            routes = compute_fabric(shape, failures, planes=planes)
            ms = (time.perf_counter() - t0) * 1000
            groups = sum(r.group_sizes.size - shape.leaves for r in routes.values())
            switches = len(routes) * (shape.leaves + shape.spines)
            rows.append(
                (
                    "routes",
                    name,
                    shape.hosts,
                    shape.switches,
                    scope,
                    run,
                    round(ms, 2),
                    groups,
                    switches,
                )
            )
    return rows


@contextlib.contextmanager
def in_process_switches(fabric: Fabric) -> Iterator[dict[str, str]]:
    """One in-process tf-switch P4Runtime server per fabric switch; their addresses."""
    with contextlib.ExitStack() as stack:
        addresses = {}
        for sw in fabric.switches:
            server = P4RuntimeServer(Device(sw.device_id, cpu_port=fp.CPU_PORT), "127.0.0.1:0")
            stack.callback(server.start().stop)
            addresses[sw.name] = f"127.0.0.1:{server.port}"
        yield addresses


def bench_commands(runs: int) -> list[tuple[object, ...]]:
    fabric = build_fabric(COMMAND_FABRIC)
    s = fabric.spec
    name = f"{s.planes} planes x ({s.leaves} leaves + {s.spines} spines), in-process tf-switch"
    rows: list[tuple[object, ...]] = []
    with tempfile.TemporaryDirectory() as tmp, in_process_switches(fabric) as addresses:
        cfg = make_device_config(REPO_ROOT / "p4" / "fabric.p4")
        (Path(tmp) / "fabric.tfp4.json").write_bytes(cfg)
        (Path(tmp) / "fabric.p4info.txtpb").write_text(p4info_text(load_device_config(cfg).schema))
        with FabricController(
            fabric,
            Path(tmp) / "fabric.p4info.txtpb",
            Path(tmp) / "fabric.tfp4.json",
            results_dir=tmp,
            addresses=addresses,
        ) as ctl:
            ctl.connect()
            ctl.push_pipeline()
            ctl.install_routes()
            ctl.run_command(["help"])  # imports the command table: not part of a command
            synced: set[str] = set()
            for session in ctl.sessions.values():
                real = session.sync

                def counting(desired, real=real, name=session.name):  # type: ignore[no-untyped-def]
                    synced.add(name)
                    return real(desired)

                session.sync = counting  # type: ignore[method-assign]
            for run in range(runs):
                for cmd in COMMANDS:
                    synced.clear()
                    t0 = time.perf_counter()
                    ctl.run_command(list(cmd))
                    ms = (time.perf_counter() - t0) * 1000
                    rows.append(
                        (
                            "command",
                            name,
                            len(fabric.hosts),
                            len(fabric.switches),
                            " ".join(cmd),
                            run,
                            round(ms, 2),
                            ctl.last_sync.total,
                            len(synced),
                        )
                    )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m topologies.emulation.bench_controller", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default="results/bench_controller.csv")
    args = ap.parse_args(argv)
    if args.runs < 1:
        print("--runs must be at least 1", file=sys.stderr)
        return 2
    rows = bench_routes(args.runs) + bench_commands(args.runs)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        w.writerows(rows)
    for kind, what in dict.fromkeys((r[0], r[4]) for r in rows):
        ms = [float(str(r[6])) for r in rows if (r[0], r[4]) == (kind, what)]
        fabric = next(r[1] for r in rows if r[0] == kind)
        print(
            f"{kind:8} {what:22} median {statistics.median(ms):8.1f} ms, max {max(ms):8.1f} ms "
            f"({len(ms)} runs; {fabric})"
        )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
