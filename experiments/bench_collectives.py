"""``make bench-collectives``: all-reduce latency and bus bandwidth, ``tailfabric`` vs gloo,
4 ranks on the default fabric, at one or more link rates, and the stall when a plane fails
mid-stream.

For each rate of ``--link-mbps`` (a comma list: ``5,10,20``) it brings up the default fabric
(2 planes x 2 leaves x 2 spines, 4 hosts) at that rate (:class:`experiments.fabric_job.
FabricSession`; a fabric that is already up is used only if it runs at that rate), and launches
the ranks with ``tf-run``'s launcher (:mod:`experiments.tf_run`), one per host:

* **sweep**, ``--rounds`` times per backend, the backends interleaved (tailfabric, gloo,
  tailfabric, ...: the machine's load drifts, and both see the same drift): for each size (4 KiB
  ... 16 MiB of float32; at a rate, only the sizes whose all-reduce takes at most ``--max-s`` on
  one plane, :func:`sizes_for`) a barrier, one warm-up (up to 1 MiB), then ``reps`` timed
  all-reduces (SUM), each after a barrier; rank 0 records each one's latency. A run's figure is
  the median of its reps; the CSV gives the mean, sd, min and max over runs. Bus bandwidth is
  NCCL's: ``2 (n - 1) / n * bytes / latency``; ``ratio`` is tailfabric's over gloo's, per round
  (the two runs next to each other), then averaged.
* **failover** (per rate, unless ``--no-failover``; ``--failover-runs`` times per backend, the
  row gives the mean of each figure and the sd, min and max of ``extra_ms``): a stream of
  ``--stream-kib`` all-reduces for ``--stream-s`` seconds; the driver fails plane 0 (the plane
  gloo's TCP connections use: the hosts' plane-0 addresses) through the controller
  ``--fail-after-s`` into the stream and restores it ``--down-s`` later. Recorded: every all-reduce's start and end on rank 0 (the
  machine's monotonic clock, shared by the hosts' namespaces), and :func:`stall_figures`: the
  all-reduce the failure caught in flight, done ``inflight_done_ms`` after the fail command
  (the issue's "the stalled all-reduce completes within 100 ms"; ``inflight_done_max_ms``: the
  worst run); the longest all-reduce while the plane was down (``stall_ms``) and how much
  longer it took than the median before the failure (``extra_ms``: this also counts the later
  all-reduces' slowness on one plane, ``one_plane_extra_ms`` measured from 1 s after the
  failure on); ``next_done_ms``: the first all-reduce started after the command, all of whose
  packets meet the failure, done (gloo's waits for TCP's timeout). The stream's size defaults to one that takes about 25 ms on one plane
  (:func:`stream_bytes`), so that the stall measures the failure rather than the all-reduce's
  own length.

Writes ``<out>`` (one row per rate, backend and size, and one failover row per rate and
backend), ``<out>_runs.csv`` (every run's median), ``<out>_failover.csv`` (the streams'
all-reduces) and ``<out>.png`` (drawn from the CSVs only). ``--append`` keeps the rows of other
rates already in those files (one rate per fabric bring-up, several invocations). ``python -m
experiments.bench_collectives rank ...`` is one rank (what tf-run starts).
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
from experiments.stats import summarize
from experiments.tf_run import Launch, LaunchError, enter_command, exit_status, fabric_plan

SIZES_BYTES = (4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20)
QUICK_SIZES_BYTES = (4 << 10, 64 << 10, 1 << 20)
BACKENDS = ("tailfabric", "gloo")
HOSTS = ("h1", "h2", "h3", "h4")
FAIL_PLANE = 0
TARGET_RATIO = 1.5
COLUMNS = (
    "kind",
    "backend",
    "ranks",
    "link_mbps",
    "size_bytes",
    "runs",
    "reps",
    "latency_ms",
    "latency_sd_ms",
    "busbw_mbps",
    "busbw_sd_mbps",
    "busbw_min_mbps",
    "busbw_max_mbps",
    "ratio",
    "ratio_sd",
    "ratio_min",
    "ratio_max",
    "stall_ms",
    "extra_ms",
    "extra_sd_ms",
    "extra_min_ms",
    "extra_max_ms",
    "normal_ms",
    "first_done_ms",
    "inflight_done_ms",
    "inflight_done_max_ms",
    "inflight_extra_ms",
    "next_done_ms",
    "next_done_max_ms",
    "one_plane_extra_ms",
    "down_s",
    "error",
)
RUN_COLUMNS = (
    "link_mbps",
    "round",
    "backend",
    "size_bytes",
    "reps",
    "latency_ms",
    "latency_min_ms",
    "latency_max_ms",
    "busbw_mbps",
)
STREAM_COLUMNS = ("link_mbps", "backend", "run", "index", "start_s", "end_s", "latency_ms")


def reps_for(size: int) -> int:
    """Timed repetitions per size in one run: fewer for the large ones (seconds each)."""
    return 5 if size <= 256 << 10 else 3 if size <= 1 << 20 else 2


def busbw_mbps(size: int, latency_s: float, ranks: int) -> float:
    return 2 * (ranks - 1) / ranks * size * 8 / latency_s / 1e6


def sizes_for(sizes: Sequence[int], link_mbps: float, max_s: float) -> list[int]:
    """The sizes whose all-reduce moves its bus bytes over one plane's link within ``max_s``
    (slow rates leave out the largest: 16 MiB takes 40 s at 5 Mbit/s)."""
    n = len(HOSTS)
    return [s for s in sizes if 2 * (n - 1) / n * s * 8 / (link_mbps * 1e6) <= max_s]


def stream_bytes(stream_kib: int, link_mbps: float) -> int:
    """The failover stream's all-reduce size: ``stream_kib`` KiB, or (0) 2 KiB per Mbit/s
    of the links, at least 8 KiB, a multiple of 4 KiB."""
    if stream_kib > 0:
        return stream_kib * 1024
    return max(8, int(2 * link_mbps) // 4 * 4) * 1024


def parse_rates(text: str) -> list[float]:
    """``5,10,20`` -> [5.0, 10.0, 20.0] (raises ValueError: not positive numbers)."""
    rates = [float(x) for x in text.split(",") if x.strip()]
    if not rates or not all(r > 0 and math.isfinite(r) for r in rates):
        raise ValueError(text)
    return rates


# -- one rank --------------------------------------------------------------------------------


def _init(backend: str, timeout_s: float) -> Any:
    import torch.distributed as dist

    if backend == "tailfabric":
        import host.torchdist  # noqa: F401

    dist.init_process_group(backend, init_method="env://", timeout=timedelta(seconds=timeout_s))
    return dist


class Tracer:
    """Samples every MRC connection of this rank every ``interval_s`` (window, bytes in
    flight, RTTs, resends, delay samples above the target, per-plane packets) into a JSON-lines
    file: what held a sweep back, over time."""

    def __init__(self, dist: Any, path: pathlib.Path, interval_s: float = 0.025) -> None:
        import threading

        from host.torchdist.backend import ProcessGroupTailfabric

        pg = dist.distributed_c10d._get_default_group()
        self.conns = pg.mesh.conns if isinstance(pg, ProcessGroupTailfabric) else {}
        self.size = 0
        self._file = open(path, "w")  # noqa: SIM115
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="bench-trace")
        self._thread.start()

    def _run(self) -> None:
        from host.errors import TransportError

        while not self._stop.wait(self._interval):
            now = time.monotonic()
            for peer, conn in self.conns.items():
                try:
                    st, evs = conn.stats(), conn.ev_stats()
                except TransportError:
                    return
                row = {
                    "t": round(now, 4),
                    "size": self.size,
                    "peer": peer,
                    "cwnd": st.cwnd_bytes,
                    "inflight": st.inflight_bytes,
                    "queued": st.send_queued_bytes,
                    "srtt_ms": round(st.srtt_us / 1e3, 2),
                    "min_rtt_ms": round(st.min_rtt_us / 1e3, 2),
                    "sent": st.packets_sent,
                    "resent": st.retransmits,
                    "rack": st.losses_rack,
                    "rto": st.losses_rto,
                    "evdown": st.losses_ev_down,
                    "md": st.cc_decreases,
                    "qa": st.cc_quick_adapts,
                    "samples": st.cc_delay_samples,
                    "above": st.cc_above_target,
                    "evs": [
                        [
                            e.plane,
                            e.state.value,
                            e.packets_sent,
                            e.bytes_acked,
                            round(e.srtt_us / 1e3, 2),
                            e.losses,
                            e.ecn_marks,
                        ]
                        for e in evs
                    ],
                }
                self._file.write(json.dumps(row) + "\n")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._file.close()


def rank_sweep(backend: str, out: pathlib.Path, sizes: Sequence[int], trace: bool = False) -> None:
    import torch

    dist = _init(backend, 300)
    tracer = (
        Tracer(dist, out.parent / f"trace_{backend}_r{dist.get_rank()}.jsonl")
        if trace and backend == "tailfabric"
        else None
    )
    rows = []
    cpu0, wall0 = os.times(), time.monotonic()
    for size in sizes:
        if tracer is not None:
            tracer.size = size
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
    cpu1 = os.times()
    if tracer is not None:
        tracer.close()
        _dump_events(dist, out.parent / f"events_{backend}_r{dist.get_rank()}.jsonl")
    busy = cpu1.user - cpu0.user + cpu1.system - cpu0.system
    print(f"{backend}: this rank used {busy / (time.monotonic() - wall0):.0%} of a core")
    if backend == "tailfabric":
        _print_transport(dist)
    if dist.get_rank() == 0:
        out.write_text(
            json.dumps({"backend": backend, "ranks": dist.get_world_size(), "rows": rows})
        )
    dist.destroy_process_group()


def _dump_events(dist: Any, path: pathlib.Path) -> None:
    """``--trace``: this rank's MRC events (EV state changes and why, RTOs, floor hits) with
    the machine's monotonic time, one JSON object a line (where a failover's stall went)."""
    from host.mrc.recorder import EventKind
    from host.torchdist.backend import ProcessGroupTailfabric

    pg = dist.distributed_c10d._get_default_group()
    if not isinstance(pg, ProcessGroupTailfabric):
        return
    peers = {conn.conn_id: peer for peer, conn in pg.mesh.conns.items()}
    kinds = (EventKind.EV_STATE, EventKind.RTO, EventKind.FLOOR, EventKind.ERROR)
    with path.open("w") as f:
        for e in pg.mesh.endpoint.recorder.events():
            if e.kind in kinds:
                row = {"t": e.t_s, "peer": peers.get(e.conn_id, -1), "kind": e.kind.value}
                row.update(ev=e.ev, value=e.value, detail=e.detail)
                f.write(json.dumps(row) + "\n")


def _print_transport(dist: Any) -> None:
    """Each MRC connection's window, RTT, losses and per-plane packets (into the ranks' log:
    what held a sweep back)."""
    from host.torchdist.backend import ProcessGroupTailfabric

    pg = dist.distributed_c10d._get_default_group()
    if not isinstance(pg, ProcessGroupTailfabric):
        return
    for peer, conn in pg.mesh.conns.items():
        st = conn.stats()
        planes: dict[int, int] = {}
        marks = 0
        for ev in conn.ev_stats():
            planes[ev.plane] = planes.get(ev.plane, 0) + ev.packets_sent
            marks += ev.ecn_marks
        print(
            f"to rank {peer}: cwnd {st.cwnd_bytes} B, srtt {st.srtt_us / 1e3:.1f} ms, "
            f"sent {st.packets_sent} (per plane {planes}), resent {st.retransmits} (rack "
            f"{st.losses_rack}, rto {st.losses_rto}, nack {st.losses_nack}, ev down "
            f"{st.losses_ev_down}), CE marks {marks}"
        )


def rank_stream(
    backend: str, out: pathlib.Path, size: int, stream_s: float, trace: bool = False
) -> None:
    """All-reduces until rank 0's clock says stop (its flag rides in element 0)."""
    import torch

    dist = _init(backend, 120)
    rank = dist.get_rank()
    tracer = (
        Tracer(dist, out.parent / f"trace_stream_{backend}_r{rank}.jsonl", 0.01)
        if trace and backend == "tailfabric"
        else None
    )
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
    if tracer is not None:
        tracer.close()
        _dump_events(dist, out.parent / f"events_stream_{backend}_r{rank}.jsonl")
    if backend == "tailfabric":
        _print_transport(dist)
    if rank == 0:
        out.write_text(json.dumps({"backend": backend, "times": times}))
    dist.destroy_process_group()


