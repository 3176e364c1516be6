"""``make bench-collectives``' bookkeeping without a fabric: the sizes kept per link rate, the
rate list, the summary over runs (mean, sd, per-round ratio) and the plot drawn from the CSVs."""

from __future__ import annotations

import math
import pathlib

import pytest

from experiments.bench_collectives import (
    COLUMNS,
    RUN_COLUMNS,
    STREAM_COLUMNS,
    busbw_mbps,
    failover_summary,
    parse_args,
    parse_rates,
    plot,
    refresh_failover,
    sizes_for,
    stall_figures,
    stream_bytes,
    summarize_runs,
)
from experiments.outputs import read_rows, write_csv


def test_slow_links_leave_out_the_sizes_that_would_take_longer_than_max_s() -> None:
    sizes = [1 << 20, 4 << 20, 16 << 20]
    # 1.5 x 1 MiB x 8 bit at 5 Mbit/s = 2.5 s; 4 MiB = 10 s
    assert sizes_for(sizes, 5.0, 6.0) == [1 << 20]
    assert sizes_for(sizes, 20.0, 6.0) == [1 << 20, 4 << 20]
    assert sizes_for(sizes, 20.0, 11.0) == sizes


def test_the_failover_stream_scales_with_the_link_rate_unless_given() -> None:
    assert stream_bytes(0, 10.0) == 20 << 10  # 1.5 x 20 KiB x 8 bit at 10 Mbit/s: 25 ms
    assert stream_bytes(0, 2.0) == 8 << 10 and stream_bytes(0, 20.0) == 40 << 10
    assert stream_bytes(256, 10.0) == 256 << 10


def test_the_stall_is_the_longest_all_reduce_while_the_plane_was_down() -> None:
    # 50 ms each before; one finishes just after the failure (its packets had passed), the
    # next waits 7 s (TCP's back-off), then normal again after the plane came back at 4 s
    times = [(-0.15, -0.1), (-0.1, -0.05), (-0.05, 0.006), (0.006, 7.0), (7.0, 7.05)]
    figs = stall_figures(times, 4.0)
    assert figs["normal_ms"] == 50.0 and figs["first_done_ms"] == 6.0
    assert figs["stall_ms"] == pytest.approx(6994.0) and figs["extra_ms"] == pytest.approx(6944.0)
    # the one caught in flight had its packets past the plane; the next one met the failure
    assert figs["inflight_done_ms"] == 6.0 and figs["inflight_extra_ms"] == pytest.approx(6.0)
    assert figs["next_done_ms"] == 7000.0
    assert math.isnan(figs["one_plane_extra_ms"])  # nothing started on one plane after 1 s
    assert math.isnan(stall_figures([(-1.0, -0.5)], 4.0)["stall_ms"])


def test_one_plane_alone_is_measured_once_every_connection_has_found_the_failure() -> None:
    # 30 ms before; the caught one takes 70 ms (40 ms stalled), the next 60 ms on one plane,
    # and from 1 s on one plane gives 60-90 ms all-reduces
    times = [(-0.09, -0.06), (-0.06, -0.03), (-0.02, 0.05), (0.05, 0.11)]
    times += [(1.0 + i * 0.1, 1.06 + i * 0.1 + (0.03 if i == 3 else 0.0)) for i in range(10)]
    figs = stall_figures(times, 4.0)
    assert figs["normal_ms"] == pytest.approx(30.0)
    assert figs["inflight_done_ms"] == pytest.approx(50.0)
    assert figs["inflight_extra_ms"] == pytest.approx(40.0)
    assert figs["next_done_ms"] == pytest.approx(110.0)
    assert figs["one_plane_extra_ms"] == pytest.approx(60.0)
    assert figs["extra_ms"] == pytest.approx(60.0)  # the longest: one plane's, not the failure's


def test_rates_parse_and_bad_ones_are_refused() -> None:
    assert parse_rates("5,10, 20") == [5.0, 10.0, 20.0]
    for bad in ("", "0", "5,-1", "x", "nan"):
        with pytest.raises(ValueError):
            parse_rates(bad)
    with pytest.raises(SystemExit):
        parse_args(["--link-mbps", "5,zero"])
    assert parse_args(["--link-mbps", "5,10"]).link_mbps == [5.0, 10.0]


def _run(rate: float, rnd: int, backend: str, size: int, ms: float) -> dict[str, object]:
    return {
        "link_mbps": rate,
        "round": rnd,
        "backend": backend,
        "size_bytes": size,
        "reps": 3,
        "latency_ms": ms,
        "busbw_mbps": busbw_mbps(size, ms / 1e3, 4),
    }


