"""The microburst experiment (``make exp-microburst``): DBLP vs fixed P vs P = 0 under bursts.

For each task, each policy trains the same job (same seed, data and burst schedule) while the
network suffers a transient 60 / 70 / 80 / 90 % loss burst, each for exactly one round's
communication, at random rounds (seeded; the same rounds for every policy). Writes

* ``results/microburst_latency.csv``: one row per round (task, policy, round, burst loss,
  latency, delivered fraction, P, train loss);
* ``results/training_summary.csv``: per task and policy the total training time, time to the
  target metric and the final metric;
* ``results/microburst_figures.csv``: the headline figures next to the paper's;
* ``results/microburst.png`` (:mod:`experiments.plot`, from the CSVs only);

and prints the burst-round speed-up, the training-time reduction and the accuracy difference
next to DBLP's published figures (5.88×, 24.4 % / 33.9 %, ≤ 0.5 pp).

``--network emu`` (default) runs every host in this process on the emulated fabric (uniform
loss on every path); ``--network fabric`` runs one agent per host of the fabric that
``make fabric-up`` started, bursts injected by the controller on every host-facing leaf port.
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from experiments.fabric_job import FabricNotReady, FabricSession, fabric_available
from experiments.hosts import FabricState
from host.dblp.config import LossPolicy
from host.dblp.errors import RoundFailed
from host.train.job import EventKind, JobEvent, JobSpec
from host.train.run import JobResult

PAPER = {
    "burst_speedup_x": 5.88,
    "training_time_reduction_avg_pct": 24.4,
    "training_time_reduction_max_pct": 33.9,
    "accuracy_difference_max_pp": 0.5,
}
"""DBLP's published figures (arXiv 2605.01989 abstract; accuracy: Table IX, CNNs)."""

POLICIES = (LossPolicy.DBLP, LossPolicy.FIXED, LossPolicy.RELIABLE)
BURST_LEVELS_PCT = (60.0, 70.0, 80.0, 90.0)

TASK_SETTINGS: dict[str, JobSpec] = {
    "digits-mlp": JobSpec("digits-mlp", rounds=150, optimizer="sgd", lr=0.1, target_metric=0.90),
    "digits-cnn": JobSpec("digits-cnn", rounds=150, optimizer="sgd", lr=0.1, target_metric=0.90),
    "chars-transformer": JobSpec(
        "chars-transformer", rounds=150, optimizer="adam", lr=3e-3, target_metric=14.0
    ),
}
"""Per task: rounds, optimizer and the target metric of "time to target" (the job of every
policy and burst schedule starts from these)."""


Runner = Callable[[JobSpec], JobResult]


def burst_schedule(
    rounds: int, levels: Sequence[float], seed: int, first_fraction: float = 0.2
) -> tuple[JobEvent, ...]:
    """One burst per level at distinct random rounds in ``[first_fraction·rounds, rounds)``,
    at least 3 rounds apart (seeded: every policy sees the same schedule)."""
    rng = random.Random(seed)
    lo = max(1, int(rounds * first_fraction))
    for _ in range(1000):
        picks = sorted(rng.sample(range(lo, rounds), len(levels)))
        if all(b - a >= 3 for a, b in zip(picks, picks[1:])):
            break
    order = list(levels)
    rng.shuffle(order)
    return tuple(JobEvent(r, EventKind.BURST, lvl) for r, lvl in zip(picks, order))


@dataclass(frozen=True)
class Figures:
    """The headline numbers of one experiment (DBLP against the fixed-P baseline)."""

    speedup_mean_x: float
    speedup_max_x: float
    speedup_by_level_x: dict[float, float]
    speedup_relaxed_mean_x: float  # bursts that hit a round where DBLP ran at P_high
    bursts_relaxed: int
    bursts: int
    time_reduction_pct: dict[str, float]  # per task
    time_reduction_vs_reliable_pct: dict[str, float]
    calm_time_reduction_pct: dict[str, float]  # per task, the burst rounds' latency left out
    accuracy_difference_pp: dict[str, float]  # classification tasks: DBLP - fixed
    perplexity_difference: dict[str, float]  # language tasks: DBLP - fixed

    @property
    def time_reduction_avg_pct(self) -> float:
        return statistics.fmean(self.time_reduction_pct.values())

    @property
    def time_reduction_max_pct(self) -> float:
        return max(self.time_reduction_pct.values())


