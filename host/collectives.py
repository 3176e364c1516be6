"""All-reduce over DBLP links, usable with any loss policy: parameter server and ring.

* **Parameter server** (as in the DBLP evaluation: workers plus one server):
  :class:`PsWorker` pushes its gradient to the server and receives the average back;
  :class:`ParameterServer` gathers every worker's push in parallel under the round's P,
  averages what arrived (missing chunks count as zeros, divided by the number of workers),
  feeds the average's L2 norm to the phase detector, and broadcasts the average under the
  same P. Workers take P from the server's chunks and probes.
* **Ring** (:class:`RingAllReduce`): reduce-scatter then all-gather over ``n − 1`` steps each,
  every step one DBLP transfer to the next rank while receiving one from the previous rank;
  each rank runs its own phase detector on its result.

Setup: :func:`accept_workers` / :func:`connect_worker` and :func:`connect_ring` open the
connections and check a HELLO carrying the job's fingerprint and the rank.
:class:`RoundHooks` lets whoever runs the server act at round boundaries (a job's network
events enter there, :mod:`host.train.loop`). A transfer that fails makes the round fail: the server aborts
the other links and raises :class:`~host.dblp.errors.RoundFailed` naming the worker.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Protocol, TypeVar

import numpy as np

from host.api import MessageEndpoint
from host.dblp.chunks import TensorSpec
from host.dblp.config import DblpConfig
from host.dblp.control import FINGERPRINT_BYTES, Control, ControlKind
from host.dblp.errors import DblpError, JobMismatch, RoundFailed
from host.dblp.link import DblpLink
from host.dblp.phase import PhaseCheck, PhaseController
from host.dblp.protocol import RecvReport, SendReport, recv_tensor, send_tensor
from host.errors import TransportError

PUSH_TENSOR = 0
BROADCAST_TENSOR = 1
T = TypeVar("T")


class RoundHooks(Protocol):
    """Called by the coordinator around each round's communication."""

    def round_start(self, round_: int) -> None: ...

    def round_end(self, round_: int) -> None: ...


class NoHooks:
    def round_start(self, round_: int) -> None:
        pass

    def round_end(self, round_: int) -> None:
        pass


@dataclass(frozen=True)
class AllReduceResult:
    """What one rank got from one all-reduce."""

    round: int
    vector: np.ndarray  # the average; zeros where chunks were lost
    latency_s: float  # the call's duration (communication plus waiting for the others)
    delivered_fraction: float  # chunks delivered / chunks sent, over this rank's transfers
    bound: float  # P in force
    sends: tuple[SendReport, ...]
    recvs: tuple[RecvReport, ...]


@dataclass(frozen=True)
class ServerRound:
    """What the parameter server saw in one round."""

    round: int
    bound: float
    gathered: dict[int, RecvReport]
    broadcast: dict[int, SendReport]
    gather_s: float
    broadcast_s: float
    grad_norm: float
    check: PhaseCheck | None
    start_mono: float = 0.0  # time.monotonic() as the gather started (after round_start)

    @property
    def delivered_fraction(self) -> float:
        got = sum(r.received for r in self.gathered.values())
        got += sum(s.delivered for s in self.broadcast.values())
        total = sum(r.chunks for r in self.gathered.values())
        total += sum(s.chunks for s in self.broadcast.values())
        return got / total if total else 1.0


def job_fingerprint(description: str) -> bytes:
    """16 bytes that identify a job (HELLO carries it; a mismatch is refused)."""
    return hashlib.blake2b(description.encode(), digest_size=FINGERPRINT_BYTES).digest()


def _run_all(
    pool: ThreadPoolExecutor,
    jobs: Mapping[int, Callable[[], T]],
    links: Mapping[int, DblpLink],
    what: str,
) -> dict[int, T]:
    """Run one job per rank in parallel; on the first failure abort every link and raise."""
    futures: dict[int, Future[T]] = {rank: pool.submit(fn) for rank, fn in jobs.items()}
    out: dict[int, T] = {}
    failure: tuple[int, BaseException] | None = None
    for rank, fut in futures.items():
        try:
            out[rank] = fut.result()
        except DblpError as e:
            if failure is None:
                failure = (rank, e)
                for other in links.values():  # the others stop waiting at once
                    other.abort(f"{what}: rank {rank} failed: {e}")
    if failure is not None:
        rank, err = failure
        raise RoundFailed(f"{what}: rank {rank}: {err}") from err
    return out


