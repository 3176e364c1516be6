"""Table idle timeouts: ``IdleTimeoutNotification`` stream messages for entries nobody hit.

Following the "Idle-timeout" and "Table Idle Timeout Notification" sections of the
specification (and what PI does for BMv2): a background thread sweeps every ``poll_s`` seconds
the tables with ``support_timeout = true``; an entry with a TTL (``idle_timeout_ns`` > 0) that
has not been hit for at least its TTL is reported, and its timer restarts, so an entry that stays
idle is reported again one TTL later. The entries of one table found in one sweep go out in one
``IdleTimeoutNotification`` (key, ``controller_metadata``, ``metadata`` and ``idle_timeout_ns``
of each) to the primary stream of the default role; without a primary they are dropped (and
counted). Time is the device's clock (``Device.now_us``, the clock that stamps packets): the
engine gives it to every idle-timeout table of the running state, whose lookups then record
their hits (:attr:`switch.pipeline.tables.Table.hit_clock_us`).

A sweep remembers when the next entry can be due at the earliest (a hit only moves that later)
and the next ones do nothing, without the device lock, until then or until an entry gains,
changes or loses a TTL (:attr:`~switch.pipeline.tables.Table.timed_version`).

While no entry of the running state has a TTL the thread only looks every
:data:`IDLE_POLL_S` seconds (an idle switch should not wake up 100 times a second); an entry
inserted meanwhile is first swept at most that much later, well inside any useful TTL.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from p4.v1 import p4runtime_pb2

from switch.device.device import Device
from switch.p4rt.arbitration import DEFAULT_ROLE, Arbiter
from switch.p4rt.codec import encode_match
from switch.p4rt.entity_tables import unpack_cookie
from switch.p4rt.pipeline_view import PipelineView
from switch.pipeline.state import SwitchState
from switch.pipeline.tables import Table, TableEntry

log = logging.getLogger(__name__)

#: How often the tables are swept for idle entries (the specification's example uses 10 ms).
DEFAULT_POLL_S = 0.01
#: How often the thread looks while no entry has a TTL.
IDLE_POLL_S = 0.1


@dataclass
class IdleStats:
    """What the sweeps found and sent."""

    sweeps: int = 0
    notifications: int = 0  # IdleTimeoutNotification messages sent
    entries: int = 0  # table entries in them
    no_primary_drops: int = 0  # entries found idle with no primary stream to tell


def bind_clocks(device: Device, state: SwitchState) -> None:
    """Give every idle-timeout table of ``state`` the device clock (call with the lock held).

    Entries that were already there (a state carried over by RECONCILE_AND_COMMIT, or written
    before any P4Runtime request) had no clock: their timers start now."""
    now_ns = device.now_us() * 1000
    for table in state.tables.values():
        if table.spec.support_timeout and table.hit_clock_us is None:
            table.hit_clock_us = device.now_us
            for e in table.entries():
                e.last_hit_ns = now_ns


def notified_entry(
    view: PipelineView, table_id: int, e: TableEntry, cookie: tuple[int, bytes]
) -> p4runtime_pb2.TableEntry:
    """What a notification says of one entry: its key, cookies and TTL."""
    tv = view.tables[table_id]
    return p4runtime_pb2.TableEntry(
        table_id=table_id,
        match=encode_match(tv, e.match),
        priority=e.priority,
        controller_metadata=cookie[0],
        metadata=cookie[1],
        idle_timeout_ns=e.idle_timeout_ns,
    )


class IdleTimeoutEngine:
    """Sweeps one device's idle-timeout tables and notifies the primary client."""

    def __init__(
        self,
        device: Device,
        arbiter: Arbiter,
        view_of: Callable[[], PipelineView | None],
        poll_s: float = DEFAULT_POLL_S,
    ) -> None:
        self.device = device
        self.arbiter = arbiter
        self.view_of = view_of
        self.poll_s = poll_s
        self.stats = IdleStats()
        self._bound: SwitchState | None = None
        self._seen: tuple[int, ...] = ()  # timed_version of each idle-timeout table at a sweep
        self._next_due_ns: int | None = None  # the earliest an entry can be due; None: none
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ----- thread

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="p4rt-idle", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s if self._busy() else max(self.poll_s, IDLE_POLL_S)):
            try:
                self.tick()
            except Exception:  # keep sweeping whatever one pass ran into
                log.exception("idle-timeout sweep failed")

    def _busy(self) -> bool:
        """Whether some entry of the running state has a TTL (or a new state is to bind)."""
        state = self.device.state
        if state is None:
            return False
        try:
            return state is not self._bound or bool(self._timed_tables(state))
        except RuntimeError:  # a table changed while it was looked at (no lock taken here)
            return True

    # ----- one sweep

    def bind(self, state: SwitchState) -> None:
        """Time the hits of ``state``'s idle-timeout tables (call with ``device.lock`` held)."""
        if state is not self._bound:
            bind_clocks(self.device, state)
            self._bound = state

    def _timed_tables(self, state: SwitchState) -> list[Table]:
        return [t for t in state.tables.values() if t.spec.support_timeout and t.timed_entries()]

    @staticmethod
    def _versions(state: SwitchState) -> tuple[int, ...]:
        return tuple(t.timed_version for t in state.tables.values() if t.spec.support_timeout)

    def _nothing_due(self, state: SwitchState) -> bool:
        """Decided without the device lock: no TTL changed and no entry can be due yet."""
        if state is not self._bound or self._versions(state) != self._seen:
            return False
        due = self._next_due_ns
        return due is None or self.device.now_us() * 1000 < due

    def tick(self) -> int:
        """Sweep once; returns how many entries were found idle."""
        state = self.device.state
        if state is None or self._nothing_due(state):
            return 0
        found = 0
        with self.device.lock:
            state = self.device.state
            view = self.view_of()
            if state is None or view is None:
                return 0
            self.bind(state)
            self.stats.sweeps += 1
            now_ns = self.device.now_us() * 1000
            ids = {tv.name: tv.id for tv in view.tables.values()}
            next_due: int | None = None
            for table in self._timed_tables(state):
                n, due = self._sweep(view, ids.get(table.name), table, now_ns)
                found += n
                next_due = due if next_due is None else min(due, next_due)
            self._seen = self._versions(state)
            self._next_due_ns = next_due
        return found

    def _sweep(
        self, view: PipelineView, table_id: int | None, table: Table, now_ns: int
    ) -> tuple[int, int]:
        """Report one table's idle entries; (how many, when the next can be due at the earliest)."""
        idle: list[TableEntry] = []
        next_due = now_ns + max(1, min(e.idle_timeout_ns for e in table.timed_entries()))
        for e in table.timed_entries():
            due = e.last_hit_ns + e.idle_timeout_ns
            if now_ns >= due:
                idle.append(e)
                e.last_hit_ns = now_ns  # the timer restarts whether or not anyone is told
            elif due < next_due:
                next_due = due
        if not idle:
            return 0, next_due
        sink = self.arbiter.primary_sink(DEFAULT_ROLE)
        if table_id is None or sink is None:
            self.stats.no_primary_drops += len(idle)
            return len(idle), next_due
        msg = p4runtime_pb2.StreamMessageResponse()
        note = msg.idle_timeout_notification
        for e in idle:
            note.table_entry.append(
                notified_entry(view, table_id, e, unpack_cookie(e.controller_metadata))
            )
        note.timestamp = time.time_ns()
        if sink.send(msg, droppable=True):
            self.stats.notifications += 1
            self.stats.entries += len(idle)
        else:
            self.stats.no_primary_drops += len(idle)
        return len(idle), next_due
