"""The fabric runner's command line and the experiments' arithmetic (no fabric, no root)."""

from __future__ import annotations

import csv
import json
import math
import os
import pathlib
import re
from collections.abc import Callable, Mapping, Sequence

import pytest

from experiments import collisions, failover
from experiments.hosts import read_running_state
from experiments.mrc_fabric import PAYLOAD_EFFICIENCY, FabricParams, attempt, own_fabric, read_csv
from host.errors import FabricNotRunning, TransportError
from host.mrc.config import fabric_config
from host.mrc.emulated import (
    BASE_RTT_PACKETS,
    RTO_INITIAL_PACKETS,
    TARGET_QDELAY_PACKETS,
    emulated_fabric_config,
    packet_time_us,
)
from host.stream_agent import RecvRow, RunSpec, _missing, conn_id_for, host_args, parse_args
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


@pytest.mark.parametrize("main", [failover.main, collisions.main])
def test_an_experiment_refused_by_a_running_fabric_exits_2_with_one_line(
    main: Callable[[Sequence[str] | None], int],
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # a live fabric runner (this process) holds tmp_path's state file: the run is refused
    state = state_path(str(tmp_path))
    state.parent.mkdir(parents=True)
    state.write_text(json.dumps({"runner_pid": os.getpid()}))
    out = str(tmp_path / "x.csv")
    assert main(["--results", str(tmp_path), "--out", out, "--seeds", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already running" in err[0], err
    assert err[0].startswith(("exp-failover: ", "exp-collisions: "))
    assert not pathlib.Path(out).exists()


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


def test_settling_waits_for_the_end_of_a_dip_that_outlasts_the_horizon() -> None:
    # below from 10 ms to 145 ms, horizon 100 ms: settled when it is back above, at 145 ms
    series = [(t / 1e3, 1.0 if 10 <= t < 145 else 10.0) for t in range(0, 400, 5)]
    assert failover._settled_s(series, 0.0, 5.0, 0.1) == pytest.approx(0.145)
    assert failover._recovery_s(series, 0.0, 5.0, hold_s=0.1, horizon_s=0.1) == pytest.approx(0.145)


def test_the_failover_window_holds_the_same_packets_at_every_link_rate() -> None:
    # 25 ms at 5 Mbit/s (about ten 1,516-byte packet times) scales to 2.5 ms at 50 ...
    assert failover.at_link_rate(25.0, 5.0) == 25.0
    assert failover.at_link_rate(25.0, failover.DEFAULT_LINK_MBPS) == pytest.approx(2.5)
    p = failover.FailoverParams()
    assert p.fabric.link_mbps == failover.DEFAULT_LINK_MBPS
    # ... but the goodput window keeps 10 ms (the hosts' scheduling jitter) from 12.5 Mbit/s on
    assert p.window_s(5.0) == pytest.approx(0.025) and p.window_s(10.0) == pytest.approx(0.0125)
    assert p.window_s(50.0) == pytest.approx(0.010) == p.window_s(200.0)
    assert p.bin_s(5.0) == pytest.approx(0.005) and p.bin_s(50.0) == pytest.approx(0.002)
    assert failover._window_label([{"link_mbps": "50.0"}, {"link_mbps": "50.0"}]) == "10 ms"
    assert failover._window_label([{"link_mbps": "5"}, {"link_mbps": "50"}]) == "25 ms/10 ms"


def test_a_failover_run_record_reads_back(tmp_path: pathlib.Path) -> None:
    p = failover.FailoverParams(fabric=FabricParams(results_dir=str(tmp_path)))
    rec = failover.RunRecord("mrc", 2, 0.01, 1, 5.0, 5.02, 5.001, 5.01, tmp_path / "x", 1.5, [])
    rec.save(FabricSpec(link_mbps=5.0))
    back, spec = failover.RunRecord.read(tmp_path / "x")
    assert back == rec and spec.link_mbps == 5.0
    failed = failover.RunRecord.failure(p, "single_path", 3, "TransportError: gone")
    assert (failed.failed, failed.out_dir) == ("TransportError: gone", p.run_dir / "single_path_3")


def test_longest_gap_and_percentiles() -> None:
    assert failover._longest_gap([0.0, 0.01, 0.05, 0.06]) == pytest.approx(0.04)
    assert failover._longest_gap([]) == 0.0
    assert collisions._pcts([3.0, 1.0, 2.0]) == (2.0, 2.8, 3.0, 3.0)  # p50 p90 p99 max
    assert collisions._pcts([1.0, 2.0, 3.0, 4.0])[0] == 2.5  # linear interpolation
    assert collisions._pcts([]) == ("", "", "", "")


# -- seeds: per-seed rows, summaries over seeds, the plots (synthetic CSVs, no fabric) -----------


def test_a_seed_fixes_the_connection_ids_and_the_command_line_carries_it() -> None:
    assert conn_id_for(3, "h1", "h3") == conn_id_for(3, "h1", "h3")
    assert conn_id_for(3, "h1", "h3") != conn_id_for(4, "h1", "h3")
    assert conn_id_for(3, "h1", "h3") != conn_id_for(3, "h3", "h1")
    assert 0 <= conn_id_for(0, "h1", "h3") < 1 << 32
    spec = RunSpec("t.json", "h1", "single_path", send_to=("h3",), seed=7)
    assert parse_args(host_args(spec)) == spec and "--seed" in host_args(spec)
    assert "--seed" not in host_args(RunSpec("t.json", "h1"))


def test_a_seed_fixes_the_failure_offset_and_the_start_offsets() -> None:
    p = failover.FailoverParams(fail_jitter_ms=50.0)
    offsets = [p.fail_offset_s(s) for s in range(5)]
    assert offsets == [p.fail_offset_s(s) for s in range(5)]
    assert all(0.0 <= o < 0.05 for o in offsets) and len(set(offsets)) == 5
    assert failover.FailoverParams(fail_jitter_ms=0.0).fail_offset_s(3) == 0.0
    fabric = build_fabric(FabricSpec())
    c = collisions.CollisionParams(start_jitter_ms=100.0)
    starts = collisions.start_offsets_s(c, fabric, 1)
    assert (
        starts
        == collisions.start_offsets_s(c, fabric, 1)
        != collisions.start_offsets_s(c, fabric, 2)
    )
    assert set(starts) == {h.name for h in fabric.hosts}
    assert all(0.0 <= o < 0.1 for o in starts.values())


def test_a_failing_seed_is_recorded_and_the_others_go_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def boom(x: int) -> int:
        raise TransportError(f"host process said nothing for {x} s")

    assert attempt("ok", lambda x: x + 1, 1) == (2, "")
    assert attempt("mrc seed 2", boom, 300) == (
        None,
        "TransportError: host process said nothing for 300 s",
    )
    assert "mrc seed 2: FAILED: TransportError" in capsys.readouterr().out


def _failover_seed(transport: str, seed: int, recovery: float, **kw: object) -> dict[str, object]:
    row: dict[str, object] = {c: "" for c in failover.SEEDS_HEADER}
    row.update(
        transport=transport,
        seed=seed,
        link_mbps=5.0,
        failed_plane=1,
        fail_offset_ms=seed,
        fail_command_ms=12.0,
        fail_sent_ms=3.0,
        fail_applied_ms=9.0,
        pre_goodput_mbps=6.85,
        post_goodput_mbps=4.56,
        threshold_mbps=3.4,
        recovery_ms=recovery + 3.0,
        recovery_after_sent_ms=recovery,
        recovery_after_applied_ms=recovery - 6.0,
        settled_after_sent_ms=recovery + 10.0,
        longest_stall_ms=recovery / 2,
        longest_delivery_gap_ms=recovery,
        messages_lost=0,
        messages_sent=700,
        load_1m=1.5,
    )
    row.update(kw)
    return row


def _write(path: pathlib.Path, header: Sequence[str], rows: Sequence[Mapping[str, object]]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(header))
        w.writeheader()
        w.writerows(rows)


def _failover_csvs(tmp_path: pathlib.Path) -> failover.FailoverParams:
    p = failover.FailoverParams(out=str(tmp_path / "plane_failure.csv"))
    seeds = [
        _failover_seed("mrc", 0, 20.0),
        _failover_seed("single_path", 0, 60.0),
        _failover_seed("mrc", 1, 30.0),
        _failover_seed("single_path", 1, 70.0),
        _failover_seed("mrc", 2, 40.0),
        dict(
            zip(
                failover.SEEDS_HEADER,
                failover.failed_row("single_path", 2, 5.0, "TransportError: no ready"),
                strict=True,
            )
        ),
    ]
    series = [
        dict(
            zip(
                failover.SERIES_HEADER,
                (
                    tr,
                    seed,
                    1,
                    t,
                    ev,
                    ev // 2,
                    ev % 2,
                    "good" if t < 10 or ev < 2 else "assumed_bad",
                    1.5,
                    6.0,
                    6.0 if t < 0 or t > 30 else 2.0,
                    100,
                ),
                strict=True,
            )
        )
        for tr in ("mrc", "single_path")
        for seed in (0, 1)
        for t in range(-200, 600, 5)
        for ev in range(4 if tr == "mrc" else 2)
    ]
    _write(pathlib.Path(p.out), failover.SERIES_HEADER, series)
    _write(p.seeds_out, failover.SEEDS_HEADER, seeds)
    return p


def test_failover_summary_is_over_the_seeds_that_have_the_figure(tmp_path: pathlib.Path) -> None:
    p = _failover_csvs(tmp_path)
    rows = failover.summarize_seeds(read_csv(p.seeds_out))
    got = {(r[0], r[1]): dict(zip(failover.SUMMARY_HEADER, r, strict=True)) for r in rows}
    mrc = got[("mrc", "recovery_after_sent_ms")]
    assert (mrc["n"], mrc["mean"], mrc["sd"]) == (3, 30.0, pytest.approx(10.0))
    assert mrc["ci95_low"] == round(30.0 - 4.302652729911275 * 10.0 / math.sqrt(3), 4)
    single = got[("single_path", "recovery_after_sent_ms")]
    assert (single["n"], single["mean"]) == (2, 65.0)  # the failed seed is left out
    assert {f for _t, f in got} == set(failover.SUMMARY_FIGURES)
    assert "error" not in failover.SUMMARY_FIGURES and "seed" not in failover.SUMMARY_FIGURES


def test_failover_report_redraws_from_the_csvs_and_reports_the_failed_seed(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = _failover_csvs(tmp_path)
    assert failover.main(["--out", p.out, "--plot-only"]) == 1  # a seed failed
    out, err = capsys.readouterr()
    assert "30.0 ± 24.8 (95 % CI, n=3)  " in out and "seeds: 20.0 30.0 40.0" in out
    assert "seeds: 60.0 70.0 -" in out
    assert "a = mrc, b = single_path (means): 1 - a/b = 53.8 % (a lower), b/a - 1 = 116.7 %" in out
    assert "single_path seed 2: TransportError: no ready" in err
    assert p.png.stat().st_size > 10_000
    assert read_csv(p.summary_out)[0].keys() == set(failover.SUMMARY_HEADER)


def _collision_rows(
    transport: str, cc: str, seed: int, flows: Sequence[float], p99: float
) -> list[dict[str, object]]:
    fair, cap = 1.826, 14.6
    rows: list[dict[str, object]] = []
    for i, mbps in enumerate(flows):
        row: dict[str, object] = {c: "" for c in collisions.FLOW_HEADER}
        row.update(
            transport=transport,
            cc=cc,
            seed=seed,
            flow=f"h{i + 1}->h{(i + 2) % 4 + 1}",
            planes_used="0+1",
            throughput_mbps=mbps,
            fair_share_mbps=fair,
            fair_share_pct=100 * mbps / fair,
            mct_p50_ms=p99 / 2,
            mct_p99_ms=p99,
            load_1m=1.2,
        )
        rows.append(row)
    total = sum(flows)
    all_row = dict(rows[0], flow="all", throughput_mbps=total, fair_share_mbps=cap)
    all_row.update(fair_share_pct=100 * total / cap, mct_p50_ms=p99 / 2, mct_p99_ms=p99)
    return [*rows, all_row]


def test_collision_figures_per_seed_and_their_summary() -> None:
    rows = [
        *_collision_rows("mrc", "nscc", 0, [1.8, 1.8, 1.8, 1.8], 2000.0),
        *_collision_rows("single_path", "nscc", 0, [1.8, 0.9, 0.9, 1.8], 4000.0),
        *_collision_rows("mrc", "nscc", 1, [1.6, 1.7, 1.8, 1.9], 3000.0),
        dict(zip(collisions.FLOW_HEADER, collisions.failed_row("single_path", "nscc", 1, "E"))),
    ]
    strs = [{k: str(v) for k, v in r.items()} for r in rows]
    figs = {(f["transport"], f["seed"]): f for f in collisions.seed_figures(strs)}
    mrc0, single0 = figs[("mrc", "0")], figs[("single_path", "0")]
    assert mrc0["capacity_pct"] == pytest.approx(100 * 7.2 / 14.6)
    assert mrc0["wire_pct"] == pytest.approx(100 * 7.2 / (14.6 / PAYLOAD_EFFICIENCY))
    assert mrc0["jain_fairness"] == pytest.approx(1.0)
    assert single0["jain_fairness"] == pytest.approx(5.4**2 / (4 * (2 * 1.8**2 + 2 * 0.9**2)))
    assert single0["slowest_flow_mbps"] == 0.9
    failed = figs[("single_path", "1")]
    assert failed["error"] == "E" and math.isnan(float(str(failed["capacity_pct"])))
    summary = {
        (r[0], r[2]): dict(zip(collisions.SUMMARY_HEADER, r, strict=True))
        for r in collisions.summarize(strs)
    }
    p99 = summary[("mrc", "mct_p99_ms")]
    assert (p99["n"], p99["mean"], p99["sd"]) == (2, 2500.0, pytest.approx(math.sqrt(2) * 500))
    assert summary[("single_path", "mct_p99_ms")]["n"] == 1
    assert math.isnan(float(str(summary[("single_path", "mct_p99_ms")]["ci95_low"])))


def test_collisions_report_redraws_from_the_flows_csv(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "flow_collisions.csv"
    rows = [
        r
        for tr, flows, p99 in (("mrc", [1.7] * 8, 2000.0), ("single_path", [1.8, 0.9] * 4, 4000.0))
        for cc in ("nscc", "fixed")
        for seed in (0, 1, 2)
        for r in _collision_rows(tr, cc, seed, flows, p99)
    ]
    _write(out, collisions.FLOW_HEADER, rows)
    assert collisions.main(["--out", str(out), "--plot-only"]) == 0
    text = capsys.readouterr().out
    assert "capacity used (%)" in text and "(95 % CI, n=3)" in text
    # capacity: 13.6 vs 10.8 Mbit/s; p99: 2 s vs 4 s
    assert "a = mrc/fixed, b = single_path/fixed (means): a/b - 1 = 25.9 % (a higher)" in text
    assert "1 - a/b = 50.0 % (a lower), b/a - 1 = 100.0 % (b higher)" in text
    assert out.with_suffix(".png").stat().st_size > 10_000
    assert (tmp_path / "flow_collisions_summary.csv").exists()


def test_a_collision_run_written_before_seeds_reads_back(tmp_path: pathlib.Path) -> None:
    doc = {
        "transport": "mrc",
        "cc": "nscc",
        "trial": 1,
        "start": 1.0,
        "planes": {},
        "conn_ids": {},
        "load": 0.5,
        "errors": [],
        "fabric": {"planes": 2},
    }
    (tmp_path / collisions.TRIAL_FILE).write_text(json.dumps(doc))
    rec, spec = collisions.TrialRecord.read(tmp_path)
    assert (rec.seed, rec.failed, spec.planes) == (1, "", 2)
