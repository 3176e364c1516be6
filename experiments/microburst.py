"""The microburst experiment (``make exp-microburst``): DBLP vs fixed P vs P = 0 under bursts.

For each seed and task, each policy trains the same job (same seed, data and burst schedule)
while the network suffers transient loss bursts like the paper's: 2–3 per training run
(DBLP's evaluation: 2 in 930 iterations, 3 in 1,395), each of 60, 70, 80 or 90 % loss drawn
from the seed, at random rounds, each covering exactly one round's communication in both
directions (:mod:`host.train.loop`). The three rows are

* **dblp**: the phase-aware bound (P_low = 0.8 % inside a critical learning regime, P_high =
  P_low + 40 pp outside);
* **fixed**: the paper's baseline, P = P_low in every round. Gradients are cut into at least
  :data:`MIN_CHUNKS` chunks so that ⌊N·P_low⌋ ≥ 1: it may really lose P_low of them;
* **reliable**: P = 0.

Measures (README "DBLP"): a round's **communication latency** is the slowest worker's time
from its first send of the round to the last byte of the averaged result received. The
**burst-round speed-up** of a burst is T_fixed / T_dblp of that round's latency (same seed,
same round); per seed the mean over its bursts, then mean and 95 % CI over seeds. **Training
time** is the slowest worker's wall time from its first round to its last; its reduction is
reported as 1 − T_dblp / T_fixed (the abstract's convention) and as T_fixed / T_dblp − 1 (Table
VIII's, the baseline normalised to DBLP = 1). Accuracy (test set of 360 digits: one image is
0.28 pp) and perplexity differences are DBLP − fixed, per seed, then mean and CI.

Writes ``results/microburst_latency.csv`` (one row per seed, task, policy and round, with the
phase times), ``training_summary.csv`` (per seed, task and policy), ``microburst_faults.csv``
(every network change with its request and applied times), ``microburst_figures.csv`` (each
figure's n, mean, sd, 95 % CI beside the paper's) and ``microburst.png``.

``--network emu`` runs every host in this process on the emulated fabric (uniform loss on
every path); ``--network fabric`` runs one agent per host of the fabric of ``make fabric-up``
(or one it brings up), bursts injected by the controller on every host-facing leaf port.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import math
import pathlib
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from experiments.cli_common import add_network_option, choose_network
from experiments.fabric_job import FabricNotReady, FabricSession
from experiments.hosts import FabricState
from experiments.stats import Summary, reduction_pct, slowdown_pct, summarize
from host.dblp.config import LossPolicy, PhaseConfig
from host.dblp.errors import RoundFailed
from host.train.job import EventKind, JobEvent, JobSpec
from host.train.run import JobResult

PAPER = {
    "burst_speedup_x": "4.00-5.97x (abstract: up to 5.88x)",
    "training_time_reduction_pct": "24.4 % avg, 33.9 % max",
    "training_time_slowdown_pct": "26.4 % (EfficientNetB0, 90 % bursts), 19.8 % (ResNet50)",
    "calm_slowdown_pct": "17.4 % (EfficientNetB0), 17.5 % (ResNet50), no bursts",
    "accuracy_difference_pp": "-0.29 pp (EfficientNetB0), -0.48 pp (ResNet50); |diff| <= 0.5",
}
"""DBLP's published figures (arXiv 2605.01989: abstract; Tables II–VI burst speed-ups,
Table VIII training time with the baseline normalised to DBLP = 1, Table IX accuracy)."""

POLICIES = (LossPolicy.DBLP, LossPolicy.FIXED, LossPolicy.RELIABLE)
BURST_LEVELS_PCT = (60.0, 70.0, 80.0, 90.0)
BURSTS_PER_RUN = (2, 3)
"""The paper's density: 2 bursts in a 10-epoch run, 3 in a 15-epoch one."""
MIN_CHUNKS = 128
"""Chunks per gradient at least: ⌊128 · 0.008⌋ = 1, so the fixed-P baseline may lose one."""
QUEUE_DEPTH = 300
"""Switch queue depth (packets) of a fabric these jobs bring up: the ~97 KB that the default
64 full-size packets hold, in packets of the chunks' size (the digits MLP's 130 chunks are
~330 bytes on the wire). With 64 such packets a queue is 21 KB and every calm round's incast
at the parameter server drops a fifth of the chunks; with the same bytes it drops what a real
buffer would."""
SEEDS = 5
LINK_MBPS = 200.0
"""Link rate (Mbit/s) of a fabric the DBLP experiments bring up (``make exp-microburst``,
``make demo``): 10× the 20 Mbit/s of before the switches' C data path (issue 18). What they
measure does not depend on it: a burst round's latency is its probe/bitmap/resend cycles,
each bound by the protocol's timers; a calm round's wire time (3 × 130 chunks of ~330 bytes
into the server's two plane links: 26 ms at 20 Mbit/s, 2.6 ms at 200, and as much back) is
a small part of its 0.3–0.5 s at either rate."""

