"""The adaptive grace window: γ·(τ·ξ_step − ξ_quorum − ξ_sync) clamped to [0, cap], from
exponential moving averages fed with time passed in; no window without a step estimate or
without overlap; step samples only between reports of the same incarnation."""

from __future__ import annotations

import pytest

from host.train.decoupled.config import GraceConfig
from host.train.decoupled.grace import TIMINGS, Ema, GraceWindow, Timing, grace_window_s

CFG = GraceConfig(gamma=0.5, cap_s=0.2, ema_alpha=0.5)


@pytest.mark.parametrize(
    ("tau", "step_s", "quorum_s", "sync_s", "expect"),
    [
        (2, 0.1, 0.02, 0.03, 0.5 * (0.2 - 0.05)),  # the formula
        (2, 0.1, None, None, 0.1),  # unmeasured quorum and sync count 0
        (2, 0.1, 0.15, 0.1, 0.0),  # no slack left: clamped at 0
        (10, 0.1, 0.0, 0.0, 0.2),  # more slack than the cap: clamped at the cap
        (0, 0.1, 0.0, 0.0, 0.0),  # no overlap, no window
        (2, None, 0.0, 0.0, 0.0),  # no step estimate, no window
    ],
)
def test_window_formula_and_clamping(
    tau: int, step_s: float | None, quorum_s: float | None, sync_s: float | None, expect: float
) -> None:
    assert grace_window_s(CFG, tau, step_s, quorum_s, sync_s) == pytest.approx(expect)


def test_gamma_zero_means_no_window() -> None:
    assert grace_window_s(GraceConfig(gamma=0.0), 5, 1.0, 0.0, 0.0) == 0.0


def test_ema_starts_at_its_first_sample_then_moves_by_alpha() -> None:
    e = Ema(0.25)
    assert e.value is None
    assert e.add(4.0) == 4.0
    assert e.add(8.0) == pytest.approx(5.0)
    e.add(float("nan"))
    e.add(-1.0)
    assert (e.value, e.samples) == (pytest.approx(5.0), 2)


def test_every_timing_has_an_ema() -> None:
    g = GraceWindow(CFG, 2)
    assert set(g.emas) == set(TIMINGS) == set(Timing)


def test_step_time_comes_from_consecutive_reports_of_one_incarnation() -> None:
    g = GraceWindow(CFG, overlap_steps=2)
    g.report(10.0, learner=0, incarnation=0, step=8)
    assert g.value(Timing.STEP) is None and g.window_s() == 0.0
    g.report(10.8, learner=0, incarnation=0, step=16)  # 0.1 s per step
    assert g.value(Timing.STEP) == pytest.approx(0.1)
    g.report(11.0, learner=1, incarnation=0, step=4)  # another learner: no sample yet
    g.report(20.0, learner=0, incarnation=1, step=8)  # restarted: no sample across it
    assert g.emas[Timing.STEP].samples == 1
    g.observe(Timing.QUORUM, 0.02)
    g.observe(Timing.SYNC, 0.01)
    assert g.window_s() == pytest.approx(0.5 * (2 * 0.1 - 0.03))


def test_a_first_incarnations_first_report_gives_a_step_sample_from_its_connection() -> None:
    g = GraceWindow(CFG, overlap_steps=2)
    g.connected(1.0, learner=0)
    g.connected(1.0, learner=1)
    g.report(1.8, learner=0, incarnation=0, step=8)  # 8 steps since it connected
    assert g.value(Timing.STEP) == pytest.approx(0.1)
    assert g.window_s() == pytest.approx(0.1)  # the job's first merge already has a window
    g.report(30.0, learner=1, incarnation=3, step=8)  # a restarted one: its step 0 is unknown
    g.report(31.0, learner=2, incarnation=0, step=8)  # never seen connecting
    assert g.emas[Timing.STEP].samples == 1
