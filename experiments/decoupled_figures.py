"""What the Decoupled DiLoCo experiment (:mod:`experiments.decoupled`) measures and reports.

One run's row of ``decoupled.csv`` (:func:`run_row`, columns :data:`RUN_COLUMNS`, units in the
names) and its loss curve in ``decoupled_curve.csv`` (:func:`curve_rows`,
:data:`CURVE_COLUMNS`), both from a :class:`RunResult` whichever network ran it; the
comparisons between runs of the same seed (:func:`with_comparisons`: goodput over elastic data
parallel's, the loss gap to DiLoCo at equal tokens), the summary over seeds
(:func:`write_summary`, :mod:`experiments.stats`), the console table beside the paper's with
the issue's targets (:func:`report`) and the plot (:func:`plot`), which reads the CSVs only.
"""

from __future__ import annotations

import math
import pathlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from experiments import outputs
from experiments.outputs import (
    ci_bars,
    paper_legend,
    paper_mark,
    read_rows,
    save_png,
    write_summary_csv,
)
from experiments.stats import Summary, format_values, summarize, to_float
from host.train.decoupled import metrics


@dataclass(frozen=True)
class Method:
    """One kind of job compared."""

    name: str
    label: str


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("elastic_dp", "elastic DP"),
        Method("decoupled", "Decoupled DiLoCo"),
        Method("diloco", "DiLoCo"),
    )
}
"""The methods, in the order of every table. ``diloco`` is the reference job (K = M, no grace
window, equal weights, direct averaging, P = 1, τ = 0, the paper's Nesterov outer step), run
without failures only."""

PAPER_GOODPUT: dict[tuple[str, int], float] = {
    ("elastic_dp", 0): 0.58,
    ("decoupled", 2): 0.70,
    ("decoupled", 8): 0.88,
}
"""The paper's goodput under its heavier failure rate (5B model, 1.2 M chips, MTBI_chip one
year; /work/shared/research/diloco.md section 3): elastic data parallel 58 %, Decoupled
DiLoCo 70 % with M = 2, 88 % with M = 8 (uptime 100 % with M ≥ 4)."""
PAPER_RATIO = 0.88 / 0.58
TARGET_RATIO = 1.4
TARGET_UPTIME = 0.99
TARGET_LOSS_GAP_PCT = 3.0
REFERENCE_LEARNERS = 4


@dataclass(frozen=True)
class Key:
    method: str
    learners: int  # M (elastic data parallel: its workers)
    rate: str  # failure rate name
    seed: int

    @property
    def label(self) -> str:
        return label(self.method, self.learners)


def label(method: str, learners: int) -> str:
    m = METHODS[method].label
    return f"{m} ({learners} workers)" if method == "elastic_dp" else f"{m} M={learners}"


@dataclass(frozen=True)
class RunResult:
    """One run's figures, whichever network ran it."""

    key: Key
    network: str
    cluster_mtbf_s: float
    summary: metrics.Summary
    curve: tuple[metrics.CurvePoint, ...]
    events: Mapping[str, int]  # interruptions begun, by kind
    merges: int  # merges (elastic data parallel: committed rounds)
    mean_quorum: float  # reports per merge (elastic: members per committed round)
    restarts: int
    status: str  # "finished", or what went wrong


RUN_COLUMNS = (
    "network",
    "method",
    "learners",
    "failure_rate",
    "cluster_mtbf_s",
    "seed",
    "wall_s",
    "goodput",
    "uptime",
    "longest_stall_s",
    "final_loss_nats",
    "tokens_merged",
    "interruptions",
    "kills",
    "pauses",
    "slowdowns",
    "network_failures",
    "down_s",
    "paused_s",
    "useful_s",
    "allocated_s",
    "steps",
    "useful_steps",
    "merges",
    "mean_quorum",
    "restarts",
    "status",
)
"""``decoupled.csv``: one row per method, M, failure rate and seed. ``goodput``: useful
member-time ÷ (members × wall); ``uptime``: the fraction of the wall time in which the global
model advanced; ``longest_stall_s``: the longest stretch of it without (README "Decoupled
DiLoCo"); ``tokens_merged``: what the global model took in; ``down_s`` / ``paused_s``: summed
over members; ``merges`` and ``mean_quorum``: the syncer's merges and reports per merge
(elastic data parallel: committed rounds and their group size)."""

CURVE_COLUMNS = (
    "network",
    "method",
    "learners",
    "failure_rate",
    "seed",
    "at_s",
    "tokens",
    "val_loss_nats",
)
"""``decoupled_curve.csv``: the global model's validation loss during each run."""


