"""The loss-bound policies, the critical-learning-regime detector and the receive state
(zero-fill, thresholds, drop reasons)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from host.dblp.chunks import ChunkDrop, TensorSpec, decode_chunk, encode_chunks
from host.dblp.config import LossPolicy, PhaseConfig
from host.dblp.control import Control, ControlKind
from host.dblp.phase import BOUND_RULES, PhaseController, relative_change
from host.dblp.state import ReceiveState, missing_chunks, needed_chunks


def test_every_policy_has_a_bound_rule() -> None:
    assert set(BOUND_RULES) == set(LossPolicy)


def test_policy_names_parse_and_unknown_ones_list_the_valid_names() -> None:
    assert LossPolicy.parse("fixed") is LossPolicy.FIXED
    with pytest.raises(ValueError, match="dblp, fixed, reliable"):
        LossPolicy.parse("mlt")


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        (dict(p_low=-0.1), "p_low"),
        (dict(p_low=0.5, k=0.6), "p_low"),
        (dict(eta=0.0), "eta"),
        (dict(check_every_rounds=0), "check_every_rounds"),
    ],
)
def test_bad_phase_settings_are_rejected(cfg: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PhaseConfig(**cfg)  # type: ignore[arg-type]


def feed(ctl: PhaseController, norms: list[float]) -> list[float]:
    """The bound in force at each round while ``norms`` are observed."""
    out = []
    for r, n in enumerate(norms):
        out.append(ctl.bound())
        ctl.observe(r, n)
    return out


def test_fixed_and_reliable_ignore_the_gradient() -> None:
    norms = [10.0, 1.0, 0.1, 5.0] * 10
    assert set(feed(PhaseController(LossPolicy.FIXED), norms)) == {0.008}
    assert set(feed(PhaseController(LossPolicy.RELIABLE), norms)) == {0.0}


def test_dblp_starts_critical_and_relaxes_when_the_norm_settles() -> None:
    cfg = PhaseConfig(p_low=0.01, k=0.3, eta=0.5, check_every_rounds=5)
    bounds = feed(PhaseController(LossPolicy.DBLP, cfg), [1.0] * 20)
    assert bounds[:10] == [0.01] * 10  # the first window has no predecessor: stays critical
    assert bounds[10:] == [pytest.approx(0.31)] * 10


def test_dblp_returns_to_p_low_when_the_norm_changes_by_eta() -> None:
    cfg = PhaseConfig(p_low=0.01, k=0.3, eta=0.5, check_every_rounds=5)
    ctl = PhaseController(LossPolicy.DBLP, cfg)
    bounds = feed(ctl, [1.0] * 10 + [1.4] * 5 + [3.0] * 5 + [3.0] * 5)
    assert bounds[10:15] == [pytest.approx(0.31)] * 5  # 1.0 -> 1.0: no change
    assert bounds[15:20] == [pytest.approx(0.31)] * 5  # 1.0 -> 1.4: +40 % < eta
    assert bounds[20:25] == [0.01] * 5  # 1.4 -> 3.0: +114 % >= eta: critical again
    assert [c.in_clr for c in ctl.checks] == [False, False, True, False]


def test_relative_change() -> None:
    assert relative_change(2.0, 1.0) == 0.5
    assert relative_change(0.0, 0.0) == 0.0
    assert math.isinf(relative_change(0.0, 1.0))


@pytest.mark.parametrize(
    ("count", "bound", "needed"),
    [
        (15, 0.0, 15),
        (15, 0.008, 15),
        (15, 0.408, 9),
        (1, 0.5, 1),
        (100, 0.1, 90),
        (125, 0.008, 124),
    ],
)
def test_needed_chunks_is_the_fewest_reaching_one_minus_p(
    count: int, bound: float, needed: int
) -> None:
    assert needed_chunks(count, bound) == needed
    assert needed / count >= 1 - bound - 1e-12
    assert (needed - 1) / count < 1 - bound


def _chunks(round_: int = 3, n: int = 100, bound: float = 0.408) -> tuple[np.ndarray, list]:  # type: ignore[type-arg]
    x = np.arange(1, n + 1, dtype=np.float32)
    return x, [decode_chunk(c) for c in encode_chunks(round_, TensorSpec.of(0, x), x, 10, bound)]


def test_missing_chunks_are_zero_filled() -> None:
    x, chunks = _chunks()
    st = ReceiveState(3, TensorSpec.of(0, x), 10, None)
    for c in chunks[::2]:
        assert st.accept(c) is None
    out = st.result()
    mask = st.received_mask()
    np.testing.assert_array_equal(out[mask], x[mask])
    assert not out[~mask].any() and mask.sum() == 50
    assert st.fraction == 0.5 and not st.done  # bound 0.408 from the chunks: needs 6 of 10
    st.accept(chunks[1])
    assert st.done and st.bound == pytest.approx(0.408)


def test_state_drops_duplicates_wrong_rounds_and_foreign_tensors() -> None:
    x, chunks = _chunks()
    st = ReceiveState(3, TensorSpec.of(0, x), 10, 0)
    assert st.accept(chunks[0]) is None
    assert st.accept(chunks[0]) is ChunkDrop.DUPLICATE
    _, old = _chunks(round_=2)
    assert st.accept(old[1]) is ChunkDrop.WRONG_ROUND
    other = np.zeros(100, dtype=np.float64)
    foreign = decode_chunk(encode_chunks(3, TensorSpec.of(0, other), other, 10, 0.0)[1])
    assert st.accept(foreign) is ChunkDrop.FOREIGN
    assert st.received == 1 and st.needed == 10  # the receiver's own bound (0) wins


def test_probe_teaches_the_bound_and_bitmap_lists_what_is_missing() -> None:
    x, chunks = _chunks()
    st = ReceiveState(3, TensorSpec.of(0, x), 10, None)
    assert st.on_probe(Control(ControlKind.PROBE, 3, 0, 0, 9, 0, 100_000)) is ChunkDrop.FOREIGN
    assert st.on_probe(Control(ControlKind.PROBE, 3, 0, 0, 10, 0, 100_000)) is None
    for i in (0, 3, 4):
        st.accept(chunks[i])
    bm = Control(ControlKind.BITMAP, 3, 0, 0, 10, 3, 0, 0, st.bitmap())
    assert missing_chunks(bm) == [1, 2, 5, 6, 7, 8, 9]
    assert st.needed == 9
