"""A busy machine makes an experiment slower, never makes it fail: ``make demo --quick`` on the
default fabric while a CPU hog runs on every core.

Brings the default fabric up (skipped while another fabric runs), runs the quick demo (40
rounds, one seed, DBLP and fixed P with a 90 % burst and a plane failure) with one
busy-looping process per core beside it, and checks that it finishes with every policy's
rounds, summary and faults written.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.demo import NAMES, QUICK_POLICIES, QUICK_ROUNDS
from tests.netkit import NET_MARKS

pytestmark = [
    *NET_MARKS,
    pytest.mark.skipif(shutil.which("mnexec") is None, reason="Mininet's mnexec is not installed"),
]

HANG_GUARD_S = 1500.0
"""Only there so that a hang fails the test instead of CI; a loaded quick demo takes minutes."""


def test_the_quick_demo_completes_with_a_cpu_hog_on_every_core(tmp_path: Path) -> None:
    if Path("/sys/class/net/p0l0-eth1").exists():
        pytest.skip("a fabric is already running on this machine (p0l0-eth1 exists)")
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 2)
    ]
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "experiments.demo",
                "--quick",
                "--network",
                "fabric",
                "--results",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_S,
        )
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    out = tmp_path / "demo"
    with (out / NAMES.latency).open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(QUICK_POLICIES) * QUICK_ROUNDS
    with (out / NAMES.summary).open() as fh:
        assert {r["policy"] for r in csv.DictReader(fh)} == {p.value for p in QUICK_POLICIES}
    with (out / NAMES.faults).open() as fh:
        kinds = {r["kind"] for r in csv.DictReader(fh)}
    assert kinds == {"burst", "clear_burst", "fail_plane"}
    assert "burst round" in done.stdout and not (tmp_path / "fabric" / "state.json").exists()
