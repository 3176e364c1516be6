"""``make demo``: DBLP over MRC on the default fabric, with one microburst and one plane failure.

Brings up the default fabric (2 planes × 2 leaves × 2 spines, 4 hosts, Python P4 switches at
``--link-mbps``) unless one is running, starts a training agent in each host (the parameter
server on h1, workers on h2–h4: the digits MLP, data-parallel, gradients exchanged with DBLP
over MRC's sprayed unreliable mode), and while it trains the network suffers a 90 % loss
burst for exactly one round's communication (both directions) and then loses plane 1 for
good: the controller fails it while a round's communication runs (triggered as the round
starts, applied on the fault scheduler's own clock). The same jobs run with the phase-aware
DBLP policy, the fixed-P baseline and P = 0, under ``--seeds`` seeds. Writes
``results/demo/`` ``rounds.csv``, ``summary.csv``, ``faults.csv``, ``figures.csv`` and
``demo.png``, prints a summary (mean ± 95 % CI over seeds) and takes the fabric down again.
Without root or Mininet it runs the same jobs on the in-process emulated fabric instead, and
says so. ``--quick``: 20 rounds, one seed, DBLP and fixed P only (what the busy-machine test
runs).

A round's latency is the slowest worker's time from its first send of the round to the last
byte of the averaged result received (README "DBLP").
"""

from __future__ import annotations

import argparse
import contextlib
import pathlib
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from experiments.cli_common import add_network_option, choose_network
from experiments.fabric_job import (
    ControllerActions,
    FabricNotReady,
    FabricSession,
    run_fabric_job,
)
from experiments.microburst import (
    DIGITS_EPOCH_ROUNDS,
    LINK_MBPS,
    MIN_CHUNKS,
    QUEUE_DEPTH,
    CsvNames,
    Results,
    compute_figures,
    write_csvs,
)
from experiments.plot import plot_microburst
from experiments.stats import summarize
from host.dblp.config import LossPolicy, PhaseConfig
from host.dblp.errors import RoundFailed
from host.train.job import EventKind, JobEvent, JobSpec
from host.train.loop import ServerRecord, WorkerRound
from host.train.run import JobResult

DEMO_ROUNDS = 60
QUICK_ROUNDS = 20
BURST_AT, BURST_PCT = 0.8, 90.0
"""The burst's round, as a fraction of the run: after the digits MLP's critical early epochs
(DBLP's detector, checking once per 15-round epoch, relaxes P after about 45 rounds)."""
FAIL_AT, FAIL_PLANE = 0.9, 1
POLICIES = (LossPolicy.DBLP, LossPolicy.FIXED, LossPolicy.RELIABLE)
QUICK_POLICIES = (LossPolicy.DBLP, LossPolicy.FIXED)
NAMES = CsvNames("rounds.csv", "summary.csv", "figures.csv", "faults.csv", "demo.png")
TASK = "digits-mlp"
FAILURE_TARGET_X = 3.0
"""The round a plane fails in may take at most this many times the median round."""


