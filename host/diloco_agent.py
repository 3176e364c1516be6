"""The per-host process of DiLoCo jobs on a fabric: ``python -m host.diloco_agent``.

An experiment driver (:mod:`experiments.gossip`) starts one agent per host inside the host's
network namespace (``mnexec -a <host pid>``) for the length of a fabric and has it run one
job after another::

    python -m host.diloco_agent --topology results/fabric/topology.json --host h1 --out DIR

Each job runs :func:`host.train.diloco.worker.run_worker` for one rank on a fresh MRC endpoint
on the host's plane NICs (reliable messages, :func:`host.mrc.emulated.emulated_fabric_config`
for the topology's link rate, ECN on; the micro-SID EVs of the topology). JSON lines in both
directions, nothing read is unpickled or evaluated:

* stdin, one command per line (:data:`COMMANDS`):

  - ``{"cmd": "run", "run": NAME, "job": {...}, "rank": R, "hosts": ["h1", ...],
    "origin": T}``: run rank ``R`` of the job (the JSON form of
    :class:`~host.train.diloco.config.DilocoConfig`, read back with every check), ``hosts``
    naming the host of every rank, ``origin`` the job's ``time.monotonic()`` start on the
    driver (every namespace shares the clock; the records' ``*_at_s`` count from it);
  - ``{"cmd": "quit"}``, or stdin closed: exit.

* stdout, events: ``ready`` (once), ``started`` (a job's endpoint is open), ``round`` (each
  round of this worker as it ends: utilization, compute, wall and blocked times, losses,
  bytes, Mix1/Mix2 messages missing), ``finished`` (its outcome: ``finished``, ``died`` or
  ``stopped``, the last completed round and the error), ``refused`` (a command that cannot
  run, with the reason; the agent reads on), ``done`` (exit).

Under ``DIR/<run>/`` a job leaves ``<host>.jsonl`` (one line per round record, then the
outcome) and ``obs/`` (the parameters and output distributions of every evaluated round,
:class:`~host.train.diloco.observe.FileObserver`), which the driver reads afterwards.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from typing import IO, Any

import torch

from host.agent_common import (
    STARTUP_ERRORS,
    AgentError,
    Handler,
    check_hosts,
    check_origin,
    check_run_name,
    mrc_endpoint,
    serve_agent,
    serve_commands,
)
from host.api import MessageEndpoint
from host.errors import TransportError
from host.paths import RouteTable, fabric_nics, host_id
from host.train.cluster import job_dblp_config
from host.train.diloco.config import DilocoConfig, config_from_json, config_to_json
from host.train.diloco.errors import ConfigError
from host.train.diloco.observe import FileObserver
from host.train.diloco.worker import RoundRecord, WorkerOutcome, WorkerStatus, run_worker
from host.train_agent import Console
from topologies.model import Fabric

ROUND_EVENT_FIELDS = (
    "round",
    "compute_s",
    "blocked_s",
    "wall_s",
    "utilization",
    "train_loss",
    "val_loss",
    "bytes_sent",
    "bytes_received",
    "mix1_missing",
    "mix2_missing",
)
"""What a ``round`` event carries of the record (the file has all of it)."""

EndpointFactory = Callable[[], AbstractContextManager[MessageEndpoint]]
"""Opens this host's transport endpoint for one job (closed when the job ends)."""


@dataclass(frozen=True)
class RunCommand:
    """One ``run`` command, checked."""

    run: str
    job: DilocoConfig
    rank: int
    hosts: tuple[str, ...]
    origin: float

    @classmethod
    def from_message(cls, msg: Mapping[str, Any], fabric: Fabric, me: str) -> RunCommand:
        """Raises: AgentError (a field missing or wrong, a host not in the fabric, this host
        not the rank's)."""
        run = check_run_name(msg.get("run"))
        try:
            job = config_from_json(json.dumps(msg.get("job")))
        except ConfigError as e:
            raise AgentError(f"run {run}: {e}") from None
        rank, hosts, origin = msg.get("rank"), msg.get("hosts"), msg.get("origin")
        if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
            raise AgentError(f"run {run}: hosts must be a list of host names")
        if len(hosts) != job.workers:
            raise AgentError(f"run {run}: {job.workers} workers, {len(hosts)} hosts named")
        if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < job.workers:
            raise AgentError(f"run {run}: rank must be in 0..{job.workers - 1}, got {rank!r}")
        if hosts[rank] != me:
            raise AgentError(f"run {run}: rank {rank} runs on {hosts[rank]}, this is {me}")
        start = check_origin(run, origin)
        check_hosts(fabric, run, hosts)
        return cls(run, job, rank, tuple(hosts), start)

    def to_message(self) -> dict[str, Any]:
        """The command as the driver sends it."""
        return {
            "cmd": "run",
            "run": self.run,
            "job": json.loads(config_to_json(self.job)),
            "rank": self.rank,
            "hosts": list(self.hosts),
            "origin": self.origin,
        }


def record_line(rec: RoundRecord) -> str:
    return json.dumps({"kind": "round", **asdict(rec)})


def outcome_line(out: WorkerOutcome) -> str:
    return json.dumps(
        {
            "kind": "outcome",
            "rank": out.rank,
            "host": out.host,
            "status": out.status.value,
            "last_round": out.last_round,
            "error": out.error,
        }
    )


