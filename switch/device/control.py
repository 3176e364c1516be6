"""The switch's runtime CLI channel: a tiny line protocol on 127.0.0.1, like BMv2's thrift port.

Each request is one JSON object per line, ``{"cmd": "set_queue_rate 1000 2"}``; each reply one
JSON object per line, ``{"ok": true, "output": "..."}`` or ``{"ok": false, "error": "..."}``.
Requests are validated (size, JSON, fields) and run under the device lock; a bad request gets
an error reply and the connection stays usable. ``tf-switch-cli`` is the client.
"""

from __future__ import annotations

import argparse
import json
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from switch.errors import P4Error

if TYPE_CHECKING:
    from switch.device.device import Device

MAX_LINE = 64 * 1024
DEFAULT_PORT = 9090


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        while True:
            try:
                line = self.rfile.readline(MAX_LINE + 1)
            except OSError:
                return
            if not line:
                return
            reply = self.server.execute(line)
            try:
                self.wfile.write((json.dumps(reply) + "\n").encode())
            except OSError:
                return


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], device: Device) -> None:
        self.device = device
        super().__init__(addr, _Handler)

    def execute(self, line: bytes) -> dict[str, Any]:
        from switch.device.sscli import run_command

        if len(line) > MAX_LINE:
            return {"ok": False, "error": "request too long"}
        try:
            req = json.loads(line.decode())
        except (UnicodeDecodeError, json.JSONDecodeError):
            return {"ok": False, "error": "request is not a JSON object"}
        if not isinstance(req, dict) or not isinstance(req.get("cmd"), str):
            return {"ok": False, "error": "request needs a string field 'cmd'"}
        dev = self.device
        with dev.lock:
            if dev.state is None:
                return {
                    "ok": False,
                    "error": "no P4 program loaded yet (SetForwardingPipelineConfig)",
                }
            try:
                out = run_command(dev.state, dev.tm, req["cmd"], loop=dev.loop_stats)
            except P4Error as e:
                return {"ok": False, "error": e.message}
            except (ValueError, TypeError, KeyError, IndexError) as e:
                return {"ok": False, "error": f"bad arguments: {e}"}
        return {"ok": True, "output": out}


class RuntimeCliServer:
    """Serve runtime CLI commands for ``device`` on ``host:port`` (port 0: pick one)."""

    def __init__(self, device: Device, host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> None:
        self._server = _Server((host, port), device)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="runtime-cli", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> RuntimeCliServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()


class RuntimeCliClient:
    def __init__(
        self, host: str = "127.0.0.1", port: int = DEFAULT_PORT, timeout: float = 5.0
    ) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.f = self.sock.makefile("rwb")

    def run(self, cmd: str) -> dict[str, Any]:
        self.f.write((json.dumps({"cmd": cmd}) + "\n").encode())
        self.f.flush()
        line = self.f.readline(MAX_LINE * 4)
        if not line:
            raise ConnectionError("the switch closed the connection")
        reply: dict[str, Any] = json.loads(line.decode())
        return reply

    def close(self) -> None:
        self.f.close()
        self.sock.close()

    def __enter__(self) -> RuntimeCliClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: Sequence[str] | None = None) -> int:
    """``tf-switch-cli [--thrift-port N] [COMMAND ...]``: one command, or lines from stdin."""
    ap = argparse.ArgumentParser(
        prog="tf-switch-cli",
        description="runtime CLI of tf-switch "
        "(simple_switch_CLI commands: set_queue_rate, mirroring_add, mc_*, ...)",
    )
    ap.add_argument("--thrift-port", type=int, default=DEFAULT_PORT, help="the switch's CLI port")
    ap.add_argument("--thrift-ip", default="127.0.0.1")
    ap.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="keep trying to reach a switch that is still starting",
    )
    ap.add_argument("command", nargs="*", help="a command; without one, read commands from stdin")
    args = ap.parse_args(argv)
    deadline = time.monotonic() + args.wait
    while True:
        try:
            client = RuntimeCliClient(args.thrift_ip, args.thrift_port)
            break
        except OSError as e:
            if time.monotonic() < deadline:
                time.sleep(0.1)
                continue
            print(
                f"error: cannot reach the switch at {args.thrift_ip}:{args.thrift_port}: "
                f"{e.strerror or e}",
                file=sys.stderr,
            )
            return 1
    lines = [" ".join(args.command)] if args.command else sys.stdin
    rc = 0
    with client:
        for line in lines:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            reply = client.run(line)
            if reply.get("ok"):
                if reply.get("output"):
                    print(reply["output"])
            else:
                print(f"error: {reply.get('error')}", file=sys.stderr)
                rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
