"""What the factored gossip experiment (:mod:`experiments.gossip`) measures and reports.

The methods (:data:`METHODS`, the rows of every table), one run's rows of ``gossip.csv``,
``gossip_rounds.csv`` and ``gossip_failure.csv`` (:func:`run_row`, :func:`round_rows`,
:func:`failure_rows`; their columns, units in the names, are :data:`RUN_COLUMNS`,
:data:`ROUND_COLUMNS`, :data:`FAILURE_COLUMNS`), what a method did through the failure
(:func:`failure_figures`), the summary over seeds (:func:`write_summary`:
:mod:`experiments.stats`), the console table beside the paper's (:func:`report`, with the
issue's targets: :func:`target_lines`) and the plot (:func:`plot`), which reads the CSVs only.
"""

from __future__ import annotations

import math
import pathlib
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from experiments import outputs
from experiments.diloco_jobs import JobRun
from experiments.outputs import (
    ci_bars,
    paper_legend,
    paper_mark,
    read_rows,
    save_png,
    write_summary_csv,
)
from experiments.stats import Summary, format_values, summarize, to_float
from host.train.diloco.config import Algorithm, GossipConfig, Mix1Transport, variant
from host.train.tasks import CHARS_M_CONTEXT, CONTEXT

PAPER_UTILIZATION: dict[tuple[float, str], float] = {
    (0.89, "GlobalM1"): 1.00,
    (0.89, "diloco"): 0.53,
    (1.78, "diloco"): 0.36,
    (1.78, "dp"): 0.01,
}
PAPER_PERPLEXITY = {"dp": 17.53, "diloco": 18.65, "GlobalM1LocalM2": 18.80, "GlobalM1": 19.42}
"""The paper's figures (secondary notes of arXiv 2606.22768, /work/shared/research/diloco.md
section 2): utilization at 200 Mbit/s (ratio 0.89) and 100 Mbit/s (1.78); perplexity at 10 B
tokens."""


@dataclass(frozen=True)
class Method:
    """One row of the comparison."""

    name: str
    label: str
    algorithm: Algorithm
    gossip: GossipConfig | None = None


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("dp", "sync DP", Algorithm.DATA_PARALLEL),
        Method("diloco", "DiLoCo", Algorithm.DILOCO),
        Method(
            "GlobalM1",
            "GlobalM1",
            Algorithm.GOSSIP,
            replace(variant("GlobalM1"), mix1_transport=Mix1Transport.ALLREDUCE),
        ),
        Method(
            "GlobalM1LocalM2",
            "GlobalM1LocalM2",
            Algorithm.GOSSIP,
            replace(variant("GlobalM1LocalM2"), mix1_transport=Mix1Transport.ALLREDUCE),
        ),
    )
}
"""The methods, in the order of every table. Mix1 of the global variants is a ring all-reduce
in the background (2(M−1)/M of the model per worker, DiLoCo's bytes); sending every
neighbour its copy would cost (M−1) copies, twice DiLoCo's at M = 4."""

TASK_CONTEXT = {"chars-transformer-m": CHARS_M_CONTEXT, "chars-transformer": CONTEXT}
"""Tokens per training sequence (digits tasks: one image, one token)."""


# -- one run's figures ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Key:
    method: str
    ratio: float
    seed: int


RUN_COLUMNS = (
    "network",
    "method",
    "comm_compute_ratio",
    "link_mbps",
    "seed",
    "workers",
    "inner_steps",
    "rounds",
    "tokens",
    "wall_clock_s",
    "compute_s",
    "compute_utilization",
    "comm_compute_measured",
    "compute_per_step_ms",
    "bytes_per_worker_round",
    "bytes_total",
    "final_loss_nats",
    "final_loss_workers_nats",
    "consensus_rms_l2",
    "js_divergence_nats",
    "mix1_missing",
    "mix2_missing",
    "status",
)
"""``gossip.csv``: one row per method, ratio and seed. ``final_loss_nats``: the average
model's validation loss; ``final_loss_workers_nats``: the mean of the workers' own;
``compute_utilization`` (Σ compute / Σ wall), ``comm_compute_measured`` (Σ time blocked on
communication / Σ compute: for DiLoCo the comm/compute ratio the rate gave),
``compute_per_step_ms`` (the inner steps' mean compute: communication running at the same
time slows it on shared cores) and ``bytes_per_worker_round`` leave out the warm-up rounds;
``status``: ``finished`` or the first worker that did not."""

