"""Random well-typed programs over headers, header unions and stacks never crash the compiler
or the executor (issue 15: header unions in structs and stacks raised AttributeError).

Each program of :mod:`tests.unit.p4_program_gen` is compiled and run on frames shaped like
what its parser expects (and truncated or extended ones). Compilation may only fail with a
clear "not supported" error; running may not raise at all (parser errors are the executor's
business: ingress sees ``parser_error``). The seeds are fixed, so a failure names the seed to
replay with ``python -m tests.unit.p4_program_gen --show SEED``.

``TF_FUZZ_PROGRAMS`` sets how many programs run (default 60, a few seconds); the module's own
command line runs larger counts (``--programs 10000``).
"""

from __future__ import annotations

import os

from tests.unit.p4_program_gen import random_program, run

FUZZ_PROGRAMS_ENV = "TF_FUZZ_PROGRAMS"
PACKETS_PER_PROGRAM = 8


def test_random_programs_compile_and_run_without_crashing() -> None:
    count = int(os.environ.get(FUZZ_PROGRAMS_ENV, "60"))
    res = run(range(count), PACKETS_PER_PROGRAM)
    assert not res.failures, "\n".join(f"seed {s}: {what}" for s, what in res.failures[:10])
    assert res.programs + res.unsupported == count
    assert res.packets == res.programs * PACKETS_PER_PROGRAM


def test_generator_is_deterministic_and_covers_unions_and_stacks() -> None:
    texts = [random_program(seed).text() for seed in range(40)]
    assert texts == [random_program(seed).text() for seed in range(40)]
    joined = "\n".join(texts)
    for construct in (
        "header_union",
        "].m",
        ".next.m",
        "push_front",
        "exit;",
        "inout",
        "out H",
        "varbit<",
        "pkt.extract(hdr.v0, ",
        ".opt == hdr.",
        "for (bit<8> i",
        " in 8w0 .. ",
        "break;",
        "continue;",
    ):
        assert construct in joined, construct
