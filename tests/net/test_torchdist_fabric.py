"""PyTorch through the default fabric: ``tf-run`` launches unmodified DDP training
(``examples/ddp_digits.py``) on the Mininet hosts, once on the ``tailfabric`` backend (MRC
over the hosts' plane NICs) on four hosts and once on gloo (TCP over the hosts' plane-0
addresses) on two.

Brings up 2 planes x (2 leaves + 2 spines) with 4 hosts at 20 Mbit/s, or skips when a fabric
is already running.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.fabric_job import FabricSession
from tests.netkit import NET_MARKS

pytestmark = [
    *NET_MARKS,
    pytest.mark.skipif(shutil.which("mnexec") is None, reason="Mininet's mnexec is not installed"),
]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def _no_fabric_running() -> None:
    if Path("/sys/class/net/p0l0-eth1").exists():
        pytest.skip("a fabric is already running on this machine (p0l0-eth1 exists)")


def _tf_run(results: Path, hosts: str, backend: str) -> tuple[int, list[dict[str, object]], str]:
    done = subprocess.run(
        [sys.executable, "-m", "experiments.tf_run", "--results", str(results), "--hosts", hosts]
        + ["--", sys.executable, "examples/ddp_digits.py", "--backend", backend, "--epochs", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    reports = []
    for line in done.stdout.splitlines():
        _, _, text = line.partition("] ")
        if text.startswith("{"):
            reports.append(json.loads(text))
    return done.returncode, reports, done.stdout[-3000:] + done.stderr[-2000:]


def test_ddp_trains_across_fabric_hosts_on_tailfabric_and_on_gloo(tmp_path: Path) -> None:
    with FabricSession(tmp_path, link_mbps=20, log=lambda s: None):
        code, reports, out = _tf_run(tmp_path, "h1,h2,h3,h4", "tailfabric")
        assert code == 0, out
        assert sorted(int(str(r["rank"])) for r in reports) == [0, 1, 2, 3], out
        accuracy = {r["accuracy"] for r in reports}
        assert len(accuracy) == 1, out  # every rank holds the same model
        assert float(str(accuracy.pop())) > 0.6, out
        code, reports, out = _tf_run(tmp_path, "h2,h3", "gloo")
        assert code == 0, out
        assert [r["backend"] for r in reports] == ["gloo", "gloo"], out
