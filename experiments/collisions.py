"""``make exp-collisions``: N simultaneous flows across the fabric, MRC vs single-path ECMP.

``python -m experiments.collisions [--link-mbps 2] [--trials 2]`` brings up the default
fabric (2 planes x (2 leaves + 2 spines), 2 hosts per leaf) and runs one flow from every host
to every host on the other leaf: 8 flows, each host sending two and receiving two, every flow
crossing a spine. Every flow keeps ``--depth`` messages of ``--msg-bytes`` outstanding for
``--duration-s``; the first ``--warmup-s`` are left out of the figures.

* **MRC** sprays every flow over all P x S micro-SID paths.
* **Single-path ECMP** puts each flow on one plane (a hash of its connection) and the
  switches' ECMP picks its spine (a hash of addresses, ports and flow label); flows that land
  on the same link share it while other links idle. Which flows collide depends on the hash,
  so each trial opens new connections.

Each transport runs under two window controls (``--cc``): ``nscc``, the transport's
congestion window (``host.mrc.emulated.emulated_fabric_config``), and ``fixed``, a fixed window
of ``--fixed-window-packets`` per connection, the same for both transports: the path choice
alone then decides how the flows share the fabric.

Capacity (the queue rates): every host receives on P links of ``--link-mbps``, and each leaf's
P x S uplinks carry as much, so the fabric can deliver ``hosts x P x link_mbps`` for this
pattern, ``link_mbps`` per flow. Goodput (message bytes) can reach at most
``PAYLOAD_EFFICIENCY`` of that (the DATA headers); ``capacity_fraction`` is goodput over that
goodput capacity and ``wire_fraction`` over the raw link rate. The default link rate is low
because every packet through a software switch costs CPU (see the README); at 2 Mbit/s
(about 165 full packets per second per link) the eight switches and four hosts fit in two
cores.

Outputs: ``flow_collisions.csv`` (per transport, window control, trial and flow, plus a row
``all`` per trial: throughput, planes used, message completion-time percentiles),
``flow_collisions_summary.csv`` (per transport and window control over the trials) and
``flow_collisions.png`` (from the CSVs only).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import ClassVar

import numpy

from experiments.mrc_fabric import (
    PAYLOAD_EFFICIENCY,
    ExperimentOutputs,
    FabricBusy,
    FabricParams,
    add_fabric_args,
    load_1m,
    own_fabric,
    read_csv,
    start_all,
    start_hosts,
    stop_all,
    write_csv,
)
from host.mrc.config import FABRIC_PAYLOAD_BYTES
from host.stream_agent import RunSpec
from topologies.emulation.bringup import BringUp
from topologies.model import Fabric, FabricSpec, build_fabric

TRANSPORTS = ("mrc", "single_path")
CC_MODES = ("nscc", "fixed")
TRIAL_FILE = "trial.json"
FLOW_HEADER = (
    "transport",
    "cc",
    "trial",
    "flow",
    "planes_used",
    "throughput_mbps",
    "completed_mbps",
    "fair_share_mbps",
    "messages",
    "mct_p50_ms",
    "mct_p90_ms",
    "mct_p99_ms",
    "mct_max_ms",
    "retransmits",
    "rto_events",
    "rehashes",
)
MCT_PERCENTILES = (50, 90, 99, 100)
"""The percentiles of the ``mct_p50_ms``, ``mct_p90_ms``, ``mct_p99_ms`` and ``mct_max_ms``
columns (``numpy.percentile``, linear interpolation)."""
SUMMARY_HEADER = (
    "transport",
    "cc",
    "trials",
    "flows",
    "link_mbps",
    "capacity_mbps",
    "goodput_capacity_mbps",
    "throughput_mbps",
    "capacity_fraction",
    "capacity_fraction_min",
    "wire_fraction",
    "slowest_flow_mbps",
    "mct_p50_ms",
    "mct_p99_ms",
    "load_1m",
)


@dataclass(frozen=True)
class CollisionParams(ExperimentOutputs):
    run_subdir: ClassVar[str] = "collisions"
    fabric: FabricParams = field(default_factory=lambda: FabricParams(link_mbps=2.0, ecn_packets=8))
    msg_bytes: int = 32768
    depth: int = 8
    duration_s: float = 30.0
    warmup_s: float = 8.0
    trials: int = 2
    sample_ms: float = 50.0
    cc_modes: tuple[str, ...] = CC_MODES
    fixed_window_packets: int = 28
    """``fixed``: a flow's fair share times its RTT under load (three switch queues plus the
    receiver's ACK delay, about 20 packet times), with a few packets to spare: less, and
    queues run empty for want of window rather than of path choice."""
    transports: tuple[str, ...] = TRANSPORTS
    out: str = "results/flow_collisions.csv"
    plain_cc: bool = False
    """``fabric_config()`` as it is instead of ``host.mrc.emulated.emulated_fabric_config``."""


def flows_of(fabric: Fabric) -> list[tuple[str, str]]:
    """Every (source, destination) pair of hosts on different leaves."""
    return [
        (a.name, b.name) for a in fabric.hosts for b in fabric.hosts if a.leaf_index != b.leaf_index
    ]


def capacity_mbps(fabric: Fabric) -> float:
    """What the fabric can deliver for :func:`flows_of` with 2 leaves: each leaf's hosts
    receive on P links each, and the other leaf's P x S uplinks feed them."""
    s = fabric.spec
    return s.leaves * s.planes * min(s.spines, s.hosts_per_leaf) * s.link_mbps


