"""``make exp-collisions``: N simultaneous flows across the fabric, MRC vs single-path ECMP.

``python -m experiments.collisions [--link-mbps 20] [--seeds 3]`` brings up the default
fabric (2 planes x (2 leaves + 2 spines), 2 hosts per leaf) and runs one flow from every host
to every host on the other leaf: 8 flows, each host sending two and receiving two, every flow
crossing a spine. Every flow keeps ``--depth`` messages of ``--msg-bytes`` outstanding for
``--duration-s``; the first ``--warmup-s`` are left out of the figures.

* **MRC** sprays every flow over all P x S micro-SID paths.
* **Single-path ECMP** puts each flow on one plane (a hash of its connection) and the
  switches' ECMP picks its spine (a hash of addresses, ports and flow label); flows that land
  on the same link share it while other links idle. Which flows collide depends on the hash
  of the connection, which the seed fixes (below).

Each transport runs under two window controls (``--cc``): ``nscc``, the transport's
congestion window (``host.mrc.emulated.emulated_fabric_config``), and ``fixed``, a fixed window
of ``--fixed-window-packets`` per connection, the same for both transports: the path choice
alone then decides how the flows share the fabric.

Capacity (the queue rates): every host receives on P links of ``--link-mbps``, and each leaf's
P x S uplinks carry as much, so the fabric can deliver ``hosts x P x link_mbps`` for this
pattern, ``link_mbps`` per flow. Goodput (message bytes) can reach at most
``PAYLOAD_EFFICIENCY`` of that (the DATA headers); ``capacity_fraction`` is goodput over that
goodput capacity and ``wire_fraction`` over the raw link rate. The default link rate,
:data:`DEFAULT_LINK_MBPS`, is 10x the 2 Mbit/s the experiment ran at while the switches
forwarded in Python; every packet still costs the switches and the Python hosts CPU (see the
README), and at 20 Mbit/s (about 1,650 full packets per second per link) they take the
machine's two cores. The switch ports get a burst allowance of :data:`DEFAULT_QUEUE_BURST_US`
(``--queue-burst-us``, below).

Seeds: every (transport, window control) runs once per seed (``--seeds N``, default 3;
``--trials`` is the old name), each run with new connections. A seed fixes

* the connections' ids (``host.stream_agent --seed``), which pick each single-path flow's
  plane (a hash of the hosts and the id), and so which flows collide on a plane;
* each host's start: a uniform draw from [0, ``--start-jitter-ms``) after the common start
  (the same for every variant of the seed), so that the flows do not all open their windows
  in the same instant and the order in which they grab the queues varies.

It does not fix the spine the switches' ECMP gives a single-path flow (a hash of addresses,
ports and the IPv6 flow label, which the kernel chooses), nor the machine's scheduling.

Message completion time (MCT): from the sender's ``send()`` to the acknowledgement of the
message's last packet at the sender, for the messages sent after the warm-up that completed
before the end; per seed, percentiles over all flows' messages (``numpy.percentile``, linear).

Outputs:

* ``flow_collisions.csv``: per transport, window control, seed and flow, plus a row ``all``
  per seed: goodput, share of the fair share (``all``: of the goodput capacity), planes used,
  MCT percentiles, retransmissions, the load average, and ``error`` (why a seed failed: a row
  ``all`` with blank figures; or what a host process reported);
* ``flow_collisions_summary.csv``: per transport, window control and figure (those of
  :func:`seed_figures`), over the seeds: ``n``, ``mean``, ``sd``, ``ci95_low``,
  ``ci95_high``, ``min``, ``max`` (:mod:`experiments.stats`: a t-based 95 % confidence
  interval of the mean);
* ``flow_collisions.png`` (from the CSVs only: ``--plot-only``): every flow's goodput in every
  seed, and bars from zero of capacity used and MCT p50 / p99 with their 95 % intervals.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import ClassVar

import numpy

from experiments.mrc_fabric import (
    PAYLOAD_EFFICIENCY,
    TIMEOUTS,
    ExperimentOutputs,
    FabricParams,
    SeedFigure,
    add_fabric_args,
    add_run_mode_args,
    attempt,
    fabric_params,
    load_1m,
    own_fabric,
    print_seed_table,
    read_csv,
    run_mode,
    seed_rng,
    start_all,
    start_hosts,
    stop_all,
    write_csv,
)
from experiments.stats import SUMMARY_COLUMNS, Summary, summary_rows, to_float
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
    "seed",
    "flow",
    "planes_used",
    "throughput_mbps",
    "completed_mbps",
    "fair_share_mbps",
    "fair_share_pct",
    "messages",
    "mct_p50_ms",
    "mct_p90_ms",
    "mct_p99_ms",
    "mct_max_ms",
    "retransmits",
    "rto_events",
    "rehashes",
    "load_1m",
    "error",
)
"""``fair_share_mbps`` and ``fair_share_pct`` of the row ``all``: the fabric's goodput
capacity and the share of it used."""
MCT_PERCENTILES = (50, 90, 99, 100)
"""The percentiles of the ``mct_p50_ms``, ``mct_p90_ms``, ``mct_p99_ms`` and ``mct_max_ms``
columns (``numpy.percentile``, linear interpolation)."""
SEED_FIGURES = (
    "capacity_pct",
    "wire_pct",
    "throughput_mbps",
    "slowest_flow_mbps",
    "jain_fairness",
    "mct_p50_ms",
    "mct_p90_ms",
    "mct_p99_ms",
    "mct_max_ms",
    "retransmits",
    "rto_events",
    "rehashes",
    "load_1m",
)
"""The figures of one seed (:func:`seed_figures`) that the summary CSV summarises."""
SUMMARY_HEADER = ("transport", "cc", "figure", *SUMMARY_COLUMNS)
FIGURES = (
    SeedFigure(
        "capacity_pct",
        "capacity used (%): aggregate goodput / the fabric's goodput capacity, after the warm-up",
        lower_is_better=False,
    ),
    SeedFigure(
        "mct_p50_ms",
        "message completion time p50 (ms): send() -> last packet acknowledged, all flows",
        ".0f",
    ),
    SeedFigure("mct_p99_ms", "message completion time p99 (ms), the same messages", ".0f"),
    SeedFigure(
        "slowest_flow_mbps", "slowest flow's goodput (Mbit/s)", ".2f", lower_is_better=False
    ),
    SeedFigure(
        "jain_fairness",
        "Jain's fairness index of the flows' goodputs (1: all equal)",
        ".3f",
        lower_is_better=False,
    ),
)
"""The console table's figures (the summary CSV has all of :data:`SEED_FIGURES`)."""
BASELINES = {"mrc/nscc": "single_path/nscc", "mrc/fixed": "single_path/fixed"}
DEFAULT_LINK_MBPS = 20.0
"""10x the 2 Mbit/s the experiment ran at while the switches forwarded in Python."""
DEFAULT_QUEUE_BURST_US = 16000.0
"""How far ahead of its exact schedule a switch port may send (``tf-switch --queue-burst-us``;
a token bucket 16 ms of the link rate deep, 26 full packets at 20 Mbit/s, 2.6 at 2; the
long-run rate stays the link's). With the switches' 200 us the fabric carried 80 % of its
capacity whatever the window: on two cores shared by eight switches and four Python hosts
(their I/O threads wait on the run queue 60 % of the time) packets reach a port in clumps: a
host's port was 82 % busy with 11-15 packets queued on average and up to 64, the ACKs of the
reverse direction waited in the same queues, and a larger window only made them longer.
Measured at 20 Mbit/s, MRC, one seed each: 200 us 80-81 % (fixed) / 76-77 % (nscc), 2 ms
84 / 81 %, 8 ms 88 / 85 %, 16 ms 92 / 90 %."""