def compute_figures(results: dict[tuple[str, LossPolicy], JobResult]) -> Figures:
    ratios: list[tuple[float, float]] = []  # (level, fixed / dblp)
    relaxed: list[float] = []
    red: dict[str, float] = {}
    red_rel: dict[str, float] = {}
    calm: dict[str, float] = {}
    acc: dict[str, float] = {}
    ppl: dict[str, float] = {}
    for task in sorted({t for t, _ in results}):
        d, f = results[(task, LossPolicy.DBLP)], results[(task, LossPolicy.FIXED)]
        drows, frows = d.rows(), f.rows()
        for dr, fr in zip(drows, frows):
            if dr.burst_loss_pct > 0 and dr.latency_ms > 0:
                ratios.append((dr.burst_loss_pct, fr.latency_ms / dr.latency_ms))
                if dr.loss_bound > fr.loss_bound:
                    relaxed.append(fr.latency_ms / dr.latency_ms)
        red[task] = 100.0 * (1.0 - d.total_s / f.total_s)
        d_burst = sum(r.latency_ms for r in drows if r.burst_loss_pct > 0) / 1e3
        f_burst = sum(r.latency_ms for r in frows if r.burst_loss_pct > 0) / 1e3
        calm[task] = 100.0 * (1.0 - (d.total_s - d_burst) / (f.total_s - f_burst))
        rel = results.get((task, LossPolicy.RELIABLE))
        if rel is not None:
            red_rel[task] = 100.0 * (1.0 - d.total_s / rel.total_s)
        if d.metric_name == "accuracy":
            acc[task] = 100.0 * (d.final_metric - f.final_metric)
        else:
            ppl[task] = d.final_metric - f.final_metric
    by_level = {
        lvl: statistics.fmean(r for lv, r in ratios if lv == lvl)
        for lvl in sorted({lv for lv, _ in ratios})
    }
    vals = [r for _, r in ratios] or [math.nan]
    return Figures(
        statistics.fmean(vals),
        max(vals),
        by_level,
        statistics.fmean(relaxed) if relaxed else math.nan,
        len(relaxed),
        len(ratios),
        red,
        red_rel,
        calm,
        acc,
        ppl,
    )


@dataclass(frozen=True)
class CsvNames:
    """File names of one experiment's outputs (under its results directory)."""

    latency: str = "microburst_latency.csv"
    summary: str = "training_summary.csv"
    figures: str = "microburst_figures.csv"
    plot: str = "microburst.png"


def write_csvs(
    out: pathlib.Path,
    results: dict[tuple[str, LossPolicy], JobResult],
    figures: Figures,
    network: str,
    names: CsvNames = CsvNames(),
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with (out / names.latency).open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(
            [
                "task",
                "policy",
                "round",
                "burst_loss_pct",
                "latency_ms",
                "delivered_fraction",
                "loss_bound",
                "train_loss",
            ]
        )
        for (task, _), res in results.items():
            for r in res.rows():
                w.writerow(
                    [
                        task,
                        r.policy,
                        r.round,
                        f"{r.burst_loss_pct:g}",
                        f"{r.latency_ms:.3f}",
                        f"{r.delivered_fraction:.4f}",
                        f"{r.loss_bound:.4f}",
                        f"{r.train_loss:.5f}",
                    ]
                )
    with (out / names.summary).open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(
            [
                "task",
                "policy",
                "network",
                "metric",
                "target",
                "total_time_s",
                "time_to_target_s",
                "final_metric",
                "rounds",
                "mean_delivered_fraction",
            ]
        )
        for (task, pol), res in results.items():
            ttt = res.time_to_target_s
            rows = res.rows()
            w.writerow(
                [
                    task,
                    pol.value,
                    network,
                    res.metric_name,
                    res.job.target_metric,
                    f"{res.total_s:.3f}",
                    "" if ttt is None else f"{ttt:.3f}",
                    f"{res.final_metric:.4f}",
                    res.job.rounds,
                    f"{statistics.fmean(r.delivered_fraction for r in rows):.4f}",
                ]
            )
    with (out / names.figures).open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["figure", "measured", "paper", "network"])
        w.writerow(["burst_speedup_mean_x", f"{figures.speedup_mean_x:.3f}", "", network])
        w.writerow(
            [
                "burst_speedup_max_x",
                f"{figures.speedup_max_x:.3f}",
                PAPER["burst_speedup_x"],
                network,
            ]
        )
        for lvl, x in figures.speedup_by_level_x.items():
            w.writerow([f"burst_speedup_{lvl:g}pct_x", f"{x:.3f}", "", network])
        w.writerow(
            ["burst_speedup_at_p_high_mean_x", f"{figures.speedup_relaxed_mean_x:.3f}", "", network]
        )
        w.writerow(
            [
                "training_time_reduction_avg_pct",
                f"{figures.time_reduction_avg_pct:.2f}",
                PAPER["training_time_reduction_avg_pct"],
                network,
            ]
        )
        w.writerow(
            [
                "training_time_reduction_max_pct",
                f"{figures.time_reduction_max_pct:.2f}",
                PAPER["training_time_reduction_max_pct"],
                network,
            ]
        )
        for task, pct in figures.calm_time_reduction_pct.items():
            w.writerow(
                [
                    f"training_time_reduction_without_burst_rounds_pct_{task}",
                    f"{pct:.2f}",
                    "17.4 (EfficientNetB0, no burst)",
                    network,
                ]
            )
        for task, pp in figures.accuracy_difference_pp.items():
            w.writerow(
                [
                    f"accuracy_difference_pp_{task}",
                    f"{pp:.2f}",
                    f"<= {PAPER['accuracy_difference_max_pp']}",
                    network,
                ]
            )
        for task, d in figures.perplexity_difference.items():
            w.writerow([f"perplexity_difference_{task}", f"{d:.3f}", "", network])


