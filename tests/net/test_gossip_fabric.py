"""Factored gossip DiLoCo through the default fabric: real tf-switches, the controller, MRC over
the hosts' plane NICs, one DiLoCo agent per Mininet host.

``make exp-gossip --quick`` end to end (every method at both calibrated link rates, one seed,
and the failure scenario: the last worker's host cut off, then restored): the CSVs and the
plot are written, every run finishes, DiLoCo's workers end bit-identical (nothing lost in
reliable mode), DiLoCo stalls through the failure while GlobalM1 computes on, and nothing is
left behind. Then an agent killed mid-run: reported with its host and last round, the others
stop, the next job runs on a fresh agent. Skipped when a fabric is already running.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from experiments.diloco_jobs import AgentPool
from experiments.faults import TimedAction
from experiments.gossip_figures import Outputs, failure_figures
from experiments.outputs import read_rows
from host.train.diloco.config import DilocoConfig
from tests.netkit import (
    FABRIC_RUNNING,
    MININET_MARK,
    NET_MARKS,
    processes_left,
    run_quick_on_fabric,
)
from topologies.emulation.bringup import own_fabric
from topologies.model import FabricSpec

pytestmark = [*NET_MARKS, MININET_MARK, pytest.mark.usefixtures("no_fabric_running")]

QUICK_TIMEOUT_S = 600  # the quick run takes about 2 minutes; a busy machine is slower


def agents_left() -> list[str]:
    return processes_left("host.diloco_agent")


def test_the_quick_experiment_runs_every_method_and_the_failure_through_the_fabric(
    tmp_path: Path,
) -> None:
    done = run_quick_on_fabric("experiments.gossip", tmp_path, QUICK_TIMEOUT_S)
    assert "targets" in done.stdout and "failure scenario 'host'" in done.stdout
    where = Outputs(tmp_path / "gossip.csv")
    runs = read_rows(where.out)
    assert {(r["method"], r["comm_compute_ratio"]) for r in runs} == {
        (m, ratio)
        for m in ("dp", "diloco", "GlobalM1", "GlobalM1LocalM2")
        for ratio in ("0.89", "1.78")
    }
    assert {r["status"] for r in runs} == {"finished"} and {r["network"] for r in runs} == {
        "fabric"
    }
    for r in runs:
        assert 0 < float(r["compute_utilization"]) <= 1 and int(r["bytes_total"]) > 0
        if r["method"] in ("dp", "diloco"):
            assert float(r["consensus_rms_l2"]) == 0.0  # every worker holds the same bits
    rates = {float(r["link_mbps"]) for r in runs}
    assert len(rates) == 2  # two fabrics, one per ratio
    diloco, gossip = failure_figures(read_rows(where.failure))
    assert (diloco.method, gossip.method) == ("diloco", "GlobalM1")
    # DiLoCo waited through the outage (and the transport's recovery); gossip computed on
    assert diloco.longest_blocked_s >= diloco.outage_s
    assert gossip.utilization_during > diloco.utilization_during
    assert diloco.status == gossip.status == "finished"  # reliable: nothing lost
    assert diloco.final_consensus == 0.0
    assert where.png.stat().st_size > 20_000 and where.summary.exists()
    assert not FABRIC_RUNNING.exists() and agents_left() == []


def test_an_agent_killed_mid_run_is_reported_and_the_next_job_runs_on_a_fresh_one(
    tmp_path: Path,
) -> None:
    cfg = DilocoConfig(inner_steps=5, rounds=40, peer_timeout_s=30.0)
    short = DilocoConfig(inner_steps=2, rounds=2)
    with own_fabric(FabricSpec(link_mbps=5.0), str(tmp_path)) as up:
        with AgentPool(
            up.net.fabric,
            up.net.topology_path,
            up.net.host_pids(),
            tmp_path / "runs",
            log=lambda s: None,
        ) as pool:
            assert pool.run("warm", short).failure == ""  # the agents' first job: imports
            t0 = time.monotonic()
            kill = TimedAction(3.0, "kill h3", lambda: pool.kill("h3"))
            run = pool.run("killed", cfg, actions=[kill])
            assert run.failure.startswith("worker 2 (host h3) died in round")
            assert "its agent exited" in run.failure
            done = [r.round for r in run.records if r.rank == 2]
            assert run.ends[2].last_round == max(done, default=-1) and len(done) < cfg.rounds
            assert {run.ends[r].status for r in (0, 1, 3)} == {"stopped"}
            assert time.monotonic() - t0 < cfg.peer_timeout_s + 20  # not a hung job
            again = pool.run("again", short)
            assert again.failure == "" and len(again.records) == 4 * 2
    assert agents_left() == []
