"""The traffic manager's ``version``: what the native data path mirrors in C (queue depths,
rates, the rate schedule, the ports' queues) changes only with it, so that a round may skip
comparing every port's state when it did not move."""

from __future__ import annotations

import pytest

from switch.device.tm import TrafficManager


class Pkt:
    def __init__(self, nbytes: int = 1436) -> None:
        self.nbytes = nbytes


def test_configuration_changes_move_the_version() -> None:
    tm = TrafficManager()
    seen = [tm.version]
    tm.port(3)  # a new port's queue
    seen.append(tm.version)
    tm.port(3)  # the same one: nothing new
    assert tm.version == seen[-1]
    tm.set_depth(10, port=3)
    seen.append(tm.version)
    tm.set_depth(20)
    seen.append(tm.version)
    tm.set_rate(1000, port=3)
    seen.append(tm.version)
    tm.set_rate(5e6, unit="bps")
    seen.append(tm.version)
    assert seen == sorted(set(seen)), seen  # every change moved it forward


def test_a_rate_schedule_change_moves_the_version_and_an_unlimited_port_does_not() -> None:
    tm = TrafficManager()
    pq = tm.port(1)
    v = tm.version
    tm.charge(pq, Pkt(), 100)  # unlimited: no schedule to move
    assert tm.version == v and pq.next_free_us == 0.0
    tm.set_rate(8e6, port=1, unit="bps")
    v = tm.version
    tm.charge(pq, Pkt(), 100)  # a cut-through packet on a rate-limited port
    assert tm.version > v and pq.next_free_us > 100
    v = tm.version
    tm.enqueue(1, 0, Pkt(), 200)
    out = tm.dequeue_ready(10_000)
    assert len(out) == 1 and tm.version > v  # a departure moved the schedule too


def test_bad_values_leave_the_version_alone() -> None:
    tm = TrafficManager()
    v = tm.version
    with pytest.raises(ValueError):
        tm.set_depth(-1)
    with pytest.raises(ValueError):
        tm.set_rate(-5)
    with pytest.raises(ValueError):
        tm.set_rate(5, unit="furlongs")
    assert tm.version == v
