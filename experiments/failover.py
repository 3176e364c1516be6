"""``make exp-failover``: a plane fails in the middle of a stream of messages, MRC vs single path.

``python -m experiments.failover [--link-mbps 50] [--out results/plane_failure.csv]`` brings up
the default fabric (2 planes x (2 leaves + 2 spines), 4 hosts), streams messages from h1 to h3
(different leaves, so every path crosses a spine) at ``--load-fraction`` of the capacity into
h3 (P links) with MRC and then with the single-path baseline (which can carry at most one
plane's worth), and fails one plane through the controller (``fail plane N``) half-way through each
run. MRC fails plane 1; the single path fails the plane its connection sent on in the last
50 ms (the sender reports it; a spurious RTO may have re-hashed it since the start), so that
the baseline is hit at all. Both use the same transport settings
(``host.mrc.emulated.emulated_fabric_config``: the same RTO estimator, 10 ms minimum); the single
path re-hashes to the other plane after an RTO.

Seeds: every transport runs once per seed (``--seeds N``, default 5; ``--runs`` is the old
name), the transports alternating, each run with a fresh connection. A seed fixes

* the instant of the failure: ``--fail-at-s`` plus an offset drawn uniformly from
  [0, ``--fail-jitter-ms``) (the same for both transports of a seed), so that the failure
  lands at a different point of the packet train, the spray cycle and the timers;
* the connection's id (``host.stream_agent --seed``), which picks the single path's plane.

What it does not fix is the machine: the switches' and hosts' scheduling, which is most of
the spread between seeds.

Outputs:

* ``plane_failure.csv``: per transport and seed, every ``--bin-ms`` from 1 s before the
  failure to the end of the run, per EV: its state, its goodput in the bin, and the
  connection's goodput (bin and over ``--window-ms`` centred on the time), time relative to
  the start of the ``fail plane`` command;
* ``plane_failure_seeds.csv``: per transport and seed, goodput before and after, the (P-1)/P
  threshold, the recovery times, the longest stall, when the failed plane's EVs were marked
  ASSUMED_BAD (MRC) or the RTO fired (single path), messages sent / delivered / lost, and
  ``error`` (why a seed failed: its figures are blank; or what a host process reported);
* ``plane_failure_summary.csv``: per transport and figure (every numeric column of the seeds
  CSV), over the seeds: ``n``, ``mean``, ``sd``, ``ci95_low``, ``ci95_high``, ``min``,
  ``max`` (:mod:`experiments.stats`: a t-based 95 % confidence interval of the mean);
* ``plane_failure.png`` (drawn from the CSVs only: ``--plot-only``): the goodput and EV states
  of the first seed, and bars of the mean over the seeds with their 95 % intervals.

``--reanalyse`` rebuilds all of them from the host processes' outputs and each run's
``run.json`` under ``<results>/failover`` (no fabric needed).

Goodput is message bytes delivered to the receiving application (in order, from the
receiver's CSV), in Mbit/s; an EV's goodput is the bytes acknowledged on it (the sender's
per-EV ``bytes_acked`` samples every ``--sample-ms``). Delivered bytes are used for the
connection because ACKs are coalesced (every 8 packets or 4 packet times), which makes
acknowledged bytes arrive in lumps that a short window turns into false dips.

Time 0 is the start of the ``fail plane`` command (the controller computes the new tables,
then writes them to the plane's switches in parallel, so the plane goes down somewhere before
the command returns: ``fail_command_ms`` later; ``*_after_command`` columns count from then).
The plane goes down between ``fail_sent_ms`` (the command's first switch write was sent:
nothing had failed before) and ``fail_applied_ms`` (that write returned: a switch had applied
part of the failure), so ``recovery_after_sent_ms`` is an upper bound of the recovery time
and ``recovery_after_applied_ms`` a lower one. Computing the tables first takes part of the
command, and on a loaded machine all of it can take 100 ms: ``recovery_ms``, from the command
start, is only a loose upper bound.

Recovery time: once the goodput over the window (25 ms at 5 Mbit/s, scaled with the packet
time but never below 10 ms: 10 ms at the default 50 Mbit/s; centred on the time: a trailing window
reports every change half a window late) has fallen below (P-1)/P of the pre-failure goodput
(the mean over the second before the failure), the first instant at which it is back above
and stays above on average for ``hold_ms``; 0 when it did not fall below within
``dip_within_ms`` (100 ms) of the first write's send. ``settled_after_sent_ms`` is stricter:
from the first write's send until the windowed goodput stays at or above (P-1)/P, i.e. the
first window at or above it after the last window below it that starts within those 100 ms
(a second stall counts as well, and a dip that lasts beyond the 100 ms counts to its end).
Later dips are congestion on the remaining planes, which the stream overloads, and the
quantisation of the window (a 4 KiB message is a fifth of 25 ms at 5 Mbit/s, a 21st of
10 ms at 50).

Waits for the host processes are :data:`experiments.mrc_fabric.TIMEOUTS` (minutes): a busy
machine makes a run slower, not a failure; a seed that fails anyway is recorded and the
others go on (exit status 1).
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import itertools
import json
import math
import pathlib
import shutil
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, ClassVar

from controller.fabric import FabricController
from experiments.mrc_fabric import (
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
from host.stream_agent import RunSpec
from topologies.emulation.bringup import BringUp
from topologies.model import Fabric, FabricSpec, build_fabric

if TYPE_CHECKING:
    from matplotlib.axes import Axes

TRANSPORTS = ("mrc", "single_path")
REPORT_BEFORE_S = 0.2
RUN_FILE = "run.json"
SERIES_HEADER = (
    "transport",
    "seed",
    "failed_plane",
    "t_ms",
    "ev",
    "plane",
    "spine",
    "ev_state",
    "ev_goodput_mbps",
    "goodput_mbps",
    "goodput_window_mbps",
    "delivered_messages",
)
SEEDS_HEADER = (
    "transport",
    "seed",
    "link_mbps",
    "failed_plane",
    "fail_offset_ms",
    "fail_command_ms",
    "fail_sent_ms",
    "fail_applied_ms",
    "msg_bytes",
    "offered_mbps",
    "pre_goodput_mbps",
    "post_goodput_mbps",
    "threshold_mbps",
    "recovery_ms",
    "recovery_after_sent_ms",
    "recovery_after_applied_ms",
    "recovery_after_command_ms",
    "settled_after_sent_ms",
    "longest_stall_ms",
    "longest_delivery_gap_ms",
    "first_assumed_bad_ms",
    "first_rto_ms",
    "rto_events",
    "messages_sent",
    "messages_delivered",
    "messages_lost",
    "out_of_order",
    "load_1m",
    "error",
)
SUMMARY_FIGURES = SEEDS_HEADER[SEEDS_HEADER.index("fail_offset_ms") : -1]
"""The columns of the seeds CSV that the summary CSV summarises (all but the keys and the
settings)."""
SUMMARY_HEADER = ("transport", "figure", *SUMMARY_COLUMNS)
FIGURES = (
    SeedFigure(
        "recovery_after_sent_ms",
        "recovery (ms): first switch write sent -> goodput (window: 25 ms at 5 Mbit/s, 10 ms "
        "from 12.5 on) back >= (P-1)/P of before, held 100 ms",
    ),
    SeedFigure(
        "recovery_after_applied_ms",
        "recovery (ms), lower bound: from that write's return instead",
    ),
    SeedFigure(
        "settled_after_sent_ms",
        "stays above (ms): first switch write sent -> no window below (P-1)/P within 100 ms",
    ),
    SeedFigure(
        "longest_stall_ms",
        "longest time without an ACK (ms), 0.1 s before to 1 s after the command",
    ),
    SeedFigure(
        "longest_delivery_gap_ms",
        "longest gap between messages delivered to the application (ms), same interval",
    ),
    SeedFigure("messages_lost", "messages lost (sent, never delivered)", ".0f"),
    SeedFigure(
        "post_goodput_mbps",
        "goodput 0.5-1.5 s after the command (Mbit/s)",
        ".2f",
        lower_is_better=False,
    ),
)
"""The console table's figures (the summary CSV has every figure)."""
BASELINES = {"mrc": "single_path"}
DEFAULT_LINK_MBPS = 50.0
"""10x the 5 Mbit/s the experiment ran at while the switches forwarded in Python."""
WINDOW_REF_MBPS = 5.0
"""The link rate at which ``bin_ms`` and ``window_ms`` hold as given."""