# -- the driver ------------------------------------------------------------------------------


class Bench:
    def __init__(self, args: argparse.Namespace, state: Any, link_mbps: float) -> None:
        from topologies.model import Fabric

        self.args = args
        self.state = state
        self.link_mbps = link_mbps
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

    def sweep(
        self, backend: str, sizes: Sequence[int], round_no: int
    ) -> tuple[list[dict[str, object]], str]:
        """One run of every size: its per-size rows (the median of the reps), or an error."""
        out = self.work / f"sweep_{backend}.json"
        out.unlink(missing_ok=True)
        sizes_arg = ",".join(str(s) for s in sizes)
        argv = ["sweep", backend, str(out), sizes_arg] + (["trace"] if self.args.trace else [])
        before = self.switch_counters() if self.args.trace else {}
        err = self.finish(self.launch(argv), "sweep")
        if self.args.trace:
            after = self.switch_counters()
            diff = {
                port: [
                    a - b for a, b in zip(cells, before.get(port, [0] * len(cells)), strict=True)
                ]
                for port, cells in after.items()
            }
            busy = {p: c for p, c in diff.items() if any(c)}
            path = self.work / f"switches_{backend}_r{round_no}.json"
            path.write_text(json.dumps(busy, indent=0))
            for trace in [
                *self.work.glob(f"trace_{backend}_r*.jsonl"),
                *self.work.glob(f"events_{backend}_r*.jsonl"),
            ]:  # keep every round's
                trace.rename(trace.with_name(f"round{round_no}_{trace.name}"))
        if err or not out.exists():
            return [], err or "sweep: no result"
        doc = json.loads(out.read_text())
        rows: list[dict[str, object]] = []
        for r in doc["rows"]:
            lat = [float(x) for x in r["latencies_s"]]
            med = statistics.median(lat)
            rows.append(
                {
                    "link_mbps": self.link_mbps,
                    "round": round_no,
                    "backend": backend,
                    "size_bytes": int(r["size_bytes"]),
                    "reps": len(lat),
                    "latency_ms": round(med * 1e3, 3),
                    "latency_min_ms": round(min(lat) * 1e3, 3),
                    "latency_max_ms": round(max(lat) * 1e3, 3),
                    "busbw_mbps": round(busbw_mbps(int(r["size_bytes"]), med, len(HOSTS)), 3),
                }
            )
        return rows, ""

    def switch_counters(self) -> dict[str, list[int]]:
        """``switch:port -> [tx packets, ECN marks, tail drops, other drops]`` of every switch
        (``--trace``: where the sweep's packets queued and were dropped)."""
        from controller import program as fp
        from controller.commands import read_switch_counters
        from controller.drops import PortDrops, per_port

        ctl = self.actions().ctl
        out: dict[str, list[int]] = {}
        for name, sc in read_switch_counters(ctl, list(ctl.sessions)).items():
            target = per_port(sc.target or ())
            for port in ctl.wiring.switch_ports(name):
                end = ctl.wiring.peer(name, port)
                td = target.get(port, PortDrops())
                tx = sc.program.get((fp.PORT_TX, port), (0, 0))[0]
                ecn = sc.program.get((fp.ECN_MARKS, port), (0, 0))[0]
                key = f"{name}:{port}>{end.name if end else ''}"
                out[key] = [tx, ecn, td.tail, td.switch]
        return out

    def failover(
        self, backend: str, run_no: int
    ) -> tuple[dict[str, object], list[dict[str, object]]]:
        """One failover run: its row (:func:`stall_figures`, or an error) and its stream."""
        from controller.errors import ControllerError

        a = self.args
        size = stream_bytes(a.stream_kib, self.link_mbps)
        out = self.work / f"stream_{backend}.json"
        started = out.parent / (out.name + ".started")
        out.unlink(missing_ok=True)
        started.unlink(missing_ok=True)
        row: dict[str, object] = {"kind": "failover", "backend": backend, "ranks": len(HOSTS)}
        row.update(link_mbps=self.link_mbps, size_bytes=size, down_s=a.down_s)
        t_fail = math.nan
        failed = ""
        argv = ["stream", backend, str(out), str(size), str(a.stream_s)]
        launch = self.launch(argv + (["trace"] if a.trace else []))
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
                if a.trace:
                    (self.work / f"t_fail_{backend}_run{run_no}").write_text(str(t_fail))
                actions.fail_plane(FAIL_PLANE)
                time.sleep(a.down_s)
                actions.restore_plane(FAIL_PLANE)
        except ControllerError as e:
            failed = f"the controller failed: {e}"
            launch.stop()
        err = self.finish(launch, "failover")
        if a.trace:  # keep every run's
            for f in [*self.work.glob("events_stream_*.jsonl"), *self.work.glob("trace_stream_*")]:
                f.rename(f.with_name(f"run{run_no}_{f.name}"))
        if failed or err or not out.exists() or not started.exists():
            row["error"] = failed or err or "no result"
            return row, []
        times = [(float(s), float(e)) for s, e in json.loads(out.read_text())["times"]]
        stream: list[dict[str, object]] = [
            {
                "link_mbps": self.link_mbps,
                "backend": backend,
                "run": run_no,
                "index": i,
                "start_s": round(s - t_fail, 6),
                "end_s": round(e - t_fail, 6),
                "latency_ms": round((e - s) * 1e3, 3),
            }
            for i, (s, e) in enumerate(times)
        ]
        row.update(stall_figures([(s - t_fail, e - t_fail) for s, e in times], a.down_s))
        row["runs"] = 1
        row["reps"] = len(times)
        return row, stream


