"""What the resilience experiments measure, from the runs' records (pure functions).

* **Useful work.** A learner step is useful once a report sent at or after it by the same
  learner incarnation has been merged: the report carries that step's progress into the
  global model. Steps after an incarnation's last merged report are lost (it was killed, or
  the job ended first). An elastic data-parallel attempt is useful when its round was
  committed (a failed round's gradients are discarded). A step's work is its nominal time:
  compute padded to the emulated step time, without a slow-down's stretch.
* **Goodput** = useful learner-time ÷ allocated learner-time, where every one of the M
  learners (workers) is allocated for the whole wall time of the job, down or not.
* **Uptime** = the fraction of wall time during which the global model advances: the length
  of the union of the useful steps' intervals (from a step's start to the end of the wait
  for its due merges; for data parallel, to its round's commit) ÷ wall time. Time when every
  learner is down, paused, or doing work that will be lost does not count.
* **Longest stall**: the longest stretch, from the job's first useful step to its end, in
  which no useful step ran (the global model stood still).
* **Tokens merged**: what the global model has taken in. A Decoupled DiLoCo report counts
  its tokens for one fragment, 1/P of the model: Σ over merges of the reports' tokens ÷ P
  (steps lost in a kill, or overwritten in the overlap, do not count). Elastic data
  parallel: Σ over committed rounds of the group's tokens.
* **Per fragment**: merges, mean quorum (reports per merge), mean grace window granted and
  waited, tokens merged (:func:`fragment_stats`).
* **Loss vs tokens and vs wall-clock**: the syncer's evaluations of the global model
  (:class:`~host.train.decoupled.syncer.EvalPoint`), the elastic job's evaluations joined with
  the tokens its commits merged (:func:`elastic_curve`).

:func:`write_rows` writes any list of these records as a CSV with a header row.
"""

from __future__ import annotations

import csv
import pathlib
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields, is_dataclass
from typing import Any

from host.train.decoupled.elastic import AttemptRecord, Commit, WorkerEval
from host.train.decoupled.learner import StepRecord
from host.train.decoupled.syncer import EvalPoint, MergeRecord


@dataclass(frozen=True)
class Work:
    """One step (or attempt) of one member, and whether it reached the global model."""

    member: int
    start_at_s: float
    end_at_s: float
    work_s: float
    useful: bool


