"""DiLoCo, Factored Gossip DiLoCo and data parallel, trained for real (torch, scikit-learn's
digits and Python's help text) over MRC endpoints on the in-process emulated fabric.

Special cases are exact: M = 1 with outer SGD(lr 1) is plain AdamW training round for round;
H = 1 with inner SGD and outer SGD(lr 1, momentum 0) is large-batch data parallel (and our
all-reduce-every-step baseline); gossip with a complete Mix1 graph, global Mix2 and identical
starts is DiLoCo bit for bit. Mix1 moves its bytes while the inner steps run; a lost Mix1
message costs one timeout and is counted; a killed worker is reported with its host and last
round while the others stop (DiLoCo) or finish (gossip) cleanly."""

from __future__ import annotations

import csv
import math
import pathlib
import time
from dataclasses import replace

import numpy as np
import pytest
import torch

from host.dblp.config import LossPolicy, PhaseConfig
from host.linkemu import LinkProfile
from host.train.cluster import EmuCluster
from host.train.diloco import metrics
from host.train.diloco.config import (
    VARIANTS,
    Algorithm,
    DilocoConfig,
    Fault,
    FaultKind,
    GossipConfig,
    Graph,
    InnerConfig,
    InnerOptimizer,
    Mix2Scope,
    OuterConfig,
    Reduce,
    ReduceConfig,
)
from host.train.diloco.errors import ConfigError, WorkerFailed
from host.train.diloco.exchange import Comm, LocalReduce
from host.train.diloco.run import CSV_COLUMNS, DilocoResult, run_emu_job
from host.train.diloco.task import bind
from host.train.diloco.wire import message_bytes
from host.train.diloco.worker import Worker, WorkerStatus, get_flat, inner_optimizer

FEDAVG = OuterConfig(lr=1.0, momentum=0.0, nesterov=False)
DIGITS = DilocoConfig(task="digits-mlp", workers=3, inner_steps=4, rounds=3, batch_size=16)


def plain_training(cfg: DilocoConfig, steps: int) -> list[torch.Tensor]:
    """Worker 0's task trained alone with the inner optimizer; parameters after each step."""
    task = bind(cfg, 0)
    model, run = task.run.model, task.run
    opt = inner_optimizer(cfg, model)
    out = []
    for step in range(steps):
        x, y = run.batch(step)
        opt.zero_grad(set_to_none=True)
        torch.autograd.backward(run.loss(model, x, y))
        opt.step()
        out.append(get_flat(model))
    return out


def test_one_worker_with_outer_sgd_lr_1_is_plain_adamw_training() -> None:
    cfg = replace(DIGITS, workers=1, inner_steps=5, rounds=4, outer=FEDAVG)
    ref = plain_training(cfg, cfg.total_steps)
    worker = Worker(cfg, Comm(0, (0,), None, LocalReduce()))
    for r in range(cfg.rounds):
        worker.round(r)
        torch.testing.assert_close(
            get_flat(worker.model), ref[(r + 1) * 5 - 1], rtol=1e-5, atol=1e-6
        )
    # the default outer step (lr 0.7, Nesterov 0.9) makes M = 1 Lookahead-like: not plain
    lookahead = Worker(replace(cfg, outer=OuterConfig()), Comm(0, (0,), None, LocalReduce()))
    for r in range(cfg.rounds):
        lookahead.round(r)
    assert not torch.allclose(get_flat(lookahead.model), ref[-1], atol=1e-4)


def test_h1_with_sgd_inner_and_fedavg_outer_is_large_batch_data_parallel() -> None:
    cfg = replace(
        DIGITS,
        inner_steps=1,
        rounds=6,
        batch_size=8,
        inner=InnerConfig(optimizer=InnerOptimizer.SGD, lr=0.5),
        outer=FEDAVG,
    )
    # the reference: one model, one SGD step per round on every worker's batch at once
    tasks = [bind(cfg, r) for r in range(cfg.workers)]
    model = tasks[0].run.model
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for step in range(cfg.rounds):
        batches = [t.run.batch(step) for t in tasks]
        x = torch.cat([b[0] for b in batches])
        y = torch.cat([b[1] for b in batches])
        opt.zero_grad()
        loss = tasks[0].run.loss(model, x, y)
        torch.autograd.backward(loss)
        opt.step()
        losses.append(float(loss.detach()))
    ref = get_flat(model).numpy()
    diloco = run_emu_job(cfg)
    dp = run_emu_job(replace(cfg, algorithm=Algorithm.DATA_PARALLEL))
    for res in (diloco, dp):
        for r in range(cfg.workers):
            np.testing.assert_allclose(res.parameters(r), ref, rtol=1e-5, atol=1e-6)
        per_round = [
            np.mean([o.records[k].train_loss for o in res.outcomes.values()])
            for k in range(cfg.rounds)
        ]
        np.testing.assert_allclose(per_round, losses, rtol=1e-5)