@dataclass
class TrialRecord:
    """One trial's facts besides the host processes' CSVs (``<out_dir>/trial.json``)."""

    transport: str
    cc: str
    trial: int
    start: float
    out_dir: pathlib.Path
    planes: dict[str, list[int]]
    conn_ids: dict[str, int]
    load: float
    errors: list[str]

    def save(self, spec: FabricSpec) -> None:
        doc = {k: v for k, v in vars(self).items() if k != "out_dir"}
        (self.out_dir / TRIAL_FILE).write_text(json.dumps({**doc, "fabric": asdict(spec)}))

    @classmethod
    def read(cls, out_dir: pathlib.Path) -> tuple[TrialRecord, FabricSpec]:
        doc = json.loads((out_dir / TRIAL_FILE).read_text())
        spec = FabricSpec(**doc.pop("fabric"))
        return cls(out_dir=out_dir, **doc), spec


def run_trial(up: BringUp, p: CollisionParams, transport: str, cc: str, trial: int) -> TrialRecord:
    """Every flow of :func:`flows_of` at once with one transport and window control."""
    if cc not in CC_MODES:
        raise ValueError(f"unknown window control {cc!r}; choose from {', '.join(CC_MODES)}")
    fabric = up.net.fabric
    topo = str(up.net.topology_path.resolve())
    name = f"{transport}_{cc}_{trial}"
    out_dir = p.run_dir / name
    window = p.fixed_window_packets * FABRIC_PAYLOAD_BYTES if cc == "fixed" else 0
    flows = flows_of(fabric)
    specs = [
        RunSpec(
            topo,
            h.name,
            transport,
            send_to=tuple(d for s, d in flows if s == h.name),
            expect=sum(1 for _s, d in flows if d == h.name),
            msg_bytes=p.msg_bytes,
            depth=p.depth,
            duration_s=p.duration_s,
            sample_ms=p.sample_ms,
            out_dir=str(out_dir),
            fixed_window_bytes=window,
            plain_cc=p.plain_cc,
        )
        for h in fabric.hosts
    ]
    planes: dict[str, list[int]] = {}
    conn_ids: dict[str, int] = {}
    with (p.run_dir / f"{name}.log").open("wb") as log:
        procs = start_hosts(up, specs, log)
        try:
            at = start_all(procs)
            for name, proc in procs.items():
                for _ in (d for s, d in flows if s == name):
                    ev = proc.wait_event("path", p.duration_s + 30)
                    planes[ev["flow"]] = [int(x) for x in ev["planes"]]
                    conn_ids[ev["flow"]] = int(ev["conn_id"])
            for name, proc in procs.items():
                for _ in (d for s, d in flows if s == name):
                    proc.wait_event("sent", p.duration_s + 90)
            load = load_1m()
        finally:
            done = stop_all(procs)
    errors = [f"{h}: {e}" for h, d in done.items() for e in d.get("errors", [])]
    rec = TrialRecord(transport, cc, trial, at, out_dir, planes, conn_ids, load, errors)
    rec.save(fabric.spec)
    return rec