def at_link_rate(ms: float, link_mbps: float) -> float:
    """``ms`` at :data:`WINDOW_REF_MBPS`, scaled with the packet time to ``link_mbps``."""
    return ms * WINDOW_REF_MBPS / link_mbps


@dataclass(frozen=True)
class FailoverParams(ExperimentOutputs):
    run_subdir: ClassVar[str] = "failover"
    fabric: FabricParams = field(
        default_factory=lambda: FabricParams(link_mbps=DEFAULT_LINK_MBPS, ecn_packets=8)
    )
    src: str = "h1"
    dst: str = "h3"
    msg_bytes: int = 4096
    depth: int = 32
    load_fraction: float = 0.75
    """Offered load: this fraction of the goodput capacity of the P planes into ``dst``, so
    that after the failure the remaining planes' capacity is above (P-1)/P of it (0: as fast
    as the window allows, which makes the threshold the remaining capacity itself)."""
    duration_s: float = 4.0
    fail_at_s: float = 2.0
    """Seconds after the stream starts (plus the seed's offset, below)."""
    fail_jitter_ms: float = 50.0
    """Each seed fails the plane ``fail_at_s`` plus a uniform draw from [0, this) after the
    start (the same for every transport of the seed); 0: always at ``fail_at_s``."""
    mrc_plane: int = 1
    sample_ms: float = 1.0
    bin_ms: float = 5.0
    window_ms: float = 25.0
    """``bin_ms`` and ``window_ms`` hold at :data:`WINDOW_REF_MBPS` and scale with the packet
    time (:func:`at_link_rate`), so that a window holds as many packets and messages at every
    link rate, but the window is never shorter than ``min_window_ms``."""
    min_window_ms: float = 10.0
    """The hosts' scheduling on a busy 2-core machine delays deliveries by a few ms whatever
    the link rate: a 2.5 ms window (25 ms scaled to 50 Mbit/s) dips below (P-1)/P with no
    failure at all."""
    min_bin_ms: float = 2.0
    """Bins (the per-EV goodput of the series CSV and the plot) are never shorter: the ACKs
    that feed them come in batches, and a 0.5 ms bin shows the batches, not the goodput."""
    hold_ms: float = 100.0
    dip_within_ms: float = 100.0
    """Only a fall below the threshold that starts this soon after the failure (the first
    switch write's send) counts: later dips are congestion on the remaining planes, which the
    stream now overloads."""
    transports: tuple[str, ...] = TRANSPORTS
    seeds: int = 5
    """Each transport runs once per seed 0 .. seeds-1 (the plot's time series: the first)."""
    out: str = "results/plane_failure.csv"
    plain_cc: bool = False
    """``fabric_config()`` as it is instead of ``host.mrc.emulated.emulated_fabric_config``."""

    @property
    def seeds_out(self) -> pathlib.Path:
        return pathlib.Path(self.out).with_name(pathlib.Path(self.out).stem + "_seeds.csv")

    def fail_offset_s(self, seed: int) -> float:
        """The seed's offset of the failure instant (see :attr:`fail_jitter_ms`)."""
        return seed_rng("failover", seed).uniform(0.0, self.fail_jitter_ms / 1e3)

    def bin_s(self, link_mbps: float) -> float:
        """The bin at ``link_mbps``: 5 ms at 5 Mbit/s, 2 ms from 12.5 Mbit/s on."""
        return max(at_link_rate(self.bin_ms, link_mbps), self.min_bin_ms) / 1e3

    def window_s(self, link_mbps: float) -> float:
        """The goodput window at ``link_mbps``: 25 ms at 5 Mbit/s, 10 ms from 12.5 Mbit/s on."""
        return max(at_link_rate(self.window_ms, link_mbps), self.min_window_ms) / 1e3


