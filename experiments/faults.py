"""Fault schedulers of jobs on the fabric: network events on their own clock.

:class:`FaultScheduler` applies a DBLP job's round-aligned events (below); :class:`TimedFaults`
applies changes at set times of the driver's clock (a DiLoCo job's link failure 5 s into the
run), each in a thread of its own, so neither waits for the driver's event loop.

With :class:`FaultScheduler` the DBLP driver's event loop only reads what the agents say;
every change to the network happens in the scheduler's thread, with its own queue, so that no
fault waits behind the agents' events and no agent's event waits behind a slow controller
call:

* ``enter_round`` (the parameter server starts a round where a burst starts or ends,
  :meth:`host.train.job.JobSpec.gated`): once every worker waits for that round too (each
  has the round before's result: nothing of it is still in flight), or ``peer_timeout_s``
  after the server asked, the burst goes on (off) through the controller; then the server
  and every worker waiting for that round are answered at once;
* ``await_round`` (a worker is ready to send in such a round): answered as soon as the
  round's state is in place (at once when it already is);
* ``trigger`` (the server starts a round with a plane failure or restore): applied on
  arrival, nobody waits for it; it lands wherever it lands in the round's communication.

Every change is kept as a :class:`~host.train.loop.FaultRecord` with the monotonic times of
the request and of the controller call's return, which the job's CSVs carry. A controller
error is kept and raised by :meth:`FaultScheduler.check` in the driver's loop.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from host.train.job import JobSpec
from host.train.loop import FaultRecord, NetworkActions, apply_round_state, apply_triggers

Reply = Callable[[], None]
"""Answers one waiting agent (writes its ack to the agent's stdin)."""


class FaultError(RuntimeError):
    """The network could not be changed (the controller failed); the message says how."""


@dataclass(frozen=True)
class _Enter:
    round: int
    requested_mono: float


@dataclass(frozen=True)
class _Trigger:
    round: int
    requested_mono: float


class FaultScheduler:
    """Applies a job's network events through ``actions`` in a thread of its own.

    Use as a context manager; :meth:`close` stops the thread after the queued work.
    """

    def __init__(self, job: JobSpec, actions: NetworkActions) -> None:
        self.job = job
        self.actions = actions
        self.faults: list[FaultRecord] = []
        self._lock = threading.Lock()
        self._applied: set[int] = set()
        self._waiting: dict[int, list[Reply]] = {}
        self._workers: Counter[int] = Counter()  # workers waiting, per round
        self._entered: dict[int, tuple[_Enter, threading.Timer]] = {}  # asked, and the fallback
        self._work: queue.Queue[_Enter | _Trigger | None] = queue.Queue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="fault-scheduler", daemon=True)
        self._thread.start()

    # -- what the driver's loop calls (never blocks) ----------------------------------------

    def enter_round(self, round_: int, reply: Reply) -> None:
        """The coordinator asks for round ``round_``'s state; ``reply`` once it is in place
        (applied when every worker waits for the round too)."""
        item = _Enter(round_, time.monotonic())
        timer = threading.Timer(self.job.peer_timeout_s, self._release, (round_,))
        timer.daemon = True
        with self._lock:
            self._waiting.setdefault(round_, []).append(reply)
            self._entered[round_] = (item, timer)
            everyone = self._workers[round_] >= self.job.workers
        if everyone:
            self._release(round_)
        else:
            timer.start()

    def await_round(self, round_: int, reply: Reply) -> None:
        """A worker waits for round ``round_``'s state: ``reply`` now or once it is there."""
        with self._lock:
            applied = round_ in self._applied
            if not applied:
                self._waiting.setdefault(round_, []).append(reply)
                self._workers[round_] += 1
                last = round_ in self._entered and self._workers[round_] >= self.job.workers
        if applied:
            reply()
        elif last:
            self._release(round_)

    def _release(self, round_: int) -> None:
        """Queue round ``round_``'s change, once: when the last worker waits, or
        ``peer_timeout_s`` after the server asked (a worker that never comes)."""
        with self._lock:
            entered = self._entered.pop(round_, None)
        if entered is None:
            return  # released already
        item, timer = entered
        timer.cancel()
        self._work.put(item)

    def trigger(self, round_: int) -> None:
        """Apply the events triggered at round ``round_``'s start (nobody waits)."""
        self._work.put(_Trigger(round_, time.monotonic()))

    def check(self) -> None:
        """Raise the controller's failure, if any (the driver's loop calls this)."""
        if self._error is not None:
            raise FaultError(f"changing the network failed: {self._error}") from self._error

    # -- the thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            item = self._work.get()
            if item is None:
                return
            if self._error is not None:
                continue
            try:
                if isinstance(item, _Enter):
                    self._enter(item)
                else:
                    records = apply_triggers(
                        self.job, self.actions, item.round, item.requested_mono
                    )
                    with self._lock:
                        self.faults += records
            except Exception as e:  # reported through check() in the driver's loop
                self._error = e

    def _enter(self, item: _Enter) -> None:
        records = apply_round_state(self.job, self.actions, item.round)
        records = [
            FaultRecord(r.round, r.kind, r.value, item.requested_mono, r.applied_mono)
            for r in records
        ]
        with self._lock:
            self.faults += records
            self._applied.add(item.round)
            replies = self._waiting.pop(item.round, [])
        for reply in replies:
            reply()

    def close(self) -> None:
        """Finish the queued work and stop the thread (idempotent)."""
        if self._thread.is_alive():
            self._work.put(None)
            self._thread.join()

    def __enter__(self) -> FaultScheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- faults on the driver's clock ----------------------------------------------------------------


