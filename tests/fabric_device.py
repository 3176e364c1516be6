"""``p4/fabric.p4`` on a switch device, natively or in Python, for the tests that hold the
native data paths against the Python per-packet path (``tests/unit/test_device_batch.py``,
``tests/net/test_native_ring.py``)."""

from __future__ import annotations

import random

import pytest

from switch.bench_fabric import setup_fabric
from switch.daemon import load_pipeline
from switch.device.device import Device, Pipeline
from switch.native import make_switch, native_reason
from switch.pipeline.v1model import V1Switch

NOW_US = 1000
"""The devices' clock (a fixed time: rate schedules are compared, not measured)."""


def fabric_pipeline() -> Pipeline:
    """``fabric.p4`` compiled; the test is skipped where it cannot run natively."""
    pipe = load_pipeline("p4/fabric.p4", [])
    reason = native_reason(pipe.program)
    if reason is not None:
        pytest.skip(f"no native executor here: {reason}")
    return pipe


def fabric_device(
    pipe: Pipeline,
    native: bool,
    rate_bps: float,
    *,
    burst_us: float = 200.0,
    queue_depth: int | None = None,
) -> Device:
    """A leaf's device with the fabric's entries (seed 7), every port at ``rate_bps`` (0: no
    limit) and, if given, ``queue_depth`` packets of queue."""
    executor = (lambda *a, **k: make_switch(*a, mode="on", **k)) if native else V1Switch
    dev = Device(1, 255, queue_burst_us=burst_us, executor=executor, clock=lambda: NOW_US)
    dev.commit(pipe)
    assert dev.switch is not None
    setup_fabric(dev.switch, random.Random(7), 1)
    if rate_bps:
        dev.tm.set_rate(rate_bps, unit="bps")
        if queue_depth is not None:
            dev.tm.set_depth(queue_depth)
    return dev