DIGITS_EPOCH_ROUNDS = 15
"""Rounds per epoch of the digits tasks (1,437 training images, 3 workers × 32 per round): the
CLR detector checks once per epoch, as in the paper."""

TASK_SETTINGS: dict[str, JobSpec] = {
    "digits-mlp": JobSpec(
        "digits-mlp",
        rounds=150,
        optimizer="sgd",
        lr=0.1,
        target_metric=0.90,
        min_chunks=MIN_CHUNKS,
        phase=PhaseConfig(check_every_rounds=DIGITS_EPOCH_ROUNDS),
    ),
    "digits-cnn": JobSpec(
        "digits-cnn",
        rounds=150,
        optimizer="sgd",
        lr=0.1,
        target_metric=0.90,
        min_chunks=MIN_CHUNKS,
        phase=PhaseConfig(check_every_rounds=DIGITS_EPOCH_ROUNDS),
    ),
    "chars-transformer": JobSpec(
        "chars-transformer",
        rounds=150,
        optimizer="adam",
        lr=3e-3,
        target_metric=14.0,
        min_chunks=MIN_CHUNKS,
    ),
}
"""Per task: rounds, optimizer, chunking and the target metric of "time to target" (the job
of every policy, seed and burst schedule starts from these)."""


Runner = Callable[[JobSpec], JobResult]
Results = dict[tuple[str, LossPolicy, int], JobResult]
"""(task, policy, seed) -> the job's result."""


def burst_schedule(
    rounds: int,
    seed: int,
    *,
    levels: Sequence[float] = BURST_LEVELS_PCT,
    per_run: Sequence[int] = BURSTS_PER_RUN,
    first_fraction: float = 0.25,
    min_gap: int = 3,
) -> tuple[JobEvent, ...]:
    """The bursts of one training run (seeded: every policy of the seed sees the same).

    Their number is drawn from ``per_run``, each level from ``levels``, their rounds from
    ``[first_fraction · rounds, rounds)``, at least ``min_gap`` rounds apart.

    Raises:
        ValueError: that many bursts do not fit.
    """
    rng = random.Random(seed)
    count = rng.choice(list(per_run))
    lo = max(1, int(rounds * first_fraction))
    if (count - 1) * min_gap >= rounds - lo:
        raise ValueError(f"{count} bursts {min_gap} rounds apart do not fit in {rounds} rounds")
    while True:
        picks = sorted(rng.sample(range(lo, rounds), count))
        if all(b - a >= min_gap for a, b in zip(picks, picks[1:], strict=False)):
            break
    return tuple(JobEvent(r, EventKind.BURST, rng.choice(list(levels))) for r in picks)


@dataclass(frozen=True)
class BurstRatio:
    """One burst round of one seed: DBLP's latency against each baseline's."""

    task: str
    seed: int
    round: int
    level_pct: float
    dblp_ms: float
    fixed_ms: float
    reliable_ms: float
    dblp_bound: float
    relaxed: bool  # DBLP ran at P_high (outside a critical phase), above the baseline's P

    @property
    def speedup_x(self) -> float:
        return self.fixed_ms / self.dblp_ms if self.dblp_ms > 0 else math.nan

    @property
    def speedup_vs_reliable_x(self) -> float:
        return self.reliable_ms / self.dblp_ms if self.dblp_ms > 0 else math.nan