ROUND_COLUMNS = (
    "network",
    "method",
    "comm_compute_ratio",
    "link_mbps",
    "seed",
    "round",
    "wall_clock_s",
    "compute_utilization",
    "train_loss_nats",
    "loss_nats",
    "loss_workers_nats",
    "consensus_rms_l2",
    "js_divergence_nats",
    "bytes_per_worker",
    "mix1_missing",
    "mix2_missing",
)
"""``gossip_rounds.csv``: per round (workers pooled); ``wall_clock_s`` is the workers' mean
summed round time at the round's end, ``loss_nats`` the average model's validation loss."""

FAILURE_COLUMNS = (
    "network",
    "method",
    "scenario",
    "link_mbps",
    "rank",
    "host",
    "round",
    "start_s",
    "inner_start_s",
    "inner_end_s",
    "end_s",
    "compute_s",
    "blocked_s",
    "wall_s",
    "bytes_sent",
    "bytes_received",
    "mix1_missing",
    "consensus_rms_l2",
    "loss_nats",
    "fail_at_s",
    "restore_at_s",
    "status",
)
"""``gossip_failure.csv``: every worker's rounds of the failure runs, times in seconds since
the job's start on the driver's clock; ``fail_at_s`` / ``restore_at_s`` are when the
controller's failure and restore commands returned."""


def _sums(recs: Sequence[Any], warmup: int) -> tuple[float, float, float]:
    """Σ compute, Σ wall and Σ blocked over the rounds after the warm-up (all rounds when
    there are no others)."""
    use = [r for r in recs if r.round >= warmup] or list(recs)
    return (
        sum(r.compute_s for r in use),
        sum(r.wall_s for r in use),
        sum(r.blocked_s for r in use),
    )


def run_row(run: JobRun, key: Key, warmup_rounds: int) -> dict[str, object]:
    """The ``gossip.csv`` row of one run."""
    cfg = run.config
    recs = run.records
    compute, wall, blocked = _sums(recs, warmup_rounds)
    steps = sum(r.inner_steps for r in recs if r.round >= warmup_rounds) or sum(
        r.inner_steps for r in recs
    )
    per_worker: dict[int, float] = {}
    for r in recs:
        per_worker[r.rank] = per_worker.get(r.rank, 0.0) + r.wall_s
    measured = [r for r in recs if r.round >= warmup_rounds] or list(recs)
    last = max(run.figures) if run.figures else None
    fig = run.figures[last] if last is not None else None
    final_workers = [r.val_loss for r in recs if r.round == last]
    rounds_done = 1 + max((r.round for r in recs), default=-1)
    return {
        "network": run.network,
        "method": key.method,
        "comm_compute_ratio": key.ratio,
        "link_mbps": round(run.link_mbps, 4),
        "seed": key.seed,
        "workers": cfg.workers,
        "inner_steps": cfg.inner_steps,
        "rounds": rounds_done,
        "tokens": rounds_done
        * cfg.inner_steps
        * cfg.batch_size
        * cfg.workers
        * TASK_CONTEXT.get(cfg.task, 1),
        "wall_clock_s": round(max(per_worker.values(), default=0.0), 4),
        "compute_s": round(sum(r.compute_s for r in recs), 4),
        "compute_utilization": round(compute / wall, 4) if wall > 0 else math.nan,
        "comm_compute_measured": round(blocked / compute, 4) if compute > 0 else math.nan,
        "compute_per_step_ms": round(1e3 * compute / steps, 3) if steps else math.nan,
        "bytes_per_worker_round": round(statistics.fmean(r.bytes_sent for r in measured))
        if measured
        else 0,
        "bytes_total": sum(r.bytes_sent for r in recs),
        "final_loss_nats": round(fig.mean_model_val_loss, 5) if fig else math.nan,
        "final_loss_workers_nats": round(statistics.fmean(final_workers), 5)
        if final_workers
        else math.nan,
        "consensus_rms_l2": round(fig.consensus_rms_l2, 6) if fig else math.nan,
        "js_divergence_nats": round(fig.js_divergence_nats, 8) if fig else math.nan,
        "mix1_missing": sum(r.mix1_missing for r in recs),
        "mix2_missing": sum(r.mix2_missing for r in recs),
        "status": run.failure or "finished",
    }