def test_gossip_with_complete_mix1_global_mix2_and_identical_starts_is_diloco() -> None:
    diloco = run_emu_job(DIGITS)
    gossip = run_emu_job(
        replace(
            DIGITS,
            algorithm=Algorithm.GOSSIP,
            gossip=GossipConfig(mix1_graph=Graph.COMPLETE, mix2=Mix2Scope.GLOBAL),
        )
    )
    for r in range(DIGITS.workers):
        np.testing.assert_array_equal(gossip.parameters(r), diloco.parameters(r))
        np.testing.assert_array_equal(diloco.parameters(r), diloco.parameters(0))
    assert {p.consensus_rms_l2 for p in diloco.consensus.values()} == {0.0}
    assert {p.consensus_rms_l2 for p in gossip.consensus.values()} == {0.0}


def test_diloco_over_dblp_reliable_equals_diloco_over_mrc() -> None:
    mrc = run_emu_job(DIGITS)
    dblp = run_emu_job(replace(DIGITS, reduce=ReduceConfig(transport=Reduce.DBLP)))
    for r in range(DIGITS.workers):
        np.testing.assert_allclose(dblp.parameters(r), mrc.parameters(r), rtol=1e-6, atol=1e-7)
    assert all(row.record.delivered_fraction == 1.0 for row in dblp.rows())


def test_data_parallel_over_dblp_under_loss_finishes_within_its_bound() -> None:
    cfg = replace(
        DIGITS,
        algorithm=Algorithm.DATA_PARALLEL,
        inner_steps=2,
        reduce=ReduceConfig(Reduce.DBLP, LossPolicy.FIXED, PhaseConfig(p_low=0.3, k=0.0)),
    )
    res = run_emu_job(cfg, link=LinkProfile(loss=0.05))
    fractions = [row.record.delivered_fraction for row in res.rows()]
    assert all(0.7 <= f <= 1.0 for f in fractions)


def test_gossip_on_the_sized_task_measures_every_round_and_worker(tmp_path: pathlib.Path) -> None:
    cfg = DilocoConfig(
        algorithm=Algorithm.GOSSIP,
        task="chars-transformer-m",
        workers=4,
        inner_steps=3,
        rounds=2,
        gossip=VARIANTS["GlobalM1LocalM2"],
    )
    res = run_emu_job(cfg)
    rows = res.rows()
    assert len(rows) == cfg.workers * cfg.rounds
    n = bind(cfg, 0).parameters
    expect_bytes = metrics.round_bytes(cfg, n)
    for row in rows:
        rec = row.record
        assert rec.bytes_sent == rec.bytes_received == expect_bytes
        assert 0.0 < rec.utilization <= 1.0
        assert rec.compute_s + rec.blocked_s <= rec.wall_s
        assert math.isfinite(rec.train_loss) and math.isfinite(rec.val_loss)
        assert rec.mix1_missing == rec.mix2_missing == 0
        assert row.consensus_l2 > 0 and row.js_divergence_nats > 0
    # Mix1 brings the workers together: their spread stays far below the parameters' norm
    scale = float(np.linalg.norm(res.parameters(0)))
    assert max(p.consensus_rms_l2 for p in res.consensus.values()) < 0.05 * scale
    res.write_csv(tmp_path / "rounds.csv")
    with (tmp_path / "rounds.csv").open() as f:
        table = list(csv.DictReader(f))
    assert tuple(table[0]) == CSV_COLUMNS and len(table) == len(rows)


def test_mix1_bytes_move_while_the_inner_steps_run() -> None:
    rate_mbps = 6.0  # per plane: each worker receives 2 × 64 KB of Mix1 in ~90 ms
    cfg = DilocoConfig(
        algorithm=Algorithm.GOSSIP,
        task="chars-transformer",
        workers=3,
        inner_steps=30,
        rounds=3,
        eval_every_rounds=3,
        gossip=GossipConfig(mix1_graph=Graph.COMPLETE, mix2=Mix2Scope.GLOBAL),
    )
    res = run_emu_job(cfg, link=LinkProfile(rate_mbps=rate_mbps, queue_bytes=1 << 20))
    n = bind(cfg, 0).parameters
    msg = message_bytes(n)
    transfer_s = metrics.comm_time_s(metrics.wire_bytes(2 * msg, messages=2), rate_mbps)
    for row in res.rows():
        rec = row.record
        if rec.round == 0:
            continue  # connections warming up
        # the neighbours' parameters arrived during this worker's inner steps, and took time
        assert rec.inner_start_at_s < rec.mix1_first_arrival_at_s
        assert rec.mix1_last_arrival_at_s < rec.inner_end_at_s
        assert rec.mix1_last_arrival_at_s - rec.inner_start_at_s > 0.5 * transfer_s
        assert rec.mix1_wait_s < 0.5 * transfer_s  # ... so collecting them hardly waited
        assert rec.inner_end_at_s - rec.inner_start_at_s > 2 * transfer_s


