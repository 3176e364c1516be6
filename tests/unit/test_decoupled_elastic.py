"""Elastic data parallel's coordinator, pure (messages through the wire codec, time passed
in): the group forms, commits the mean once every member's gradient is in, drops members that
miss the rendezvous timeout and makes the rest redo the round, heals a returning worker from a
donor's state, answers non-members with RETRY; and a worker's optimizer state travels as one
vector that continues training bit for bit."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from host.train.decoupled.config import ElasticConfig
from host.train.decoupled.elastic import COORDINATOR_RECEIVERS, CoordinatorCore, Out, WorkerState
from host.train.decoupled.link import Refusal
from host.train.decoupled.member import OPTIMIZER_STATE, load_state_vector, state_vector
from host.train.diloco.config import InnerConfig, InnerOptimizer
from host.train.diloco.wire import MessageKind, TensorMessage, decode, encode

CFG = ElasticConfig(
    task="digits-mlp",
    workers=3,
    rounds=50,
    rendezvous_timeout_s=1.0,
    form_timeout_s=1.0,
    eval_every_rounds=2,
)


def join(w: int, inc: int = 0) -> TensorMessage:
    return decode(encode(MessageKind.JOIN, 0, w, np.zeros(0, np.uint8), counters=(inc,)))


def grad(w: int, r: int, value: float, inc: int = 0) -> TensorMessage:
    return decode(
        encode(MessageKind.GRADIENT, r, w, np.full(4, value, np.float32), counters=(inc,))
    )


def state(w: int, r: int) -> TensorMessage:
    return decode(encode(MessageKind.STATE, r, w, np.arange(5, dtype=np.float32), counters=(1,)))


def kinds(outs: list[Out]) -> list[tuple[int, MessageKind, int, tuple[int, ...]]]:
    return [(o.worker, o.kind, o.round, o.counters) for o in outs]


def formed(core: CoordinatorCore, workers: tuple[int, ...] = (0, 1, 2)) -> None:
    for w in workers:
        core.receive(0.0, w, join(w))


def test_the_group_forms_when_every_worker_joined() -> None:
    core = CoordinatorCore(CFG, 16)
    assert core.receive(0.0, 0, join(0)) == [] and core.receive(0.1, 1, join(1)) == []
    outs = core.receive(0.2, 2, join(2))
    assert kinds(outs) == [(w, MessageKind.STATE, 0, (0,)) for w in (0, 1, 2)]
    assert core.group == {0, 1, 2} and core.reforms[-1].reason == "formed"


def test_the_group_forms_without_a_straggler_after_the_form_timeout() -> None:
    core = CoordinatorCore(replace(CFG, form_timeout_s=3.0), 16)
    assert core.receive(0.0, 0, join(0)) == [] and core.receive(0.5, 1, join(1)) == []
    assert core.next_deadline() == 3.0 and core.tick(2.99) == []  # not the 1 s round timeout
    outs = core.tick(3.0)
    assert kinds(outs) == [(w, MessageKind.STATE, 0, (0,)) for w in (0, 1)]
    r = core.reforms[-1]
    assert (r.reason, r.workers, r.group) == ("formed", (0, 1), (0, 1))
    assert core.receive(3.5, 2, join(2)) == [] and core.joiners == {2}  # joins like a returner


def test_a_round_commits_the_mean_once_every_member_sent_its_gradient() -> None:
    core = CoordinatorCore(CFG, 16)
    formed(core)
    assert core.receive(1.0, 0, grad(0, 0, 1.0)) == []
    assert core.receive(1.1, 1, grad(1, 0, 2.0)) == []
    outs = core.receive(1.2, 2, grad(2, 0, 6.0))
    assert kinds(outs) == [(w, MessageKind.MEAN, 0, (3, 0, 0)) for w in (0, 1, 2)]
    np.testing.assert_array_equal(outs[0].array, np.full(4, 3.0, np.float32))
    assert core.round == 1 and core.commits[0].tokens == 48 and core.commits[0].group == (0, 1, 2)
    outs = [o for w in (0, 1, 2) for o in core.receive(2.0, w, grad(w, 1, 1.0))]
    assert [o.counters for o in outs] == [(3, 0, 1), (3, 0, 0), (3, 0, 0)]  # round 2: evaluate


def test_a_member_missing_the_rendezvous_is_dropped_and_the_round_redone() -> None:
    core = CoordinatorCore(CFG, 16)
    formed(core)
    core.receive(1.0, 0, grad(0, 0, 1.0))
    core.receive(1.5, 1, grad(1, 0, 1.0))
    assert core.tick(1.99) == [] and core.next_deadline() == 2.0
    outs = core.tick(2.0)
    assert kinds(outs) == [(0, MessageKind.RETRY, 0, (1,)), (1, MessageKind.RETRY, 0, (1,))]
    assert core.group == {0, 1} and core.round == 0 and core.grads == {}
    r = core.reforms[-1]
    assert (r.reason, r.workers, r.group) == ("timeout", (2,), (0, 1))
    core.receive(2.1, 0, grad(0, 0, 1.0))
    assert kinds(core.receive(2.2, 1, grad(1, 0, 3.0)))[0] == (0, MessageKind.MEAN, 0, (2, 0, 0))
    # the dropped worker comes back with an old round: not a member, it must join again
    assert kinds(core.receive(2.3, 2, grad(2, 0, 1.0))) == [(2, MessageKind.RETRY, 1, (0,))]
    assert core.refused == {Refusal.STALE: 1}


def test_a_returning_worker_is_healed_from_a_donor_at_the_next_commit() -> None:
    core = CoordinatorCore(CFG, 16)
    formed(core, (0, 1))
    core.tick(1.0)  # forming times out without worker 2
    assert core.group == {0, 1}
    core.receive(1.1, 2, join(2, inc=1))
    core.receive(1.2, 0, grad(0, 0, 1.0))
    outs = core.receive(1.3, 1, grad(1, 0, 1.0))
    assert [o.counters for o in outs] == [(2, 1, 0), (2, 0, 0)]  # rank 0 is the donor
    assert core.healing == {2: 0}
    relay = core.receive(1.4, 0, state(0, 1))
    assert kinds(relay) == [(2, MessageKind.STATE, 1, (1,))]
    np.testing.assert_array_equal(relay[0].array, np.arange(5, dtype=np.float32))
    assert core.group == {0, 1, 2} and core.reforms[-1].reason == "admitted"
    core.receive(1.5, 0, grad(0, 1, 1.0))
    core.receive(1.5, 1, grad(1, 1, 1.0))
    assert kinds(core.receive(1.6, 2, grad(2, 1, 1.0, inc=1)))[2][1] is MessageKind.MEAN


def test_a_drop_stops_the_whole_group_for_the_reconfigure_time() -> None:
    core = CoordinatorCore(replace(CFG, reconfigure_s=2.0, join_timeout_s=6.0), 16)
    formed(core)
    core.receive(1.0, 0, grad(0, 0, 1.0))
    core.receive(1.5, 1, grad(1, 0, 1.0))
    assert core.tick(2.0) == [] and core.group == {0, 1}  # dropped, but nobody may go on yet
    assert core.next_deadline() == 4.0 and core.tick(3.99) == []
    outs = core.tick(4.0)
    assert kinds(outs) == [(0, MessageKind.RETRY, 0, (1,)), (1, MessageKind.RETRY, 0, (1,))]
    assert core.counts["reconfigurations"] == 1


def test_an_admitted_worker_gets_its_state_after_the_stop_and_is_not_dropped_meanwhile() -> None:
    core = CoordinatorCore(replace(CFG, reconfigure_s=2.0, join_timeout_s=6.0), 16)
    formed(core, (0, 1))
    core.tick(1.0)  # forming times out without worker 2
    core.receive(1.1, 2, join(2))
    core.receive(1.2, 0, grad(0, 0, 1.0))
    core.receive(1.3, 1, grad(1, 0, 1.0))  # commit: rank 0 is the donor
    assert core.receive(1.4, 0, state(0, 1)) == [] and core.group == {0, 1, 2}
    core.receive(1.5, 0, grad(0, 1, 1.0))
    core.receive(1.5, 1, grad(1, 1, 1.0))
    # the rendezvous timeout (1 s) counts from the end of the stop (3.4 s), not from 1.5 s
    assert core.tick(3.0) == [] and core.group == {0, 1, 2}
    assert kinds(core.tick(3.4)) == [(2, MessageKind.STATE, 1, (1,))]
    assert core.next_deadline() == 4.4
    assert kinds(core.receive(3.6, 2, grad(2, 1, 1.0)))[2][1] is MessageKind.MEAN


def test_without_a_reconfigure_time_nothing_is_held() -> None:
    core = CoordinatorCore(CFG, 16)
    formed(core)
    core.receive(1.0, 0, grad(0, 0, 1.0))
    assert len(core.tick(2.0)) == 1 and core.held == [] and "reconfigurations" not in core.counts


def test_a_member_that_restarts_fails_the_round_and_rejoins() -> None:
    core = CoordinatorCore(CFG, 16)
    formed(core)
    core.receive(1.0, 0, grad(0, 0, 1.0))
    outs = core.receive(1.1, 2, join(2, inc=1))
    assert kinds(outs) == [(0, MessageKind.RETRY, 0, (1,))]
    assert core.group == {0, 1} and core.joiners == {2}
    assert core.reforms[-1].reason == "restarted"


def test_a_dead_donor_hands_its_joiners_to_the_next_one() -> None:
    core = CoordinatorCore(CFG, 16)
    formed(core, (0, 1))
    core.tick(1.0)
    core.receive(1.1, 2, join(2))
    core.receive(1.2, 0, grad(0, 0, 1.0))
    core.receive(1.2, 1, grad(1, 0, 1.0))
    assert core.healing == {2: 0}
    core.receive(1.3, 1, grad(1, 1, 1.0))  # the donor dies before sending its state
    core.tick(2.3)
    assert core.group == {1} and core.joiners == {2} and core.healing == {}
    outs = core.receive(2.4, 1, grad(1, 1, 1.0))
    assert [o.counters for o in outs] == [(1, 1, 1)]  # the new donor (and round 2 evaluates)


def test_a_join_opens_the_rendezvous_and_with_no_member_left_the_joiner_keeps_its_state() -> None:
    core = CoordinatorCore(CFG, 16)
    formed(core, (0,))
    core.tick(1.0)
    core.receive(1.1, 0, grad(0, 0, 1.0))
    core.receive(1.2, 0, grad(0, 1, 1.0))  # then worker 0 dies silently
    assert core.receive(3.0, 1, join(1)) == [] and core.next_deadline() == 4.0
    outs = core.tick(4.0)
    assert kinds(outs) == [(1, MessageKind.STATE, 2, (0,))] and core.group == {1}
    assert [r.reason for r in core.reforms[-2:]] == ["timeout", "admitted"]


def test_tables_cover_the_kinds_and_optimizers() -> None:
    assert set(OPTIMIZER_STATE) == set(InnerOptimizer)
    assert MessageKind.GRADIENT in COORDINATOR_RECEIVERS
    core = CoordinatorCore(CFG, 16)
    bad = decode(encode(MessageKind.REPORT, 0, 0, np.zeros(2, np.float32), counters=(1, 1, 1, 0)))
    assert core.receive(0.0, 0, bad) == [] and core.refused == {Refusal.UNEXPECTED_KIND: 1}


def test_the_state_vector_continues_training_bit_for_bit() -> None:
    for inner in (
        InnerConfig(),
        InnerConfig(optimizer=InnerOptimizer.SGD, lr=0.1, sgd_momentum=0.9),
    ):
        cfg = ElasticConfig(task="digits-mlp", workers=2, inner=inner)
        a, b = WorkerState(cfg, 0), WorkerState(cfg, 1)
        for _ in range(3):
            g, _loss, _tokens = a.gradient()
            a.apply(g)
        vec = state_vector(a.model, a.opt, inner.optimizer)
        load_state_vector(b.model, b.opt, inner.optimizer, vec)
        g = (
            np.random.default_rng(0)
            .standard_normal(
                vec.size // 3 if inner.optimizer is InnerOptimizer.ADAMW else vec.size // 2
            )
            .astype(np.float32)
        )
        a.apply(g)
        b.apply(g)
        for p, q in zip(a.model.parameters(), b.model.parameters()):
            assert torch.equal(p, q)
