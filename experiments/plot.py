"""Plots of the microburst experiment and the demo, drawn from their CSVs only.

``python -m experiments.plot [--results results]`` redraws ``results/microburst.png`` from
``microburst_latency.csv`` and ``training_summary.csv``: per-round communication latency of
every policy (log scale, bursts marked), the burst rounds' latency by burst level, and the
training time and final metric per policy.
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import sys
from collections import defaultdict
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"dblp": "tab:green", "fixed": "tab:orange", "reliable": "tab:blue"}


def _read(path: pathlib.Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def plot_microburst(
    latency_csv: pathlib.Path, summary_csv: pathlib.Path, png: pathlib.Path
) -> pathlib.Path:
    """Draw the three panels into ``png`` (per task: the first task's latency trace)."""
    rows = _read(latency_csv)
    summary = _read(summary_csv)
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
    ax = axes[0]
    first = [r for r in rows if r["task"] == tasks[0]]
    for pol in dict.fromkeys(r["policy"] for r in first):
        pts = [(int(r["round"]), float(r["latency_ms"])) for r in first if r["policy"] == pol]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], lw=1, label=pol, color=COLORS.get(pol))
    for r in first:
        if r["policy"] == "dblp" and float(r["burst_loss_pct"]) > 0:
            ax.axvline(int(r["round"]), color="red", alpha=0.25, lw=3)
            ax.text(
                int(r["round"]),
                1.0,
                f"{float(r['burst_loss_pct']):g}%",
                color="red",
                fontsize=8,
                ha="center",
                va="bottom",
                transform=ax.get_xaxis_transform(),
            )
    ax.set_yscale("log")
    ax.set_xlabel("round")
    ax.set_ylabel("communication latency (ms)")
    ax.set_title(f"{tasks[0]}: per-round latency (bursts in red)", pad=16)
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
        vals = [
            sum(by[(pol, lvl)]) / len(by[(pol, lvl)]) if by[(pol, lvl)] else 0 for lvl in levels
        ]
        ax.bar(
            [j + i * width for j in range(len(levels))],
            vals,
            width,
            label=pol,
            color=COLORS.get(pol),
        )
    ax.set_xticks(
        [j + width * (len(pols) - 1) / 2 for j in range(len(levels))],
        [f"{lvl:g} %" for lvl in levels],
    )
    ax.set_yscale("log")
    ax.set_xlabel("burst loss")
    ax.set_ylabel("burst-round latency (ms, mean over tasks)")
    ax.set_title("burst rounds")
    ax.legend()

    ax = axes[2]
    labels = [f"{s['task']}\n{s['policy']}" for s in summary]
    times = [float(s["total_time_s"]) for s in summary]
    bars = ax.bar(range(len(summary)), times, color=[COLORS.get(s["policy"]) for s in summary])
    for b, s in zip(bars, summary):
        metric = "acc" if s["metric"] == "accuracy" else "ppl"
        ax.text(
            b.get_x() + b.get_width() / 2,
            b.get_height(),
            f"{metric} {float(s['final_metric']):.3g}",
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_xticks(range(len(summary)), labels, fontsize=7)
    ax.set_ylabel("training time (s)")
    ax.set_title("training time and final metric")
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
