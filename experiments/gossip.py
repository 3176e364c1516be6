"""Factored gossip DiLoCo across the fabric (``make exp-gossip``): synchronous data parallel,
DiLoCo, GlobalM1 and GlobalM1LocalM2 at the two link rates of the paper's two regimes.

The Factored Gossip DiLoCo paper (arXiv 2606.22768) reports compute utilization 100 %
(GlobalM1) vs 53 % (DiLoCo) at 200 Mbit/s and 36 % (DiLoCo) vs ≈1 % (data parallel) at
100 Mbit/s: DiLoCo's round communicates 0.89 and 1.78 times as long as it computes. Here
the links of the default fabric (2 planes, 4 hosts, one worker per host) are set to the two
rates that give the same two ratios for this task on this machine:

1. **Link rates.** At a ratio ρ the fabric comes up at a first guess (:attr:`Settings.start_mbps`,
   then the previous ratio's rate × its ratio / ρ); DiLoCo runs :attr:`Settings.probe_rounds`
   rounds on it, and the all-reduce's own time per round (B: the shortest wait of any worker,
   the others also wait for the slowest) over the workers' mean compute per round (C) is the
   ratio measured. Within :attr:`Settings.probe_tolerance` of ρ the rate stays;
   otherwise the fabric comes back up at ``R · (B / C) / ρ`` (the all-reduce's time taken to
   scale with 1 / R) and is probed again. Measured on the fabric itself, so the switches', the
   hosts' and this machine's speed are all in it (the bytes-only rate is printed beside it).
2. **Sweep.** At each rate (on the probed fabric, taken down after) every method trains with
   every seed: the same task, M, H, batches, initial weights and data per seed.
3. **Failure.** At the higher rate DiLoCo and GlobalM1 train once more while the controller
   cuts the last worker's host off (``fail link hN p<k>l<j>`` for both of its links) for
   :attr:`Settings.failure_duration_s`, at a time on the driver's clock
   (:class:`~experiments.faults.TimedFaults`: when the sweep's DiLoCo run of the first seed had
   done :attr:`Settings.failure_at_rounds` rounds), then restores it.

Measures, one definition each (README "Factored gossip DiLoCo"):

* **compute utilization** of a run: Σ compute ÷ Σ wall time over every worker and round but
  the first :attr:`Settings.warmup_rounds` (compute = forward, backward and inner optimizer
  steps; wall = round start to its outer update; evaluations are outside both);
* **wall-clock**: the slowest worker's summed round wall times;
* **final loss**: validation loss (nats) of the workers' average parameters x̄ after the last
  round (for DiLoCo every worker holds x̄; gossip's W1 = J makes every worker x̄ with one
  more Mix1); the mean of the workers' own losses is in its own column;
* **consensus distance**: sqrt((1/M) Σ_i ‖x_i − x̄‖²) after the last round;
* **bytes**: message bytes each worker sends per round (wire headers not counted).

Writes ``gossip.csv`` (one row per method, ratio and seed), ``gossip_rounds.csv`` (per
round), ``gossip_failure.csv`` (per worker and round of the failure runs),
``gossip_summary.csv`` (mean, sd, 95 % CI over seeds) and ``gossip.png``, and prints the
table beside the paper's. ``--network emu`` runs every worker as a thread on the in-process
emulator instead (no root needed; its failure is both planes down, the emulator has no
per-host links). ``--quick`` is a short run of everything (the network test uses it).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import pathlib
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from experiments.agent_pool import LAUNCHES, JobsError
from experiments.cli_common import (
    add_network_option,
    add_output_options,
    add_seed_options,
    choose_network,
    main_csv,
    plot_only,
    print_error,
    run_or_report,
    wrote,
)
from experiments.diloco_jobs import (
    EMU_FAILURES,
    FABRIC_FAILURES,
    AgentPool,
    EmuJobs,
    FailurePlan,
    JobRun,
    Jobs,
)
from experiments.gossip_figures import (
    FAILURE_COLUMNS,
    METHODS,
    ROUND_COLUMNS,
    RUN_COLUMNS,
    Key,
    Outputs,
    failure_figures,
    failure_line,
    failure_rows,
    plot,
    report,
    round_rows,
    run_row,
    write_summary,
)
from experiments.outputs import read_rows, write_csv
from experiments.stats import to_float
from host.train.diloco import metrics
from host.train.diloco.config import (
    Algorithm,
    DilocoConfig,
    GossipConfig,
)
from host.train.diloco.errors import ConfigError
from host.train.diloco.run import PAPER_RATIOS
from host.train.diloco.task import bind
from topologies.model import FabricSpec

CSV_NAME = "gossip.csv"
MIDRUN_WAIT_S = 3600.0
"""How long a bring-up after the experiment's first waits for another fabric to go away."""
FABRIC_HOSTS = FabricSpec().leaves * FabricSpec().hosts_per_leaf
"""Hosts of the default fabric (one worker each)."""


