"""Microburst telemetry: digests of every switch -> ``results/telemetry.csv`` and live watchers.

fabric.p4 reports each microburst on an egress port as one ``burst_digest_t`` digest (port,
start and end in switch microseconds, peak queue depth in packets, packets sent during the
burst). :class:`TelemetryCollector` is handed every ``DigestList`` of every switch: it decodes
the messages through the P4Info, appends one CSV row per burst, keeps the latest records in
memory (for ``incast`` and ``telemetry recent``), feeds subscribed watchers, and acknowledges
the list. CSV columns: ``switch, port, start_us, end_us, peak_qdepth, packets, drop_pkts``
(peak and packets are packet counts), header written when the file is new; a file with another
header is moved aside to ``telemetry.<unix time>.csv`` first.

``drop_pkts``: the packets the switch tail-dropped at the burst's port (every queue) since the
previous record of that port, or since telemetry started: the switch's own drop counters
(:mod:`controller.drops`), read when the record arrives. A queue only overflows during a burst,
so these are the burst's drops, unless a second burst on the same port already began before the
first one's record came in (its drops so far then count for the first). Empty when the switch
has no drop counters (BMv2).

A burst's record leaves the switch with the next packet's ingress pass, so the controller sends
each switch a packet-out now and then to let the last burst before a quiet spell out
(:class:`FlushPacer` says when): every ``telemetry_flush_s`` while someone watches or bursts
were reported lately, and, once the fabric is quiet, at intervals that double up to
``telemetry_idle_flush_s``, since each flush costs every switch a wake-up, a gRPC message and a
pipeline pass (about half of an idle fabric's CPU at a fixed 0.5 s). ``telemetry recent`` and
``incast`` flush and wait for the answers themselves.
"""

from __future__ import annotations

import collections
import csv
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

CSV_COLUMNS = ("switch", "port", "start_us", "end_us", "peak_qdepth", "packets", "drop_pkts")


@dataclass(frozen=True)
class BurstRecord:
    """One microburst on ``switch``'s egress ``port``."""

    switch: str
    port: int
    start_us: int
    end_us: int
    peak_qdepth: int
    packets: int
    received_unix_s: float = 0.0
    drop_pkts: int | None = None  # tail drops at the port during the burst; None: unknown

    def row(self) -> tuple[object, ...]:
        """The CSV row (:data:`CSV_COLUMNS`)."""
        return (
            self.switch,
            self.port,
            self.start_us,
            self.end_us,
            self.peak_qdepth,
            self.packets,
            self.drop_pkts,
        )

    @classmethod
    def from_digest(
        cls, switch: str, values: dict[str, int], received: float, drop_pkts: int | None = None
    ) -> BurstRecord:
        return cls(
            switch,
            values["port"],
            values["start_us"],
            values["end_us"],
            values["peak_qdepth"],
            values["packets"],
            received,
            drop_pkts,
        )


class FlushPacer:
    """The waits between the controller's flush rounds (see the module docstring).

    ``busy_s`` while there are watchers or a burst was reported within the last ``idle_max_s``;
    after that each wait doubles, up to ``idle_max_s``. A new watcher or report makes the next
    wait ``busy_s`` again (the caller also cuts a long wait short on a new watcher)."""

    def __init__(self, busy_s: float, idle_max_s: float) -> None:
        if busy_s <= 0:
            raise ValueError("busy_s must be positive")
        self.busy_s = busy_s
        self.idle_max_s = max(busy_s, idle_max_s)
        self.wait_s = busy_s

    def next_wait(self, now: float, watchers: int, last_report: float | None) -> float:
        """The wait before the next flush round, after one at monotonic time ``now``."""
        recent = last_report is not None and now - last_report < self.idle_max_s
        if watchers or recent:
            self.wait_s = self.busy_s
        else:
            self.wait_s = min(self.wait_s * 2, self.idle_max_s)
        return self.wait_s


