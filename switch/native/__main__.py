"""``python -m switch.native PROG.p4 ...``: build the native executor of programs ahead of time.

For each program: compile it, generate its C and build it into the cache (``make setup`` does
this for ``p4/*.p4``, so the first switch or test does not wait for the C compiler; the switch
loop's C of :mod:`switch.native.loop` too), then say
whether it runs natively or, if not, why (the Python executor runs it). Exit status 0 unless a
program does not compile at all; ``--strict``: also 1 when one cannot run natively.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from switch.compile import load_program
from switch.errors import P4Error
from switch.native import loop, native_reason
from switch.native.build import BuildError, cache_dir


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m switch.native", description=__doc__.splitlines()[0]
    )
    ap.add_argument("programs", nargs="+", metavar="PROG.p4")
    ap.add_argument("-I", "--include", action="append", default=[], metavar="DIR")
    ap.add_argument("--strict", action="store_true", help="fail when a program is not native")
    args = ap.parse_args(argv)
    rc = 0
    try:  # the switch loop's C (switch.native.loop), shared by every program
        loop.load()
    except BuildError as e:
        print(f"switch loop in C: not built ({e}); tf-switch keeps its loop in Python")
    for path in args.programs:
        try:
            program = load_program(path, tuple(args.include))
        except P4Error as e:
            print(e.render(), file=sys.stderr)
            rc = 1
            continue
        start = time.monotonic()
        reason = native_reason(program)
        if reason is None:
            print(f"{path}: native ({time.monotonic() - start:.1f} s, cache {cache_dir()})")
        else:
            print(f"{path}: Python executor ({reason})")
            if args.strict:
                rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
