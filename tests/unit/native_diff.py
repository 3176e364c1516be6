"""Helpers of the native executor's differential tests: one Python and one native switch."""

from __future__ import annotations

from typing import Any

from switch.compile import CompiledProgram
from switch.native import NativeSwitch, make_switch
from switch.pipeline.v1model import V1Switch


def fixed_clock() -> int:
    return 123_456  # both executors see the same timestamps


def pair(program: CompiledProgram, seed: int = 0) -> tuple[V1Switch, NativeSwitch]:
    """A Python switch and a native one for ``program`` (which must run natively)."""
    py = V1Switch(program, seed=seed, clock=fixed_clock)
    nat = make_switch(program, seed=seed, clock=fixed_clock, mode="on")
    assert isinstance(nat, NativeSwitch)
    return py, nat


def state_of(sw: V1Switch) -> dict[str, Any]:
    """Everything a packet can change, comparable across executors."""
    st = sw.state
    return {
        "counters": {n: (list(c.packets), list(c.bytes), c.errors) for n, c in st.counters.items()},
        "registers": {n: (list(r.values), r.errors) for n, r in st.registers.items()},
        "digests": list(st.digests),
        "switch": sw.counters,
        "drops": sw.drops.cells(),
        "egress_digests_ignored": sw.rt.egress_digests_ignored,
    }


def assert_same_state(py: V1Switch, nat: V1Switch) -> None:
    a, b = state_of(py), state_of(nat)
    for key in a:
        assert a[key] == b[key], f"{key} differs: python {a[key]!r} native {b[key]!r}"
