"""The per-process agent of Decoupled DiLoCo jobs on a fabric (``host.decoupled_agent``), run in
this process over the emulated fabric's MRC endpoints: a syncer and learners take their roles
from JSON commands, write their records as they go and end on ``stop``; a restarted learner
restores the checkpoint file and catches up from the syncer; the elastic roles likewise.
Commands that cannot run are refused with the reason; records and checkpoint files round-trip
and refuse what they cannot read."""

from __future__ import annotations

import contextlib
import io
import json
import pathlib
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from host.api import MessageEndpoint
from host.decoupled_agent import (
    COMMANDS,
    ROLES,
    Agent,
    AgentError,
    RunCommand,
    Slot,
    slot_endpoint,
    slot_host_id,
    slot_port,
)
from host.paths import MRC_UDP_PORT
from host.train.cluster import EmuCluster
from host.train.decoupled import member
from host.train.decoupled.config import DecoupledConfig, ElasticConfig, SyncerConfig
from host.train.decoupled.elastic import AttemptRecord, Commit, Reform, WorkerEval
from host.train.decoupled.errors import CheckpointError
from host.train.decoupled.learner import LearnerState, StepRecord
from host.train.decoupled.member import CheckpointWriter, read_checkpoint, write_checkpoint
from host.train.decoupled.records import (
    RECORD_KINDS,
    HubSummary,
    MemberEnd,
    read_records,
    record_line,
)
from host.train.decoupled.syncer import EvalPoint, Included, LivenessEvent, MergeRecord
from host.train_agent import Console
from topologies.model import FabricSpec, build_fabric

FABRIC = build_fabric(FabricSpec())
HUB: Slot = ("h4", 0)
MEMBERS: tuple[Slot, ...] = (("h1", 0), ("h2", 0))
CFG = DecoupledConfig(
    task="digits-mlp",
    learners=2,
    fragments=2,
    sync_every_steps=4,
    overlap_steps=1,
    steps=10**6,
    min_step_s=0.02,
    checkpoint_every_steps=4,
    syncer=SyncerConfig(learner_timeout_s=1.0, eval_every_merges=8),
)