def report(figures: Figures, results: dict[tuple[str, LossPolicy], JobResult]) -> str:
    lines = ["", "policy        task                total s  to target s  final"]
    for (task, pol), res in results.items():
        ttt = res.time_to_target_s
        lines.append(
            f"{pol.value:<13} {task:<19} {res.total_s:7.1f}  "
            f"{'never' if ttt is None else f'{ttt:.1f}':>11}  "
            f"{res.metric_name} {res.final_metric:.4f}"
        )
    levels = ", ".join(f"{lvl:g} %: {x:.2f}x" for lvl, x in figures.speedup_by_level_x.items())
    lines += [
        "",
        "figure                              measured             paper (DBLP, arXiv 2605.01989)",
        f"burst-round speed-up vs fixed P     mean {figures.speedup_mean_x:.2f}x, "
        f"max {figures.speedup_max_x:.2f}x   up to {PAPER['burst_speedup_x']}x",
        f"  by burst level                    {levels}",
        f"  bursts in rounds where DBLP ran at P_high ({figures.bursts_relaxed} of "
        f"{figures.bursts}): mean {figures.speedup_relaxed_mean_x:.2f}x "
        f"(in a critical phase DBLP uses P_low like the baseline)",
        f"training-time reduction vs fixed P  avg {figures.time_reduction_avg_pct:.1f} %, "
        f"max {figures.time_reduction_max_pct:.1f} %   "
        f"{PAPER['training_time_reduction_avg_pct']} % avg / "
        f"{PAPER['training_time_reduction_max_pct']} % max",
    ]
    for task, r in figures.time_reduction_vs_reliable_pct.items():
        lines.append(f"  vs P = 0 ({task})  {r:.1f} %")
    for task, r in figures.calm_time_reduction_pct.items():
        lines.append(
            f"  without the burst rounds ({task})  {r:.1f} %   "
            f"(paper, no bursts: 17.4 % EfficientNetB0, 17.5 % ResNet50)"
        )
    for task, pp in figures.accuracy_difference_pp.items():
        lines.append(
            f"accuracy difference ({task})   {pp:+.2f} pp"
            f"{'':14}<= {PAPER['accuracy_difference_max_pp']} pp"
        )
    for task, d in figures.perplexity_difference.items():
        lines.append(f"perplexity difference ({task})  {d:+.3f}")
    return "\n".join(lines)


# -- runners ---------------------------------------------------------------------------------


def emu_runner(background_loss: float, seed: int) -> Runner:
    from host.train.cluster import EmuCluster
    from host.train.run import run_emu_job

    def run(job: JobSpec) -> JobResult:
        with EmuCluster(seed=seed) as cl:
            return run_emu_job(job, cl, background_loss=background_loss)

    return run


