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
        self.reason = ""

    @property
    def killed(self) -> bool:
        return self._killed.is_set()

    def kill(self, reason: str) -> None:
        self.reason = self.reason or reason
        self._killed.set()
        self._running.set()  # a paused incarnation wakes up to die

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

    def pace(self, started: float, min_step_s: float) -> float:
        """End a step begun at ``started`` (``time.monotonic()``): wait until it has lasted at
        least ``min_step_s``, then the slow-down's share. Returns the step's nominal time
        (compute, padded to ``min_step_s``: its useful work).

        Raises:
            Killed: killed while waiting.
        """
        nominal = max(time.monotonic() - started, min_step_s)
        end = started + nominal * self._slow_factor()
        self.sleep(end - time.monotonic())
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

    def stop(self) -> None:
        """End of the job: kill whatever runs and close the open intervals."""
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