def round_rows(run: JobRun, key: Key) -> list[dict[str, object]]:
    """The ``gossip_rounds.csv`` rows of one run."""
    rows: list[dict[str, object]] = []
    by_round: dict[int, list[Any]] = {}
    for r in run.records:
        by_round.setdefault(r.round, []).append(r)
    elapsed: dict[int, float] = {}
    for rnd in sorted(by_round):
        recs = by_round[rnd]
        for r in recs:
            elapsed[r.rank] = elapsed.get(r.rank, 0.0) + r.wall_s
        compute, wall = sum(r.compute_s for r in recs), sum(r.wall_s for r in recs)
        fig = run.figures.get(rnd)
        rows.append(
            {
                "network": run.network,
                "method": key.method,
                "comm_compute_ratio": key.ratio,
                "link_mbps": round(run.link_mbps, 4),
                "seed": key.seed,
                "round": rnd,
                "wall_clock_s": round(statistics.fmean(elapsed[r.rank] for r in recs), 4),
                "compute_utilization": round(compute / wall, 4) if wall > 0 else math.nan,
                "train_loss_nats": round(statistics.fmean(r.train_loss for r in recs), 5),
                "loss_nats": round(fig.mean_model_val_loss, 5) if fig else math.nan,
                "loss_workers_nats": round(statistics.fmean(r.val_loss for r in recs), 5),
                "consensus_rms_l2": round(fig.consensus_rms_l2, 6) if fig else math.nan,
                "js_divergence_nats": round(fig.js_divergence_nats, 8) if fig else math.nan,
                "bytes_per_worker": round(statistics.fmean(r.bytes_sent for r in recs)),
                "mix1_missing": sum(r.mix1_missing for r in recs),
                "mix2_missing": sum(r.mix2_missing for r in recs),
            }
        )
    return rows


def failure_rows(run: JobRun, method: str, scenario: str) -> list[dict[str, object]]:
    """The ``gossip_failure.csv`` rows of one failure run."""
    fail_at = next((a.applied_s for a in run.faults if a.label.endswith("fail")), math.nan)
    restore_at = next((a.applied_s for a in run.faults if a.label.endswith("restore")), math.nan)
    hosts = {e.rank: e.host for e in run.ends.values()}
    rows: list[dict[str, object]] = []
    for r in sorted(run.records, key=lambda r: (r.rank, r.round)):
        fig = run.figures.get(r.round)
        rows.append(
            {
                "network": run.network,
                "method": method,
                "scenario": scenario,
                "link_mbps": round(run.link_mbps, 4),
                "rank": r.rank,
                "host": hosts.get(r.rank, ""),
                "round": r.round,
                "start_s": round(r.start_at_s, 4),
                "inner_start_s": round(r.inner_start_at_s, 4),
                "inner_end_s": round(r.inner_end_at_s, 4),
                "end_s": round(r.start_at_s + r.wall_s, 4),
                "compute_s": round(r.compute_s, 4),
                "blocked_s": round(r.blocked_s, 4),
                "wall_s": round(r.wall_s, 4),
                "bytes_sent": r.bytes_sent,
                "bytes_received": r.bytes_received,
                "mix1_missing": r.mix1_missing,
                "consensus_rms_l2": round(fig.consensus_rms_l2, 6) if fig else math.nan,
                "loss_nats": round(fig.mean_model_val_loss, 5) if fig else math.nan,
                "fail_at_s": round(fail_at, 4),
                "restore_at_s": round(restore_at, 4),
                "status": run.failure or "finished",
            }
        )
    return rows


