"""Decoupled DiLoCo vs elastic data parallel under chaos, across the fabric
(``make exp-decoupled``).

The Decoupled DiLoCo paper (arXiv 2604.21428) reports goodput 88 % for Decoupled DiLoCo (M = 8
learners) against 58 % for elastic data parallel under its heavier failure rate, uptime
100 % with M ≥ 4, and goodput rising with M (70 % at M = 2). Here, on the default fabric (2
planes, 4 hosts; brought up and taken down again; one process per learner or worker, several
per host where needed, the syncer or the coordinator alone on the last host):

1. **Methods.** Elastic data parallel with :attr:`Settings.elastic_workers` workers
   (:mod:`host.train.decoupled.elastic`: a rendezvous per step; a missing member is dropped
   and the step redone; a returning one is admitted with a member's state); Decoupled DiLoCo
   with M learners for each M of :attr:`Settings.learners`; and, without failures, DiLoCo
   (M = 4: K = M, P = 1, τ = 0, the paper's Nesterov outer step), the reference of the loss.
   Every member stands for an equal share of one cluster's chips.
2. **Failure rates.** A seeded chaos schedule per run (:mod:`host.train.decoupled.chaos`) at
   each rate of :data:`RATES`: interruptions of the whole job arrive with a cluster MTBF (as
   the paper's MTBI_chip / N_chip), so each of M members is interrupted with a mean of
   M × MTBF between interruptions; a third each kill (SIGKILL; the process restarts after the
   down time, from its last checkpoint, and catches up), pause (SIGSTOP / SIGCONT) and slow
   (its steps take 2–4 × as long). The fabric fails a spine or a whole plane (``tf-ctl``)
   on its own clock too. The same seed gives every method the same cluster-level draw.
3. **Runs.** Every method at every rate for :attr:`Settings.wall_s` seconds with every seed
   (seed-major, so that the machine's load drifts over methods alike).

Measures, one definition each (README "Decoupled DiLoCo"): **goodput** = useful member-time ÷
(members × wall time), a step useful once it reached the global model (a merged report of
the same incarnation after it; an elastic step: its round committed), a step's time its
nominal (emulated accelerator) time; **uptime** = the fraction of the wall time in which some
useful step ran (the global model advanced); **final loss** = the validation loss of the
global model at the end (the syncer's; elastic: the last evaluation); **loss gap to DiLoCo**
at equal tokens, read off both loss-vs-tokens curves.

Writes ``decoupled.csv`` (one row per method, M, rate and seed), ``decoupled_curve.csv``,
``decoupled_summary.csv`` (mean, sd, 95 % CI over seeds) and ``decoupled.png``, and prints
the table beside the paper's. ``--network emu`` runs every process as a thread on the
in-process emulator (:mod:`host.train.decoupled.run`; no root needed). ``--quick`` is a short
chaos run of M = 2 and elastic data parallel (the network test uses it).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import pathlib
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

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
from experiments.decoupled_fabric import FabricJob, SlotPool, count_events, run_job
from experiments.decoupled_figures import (
    CURVE_COLUMNS,
    REFERENCE_LEARNERS,
    RUN_COLUMNS,
    Key,
    Outputs,
    RunResult,
    curve_rows,
    plot,
    report,
    run_row,
    write_summary,
)
from experiments.outputs import read_rows, write_csv
from host.linkemu import LinkProfile
from host.train.decoupled.chaos import Schedule, schedule
from host.train.decoupled.config import (
    NO_GRACE,
    Anchor,
    Averaging,
    ChaosConfig,
    DecoupledConfig,
    ElasticConfig,
    JobConfig,
    SyncerConfig,
    Weighting,
)
from host.train.decoupled.errors import ConfigError, RunFailed
from host.train.decoupled.run import DecoupledResult, ElasticResult, run_decoupled, run_elastic
from host.train.diloco.config import TASK_NAMES, OuterConfig
from host.train.diloco.errors import ConfigError as AnyConfigError
from topologies.model import FabricSpec

CSV_NAME = "decoupled.csv"
FABRIC_HOSTS = FabricSpec().leaves * FabricSpec().hosts_per_leaf
MAX_SLOTS_PER_HOST = 4
"""Members per host at most (every slot is a process with its own MRC endpoint)."""
WARM_UP_S = 4.0
"""How long each unmeasured warm-up job runs on a fresh fabric (:meth:`FabricRunner.warm_up`)."""
STEPS = 10**6
"""Step budgets far beyond what a run takes: runs end at their wall time."""


@dataclass(frozen=True)
class FailureRate:
    """One failure rate: interruptions of the whole job (cluster MTBF, seconds; inf: none)
    and of the network."""

    name: str
    mtbf_s: float
    network_mtbf_s: float = math.inf


RATES: dict[str, FailureRate] = {
    r.name: r
    for r in (
        FailureRate("none", math.inf),
        FailureRate("light", 10.0, 20.0),
        FailureRate("heavy", 4.0, 10.0),
    )
}
"""The failure rates, lightest first."""


@dataclass(frozen=True)
class Settings:
    """Everything a run of the experiment uses (``--quick``: :data:`QUICK`)."""

    task: str = "digits-mlp"
    learners: tuple[int, ...] = (2, 4, 8)
    """M of Decoupled DiLoCo (M = 8: several learners per fabric host, as slots)."""
    elastic_workers: int = 4
    reference: bool = True
    """Run DiLoCo (M = 4) without failures, the reference of the loss."""
    rates: tuple[str, ...] = tuple(RATES)
    seeds: int = 3
    first_seed: int = 0
    wall_s: float = 20.0
    """Every run trains this long."""
    min_step_s: float = 0.05
    """The emulated accelerator's step time (compute is padded to it)."""
    batch_size: int = 16
    sync_every_steps: int = 16
    """H: every fragment is sent once per H steps (DiLoCo: its inner steps). With τ = 2 the
    merged copy overwrites τ steps of the learner's own progress on that fragment: τ/H = 1/8
    here (the paper's 2/24); at H = 8 that cost the global model ~13 % of loss at equal tokens
    in a lock-step run."""
    fragments: int = 4
    overlap_steps: int = 2
    quorum: int = 1
    """K of Decoupled DiLoCo (the paper's default; capped at M)."""
    anchor: Anchor = Anchor.BASE
    outer_lr: float = 0.7
    outer_momentum: float = 0.9
    """Decoupled DiLoCo's outer step: the paper's Nesterov 0.9, as DiLoCo's (the merges of a
    fragment's round that learners report apart share it: ``SyncerConfig.share_scaled``)."""
    learner_timeout_s: float = 2.0
    rendezvous_timeout_s: float = 0.5
    elastic_reconfigure_steps: int = 20
    """What every change of elastic data parallel's group stops the whole job for, in steps of
    the emulated accelerator (the paper's downscale and upscale times: a real elastic job
    re-forms its communicator and reloads, tens of seconds against steps of a second or two).
    0: re-forming is free, as for a per-step fault-tolerant group."""
    down_min_s: float = 1.0
    down_max_s: float = 3.0
    slow_min: float = 2.0
    slow_max: float = 4.0
    chaos_after_s: float = 1.0
    """No interruption before this (the job's start-up)."""
    evaluations: int = 25
    """Validation losses of the global model per run, about."""
    link_mbps: float = 20.0
    """The fabric's link rate."""

    def __post_init__(self) -> None:
        if self.task not in TASK_NAMES:
            raise ConfigError(f"unknown task '{self.task}'; valid: {', '.join(TASK_NAMES)}")
        unknown = [r for r in self.rates if r not in RATES]
        if unknown or not self.rates:
            raise ConfigError(f"unknown failure rates {unknown}; valid: {', '.join(RATES)}")
        if not self.learners or any(m < 1 for m in self.learners):
            raise ConfigError(f"learners must be >= 1, got {self.learners}")
        if self.elastic_reconfigure_steps < 0:
            raise ConfigError(
                f"elastic_reconfigure_steps must be >= 0, got {self.elastic_reconfigure_steps}"
            )
        for name in ("seeds", "elastic_workers", "evaluations", "quorum"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("wall_s", "min_step_s", "link_mbps"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.chaos_after_s >= self.wall_s:
            raise ConfigError(
                f"chaos_after_s ({self.chaos_after_s}) must be below wall_s ({self.wall_s})"
            )

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.first_seed, self.first_seed + self.seeds))