@dataclass
class RunRecord:
    """What one transport's run left: the command times and the processes' CSV directory."""

    transport: str
    seed: int
    fail_offset_s: float
    failed_plane: int
    fail_t0: float
    fail_t1: float
    fail_sent: float
    """When the command's first switch write was sent: nothing had failed before."""
    fail_applied: float
    """When the first switch write of the command returned: part of the failure was in effect
    by then at the latest."""
    out_dir: pathlib.Path
    load: float
    errors: list[str]
    """What the host processes reported (the run's figures stand)."""
    failed: str = ""
    """Why the run failed (no figures)."""

    def save(self, spec: FabricSpec) -> None:
        """``<out_dir>/run.json``, which ``--reanalyse`` reads back."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        doc = {k: v for k, v in vars(self).items() if k != "out_dir"}
        (self.out_dir / RUN_FILE).write_text(json.dumps({**doc, "fabric": asdict(spec)}))

    @classmethod
    def read(cls, out_dir: pathlib.Path) -> tuple[RunRecord, FabricSpec]:
        doc = json.loads((out_dir / RUN_FILE).read_text())
        spec = FabricSpec(**doc.pop("fabric"))
        return cls(out_dir=out_dir, **doc), spec

    @classmethod
    def failure(cls, p: FailoverParams, transport: str, seed: int, error: str) -> RunRecord:
        """The record of a run that failed with ``error``."""
        out_dir = p.run_dir / f"{transport}_{seed}"
        return cls(transport, seed, 0.0, -1, 0.0, 0.0, 0.0, 0.0, out_dir, load_1m(), [], error)


def run_transport(up: BringUp, p: FailoverParams, transport: str, seed: int = 0) -> RunRecord:
    """One stream with a plane failure in the middle; the plane is restored afterwards."""
    topo = str(up.net.topology_path.resolve())
    out_dir = p.run_dir / f"{transport}_{seed}"
    fail_at = p.fail_at_s + p.fail_offset_s(seed)
    planes = up.net.fabric.spec.planes
    rate = p.load_fraction * planes * p.fabric.goodput_capacity_mbps
    receiver = RunSpec(
        topo,
        p.dst,
        transport,
        expect=1,
        msg_bytes=p.msg_bytes,
        depth=p.depth,
        duration_s=p.duration_s,
        sample_ms=p.sample_ms,
        out_dir=str(out_dir),
        plain_cc=p.plain_cc,
        rate_mbps=rate,
        seed=seed,
    )
    specs = [receiver, dataclasses.replace(receiver, host=p.src, expect=0, send_to=(p.dst,))]
    with (p.run_dir / f"{transport}_{seed}.log").open("wb") as log:
        procs = start_hosts(up, specs, log)
        try:
            at = start_all(procs)
            procs[p.src].wait_event("path", p.duration_s + TIMEOUTS.slack_s)
            used: list[int] = []
            for before_s in (REPORT_BEFORE_S, REPORT_BEFORE_S / 4):  # the planes used just now
                time.sleep(max(0.0, at + fail_at - before_s - time.monotonic()))
                procs[p.src].command(cmd="report")
                used = procs[p.src].wait_event("path", TIMEOUTS.report_s)["planes"]
            plane = p.mrc_plane if transport == "mrc" or len(used) != 1 else int(used[0])
            time.sleep(max(0.0, at + fail_at - time.monotonic()))
            ctl = up.controller
            assert isinstance(ctl, FabricController)  # own_fabric's controller
            t0 = time.monotonic()
            ctl.run_command(["fail", "plane", str(plane)])
            t1 = time.monotonic()
            sent, applied = ctl.last_sync.first_write_sent, ctl.last_sync.first_write_done
            load = load_1m()
            procs[p.src].wait_event("sent", p.duration_s + TIMEOUTS.slack_s)
        finally:
            done = stop_all(procs)
            if up.controller is not None:
                up.controller.run_command(["restore", "all"])
    errors = [f"{h}: {e}" for h, d in done.items() for e in d.get("errors", [])]
    rec = RunRecord(
        transport,
        seed,
        fail_at - p.fail_at_s,
        plane,
        t0,
        t1,
        t0 if sent is None else sent,
        t1 if applied is None else applied,
        out_dir,
        load,
        errors,
    )
    rec.save(up.net.fabric.spec)
    return rec


# -- analysis ---------------------------------------------------------------------------------


@dataclass
class EvSeries:
    plane: int
    times: list[float] = field(default_factory=list)
    acked: list[int] = field(default_factory=list)
    states: list[str] = field(default_factory=list)

    def at(self, t: float) -> tuple[int, str]:
        """Cumulative bytes acknowledged and the state at time ``t`` (last sample before)."""
        i = bisect.bisect_right(self.times, t) - 1
        return (0, "good") if i < 0 else (self.acked[i], self.states[i])


def _series(samples: list[dict[str, str]]) -> dict[int, EvSeries]:
    evs: dict[int, EvSeries] = {}
    for r in samples:
        s = evs.setdefault(int(r["ev"]), EvSeries(int(r["plane"])))
        s.times.append(float(r["t_s"]))
        s.acked.append(int(r["bytes_acked"]))
        s.states.append(r["state"])
    return evs


def _mbps(nbytes: float, seconds: float) -> float:
    return nbytes * 8 / seconds / 1e6 if seconds > 0 else 0.0


def analyse(
    rec: RunRecord, p: FailoverParams, fabric: Fabric
) -> tuple[list[tuple[object, ...]], tuple[object, ...]]:
    """The time series rows and the seeds CSV row of one run."""
    d = rec.out_dir
    evs = _series(read_csv(d / f"{p.src}_samples.csv"))
    recv = read_csv(d / f"{p.dst}_recv.csv")
    sent = read_csv(d / f"{p.src}_sent.csv")
    events = read_csv(d / f"{p.src}_events.csv")
    t0 = rec.fail_t0
    spines = {i: path.spine for i, path in enumerate(fabric.paths(p.src, p.dst))}

    delivered_at = sorted((float(r["recv_t_s"]), int(r["msg_bytes"])) for r in recv)
    recv_times = [t for t, _n in delivered_at]
    recv_cum = list(itertools.accumulate(n for _t, n in delivered_at))

    def delivered(t: float) -> int:
        """Message bytes the receiving application had by ``t``."""
        i = bisect.bisect_right(recv_times, t)
        return recv_cum[i - 1] if i else 0

    end = max(s.times[-1] for s in evs.values())
    link = fabric.spec.link_mbps
    bin_s = p.bin_s(link)
    win_s = p.window_s(link)
    grid = [t0 - 1.0 + i * bin_s for i in range(int((end - (t0 - 1.0)) / bin_s) + 1)]
    rows: list[tuple[object, ...]] = []
    window: list[tuple[float, float]] = []  # (t, goodput over the window centred on t)
    for t in grid:
        tot = _mbps(delivered(t) - delivered(t - bin_s), bin_s)
        win = _mbps(delivered(t + win_s / 2) - delivered(t - win_s / 2), win_s)
        window.append((t, win))
        n_delivered = bisect.bisect_right(recv_times, t)
        for ev, s in sorted(evs.items()):
            cum, state = s.at(t)
            ev_gp = _mbps(cum - s.at(t - bin_s)[0], bin_s)
            rows.append(
                (
                    rec.transport,
                    rec.seed,
                    rec.failed_plane,
                    round((t - t0) * 1e3, 1),
                    ev,
                    s.plane,
                    spines.get(ev, -1) if rec.transport == "mrc" else -1,
                    state,
                    round(ev_gp, 3),
                    round(tot, 3),
                    round(win, 3),
                    n_delivered,
                )
            )
    pre = _mbps(delivered(t0) - delivered(t0 - 1.0), 1.0)
    post_from, post_to = t0 + 0.5, min(end, t0 + 1.5)
    post = _mbps(delivered(post_to) - delivered(post_from), post_to - post_from)
    planes = fabric.spec.planes
    threshold = pre * (planes - 1) / planes
    dip_horizon = rec.fail_sent - t0 + p.dip_within_ms / 1e3
    recovery = _recovery_s(window, t0, threshold, p.hold_ms / 1e3, dip_horizon)
    settled = _settled_s(window, rec.fail_sent, threshold, p.dip_within_ms / 1e3)
    t1 = rec.fail_t1
    ack_times = _progress_times(evs)
    stall = _longest_gap([t for t in ack_times if t0 - 0.1 <= t <= t0 + 1.0])
    gap = _longest_gap([t for t in recv_times if t0 - 0.1 <= t <= t0 + 1.0])
    bad = [
        float(e["t_s"])
        for e in events
        if e["kind"] == "ev_state"
        and "->assumed_bad" in e["detail"]
        and float(e["t_s"]) >= t0
        and evs.get(int(e["ev"]), EvSeries(-1)).plane == rec.failed_plane
    ]
    rtos = [float(e["t_s"]) for e in events if e["kind"] == "rto" and float(e["t_s"]) >= t0]
    seqs = {(r["flow"], int(r["seq"])) for r in recv}
    lost = sum(1 for r in sent if (r["flow"], int(r["seq"])) not in seqs)

    def ms(seconds: float | None) -> float | str:
        return "" if seconds is None else round(seconds * 1e3, 1)

    def recovery_after(t: float) -> float | None:
        return None if recovery is None else max(0.0, recovery - (t - t0))

    summary = (
        rec.transport,
        rec.seed,
        fabric.spec.link_mbps,
        rec.failed_plane,
        ms(rec.fail_offset_s),
        ms(t1 - t0),
        ms(rec.fail_sent - t0),
        ms(rec.fail_applied - t0),
        p.msg_bytes,
        round(p.load_fraction * planes * p.fabric.goodput_capacity_mbps, 3),
        round(pre, 3),
        round(post, 3),
        round(threshold, 3),
        ms(recovery),
        ms(recovery_after(rec.fail_sent)),
        ms(recovery_after(rec.fail_applied)),
        ms(recovery_after(t1)),
        ms(settled),
        ms(stall),
        ms(gap),
        ms(bad[0] - t0 if bad else None),
        ms(rtos[0] - t0 if rtos else None),
        len(rtos),
        len(sent),
        len(recv),
        lost,
        sum(1 for r in recv if r["in_order"] != "1"),
        rec.load,
        "; ".join(rec.errors),
    )
    return rows, summary


def failed_row(transport: str, seed: int, link_mbps: float, error: str) -> tuple[object, ...]:
    """The seeds CSV row of a seed that failed: its keys, blank figures and the error."""
    keys = {"transport": transport, "seed": seed, "link_mbps": link_mbps, "error": error}
    return tuple(keys.get(c, "") for c in SEEDS_HEADER)


def summarize_seeds(rows: Sequence[dict[str, str]]) -> list[tuple[object, ...]]:
    """The summary CSV's rows from the seeds CSV's: per transport and figure, the figure's
    mean, sd and 95 % interval over the seeds that have it."""
    return [
        tuple(r[c] for c in SUMMARY_HEADER)
        for r in summary_rows(rows, ("transport",), SUMMARY_FIGURES, ndigits=4)
    ]


def _progress_times(evs: dict[int, EvSeries]) -> list[float]:
    """Sample times at which the connection's acknowledged bytes grew."""
    points = sorted((t, ev) for ev, s in evs.items() for t in s.times)
    out, last = [], -1
    for t, _ev in points:
        tot = sum(s.at(t)[0] for s in evs.values())
        if tot > last:
            if last >= 0:
                out.append(t)
            last = tot
    return out