@dataclass(frozen=True)
class FailureFigures:
    """What one method did through the failure (from its ``gossip_failure.csv`` rows)."""

    method: str
    outage_s: float  # restore − fail, as applied
    utilization_during: float  # Σ workers' inner-step time inside the outage / (M × outage)
    rounds_during: float  # rounds ended inside the outage, mean over workers
    longest_blocked_s: float  # the longest time one worker waited in one round
    resumed_after_restore_s: float  # that wait's end − the restore (nan: it did not span it)
    rounds: int  # rounds every worker completed
    bytes_sent: int
    bytes_received: int
    mix1_missing: int
    final_consensus: float
    status: str


def failure_figures(rows: Sequence[Mapping[str, object]]) -> list[FailureFigures]:
    """Per method, from the ``gossip_failure.csv`` rows (read back or fresh)."""
    out: list[FailureFigures] = []
    for method in dict.fromkeys(str(r["method"]) for r in rows):
        mine = [r for r in rows if r["method"] == method]
        fail, restore = to_float(mine[0]["fail_at_s"]), to_float(mine[0]["restore_at_s"])
        outage = restore - fail
        ranks = sorted({int(to_float(r["rank"])) for r in mine})
        inside = 0.0
        for r in mine:
            lo = max(to_float(r["inner_start_s"]), fail)
            hi = min(to_float(r["inner_end_s"]), restore)
            inside += max(0.0, hi - lo)
        ended = [r for r in mine if fail <= to_float(r["end_s"]) <= restore]
        worst = max(mine, key=lambda r: to_float(r["blocked_s"]))
        worst_end = to_float(worst["end_s"])
        waited_through = worst_end - to_float(worst["blocked_s"]) < restore < worst_end
        last = max(int(to_float(r["round"])) for r in mine)
        per_rank_rounds = [sum(1 for r in mine if int(to_float(r["rank"])) == k) for k in ranks]
        out.append(
            FailureFigures(
                method,
                outage,
                inside / (len(ranks) * outage) if outage > 0 else math.nan,
                len(ended) / len(ranks),
                to_float(worst["blocked_s"]),
                worst_end - restore if waited_through else math.nan,
                min(per_rank_rounds),
                sum(int(to_float(r["bytes_sent"])) for r in mine),
                sum(int(to_float(r["bytes_received"])) for r in mine),
                sum(int(to_float(r["mix1_missing"])) for r in mine),
                to_float(
                    next(r["consensus_rms_l2"] for r in mine if int(to_float(r["round"])) == last)
                ),
                str(mine[0]["status"]),
            )
        )
    return out


# -- outputs ---------------------------------------------------------------------------------------


class Outputs(outputs.Outputs):
    """Where the experiment writes: ``gossip.csv`` (``--out``), ``gossip_rounds.csv``,
    ``gossip_failure.csv``, ``gossip_summary.csv`` and ``gossip.png`` beside it."""

    @property
    def rounds(self) -> pathlib.Path:
        return self.beside("_rounds.csv")

    @property
    def failure(self) -> pathlib.Path:
        return self.beside("_failure.csv")


SUMMARY_FIGURES = (
    "compute_utilization",
    "comm_compute_measured",
    "compute_per_step_ms",
    "speedup_vs_diloco",
    "wall_clock_s",
    "final_loss_nats",
    "final_loss_workers_nats",
    "consensus_rms_l2",
    "js_divergence_nats",
    "bytes_per_worker_round",
    "loss_gap_to_diloco_pct",
)
SUMMARY_KEYS = ("method", "comm_compute_ratio")


def with_comparisons(rows: Sequence[Mapping[str, object]]) -> list[dict[str, object]]:
    """Each run row with the comparisons to DiLoCo of the same ratio and seed (blank without a
    DiLoCo run): ``loss_gap_to_diloco_pct`` = 100 (L − L_DiLoCo) / L_DiLoCo, only where both
    trained on as many tokens (data parallel's short utilization run did not: its gap is
    blank), and ``speedup_vs_diloco`` = DiLoCo's wall-clock per token / this run's."""
    base = {(r["comm_compute_ratio"], r["seed"]): r for r in rows if r["method"] == "diloco"}
    out = []
    for r in rows:
        d = base.get((r["comm_compute_ratio"], r["seed"]))
        gap = speedup = math.nan
        if d is not None:
            b, loss = to_float(d["final_loss_nats"]), to_float(r["final_loss_nats"])
            same_tokens = to_float(d["tokens"]) == to_float(r["tokens"])
            gap = 100.0 * (loss - b) / b if b > 0 and same_tokens else math.nan
            per_token = to_float(r["wall_clock_s"]) / to_float(r["tokens"])
            speedup = to_float(d["wall_clock_s"]) / to_float(d["tokens"]) / per_token
        out.append({**r, "loss_gap_to_diloco_pct": gap, "speedup_vs_diloco": speedup})
    return out


