"""The NSCC-style window: the four (ECN, delay) quadrants, NACKs, quick adapt, bounds."""

from __future__ import annotations

import pytest

from host.mrc.cc import REACTIONS_DELAY_ONLY, REACTIONS_ECN, NsccWindow
from host.mrc.config import CcConfig

BASE = 0.0001  # 100 us
TARGET_US = 1000.0


def window(**kw: object) -> NsccWindow:
    cfg = CcConfig(
        **{
            "base_rtt_us": 100.0,
            "target_qdelay_us": TARGET_US,  # type: ignore[arg-type]
            "initial_cwnd_bytes": 100_000,
            **kw,
        }
    )
    return NsccWindow(cfg)


def test_both_tables_cover_every_quadrant() -> None:
    keys = {(ce, high) for ce in (False, True) for high in (False, True)}
    assert set(REACTIONS_ECN) == keys == set(REACTIONS_DELAY_ONLY)


def test_low_delay_without_ecn_grows_the_window_faster_than_high_delay() -> None:
    low, high = window(), window()
    for i in range(50):
        low.on_ack(i * 1e-3, 10_000, BASE + 0.0001, ce=False)
        high.on_ack(i * 1e-3, 10_000, BASE + 0.0015, ce=False)
    assert low.cwnd > high.cwnd > 100_000


def test_ecn_with_high_delay_decreases_multiplicatively_once_per_rtt() -> None:
    w = window()
    w.on_ack(0.01, 1_000, BASE + 0.0015, ce=True)
    after_one = w.cwnd
    assert after_one == pytest.approx(100_000 * (1 - 0.8 * 0.5 / 1.5))
    w.on_ack(0.0101, 1_000, BASE + 0.0015, ce=True)  # within base RTT + target: no second cut
    assert w.cwnd == after_one and w.decreases == 1


def test_ecn_with_low_delay_holds_the_window() -> None:
    w = window()
    w.on_ack(0.01, 1_000, BASE + 0.0002, ce=True)
    assert w.cwnd == 100_000


def test_delay_only_mode_decreases_on_delay_alone() -> None:
    ecn, delay_only = window(), window(ecn_enabled=False)
    for w in (ecn, delay_only):
        w.on_ack(0.01, 1_000, BASE + 0.003, ce=False)
    assert ecn.cwnd > 100_000 > delay_only.cwnd


def test_decrease_is_capped_at_max_md_fraction() -> None:
    w = window()
    w.on_ack(0.01, 1_000, BASE + 0.1, ce=True)
    assert w.cwnd == 50_000


def test_nack_takes_its_bytes_off_the_window() -> None:
    w = window()
    w.on_nack(0.0, 1_384)
    assert w.cwnd == 100_000 - 1_384


def test_quick_adapt_cuts_to_the_delivered_bytes_on_huge_delay() -> None:
    w = window(qa_threshold_us=5_000)
    w.on_ack(0.0, 1_000, BASE, ce=False)  # opens the first measurement window
    w.on_ack(0.01, 20_000, BASE + 0.02, ce=False)
    assert w.quick_adapts == 1 and w.cwnd == 20_000


def test_rto_quick_adapts_and_the_window_stays_within_bounds() -> None:
    w = window(min_cwnd_bytes=4_000, max_cwnd_bytes=150_000)
    w.on_rto(0.0)
    assert w.cwnd == 4_000
    for i in range(2000):
        w.on_ack(1 + i * 1e-3, 50_000, BASE, ce=False)
    assert w.cwnd == 150_000


def test_disabled_cc_reports_the_fixed_window() -> None:
    w = window(enabled=False)
    w.on_ack(0.0, 1_000, BASE + 0.01, ce=True)
    assert w.window_bytes == 100_000


def test_the_window_grows_only_while_it_is_in_use() -> None:
    used, idle = window(), window()
    for i in range(50):
        used.on_ack(i * 1e-3, 10_000, BASE + 0.0001, ce=False, inflight_bytes=90_000)
        idle.on_ack(i * 1e-3, 10_000, BASE + 0.0001, ce=False, inflight_bytes=20_000)
    assert used.cwnd > 100_000
    assert idle.cwnd == 100_000
    idle.on_ack(0.1, 1_000, BASE + 0.0015, ce=True, inflight_bytes=20_000)
    assert idle.cwnd < 100_000  # an application-limited window still shrinks on congestion


