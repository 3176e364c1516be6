"""Shared pieces of the P4Runtime server tests: the test program, a running server, a stream
client over the generated gRPC stub, and a data-path loop standing in for the switch daemon."""

from __future__ import annotations

import contextlib
import functools
import queue
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
from google.rpc import status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from switch.compile.package import load_device_config, make_device_config
from switch.device.device import Device
from switch.p4info import P4InfoIndex, build_p4info
from switch.p4rt import P4RuntimeServer
from topologies.model import Fabric

FULL_P4 = Path(__file__).resolve().parents[1] / "p4rt" / "p4rt_full.p4"
CPU_PORT = 255
DEVICE_ID = 1


@functools.cache
def full_config() -> bytes:
    return make_device_config(FULL_P4)


@functools.cache
def _full_p4info_bytes() -> bytes:
    return build_p4info(load_device_config(full_config()).schema).SerializeToString()


def full_p4info() -> p4info_pb2.P4Info:
    """A fresh copy of the test program's P4Info (callers may mutate it)."""
    info = p4info_pb2.P4Info()
    info.ParseFromString(_full_p4info_bytes())
    return info


@functools.cache
def names() -> P4InfoIndex:
    return P4InfoIndex(full_p4info())


def tid(name: str) -> int:
    return names().id_of("tables", name)


def aid(name: str) -> int:
    return names().id_of("actions", name)


def uint128(value: int) -> p4runtime_pb2.Uint128:
    return p4runtime_pb2.Uint128(high=value >> 64, low=value & ((1 << 64) - 1))


def details(err: grpc.RpcError) -> list[p4runtime_pb2.Error]:
    """The ``p4.v1.Error`` details of a failed Write/Read (p4runtime-shell's format)."""
    for key, value in err.trailing_metadata() or ():  # type: ignore[attr-defined]
        if key == "grpc-status-details-bin":
            status = status_pb2.Status()
            status.ParseFromString(value)
            out = []
            for d in status.details:
                e = p4runtime_pb2.Error()
                assert d.Unpack(e)
                out.append(e)
            return out
    raise AssertionError("no grpc-status-details-bin trailer")