def read_job_records(path: str | pathlib.Path) -> tuple[list[RoundRecord], dict[str, Any]]:
    """The round records and the outcome (``{}`` if the job never ended) of a ``.jsonl`` file
    an agent wrote; lines that are not JSON objects of a known kind are skipped."""
    names = set(RoundRecord.__dataclass_fields__)
    records: list[RoundRecord] = []
    outcome: dict[str, Any] = {}
    with pathlib.Path(path).open() as f:
        for line in f:
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if not isinstance(doc, dict):
                continue
            kind = doc.pop("kind", None)
            if kind == "round" and set(doc) == names:
                records.append(RoundRecord(**doc))
            elif kind == "outcome":
                outcome = doc
    return records, outcome


class Agent:
    """Runs the jobs of one host, one after another.

    Args:
        fabric: the topology (host names → host ids).
        host: this host's name.
        out_dir: where each job's directory goes.
        console: JSON events on stdout.
        open_endpoint: opens the transport endpoint of one job.
    """

    def __init__(
        self,
        fabric: Fabric,
        host: str,
        out_dir: str | pathlib.Path,
        console: Console,
        open_endpoint: EndpointFactory,
    ) -> None:
        self.fabric = fabric
        self.host = host
        self.out_dir = pathlib.Path(out_dir)
        self.console = console
        self.open_endpoint = open_endpoint

    def serve(self, lines: Iterable[str]) -> None:
        """Handle commands until ``quit`` or the end of ``lines``."""
        serve_commands(self, lines, self.console, COMMANDS)

    def _run_command(self, msg: Mapping[str, Any]) -> bool:
        try:
            cmd = RunCommand.from_message(msg, self.fabric, self.host)
        except AgentError as e:
            self.console.emit("refused", run=msg.get("run"), message=str(e))
            return True
        self.run(cmd)
        return True

    def _quit(self, msg: Mapping[str, Any]) -> bool:
        return False

    def run(self, cmd: RunCommand) -> WorkerOutcome:
        """Run one job's rank; its outcome (also reported and written)."""
        where = self.out_dir / cmd.run
        where.mkdir(parents=True, exist_ok=True)
        ids = tuple(host_id(self.fabric, h) for h in cmd.hosts)
        dblp = job_dblp_config("fabric", peer_timeout_s=cmd.job.peer_timeout_s)
        with (where / f"{self.host}.jsonl").open("w") as records:

            def note(rec: RoundRecord) -> None:
                records.write(record_line(rec) + "\n")
                records.flush()
                fields = asdict(rec)
                self.console.emit(
                    "round",
                    run=cmd.run,
                    rank=cmd.rank,
                    **{k: _json_number(fields[k]) for k in ROUND_EVENT_FIELDS},
                )

            try:
                with self.open_endpoint() as endpoint:
                    self.console.emit("started", run=cmd.run, rank=cmd.rank, host=self.host)
                    out = run_worker(
                        cmd.job,
                        endpoint,
                        cmd.rank,
                        ids,
                        dblp,
                        observer=FileObserver(where / "obs"),
                        origin=cmd.origin,
                        on_round=note,
                    )
            except (TransportError, OSError) as e:  # the endpoint could not open
                out = WorkerOutcome(
                    cmd.rank, ids[cmd.rank], WorkerStatus.DIED, -1, f"{type(e).__name__}: {e}", ()
                )
            records.write(outcome_line(out) + "\n")
        self.console.emit(
            "finished",
            run=cmd.run,
            rank=out.rank,
            host=self.host,
            status=out.status.value,
            last_round=out.last_round,
            rounds=len(out.records),
            error=out.error,
        )
        return out


def _json_number(value: object) -> object:
    """NaN and infinities as null (strict JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


COMMANDS: dict[str, Handler[Agent]] = {
    "run": Agent._run_command,
    "quit": Agent._quit,
}
"""Command name -> handler (False: stop reading)."""


def fabric_endpoint(fabric: Fabric, host: str) -> AbstractContextManager[MessageEndpoint]:
    """An MRC endpoint on ``host``'s plane NICs, settings for the topology's link rate."""
    return mrc_endpoint(
        fabric,
        fabric_nics(fabric, host),
        host_id(fabric, host),
        RouteTable.from_fabric(fabric, host),
    )


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m host.diloco_agent", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--topology", required=True, help="the fabric's topology JSON")
    ap.add_argument("--host", required=True, help="this host's name (h1, h2, ...)")
    ap.add_argument("--out", required=True, help="directory of the jobs' outputs")
    return ap


def prepare() -> None:
    """What a process does once before it serves (also :mod:`host.forkserver`'s preparation,
    so forked agents inherit it): one torch thread per worker (the hosts share the machine's
    cores)."""
    torch.set_num_threads(1)


def main(argv: Sequence[str] | None = None, inp: IO[str] = sys.stdin) -> int:
    args = build_parser().parse_args(argv)
    console = Console()
    try:
        fabric = Fabric.load(args.topology)
        host_id(fabric, args.host)
    except STARTUP_ERRORS as e:
        console.emit("error", host=args.host, message=f"{type(e).__name__}: {e}")
        return 2
    prepare()
    agent = Agent(fabric, args.host, args.out, console, lambda: fabric_endpoint(fabric, args.host))
    return serve_agent(agent, console, inp, host=args.host)


__all__ = ["Agent", "AgentError", "RunCommand", "main", "read_job_records"]

if __name__ == "__main__":
    sys.exit(main())