class ParameterServer:
    """The server of a parameter-server all-reduce.

    Args:
        links: rank → link to that worker.
        phase: decides each round's P (DBLP, fixed or reliable) from gradient norms.
        hooks: called at each round's start and end.
    """

    def __init__(
        self, links: Mapping[int, DblpLink], phase: PhaseController, hooks: RoundHooks | None = None
    ) -> None:
        if not links:
            raise ValueError("a parameter server needs at least one worker")
        self.links = dict(links)
        self.phase = phase
        self.hooks = hooks or NoHooks()
        self._pool = ThreadPoolExecutor(max_workers=len(self.links), thread_name_prefix="ps")

    def run_round(self, round_: int, spec: TensorSpec) -> ServerRound:
        """Gather, average and broadcast round ``round_`` of a ``spec``-shaped gradient.

        Raises:
            RoundFailed: a worker disappeared or failed (the others are aborted).
        """
        bound = self.phase.bound()
        push = TensorSpec(PUSH_TENSOR, spec.dtype, spec.shape)
        self.hooks.round_start(round_)
        try:
            t0 = time.monotonic()
            gathered = _run_all(
                self._pool,
                {
                    rank: partial(recv_tensor, link, round_, push, bound)
                    for rank, link in self.links.items()
                },
                self.links,
                f"round {round_} gather",
            )
            t1 = time.monotonic()
            total = np.zeros(spec.shape, dtype=np.float64)
            for rep in gathered.values():
                total += rep.array
            avg = (total / len(gathered)).astype(spec.np_dtype)
            norm = float(np.linalg.norm(avg))
            check = self.phase.observe(round_, norm)
            sent = _run_all(
                self._pool,
                {
                    rank: partial(send_tensor, link, round_, BROADCAST_TENSOR, avg, bound)
                    for rank, link in self.links.items()
                },
                self.links,
                f"round {round_} broadcast",
            )
            t2 = time.monotonic()
        finally:
            self.hooks.round_end(round_)
        return ServerRound(round_, bound, gathered, sent, t1 - t0, t2 - t1, norm, check, t0)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        for link in self.links.values():
            link.close()


class PsWorker:
    """A worker of a parameter-server all-reduce (one link, to the server)."""

    def __init__(self, link: DblpLink) -> None:
        self.link = link
        self.bound = 0.0  # the server's P, learned from its broadcast

    def allreduce(self, round_: int, vector: np.ndarray) -> AllReduceResult:
        """Push ``vector``, receive the server's average.

        Raises:
            RoundFailed: the server disappeared, failed or aborted the job.
        """
        t0 = time.monotonic()
        sent = send_tensor(self.link, round_, PUSH_TENSOR, vector, self.bound)
        got = recv_tensor(self.link, round_, TensorSpec.of(BROADCAST_TENSOR, vector), None)
        self.bound = got.bound
        frac = (sent.delivered + got.received) / (sent.chunks + got.chunks)
        return AllReduceResult(
            round_, got.array, time.monotonic() - t0, frac, got.bound, (sent,), (got,)
        )

    def close(self) -> None:
        self.link.close()


