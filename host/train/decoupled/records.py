"""The records of Decoupled DiLoCo and elastic data-parallel jobs as JSON lines: what a fabric
agent writes as it goes and its driver reads back (nothing is unpickled or evaluated).

One line per record, ``{"kind": K, <the dataclass's fields>}``, one row of
:data:`RECORD_KINDS` per record type. Reading checks the fields' names; fields that hold
records or tuples (a merge's ``included``, a commit's ``group``) are rebuilt by the row's
converters. Lines that are not JSON objects of a known kind with exactly the kind's fields are
counted and skipped (a process killed while writing leaves a partial last line).
"""

from __future__ import annotations

import json
import math
import pathlib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from host.train.decoupled.elastic import AttemptRecord, Commit, Reform, WorkerEval
from host.train.decoupled.learner import StepRecord
from host.train.decoupled.syncer import EvalPoint, Included, LivenessEvent, MergeRecord


@dataclass(frozen=True)
class MemberEnd:
    """How one incarnation of a learner or worker ended, with its counts."""

    role: str
    rank: int
    incarnation: int
    status: str  # "finished" | "stopped" | "failed"
    error: str
    counts: dict[str, int]
    bytes_sent: int
    bytes_received: int


@dataclass(frozen=True)
class HubSummary:
    """What a syncer or coordinator says at the end of a job."""

    role: str
    status: str  # "finished" | "failed"
    error: str
    stopped_at_s: float  # since the job's origin
    tokens_merged: float
    refused: dict[str, int]
    counts: dict[str, int]
    unsent: int


Converter = Callable[[Any], Any]


@dataclass(frozen=True)
class RecordKind:
    cls: type[Any]
    convert: Mapping[str, Converter] = field(default_factory=dict)


def _tuple(x: Any) -> tuple[Any, ...]:
    return tuple(x)


def _included(x: Any) -> tuple[Included, ...]:
    return tuple(Included(**i) for i in x)


RECORD_KINDS: dict[str, RecordKind] = {
    "step": RecordKind(StepRecord),
    "attempt": RecordKind(AttemptRecord),
    "worker_eval": RecordKind(WorkerEval),
    "merge": RecordKind(MergeRecord, {"included": _included}),
    "eval": RecordKind(EvalPoint),
    "liveness": RecordKind(LivenessEvent),
    "commit": RecordKind(Commit, {"group": _tuple}),
    "reform": RecordKind(Reform, {"workers": _tuple, "group": _tuple}),
    "member_end": RecordKind(MemberEnd),
    "hub": RecordKind(HubSummary),
}
"""Record kind name → its dataclass and the converters of its nested fields."""

KIND_OF: dict[type[Any], str] = {k.cls: name for name, k in RECORD_KINDS.items()}


def record_line(record: object) -> str:
    """One record as a JSON line (no newline).

    Raises:
        KeyError: not a record type of :data:`RECORD_KINDS`.
    """
    kind = KIND_OF[type(record)]
    return json.dumps({"kind": kind, **asdict(record)})  # type: ignore[call-overload]


def _decode(doc: object) -> object | None:
    if not isinstance(doc, dict):
        return None
    spec = RECORD_KINDS.get(str(doc.pop("kind", "")))
    if spec is None or set(doc) != {f.name for f in fields(spec.cls)}:
        return None
    try:
        kw = {k: spec.convert.get(k, lambda v: v)(v) for k, v in doc.items()}
        rec: object = spec.cls(**kw)
        return rec
    except (TypeError, ValueError):
        return None


@dataclass
class Records:
    """Every record of one or more files, by type."""

    items: list[object] = field(default_factory=list)
    skipped: int = 0

    def of(self, cls: type[Any]) -> list[Any]:
        return [r for r in self.items if type(r) is cls]


def read_records(*paths: str | pathlib.Path, into: Records | None = None) -> Records:
    """The records of the files ``paths`` (missing files hold none)."""
    out = into if into is not None else Records()
    for path in paths:
        p = pathlib.Path(path)
        if not p.exists():
            continue
        with p.open() as f:
            for line in f:
                try:
                    rec = _decode(json.loads(line))
                except ValueError:
                    rec = None
                if rec is None:
                    out.skipped += 1
                else:
                    out.items.append(rec)
    return out


def json_number(value: float) -> float | None:
    """NaN and infinities as None (strict JSON events)."""
    return value if math.isfinite(value) else None
