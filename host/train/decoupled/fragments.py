"""Balanced tensor fragmentation: the model's tensors cut into P fragments of similar size.

The tensors (one :class:`TensorSlot` per parameter, in the model's order) are bin-packed
greedily, largest first (LPT): each tensor, from the largest to the smallest (ties: model
order), goes to the fragment holding the fewest elements so far (ties: the lowest index).
No tensor is split. Every fragment then lists its tensors in model order, and its vector is
their flattened values concatenated. Greedy packing guarantees, for any sizes:

    largest fragment − smallest fragment ≤ the largest tensor
    largest fragment ≤ total / P + (1 − 1/P) · the largest tensor

and LPT is within 4/3 of the best possible largest fragment. The paper found this balance
gives the lowest and smoothest peak bandwidth (one fragment is on the wire at a time).

Tensors of :class:`torch.nn.Embedding` modules are marked ``embedding``: Radial–Directional
Averaging leaves them to direct averaging (:data:`Fragment.direct_ranges`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from host.train.decoupled.errors import ConfigError

EMBEDDING_MODULES: tuple[type[torch.nn.Module], ...] = (torch.nn.Embedding,)
"""Modules whose weights are 'the embedding' (averaged directly under RDA)."""


@dataclass(frozen=True)
class TensorSlot:
    """One parameter tensor of the model."""

    index: int  # its position in ``model.parameters()``
    name: str
    shape: tuple[int, ...]
    embedding: bool = False

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1


@dataclass(frozen=True)
class Fragment:
    """Fragment ``index``: its tensors in model order."""

    index: int
    tensors: tuple[TensorSlot, ...]

    @property
    def size(self) -> int:
        """Elements of the fragment's vector."""
        return sum(t.numel for t in self.tensors)

    @property
    def direct_ranges(self) -> tuple[tuple[int, int], ...]:
        """[start, end) element ranges of the fragment's vector that hold embedding tensors."""
        out, off = [], 0
        for t in self.tensors:
            if t.embedding:
                out.append((off, off + t.numel))
            off += t.numel
        return tuple(out)

    def direct_mask(self) -> np.ndarray:
        """A boolean mask over the fragment's vector: True on embedding elements."""
        mask = np.zeros(self.size, dtype=bool)
        for a, b in self.direct_ranges:
            mask[a:b] = True
        return mask

    def gather(self, params: Sequence[torch.Tensor]) -> torch.Tensor:
        """The fragment's vector from the model's parameters (a new float32 tensor)."""
        return torch.cat([params[t.index].detach().reshape(-1) for t in self.tensors]).to(
            torch.float32
        )

    def scatter(self, params: Sequence[torch.Tensor], vector: torch.Tensor) -> None:
        """Copy ``vector`` into the fragment's parameters (in place).

        Raises:
            ValueError: ``vector`` does not have the fragment's size.
        """
        if vector.numel() != self.size:
            raise ValueError(
                f"fragment {self.index}: {vector.numel()} values for {self.size} elements"
            )
        off = 0
        with torch.no_grad():
            for t in self.tensors:
                p = params[t.index]
                p.copy_(vector[off : off + t.numel].view_as(p))
                off += t.numel


@dataclass(frozen=True)
class Fragmentation:
    fragments: tuple[Fragment, ...]

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(f.size for f in self.fragments)

    @property
    def total(self) -> int:
        return sum(self.sizes)

    def __len__(self) -> int:
        return len(self.fragments)

    def __getitem__(self, index: int) -> Fragment:
        return self.fragments[index]


def model_tensors(model: torch.nn.Module) -> tuple[TensorSlot, ...]:
    """Every parameter of ``model`` as a slot, in ``model.parameters()`` order."""
    embedding = {
        id(p)
        for m in model.modules()
        if isinstance(m, EMBEDDING_MODULES)
        for p in m.parameters(recurse=False)
    }
    return tuple(
        TensorSlot(i, name, tuple(p.shape), id(p) in embedding)
        for i, (name, p) in enumerate(model.named_parameters())
    )


def balanced(tensors: Sequence[TensorSlot], parts: int) -> Fragmentation:
    """Greedy largest-first bin-packing of ``tensors`` into ``parts`` fragments.

    Raises:
        ConfigError: fewer tensors than fragments (a fragment would be empty) or parts < 1.
    """
    if parts < 1:
        raise ConfigError(f"fragments must be >= 1, got {parts}")
    if len(tensors) < parts:
        raise ConfigError(
            f"{parts} fragments need at least {parts} tensors; the model has {len(tensors)} "
            f"(use fragments <= {len(tensors)})"
        )
    loads = [0] * parts
    bins: list[list[TensorSlot]] = [[] for _ in range(parts)]
    for _k, t in sorted(enumerate(tensors), key=lambda kt: (-kt[1].numel, kt[0])):
        target = min(range(parts), key=lambda b: (loads[b], b))
        bins[target].append(t)
        loads[target] += t.numel
    return Fragmentation(
        tuple(Fragment(i, tuple(sorted(b, key=lambda t: t.index))) for i, b in enumerate(bins))
    )


def fragment_model(model: torch.nn.Module, parts: int) -> Fragmentation:
    """:func:`balanced` over ``model``'s parameters."""
    return balanced(model_tensors(model), parts)
