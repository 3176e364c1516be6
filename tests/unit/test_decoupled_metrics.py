"""Goodput and uptime from records: a learner step is useful once a later report of the same
incarnation was merged, an elastic attempt once its round was committed; goodput divides
useful work by members × wall time, uptime is the union of useful intervals; CSVs have a
header row."""

from __future__ import annotations

import csv
import pathlib

import pytest

from host.train.decoupled import metrics
from host.train.decoupled.elastic import AttemptRecord, Commit, WorkerEval
from host.train.decoupled.learner import StepRecord
from host.train.decoupled.syncer import Included, MergeRecord


@pytest.mark.parametrize(
    ("intervals", "expect"),
    [
        ([], 0.0),
        ([(0, 1), (2, 3)], 2.0),
        ([(0, 2), (1, 3)], 3.0),
        ([(0, 5), (1, 2), (3, 4)], 5.0),
        ([(2, 1), (0, 0)], 0.0),
    ],
)
def test_union_counts_overlaps_once(intervals: list[tuple[float, float]], expect: float) -> None:
    assert metrics.union_s(intervals) == pytest.approx(expect)


def step(learner: int, inc: int, s: int, start: float) -> StepRecord:
    return StepRecord(learner, inc, s, start, start + 1.0, 0.5, 1.0, 16, -1, 0)


def merge(*included: tuple[int, int, int]) -> MergeRecord:
    inc = tuple(Included(m, i, s, 1, 16, 0, 1.0) for m, i, s in included)
    return MergeRecord(0, 1, 0, 0, 0, len(inc), 2, 0, 0, 16, 0, 0.0, inc)


def test_steps_are_useful_up_to_their_incarnations_last_merged_report() -> None:
    steps = [
        step(0, 0, 1, 0.0),
        step(0, 0, 2, 1.0),
        step(0, 0, 3, 2.0),  # killed before its next report was merged: lost
        step(0, 1, 3, 4.0),  # the restarted incarnation redoes step 3
        step(1, 0, 1, 0.0),
    ]
    work = metrics.decoupled_work(steps, [merge((0, 0, 2)), merge((0, 1, 3), (1, 0, 1))])
    assert [w.useful for w in work] == [True, True, False, True, True]
    assert metrics.goodput(work, members=2, wall_s=5.0) == pytest.approx(4 * 0.5 / 10)
    # useful intervals: [0, 2] ∪ [4, 5] ∪ [0, 1] = 3 s of 5
    assert metrics.uptime(work, wall_s=5.0) == pytest.approx(0.6)


def test_elastic_attempts_are_useful_when_committed() -> None:
    attempts = [
        AttemptRecord(0, 0, 0, 0.0, 1.0, 0.4, 2.0, 16, True),
        AttemptRecord(0, 0, 1, 1.0, 2.0, 0.4, 2.0, 16, False),
        AttemptRecord(1, 0, 0, 0.0, 1.0, 0.4, 2.0, 16, True),
    ]
    work = metrics.elastic_work(attempts)
    s = metrics.summarize(
        "elastic_dp", work, 2, 2.0, tokens_merged=32, down_s=0, paused_s=0, final_val_loss=1.0
    )
    assert (s.steps, s.useful_steps) == (3, 2)
    assert s.goodput == pytest.approx(0.8 / 4) and s.uptime == pytest.approx(0.5)
    assert s.allocated_s == 4.0 and s.useful_s == pytest.approx(0.8)


def test_no_wall_time_no_goodput() -> None:
    assert metrics.goodput([], 2, 0.0) == 0.0 and metrics.uptime([], 0.0) == 0.0


def test_elastic_curve_counts_the_tokens_of_rounds_before_the_evaluation() -> None:
    commits = [Commit(r, r, r, (0, 1), 32) for r in range(4)]
    curve = metrics.elastic_curve([WorkerEval(3.5, 4, 1.0), WorkerEval(1.5, 2, 2.0)], commits)
    assert [(p.tokens, p.val_loss) for p in curve] == [(64, 2.0), (128, 1.0)]


def test_fragment_stats_average_quorum_and_grace() -> None:
    a = MergeRecord(1, 1, 0, 0, 0.1, 2, 3, 0.1, 0.05, 32, 1, 0.0, ())
    b = MergeRecord(1, 2, 0, 0, 0.2, 4, 4, 0.3, 0.1, 64, 3, 0.0, ())
    s0, s1 = metrics.fragment_stats([a, b], 2)
    assert (s0.merges, s1.merges, s1.mean_quorum, s1.max_staleness, s1.tokens) == (0, 2, 3, 3, 96)
    assert s1.mean_grace_s == pytest.approx(0.2)


def test_rows_are_written_with_a_header(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "x" / "steps.csv"
    metrics.write_rows(path, [step(0, 0, 1, 0.0), step(1, 0, 1, 0.5)])
    with path.open() as f:
        rows = list(csv.DictReader(f))
    assert rows[1]["learner"] == "1" and "start_at_s" in rows[0] and "work_s" in rows[0]
    with pytest.raises(ValueError, match="no records"):
        metrics.write_rows(path, [])
