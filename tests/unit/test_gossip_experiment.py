"""The factored gossip experiment without root: the job's JSON form, plans refused before
anything starts, calibration, one run's figures, faults on the driver's clock, the per-host
agent's protocol (on the emulator), the agent pool's handling of a dead or silent agent (with
stand-in agents) and a small experiment end to end on the emulator (CSVs, table, plot)."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import pathlib
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import pytest

from experiments import gossip, gossip_figures
from experiments.diloco_jobs import AgentPool, FailurePlan, JobRun, JobsError, WorkerEnd
from experiments.faults import FaultError, TimedAction, TimedFaults
from experiments.gossip import Settings, check_plan, job_config, probe_from, rate_for
from experiments.gossip_figures import (
    FAILURE_COLUMNS,
    METHODS,
    ROUND_COLUMNS,
    RUN_COLUMNS,
    Key,
    failure_figures,
    run_row,
)
from experiments.hosts import AgentProcess, AgentsSilent, drive_agents
from experiments.outputs import read_rows
from host.diloco_agent import Agent, AgentError, RunCommand, read_job_records
from host.train.cluster import EmuCluster
from host.train.diloco.config import (
    Algorithm,
    DilocoConfig,
    config_from_json,
    config_to_json,
    variant,
)
from host.train.diloco.errors import ConfigError
from host.train.diloco.observe import read_observations
from host.train.diloco.worker import RoundRecord
from host.train_agent import Console
from topologies.model import FabricSpec, build_fabric

FAKE_AGENT = pathlib.Path(__file__).with_name("fake_diloco_agent.py")
FABRIC = build_fabric(FabricSpec())
HOSTS = ("h1", "h2", "h3")


def rec(rank: int, round_: int, **kw: Any) -> RoundRecord:
    base: dict[str, Any] = {
        "algorithm": "diloco",
        "rank": rank,
        "host": rank,
        "round": round_,
        "inner_steps": 20,
        "train_loss": 2.0,
        "val_loss": 2.0,
        "compute_s": 1.0,
        "blocked_s": 1.0,
        "mix1_wait_s": 0.0,
        "wall_s": 2.0,
        "utilization": 0.5,
        "bytes_sent": 1000,
        "bytes_received": 1000,
        "delivered_fraction": 1.0,
        "mix1_missing": 0,
        "mix1_late": 0,
        "mix2_missing": 0,
        "start_at_s": 1.0 + 2.0 * round_,
        "inner_start_at_s": 1.0 + 2.0 * round_,
        "inner_end_at_s": 2.0 + 2.0 * round_,
        "mix1_first_arrival_at_s": math.nan,
        "mix1_last_arrival_at_s": math.nan,
    }
    return RoundRecord(**{**base, **kw})


def job_run(records: list[RoundRecord], cfg: DilocoConfig, link_mbps: float = 1.0) -> JobRun:
    ends = {r: WorkerEnd(r, f"h{r + 1}", "finished", cfg.rounds - 1, "") for r in range(2)}
    return JobRun("j", cfg, "emu", link_mbps, tuple(records), ends)


# -- the job's JSON form ------------------------------------------------------------------------


@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_s_job_reads_back_equal_from_its_json(method: str) -> None:
    cfg = job_config(Settings(), method, seed=3, mix1_timeout_s=0.7)
    assert config_from_json(config_to_json(cfg)) == cfg


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"gosip": {}}', "unknown setting 'gosip'; did you mean 'gossip'?"),
        ('{"gossip": {"mix1_graph": "rign"}}', "gossip.mix1_graph: 'rign' is not one of ring"),
        ('{"workers": "4"}', "workers: expected int, got '4'"),
        ('{"inner": {"lr": true}}', "inner.lr: expected float, got True"),
        ('{"faults": [{"rank": 0, "round": 0, "kind": "kil"}]}', "did you mean 'kill'"),
        ('{"reduce": {"phase": {"p_low": 2}}}', "reduce.phase: need 0 <= p_low < 1"),
        ('{"algorithm": "gossip", "workers": 1}', "gossip needs at least 2 workers"),
        ("[1]", "expected an object"),
        ("{", "the job is not JSON"),
    ],
)
def test_a_bad_job_file_is_refused_with_the_setting_named(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("?", r"\?")):
        config_from_json(text)


# -- plans --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "network", "message"),
    [
        (
            Settings(workers=2, failure="outage"),
            "emu",
            "mix2_graph 'ring' with 2 workers: a ring needs at least 3",
        ),
        (Settings(failure="host"), "emu", "failure scenario 'host' does not exist on the emu"),
        (Settings(workers=5), "fabric", "5 workers need 5 hosts; the default fabric has 4"),
        (Settings(inner_steps=0, failure="none"), "emu", "inner_steps must be >= 1"),
    ],
)
def test_invalid_plans_are_refused_before_anything_starts(
    settings: Settings, network: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        check_plan(settings, network)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"methods": ("dp", "LocalM1")}, "unknown methods"),
        ({"seeds": 0}, "seeds must be >= 1"),
        ({"ratios": (0.89, -1.0)}, "ratios must be positive"),
        ({"warmup_rounds": 3, "dp_rounds": 3}, "warmup_rounds must leave rounds to measure"),
    ],
)
def test_invalid_settings_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings(**kwargs)


def test_the_command_line_refuses_a_bad_plan_and_starts_nothing(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = gossip.main(["--network", "emu", "--workers", "2", "--results", str(tmp_path)])
    assert rc == 2
    assert "mix2_graph 'ring' with 2 workers" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


# -- calibration and one run's figures ----------------------------------------------------------


def test_a_probe_measures_diloco_s_ratio_and_sets_the_rate_of_each_ratio() -> None:
    cfg = gossip.probe_config(Settings())
    records = [
        rec(r, k, compute_s=1.0 if k else 9.0, blocked_s=2.0 if k else 0.1)
        for r in (0, 1)
        for k in (0, 1, 2)
    ]
    probe = probe_from(job_run(records, cfg, link_mbps=1.0), warmup_rounds=1)
    assert (probe.compute_s, probe.comm_s, probe.ratio) == (1.0, 2.0, 2.0)
    # a 2 s all-reduce at 1 Mbit/s takes 0.89 s of the 1 s compute at 2.247 Mbit/s
    assert rate_for(probe, 0.89) == pytest.approx(2.0 / 0.89)
    assert rate_for(probe, 1.78) == pytest.approx(rate_for(probe, 0.89) / 2)
    bytes_only = gossip.bytes_only_rate(cfg, 1.0, 0.89, "fabric")
    assert bytes_only == pytest.approx(2 * gossip.bytes_only_rate(cfg, 1.0, 1.78, "fabric"))


def test_a_probe_without_a_measured_round_fails_clearly() -> None:
    with pytest.raises(JobsError, match="no round past the warm-up"):
        probe_from(job_run([rec(0, 0)], gossip.probe_config(Settings())), warmup_rounds=1)


def test_the_failure_lands_where_diloco_had_done_so_many_rounds() -> None:
    cfg = job_config(Settings(), "diloco", 0)
    records = [rec(r, k) for r in (0, 1) for k in range(4)]  # rounds start at 1, 3, 5, 7 s
    assert gossip.failure_time_s(job_run(records, cfg), 2.5) == pytest.approx(5.0 + 0.5 * 2.0)


def test_rates_are_probed_until_diloco_s_ratio_is_close_and_each_rate_sweeps_once() -> None:
    s = Settings(
        task="digits-mlp",
        workers=3,
        seeds=1,
        methods=("diloco", "GlobalM1"),
        failure="none",
        start_mbps=1.0,
    )
    opened: list[float] = []

    class Jobs:
        network = "emu"

        def __init__(self, rate: float) -> None:
            self.link_mbps = rate

        def run(self, name: str, cfg: DilocoConfig, failure: FailurePlan | None = None) -> JobRun:
            comm = 0.9 * 4.0 / self.link_mbps  # 0.9 s per round at 4 Mbit/s
            records = [rec(r, k, compute_s=1.0, blocked_s=comm) for r in range(3) for k in range(3)]
            return JobRun(name, cfg, "emu", self.link_mbps, tuple(records), {}, {})

    @contextlib.contextmanager
    def open_jobs(rate: float, label: str) -> Iterator[Jobs]:
        opened.append(rate)
        yield Jobs(rate)

    out = gossip.run_experiment(s, "emu", open_jobs, log=lambda line: None)
    # 1 Mbit/s measures 3.6, so 4.045 Mbit/s gives 0.89; the next ratio starts right
    assert opened == pytest.approx([1.0, 0.9 * 4.0 / 0.89, 0.9 * 4.0 / 1.78])
    assert [len(c.probes) for c in out.rates.values()] == [2, 1]
    assert {k.ratio for k in out.runs} == {0.89, 1.78} and len(out.runs) == 4


def test_a_run_s_row_leaves_out_the_warm_up_and_takes_the_slowest_worker() -> None:
    cfg = job_config(Settings(), "diloco", 0)
    records = [rec(0, 0, compute_s=0.1, wall_s=5.0)]  # a slow first round, left out
    records += [rec(0, k, compute_s=1.0, wall_s=2.0) for k in (1, 2)]
    records += [rec(1, k, compute_s=1.0, wall_s=4.0, bytes_sent=3000) for k in (0, 1, 2)]
    row = run_row(job_run(records, cfg), Key("diloco", 0.89, 0), warmup_rounds=1)
    assert tuple(row) == RUN_COLUMNS
    assert row["compute_utilization"] == pytest.approx(4.0 / 12.0, abs=1e-4)
    assert row["wall_clock_s"] == 12.0  # worker 1: 3 × 4 s
    assert row["bytes_per_worker_round"] == 2000 and row["bytes_total"] == 12000
    assert row["rounds"] == 3 and row["status"] == "finished"
    assert row["tokens"] == 3 * 20 * 16 * 4 * 64


def test_failure_figures_tell_a_stall_from_computing_through_the_outage() -> None:
    def rows(method: str, inner: list[tuple[float, float]], blocked: list[float]) -> list[Any]:
        out = []
        for rank in (0, 1):
            for k, ((a, b), w) in enumerate(zip(inner, blocked, strict=True)):
                out.append(
                    {
                        "method": method,
                        "rank": rank,
                        "round": k,
                        "inner_start_s": a,
                        "inner_end_s": b,
                        "end_s": b + w,
                        "blocked_s": w,
                        "bytes_sent": 10,
                        "bytes_received": 10,
                        "mix1_missing": 0,
                        "consensus_rms_l2": 0.0,
                        "fail_at_s": 10.0,
                        "restore_at_s": 13.0,
                        "status": "finished",
                    }
                )
        return out

    stalled = rows("diloco", [(8.0, 9.0), (9.5, 10.5), (15.0, 16.0)], [0.5, 4.0, 0.5])
    going = rows("GlobalM1", [(8.0, 9.0), (9.1, 10.1), (10.2, 11.2), (11.3, 12.3)], [0.1] * 4)
    d, g = failure_figures(stalled + going)
    assert (d.method, g.method) == ("diloco", "GlobalM1")
    assert d.outage_s == 3.0
    assert d.utilization_during == pytest.approx(0.5 / 3.0)
    assert g.utilization_during == pytest.approx((0.1 + 1.0 + 1.0) / 3.0)
    assert d.longest_blocked_s == 4.0 and d.resumed_after_restore_s == pytest.approx(1.5)
    assert math.isnan(g.resumed_after_restore_s)
    assert d.rounds_during == 0 and g.rounds_during == 3


# -- faults on the driver's clock -----------------------------------------------------------------


def test_timed_actions_run_at_their_times_and_a_restore_runs_even_when_the_run_ends_first() -> None:
    done: list[tuple[str, float]] = []
    origin = time.monotonic()

    def note(what: str) -> TimedAction:
        return TimedAction(
            0.1 if what == "fail" else 30.0,
            what,
            lambda: done.append((what, time.monotonic() - origin)),
            always=what == "restore",
        )

    with TimedFaults([note("restore"), note("fail")], origin) as faults:
        while not done:
            faults.check()
            time.sleep(0.01)
    assert [w for w, _ in done] == ["fail", "restore"]
    assert done[0][1] >= 0.1 and done[1][1] < 30.0
    assert [a.label for a in faults.applied] == ["fail", "restore"]
    assert faults.applied[0].requested_s >= faults.applied[0].at_s


def test_a_failing_action_is_raised_in_the_driver_s_loop_and_stops_the_others() -> None:
    ran: list[str] = []

    def boom() -> None:
        raise RuntimeError("controller gone")

    actions = [
        TimedAction(0.0, "fail", boom),
        TimedAction(0.05, "more", lambda: ran.append("more")),
        TimedAction(0.06, "restore", lambda: ran.append("restore"), always=True),
    ]
    with TimedFaults(actions, time.monotonic()) as faults:
        time.sleep(0.3)
        with pytest.raises(FaultError, match="controller gone"):
            faults.check()
    assert ran == ["restore"]


# -- the per-host agent ------------------------------------------------------------------------


def digits_gossip(rounds: int = 2) -> DilocoConfig:
    return DilocoConfig(
        algorithm=Algorithm.GOSSIP,
        task="digits-mlp",
        workers=3,
        inner_steps=3,
        rounds=rounds,
        gossip=variant("GlobalM1LocalM2"),
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"run": "../x"}, "run: a name of letters"),
        ({"rank": 3}, r"rank must be in 0\.\.2"),
        ({"rank": 1}, "rank 1 runs on h2, this is h1"),
        ({"hosts": ["h1", "h2"]}, "3 workers, 2 hosts named"),
        ({"hosts": ["h1", "h2", "h9"]}, "unknown host 'h9'"),
        ({"origin": "now"}, "origin must be a time.monotonic"),
        ({"job": {"workers": "3"}}, "workers: expected int"),
    ],
)
def test_a_run_command_is_refused_with_the_reason(change: dict[str, Any], message: str) -> None:
    msg = {**RunCommand("j1", digits_gossip(), 0, HOSTS, 1.0).to_message(), **change}
    with pytest.raises(AgentError, match=message):
        RunCommand.from_message(msg, FABRIC, "h1")


def test_agents_run_a_job_from_json_lines_and_write_records_and_observations(
    tmp_path: pathlib.Path,
) -> None:
    cfg = digits_gossip()
    out: dict[int, list[dict[str, Any]]] = {}
    with EmuCluster() as cl:
        origin = time.monotonic()

        def agent(rank: int) -> None:
            buf = io.StringIO()
            endpoint = cl.endpoints[rank]
            a = Agent(
                cl.fabric,
                HOSTS[rank],
                tmp_path,
                Console(buf),
                lambda: contextlib.nullcontext(endpoint),
            )
            cmd = json.dumps(RunCommand("j1", cfg, rank, HOSTS, origin).to_message())
            a.serve([cmd, "not json", '{"cmd": "dance"}', '{"cmd": "quit"}', cmd])
            out[rank] = [json.loads(line) for line in buf.getvalue().splitlines()]

        threads = [threading.Thread(target=agent, args=(r,)) for r in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    for rank, events in out.items():
        kinds = [e["event"] for e in events]
        assert kinds == ["started", "round", "round", "finished", "refused", "refused"]
        assert events[-1]["message"] == "unknown command 'dance'; valid: run, quit"
        assert events[3]["status"] == "finished" and events[3]["last_round"] == 1
        records, outcome = read_job_records(tmp_path / "j1" / f"{HOSTS[rank]}.jsonl")
        assert [r.round for r in records] == [0, 1] and outcome["status"] == "finished"
        assert all(r.mix1_missing == 0 and r.bytes_received > 0 for r in records)
    obs = read_observations(tmp_path / "j1" / "obs")
    assert sorted(obs) == [0, 1] and all(sorted(v) == [0, 1, 2] for v in obs.values())


# -- the agent pool, with stand-in agents -------------------------------------------------------


def fake_starter(tmp_path: pathlib.Path, **extra: list[str]) -> Any:
    started: list[AgentProcess] = []
    template = tmp_path / "record.json"
    template.write_text(json.dumps(asdict(rec(0, 0)), allow_nan=True))

    def start(name: str) -> AgentProcess:
        args = [sys.executable, str(FAKE_AGENT), name, str(tmp_path), str(template)]
        args += extra.pop(name, [])
        proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        agent = AgentProcess(name, proc)
        started.append(agent)
        return agent

    start.started = started  # type: ignore[attr-defined]
    return start


@contextlib.contextmanager
def pool(tmp_path: pathlib.Path, **extra: list[str]) -> Iterator[tuple[AgentPool, Any]]:
    start = fake_starter(tmp_path, **extra)
    with AgentPool(
        FABRIC, "unused.json", {}, tmp_path, log=lambda s: None, start=start, stall_timeout_s=2.0
    ) as p:
        yield p, start
    assert all(a.proc.poll() is not None for a in start.started)  # nothing left behind


def test_a_dead_agent_is_reported_with_its_host_and_last_round_and_replaced(
    tmp_path: pathlib.Path,
) -> None:
    cfg = DilocoConfig(task="digits-mlp", workers=4, rounds=5)
    with pool(tmp_path, h3=["--die-at-round", "3"]) as (p, start):
        run = p.run("first", cfg)
        assert run.failure.startswith("worker 2 (host h3) died in round 3 (last completed round 2)")
        assert "its agent exited (status 3)" in run.failure
        assert {e.status for r, e in run.ends.items() if r != 2} == {"finished"}
        assert sorted({(r.rank, r.round) for r in run.records if r.rank == 2}) == [
            (2, 0), (2, 1), (2, 2),
        ]  # fmt: skip
        again = p.run("second", cfg)
        assert again.failure == "" and len(again.records) == 4 * 5
        assert len(start.started) == 5  # four, then h3 once more


def test_a_silent_job_fails_after_the_stall_timeout(tmp_path: pathlib.Path) -> None:
    cfg = DilocoConfig(task="digits-mlp", workers=2, rounds=2)
    with (
        pool(tmp_path, h2=["--silent"]) as (p, _start),
        pytest.raises(JobsError, match="no agent said anything for 2 s"),
    ):
        p.run("hung", cfg)


def test_failures_need_the_controller(tmp_path: pathlib.Path) -> None:
    with (
        pool(tmp_path) as (p, _start),
        pytest.raises(JobsError, match="need the fabric's controller"),
    ):
        p.run("f", DilocoConfig(task="digits-mlp", workers=2, rounds=2), FailurePlan("host", 0, 1))


def test_drive_agents_gives_up_on_silence_only() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            'import time; print(\'{"event": "x"}\', flush=True); time.sleep(30)',
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    agent = AgentProcess("h1", proc)
    seen: list[dict[str, Any]] = []
    try:
        with pytest.raises(AgentsSilent):
            drive_agents(
                [agent],
                lambda a, ev: seen.append(ev),
                lambda: False,
                stall_timeout_s=0.5,
                poll_s=0.1,
            )
    finally:
        agent.stop()
    assert seen == [{"event": "x"}]


# -- a small experiment end to end on the emulator ------------------------------------------------


def test_a_small_experiment_writes_its_csvs_table_and_plot(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--network", "emu", "--task", "digits-mlp", "--workers", "3", "--inner-steps", "3"]
    argv += ["--rounds", "3", "--seeds", "2", "--ratios", "0.89", "--failure", "outage"]
    argv += ["--methods", "dp,diloco,GlobalM1,GlobalM1LocalM2", "--results", str(tmp_path)]
    assert gossip.main(argv) == 0
    printed = capsys.readouterr().out
    assert "compute utilization" in printed and "GlobalM1 100%, DiLoCo 53%" in printed
    assert "failure scenario 'outage'" in printed and "targets" in printed
    where = gossip_figures.Outputs(tmp_path / "gossip.csv")
    for path, columns in (
        (where.out, RUN_COLUMNS),
        (where.rounds, ROUND_COLUMNS),
        (where.failure, FAILURE_COLUMNS),
    ):
        with path.open() as f:
            assert tuple(next(csv.reader(f))) == columns
    runs = read_rows(where.out)
    assert len(runs) == 4 * 2 and {r["status"] for r in runs} == {"finished"}
    diloco = [r for r in runs if r["method"] == "diloco"]
    assert {float(r["consensus_rms_l2"]) for r in diloco} == {0.0}
    failed = read_rows(where.failure)
    assert {r["method"] for r in failed} == {"diloco", "GlobalM1"}
    summary = read_rows(where.summary)
    assert {r["figure"] for r in summary} >= {"compute_utilization", "loss_gap_to_diloco_pct"}
    assert where.png.stat().st_size > 10_000
    assert gossip.main(["--plot-only", "--results", str(tmp_path)]) == 0
