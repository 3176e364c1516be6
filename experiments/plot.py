"""Plots of the microburst experiment and the demo, drawn from their CSVs only.

``python -m experiments.plot [--results results]`` redraws ``results/microburst.png`` from
``microburst_latency.csv`` and ``training_summary.csv``. Three panels:

* per-round communication latency of every policy for the first task and seed (a trace, on a
  log axis that says so; bursts marked);
* burst-round latency by burst level: bars from zero on a linear axis, the mean over every
  burst of every seed, error bars the 95 % confidence interval;
* training time per task and policy: bars from zero, mean over seeds with 95 % CI error bars,
  the final metric's mean written on each bar.

Every latency is the one of README "DBLP": the slowest worker's time from its first send of
the round to the last byte of the averaged result received.
"""

from __future__ import annotations

import argparse
import csv
import math
import pathlib
import sys
from collections import defaultdict
from collections.abc import Sequence

import matplotlib

from experiments.stats import Summary, summarize

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"dblp": "tab:green", "fixed": "tab:orange", "reliable": "tab:blue"}
LATENCY = "latency: slowest worker, first send → last byte of the average"


def _read(path: pathlib.Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _err(s: Summary) -> float:
    return 0.0 if math.isnan(s.half_width) else s.half_width


def plot_microburst(
    latency_csv: pathlib.Path, summary_csv: pathlib.Path, png: pathlib.Path
) -> pathlib.Path:
    """Draw the three panels into ``png``."""
    rows = _read(latency_csv)
    summary = _read(summary_csv)
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    seeds = list(dict.fromkeys(r["seed"] for r in rows))
    fig, axes = plt.subplots(1, 3, figsize=(18, 5))

    ax = axes[0]
    first = [r for r in rows if r["task"] == tasks[0] and r["seed"] == seeds[0]]
    for pol in dict.fromkeys(r["policy"] for r in first):
        pts = [(int(r["round"]), float(r["latency_ms"])) for r in first if r["policy"] == pol]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], lw=1, label=pol, color=COLORS.get(pol))
    marked: set[int] = set()
    for r in first:
        rnd = int(r["round"])
        if float(r["burst_loss_pct"]) > 0 and rnd not in marked:
            marked.add(rnd)
            ax.axvline(rnd, color="red", alpha=0.25, lw=3)
            ax.text(
                rnd,
                1.0,
                f"{float(r['burst_loss_pct']):g}%",
                color="red",
                fontsize=8,
                ha="center",
                va="bottom",
                transform=ax.get_xaxis_transform(),
            )
        if r["faults"] and r["policy"] == "dblp":
            ax.axvline(rnd, color="black", ls=":", lw=1)
    ax.set_yscale("log")
    ax.set_xlabel("round")
    ax.set_ylabel("communication latency (ms, log scale)")
    ax.set_title(
        f"{tasks[0]}, seed {seeds[0]}: every round (bursts red, faults dotted)\n{LATENCY}",
        fontsize=9,
    )
    ax.legend()

    ax = axes[1]
    by: dict[tuple[str, float], list[float]] = defaultdict(list)
    for r in rows:
        lvl = float(r["burst_loss_pct"])
        if lvl > 0:
            by[(r["policy"], lvl)].append(float(r["latency_ms"]))
    levels = sorted({lvl for _, lvl in by})
    pols = list(dict.fromkeys(p for p, _ in by))
    width = 0.8 / max(1, len(pols))
    for i, pol in enumerate(pols):
        stats = [summarize(by[(pol, lvl)]) for lvl in levels]
        ax.bar(
            [j + i * width for j in range(len(levels))],
            [0.0 if s.n == 0 else s.mean for s in stats],
            width,
            yerr=[_err(s) for s in stats],
            capsize=3,
            label=pol,
            color=COLORS.get(pol),
        )
    ax.set_xticks(
        [j + width * (len(pols) - 1) / 2 for j in range(len(levels))],
        [f"{lvl:g} %\n(n={len(by[(pols[0], lvl)]) if pols else 0})" for lvl in levels],
    )
    ax.set_ylim(bottom=0)
    ax.set_xlabel("burst loss (n = bursts over all seeds and tasks)")
    ax.set_ylabel("burst-round latency (ms), mean ± 95 % CI")
    ax.set_title(f"burst rounds, {len(seeds)} seed(s)\n{LATENCY}", fontsize=9)
    ax.legend()

    ax = axes[2]
    groups: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
    for s in summary:
        groups[(s["task"], s["policy"])].append(s)
    keys = list(groups)
    times = [summarize(float(s["total_time_s"]) for s in groups[k]) for k in keys]
    bars = ax.bar(
        range(len(keys)),
        [t.mean for t in times],
        yerr=[_err(t) for t in times],
        capsize=3,
        color=[COLORS.get(k[1]) for k in keys],
    )
    for b, k in zip(bars, keys, strict=True):
        first_row = groups[k][0]
        metric = "acc" if first_row["metric"] == "accuracy" else "ppl"
        m = summarize(float(s["final_metric"]) for s in groups[k])
        ax.text(
            b.get_x() + b.get_width() / 2,
            b.get_height(),
            f"{metric} {m.mean:.3g}",
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_xticks(range(len(keys)), [f"{t}\n{p}" for t, p in keys], fontsize=7)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("training time (s), mean ± 95 % CI")
    ax.set_title(
        f"training time (slowest worker, first → last round) and final metric,\n"
        f"{len(seeds)} seed(s)",
        fontsize=9,
    )
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return png


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m experiments.plot", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--results", default="results")
    args = ap.parse_args(argv)
    out = pathlib.Path(args.results)
    png = plot_microburst(
        out / "microburst_latency.csv", out / "training_summary.csv", out / "microburst.png"
    )
    print(f"wrote {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