@dataclass(frozen=True)
class Settings:
    """Everything a run of the experiment uses (``--quick``: :data:`QUICK`)."""

    task: str = "chars-transformer-m"
    workers: int = 4
    inner_steps: int = 20
    """H of DiLoCo and the gossip variants."""
    rounds: int = 10
    """T of DiLoCo and the gossip variants."""
    dp_inner_steps: int = 4
    dp_rounds: int = 2
    """Data parallel all-reduces every step, so its utilization does not depend on how steps
    are grouped into rounds: it trains dp_rounds × dp_inner_steps steps (far fewer tokens;
    a DiLoCo-length run would take ~20 minutes at the lower rate)."""
    batch_size: int = 16
    seeds: int = 3
    first_seed: int = 0
    ratios: tuple[float, ...] = PAPER_RATIOS
    methods: tuple[str, ...] = tuple(METHODS)
    start_mbps: float = 2.0
    """The link rate of the first probe (then each probe's measurement sets the next)."""
    probe_rounds: int = 3
    """Rounds a probe measures (after the warm-up)."""
    probe_tolerance: float = 0.15
    """A probe within this fraction of the ratio settles the rate."""
    probe_attempts: int = 2
    """Probes per ratio at most (the last one's rate stays, whatever it measured: compute time
    on a shared machine moves by tens of percent between runs, so more probes chase noise)."""
    warmup_rounds: int = 1
    """Rounds left out of the utilization (connections and caches warming up)."""
    mix1_slack_rounds: float = 0.5
    """After its inner steps a gossip worker waits for a Mix1 still running at most
    (max(0, ρ − 1) + this) × a round's compute: what the bytes need beyond the inner steps at
    ratio ρ, plus slack; later it mixes without it (counted in ``mix1_missing``)."""
    peer_timeout_s: float = 120.0
    """A blocking exchange waits this long for a peer (far above any round: a busy machine
    makes a run slower, never a failure)."""
    failure: str = "host"
    """Failure scenario (:data:`experiments.diloco_jobs.FABRIC_FAILURES`), or "none"."""
    failure_methods: tuple[str, ...] = ("diloco", "GlobalM1")
    failure_rounds: int = 10
    failure_at_rounds: float = 2.5
    """The failure starts this many (expected DiLoCo) rounds into the run."""
    failure_duration_s: float = 4.0
    """Below MRC's dead-peer timeout (10 s): the transport recovers, nothing is lost."""

    def __post_init__(self) -> None:
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown:
            raise ConfigError(f"unknown methods {unknown}; valid: {', '.join(METHODS)}")
        for name in ("seeds", "probe_rounds", "probe_attempts", "failure_rounds"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.ratios or any(r <= 0 for r in self.ratios):
            raise ConfigError(f"ratios must be positive, got {self.ratios}")
        if self.start_mbps <= 0 or self.failure_duration_s <= 0 or self.probe_tolerance <= 0:
            raise ConfigError("start_mbps, probe_tolerance and failure_duration_s must be positive")
        if not 0 <= self.warmup_rounds < min(self.rounds, self.dp_rounds):
            raise ConfigError(
                f"warmup_rounds must leave rounds to measure (rounds {self.rounds}, "
                f"dp_rounds {self.dp_rounds}), got {self.warmup_rounds}"
            )

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.first_seed, self.first_seed + self.seeds))


QUICK = Settings(
    inner_steps=10,
    rounds=4,
    dp_inner_steps=2,
    seeds=1,
    start_mbps=3.0,
    probe_rounds=2,
    probe_attempts=1,
    failure_rounds=6,
    failure_at_rounds=1.5,
    failure_duration_s=2.5,
)
"""``--quick``: every part once, short (the network test runs it)."""