STALL_FIGURES = (
    "normal_ms",
    "stall_ms",
    "extra_ms",
    "first_done_ms",
    "inflight_done_ms",
    "inflight_extra_ms",
    "next_done_ms",
    "one_plane_extra_ms",
)
"""The figures of :func:`stall_figures`."""
ONE_PLANE_AFTER_S = 1.0
"""All-reduces that start this long after the fail command measure one plane alone (every
connection has long found the failure by then): ``one_plane_extra_ms``."""


def stall_figures(times: Sequence[tuple[float, float]], down_s: float) -> dict[str, float]:
    """What a failure at time 0 did to a stream of all-reduces ((start, end) in seconds from
    the fail command; the plane came back at ``down_s``): ``normal_ms``, the median latency
    of those done before it; ``stall_ms``, the longest latency among those running while the
    plane was down; ``extra_ms``, that minus ``normal_ms`` (the longest of many all-reduces
    on one plane: it includes one plane's own slowness, ``one_plane_extra_ms``);
    ``first_done_ms``, from the fail command to the first completion after it (which may be
    an all-reduce whose packets had all passed the plane before it failed);
    ``inflight_done_ms``, from the fail command to the completion of the all-reduce it caught
    in flight (the stalled one: the one whose packets the failure lost; the next to start when
    none was running) and ``inflight_extra_ms`` its latency minus ``normal_ms``;
    ``next_done_ms``, from the fail command to the completion of the first all-reduce started
    after it (all of whose packets meet the failed plane: the caught one may have had its
    packets past it; this one also takes a whole all-reduce's time on one plane);
    ``one_plane_extra_ms``, the longest of those started :data:`ONE_PLANE_AFTER_S` or later
    while the plane was down, minus ``normal_ms``."""
    nan = math.nan
    before = [e - s for s, e in times if e < 0]
    normal = statistics.median(before) if before else nan
    during = [e - s for s, e in times if e >= 0 and s <= down_s]
    after = [e for _s, e in times if e >= 0]
    stall = max(during) if during else nan
    caught = min(((s, e) for s, e in times if e >= 0), default=None)
    following = min(((s, e) for s, e in times if s >= 0), default=None)
    one_plane = [e - s for s, e in times if ONE_PLANE_AFTER_S <= s <= down_s]
    return {
        "normal_ms": round(normal * 1e3, 3),
        "stall_ms": round(stall * 1e3, 3),
        "extra_ms": round((stall - normal) * 1e3, 3),
        "first_done_ms": round(after[0] * 1e3, 3) if after else nan,
        "inflight_done_ms": round(caught[1] * 1e3, 3) if caught else nan,
        "inflight_extra_ms": round((caught[1] - caught[0] - normal) * 1e3, 3) if caught else nan,
        "next_done_ms": round(following[1] * 1e3, 3) if following else nan,
        "one_plane_extra_ms": round((max(one_plane) - normal) * 1e3, 3) if one_plane else nan,
    }


