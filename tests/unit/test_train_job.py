"""Job descriptions (JSON in, validated), the task table, gradient flattening and the
event hooks that play bursts and plane failures at round boundaries."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest
import torch

from experiments.faults import FaultScheduler
from host.dblp.config import LossPolicy, PhaseConfig
from host.train.job import TASK_NAMES, Collective, EventKind, JobEvent, JobSpec, JobSpecError
from host.train.loop import EventHooks, NetworkActions, flat_grad, set_flat_grad
from host.train.models import Mlp
from host.train.run import EmuRounds
from host.train.tasks import TASKS


def test_job_round_trips_through_json() -> None:
    job = JobSpec(
        task="chars-transformer",
        rounds=20,
        policy=LossPolicy.FIXED,
        phase=PhaseConfig(p_low=0.02, k=0.3, eta=0.4, check_every_rounds=5),
        workers=3,
        events=(JobEvent(3, EventKind.BURST, 90.0), JobEvent(5, EventKind.FAIL_PLANE, 1)),
    )
    assert JobSpec.from_json(job.to_json()) == job
    ring = JobSpec(collective=Collective.RING, workers=4)
    assert JobSpec.from_json(ring.to_json()) == ring


def test_ring_jobs_cannot_schedule_network_events() -> None:
    with pytest.raises(JobSpecError, match="round hooks"):
        JobSpec(collective=Collective.RING, workers=4, events=(JobEvent(1, EventKind.BURST, 90),))


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"task": "imagenet"}, "unknown task 'imagenet'; valid: digits-mlp"),
        ({"rounds": 0}, "rounds must be >= 1"),
        ({"rounds": "10"}, "rounds must be a int"),
        ({"lr": True}, "lr must be a float"),
        ({"policy": "mlt"}, "unknown loss policy 'mlt'"),
        ({"collective": "tree"}, "bad job description"),
        ({"phase": {"p_low": 0.5, "k": 0.6}}, "p_low"),
        ({"phase": {"zeta": 1}}, "unknown phase fields: zeta"),
        ({"bogus": 1}, "unknown job fields: bogus"),
        ({"rounds": 5, "events": [{"round": 9, "kind": "burst", "value": 90}]}, "outside 0..4"),
        ({"events": [{"round": 1, "kind": "burst", "value": 190}]}, "burst loss"),
        ({"events": [{"round": 1, "kind": "explode", "value": 1}]}, "bad job description"),
    ],
)
def test_bad_job_descriptions_are_rejected_with_the_field(
    doc: dict[str, object], message: str
) -> None:
    with pytest.raises((JobSpecError, ValueError), match=message):
        JobSpec.from_json(json.dumps(doc))


def test_job_json_must_be_an_object() -> None:
    with pytest.raises(JobSpecError, match="not JSON"):
        JobSpec.from_json("{")
    with pytest.raises(JobSpecError, match="JSON object"):
        JobSpec.from_json("[1, 2]")


def test_task_table_matches_the_job_format() -> None:
    assert set(TASKS) == set(TASK_NAMES)
    for name, task in TASKS.items():
        run = task.bind(0, 0, 3, 8)
        x, y = run.batch(0)
        loss = run.loss(run.model, x, y)
        assert torch.isfinite(loss), name
        assert task.reached(1.0 if task.higher_is_better else 0.5, 0.9)


def test_workers_start_from_the_same_weights_and_train_on_different_data() -> None:
    a, b = TASKS["digits-mlp"].bind(0, 0, 3, 8), TASKS["digits-mlp"].bind(0, 1, 3, 8)
    for pa, pb in zip(a.model.parameters(), b.model.parameters()):
        assert torch.equal(pa, pb)
    assert not torch.equal(a.batch(0)[0], b.batch(0)[0])


def test_flat_gradient_round_trips() -> None:
    model = Mlp()
    x = torch.randn(4, 64)
    model(x).sum().backward()
    flat = flat_grad(model)
    assert flat.dtype == np.float32 and flat.shape == (4810,)
    set_flat_grad(model, flat * 2)
    np.testing.assert_allclose(flat_grad(model), flat * 2)
    with pytest.raises(ValueError, match="4809 values for 4810"):
        set_flat_grad(model, flat[:-1])


class Recorder(NetworkActions):
    def __init__(self) -> None:
        self.calls: list[tuple[str, float]] = []

    def burst(self, loss_pct: float) -> None:
        self.calls.append(("burst", loss_pct))

    def clear_burst(self) -> None:
        self.calls.append(("clear", 0))

    def fail_plane(self, plane: int) -> None:
        self.calls.append(("fail", plane))

    def restore_plane(self, plane: int) -> None:
        self.calls.append(("restore", plane))


def test_a_burst_covers_exactly_its_round_and_plane_events_are_triggered() -> None:
    job = JobSpec(
        rounds=10,
        events=(
            JobEvent(2, EventKind.BURST, 70),
            JobEvent(3, EventKind.BURST, 90),
            JobEvent(4, EventKind.FAIL_PLANE, 1),
            JobEvent(7, EventKind.RESTORE_PLANE, 1),
            JobEvent(9, EventKind.BURST, 60),
        ),
    )
    rec = Recorder()
    rounds = EmuRounds(job, rec)
    hooks = EventHooks(rounds)
    for r in range(10):
        waiting = [  # the workers, done with the round before, wait for this one's state
            threading.Thread(target=rounds.await_round, args=(r,)) for _ in range(job.workers)
        ]
        for w in waiting if job.gated(r) else []:
            w.start()
        hooks.round_start(r)
        hooks.round_end(r)
        for w in waiting if job.gated(r) else []:
            w.join(5)
            assert not w.is_alive()
    assert rec.calls == [
        ("burst", 70),
        ("burst", 90),
        ("clear", 0),
        ("fail", 1),
        ("restore", 1),
        ("burst", 60),
    ]
    # everyone waits where the burst state changes, nowhere else
    assert [r for r in range(10) if job.gated(r)] == [2, 3, 4, 9]
    assert [e.kind for r in range(10) for e in job.triggers(r)] == [
        EventKind.FAIL_PLANE,
        EventKind.RESTORE_PLANE,
    ]
    assert [(f.round, f.kind) for f in rounds.faults] == [
        (2, "burst"),
        (3, "burst"),
        (4, "clear_burst"),
        (4, "fail_plane"),
        (7, "restore_plane"),
        (9, "burst"),
    ]
    assert all(f.requested_mono <= f.applied_mono for f in rounds.faults)
    for r in (2, 3, 4, 9):
        rounds.await_round(r)  # released: the coordinator entered them


@pytest.mark.parametrize("scheduler", ["emulator", "fabric"])
def test_a_burst_goes_on_only_once_every_worker_has_the_round_before(scheduler: str) -> None:
    job = JobSpec(rounds=4, workers=3, events=(JobEvent(2, EventKind.BURST, 80),))
    rec = Recorder()
    entered = threading.Event()
    with FaultScheduler(job, rec) as faults:
        emu = EmuRounds(job, rec)

        def server() -> None:
            if scheduler == "emulator":
                emu.enter_round(2)
                entered.set()
            else:
                faults.enter_round(2, entered.set)

        def worker() -> None:
            if scheduler == "emulator":
                emu.await_round(2)
            else:
                faults.await_round(2, lambda: None)

        threads = [threading.Thread(target=server)]
        threads += [threading.Thread(target=worker) for _ in range(job.workers)]
        for t in threads[:-1]:  # two workers wait, one is still receiving round 1's result
            t.start()
        assert not entered.wait(0.3) and rec.calls == []
        threads[-1].start()
        assert entered.wait(5) and rec.calls == [("burst", 80)]
        for t in threads:
            t.join(5)


def test_a_worker_that_never_comes_holds_the_burst_back_only_for_the_peer_timeout() -> None:
    job = JobSpec(
        rounds=4, workers=2, peer_timeout_s=0.3, events=(JobEvent(2, EventKind.BURST, 80),)
    )
    rec = Recorder()
    with FaultScheduler(job, rec) as faults:
        entered = threading.Event()
        faults.await_round(2, lambda: None)  # one of two workers
        t0 = time.monotonic()
        faults.enter_round(2, entered.set)
        assert entered.wait(5) and 0.25 < time.monotonic() - t0 < 3
    assert rec.calls == [("burst", 80)]
