"""Data-parallel training over DBLP on the emulated fabric, all hosts in this process: the
digits MLP reaches 90 % test accuracy with each policy, per-round logs are complete, and a
loss burst shows up in the burst round's delivered fraction, and only there. How long training
and the burst round take is measured by ``experiments.microburst`` (its latency CSV), not here."""

from __future__ import annotations

import pytest

from host.dblp.config import LossPolicy
from host.train.cluster import EmuCluster
from host.train.job import Collective, EventKind, JobEvent, JobSpec
from host.train.run import run_emu_job

TARGET_ACCURACY = 0.90


@pytest.mark.parametrize("policy", list(LossPolicy))
def test_digits_mlp_reaches_90_percent_with_every_policy(policy: LossPolicy) -> None:
    job = JobSpec(task="digits-mlp", rounds=120, policy=policy, target_metric=TARGET_ACCURACY)
    with EmuCluster() as cl:
        res = run_emu_job(job, cl, background_loss=0.01)
    assert res.final_metric >= TARGET_ACCURACY
    assert res.time_to_target_s is not None and res.time_to_target_s <= res.total_s
    rows = res.rows()
    assert [r.round for r in rows] == list(range(120))
    assert all(0 < r.delivered_fraction <= 1 and r.latency_ms > 0 for r in rows)
    bounds = {round(r.loss_bound, 3) for r in rows}
    assert (
        bounds
        == {LossPolicy.DBLP: {0.008, 0.408}, LossPolicy.FIXED: {0.008}, LossPolicy.RELIABLE: {0.0}}[
            policy
        ]
    )
    assert len(res.server) == 120 and res.server[0].in_clr


def test_a_burst_round_loses_data_within_the_bound_and_calm_rounds_lose_none() -> None:
    job = JobSpec(
        task="digits-mlp",
        rounds=60,
        policy=LossPolicy.DBLP,
        events=(JobEvent(45, EventKind.BURST, 80.0),),
    )
    with EmuCluster() as cl:
        res = run_emu_job(job, cl)
    rows = res.rows()
    burst = rows[45]
    assert burst.burst_loss_pct == 80.0
    assert 1 - burst.loss_bound <= burst.delivered_fraction < 1.0
    assert [r.delivered_fraction for r in rows if r.round != 45] == [1.0] * 59  # no background loss


def test_ring_training_runs_on_four_hosts() -> None:
    job = JobSpec(
        task="digits-mlp",
        rounds=40,
        collective=Collective.RING,
        workers=4,
        policy=LossPolicy.RELIABLE,
        target_metric=0.8,
    )
    with EmuCluster() as cl:
        res = run_emu_job(job, cl)
    assert res.final_metric >= 0.8
    assert res.server == () and set(res.workers) == {0, 1, 2, 3}
    assert all(r.delivered_fraction == 1.0 for r in res.rows())