def job_config(
    s: Settings, method: str, seed: int, *, rounds: int | None = None, mix1_timeout_s: float = 5.0
) -> DilocoConfig:
    """The job of one method and seed.

    Raises:
        ConfigError: the combination is invalid (the setting is named).
    """
    m = METHODS[method]
    dp = m.algorithm is Algorithm.DATA_PARALLEL
    gossip = m.gossip or GossipConfig()
    return DilocoConfig(
        algorithm=m.algorithm,
        task=s.task,
        workers=s.workers,
        inner_steps=s.dp_inner_steps if dp else s.inner_steps,
        rounds=rounds or (s.dp_rounds if dp else s.rounds),
        batch_size=s.batch_size,
        seed=seed,
        gossip=replace(gossip, mix1_timeout_s=mix1_timeout_s),
        peer_timeout_s=s.peer_timeout_s,
        setup_timeout_s=s.peer_timeout_s,
    )


def check_plan(s: Settings, network: str) -> list[DilocoConfig]:
    """Every job the experiment will run, built (and so validated) before anything starts.

    Raises:
        ConfigError: an invalid method/M/H/graph combination or failure scenario.
    """
    scenarios = FABRIC_FAILURES if network == "fabric" else EMU_FAILURES
    if s.failure != "none" and s.failure not in scenarios:
        raise ConfigError(
            f"failure scenario '{s.failure}' does not exist on the {network} network; "
            f"valid: {', '.join(scenarios)}, none"
        )
    if network == "fabric" and s.workers > FABRIC_HOSTS:
        raise ConfigError(
            f"{s.workers} workers need {s.workers} hosts; the default fabric has {FABRIC_HOSTS}"
        )
    if s.failure != "none" and any(m not in s.methods for m in s.failure_methods):
        raise ConfigError(f"failure methods {s.failure_methods} must be among {s.methods}")
    jobs = [probe_config(s)]
    jobs += [job_config(s, m, seed) for m in s.methods for seed in s.seed_list]
    if s.failure != "none":
        jobs += [job_config(s, m, s.first_seed, rounds=s.failure_rounds) for m in s.failure_methods]
    return jobs


def mix1_timeout_s(s: Settings, ratio: float, compute_s: float) -> float:
    """How long gossip waits for Mix1 after its inner steps (see :attr:`Settings.mix1_slack_rounds`)."""
    return max(0.1, (max(0.0, ratio - 1.0) + s.mix1_slack_rounds) * compute_s)


# -- calibration: each ratio's link rate, measured on the network itself -----------------------


@dataclass(frozen=True)
class Probe:
    """DiLoCo measured at one link rate: its mean compute and all-reduce time per round."""

    rate_mbps: float
    compute_s: float
    comm_s: float

    @property
    def ratio(self) -> float:
        """The all-reduce's time over the compute's, per round."""
        return self.comm_s / self.compute_s


def probe_from(run: JobRun, warmup_rounds: int) -> Probe:
    """The probe of a DiLoCo run: per round after the warm-up, the all-reduce's time is the
    shortest wait of any worker (the last to finish its inner steps waits for the bytes only;
    the others also wait for it) and the compute the workers' mean; both summed over rounds.

    Raises:
        JobsError: no round past the warm-up, or no compute or no all-reduce time.
    """
    by_round: dict[int, list[Any]] = {}
    for r in run.records:
        if r.round >= warmup_rounds:
            by_round.setdefault(r.round, []).append(r)
    if not by_round:
        raise JobsError(f"probe: no round past the warm-up ({run.failure or 'no records'})")
    compute = statistics.fmean(
        statistics.fmean(r.compute_s for r in recs) for recs in by_round.values()
    )
    comm = statistics.fmean(min(r.blocked_s for r in recs) for recs in by_round.values())
    if compute <= 0 or comm <= 0:
        raise JobsError(f"probe: compute {compute} s, all-reduce {comm} s per round")
    return Probe(run.link_mbps, compute, comm)


def rate_for(probe: Probe, ratio: float) -> float:
    """The link rate at which the probe's all-reduce would take ``ratio`` × its compute (the
    all-reduce's time taken to scale with 1 / rate)."""
    return probe.rate_mbps * probe.ratio / ratio


def bytes_only_rate(cfg: DilocoConfig, compute_s: float, ratio: float, network: str) -> float:
    """The rate the message bytes and packet headers alone would give (for comparison)."""
    overhead = metrics.FABRIC_OVERHEAD_BYTES if network == "fabric" else metrics.EMU_OVERHEAD_BYTES
    diloco = replace(cfg, algorithm=Algorithm.DILOCO)
    sent = metrics.round_bytes(diloco, bind(cfg, 0).parameters)
    wire = metrics.wire_bytes(sent, messages=2 * (cfg.workers - 1), overhead_bytes=overhead)
    return metrics.link_rate_mbps(wire, compute_s, ratio)