def write_summary(rows: Sequence[Mapping[str, object]], path: pathlib.Path) -> None:
    """Mean, sd and 95 % CI over seeds of every figure, per method and ratio."""
    write_summary_csv(path, with_comparisons(rows), SUMMARY_KEYS, SUMMARY_FIGURES)


# -- the console table ------------------------------------------------------------------------------


def _cell(rows: Sequence[Mapping[str, object]], method: str, ratio: str, fig: str) -> Summary:
    return summarize(
        to_float(r.get(fig))
        for r in rows
        if r["method"] == method and str(r["comm_compute_ratio"]) == ratio
    )


CELL = 20


def report(
    rows: Sequence[Mapping[str, object]],
    failure: Sequence[Mapping[str, object]],
    header: str = "",
) -> str:
    """The table beside the paper's, the targets, and the failure scenario (``header``
    first: how the rates were set)."""
    rows = with_comparisons(rows)
    ratios = list(dict.fromkeys(str(r["comm_compute_ratio"]) for r in rows))
    methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
    rate = {str(r["comm_compute_ratio"]): to_float(r["link_mbps"]) for r in rows}
    seeds = len({r["seed"] for r in rows})
    lines = [""]
    if header:
        lines.append(header)
    lines += [
        f"mean ± 95 % CI half-width over {seeds} seed(s); utilization = Σ compute / Σ wall "
        "after the warm-up round",
        f"{'':<36}" + "".join(f"{METHODS[m].label:>{CELL}}" for m in methods) + "   paper",
    ]
    figures = (
        ("compute_utilization", "compute utilization", ".3f"),
        ("comm_compute_measured", "time blocked / compute", ".2f"),
        ("compute_per_step_ms", "compute per inner step (ms)", ".1f"),
        ("speedup_vs_diloco", "speed-up vs DiLoCo (per token)", ".2f"),
        ("final_loss_nats", "final loss, average model (nats)", ".4f"),
        ("final_loss_workers_nats", "final loss, workers' own (nats)", ".4f"),
        ("loss_gap_to_diloco_pct", "loss gap to DiLoCo (%)", "+.2f"),
        ("consensus_rms_l2", "consensus distance (L2)", ".4f"),
        ("js_divergence_nats", "JS divergence (nats)", ".1e"),
        ("bytes_per_worker_round", "bytes per worker and round", ".0f"),
        ("wall_clock_s", "wall-clock (s)", ".1f"),
    )
    for ratio in ratios:
        lines.append(f"comm/compute {ratio}: links at {rate[ratio]:.3f} Mbit/s")
        for fig, title, fmt in figures:
            cells = "".join(f"{_cell(rows, m, ratio, fig).short(fmt):>{CELL}}" for m in methods)
            paper = ""
            if fig == "compute_utilization":
                paper = ", ".join(
                    f"{METHODS[m].label} {v:.0%}"
                    for (pr, m), v in PAPER_UTILIZATION.items()
                    if f"{pr:g}" == f"{float(ratio):g}"
                )
            lines.append(f"  {title:<34}{cells}   {paper}".rstrip())
    short = sorted({str(r["tokens"]) for r in rows if r["method"] == "dp"})
    if short:
        lines.append(
            f"sync DP trains {', '.join(short)} tokens per worker only (a utilization run): its "
            "loss is not at DiLoCo's tokens, so no gap is given"
        )
    pp = PAPER_PERPLEXITY
    gap = 100 * math.log(pp["GlobalM1LocalM2"] / pp["diloco"]) / math.log(pp["diloco"])
    lines.append(
        f"paper, perplexity at 10 B tokens: DP {pp['dp']}, DiLoCo {pp['diloco']}, "
        f"GlobalM1LocalM2 {pp['GlobalM1LocalM2']} (loss {gap:+.2f} %), GlobalM1 {pp['GlobalM1']}"
    )
    lines += ["", "targets", *target_lines(rows)]
    if failure:
        where = f"{to_float(failure[0]['link_mbps']):.3f} Mbit/s"
        lines += ["", f"failure scenario '{failure[0]['scenario']}' at {where}"]
        lines += [f"  {f.method:<16} {failure_line(f)}" for f in failure_figures(failure)]
    lines += ["", "utilization per seed"]
    for ratio in ratios:
        for m in methods:
            values = [
                to_float(r["compute_utilization"])
                for r in rows
                if r["method"] == m and str(r["comm_compute_ratio"]) == ratio
            ]
            lines.append(f"  {ratio:<6}{METHODS[m].label:<18}{format_values(values, '.3f')}")
    return "\n".join(lines)


