"""A native fast path for compiled P4 programs: generated C, built with cffi, Python as fallback.

:func:`make_switch` is what builds a switch for a program: with mode ``auto`` (the default) it
returns a :class:`NativeSwitch` when the program's C could be generated and built, else the
Python :class:`~switch.pipeline.v1model.V1Switch` (with a warning saying why); ``on`` raises
:class:`NativeUnavailable` with the reason instead; ``off`` always gives the Python executor.
Both have the same interface (``process``, ``ingress_pass``/``egress_pass``, ``state``); the
native one adds ``process_batch`` (many packets per call into C).

Modules: :mod:`~switch.native.cgen` (the C generator), :mod:`~switch.native.runtime_c` (the C
every program shares: tables, hashes, the per-packet driver), :mod:`~switch.native.build`
(cffi build into a cache) and :mod:`~switch.native.executor` (:class:`NativeSwitch`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from switch.compile import CompiledProgram
from switch.native.build import BuildError, build
from switch.native.cgen import NativeProgram, Unsupported, generate_c
from switch.native.executor import NativeSwitch
from switch.pipeline.drops import DropCounters
from switch.pipeline.state import SwitchState
from switch.pipeline.v1model import V1Switch

__all__ = [
    "MODES",
    "NativeSwitch",
    "NativeUnavailable",
    "default_mode",
    "load_native",
    "make_switch",
    "native_reason",
    "set_default_mode",
]

log = logging.getLogger("tailfabric.switch")

MODES = ("auto", "on", "off")


class NativeUnavailable(Exception):
    """The native executor cannot run this program (the message says why)."""


_mode = os.environ.get("TF_NATIVE", "auto")
# program fingerprint -> (generated program, cffi module) or the reason it is unavailable
_cache: dict[str, tuple[NativeProgram, Any] | str] = {}
_warned: set[str] = set()


def set_default_mode(mode: str) -> None:
    """The mode :func:`make_switch` uses when given none (``tf-switch --native``)."""
    global _mode
    if mode not in MODES:
        raise ValueError(f"native mode must be one of {', '.join(MODES)}, got {mode!r}")
    _mode = mode


def default_mode() -> str:
    return _mode if _mode in MODES else "auto"


def load_native(program: CompiledProgram) -> tuple[NativeProgram, Any]:
    """The program's generated C, built (once per process and program).

    Raises:
        NativeUnavailable: a construct the C generator does not support, or no working
            compiler; the message says which.
    """
    got = _cache.get(program.fingerprint)
    if got is None:
        try:
            npg = generate_c(program)
            got = (npg, build(npg.source))
        except Unsupported as e:
            got = f"not supported by the C generator: {e}"
        except BuildError as e:
            got = str(e)
        _cache[program.fingerprint] = got
    if isinstance(got, str):
        raise NativeUnavailable(f"{program.path}: {got}")
    return got


def native_reason(program: CompiledProgram) -> str | None:
    """None when the native executor can run ``program``, else why not."""
    try:
        load_native(program)
    except NativeUnavailable as e:
        return str(e)
    return None


def make_switch(
    program: CompiledProgram,
    state: SwitchState | None = None,
    *,
    seed: int = 0,
    clock: Callable[[], int] | None = None,
    drops: DropCounters | None = None,
    mode: str | None = None,
) -> V1Switch:
    """A switch running ``program``: native where possible (see the module docstring)."""
    mode = mode or default_mode()
    if mode not in MODES:
        raise ValueError(f"native mode must be one of {', '.join(MODES)}, got {mode!r}")
    if mode != "off":
        try:
            built = load_native(program)
        except NativeUnavailable as e:
            if mode == "on":
                raise
            if program.fingerprint not in _warned:
                _warned.add(program.fingerprint)
                log.warning("native executor unavailable, using Python: %s", e)
        else:
            return NativeSwitch(program, built, state, seed=seed, clock=clock, drops=drops)
    return V1Switch(program, state, seed=seed, clock=clock, drops=drops)