class RingAllReduce:
    """One rank of a ring all-reduce (reduce-scatter + all-gather) over DBLP transfers.

    Args:
        to_next, from_prev: links to rank + 1 and from rank − 1 (mod world).
        phase: this rank's P policy (its detector sees this rank's result).
    """

    def __init__(
        self, rank: int, world: int, to_next: DblpLink, from_prev: DblpLink, phase: PhaseController
    ) -> None:
        if world < 2 or not 0 <= rank < world:
            raise ValueError(f"rank {rank} of a ring of {world}")
        self.rank, self.world = rank, world
        self.to_next, self.from_prev = to_next, from_prev
        self.phase = phase
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"ring{rank}")

    def allreduce(self, round_: int, vector: np.ndarray) -> AllReduceResult:
        """The average of every rank's ``vector`` (zeros where chunks were lost).

        Raises:
            RoundFailed: a neighbour disappeared, failed or aborted.
        """
        n, rank = self.world, self.rank
        bound = self.phase.bound()
        t0 = time.monotonic()
        segs = [s.copy() for s in np.array_split(vector.reshape(-1), n)]
        sends: list[SendReport] = []
        recvs: list[RecvReport] = []
        for step in range(2 * (n - 1)):
            gather = step >= n - 1
            s = step - (n - 1) if gather else step
            out_i = (rank + 1 - s) % n if gather else (rank - s) % n
            in_i = (rank - s) % n if gather else (rank - s - 1) % n
            fut = self._pool.submit(send_tensor, self.to_next, round_, step, segs[out_i], bound)
            try:
                got = recv_tensor(self.from_prev, round_, TensorSpec.of(step, segs[in_i]), bound)
                sent = fut.result()
            except DblpError as e:
                for link in (self.to_next, self.from_prev):
                    link.abort(f"round {round_}: rank {rank} failed: {e}")
                raise RoundFailed(f"round {round_} step {step}: rank {rank}: {e}") from e
            segs[in_i] = got.array.copy() if gather else segs[in_i] + got.array
            sends.append(sent)
            recvs.append(got)
        result = (np.concatenate(segs) / n).astype(vector.dtype).reshape(vector.shape)
        self.phase.observe(round_, float(np.linalg.norm(result)))
        frac = (sum(s.delivered for s in sends) + sum(r.received for r in recvs)) / (
            sum(s.chunks for s in sends) + sum(r.chunks for r in recvs)
        )
        return AllReduceResult(
            round_, result, time.monotonic() - t0, frac, bound, tuple(sends), tuple(recvs)
        )

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.to_next.close()
        self.from_prev.close()


# -- setup ------------------------------------------------------------------------------------


def _hello(link: DblpLink, rank: int, fingerprint: bytes, timeout_s: float) -> None:
    link.send_control(Control(ControlKind.HELLO, tensor_id=rank, body=fingerprint))
    deadline = time.monotonic() + timeout_s
    while True:
        ctrl = link.next_setup(max(0.0, deadline - time.monotonic()))
        if ctrl is None:
            raise RoundFailed(f"rank {rank}: no READY from {link.name} within {timeout_s} s")
        if ctrl.kind is ControlKind.READY:
            if ctrl.body != fingerprint:
                raise JobMismatch(f"{link.name} runs another job")
            return


HELLO_WAIT_S = 2.0  # an accepted connection must say HELLO this soon (else: stale, skipped)


def _await_hello(link: DblpLink, fingerprint: bytes, timeout_s: float) -> int | None:
    """The rank in the link's HELLO, after answering READY; None when no HELLO came.

    Raises:
        JobMismatch: the HELLO carries another job's fingerprint (the peer is aborted).
    """
    try:
        ctrl = link.next_setup(timeout_s)
    except RoundFailed:
        return None
    if ctrl is None or ctrl.kind is not ControlKind.HELLO:
        return None
    if ctrl.body != fingerprint:
        link.abort("job fingerprint mismatch")
        raise JobMismatch(f"{link.name} runs another job (fingerprint {ctrl.body.hex()})")
    link.send_control(Control(ControlKind.READY, tensor_id=ctrl.tensor_id, body=fingerprint))
    return ctrl.tensor_id


