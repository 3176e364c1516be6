"""The fabric runner's command line and the experiments' arithmetic (no fabric, no root)."""

from __future__ import annotations

import json
import os
import pathlib
import re

import pytest

from experiments import collisions, failover
from experiments.hosts import read_running_state
from experiments.mrc_fabric import PAYLOAD_EFFICIENCY, FabricParams, own_fabric
from host.errors import FabricNotRunning
from host.mrc.config import fabric_config
from host.mrc.emulated import (
    BASE_RTT_PACKETS,
    RTO_INITIAL_PACKETS,
    TARGET_QDELAY_PACKETS,
    emulated_fabric_config,
    packet_time_us,
)
from host.stream_agent import RecvRow, RunSpec, _missing, host_args, parse_args
from topologies.emulation.bringup import FabricBusy
from topologies.emulation.fabricnet import state_path
from topologies.model import FabricSpec, build_fabric


@pytest.mark.parametrize(
    "spec",
    [
        RunSpec(
            "t.json",
            "h1",
            "mrc",
            send_to=("h3", "h4"),
            expect=2,
            msg_bytes=4096,
            depth=4,
            duration_s=1.5,
            sample_ms=0.5,
            out_dir="/tmp/x",
        ),
        RunSpec("t.json", "h3", "tcp", expect=1, tcp_port=5000, plain_cc=True),
        RunSpec(
            "t.json",
            "h1",
            "single_path",
            send_to=("h2",),
            bench_sizes=(4096, 65536),
            bench_goodput_bytes=1 << 20,
            bench_mct_messages=7,
            fixed_window_bytes=65536,
        ),
    ],
)
def test_runner_command_line_round_trips(spec: RunSpec) -> None:
    assert parse_args(host_args(spec)) == spec


def test_emulated_config_scales_the_window_thresholds_with_the_link_rate() -> None:
    slow, fast = emulated_fabric_config(5.0).cc, emulated_fabric_config(1000.0).cc
    assert slow.target_qdelay_us == pytest.approx(TARGET_QDELAY_PACKETS * packet_time_us(5.0))
    assert packet_time_us(5.0) == pytest.approx(1516 * 8 / 5.0)
    assert fast.target_qdelay_us == fabric_config().cc.target_qdelay_us
    assert fast.qa_threshold_us == fabric_config().cc.qa_threshold_us


def test_emulated_config_sizes_timers_in_packet_times_and_coalesces_sprayed_acks() -> None:
    cfg = emulated_fabric_config(0.5)
    pkt_ms = packet_time_us(0.5) / 1e3
    assert cfg.rto_initial_ms == pytest.approx(RTO_INITIAL_PACKETS * pkt_ms)
    assert cfg.cc.base_rtt_us == pytest.approx(BASE_RTT_PACKETS * pkt_ms * 1e3)
    assert not cfg.ack_on_reorder and not cfg.ack_every_ce
    assert fabric_config().ack_on_reorder and fabric_config().ack_every_ce
    assert emulated_fabric_config(1000.0).rto_initial_ms == fabric_config().rto_initial_ms


def test_experiments_own_their_fabric_only_once_entered(tmp_path: pathlib.Path) -> None:
    # a live fabric runner (this process) holds tmp_path's state file
    state = state_path(str(tmp_path))
    state.parent.mkdir(parents=True)
    state.write_text(json.dumps({"runner_pid": os.getpid()}))
    cm = own_fabric(FabricParams(results_dir=str(tmp_path)))  # checks nothing, starts nothing
    busy = rf"already running \(pid {os.getpid()}, {re.escape(str(tmp_path))}/"
    with pytest.raises(FabricBusy, match=busy):
        with cm:
            pytest.fail("entered a fabric while another one runs")
    assert json.loads(state.read_text()) == {"runner_pid": os.getpid()}  # the other one's, intact


def test_receiver_counts_missing_sequence_numbers_per_flow() -> None:
    rows = [RecvRow("a", s, 1, 0, 0, 0, 1) for s in (0, 1, 3)] + [RecvRow("b", 0, 1, 0, 0, 0, 1)]
    assert _missing(rows) == 1


def test_no_state_file_means_no_running_fabric(tmp_path: pathlib.Path) -> None:
    with pytest.raises(FabricNotRunning, match="make fabric-up"):
        read_running_state(tmp_path / "fabric" / "state.json")


def test_collision_pattern_is_every_cross_leaf_pair_and_capacity_is_the_receivers_links() -> None:
    fabric = build_fabric(FabricSpec(link_mbps=5.0))
    flows = collisions.flows_of(fabric)
    assert len(flows) == 8
    assert all(fabric.host(a).leaf_index != fabric.host(b).leaf_index for a, b in flows)
    assert collisions.capacity_mbps(fabric) == 4 * 2 * 5.0
    assert 0.9 < PAYLOAD_EFFICIENCY < 0.92


@pytest.mark.parametrize(
    "series, expected",
    [
        ([(t / 1e3, 10.0) for t in range(0, 400, 5)], 0.0),  # never below the threshold
        ([(t / 1e3, 10.0 if t < 10 or t >= 60 else 1.0) for t in range(0, 400, 5)], 0.06),
        ([(t / 1e3, 1.0) for t in range(0, 400, 5)], None),  # never recovers
        ([(t / 1e3, 10.0 if t != 30 else 1.0) for t in range(0, 400, 5)], 0.035),  # one dip
    ],
)
def test_recovery_is_when_the_window_goodput_holds_above_the_threshold(
    series: list[tuple[float, float]], expected: float | None
) -> None:
    got = failover._recovery_s(series, 0.0, 5.0, hold_s=0.1, horizon_s=0.2)
    assert got == pytest.approx(expected) if expected is not None else got is None


def test_settling_counts_a_later_stall_that_recovery_forgives() -> None:
    # back above at 40 ms, then a second stall 95-140 ms: recovered at 40, settled at 140
    series = [(t / 1e3, 1.0 if 10 <= t < 40 or 95 <= t < 140 else 10.0) for t in range(0, 400, 5)]
    assert failover._recovery_s(series, 0.0, 5.0, hold_s=0.1, horizon_s=0.2) == pytest.approx(0.04)
    assert failover._settled_s(series, 0.0, 5.0, 0.25) == pytest.approx(0.14)
    assert failover._settled_s([(t / 1e3, 10.0) for t in range(0, 400, 5)], 0.0, 5.0, 0.25) == 0.0
    assert failover._settled_s([(t / 1e3, 1.0) for t in range(0, 100, 5)], 0.0, 5.0, 0.25) is None


def test_longest_gap_and_percentiles() -> None:
    assert failover._longest_gap([0.0, 0.01, 0.05, 0.06]) == pytest.approx(0.04)
    assert failover._longest_gap([]) == 0.0
    assert collisions._pcts([3.0, 1.0, 2.0]) == (2.0, 2.8, 3.0, 3.0)  # p50 p90 p99 max
    assert collisions._pcts([1.0, 2.0, 3.0, 4.0])[0] == 2.5  # linear interpolation
    assert collisions._pcts([]) == ("", "", "", "")