@dataclass(frozen=True)
class CollisionParams(ExperimentOutputs):
    run_subdir: ClassVar[str] = "collisions"
    fabric: FabricParams = field(
        default_factory=lambda: FabricParams(
            link_mbps=DEFAULT_LINK_MBPS, ecn_packets=8, queue_burst_us=DEFAULT_QUEUE_BURST_US
        )
    )
    msg_bytes: int = 32768
    depth: int = 8
    duration_s: float = 30.0
    warmup_s: float = 8.0
    seeds: int = 3
    """Every variant runs once per seed 0 .. seeds-1."""
    start_jitter_ms: float = 100.0
    """Each host starts a uniform draw from [0, this) after the common start, drawn per seed
    (the same for every variant of the seed)."""
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


def start_offsets_s(p: CollisionParams, fabric: Fabric, seed: int) -> dict[str, float]:
    """Each host's start after the common instant under ``seed`` (seconds)."""
    rng = seed_rng("collisions", seed)
    return {h.name: rng.uniform(0.0, p.start_jitter_ms / 1e3) for h in fabric.hosts}


@dataclass
class TrialRecord:
    """One seed's run of one variant besides the host processes' CSVs
    (``<out_dir>/trial.json``)."""

    transport: str
    cc: str
    seed: int
    start: float
    out_dir: pathlib.Path
    planes: dict[str, list[int]]
    conn_ids: dict[str, int]
    load: float
    errors: list[str]
    """What the host processes reported (the run's figures stand)."""
    failed: str = ""
    """Why the run failed (no figures)."""

    def save(self, spec: FabricSpec) -> None:
        doc = {k: v for k, v in vars(self).items() if k != "out_dir"}
        (self.out_dir / TRIAL_FILE).write_text(json.dumps({**doc, "fabric": asdict(spec)}))

    @classmethod
    def read(cls, out_dir: pathlib.Path) -> tuple[TrialRecord, FabricSpec]:
        doc = json.loads((out_dir / TRIAL_FILE).read_text())
        spec = FabricSpec(**doc.pop("fabric"))
        if "trial" in doc:  # written before seeds
            doc["seed"] = doc.pop("trial")
        return cls(out_dir=out_dir, **doc), spec


