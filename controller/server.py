"""The command server of ``tf-ctl serve``: JSON lines on 127.0.0.1, one request per line.

Request: ``{"argv": ["fail", "plane", "1", "--json"]}`` (a list of 1..64 strings of at most
1,024 characters; no other keys; at most 64 KiB per line). Replies, one JSON object per line:
``{"line": "..."}`` for each streamed line (``telemetry watch``), then
``{"ok": true, "output": "..."}`` or ``{"ok": false, "kind": "command"|"controller"|"request"|
"internal", "error": "..."}``. A bad request gets an error reply and the connection stays open;
nothing a client sends stops the server or the fabric.

:class:`ControlServer` writes ``results/fabric/controller.json`` (``pid``, ``host``, ``port``,
``topology``, ``started_unix_s``) when it starts and removes it when it stops, so ``tf-ctl``
finds it (:mod:`controller.client`).
"""

from __future__ import annotations

import json
import logging
import os
import select
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from controller.errors import CommandError, ControllerError

if TYPE_CHECKING:
    from controller.fabric import FabricController

log = logging.getLogger("tailfabric.controller")

SERVER_STATE = Path("fabric") / "controller.json"
HOST = "127.0.0.1"
MAX_REQUEST_BYTES = 64 * 1024
MAX_ARGS = 64
MAX_ARG_CHARS = 1024
PROTOCOL_VERSION = 1


class RequestError(ValueError):
    """A request line that is not a valid command request."""


class ClientGone(Exception):
    """The client closed its connection while a command streamed to it."""


def parse_request(line: bytes) -> list[str]:
    """The ``argv`` of one request line.

    Raises:
        RequestError: not UTF-8 JSON, not an object, unknown keys, or a bad ``argv``.
    """
    if len(line) > MAX_REQUEST_BYTES:
        raise RequestError(f"request longer than {MAX_REQUEST_BYTES} bytes")
    try:
        doc: Any = json.loads(line.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RequestError(f"request is not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise RequestError('request must be a JSON object {"argv": [...]}')
    extra = set(doc) - {"argv", "v"}
    if extra:
        raise RequestError(f"unknown request keys: {', '.join(sorted(extra))}")
    if doc.get("v", PROTOCOL_VERSION) != PROTOCOL_VERSION:
        raise RequestError(f"protocol version {doc.get('v')!r} is not {PROTOCOL_VERSION}")
    argv = doc.get("argv")
    if not isinstance(argv, list) or not 1 <= len(argv) <= MAX_ARGS:
        raise RequestError(f'"argv" must be a list of 1..{MAX_ARGS} strings')
    if not all(isinstance(a, str) and len(a) <= MAX_ARG_CHARS for a in argv):
        raise RequestError(f'"argv" items must be strings of at most {MAX_ARG_CHARS} characters')
    return argv


def execute(
    ctl: FabricController,
    line: bytes,
    emit: Callable[[str], None] | None,
    alive: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Run one request line; the final reply (streamed lines go to ``emit``)."""
    try:
        argv = parse_request(line)
        return {"ok": True, "output": ctl.run_command(argv, out=emit, alive=alive)}
    except RequestError as e:
        return {"ok": False, "kind": "request", "error": str(e)}
    except CommandError as e:
        return {"ok": False, "kind": "command", "error": str(e)}
    except ControllerError as e:
        return {"ok": False, "kind": "controller", "error": str(e)}
    except ClientGone:
        raise
    except Exception as e:  # noqa: BLE001 - a bug must not stop the server
        log.exception("command failed")
        return {
            "ok": False,
            "kind": "internal",
            "error": f"internal error: {type(e).__name__}: {e}",
        }


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def _send(self, obj: dict[str, Any]) -> None:
        self.wfile.write((json.dumps(obj) + "\n").encode())
        self.wfile.flush()

    def _alive(self) -> bool:
        """False once the client has closed its end (checked between streamed lines)."""
        try:
            ready, _, _ = select.select([self.connection], [], [], 0)
            return not ready or self.connection.recv(1, socket.MSG_PEEK) != b""
        except OSError:
            return False

    def _stream(self, text: str) -> None:
        try:
            self._send({"line": text})
        except OSError:
            raise ClientGone() from None

    def handle(self) -> None:
        while True:
            try:
                line = self.rfile.readline(MAX_REQUEST_BYTES + 1)
            except OSError:
                return
            if not line:
                return
            if not line.strip():
                continue
            try:
                if len(line) > MAX_REQUEST_BYTES:
                    self._send(
                        {
                            "ok": False,
                            "kind": "request",
                            "error": f"request longer than {MAX_REQUEST_BYTES} bytes",
                        }
                    )
                    return  # the rest of the oversized line cannot be skipped reliably
                reply = execute(self.server.controller, line, self._stream, self._alive)
                self._send(reply)
            except (OSError, ClientGone):  # the client went away (also during a stream)
                return


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], controller: FabricController) -> None:
        self.controller = controller
        super().__init__(address, _Handler)


class ControlServer:
    """Serves ``controller``'s commands on 127.0.0.1:``port`` (0: any free port)."""

    def __init__(
        self, controller: FabricController, port: int = 0, *, topology: str | None = None
    ) -> None:
        self.controller = controller
        self.requested_port = port
        self.topology = topology
        self.state_path = controller.results_dir / SERVER_STATE
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._server.server_address[1] if self._server is not None else 0

    def start(self) -> ControlServer:
        if self._server is not None:
            return self
        self._server = _Server((HOST, self.requested_port), self.controller)
        self._thread = threading.Thread(
            target=self._server.serve_forever, daemon=True, name="tf-ctl-server"
        )
        self._thread.start()
        from controller.fabric import write_atomic

        write_atomic(
            self.state_path,
            json.dumps(
                {
                    "pid": os.getpid(),
                    "host": HOST,
                    "port": self.port,
                    "topology": self.topology,
                    "started_unix_s": time.time(),
                    "v": PROTOCOL_VERSION,
                },
                indent=1,
            )
            + "\n",
        )
        return self

    def stop(self) -> None:
        """Stop serving and remove the state file if it is still ours; idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        try:
            doc = json.loads(self.state_path.read_text())
            if doc.get("pid") == os.getpid():
                self.state_path.unlink()
        except (OSError, ValueError):
            pass

    def __enter__(self) -> ControlServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
