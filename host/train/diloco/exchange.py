"""The exchanges of a DiLoCo worker: all-reduces, neighbour mixing, Mix1 in the background.

* **All-reduce** (:class:`AllReduce`): the mean of one flat float32 vector over every worker.
  :class:`MeshRingReduce` is a ring all-reduce (reduce-scatter then all-gather, 2(M − 1)
  steps, each sending one segment to rank + 1 and receiving one from rank − 1) of reliable
  messages over the :class:`~host.train.diloco.mesh.Mesh`; every rank ends with the same bits.
  :class:`DblpRingReduce` runs :class:`host.collectives.RingAllReduce` under a DBLP loss
  policy (lost chunks are zeros in the mean). :class:`LocalReduce` is the one-worker case.
* **Neighbour mixing** (:func:`neighbour_mix`, Mix2 LOCAL): send the vector to every
  neighbour, wait until all of theirs arrived or the timeout passed, and mix with what
  arrived (:func:`~host.train.diloco.mixing.mix`: a missing neighbour's weight stays on the
  worker's own vector); the round is then closed, so a message arriving later is dropped and
  counted LATE.
* **Mix1** (:class:`Mix1Background`): a thread of the worker that, as a round starts, sends
  the round-start parameters to the Mix1 neighbours (or runs a ring all-reduce of them) while
  the main thread runs the inner steps; :meth:`Mix1Round.finish` collects what arrived,
  waiting at most the Mix1 timeout, and mixes.

:func:`open_comm` sets up everything a worker of a given configuration needs (:class:`Comm`).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field, replace
from typing import NamedTuple, Protocol

import numpy as np

from host.api import MessageEndpoint, SendHandleLike
from host.collectives import RingAllReduce, connect_ring, job_fingerprint
from host.dblp.config import DblpConfig
from host.dblp.control import Control, ControlKind, encode_control
from host.dblp.errors import DblpError
from host.dblp.phase import PhaseController
from host.errors import TransportError
from host.train.diloco.config import (
    Algorithm,
    DilocoConfig,
    Mix1Transport,
    Mix2Scope,
    Reduce,
)
from host.train.diloco.errors import ExchangeError, PeerFailed, SetupFailed
from host.train.diloco.mesh import ABORT_WAIT_S, Arrival, Mesh
from host.train.diloco.mixing import global_weights, mix, row_weights
from host.train.diloco.wire import Key, MessageKind


class RingStep(NamedTuple):
    send: int  # the segment this rank sends at this step
    recv: int  # the segment it receives
    gather: bool  # all-gather phase (the received segment replaces its own)


def ring_step(rank: int, world: int, step: int) -> RingStep:
    """Which segments rank ``rank`` moves at step ``step`` of a ring all-reduce."""
    if step >= world - 1:
        s = step - (world - 1)
        return RingStep((rank + 1 - s) % world, (rank - s) % world, True)
    return RingStep((rank - step) % world, (rank - step - 1) % world, False)


@dataclass(frozen=True)
class ReduceResult:
    vector: np.ndarray  # the mean (float32)
    delivered_fraction: float = 1.0


class AllReduce(Protocol):
    def allreduce(
        self, kind: MessageKind, round_: int, tensor: int, vector: np.ndarray
    ) -> ReduceResult: ...

    def bytes_sent(self, round_: int) -> int: ...

    def bytes_received(self, round_: int) -> int: ...

    def abort(self, reason: str) -> None:
        """Tell the peers this worker stops (transports without a mesh of their own)."""

    def close(self) -> None: ...


def ring_allreduce(
    mesh: Mesh,
    kind: MessageKind,
    round_: int,
    tensor: int,
    vector: np.ndarray,
    timeout_s: float,
) -> np.ndarray:
    """The mean of every rank's ``vector`` (float32), the same bits on every rank.

    Raises:
        PeerFailed: a peer of the mesh failed or aborted (the ring cannot finish without it:
            stopping at once passes the failure on around the ring).
        PeerTimeout: a segment did not arrive within ``timeout_s``.
        ExchangeError: a segment of the wrong size arrived (another job's vector).
    """
    n, rank = mesh.world, mesh.rank
    flat = np.ascontiguousarray(vector, dtype=np.float32).reshape(-1)
    segs = [s.copy() for s in np.array_split(flat, n)]
    nxt, prev = (rank + 1) % n, (rank - 1) % n
    for step in range(2 * (n - 1)):
        plan = ring_step(rank, n, step)
        mesh.send(nxt, kind, round_, segs[plan.send], tensor=tensor, part=step)
        got = mesh.take(Key(kind, round_, prev, tensor, step), timeout_s, watch=mesh.peers).array
        if got.shape != segs[plan.recv].shape:
            raise ExchangeError(
                f"{kind.name} round {round_} step {step}: rank {prev} sent {got.size} values, "
                f"segment {plan.recv} has {segs[plan.recv].size}"
            )
        segs[plan.recv] = got.copy() if plan.gather else segs[plan.recv] + got
    out: np.ndarray = np.concatenate(segs) / np.float32(n)
    return out.astype(np.float32)


class LocalReduce:
    """One worker: the mean is the vector itself."""

    def allreduce(
        self, kind: MessageKind, round_: int, tensor: int, vector: np.ndarray
    ) -> ReduceResult:
        return ReduceResult(np.array(vector, dtype=np.float32))

    def bytes_sent(self, round_: int) -> int:
        return 0

    def bytes_received(self, round_: int) -> int:
        return 0

    def abort(self, reason: str) -> None:
        return None  # nobody to tell, or the mesh tells them

    def close(self) -> None:
        return None


class MeshRingReduce:
    """Ring all-reduces of reliable messages over a mesh (bytes are the mesh's counters)."""

    def __init__(self, mesh: Mesh, timeout_s: float) -> None:
        if mesh.world < 2 or not {(mesh.rank + 1) % mesh.world, (mesh.rank - 1) % mesh.world} <= (
            set(mesh.peers)
        ):
            raise SetupFailed(f"rank {mesh.rank}: a ring all-reduce needs both ring neighbours")
        self.mesh = mesh
        self.timeout_s = timeout_s

    def allreduce(
        self, kind: MessageKind, round_: int, tensor: int, vector: np.ndarray
    ) -> ReduceResult:
        return ReduceResult(ring_allreduce(self.mesh, kind, round_, tensor, vector, self.timeout_s))

    def bytes_sent(self, round_: int) -> int:
        return 0  # counted by the mesh, which the worker's Comm reads

    def bytes_received(self, round_: int) -> int:
        return 0

    def abort(self, reason: str) -> None:
        return None  # nobody to tell, or the mesh tells them

    def close(self) -> None:
        return None


class DblpRingReduce:
    """:class:`host.collectives.RingAllReduce` under a loss policy.

    Each call is one DBLP round (a counter: data parallel makes H calls per round). Bytes are
    chunk messages sent (resends included) and received, ``packet_bytes`` each.

    Raises (from :meth:`allreduce`):
        ExchangeError: a neighbour failed, aborted or stopped answering.
    """

    def __init__(self, ring: RingAllReduce, packet_bytes: int) -> None:
        self.ring = ring
        self.packet_bytes = packet_bytes
        self._calls = 0
        self._sent: Counter[int] = Counter()
        self._received: Counter[int] = Counter()

    def allreduce(
        self, kind: MessageKind, round_: int, tensor: int, vector: np.ndarray
    ) -> ReduceResult:
        try:
            res = self.ring.allreduce(self._calls, np.ascontiguousarray(vector, np.float32))
        except DblpError as e:
            raise ExchangeError(f"DBLP all-reduce of round {round_}: {e}") from e
        self._calls += 1
        self._sent[round_] += sum(s.chunks_sent for s in res.sends) * self.packet_bytes
        self._received[round_] += sum(r.received for r in res.recvs) * self.packet_bytes
        return ReduceResult(res.vector.astype(np.float32), res.delivered_fraction)

    def bytes_sent(self, round_: int) -> int:
        return self._sent[round_]

    def bytes_received(self, round_: int) -> int:
        return self._received[round_]

    def abort(self, reason: str) -> None:
        """ABORT on both ring links, acknowledged before the links close (bounded wait).

        Sent on the links' connections and waited for: ``DblpLink.abort`` (which
        ``RingAllReduce`` itself calls when a round fails) fails the link at once, and
        closing a failed link does not linger, so its ABORT can be lost with the connection
        and the neighbour then waits its whole peer timeout."""
        data = encode_control(Control(ControlKind.ABORT, body=reason.encode()[:512]))
        handles: list[SendHandleLike] = []
        for link in (self.ring.to_next, self.ring.from_prev):
            try:
                handles.append(link.conn.send(data))
            except TransportError:
                continue  # that connection has ended already
        deadline = time.monotonic() + ABORT_WAIT_S
        for h in handles:
            try:
                h.wait(max(0.0, deadline - time.monotonic()))
            except TransportError:
                continue

    def close(self) -> None:
        self.ring.close()


@dataclass(frozen=True)
class MixResult:
    vector: np.ndarray
    missing: int  # weighted neighbours whose message did not arrive in time
    arrivals_s: tuple[float, ...]  # time.monotonic() of each arrival


def _send_to(
    mesh: Mesh, peers: list[int], kind: MessageKind, round_: int, vector: np.ndarray
) -> None:
    for peer in peers:
        try:
            mesh.send(peer, kind, round_, vector)
        except PeerFailed:
            continue  # counted missing when its message does not come


def neighbour_mix(
    mesh: Mesh,
    kind: MessageKind,
    round_: int,
    vector: np.ndarray,
    weights: Mapping[int, float],
    timeout_s: float,
) -> MixResult:
    """Exchange ``vector`` with the neighbours in ``weights`` and mix (blocking, bounded by
    ``timeout_s``)."""
    rank = mesh.rank
    peers = [j for j in sorted(weights) if j != rank and j not in mesh.failed_peers()]
    _send_to(mesh, peers, kind, round_, vector)
    keys = [Key(kind, round_, j) for j in sorted(weights) if j != rank]
    got = mesh.mailbox.gather(keys, time.monotonic() + timeout_s)
    mesh.mailbox.close_round(kind, round_)
    return _mixed(rank, weights, vector, got)


def _mixed(
    rank: int, weights: Mapping[int, float], own: np.ndarray, got: Mapping[int, Arrival]
) -> MixResult:
    values = {rank: own, **{j: a.array for j, a in got.items()}}
    z, missing = mix(rank, weights, values)
    return MixResult(z, missing, tuple(sorted(a.at_s for a in got.values())))


@dataclass
class Mix1Round:
    """Mix1 of one round, running in the background until :meth:`finish`."""

    mesh: Mesh
    round: int
    own: np.ndarray
    weights: Mapping[int, float]
    handed: threading.Event = field(default_factory=threading.Event)
    """Set once the background thread has handed every message to the transport."""
    reduced: Future[tuple[np.ndarray, float]] | None = None
    """ALLREDUCE transport: the background ring all-reduce (the mean, when it finished)."""

    def finish(self, timeout_s: float) -> MixResult:
        """The mixed parameters, waiting at most ``timeout_s`` for what is still missing."""
        deadline = time.monotonic() + timeout_s
        if self.reduced is not None:
            return self._finish_reduce(deadline)
        self.handed.wait(timeout_s)
        keys = [
            Key(MessageKind.MIX1, self.round, j)
            for j in sorted(self.weights)
            if j != self.mesh.rank
        ]
        got = self.mesh.mailbox.gather(keys, deadline)
        self.mesh.mailbox.close_round(MessageKind.MIX1, self.round)
        return _mixed(self.mesh.rank, self.weights, self.own, got)

    def _finish_reduce(self, deadline: float) -> MixResult:
        assert self.reduced is not None
        others = len(self.weights) - 1
        try:
            mean, done_s = self.reduced.result(max(0.0, deadline - time.monotonic()))
        except (FutureTimeout, ExchangeError):
            # late or broken: this round's Mix1 is skipped (the ring finishes in the background)
            return MixResult(self.own.copy(), others, ())
        return MixResult(mean, 0, (done_s,))


class Mix1Background:
    """The worker's Mix1 thread: one round at a time, in round order (context manager).

    Args:
        weights: this worker's row of W1 (the global row for ALLREDUCE).
        timeout_s: how long a background ring all-reduce waits for a segment.
    """

    def __init__(
        self,
        mesh: Mesh,
        transport: Mix1Transport,
        weights: Mapping[int, float],
        timeout_s: float,
    ) -> None:
        self.mesh = mesh
        self.transport = transport
        self.weights = dict(weights)
        self.timeout_s = timeout_s
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"mix1-r{mesh.rank}")

    def start(self, round_: int, own: np.ndarray, *, send: bool = True) -> Mix1Round:
        """Begin Mix1 of ``round_`` with this worker's round-start parameters ``own``.

        Args:
            send: False: this worker's messages are lost (fault injection); it still mixes
                what its neighbours send.
        """
        handle = Mix1Round(self.mesh, round_, own, self.weights)
        if self.transport is Mix1Transport.ALLREDUCE:
            handle.reduced = self._pool.submit(self._reduce, round_, own)
            handle.handed.set()
        else:
            self._pool.submit(self._send, handle, send)
        return handle

    def _reduce(self, round_: int, own: np.ndarray) -> tuple[np.ndarray, float]:
        mean = ring_allreduce(self.mesh, MessageKind.MIX1_REDUCE, round_, 0, own, self.timeout_s)
        return mean, time.monotonic()

    def _send(self, handle: Mix1Round, send: bool) -> None:
        """Encode and hand the messages to the transport (whose I/O thread sends them). Not
        waiting for their acknowledgements: a neighbour that vanished must not hold up the
        next round's Mix1 (the mesh flushes what is left when it closes)."""
        mesh = self.mesh
        peers = [j for j in sorted(self.weights) if j != mesh.rank and j not in mesh.failed_peers()]
        if send:
            _send_to(mesh, peers, MessageKind.MIX1, handle.round, handle.own)
        handle.handed.set()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> Mix1Background:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- a worker's communication, set up from its configuration ---------------------------------


class Comm:
    """What one worker communicates with (context manager): the mesh (if any), the
    all-reduce, the Mix1 thread and the mixing weights."""

    def __init__(
        self,
        rank: int,
        hosts: tuple[int, ...],
        mesh: Mesh | None,
        reduce: AllReduce,
        mix1: Mix1Background | None = None,
        mix2_weights: Mapping[int, float] | None = None,
    ) -> None:
        self.rank = rank
        self.hosts = hosts
        self.mesh = mesh
        self.reduce = reduce
        self.mix1 = mix1
        self.mix2_weights = dict(mix2_weights or {})
        self._closed = False

    @property
    def host(self) -> int:
        return self.hosts[self.rank]

    def bytes_sent(self, round_: int) -> int:
        mesh = self.mesh.bytes_sent(round_) if self.mesh is not None else 0
        return mesh + self.reduce.bytes_sent(round_)

    def bytes_received(self, round_: int) -> int:
        mesh = self.mesh.bytes_received(round_) if self.mesh is not None else 0
        return mesh + self.reduce.bytes_received(round_)

    def late(self, kind: MessageKind) -> int:
        return self.mesh.mailbox.late_count(kind) if self.mesh is not None else 0

    def abort(self, round_: int, reason: str) -> None:
        """Tell the peers this worker stops in ``round_`` (best effort)."""
        if self.mesh is not None:
            self.mesh.abort(round_, reason)
        self.reduce.abort(f"round {round_}: {reason}")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.mix1 is not None:
            self.mix1.close()
        self.reduce.close()
        if self.mesh is not None:
            self.mesh.close()

    def __enter__(self) -> Comm:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def uses_ring(cfg: DilocoConfig) -> bool:
    """Whether the workers need their ring neighbours on the mesh (a ring all-reduce of
    reliable messages somewhere in the round)."""
    if cfg.workers < 2:
        return False
    if cfg.algorithm is Algorithm.GOSSIP:
        g = cfg.gossip
        return g.mix2 is Mix2Scope.GLOBAL or g.mix1_transport is Mix1Transport.ALLREDUCE
    return cfg.reduce.transport is Reduce.MRC


def mesh_peers(cfg: DilocoConfig, rank: int) -> set[int]:
    """The ranks worker ``rank`` keeps a mesh connection to (symmetric by construction)."""
    m = cfg.workers
    peers: set[int] = set()
    if uses_ring(cfg):
        peers |= {(rank + 1) % m, (rank - 1) % m}
    if cfg.algorithm is Algorithm.GOSSIP:
        g = cfg.gossip
        if g.mix1_transport is Mix1Transport.NEIGHBOURS:
            peers |= set(row_weights(g.mix1_graph, m, rank))
        if g.mix2 is Mix2Scope.LOCAL:
            peers |= set(row_weights(g.mix2_graph, m, rank))
    return peers - {rank}


def fingerprint(cfg: DilocoConfig) -> bytes:
    """What HELLO carries: the configuration (faults aside, which are per worker)."""
    return job_fingerprint(repr(replace(cfg, faults=())))


def open_comm(
    cfg: DilocoConfig,
    endpoint: MessageEndpoint,
    rank: int,
    hosts: tuple[int, ...],
    dblp: DblpConfig,
) -> Comm:
    """Connect worker ``rank`` (on host ``hosts[rank]``) as ``cfg`` needs.

    Raises:
        SetupFailed: a peer did not show up within ``cfg.setup_timeout_s`` or runs another job.
    """
    fp = fingerprint(cfg)
    mesh: Mesh | None = None
    peers = mesh_peers(cfg, rank)
    if peers:
        mesh = Mesh(endpoint, rank, hosts, peers, fp, setup_timeout_s=cfg.setup_timeout_s)
    reduce: AllReduce = LocalReduce()
    try:
        if cfg.workers > 1 and cfg.algorithm is not Algorithm.GOSSIP:
            reduce = _dblp_or_mesh(cfg, endpoint, rank, hosts, dblp, mesh, fp)
        elif uses_ring(cfg):
            assert mesh is not None
            reduce = MeshRingReduce(mesh, cfg.peer_timeout_s)
    except BaseException:
        if mesh is not None:
            mesh.close()
        raise
    if cfg.algorithm is not Algorithm.GOSSIP:
        return Comm(rank, hosts, mesh, reduce)
    assert mesh is not None
    g, m = cfg.gossip, cfg.workers
    w1 = (
        global_weights(m)
        if g.mix1_transport is Mix1Transport.ALLREDUCE
        else row_weights(g.mix1_graph, m, rank)
    )
    w2 = row_weights(g.mix2_graph, m, rank) if g.mix2 is Mix2Scope.LOCAL else {}
    mix1 = Mix1Background(mesh, g.mix1_transport, w1, cfg.peer_timeout_s)
    return Comm(rank, hosts, mesh, reduce, mix1, w2)


def _dblp_or_mesh(
    cfg: DilocoConfig,
    endpoint: MessageEndpoint,
    rank: int,
    hosts: tuple[int, ...],
    dblp: DblpConfig,
    mesh: Mesh | None,
    fp: bytes,
) -> AllReduce:
    if cfg.reduce.transport is Reduce.MRC:
        assert mesh is not None
        return MeshRingReduce(mesh, cfg.peer_timeout_s)
    try:
        to_next, from_prev = connect_ring(
            endpoint, rank, list(hosts), fp, dblp, cfg.setup_timeout_s
        )
    except DblpError as e:
        raise SetupFailed(f"rank {rank}: DBLP ring: {e}") from e
    phase = PhaseController(cfg.reduce.policy, cfg.reduce.phase)
    return DblpRingReduce(
        RingAllReduce(rank, cfg.workers, to_next, from_prev, phase), dblp.packet_bytes
    )
