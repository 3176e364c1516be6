"""DiLoCo job settings: invalid graph/M/H combinations are refused with the setting named,
before anything starts; the paper's variants; every enum member has a row in its table."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from host.train.diloco import metrics, mixing, wire, worker
from host.train.diloco.config import (
    GRAPH_REQUIREMENTS,
    VARIANTS,
    Algorithm,
    DilocoConfig,
    Fault,
    FaultKind,
    GossipConfig,
    Graph,
    InnerConfig,
    Mix1Transport,
    Mix2Scope,
    OuterConfig,
    Reduce,
    ReduceConfig,
    variant,
)
from host.train.diloco.errors import ConfigError
from host.train.diloco.task import ALL_TASKS, VALIDATION

GOSSIP = Algorithm.GOSSIP


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"task": "imagenet"}, "unknown task 'imagenet'; valid: digits-mlp"),
        ({"workers": 0}, "workers must be >= 1, got 0"),
        ({"inner_steps": 0}, "inner_steps must be >= 1, got 0"),
        ({"rounds": 0}, "rounds must be >= 1"),
        ({"peer_timeout_s": 0.0}, "peer_timeout_s must be positive"),
        ({"algorithm": GOSSIP, "workers": 1}, "gossip needs at least 2 workers, got 1"),
        (
            {"algorithm": GOSSIP, "workers": 2, "gossip": GossipConfig(mix1_graph=Graph.RING)},
            "mix1_graph 'ring' with 2 workers: a ring needs at least 3 workers",
        ),
        (
            {"algorithm": GOSSIP, "workers": 6, "gossip": GossipConfig(mix1_graph=Graph.HYPERCUBE)},
            "mix1_graph 'hypercube' with 6 workers: a hypercube needs a power-of-two",
        ),
        (
            {
                "algorithm": GOSSIP,
                "workers": 2,
                "gossip": GossipConfig(mix2=Mix2Scope.LOCAL, mix2_graph=Graph.RING),
            },
            "mix2_graph 'ring' with 2 workers",
        ),
        (
            {"algorithm": GOSSIP, "workers": 4, "reduce": ReduceConfig(transport=Reduce.DBLP)},
            "reduce transport 'dblp' is for algorithms 'dp' and 'diloco'",
        ),
        ({"faults": (Fault(5, 0, FaultKind.KILL),)}, "fault kill for rank 5: no such worker"),
        ({"rounds": 3, "faults": (Fault(0, 3, FaultKind.KILL),)}, "outside 0..2"),
        ({"faults": (Fault(0, 0, FaultKind.DROP_MIX1),)}, "needs algorithm 'gossip'"),
    ],
)
def test_invalid_jobs_are_refused_with_the_setting_named(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        DilocoConfig(**kwargs)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: OuterConfig(lr=0.0), "outer lr must be positive"),
        (lambda: OuterConfig(momentum=1.0), r"outer momentum must be in \[0, 1\)"),
        (lambda: OuterConfig(momentum=0.0), "Nesterov outer steps need momentum > 0"),
        (lambda: InnerConfig(lr=-1.0), "inner lr must be positive"),
        (lambda: InnerConfig(beta2=1.0), "inner beta2"),
        (lambda: GossipConfig(mix1_timeout_s=0.0), "mix1_timeout_s must be positive"),
        (
            lambda: GossipConfig(mix1_graph=Graph.RING, mix1_transport=Mix1Transport.ALLREDUCE),
            "needs mix1_graph 'complete', not 'ring'",
        ),
        (lambda: variant("LocalM1"), "unknown gossip variant 'LocalM1'; valid: GlobalM1"),
    ],
)
def test_invalid_optimizer_and_gossip_settings_are_refused(make: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make()


def test_config_errors_are_value_errors() -> None:
    with pytest.raises(ValueError):
        DilocoConfig(workers=0)


@pytest.mark.parametrize("workers", [2, 3, 4, 5, 8])
def test_valid_graphs_for_m_workers_are_accepted(workers: int) -> None:
    for graph in Graph:
        least, power_of_two, _msg = GRAPH_REQUIREMENTS[graph]
        ok = workers >= least and (not power_of_two or workers & (workers - 1) == 0)
        cfg = GossipConfig(mix1_graph=graph, mix2=Mix2Scope.NONE)
        if ok:
            DilocoConfig(algorithm=GOSSIP, workers=workers, gossip=cfg)
        else:
            with pytest.raises(ConfigError, match=f"'{graph.value}' with {workers} workers"):
                DilocoConfig(algorithm=GOSSIP, workers=workers, gossip=cfg)


def test_paper_variants() -> None:
    assert variant("GlobalM1") == GossipConfig(mix1_graph=Graph.COMPLETE, mix2=Mix2Scope.NONE)
    local = variant("GlobalM1LocalM2")
    assert (local.mix1_graph, local.mix2, local.mix2_graph) == (
        Graph.COMPLETE,
        Mix2Scope.LOCAL,
        Graph.RING,
    )
    defaults = OuterConfig()
    assert (defaults.lr, defaults.momentum, defaults.nesterov) == (0.7, 0.9, True)
    assert set(VARIANTS) == {"GlobalM1", "GlobalM1LocalM2"}


def test_every_enum_member_has_a_row_in_its_table() -> None:
    assert set(GRAPH_REQUIREMENTS) == set(Graph) == set(mixing.NEIGHBOURS)
    assert set(worker.ROUND_RULES) == set(Algorithm) == set(metrics.ROUND_BYTES)
    assert set(worker.MIX2_RULES) == set(Mix2Scope) == set(metrics.MIX2_BYTES)
    assert set(metrics.MIX1_BYTES) == set(Mix1Transport)
    assert set(worker.FAULTS) == set(FaultKind)
    assert set(wire.KIND_DTYPES) == set(wire.MessageKind)
    assert set(wire.NP_DTYPES) == set(wire.DType)
    assert set(ALL_TASKS) == set(VALIDATION)


def test_faults_are_found_by_rank_and_round() -> None:
    cfg = DilocoConfig(
        algorithm=GOSSIP,
        workers=3,
        faults=(Fault(1, 2, FaultKind.KILL), Fault(1, 2, FaultKind.DROP_MIX1)),
    )
    assert cfg.faults_at(1, 2) == [FaultKind.KILL, FaultKind.DROP_MIX1]
    assert cfg.faults_at(0, 2) == [] and cfg.faults_at(1, 1) == []
    assert replace(cfg, rounds=5).total_steps == 5 * cfg.inner_steps
