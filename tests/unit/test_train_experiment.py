"""The microburst experiment's pieces: the burst schedule, the headline figures, the CSVs
(header rows, units in the names) and the plot drawn from them; the agents' record lines."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from experiments.microburst import (
    CsvNames,
    Results,
    burst_schedule,
    compute_figures,
    report,
    write_csvs,
)
from experiments.plot import plot_microburst
from host.dblp.config import LossPolicy
from host.train.job import EventKind, JobEvent, JobSpec
from host.train.loop import EvalPoint, ServerRecord, WorkerResult, WorkerRound
from host.train.records import RecordError, from_line, to_line
from host.train.run import JobResult


def test_burst_schedule_is_seeded_spaced_and_as_dense_as_the_papers() -> None:
    a = burst_schedule(150, seed=3)
    assert a == burst_schedule(150, seed=3)
    assert any(burst_schedule(150, seed=s) != a for s in range(4, 10))
    counts = {len(burst_schedule(150, seed=s)) for s in range(40)}
    assert counts == {2, 3}  # 2-3 bursts per training run, as in the paper
    levels = {e.value for s in range(40) for e in burst_schedule(150, seed=s)}
    assert levels == {60.0, 70.0, 80.0, 90.0}
    for s in range(40):
        rounds = [e.round for e in burst_schedule(150, seed=s)]
        assert rounds == sorted(rounds) and min(rounds) >= 37 and max(rounds) < 150
        assert all(b - x >= 3 for x, b in zip(rounds, rounds[1:], strict=False))
    assert all(e.kind is EventKind.BURST for e in a)
    with pytest.raises(ValueError, match="do not fit"):
        burst_schedule(5, seed=1, per_run=(3,))


def fake_result(
    policy: LossPolicy,
    burst_ms: float,
    calm_ms: float,
    accuracy: float,
    seed: int = 1,
    rounds: int = 20,
    burst_round: int = 10,
) -> JobResult:
    job = JobSpec(
        rounds=rounds,
        policy=policy,
        seed=seed,
        events=(JobEvent(burst_round, EventKind.BURST, 90),),
    )
    bound = {LossPolicy.DBLP: 0.408, LossPolicy.FIXED: 0.008, LossPolicy.RELIABLE: 0.0}[policy]
    lat = [burst_ms if r == burst_round else calm_ms for r in range(rounds)]
    server = tuple(
        ServerRecord(r, bound, 1.0, lat[r] / 2, 0.9 if r == burst_round else 1.0, 1.0, False, 0.0)
        for r in range(rounds)
    )
    workers = {}
    for rank in range(3):
        starts = [sum(lat[:r]) / 1e3 + rank * 1e-3 for r in range(rounds)]
        rows = tuple(
            WorkerRound(
                rank, r, 0.5, lat[r] / 2, lat[r] - rank, 1.0, bound, 0.0, start_mono=starts[r]
            )
            for r in range(rounds)
        )
        total = sum(lat) / 1e3
        workers[rank] = WorkerResult(
            rank, rows, (EvalPoint(rounds - 1, total, accuracy),), total, 10
        )
    return JobResult(job, server, workers)


@pytest.fixture
def results() -> Results:
    out: Results = {}
    for seed, (fixed_burst, acc) in enumerate([(5000, 0.955), (3000, 0.945)], start=1):
        out[("digits-mlp", LossPolicy.DBLP, seed)] = fake_result(
            LossPolicy.DBLP, 1000, 100, 0.95, seed
        )
        out[("digits-mlp", LossPolicy.FIXED, seed)] = fake_result(
            LossPolicy.FIXED, fixed_burst, 100, acc, seed
        )
        out[("digits-mlp", LossPolicy.RELIABLE, seed)] = fake_result(
            LossPolicy.RELIABLE, 6000, 120, 0.955, seed
        )
    return out


def test_a_rounds_latency_is_the_slowest_workers_first_send_to_last_byte() -> None:
    res = fake_result(LossPolicy.DBLP, 1000, 100, 0.95)
    rows = res.rows()
    assert rows[10].latency_ms == pytest.approx(1000)  # rank 0: lat - 0, the slowest
    assert rows[3].latency_ms == pytest.approx(100)
    assert rows[10].broadcast_ms == pytest.approx(500) and rows[10].push_ms == pytest.approx(500)


def test_figures_pair_each_seed_and_summarise_over_seeds(results: Results) -> None:
    fig = compute_figures(results)
    assert [b.speedup_x for b in fig.bursts] == [pytest.approx(5.0), pytest.approx(3.0)]
    s = fig.summary("speedup_x")
    assert s.n == 2 and s.mean == pytest.approx(4.0) and s.ci_low < 4.0 < s.ci_high
    # training time in both conventions: 1 - T_dblp / T_fixed and T_fixed / T_dblp - 1
    d_total, f_total = 2.9, 6.9
    red = fig.seeds[0].time_reduction_pct
    assert red == pytest.approx(100 * (1 - d_total / f_total))
    assert fig.seeds[0].time_slowdown_pct == pytest.approx(100 * (f_total / d_total - 1))
    assert fig.seeds[0].calm_reduction_pct == pytest.approx(0.0)
    diffs = [x.metric_difference for x in fig.seeds]
    assert diffs == [pytest.approx(-0.5), pytest.approx(0.5)]
    text = report(fig, results)
    assert "4.00-5.97" in text and "24.4" in text and "95 % CI" in text
    assert "T_fixed/T_dblp - 1" in text and "1 - T_dblp/T_fixed" in text


def test_csvs_have_seeds_phases_and_figures_with_intervals(
    results: Results, tmp_path: Path
) -> None:
    names = CsvNames()
    write_csvs(tmp_path, results, compute_figures(results), "emu", names)
    with (tmp_path / names.latency).open() as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0])[:6] == ["seed", "task", "policy", "round", "burst_loss_pct", "latency_ms"]
    assert {"push_ms", "gather_ms", "broadcast_ms", "attempts", "gate_ms", "faults"} <= set(rows[0])
    assert len(rows) == 2 * 3 * 20
    burst = [r for r in rows if r["policy"] == "fixed" and r["burst_loss_pct"] == "90"]
    assert sorted(float(r["latency_ms"]) for r in burst) == [3000, 5000]
    with (tmp_path / names.summary).open() as fh:
        summary = list(csv.DictReader(fh))
    assert {(r["policy"], r["seed"]) for r in summary} == {
        (p, s) for p in ("dblp", "fixed", "reliable") for s in ("1", "2")
    }
    with (tmp_path / names.figures).open() as fh:
        figs = {(r["figure"], r["task"]): r for r in csv.DictReader(fh)}
    speed = figs[("burst_speedup_x", "all")]
    assert speed["n"] == "2" and float(speed["mean"]) == pytest.approx(4.0)
    assert float(speed["ci95_low"]) < 4.0 < float(speed["ci95_high"])
    assert "Table VIII" in figs[("training_time_slowdown_pct", "digits-mlp")]["convention"]
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
