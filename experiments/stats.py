"""Statistics of the experiments: mean, standard deviation and a 95 % confidence interval over
seeds, and the two conventions a ratio of times is written in.

Every experiment runs each configuration under several seeds (``--seeds N``) and reports, per
figure, the mean over seeds, the sample standard deviation (n − 1) and the 95 % confidence
interval of the mean from Student's t distribution (``mean ± t(0.975, n−1) · sd / √n``;
scipy's ``t.ppf``). With one seed the interval is unknown (NaN), never zero.

Ratios of two times T_base (the baseline) and T_new are printed in both conventions that
papers use, each named where it appears:

* **reduction** ``1 − T_new / T_base`` (in %): "training time 24.4 % lower" (DBLP's abstract);
* **speed-up − 1** ``T_base / T_new − 1`` (in %): the baseline normalised to the new system
  = 1 (DBLP's Table VIII: 1.264 reads "26.4 % slower").

Percentiles elsewhere are :func:`numpy.percentile` (linear interpolation, see README).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

CONFIDENCE = 0.95
SUMMARY_COLUMNS = ("n", "mean", "sd", "ci95_low", "ci95_high", "min", "max")
"""The columns of :meth:`Summary.row` (after its prefix), in order."""


@dataclass(frozen=True)
class Summary:
    """One figure over seeds: its mean, spread and 95 % confidence interval of the mean."""

    n: int
    mean: float
    sd: float
    ci_low: float
    ci_high: float
    min: float
    max: float

    @property
    def half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2

    def format(self, fmt: str = ".2f", unit: str = "") -> str:
        """``mean ± half-width unit (95 % CI, n seeds)``; one sample: just the value."""
        if self.n == 0:
            return "n/a"
        if self.n == 1 or math.isnan(self.half_width):
            return f"{self.mean:{fmt}}{unit} (1 seed)"
        hw = fmt.lstrip("+ ")
        return f"{self.mean:{fmt}}{unit} ± {self.half_width:{hw}}{unit} (95 % CI, n={self.n})"

    def short(self, fmt: str = ".2f", unit: str = "") -> str:
        """``mean ± half-width unit`` for a table cell whose header names the interval; one
        sample: just the value."""
        if self.n == 0:
            return "n/a"
        if self.n == 1 or math.isnan(self.half_width):
            return f"{self.mean:{fmt}}{unit}"
        return f"{self.mean:{fmt}}{unit} ± {self.half_width:{fmt.lstrip('+ ')}}{unit}"

    def row(self, prefix: str = "") -> dict[str, float | int]:
        """The CSV columns of this summary (``<prefix>mean``, ``sd``, ``ci_low``, ...)."""
        return {
            f"{prefix}n": self.n,
            f"{prefix}mean": self.mean,
            f"{prefix}sd": self.sd,
            f"{prefix}ci95_low": self.ci_low,
            f"{prefix}ci95_high": self.ci_high,
            f"{prefix}min": self.min,
            f"{prefix}max": self.max,
        }

    @classmethod
    def from_row(cls, row: Mapping[str, object], prefix: str = "") -> Summary:
        """The summary that :meth:`row` wrote (a CSV row read back; blank cells are NaN)."""
        n = to_float(row.get(f"{prefix}n"))
        vals = [to_float(row.get(f"{prefix}{c}")) for c in SUMMARY_COLUMNS[1:]]
        return cls(0 if math.isnan(n) else int(n), *vals)

    def error_bar(self) -> tuple[float, float]:
        """(mean − low, high − mean) of the 95 % interval, for a plot's error bar; (0, 0) where
        it is unknown (one seed), so that no bar is drawn rather than a zero-width claim."""
        if math.isnan(self.ci_low) or math.isnan(self.ci_high):
            return (0.0, 0.0)
        return (self.mean - self.ci_low, self.ci_high - self.mean)


def summarize(values: Iterable[float]) -> Summary:
    """Mean, sample standard deviation and the t-based 95 % interval of ``values``
    (NaN values are left out; an empty input gives NaNs and n = 0)."""
    xs = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    n = len(xs)
    if n == 0:
        nan = math.nan
        return Summary(0, nan, nan, nan, nan, nan, nan)
    mean = float(xs.mean())
    if n == 1:
        return Summary(1, mean, math.nan, math.nan, math.nan, mean, mean)
    sd = float(xs.std(ddof=1))
    half = float(sps.t.ppf(0.5 + CONFIDENCE / 2, n - 1)) * sd / math.sqrt(n)
    return Summary(n, mean, sd, mean - half, mean + half, float(xs.min()), float(xs.max()))


def to_float(value: object) -> float:
    """A CSV cell as a number: blank or missing (a figure that does not exist, such as no
    recovery or a failed seed) is NaN, which :func:`summarize` leaves out."""
    if value is None or value == "":
        return math.nan
    return float(str(value))


def format_values(values: Iterable[float], fmt: str = ".1f") -> str:
    """Per-seed values, space-separated, ``-`` for a missing one."""
    return " ".join("-" if math.isnan(v) else f"{v:{fmt}}" for v in values)


def summary_rows(
    rows: Sequence[Mapping[str, object]],
    keys: Sequence[str],
    figures: Sequence[str],
    ndigits: int | None = None,
) -> list[dict[str, object]]:
    """One row per group of ``keys`` (in first-seen order) and figure: the group's key values,
    ``figure`` and :meth:`Summary.row` of the figure's values over the group's rows (one row per
    seed; blank cells are left out), rounded to ``ndigits`` decimals if given."""
    groups: dict[tuple[object, ...], list[Mapping[str, object]]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r)
    out: list[dict[str, object]] = []
    for key, mine in groups.items():
        for fig in figures:
            s = summarize(to_float(r.get(fig)) for r in mine)
            row = s.row()
            if ndigits is not None:
                row = {k: v if isinstance(v, int) else round(v, ndigits) for k, v in row.items()}
            out.append({**dict(zip(keys, key, strict=True)), "figure": fig, **row})
    return out


def reduction_pct(base: float, new: float) -> float:
    """``100 · (1 − new / base)``: how much lower ``new`` is than ``base``, in percent."""
    return 100.0 * (1.0 - new / base) if base > 0 else math.nan


def slowdown_pct(base: float, new: float) -> float:
    """``100 · (base / new − 1)``: the baseline normalised to ``new`` = 1, in percent."""
    return 100.0 * (base / new - 1.0) if new > 0 else math.nan


def paired(base: Sequence[float], new: Sequence[float]) -> tuple[list[float], list[float]]:
    """Per-seed (reduction %, slowdown %) of paired measurements (same seed, same order)."""
    if len(base) != len(new):
        raise ValueError(f"paired samples of different lengths ({len(base)} vs {len(new)})")
    return (
        [reduction_pct(b, x) for b, x in zip(base, new, strict=True)],
        [slowdown_pct(b, x) for b, x in zip(base, new, strict=True)],
    )
