"""The one RFC 6298 estimator (host.mrc.rtt) behind the RTO, each EV's expected RTT and NSCC's
noise target: the first sample, the update order, and that all three owners use it."""

from __future__ import annotations

import pytest

from host.mrc.cc import NsccWindow
from host.mrc.config import CcConfig, MrcConfig
from host.mrc.evs import EvTable
from host.mrc.rtt import RttEstimator
from host.mrc.sender import Sender
from host.mrc.sim import sim_evs


def test_first_sample_then_rfc6298_with_the_old_srtt_in_the_deviation() -> None:
    e = RttEstimator()
    assert (e.srtt, e.rttvar) == (0.0, 0.0)
    e.update_rtt(0.100)
    assert (e.srtt, e.rttvar) == (0.100, 0.050)
    e.update_rtt(0.020)
    # rttvar = 3/4 * 0.050 + 1/4 * |0.100 - 0.020|; srtt = 7/8 * 0.100 + 1/8 * 0.020
    assert e.rttvar == pytest.approx(0.0575) and e.srtt == pytest.approx(0.090)
    steady = RttEstimator(first_var=0.0)
    for _ in range(50):
        steady.update_rtt(0.010)
    assert steady.srtt == pytest.approx(0.010) and steady.rttvar == 0.0


def test_the_sender_the_evs_and_the_noise_target_share_the_estimator() -> None:
    cfg = MrcConfig()
    evs = EvTable(sim_evs(), cfg.ev)
    s = Sender(cfg, evs, NsccWindow(cfg.cc), lambda *e: None, 0.0)
    w = NsccWindow(CcConfig(noise_target_gain=4.0))
    ref, ref0 = RttEstimator(), RttEstimator(first_var=0.0)
    for rtt in (0.030, 0.010, 0.050, 0.020):
        ref.update_rtt(rtt)
        ref0.update_rtt(rtt)
        s._update_rto(rtt)
        evs.on_rtt(1, rtt)
        w.on_ack(0.0, 1000, rtt, False)
    assert (s.srtt, s.rtt.rttvar) == (ref.srtt, ref.rttvar)
    assert s.rto_base == pytest.approx(max(cfg.rto_min_ms / 1e3, ref.srtt + 4 * ref.rttvar))
    assert evs.expected_rtt(1, 1.0) == (ref.srtt, ref.rttvar)
    assert w.rtt_dev == ref0.rttvar