def failover_summary(per_run: Sequence[dict[str, float]]) -> dict[str, float]:
    """The failover row over several runs' :func:`stall_figures`: the mean of each figure,
    and the sd, min and max of ``extra_ms`` (runs without a stall, NaN, are left out)."""
    ok = [f for f in per_run if not math.isnan(f["extra_ms"])]
    if not ok:
        return {**(dict(per_run[0]) if per_run else {}), "runs": len(ok)}
    out = {k: round(statistics.fmean(f[k] for f in ok), 3) for k in ok[0]}
    extra = [f["extra_ms"] for f in ok]
    out["extra_sd_ms"] = round(statistics.stdev(extra), 3) if len(extra) > 1 else math.nan
    out["extra_min_ms"], out["extra_max_ms"] = min(extra), max(extra)
    out["inflight_done_max_ms"] = max(f["inflight_done_ms"] for f in ok)
    out["next_done_max_ms"] = max(f["next_done_ms"] for f in ok)
    out["runs"] = len(ok)
    return out


def refresh_failover(rows: list[dict[str, str]], stream: Sequence[dict[str, str]]) -> None:
    """Recompute the failover rows' figures from the stream CSV (``--plot-only``)."""
    for r in rows:
        if r["kind"] != "failover" or not r.get("down_s"):
            continue
        runs: dict[str, list[tuple[float, float]]] = {}
        for x in stream:
            if x["backend"] == r["backend"] and float(x["link_mbps"]) == float(r["link_mbps"]):
                runs.setdefault(x.get("run") or "0", []).append(
                    (float(x["start_s"]), float(x["end_s"]))
                )
        if runs:
            down = float(r["down_s"])
            figs = failover_summary([stall_figures(t, down) for t in runs.values()])
            r.update({k: "" if math.isnan(v) else str(v) for k, v in figs.items()})