def target_lines(rows: Sequence[Mapping[str, object]]) -> list[str]:
    """The issue's targets, each with what was measured and whether it holds."""
    ratios = sorted({str(r["comm_compute_ratio"]) for r in rows}, key=float)
    out: list[str] = []

    def util(m: str, ratio: str) -> float:
        return _cell(rows, m, ratio, "compute_utilization").mean

    if ratios:
        hi = ratios[0]
        g, d = util("GlobalM1", hi), util("diloco", hi)
        ok = g >= 0.95 and d <= 0.60
        out.append(
            f"  [{'met' if ok else 'MISSED'}] GlobalM1 >= 95 % where DiLoCo <= 60 % "
            f"(ratio {hi}): {g:.1%} vs {d:.1%}"
        )
    for ratio in ratios:
        p, d, g = util("dp", ratio), util("diloco", ratio), util("GlobalM1", ratio)
        ok = p < d < g
        out.append(
            f"  [{'met' if ok else 'MISSED'}] DP < DiLoCo < GlobalM1 at ratio {ratio}: "
            f"{p:.1%} < {d:.1%} < {g:.1%}"
        )
        gap = _cell(rows, "GlobalM1LocalM2", ratio, "loss_gap_to_diloco_pct")
        ok = not math.isnan(gap.mean) and abs(gap.mean) <= 2.0
        out.append(
            f"  [{'met' if ok else 'MISSED'}] GlobalM1LocalM2's final loss within 2 % of DiLoCo's "
            f"(ratio {ratio}): {gap.format('+.2f', ' %')} (spread {gap.min:+.2f} .. {gap.max:+.2f})"
        )
    return out


def failure_line(f: FailureFigures) -> str:
    if math.isnan(f.outage_s):
        return f"the run ended before the failure ({f.rounds} rounds, {f.status})"
    resumed = (
        f", resumed {f.resumed_after_restore_s:.2f} s after the restore"
        if not math.isnan(f.resumed_after_restore_s)
        else ""
    )
    return (
        f"utilization during the {f.outage_s:.1f} s failure {f.utilization_during:.2f}, "
        f"{f.rounds_during:.1f} rounds in it, longest wait {f.longest_blocked_s:.2f} s{resumed}; "
        f"{f.rounds} rounds, {f.mix1_missing} Mix1 messages missing, {f.status}"
    )


# -- the plot (from the CSVs only) ----------------------------------------------------------------

COLORS = {
    "dp": "tab:gray",
    "diloco": "tab:blue",
    "GlobalM1": "tab:green",
    "GlobalM1LocalM2": "tab:orange",
}


