"""``tf-p4``: the command line of the software P4 target's compiler.

    tf-p4 check PROG.p4                  type-check only; errors as file:line:col
    tf-p4 info PROG.p4 [-o FILE]         P4Info as p4c --p4runtime-files writes it
    tf-p4 compile PROG.p4 [-o FILE]      the device config that tf-switch loads
    tf-p4 stf PROG.p4 TEST.stf           run an STF test (p4c's format)

Every error is printed as ``file:line:col: message`` with the source line; the exit status is
1 for errors in the input and 2 for wrong usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from switch.errors import P4Error

if TYPE_CHECKING:
    from switch.compile import CompiledProgram


def _defines(items: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, _, value = item.partition("=")
        out[name] = value if _ else "1"
    return out


def _load(args: argparse.Namespace) -> CompiledProgram:
    from switch.compile import load_program

    return load_program(args.program, args.include, _defines(args.define))


def cmd_check(args: argparse.Namespace) -> int:
    prog = _load(args)
    s = prog.schema
    print(
        f"{args.program}: ok ({len(s.tables)} tables, {len(s.actions)} actions, "
        f"{len(s.registers)} registers, {len(s.counters)} counters)"
    )
    if args.emit_python:
        Path(args.emit_python).write_text(prog.source)
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from switch.p4info import p4info_text, write_p4info

    prog = _load(args)
    if args.output:
        write_p4info(prog.schema, args.output)
    else:
        sys.stdout.write(p4info_text(prog.schema))
    return 0


def cmd_compile(args: argparse.Namespace) -> int:
    from switch.compile.package import load_device_config, make_device_config
    from switch.p4info import write_p4info

    cfg = make_device_config(args.program, args.include, _defines(args.define))
    prog = load_device_config(cfg)  # proves it compiles
    out = Path(args.output or Path(args.program).with_suffix(".tfp4.json").name)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(cfg)
    if args.p4info:
        write_p4info(prog.schema, args.p4info)
    print(f"wrote {out}" + (f" and {args.p4info}" if args.p4info else ""))
    return 0


def cmd_stf(args: argparse.Namespace) -> int:
    from switch.stf import main_stf

    return main_stf(args.program, args.stf, args.include, args.verbose, args.load_modules)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tf-p4", description="tailfabric's P4-16/v1model compiler")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("program", help="P4-16 source file (v1model)")
        sp.add_argument(
            "-I",
            "--include",
            action="append",
            default=[],
            metavar="DIR",
            help="add an include directory",
        )
        sp.add_argument(
            "-D",
            "--define",
            action="append",
            default=[],
            metavar="NAME[=VALUE]",
            help="define a preprocessor macro",
        )

    sp = sub.add_parser("check", help="parse and type-check a program")
    common(sp)
    sp.add_argument("--emit-python", metavar="FILE", help="also write the generated Python")
    sp.set_defaults(func=cmd_check)
    sp = sub.add_parser("info", help="write the P4Info (text protobuf) of a program")
    common(sp)
    sp.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="output file (.txt/.txtpb text, .bin binary, .json JSON)",
    )
    sp.set_defaults(func=cmd_info)
    sp = sub.add_parser("compile", help="write the device config tf-switch loads")
    common(sp)
    sp.add_argument("-o", "--output", metavar="FILE", help="device config (default PROG.tfp4.json)")
    sp.add_argument("--p4info", metavar="FILE", help="also write the P4Info")
    sp.set_defaults(func=cmd_compile)
    sp = sub.add_parser("stf", help="run an STF test against a program")
    common(sp)
    sp.add_argument("stf", help="test file in p4c's STF format")
    sp.add_argument("-v", "--verbose", action="store_true", help="print every command")
    sp.add_argument(
        "--load-modules",
        action="append",
        default=[],
        metavar="MOD",
        help="Python module (file or dotted name) registering the program's extern functions "
        "(as BMv2's --load-modules; see switch/pipeline/extern_modules.py)",
    )
    sp.set_defaults(func=cmd_stf)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except P4Error as err:
        print(err.render(), file=sys.stderr)
        return 1
    except OSError as err:
        print(f"error: {err.filename or ''}: {err.strerror}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