def summarize_runs(runs: Sequence[dict[str, object]]) -> list[dict[str, object]]:
    """One sweep row per (rate, backend, size): mean, sd, min and max over the runs, and on
    tailfabric's rows the ratio to gloo's bus bandwidth, per round (the runs next to each
    other) and then over the rounds."""

    def num(r: dict[str, object], k: str) -> float:
        return float(str(r[k]))

    groups: dict[tuple[float, str, int], list[dict[str, object]]] = {}
    for r in runs:
        key = (num(r, "link_mbps"), str(r["backend"]), int(num(r, "size_bytes")))
        groups.setdefault(key, []).append(r)
    rows: list[dict[str, object]] = []
    for (rate, backend, size), rs in sorted(groups.items(), key=lambda kv: kv[0]):
        bw = summarize(num(r, "busbw_mbps") for r in rs)
        lat = summarize(num(r, "latency_ms") for r in rs)
        row: dict[str, object] = {
            "kind": "sweep",
            "backend": backend,
            "ranks": len(HOSTS),
            "link_mbps": rate,
            "size_bytes": size,
            "runs": bw.n,
            "reps": int(num(rs[0], "reps")),
            "latency_ms": round(lat.mean, 3),
            "latency_sd_ms": round(lat.sd, 3),
            "busbw_mbps": round(bw.mean, 3),
            "busbw_sd_mbps": round(bw.sd, 3),
            "busbw_min_mbps": round(bw.min, 3),
            "busbw_max_mbps": round(bw.max, 3),
        }
        if backend == BACKENDS[0]:
            gloo = {
                int(num(r, "round")): num(r, "busbw_mbps")
                for r in groups.get((rate, BACKENDS[1], size), [])
            }
            ratios = [
                num(r, "busbw_mbps") / gloo[int(num(r, "round"))]
                for r in rs
                if gloo.get(int(num(r, "round")), 0.0) > 0
            ]
            if ratios:
                rs_ = summarize(ratios)
                row.update(
                    ratio=round(rs_.mean, 3),
                    ratio_sd=round(rs_.sd, 3),
                    ratio_min=round(rs_.min, 3),
                    ratio_max=round(rs_.max, 3),
                )
        rows.append(row)
    return rows