class Lines(io.TextIOBase):
    """A console's stdout: every event kept."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def write(self, s: str) -> int:
        with self._lock:
            self.events += [json.loads(x) for x in s.splitlines() if x.strip()]
        return len(s)

    def flush(self) -> None:
        pass

    def of(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if e.get("event") == name]


class Running:
    """An agent serving a queue of commands in a thread."""

    def __init__(self, agent: Agent, out: Lines) -> None:
        self.agent, self.out = agent, out
        self.q: queue.Queue[str | None] = queue.Queue()
        self.thread = threading.Thread(target=agent.serve, args=(iter(self.q.get, None),))
        self.thread.start()

    def send(self, **msg: object) -> None:
        self.q.put(json.dumps(msg))

    def wait(self, name: str, count: int = 1, timeout_s: float = 60.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        while len(self.out.of(name)) < count:
            assert time.monotonic() < deadline, f"no {name} event: {self.out.events}"
            time.sleep(0.02)
        return self.out.of(name)

    def wait_step(self, step: int, key: str = "step", timeout_s: float = 120.0) -> None:
        """Until a progress event says the role is past ``step`` (events, not wall time: a
        busy machine makes the test slower, not failed)."""
        deadline = time.monotonic() + timeout_s
        while not any((e.get(key) or 0) >= step for e in self.out.of("progress")):
            assert time.monotonic() < deadline, f"not at {key} {step}: {self.out.events[-3:]}"
            time.sleep(0.05)

    def close(self) -> None:
        self.q.put(None)
        self.thread.join(30)
        assert not self.thread.is_alive()


@contextlib.contextmanager
def agents(tmp_path: pathlib.Path, slots: Sequence[Slot]) -> Iterator[dict[Slot, Running]]:
    """One agent per slot (slot 0 of h1..h4: emulator hosts 0..3), endpoints of an
    :class:`EmuCluster`."""
    with EmuCluster() as cl:
        out: dict[Slot, Running] = {}

        def opener(slot: Slot) -> Any:
            def open_endpoint(
                peers: Sequence[Slot],
            ) -> contextlib.AbstractContextManager[MessageEndpoint]:
                return contextlib.nullcontext(cl.endpoints[slot_host_id(FABRIC, slot)])

            return open_endpoint

        for s in slots:
            lines = Lines()
            out[s] = Running(Agent(FABRIC, s, tmp_path, Console(lines), opener(s)), lines)
        try:
            yield out
        finally:
            for r in out.values():
                r.close()


def command(role: str, rank: int, origin: float, incarnation: int = 0, **kw: Any) -> dict[str, Any]:
    job = kw.pop("job", CFG)
    members = kw.pop("members", MEMBERS)
    return RunCommand("job1", role, job, rank, members, HUB, origin, incarnation).to_message()


def test_a_syncer_and_learners_train_write_their_records_and_stop(tmp_path: pathlib.Path) -> None:
    with agents(tmp_path, [HUB, *MEMBERS]) as a:
        origin = time.monotonic()
        a[HUB].send(**command("syncer", 2, origin))
        a[HUB].wait("started")
        for r, s in enumerate(MEMBERS):
            a[s].send(**command("learner", r, origin))
        for s in MEMBERS:
            a[s].wait_step(20)  # it says how far it is while it runs
        n = len(a[MEMBERS[0]].out.of("progress"))
        a[MEMBERS[0]].send(cmd="slow", factor=3.0)
        a[MEMBERS[0]].wait("progress", n + 2)
        for s in [*MEMBERS, HUB]:  # all at once, as the experiment's driver does
            a[s].send(cmd="stop")
        for s in MEMBERS:
            (ev,) = a[s].wait("finished")
            assert (ev["role"], ev["status"], ev["error"]) == ("learner", "stopped", "")
        (ev,) = a[HUB].wait("finished")
        assert ev["status"] == "finished"
    recs = read_records(*sorted((tmp_path / "job1").glob("*.jsonl")))
    assert recs.skipped == 0
    steps = recs.of(StepRecord)
    assert {s.learner for s in steps} == {0, 1} and all(s.incarnation == 0 for s in steps)
    merges = recs.of(MergeRecord)
    assert merges and {x.learner for m in merges for x in m.included} == {0, 1}
    (hub,) = recs.of(HubSummary)
    assert hub.role == "syncer" and hub.tokens_merged > 0 and hub.refused == {}
    assert recs.of(EvalPoint)[-1].val_loss < recs.of(EvalPoint)[0].val_loss
    ends = recs.of(MemberEnd)
    assert sorted((e.rank, e.status) for e in ends) == [(0, "stopped"), (1, "stopped")]
    assert all(e.counts["reports_sent"] > 0 and e.counts["final_reports"] > 0 for e in ends)
    for r in (0, 1):  # the syncer drained: every learner's last step is in the global model
        last = max(s.step for s in steps if s.learner == r)
        assert max(x.step for m in merges for x in m.included if x.learner == r) == last
    # the slowed learner stepped slower after the command
    mine = [s for s in steps if s.learner == 0]
    assert mine[-1].end_at_s - mine[-1].start_at_s > 2.5 * CFG.min_step_s
    assert (tmp_path / "job1" / "ckpt-learner-0.npz").exists()


def test_a_restarted_learner_restores_its_checkpoint_file_and_catches_up(
    tmp_path: pathlib.Path,
) -> None:
    with agents(tmp_path, [HUB, *MEMBERS]) as a:
        origin = time.monotonic()
        a[HUB].send(**command("syncer", 2, origin))
        a[HUB].wait("started")
        for r, s in enumerate(MEMBERS):
            a[s].send(**command("learner", r, origin))
        a[MEMBERS[0]].wait_step(30)
        a[MEMBERS[0]].send(cmd="stop")  # the first incarnation ends (as a kill would)
        a[MEMBERS[0]].wait("finished")
        n = len(a[MEMBERS[0]].out.of("progress"))
        a[MEMBERS[0]].send(**command("learner", 0, origin, incarnation=1))
        a[MEMBERS[0]].wait("started", 2)
        a[MEMBERS[0]].wait("progress", n + 2)
        for s in MEMBERS:
            a[s].send(cmd="stop")
        a[MEMBERS[1]].wait("finished")
        a[MEMBERS[0]].wait("finished", 2)
        a[HUB].send(cmd="stop")
        a[HUB].wait("finished")
    recs = read_records(tmp_path / "job1" / "learner-0.jsonl")
    first = [s.step for s in recs.of(StepRecord) if s.incarnation == 0]
    second = [s.step for s in recs.of(StepRecord) if s.incarnation == 1]
    assert second and second[0] % CFG.checkpoint_interval_steps == 1 and second[0] <= first[-1] + 1
    ends = {e.incarnation: e for e in recs.of(MemberEnd)}
    assert ends[1].counts["restarts"] == 1
    assert ends[1].counts["catch_up_fragments"] == CFG.fragments


def test_elastic_roles_commit_rounds_and_stop(tmp_path: pathlib.Path) -> None:
    job = ElasticConfig(
        task="digits-mlp", workers=2, rounds=10**6, min_step_s=0.02, eval_every_rounds=10
    )
    with agents(tmp_path, [HUB, *MEMBERS]) as a:
        origin = time.monotonic()
        a[HUB].send(**command("coordinator", 2, origin, job=job))
        a[HUB].wait("started")
        for r, s in enumerate(MEMBERS):
            a[s].send(**command("worker", r, origin, job=job))
        a[HUB].wait_step(10, key="round")
        for s in MEMBERS:
            a[s].send(cmd="stop")
        for s in MEMBERS:
            a[s].wait("finished")
        a[HUB].send(cmd="stop")
        a[HUB].wait("finished")
    recs = read_records(*sorted((tmp_path / "job1").glob("*.jsonl")))
    commits = recs.of(Commit)
    assert len(commits) > 5 and {c.group for c in commits} == {(0, 1)}
    assert sum(a.committed for a in recs.of(AttemptRecord)) == 2 * len(commits) or len(commits) > 5
    assert recs.of(Reform)[0].reason == "formed" and recs.of(HubSummary)[0].role == "coordinator"


def test_a_run_command_after_a_stop_waits_for_the_stopping_role_instead_of_being_refused(
    tmp_path: pathlib.Path,
) -> None:
    with agents(tmp_path, [HUB]) as a:
        agent = a[HUB].agent
        closing = threading.Event()
        agent.stopping.set()  # the last job was told to stop; its role is still closing
        agent._thread = threading.Thread(target=lambda: closing.wait(10))
        agent._thread.start()
        threading.Timer(0.3, closing.set).start()
        agent._run_command(command("syncer", 2, time.monotonic() + 60))
        assert not a[HUB].out.of("refused")
        a[HUB].send(cmd="stop")
        a[HUB].wait("finished")


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"run": "../x"}, "a name of letters"),
        ({"role": "captain"}, "valid: learner, syncer, worker, coordinator"),
        ({"job": {"learners": 0}}, "learners must be >= 1"),
        ({"job": {"learnerz": 2}}, "did you mean 'learners'"),
        ({"members": [["h1", 0]]}, "2 members in the job, 1 slots named"),
        ({"members": [["h1", 0], ["h4", 0]]}, "a slot of their own"),
        ({"members": [["h1", 0], ["h2", 99]]}, r"slot 0..15"),
        ({"rank": 1}, r"learner 1 runs on slot \('h2', 0\), this is \('h1', 0\)"),
        ({"rank": 5}, r"rank must be in 0..1"),
        ({"incarnation": -1}, "incarnation must be in"),
        ({"origin": "soon"}, "origin must be"),
        ({"members": [["h1", 0], ["h9", 0]]}, "h9"),
    ],
)
def test_a_run_command_that_cannot_run_is_refused_with_the_reason(
    change: dict[str, Any], match: str
) -> None:
    msg = command("learner", 0, 1.0)
    if "job" in change:
        msg["job"] = {**msg["job"], **change.pop("job")}
    msg.update(change)
    with pytest.raises(AgentError, match=match):
        RunCommand.from_message(msg, FABRIC, ("h1", 0))


def test_the_command_round_trips_and_tables_cover_every_role_and_command() -> None:
    msg = command("learner", 1, 12.5, incarnation=3)
    cmd = RunCommand.from_message(json.loads(json.dumps(msg)), FABRIC, ("h2", 0))
    assert cmd.to_message() == msg and cmd.job == CFG and cmd.name == "learner-1"
    assert set(ROLES) == {"learner", "syncer", "worker", "coordinator"}
    assert set(COMMANDS) == {"run", "slow", "stop", "quit"}
    hub = RunCommand.from_message(command("syncer", 0, 1.0), FABRIC, HUB)
    assert hub.rank == 2 and hub.name == "syncer" and hub.fingerprint == cmd.fingerprint


def test_slots_have_their_own_host_id_and_port_and_no_path_to_their_own_host() -> None:
    assert slot_host_id(FABRIC, ("h1", 0)) == 0 and slot_host_id(FABRIC, ("h3", 2)) == 2 + 512
    assert slot_port(0) == MRC_UDP_PORT + 1 and slot_port(3) == MRC_UDP_PORT + 4
    with pytest.raises(AgentError, match="on this host"):
        slot_endpoint(FABRIC, ("h1", 0), [("h1", 1)])


def _samples() -> list[object]:
    inc = Included(1, 0, 8, 4, 64, 2, 1.5)
    return [
        StepRecord(0, 1, 5, 0.1, 0.2, 0.05, 1.25, 16, -1, 0),
        AttemptRecord(1, 0, 3, 0.1, 0.3, 0.05, 2.0, 16, True),
        WorkerEval(1.0, 24, 0.5),
        MergeRecord(0, 3, 0.1, 0.2, 0.3, 1, 2, 0.0, 0.0, 64, 1, 0.25, (inc,)),
        EvalPoint(2.0, 8, 123.0, 0.9),
        LivenessEvent(1.0, 1, "dropped"),
        Commit(4, 1.0, 0.9, (0, 2), 32),
        Reform(1.0, 4, "timeout", (1,), (0, 2)),
        MemberEnd("learner", 0, 1, "stopped", "", {"restarts": 1}, 10, 20),
        HubSummary("syncer", "finished", "", 20.0, 1e3, {"stale": 1}, {"pulls": 2}, 0),
    ]


def test_records_round_trip_and_a_torn_last_line_is_skipped(tmp_path: pathlib.Path) -> None:
    samples = _samples()
    assert {type(s) for s in samples} == {k.cls for k in RECORD_KINDS.values()}
    path = tmp_path / "r.jsonl"
    text = "".join(record_line(s) + "\n" for s in samples)
    path.write_text(text + text.splitlines()[0][:20] + "\n" + '{"kind": "step"}\n[1]\n')
    recs = read_records(path, tmp_path / "missing.jsonl")
    assert recs.items == samples and recs.skipped == 3


def test_a_checkpoint_file_restores_parameters_optimizer_and_counters(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "ckpt.npz"
    a = LearnerState(CFG, 0, path)
    for _ in range(3):
        a.inner_step()
        a.step += 1
    a.steps_since, a.tokens_since, a.versions = [3, 1], [48, 16], [2, 5]
    a.save()  # written in the background
    assert a.flush() and a.writer is not None and a.writer.written == 1
    b = LearnerState(CFG, 0, path)  # a new process: nothing in memory
    b.restore()
    assert (b.step, b.steps_since, b.tokens_since, b.versions) == (3, [3, 1], [48, 16], [2, 5])
    np.testing.assert_array_equal(b.state(), a.state())  # parameters and AdamW's state
    for p in b.params:
        assert int(b.opt.state[p]["step"]) == 3
    vec, counters = read_checkpoint(path)
    assert vec.dtype == np.float32 and counters["versions"] == (2, 5)


def test_checkpoints_are_written_in_the_background_newest_first(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "ckpt.npz"
    writer = CheckpointWriter(path)
    gate = threading.Event()
    real = member.write_checkpoint

    def slow_write(*args: Any) -> None:
        gate.wait(5)  # a disk that holds the first write
        real(*args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(member, "write_checkpoint", slow_write)
        t0 = time.monotonic()
        for step in range(1, 5):
            writer.submit(np.full(3, step, np.float32), {"step": (step,)})
        assert time.monotonic() - t0 < 0.5  # nobody waited for the disk
        assert not writer.flush(0.05)
        gate.set()
        assert writer.flush(5)
    vec, counters = read_checkpoint(path)
    assert counters["step"] == (4,) and vec.tolist() == [4, 4, 4]
    assert writer.written <= 2  # the first (held) write, then only the newest


def test_an_unreadable_or_foreign_checkpoint_is_refused(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(CheckpointError, match="not a checkpoint"):
        read_checkpoint(bad)
    write_checkpoint(tmp_path / "small.npz", np.zeros(3, np.float32), {"step": (1,)})
    state = LearnerState(CFG, 0, tmp_path / "small.npz")
    with pytest.raises(CheckpointError, match="small.npz"):
        state.restore()