def trial_dir(p: CollisionParams, transport: str, cc: str, seed: int) -> pathlib.Path:
    return p.run_dir / f"{transport}_{cc}_{seed}"


def run_trial(up: BringUp, p: CollisionParams, transport: str, cc: str, seed: int) -> TrialRecord:
    """Every flow of :func:`flows_of` at once with one transport and window control."""
    if cc not in CC_MODES:
        raise ValueError(f"unknown window control {cc!r}; choose from {', '.join(CC_MODES)}")
    fabric = up.net.fabric
    topo = str(up.net.topology_path.resolve())
    out_dir = trial_dir(p, transport, cc, seed)
    name = out_dir.name
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
            seed=seed,
        )
        for h in fabric.hosts
    ]
    planes: dict[str, list[int]] = {}
    conn_ids: dict[str, int] = {}
    with (p.run_dir / f"{name}.log").open("wb") as log:
        procs = start_hosts(up, specs, log)
        try:
            at = start_all(procs, offsets_s=start_offsets_s(p, fabric, seed))
            for name, proc in procs.items():
                for _ in (d for s, d in flows if s == name):
                    ev = proc.wait_event("path", p.duration_s + TIMEOUTS.slack_s)
                    planes[ev["flow"]] = [int(x) for x in ev["planes"]]
                    conn_ids[ev["flow"]] = int(ev["conn_id"])
            for name, proc in procs.items():
                for _ in (d for s, d in flows if s == name):
                    proc.wait_event("sent", p.duration_s + TIMEOUTS.slack_s)
            load = load_1m()
        finally:
            done = stop_all(procs)
    errors = [f"{h}: {e}" for h, d in done.items() for e in d.get("errors", [])]
    rec = TrialRecord(transport, cc, seed, at, out_dir, planes, conn_ids, load, errors)
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
                rec.seed,
                flow,
                "+".join(map(str, used)),
                round(mbps, 3),
                round(completed, 3),
                round(fair, 3),
                round(100 * mbps / fair, 2),
                len(done_in),
                *_pcts(mct),
                retx,
                kinds.count("rto"),
                kinds.count("rehash"),
                rec.load,
                "",
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
            rec.seed,
            "all",
            "",
            round(total, 3),
            round(total_completed, 3),
            round(cap, 3),
            round(100 * total / cap, 2),
            col_sum("messages"),
            *_pcts(all_mct),
            col_sum("retransmits"),
            col_sum("rto_events"),
            col_sum("rehashes"),
            rec.load,
            "; ".join(rec.errors),
        )
    )
    return rows


def failed_row(transport: str, cc: str, seed: int, error: str) -> tuple[object, ...]:
    """The row ``all`` of a seed that failed: its keys, blank figures and the error."""
    keys = {"transport": transport, "cc": cc, "seed": seed, "flow": "all", "error": error}
    return tuple(keys.get(c, "") for c in FLOW_HEADER)


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