@dataclass(frozen=True)
class SeedFigures:
    """The per-seed figures of one task (DBLP against the fixed-P baseline unless named)."""

    task: str
    seed: int
    speedup_x: float  # mean over the seed's bursts
    time_reduction_pct: float  # 1 - T_dblp / T_fixed
    time_slowdown_pct: float  # T_fixed / T_dblp - 1
    calm_reduction_pct: float  # the same without the burst rounds' latency
    calm_slowdown_pct: float
    reliable_reduction_pct: float  # 1 - T_dblp / T_reliable
    metric_difference: float  # accuracy in pp, or perplexity


@dataclass(frozen=True)
class Figures:
    """Everything the experiment reports: per-burst and per-seed values, and their summaries."""

    bursts: tuple[BurstRatio, ...]
    seeds: tuple[SeedFigures, ...]
    metric_name: dict[str, str]  # task -> "accuracy" | "perplexity"

    def tasks(self) -> list[str]:
        return list(dict.fromkeys(s.task for s in self.seeds))

    def summary(self, field: str, task: str | None = None) -> Summary:
        """A per-seed field summarised over seeds (one task, or every task's seeds)."""
        return summarize(getattr(s, field) for s in self.seeds if task is None or s.task == task)

    def speedup_by_level(self) -> dict[float, Summary]:
        levels = sorted({b.level_pct for b in self.bursts})
        return {
            lvl: summarize(b.speedup_x for b in self.bursts if b.level_pct == lvl) for lvl in levels
        }

    @property
    def speedup_max_x(self) -> float:
        return max((b.speedup_x for b in self.bursts), default=math.nan)


def _burst_ms(res: JobResult) -> float:
    return sum(r.latency_ms for r in res.rows() if r.burst_loss_pct > 0) / 1e3


def compute_figures(results: Results) -> Figures:
    """Pair every seed's three policies and compute the figures (seeds missing a policy are
    left out)."""
    bursts: list[BurstRatio] = []
    seeds: list[SeedFigures] = []
    metric: dict[str, str] = {}
    keys = sorted({(task, seed) for task, _, seed in results})
    for task, seed in keys:
        d = results.get((task, LossPolicy.DBLP, seed))
        f = results.get((task, LossPolicy.FIXED, seed))
        if d is None or f is None:
            continue
        rel = results.get((task, LossPolicy.RELIABLE, seed))
        metric[task] = d.metric_name
        drows, frows = d.rows(), f.rows()
        rrows = rel.rows() if rel is not None else None
        mine = [
            BurstRatio(
                task,
                seed,
                dr.round,
                dr.burst_loss_pct,
                dr.latency_ms,
                fr.latency_ms,
                rrows[dr.round].latency_ms if rrows is not None else math.nan,
                dr.loss_bound,
                dr.loss_bound > fr.loss_bound,
            )
            for dr, fr in zip(drows, frows, strict=True)
            if dr.burst_loss_pct > 0
        ]
        bursts += mine
        d_calm, f_calm = d.total_s - _burst_ms(d), f.total_s - _burst_ms(f)
        diff = d.final_metric - f.final_metric
        seeds.append(
            SeedFigures(
                task,
                seed,
                statistics.fmean(b.speedup_x for b in mine) if mine else math.nan,
                reduction_pct(f.total_s, d.total_s),
                slowdown_pct(f.total_s, d.total_s),
                reduction_pct(f_calm, d_calm),
                slowdown_pct(f_calm, d_calm),
                reduction_pct(rel.total_s, d.total_s) if rel is not None else math.nan,
                100.0 * diff if d.metric_name == "accuracy" else diff,
            )
        )
    return Figures(tuple(bursts), tuple(seeds), metric)


@dataclass(frozen=True)
class CsvNames:
    """File names of one experiment's outputs (under its results directory)."""

    latency: str = "microburst_latency.csv"
    summary: str = "training_summary.csv"
    figures: str = "microburst_figures.csv"
    faults: str = "microburst_faults.csv"
    plot: str = "microburst.png"


LATENCY_COLUMNS = [
    "seed",
    "task",
    "policy",
    "round",
    "burst_loss_pct",
    "latency_ms",
    "push_ms",
    "gather_ms",
    "broadcast_ms",
    "attempts",
    "probes",
    "gate_ms",
    "delivered_fraction",
    "loss_bound",
    "train_loss",
    "faults",
]
FIGURE_COLUMNS = [
    "figure",
    "task",
    "convention",
    "n",
    "mean",
    "sd",
    "ci95_low",
    "ci95_high",
    "min",
    "max",
    "paper",
    "network",
]


