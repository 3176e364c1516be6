"""Balanced tensor fragmentation: every tensor in exactly one fragment, no fragment empty, the
greedy bounds on any sizes, within 4/3 of the best packing, the embedding marked for direct
averaging, and fragments that gather and scatter the model's parameters exactly."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from host.train.decoupled.config import DecoupledConfig
from host.train.decoupled.errors import ConfigError
from host.train.decoupled.fragments import TensorSlot, balanced, fragment_model, model_tensors
from host.train.diloco.task import bind


def slots(sizes: list[int]) -> list[TensorSlot]:
    return [TensorSlot(i, f"t{i}", (n,)) for i, n in enumerate(sizes)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 10_000), min_size=1, max_size=40), st.integers(1, 8))
def test_greedy_packing_bounds_hold_for_any_sizes(sizes: list[int], parts: int) -> None:
    if parts > len(sizes):
        parts = len(sizes)
    frag = balanced(slots(sizes), parts)
    placed = sorted(t.index for f in frag.fragments for t in f.tensors)
    assert placed == list(range(len(sizes)))  # each tensor exactly once
    loads = frag.sizes
    assert min(loads) > 0 and frag.total == sum(sizes)
    assert max(loads) - min(loads) <= max(sizes)
    assert max(loads) <= sum(sizes) / parts + (1 - 1 / parts) * max(sizes) + 1e-9
    for f in frag.fragments:  # model order inside a fragment
        assert [t.index for t in f.tensors] == sorted(t.index for t in f.tensors)


def best_largest(sizes: list[int], parts: int) -> int:
    best = sum(sizes)
    for assign in itertools.product(range(parts), repeat=len(sizes)):
        loads = [0] * parts
        for n, b in zip(sizes, assign):
            loads[b] += n
        if min(loads) > 0:
            best = min(best, max(loads))
    return best


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 100), min_size=3, max_size=7), st.integers(2, 3))
def test_largest_first_is_within_four_thirds_of_the_best_packing(
    sizes: list[int], parts: int
) -> None:
    assert max(balanced(slots(sizes), parts).sizes) <= 4 / 3 * best_largest(sizes, parts)


def test_equal_tensors_split_evenly() -> None:
    assert balanced(slots([5] * 12), 4).sizes == (15, 15, 15, 15)


def test_more_fragments_than_tensors_is_refused_with_the_limit() -> None:
    with pytest.raises(ConfigError, match=r"5 fragments need at least 5 tensors.*fragments <= 4"):
        balanced(slots([1, 2, 3, 4]), 5)


def test_the_transformer_is_balanced_and_its_embedding_marked() -> None:
    cfg = DecoupledConfig(task="chars-transformer-m", fragments=4)
    model = bind(cfg.reference(), 0).run.model
    tensors = model_tensors(model)
    assert [t.name for t in tensors if t.embedding] == ["embed.weight"]
    frag = fragment_model(model, 4)
    biggest = max(t.numel for t in tensors)
    assert max(frag.sizes) - min(frag.sizes) <= biggest
    holder = next(f for f in frag.fragments if any(t.embedding for t in f.tensors))
    mask = holder.direct_mask()
    assert mask.sum() == model.embed.weight.numel()
    ((a, b),) = holder.direct_ranges
    assert b - a == model.embed.weight.numel()


def test_gather_then_scatter_round_trips_every_parameter() -> None:
    cfg = DecoupledConfig(task="digits-mlp", fragments=3, sync_every_steps=6)
    model = bind(cfg.reference(), 0).run.model
    params = list(model.parameters())
    frag = fragment_model(model, 3)
    before = [p.detach().clone() for p in params]
    vectors = [f.gather(params) for f in frag.fragments]
    assert sum(v.numel() for v in vectors) == sum(p.numel() for p in params)
    for f, v in zip(frag.fragments, vectors):
        f.scatter(params, torch.zeros_like(v))
    assert all(float(p.detach().abs().sum()) == 0.0 for p in params)
    for f, v in zip(frag.fragments, vectors):
        f.scatter(params, v)
    for p, q in zip(params, before):
        assert torch.equal(p.detach(), q)
    with pytest.raises(ValueError, match="values for"):
        frag[0].scatter(params, torch.zeros(3))