def plot(out: pathlib.Path) -> pathlib.Path:
    """The PNG beside ``out``, from ``out`` and ``<out>_failover.csv`` only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_rows(out)
    stream_path = out.with_name(out.stem + "_failover.csv")
    stream = read_rows(stream_path) if stream_path.exists() else []
    sweep = [r for r in rows if r["kind"] == "sweep" and r["busbw_mbps"]]
    rates = sorted({float(r["link_mbps"]) for r in sweep})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(17, 4.8))
    for i, rate in enumerate(rates):
        c = colors[i % len(colors)]
        for backend, style in zip(BACKENDS, ("o-", "s--"), strict=True):
            pts = sorted(
                (int(r["size_bytes"]), float(r["busbw_mbps"]), float(r["busbw_sd_mbps"] or 0))
                for r in sweep
                if r["backend"] == backend and float(r["link_mbps"]) == rate
            )
            if pts:
                ax1.errorbar(
                    [p[0] / 1024 for p in pts],
                    [p[1] for p in pts],
                    yerr=[p[2] for p in pts],
                    fmt=style,
                    color=c,
                    capsize=3,
                    label=f"{backend}, {rate:g} Mbit/s links",
                )
        ratio = sorted(
            (int(r["size_bytes"]), float(r["ratio"]), float(r["ratio_sd"] or 0))
            for r in sweep
            if r["backend"] == BACKENDS[0] and float(r["link_mbps"]) == rate and r["ratio"]
        )
        if ratio:
            ax2.errorbar(
                [p[0] / 1024 for p in ratio],
                [p[1] for p in ratio],
                yerr=[p[2] for p in ratio],
                fmt="o-",
                color=c,
                capsize=3,
                label=f"{rate:g} Mbit/s links",
            )
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("all-reduce size (KiB, log scale)")
        ax.set_ylim(bottom=0)
    ax1.set_ylabel("bus bandwidth (Mbit/s), mean ± sd over runs")
    ax1.set_title("4 ranks across the fabric: 2 (n-1)/n x bytes / latency")
    ax1.legend(fontsize=7)
    ax2.axhline(TARGET_RATIO, color="black", ls="--", lw=1, label=f"target {TARGET_RATIO:g}x")
    ax2.axhline(1.0, color="grey", ls=":", lw=1)
    ax2.set_ylabel("tailfabric / gloo bus bandwidth, mean ± sd over rounds")
    ax2.set_title("ratio per link rate")
    ax2.legend(fontsize=8)
    fail_rates = sorted({float(r["link_mbps"]) for r in stream})
    shown = fail_rates[-1:] if fail_rates else []
    for backend in BACKENDS:
        trace = [
            (float(r["end_s"]), float(r["latency_ms"]))
            for r in stream
            if r["backend"] == backend
            and float(r["link_mbps"]) in shown
            and (r.get("run") or "0") == "0"  # the first run of several
        ]
        if trace:
            ax3.plot([p[0] for p in trace], [p[1] for p in trace], ".-", label=backend)
    ax3.axvline(0.0, color="black", ls="--", lw=1, label=f"plane {FAIL_PLANE} fails")
    down = [float(r["down_s"]) for r in rows if r["kind"] == "failover" and r["down_s"]]
    if down:
        ax3.axvline(down[0], color="grey", ls=":", lw=1, label="plane restored")
    ax3.set_yscale("log")
    ax3.set_xlabel("all-reduce completion time (s from the fail command)")
    ax3.set_ylabel("all-reduce latency (ms, log scale)")
    where = f" ({shown[0]:g} Mbit/s links)" if shown else ""
    ax3.set_title(f"a plane failed mid-stream{where}")
    ax3.legend(fontsize=8)
    return save_png(fig, out.with_suffix(".png"))


def _running_rate(results: str) -> float | None:
    """The link rate of a fabric that is already up (None: none is)."""
    from experiments.fabric_job import FabricNotReady, load_state
    from topologies.model import Fabric

    try:
        return float(Fabric.load(load_state(results).topology).spec.link_mbps)
    except FabricNotReady:
        return None


def _kept(path: pathlib.Path, rates: Sequence[float]) -> list[dict[str, object]]:
    """``--append``: the rows of ``path`` at rates other than ``rates``."""
    if not path.exists():
        return []
    return [dict(r) for r in read_rows(path) if float(r["link_mbps"] or "nan") not in rates]


def run(args: argparse.Namespace) -> int:
    from controller.errors import ControllerError
    from experiments.fabric_job import FabricSession
    from host.errors import TransportError

    out = pathlib.Path(args.out)
    runs_path = out.with_name(out.stem + "_runs.csv")
    stream_path = out.with_name(out.stem + "_failover.csv")
    rates = args.link_mbps
    keep = args.append
    runs: list[dict[str, object]] = _kept(runs_path, rates) if keep else []
    streams: list[dict[str, object]] = _kept(stream_path, rates) if keep else []
    other = [r for r in _kept(out, rates) if r["kind"] == "failover"] if keep else []
    failovers: list[dict[str, object]] = other
    errors: list[dict[str, object]] = []

    def save() -> None:  # after every run: what was measured survives a later failure
        rows = summarize_runs(runs) + failovers + errors
        write_csv(out, COLUMNS, rows)
        write_csv(runs_path, RUN_COLUMNS, runs)
        write_csv(stream_path, STREAM_COLUMNS, streams)

    running = _running_rate(args.results)
    if running is not None and any(r != running for r in rates):
        print(
            f"bench-collectives: a fabric runs at {running:g} Mbit/s; this sweep needs "
            f"{', '.join(f'{r:g}' for r in rates)}: take it down first (make fabric-down)",
            file=sys.stderr,
        )
        return 2
    try:
        for rate in rates:
            base = args.sizes or (QUICK_SIZES_BYTES if args.quick else SIZES_BYTES)
            sizes = sizes_for(base, rate, args.max_s)
            left = [s for s in SIZES_BYTES if s not in sizes and not args.quick]
            print(
                f"bench-collectives: {rate:g} Mbit/s links, sizes {[s >> 10 for s in sizes]} KiB"
                + (
                    f" (left out, over {args.max_s:g} s each: {[s >> 10 for s in left]} KiB)"
                    if left
                    else ""
                ),
                flush=True,
            )
            with FabricSession(args.results, link_mbps=rate, wait_s=args.wait_s) as state:
                bench = Bench(args, state, rate)
                try:
                    for rnd in range(args.rounds):
                        for backend in args.backends:
                            print(f"  round {rnd + 1}/{args.rounds}: {backend}", flush=True)
                            got, err = bench.sweep(backend, sizes, rnd)
                            runs.extend(got)
                            if err:
                                errors.append(
                                    {
                                        "kind": "sweep",
                                        "backend": backend,
                                        "link_mbps": rate,
                                        "error": err,
                                    }
                                )
                            save()
                    if not args.no_failover:
                        for backend in args.backends:
                            per_run: list[dict[str, float]] = []
                            last_ok: dict[str, object] = {}
                            for n in range(args.failover_runs):
                                print(
                                    f"  plane {FAIL_PLANE} fails ({n + 1}/{args.failover_runs})"
                                    f": {backend}",
                                    flush=True,
                                )
                                row, stream = bench.failover(backend, n)
                                streams.extend(stream)
                                if row.get("error"):
                                    failovers.append(row)
                                elif stream:
                                    last_ok = row
                                    per_run.append({k: float(str(row[k])) for k in STALL_FIGURES})
                            if per_run:
                                failovers.append({**last_ok, **failover_summary(per_run)})
                            save()
                finally:
                    bench.close()
    except (LaunchError, TransportError, OSError, ControllerError) as e:
        print(f"bench-collectives: {e}", file=sys.stderr)
        save()
        return 2
    save()
    png = plot(out)
    report(read_rows(out))
    print(f"wrote {out}, {runs_path}, {stream_path} and {png}")
    return 0 if not errors and not any(r.get("error") for r in failovers) else 1


def report(rows: Sequence[dict[str, str]]) -> None:
    """The console table: bus bandwidth per rate and size, both backends, and the ratio."""
    print(f"{'Mbit/s':>7} {'size':>9} {'tailfabric':>16} {'gloo':>16} {'ratio':>16}")
    tf = {
        (r["link_mbps"], r["size_bytes"]): r
        for r in rows
        if r["kind"] == "sweep" and r["backend"] == BACKENDS[0]
    }
    gl = {
        (r["link_mbps"], r["size_bytes"]): r
        for r in rows
        if r["kind"] == "sweep" and r["backend"] == BACKENDS[1]
    }

    def cell(r: dict[str, str] | None, k: str) -> str:
        if r is None or not r.get(k):
            return "-"
        sd = r.get(k.replace("_mbps", "_sd_mbps") if k.endswith("_mbps") else k + "_sd") or "nan"
        return f"{float(r[k]):.2f} ± {float(sd):.2f}"

    for key in sorted(set(tf) | set(gl), key=lambda k: (float(k[0]), int(k[1]))):
        t, g = tf.get(key), gl.get(key)
        print(
            f"{float(key[0]):>7g} {int(key[1]) >> 10:>6} KiB {cell(t, 'busbw_mbps'):>16} "
            f"{cell(g, 'busbw_mbps'):>16} {cell(t, 'ratio'):>16}"
        )
    for r in rows:
        if r["kind"] == "failover":
            spread = (
                f", sd {r['extra_sd_ms'] or '-'}, {r['extra_min_ms']}-{r['extra_max_ms']}"
                if r.get("extra_min_ms")
                else ""
            )
            print(
                f"failover {r['backend']} at {float(r['link_mbps']):g} Mbit/s, "
                f"{r['runs'] or 0} run(s): the all-reduce in flight done "
                f"{r.get('inflight_done_ms') or '-'} ms after the fail command (worst "
                f"{r.get('inflight_done_max_ms') or '-'}), the next one "
                f"{r.get('next_done_ms') or '-'} ms after it (worst "
                f"{r.get('next_done_max_ms') or '-'}); longest while down "
                f"{r['stall_ms'] or '-'} ms ({r['extra_ms'] or '-'} ms over the normal "
                f"{r['normal_ms'] or '-'} ms{spread}; one plane alone "
                f"{r.get('one_plane_extra_ms') or '-'} ms over) {r['error']}"
            )
        elif r.get("error"):
            print(f"{r['kind']} {r['backend']} at {r['link_mbps']} Mbit/s: {r['error']}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench-collectives", description=__doc__.split("\n\n")[0])
    p.add_argument("--results", default="results")
    p.add_argument("--out", default="results/bench_collectives.csv")
    p.add_argument(
        "--link-mbps",
        default="5",
        help="link rates, comma-separated (one fabric bring-up each; e.g. 5,10,20)",
    )
    p.add_argument("--rounds", type=int, default=3, help="runs per backend and rate")
    p.add_argument(
        "--max-s",
        type=float,
        default=6.0,
        help="leave out sizes that take longer than this on one plane's link",
    )
    p.add_argument("--quick", action="store_true", help="three sizes only")
    p.add_argument("--sizes-kib", default="", help="sizes in KiB, comma-separated (iterating)")
    p.add_argument(
        "--backends", default=",".join(BACKENDS), help="comma-separated subset of the backends"
    )
    p.add_argument(
        "--trace",
        action="store_true",
        help="sample every MRC connection every 25 ms and read the switches' counters around "
        "each sweep (into <results>/bench_collectives/)",
    )
    p.add_argument("--append", action="store_true", help="keep other rates' rows in the CSVs")
    p.add_argument("--no-failover", action="store_true", help="skip the failover runs")
    p.add_argument(
        "--stream-kib",
        type=int,
        default=0,
        help="failover all-reduce size (0: 2 KiB per Mbit/s of the links, at least 8 KiB: an "
        "all-reduce of about 25 ms on one plane, so that the stall is the failure's, not the "
        "all-reduce's own length)",
    )
    p.add_argument("--stream-s", type=float, default=8.0)
    p.add_argument("--fail-after-s", type=float, default=2.0)
    p.add_argument("--down-s", type=float, default=4.0)
    p.add_argument(
        "--failover-runs",
        type=int,
        default=3,
        help="failover runs per backend and rate (the row gives the mean, sd, min and max)",
    )
    p.add_argument("--wait-s", type=float, default=0.0, help="wait for another fabric to go")
    p.add_argument("--plot-only", action="store_true", help="redraw the PNG from the CSVs")
    a = p.parse_args(argv)
    try:
        a.link_mbps = parse_rates(a.link_mbps)
    except ValueError:
        p.error(f"--link-mbps: positive numbers separated by commas, not {a.link_mbps!r}")
    try:
        a.sizes = [int(x) << 10 for x in a.sizes_kib.split(",") if x.strip()]
    except ValueError:
        p.error(f"--sizes-kib: integers separated by commas, not {a.sizes_kib!r}")
    a.backends = [b for b in a.backends.split(",") if b.strip()]
    if not a.backends or any(b not in BACKENDS for b in a.backends):
        p.error(f"--backends: a subset of {','.join(BACKENDS)}")
    if any(s <= 0 for s in a.sizes):
        p.error("--sizes-kib: positive sizes")
    if a.stream_kib < 0 or not 0 < a.fail_after_s < a.stream_s:
        p.error("need --stream-kib >= 0 and 0 < --fail-after-s < --stream-s")
    if a.down_s <= 0 or a.rounds < 1 or not a.max_s > 0 or a.failover_runs < 1:
        p.error("--down-s and --max-s must be positive, --rounds and --failover-runs at least 1")
    return a


def rank_main(argv: Sequence[str]) -> int:
    kind, backend, out = argv[0], argv[1], pathlib.Path(argv[2])
    if kind == "sweep":
        rank_sweep(backend, out, [int(s) for s in argv[3].split(",")], argv[4:5] == ["trace"])
    elif kind == "stream":
        rank_stream(backend, out, int(argv[3]), float(argv[4]), argv[5:6] == ["trace"])
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
        out = pathlib.Path(args.out)
        stream_path = out.with_name(out.stem + "_failover.csv")
        if stream_path.exists():
            rows = read_rows(out)
            refresh_failover(rows, read_rows(stream_path))
            write_csv(out, COLUMNS, rows)
        print(f"wrote {plot(out)}")
        report(read_rows(out))
        return 0
    if os.geteuid() != 0:
        print("bench-collectives: needs root (Mininet)", file=sys.stderr)
        return 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