def _figure_rows(fig: Figures, network: str) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []

    def add(name: str, task: str, s: Summary, convention: str, paper: str = "") -> None:
        rows.append(
            {
                "figure": name,
                "task": task,
                "convention": convention,
                **{k[5:] if k.startswith("stat_") else k: v for k, v in s.row("stat_").items()},
                "paper": paper,
                "network": network,
            }
        )

    everything = "all"
    add(
        "burst_speedup_x",
        everything,
        fig.summary("speedup_x"),
        "T_fixed / T_dblp of a burst round's latency; mean of each seed's bursts",
        PAPER["burst_speedup_x"],
    )
    add(
        "burst_speedup_each_burst_x",
        everything,
        summarize(b.speedup_x for b in fig.bursts),
        "T_fixed / T_dblp, every burst of every seed",
    )
    add(
        "burst_speedup_at_p_high_x",
        everything,
        summarize(b.speedup_x for b in fig.bursts if b.relaxed),
        "T_fixed / T_dblp, bursts where DBLP ran at P_high (the paper's case)",
    )
    add(
        "burst_speedup_vs_reliable_x",
        everything,
        summarize(b.speedup_vs_reliable_x for b in fig.bursts),
        "T_reliable / T_dblp, every burst",
    )
    for lvl, s in fig.speedup_by_level().items():
        add(f"burst_speedup_{lvl:g}pct_x", everything, s, "T_fixed / T_dblp at this loss")
    for task in fig.tasks():
        add(
            "training_time_reduction_pct",
            task,
            fig.summary("time_reduction_pct", task),
            "1 - T_dblp / T_fixed (abstract)",
            PAPER["training_time_reduction_pct"],
        )
        add(
            "training_time_slowdown_pct",
            task,
            fig.summary("time_slowdown_pct", task),
            "T_fixed / T_dblp - 1 (Table VIII: baseline / DBLP)",
            PAPER["training_time_slowdown_pct"],
        )
        add(
            "calm_time_reduction_pct",
            task,
            fig.summary("calm_reduction_pct", task),
            "1 - T_dblp / T_fixed without the burst rounds' latency",
        )
        add(
            "calm_time_slowdown_pct",
            task,
            fig.summary("calm_slowdown_pct", task),
            "T_fixed / T_dblp - 1 without the burst rounds' latency",
            PAPER["calm_slowdown_pct"],
        )
        add(
            "training_time_reduction_vs_reliable_pct",
            task,
            fig.summary("reliable_reduction_pct", task),
            "1 - T_dblp / T_reliable",
        )
        accuracy = fig.metric_name[task] == "accuracy"
        add(
            "accuracy_difference_pp" if accuracy else "perplexity_difference",
            task,
            fig.summary("metric_difference", task),
            "DBLP - fixed",
            PAPER["accuracy_difference_pp"] if accuracy else "+0.048 (GPT-2-S)",
        )
    return rows


