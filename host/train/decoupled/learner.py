"""A Decoupled DiLoCo learner: inner steps on its own data, one fragment sent every H/P steps,
merged fragments applied τ steps later. Learners never talk to each other, only to the syncer.

Per step s = 1, 2, ... (s counts the learner's steps, restored from its checkpoint after a
restart):

1. :meth:`~host.train.decoupled.process.Life.gate` (a paused learner waits here), one inner
   step (AdamW on its own batch; its ``tokens`` are the batch's target elements), padded to
   the emulated step time and stretched by a slow-down; every fragment's counters grow by
   one step and the batch's tokens.
2. If :meth:`FragmentSchedule.sent_after` (s) = p, i.e. s ≡ 0 (mod H/P) and
   p = (s/(H/P) − 1) mod P: send REPORT of fragment p (its current values; the version of the
   syncer's fragment it last received as ``round``; counters: s, steps and tokens since it
   last received fragment p, its incarnation). Fragment p is then in flight.
3. Every in-flight fragment sent at step s' is due at s' + τ: if its MERGED reply is here it
   overwrites the learner's copy (α = 0) and that fragment's counters restart at 0; if not,
   the learner waits for it at most ``merge_wait_s`` (τ = 0: it always waits here, as
   DiLoCo does), then trains on and applies it whenever it comes.

Every H steps (by default) it checkpoints its parameters, optimizer state, step and counters.
A killed learner's next incarnation restores that checkpoint (stale parameters and optimizer
state), sends PULL and overwrites every fragment with the syncer's current one (FRAGMENT
replies; counters restart), then goes on. When its steps are done it waits for the merges
still in flight, sends ABORT ("finished") and closes. When the job ends first
(:meth:`~host.train.decoupled.process.Life.finish`), it ends its step, reports every fragment
not in flight that has unreported steps (the syncer merges them before it stops: the final
global model keeps the learner's last steps), sends ABORT and closes.

Each step is recorded (:class:`StepRecord`): when it began and ended (the end includes the
wait for due merges), its nominal time (compute padded to the emulated step time: the work
it represents), loss and tokens.
"""

from __future__ import annotations

import pathlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import torch

from host.api import MessageEndpoint
from host.train.decoupled.config import DecoupledConfig
from host.train.decoupled.fragments import Fragmentation, fragment_model
from host.train.decoupled.link import POLL_S, Uplink
from host.train.decoupled.member import Counters, MemberLog, MemberState, counter, run_member
from host.train.decoupled.process import Life
from host.train.diloco.wire import MessageKind, TensorMessage

CATCH_UP_STEPS = 4
"""Host jitter a learner's emulated accelerator catches up, in steps (:meth:`Life.pace`)."""


