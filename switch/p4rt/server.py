"""``P4RuntimeServer``: serves ``p4.v1.P4Runtime`` over gRPC for one switch device.

Usage::

    with P4RuntimeServer(device, "127.0.0.1:0") as server:   # port 0: any free port
        print(server.port)

``start()`` binds (127.0.0.1 unless told otherwise), installs the device's packet-in hook and
starts the digest and idle-timeout threads; ``stop()`` (idempotent) ends every stream, stops the thread, restores
the previous hook and shuts the gRPC server down. The data path itself is not run here: whoever
owns the device keeps calling ``receive`` / ``service_queues`` (``device.wakeup`` is set after
every PacketOut).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType

import grpc
from p4.v1 import p4runtime_pb2_grpc

from switch.device.device import Device, PacketInHook
from switch.p4rt.idle import DEFAULT_POLL_S
from switch.p4rt.service import P4RuntimeService

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
DEFAULT_ADDRESS = "127.0.0.1:9559"


class P4RuntimeServer:
    """A gRPC P4Runtime server for ``device``."""

    def __init__(
        self,
        device: Device,
        address: str = DEFAULT_ADDRESS,
        *,
        max_workers: int = 64,
        digest_poll_s: float = 0.002,
        idle_poll_s: float = DEFAULT_POLL_S,
    ) -> None:
        self.device = device
        self.requested_address = address
        self.max_workers = max_workers
        self.service = P4RuntimeService(
            device, digest_poll_s=digest_poll_s, idle_poll_s=idle_poll_s
        )
        self._server: grpc.Server | None = None
        self._port = 0
        self._previous_hook: PacketInHook | None = None
        self._lock = threading.Lock()
        self._stopped = False

    @property
    def port(self) -> int:
        """The bound port (the one chosen for port 0); 0 before ``start()``."""
        return self._port

    @property
    def address(self) -> str:
        host = self.requested_address.rsplit(":", 1)[0]
        return f"{host}:{self._port}"

    def start(self) -> P4RuntimeServer:
        with self._lock:
            if self._server is not None:
                return self
            if self._stopped:
                raise RuntimeError("a stopped P4RuntimeServer cannot be started again")
            server = grpc.server(
                ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix="p4rt"),
                options=[
                    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                    ("grpc.so_reuseport", 0),
                ],
            )
            p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(self.service, server)
            try:
                port = server.add_insecure_port(self.requested_address)
            except RuntimeError as err:
                raise OSError(f"cannot listen on {self.requested_address}: {err}") from None
            if port == 0:
                raise OSError(f"cannot listen on {self.requested_address}")
            server.start()
            self._server = server
            self._port = port
            self._previous_hook = self.device.on_packet_in
            self.device.on_packet_in = self.service.on_packet_in
            self.service.digests.start()
            self.service.idle.start()
            return self

    def stop(self, grace: float = 1.0) -> None:
        """Stop serving (idempotent)."""
        with self._lock:
            server = self._server
            if server is None or self._stopped:
                self._stopped = True
                return
            self._stopped = True
            self.service.shutdown()
            if self.device.on_packet_in == self.service.on_packet_in:
                self.device.on_packet_in = self._previous_hook
            server.stop(grace).wait()
            self._server = None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the server stops (True) or ``timeout`` passes (False)."""
        server = self._server
        return True if server is None else bool(server.wait_for_termination(timeout))

    def __enter__(self) -> P4RuntimeServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