@dataclass(frozen=True)
class RateChoice:
    """The link rate of one ratio and the probes that chose it."""

    ratio: float
    probes: tuple[Probe, ...]
    bytes_only_mbps: float

    @property
    def rate_mbps(self) -> float:
        return self.probes[-1].rate_mbps

    def describe(self) -> str:
        steps = " -> ".join(f"{p.rate_mbps:.3f} Mbit/s: {p.ratio:.2f}" for p in self.probes)
        last = self.probes[-1]
        return (
            f"comm/compute {self.ratio:g}: DiLoCo measured {steps} (compute {last.compute_s:.2f} s,"
            f" all-reduce {last.comm_s:.2f} s per round); the bytes alone would need "
            f"{self.bytes_only_mbps:.3f} Mbit/s"
        )


def probe_config(s: Settings) -> DilocoConfig:
    return job_config(s, "diloco", s.first_seed, rounds=s.probe_rounds + s.warmup_rounds)


def failure_time_s(run: JobRun, at_rounds: float) -> float:
    """When (since the job's start) ``run`` had done ``at_rounds`` rounds: the failure lands
    there in every method's failure run."""
    starts: dict[int, float] = {}
    walls: dict[int, float] = {}
    for r in run.records:
        starts[r.round] = min(starts.get(r.round, math.inf), r.start_at_s)
        walls[r.round] = max(walls.get(r.round, 0.0), r.wall_s)
    k = min(int(at_rounds), max(starts))
    return starts[k] + (at_rounds - k) * walls[k]


# -- the experiment -------------------------------------------------------------------------------

OpenJobs = Callable[[float, str], contextlib.AbstractContextManager[Jobs]]
"""(per-plane link rate in Mbit/s, a label) -> jobs on a network at that rate."""


@dataclass
class Outcome:
    """Everything one experiment run measured."""

    network: str
    rates: dict[float, RateChoice]
    runs: dict[Key, JobRun]
    failure_runs: dict[str, JobRun]
    elapsed_s: float = 0.0

    def describe_rates(self) -> str:
        return "\n".join(c.describe() for c in self.rates.values())


def _summary_line(run: JobRun, row: Mapping[str, object]) -> str:
    return (
        f"util {to_float(row['compute_utilization']):5.3f}, "
        f"wall {to_float(row['wall_clock_s']):6.1f} s, loss {to_float(row['final_loss_nats']):.4f}, "
        f"consensus {to_float(row['consensus_rms_l2']):.4f}, "
        f"{row['bytes_per_worker_round']} B/round" + (f"; {run.failure}" if run.failure else "")
    )


def run_experiment(
    s: Settings, network: str, open_jobs: OpenJobs, *, log: Callable[[str], None] = print
) -> Outcome:
    """For each ratio: find its link rate (probes), then every method and seed at it; at the
    first ratio also the failure scenario.

    Raises:
        ConfigError: an invalid combination (before anything starts).
        JobsError: a probe could not run.
    """
    t0 = time.monotonic()
    check_plan(s, network)
    out = Outcome(network, {}, {}, {})
    rate = s.start_mbps
    for ratio in s.ratios:
        probes: list[Probe] = []
        while True:
            attempt = len(probes) + 1
            with open_jobs(rate, f"ratio{ratio:g}-{attempt}") as jobs:
                probe = probe_from(
                    jobs.run(f"probe-r{ratio:g}-{attempt}", probe_config(s)), s.warmup_rounds
                )
                probes.append(probe)
                log(
                    f"  probe {attempt}: DiLoCo's comm/compute {probe.ratio:.2f} at {rate:.3f} Mbit/s"
                )
                close = abs(probe.ratio / ratio - 1) <= s.probe_tolerance
                if close or attempt == s.probe_attempts:
                    cfg = probe_config(s)
                    choice = RateChoice(
                        ratio, tuple(probes), bytes_only_rate(cfg, probe.compute_s, ratio, network)
                    )
                    out.rates[ratio] = choice
                    log(choice.describe())
                    _sweep(s, jobs, ratio, probe, out, log)
                    break
            rate = rate_for(probe, ratio)
        if ratio != s.ratios[-1]:
            nxt = s.ratios[s.ratios.index(ratio) + 1]
            rate = rate_for(probes[-1], nxt)
    out.elapsed_s = time.monotonic() - t0
    return out


