"""The command line that the experiments on a fabric or the emulator share.

Options with one meaning everywhere (:func:`add_network_option`: ``--network auto|fabric|emu``;
:func:`add_seed_options`: ``--seeds``/``--first-seed``; :func:`add_output_options`:
``--wait-s``, ``--results``, ``--out``, ``--plot-only``), choosing the network
(:func:`choose_network`: ``auto`` is the fabric where this machine can run one, else the
emulator, with a note why), and the run's errors as one ``error:`` line instead of a
traceback (:func:`run_or_report`: the experiment's expected errors and the fabric's own).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

from experiments.fabric_job import fabric_available

_T = TypeVar("_T")

NETWORKS = ("auto", "fabric", "emu")
EMU_NOTE = "running on the in-process emulated fabric (--network emu)"


def add_network_option(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--network",
        choices=NETWORKS,
        default="auto",
        help="auto: the fabric when this machine can run it (root, Mininet), else the emulator",
    )


def add_seed_options(ap: argparse.ArgumentParser, seeds: int, first_seed: int) -> None:
    """``--seeds`` (None unless given: the settings' ``seeds`` stays) and ``--first-seed``."""
    ap.add_argument("--seeds", type=int, default=None, help=f"seeds per cell (default {seeds})")
    ap.add_argument("--first-seed", type=int, default=first_seed)


def add_output_options(ap: argparse.ArgumentParser, csv_name: str) -> None:
    """``--wait-s``, ``--results``, ``--out`` (default ``<results>/<csv_name>``) and
    ``--plot-only``."""
    ap.add_argument("--wait-s", type=float, default=0.0, help="wait for another fabric to stop")
    ap.add_argument("--results", default="results")
    ap.add_argument("--out", default=None, help=f"the main CSV (default <results>/{csv_name})")
    ap.add_argument("--plot-only", action="store_true", help="redraw the PNG from the CSVs")


def main_csv(args: argparse.Namespace, csv_name: str) -> pathlib.Path:
    """The main CSV of :func:`add_output_options`' options."""
    return pathlib.Path(args.out) if args.out else pathlib.Path(args.results) / csv_name


def choose_network(network: str, note: str = EMU_NOTE) -> str:
    """``network``, or for ``auto`` the fabric where this machine can run one and else the
    emulator (printing why, then ``note``)."""
    if network != "auto":
        return network
    why = fabric_available()
    if why is None:
        return "fabric"
    print(f"note: {why}; {note}")
    return "emu"


def print_error(e: object) -> None:
    print(f"error: {e}", file=sys.stderr)


def is_fabric_error(e: BaseException) -> bool:
    """One of the fabric's own errors (busy, bring-up: :mod:`topologies`)."""
    return type(e).__module__.startswith("topologies.")


def run_or_report(run: Callable[[], _T], expected: tuple[type[Exception], ...]) -> _T | None:
    """``run()``; on an ``expected`` error or one of the fabric's own, None after an
    ``error:`` line (named, not a traceback). Anything else propagates."""
    try:
        return run()
    except expected as e:
        print_error(e)
    except Exception as e:
        if not is_fabric_error(e):
            raise
        print_error(e)
    return None


def plot_only(
    needed: Sequence[pathlib.Path], report: Callable[[], str], plot: Callable[[], pathlib.Path]
) -> int:
    """``--plot-only``: the report and the PNG again from the CSVs ``needed`` (exit status 1
    and an error when one is missing)."""
    if not all(p.exists() for p in needed):
        print(
            f"error: no {' and '.join(map(str, needed))} to plot (run the experiment first)",
            file=sys.stderr,
        )
        return 1
    print(report())
    print(f"wrote {plot()}")
    return 0


def wrote(paths: Sequence[pathlib.Path], elapsed_s: float) -> str:
    """The last line of a run: the files written and the time it took."""
    return f"\nwrote {', '.join(map(str, paths))} ({elapsed_s / 60:.1f} min)"
