"""``make demo``: DBLP over MRC on the default fabric, with one microburst and one plane failure.

Brings up the default fabric (2 planes × 2 leaves × 2 spines, 4 hosts, Python P4 switches at
``--link-mbps``) unless one is running, starts a training agent in each host (the parameter
server on h1, workers on h2–h4: the digits MLP, data-parallel, gradients exchanged with DBLP
over MRC's sprayed unreliable mode), and while it trains the controller injects a 90 % loss
burst for one round and then fails plane 1 for good. The same job runs once with the
phase-aware DBLP policy and once with the fixed-P baseline. Writes ``results/demo/``
``rounds.csv``, ``summary.csv``, ``figures.csv`` and ``demo.png``, prints a summary and takes
the fabric down again. Without root or Mininet it runs the same jobs on the in-process
emulated fabric instead, and says so.
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

from experiments.fabric_job import (
    ControllerActions,
    FabricNotReady,
    FabricSession,
    fabric_available,
    run_fabric_job,
)
from experiments.microburst import PAPER, CsvNames, compute_figures, write_csvs
from experiments.plot import plot_microburst
from host.dblp.config import LossPolicy
from host.dblp.errors import RoundFailed
from host.train.job import EventKind, JobEvent, JobSpec
from host.train.loop import ServerRecord
from host.train.run import JobResult

DEMO_ROUNDS = 100
BURST_ROUND, BURST_PCT = 60, 90.0
FAIL_ROUND, FAIL_PLANE = 80, 1
POLICIES = (LossPolicy.DBLP, LossPolicy.FIXED)
NAMES = CsvNames("rounds.csv", "summary.csv", "figures.csv", "demo.png")


def demo_job(policy: LossPolicy, rounds: int) -> JobSpec:
    burst, fail = rounds * BURST_ROUND // DEMO_ROUNDS, rounds * FAIL_ROUND // DEMO_ROUNDS
    return JobSpec(
        task="digits-mlp",
        rounds=rounds,
        policy=policy,
        lr=0.1,
        target_metric=0.9,
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
                else f"  <- plane {int(e.value)} failed"
            )
        if r % 20 == 0 or note or r == job.rounds - 1:
            print(
                f"  [{policy.value}] round {r:3d}: P = {ev['bound']:.3f}, "
                f"{ev['latency_ms']:8.1f} ms, delivered {ev['delivered_fraction']:.2f}{note}",
                flush=True,
            )

    return show


def _server_rounds(show: Callable[[dict[str, Any]], None]) -> Callable[[str, object], None]:
    """The emulator runner's round callback, shown like the fabric agents' round events."""

    def note(kind: str, rec: object) -> None:
        if kind == "server" and isinstance(rec, ServerRecord):
            show(
                {
                    "round": rec.round,
                    "bound": rec.loss_bound,
                    "latency_ms": rec.gather_ms + rec.broadcast_ms,
                    "delivered_fraction": rec.delivered_fraction,
                }
            )

    return note


def summary(results: dict[tuple[str, LossPolicy], JobResult], network: str, wall_s: float) -> str:
    fig = compute_figures(results)
    d, f = results[("digits-mlp", LossPolicy.DBLP)], results[("digits-mlp", LossPolicy.FIXED)]
    ev = {e.kind: e.round for e in d.job.events}
    drows, frows = d.rows(), f.rows()
    b, x = ev[EventKind.BURST], ev[EventKind.FAIL_PLANE]
    calm = [r.latency_ms for r in drows[x - 10 : x]]
    lines = [
        "",
        f"DBLP over MRC on the {network}: digits MLP, 3 workers + 1 parameter server, "
        f"{d.job.rounds} rounds",
        f"{'':34}{'DBLP':>12}{'fixed P':>12}",
        f"{'P (loss bound) at the burst':34}{drows[b].loss_bound:>12.3f}{frows[b].loss_bound:>12.3f}",
        f"{f'burst round {b} ({BURST_PCT:g} % loss), ms':34}"
        f"{drows[b].latency_ms:>12.0f}{frows[b].latency_ms:>12.0f}",
        f"{f'plane {FAIL_PLANE} fails at round {x}, ms':34}"
        f"{drows[x].latency_ms:>12.0f}{frows[x].latency_ms:>12.0f}"
        f"   (median of the 10 rounds before: {statistics.median(calm):.0f} ms)",
        f"{'training time, s':34}{d.total_s:>12.1f}{f.total_s:>12.1f}",
        f"{'final test accuracy':34}{d.final_metric:>12.3f}{f.final_metric:>12.3f}",
        "",
        f"burst-round speed-up {fig.speedup_max_x:.2f}x (paper: up to {PAPER['burst_speedup_x']}x); "
        f"training-time reduction {fig.time_reduction_avg_pct:.1f} % "
        f"(paper: {PAPER['training_time_reduction_avg_pct']} % avg, "
        f"{PAPER['training_time_reduction_max_pct']} % max); "
        f"accuracy difference {fig.accuracy_difference_pp['digits-mlp']:+.2f} pp "
        f"(paper: <= {PAPER['accuracy_difference_max_pp']} pp)",
        f"demo wall time {wall_s:.0f} s",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m experiments.demo", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--network", choices=("auto", "emu", "fabric"), default="auto")
    ap.add_argument("--rounds", type=int, default=DEMO_ROUNDS)
    ap.add_argument("--link-mbps", type=float, default=20.0)
    ap.add_argument("--results", default="results")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    results_dir = pathlib.Path(args.results)
    out = results_dir / "demo"
    network = args.network
    if network == "auto":
        why = fabric_available()
        network = "fabric" if why is None else "emu"
        if why is not None:
            print(f"note: {why}; running the demo on the in-process emulated fabric")
    results: dict[tuple[str, LossPolicy], JobResult] = {}
    try:
        with contextlib.ExitStack() as stack:
            if network == "fabric":
                state = stack.enter_context(FabricSession(results_dir, link_mbps=args.link_mbps))
                actions = ControllerActions(state, results_dir)
                stack.callback(actions.close)
            for pol in POLICIES:
                job = demo_job(pol, args.rounds)
                print(f"training with the {pol.value} policy ...", flush=True)
                if network == "fabric":
                    res = run_fabric_job(
                        job, state, out / "runs" / pol.value, actions, progress=_progress(pol, job)
                    )
                else:
                    from host.train.cluster import EmuCluster
                    from host.train.run import run_emu_job

                    with EmuCluster() as cl:
                        res = run_emu_job(job, cl, on_round=_server_rounds(_progress(pol, job)))
                results[("digits-mlp", pol)] = res
    except (FabricNotReady, RoundFailed) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    figures = compute_figures(results)
    write_csvs(out, results, figures, network, NAMES)
    png = plot_microburst(out / NAMES.latency, out / NAMES.summary, out / NAMES.plot)
    print(summary(results, network, time.monotonic() - t0))
    print(f"wrote {out / NAMES.latency}, {out / NAMES.summary}, {out / NAMES.figures}, {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
