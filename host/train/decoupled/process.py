"""Emulated processes: a slot runs incarnations of a learner (or worker) body in threads, and
chaos kills, restarts, pauses and slows them.

* **kill**: the incarnation's :class:`Life` is marked killed; its thread raises
  :class:`~host.train.decoupled.errors.Killed` at the next point it looks (every step
  boundary, every wait, every sleep) and ends without saying goodbye, as a SIGKILLed process.
  :meth:`Slot.start` later runs a new incarnation (``incarnation`` + 1) in a new thread; the
  body restores what a restarted process has (its last checkpoint).
* **pause**: the body stops at its next step boundary (:meth:`Life.gate`) until resumed, as
  under SIGSTOP; messages for it keep arriving (the socket buffers them).
* **slow**: each step takes ``factor`` times as long (:meth:`Life.pace` sleeps the rest).
* **finish** (the end of the job): a body that said it can hand its work over
  (:attr:`Life.graceful`) ends its step, hands over and returns (:attr:`Life.finishing`);
  any other body, and a paused one, is killed as before.

:meth:`Life.pace` with ``catch_up_s`` > 0 is an emulated accelerator with a steady clock: step
k ends at the previous step's end plus its nominal time, so a member that the host's
scheduler held up (a few processes and Python switches share two cores) takes its next steps
unpadded until it is back on its clock, instead of staying behind for good. Without that,
members that start together drift apart by random walks of host jitter, which a real cluster
of equal accelerators does not do. Only jitter is caught up: a pause (:meth:`Life.gate`), a
wait the member reports (:meth:`Life.restart_clock`: a merge that had not arrived) or a delay
above ``catch_up_s`` restart the clock, so every real stall stays in the member's time.

The slot records when it was down and paused (:class:`Interval`) for the metrics, and any
error of a body that is not a kill (:attr:`Slot.errors`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from host.train.decoupled.errors import Killed

POLL_S = 0.05
JOIN_S = 10.0


@dataclass(frozen=True)
class Interval:
    kind: str  # "down" (killed until restarted) | "paused"
    start_s: float  # time.monotonic()
    end_s: float


class Life:
    """What an incarnation sees of its fate (thread-safe)."""

    def __init__(self, incarnation: int, slow_factor: Callable[[], float]) -> None:
        self.incarnation = incarnation
        self._killed = threading.Event()
        self._running = threading.Event()
        self._running.set()
        self._slow_factor = slow_factor
        self._step_end: float | None = None
        self._finishing = threading.Event()
        self.graceful = False
        """The body hands its work over when the job ends (:meth:`finish`) instead of dying."""
        self.reason = ""

    @property
    def killed(self) -> bool:
        return self._killed.is_set()

    def kill(self, reason: str) -> None:
        self.reason = self.reason or reason
        self._killed.set()
        self._running.set()  # a paused incarnation wakes up to die

    def finish(self, reason: str) -> None:
        """The job ends: a graceful running body finishes (:attr:`finishing`); a paused one,
        or one that cannot hand over, is killed with ``reason``."""
        if self.graceful and self._running.is_set():
            self._finishing.set()
        else:
            self.kill(reason)

    @property
    def finishing(self) -> bool:
        return self._finishing.is_set()

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def check(self) -> None:
        """Raises: Killed (this incarnation was killed)."""
        if self._killed.is_set():
            raise Killed(f"incarnation {self.incarnation}: {self.reason}")

    def gate(self) -> None:
        """Wait while paused.

        Raises:
            Killed: killed before or while paused.
        """
        if not self._running.is_set():
            self.restart_clock()
        while not self._running.wait(POLL_S):
            self.check()
        self.check()

    def sleep(self, seconds: float) -> None:
        """Sleep ``seconds``.

        Raises:
            Killed: killed before or while sleeping.
        """
        if seconds > 0 and self._killed.wait(seconds):
            self.check()
        self.check()

    def restart_clock(self) -> None:
        """The member stalled for a real reason: its next step starts its clock afresh."""
        self._step_end = None

    def pace(self, started: float, min_step_s: float, *, catch_up_s: float = 0.0) -> float:
        """End a step begun at ``started`` (``time.monotonic()``): wait until it has lasted at
        least ``min_step_s``, then the slow-down's share. Returns the step's nominal time
        (compute, padded to ``min_step_s``: its useful work).

        With ``catch_up_s`` > 0 the step ends at the previous step's end plus its nominal time
        (scaled by the slow-down) when the step began at most ``catch_up_s`` after that end:
        host jitter up to that much is caught up (module docstring).

        Raises:
            Killed: killed while waiting.
        """
        now = time.monotonic()
        nominal = max(now - started, min_step_s)
        begin = started
        if self._step_end is not None and 0.0 <= started - self._step_end <= catch_up_s:
            begin = self._step_end
        end = begin + nominal * self._slow_factor()
        self.sleep(end - time.monotonic())
        self._step_end = end if catch_up_s > 0 else None
        return nominal


class Slot:
    """An emulated process of name ``name`` running ``body(life)`` per incarnation.

    Args:
        body: runs one incarnation; returns when the process's work is done (the slot is
            then finished), raises Killed when killed.
    """

    def __init__(self, name: str, body: Callable[[Life], None]) -> None:
        self.name = name
        self.body = body
        self.incarnation = -1
        self.life: Life | None = None
        self.thread: threading.Thread | None = None
        self.finished = threading.Event()
        self.errors: list[BaseException] = []
        self.intervals: list[Interval] = []
        self.slow_factor = 1.0
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._paused_since: float | None = None

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def start(self) -> bool:
        """Run the next incarnation (False: one is running, or the work is done)."""
        with self._lock:
            if self.running or self.finished.is_set():
                return False
            self.incarnation += 1
            life = self.life = Life(self.incarnation, lambda: self.slow_factor)
            now = time.monotonic()
            if self._down_since is not None:
                self.intervals.append(Interval("down", self._down_since, now))
                self._down_since = None
            self.thread = threading.Thread(
                target=self._run, args=(life,), name=f"{self.name}-i{life.incarnation}"
            )
            self.thread.start()
            return True

    def _run(self, life: Life) -> None:
        try:
            self.body(life)
        except Killed:
            return
        except BaseException as e:  # recorded; the run reports it
            with self._lock:
                self.errors.append(e)
            return
        self.finished.set()

    def kill(self, reason: str = "killed (chaos)", *, down: bool = True) -> bool:
        """Kill the running incarnation and wait for its thread (False: none ran).

        Args:
            down: the slot is down from now until the next :meth:`start` (False: the job
                ends).
        """
        with self._lock:
            life, thread = self.life, self.thread
            if life is None or thread is None or not thread.is_alive():
                return False
            life.kill(reason)
            now = time.monotonic()
            self._end_pause(now)
            if down:
                self._down_since = now
        thread.join(JOIN_S)
        return True

    def _end_pause(self, now: float) -> None:
        if self._paused_since is not None:
            self.intervals.append(Interval("paused", self._paused_since, now))
            self._paused_since = None

    def pause(self) -> bool:
        with self._lock:
            if self.life is None or not self.running or self.life.paused:
                return False
            self.life.pause()
            self._paused_since = time.monotonic()
            return True

    def resume(self) -> bool:
        with self._lock:
            if self.life is None or not self.life.paused:
                return False
            self.life.resume()
            self._end_pause(time.monotonic())
            return True

    def set_slow(self, factor: float) -> None:
        self.slow_factor = factor

    def finish(self) -> None:
        """End of the job, first half: tell the running incarnation to finish (or kill it,
        :meth:`Life.finish`) without waiting; :meth:`stop` waits."""
        with self._lock:
            life, thread = self.life, self.thread
        if life is not None and thread is not None and thread.is_alive():
            life.finish("stopped at the end of the job")

    def stop(self) -> None:
        """End of the job: a finishing incarnation gets ``JOIN_S`` to hand over, whatever
        still runs is killed; the open intervals are closed."""
        t = self.thread
        if t is not None and self.life is not None and self.life.finishing:
            t.join(JOIN_S)
        self.kill("stopped at the end of the job", down=False)
        with self._lock:
            now = time.monotonic()
            self._end_pause(now)
            if self._down_since is not None:
                self.intervals.append(Interval("down", self._down_since, now))
                self._down_since = None

    def join(self, timeout_s: float | None = None) -> None:
        t = self.thread
        if t is not None:
            t.join(timeout_s)