def test_a_lost_mix1_message_costs_one_timeout_and_is_counted() -> None:
    cfg = replace(
        DIGITS,
        algorithm=Algorithm.GOSSIP,
        workers=4,
        gossip=replace(VARIANTS["GlobalM1LocalM2"], mix1_timeout_s=0.3),
        faults=(Fault(1, 1, FaultKind.DROP_MIX1),),
    )
    res = run_emu_job(cfg)
    for row in res.rows():
        rec = row.record
        lost = rec.round == 1 and rec.rank != 1
        assert rec.mix1_missing == (1 if lost else 0), rec
        if lost:  # the round went on after the timeout, mixing what arrived
            # one timeout, not a blocking wait (the next timeout, Mix2's, is 30 s); the upper
            # bound leaves room for a loaded machine
            assert 0.3 <= rec.mix1_wait_s < 10 * 0.3
    assert all(o.status is WorkerStatus.FINISHED for o in res.outcomes.values())


def test_a_killed_diloco_worker_is_reported_and_the_others_stop_cleanly() -> None:
    cfg = replace(DIGITS, rounds=4, faults=(Fault(2, 2, FaultKind.KILL),))
    with pytest.raises(WorkerFailed) as info:
        run_emu_job(cfg)
    err = info.value
    assert (err.rank, err.host, err.last_round) == (2, 2, 1)
    assert "worker 2 (host 2) died in round 2 (last completed round 1): InjectedFault" in str(err)
    result: DilocoResult = err.result
    for rank in (0, 1):
        out = result.outcomes[rank]
        assert out.status is WorkerStatus.STOPPED and out.last_round == 1
        assert "stopped in round 2" in out.error
    assert any("worker 0 (host 0) stopped in round 2" in note for note in err.__notes__)


def test_a_killed_gossip_worker_costs_its_neighbours_only_its_messages() -> None:
    cfg = replace(
        DIGITS,
        algorithm=Algorithm.GOSSIP,
        rounds=4,
        gossip=replace(VARIANTS["GlobalM1"], mix1_timeout_s=2.0),
        faults=(Fault(2, 1, FaultKind.KILL),),
    )
    with pytest.raises(WorkerFailed, match=r"worker 2 \(host 2\) died in round 1") as info:
        run_emu_job(cfg)
    result: DilocoResult = info.value.result
    assert result.outcomes[2].status is WorkerStatus.DIED
    for rank in (0, 1):
        out = result.outcomes[rank]
        assert out.status is WorkerStatus.FINISHED and out.last_round == 3
        assert [r.mix1_missing for r in out.records] == [0, 1, 1, 1]


def test_a_killed_worker_stops_a_dblp_ring_at_once() -> None:
    cfg = replace(
        DIGITS,
        rounds=4,
        peer_timeout_s=20.0,
        reduce=ReduceConfig(transport=Reduce.DBLP),
        faults=(Fault(0, 1, FaultKind.KILL),),
    )
    t0 = time.monotonic()
    with pytest.raises(WorkerFailed, match=r"worker 0 \(host 0\) died in round 1") as info:
        run_emu_job(cfg)
    assert time.monotonic() - t0 < 10.0  # the ABORT, not the 20 s peer timeout
    result: DilocoResult = info.value.result
    assert {result.outcomes[r].status for r in (1, 2)} == {WorkerStatus.STOPPED}


@pytest.mark.parametrize("graph", [Graph.RING, Graph.HYPERCUBE, Graph.EXPONENTIAL])
def test_gossip_on_each_graph_sends_what_the_graph_says(graph: Graph) -> None:
    cfg = replace(
        DIGITS,
        algorithm=Algorithm.GOSSIP,
        workers=4,
        gossip=GossipConfig(mix1_graph=graph, mix2=Mix2Scope.NONE),
    )
    res = run_emu_job(cfg)
    n = bind(cfg, 0).parameters
    assert {row.record.bytes_sent for row in res.rows()} == {metrics.round_bytes(cfg, n)}
    assert all(p.consensus_rms_l2 > 0 for p in res.consensus.values())


def test_more_workers_than_hosts_is_refused_before_anything_starts() -> None:
    with EmuCluster() as cl, pytest.raises(ConfigError, match="5 workers need 5 hosts"):
        run_emu_job(replace(DIGITS, workers=5), cluster=cl)