def fabric_runner(
    state: FabricState, results: pathlib.Path, background_loss: float
) -> tuple[Runner, Callable[[], None]]:
    from experiments.fabric_job import ControllerActions, run_fabric_job

    actions = ControllerActions(state, results, background_loss * 100.0)
    runs = results / "microburst_runs"

    def run(job: JobSpec) -> JobResult:
        return run_fabric_job(job, state, runs / f"{job.task}-{job.policy.value}", actions)

    return run, actions.close


def run_experiment(
    tasks: Sequence[str],
    runner: Runner,
    *,
    rounds: int | None,
    seed: int,
    levels: Sequence[float],
    policies: Sequence[LossPolicy] = POLICIES,
    log: Callable[[str], None] = print,
) -> dict[tuple[str, LossPolicy], JobResult]:
    results: dict[tuple[str, LossPolicy], JobResult] = {}
    for task in tasks:
        settings = TASK_SETTINGS[task]
        if rounds is not None:
            settings = dataclasses.replace(settings, rounds=rounds)
        n = settings.rounds
        events = burst_schedule(n, levels, seed)
        log(
            f"{task}: {n} rounds, bursts "
            + ", ".join(f"{e.value:g} % at round {e.round}" for e in events)
        )
        for pol in policies:
            job = dataclasses.replace(settings, policy=pol, seed=seed, events=events)
            t0 = time.monotonic()
            res = runner(job)
            results[(task, pol)] = res
            bursts = [r for r in res.rows() if r.burst_loss_pct > 0]
            log(
                f"  {pol.value:<9} {time.monotonic() - t0:6.1f} s wall, train {res.total_s:6.1f} s, "
                f"{res.metric_name} {res.final_metric:.4f}, burst rounds "
                + " ".join(f"{r.latency_ms:.0f}ms" for r in bursts)
            )
    return results


DEFAULT_TASKS = {"emu": "digits-mlp,chars-transformer", "fabric": "digits-mlp,digits-cnn"}
"""What ``--tasks`` defaults to per network (the Python switches carry the transformer's
91-chunk gradients slowly; ask for it with ``--tasks``)."""


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m experiments.microburst", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument(
        "--network",
        choices=("auto", "emu", "fabric"),
        default="auto",
        help="auto: the fabric when this machine can run it (root, Mininet), else the emulator",
    )
    ap.add_argument(
        "--tasks",
        default=None,
        help=f"comma-separated, from: {', '.join(TASK_SETTINGS)} (default: {DEFAULT_TASKS})",
    )
    ap.add_argument("--rounds", type=int, default=None, help="override every task's rounds")
    ap.add_argument(
        "--bursts",
        default=",".join(f"{x:g}" for x in BURST_LEVELS_PCT),
        help="burst loss levels in percent, one burst each",
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
        default=20.0,
        help="link rate of a fabric the experiment brings up itself",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--results", default="results")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    network = args.network
    if network == "auto":
        why = fabric_available()
        network = "fabric" if why is None else "emu"
        if why is not None:
            print(f"note: {why}; running on the in-process emulated fabric (--network emu)")
    tasks = [t for t in (args.tasks or DEFAULT_TASKS[network]).split(",") if t]
    unknown = [t for t in tasks if t not in TASK_SETTINGS]
    if unknown:
        print(
            f"unknown task(s) {', '.join(unknown)}; valid: {', '.join(TASK_SETTINGS)}",
            file=sys.stderr,
        )
        return 2
    levels = [float(x) for x in args.bursts.split(",") if x]
    out = pathlib.Path(args.results)
    print(
        f"microburst experiment on the {network} network: policies "
        f"{', '.join(p.value for p in POLICIES)}; background loss {args.background_loss:.1%}"
    )
    try:
        with contextlib.ExitStack() as stack:
            if network == "emu":
                runner = emu_runner(args.background_loss, args.seed)
            else:
                state = stack.enter_context(FabricSession(out, link_mbps=args.link_mbps))
                runner, close = fabric_runner(state, out, args.background_loss)
                stack.callback(close)
            results = run_experiment(
                tasks, runner, rounds=args.rounds, seed=args.seed, levels=levels
            )
    except (FabricNotReady, RoundFailed) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    figures = compute_figures(results)
    names = CsvNames()
    write_csvs(out, results, figures, network, names)
    from experiments.plot import plot_microburst

    png = plot_microburst(out / names.latency, out / names.summary, out / names.plot)
    print(report(figures, results))
    print(f"\nwrote {out / names.latency}, {out / names.summary}, {out / names.figures}, {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
