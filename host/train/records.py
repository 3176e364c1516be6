"""Training records as JSON lines: what agents write and drivers read back (no pickle).

Each line is ``{"kind": K, ...fields}`` with ``K`` one of :data:`RECORD_KINDS`; reading checks
the field names against the dataclass and converts each value to the field's declared type
(``int``, ``float``, ``bool``), so a malformed file raises :class:`RecordError` instead of
producing half-typed objects.
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import asdict, fields
from typing import Any

from host.train.loop import EvalPoint, ServerRecord, WorkerRound

Record = WorkerRound | EvalPoint | ServerRecord
"""A training record: a worker's round, an evaluation, or a server's round."""

RECORD_KINDS: dict[str, type[Record]] = {
    "worker_round": WorkerRound,
    "eval": EvalPoint,
    "server_round": ServerRecord,
}
_KIND_OF = {cls: kind for kind, cls in RECORD_KINDS.items()}
_CONVERT = {"int": int, "float": float, "bool": bool, "str": str}


class RecordError(ValueError):
    """A record line that does not describe a known record."""


def to_line(record: Record) -> str:
    """Raises: TypeError (not a training record)."""
    kind = _KIND_OF.get(type(record))
    if kind is None:
        raise TypeError(f"not a training record: {type(record).__name__}")
    return json.dumps({"kind": kind, **asdict(record)})


def from_line(line: str) -> Record:
    """Raises: RecordError."""
    try:
        doc = json.loads(line)
        cls = RECORD_KINDS[doc.pop("kind")]
    except (json.JSONDecodeError, KeyError, AttributeError, TypeError) as e:
        raise RecordError(f"not a record line: {line[:80]!r}") from e
    want = {f.name: f.type for f in fields(cls)}
    if set(doc) != set(want):
        raise RecordError(f"{cls.__name__}: fields {sorted(doc)} != {sorted(want)}")
    try:
        values: dict[str, Any] = {k: _CONVERT[str(want[k])](doc[k]) for k in want}
        return cls(**values)
    except (KeyError, TypeError, ValueError) as e:
        raise RecordError(f"{cls.__name__}: bad value ({e})") from e


def read_records(path: str | pathlib.Path) -> list[Record]:
    return [from_line(x) for x in pathlib.Path(path).read_text().splitlines() if x.strip()]
