"""``tf-run``: environment per rank, prefixed output, exit codes, clean-up on a rank's failure
and on Ctrl-C, refused bad input; the fabric plan from the topology (no fabric needed)."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from experiments.tf_run import LaunchError, exit_status, fabric_plan, local_plan
from topologies.model import FabricSpec, build_fabric

ROOT = pathlib.Path(__file__).resolve().parents[2]
TF_RUN = [sys.executable, "-m", "experiments.tf_run"]


def _run(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TF_RUN, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_every_rank_gets_its_environment_and_prefixed_output() -> None:
    code = "import os; e=os.environ; print(e['RANK'], e['LOCAL_RANK'], e['WORLD_SIZE'], e['MASTER_ADDR'], e['MASTER_PORT'])"
    res = _run("--local", "3", "--master-port", "29999", "--", sys.executable, "-c", code)
    assert res.returncode == 0, res.stderr
    for r in range(3):
        assert f"[rank {r} local] {r} {r} 3 127.0.0.1 29999" in res.stdout
        assert f"tf-run: rank {r} (local) exited with 0" in res.stdout


def test_a_failing_rank_ends_the_others_and_sets_the_exit_status(tmp_path: pathlib.Path) -> None:
    code = (
        "import os, time, pathlib; r = os.environ['RANK']\n"
        f"pathlib.Path('{tmp_path}', r).write_text(str(os.getpid()))\n"
        "if r == '1':\n    time.sleep(0.5); raise SystemExit(3)\n"
        "time.sleep(60)\n"
    )
    t0 = time.monotonic()
    res = _run("--local", "3", "--", sys.executable, "-c", code)
    assert res.returncode == 3, res.stdout + res.stderr
    assert time.monotonic() - t0 < 20
    assert "rank 1 exited with 3: stopping the other ranks" in res.stdout
    pids = [int((tmp_path / str(r)).read_text()) for r in range(3)]
    assert not any(_alive(p) for p in pids)


def test_ctrl_c_stops_every_rank(tmp_path: pathlib.Path) -> None:
    code = (
        "import os, time, pathlib\n"
        f"pathlib.Path('{tmp_path}', os.environ['RANK']).write_text(str(os.getpid()))\n"
        "time.sleep(60)\n"
    )
    p = subprocess.Popen(
        [*TF_RUN, "--local", "2", "--", sys.executable, "-c", code],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 20
    while len(list(tmp_path.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=20)
    assert p.returncode == 130, out
    pids = [int(f.read_text()) for f in tmp_path.iterdir()]
    assert len(pids) == 2 and not any(_alive(q) for q in pids)


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--local", "0", "--", "true"], "at least 1 rank"),
        (["--hosts", "h1,h2", "--results", "/nonexistent", "--", "true"], "make fabric-up"),
        (["--local", "2"], "no command"),
        (["--local", "2", "--", "/nonexistent/cmd"], "cannot start rank 0"),
    ],
)
def test_bad_input_is_refused_with_a_reason(args: list[str], reason: str) -> None:
    res = _run(*args)
    assert res.returncode == 2
    assert reason in res.stderr
    assert "Traceback" not in res.stderr


def test_fabric_plan_puts_one_rank_per_host_with_the_backend_settings() -> None:
    fabric = build_fabric(FabricSpec())
    topo = pathlib.Path("/r/topology.json")
    pids = {h.name: 100 + h.index for h in fabric.hosts}
    plan = fabric_plan(fabric, topo, ["h3", "h1"], pids, 29500, ["mnexec", "-a"])
    assert [s.where for s in plan] == ["h3", "h1"]
    assert plan[1].prefix == ("mnexec", "-a", str(pids["h1"]))
    h3 = fabric.host("h3").nics[0]
    for s in plan:
        assert s.env["MASTER_ADDR"] == h3.baseline_address
        assert s.env["WORLD_SIZE"] == "2" and s.env["LOCAL_RANK"] == "0"
        assert s.env["TAILFABRIC_TOPOLOGY"] == str(topo)
    assert plan[1].env["TAILFABRIC_HOST"] == "h1" and plan[1].env["RANK"] == "1"
    assert plan[1].env["GLOO_SOCKET_IFNAME"] == fabric.host("h1").nics[0].ifname
    with pytest.raises(LaunchError, match="twice"):
        fabric_plan(fabric, topo, ["h1", "h1"], pids, 1, [])
    with pytest.raises(LaunchError, match="h99"):
        fabric_plan(fabric, topo, ["h99"], pids, 1, [])


def test_exit_status_is_the_first_failure() -> None:
    assert exit_status({0: 0, 1: 0}) == 0
    assert exit_status({0: 0, 1: 3, 2: 1}) == 3
    assert exit_status({0: -9}) == 137
    assert [s.env["RANK"] for s in local_plan(2, 1)] == ["0", "1"]
