"""What the MRC fabric experiments share: their own fabric, host processes, reading their CSVs.

``make exp-failover`` (:mod:`experiments.failover`) and ``make exp-collisions``
(:mod:`experiments.collisions`) each bring a fabric up with :func:`own_fabric`
(:func:`topologies.emulation.bringup.own_fabric`: refused while another fabric runs on this
machine, interface names are fixed), start one :class:`experiments.hosts.HostProcess` per host
taking part (:func:`start_hosts`), release them at one instant of the shared monotonic clock
(:func:`start_all`), drive the controller, stop them and read back what they wrote
(:func:`read_csv`). The fabric's state file is the usual
``<results>/fabric/state.json``, so ``make fabric-up`` refuses to start meanwhile.

Both run every variant once per seed (``--seeds N``): :func:`seed_rng` gives the driver's
random choices of a seed, and the host processes get ``--seed`` (their connection ids). A
seed that fails is recorded (:func:`attempt`) and the others go on; :func:`print_seed_table`
prints each figure's mean ± 95 % CI over the seeds beside the per-seed values. The waits for
the host processes (:class:`HostTimeouts`) are far above any time seen, so that a loaded
machine makes a run slower, not a failure.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import math
import os
import pathlib
import random
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, ClassVar, ParamSpec, TypeVar

__all__ = [
    "ExperimentOutputs",
    "FabricBusy",
    "FabricParams",
    "add_run_mode_args",
    "fabric_params",
    "run_mode",
    "own_fabric",
    "read_csv",
    "start_all",
    "start_hosts",
    "stop_all",
    "write_csv",
    "load_1m",
    "PAYLOAD_EFFICIENCY",
    "HostTimeouts",
    "TIMEOUTS",
    "SeedFigure",
    "attempt",
    "print_seed_table",
    "seed_rng",
]

from experiments.hosts import HostProcess
from experiments.stats import format_values, reduction_pct, slowdown_pct, summarize, to_float
from host.mrc.config import FABRIC_PAYLOAD_BYTES
from host.stream_agent import RunSpec, host_args
from host.wire import DATA_HEADER_BYTES
from topologies.emulation import bringup
from topologies.emulation.bringup import BringUp, FabricBusy
from topologies.emulation.mnfabric import QUEUE_BURST_MAX_US
from topologies.model import FabricSpec

TM_EXTRA_BYTES = 64
"""tf-switch charges a queued packet its bytes after the parsed headers plus 64 (the
Ethernet, IPv6 and UDP headers of a DATA packet are 62), see ``switch/device/device.py``."""
DATA_WIRE_BYTES = FABRIC_PAYLOAD_BYTES + DATA_HEADER_BYTES + TM_EXTRA_BYTES
PAYLOAD_EFFICIENCY = FABRIC_PAYLOAD_BYTES / DATA_WIRE_BYTES
"""Message bytes per byte of link capacity when a link carries only full DATA packets."""
START_DELAY_S = 0.3

_T = TypeVar("_T")
_P = ParamSpec("_P")


@dataclass(frozen=True)
class HostTimeouts:
    """How long the driver waits for its host processes before it calls a run failed.

    On an idle machine a host process is ready in about 1 s, answers a ``report`` within
    milliseconds, sends its last ``sent`` event within a second of the run's end and stops
    (writing its CSVs) in under 5 s. These limits are far above that: a machine busy with other
    work (a CPU hog on every core) makes a run slower, and must not make it fail.
    """

    ready_s: float = 300.0
    """From starting the host processes until each has bound its sockets (``ready``)."""
    report_s: float = 60.0
    """From a ``report`` command until its ``path`` event."""
    slack_s: float = 300.0
    """Beyond the run's duration, for its ``path`` and ``sent`` events."""
    stop_s: float = 300.0
    """From ``stop`` until the process's ``done`` event (it writes its CSVs first)."""


TIMEOUTS = HostTimeouts()


class ExperimentOutputs:
    """Where a fabric experiment writes, mixed into its parameter dataclass: ``out`` (the main
    CSV), ``<stem>_summary.csv`` and ``<stem>.png`` beside it, and the host processes' files
    under ``<results>/<run_subdir>``."""

    run_subdir: ClassVar[str]
    fabric: FabricParams
    out: str

    @property
    def run_dir(self) -> pathlib.Path:
        return pathlib.Path(self.fabric.results_dir) / self.run_subdir

    @property
    def summary_out(self) -> pathlib.Path:
        return pathlib.Path(self.out).with_name(pathlib.Path(self.out).stem + "_summary.csv")

    @property
    def png(self) -> pathlib.Path:
        return pathlib.Path(self.out).with_suffix(".png")