def seed_figures(rows: Sequence[Mapping[str, str]]) -> list[dict[str, object]]:
    """One dict per (transport, window control, seed) of the flows CSV: its keys and the
    figures of :data:`SEED_FIGURES` (blank where the seed failed).

    ``capacity_pct`` is the row ``all``'s goodput over the goodput capacity, ``wire_pct`` over
    the raw link capacity; ``slowest_flow_mbps`` and ``jain_fairness``
    ((sum x)^2 / (n sum x^2)) are over the seed's flows' goodputs; the MCT percentiles and
    counts are the row ``all``'s.
    """
    groups: dict[tuple[str, str, str], list[Mapping[str, str]]] = {}
    for r in rows:
        groups.setdefault((r["transport"], r["cc"], r["seed"]), []).append(r)
    out: list[dict[str, object]] = []
    for (transport, cc, seed), mine in groups.items():
        alls = [r for r in mine if r["flow"] == "all"]
        flows = [to_float(r["throughput_mbps"]) for r in mine if r["flow"] != "all"]
        flows = [x for x in flows if not math.isnan(x)]
        a: Mapping[str, str] = alls[0] if alls else {}
        cap = to_float(a.get("fair_share_mbps"))
        tput = to_float(a.get("throughput_mbps"))
        squares = sum(x * x for x in flows)
        fig: dict[str, object] = {
            "capacity_pct": to_float(a.get("fair_share_pct")),
            "wire_pct": 100 * tput / (cap / PAYLOAD_EFFICIENCY) if cap > 0 else math.nan,
            "throughput_mbps": tput,
            "slowest_flow_mbps": min(flows) if flows else math.nan,
            "jain_fairness": sum(flows) ** 2 / (len(flows) * squares) if squares > 0 else math.nan,
            **{f: to_float(a.get(f)) for f in SEED_FIGURES if f.startswith("mct_")},
            **{f: to_float(a.get(f)) for f in ("retransmits", "rto_events", "rehashes")},
            "load_1m": to_float(a.get("load_1m")),
        }
        out.append(
            {
                "transport": transport,
                "cc": cc,
                "seed": seed,
                **{f: fig[f] for f in SEED_FIGURES},
                "error": a.get("error", ""),
            }
        )
    return out


def summarize(rows: Sequence[Mapping[str, str]]) -> list[tuple[object, ...]]:
    """The summary CSV's rows: per (transport, window control) and figure of
    :func:`seed_figures`, its mean, sd and 95 % interval over the seeds that have it."""
    return [
        tuple(r[c] for c in SUMMARY_HEADER)
        for r in summary_rows(seed_figures(rows), ("transport", "cc"), SEED_FIGURES, ndigits=4)
    ]


# -- plot (reads only the CSVs) -----------------------------------------------------------------