def _longest_gap(times: Sequence[float]) -> float:
    return max((b - a for a, b in zip(times, times[1:])), default=0.0)


def _settled_s(
    window: list[tuple[float, float]], t0: float, threshold: float, horizon_s: float
) -> float | None:
    """Seconds from ``t0`` until the windowed goodput is at or above ``threshold`` for good:
    the first window at or above it after the last window below it that starts within
    ``horizon_s`` (0: none was below; None: the series ends first). Stricter than
    :func:`_recovery_s`: a later stall, or a dip from congestion on the remaining planes,
    counts too, and a dip that lasts past the horizon counts to its end."""
    below = [t for t, g in window if t0 <= t <= t0 + horizon_s and g < threshold]
    if not below:
        return 0.0
    after = [t for t, g in window if t > below[-1] and g >= threshold]
    return after[0] - t0 if after else None


def _recovery_s(
    window: list[tuple[float, float]],
    t0: float,
    threshold: float,
    hold_s: float,
    horizon_s: float = 0.2,
) -> float | None:
    """Seconds from ``t0`` until the windowed goodput is back at or above ``threshold``.

    ``window`` holds (time, windowed goodput). 0 when it does not fall below the threshold
    within ``horizon_s``; else the first time after it fell below at which it is back above
    and its mean over the next ``hold_s`` is too (a single noisy window does not count);
    None when that never happens.
    """
    after = [(t, g) for t, g in window if t >= t0]
    dip = next((i for i, (t, g) in enumerate(after) if g < threshold and t <= t0 + horizon_s), None)
    if dip is None:
        return 0.0
    for i in range(dip + 1, len(after)):
        t, g = after[i]
        held = [gg for tt, gg in after[i:] if tt <= t + hold_s]
        if g >= threshold and after[-1][0] >= t + hold_s and sum(held) / len(held) >= threshold:
            return t - t0
    return None