def analyse(rec: TrialRecord, p: CollisionParams, fabric: Fabric) -> list[tuple[object, ...]]:
    """Per-flow rows and the trial's ``all`` row."""
    ws, we = rec.start + p.warmup_s, rec.start + p.duration_s
    span = we - ws
    sent: list[dict[str, str]] = []
    events: list[dict[str, str]] = []
    progress: dict[str, FlowProgress] = {}
    for h in fabric.hosts:
        sent += read_csv(rec.out_dir / f"{h.name}_sent.csv")
        ev_path = rec.out_dir / f"{h.name}_events.csv"
        if ev_path.exists():
            events += [dict(e, host=h.name) for e in read_csv(ev_path)]
        samples_path = rec.out_dir / f"{h.name}_samples.csv"
        if samples_path.exists():
            by_conn = {
                str(cid): flow
                for flow, cid in rec.conn_ids.items()
                if flow.startswith(f"{h.name}->")
            }
            progress.update(_progress(read_csv(samples_path), by_conn, ws, we))
    fair = fabric.spec.link_mbps * PAYLOAD_EFFICIENCY
    rows: list[tuple[object, ...]] = []
    all_mct: list[float] = []
    total = total_completed = 0.0
    for src, dst in flows_of(fabric):
        flow = f"{src}->{dst}"
        mine = [r for r in sent if r["flow"] == flow]
        done_in = [r for r in mine if ws <= float(r["done_t_s"]) <= we]
        completed = sum(int(r["msg_bytes"]) for r in done_in) * 8 / span / 1e6
        prog = progress.get(flow)
        mbps = prog.acked_bytes * 8 / prog.span_s / 1e6 if prog and prog.span_s > 0 else completed
        total += mbps
        total_completed += completed
        mct = [
            float(r["mct_ms"])
            for r in mine
            if float(r["send_t_s"]) >= ws and float(r["done_t_s"]) <= we
        ]
        all_mct += mct
        retx = sum(int(r["retransmits"]) for r in mine)
        cid = str(rec.conn_ids.get(flow, -1))
        kinds = [
            e["kind"]
            for e in events
            if e["host"] == src and e["conn_id"] == cid and ws <= float(e["t_s"]) <= we
        ]
        used = prog.planes if prog else rec.planes.get(flow, [])
        rows.append(
            (
                rec.transport,
                rec.cc,
                rec.trial,
                flow,
                "+".join(map(str, used)),
                round(mbps, 3),
                round(completed, 3),
                round(fair, 3),
                len(done_in),
                *_pcts(mct),
                retx,
                kinds.count("rto"),
                kinds.count("rehash"),
            )
        )
    cap = capacity_mbps(fabric) * PAYLOAD_EFFICIENCY
    col = {name: i for i, name in enumerate(FLOW_HEADER)}

    def col_sum(name: str) -> int:
        return sum(int(str(r[col[name]])) for r in rows)

    rows.append(
        (
            rec.transport,
            rec.cc,
            rec.trial,
            "all",
            "",
            round(total, 3),
            round(total_completed, 3),
            round(cap, 3),
            col_sum("messages"),
            *_pcts(all_mct),
            col_sum("retransmits"),
            col_sum("rto_events"),
            col_sum("rehashes"),
        )
    )
    return rows


