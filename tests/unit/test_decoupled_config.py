"""Settings are validated before anything starts, with the setting and what would be valid in
the message; a Decoupled DiLoCo job names the DiLoCo job it reduces to."""

from __future__ import annotations

from dataclasses import replace

import pytest

from host.train.decoupled.config import (
    DecoupledConfig,
    ElasticConfig,
    GraceConfig,
    SyncerConfig,
)
from host.train.decoupled.errors import ConfigError
from host.train.diloco.config import Algorithm
from host.train.diloco.errors import ConfigError as DilocoConfigError

BASE = DecoupledConfig(task="digits-mlp")


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"task": "imagenet"}, "unknown task 'imagenet'; valid: digits-mlp"),
        ({"learners": 0}, "learners must be >= 1"),
        ({"fragments": 5}, r"multiple of fragments \(P = 5\)"),
        ({"overlap_steps": 24}, r"overlap_steps \(τ = 24\) must be below sync_every_steps"),
        ({"overlap_steps": -1}, "overlap_steps must be >= 0"),
        ({"syncer": SyncerConfig(quorum=5)}, "quorum K = 5 exceeds the 4 learners"),
        ({"merge_wait_s": 0.0}, "merge_wait_s must be positive"),
        ({"min_step_s": -0.1}, "min_step_s must be >= 0"),
        ({"max_wall_s": 0.0}, "max_wall_s must be positive"),
    ],
)
def test_invalid_decoupled_settings_are_refused(changes: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        replace(BASE, **changes)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: GraceConfig(gamma=1.5), r"gamma must be in \[0, 1\]"),
        (lambda: GraceConfig(cap_s=-1.0), "cap_s must be >= 0"),
        (lambda: GraceConfig(ema_alpha=0.0), r"ema_alpha must be in \(0, 1\]"),
        (lambda: SyncerConfig(quorum=0), "quorum must be >= 1"),
        (lambda: SyncerConfig(learner_timeout_s=0.0), "learner_timeout_s must be positive"),
        (lambda: ElasticConfig(workers=0), "workers must be >= 1"),
        (
            lambda: ElasticConfig(rendezvous_timeout_s=2.0, reply_timeout_s=1.0),
            "reply_timeout_s .* must exceed rendezvous_timeout_s",
        ),
        (lambda: ElasticConfig(reconfigure_s=-1.0), "reconfigure_s must be >= 0"),
        (
            lambda: ElasticConfig(reconfigure_s=2.0, join_timeout_s=4.5, rendezvous_timeout_s=1.0),
            "join_timeout_s .* must exceed 5 s with reconfigure_s 2",
        ),
        (
            lambda: ElasticConfig(rendezvous_timeout_s=1.0, reconfigure_s=9.5),
            "reply_timeout_s .* must exceed 10.5 s",
        ),
    ],
)
def test_invalid_syncer_and_elastic_settings_are_refused(make: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        make()  # type: ignore[operator]


def test_config_errors_are_diloco_config_errors_and_value_errors() -> None:
    with pytest.raises(DilocoConfigError):
        replace(BASE, learners=0)
    with pytest.raises(ValueError):
        replace(BASE, learners=0)


def test_the_reference_is_the_diloco_job_of_the_same_task_and_optimizers() -> None:
    cfg = replace(BASE, learners=3, sync_every_steps=8, fragments=2, steps=20, seed=5)
    ref = cfg.reference()
    assert ref.algorithm is Algorithm.DILOCO
    assert (ref.task, ref.workers, ref.inner_steps, ref.rounds, ref.seed) == (
        "digits-mlp",
        3,
        8,
        3,
        5,
    )
    assert (ref.inner, ref.outer) == (cfg.inner, cfg.outer)
    assert cfg.send_interval_steps == 4 and cfg.checkpoint_interval_steps == 8
    assert ElasticConfig(task="digits-mlp").reference().algorithm is Algorithm.DATA_PARALLEL