class TelemetryCollector:
    """Collects burst records into a CSV file, a bounded in-memory log and watcher queues."""

    def __init__(self, csv_path: str | Path | None, recent: int = 10_000) -> None:
        self.csv_path = Path(csv_path) if csv_path is not None else None
        self._lock = threading.Lock()
        self._recent: collections.deque[BurstRecord] = collections.deque(maxlen=recent)
        self._watchers: list[queue.Queue[BurstRecord]] = []
        self._file: TextIO | None = None
        # (switch, port) -> tail drops counted when that port's latest record (or the start)
        # was taken; None for a switch without drop counters
        self._drops_seen: dict[str, dict[int, int] | None] = {}
        self.total = 0
        self.closed = False

    def _open(self) -> None:
        if self.csv_path is None or self._file is not None:
            return
        self.csv_path.parent.mkdir(parents=True, exist_ok=True)
        new = not self.csv_path.exists() or self.csv_path.stat().st_size == 0
        if not new:
            with self.csv_path.open(newline="") as f:
                header = next(csv.reader(f), [])
            if tuple(header) != CSV_COLUMNS:  # written by an older version: keep it aside
                self.csv_path.rename(self.csv_path.with_suffix(f".{int(time.time())}.csv"))
                new = True
        self._file = self.csv_path.open("a", newline="")
        if new:
            csv.writer(self._file).writerow(CSV_COLUMNS)
            self._file.flush()

    def add(self, records: list[BurstRecord]) -> None:
        """Record bursts (thread-safe): CSV row, memory, watchers."""
        if not records:
            return
        with self._lock:
            if self.closed:
                return
            self._open()
            if self._file is not None:
                csv.writer(self._file).writerows(r.row() for r in records)
                self._file.flush()
            self._recent.extend(records)
            self.total += len(records)
            watchers = list(self._watchers)
        for w in watchers:
            for r in records:
                w.put(r)

    def drops_baseline(self, switch: str, tail_drops: dict[int, int] | None) -> None:
        """The tail drops per port of ``switch`` when telemetry starts (None: not counted)."""
        with self._lock:
            self._drops_seen[switch] = None if tail_drops is None else dict(tail_drops)

    def add_digest(
        self,
        switch: str,
        decoded: list[dict[str, int]],
        tail_drops: dict[int, int] | None = None,
    ) -> list[BurstRecord]:
        """Records of one digest list; ``tail_drops``: the switch's tail drops per port now
        (None: unknown), which give each record its ``drop_pkts``."""
        now = time.time()
        with self._lock:
            seen = self._drops_seen.get(switch)
            if tail_drops is not None and seen is None:
                seen = self._drops_seen[switch] = {}
            drops: list[int | None] = []
            for v in decoded:
                port = v["port"]
                if tail_drops is None or seen is None:
                    drops.append(None)
                    continue
                # a later burst of the same port in this list gets 0: counted with the first
                now_total = tail_drops.get(port, 0)
                drops.append(max(0, now_total - seen.get(port, 0)))
                seen[port] = now_total
        records = [
            BurstRecord.from_digest(switch, v, now, d) for v, d in zip(decoded, drops, strict=True)
        ]
        self.add(records)
        return records

    def recent(self, since_unix_s: float = 0.0) -> list[BurstRecord]:
        with self._lock:
            return [r for r in self._recent if r.received_unix_s >= since_unix_s]

    def subscribe(self) -> queue.Queue[BurstRecord]:
        q: queue.Queue[BurstRecord] = queue.Queue()
        with self._lock:
            self._watchers.append(q)
        return q

    @property
    def watcher_count(self) -> int:
        with self._lock:
            return len(self._watchers)

    def unsubscribe(self, q: queue.Queue[BurstRecord]) -> None:
        with self._lock:
            if q in self._watchers:
                self._watchers.remove(q)

    def close(self) -> None:
        """Close the CSV file (idempotent); later records are ignored."""
        with self._lock:
            self.closed = True
            if self._file is not None:
                self._file.close()
                self._file = None