@dataclass(frozen=True)
class FlowProgress:
    acked_bytes: int
    span_s: float
    planes: list[int]


def _progress(
    samples: list[dict[str, str]], flows: dict[str, str], ws: float, we: float
) -> dict[str, FlowProgress]:
    """Per flow (conn id -> flow), from the sender's per-EV samples within [ws, we]: the
    message bytes acknowledged, over what span, and the planes that carried at least 5 %."""
    first: dict[tuple[str, str], tuple[float, int]] = {}
    last: dict[tuple[str, str], tuple[float, int]] = {}
    plane_of: dict[tuple[str, str], int] = {}
    for r in samples:
        flow = flows.get(r["conn_id"])
        t = float(r["t_s"])
        if flow is None or not ws <= t <= we:
            continue
        key = (flow, r["ev"])
        first.setdefault(key, (t, int(r["bytes_acked"])))
        last[key] = (t, int(r["bytes_acked"]))
        plane_of[key] = int(r["plane"])
    out: dict[str, FlowProgress] = {}
    for flow in dict.fromkeys(k[0] for k in last):
        keys = [k for k in last if k[0] == flow]
        per_plane: dict[int, int] = {}
        for k in keys:
            per_plane[plane_of[k]] = per_plane.get(plane_of[k], 0) + last[k][1] - first[k][1]
        total = sum(per_plane.values())
        span = max(last[k][0] for k in keys) - min(first[k][0] for k in keys)
        out[flow] = FlowProgress(
            total, span, sorted(p for p, b in per_plane.items() if b >= 0.05 * max(1, total))
        )
    return out


def _pcts(mct: Sequence[float]) -> tuple[object, ...]:
    """The ``mct_p50_ms`` .. ``mct_max_ms`` columns: numpy's percentiles (linear
    interpolation), blank when no message completed."""
    if not mct:
        return ("",) * len(MCT_PERCENTILES)
    return tuple(round(float(v), 1) for v in numpy.percentile(mct, MCT_PERCENTILES))


def summarize(
    rows: Sequence[tuple[object, ...]], loads: dict[tuple[str, str], list[float]], fabric: Fabric
) -> list[tuple[object, ...]]:
    """One row per (transport, window control): means over the trials."""
    col = {name: i for i, name in enumerate(FLOW_HEADER)}
    cap = capacity_mbps(fabric)
    gcap = cap * PAYLOAD_EFFICIENCY
    out: list[tuple[object, ...]] = []
    for key in dict.fromkeys((str(r[0]), str(r[1])) for r in rows):
        mine = [r for r in rows if (r[0], r[1]) == key]
        alls = [r for r in mine if r[col["flow"]] == "all"]
        flows = [r for r in mine if r[col["flow"]] != "all"]

        def floats(name: str, group: Sequence[tuple[object, ...]]) -> list[float]:
            return [float(str(r[col[name]])) for r in group if r[col[name]] != ""]

        tput, p50, p99 = (
            floats("throughput_mbps", alls),
            floats("mct_p50_ms", alls),
            floats("mct_p99_ms", alls),
        )
        out.append(
            (
                *key,
                len(alls),
                len(flows) // max(1, len(alls)),
                fabric.spec.link_mbps,
                round(cap, 3),
                round(gcap, 3),
                round(statistics.mean(tput), 3),
                round(statistics.mean(tput) / gcap, 4),
                round(min(tput) / gcap, 4),
                round(statistics.mean(tput) / cap, 4),
                round(min(floats("throughput_mbps", flows)), 3),
                round(statistics.mean(p50), 1) if p50 else "",
                round(statistics.mean(p99), 1) if p99 else "",
                round(statistics.mean(loads.get(key, [0.0])), 2),
            )
        )
    return out


# -- plot (reads only the CSVs) -----------------------------------------------------------------


