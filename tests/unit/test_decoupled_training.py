"""Decoupled DiLoCo and elastic data parallel trained for real (torch on scikit-learn's
digits) over MRC endpoints on the in-process emulated fabric.

With K = M, no grace window, equal weights, direct averaging, P = 1 and τ = 0 Decoupled
DiLoCo is DiLoCo (the diloco package's job as the reference). With overlap, merged fragments
are applied τ steps after they were sent. A short chaos run (a kill and restart, pauses)
finishes with every thread stopped and reports goodput and uptime; elastic data parallel
re-forms its group when a worker dies and when it returns, and ends with every worker
holding the same parameters. The hub refuses unknown members, wrong hosts and other jobs."""

from __future__ import annotations

import math
import pathlib
import threading

import numpy as np
import pytest

from host.train.cluster import EmuCluster
from host.train.decoupled.chaos import ChaosEvent, Schedule, schedule
from host.train.decoupled.config import (
    NO_GRACE,
    Averaging,
    ChaosConfig,
    ChaosKind,
    DecoupledConfig,
    ElasticConfig,
    SyncerConfig,
    Weighting,
)
from host.train.decoupled.errors import ConfigError, LinkError
from host.train.decoupled.learner import FragmentSchedule
from host.train.decoupled.link import Hub, Refusal, Uplink
from host.train.decoupled.run import DecoupledResult, run_decoupled, run_elastic
from host.train.diloco.config import DilocoConfig
from host.train.diloco.run import run_emu_job
from host.train.diloco.task import bind, evaluate
from host.train.diloco.wire import MessageKind

THREAD_PREFIXES = ("learner-", "worker-", "syncer", "coordinator", "hub-", "uplink-", "chaos")


def our_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(THREAD_PREFIXES)]


def test_k_equals_m_without_grace_with_equal_weights_one_fragment_no_overlap_is_diloco() -> None:
    reference = DilocoConfig(task="digits-mlp", workers=3, inner_steps=4, rounds=3, batch_size=16)
    diloco = run_emu_job(reference)
    cfg = DecoupledConfig(
        task="digits-mlp",
        learners=3,
        fragments=1,
        sync_every_steps=4,
        overlap_steps=0,
        steps=12,
        batch_size=16,
        syncer=SyncerConfig(
            quorum=3, grace=NO_GRACE, weighting=Weighting.EQUAL, averaging=Averaging.DIRECT
        ),
    )
    assert cfg.reference() == reference
    res = run_decoupled(cfg)
    np.testing.assert_allclose(res.parameters, diloco.parameters(0), rtol=1e-5, atol=1e-6)
    for learner in res.learner_parameters:  # every learner applied the last merge
        np.testing.assert_array_equal(learner, res.parameters)
    assert [(m.fragment, m.version, m.quorum) for m in res.merges] == [(0, k, 3) for k in (1, 2, 3)]
    assert {x.weight for m in res.merges for x in m.included} == {1.0}
    assert res.refused == {} and res.summary.useful_steps == 36


def test_merged_fragments_are_applied_tau_steps_after_they_were_sent() -> None:
    cfg = DecoupledConfig(
        task="digits-mlp",
        learners=2,
        fragments=2,
        sync_every_steps=4,
        overlap_steps=1,
        steps=16,
        syncer=SyncerConfig(quorum=2, grace=NO_GRACE),
    )
    plan = FragmentSchedule.of(cfg)
    assert [plan.sent_after(s) for s in range(1, 9)] == [None, 0, None, 1, None, 0, None, 1]
    res = run_decoupled(cfg)
    for learner in (0, 1):
        steps = [s for s in res.steps if s.learner == learner]
        assert [s.sent for s in steps if s.sent >= 0] == [0, 1] * 4
        # sent after 2, 4, ...: applied one step later (the last one after the last step)
        assert [s.step for s in steps if s.applied] == [3, 5, 7, 9, 11, 13, 15]
    assert res.counts["merges_applied"] == 16
    assert len(res.merges) == 8 and {m.quorum for m in res.merges} == {2}
    # the merges moved the global model, and it learned
    initial, _probs = evaluate(bind(cfg.reference(), 0))
    assert res.evals[-1].val_loss < initial