def run_row(r: RunResult) -> dict[str, object]:
    s = r.summary
    ev = r.events
    return {
        "network": r.network,
        "method": r.key.method,
        "learners": r.key.learners,
        "failure_rate": r.key.rate,
        "cluster_mtbf_s": r.cluster_mtbf_s,
        "seed": r.key.seed,
        "wall_s": round(s.wall_s, 3),
        "goodput": round(s.goodput, 5),
        "uptime": round(s.uptime, 5),
        "longest_stall_s": round(s.longest_stall_s, 3),
        "final_loss_nats": round(s.final_val_loss, 6),
        "tokens_merged": round(s.tokens_merged, 1),
        "interruptions": sum(ev.values()),
        "kills": ev.get("kill", 0),
        "pauses": ev.get("pause", 0),
        "slowdowns": ev.get("slow", 0),
        "network_failures": ev.get("spine", 0) + ev.get("plane", 0),
        "down_s": round(s.down_s, 3),
        "paused_s": round(s.paused_s, 3),
        "useful_s": round(s.useful_s, 3),
        "allocated_s": round(s.allocated_s, 3),
        "steps": s.steps,
        "useful_steps": s.useful_steps,
        "merges": r.merges,
        "mean_quorum": round(r.mean_quorum, 3),
        "restarts": r.restarts,
        "status": r.status,
    }


def curve_rows(r: RunResult) -> list[dict[str, object]]:
    return [
        {
            "network": r.network,
            "method": r.key.method,
            "learners": r.key.learners,
            "failure_rate": r.key.rate,
            "seed": r.key.seed,
            "at_s": round(c.at_s, 3),
            "tokens": round(c.tokens, 1),
            "val_loss_nats": round(c.val_loss, 6),
        }
        for c in r.curve
    ]


# -- comparisons ------------------------------------------------------------------------------


def loss_at(curve: Sequence[tuple[float, float]], tokens: float) -> float:
    """The loss of a curve of (tokens, loss) points at ``tokens``, linear between points (NaN
    outside the curve)."""
    pts = sorted(curve)
    if not pts or tokens < pts[0][0] or tokens > pts[-1][0]:
        return math.nan
    xs = np.array([p[0] for p in pts])
    ys = np.array([p[1] for p in pts])
    return float(np.interp(tokens, xs, ys))


CurveKey = tuple[str, str, str, str]  # method, learners, rate, seed (as CSV strings)


def curves_by_run(
    curve: Sequence[Mapping[str, object]],
) -> dict[CurveKey, list[tuple[float, float]]]:
    out: dict[CurveKey, list[tuple[float, float]]] = {}
    for c in curve:
        k = (str(c["method"]), str(c["learners"]), str(c["failure_rate"]), str(c["seed"]))
        out.setdefault(k, []).append((to_float(c["tokens"]), to_float(c["val_loss_nats"])))
    return out


def with_comparisons(
    rows: Sequence[Mapping[str, object]], curve: Sequence[Mapping[str, object]]
) -> list[dict[str, object]]:
    """Each run row with its comparisons to runs of the same seed:

    * ``goodput_vs_elastic``: its goodput ÷ elastic data parallel's at the same failure rate;
    * ``goodput_kept``: its goodput ÷ the same method's (and M's) without failures: what the
      failures cost it, apart from what the method costs without them (elastic data
      parallel's per-step all-reduce, say);
    * ``loss_gap_to_diloco_pct`` (without failures): 100 (L − L_DiLoCo) / L_DiLoCo, both
      losses read off the loss-vs-tokens curves at the same tokens (the fewer of the two
      runs' final tokens), the DiLoCo run of :data:`REFERENCE_LEARNERS` learners.

    Blank where the other run is missing."""
    curves = curves_by_run(curve)
    elastic = {
        (str(r["failure_rate"]), str(r["seed"])): to_float(r["goodput"])
        for r in rows
        if r["method"] == "elastic_dp"
    }
    calm = {
        (str(r["method"]), str(r["learners"]), str(r["seed"])): to_float(r["goodput"])
        for r in rows
        if r["failure_rate"] == "none"
    }
    out = []
    for r in rows:
        rate, seed = str(r["failure_rate"]), str(r["seed"])
        base = elastic.get((rate, seed), math.nan)
        ratio = to_float(r["goodput"]) / base if base > 0 else math.nan
        own = calm.get((str(r["method"]), str(r["learners"]), seed), math.nan)
        kept = to_float(r["goodput"]) / own if own > 0 else math.nan
        gap = math.nan
        ref = curves.get(("diloco", str(REFERENCE_LEARNERS), rate, seed))
        mine = curves.get((str(r["method"]), str(r["learners"]), rate, seed))
        if r["method"] == "decoupled" and rate == "none" and ref and mine:
            tokens = min(max(t for t, _ in ref), max(t for t, _ in mine))
            lr, lm = loss_at(ref, tokens), loss_at(mine, tokens)
            gap = 100.0 * (lm - lr) / lr if lr > 0 else math.nan
        out.append(
            {
                **r,
                "goodput_vs_elastic": ratio,
                "goodput_kept": kept,
                "loss_gap_to_diloco_pct": gap,
            }
        )
    return out