def plot(
    csv_path: str | pathlib.Path, summary_path: str | pathlib.Path, png: str | pathlib.Path
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_csv(csv_path)
    summary = {(r["transport"], r["cc"]): r for r in read_csv(summary_path)}
    variants = list(dict.fromkeys((r["transport"], r["cc"]) for r in rows))
    colors = {"mrc": "tab:blue", "single_path": "tab:orange"}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.4), gridspec_kw={"width_ratios": [3, 2]})
    flows = list(dict.fromkeys(r["flow"] for r in rows if r["flow"] != "all"))
    width = 0.8 / max(1, len(variants))
    for k, (tr, cc) in enumerate(variants):
        mine = [r for r in rows if (r["transport"], r["cc"]) == (tr, cc) and r["flow"] != "all"]
        xs = {f: i + (k - (len(variants) - 1) / 2) * width for i, f in enumerate(flows)}
        ax1.scatter(
            [xs[r["flow"]] for r in mine],
            [float(r["throughput_mbps"]) for r in mine],
            s=14,
            color=colors.get(tr, "0.4"),
            marker="o" if cc == "fixed" else "^",
            alpha=0.8,
            label=f"{tr} ({cc})",
        )
    fair = float(next(r["fair_share_mbps"] for r in rows if r["flow"] != "all"))
    ax1.axhline(fair, ls="--", color="0.4", lw=1)
    ax1.set_xticks(range(len(flows)), flows, rotation=45, fontsize=7)
    ax1.set_ylabel("per-flow goodput (Mbit/s); dashed: fair share")
    ax1.set_ylim(bottom=0)
    ax1.legend(fontsize=7)
    ax1.set_title("per-flow goodput, every trial")
    for k, key in enumerate(variants):
        s = summary.get(key, {})
        frac = float(s.get("capacity_fraction", "nan")) * 100
        ax2.bar(k, frac, color=colors.get(key[0], "0.4"), hatch="" if key[1] == "fixed" else "//")
        ax2.text(
            k,
            frac + 1,
            f"{frac:.0f}%\nMCT p50 {float(s.get('mct_p50_ms') or 0) / 1e3:.1f} s"
            f"\np99 {float(s.get('mct_p99_ms') or 0) / 1e3:.1f} s",
            ha="center",
            fontsize=7,
        )
    ax2.set_xticks(range(len(variants)), [f"{t}\n{c}" for t, c in variants], fontsize=8)
    ax2.set_ylim(0, 125)
    ax2.axhline(90, ls=":", color="tab:green", lw=1)
    ax2.set_ylabel("aggregate goodput / goodput capacity (%)")
    ax2.set_title("fabric capacity used (mean over trials)")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


# -- command line -------------------------------------------------------------------------------


def _report(rec: TrialRecord, rows: Sequence[tuple[object, ...]]) -> None:
    col = {name: i for i, name in enumerate(FLOW_HEADER)}
    a = rows[-1]
    print(
        f"{rec.transport}/{rec.cc} trial {rec.trial}: {a[col['throughput_mbps']]} of "
        f"{a[col['fair_share_mbps']]} Mbit/s goodput capacity; flows "
        f"{[r[col['throughput_mbps']] for r in rows[:-1]]}, planes "
        f"{[r[col['planes_used']] for r in rows[:-1]]}, load {rec.load}",
        flush=True,
    )


def finish(
    p: CollisionParams,
    rows: Sequence[tuple[object, ...]],
    loads: dict[tuple[str, str], list[float]],
    fabric: Fabric,
) -> None:
    """Write the CSVs and the plot, print the summary."""
    summary = summarize(rows, loads, fabric)
    write_csv(p.out, FLOW_HEADER, rows)
    write_csv(p.summary_out, SUMMARY_HEADER, summary)
    plot(p.out, p.summary_out, p.png)
    for s in summary:
        print("  ".join(f"{k}={v}" for k, v in zip(SUMMARY_HEADER, s)), flush=True)
    print(f"wrote {p.out}, {p.summary_out}, {p.png}")