@dataclass(frozen=True)
class FabricParams:
    """The fabric an experiment brings up."""

    planes: int = 2
    leaves: int = 2
    spines: int = 2
    hosts_per_leaf: int = 2
    link_mbps: float = 5.0
    """Every switch port's queue drain rate: the fabric's link capacity."""
    results_dir: str = "results"
    wait_s: float = 0.0
    """How long to wait for another fabric on this machine to go away before giving up."""
    ecn_packets: int | None = None
    """Every port's CE-marking threshold (the controller's ``ecn K``); None: its default."""
    trim_packets: int | None = None
    """Every port's trimming threshold (the controller's ``trim K``); None: no trimming."""
    queue_burst_us: float | None = None
    """How far ahead of its exact schedule a port may send (the switches' ``--queue-burst-us``:
    a token bucket this many microseconds of the link rate deep, the long-run rate unchanged);
    None: the switches' default (200 us)."""

    def spec(self) -> FabricSpec:
        return FabricSpec(
            self.planes, self.leaves, self.spines, self.hosts_per_leaf, self.link_mbps
        )

    @property
    def goodput_capacity_mbps(self) -> float:
        """Message bytes one link carries per second when full of DATA packets."""
        return self.link_mbps * PAYLOAD_EFFICIENCY


def _burst_us(text: str) -> float:
    """``--queue-burst-us``: microseconds, 0 .. what ``tf-switch`` accepts."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value <= QUEUE_BURST_MAX_US:
        raise argparse.ArgumentTypeError(f"must be 0..{QUEUE_BURST_MAX_US} (us)")
    return value


def add_fabric_args(ap: argparse.ArgumentParser, d: FabricParams) -> None:
    """The command-line options every fabric experiment shares (defaults from ``d``)."""
    ap.add_argument("--link-mbps", type=float, default=d.link_mbps)
    ap.add_argument("--results", default=d.results_dir)
    ap.add_argument(
        "--ecn-packets",
        type=int,
        default=d.ecn_packets,
        help="CE-mark threshold of every switch port (the controller's default: 20)",
    )
    ap.add_argument(
        "--trim-packets",
        type=int,
        default=d.trim_packets,
        help="trim UDP packets that find this many packets queued (the "
        "controller's 'trim K'; MRC resends them on a NACK); default off",
    )
    ap.add_argument(
        "--queue-burst-us",
        type=_burst_us,
        default=d.queue_burst_us,
        help="how far ahead of its exact schedule a switch port may send (a token bucket "
        "this deep; default: "
        + ("the switches' own" if d.queue_burst_us is None else f"{d.queue_burst_us:g}")
        + ")",
    )
    ap.add_argument(
        "--wait-s",
        type=float,
        default=0.0,
        help="wait this long for another fabric on the machine to stop",
    )


def add_run_mode_args(ap: argparse.ArgumentParser, sources: str) -> None:
    """``--plain-cc`` and the two ways to redo a run's outputs without a fabric (``--plot-only``
    from ``sources``, the CSVs the run wrote; ``--reanalyse`` from the host processes' files)."""
    ap.add_argument(
        "--plain-cc",
        action="store_true",
        help="fabric_config() as it is (2 ms target delay, 20 ms quick adapt)",
    )
    ap.add_argument(
        "--plot-only",
        action="store_true",
        help=f"the summary CSV, the table and the PNG again from {sources}",
    )
    ap.add_argument(
        "--reanalyse",
        action="store_true",
        help="rebuild the CSVs, the table and the PNG from the last run's host outputs",
    )


def fabric_params(a: argparse.Namespace) -> FabricParams:
    """The :class:`FabricParams` of :func:`add_fabric_args`' options."""
    return FabricParams(
        link_mbps=a.link_mbps,
        results_dir=a.results,
        wait_s=a.wait_s,
        ecn_packets=a.ecn_packets,
        trim_packets=a.trim_packets,
        queue_burst_us=a.queue_burst_us,
    )


def run_mode(
    prog: str,
    a: argparse.Namespace,
    run: Callable[[], int],
    report: Callable[[], int],
    reanalyse: Callable[[], int],
) -> int:
    """What :func:`add_run_mode_args`' options ask for: the outputs again, or a run (exit 2 with
    one line naming the other fabric when one is running)."""
    if a.plot_only:
        return report()
    if a.reanalyse:
        return reanalyse()
    try:
        return run()
    except FabricBusy as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2


@contextlib.contextmanager
def own_fabric(params: FabricParams) -> Iterator[BringUp]:
    """:func:`topologies.emulation.bringup.own_fabric` for ``params``, with its ECN and trimming
    thresholds set."""
    with bringup.own_fabric(
        params.spec(),
        params.results_dir,
        wait_s=params.wait_s,
        queue_burst_us=params.queue_burst_us,
    ) as up:
        if params.ecn_packets is not None and up.controller is not None:
            up.controller.run_command(["ecn", str(params.ecn_packets)])
        if params.trim_packets is not None and up.controller is not None:
            up.controller.run_command(["trim", str(params.trim_packets)])
        yield up


