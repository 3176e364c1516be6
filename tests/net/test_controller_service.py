"""One controller service per fabric (issue 19): ``tf-topo up --detach`` (``make fabric-up``)
leaves its controller running as the fabric's ``tf-ctl`` service; two ``tf-ctl telemetry watch``
clients both see every burst of an incast sent from another client, within 1 s of its last
datagram; ``results/telemetry.csv`` gets them; so do the bursts of an incast the hosts send
with no tf-ctl involved; a standalone ``tf-ctl --direct`` says that it
takes the switches over, and the service takes them back after it; ``tf-topo down`` stops the
service. Root, Mininet's ``mnexec``; the default fabric (8 switches, 4 hosts), 20-35 s.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from controller.client import find_server, send_command
from controller.incast import plan_incast, run_incast
from tests.netkit import NET_MARKS
from topologies.emulation import cleanup
from topologies.model import Fabric

pytestmark = [
    *NET_MARKS,
    pytest.mark.skipif(shutil.which("mnexec") is None, reason="Mininet's mnexec is not installed"),
]

WATCH_S = 20.0
BURST_DEADLINE_S = 1.0  # the target: bursts show in a watch within 1 s


@pytest.fixture(autouse=True)
def _no_fabric_running() -> None:
    if Path("/sys/class/net/p0l0-eth1").exists():
        pytest.skip("a fabric is already running on this machine (p0l0-eth1 exists)")


def _tf(module: str, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=timeout
    )


@dataclass
class Watch:
    """A ``tf-ctl telemetry watch --json`` process; each record with the time it arrived."""

    proc: subprocess.Popen[str]
    records: list[tuple[float, dict[str, object]]] = field(default_factory=list)
    other: list[str] = field(default_factory=list)

    def read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            now = time.monotonic()
            try:
                self.records.append((now, json.loads(line)))
            except ValueError:
                self.other.append(line)


@pytest.fixture
def fabric(tmp_path: Path) -> Iterator[Path]:
    up = _tf("topologies.emulation.cli", "up", "--detach", "--results", str(tmp_path))
    assert up.returncode == 0, up.stdout + up.stderr
    state = json.loads((tmp_path / "fabric" / "state.json").read_text())
    try:
        assert "controller service: tf-ctl commands go to 127.0.0.1:" in up.stdout
        yield tmp_path
    finally:
        down = _tf("topologies.emulation.cli", "down", "--results", str(tmp_path))
        assert down.returncode == 0 and "fabric stopped" in down.stdout, down.stderr
        assert not cleanup.process_alive(state["runner_pid"])


def _key(r: dict[str, object]) -> tuple[object, ...]:
    return (r["switch"], r["port"], r["start_us"], r["end_us"])


def test_every_watch_sees_every_burst_of_an_incast_sent_elsewhere(fabric: Path) -> None:
    results = str(fabric)
    info = find_server(results)
    state = json.loads((fabric / "fabric" / "state.json").read_text())
    assert info is not None and info.pid == state["runner_pid"] and info.host == "127.0.0.1"
    watches = [
        Watch(
            subprocess.Popen(
                [sys.executable, "-m", "controller.cli", "--results", results]
                + ["telemetry", "watch", "--for", str(WATCH_S), "--json"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
        for _ in range(2)
    ]
    readers = [threading.Thread(target=w.read, daemon=True) for w in watches]
    for t in readers:
        t.start()
    try:
        deadline = time.monotonic() + 15
        while "2 watchers" not in send_command(["status"], results):
            assert time.monotonic() < deadline, "the watches never subscribed"
            time.sleep(0.1)
        # the incast comes from this process, through the service, as from another terminal
        t0 = time.monotonic()
        out = send_command(["incast", "h3", "--senders", "3", "--bytes", "200000"], results)
        recent = json.loads(
            send_command(["telemetry", "recent", "--last", "100", "--json"], results)
        )
        incast = [_key(r) for r in recent["rows"]]
        assert "3 flows from h1, h2, h4" in out and "0 send errors" in out, out
        assert incast, f"the incast made no burst: {out}"
        sent_ms = float(out.split(" bytes in ")[1].split(" ms")[0])
        deadline = time.monotonic() + 5
        while any(len(w.records) < len(incast) for w in watches):
            assert time.monotonic() < deadline, [len(w.records) for w in watches]
            time.sleep(0.05)
    finally:
        for w in watches:
            w.proc.terminate()
            w.proc.wait(timeout=10)
    for w in watches:
        assert sorted(_key(r) for _, r in w.records) == sorted(incast), w.other
        # t0 is before the request: a conservative start of the incast's sending
        late = max(t for t, _ in w.records) - (t0 + sent_ms / 1000.0)
        assert late < BURST_DEADLINE_S, f"a burst reached the watch {late:.2f} s after sending"
        print(f"{len(w.records)} bursts, the last {late * 1000:.0f} ms after the incast's sending")
    with open(fabric / "telemetry.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    in_csv = {(r["switch"], int(r["port"]), int(r["start_us"]), int(r["end_us"])) for r in rows}
    assert set(incast) <= in_csv


def test_bursts_of_traffic_no_tf_ctl_sent_reach_the_csv_and_a_watch(fabric: Path) -> None:
    """Telemetry runs without any tf-ctl command: hosts send an incast on their own."""
    results = str(fabric)
    state = json.loads((fabric / "fabric" / "state.json").read_text())
    pids = {h: int(v["pid"]) for h, v in state["hosts"].items()}
    watch = Watch(
        subprocess.Popen(
            [sys.executable, "-m", "controller.cli", "--results", results]
            + ["telemetry", "watch", "--for", str(WATCH_S), "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    )
    threading.Thread(target=watch.read, daemon=True).start()
    try:
        deadline = time.monotonic() + 15
        while "1 watchers" not in send_command(["status"], results):
            assert time.monotonic() < deadline, "the watch never subscribed"
            time.sleep(0.1)
        plan = plan_incast(Fabric.load(state["topology"]), "h1", 3, 200_000, plane=1)
        t0 = time.monotonic()
        sent = run_incast(plan, pids)
        done = t0 + sent.duration_s
        deadline = time.monotonic() + 5
        while not watch.records:
            assert time.monotonic() < deadline, "no burst reached the watch"
            time.sleep(0.05)
        time.sleep(BURST_DEADLINE_S)  # every burst of it by now
    finally:
        watch.proc.terminate()
        watch.proc.wait(timeout=10)
    assert all(r["switch"].startswith("p1") for _, r in watch.records)  # type: ignore[union-attr]
    late = max(t for t, _ in watch.records) - done
    assert late < BURST_DEADLINE_S, f"a burst reached the watch {late:.2f} s after sending"
    with open(fabric / "telemetry.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    in_csv = {(r["switch"], int(r["port"]), int(r["start_us"]), int(r["end_us"])) for r in rows}
    assert {_key(r) for _, r in watch.records} <= in_csv
    print(f"{len(watch.records)} bursts of host traffic, the last {late * 1000:.0f} ms after it")


def test_a_standalone_tf_ctl_says_it_takes_over_and_the_service_takes_back(
    fabric: Path,
) -> None:
    results = str(fabric)
    direct = _tf("controller.cli", "--results", results, "--direct", "counters", timeout=30)
    assert direct.returncode == 0, direct.stderr
    assert "as their primary controller until this command ends" in direct.stderr
    deadline = time.monotonic() + 10
    while True:  # the service is primary of every switch again, and still answers
        doc = json.loads(send_command(["status", "--json"], results))
        if all(row["primary"] for row in doc["rows"]):
            break
        assert time.monotonic() < deadline, doc
        time.sleep(0.1)
    again = _tf("controller.cli", "--results", results, "fail", "plane", "1")
    assert again.returncode == 0 and again.stderr == "", again.stderr
    assert "failures: plane 1" in send_command(["status"], results)
