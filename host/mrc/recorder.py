"""Event and statistics recorder: what experiments read to plot EV states and goodput over time.

The I/O thread appends :class:`Event` records (EV state changes, floor hits, losses, RTOs,
message completions, errors) and, every ``sample_interval_ms``, one :class:`EvSample` per EV
of every connection (state, cumulative bytes acknowledged, smoothed RTT, window). Both rings
are bounded; readers take snapshots from any thread (``deque`` appends are atomic).
"""

from __future__ import annotations

import csv
import enum
import pathlib
from collections import deque
from dataclasses import astuple, dataclass, fields


class EventKind(enum.Enum):
    CONNECT = "connect"
    EV_STATE = "ev_state"
    FLOOR = "floor"  # a loss that ev_min_active did not let mark the EV ASSUMED_BAD
    LOSS = "loss"
    NACK = "nack"
    RTO = "rto"
    REHASH = "rehash"
    PROBE = "probe"
    MESSAGE = "message"  # a sent message completed (value = completion time in seconds)
    DELIVERED = "delivered"  # a received message was delivered
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Event:
    t_s: float  # time.monotonic() of the endpoint
    host: int
    conn_id: int
    kind: EventKind
    ev: int = -1
    value: float = 0.0
    detail: str = ""


@dataclass(frozen=True, slots=True)
class EvSample:
    t_s: float
    host: int
    conn_id: int
    ev: int
    plane: int
    state: str
    bytes_acked: int  # cumulative; goodput per EV = difference between samples / interval
    packets_lost: int
    srtt_us: float
    cwnd_bytes: int


class Recorder:
    """Bounded rings of events and per-EV samples.

    Args:
        capacity: events kept (oldest dropped first); samples keep the same number.
        record_losses: also record one LOSS event per lost packet (verbose).
    """

    def __init__(self, capacity: int = 100_000, *, record_losses: bool = False) -> None:
        self.record_losses = record_losses
        self._events: deque[Event] = deque(maxlen=capacity)
        self._samples: deque[EvSample] = deque(maxlen=capacity)

    def add(self, event: Event) -> None:
        self._events.append(event)

    def add_sample(self, sample: EvSample) -> None:
        self._samples.append(sample)

    def events(self, kind: EventKind | None = None, conn_id: int | None = None) -> list[Event]:
        return [
            e
            for e in list(self._events)
            if (kind is None or e.kind is kind) and (conn_id is None or e.conn_id == conn_id)
        ]

    def samples(self, conn_id: int | None = None) -> list[EvSample]:
        return [s for s in list(self._samples) if conn_id is None or s.conn_id == conn_id]

    def write_events_csv(self, path: str | pathlib.Path) -> None:
        _write(
            path,
            [f.name for f in fields(Event)],
            [
                (e.t_s, e.host, e.conn_id, e.kind.value, e.ev, e.value, e.detail)
                for e in self.events()
            ],
        )

    def write_samples_csv(self, path: str | pathlib.Path) -> None:
        _write(path, [f.name for f in fields(EvSample)], [astuple(s) for s in self.samples()])


def _write(path: str | pathlib.Path, header: list[str], rows: list[tuple[object, ...]]) -> None:
    p = pathlib.Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
