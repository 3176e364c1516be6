"""Decoupled DiLoCo and elastic data parallel through the default fabric under chaos: real
tf-switches, the controller, MRC over the hosts' plane NICs, one agent process per learner,
worker, syncer and coordinator.

``make exp-decoupled --quick`` end to end: a seeded schedule SIGKILLs learner and worker
processes (restarted from their checkpoint files), SIGSTOPs and slows them, and fails spines
and planes through the controller; both runs finish, the CSVs and the plot are written, a
killed learner came back as a new incarnation that caught up from the syncer, and nothing is
left behind: no agent process, the fabric down. Skipped while another fabric runs on this
machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.decoupled_figures import Outputs
from experiments.outputs import read_rows
from host.train.decoupled.records import MemberEnd, read_records
from tests.netkit import (
    FABRIC_RUNNING,
    MININET_MARK,
    NET_MARKS,
    processes_left,
    run_quick_on_fabric,
)

pytestmark = [*NET_MARKS, MININET_MARK, pytest.mark.usefixtures("no_fabric_running")]

QUICK_TIMEOUT_S = 600  # the quick run takes about 1.5 minutes; a busy machine is slower


def agents_left() -> list[str]:
    return processes_left("host.decoupled_agent")


def test_the_quick_chaos_run_finishes_through_the_fabric_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    before = agents_left()
    done = run_quick_on_fabric("experiments.decoupled", tmp_path, QUICK_TIMEOUT_S)
    assert "fabric up" in done.stdout and "fabric down" in done.stdout
    assert "[met] every run ended with every process stopped: 2 of 2" in done.stdout
    where = Outputs(tmp_path / "decoupled.csv")
    rows = {r["method"]: r for r in read_rows(where.out)}
    assert set(rows) == {"elastic_dp", "decoupled"}
    for r in rows.values():
        assert r["network"] == "fabric" and r["status"] == "finished"
        assert 0.0 < float(r["goodput"]) < 1.0 and 0.0 < float(r["uptime"]) <= 1.0
        assert int(r["interruptions"]) >= 2 and int(r["kills"]) >= 1
    dd = rows["decoupled"]
    assert int(dd["restarts"]) >= 1 and int(dd["merges"]) > 0 and float(dd["final_loss_nats"]) < 2.3
    assert read_rows(where.curve) and where.summary.exists() and where.png.stat().st_size > 10_000
    # the learner that was killed came back, restored its checkpoint and caught up
    run_dir = next((tmp_path / "decoupled_runs").glob("decoupled-m2-*"))
    ends = read_records(*run_dir.glob("learner-*.jsonl")).of(MemberEnd)
    restarted = [e for e in ends if e.incarnation > 0]
    assert restarted and all(e.counts.get("restarts") == 1 for e in restarted)
    assert any(e.counts.get("catch_up_fragments", 0) > 0 for e in restarted)
    # nothing left behind
    assert agents_left() == before
    assert not FABRIC_RUNNING.exists()
    assert not (tmp_path / "fabric" / "state.json").exists()