class StreamClient:
    """A StreamChannel over the generated stub, with its responses in a queue."""

    def __init__(self, stub: p4runtime_pb2_grpc.P4RuntimeStub) -> None:
        self._out: queue.Queue[p4runtime_pb2.StreamMessageRequest | None] = queue.Queue()
        self.responses: queue.Queue[p4runtime_pb2.StreamMessageResponse | None] = queue.Queue()
        self.call = stub.StreamChannel(iter(self._out.get, None))
        self.error: grpc.RpcError | None = None
        self._held: list[p4runtime_pb2.StreamMessageResponse] = []
        self._thread = threading.Thread(target=self._receive, daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        try:
            for r in self.call:
                self.responses.put(r)
        except grpc.RpcError as e:
            self.error = e
        finally:
            self.responses.put(None)

    def send(self, msg: p4runtime_pb2.StreamMessageRequest) -> None:
        self._out.put(msg)

    def arbitrate(
        self, election: int | None = 1, role: str | None = None, device_id: int = DEVICE_ID
    ) -> p4runtime_pb2.MasterArbitrationUpdate:
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = device_id
        if election is not None:
            req.arbitration.election_id.CopyFrom(uint128(election))
        if role is not None:
            req.arbitration.role.name = role
        self.send(req)
        return self.expect("arbitration").arbitration

    def expect(self, kind: str, timeout: float = 3.0) -> p4runtime_pb2.StreamMessageResponse:
        """The next response of ``kind`` (others are kept for later)."""
        for i, r in enumerate(self._held):
            if r.WhichOneof("update") == kind:
                return self._held.pop(i)
        while True:
            r = self.responses.get(timeout=timeout)
            if r is None:
                self.responses.put(None)
                raise AssertionError(f"stream ended while waiting for {kind}: {self.error}")
            if r.WhichOneof("update") == kind:
                return r
            self._held.append(r)

    def none_pending(self, kind: str, wait: float = 0.2) -> bool:
        try:
            self.expect(kind, timeout=wait)
        except queue.Empty:
            return True
        return False

    def ended(self, timeout: float = 3.0) -> grpc.RpcError | None:
        """Wait for the stream to end; the error it ended with."""
        self._thread.join(timeout)
        return self.error

    def finished(self) -> bool:
        return not self._thread.is_alive()

    def close(self) -> None:
        self._out.put(None)
        self._thread.join(3)


class DataPath:
    """The switch's packet loop in a thread (the daemon's job in production)."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.inputs: queue.Queue[tuple[int, bytes]] = queue.Queue()
        self.frames: queue.Queue[tuple[int, bytes]] = queue.Queue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with self.device.lock:
                while not self.inputs.empty():
                    port, data = self.inputs.get()
                    self.device.receive(port, data)
                for frame in self.device.service_queues():
                    self.frames.put(frame)
            self.device.wakeup.wait(0.001)
            self.device.wakeup.clear()

    def inject(self, port: int, data: bytes) -> None:
        self.inputs.put((port, data))
        self.device.wakeup.set()

    def start(self) -> DataPath:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(3)


class Harness:
    """A device, its running server, a channel and stub to it, and helpers for requests."""

    def __init__(self, device: Device, server: P4RuntimeServer) -> None:
        self.device = device
        self.server = server
        self.channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.streams: list[StreamClient] = []

    def stream(self) -> StreamClient:
        s = StreamClient(self.stub)
        self.streams.append(s)
        return s

    def primary(self, election: int = 1) -> StreamClient:
        s = self.stream()
        upd = s.arbitrate(election)
        assert upd.status.code == 0, upd
        return s

    def set_pipeline(
        self,
        election: int = 1,
        action: int = 3,
        p4info: p4info_pb2.P4Info | None = None,
        config: bytes | None = None,
        cookie: int | None = None,
    ) -> None:
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(device_id=DEVICE_ID, action=action)
        req.election_id.CopyFrom(uint128(election))
        req.config.p4info.CopyFrom(p4info if p4info is not None else full_p4info())
        req.config.p4_device_config = config if config is not None else full_config()
        if cookie is not None:
            req.config.cookie.cookie = cookie
        self.stub.SetForwardingPipelineConfig(req)

    def write(self, *updates: p4runtime_pb2.Update, election: int = 1) -> None:
        req = p4runtime_pb2.WriteRequest(device_id=DEVICE_ID, updates=list(updates))
        req.election_id.CopyFrom(uint128(election))
        self.stub.Write(req)

    def read(self, *entities: p4runtime_pb2.Entity) -> list[p4runtime_pb2.Entity]:
        req = p4runtime_pb2.ReadRequest(device_id=DEVICE_ID, entities=list(entities))
        return [e for rep in self.stub.Read(req) for e in rep.entities]

    def close(self) -> None:
        for s in self.streams:
            s.close()
        self.channel.close()


@contextlib.contextmanager
def running(
    cpu_port: int | None = CPU_PORT,
    *,
    pipeline: bool = True,
    primary: bool = True,
    digest_poll_s: float = 0.002,
) -> Iterator[Harness]:
    """A started server for a fresh device; by default with a primary stream and the test
    program committed."""
    device = Device(DEVICE_ID, cpu_port=cpu_port)
    server = P4RuntimeServer(device, "127.0.0.1:0", digest_poll_s=digest_poll_s).start()
    h = Harness(device, server)
    try:
        if primary:
            h.primary()
        if pipeline:
            h.set_pipeline()
        yield h
    finally:
        h.close()
        server.stop()


def update(kind: int, **entity: object) -> p4runtime_pb2.Update:
    return p4runtime_pb2.Update(type=kind, entity=p4runtime_pb2.Entity(**entity))  # type: ignore[arg-type]


INSERT = p4runtime_pb2.Update.INSERT
MODIFY = p4runtime_pb2.Update.MODIFY
DELETE = p4runtime_pb2.Update.DELETE


def exact_entry(
    kind: int, action: str = "MyIngress.set_out", *args: int, table: str = "MyIngress.t_exact"
) -> p4runtime_pb2.TableEntry:
    """An entry of a table keyed on ``hdr.h.kind`` alone."""
    te = p4runtime_pb2.TableEntry(table_id=tid(table))
    te.match.add(field_id=1, exact=p4runtime_pb2.FieldMatch.Exact(value=bytes([kind])))
    te.action.action.action_id = aid(action)
    for i, a in enumerate(args, start=1):
        te.action.action.params.add(
            param_id=i, value=a.to_bytes(max(1, (a.bit_length() + 7) // 8), "big")
        )
    return te


def packet(
    kind: int = 0,
    dst: int = 0,
    tport: int = 0,
    rport: int = 0,
    opt: int = 0,
    out: int = 0,
    payload: bytes = b"",
) -> bytes:
    """A frame of the test program's ``h_t`` header."""
    return (
        bytes([kind])
        + dst.to_bytes(4, "big")
        + tport.to_bytes(2, "big")
        + rport.to_bytes(2, "big")
        + bytes([opt, out])
        + payload
    )


@contextlib.contextmanager
def fabric_servers(fabric: Fabric) -> Iterator[dict[str, str]]:
    """One in-process tf-switch P4Runtime server (no data path) per switch of ``fabric``:
    switch name → its 127.0.0.1 address; all stopped on exit."""
    with contextlib.ExitStack() as stack:
        addresses = {}
        for sw in fabric.switches:
            server = P4RuntimeServer(Device(sw.device_id, cpu_port=CPU_PORT), "127.0.0.1:0")
            stack.callback(server.start().stop)
            addresses[sw.name] = f"127.0.0.1:{server.port}"
        yield addresses
