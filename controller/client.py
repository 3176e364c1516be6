"""Talking to a running ``tf-ctl serve``: find it through ``results/fabric/controller.json``,
send one command, relay streamed lines, return the output or raise the error it reported.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.errors import CommandError, ControllerError, FabricUnavailable
from controller.server import MAX_REQUEST_BYTES, PROTOCOL_VERSION, SERVER_STATE

CONNECT_TIMEOUT_S = 2.0


class ServerUnavailable(FabricUnavailable):
    """No ``tf-ctl serve`` answers for this results directory."""


@dataclass(frozen=True)
class ServerInfo:
    host: str
    port: int
    pid: int | None
    topology: str | None


def find_server(results_dir: str | Path) -> ServerInfo | None:
    """What ``controller.json`` says, or None when there is none (or it is unreadable)."""
    path = Path(results_dir) / SERVER_STATE
    try:
        doc = json.loads(path.read_text())
        return ServerInfo(
            str(doc["host"]),
            int(doc["port"]),
            int(doc["pid"]) if doc.get("pid") is not None else None,
            doc.get("topology"),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def send_command(
    argv: Sequence[str],
    results_dir: str | Path = "results",
    *,
    out: Callable[[str], None] | None = None,
    timeout_s: float | None = None,
) -> str:
    """Run ``argv`` on the server of ``results_dir``; its output.

    Raises:
        ServerUnavailable: no server (no state file, or nothing listens).
        CommandError: the server rejected the command (nothing changed).
        ControllerError: the command failed in the fabric.
    """
    info = find_server(results_dir)
    if info is None:
        raise ServerUnavailable(
            f"no tf-ctl serve for {results_dir} ({Path(results_dir) / SERVER_STATE} is missing)"
        )
    try:
        sock = socket.create_connection((info.host, info.port), timeout=CONNECT_TIMEOUT_S)
    except OSError as e:
        raise ServerUnavailable(
            f"tf-ctl serve at {info.host}:{info.port} does not answer ({e.strerror or e})"
        ) from None
    with sock:
        sock.settimeout(timeout_s)
        line = json.dumps({"argv": list(argv), "v": PROTOCOL_VERSION}).encode() + b"\n"
        if len(line) > MAX_REQUEST_BYTES:
            raise CommandError("command line too long")
        sock.sendall(line)
        with sock.makefile("rb") as f:
            for raw in f:
                reply: Any = json.loads(raw.decode())
                if "line" in reply:
                    if out is not None:
                        out(str(reply["line"]))
                    continue
                if reply.get("ok"):
                    return str(reply.get("output", ""))
                error = str(reply.get("error", "unknown error"))
                if reply.get("kind") in ("command", "request"):
                    raise CommandError(error)
                raise ControllerError(error)
    raise ServerUnavailable(f"tf-ctl serve at {info.host}:{info.port} closed the connection")
