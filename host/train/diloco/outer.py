"""The outer optimizer of one worker: SGD with (Nesterov) momentum on flat vectors.

The pseudo-gradient Δ plays the gradient's part. With momentum μ, buffer b and lr η
(torch.optim.SGD's update with dampening 0 and no weight decay, bit for bit)::

    b ← Δ                 on the first step,   b ← μ·b + Δ   afterwards
    d ← Δ + μ·b           (Nesterov)            d ← b          (plain momentum)   d ← Δ (μ = 0)
    x_new ← base − η·d

DiLoCo applies it to the round-start parameters (base = θ(t−1)); Factored Gossip DiLoCo to
the Mix1 result (base = z_i), each worker with its own buffer.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from host.train.diloco.config import OuterConfig


@dataclass(frozen=True)
class OuterState:
    """What a checkpoint of the outer optimizer holds."""

    steps: int
    buffer: torch.Tensor | None


class OuterOptimizer:
    """One worker's outer optimizer (its momentum buffer is its own)."""

    def __init__(self, cfg: OuterConfig) -> None:
        self.cfg = cfg
        self.steps = 0
        self._buffer: torch.Tensor | None = None

    def direction(self, delta: torch.Tensor, share: float = 1.0) -> torch.Tensor:
        """The step direction d for pseudo-gradient ``delta`` (updates the buffer).

        ``share`` < 1: ``delta`` is that share of an outer step (Decoupled DiLoCo's syncer
        merges the learners of one round in several parts when they report apart); the
        buffer then decays by μ^share and the momentum term counts ``share`` of itself, so
        the parts of a round add up to about one outer step instead of decaying the momentum
        once per part.
        """
        mu = self.cfg.momentum
        self.steps += 1
        if mu == 0:
            return delta
        if self._buffer is None:
            self._buffer = delta.detach().clone()
        else:
            self._buffer.mul_(mu**share).add_(delta)
        if self.cfg.nesterov:
            return delta.add(self._buffer, alpha=mu * share)
        return self._buffer.mul(share) if share != 1.0 else self._buffer

    def step(self, base: torch.Tensor, delta: torch.Tensor, share: float = 1.0) -> torch.Tensor:
        """``base − lr · direction(delta, share)`` as a new tensor."""
        return base.add(self.direction(delta, share), alpha=-self.cfg.lr)

    def state(self) -> OuterState:
        buf = None if self._buffer is None else self._buffer.clone()
        return OuterState(self.steps, buf)

    def load(self, state: OuterState) -> None:
        self.steps = state.steps
        self._buffer = None if state.buffer is None else state.buffer.clone()
