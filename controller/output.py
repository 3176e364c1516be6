"""Command results and their three renderings: an aligned table (default), JSON, CSV.

A :class:`Result` is columns + rows + a one-line message. JSON is one object
``{"message": ..., "rows": [{column: value}, ...]}``; CSV is the header and the rows (a result
without rows becomes one ``message`` column); the table prints the rows aligned and the
message under them.
"""

from __future__ import annotations

import csv
import enum
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass


class Format(enum.StrEnum):
    TABLE = "table"
    JSON = "json"
    CSV = "csv"


FORMAT_FLAGS = {"--json": Format.JSON, "--csv": Format.CSV, "--table": Format.TABLE}


@dataclass(frozen=True)
class Result:
    """What a command returns."""

    message: str = ""
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[object, ...], ...] = ()

    @classmethod
    def table(
        cls, columns: Sequence[str], rows: Sequence[Sequence[object]], message: str = ""
    ) -> Result:
        return cls(message, tuple(columns), tuple(tuple(r) for r in rows))

    def records(self) -> list[dict[str, object]]:
        return [dict(zip(self.columns, r)) for r in self.rows]


def split_format(argv: Sequence[str]) -> tuple[list[str], Format]:
    """Take ``--json`` / ``--csv`` / ``--table`` out of ``argv`` (the last one wins)."""
    fmt = Format.TABLE
    rest = []
    for a in argv:
        if a in FORMAT_FLAGS:
            fmt = FORMAT_FLAGS[a]
        else:
            rest.append(a)
    return rest, fmt


def _cell(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.3f}".rstrip("0").rstrip(".") if v == v else "nan"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return "" if v is None else str(v)


def render(result: Result, fmt: Format) -> str:
    match fmt:
        case Format.JSON:
            return json.dumps({"message": result.message, "rows": result.records()})
        case Format.CSV:
            buf = io.StringIO()
            w = csv.writer(buf, lineterminator="\n")
            if result.columns:
                w.writerow(result.columns)
                w.writerows([_cell(c) for c in r] for r in result.rows)
            else:
                w.writerow(["message"])
                w.writerow([result.message])
            return buf.getvalue().rstrip("\n")
        case Format.TABLE:
            return render_table(result)
    raise AssertionError(fmt)


def render_table(result: Result) -> str:
    lines: list[str] = []
    if result.columns and result.rows:
        cells = [[_cell(c) for c in r] for r in result.rows]
        widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(result.columns)]
        lines.append("  ".join(h.ljust(w) for h, w in zip(result.columns, widths)).rstrip())
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    if result.message:
        lines.append(result.message)
    return "\n".join(lines)


def render_record(
    columns: Sequence[str], row: Sequence[object], fmt: Format, header: bool = False
) -> str:
    """One streamed row (``telemetry watch``): a JSON object, a CSV line, or ``k=v`` pairs."""
    match fmt:
        case Format.JSON:
            return json.dumps(dict(zip(columns, row)))
        case Format.CSV:
            buf = io.StringIO()
            w = csv.writer(buf, lineterminator="\n")
            if header:
                w.writerow(columns)
            w.writerow([_cell(c) for c in row])
            return buf.getvalue().rstrip("\n")
        case Format.TABLE:
            return "  ".join(f"{c}={_cell(v)}" for c, v in zip(columns, row))
    raise AssertionError(fmt)