def plot(where: Outputs) -> pathlib.Path:
    """``gossip.png`` from ``gossip.csv``, ``gossip_rounds.csv`` and ``gossip_failure.csv``:
    utilization by method and link rate (bars from zero, 95 % CI, the paper's values marked),
    the average model's loss against wall-clock time at each rate, and the failure run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_rows(where.out)
    rounds = read_rows(where.rounds) if where.rounds.exists() else []
    failure = read_rows(where.failure) if where.failure.exists() else []
    ratios = list(dict.fromkeys(r["comm_compute_ratio"] for r in rows))
    methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
    rate = {r["comm_compute_ratio"]: to_float(r["link_mbps"]) for r in rows}
    panels = 1 + len(ratios) + (1 if failure else 0)
    cols = min(2, panels)
    grid_rows = math.ceil(panels / cols)
    fig, grid = plt.subplots(grid_rows, cols, figsize=(6.4 * cols, 4.8 * grid_rows), squeeze=False)
    axes = list(grid.flat)
    for extra in axes[panels:]:
        extra.set_visible(False)
    ax = axes[0]
    for i, m in enumerate(methods):
        cells = [_cell(rows, m, ratio, "compute_utilization") for ratio in ratios]
        xs, width = ci_bars(ax, i, len(methods), cells, color=COLORS.get(m), label=METHODS[m].label)
        for x, ratio in zip(xs, ratios, strict=True):
            paper = PAPER_UTILIZATION.get((float(ratio), m))
            if paper is not None:
                paper_mark(ax, x, width, paper)
    paper_legend(ax)
    ax.set_xticks(range(len(ratios)))
    ax.set_xticklabels([f"comm/compute {r}\n{rate[r]:.2f} Mbit/s per link" for r in ratios])
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("compute utilization (Σ compute / Σ wall)")
    n = max(
        (_cell(rows, m, r, "compute_utilization").n for m in methods for r in ratios), default=0
    )
    ax.set_title(f"utilization by method and link rate\n(mean of {n} seeds, 95 % CI)", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    for k, ratio in enumerate(ratios):
        ax = axes[1 + k]
        for m in methods:
            pts: dict[int, list[tuple[float, float]]] = {}
            for r in rounds:
                if r["method"] == m and r["comm_compute_ratio"] == ratio and r["loss_nats"]:
                    pts.setdefault(int(r["round"]), []).append(
                        (to_float(r["wall_clock_s"]), to_float(r["loss_nats"]))
                    )
            xs = [statistics.fmean(p[0] for p in pts[rnd]) for rnd in sorted(pts)]
            ys = [statistics.fmean(p[1] for p in pts[rnd]) for rnd in sorted(pts)]
            run = next(r for r in rows if r["method"] == m)
            steps = f"{run['rounds']} × {run['inner_steps']} steps"
            ax.plot(xs, ys, marker=".", color=COLORS.get(m), label=f"{METHODS[m].label} ({steps})")
        ax.set_xlim(left=0)
        ax.set_xlabel("wall-clock (s, summed round times, mean of workers and seeds)")
        ax.set_ylabel("validation loss of the average model (nats)")
        ax.set_title(
            f"loss vs wall-clock, comm/compute {ratio} ({rate[ratio]:.2f} Mbit/s)", fontsize=10
        )
        ax.legend(fontsize=8)
    if failure:
        ax = axes[panels - 1]
        fail, restore = to_float(failure[0]["fail_at_s"]), to_float(failure[0]["restore_at_s"])
        for m in dict.fromkeys(r["method"] for r in failure):
            mine = [r for r in failure if r["method"] == m]
            ends = sorted(to_float(r["end_s"]) for r in mine)
            ranks = len({r["rank"] for r in mine})
            ax.step(
                ends,
                [(i + 1) / ranks for i in range(len(ends))],
                where="post",
                color=COLORS.get(m),
                label=METHODS[m].label,
            )
        if not math.isnan(fail) and not math.isnan(restore):
            ax.axvspan(fail, restore, color="red", alpha=0.15, label="failed")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("time since the job started (s)")
        ax.set_ylabel("rounds completed (mean of workers)")
        ax.set_title(
            f"failure '{failure[0]['scenario']}' at {to_float(failure[0]['link_mbps']):.2f} Mbit/s:"
            "\nrounds completed vs time",
            fontsize=10,
        )
        ax.legend(fontsize=8)
    fig.suptitle(
        "Factored gossip DiLoCo vs DiLoCo vs data parallel, "
        f"{rows[0]['workers'] if rows else '?'} workers on the {rows[0]['network'] if rows else '?'}",
        fontsize=11,
    )
    return save_png(fig, where.png)
