"""The per-host process of a DBLP training job on a fabric: ``python -m host.train_agent``.

An experiment driver starts one agent per host inside the host's network namespace
(``mnexec -a <host pid>``, the pid from ``results/fabric/state.json``)::

    python -m host.train_agent --topology results/fabric/topology.json --job JOB.json \\
        --host h1 --role server --workers h2,h3,h4 --out DIR
    python -m host.train_agent --topology ... --job JOB.json --host h2 --role worker --rank 0 \\
        --server h1 --out DIR
    python -m host.train_agent --topology ... --job JOB.json --host h1 --role ring --rank 0 \\
        --ring h1,h2,h3,h4 --out DIR

Each agent opens an MRC endpoint on the host's plane NICs (the micro-SID EVs of the topology,
:func:`~host.train.cluster.job_mrc_config` ``("fabric")``) and runs its role of the job from
:mod:`host.train.roles`: the server accepts the workers (and checks each rank came from the
host ``--workers`` names), a worker connects to ``--server``, a ring rank connects to the next
host of ``--ring`` and accepts the previous one. It writes its records as JSON lines to
``DIR/<host>.jsonl`` (:mod:`host.train.records`) and talks JSON lines on stdout:

* ``{"event": "ready"}`` once its endpoint is open; ``{"event": "round", ...}`` per round
  (server: P, delivered fraction, gather and broadcast times; worker: its rank and its
  latency, first send → the average's last byte); ``{"event": "done", "total_s": ...}`` at
  the end;
* the job's network events (:mod:`host.train.loop`): in a round where a burst starts or ends
  (``JobSpec.gated``) the server sends ``{"event": "request", "id": N, "action":
  "enter_round", "round": R}`` and every worker ``{"event": "request", "id": N, "action":
  "await_round", "round": R}``; each waits until the driver answers ``{"ack": N}`` on stdin
  (round R's network state is in place) or ``{"abort": "why"}``. In a round with a plane
  failure or restore the server also says ``{"event": "trigger", "round": R}`` and goes on
  without waiting: the driver applies it on its own clock;
* ``{"event": "error", "message": ...}`` and exit status 2 when the job fails (a peer that
  disappeared makes its round fail after the link's liveness timeout; a driver that went
  away closes stdin, which fails a waiting request at once).

Nothing read from stdin or the network is unpickled or evaluated (JSON only).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import threading
from collections.abc import Callable, Sequence
from typing import IO

from host.dblp.config import DblpConfig
from host.dblp.errors import DblpError
from host.errors import TransportError
from host.mrc import Endpoint
from host.network import UdpNetwork
from host.paths import RouteTable, fabric_nics, host_id
from host.train.cluster import job_dblp_config, job_mrc_config
from host.train.job import JobSpec, JobSpecError
from host.train.loop import ServerRecord, WorkerRound
from host.train.records import Record, to_line
from host.train.roles import run_ps_worker, run_ring_rank, run_server
from topologies.model import Fabric, TopologyError

REQUEST_TIMEOUT_S = 3600.0
"""A request the driver leaves unanswered this long fails (a driver that died closes stdin,
which fails it at once; a slow controller on a busy machine only makes it wait)."""
ROLES = ("server", "worker", "ring")


class AgentError(Exception):
    """The agent cannot run (bad arguments, the driver went away or refused a request)."""


class Console:
    """JSON lines on stdout; answers from the driver on stdin (one reader thread)."""

    def __init__(self, out: IO[str] = sys.stdout, inp: IO[str] = sys.stdin) -> None:
        self._out = out
        self._inp = inp
        self._lock = threading.Lock()
        self._next = 0

    def emit(self, event: str, **fields: object) -> None:
        with self._lock:
            self._out.write(json.dumps({"event": event, **fields}) + "\n")
            self._out.flush()

    def request(self, action: str, round_: int) -> None:
        """Ask the driver for ``action`` on round ``round_``; return once it answered.

        Raises:
            AgentError: the driver refused, went away or said nothing in time.
        """
        self._next += 1
        rid = self._next
        self.emit("request", id=rid, action=action, round=round_)
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self._inp.readline()), daemon=True)
        reader.start()
        reader.join(REQUEST_TIMEOUT_S)
        if not box or not box[0]:
            raise AgentError(f"the driver did not answer request {rid} ({action} {round_})")
        try:
            answer = json.loads(box[0])
        except json.JSONDecodeError as e:
            raise AgentError(f"the driver answered request {rid} with non-JSON") from e
        if not isinstance(answer, dict) or answer.get("ack") != rid:
            raise AgentError(f"request {rid} ({action} {round_}) refused: {answer!r:.200}")


class DriverRounds:
    """The fabric's :class:`~host.train.loop.RoundNetwork`: the experiment driver, which runs
    the controller, changes the network when asked on this agent's stdout."""

    def __init__(self, job: JobSpec, console: Console) -> None:
        self.job = job
        self.console = console

    def enter_round(self, round_: int) -> None:
        if self.job.gated(round_):
            self.console.request("enter_round", round_)
        if self.job.triggers(round_):
            self.console.emit("trigger", round=round_)

    def await_round(self, round_: int) -> None:
        self.console.request("await_round", round_)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m host.train_agent", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--topology", required=True, help="the fabric's topology JSON")
    ap.add_argument("--job", required=True, help="the job description (JSON file)")
    ap.add_argument("--host", required=True, help="this host's name (h1, h2, ...)")
    ap.add_argument("--role", required=True, choices=ROLES)
    ap.add_argument("--rank", type=int, default=0, help="worker / ring rank")
    ap.add_argument("--server", default="h1", help="worker: the server's host")
    ap.add_argument("--workers", default="", help="server: the workers' hosts, in rank order")
    ap.add_argument("--ring", default="", help="ring: every rank's host, in rank order")
    ap.add_argument("--out", required=True, help="directory for <host>.jsonl")
    return ap


