"""The emulated accelerator's clock (:meth:`Life.pace`): steps padded to their nominal time;
with catch-up, host jitter between steps is made up by the next steps, while pauses, stalls
the member reports and delays beyond the catch-up bound stay in its time."""

from __future__ import annotations

import time

import pytest

from host.train.decoupled.process import Life

STEP_S = 0.02


def _steps(
    life: Life, n: int, *, catch_up_s: float, jitter_at: int = -1, jitter_s: float = 0.0
) -> float:
    t = time.monotonic()
    for k in range(n):
        if k == jitter_at:
            time.sleep(jitter_s)  # the host held the member up between two steps
        life.pace(time.monotonic(), STEP_S, catch_up_s=catch_up_s)
    return time.monotonic() - t


def test_a_step_lasts_its_nominal_time_and_reports_it() -> None:
    life = Life(0, lambda: 1.0)
    t0 = time.monotonic()
    assert life.pace(t0, STEP_S) == STEP_S
    assert time.monotonic() - t0 >= STEP_S


def test_a_slowed_step_lasts_its_factor_but_counts_its_nominal_time() -> None:
    life = Life(0, lambda: 3.0)
    t0 = time.monotonic()
    assert life.pace(t0, STEP_S) == STEP_S
    assert time.monotonic() - t0 >= 3 * STEP_S


def test_jitter_is_caught_up_with_catch_up_and_kept_without() -> None:
    n, jitter = 10, 1.5 * STEP_S
    with_catch_up = _steps(
        Life(0, lambda: 1.0), n, catch_up_s=4 * STEP_S, jitter_at=5, jitter_s=jitter
    )
    without = _steps(Life(0, lambda: 1.0), n, catch_up_s=0.0, jitter_at=5, jitter_s=jitter)
    # a steady clock ends step n at n steps from the first start (the jitter made up)
    assert with_catch_up == pytest.approx(n * STEP_S, abs=0.6 * STEP_S)
    assert without >= n * STEP_S + jitter


def test_a_delay_beyond_the_bound_or_a_reported_stall_restarts_the_clock() -> None:
    n = 6
    long_gap = _steps(Life(0, lambda: 1.0), n, catch_up_s=STEP_S, jitter_at=3, jitter_s=3 * STEP_S)
    assert long_gap >= (n + 3) * STEP_S
    life = Life(0, lambda: 1.0)
    life.pace(time.monotonic(), STEP_S, catch_up_s=4 * STEP_S)
    time.sleep(STEP_S)  # waited for a merge: a real stall
    life.restart_clock()
    t1 = time.monotonic()
    life.pace(t1, STEP_S, catch_up_s=4 * STEP_S)
    assert time.monotonic() - t1 >= STEP_S