def test_summary_gives_mean_and_spread_over_runs_and_the_ratio_per_round() -> None:
    mib = 1 << 20
    runs = [
        _run(10, 0, "tailfabric", mib, 500.0),
        _run(10, 0, "gloo", mib, 1000.0),
        _run(10, 1, "tailfabric", mib, 1000.0),
        _run(10, 1, "gloo", mib, 1000.0),
    ]
    rows = {r["backend"]: r for r in summarize_runs(runs)}
    tf, gloo = rows["tailfabric"], rows["gloo"]
    assert tf["runs"] == 2 and tf["latency_ms"] == 750.0
    bw_fast, bw_slow = busbw_mbps(mib, 0.5, 4), busbw_mbps(mib, 1.0, 4)
    assert tf["busbw_mbps"] == pytest.approx((bw_fast + bw_slow) / 2, abs=1e-3)
    assert tf["busbw_min_mbps"] == pytest.approx(bw_slow, abs=1e-3)
    assert tf["busbw_sd_mbps"] == pytest.approx(abs(bw_fast - bw_slow) / math.sqrt(2), abs=1e-3)
    # per round: 2.0 and 1.0
    assert tf["ratio"] == 1.5 and tf["ratio_min"] == 1.0 and tf["ratio_max"] == 2.0
    assert "ratio" not in gloo and gloo["busbw_sd_mbps"] == 0.0


def test_plot_is_drawn_from_the_csvs_alone(tmp_path: pathlib.Path) -> None:
    runs = [
        _run(rate, rnd, backend, size, ms * (1 + rnd / 10) * (10 / rate))
        for rate in (5.0, 10.0)
        for rnd in range(2)
        for backend, ms in (("tailfabric", 400.0), ("gloo", 800.0))
        for size in (64 << 10, 1 << 20)
    ]
    out = tmp_path / "bench_collectives.csv"
    fail = {"kind": "failover", "backend": "tailfabric", "link_mbps": 10.0, "stall_ms": 40.0}
    write_csv(out, COLUMNS, [*summarize_runs(runs), {**fail, "down_s": 4.0}])
    write_csv(tmp_path / "bench_collectives_runs.csv", RUN_COLUMNS, runs)
    stream = [
        {
            "link_mbps": 10.0,
            "backend": "tailfabric",
            "index": i,
            "start_s": i - 1.0,
            "end_s": i - 0.9,
            "latency_ms": 100.0,
        }
        for i in range(3)
    ]
    write_csv(tmp_path / "bench_collectives_failover.csv", STREAM_COLUMNS, stream)
    png = plot(out)
    assert png.exists() and png.stat().st_size > 10_000
    ratios = [r["ratio"] for r in read_rows(out) if r["backend"] == "tailfabric" and r["ratio"]]
    assert ratios and all(float(x) == pytest.approx(2.0, rel=0.01) for x in ratios)


def test_failover_runs_are_summarised_and_recomputed_per_run(tmp_path: pathlib.Path) -> None:
    # three runs: the stalled all-reduce took 0.15, 0.25 and 0.35 s against a normal 0.05 s
    stream = [
        {
            "link_mbps": 10.0,
            "backend": "tailfabric",
            "run": run,
            "index": i,
            "start_s": start,
            "end_s": start + lat,
            "latency_ms": lat * 1e3,
        }
        for run, stall in enumerate((0.15, 0.25, 0.35))
        for i, (start, lat) in enumerate([(-0.2, 0.05), (-0.1, 0.05), (-0.01, stall), (1.0, 0.05)])
    ]
    per_run = [
        stall_figures(
            [(float(r["start_s"]), float(r["end_s"])) for r in stream if r["run"] == n], 4.0
        )
        for n in range(3)
    ]
    summary = failover_summary(per_run)
    assert summary["runs"] == 3
    assert summary["extra_ms"] == pytest.approx(200.0)
    assert summary["extra_sd_ms"] == pytest.approx(100.0)
    assert (summary["extra_min_ms"], summary["extra_max_ms"]) == pytest.approx((100.0, 300.0))
    row = {"kind": "failover", "backend": "tailfabric", "link_mbps": "10.0", "down_s": "4.0"}
    rows = [dict(row)]
    refresh_failover(rows, [{k: str(v) for k, v in r.items()} for r in stream])
    assert float(rows[0]["extra_ms"]) == pytest.approx(200.0)
    assert float(rows[0]["extra_max_ms"]) == pytest.approx(300.0)
    assert rows[0]["runs"] == "3"
    assert float(rows[0]["inflight_done_max_ms"]) == pytest.approx(340.0)
    assert float(rows[0]["next_done_ms"]) == float(rows[0]["next_done_max_ms"]) == 1050.0
    # a run with nothing stalled (no all-reduce while the plane was down) is left out
    nan_run = stall_figures([(-1.0, -0.5)], 4.0)
    assert failover_summary([*per_run, nan_run])["runs"] == 3
    assert failover_summary([nan_run])["runs"] == 0
    with pytest.raises(SystemExit):
        parse_args(["--failover-runs", "0"])
