"""``make bench-collectives``: all-reduce latency and bus bandwidth, ``tailfabric`` vs gloo,
4 ranks on the default fabric, and the stall when a plane fails mid-stream.

Brings up the default fabric (2 planes x 2 leaves x 2 spines, 4 hosts) at ``--link-mbps``
unless one is running (:class:`experiments.fabric_job.FabricSession`), and launches the ranks
with ``tf-run``'s launcher (:mod:`experiments.tf_run`), one per host:

* **sweep**: for each size (4 KiB ... 16 MiB of float32) a barrier, one warm-up (up to
  1 MiB), then ``reps`` timed all-reduces (SUM), each after a barrier; rank 0 records each
  one's latency. Bus bandwidth is
  NCCL's: ``2 (n - 1) / n * bytes / latency``.
* **failover**: a stream of ``--stream-kib`` all-reduces for ``--stream-s`` seconds; the
  driver fails plane 0 (the plane gloo's TCP connections use: the hosts' plane-0 addresses)
  through the controller ``--fail-after-s`` into the stream and restores it
  ``--down-s`` later. Recorded: every all-reduce's start and end on rank 0 (the machine's
  monotonic clock, shared by the hosts' namespaces), and ``stall_ms``: from the start of the
  fail command to the end of the first all-reduce that completes after it.

Writes ``<out>`` (one row per backend and size, and one failover row per backend),
``<out>_failover.csv`` (the stream's all-reduces) and ``<out>.png`` (drawn from the CSVs
only). ``python -m experiments.bench_collectives rank ...`` is one rank (what tf-run starts).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from experiments.outputs import read_rows, save_png, write_csv
from experiments.tf_run import Launch, LaunchError, enter_command, exit_status, fabric_plan

SIZES_BYTES = (4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20)
QUICK_SIZES_BYTES = (4 << 10, 64 << 10, 1 << 20)
BACKENDS = ("tailfabric", "gloo")
HOSTS = ("h1", "h2", "h3", "h4")
FAIL_PLANE = 0
COLUMNS = (
    "kind",
    "backend",
    "ranks",
    "link_mbps",
    "size_bytes",
    "reps",
    "latency_ms",
    "latency_min_ms",
    "busbw_mbps",
    "stall_ms",
    "normal_ms",
    "down_s",
    "error",
)
STREAM_COLUMNS = ("backend", "index", "start_s", "end_s", "latency_ms")


def reps_for(size: int) -> int:
    """Timed repetitions per size: fewer for the large ones (seconds each on slow links)."""
    return 5 if size <= 256 << 10 else 3 if size <= 1 << 20 else 2


def busbw_mbps(size: int, latency_s: float, ranks: int) -> float:
    return 2 * (ranks - 1) / ranks * size * 8 / latency_s / 1e6


# -- one rank --------------------------------------------------------------------------------


def _init(backend: str, timeout_s: float) -> Any:
    import torch.distributed as dist

    if backend == "tailfabric":
        import host.torchdist  # noqa: F401

    dist.init_process_group(backend, init_method="env://", timeout=timedelta(seconds=timeout_s))
    return dist


def rank_sweep(backend: str, out: pathlib.Path, sizes: Sequence[int]) -> None:
    import torch

    dist = _init(backend, 300)
    rows = []
    for size in sizes:
        t = torch.ones(size // 4)
        dist.barrier()
        if size <= 1 << 20:
            dist.all_reduce(t)  # warm-up (connections, windows); the large sizes follow warm
        lat = []
        for _ in range(reps_for(size)):
            dist.barrier()
            t0 = time.monotonic()
            dist.all_reduce(t)
            lat.append(time.monotonic() - t0)
        rows.append({"size_bytes": size, "latencies_s": lat})
    if dist.get_rank() == 0:
        out.write_text(
            json.dumps({"backend": backend, "ranks": dist.get_world_size(), "rows": rows})
        )
    dist.destroy_process_group()


def rank_stream(backend: str, out: pathlib.Path, size: int, stream_s: float) -> None:
    """All-reduces until rank 0's clock says stop (its flag rides in element 0)."""
    import torch

    dist = _init(backend, 120)
    rank = dist.get_rank()
    t = torch.zeros(size // 4)
    dist.all_reduce(t)
    if rank == 0:
        (out.parent / (out.name + ".started")).write_text(str(time.monotonic()))
    end = time.monotonic() + stream_s
    times = []
    while True:
        t.zero_()
        t[0] = 1.0 if rank == 0 and time.monotonic() < end else 0.0
        t0 = time.monotonic()
        dist.all_reduce(t)
        times.append((t0, time.monotonic()))
        if t[0].item() == 0.0:
            break
    if rank == 0:
        out.write_text(json.dumps({"backend": backend, "times": times}))
    dist.destroy_process_group()


# -- the driver ------------------------------------------------------------------------------


class Bench:
    def __init__(self, args: argparse.Namespace, state: Any) -> None:
        from topologies.model import Fabric

        self.args = args
        self.state = state
        self.fabric = Fabric.load(state.topology)
        self.work = pathlib.Path(args.results) / "bench_collectives"
        self.work.mkdir(parents=True, exist_ok=True)
        self.port = 29600
        self.log = open(self.work / "ranks.log", "a")  # noqa: SIM115
        self._actions: Any = None

    def actions(self) -> Any:
        """The controller, connected once for every failover run (a second connection
        would not be the switches' primary client while the first one's stream lingers)."""
        from experiments.fabric_job import ControllerActions

        if self._actions is None:
            self._actions = ControllerActions(self.state, self.args.results)
        return self._actions

    def close(self) -> None:
        if self._actions is not None:
            self._actions.close()
        self.log.close()

    def launch(self, argv: Sequence[str]) -> Launch:
        self.port += 1
        plan = fabric_plan(
            self.fabric, self.state.topology, HOSTS, self.state.hosts, self.port, enter_command()
        )
        cmd = [sys.executable, "-m", "experiments.bench_collectives", "rank", *argv]
        launch = Launch(plan, cmd, self.log)
        launch.start()
        return launch

    def finish(self, launch: Launch, what: str) -> str:
        codes = launch.supervise()
        status = exit_status(codes, launch.first_failure)
        return "" if status == 0 else f"{what}: ranks exited {codes} (see {self.log.name})"

    def sweep(self, backend: str, sizes: Sequence[int]) -> list[dict[str, object]]:
        out = self.work / f"sweep_{backend}.json"
        out.unlink(missing_ok=True)
        sizes_arg = ",".join(str(s) for s in sizes)
        err = self.finish(self.launch(["sweep", backend, str(out), sizes_arg]), "sweep")
        base = {"kind": "sweep", "backend": backend, "ranks": len(HOSTS)}
        base["link_mbps"] = self.args.link_mbps
        if err or not out.exists():
            return [{**base, "error": err or "no result"}]
        doc = json.loads(out.read_text())
        rows: list[dict[str, object]] = []
        for r in doc["rows"]:
            lat = [float(x) for x in r["latencies_s"]]
            med = statistics.median(lat)
            rows.append(
                {
                    **base,
                    "size_bytes": r["size_bytes"],
                    "reps": len(lat),
                    "latency_ms": round(med * 1e3, 3),
                    "latency_min_ms": round(min(lat) * 1e3, 3),
                    "busbw_mbps": round(busbw_mbps(int(r["size_bytes"]), med, len(HOSTS)), 3),
                }
            )
        return rows

    def failover(self, backend: str) -> tuple[dict[str, object], list[dict[str, object]]]:
        from controller.errors import ControllerError

        a = self.args
        size = a.stream_kib * 1024
        out = self.work / f"stream_{backend}.json"
        started = out.parent / (out.name + ".started")
        out.unlink(missing_ok=True)
        started.unlink(missing_ok=True)
        row: dict[str, object] = {"kind": "failover", "backend": backend, "ranks": len(HOSTS)}
        row.update(link_mbps=a.link_mbps, size_bytes=size, down_s=a.down_s)
        t_fail = math.nan
        failed = ""
        launch = self.launch(["stream", backend, str(out), str(size), str(a.stream_s)])
        try:
            actions = self.actions()
            deadline = time.monotonic() + 300
            while not started.exists() and time.monotonic() < deadline:
                if any(p.poll() is not None for p in launch.procs.values()):
                    break
                time.sleep(0.1)
            if started.exists():
                time.sleep(a.fail_after_s)
                t_fail = time.monotonic()
                actions.fail_plane(FAIL_PLANE)
                time.sleep(a.down_s)
                actions.restore_plane(FAIL_PLANE)
        except ControllerError as e:
            failed = f"the controller failed: {e}"
            launch.stop()
        err = self.finish(launch, "failover")
        if failed or err or not out.exists() or not started.exists():
            row["error"] = failed or err or "no result"
            return row, []
        times = [(float(s), float(e)) for s, e in json.loads(out.read_text())["times"]]
        stream = [
            {
                "backend": backend,
                "index": i,
                "start_s": round(s - t_fail, 6),
                "end_s": round(e - t_fail, 6),
                "latency_ms": round((e - s) * 1e3, 3),
            }
            for i, (s, e) in enumerate(times)
        ]
        before = [e - s for s, e in times if e < t_fail]
        after = [e for _s, e in times if e >= t_fail]
        row["normal_ms"] = round(statistics.median(before) * 1e3, 3) if before else math.nan
        row["stall_ms"] = round((after[0] - t_fail) * 1e3, 3) if after else math.nan
        row["reps"] = len(times)
        return row, stream


def plot(out: pathlib.Path) -> pathlib.Path:
    """The PNG beside ``out``, from ``out`` and ``<out>_failover.csv`` only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_rows(out)
    stream_path = out.with_name(out.stem + "_failover.csv")
    stream = read_rows(stream_path) if stream_path.exists() else []
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for backend in BACKENDS:
        pts = [
            (int(r["size_bytes"]), float(r["busbw_mbps"]))
            for r in rows
            if r["kind"] == "sweep" and r["backend"] == backend and r["busbw_mbps"]
        ]
        if pts:
            ax1.plot([p[0] / 1024 for p in pts], [p[1] for p in pts], "o-", label=backend)
    ax1.set_xscale("log", base=2)
    ax1.set_xlabel("all-reduce size (KiB, log scale)")
    ax1.set_ylabel("bus bandwidth (Mbit/s)")
    ax1.set_ylim(bottom=0)
    ax1.set_title("4 ranks across the fabric: 2 (n-1)/n x bytes / latency")
    ax1.legend()
    for backend in BACKENDS:
        trace = [
            (float(r["end_s"]), float(r["latency_ms"])) for r in stream if r["backend"] == backend
        ]
        if trace:
            ax2.plot([p[0] for p in trace], [p[1] for p in trace], ".-", label=backend)
    ax2.axvline(0.0, color="black", ls="--", lw=1, label=f"plane {FAIL_PLANE} fails")
    down = [float(r["down_s"]) for r in rows if r["kind"] == "failover" and r["down_s"]]
    if down:
        ax2.axvline(down[0], color="grey", ls=":", lw=1, label="plane restored")
    ax2.set_yscale("log")
    ax2.set_xlabel("all-reduce completion time (s from the fail command)")
    ax2.set_ylabel("all-reduce latency (ms, log scale)")
    ax2.set_title("a plane failed mid-stream")
    ax2.legend()
    return save_png(fig, out.with_suffix(".png"))


def run(args: argparse.Namespace) -> int:
    from controller.errors import ControllerError
    from experiments.fabric_job import FabricSession
    from host.errors import TransportError

    out = pathlib.Path(args.out)
    sizes = QUICK_SIZES_BYTES if args.quick else SIZES_BYTES
    rows: list[dict[str, object]] = []
    streams: list[dict[str, object]] = []

    def save() -> None:  # after every run: what was measured survives a later failure
        write_csv(out, COLUMNS, rows)
        write_csv(out.with_name(out.stem + "_failover.csv"), STREAM_COLUMNS, streams)

    try:
        with FabricSession(args.results, link_mbps=args.link_mbps, wait_s=args.wait_s) as state:
            bench = Bench(args, state)
            try:
                for backend in BACKENDS:
                    print(f"bench-collectives: sweep, {backend}", flush=True)
                    rows += bench.sweep(backend, sizes)
                    save()
                for backend in BACKENDS:
                    print(f"bench-collectives: plane {FAIL_PLANE} fails, {backend}", flush=True)
                    row, stream = bench.failover(backend)
                    rows.append(row)
                    streams += stream
                    save()
            finally:
                bench.close()
    except (LaunchError, TransportError, OSError, ControllerError) as e:
        print(f"bench-collectives: {e}", file=sys.stderr)
        return 2
    save()
    png = plot(out)
    for r in rows:
        print(", ".join(f"{k}={r[k]}" for k in COLUMNS if k in r and r[k] != ""))
    print(f"wrote {out}, {out.with_name(out.stem + '_failover.csv')} and {png}")
    return 0 if not any(r.get("error") for r in rows) else 1


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench-collectives", description=__doc__.split("\n\n")[0])
    p.add_argument("--results", default="results")
    p.add_argument("--out", default="results/bench_collectives.csv")
    p.add_argument("--link-mbps", type=float, default=20.0, help="rate of a fabric it starts")
    p.add_argument("--quick", action="store_true", help="three sizes only")
    p.add_argument("--stream-kib", type=int, default=256, help="failover all-reduce size")
    p.add_argument("--stream-s", type=float, default=8.0)
    p.add_argument("--fail-after-s", type=float, default=2.0)
    p.add_argument("--down-s", type=float, default=4.0)
    p.add_argument("--wait-s", type=float, default=0.0, help="wait for another fabric to go")
    p.add_argument("--plot-only", action="store_true", help="redraw the PNG from the CSVs")
    a = p.parse_args(argv)
    if not a.link_mbps > 0 or a.stream_kib < 1 or not 0 < a.fail_after_s < a.stream_s:
        p.error("need --link-mbps > 0, --stream-kib >= 1 and 0 < --fail-after-s < --stream-s")
    if a.down_s <= 0:
        p.error("--down-s must be positive")
    return a


def rank_main(argv: Sequence[str]) -> int:
    kind, backend, out = argv[0], argv[1], pathlib.Path(argv[2])
    if kind == "sweep":
        rank_sweep(backend, out, [int(s) for s in argv[3].split(",")])
    elif kind == "stream":
        rank_stream(backend, out, int(argv[3]), float(argv[4]))
    else:
        print(f"unknown rank job {kind!r}; valid: sweep, stream", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["rank"]:
        return rank_main(argv[1:])
    args = parse_args(argv)
    if args.plot_only:
        print(f"wrote {plot(pathlib.Path(args.out))}")
        return 0
    if os.geteuid() != 0:
        print("bench-collectives: needs root (Mininet)", file=sys.stderr)
        return 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
