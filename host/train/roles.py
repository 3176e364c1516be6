"""The roles of a training job and their wiring: which connections each role opens, in which
order, and which collective it then runs.

Both runners call these functions, with one endpoint per host: :func:`host.train.run.run_emu_job`
(every host a thread of one process over the emulated fabric) and :mod:`host.train_agent` (one
process per fabric host).

* :func:`run_server`: the parameter server. The gradient's shape first
  (:func:`~host.train.loop.gradient_spec`), then it accepts the workers' HELLOs (ranks
  0..W−1, in whatever order they arrive), optionally checks that each rank came from its
  expected host, and serves ``job.rounds`` rounds with a
  :class:`~host.collectives.ParameterServer` (the job's phase controller, the caller's round
  hooks).
* :func:`run_ps_worker`: worker ``rank`` of a parameter server. It connects to the server's
  host, says HELLO with its rank and trains through a :class:`~host.collectives.PsWorker`.
* :func:`run_ring_rank`: rank ``rank`` of a ring over ``hosts`` (one host per rank). It connects
  to the next rank, accepts the previous one and trains through a
  :class:`~host.collectives.RingAllReduce` with its own phase controller.

Every HELLO carries the job's fingerprint (:func:`~host.collectives.job_fingerprint` of
``job.to_json()``), so hosts running different jobs refuse each other. Workers and ring ranks
train with :func:`~host.train.loop.train_worker`, and rank 0 evaluates. Each role closes its
collective, and with it its links, when it returns or fails.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from host.api import MessageEndpoint
from host.collectives import (
    NoHooks,
    ParameterServer,
    PsWorker,
    RingAllReduce,
    RoundHooks,
    accept_workers,
    connect_ring,
    connect_worker,
    job_fingerprint,
)
from host.dblp.chunks import CHUNK_HEADER_BYTES, chunk_elems_for
from host.dblp.config import DblpConfig
from host.dblp.errors import JobMismatch
from host.dblp.phase import PhaseController
from host.train.job import JobSpec
from host.train.loop import (
    EventHooks,
    RoundNetwork,
    ServerRecord,
    WorkerResult,
    WorkerRound,
    gradient_numel,
    gradient_spec,
    serve,
    train_worker,
)


def chunked_config(job: JobSpec, cfg: DblpConfig) -> DblpConfig:
    """``cfg`` with chunks small enough that the job's gradient has at least
    ``job.min_chunks`` of them (both ends of every transfer must use the same)."""
    if not job.min_chunks:
        return cfg
    numel = gradient_numel(job)
    elems = max(1, numel // job.min_chunks)
    itemsize = 4  # gradients travel as float32 (gradient_spec)
    if elems >= chunk_elems_for(cfg.packet_bytes, gradient_spec(job).dtype):
        return cfg
    return replace(cfg, packet_bytes=CHUNK_HEADER_BYTES + elems * itemsize)


def run_server(
    job: JobSpec,
    endpoint: MessageEndpoint,
    cfg: DblpConfig,
    network: RoundNetwork | None = None,
    on_round: Callable[[ServerRecord], None] | None = None,
    *,
    worker_hosts: Sequence[int] | None = None,
) -> list[ServerRecord]:
    """The parameter server of ``job`` on ``endpoint``: accept every worker, then serve.

    Args:
        network: entered at each round's start (the job's network events); None: none.
        on_round: called with each round's record as it finishes.
        worker_hosts: the host each rank must connect from (None: any host).
    Returns:
        One record per round.
    Raises:
        RoundFailed: a worker did not connect within ``job.setup_timeout_s``, or disappeared
            or failed during a round.
        JobMismatch: a worker runs another job, or a rank connected from another host than
            ``worker_hosts`` names.
    """
    spec = gradient_spec(job)
    cfg = chunked_config(job, cfg)
    links = accept_workers(
        endpoint, set(range(job.workers)), _fingerprint(job), cfg, job.setup_timeout_s
    )
    if worker_hosts is not None:
        for rank, link in links.items():
            if link.peer != worker_hosts[rank]:
                raise JobMismatch(
                    f"rank {rank} connected from host {link.peer}, expected {worker_hosts[rank]}"
                )
    hooks: RoundHooks = EventHooks(network) if network is not None else NoHooks()
    server = ParameterServer(links, PhaseController(job.policy, job.phase), hooks)
    try:
        return serve(job, server, spec, on_round)
    finally:
        server.close()


def run_ps_worker(
    job: JobSpec,
    endpoint: MessageEndpoint,
    cfg: DblpConfig,
    rank: int,
    server_host: int,
    on_round: Callable[[WorkerRound], None] | None = None,
    network: RoundNetwork | None = None,
) -> WorkerResult:
    """Worker ``rank`` of ``job``'s parameter server, which runs on host ``server_host``.

    ``network`` is waited on at the start of rounds where the job's events change it.

    Raises:
        RoundFailed: the server did not answer the HELLO within ``job.setup_timeout_s``, or
            disappeared, failed or aborted during a round.
        JobMismatch: the server runs another job.
    """
    cfg = chunked_config(job, cfg)
    link = connect_worker(endpoint, server_host, rank, _fingerprint(job), cfg, job.setup_timeout_s)
    worker = PsWorker(link)
    try:
        return train_worker(
            job, rank, worker.allreduce, evaluate=rank == 0, on_round=on_round, network=network
        )
    finally:
        worker.close()


def run_ring_rank(
    job: JobSpec,
    endpoint: MessageEndpoint,
    cfg: DblpConfig,
    rank: int,
    hosts: Sequence[int],
    on_round: Callable[[WorkerRound], None] | None = None,
) -> WorkerResult:
    """Rank ``rank`` of ``job``'s ring over ``hosts`` (the host of each rank, in rank order).

    Raises:
        RoundFailed: a neighbour did not show up within ``job.setup_timeout_s``, or
            disappeared, failed or aborted during a round.
        JobMismatch: a neighbour runs another job or claims another rank.
    """
    cfg = chunked_config(job, cfg)
    to_next, from_prev = connect_ring(
        endpoint, rank, list(hosts), _fingerprint(job), cfg, job.setup_timeout_s
    )
    ring = RingAllReduce(
        rank, len(hosts), to_next, from_prev, PhaseController(job.policy, job.phase)
    )
    try:
        return train_worker(job, rank, ring.allreduce, evaluate=rank == 0, on_round=on_round)
    finally:
        ring.close()


def _fingerprint(job: JobSpec) -> bytes:
    return job_fingerprint(job.to_json())