# -- outputs ------------------------------------------------------------------------------------


class Outputs(outputs.Outputs):
    """Where the experiment writes: ``decoupled.csv`` (``--out``), ``decoupled_curve.csv``,
    ``decoupled_summary.csv`` and ``decoupled.png`` beside it."""

    @property
    def curve(self) -> pathlib.Path:
        return self.beside("_curve.csv")


SUMMARY_FIGURES = (
    "goodput",
    "uptime",
    "longest_stall_s",
    "final_loss_nats",
    "tokens_merged",
    "goodput_vs_elastic",
    "goodput_kept",
    "loss_gap_to_diloco_pct",
    "interruptions",
    "down_s",
    "paused_s",
    "mean_quorum",
)
SUMMARY_KEYS = ("method", "learners", "failure_rate")


def write_summary(
    rows: Sequence[Mapping[str, object]], curve: Sequence[Mapping[str, object]], path: pathlib.Path
) -> None:
    """Mean, sd and 95 % CI over seeds of every figure, per method, M and failure rate."""
    write_summary_csv(path, with_comparisons(rows, curve), SUMMARY_KEYS, SUMMARY_FIGURES)


# -- the console table --------------------------------------------------------------------------


def groups(rows: Sequence[Mapping[str, object]]) -> list[tuple[str, int]]:
    """(method, M) in table order."""
    found = {(str(r["method"]), int(to_float(r["learners"]))) for r in rows}
    return sorted(found, key=lambda g: (list(METHODS).index(g[0]), g[1]))


def rates(rows: Sequence[Mapping[str, object]]) -> list[str]:
    return list(dict.fromkeys(str(r["failure_rate"]) for r in rows))


def cell(
    rows: Sequence[Mapping[str, object]], method: str, learners: int, rate: str, fig: str
) -> Summary:
    return summarize(
        to_float(r.get(fig))
        for r in rows
        if r["method"] == method
        and int(to_float(r["learners"])) == learners
        and str(r["failure_rate"]) == rate
    )


FIGURES = (
    ("goodput", "goodput", ".1%"),
    ("uptime", "uptime", ".1%"),
    ("longest_stall_s", "longest stall (s)", ".2f"),
    ("final_loss_nats", "final loss (nats)", ".3f"),
    ("goodput_vs_elastic", "goodput / elastic", ".2f"),
    ("goodput_kept", "kept vs calm", ".2f"),
)
CELL = 19


def _paper(method: str, learners: int, heaviest: bool) -> str:
    if not heaviest:
        return ""
    key = (method, 0 if method == "elastic_dp" else learners)
    g = PAPER_GOODPUT.get(key)
    uptime = " uptime 100 %" if method == "decoupled" and learners >= 4 else ""
    return (f"goodput {g:.0%}" if g is not None else "") + uptime


