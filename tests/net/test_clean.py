"""``make clean`` and ``tf-topo clean --all`` remove the project's own leftovers and nothing else.

Files in ``/tmp`` named like those Mininet's own clean-up deletes survive, and ``mn`` is never
called; another Mininet network (plain ``mn`` naming: ``h1-eth0`` wired to ``s<N>-eth1``)
survives; a crashed fabric whose state file is gone is removed all the same.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.net.test_fabric_mininet import assert_nothing_left
from tests.netkit import NET_MARKS
from topologies.emulation import cleanup

pytestmark = [
    *NET_MARKS,
    pytest.mark.skipif(shutil.which("mnexec") is None, reason="Mininet's mnexec is not installed"),
]

REPO = Path(__file__).resolve().parents[2]
MININET_SHELL = ["bash", "--norc", "--noediting", "-is"]  # + mininet:<node>, as Mininet starts it


@pytest.fixture(autouse=True)
def _no_fabric_running() -> None:
    # `clean --all` removes every fabric on the machine: never next to a live one
    ports = [n for n in os.listdir("/sys/class/net") if cleanup.SWITCH_PORT_RE.match(n)]
    if ports or cleanup.stray_switch_processes():
        pytest.skip("a fabric is running on this machine (switch ports or switch processes)")


@pytest.fixture
def canaries() -> Iterator[list[Path]]:
    """Files that are not the project's, named like what Mininet's clean-up deletes in ``/tmp``."""
    tag = secrets.token_hex(4)
    paths = [
        Path(f"/tmp/tf-clean-canary-{tag}.log"),
        Path(f"/tmp/tf-clean-canary-{tag}.out"),
        Path(f"/tmp/vconn-tf-clean-canary-{tag}"),
        Path(f"/tmp/vlogs-tf-clean-canary-{tag}"),
    ]
    for path in paths:
        path.write_text("not the project's\n")
    try:
        yield paths
    finally:
        for path in paths:
            path.unlink(missing_ok=True)


def _env_with_fake_mn(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose ``mn`` only records that it was called, and that record's path."""
    bindir, called = tmp_path / "bin", tmp_path / "mn-called"
    bindir.mkdir()
    (bindir / "mn").write_text(f'#!/bin/sh\necho "$@" >> {called}\n')
    (bindir / "mn").chmod(0o755)
    return {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}, called


def _tf_topo(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "topologies.emulation.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def _make_clean(workdir: Path, venv: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The real ``make clean`` target, run in ``workdir`` (its build/ and results/, not ours)."""
    return subprocess.run(
        ["make", "-f", str(REPO / "Makefile"), "-C", str(workdir), f"VENV={venv}", "clean"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def _netns_of(pid: int) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def _wait_for(cond: object, what: str, timeout_s: float = 5.0) -> None:
    assert callable(cond)
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_clean_leaves_files_named_like_mn_c_targets_alone(
    tmp_path: Path, canaries: list[Path]
) -> None:
    env, mn_called = _env_with_fake_mn(tmp_path)
    clean = _tf_topo("clean", "--all", "--results", str(tmp_path / "results"), env=env)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    workdir = tmp_path / "work"
    for made in ("build", "results"):
        (workdir / made).mkdir(parents=True)
        (workdir / made / "x.csv").write_text("x\n")
    make = _make_clean(workdir, REPO / ".venv", env)
    assert make.returncode == 0, make.stdout + make.stderr
    assert not (workdir / "build").exists() and not (workdir / "results").exists()
    no_venv = _make_clean(workdir, tmp_path / "no-venv", env)
    assert no_venv.returncode == 0, no_venv.stdout + no_venv.stderr
    assert "cannot look for fabric leftovers" in no_venv.stdout
    assert [p for p in canaries if not p.exists()] == []
    assert not mn_called.exists(), mn_called.read_text()


def test_clean_removes_a_crashed_fabric_without_its_state_file(tmp_path: Path) -> None:
    spec = ["--planes", "1", "--leaves", "2", "--spines", "1", "--hosts", "1"]
    up = _tf_topo("up", "--detach", "--results", str(tmp_path), *spec)
    assert up.returncode == 0, up.stdout + up.stderr
    state_path = tmp_path / "fabric" / "state.json"
    state = json.loads(state_path.read_text())
    h1 = state["hosts"]["h1"]["pid"]
    # a program left running in host h1: it keeps h1's namespace and its veth alive
    straggler = subprocess.Popen(["mnexec", "-a", str(h1), "sleep", "300"], start_new_session=True)
    try:
        _wait_for(lambda: _netns_of(straggler.pid) == _netns_of(h1), "the straggler in h1")
        os.kill(state["runner_pid"], signal.SIGKILL)  # a crash: no teardown ran
        _wait_for(lambda: not cleanup.process_alive(state["runner_pid"]), "the runner to die")
        state_path.unlink()  # ... and nothing names what it left
        clean = _tf_topo("clean", "--all", "--results", str(tmp_path))
        assert clean.returncode == 0, clean.stdout + clean.stderr
        assert "fabric host namespace" in clean.stdout and str(straggler.pid) in clean.stdout
        assert straggler.wait(timeout=5) == -signal.SIGTERM
        assert_nothing_left(state)
        assert cleanup.fabric_host_namespaces() == []
        assert cleanup.fabric_switch_shells() == []
        assert not (tmp_path / "fabric").exists()
    finally:
        if straggler.poll() is None:
            straggler.kill()
            straggler.wait()
            _tf_topo("clean", "--all", "--results", str(tmp_path))


def test_another_mininet_network_survives_clean(tmp_path: Path) -> None:
    n = 10000 + secrets.randbelow(90000)
    switch_port = f"s{n}-eth1"  # plain mn names switch ports s<N>-eth<n>, hosts h<N>-eth<n>
    host = subprocess.Popen(
        ["mnexec", "-cn", *MININET_SHELL, "mininet:h1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    switch = subprocess.Popen(
        ["mnexec", "-c", *MININET_SHELL, "mininet:s1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_for(lambda: _netns_of(host.pid) != _netns_of(os.getpid()), "h1's namespace")
        link = ["ip", "link", "add", switch_port, "type", "veth"]
        subprocess.run(
            [*link, "peer", "name", "h1-eth0", "netns", str(host.pid)], check=True, timeout=10
        )
        clean = _tf_topo("clean", "--all", "--results", str(tmp_path))
        assert clean.returncode == 0, clean.stdout + clean.stderr
        assert host.poll() is None and switch.poll() is None, clean.stdout
        assert Path(f"/sys/class/net/{switch_port}").exists()
        assert "h1-eth0:" in Path(f"/proc/{host.pid}/net/dev").read_text()
        assert "mininet:" not in clean.stdout
    finally:
        for proc in (host, switch):
            proc.kill()
            proc.wait()
        subprocess.run(["ip", "link", "del", switch_port], capture_output=True, timeout=10)