def start_hosts(
    up: BringUp,
    specs: Sequence[RunSpec],
    log: IO[bytes] | None = None,
    ready_timeout_s: float = TIMEOUTS.ready_s,
) -> dict[str, HostProcess]:
    """One host process per spec, each in its host's namespace, all ready (sockets bound)."""
    pids = up.net.host_pids()
    procs: dict[str, HostProcess] = {}
    try:
        for spec in specs:
            procs[spec.host] = HostProcess(pids[spec.host], host_args(spec), log)
        for p in procs.values():
            p.wait_event("ready", ready_timeout_s)
    except BaseException:
        for p in procs.values():
            p.proc.kill()
            p.close()
        raise
    return procs


def start_all(
    procs: dict[str, HostProcess],
    delay_s: float = START_DELAY_S,
    offsets_s: Mapping[str, float] | None = None,
) -> float:
    """Tell every process to start at one instant ``delay_s`` from now, each host later by its
    ``offsets_s`` (seconds; none: 0); returns that instant."""
    at = time.monotonic() + delay_s
    for name, p in procs.items():
        p.command(cmd="start", at=at + (offsets_s or {}).get(name, 0.0))
    return at


def stop_all(
    procs: dict[str, HostProcess], timeout_s: float = TIMEOUTS.stop_s
) -> dict[str, dict[str, Any]]:
    """Stop every process (receivers last); their ``done`` events by host."""
    done: dict[str, dict[str, Any]] = {}
    for name, p in procs.items():
        ev = p.stop(timeout_s)
        done[name] = ev or {"event": "done", "host": name, "errors": ["ended without a report"]}
    return done


def read_csv(path: str | pathlib.Path) -> list[dict[str, str]]:
    with pathlib.Path(path).open(newline="") as f:
        return list(csv.DictReader(f))


def write_csv(
    path: str | pathlib.Path, header: Sequence[str], rows: Sequence[Sequence[object]]
) -> None:
    p = pathlib.Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def load_1m() -> float:
    return round(os.getloadavg()[0], 2)


# -- seeds --------------------------------------------------------------------------------------


def seed_rng(experiment: str, seed: int) -> random.Random:
    """The driver's random choices for one seed of ``experiment`` (the same for every variant
    of that seed, so that variants are compared under the same draw)."""
    return random.Random(f"{experiment}:{seed}")


def attempt(
    what: str, fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs
) -> tuple[_T | None, str]:
    """``fn(*args, **kwargs)`` and ``""``, or None and its error when it fails: one seed's
    failure is recorded and the experiment goes on with the others (an interrupt still stops
    it)."""
    try:
        return fn(*args, **kwargs), ""
    except Exception as e:  # noqa: BLE001 - any failure of one seed is recorded, not fatal
        err = f"{type(e).__name__}: {e}"
        print(f"{what}: FAILED: {err}", flush=True)
        return None, err


@dataclass(frozen=True)
class SeedFigure:
    """A figure of the per-seed rows that the console table summarises."""

    column: str
    """Its column in the per-seed CSV (unit-suffixed)."""
    label: str
    """What it is, with its unit and where its time starts and ends."""
    fmt: str = ".1f"
    lower_is_better: bool = True
    """Which way the printed ratios of the means to the baseline's are written."""


def print_seed_table(
    title: str,
    rows: Sequence[Mapping[str, object]],
    variant: Callable[[Mapping[str, object]], str],
    figures: Sequence[SeedFigure],
    baselines: Mapping[str, str] | None = None,
) -> None:
    """Per figure and variant: mean ± 95 % CI (n seeds), then the per-seed values (``-``: the
    figure does not exist for that seed, e.g. a failed seed or no recovery). ``baselines``
    maps a variant to the one it is compared with: the ratio of their means is printed in
    both conventions of :mod:`experiments.stats`."""
    variants = list(dict.fromkeys(variant(r) for r in rows))
    width = max((len(v) for v in variants), default=0)
    print(title)
    for fig in figures:
        print(f"  {fig.label}")
        means: dict[str, float] = {}
        for v in variants:
            vals = [to_float(r.get(fig.column)) for r in rows if variant(r) == v]
            s = summarize(vals)
            means[v] = s.mean
            print(
                f"    {v:<{width}}  {s.format(fig.fmt):<34}  seeds: {format_values(vals, fig.fmt)}"
            )
        for v, baseline in (baselines or {}).items():
            m, b = means.get(v, math.nan), means.get(baseline, math.nan)
            if not (m > 0 and b > 0):
                continue
            if fig.lower_is_better:  # both conventions of experiments.stats
                ratio = (
                    f"1 - a/b = {reduction_pct(b, m):.1f} % (a lower), "
                    f"b/a - 1 = {slowdown_pct(b, m):.1f} % (b higher)"
                )
            else:
                ratio = (
                    f"a/b - 1 = {slowdown_pct(m, b):.1f} % (a higher), "
                    f"1 - b/a = {reduction_pct(m, b):.1f} % (b lower)"
                )
            print(f"    a = {v}, b = {baseline} (means): {ratio}")
    print(flush=True)
