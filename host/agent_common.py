"""What the long-lived agents of training jobs on a fabric's hosts share.

:mod:`host.diloco_agent` (one per host) and :mod:`host.decoupled_agent` (one per process
slot) read JSON commands on stdin and run one job after another: a ``run`` command's name
(:data:`RUN_NAME`, it becomes a directory), start time and hosts are checked the same way
(:func:`check_run_name`, :func:`check_origin`, :func:`check_hosts`, raising
:class:`AgentError`); :func:`serve_commands` is the command loop (a line that is not JSON or
names no command is refused with a reason, and the agent reads on); :func:`mrc_endpoint`
opens an MRC endpoint on a host's plane NICs with the settings for the topology's link rate;
and :func:`serve_agent` is a process's life after start-up (``ready``, the commands,
``done``). :data:`STARTUP_ERRORS` are the start-up failures an agent reports as an ``error``
event instead of a traceback.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

from host.api import MessageEndpoint
from host.mrc import Endpoint
from host.mrc.emulated import emulated_fabric_config
from host.network import UdpNetwork
from host.paths import LocalNic, RouteTable, host_id
from host.train_agent import Console
from topologies.model import Fabric, TopologyError

RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
"""A run's name: it becomes a directory name."""
STARTUP_ERRORS = (OSError, KeyError, TopologyError, ValueError)
"""What loading the topology and finding this host in it may raise."""

_A = TypeVar("_A")
Handler = Callable[[_A, Mapping[str, Any]], bool]
"""One command's handler: the agent and the message; False: stop reading."""


class AgentError(Exception):
    """A command the agent cannot run; the message says why."""


def check_run_name(run: object) -> str:
    """Raises: AgentError (not a name :data:`RUN_NAME` allows)."""
    if not isinstance(run, str) or not RUN_NAME.match(run):
        raise AgentError(f"run: a name of letters, digits, '_', '.', '-', got {run!r:.60}")
    return run


def check_origin(run: str, origin: object) -> float:
    """The job's start on the driver's ``time.monotonic()`` clock.

    Raises:
        AgentError: not a number.
    """
    if not isinstance(origin, int | float) or isinstance(origin, bool):
        raise AgentError(f"run {run}: origin must be a time.monotonic() value")
    return float(origin)


def check_hosts(fabric: Fabric, run: str, hosts: Iterable[str]) -> None:
    """Raises: AgentError (a host not in the fabric)."""
    try:
        for h in hosts:
            host_id(fabric, h)
    except (KeyError, TopologyError) as e:
        raise AgentError(f"run {run}: {e}") from None


def serve_commands(
    agent: _A, lines: Iterable[str], console: Console, commands: Mapping[str, Handler[_A]]
) -> None:
    """Hand each command of ``lines`` to its handler in ``commands`` until one returns False
    or the lines end; refuse (an event with the reason) what is not a JSON command."""
    for line in lines:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            console.emit("refused", message=f"not JSON: {line.strip()!r:.80}")
            continue
        name = msg.get("cmd") if isinstance(msg, dict) else None
        handler = commands.get(name) if isinstance(name, str) else None
        if handler is None:
            console.emit(
                "refused", message=f"unknown command {name!r:.40}; valid: {', '.join(commands)}"
            )
            continue
        if not handler(agent, msg):
            return


def mrc_endpoint(
    fabric: Fabric, nics: Sequence[LocalNic], me: int, routes: RouteTable
) -> AbstractContextManager[MessageEndpoint]:
    """An MRC endpoint of host id ``me`` on ``nics`` (ECN on), settings for the topology's
    link rate; closed on leaving the context.

    Raises:
        TransportError: a socket cannot be bound.
    """
    net = UdpNetwork(nics, ecn=True)
    try:
        endpoint = Endpoint(net, me, routes, emulated_fabric_config(fabric.spec.link_mbps))
    except BaseException:
        net.close()
        raise
    return contextlib.closing(endpoint)


class Serving(Protocol):
    def serve(self, lines: Iterable[str]) -> None: ...


def serve_agent(agent: Serving, console: Console, lines: Iterable[str], **who: object) -> int:
    """``ready``, the commands of ``lines``, then ``done`` with the time it ran (events
    carrying ``who``); the exit status 0."""
    t0 = time.monotonic()
    console.emit("ready", **who)
    agent.serve(lines)
    console.emit("done", **who, total_s=time.monotonic() - t0)
    return 0