def reanalyse(p: CollisionParams) -> int:
    """The CSVs and the plot again from the trials under ``run_dir`` (no fabric needed)."""
    rows: list[tuple[object, ...]] = []
    loads: dict[tuple[str, str], list[float]] = {}
    recs = [TrialRecord.read(f.parent) for f in p.run_dir.glob(f"*/{TRIAL_FILE}")]
    if not recs:
        print(f"exp-collisions: no trials under {p.run_dir}", file=sys.stderr)
        return 2
    order = {c: i for i, c in enumerate(CC_MODES)}
    recs.sort(key=lambda r: (r[0].trial, order.get(r[0].cc, 9), r[0].transport))
    fabric = build_fabric(recs[0][1])
    for rec, _spec in recs:
        mine = analyse(rec, p, fabric)
        rows += mine
        loads.setdefault((rec.transport, rec.cc), []).append(rec.load)
        _report(rec, mine)
    finish(p, rows, loads, fabric)
    return 0


def run(p: CollisionParams) -> int:
    p.run_dir.mkdir(parents=True, exist_ok=True)
    rows: list[tuple[object, ...]] = []
    loads: dict[tuple[str, str], list[float]] = {}
    errors: list[str] = []
    with own_fabric(p.fabric) as up:
        fabric = up.net.fabric
        for trial in range(p.trials):
            for cc in p.cc_modes:
                for transport in p.transports:
                    rec = run_trial(up, p, transport, cc, trial)
                    errors += rec.errors
                    mine = analyse(rec, p, fabric)
                    rows += mine
                    loads.setdefault((transport, cc), []).append(rec.load)
                    _report(rec, mine)
    finish(p, rows, loads, fabric)
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    return 1 if errors else 0


def main(argv: Sequence[str] | None = None) -> int:
    d = CollisionParams()
    ap = argparse.ArgumentParser(
        prog="python -m experiments.collisions", description=__doc__.splitlines()[0]
    )
    add_fabric_args(ap, d.fabric)
    ap.add_argument("--out", default=d.out)
    ap.add_argument("--msg-bytes", type=int, default=d.msg_bytes)
    ap.add_argument("--depth", type=int, default=d.depth)
    ap.add_argument("--duration-s", type=float, default=d.duration_s)
    ap.add_argument("--warmup-s", type=float, default=d.warmup_s)
    ap.add_argument("--trials", type=int, default=d.trials)
    ap.add_argument("--transports", default=",".join(d.transports))
    ap.add_argument(
        "--cc",
        default=",".join(d.cc_modes),
        help="window controls: nscc (the transport's), fixed (the same for both)",
    )
    ap.add_argument("--fixed-window-packets", type=int, default=d.fixed_window_packets)
    ap.add_argument(
        "--plain-cc",
        action="store_true",
        help="fabric_config() as it is (2 ms target delay, 20 ms quick adapt)",
    )
    ap.add_argument("--plot-only", action="store_true", help="redraw the PNG from the CSVs")
    ap.add_argument(
        "--reanalyse",
        action="store_true",
        help="rebuild the CSVs and the PNG from the last run's host outputs",
    )
    a = ap.parse_args(argv)
    p = CollisionParams(
        FabricParams(
            link_mbps=a.link_mbps,
            results_dir=a.results,
            wait_s=a.wait_s,
            ecn_packets=a.ecn_packets,
            trim_packets=a.trim_packets,
        ),
        msg_bytes=a.msg_bytes,
        depth=a.depth,
        duration_s=a.duration_s,
        warmup_s=a.warmup_s,
        trials=a.trials,
        transports=tuple(t for t in a.transports.split(",") if t),
        out=a.out,
        cc_modes=tuple(c for c in a.cc.split(",") if c),
        fixed_window_packets=a.fixed_window_packets,
        plain_cc=a.plain_cc,
    )
    if a.plot_only:
        plot(p.out, p.summary_out, p.png)
        return 0
    if a.reanalyse:
        return reanalyse(p)
    try:
        return run(p)
    except FabricBusy as e:
        print(f"exp-collisions: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