def write_csvs(
    out: pathlib.Path,
    results: Results,
    figures: Figures,
    network: str,
    names: CsvNames = CsvNames(),
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with (out / names.latency).open("w", newline="") as fh:
        lat = csv.DictWriter(fh, fieldnames=LATENCY_COLUMNS)
        lat.writeheader()
        for (task, _, seed), res in results.items():
            for r in res.rows():
                lat.writerow(
                    {
                        "seed": seed,
                        "task": task,
                        "policy": r.policy,
                        "round": r.round,
                        "burst_loss_pct": f"{r.burst_loss_pct:g}",
                        "latency_ms": f"{r.latency_ms:.3f}",
                        "push_ms": f"{r.push_ms:.3f}",
                        "gather_ms": f"{r.gather_ms:.3f}",
                        "broadcast_ms": f"{r.broadcast_ms:.3f}",
                        "attempts": r.attempts,
                        "probes": r.probes,
                        "gate_ms": f"{r.gate_ms:.3f}",
                        "delivered_fraction": f"{r.delivered_fraction:.4f}",
                        "loss_bound": f"{r.loss_bound:.4f}",
                        "train_loss": f"{r.train_loss:.5f}",
                        "faults": r.faults,
                    }
                )
    with (out / names.summary).open("w", newline="") as fh:
        summ = csv.writer(fh)
        summ.writerow(
            [
                "seed",
                "task",
                "policy",
                "network",
                "metric",
                "target",
                "total_time_s",
                "burst_rounds_s",
                "time_to_target_s",
                "final_metric",
                "rounds",
                "mean_delivered_fraction",
            ]
        )
        for (task, pol, seed), res in results.items():
            ttt = res.time_to_target_s
            rows = res.rows()
            summ.writerow(
                [
                    seed,
                    task,
                    pol.value,
                    network,
                    res.metric_name,
                    res.job.target_metric,
                    f"{res.total_s:.3f}",
                    f"{_burst_ms(res):.3f}",
                    "" if ttt is None else f"{ttt:.3f}",
                    f"{res.final_metric:.4f}",
                    res.job.rounds,
                    f"{statistics.fmean(r.delivered_fraction for r in rows):.4f}",
                ]
            )
    with (out / names.faults).open("w", newline="") as fh:
        flt = csv.writer(fh)
        flt.writerow(
            [
                "seed",
                "task",
                "policy",
                "round",
                "kind",
                "value",
                "requested_ms",
                "applied_ms",
                "apply_took_ms",
                "landed_in_round",
                "after_round_first_send_ms",
            ]
        )
        for (task, pol, seed), res in results.items():
            if not res.faults:
                continue
            t0 = res.round_window(0)[0]
            for f in res.faults:
                landed = res.fault_round(f)
                flt.writerow(
                    [
                        seed,
                        task,
                        pol.value,
                        f.round,
                        f.kind,
                        f"{f.value:g}",
                        f"{(f.requested_mono - t0) * 1e3:.3f}",
                        f"{(f.applied_mono - t0) * 1e3:.3f}",
                        f"{(f.applied_mono - f.requested_mono) * 1e3:.3f}",
                        landed,
                        f"{(f.applied_mono - res.round_window(landed)[0]) * 1e3:.3f}",
                    ]
                )
    with (out / names.figures).open("w", newline="") as fh:
        fig = csv.DictWriter(fh, fieldnames=FIGURE_COLUMNS)
        fig.writeheader()
        for row in _figure_rows(figures, network):
            fig.writerow({k: f"{v:.4f}" if isinstance(v, float) else v for k, v in row.items()})


def report(figures: Figures, results: Results) -> str:
    """The console table: each figure as mean ± 95 % CI over seeds beside the paper's."""
    seeds = sorted({s for _, _, s in results})
    lines = [
        "",
        f"per run ({len(seeds)} seeds): training time s / final metric",
        f"{'task':<19} {'policy':<9} " + " ".join(f"{'seed ' + str(s):>15}" for s in seeds),
    ]
    for task in dict.fromkeys(t for t, _, _ in results):
        for pol in POLICIES:
            cells = []
            for s in seeds:
                res = results.get((task, pol, s))
                cells.append(
                    f"{res.total_s:7.1f}/{res.final_metric:.3f}" if res is not None else "-"
                )
            lines.append(f"{task:<19} {pol.value:<9} " + " ".join(f"{c:>15}" for c in cells))
    levels = ", ".join(
        f"{lvl:g} %: {s.mean:.2f}x (n={s.n})" for lvl, s in figures.speedup_by_level().items()
    )
    relaxed = [b for b in figures.bursts if b.relaxed]
    lines += [
        "",
        "latency of a round: the slowest worker's first send -> last byte of the average",
        "figure (mean ± 95 % CI over seeds)            measured"
        "                         paper (DBLP, arXiv 2605.01989)",
        f"burst-round speed-up T_fixed/T_dblp          "
        f"{figures.summary('speedup_x').format('.2f', 'x'):<32} {PAPER['burst_speedup_x']}",
        f"  every burst (n={len(figures.bursts)}): max {figures.speedup_max_x:.2f}x; by level: "
        f"{levels}",
        f"  bursts where DBLP ran at P_high ({len(relaxed)} of {len(figures.bursts)}; in a "
        f"critical phase DBLP uses P_low, like the baseline): "
        f"{summarize(b.speedup_x for b in relaxed).format('.2f', 'x')}",
        f"  vs P = 0: {summarize(b.speedup_vs_reliable_x for b in figures.bursts).format('.2f', 'x')}",
    ]
    for task in figures.tasks():
        acc = figures.metric_name[task] == "accuracy"
        lines += [
            f"{task}:",
            f"  training time, 1 - T_dblp/T_fixed       "
            f"{figures.summary('time_reduction_pct', task).format('.1f', ' %'):<32} "
            f"{PAPER['training_time_reduction_pct']}",
            f"  training time, T_fixed/T_dblp - 1       "
            f"{figures.summary('time_slowdown_pct', task).format('.1f', ' %'):<32} "
            f"{PAPER['training_time_slowdown_pct']}",
            f"  without burst rounds, T_fixed/T_dblp - 1 "
            f"{figures.summary('calm_slowdown_pct', task).format('.1f', ' %'):<32}"
            f"{PAPER['calm_slowdown_pct']}",
            f"  vs P = 0, 1 - T_dblp/T_reliable         "
            f"{figures.summary('reliable_reduction_pct', task).format('.1f', ' %')}",
            (
                "  accuracy difference DBLP - fixed        "
                if acc
                else "  perplexity difference DBLP - fixed      "
            )
            + f"{figures.summary('metric_difference', task).format('+.2f', ' pp' if acc else ''):<32} "
            + (PAPER["accuracy_difference_pp"] if acc else "+0.048 (GPT-2-S)"),
        ]
    return "\n".join(lines)


# -- runners ---------------------------------------------------------------------------------


def emu_runner(background_loss: float) -> Runner:
    from host.train.cluster import EmuCluster
    from host.train.run import run_emu_job

    def run(job: JobSpec) -> JobResult:
        with EmuCluster(seed=job.seed) as cl:
            return run_emu_job(job, cl, background_loss=background_loss)

    return run


def fabric_runner(
    state: FabricState, results: pathlib.Path, background_loss: float
) -> tuple[Runner, Callable[[], None]]:
    from experiments.fabric_job import ControllerActions, run_fabric_job

    actions = ControllerActions(state, results, background_loss * 100.0)
    runs = results / "microburst_runs"

    def run(job: JobSpec) -> JobResult:
        where = runs / f"{job.task}-{job.policy.value}-seed{job.seed}"
        return run_fabric_job(job, state, where, actions)

    return run, actions.close


def run_experiment(
    tasks: Sequence[str],
    runner: Runner,
    *,
    seeds: Iterable[int],
    rounds: int | None = None,
    levels: Sequence[float] = BURST_LEVELS_PCT,
    per_run: Sequence[int] = BURSTS_PER_RUN,
    policies: Sequence[LossPolicy] = POLICIES,
    log: Callable[[str], None] = print,
) -> Results:
    """Every (seed, task, policy) job. A job that fails is reported and left out (its seed's
    figures then drop out of the pairing); the others still run."""
    results: Results = {}
    for seed in seeds:
        for task in tasks:
            settings = TASK_SETTINGS[task]
            if rounds is not None:
                settings = dataclasses.replace(settings, rounds=rounds)
            n = settings.rounds
            events = burst_schedule(n, seed, levels=levels, per_run=per_run)
            log(
                f"seed {seed}, {task}: {n} rounds, bursts "
                + ", ".join(f"{e.value:g} % at round {e.round}" for e in events)
            )
            for pol in policies:
                job = dataclasses.replace(settings, policy=pol, seed=seed, events=events)
                t0 = time.monotonic()
                try:
                    res = runner(job)
                except RoundFailed as e:
                    log(f"  {pol.value:<9} FAILED: {e}")
                    continue
                results[(task, pol, seed)] = res
                bursts = [r for r in res.rows() if r.burst_loss_pct > 0]
                log(
                    f"  {pol.value:<9} {time.monotonic() - t0:6.1f} s wall, train "
                    f"{res.total_s:6.1f} s, {res.metric_name} {res.final_metric:.4f}, burst "
                    "rounds " + " ".join(f"{r.latency_ms:.0f}ms" for r in bursts)
                )
    return results


DEFAULT_TASKS = {"emu": "digits-mlp,chars-transformer", "fabric": "digits-mlp"}
"""What ``--tasks`` defaults to per network."""
DEFAULT_ROUNDS = {"emu": None, "fabric": 90}
"""``--rounds`` per network (None: the task's own, 150). On the fabric a calm round moves at
least 6 × 128 packets through the switches and the Python agents (0.3–0.5 s at 20 and at 200
Mbit/s alike: the hosts' per-packet work and the protocol's timers bound it, not the link) and
a burst round up to a minute, so runs there are 6 digits epochs; the bursts keep the paper's
density of 2–3 per run."""


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m experiments.microburst", description=__doc__.split("\n\n")[0]
    )
    add_network_option(ap)
    ap.add_argument(
        "--tasks",
        default=None,
        help=f"comma-separated, from: {', '.join(TASK_SETTINGS)} (default: {DEFAULT_TASKS})",
    )
    ap.add_argument("--rounds", type=int, default=None, help="override every task's rounds")
    ap.add_argument(
        "--bursts",
        default=",".join(f"{x:g}" for x in BURST_LEVELS_PCT),
        help="burst loss levels in percent; each burst draws one",
    )
    ap.add_argument(
        "--bursts-per-run",
        default=",".join(str(x) for x in BURSTS_PER_RUN),
        help="how many bursts a run has (drawn per seed from these)",
    )
    ap.add_argument(
        "--background-loss",
        type=float,
        default=0.01,
        help="loss probability on every path outside bursts",
    )
    ap.add_argument(
        "--link-mbps",
        type=float,
        default=LINK_MBPS,
        help="link rate (Mbit/s) of a fabric the experiment brings up itself",
    )
    ap.add_argument(
        "--queue-depth",
        type=int,
        default=QUEUE_DEPTH,
        help="switch queue depth (packets) of a fabric the experiment brings up",
    )
    ap.add_argument("--seeds", type=int, default=SEEDS, help="seeds 1..N, each a full run")
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument(
        "--wait-s", type=float, default=0.0, help="wait this long for another fabric to go away"
    )
    ap.add_argument("--results", default="results")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    network = choose_network(args.network)
    tasks = [t for t in (args.tasks or DEFAULT_TASKS[network]).split(",") if t]
    unknown = [t for t in tasks if t not in TASK_SETTINGS]
    if unknown:
        print(
            f"unknown task(s) {', '.join(unknown)}; valid: {', '.join(TASK_SETTINGS)}",
            file=sys.stderr,
        )
        return 2
    if args.seeds < 1:
        print("--seeds must be at least 1", file=sys.stderr)
        return 2
    if not args.link_mbps > 0:
        print(f"--link-mbps must be positive, got {args.link_mbps:g}", file=sys.stderr)
        return 2
    try:
        levels = [float(x) for x in args.bursts.split(",") if x]
        per_run = [int(x) for x in args.bursts_per_run.split(",") if x]
    except ValueError as e:
        print(f"--bursts / --bursts-per-run: comma-separated numbers ({e})", file=sys.stderr)
        return 2
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    out = pathlib.Path(args.results)
    print(
        f"microburst experiment on the {network} network: policies "
        f"{', '.join(p.value for p in POLICIES)}; {args.seeds} seeds; background loss "
        f"{args.background_loss:.1%}; gradients in >= {MIN_CHUNKS} chunks"
    )
    try:
        with contextlib.ExitStack() as stack:
            if network == "emu":
                runner = emu_runner(args.background_loss)
            else:
                state = stack.enter_context(
                    FabricSession(
                        out,
                        link_mbps=args.link_mbps,
                        queue_depth=args.queue_depth,
                        wait_s=args.wait_s,
                    )
                )
                runner, close = fabric_runner(state, out, args.background_loss)
                stack.callback(close)
            rounds = args.rounds if args.rounds is not None else DEFAULT_ROUNDS[network]
            results = run_experiment(
                tasks, runner, seeds=seeds, rounds=rounds, levels=levels, per_run=per_run
            )
    except (FabricNotReady, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if not results:
        print("error: no run finished", file=sys.stderr)
        return 1
    figures = compute_figures(results)
    names = CsvNames()
    write_csvs(out, results, figures, network, names)
    from experiments.plot import plot_microburst

    png = plot_microburst(out / names.latency, out / names.summary, out / names.plot)
    print(report(figures, results))
    print(
        f"\nwrote {out / names.latency}, {out / names.summary}, {out / names.faults}, "
        f"{out / names.figures}, {png}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