def _hosts(fabric: Fabric, names: str) -> list[int]:
    return [host_id(fabric, n) for n in names.split(",") if n]


def run(args: argparse.Namespace, console: Console) -> float:
    """Run this host's part of the job; the wall time of its rounds.

    Raises:
        AgentError, JobSpecError, TopologyError, DblpError, TransportError.
    """
    fabric = Fabric.load(args.topology)
    job = JobSpec.from_json(pathlib.Path(args.job).read_text())
    me = host_id(fabric, args.host)
    out_dir = pathlib.Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    records = (out_dir / f"{args.host}.jsonl").open("w")
    cfg = job_dblp_config("fabric", peer_timeout_s=job.peer_timeout_s)
    endpoint = Endpoint(
        UdpNetwork(fabric_nics(fabric, args.host)),
        me,
        RouteTable.from_fabric(fabric, args.host),
        job_mrc_config("fabric"),
    )

    def write(rec: Record) -> None:
        records.write(to_line(rec) + "\n")
        records.flush()

    try:
        console.emit("ready", host=args.host, role=args.role)
        if args.role == "server":
            return _serve(job, endpoint, _hosts(fabric, args.workers), cfg, console, write)
        if args.role == "worker":

            def note(rec: WorkerRound) -> None:
                write(rec)
                console.emit(
                    "round",
                    rank=rec.rank,
                    round=rec.round,
                    latency_ms=round(rec.allreduce_ms, 3),
                    gate_ms=round(rec.gate_ms, 3),
                )

            res = run_ps_worker(
                job,
                endpoint,
                cfg,
                args.rank,
                host_id(fabric, args.server),
                note,
                DriverRounds(job, console),
            )
        else:
            res = run_ring_rank(job, endpoint, cfg, args.rank, _hosts(fabric, args.ring), write)
        for ev in res.evals:
            write(ev)
        return res.total_s
    finally:
        endpoint.close()
        records.close()


def _serve(
    job: JobSpec,
    endpoint: Endpoint,
    workers: list[int],
    cfg: DblpConfig,
    console: Console,
    write: Callable[[Record], None],
) -> float:
    if len(workers) != job.workers:
        raise AgentError(f"the job has {job.workers} workers, --workers names {len(workers)}")

    def note(rec: ServerRecord) -> None:
        write(rec)
        console.emit(
            "round",
            round=rec.round,
            bound=rec.loss_bound,
            gather_ms=round(rec.gather_ms, 3),
            broadcast_ms=round(rec.broadcast_ms, 3),
            delivered_fraction=round(rec.delivered_fraction, 4),
        )

    recs = run_server(job, endpoint, cfg, DriverRounds(job, console), note, worker_hosts=workers)
    return recs[-1].wall_s if recs else 0.0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = Console()
    try:
        total = run(args, console)
    except (AgentError, JobSpecError, TopologyError, DblpError, TransportError, OSError) as e:
        console.emit("error", host=args.host, message=f"{type(e).__name__}: {e}")
        return 2
    console.emit("done", host=args.host, total_s=total)
    return 0


__all__ = ["AgentError", "Console", "DriverRounds", "main", "run"]

if __name__ == "__main__":
    sys.exit(main())