@dataclass(frozen=True)
class FragmentSchedule:
    """Which fragment a learner sends after which step, and when its merge is due."""

    sync_every_steps: int  # H
    fragments: int  # P
    overlap_steps: int  # τ

    @property
    def interval_steps(self) -> int:
        return self.sync_every_steps // self.fragments

    def sent_after(self, step: int) -> int | None:
        """The fragment sent once step ``step`` (1-based) is done (None: none)."""
        k = self.interval_steps
        if step < 1 or step % k:
            return None
        return (step // k - 1) % self.fragments

    def due_at(self, sent_step: int) -> int:
        """The step after which the merge of a fragment sent after ``sent_step`` is applied."""
        return sent_step + self.overlap_steps

    @classmethod
    def of(cls, cfg: DecoupledConfig) -> FragmentSchedule:
        return cls(cfg.sync_every_steps, cfg.fragments, cfg.overlap_steps)


@dataclass(frozen=True)
class StepRecord:
    """One inner step of one learner incarnation. Times in seconds since the job's origin."""

    learner: int
    incarnation: int
    step: int  # 1-based
    start_at_s: float
    end_at_s: float  # after the due merges were applied
    work_s: float  # compute padded to the emulated step time (slow-downs excluded)
    train_loss: float
    tokens: int
    sent: int  # the fragment reported after this step (-1: none)
    applied: int  # merged fragments applied after this step


@dataclass
class LearnerLog(MemberLog):
    """What a learner slot recorded over all its incarnations (appended by its threads).
    ``counts``: merges_applied, catch_up_fragments, merge_timeouts, late_merges, unexpected,
    reports_sent, restarts."""

    steps: list[StepRecord] = field(default_factory=list)


class LearnerState(MemberState):
    """What survives a learner's restarts: its task, optimizer, step, fragment counters and
    the versions of the syncer's fragments it holds, and its last checkpoint."""

    def __init__(self, cfg: DecoupledConfig, rank: int, path: pathlib.Path | None = None) -> None:
        self.cfg = cfg
        self.step = 0
        p = cfg.fragments
        self.steps_since = [0] * p
        self.tokens_since = [0] * p
        self.versions = [0] * p
        super().__init__(cfg.reference(), rank, path)
        self.fragmentation: Fragmentation = fragment_model(self.model, p)

    def counters(self) -> Counters:
        return {
            "step": (self.step,),
            "steps_since": tuple(self.steps_since),
            "tokens_since": tuple(self.tokens_since),
            "versions": tuple(self.versions),
        }

    def load_counters(self, counters: Counters) -> None:
        p = self.cfg.fragments
        (self.step,) = counter(counters, "step", 1)
        self.steps_since = list(counter(counters, "steps_since", p))
        self.tokens_since = list(counter(counters, "tokens_since", p))
        self.versions = list(counter(counters, "versions", p))

    def fragment_vector(self, p: int) -> np.ndarray:
        out: np.ndarray = self.fragmentation[p].gather(self.params).numpy()
        return out

    def overwrite(self, p: int, version: int, vector: np.ndarray) -> None:
        """Fragment ``p`` := the syncer's (version ``version``); its counters restart.

        Raises:
            ValueError: the vector does not have the fragment's size.
        """
        self.fragmentation[p].scatter(self.params, torch.from_numpy(np.array(vector)))
        self.steps_since[p] = 0
        self.tokens_since[p] = 0
        self.versions[p] = version

    def inner_step(self) -> tuple[float, int]:
        """One optimizer step on the next batch: (loss, tokens)."""
        run = self.task.run
        x, y = run.batch(self.step)
        self.opt.zero_grad(set_to_none=True)
        loss = run.loss(self.model, x, y)
        torch.autograd.backward(loss)
        self.opt.step()
        return float(loss.detach()), int(y.numel())


class LearnerRun:
    """One incarnation of learner ``state.rank`` over its uplink."""

    def __init__(
        self,
        cfg: DecoupledConfig,
        state: LearnerState,
        link: Uplink,
        life: Life,
        log: LearnerLog,
        origin: float,
    ) -> None:
        self.cfg = cfg
        self.state = state
        self.link = link
        self.life = life
        self.log = log
        self.origin = origin
        self.schedule = FragmentSchedule.of(cfg)
        self.in_flight: dict[int, int] = {}  # fragment -> step it was sent after
        self.late: set[int] = set()  # in flight, waited for in vain: applied when it comes
        self.arrived: dict[int, TensorMessage] = {}  # MERGED replies not applied yet
        self.started = False  # the syncer's START came

    # -- messages --------------------------------------------------------------------------

    def _file(self, msg: TensorMessage) -> None:
        FILERS.get(msg.kind, LearnerRun._unexpected)(self, msg)

    def _merged(self, msg: TensorMessage) -> None:
        if msg.tensor not in self.in_flight:
            self.log.counts["unexpected"] += 1
            return
        self.arrived[msg.tensor] = msg

    def _fragment(self, msg: TensorMessage) -> None:
        p = msg.tensor
        if not 0 <= p < self.cfg.fragments:
            self.log.counts["unexpected"] += 1
            return
        self.state.overwrite(p, msg.round, msg.array)
        self.in_flight.pop(p, None)
        self.arrived.pop(p, None)
        self.late.discard(p)
        self.log.counts["catch_up_fragments"] += 1

    def _unexpected(self, msg: TensorMessage) -> None:
        self.log.counts["unexpected"] += 1

    def _drain(self, timeout_s: float = 0.0) -> bool:
        """File what arrived (waiting at most ``timeout_s`` for the first message); whether
        anything came."""
        msg = self.link.recv(timeout_s)
        if msg is None:
            return False
        self._file(msg)
        while (more := self.link.recv(0.0)) is not None:
            self._file(more)
        return True

    def _wait(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until ``done()`` (filing messages) or ``timeout_s`` passed; kill-aware."""
        deadline = time.monotonic() + timeout_s
        while not done():
            left = deadline - time.monotonic()
            if left <= 0 or self.life.finishing:
                return False
            self.life.check()
            self._drain(min(POLL_S, left))
        return True

    # -- the schedule ----------------------------------------------------------------------

    def _report(self, p: int) -> None:
        s = self.state
        self.life.gate()
        self.link.send(
            MessageKind.REPORT,
            s.versions[p],
            s.fragment_vector(p),
            tensor=p,
            counters=(s.step, s.steps_since[p], s.tokens_since[p], self.life.incarnation),
        )
        self.in_flight[p] = s.step
        self.late.discard(p)
        self.arrived.pop(p, None)
        self.log.counts["reports_sent"] += 1

    def _arrived(self, p: int) -> bool:
        return p in self.arrived

    def _apply(self, p: int) -> None:
        msg = self.arrived.pop(p)
        self.state.overwrite(p, msg.round, msg.array)
        del self.in_flight[p]
        if p in self.late:
            self.late.discard(p)
            self.log.counts["late_merges"] += 1
        self.log.counts["merges_applied"] += 1

    def _absorb(self, *, final: bool = False) -> int:
        """Apply the merges that are due (waiting for missing ones, once each); how many."""
        self._drain()
        step = self.state.step
        applied = 0
        for p, sent in sorted(self.in_flight.items(), key=lambda kv: kv[1]):
            if not final and step < self.schedule.due_at(sent):
                continue
            if p not in self.arrived and p not in self.late:
                got = self._wait(partial(self._arrived, p), self.cfg.merge_wait_s)
                self.life.restart_clock()  # a real stall: not caught up
                if not got:
                    self.late.add(p)
                    if not self.life.finishing:
                        self.log.counts["merge_timeouts"] += 1
            if p in self.arrived:
                self._apply(p)
                applied += 1
        return applied

    def _start(self, msg: TensorMessage) -> None:
        self.started = True

    def wait_for_start(self) -> None:
        """A first incarnation waits for the syncer's START (every learner connected), at
        most ``setup_timeout_s``, then begins anyway (counted)."""
        if not self._wait(lambda: self.started, self.cfg.setup_timeout_s):
            self.log.counts["start_timeouts"] += 1

    def catch_up(self) -> None:
        """A restarted learner: PULL every fragment and overwrite its copies."""
        self.link.send_bytes(MessageKind.PULL, 0, b"", counters=(self.life.incarnation,))
        before = self.log.counts["catch_up_fragments"]
        want = before + self.cfg.fragments
        self._wait(lambda: self.log.counts["catch_up_fragments"] >= want, self.cfg.merge_wait_s)

    def train(self) -> None:
        """Steps until the learner's budget is done, then the last merges and goodbye.

        Raises:
            Killed: this incarnation was killed or the job stopped it.
            LinkError: the syncer went away.
        """
        s, cfg = self.state, self.cfg
        self.life.graceful = True
        while s.step < cfg.steps and not self.life.finishing:
            self.life.gate()
            t0 = time.monotonic()
            loss, tokens = s.inner_step()
            work = self.life.pace(t0, cfg.min_step_s, catch_up_s=CATCH_UP_STEPS * cfg.min_step_s)
            s.step += 1
            for p in range(cfg.fragments):
                s.steps_since[p] += 1
                s.tokens_since[p] += tokens
            sent = self.schedule.sent_after(s.step)
            if sent is not None:
                self._report(sent)
            applied = self._absorb()
            self.log.keep(
                self.log.steps,
                StepRecord(
                    s.rank,
                    self.life.incarnation,
                    s.step,
                    t0 - self.origin,
                    time.monotonic() - self.origin,
                    work,
                    loss,
                    tokens,
                    -1 if sent is None else sent,
                    applied,
                ),
            )
            if s.step % cfg.checkpoint_interval_steps == 0:
                s.save()
        if self.life.finishing:
            self._hand_over()
        else:
            self._absorb(final=True)
        self.link.send_bytes(MessageKind.ABORT, 0, b"finished")
        self.link.flush(self.cfg.merge_wait_s)

    def _hand_over(self) -> None:
        """The job ends: apply the merges that came, then report every fragment that is not
        in flight and has steps the syncer has not seen, so that the global model keeps this
        learner's last steps (the syncer merges them before it stops)."""
        s = self.state
        self._drain()
        for p in sorted(self.arrived):
            self._apply(p)
        for p in range(self.cfg.fragments):
            if p not in self.in_flight and s.steps_since[p] > 0:
                self._report(p)
                self.log.counts["final_reports"] += 1


FILERS: dict[MessageKind, Callable[[LearnerRun, TensorMessage], None]] = {
    MessageKind.MERGED: LearnerRun._merged,
    MessageKind.FRAGMENT: LearnerRun._fragment,
    MessageKind.START: LearnerRun._start,
}
"""What a learner does with each kind it may receive (anything else is counted unexpected)."""


def run_learner(
    cfg: DecoupledConfig,
    state: LearnerState,
    log: LearnerLog,
    life: Life,
    endpoint: MessageEndpoint,
    *,
    syncer_host: int,
    fingerprint: bytes,
    origin: float,
) -> None:
    """One incarnation of a learner: restore (after a restart), connect, catch up, train.

    Raises:
        Killed: killed, or stopped at the end of the job.
        LinkError: the syncer refused it or went away.
        CheckpointError: a restart found an unreadable checkpoint.
    """

    def body(link: Uplink) -> None:
        run = LearnerRun(cfg, state, link, life, log, origin)
        if life.incarnation > 0:
            run.catch_up()
        else:
            run.wait_for_start()
        run.train()

    run_member(
        state,
        log,
        life,
        endpoint,
        body,
        hub_host=syncer_host,
        hub=cfg.learners,
        fingerprint=fingerprint,
        timeout_s=cfg.setup_timeout_s,
    )