def demo_job(policy: LossPolicy, rounds: int, seed: int) -> JobSpec:
    burst, fail = int(rounds * BURST_AT), int(rounds * FAIL_AT)
    return JobSpec(
        task=TASK,
        rounds=rounds,
        policy=policy,
        lr=0.1,
        target_metric=0.9,
        seed=seed,
        min_chunks=MIN_CHUNKS,
        eval_every=max(1, rounds // 10),
        phase=PhaseConfig(check_every_rounds=DIGITS_EPOCH_ROUNDS),
        events=(
            JobEvent(burst, EventKind.BURST, BURST_PCT),
            JobEvent(fail, EventKind.FAIL_PLANE, FAIL_PLANE),
        ),
    )


def _progress(policy: LossPolicy, job: JobSpec) -> Callable[[dict[str, Any]], None]:
    marks = {e.round: e for e in job.events}

    def show(ev: dict[str, Any]) -> None:
        r = ev.get("round")
        if not isinstance(r, int):
            return
        note = ""
        if r in marks:
            e = marks[r]
            note = (
                f"  <- {e.value:g} % loss burst"
                if e.kind is EventKind.BURST
                else f"  <- plane {int(e.value)} fails"
            )
        if r % 20 == 0 or note or r == job.rounds - 1:
            print(
                f"  [{policy.value} seed {job.seed}] round {r:3d}: P = {ev['bound']:.3f}, "
                f"latency {ev['latency_ms']:8.1f} ms, delivered "
                f"{ev['delivered_fraction']:.2f}{note}",
                flush=True,
            )

    return show


class _EmuProgress:
    """The emulator runner's round callbacks, shown like the fabric driver's round lines."""

    def __init__(self, workers: int, show: Callable[[dict[str, Any]], None]) -> None:
        self.workers = workers
        self.show = show
        self.rounds: dict[int, dict[str, Any]] = {}

    def __call__(self, kind: str, rec: object) -> None:
        if isinstance(rec, ServerRecord):
            r = self.rounds.setdefault(rec.round, {"latencies": []})
            r.update(bound=rec.loss_bound, delivered_fraction=rec.delivered_fraction)
            self._done(rec.round)
        elif isinstance(rec, WorkerRound):
            r = self.rounds.setdefault(rec.round, {"latencies": []})
            r["latencies"].append(rec.allreduce_ms)
            self._done(rec.round)

    def _done(self, round_: int) -> None:
        r = self.rounds[round_]
        if len(r["latencies"]) == self.workers and "bound" in r:
            del self.rounds[round_]
            self.show({"round": round_, "latency_ms": max(r.pop("latencies")), **r})


def failure_round(res: JobResult) -> int:
    """The round whose communication the plane failure hit."""
    fault = next(f for f in res.faults if f.kind == EventKind.FAIL_PLANE.value)
    return res.fault_round(fault)


def summary(
    results: Results,
    network: str,
    wall_s: float,
    policies: Sequence[LossPolicy] = POLICIES,
) -> str:
    """The demo's table: per policy, mean ± 95 % CI over seeds."""
    seeds = sorted({s for _, _, s in results})
    fig = compute_figures(results)
    lines = [
        "",
        f"DBLP over MRC on the {network}: digits MLP, 3 workers + 1 parameter server, "
        f"{len(seeds)} seed(s); latency = slowest worker's first send -> last byte of the average",
        "mean ± 95 % CI half-width over seeds" if len(seeds) > 1 else "one seed",
    ]
    header = f"{'':44}" + "".join(f"{p.value:>20}" for p in policies)
    lines.append(header)

    def row(label: str, value: Callable[[JobResult], float], fmt: str) -> str:
        cells = []
        for pol in policies:
            vals = [value(results[(TASK, pol, s)]) for s in seeds if (TASK, pol, s) in results]
            cells.append(summarize(vals).short(fmt))
        return f"{label:<44}" + "".join(f"{c:>20}" for c in cells)

    def burst_ms(res: JobResult) -> float:
        return next(r.latency_ms for r in res.rows() if r.burst_loss_pct > 0)

    def calm_median_ms(res: JobResult) -> float:
        return statistics.median(
            r.latency_ms for r in res.rows() if r.burst_loss_pct == 0 and not r.faults
        )

    def failed_ms(res: JobResult) -> float:
        return res.rows()[failure_round(res)].latency_ms

    def failed_x(res: JobResult) -> float:
        return failed_ms(res) / calm_median_ms(res)

    lines += [
        row(f"burst round ({BURST_PCT:g} % loss), ms", burst_ms, ".0f"),
        row("median calm round, ms", calm_median_ms, ".0f"),
        row(f"round plane {FAIL_PLANE} failed in, ms", failed_ms, ".0f"),
        row("  ... / median calm round (target <= 3)", failed_x, ".2f"),
        row("training time, s", lambda r: r.total_s, ".1f"),
        row("final test accuracy", lambda r: r.final_metric, ".3f"),
        "",
        "DBLP vs fixed P: burst-round speed-up "
        + fig.summary("speedup_x").format(".2f", "x")
        + " (paper: 4.00-5.97x); training time 1 - T_dblp/T_fixed "
        + fig.summary("time_reduction_pct").format(".1f", " %")
        + ", T_fixed/T_dblp - 1 "
        + fig.summary("time_slowdown_pct").format(".1f", " %")
        + "; accuracy DBLP - fixed "
        + fig.summary("metric_difference").format("+.2f", " pp")
        + " (paper: within 0.5 pp)",
        f"demo wall time {wall_s:.0f} s",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m experiments.demo", description=__doc__.split("\n\n")[0]
    )
    add_network_option(ap)
    ap.add_argument("--rounds", type=int, default=DEMO_ROUNDS)
    ap.add_argument("--seeds", type=int, default=1, help="seeds 1..N, each runs every policy")
    ap.add_argument(
        "--quick", action="store_true", help=f"{QUICK_ROUNDS} rounds, one seed, DBLP and fixed P"
    )
    ap.add_argument(
        "--link-mbps",
        type=float,
        default=LINK_MBPS,
        help="link rate (Mbit/s) of a fabric the demo brings up itself",
    )
    ap.add_argument("--results", default="results")
    ap.add_argument(
        "--wait-s", type=float, default=0.0, help="wait this long for another fabric to go away"
    )
    args = ap.parse_args(argv)
    policies: Sequence[LossPolicy] = POLICIES
    if args.quick:
        args.rounds, args.seeds, policies = QUICK_ROUNDS, 1, QUICK_POLICIES
    if args.rounds < 10 or args.seeds < 1:
        print("need --rounds >= 10 and --seeds >= 1", file=sys.stderr)
        return 2
    if not args.link_mbps > 0:
        print(f"--link-mbps must be positive, got {args.link_mbps:g}", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    results_dir = pathlib.Path(args.results)
    out = results_dir / "demo"
    network = choose_network(args.network, "running the demo on the in-process emulated fabric")
    results: Results = {}
    try:
        with contextlib.ExitStack() as stack:
            if network == "fabric":
                state = stack.enter_context(
                    FabricSession(
                        results_dir,
                        link_mbps=args.link_mbps,
                        queue_depth=QUEUE_DEPTH,
                        wait_s=args.wait_s,
                    )
                )
                actions = ControllerActions(state, results_dir)
                stack.callback(actions.close)
            for seed in range(1, args.seeds + 1):
                for pol in policies:
                    job = demo_job(pol, args.rounds, seed)
                    print(f"training with the {pol.value} policy, seed {seed} ...", flush=True)
                    show = _progress(pol, job)
                    if network == "fabric":
                        where = out / "runs" / f"{pol.value}-seed{seed}"
                        res = run_fabric_job(job, state, where, actions, progress=show)
                    else:
                        from host.train.cluster import EmuCluster
                        from host.train.run import run_emu_job

                        with EmuCluster(seed=seed) as cl:
                            res = run_emu_job(job, cl, on_round=_EmuProgress(job.workers, show))
                    results[(TASK, pol, seed)] = res
    except (FabricNotReady, RoundFailed) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    figures = compute_figures(results)
    write_csvs(out, results, figures, network, NAMES)
    png = plot_microburst(out / NAMES.latency, out / NAMES.summary, out / NAMES.plot)
    print(summary(results, network, time.monotonic() - t0, policies))
    print(
        f"wrote {out / NAMES.latency}, {out / NAMES.summary}, {out / NAMES.faults}, "
        f"{out / NAMES.figures}, {png}"
    )
    return 0


__all__ = ["demo_job", "failure_round", "main", "summary"]

if __name__ == "__main__":
    sys.exit(main())