def plot(
    csv_path: str | pathlib.Path, summary_path: str | pathlib.Path, png: str | pathlib.Path
) -> None:
    """Every flow's goodput in every seed, and bars from zero of the capacity used and of the
    MCT p50 / p99 (mean over the seeds, 95 % interval, seeds as dots), from the two CSVs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_csv(csv_path)
    stats = {
        (r["transport"], r["cc"], r["figure"]): Summary.from_row(r) for r in read_csv(summary_path)
    }
    per_seed = seed_figures(rows)
    variants = list(dict.fromkeys((r["transport"], r["cc"]) for r in rows))
    colors = {"mrc": "tab:blue", "single_path": "tab:orange"}
    fig, (ax1, ax2, ax3) = plt.subplots(
        1, 3, figsize=(16, 4.8), gridspec_kw={"width_ratios": [3, 1.6, 2]}
    )
    flows = list(dict.fromkeys(r["flow"] for r in rows if r["flow"] != "all"))
    width = 0.8 / max(1, len(variants))
    for k, (tr, cc) in enumerate(variants):
        mine = [
            r
            for r in rows
            if (r["transport"], r["cc"]) == (tr, cc) and r["flow"] != "all" and r["throughput_mbps"]
        ]
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
    fair = next((float(r["fair_share_mbps"]) for r in rows if r["flow"] != "all"), math.nan)
    ax1.axhline(fair, ls="--", color="0.4", lw=1)
    ax1.set_xticks(range(len(flows)), flows, rotation=45, fontsize=7)
    ax1.set_ylabel("per-flow goodput after the warm-up (Mbit/s); dashed: fair share")
    ax1.set_ylim(bottom=0)
    ax1.legend(fontsize=7)
    ax1.set_title(f"per-flow goodput, every seed ({len({r['seed'] for r in rows})} seeds)")

    labels = [f"{t}\n{c}" for t, c in variants]
    top = 105.0
    for k, (tr, cc) in enumerate(variants):
        s = stats.get((tr, cc, "capacity_pct"), Summary.from_row({}))
        lo, hi = s.error_bar()
        ax2.bar(
            k,
            0.0 if math.isnan(s.mean) else s.mean,
            yerr=[[lo], [hi]],
            capsize=4,
            color=colors.get(tr, "0.4"),
            hatch="" if cc == "fixed" else "//",
            alpha=0.8,
        )
        vals = [
            v
            for r in per_seed
            if (r["transport"], r["cc"]) == (tr, cc)
            and not math.isnan(v := to_float(r["capacity_pct"]))
        ]
        ax2.scatter([k] * len(vals), vals, s=10, color="black", zorder=3)
        top = max([top, s.mean + hi, *vals])
        ax2.text(
            k,
            2,
            f"{s.mean:.1f} %\nn={s.n}",
            ha="center",
            fontsize=7,
            bbox={"facecolor": "white", "lw": 0, "pad": 1},
        )
    ax2.set_xticks(range(len(variants)), labels, fontsize=8)
    ax2.set_ylim(0, top * 1.04)
    ax2.axhline(90, ls=":", color="tab:green", lw=1)
    ax2.set_ylabel("aggregate goodput / goodput capacity (%)")
    ax2.set_title("capacity used\n(mean over seeds, 95 % CI; dots: seeds)", fontsize=9)

    pct_width = 0.38
    for j, (fig_name, label) in enumerate((("mct_p50_ms", "p50"), ("mct_p99_ms", "p99"))):
        for k, (tr, cc) in enumerate(variants):
            x = k + (j - 0.5) * pct_width
            s = stats.get((tr, cc, fig_name), Summary.from_row({}))
            lo, hi = s.error_bar()
            ax3.bar(
                x,
                0.0 if math.isnan(s.mean) else s.mean / 1e3,
                pct_width,
                yerr=[[lo / 1e3], [hi / 1e3]],
                capsize=3,
                color=colors.get(tr, "0.4"),
                hatch="" if cc == "fixed" else "//",
                alpha=0.45 if label == "p50" else 0.9,
            )
            vals = [
                v / 1e3
                for r in per_seed
                if (r["transport"], r["cc"]) == (tr, cc)
                and not math.isnan(v := to_float(r[fig_name]))
            ]
            ax3.scatter([x] * len(vals), vals, s=10, color="black", zorder=3)
            ax3.text(
                x,
                0.02,
                label,
                ha="center",
                fontsize=7,
                transform=ax3.get_xaxis_transform(),
                bbox={"facecolor": "white", "lw": 0, "pad": 1},
            )
    ax3.set_xticks(range(len(variants)), labels, fontsize=8)
    ax3.set_ylim(bottom=0)
    ax3.set_ylabel("message completion time (s)")
    ax3.set_title(
        "message completion time p50 (light) and p99: send() -> last packet\n"
        "acknowledged, per seed over all flows (mean over seeds, 95 % CI)",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


# -- command line -------------------------------------------------------------------------------


def _report(rec: TrialRecord, rows: Sequence[tuple[object, ...]]) -> None:
    col = {name: i for i, name in enumerate(FLOW_HEADER)}
    a = rows[-1]
    print(
        f"{rec.transport}/{rec.cc} seed {rec.seed}: {a[col['throughput_mbps']]} of "
        f"{a[col['fair_share_mbps']]} Mbit/s goodput capacity; flows "
        f"{[r[col['throughput_mbps']] for r in rows[:-1]]}, planes "
        f"{[r[col['planes_used']] for r in rows[:-1]]}, load {rec.load}",
        flush=True,
    )


def _analysed(rec: TrialRecord, p: CollisionParams, fabric: Fabric) -> list[tuple[object, ...]]:
    """The rows of one run: its flows and ``all``, or a failed row (why)."""
    if rec.failed:
        return [failed_row(rec.transport, rec.cc, rec.seed, rec.failed)]
    what = f"{rec.transport}/{rec.cc} seed {rec.seed}"
    rows, err = attempt(f"{what}: analysis", analyse, rec, p, fabric)
    if rows is None:
        return [failed_row(rec.transport, rec.cc, rec.seed, err)]
    _report(rec, rows)
    return rows


def report(p: CollisionParams) -> int:
    """The summary CSV, the console table and the plot, from the flows CSV."""
    rows = read_csv(p.out)
    write_csv(p.summary_out, SUMMARY_HEADER, summarize(rows))
    per_seed = seed_figures(rows)
    n = len({r["seed"] for r in per_seed})
    print_seed_table(
        f"flow collisions, {n} seeds: mean ± 95 % CI of the mean (n seeds with the figure); "
        f"per seed ('-': none)",
        per_seed,
        lambda r: f"{r['transport']}/{r['cc']}",
        FIGURES,
        BASELINES,
    )
    failed = [r for r in per_seed if r["error"]]
    for r in failed:
        print(f"error: {r['transport']}/{r['cc']} seed {r['seed']}: {r['error']}", file=sys.stderr)
    plot(p.out, p.summary_out, p.png)
    print(f"wrote {p.out}, {p.summary_out}, {p.png}")
    return 1 if failed else 0


def reanalyse(p: CollisionParams) -> int:
    """The CSVs and the plot again from the runs under ``run_dir`` (no fabric needed)."""
    rows: list[tuple[object, ...]] = []
    recs = [TrialRecord.read(f.parent) for f in p.run_dir.glob(f"*/{TRIAL_FILE}")]
    if not recs:
        print(f"exp-collisions: no runs under {p.run_dir}", file=sys.stderr)
        return 2
    order = {c: i for i, c in enumerate(CC_MODES)}
    recs.sort(key=lambda r: (r[0].seed, order.get(r[0].cc, 9), r[0].transport))
    fabric = build_fabric(recs[0][1])
    for rec, _spec in recs:
        rows += _analysed(rec, p, fabric)
    write_csv(p.out, FLOW_HEADER, rows)
    return report(p)


def run(p: CollisionParams) -> int:
    """Every seed of every variant on one fabric; a seed that fails is recorded (a row ``all``
    with its error) and the others go on."""
    p.run_dir.mkdir(parents=True, exist_ok=True)
    for old in p.run_dir.glob(f"*/{TRIAL_FILE}"):  # a previous run's: --reanalyse reads all
        shutil.rmtree(old.parent)
    rows: list[tuple[object, ...]] = []
    with own_fabric(p.fabric) as up:
        fabric = up.net.fabric
        for seed in range(p.seeds):
            for cc in p.cc_modes:
                for transport in p.transports:
                    what = f"{transport}/{cc} seed {seed}"
                    rec, err = attempt(what, run_trial, up, p, transport, cc, seed)
                    if rec is None:
                        out_dir = trial_dir(p, transport, cc, seed)
                        out_dir.mkdir(parents=True, exist_ok=True)
                        rec = TrialRecord(
                            transport, cc, seed, 0.0, out_dir, {}, {}, load_1m(), [], err
                        )
                        rec.save(fabric.spec)
                    rows += _analysed(rec, p, fabric)
    write_csv(p.out, FLOW_HEADER, rows)
    return report(p)


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
    ap.add_argument(
        "--seeds",
        "--trials",
        dest="seeds",
        type=int,
        default=d.seeds,
        help="seeds 0..N-1, one run per transport and window control each (--trials: the old name)",
    )
    ap.add_argument(
        "--start-jitter-ms",
        type=float,
        default=d.start_jitter_ms,
        help="each host starts a per-seed uniform draw from [0, this) after the common start",
    )
    ap.add_argument("--transports", default=",".join(d.transports))
    ap.add_argument(
        "--cc",
        default=",".join(d.cc_modes),
        help="window controls: nscc (the transport's), fixed (the same for both)",
    )
    ap.add_argument("--fixed-window-packets", type=int, default=d.fixed_window_packets)
    add_run_mode_args(ap, "the flows CSV")
    a = ap.parse_args(argv)
    if a.seeds < 1:
        ap.error("--seeds must be at least 1")
    p = CollisionParams(
        fabric_params(a),
        msg_bytes=a.msg_bytes,
        depth=a.depth,
        duration_s=a.duration_s,
        warmup_s=a.warmup_s,
        seeds=a.seeds,
        start_jitter_ms=a.start_jitter_ms,
        transports=tuple(t for t in a.transports.split(",") if t),
        out=a.out,
        cc_modes=tuple(c for c in a.cc.split(",") if c),
        fixed_window_packets=a.fixed_window_packets,
        plain_cc=a.plain_cc,
    )
    return run_mode("exp-collisions", a, lambda: run(p), lambda: report(p), lambda: reanalyse(p))


if __name__ == "__main__":
    raise SystemExit(main())
