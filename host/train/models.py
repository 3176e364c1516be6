"""The models of the training jobs: small enough for Python hosts on a 2-core machine.

* :class:`Mlp` — 64 → hidden → 10 on the flattened 8×8 digits.
* :class:`SmallCnn` — two 3×3 convolutions and a linear layer on the 8×8 digits.
* :class:`CharTransformer` — a character-level causal transformer (pre-norm blocks,
  learned positions).
"""

from __future__ import annotations

import torch
from torch import nn


class Mlp(nn.Module):
    def __init__(self, inputs: int = 64, hidden: int = 64, classes: int = 10) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.net(x)
        return out


class SmallCnn(nn.Module):
    def __init__(self, channels: int = 8, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, channels, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(channels, channels, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Linear(channels * 16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h: torch.Tensor = self.features(x.view(-1, 1, 8, 8))
        out: torch.Tensor = self.head(h.flatten(1))
        return out


class CharTransformer(nn.Module):
    """A causal language model over character ids.

    Args:
        vocab: number of character ids.
        context: longest input (positions learned up to it).
        width, heads, layers: model size.
    """

    mask: torch.Tensor  # the causal attention mask, a non-persistent buffer

    def __init__(
        self, vocab: int, context: int = 32, width: int = 48, heads: int = 2, layers: int = 1
    ) -> None:
        super().__init__()
        self.context = context
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.zeros(context, width))
        block = nn.TransformerEncoderLayer(
            width, heads, dim_feedforward=2 * width, dropout=0.0, batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)
        mask = torch.triu(torch.full((context, context), float("-inf")), diagonal=1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        n = ids.shape[1]
        h = self.embed(ids) + self.position[:n]
        h = self.blocks(h, mask=self.mask[:n, :n], is_causal=True)
        out: torch.Tensor = self.head(self.norm(h))
        return out