def report(
    rows: Sequence[Mapping[str, object]], curve: Sequence[Mapping[str, object]], header: str = ""
) -> str:
    """The table beside the paper's, then the targets and the per-seed goodput."""
    rows = with_comparisons(rows, curve)
    seeds = len({str(r["seed"]) for r in rows})
    mtbf = {str(r["failure_rate"]): to_float(r["cluster_mtbf_s"]) for r in rows}
    order = rates(rows)
    lines = [""]
    if header:
        lines.append(header)
    lines.append(f"mean ± 95 % CI half-width over {seeds} seed(s)")
    lines.append(f"{'':<32}" + "".join(f"{t:>{CELL}}" for _f, t, _fmt in FIGURES) + "   paper")
    for rate in order:
        what = "no failures" if math.isinf(mtbf[rate]) else f"cluster MTBF {mtbf[rate]:g} s"
        lines.append(f"failure rate '{rate}' ({what})")
        for method, m in groups(rows):
            cells = [cell(rows, method, m, rate, f) for f, _t, _fmt in FIGURES]
            if cells[0].n == 0:
                continue
            text = "".join(
                f"{c.short(fmt) if c.n else '-':>{CELL}}"
                for c, (_f, _t, fmt) in zip(cells, FIGURES, strict=True)
            )
            paper = _paper(method, m, rate == order[-1])
            lines.append(f"  {label(method, m):<30}{text}   {paper}".rstrip())
    lines.append(
        "paper (5B model, 1.2 M chips, MTBI_chip 1 year): goodput elastic DP 58 %, Decoupled "
        f"DiLoCo M=2 70 %, M=8 88 % ({PAPER_RATIO:.2f}x); uptime 100 % with M >= 4; goodput "
        "rising with M"
    )
    lines.append(
        "kept vs calm = goodput ÷ the same method's without failures, same seed: what "
        "the failures cost each method (elastic DP's all-reduce costs it goodput without any)"
    )
    lines += ["", "targets", *target_lines(rows)]
    lines += ["", "goodput per seed"]
    for rate in order:
        for method, m in groups(rows):
            values = [
                to_float(r["goodput"])
                for r in rows
                if r["method"] == method
                and int(to_float(r["learners"])) == m
                and str(r["failure_rate"]) == rate
            ]
            if values:
                lines.append(f"  {rate:<7}{label(method, m):<30}{format_values(values, '.3f')}")
    bad = [r for r in rows if r["status"] != "finished"]
    if bad:
        lines += ["", "runs with notes"]
        lines += [
            f"  {label(str(r['method']), int(to_float(r['learners'])))} {r['failure_rate']} "
            f"seed {r['seed']}: {r['status']}"
            for r in bad
        ]
    return "\n".join(lines)


def _mark(ok: bool) -> str:
    return "met" if ok else "MISSED"


def target_lines(rows: Sequence[Mapping[str, object]]) -> list[str]:
    """The issue's targets, each with what was measured and whether it holds (rows already
    :func:`with_comparisons`)."""
    out: list[str] = []
    order = [r for r in rates(rows) if r != "none"]
    dd = sorted({m for method, m in groups(rows) if method == "decoupled"})
    if order:
        heavy = order[-1]
        for m in dd:
            ratio = cell(rows, "decoupled", m, heavy, "goodput_vs_elastic")
            out.append(
                f"  [{_mark(ratio.mean >= TARGET_RATIO)}] rate '{heavy}': Decoupled DiLoCo M={m} "
                f"goodput >= {TARGET_RATIO}x elastic DP's (paper {PAPER_RATIO:.2f}x): "
                f"{ratio.format('.2f', 'x')}"
            )
        for m in (m for m in dd if m >= 4):
            up = cell(rows, "decoupled", m, heavy, "uptime")
            stall = cell(rows, "decoupled", m, heavy, "longest_stall_s")
            out.append(
                f"  [{_mark(up.mean >= TARGET_UPTIME)}] rate '{heavy}': uptime 100 % for M={m} "
                f"(>= {TARGET_UPTIME:.0%}: the start-up before the first step is not 'advancing'): "
                f"{up.format('.2%')}; longest stall {stall.format('.2f', ' s')}"
            )
        if len(dd) > 1:
            means = [cell(rows, "decoupled", m, heavy, "goodput").mean for m in dd]
            rising = all(a <= b for a, b in zip(means, means[1:], strict=False))
            out.append(
                f"  [{_mark(rising)}] rate '{heavy}': goodput rising with M: "
                + ", ".join(f"M={m} {g:.1%}" for m, g in zip(dd, means, strict=True))
            )
    if REFERENCE_LEARNERS in dd:
        gap = cell(rows, "decoupled", REFERENCE_LEARNERS, "none", "loss_gap_to_diloco_pct")
        ok = not math.isnan(gap.mean) and gap.mean <= TARGET_LOSS_GAP_PCT
        out.append(
            f"  [{_mark(ok)}] no failures: final loss within {TARGET_LOSS_GAP_PCT:g} % of "
            f"DiLoCo's (M={REFERENCE_LEARNERS}, equal tokens): {gap.format('+.2f', ' %')}"
            + (f" (per seed {gap.min:+.2f} .. {gap.max:+.2f})" if gap.n > 1 else "")
        )
    finished = sum(1 for r in rows if r["status"] == "finished")
    out.append(
        f"  [{_mark(finished == len(rows))}] every run ended with every process stopped: "
        f"{finished} of {len(rows)}"
    )
    return out


# -- the plot (from the CSVs only) ------------------------------------------------------------