# -- plot (reads only the CSVs) -----------------------------------------------------------------

COLORS = {"mrc": "tab:blue", "single_path": "tab:orange"}
BAR_TIMES = (
    ("recovery_after_sent_ms", "recovery:\nwrite sent ->\nback >= (P-1)/P"),
    ("settled_after_sent_ms", "stays above:\nwrite sent ->\nno window below"),
    ("longest_stall_ms", "longest time\nwithout an ACK"),
    ("longest_delivery_gap_ms", "longest gap\nbetween delivered\nmessages"),
)
BAR_GOODPUT = (
    ("pre_goodput_mbps", "1 s before"),
    ("post_goodput_mbps", "0.5-1.5 s after"),
)


def plot(
    csv_path: str | pathlib.Path,
    seeds_path: str | pathlib.Path,
    summary_path: str | pathlib.Path,
    png: str | pathlib.Path,
    xlim_ms: tuple[float, float] | None = None,
) -> None:
    """The first seed's goodput and EV states per transport (left) and, over the seeds, the
    means and 95 % intervals of the times and goodputs (right), from the three CSVs.
    ``xlim_ms``: -200 to 600 ms at 5 Mbit/s, shrunk with the goodput window at faster links."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seeds = read_csv(seeds_path)
    summary = read_csv(summary_path)
    series = read_csv(csv_path)
    transports = list(dict.fromkeys(r["transport"] for r in seeds))
    nt = max(1, len(transports))
    fig = plt.figure(figsize=(16, 3.2 * nt + 1.8))
    grid = fig.add_gridspec(2 * nt, 2, width_ratios=[2.1, 1], height_ratios=[3, 1] * nt)
    first: Axes | None = None
    for k, tr in enumerate(transports):
        ax = fig.add_subplot(grid[2 * k, 0], sharex=first)
        first = first or ax
        axs = fig.add_subplot(grid[2 * k + 1, 0], sharex=first)
        _plot_series(ax, axs, tr, series, seeds)
        axs.set_xlabel(
            "time from the fail-plane command (ms); EV state: green good, red assumed_bad"
            if k == nt - 1
            else ""
        )
    if first is not None:
        if xlim_ms is None:
            links = _link_rates(seeds)
            d = FailoverParams()
            shrink = d.window_s(links[-1]) / d.window_s(WINDOW_REF_MBPS) if links else 1.0
            xlim_ms = (-200.0 * shrink, 600.0 * shrink)
        first.set_xlim(*xlim_ms)
    _bars(fig.add_subplot(grid[:nt, 1]), transports, summary, seeds, BAR_TIMES)
    ax = fig.axes[-1]
    ax.set_ylabel("ms (mean over seeds, 95 % CI; dots: seeds)")
    ax.set_title(
        "recovery and stays-above count from the first switch write's send;\n"
        f"(P-1)/P of the goodput before, over a {_window_label(seeds)} window centred on each "
        "instant",
        fontsize=9,
    )
    _bars(fig.add_subplot(grid[nt:, 1]), transports, summary, seeds, BAR_GOODPUT)
    ax = fig.axes[-1]
    lost = "; ".join(
        f"{tr} {' '.join(r['messages_lost'] or '-' for r in seeds if r['transport'] == tr)}"
        for tr in transports
    )
    ax.set_ylabel("goodput delivered (Mbit/s)")
    ax.set_title(
        f"goodput delivered to the application (mean over seeds, 95 % CI)\n"
        f"messages lost per seed: {lost}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def _link_rates(seeds: list[dict[str, str]]) -> list[float]:
    """The link rates of the runs in ``seeds``, ascending."""
    return sorted({float(r["link_mbps"]) for r in seeds if r.get("link_mbps")})


def _window_label(seeds: list[dict[str, str]]) -> str:
    """The goodput window of the runs in ``seeds`` (it scales with their link rate)."""
    d = FailoverParams()
    return "/".join(f"{d.window_s(link) * 1e3:g} ms" for link in _link_rates(seeds)) or "?"


def _plot_series(
    ax: Axes, axs: Axes, tr: str, series: list[dict[str, str]], seeds: list[dict[str, str]]
) -> None:
    """One transport's first seed: goodput per plane and the connection's, EV states."""
    mine_seeds = sorted({int(r["seed"]) for r in series if r["transport"] == tr})
    if not mine_seeds:
        ax.set_title(f"{tr}: no seed completed", fontsize=9)
        return
    seed = str(mine_seeds[0])
    mine = [r for r in series if r["transport"] == tr and r["seed"] == seed]
    first_ev = mine[0]["ev"]
    ts = [float(r["t_ms"]) for r in mine if r["ev"] == first_ev]
    ax.plot(
        ts,
        [float(r["goodput_window_mbps"]) for r in mine if r["ev"] == first_ev],
        color="black",
        label=f"connection ({_window_label(seeds)} window, centred)",
    )
    per_plane: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    for r in mine:
        per_plane[r["plane"]][float(r["t_ms"])] += float(r["ev_goodput_mbps"])
    for plane, values in sorted(per_plane.items()):
        xs = sorted(values)
        ax.plot(xs, [values[x] for x in xs], lw=0.8, alpha=0.7, label=f"plane {plane} (ACKed, bin)")
    s = next((r for r in seeds if r["transport"] == tr and r["seed"] == seed), None)
    if s:
        ax.axhline(
            float(s["threshold_mbps"]), ls="--", color="tab:purple", label="(P-1)/P of before"
        )
        rec = (
            f"back above it {s['recovery_after_applied_ms']}-{s['recovery_after_sent_ms']} ms "
            f"after the failure"
            if s["recovery_ms"] != ""
            else "no recovery"
        )
        ax.set_title(
            f"{tr}, seed {seed}: plane {s['failed_plane']} fails in the shaded interval; {rec}; "
            f"longest time without an ACK {s['longest_stall_ms']} ms, {s['messages_lost']} "
            f"messages lost",
            fontsize=9,
        )
        ax.axvspan(float(s["fail_sent_ms"]), float(s["fail_applied_ms"]), color="0.85")
    ax.axvline(0, color="0.4", lw=1)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("goodput (Mbit/s)")
    ax.legend(loc="upper right", fontsize=7)
    colors = {"good": "tab:green", "assumed_bad": "tab:red", "denied": "black", "unknown": "0.7"}
    evs = sorted({r["ev"] for r in mine}, key=int)
    for j, ev in enumerate(evs):
        pts = [(float(r["t_ms"]), r["ev_state"]) for r in mine if r["ev"] == ev]
        for (t, st), (t2, _) in zip(pts, pts[1:]):
            axs.barh(j, t2 - t, left=t, color=colors.get(st, "0.5"), height=0.8)
    plane_of = {r["ev"]: r["plane"] for r in mine}
    axs.set_yticks(range(len(evs)), [f"EV{e} p{plane_of[e]}" for e in evs], fontsize=7)
    axs.axvline(0, color="0.4", lw=1)


def _bars(
    ax: Axes,
    transports: Sequence[str],
    summary: list[dict[str, str]],
    seeds: list[dict[str, str]],
    figures: Sequence[tuple[str, str]],
) -> None:
    """Grouped bars from zero: per figure, each transport's mean over the seeds with its 95 %
    interval as the error bar, and the seeds' values as dots."""
    stats = {(r["transport"], r["figure"]): Summary.from_row(r) for r in summary}
    width = 0.8 / max(1, len(transports))
    for k, tr in enumerate(transports):
        xs = [i + (k - (len(transports) - 1) / 2) * width for i in range(len(figures))]
        ss = [stats.get((tr, f), Summary.from_row({})) for f, _label in figures]
        ns = sorted({s.n for s in ss})
        ax.bar(
            xs,
            [0.0 if math.isnan(s.mean) else s.mean for s in ss],
            width,
            yerr=[[s.error_bar()[0] for s in ss], [s.error_bar()[1] for s in ss]],
            capsize=3,
            color=COLORS.get(tr, "0.5"),
            alpha=0.8,
            label=f"{tr} (n={'/'.join(map(str, ns))} seeds)",
        )
        for x, (f, _label) in zip(xs, figures):
            vals = [to_float(r.get(f)) for r in seeds if r["transport"] == tr]
            vals = [v for v in vals if not math.isnan(v)]
            ax.scatter([x] * len(vals), vals, s=10, color="black", zorder=3)
    ax.set_xticks(range(len(figures)), [label for _f, label in figures], fontsize=8)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)


