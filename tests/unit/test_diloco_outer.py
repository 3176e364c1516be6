"""The per-worker outer optimizer is torch.optim.SGD (Nesterov, plain momentum, none) bit for
bit; lr 1 without momentum applies the pseudo-gradient as it is; its state round-trips."""

from __future__ import annotations

import pytest
import torch

from host.train.diloco.config import OuterConfig
from host.train.diloco.outer import OuterOptimizer


@pytest.mark.parametrize(
    "cfg",
    [
        OuterConfig(),
        OuterConfig(lr=0.3, momentum=0.5, nesterov=False),
        OuterConfig(lr=1.0, momentum=0.0, nesterov=False),
    ],
)
def test_outer_steps_equal_torch_sgd(cfg: OuterConfig) -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1000, generator=gen)
    ref = torch.nn.Parameter(x.clone())
    sgd = torch.optim.SGD([ref], lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.nesterov)
    outer = OuterOptimizer(cfg)
    for _ in range(5):
        delta = torch.randn(1000, generator=gen)
        ref.grad = delta.clone()
        sgd.step()
        x = outer.step(x, delta)
        assert torch.equal(x, ref.detach())
    assert outer.steps == 5


def test_fedavg_outer_step_applies_the_pseudo_gradient() -> None:
    outer = OuterOptimizer(OuterConfig(lr=1.0, momentum=0.0, nesterov=False))
    base = torch.tensor([1.0, 2.0])
    assert torch.equal(outer.step(base, torch.tensor([0.5, -1.0])), torch.tensor([0.5, 3.0]))


def test_outer_state_round_trips() -> None:
    a = OuterOptimizer(OuterConfig())
    x = torch.zeros(4)
    x = a.step(x, torch.ones(4))
    b = OuterOptimizer(OuterConfig())
    b.load(a.state())
    d = torch.tensor([1.0, -2.0, 0.5, 0.0])
    assert torch.equal(a.step(x, d), b.step(x, d))
    assert b.state().steps == 2