def _sweep(
    s: Settings,
    jobs: Jobs,
    ratio: float,
    probe: Probe,
    out: Outcome,
    log: Callable[[str], None],
) -> None:
    """Every method and seed at this rate; at the first ratio, the failure runs too."""
    mix1_timeout = mix1_timeout_s(s, ratio, probe.compute_s)
    log(
        f"ratio {ratio:g}: links at {probe.rate_mbps:.3f} Mbit/s, Mix1 waits <= {mix1_timeout:.2f} s"
    )
    for seed in s.seed_list:
        for method in s.methods:
            cfg = job_config(s, method, seed, mix1_timeout_s=mix1_timeout)
            key = Key(method, ratio, seed)
            name = f"{method}-r{ratio:g}-s{seed}"
            t = time.monotonic()
            try:
                run = jobs.run(name, cfg)
            except JobsError as e:
                log(f"  {name}: FAILED: {e}")
                continue
            out.runs[key] = run
            row = run_row(run, key, s.warmup_rounds)
            log(f"  {name:<28} {time.monotonic() - t:5.1f} s: {_summary_line(run, row)}")
    if s.failure == "none" or ratio != s.ratios[0]:
        return
    timing = out.runs.get(Key("diloco", ratio, s.first_seed))
    if timing is None:
        log("  failure runs skipped: no DiLoCo run to time them by")
        return
    at_s = failure_time_s(timing, s.failure_at_rounds)
    plan = FailurePlan(s.failure, at_s, s.failure_duration_s)
    log(
        f"  failure '{s.failure}' {at_s:.1f} s into the job (DiLoCo's round "
        f"{s.failure_at_rounds:g}) for {s.failure_duration_s:g} s: {', '.join(s.failure_methods)}"
    )
    for method in s.failure_methods:
        cfg = job_config(
            s, method, s.first_seed, rounds=s.failure_rounds, mix1_timeout_s=mix1_timeout
        )
        name = f"failure-{method}"
        try:
            run = jobs.run(name, cfg, plan)
        except JobsError as e:
            log(f"  {name}: FAILED: {e}")
            continue
        out.failure_runs[method] = run
        fig = failure_figures(failure_rows(run, method, s.failure))[0]
        log(f"  {name:<28} {failure_line(fig)}")


def write_outputs(outcome: Outcome, s: Settings, where: Outputs) -> None:
    run_rows = [run_row(run, key, s.warmup_rounds) for key, run in outcome.runs.items()]
    write_csv(where.out, RUN_COLUMNS, run_rows)
    rounds = [row for key, run in outcome.runs.items() for row in round_rows(run, key)]
    write_csv(where.rounds, ROUND_COLUMNS, rounds)
    fails = [
        row
        for method, run in outcome.failure_runs.items()
        for row in failure_rows(run, method, s.failure)
    ]
    write_csv(where.failure, FAILURE_COLUMNS, fails)
    write_summary(read_rows(where.out), where.summary)


# -- the command line -------------------------------------------------------------------------------


def fabric_opener(
    results: pathlib.Path,
    *,
    wait_s: float,
    log: Callable[[str], None],
    rounds_log: Callable[[str], None] | None,
    launch: str = "fork",
) -> OpenJobs:
    """Each rate's jobs on a fabric of its own (brought up at the rate, taken down after).

    The first fabric waits ``wait_s`` for another one on the machine to go away; the later
    ones, mid-experiment, wait up to :data:`MIDRUN_WAIT_S` (another run took the fabric
    between two of ours: slower, not a failure)."""
    opened: list[str] = []

    @contextlib.contextmanager
    def open_jobs(rate_mbps: float, label: str) -> Iterator[Jobs]:
        from topologies.emulation.bringup import own_fabric

        t = time.monotonic()
        wait = max(wait_s, MIDRUN_WAIT_S) if opened else wait_s
        opened.append(label)
        with own_fabric(FabricSpec(link_mbps=rate_mbps), str(results), wait_s=wait) as up:
            up_s = time.monotonic() - t
            with AgentPool(
                up.net.fabric,
                up.net.topology_path,
                up.net.host_pids(),
                results / "gossip_runs" / label,
                log=log,
                rounds_log=rounds_log,
                launch=launch,
            ) as pool:
                if up.controller is not None:
                    pool.controller = up.controller.run_command
                log(
                    f"  fabric up at {rate_mbps:.3f} Mbit/s per link in {up_s:.1f} s, agents "
                    f"ready {time.monotonic() - t - up_s:.1f} s later"
                )
                yield pool
        log("  fabric down")

    return open_jobs


