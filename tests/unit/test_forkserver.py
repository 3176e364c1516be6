"""The agents' fork server (``host.forkserver`` with ``experiments.agent_forks``), for real: a
server prepares ``host.decoupled_agent`` once; each forked agent is its own process that says
``ready`` on the pipes the driver made, answers commands, and reports its exit status (0 on
``quit``, -9 when SIGKILLed) as a ``Popen`` would; the driver's loop reads it like any agent;
a bad request is refused with the reason and the server goes on; closing the server stops
the agents it started and removes its socket."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import time
from collections.abc import Iterator

import pytest

from experiments.agent_forks import ForkedProcess, ForkError, ForkServer
from experiments.hosts import AgentProcess
from host.forkserver import DIR_PREFIX, RequestError, parse_request, stale_dirs
from topologies.model import FabricSpec, build_fabric


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ForkServer, list[str]]]:
    d = tmp_path_factory.mktemp("forks")
    topology = d / "topology.json"
    build_fabric(FabricSpec()).to_json(topology)
    log = (d / "agents.log").open("ab")
    with ForkServer("here", os.getpid(), "host.decoupled_agent", log) as fs:
        fs.wait_ready()
        yield fs, ["--topology", str(topology), "--host", "h1", "--out", str(d / "out")]
    log.close()


def events(p: ForkedProcess, until: str, timeout_s: float = 60.0) -> list[dict[str, object]]:
    agent = AgentProcess("h1", p)
    seen: list[dict[str, object]] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not any(e.get("event") == until for e in seen):
        seen += agent.read_events()
        if agent.closed:
            break
        time.sleep(0.01)
    return seen


def test_forked_agents_are_ready_processes_that_report_their_exit(
    server: tuple[ForkServer, list[str]],
) -> None:
    fs, argv = server
    a = fs.spawn([*argv, "--slot", "0"])
    b = fs.spawn([*argv, "--slot", "1"])
    assert len({a.pid, b.pid, fs.proc.pid, os.getpid()}) == 4
    for p, slot in ((a, 0), (b, 1)):
        ready = [e for e in events(p, "ready") if e.get("event") == "ready"]
        assert ready and ready[0]["slot"] == slot
        assert pathlib.Path(f"/proc/{p.pid}/comm").read_text().strip() == "agent"
    assert a.poll() is None
    assert a.stdin is not None
    a.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
    assert a.wait(30) == 0 and a.poll() == 0
    b.kill()
    assert b.wait(30) == -signal.SIGKILL


def test_a_bad_request_is_refused_and_the_server_goes_on(
    server: tuple[ForkServer, list[str]],
) -> None:
    fs, argv = server
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(fs.socket_path)
        s.sendall(b'{"argv": "not a list"}')
        assert b"a request carries 3 file descriptors" in s.recv(4096)
    with pytest.raises(RequestError, match='"argv": \\[strings\\]'):
        parse_request(b'{"argv": [1]}', [3, 4, 5])
    with pytest.raises(RequestError, match="one JSON object"):
        parse_request(b"{", [3, 4, 5])
    c = fs.spawn([*argv, "--slot", "2"])
    assert any(e.get("event") == "ready" for e in events(c, "ready"))
    c.terminate()
    assert c.wait(30) == -signal.SIGTERM


def test_closing_the_server_stops_its_agents_and_removes_its_socket(tmp_path: pathlib.Path) -> None:
    topology = tmp_path / "topology.json"
    build_fabric(FabricSpec()).to_json(topology)
    with (tmp_path / "agents.log").open("ab") as log:
        fs = ForkServer("here", os.getpid(), "host.decoupled_agent", log)
        argv = ["--topology", str(topology), "--host", "h2", "--out", str(tmp_path / "out")]
        p = fs.spawn(argv)
        assert any(e.get("event") == "ready" for e in events(p, "ready"))
        fs.close()
        assert p.wait(10) == -signal.SIGTERM
        assert not os.path.exists(fs.socket_path)
        with pytest.raises(ForkError):
            fs.spawn(["--host", "h2"])


def test_stale_dirs_are_the_folders_whose_server_is_gone(
    server: tuple[ForkServer, list[str]], tmp_path: pathlib.Path
) -> None:
    fs, _argv = server
    live = os.path.dirname(fs.socket_path)
    assert live not in stale_dirs(os.path.dirname(live))
    gone = tmp_path / f"{DIR_PREFIX}gone"
    gone.mkdir()
    (tmp_path / "unrelated").mkdir()
    assert stale_dirs(str(tmp_path)) == [str(gone)]
    assert stale_dirs(str(tmp_path), min_age_s=60) == []  # just made: may be starting
    old = time.time() - 120
    os.utime(gone, (old, old))
    assert stale_dirs(str(tmp_path), min_age_s=60) == [str(gone)]