QUICK = Settings(
    learners=(2,),
    elastic_workers=2,
    reference=False,
    rates=("heavy",),
    seeds=1,
    wall_s=12.0,
)
"""``--quick``: one short chaos run of Decoupled DiLoCo (M = 2) and of elastic data parallel
(the network test runs it)."""


# -- the plan --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Planned:
    """One run of the plan."""

    key: Key
    job: JobConfig
    rate: FailureRate

    @property
    def name(self) -> str:
        k = self.key
        return f"{k.method}-m{k.learners}-{k.rate}-s{k.seed}"


def _evals(s: Settings, merges_per_s: float) -> int:
    return max(1, round(merges_per_s * s.wall_s / s.evaluations))


def decoupled_config(s: Settings, learners: int, seed: int) -> DecoupledConfig:
    """Decoupled DiLoCo with M = ``learners``.

    Raises:
        ConfigError: an invalid combination (the setting is named).
    """
    reports_per_s = learners / (s.min_step_s * (s.sync_every_steps // max(1, s.fragments)))
    return DecoupledConfig(
        task=s.task,
        learners=learners,
        fragments=s.fragments,
        sync_every_steps=s.sync_every_steps,
        overlap_steps=s.overlap_steps,
        steps=STEPS,
        batch_size=s.batch_size,
        seed=seed,
        outer=OuterConfig(lr=s.outer_lr, momentum=s.outer_momentum, nesterov=s.outer_momentum > 0),
        syncer=SyncerConfig(
            quorum=min(s.quorum, learners),
            anchor=s.anchor,
            learner_timeout_s=s.learner_timeout_s,
            eval_every_merges=_evals(s, reports_per_s / min(s.quorum, learners)),
        ),
        min_step_s=s.min_step_s,
        max_wall_s=s.wall_s,
    )


def diloco_config(s: Settings, seed: int) -> DecoupledConfig:
    """DiLoCo as Decoupled DiLoCo reduces to it (:meth:`DecoupledConfig.reference`: K = M, no
    grace window, equal weights, direct averaging, P = 1, τ = 0), M = 4, the paper's outer
    step."""
    m = REFERENCE_LEARNERS
    return DecoupledConfig(
        task=s.task,
        learners=m,
        fragments=1,
        sync_every_steps=s.sync_every_steps,
        overlap_steps=0,
        steps=STEPS,
        batch_size=s.batch_size,
        seed=seed,
        syncer=SyncerConfig(
            quorum=m,
            grace=NO_GRACE,
            weighting=Weighting.EQUAL,
            averaging=Averaging.DIRECT,
            learner_timeout_s=s.learner_timeout_s,
            eval_every_merges=_evals(s, 1 / (s.min_step_s * s.sync_every_steps)),
        ),
        min_step_s=s.min_step_s,
        max_wall_s=s.wall_s,
    )


def elastic_config(s: Settings, seed: int) -> ElasticConfig:
    return ElasticConfig(
        task=s.task,
        workers=s.elastic_workers,
        rounds=STEPS,
        batch_size=s.batch_size,
        seed=seed,
        rendezvous_timeout_s=s.rendezvous_timeout_s,
        reconfigure_s=s.elastic_reconfigure_steps * s.min_step_s,
        # a joiner waits for a commit, its donor's state and the re-forming: asking again
        # early fails the round it was just admitted to (a livelock under load, measured)
        join_timeout_s=10.0 + 2 * s.elastic_reconfigure_steps * s.min_step_s,
        reply_timeout_s=10.0 + s.elastic_reconfigure_steps * s.min_step_s,
        checkpoint_every_steps=s.sync_every_steps,
        min_step_s=s.min_step_s,
        eval_every_rounds=_evals(s, 1 / s.min_step_s),
        max_wall_s=s.wall_s,
    )


def check_plan(s: Settings, network: str) -> list[Planned]:
    """Every run of the experiment, its job built (and so validated) before anything starts.

    Raises:
        ConfigError: an invalid combination, or more members than the fabric's slots.
    """
    if network == "fabric":
        most = max(*s.learners, s.elastic_workers, REFERENCE_LEARNERS if s.reference else 1)
        room = (FABRIC_HOSTS - 1) * MAX_SLOTS_PER_HOST
        if most > room:
            raise ConfigError(
                f"{most} members need {most} process slots; the default fabric has {room} "
                f"({FABRIC_HOSTS - 1} hosts beside the hub, {MAX_SLOTS_PER_HOST} per host)"
            )
    out: list[Planned] = []
    for seed in s.seed_list:
        for name in s.rates:
            rate = RATES[name]
            out.append(
                Planned(
                    Key("elastic_dp", s.elastic_workers, name, seed), elastic_config(s, seed), rate
                )
            )
            for m in s.learners:
                out.append(
                    Planned(Key("decoupled", m, name, seed), decoupled_config(s, m, seed), rate)
                )
            if s.reference and name == "none":
                out.append(
                    Planned(
                        Key("diloco", REFERENCE_LEARNERS, name, seed), diloco_config(s, seed), rate
                    )
                )
    return out


def chaos_for(s: Settings, p: Planned, members: int) -> Schedule | None:
    """The run's schedule: each member interrupted with mean M × MTBF between interruptions
    (None without failures)."""
    if math.isinf(p.rate.mtbf_s):
        return None
    cfg = ChaosConfig(
        seed=p.key.seed,
        mtbi_s=members * p.rate.mtbf_s,
        horizon_s=s.wall_s,
        network_mtbi_s=p.rate.network_mtbf_s,
        down_min_s=s.down_min_s,
        down_max_s=s.down_max_s,
        slow_min=s.slow_min,
        slow_max=s.slow_max,
        start_after_s=s.chaos_after_s,
    )
    spec = FabricSpec()
    return schedule(cfg, members, planes=spec.planes, spines=spec.spines)


def _members(job: JobConfig) -> int:
    return job.learners if isinstance(job, DecoupledConfig) else job.workers


# -- the networks ---------------------------------------------------------------------------


class Runner(Protocol):
    """Runs one planned job on one network."""

    network: str

    def run(self, p: Planned, chaos: Schedule | None) -> RunResult:
        """Raises: JobsError (the network could not run it)."""
        ...


def _quorum(merges: Sequence[Any]) -> float:
    return sum(m.quorum for m in merges) / len(merges) if merges else math.nan


class EmuRunner:
    """Every process a thread of this process over the emulated fabric
    (:mod:`host.train.decoupled.run`)."""

    network = "emu"

    def __init__(self, link_mbps: float) -> None:
        self.link = LinkProfile(rate_mbps=link_mbps)

    def run(self, p: Planned, chaos: Schedule | None) -> RunResult:
        try:
            if isinstance(p.job, DecoupledConfig):
                dec: DecoupledResult = run_decoupled(p.job, chaos=chaos, link=self.link)
                return _result(
                    p,
                    self.network,
                    dec.summary,
                    dec.curve(),
                    chaos,
                    len(dec.merges),
                    _quorum(dec.merges),
                    sum(dec.incarnations) - len(dec.incarnations),
                    (),
                )
            el: ElasticResult = run_elastic(p.job, chaos=chaos, link=self.link)
        except RunFailed as e:
            raise JobsError(str(e)) from e
        quorum = _mean([len(c.group) for c in el.commits])
        return _result(
            p,
            self.network,
            el.summary,
            list(el.curve),
            chaos,
            len(el.commits),
            quorum,
            sum(el.incarnations) - len(el.incarnations),
            (),
        )


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else math.nan


def _result(
    p: Planned,
    network: str,
    summary: Any,
    curve: Sequence[Any],
    chaos: Schedule | None,
    merges: int,
    quorum: float,
    restarts: int,
    notes: Sequence[str],
) -> RunResult:
    return RunResult(
        p.key,
        network,
        p.rate.mtbf_s,
        summary,
        tuple(curve),
        dict(count_events(chaos)),
        merges,
        quorum,
        restarts,
        "; ".join(notes) or "finished",
    )


class FabricRunner:
    """Every process an agent in a fabric host (:mod:`experiments.decoupled_fabric`)."""

    network = "fabric"

    def __init__(self, pool: SlotPool, log: Callable[[str], None]) -> None:
        self.pool = pool
        self.log = log

    def warm_up(self, jobs: Sequence[tuple[str, JobConfig]], wall_s: float) -> None:
        """Run each job for ``wall_s`` unmeasured: the first job after the fabric came up paid
        seconds for its first connections through the fresh switches (10 s of a 20 s run once),
        which is the harness's start-up, not the method's goodput."""
        for name, cfg in jobs:
            t = time.monotonic()
            run_job(self.pool, f"warm-up-{name}", cfg, wall_s=wall_s, log=self.log)
            self.log(f"  warm-up {name}: {time.monotonic() - t:.1f} s (not measured)")

    def run(self, p: Planned, chaos: Schedule | None) -> RunResult:
        job: FabricJob = run_job(
            self.pool, p.name, p.job, wall_s=p.job.max_wall_s, schedule=chaos, log=self.log
        )
        if isinstance(p.job, DecoupledConfig):
            merges, quorum = len(job.merges), _quorum(job.merges)
        else:
            from host.train.decoupled.elastic import Commit

            commits = job.records.of(Commit)
            merges, quorum = len(commits), _mean([len(c.group) for c in commits])
        restarts = sum(job.incarnations) - len(job.incarnations)
        return _result(
            p, self.network, job.summary(), job.curve(), chaos, merges, quorum, restarts, job.notes
        )


OpenRunner = Callable[[], contextlib.AbstractContextManager[Runner]]


def fabric_opener(
    s: Settings,
    results: pathlib.Path,
    *,
    wait_s: float,
    log: Callable[[str], None],
    launch: str = "fork",
) -> OpenRunner:
    """The default fabric at ``s.link_mbps``, brought up once for every run and taken down;
    agents started by ``launch`` (:data:`experiments.agent_pool.LAUNCHES`)."""

    @contextlib.contextmanager
    def open_runner() -> Iterator[Runner]:
        from topologies.emulation.bringup import busy_reason, own_fabric

        reason = busy_reason(str(results))
        if reason is not None and wait_s > 0:
            log(f"  {reason}; waiting for it (up to {wait_s:g} s)")
        t = time.monotonic()
        spec = FabricSpec(link_mbps=s.link_mbps)
        with own_fabric(spec, str(results), wait_s=wait_s) as up:
            log(f"  fabric up in {time.monotonic() - t:.1f} s")
            with SlotPool(
                up.net.fabric,
                up.net.topology_path,
                up.net.host_pids(),
                results / "decoupled_runs",
                log=log,
                launch=launch,
            ) as pool:
                if up.controller is not None:
                    pool.controller = up.controller.run_command
                runner = FabricRunner(pool, log)
                most = max(s.learners)
                runner.warm_up(
                    [
                        ("elastic", elastic_config(s, s.first_seed)),
                        (f"decoupled-m{most}", decoupled_config(s, most, s.first_seed)),
                    ],
                    WARM_UP_S,
                )
                yield runner
        log("  fabric down")

    return open_runner


def emu_opener(s: Settings) -> OpenRunner:
    @contextlib.contextmanager
    def open_runner() -> Iterator[Runner]:
        yield EmuRunner(s.link_mbps)

    return open_runner


# -- the experiment ----------------------------------------------------------------------------


@dataclass
class Outcome:
    network: str
    results: list[RunResult] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0


def _line(r: RunResult) -> str:
    s = r.summary
    ev = sum(r.events.values())
    return (
        f"goodput {s.goodput:6.1%}, uptime {s.uptime:6.1%}, loss {s.final_val_loss:.3f}, "
        f"tokens {s.tokens_merged:8.0f}, {ev} interruptions, {r.restarts} restarts"
        + ("" if r.status == "finished" else f"; {r.status}")
    )


def run_experiment(
    s: Settings, network: str, open_runner: OpenRunner, *, log: Callable[[str], None] = print
) -> Outcome:
    """Every planned run on one network (a run that fails is logged and left out).

    Raises:
        ConfigError: an invalid combination (before anything starts).
    """
    t0 = time.monotonic()
    plan = check_plan(s, network)
    out = Outcome(network)
    with open_runner() as runner:
        for k, p in enumerate(plan, 1):
            chaos = chaos_for(s, p, _members(p.job))
            t = time.monotonic()
            try:
                r = runner.run(p, chaos)
            except JobsError as e:
                out.failed.append(f"{p.name}: {e}")
                log(f"  [{k}/{len(plan)}] {p.name}: FAILED: {e}")
                continue
            out.results.append(r)
            log(f"  [{k}/{len(plan)}] {p.name:<28} {time.monotonic() - t:5.1f} s: {_line(r)}")
    out.elapsed_s = time.monotonic() - t0
    return out


def write_outputs(outcome: Outcome, where: Outputs) -> None:
    write_csv(where.out, RUN_COLUMNS, [run_row(r) for r in outcome.results])
    write_csv(where.curve, CURVE_COLUMNS, [c for r in outcome.results for c in curve_rows(r)])
    write_summary(read_rows(where.out), read_rows(where.curve), where.summary)


# -- the command line ------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m experiments.decoupled", description=__doc__.split("\n\n")[0]
    )
    d = Settings()
    add_network_option(ap)
    ap.add_argument(
        "--quick", action="store_true", help="one short chaos run of M = 2 and elastic DP"
    )
    add_seed_options(ap, d.seeds, d.first_seed)
    ap.add_argument(
        "--learners", default=None, help="M of Decoupled DiLoCo, comma-separated (default 2,4,8)"
    )
    ap.add_argument(
        "--rates", default=None, help=f"failure rates, comma-separated, from {', '.join(RATES)}"
    )
    ap.add_argument(
        "--wall-s", type=float, default=None, help=f"seconds per run (default {d.wall_s:g})"
    )
    ap.add_argument("--task", default=None, help=f"the task (default {d.task})")
    ap.add_argument("--quorum", type=int, default=None, help=f"K (default {d.quorum})")
    ap.add_argument(
        "--anchor",
        choices=[a.value for a in Anchor],
        default=None,
        help=f"where a learner's Δ is anchored (default {d.anchor.value}; current: the paper's rule as read)",
    )
    ap.add_argument("--outer-lr", type=float, default=None, help=f"default {d.outer_lr:g}")
    ap.add_argument(
        "--outer-momentum",
        type=float,
        default=None,
        help=f"default {d.outer_momentum:g} (Nesterov when > 0)",
    )
    ap.add_argument(
        "--elastic-reconfigure-steps",
        type=int,
        default=None,
        help="steps of time every change of elastic DP's group stops the whole job for "
        f"(default {d.elastic_reconfigure_steps}; 0: free re-forming)",
    )
    ap.add_argument(
        "--launch",
        choices=LAUNCHES,
        default="fork",
        help="how agents start on the fabric: forked by a fork server per host that imported "
        "torch once (default), or each its own process (exec)",
    )
    add_output_options(ap, CSV_NAME)
    return ap


def _ints(text: str, what: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x)
    except ValueError:
        raise ConfigError(f"{what}: integers separated by commas, got {text!r}") from None


def settings_from(args: argparse.Namespace) -> Settings:
    """Raises: ConfigError (a bad option)."""
    s = QUICK if args.quick else Settings()
    changes: dict[str, Any] = {"first_seed": args.first_seed}
    names = ("seeds", "wall_s", "task", "quorum", "outer_lr", "outer_momentum")
    for name in (*names, "elastic_reconfigure_steps"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    if args.learners:
        changes["learners"] = _ints(args.learners, "--learners")
    if args.rates:
        changes["rates"] = tuple(r for r in args.rates.split(",") if r)
    if args.anchor:
        changes["anchor"] = Anchor(args.anchor)
    try:
        return replace(s, **changes)
    except (TypeError, ValueError) as e:
        if isinstance(e, ConfigError):
            raise
        raise ConfigError(str(e)) from None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    results = pathlib.Path(args.results)
    where = Outputs(main_csv(args, CSV_NAME))
    if args.plot_only:
        return plot_only(
            [where.out, where.curve],
            lambda: report(read_rows(where.out), read_rows(where.curve)),
            lambda: plot(where),
        )
    network = choose_network(args.network)
    try:
        s = settings_from(args)
        plan = check_plan(s, network)
    except AnyConfigError as e:  # this package's and the diloco settings' (outer optimizer)
        print_error(e)
        return 2
    open_runner = (
        fabric_opener(s, results, wait_s=args.wait_s, log=print, launch=args.launch)
        if network == "fabric"
        else emu_opener(s)
    )
    print(
        f"exp-decoupled on the {network}: {s.task}, elastic DP ({s.elastic_workers} workers, "
        f"{s.elastic_reconfigure_steps * s.min_step_s:g} s to re-form) vs "
        f"Decoupled DiLoCo M = {', '.join(map(str, s.learners))} (K = {s.quorum}, H = "
        f"{s.sync_every_steps}, P = {s.fragments}, τ = {s.overlap_steps}, anchor "
        f"{s.anchor.value}, outer lr {s.outer_lr:g} momentum {s.outer_momentum:g})"
        + (", DiLoCo M = 4 without failures" if s.reference else "")
        + f"; failure rates {', '.join(s.rates)}; seeds {s.seed_list}; {len(plan)} runs of "
        f"{s.wall_s:g} s, steps of {s.min_step_s * 1e3:g} ms"
    )
    outcome = run_or_report(
        lambda: run_experiment(s, network, open_runner), (ConfigError, JobsError, OSError)
    )
    if outcome is None:
        return 1
    if not outcome.results:
        print_error("no run finished")
        return 1
    write_outputs(outcome, where)
    png = plot(where)
    print(report(read_rows(where.out), read_rows(where.curve)))
    for f in outcome.failed:
        print(f"FAILED: {f}")
    print(wrote([where.out, where.curve, where.summary, png], outcome.elapsed_s))
    return 0 if not outcome.failed else 1


if __name__ == "__main__":
    sys.exit(main())
