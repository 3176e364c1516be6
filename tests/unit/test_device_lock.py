"""``Device.lock`` (:class:`switch.device.device.DeviceLock`): re-entrant, and a thread that must
wait for it wakes the data path (whose loop in C holds it) and gets it before the data path's
next turn."""

from __future__ import annotations

import threading
import time

import pytest

from switch.device.device import Device, DeviceLock, Wakeup


def test_the_lock_is_reentrant_and_only_its_owner_releases_it() -> None:
    lock = DeviceLock(Wakeup())
    with lock:
        with lock:
            assert lock.acquire()
            lock.release()
        errors: list[BaseException] = []

        def other() -> None:
            try:
                lock.release()
            except RuntimeError as e:
                errors.append(e)

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert len(errors) == 1
    with pytest.raises(RuntimeError):
        lock.release()
    assert lock.acquire(blocking=False)
    lock.release()


def test_an_uncontended_lock_does_not_wake_the_data_path() -> None:
    dev = Device()
    with dev.lock:
        pass
    assert dev.wakeup.flag[0] == 0 and not dev.wakeup.is_set()
    assert dev.lock.waits == 0


def test_a_waiter_wakes_the_holder_and_gets_the_lock_before_its_next_turn() -> None:
    dev = Device()
    lock, wake = dev.lock, dev.wakeup
    order: list[str] = []
    stop = threading.Event()

    def data_path() -> None:
        # As the daemon's loop: hold the lock quietly until woken, let go, take it again.
        while not stop.is_set():
            with lock.quietly():
                order.append("round")
                end = time.monotonic() + 2.0
                while not wake.flag[0] and time.monotonic() < end and not stop.is_set():
                    time.sleep(0.001)
                wake.clear()

    t = threading.Thread(target=data_path)
    t.start()
    try:
        time.sleep(0.05)
        t0 = time.monotonic()
        with lock:
            waited = time.monotonic() - t0
            order.append("control")
            n = len(order)
        assert waited < 1.0, waited  # the holder let go when woken, not at its 2 s deadline
        assert order[n - 1] == "control"
        assert lock.waits == 1
    finally:
        stop.set()
        wake.set()
        t.join(5)
    assert not t.is_alive()
    assert lock.acquire(blocking=False)  # nobody holds it after the data path's end
    lock.release()