COLORS = {
    ("elastic_dp", 4): "tab:gray",
    ("decoupled", 2): "tab:cyan",
    ("decoupled", 4): "tab:blue",
    ("decoupled", 8): "tab:purple",
    ("diloco", 4): "tab:orange",
}


def _color(method: str, m: int) -> str | None:
    return COLORS.get((method, m))


def _bars(ax: object, rows: Sequence[Mapping[str, object]], fig: str, ylabel: str) -> None:
    import matplotlib.axes

    assert isinstance(ax, matplotlib.axes.Axes)
    order = rates(rows)
    gs = groups(rows)
    heavy = [r for r in order if r != "none"][-1:] or order[-1:]
    for i, (method, m) in enumerate(gs):
        cells = [cell(rows, method, m, rate, fig) for rate in order]
        xs, width = ci_bars(ax, i, len(gs), cells, color=_color(method, m), label=label(method, m))
        if fig == "goodput" and heavy:
            paper = PAPER_GOODPUT.get((method, 0 if method == "elastic_dp" else m))
            if paper is not None:
                paper_mark(ax, xs[order.index(heavy[0])], width, paper)
    if fig == "goodput":
        paper_legend(ax, "paper (heaviest rate)")
    mtbf = {str(r["failure_rate"]): to_float(r["cluster_mtbf_s"]) for r in rows}
    ax.set_xticks(range(len(order)))
    ax.set_xticklabels(
        [
            f"{r}\n" + ("no failures" if math.isinf(mtbf[r]) else f"MTBF {mtbf[r]:g} s")
            for r in order
        ]
    )
    ax.set_ylim(0, 1.1)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7, loc="lower left")


def _mean_curve(
    curves: Sequence[list[tuple[float, float]]], points: int = 40
) -> tuple[np.ndarray, np.ndarray]:
    """The mean over runs of loss vs tokens, on a grid up to the fewest final tokens."""
    end = min(max(t for t, _ in c) for c in curves)
    start = max(min(t for t, _ in c) for c in curves)
    grid = np.linspace(start, end, points)
    ys = np.array([[loss_at(c, x) for x in grid] for c in curves])
    seen = ~np.isnan(ys)
    total = np.where(seen, ys, 0.0).sum(axis=0)
    count = seen.sum(axis=0)
    # a grid point no run has a loss for (before every run's first evaluation) stays NaN
    return grid, np.divide(total, count, out=np.full(len(grid), np.nan), where=count > 0)


def plot(where: Outputs) -> pathlib.Path:
    """``decoupled.png`` from ``decoupled.csv`` and ``decoupled_curve.csv``: goodput and
    uptime by method and failure rate (bars from zero, 95 % CI over seeds, the paper's
    goodput marked), and the global model's loss against tokens merged without failures and
    under the heaviest rate (mean over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_rows(where.out)
    curve = read_rows(where.curve) if where.curve.exists() else []
    curves = curves_by_run(curve)
    order = rates(rows)
    fig, grid = plt.subplots(2, 2, figsize=(13, 9.6))
    seeds = len({r["seed"] for r in rows})
    _bars(grid[0][0], rows, "goodput", "goodput (useful member-time / allocated)")
    grid[0][0].set_title(
        f"goodput by method and failure rate\n(mean of {seeds} seeds, 95 % CI)", fontsize=10
    )
    _bars(grid[0][1], rows, "uptime", "uptime (fraction of wall time the global model advanced)")
    grid[0][1].set_title(
        f"uptime by method and failure rate\n(mean of {seeds} seeds, 95 % CI)", fontsize=10
    )
    shown = [r for r in order if r == "none"] + [r for r in order if r != "none"][-1:]
    for ax, rate in zip(grid[1], shown, strict=False):
        for method, m in groups(rows):
            mine = [c for k, c in curves.items() if k[:3] == (method, str(m), rate) and c]
            if not mine:
                continue
            xs, ys = _mean_curve(mine)
            ax.plot(xs, ys, color=_color(method, m), label=label(method, m))
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("tokens merged into the global model")
        ax.set_ylabel("validation loss of the global model (nats)")
        ax.set_title(f"loss vs tokens, failure rate '{rate}' (mean of seeds)", fontsize=10)
        ax.legend(fontsize=8)
    for ax in grid[1][len(shown) :]:
        ax.set_visible(False)
    net = rows[0]["network"] if rows else "?"
    fig.suptitle(
        f"Decoupled DiLoCo vs elastic data parallel under chaos, on the {net}", fontsize=11
    )
    return save_png(fig, where.png)
