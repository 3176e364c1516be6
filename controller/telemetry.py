"""Microburst telemetry: digests of every switch -> ``results/telemetry.csv`` and live watchers.

fabric.p4 reports each microburst on an egress port as one ``burst_digest_t`` digest (port,
start and end in switch microseconds, peak queue depth in packets, packets sent during the
burst). :class:`TelemetryCollector` is handed every ``DigestList`` of every switch: it decodes
the messages through the P4Info, appends one CSV row per burst, keeps the latest records in
memory (for ``incast`` and ``telemetry recent``), feeds subscribed watchers, and acknowledges
the list. CSV columns: ``switch, port, start_us, end_us, peak_qdepth, packets`` (peak and
packets are packet counts), header written when the file is new.
"""

from __future__ import annotations

import collections
import csv
import queue
import threading
import time
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import TextIO

CSV_COLUMNS = ("switch", "port", "start_us", "end_us", "peak_qdepth", "packets")


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

    def row(self) -> tuple[object, ...]:
        return astuple(self)[: len(CSV_COLUMNS)]

    @classmethod
    def from_digest(cls, switch: str, values: dict[str, int], received: float) -> BurstRecord:
        return cls(
            switch,
            values["port"],
            values["start_us"],
            values["end_us"],
            values["peak_qdepth"],
            values["packets"],
            received,
        )


class TelemetryCollector:
    """Collects burst records into a CSV file, a bounded in-memory log and watcher queues."""

    def __init__(self, csv_path: str | Path | None, recent: int = 10_000) -> None:
        self.csv_path = Path(csv_path) if csv_path is not None else None
        self._lock = threading.Lock()
        self._recent: collections.deque[BurstRecord] = collections.deque(maxlen=recent)
        self._watchers: list[queue.Queue[BurstRecord]] = []
        self._file: TextIO | None = None
        self.total = 0
        self.closed = False

    def _open(self) -> None:
        if self.csv_path is None or self._file is not None:
            return
        self.csv_path.parent.mkdir(parents=True, exist_ok=True)
        new = not self.csv_path.exists() or self.csv_path.stat().st_size == 0
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

    def add_digest(self, switch: str, decoded: list[dict[str, int]]) -> list[BurstRecord]:
        now = time.time()
        records = [BurstRecord.from_digest(switch, v, now) for v in decoded]
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
