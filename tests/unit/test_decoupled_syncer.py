"""The syncer core, pure (messages through the real wire codec, time passed in): the merge is
the outer Nesterov step of the weighted average anchored at the syncer's fragment; quorum K,
then the grace window, merged early once every live learner reported; quorums shrink when a
learner times out and it is welcomed back; a newer report replaces the older; bad reports are
refused, counted and never merged; PULL is answered with every fragment."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from host.train.decoupled.config import (
    NO_GRACE,
    Averaging,
    DecoupledConfig,
    GraceConfig,
    SyncerConfig,
    Weighting,
)
from host.train.decoupled.fragments import fragment_model
from host.train.decoupled.grace import Timing
from host.train.decoupled.link import Refusal
from host.train.decoupled.syncer import RECEIVERS, REPORT_CHECKS, SyncerCore
from host.train.decoupled.weights import merge_weights
from host.train.diloco.outer import OuterOptimizer
from host.train.diloco.task import bind
from host.train.diloco.wire import MessageKind, TensorMessage, decode, encode

TOKENS = 16  # digits: one target per sample, batches of 16
CFG = DecoupledConfig(
    task="digits-mlp",
    learners=3,
    fragments=2,
    sync_every_steps=4,
    overlap_steps=1,
    steps=100,
    syncer=SyncerConfig(
        quorum=2,
        grace=NO_GRACE,
        averaging=Averaging.DIRECT,
        learner_timeout_s=1.0,
    ),
)


def make(cfg: DecoupledConfig = CFG) -> tuple[SyncerCore, list[torch.Tensor]]:
    model = bind(cfg.reference(), 0).run.model
    params = [p.detach().clone() for p in model.parameters()]
    core = SyncerCore(cfg, fragment_model(model, cfg.fragments), params, TOKENS, now=0.0)
    return core, params


def report(
    core: SyncerCore,
    learner: int,
    p: int,
    *,
    shift: float,
    step: int = 4,
    steps: int = 4,
    tokens: int = 64,
    incarnation: int = 0,
    version: int = 0,
) -> TensorMessage:
    """Learner ``learner``'s copy of fragment p: the syncer's, moved by ``shift`` per element
    (its own seed's noise), through the wire."""
    rng = np.random.default_rng(learner)
    theta = core.theta[p].numpy()
    vec = (theta + shift * rng.standard_normal(theta.size)).astype(np.float32)
    data = encode(
        MessageKind.REPORT,
        version,
        learner,
        vec,
        tensor=p,
        counters=(step, steps, tokens, incarnation),
    )
    return decode(data)


def test_a_merge_is_the_outer_step_of_the_weighted_mean_anchored_at_the_syncer() -> None:
    cfg = replace(CFG, syncer=replace(CFG.syncer, weighting=Weighting.TOKENS_SQUARED_PER_STEP))
    core, _params = make(cfg)
    theta0 = core.theta[1].clone()
    a = report(core, 0, 1, shift=0.01, steps=4, tokens=64)
    b = report(core, 2, 1, shift=0.02, steps=2, tokens=16)
    assert core.receive(0.1, 0, a) == []
    sends = core.receive(0.2, 2, b)
    w = merge_weights(Weighting.TOKENS_SQUARED_PER_STEP, [4, 2], [64, 16])
    deltas = np.stack([theta0.numpy() - a.array, theta0.numpy() - b.array]).astype(np.float64)
    mean = torch.from_numpy(((w / w.sum()) @ deltas).astype(np.float32))
    share = 2 / 3  # two of the three live learners: that share of an outer step
    expect = OuterOptimizer(cfg.outer).step(theta0, mean * share, share)
    torch.testing.assert_close(core.theta[1], expect, rtol=1e-6, atol=1e-7)
    assert torch.equal(core.theta[0], make(cfg)[0].theta[0])  # the other fragment untouched
    assert [(s.learner, s.kind, s.round, s.tensor, s.counters) for s in sends] == [
        (0, MessageKind.MERGED, 1, 1, (2,)),
        (2, MessageKind.MERGED, 1, 1, (2,)),
    ]
    np.testing.assert_array_equal(sends[0].array, core.theta[1].numpy())
    (rec,) = core.merges
    assert (rec.fragment, rec.version, rec.quorum, rec.tokens, rec.staleness) == (1, 1, 2, 80, 0)
    assert [x.learner for x in rec.included] == [0, 2]
    assert core.tokens_merged == 40 and core.versions == [0, 1]  # 80 tokens for half the model


def test_the_next_merge_is_anchored_at_the_merged_fragment_and_its_momentum() -> None:
    core, _params = make()
    outer = OuterOptimizer(CFG.outer)
    for k in range(3):
        anchor = core.theta[0].clone()
        a, b = report(core, 0, 0, shift=0.01, version=k), report(core, 1, 0, shift=0.01, version=k)
        core.receive(k + 0.1, 0, a)
        core.receive(k + 0.2, 1, b)
        mean = torch.from_numpy(((anchor.numpy() - a.array) + (anchor.numpy() - b.array)) / 2)
        share = 2 / core.merges[-1].live  # learner 2, silent, leaves the quorums after 1 s
        torch.testing.assert_close(
            core.theta[0], outer.step(anchor, mean * share, share), rtol=1e-6, atol=1e-6
        )
    assert core.versions[0] == 3


def test_merges_of_one_round_apart_add_up_to_about_one_outer_step() -> None:
    """Three learners reporting one by one (quorum 1, no window): three merges, each a third
    of an outer step with a third of the momentum, move Θ as one merge of all three would
    (the first round: the momentum buffer starts at the first part)."""
    cfg = replace(
        CFG, syncer=replace(CFG.syncer, quorum=1, grace=NO_GRACE, learner_timeout_s=100.0)
    )
    apart, _params = make(cfg)
    together, _ = make(replace(cfg, syncer=replace(cfg.syncer, quorum=3)))
    theta0 = apart.theta[0].clone()
    reports = [report(apart, m, 0, shift=0.01) for m in range(3)]  # all from version 0
    for m in range(3):
        apart.receive(0.1 * (m + 1), m, reports[m])
        together.receive(0.1 * (m + 1), m, reports[m])
    assert [r.quorum for r in apart.merges] == [1, 1, 1] and together.merges[0].quorum == 3
    moved_apart = (apart.theta[0] - theta0).norm()
    moved_together = (together.theta[0] - theta0).norm()
    assert moved_apart == pytest.approx(float(moved_together), rel=0.35)
    unscaled, _ = make(replace(cfg, syncer=replace(cfg.syncer, share_scaled=False)))
    for m in range(3):
        unscaled.receive(0.1 * (m + 1), m, reports[m])
    assert (unscaled.theta[0] - theta0).norm() > 2 * moved_together  # three full steps


def test_quorum_then_the_grace_window_then_the_merge() -> None:
    grace = GraceConfig(gamma=1.0, cap_s=10.0)
    cfg = replace(CFG, syncer=replace(CFG.syncer, quorum=1, grace=grace, learner_timeout_s=100.0))
    core, _params = make(cfg)
    core.grace.observe(Timing.STEP, 0.5)  # τ = 1: a window of 0.5 s
    assert core.receive(1.0, 0, report(core, 0, 0, shift=0.01)) == []
    (r,) = core.rounds.values()
    assert (r.quorum_at, r.grace_s, core.next_deadline()) == (1.0, 0.5, 1.5)
    assert core.tick(1.2) == []
    assert core.receive(1.3, 1, report(core, 1, 0, shift=0.01)) == []  # within the window
    sends = core.tick(1.5)
    assert {s.learner for s in sends} == {0, 1}
    (rec,) = core.merges
    assert (rec.quorum, rec.grace_s, rec.waited_s) == (2, 0.5, 0.5)
    assert core.grace.value(Timing.QUORUM) == 0.0  # K = 1: the quorum is the first report


def test_every_live_learner_reporting_ends_the_window_early() -> None:
    cfg = replace(
        CFG, syncer=replace(CFG.syncer, quorum=1, grace=GraceConfig(gamma=1.0, cap_s=10.0))
    )
    core, _params = make(cfg)
    core.grace.observe(Timing.STEP, 5.0)
    core.receive(0.1, 0, report(core, 0, 0, shift=0.01))
    core.receive(0.2, 1, report(core, 1, 0, shift=0.01))
    sends = core.receive(0.3, 2, report(core, 2, 0, shift=0.01))
    assert len(sends) == 3 and core.merges[0].waited_s == pytest.approx(0.2)


def test_a_silent_learner_is_dropped_from_quorums_and_welcomed_back() -> None:
    cfg = replace(CFG, syncer=replace(CFG.syncer, quorum=3))
    core, _params = make(cfg)
    core.receive(0.5, 0, report(core, 0, 0, shift=0.01))
    core.receive(0.6, 1, report(core, 1, 0, shift=0.01))
    assert core.tick(0.9) == [] and core.next_deadline() == 1.0  # learner 2's timeout
    sends = core.tick(1.01)  # learner 2 silent since the start: K' = 2
    assert {s.learner for s in sends} == {0, 1} and core.merges[0].live == 2
    assert [(e.learner, e.what) for e in core.liveness] == [(2, "dropped")]
    core.receive(1.2, 2, report(core, 2, 1, shift=0.01))
    assert core.liveness[-1].what == "returned" and core.live() == {0, 1, 2}


def test_a_learner_that_left_does_not_hold_up_the_quorum() -> None:
    cfg = replace(CFG, learners=2, syncer=replace(CFG.syncer, quorum=2))
    core, _params = make(cfg)
    bye = decode(encode(MessageKind.ABORT, 0, 1, np.frombuffer(b"finished", np.uint8)))
    core.receive(0.1, 1, bye)
    assert len(core.receive(0.2, 0, report(core, 0, 0, shift=0.01))) == 1
    assert core.liveness[0].what == "left"


def test_a_newer_report_replaces_the_older_one_of_the_same_learner() -> None:
    core, _params = make()
    old = report(core, 0, 0, shift=0.5, step=4)
    new = report(core, 0, 0, shift=0.01, step=8, steps=8, tokens=128)
    core.receive(0.1, 0, old)
    core.receive(0.2, 0, new)
    assert core.merges == [] and core.counts["superseded"] == 1
    core.receive(0.3, 1, report(core, 1, 0, shift=0.01))
    assert [(x.learner, x.step) for x in core.merges[0].included] == [(0, 8), (1, 4)]


def _bad(core: SyncerCore, what: str) -> tuple[int, TensorMessage]:
    theta = core.theta[0].numpy()
    good = dict(round_=0, sender=0, tensor=0, counters=(4, 4, 64, 0))

    def msg(array: np.ndarray = theta, **kw: object) -> TensorMessage:
        args = {**good, **kw}
        return decode(
            encode(
                MessageKind.REPORT,
                args["round_"],  # type: ignore[arg-type]
                args["sender"],  # type: ignore[arg-type]
                array,
                tensor=args["tensor"],  # type: ignore[arg-type]
                counters=args["counters"],  # type: ignore[arg-type]
            )
        )

    nan = theta.copy()
    nan[3] = np.nan
    table: dict[str, tuple[int, TensorMessage]] = {
        "unknown_fragment": (0, msg(tensor=2)),
        "bad_dtype": (0, msg(theta.astype(np.float64))),
        "bad_shape": (0, msg(theta[:-1])),
        "zero_steps": (0, msg(counters=(4, 0, 64, 0))),
        "steps_beyond_step": (0, msg(counters=(4, 5, 64, 0))),
        "negative_tokens": (0, msg(counters=(4, 4, -64, 0))),
        "absurd_tokens": (0, msg(counters=(4, 4, 4 * TOKENS + 1, 0))),
        "step_beyond_budget": (0, msg(counters=(101, 4, 64, 0))),
        "negative_incarnation": (0, msg(counters=(4, 4, 64, -1))),
        "future_version": (0, msg(round_=1)),
        "non_finite": (0, msg(nan)),
        "unknown_learner": (3, msg(sender=3)),
        "unexpected_kind": (0, decode(encode(MessageKind.MERGED, 0, 0, theta, counters=(1,)))),
    }
    return table[what]


@pytest.mark.parametrize(
    ("what", "reason"),
    [
        ("unknown_fragment", Refusal.UNKNOWN_FRAGMENT),
        ("bad_dtype", Refusal.BAD_DTYPE),
        ("bad_shape", Refusal.BAD_SHAPE),
        ("zero_steps", Refusal.BAD_COUNTER),
        ("steps_beyond_step", Refusal.BAD_COUNTER),
        ("negative_tokens", Refusal.BAD_COUNTER),
        ("absurd_tokens", Refusal.BAD_COUNTER),
        ("step_beyond_budget", Refusal.BAD_COUNTER),
        ("negative_incarnation", Refusal.BAD_COUNTER),
        ("future_version", Refusal.FUTURE_VERSION),
        ("non_finite", Refusal.NON_FINITE),
        ("unknown_learner", Refusal.UNKNOWN_MEMBER),
        ("unexpected_kind", Refusal.UNEXPECTED_KIND),
    ],
)
def test_a_bad_report_is_refused_counted_and_never_merged(what: str, reason: Refusal) -> None:
    cfg = replace(CFG, syncer=replace(CFG.syncer, quorum=1))
    core, _params = make(cfg)
    before = [t.clone() for t in core.theta]
    learner, msg = _bad(core, what)
    assert core.receive(0.1, learner, msg) == []
    assert core.tick(5.0) == []
    assert core.refused == {reason: 1}
    assert core.rounds == {} and core.merges == []
    assert all(torch.equal(a, b) for a, b in zip(core.theta, before))


def test_tables_cover_what_the_syncer_takes() -> None:
    assert set(RECEIVERS) == {
        MessageKind.HELLO,
        MessageKind.REPORT,
        MessageKind.PULL,
        MessageKind.ABORT,
    }
    assert len({r for r, _check in REPORT_CHECKS}) == len(REPORT_CHECKS)


def test_pull_is_answered_with_every_fragment() -> None:
    core, _params = make()
    core.receive(0.1, 0, report(core, 0, 1, shift=0.01))
    core.receive(0.2, 1, report(core, 1, 1, shift=0.01))
    pull = decode(encode(MessageKind.PULL, 0, 2, np.zeros(0, np.uint8), counters=(1,)))
    sends = core.receive(0.3, 2, pull)
    assert [(s.learner, s.kind, s.tensor, s.round) for s in sends] == [
        (2, MessageKind.FRAGMENT, 0, 0),
        (2, MessageKind.FRAGMENT, 1, 1),
    ]
    for s in sends:
        np.testing.assert_array_equal(s.array, core.theta[s.tensor].numpy())


def test_flush_merges_what_is_left_at_the_end() -> None:
    core, _params = make()
    core.receive(0.1, 0, report(core, 0, 1, shift=0.01))
    assert core.merges == []
    sends = core.flush(0.2)
    assert len(sends) == 1 and core.merges[0].quorum == 1 and core.rounds == {}


def test_after_finish_the_last_reports_are_held_and_merge_once_per_fragment() -> None:
    core, _params = make()
    core.receive(0.1, 0, report(core, 0, 0, shift=0.01))
    core.finish()
    for m in (1, 2):  # every live learner reported: would merge at once before finish()
        assert core.receive(0.2, m, report(core, m, 0, shift=0.01)) == []
    assert core.receive(0.3, 1, report(core, 1, 1, shift=0.01)) == [] and core.tick(5.0) == []
    assert core.merges == []
    sends = core.flush(5.1)
    assert [(r.fragment, r.quorum) for r in core.merges] == [(0, 3), (1, 1)]
    assert len(sends) == 4 and core.versions == [1, 1] and core.rounds == {}


def test_start_goes_to_every_learner_once_all_have_connected_and_to_a_later_one_at_once() -> None:
    core, _params = make()

    def hello(m: int, at: float) -> list[tuple[int, MessageKind]]:
        msg = TensorMessage(MessageKind.HELLO, 0, m, 0, 0, np.zeros(0, np.uint8))
        return [(s.learner, s.kind) for s in core.receive(at, m, msg)]

    assert hello(0, 0.1) == [] and hello(2, 0.2) == []
    assert hello(1, 0.3) == [(m, MessageKind.START) for m in range(3)]
    assert core.started_at == 0.3
    assert hello(1, 5.0) == [(1, MessageKind.START)]  # a restarted learner is not held back