# -- command line -------------------------------------------------------------------------------


def report(p: FailoverParams) -> int:
    """The summary CSV, the console table and the plot, from the series and seeds CSVs."""
    seeds = read_csv(p.seeds_out)
    write_csv(p.summary_out, SUMMARY_HEADER, summarize_seeds(seeds))
    n = len({r["seed"] for r in seeds})
    print_seed_table(
        f"plane failure, {n} seeds: mean ± 95 % CI of the mean (n seeds with the figure); "
        f"per seed ('-': none)",
        seeds,
        lambda r: str(r["transport"]),
        FIGURES,
        BASELINES,
    )
    failed = [r for r in seeds if r["error"]]
    for r in failed:
        print(f"error: {r['transport']} seed {r['seed']}: {r['error']}", file=sys.stderr)
    plot(p.out, p.seeds_out, p.summary_out, p.png)
    print(f"wrote {p.out}, {p.seeds_out}, {p.summary_out}, {p.png}")
    return 1 if failed else 0


def _analysed(
    rec: RunRecord, p: FailoverParams, fabric: Fabric
) -> tuple[list[tuple[object, ...]], tuple[object, ...]]:
    """The series rows and the seeds CSV row of one run, or none and a failed row (why)."""
    what = f"{rec.transport} seed {rec.seed}"
    done, err = (
        (None, rec.failed) if rec.failed else attempt(f"{what}: analysis", analyse, rec, p, fabric)
    )
    if done is None:
        return [], failed_row(rec.transport, rec.seed, fabric.spec.link_mbps, err)
    print("  ".join(f"{k}={v}" for k, v in zip(SEEDS_HEADER, done[1])), flush=True)
    return done


