"""experiments.stats: mean, sd and the t-based 95 % interval over seeds; both ratio conventions."""

from __future__ import annotations

import csv
import io
import math

import pytest
from scipy import stats as sps

from experiments.stats import (
    SUMMARY_COLUMNS,
    Summary,
    format_values,
    paired,
    reduction_pct,
    slowdown_pct,
    summarize,
    summary_rows,
    to_float,
)

T_975_DF1 = 12.706204736174707  # Student's t, 97.5 % quantile, 1 degree of freedom (tables)
T_975_DF3 = 3.182446305284263


def test_two_seeds_give_the_hand_computed_interval() -> None:
    # mean 3, sd sqrt(((2-3)^2 + (4-3)^2) / 1) = sqrt(2), half-width t * sd / sqrt(2) = t
    s = summarize([2.0, 4.0])
    assert (s.n, s.mean, s.sd) == pytest.approx((2, 3.0, math.sqrt(2)))
    assert s.ci_low == pytest.approx(3.0 - T_975_DF1)
    assert s.ci_high == pytest.approx(3.0 + T_975_DF1)
    assert s.half_width == pytest.approx(T_975_DF1)
    assert (s.min, s.max) == (2.0, 4.0)


def test_four_seeds_match_scipy_and_the_t_table() -> None:
    xs = [1.0, 2.0, 3.0, 4.0]
    s = summarize(xs)
    sd = math.sqrt(5 / 3)  # squares of deviations 2.25 + 0.25 + 0.25 + 2.25 = 5, over n - 1
    assert s.sd == pytest.approx(sd)
    assert s.half_width == pytest.approx(T_975_DF3 * sd / 2)
    low, high = sps.t.interval(0.95, 3, loc=2.5, scale=sps.sem(xs))
    assert (s.ci_low, s.ci_high) == pytest.approx((low, high))


def test_one_seed_has_no_interval_rather_than_a_zero_one() -> None:
    s = summarize([7.5])
    assert (s.n, s.mean, s.min, s.max) == (1, 7.5, 7.5, 7.5)
    assert math.isnan(s.sd) and math.isnan(s.ci_low) and math.isnan(s.ci_high)
    assert s.format(".1f", " ms") == "7.5 ms (1 seed)"
    assert s.error_bar() == (0.0, 0.0)


def test_nan_values_are_left_out() -> None:
    s = summarize([1.0, math.nan, 3.0])
    assert (s.n, s.mean, s.sd) == pytest.approx((2, 2.0, math.sqrt(2)))


def test_no_values_give_nans_and_n_zero() -> None:
    s = summarize([math.nan])
    assert s.n == 0 and math.isnan(s.mean) and s.format() == "n/a"


def test_format_names_the_interval_and_n() -> None:
    assert summarize([2.0, 4.0]).format(".1f", " ms") == "3.0 ms ± 12.7 ms (95 % CI, n=2)"


def test_error_bar_is_the_distance_to_each_end() -> None:
    s = summarize([2.0, 4.0])
    assert s.error_bar() == pytest.approx((T_975_DF1, T_975_DF1))


@pytest.mark.parametrize(
    "base, new, reduction, slowdown",
    [
        (100.0, 75.0, 25.0, 100 / 3),  # 25 % lower; the baseline 33.3 % higher
        (1.264, 1.0, 100 * (1 - 1 / 1.264), 26.4),  # DBLP Table VIII: 1.264 is "26.4 % slower"
        (10.0, 10.0, 0.0, 0.0),
        (50.0, 100.0, -100.0, -50.0),  # the new one is worse: both negative
    ],
)
def test_both_ratio_conventions(base: float, new: float, reduction: float, slowdown: float) -> None:
    assert reduction_pct(base, new) == pytest.approx(reduction)
    assert slowdown_pct(base, new) == pytest.approx(slowdown)


def test_ratios_of_a_zero_are_unknown() -> None:
    assert math.isnan(reduction_pct(0.0, 1.0)) and math.isnan(slowdown_pct(1.0, 0.0))


def test_paired_ratios_are_per_seed_and_need_equal_lengths() -> None:
    red, slow = paired([100.0, 200.0], [50.0, 100.0])
    assert red == [50.0, 50.0] and slow == [100.0, 100.0]
    with pytest.raises(ValueError, match=r"different lengths \(2 vs 1\)"):
        paired([1.0, 2.0], [1.0])


@pytest.mark.parametrize("cell, value", [("", math.nan), (None, math.nan), ("2.5", 2.5), (3, 3.0)])
def test_csv_cells_become_numbers_and_blanks_nan(cell: object, value: float) -> None:
    got = to_float(cell)
    assert math.isnan(got) if math.isnan(value) else got == value


def test_per_seed_values_are_printed_with_a_dash_for_a_missing_one() -> None:
    assert format_values([1.0, math.nan, 2.25], ".1f") == "1.0 - 2.2"


def test_summary_rows_group_by_keys_in_order_and_skip_blank_cells() -> None:
    rows = [
        {"transport": "mrc", "seed": "0", "t_ms": "10"},
        {"transport": "single", "seed": "0", "t_ms": "50"},
        {"transport": "mrc", "seed": "1", "t_ms": "30"},
        {"transport": "single", "seed": "1", "t_ms": ""},  # a failed seed
    ]
    out = summary_rows(rows, ("transport",), ("t_ms",))
    assert [(r["transport"], r["figure"], r["n"], r["mean"]) for r in out] == [
        ("mrc", "t_ms", 2, 20.0),
        ("single", "t_ms", 1, 50.0),
    ]
    assert list(out[0])[2:] == list(SUMMARY_COLUMNS)
    rounded = summary_rows(rows, ("transport",), ("t_ms",), ndigits=2)[0]
    assert rounded["n"] == 2 and rounded["sd"] == round(math.sqrt(200), 2)


def test_a_summary_round_trips_through_a_csv_row() -> None:
    s = summarize([1.0, 2.0, 4.0])
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(s.row("x_")))
    w.writeheader()
    w.writerow(s.row("x_"))
    back = Summary.from_row(next(csv.DictReader(io.StringIO(buf.getvalue()))), "x_")
    assert back.n == 3
    assert (back.mean, back.ci_low, back.ci_high) == pytest.approx((s.mean, s.ci_low, s.ci_high))
    assert Summary.from_row({}).n == 0


def test_a_short_cell_is_the_mean_and_half_width_only() -> None:
    s = summarize([1.0, 2.0, 3.0])
    assert s.short(".1f", " s") == f"2.0 s ± {s.half_width:.1f} s"
    assert "CI" not in s.short() and summarize([4.0]).short(".2f") == "4.00"
    assert summarize([]).short() == "n/a"