def test_a_job_cut_by_its_wall_time_hands_every_learners_last_steps_to_the_global_model() -> None:
    cfg = DecoupledConfig(
        task="digits-mlp",
        learners=2,
        fragments=4,
        sync_every_steps=8,
        overlap_steps=1,
        steps=10_000,  # the wall time ends the job, mid-schedule
        min_step_s=0.02,
        max_wall_s=1.2,
        syncer=SyncerConfig(grace=NO_GRACE),
    )
    res = run_decoupled(cfg)
    last_merged = {
        x.learner: max(y.step for m in res.merges for y in m.included if y.learner == x.learner)
        for m in res.merges
        for x in m.included
    }
    for learner in (0, 1):
        steps = [s.step for s in res.steps if s.learner == learner]
        assert 8 < steps[-1] < 10_000
        # its last steps were reported as it stopped, and merged before the syncer stopped
        assert last_merged[learner] == steps[-1]
    assert res.counts["final_reports"] >= 2 and res.summary.useful_steps == res.summary.steps
    assert [(e.learner, e.what) for e in res.liveness].count((0, "left")) == 1
    assert our_threads() == []


@pytest.fixture(scope="module")
def chaos_run() -> tuple[Schedule, DecoupledResult]:
    sched = schedule(
        ChaosConfig(
            seed=3, mtbi_s=1.5, horizon_s=2.0, down_min_s=0.4, down_max_s=0.8, start_after_s=0.3
        ),
        2,
    )
    cfg = DecoupledConfig(
        task="digits-mlp",
        learners=2,
        fragments=4,
        sync_every_steps=8,
        overlap_steps=1,
        steps=160,
        min_step_s=0.01,
        checkpoint_every_steps=8,
        syncer=SyncerConfig(learner_timeout_s=0.3, eval_every_merges=16),
    )
    return sched, run_decoupled(cfg, chaos=sched)


def test_a_short_chaos_run_kills_restarts_and_pauses_then_every_thread_stops(
    chaos_run: tuple[Schedule, DecoupledResult], tmp_path: pathlib.Path
) -> None:
    sched, res = chaos_run
    kinds = [(e.kind, e.target) for e in sched.events]
    assert (ChaosKind.KILL, 0) in kinds and (ChaosKind.PAUSE, 1) in kinds
    assert our_threads() == []
    assert res.incarnations == (2, 1)
    assert res.counts["restarts"] == 1 and res.counts["pulls"] == 1
    assert res.counts["catch_up_fragments"] == 4 and res.refused == {}
    # learner 0 went silent while down and paused, was dropped from quorums and came back
    events = [(e.learner, e.what) for e in res.liveness]
    assert (0, "dropped") in events and (0, "returned") in events
    assert events.count((0, "left")) == events.count((1, "left")) == 1
    # its second incarnation restarted from its last checkpoint (a multiple of 8 steps)
    first = [s.step for s in res.steps if s.learner == 0 and s.incarnation == 0]
    second = [s.step for s in res.steps if s.learner == 0 and s.incarnation == 1]
    assert second[0] % 8 == 1 and second[0] <= first[-1] + 1 and second[-1] == 160
    s = res.summary
    assert 0.0 < s.goodput < 1.0 and 0.0 < s.uptime <= 1.0
    assert s.useful_steps <= s.steps  # the killed incarnation's unmerged steps are lost
    down = sched.events[0].duration_s  # from the kill taking effect to the restart
    assert 0.5 * down < s.down_s <= down + 0.05
    assert s.paused_s > 0.5 and s.tokens_merged == sum(m.tokens for m in res.merges) / 4
    assert res.evals[-1].val_loss < res.evals[0].val_loss and math.isfinite(s.final_val_loss)
    stats = res.fragment_stats()
    assert all(f.merges > 0 and 1.0 <= f.mean_quorum <= 2.0 for f in stats)
    res.write_csvs(tmp_path)
    assert (tmp_path / "decoupled_merges.csv").read_text().startswith("fragment,version")