def union_s(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by ``intervals`` (overlaps counted once; empty ones ignored)."""
    total, end = 0.0, float("-inf")
    for a, b in sorted((a, b) for a, b in intervals if b > a):
        if a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def longest_gap_s(intervals: Iterable[tuple[float, float]], end_s: float) -> float:
    """The longest stretch from the first interval's start to ``end_s`` that no interval
    covers (0 without intervals)."""
    spans = sorted((a, b) for a, b in intervals if b > a)
    if not spans:
        return 0.0
    longest, reach = 0.0, spans[0][1]
    for a, b in spans[1:]:
        longest = max(longest, a - reach)
        reach = max(reach, b)
    return max(longest, end_s - reach)


def goodput(work: Sequence[Work], members: int, wall_s: float) -> float:
    """Useful work ÷ (members × wall time) (0 for an empty job)."""
    if members < 1 or wall_s <= 0:
        return 0.0
    return sum(w.work_s for w in work if w.useful) / (members * wall_s)


def uptime(work: Sequence[Work], wall_s: float) -> float:
    """The union of useful intervals, clipped to [0, wall], ÷ wall time."""
    if wall_s <= 0:
        return 0.0
    return (
        union_s((max(0.0, w.start_at_s), min(wall_s, w.end_at_s)) for w in work if w.useful)
        / wall_s
    )


def decoupled_work(steps: Sequence[StepRecord], merges: Sequence[MergeRecord]) -> list[Work]:
    """The learners' steps, useful up to each incarnation's last merged report."""
    last: dict[tuple[int, int], int] = {}
    for m in merges:
        for x in m.included:
            key = (x.learner, x.incarnation)
            last[key] = max(last.get(key, 0), x.step)
    return [
        Work(
            s.learner,
            s.start_at_s,
            s.end_at_s,
            s.work_s,
            s.step <= last.get((s.learner, s.incarnation), 0),
        )
        for s in steps
    ]


def elastic_work(attempts: Sequence[AttemptRecord]) -> list[Work]:
    """The workers' attempts, useful when committed."""
    return [Work(a.worker, a.start_at_s, a.end_at_s, a.work_s, a.committed) for a in attempts]


@dataclass(frozen=True)
class FragmentStats:
    fragment: int
    merges: int
    mean_quorum: float
    mean_grace_s: float
    mean_waited_s: float
    max_staleness: int
    tokens: int


def fragment_stats(merges: Sequence[MergeRecord], fragments: int) -> list[FragmentStats]:
    out = []
    for p in range(fragments):
        ms = [m for m in merges if m.fragment == p]
        n = len(ms) or 1
        out.append(
            FragmentStats(
                p,
                len(ms),
                sum(m.quorum for m in ms) / n,
                sum(m.grace_s for m in ms) / n,
                sum(m.waited_s for m in ms) / n,
                max((m.staleness for m in ms), default=0),
                sum(m.tokens for m in ms),
            )
        )
    return out


@dataclass(frozen=True)
class CurvePoint:
    """The global model's validation loss after ``tokens`` merged, at ``at_s``."""

    at_s: float
    tokens: float
    val_loss: float


def decoupled_curve(evals: Sequence[EvalPoint]) -> list[CurvePoint]:
    return [CurvePoint(e.at_s, e.tokens_merged, e.val_loss) for e in evals]


def elastic_curve(evals: Sequence[WorkerEval], commits: Sequence[Commit]) -> list[CurvePoint]:
    """Each evaluation after round r with the tokens of the commits of rounds < r."""
    by_round: dict[int, int] = {}
    for c in commits:
        by_round[c.round] = c.tokens  # the last commit of a round
    out = []
    for e in sorted(evals, key=lambda e: e.at_s):
        tokens = float(sum(t for r, t in by_round.items() if r < e.round))
        out.append(CurvePoint(e.at_s, tokens, e.val_loss))
    return out


@dataclass(frozen=True)
class Summary:
    """One run in one row."""

    algorithm: str
    members: int
    wall_s: float
    goodput: float
    uptime: float
    useful_s: float
    allocated_s: float
    steps: int  # steps (attempts) taken, useful or not
    useful_steps: int
    tokens_merged: float  # the global model's (decoupled: Σ report tokens ÷ P)
    down_s: float  # killed until restarted, summed over members
    paused_s: float
    final_val_loss: float
    longest_stall_s: float = 0.0


def summarize(
    algorithm: str,
    work: Sequence[Work],
    members: int,
    wall_s: float,
    *,
    tokens_merged: float,
    down_s: float,
    paused_s: float,
    final_val_loss: float,
) -> Summary:
    useful = [w for w in work if w.useful]
    return Summary(
        algorithm,
        members,
        wall_s,
        goodput(work, members, wall_s),
        uptime(work, wall_s),
        sum(w.work_s for w in useful),
        members * wall_s,
        len(work),
        len(useful),
        tokens_merged,
        down_s,
        paused_s,
        final_val_loss,
        longest_gap_s(((max(0.0, w.start_at_s), min(wall_s, w.end_at_s)) for w in useful), wall_s),
    )


def _row(record: Any) -> dict[str, object]:
    if not is_dataclass(record) or isinstance(record, type):
        raise TypeError(f"not a dataclass record: {record!r}")
    return {k: (v if not isinstance(v, tuple) else repr(v)) for k, v in asdict(record).items()}


def write_rows(path: str | pathlib.Path, records: Sequence[Any]) -> None:
    """``records`` (instances of one dataclass) as a CSV with a header row.

    Raises:
        TypeError: not dataclass instances, or of different types.
        ValueError: no records (no header to write).
    """
    if not records:
        raise ValueError(f"no records for {path}")
    kind = type(records[0])
    if any(type(r) is not kind for r in records):
        raise TypeError(f"records of different types for {path}")
    p = pathlib.Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    names = [f.name for f in fields(kind)]
    with p.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=names)
        w.writeheader()
        for r in records:
            w.writerow(_row(r))
