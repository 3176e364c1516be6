"""The program, server and requests the one-shot and idle-timeout tests share (idle_oneshot.p4)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from pathlib import Path

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from switch.compile.package import load_device_config, make_device_config
from switch.device.device import Device
from switch.p4info import P4InfoIndex, build_p4info
from switch.p4rt import P4RuntimeServer
from tests.unit.p4rt_helpers import DEVICE_ID, Harness

PROGRAM = Path(__file__).resolve().parent / "idle_oneshot.p4"
TE = p4runtime_pb2.TableEntry


@functools.cache
def config() -> bytes:
    return make_device_config(PROGRAM)


@functools.cache
def _p4info_bytes() -> bytes:
    return build_p4info(load_device_config(config()).schema).SerializeToString()


def p4info() -> p4info_pb2.P4Info:
    info = p4info_pb2.P4Info()
    info.ParseFromString(_p4info_bytes())
    return info


@functools.cache
def _names() -> P4InfoIndex:
    return P4InfoIndex(p4info())


def tid(name: str) -> int:
    return _names().id_of("tables", f"MyIngress.{name}")


def aid(name: str) -> int:
    return _names().id_of("actions", name if name == "NoAction" else f"MyIngress.{name}")


def pid(name: str) -> int:
    return _names().id_of("action_profiles", f"MyIngress.{name}")


class FakeClock:
    """The device clock in microseconds, moved by the test."""

    def __init__(self) -> None:
        self.us = 1_000_000

    def __call__(self) -> int:
        return self.us

    def advance_ms(self, ms: float) -> None:
        self.us += int(ms * 1000)


@contextlib.contextmanager
def running(clock: FakeClock | None = None, idle_poll_s: float = 3600.0) -> Iterator[Harness]:
    """A server for idle_oneshot.p4 with a primary stream; with a huge ``idle_poll_s`` the sweep
    only runs when the test calls ``h.server.service.idle.tick()``."""
    device = Device(DEVICE_ID, cpu_port=None, clock=clock)
    server = P4RuntimeServer(device, "127.0.0.1:0", idle_poll_s=idle_poll_s).start()
    h = Harness(device, server)
    try:
        h.primary()
        h.set_pipeline(p4info=p4info(), config=config())
        yield h
    finally:
        h.close()
        server.stop()


def action(name: str, *args: int) -> p4runtime_pb2.Action:
    a = p4runtime_pb2.Action(action_id=aid(name))
    for i, v in enumerate(args, start=1):
        a.params.add(param_id=i, value=v.to_bytes(max(1, (v.bit_length() + 7) // 8), "big"))
    return a


def entry(table: str, kind: int, ttl_ns: int = 0) -> TE:
    """An entry keyed on ``hdr.h.kind``, without an action."""
    te = TE(table_id=tid(table), idle_timeout_ns=ttl_ns)
    te.match.add(field_id=1, exact=p4runtime_pb2.FieldMatch.Exact(value=bytes([kind])))
    return te


def one_shot(table: str, kind: int, *actions: tuple[p4runtime_pb2.Action, int]) -> TE:
    te = entry(table, kind)
    action_set = te.action.action_profile_action_set
    for a, weight in actions:
        action_set.action_profile_actions.add(action=a, weight=weight)
    return te


def frame(kind: int, sel: int = 0) -> bytes:
    return bytes([kind]) + sel.to_bytes(2, "big") + b"\x00" + b"payload"


def send(device: Device, data: bytes) -> list[tuple[int, bytes]]:
    """Run one frame through the device (as the daemon's loop does); the frames it sends."""
    with device.lock:
        device.receive(1, data)
        return device.service_queues()


def out_byte(device: Device, kind: int, sel: int = 0) -> int:
    [(_port, data)] = send(device, frame(kind, sel))
    return data[3]