def emu_opener(rounds_log: Callable[[str], None] | None) -> OpenJobs:
    @contextlib.contextmanager
    def open_jobs(rate_mbps: float, label: str) -> Iterator[Jobs]:
        yield EmuJobs(rate_mbps, rounds_log=rounds_log)

    return open_jobs


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m experiments.gossip", description=__doc__.split("\n\n")[0]
    )
    d = Settings()
    add_network_option(ap)
    ap.add_argument("--quick", action="store_true", help="every part once, short (~2 min)")
    ap.add_argument("--task", default=None, help=f"the task (default {d.task})")
    add_seed_options(ap, d.seeds, d.first_seed)
    ap.add_argument("--rounds", type=int, default=None, help=f"T (default {d.rounds})")
    ap.add_argument("--inner-steps", type=int, default=None, help=f"H (default {d.inner_steps})")
    ap.add_argument("--workers", type=int, default=None, help=f"M (default {d.workers})")
    ap.add_argument("--methods", default=None, help=f"comma-separated, from {', '.join(METHODS)}")
    ap.add_argument(
        "--ratios",
        default=None,
        help="comm/compute ratios of DiLoCo's round (default: the paper's 0.89,1.78)",
    )
    ap.add_argument(
        "--failure",
        default=None,
        help="failure scenario: host (the last worker's links down; fabric), plane, outage "
        "(every plane), none (default: host on the fabric, outage on the emulator)",
    )
    ap.add_argument("--start-mbps", type=float, default=None, help="link rate of the first probe")
    ap.add_argument("--verbose", action="store_true", help="a line per round")
    ap.add_argument(
        "--launch",
        choices=LAUNCHES,
        default="fork",
        help="how agents start on the fabric: forked by a fork server per host that imported "
        "torch once (default; a killed agent's replacement starts in milliseconds), or each "
        "its own process (exec)",
    )
    add_output_options(ap, CSV_NAME)
    return ap


def settings_from(args: argparse.Namespace, network: str) -> Settings:
    """Raises: ConfigError (a bad option)."""
    s = QUICK if args.quick else Settings()
    changes: dict[str, Any] = {"first_seed": args.first_seed}
    for name in ("task", "seeds", "rounds", "inner_steps", "workers", "start_mbps"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    if args.methods:
        changes["methods"] = tuple(m for m in args.methods.split(",") if m)
    if args.ratios:
        try:
            changes["ratios"] = tuple(float(x) for x in args.ratios.split(",") if x)
        except ValueError:
            raise ConfigError(
                f"--ratios: numbers separated by commas, got {args.ratios!r}"
            ) from None
    failure = args.failure or ("host" if network == "fabric" else "outage")
    changes["failure"] = failure
    if failure != "none":
        methods = changes.get("methods", s.methods)
        changes["failure_methods"] = tuple(m for m in s.failure_methods if m in methods)
    return replace(s, **changes)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    results = pathlib.Path(args.results)
    where = Outputs(main_csv(args, CSV_NAME))
    if args.plot_only:
        return plot_only(
            [where.out],
            lambda: report(
                read_rows(where.out), read_rows(where.failure) if where.failure.exists() else []
            ),
            lambda: plot(where),
        )
    network = choose_network(args.network)
    try:
        s = settings_from(args, network)
        check_plan(s, network)
    except ConfigError as e:
        print_error(e)
        return 2
    rounds_log = print if args.verbose else None
    open_jobs = (
        fabric_opener(
            results, wait_s=args.wait_s, log=print, rounds_log=rounds_log, launch=args.launch
        )
        if network == "fabric"
        else emu_opener(rounds_log)
    )
    print(
        f"exp-gossip on the {network}: {s.task}, M = {s.workers}, H = {s.inner_steps}, "
        f"T = {s.rounds} (DP: {s.dp_rounds} rounds of {s.dp_inner_steps} steps), seeds "
        f"{s.seed_list}, ratios {', '.join(f'{r:g}' for r in s.ratios)}, failure {s.failure}"
    )
    outcome = run_or_report(
        lambda: run_experiment(s, network, open_jobs), (ConfigError, JobsError, OSError)
    )
    if outcome is None:
        return 1
    if not outcome.runs:
        print_error("no run finished")
        return 1
    write_outputs(outcome, s, where)
    png = plot(where)
    failure = read_rows(where.failure) if outcome.failure_runs else []
    print(report(read_rows(where.out), failure, outcome.describe_rates()))
    print(wrote([where.out, where.rounds, where.failure, where.summary, png], outcome.elapsed_s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