def _accept_hello(
    endpoint: MessageEndpoint,
    fingerprint: bytes,
    cfg: DblpConfig,
    deadline: float,
    accept_host: Callable[[int], bool],
    what: str,
) -> tuple[DblpLink, int]:
    """The next accepted connection that says HELLO; connections from hosts that
    ``accept_host`` refuses, or that stay silent (stale), are closed and skipped."""
    while True:
        left = deadline - time.monotonic()
        try:
            conn = endpoint.accept(timeout=max(0.0, left))
        except TransportError as e:
            raise RoundFailed(f"{what} within the setup timeout") from e
        if not accept_host(conn.peer):
            conn.close()
            continue
        link = DblpLink(conn, cfg, name=f"host {conn.peer}")
        rank = _await_hello(link, fingerprint, min(HELLO_WAIT_S, max(0.1, left)))
        if rank is not None:
            return link, rank
        link.close()


def connect_worker(
    endpoint: MessageEndpoint,
    server_host: int,
    rank: int,
    fingerprint: bytes,
    cfg: DblpConfig,
    timeout_s: float = 30.0,
) -> DblpLink:
    """A worker's link to the server, after the server accepted its HELLO.

    Raises:
        RoundFailed: no READY within ``timeout_s``; JobMismatch: the server runs another job.
    """
    try:
        conn = endpoint.connect(server_host)
    except TransportError as e:
        raise RoundFailed(f"rank {rank}: cannot connect to server host {server_host}: {e}") from e
    link = DblpLink(conn, cfg, name=f"server (host {server_host})")
    try:
        _hello(link, rank, fingerprint, timeout_s)
    except DblpError:
        link.close()
        raise
    return link


def accept_workers(
    endpoint: MessageEndpoint,
    ranks: set[int],
    fingerprint: bytes,
    cfg: DblpConfig,
    timeout_s: float = 30.0,
) -> dict[int, DblpLink]:
    """The server's links to the workers ``ranks``, each after a matching HELLO.

    Raises:
        RoundFailed: not every worker arrived within ``timeout_s``; JobMismatch.
    """
    links: dict[int, DblpLink] = {}
    deadline = time.monotonic() + timeout_s
    try:
        while set(links) != ranks:
            missing = sorted(ranks - set(links))
            link, rank = _accept_hello(
                endpoint,
                fingerprint,
                cfg,
                deadline,
                lambda h: True,
                f"workers {missing} did not connect",
            )
            if rank not in ranks or rank in links:
                link.abort(f"unexpected rank {rank}")
                raise JobMismatch(f"host {link.peer} claims rank {rank}; expected {sorted(ranks)}")
            link.name = f"worker {rank} (host {link.peer})"
            links[rank] = link
    except DblpError:
        for link in links.values():
            link.close()
        raise
    return links


def connect_ring(
    endpoint: MessageEndpoint,
    rank: int,
    hosts: list[int],
    fingerprint: bytes,
    cfg: DblpConfig,
    timeout_s: float = 30.0,
) -> tuple[DblpLink, DblpLink]:
    """``(to_next, from_prev)`` of rank ``rank`` in a ring over ``hosts`` (host id per rank).

    Raises:
        RoundFailed: a neighbour did not show up in time; JobMismatch.
    """
    n = len(hosts)
    nxt = hosts[(rank + 1) % n]
    to_next = DblpLink(endpoint.connect(nxt), cfg, name=f"rank {(rank + 1) % n} (host {nxt})")
    to_next.send_control(Control(ControlKind.HELLO, tensor_id=rank, body=fingerprint))
    prev_rank, prev_host = (rank - 1) % n, hosts[(rank - 1) % n]
    try:
        from_prev, prev = _accept_hello(
            endpoint,
            fingerprint,
            cfg,
            time.monotonic() + timeout_s,
            lambda h: h == prev_host,
            f"rank {rank}: rank {prev_rank} did not connect",
        )
    except DblpError:
        to_next.close()
        raise
    from_prev.name = f"rank {prev_rank} (host {prev_host})"
    try:
        if prev != prev_rank:
            raise JobMismatch(f"rank {rank}: host {prev_host} claims rank {prev}")
        ctrl = to_next.next_setup(timeout_s)
        if ctrl is None or ctrl.kind is not ControlKind.READY or ctrl.body != fingerprint:
            raise RoundFailed(f"rank {rank}: no READY from {to_next.name}")
    except DblpError:
        to_next.close()
        from_prev.close()
        raise
    return to_next, from_prev