def run(p: FailoverParams) -> int:
    """Every seed of every transport on one fabric; a seed that fails is recorded in the
    seeds CSV (``error``, blank figures) and the others go on."""
    p.run_dir.mkdir(parents=True, exist_ok=True)
    for old in p.run_dir.glob(f"*/{RUN_FILE}"):  # a previous run's: --reanalyse reads all
        shutil.rmtree(old.parent)
    series: list[tuple[object, ...]] = []
    seed_rows: list[tuple[object, ...]] = []
    with own_fabric(p.fabric) as up:
        assert up.controller is not None
        for argv in (["fail", "plane", "0"], ["restore", "all"]):  # warm the controller up
            up.controller.run_command(argv)
        fabric = up.net.fabric
        for seed, transport in ((s, t) for s in range(p.seeds) for t in p.transports):
            rec, err = attempt(f"{transport} seed {seed}", run_transport, up, p, transport, seed)
            if rec is None:
                rec = RunRecord.failure(p, transport, seed, err)
                rec.save(fabric.spec)
            rows, row = _analysed(rec, p, fabric)
            series += rows
            seed_rows.append(row)
    write_csv(p.out, SERIES_HEADER, series)
    write_csv(p.seeds_out, SEEDS_HEADER, seed_rows)
    return report(p)


