"""Which peer failures end a wait in a DiLoCo worker's mailbox: the sender's always; a watched
peer's (a ring member) unless it said it stopped in a later round than the awaited message's,
since it had then finished that round and sent all of its part (a worker killed at the start
of round 2 must not cost the others round 1)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from host.train.diloco.errors import PeerFailed
from host.train.diloco.mesh import Mailbox
from host.train.diloco.wire import Key, MessageKind, TensorMessage

KIND = MessageKind.OUTER_REDUCE


def _message(round_: int, sender: int) -> TensorMessage:
    return TensorMessage(KIND, round_, sender, 0, 0, np.arange(4, dtype=np.float32))


def test_a_peer_that_stopped_in_a_later_round_does_not_end_a_wait_for_this_one() -> None:
    box = Mailbox()
    box.fail(PeerFailed(2, 2, 2, "killed at the start of round 2"))
    late = threading.Timer(0.2, lambda: box.put(_message(1, 0), time.monotonic()))
    late.start()
    try:
        got = box.take(Key(KIND, 1, 0), 10.0, watch=(0, 1, 2))
    finally:
        late.cancel()
    assert np.array_equal(got.array, np.arange(4, dtype=np.float32))


@pytest.mark.parametrize("failed_round", [1, -1], ids=["same round", "unknown round"])
def test_a_peer_gone_in_this_round_or_unknown_ends_the_wait_at_once(failed_round: int) -> None:
    box = Mailbox()
    box.fail(PeerFailed(2, 2, failed_round, "gone"))
    start = time.monotonic()
    with pytest.raises(PeerFailed) as info:
        box.take(Key(KIND, 1, 0), 10.0, watch=(0, 1, 2))
    assert info.value.rank == 2
    assert time.monotonic() - start < 5.0


def test_the_senders_own_failure_ends_the_wait_whatever_its_round() -> None:
    box = Mailbox()
    box.fail(PeerFailed(0, 0, 3, "stopped later"))
    with pytest.raises(PeerFailed):
        box.take(Key(KIND, 1, 0), 10.0, watch=(0, 1, 2))
