"""The microburst experiment's pieces: the burst schedule, the headline figures, the CSVs
(header rows, units in the names) and the plot drawn from them; the agents' record lines."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from experiments.microburst import CsvNames, burst_schedule, compute_figures, report, write_csvs
from experiments.plot import plot_microburst
from host.dblp.config import LossPolicy
from host.train.job import EventKind, JobEvent, JobSpec
from host.train.loop import EvalPoint, ServerRecord, WorkerResult, WorkerRound
from host.train.records import RecordError, from_line, to_line
from host.train.run import JobResult


def test_burst_schedule_is_seeded_spaced_and_one_burst_per_level() -> None:
    a = burst_schedule(150, [60, 70, 80, 90], seed=3)
    assert a == burst_schedule(150, [60, 70, 80, 90], seed=3)
    assert a != burst_schedule(150, [60, 70, 80, 90], seed=4)
    rounds = [e.round for e in a]
    assert rounds == sorted(rounds) and min(rounds) >= 30 and max(rounds) < 150
    assert all(b - x >= 3 for x, b in zip(rounds, rounds[1:]))
    assert sorted(e.value for e in a) == [60, 70, 80, 90]
    assert all(e.kind is EventKind.BURST for e in a)


def fake_result(
    policy: LossPolicy,
    burst_ms: float,
    calm_ms: float,
    accuracy: float,
    rounds: int = 20,
    burst_round: int = 10,
) -> JobResult:
    job = JobSpec(
        rounds=rounds, policy=policy, events=(JobEvent(burst_round, EventKind.BURST, 90),)
    )
    bound = {LossPolicy.DBLP: 0.408, LossPolicy.FIXED: 0.008, LossPolicy.RELIABLE: 0.0}[policy]
    lat = [burst_ms if r == burst_round else calm_ms for r in range(rounds)]
    server = tuple(
        ServerRecord(r, bound, 1.0, lat[r] / 2, 0.9 if r == burst_round else 1.0, 1.0, False, 0.0)
        for r in range(rounds)
    )
    workers = {}
    for rank in range(3):
        rows = tuple(
            WorkerRound(rank, r, 0.5, lat[r] / 2, lat[r], 1.0, bound, 0.0) for r in range(rounds)
        )
        total = sum(lat) / 1e3
        workers[rank] = WorkerResult(
            rank, rows, (EvalPoint(rounds - 1, total, accuracy),), total, 10
        )
    return JobResult(job, server, workers)


@pytest.fixture
def results() -> dict[tuple[str, LossPolicy], JobResult]:
    return {
        ("digits-mlp", LossPolicy.DBLP): fake_result(LossPolicy.DBLP, 1000, 100, 0.95),
        ("digits-mlp", LossPolicy.FIXED): fake_result(LossPolicy.FIXED, 5000, 100, 0.955),
        ("digits-mlp", LossPolicy.RELIABLE): fake_result(LossPolicy.RELIABLE, 6000, 120, 0.955),
    }


def test_figures_compare_dblp_with_the_fixed_baseline(results) -> None:  # type: ignore[no-untyped-def]
    fig = compute_figures(results)
    assert fig.speedup_mean_x == pytest.approx(5.0) and fig.speedup_by_level_x == {90.0: 5.0}
    assert fig.speedup_relaxed_mean_x == pytest.approx(5.0) and fig.bursts_relaxed == 1
    assert fig.time_reduction_pct["digits-mlp"] == pytest.approx(100 * (1 - 2.9 / 6.9))
    assert fig.calm_time_reduction_pct["digits-mlp"] == pytest.approx(0.0)
    assert fig.accuracy_difference_pp["digits-mlp"] == pytest.approx(-0.5)
    text = report(fig, results)
    assert "5.88x" in text and "24.4 %" in text and "0.5 pp" in text


def test_csvs_have_headers_units_and_one_row_per_round(results, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    names = CsvNames()
    write_csvs(tmp_path, results, compute_figures(results), "emu", names)
    with (tmp_path / names.latency).open() as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == [
        "task",
        "policy",
        "round",
        "burst_loss_pct",
        "latency_ms",
        "delivered_fraction",
        "loss_bound",
        "train_loss",
    ]
    assert len(rows) == 60
    burst = [r for r in rows if r["policy"] == "fixed" and r["burst_loss_pct"] == "90"]
    assert len(burst) == 1 and float(burst[0]["latency_ms"]) == pytest.approx(5000)
    with (tmp_path / names.summary).open() as fh:
        summary = list(csv.DictReader(fh))
    assert {r["policy"] for r in summary} == {"dblp", "fixed", "reliable"}
    assert set(summary[0]) >= {"total_time_s", "time_to_target_s", "final_metric"}
    with (tmp_path / names.figures).open() as fh:
        figs = {r["figure"]: r for r in csv.DictReader(fh)}
    assert figs["burst_speedup_max_x"]["paper"] == "5.88"
    png = plot_microburst(tmp_path / names.latency, tmp_path / names.summary, tmp_path / "x.png")
    assert png.stat().st_size > 10_000


def test_record_lines_round_trip_and_reject_bad_ones() -> None:
    rec = ServerRecord(3, 0.408, 1.5, 2.5, 0.9, 1.2, True, 7.0)
    assert from_line(to_line(rec)) == rec
    for bad in [
        "not json",
        json.dumps({"kind": "server_round", "round": 1}),
        json.dumps({"kind": "pickle", "data": "x"}),
        to_line(rec).replace('"round": 3', '"round": "three"'),
    ]:
        with pytest.raises(RecordError):
            from_line(bad)