def test_elastic_data_parallel_reforms_when_a_worker_dies_and_when_it_returns() -> None:
    cfg = ElasticConfig(
        task="digits-mlp",
        workers=3,
        rounds=120,
        min_step_s=0.01,
        rendezvous_timeout_s=0.25,
        form_timeout_s=5.0,  # a worker late at start (busy machine) still forms the group
        reply_timeout_s=2.0,
        join_timeout_s=0.5,
        checkpoint_every_steps=10,
        eval_every_rounds=20,
    )
    kill = ChaosEvent(0.8, ChaosKind.KILL, 1, 0.5)  # after forming, within the run
    sched = Schedule(ChaosConfig(), 3, (kill,))
    res = run_elastic(cfg, chaos=sched)
    assert our_threads() == []
    reasons = [(r.reason, r.workers, r.group) for r in res.reforms if r.reason != "left"]
    assert reasons[0] == ("formed", (0, 1, 2), (0, 1, 2))
    assert ("timeout", (1,), (0, 2)) in reasons
    assert reasons[-1] == ("admitted", (1,), (0, 1, 2))
    assert res.incarnations == (1, 2, 1) and res.counts["failed_rounds"] >= 1
    groups = [c.group for c in res.commits]
    assert (0, 2) in groups and groups[-1] == (0, 1, 2)
    assert [c.round for c in res.commits] == list(range(120))
    # the returning worker was healed: at the end every worker holds the same parameters
    for params in res.parameters[1:]:
        np.testing.assert_array_equal(params, res.parameters[0])
    s = res.summary
    assert 0.0 < s.goodput < 1.0 and 0.0 < s.uptime < 1.0
    assert s.useful_steps < s.steps  # the failed rounds' attempts
    assert res.curve[-1].val_loss < res.curve[0].val_loss


def test_the_hub_refuses_unknown_members_wrong_hosts_and_other_jobs() -> None:
    with EmuCluster() as cl, Hub(cl.endpoints[3], 3, {0: 0, 1: 1}, b"job") as hub:
        for host, member, fp, match in (
            (2, 2, b"job", "no member 2"),
            (2, 1, b"job", "member 1 connects from host 2"),
            (0, 0, b"other", "another job"),
        ):
            with pytest.raises(LinkError, match=match):
                Uplink(cl.endpoints[host], member, 3, 3, fp, timeout_s=5.0)
        with Uplink(cl.endpoints[1], 1, 3, 3, b"job", timeout_s=5.0) as up:
            up.send_bytes(MessageKind.PULL, 0, b"", counters=(0,))
            first = hub.inbox.get(timeout=5.0)
            second = hub.inbox.get(timeout=5.0)
        assert (first.member, second.member) == (1, 1)
        assert hub.refused == {
            Refusal.UNKNOWN_MEMBER: 1,
            Refusal.WRONG_HOST: 1,
            Refusal.OTHER_JOB: 1,
        }


def test_a_schedule_for_other_learners_is_refused() -> None:
    sched = schedule(ChaosConfig(), 3)
    with pytest.raises(ConfigError, match="3 targets, the job has 2 learners"):
        run_decoupled(DecoupledConfig(task="digits-mlp", learners=2), chaos=sched)


def test_a_plane_and_a_spine_failure_are_applied_restored_and_ridden_through() -> None:
    cfg = DecoupledConfig(
        task="digits-mlp",
        learners=2,
        fragments=2,
        sync_every_steps=4,
        overlap_steps=1,
        steps=100,
        min_step_s=0.01,
        syncer=SyncerConfig(learner_timeout_s=2.0),
    )
    events = (
        ChaosEvent(0.2, ChaosKind.PLANE, 0, 0.25),
        ChaosEvent(0.5, ChaosKind.SPINE, 1, 0.25, spine=1),
    )
    res = run_decoupled(cfg, chaos=Schedule(ChaosConfig(), 2, events))
    assert [(a.action.action.value, a.changed) for a in res.chaos_log] == [
        ("fail_plane", True),
        ("restore_plane", True),
        ("fail_spine", True),
        ("restore_spine", True),
    ]
    assert res.refused == {} and res.summary.useful_steps == 200
    assert {m.quorum for m in res.merges} <= {1, 2} and len(res.merges) >= 50