@dataclass(frozen=True)
class TimedAction:
    """One change to the network at a set time of a run."""

    at_s: float
    """Seconds after the run's origin (``time.monotonic()``, which every namespace shares)."""
    label: str
    """What it does (``fail link h4 p0l1``), for the records."""
    apply: Callable[[], object]
    always: bool = False
    """Apply it when the scheduler closes if its time has not come (a restore: the network is
    never left failed)."""


@dataclass(frozen=True)
class AppliedAction:
    """When an action ran, in seconds since the run's origin."""

    label: str
    at_s: float  # planned
    requested_s: float  # the thread called it
    applied_s: float  # the call returned


class TimedFaults:
    """Applies :class:`TimedAction` s at their times in a thread of its own (context manager).

    The driver's event loop never waits for a change, and no change waits for the loop; an
    error of an action is kept and raised by :meth:`check` (the loop calls it); the actions
    after it are skipped, except those marked ``always``, which :meth:`close` applies.

    Args:
        actions: what to do and when (any order).
        origin: ``time.monotonic()`` of the run's start.
    """

    def __init__(self, actions: Sequence[TimedAction], origin: float) -> None:
        self.origin = origin
        self.applied: list[AppliedAction] = []
        self._pending = sorted(actions, key=lambda a: a.at_s)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="timed-faults", daemon=True)
        self._thread.start()

    def _take(self, a: TimedAction) -> None:
        requested = time.monotonic()
        a.apply()
        done = time.monotonic()
        with self._lock:
            self.applied.append(
                AppliedAction(a.label, a.at_s, requested - self.origin, done - self.origin)
            )

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    return
                nxt = self._pending[0]
            if self._stop.wait(max(0.0, self.origin + nxt.at_s - time.monotonic())):
                return
            with self._lock:
                self._pending.pop(0)
            if self._error is not None and not nxt.always:
                continue
            try:
                self._take(nxt)
            except Exception as e:  # reported through check() in the driver's loop
                self._error = self._error or e

    def check(self) -> None:
        """Raise the first action's failure, if any (the driver's loop calls this)."""
        if self._error is not None:
            raise FaultError(f"changing the network failed: {self._error}") from self._error

    def close(self) -> None:
        """Stop the thread; apply the ``always`` actions whose time has not come
        (idempotent). Raises: FaultError (one of those failed)."""
        self._stop.set()
        self._thread.join()
        with self._lock:
            left, self._pending = [a for a in self._pending if a.always], []
        for a in left:
            try:
                self._take(a)
            except Exception as e:
                raise FaultError(f"{a.label} failed: {e}") from e

    def __enter__(self) -> TimedFaults:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
