"""Device.receive_batch: a batch executor (the native one) runs a receive batch whole.

``p4/fabric.p4`` as a fabric leaf (:mod:`switch.bench_fabric`'s set-up): the same frames
through the per-packet path of the Python executor and through the whole-batch path of the
native executor give the same frames out, in order, with the same counts; the whole-batch path
is taken only where every packet would have cut through the traffic manager anyway.
"""

from __future__ import annotations

import random

import pytest

from switch.bench_fabric import setup_fabric
from switch.device.device import Pipeline
from switch.pipeline.v1model import V1Switch
from tests.fabric_device import fabric_device, fabric_pipeline


@pytest.fixture(scope="module")
def pipeline() -> Pipeline:
    return fabric_pipeline()


def _frames(pipe: Pipeline) -> list[tuple[int, bytes]]:
    sw = V1Switch(pipe.program)
    _n, frames = setup_fabric(sw, random.Random(7), 48)
    bad = frames[0][:40]  # a truncated IPv6 header: the parser fails, the program drops it
    return [(1, f) for f in frames[:20]] + [(1, bad)] + [(1, f) for f in frames[20:]]


@pytest.mark.parametrize("rate_bps", [0.0, 10e9])
def test_native_whole_batch_matches_the_python_per_packet_path(
    pipeline: Pipeline, rate_bps: float
) -> None:
    frames = _frames(pipeline)
    out = {}
    for native in (False, True):
        dev = fabric_device(pipeline, native, rate_bps)
        dev.receive_batch(frames)
        if native:
            assert dev.tm.backlog == 0  # whole batch: nothing went through the queues
        sent = dev.service_queues(len(frames))
        totals = dev.packet_totals()
        drops = sum(c.packets for c in dev.drop_cells())
        assert totals.rx_pkts == len(frames)
        assert totals.rx_pkts == totals.tx_pkts + drops + totals.queued_pkts
        out[native] = (sent, drops)
    assert out[True] == out[False]  # the same frames, in the same order, the same drops
    assert len(out[True][0]) == len(frames) - 1 and out[True][1] == 1
    assert len({port for port, _ in out[True][0]}) > 1


def test_a_slow_port_keeps_the_per_packet_path_and_its_queue(pipeline: Pipeline) -> None:
    frames = _frames(pipeline)
    dev = fabric_device(pipeline, True, 10e6)  # 10 Mbit/s: a batch takes 7 ms to send
    dev.receive_batch(frames)
    assert dev.tm.backlog > 0  # queued as the rate says, not sent at once
    assert sum(pq.enqueued for pq in dev.tm.ports.values()) == len(frames) - 1