def test_host_rtt_counts_as_base_rtt_not_as_queueing() -> None:
    from host.mrc.emulated import emulated_fabric_config

    plain = emulated_fabric_config(20.0).cc
    shifted = emulated_fabric_config(20.0, host_rtt_ms=10.0).cc
    assert shifted.base_rtt_us == pytest.approx(plain.base_rtt_us + 10_000.0)
    # an RTT of base + 10 ms of the hosts' own + half the target, CE-marked: the plain window
    # takes it for a queue above the target and backs off, the shifted one holds; both count
    # the sample
    rtt = (shifted.base_rtt_us + shifted.target_qdelay_us / 2) / 1e6
    p, s = NsccWindow(plain), NsccWindow(shifted)
    for w in (p, s):
        w.on_ack(1.0, 1384, rtt, ce=True)
    assert p.cwnd < plain.initial_cwnd_bytes and p.decreases == 1
    assert s.cwnd == shifted.initial_cwnd_bytes and s.decreases == 0
    assert (p.above_target, s.above_target, s.delay_samples) == (1, 0, 1)
    assert s.min_rtt == pytest.approx(rtt)
    with pytest.raises(ValueError, match="host_rtt_ms"):
        emulated_fabric_config(20.0, host_rtt_ms=-1.0)


def jittery(w: NsccWindow, n: int, t0: float, *, ce: bool = False) -> float:
    """``n`` ACKs 1 ms apart whose RTTs alternate between base + 0.2 and base + 3 ms (the
    mean 1.6 ms is above the 1 ms target); returns the time after the last."""
    for i in range(n):
        w.on_ack(t0 + i * 1e-3, 10_000, BASE + (0.0002 if i % 2 else 0.003), ce=ce)
    return t0 + n * 1e-3


def test_noise_target_grows_a_window_whose_unmarked_rtt_only_jitters() -> None:
    fixed, tolerant = window(), window(noise_target_gain=3.0)
    for w in (fixed, tolerant):
        jittery(w, 200, 0.0)
    # the jitter's mean deviation is ~1.4 ms: 3x that is above every sample
    assert tolerant.rtt_dev == pytest.approx(0.0014, rel=0.2)
    assert tolerant.target > 0.003
    assert tolerant.above_target < 10 < fixed.above_target
    assert tolerant.cwnd > fixed.cwnd > 100_000


def test_noise_target_keeps_the_fixed_target_for_marked_samples_and_a_steady_queue() -> None:
    w = window(noise_target_gain=3.0, gamma=0.5)
    jittery(w, 100, 0.0)
    w.on_ack(1.0, 1_000, BASE + 0.0015, ce=True)  # marked, above the configured target
    assert w.decreases == 1 and w.target == pytest.approx(TARGET_US / 1e6)
    steady = window(noise_target_gain=3.0)
    for i in range(100):  # a standing queue: 2 ms, no deviation, no marks
        steady.on_ack(i * 1e-3, 10_000, BASE + 0.002, ce=False)
    assert steady.rtt_dev == 0.0 and steady.target == pytest.approx(TARGET_US / 1e6)
    assert steady.above_target == 100


def test_noise_target_is_off_without_ecn() -> None:
    w = window(noise_target_gain=3.0, ecn_enabled=False)
    jittery(w, 100, 0.0)
    assert w.rtt_dev == 0.0 and w.decreases > 0


def test_quick_adapt_on_delay_can_require_a_ce_mark_in_the_window() -> None:
    plain, needs_ce = window(qa_threshold_us=5_000), window(qa_threshold_us=5_000, qa_needs_ce=True)
    for w in (plain, needs_ce):
        w.on_ack(0.0, 1_000, BASE, ce=False)  # opens the first measurement window
        w.on_ack(0.01, 20_000, BASE + 0.02, ce=False)
    assert plain.quick_adapts == 1 and needs_ce.quick_adapts == 0
    needs_ce.on_ack(0.0105, 1_000, BASE + 0.0002, ce=True)  # marked, within the window
    needs_ce.on_ack(0.05, 20_000, BASE + 0.02, ce=False)  # the window ends: cut
    assert needs_ce.quick_adapts == 1 and needs_ce.cwnd == 21_000
    needs_ce.on_ack(0.08, 20_000, BASE + 0.02, ce=False)  # next window unmarked: no cut
    assert needs_ce.quick_adapts == 1
    needs_ce.on_rto(0.09)  # a timeout still cuts
    assert needs_ce.quick_adapts == 2
