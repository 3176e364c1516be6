"""The files an experiment writes beside its main CSV, and the CSV rows it writes and reads back.

``--out`` names an experiment's main CSV; :class:`Outputs` names the files beside it (the
summary over seeds, the plot; an experiment's own subclass adds its others with
:meth:`Outputs.beside`). :func:`write_csv` writes dict rows (a NaN as a blank cell, which
:func:`experiments.stats.to_float` reads back as NaN), :func:`read_rows` reads them back as
strings, and :func:`write_summary_csv` writes the mean, sd and 95 % CI over seeds of every
figure per group (:func:`experiments.stats.summary_rows`). In the plot :func:`ci_bars` draws
one series of grouped bars of such summaries (from zero, the 95 % CI as error bars),
:func:`paper_mark` a paper's value over a bar (:func:`paper_legend`: its legend entry), and
:func:`save_png` writes the PNG.
"""

from __future__ import annotations

import csv
import math
import pathlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from experiments.stats import SUMMARY_COLUMNS, Summary, summary_rows

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class Outputs:
    """Where an experiment writes (``--out`` names the main CSV; the rest sit beside it)."""

    out: pathlib.Path

    def beside(self, suffix: str) -> pathlib.Path:
        """``<stem><suffix>`` in the main CSV's folder (``_rounds.csv``: ``gossip_rounds.csv``)."""
        return self.out.with_name(self.out.stem + suffix)

    @property
    def summary(self) -> pathlib.Path:
        return self.beside("_summary.csv")

    @property
    def png(self) -> pathlib.Path:
        return self.out.with_suffix(".png")


def write_csv(
    path: pathlib.Path, columns: Sequence[str], rows: Sequence[Mapping[str, object]]
) -> None:
    """``rows`` under the header ``columns`` (other keys are left out; NaN: a blank cell)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow(
                {k: "" if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
            )


def read_rows(path: pathlib.Path) -> list[dict[str, str]]:
    """A CSV's rows, every cell a string."""
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def write_summary_csv(
    path: pathlib.Path,
    rows: Sequence[Mapping[str, object]],
    keys: Sequence[str],
    figures: Sequence[str],
    ndigits: int = 6,
) -> None:
    """Mean, sd and 95 % CI over seeds (one row each) of every figure, per group of ``keys``:
    columns ``keys``, ``figure``, then :data:`experiments.stats.SUMMARY_COLUMNS`."""
    summary = summary_rows(rows, keys, figures, ndigits=ndigits)
    write_csv(path, [*keys, "figure", *SUMMARY_COLUMNS], summary)


# -- the plot ---------------------------------------------------------------------------------


def ci_bars(
    ax: Axes,
    series: int,
    of: int,
    cells: Sequence[Summary],
    *,
    color: str | None,
    label: str,
) -> tuple[list[float], float]:
    """Series ``series`` of ``of`` side by side in a grouped bar chart: in category k (at x =
    k) a bar of ``cells[k]``'s mean from zero, the 95 % interval as its error bar (none for
    one seed); a category without values gets no bar. Returns every category's bar centre
    and the bars' width (for :func:`paper_mark`)."""
    width = 0.8 / max(1, of)
    xs = [k + (series - (of - 1) / 2) * width for k in range(len(cells))]
    keep = [(x, c) for x, c in zip(xs, cells, strict=True) if c.n > 0]
    bars = [c.error_bar() for _x, c in keep]
    ax.bar(
        [x for x, _c in keep],
        [c.mean for _x, c in keep],
        width,
        yerr=[[b[0] for b in bars], [b[1] for b in bars]],
        capsize=3,
        color=color,
        label=label,
    )
    return xs, width


def paper_mark(ax: Axes, x: float, width: float, value: float) -> None:
    """The paper's ``value`` as a black line over the bar centred at ``x``."""
    ax.plot([x - width / 2, x + width / 2], [value, value], color="black", lw=2)


def paper_legend(ax: Axes, label: str = "paper") -> None:
    """The legend's entry for the :func:`paper_mark` lines."""
    ax.plot([], [], color="black", lw=2, label=label)


def save_png(fig: Figure, png: pathlib.Path) -> pathlib.Path:
    """``fig``, laid out tight, into ``png`` (its folder made), then closed."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return png