def reanalyse(p: FailoverParams) -> int:
    """The CSVs, the table and the plot again from the runs under ``run_dir`` (no fabric)."""
    recs = [RunRecord.read(f.parent) for f in p.run_dir.glob(f"*/{RUN_FILE}")]
    if not recs:
        print(f"exp-failover: no runs under {p.run_dir}", file=sys.stderr)
        return 2
    order = {t: i for i, t in enumerate(TRANSPORTS)}
    recs.sort(key=lambda r: (r[0].seed, order.get(r[0].transport, 9), r[0].transport))
    fabric = build_fabric(recs[0][1])
    series: list[tuple[object, ...]] = []
    seed_rows: list[tuple[object, ...]] = []
    for rec, _spec in recs:
        rows, row = _analysed(rec, p, fabric)
        series += rows
        seed_rows.append(row)
    write_csv(p.out, SERIES_HEADER, series)
    write_csv(p.seeds_out, SEEDS_HEADER, seed_rows)
    return report(p)


def main(argv: Sequence[str] | None = None) -> int:
    d = FailoverParams()
    ap = argparse.ArgumentParser(
        prog="python -m experiments.failover", description=__doc__.splitlines()[0]
    )
    add_fabric_args(ap, d.fabric)
    ap.add_argument("--out", default=d.out)
    ap.add_argument("--msg-bytes", type=int, default=d.msg_bytes)
    ap.add_argument(
        "--load-fraction",
        type=float,
        default=d.load_fraction,
        help="offered load, fraction of the planes' goodput capacity into the receiver",
    )
    ap.add_argument("--duration-s", type=float, default=d.duration_s)
    ap.add_argument("--fail-at-s", type=float, default=d.fail_at_s)
    ap.add_argument(
        "--fail-jitter-ms",
        type=float,
        default=d.fail_jitter_ms,
        help="each seed fails the plane a uniform draw from [0, this) after --fail-at-s",
    )
    ap.add_argument("--transports", default=",".join(d.transports))
    ap.add_argument(
        "--seeds",
        "--runs",
        dest="seeds",
        type=int,
        default=d.seeds,
        help="seeds 0..N-1, one run per transport each (--runs: the old name)",
    )
    add_run_mode_args(ap, "the series and seeds CSVs")
    a = ap.parse_args(argv)
    if a.seeds < 1:
        ap.error("--seeds must be at least 1")
    p = FailoverParams(
        fabric_params(a),
        msg_bytes=a.msg_bytes,
        load_fraction=a.load_fraction,
        duration_s=a.duration_s,
        fail_at_s=a.fail_at_s,
        fail_jitter_ms=a.fail_jitter_ms,
        transports=tuple(t for t in a.transports.split(",") if t),
        seeds=a.seeds,
        out=a.out,
        plain_cc=a.plain_cc,
    )
    return run_mode("exp-failover", a, lambda: run(p), lambda: report(p), lambda: reanalyse(p))


if __name__ == "__main__":
    raise SystemExit(main())
