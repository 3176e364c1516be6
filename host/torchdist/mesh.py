"""One rank's MRC connections to every other rank of a process group, and their inboxes.

:func:`open_mesh` is the rendezvous: the rank opens an MRC endpoint (on loopback: one UDP
socket per plane on ``::1``; on a fabric host: its plane NICs, see :class:`MeshConfig`),
publishes its ports in the c10d store PyTorch gave the backend, reads every other rank's,
and connects: the lower rank of each pair opens the connection and says HELLO with the
group's session nonce (rank 0 draws it and puts it in the store).

:class:`Mesh` then runs one reader thread per connection, which files each message in an
inbox under (peer, kind, seq, step, piece), and one heartbeat thread, so that a rank that
vanished is noticed (no message for ``peer_timeout_s``) by whoever waits for it. Every wait
has a deadline; every failure is a :class:`torch.distributed.DistBackendError` naming the
rank and the reason.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from dataclasses import dataclass, replace
from datetime import timedelta

import torch.distributed as dist
from torch._C._distributed_c10d import Store

from host.errors import ConnectionClosed, TransportError, TransportTimeout
from host.mrc import Connection, Endpoint, MrcConfig, loopback_config
from host.mrc.emulated import emulated_fabric_config
from host.network import UdpNetwork
from host.paths import Ev, RouteTable, fabric_evs, fabric_nics, loopback_evs, loopback_nics
from host.torchdist.wire import (
    HEADER_BYTES,
    PIECE_BYTES,
    Header,
    Kind,
    WireError,
    decode_header,
    encode,
)
from topologies.model import Fabric, TopologyError

TOPOLOGY_ENV = "TAILFABRIC_TOPOLOGY"
"""Path of the fabric's ``topology.json``: set (with :data:`HOST_ENV`) on fabric hosts."""
HOST_ENV = "TAILFABRIC_HOST"
"""This process's fabric host name (``h1``...)."""
PEER_TIMEOUT_ENV = "TAILFABRIC_PEER_TIMEOUT_S"
"""Seconds without a message from a rank before it counts as gone (default 10)."""
PLANES_ENV = "TAILFABRIC_PLANES"
"""Loopback only: planes (UDP sockets) per rank (default 2)."""
HOST_RTT_ENV = "TAILFABRIC_HOST_RTT_MS"
"""Fabric only: the emulation's own RTT beyond its links (default :data:`HOST_RTT_MS`)."""
QA_ENV = "TAILFABRIC_QA_MS"
"""Fabric only: MRC's quick-adapt threshold in ms of queueing delay (0: the emulated config's)."""
NOISE_ENV = "TAILFABRIC_CC_NOISE"
"""Fabric only: MRC's ``noise_target_gain`` (default :data:`NOISE_TARGET_GAIN`; 0: off)."""
QA_CE_ENV = "TAILFABRIC_QA_CE"
"""Fabric only: 1: quick adapt on delay only with a CE mark in the window; 0 (default): on delay."""
SHARE_ENV = "TAILFABRIC_SHARE_VERDICTS"
"""MRC's ``share_verdicts`` (1: on; 0: off, the default): silent paths through two spines of a
plane take the plane out for all of the rank's connections at once (:mod:`host.mrc.health`)."""
PACING_ENV = "TAILFABRIC_PACING"
"""Fabric only: MRC's ``pacing_gain`` (0: no pacing)."""
RING_PIECE_ENV = "TAILFABRIC_RING_PIECE_KIB"
"""The ring all-reduce's piece size in KiB (default 64; 4096 = a segment at a time)."""

WAIT_SLICE_S = 0.1
HOST_RTT_MS = 10.0
"""RTT the emulated fabric adds on top of its links' (Python ranks and switches taking turns on
a few cores), given to :func:`~host.mrc.emulated.emulated_fabric_config`: without it the ring's
windows took that RTT for queueing delay and stayed at 40-60 KB against a 100 KB
bandwidth-delay product at 20 Mbit/s (p50 RTT 20-26 ms). With 10 ms the windows doubled and no
switch dropped; with 20 ms the windows grew into the 64-packet queues (tail drops, each one
resending what its EV had in flight)."""
NOISE_TARGET_GAIN = 0.0
"""MRC's delay target for unmarked samples, in mean deviations of their RTT (see
:class:`~host.mrc.config.CcConfig`; 0: off). Off by default: on the fabric at 20 Mbit/s, 3
(with ``qa_needs_ce``) halved the quick adapts and grew the ring's windows by 20-30 %, but
the RTTs grew with them and the bus bandwidth ÷ gloo's at 1/4 MiB stayed within the run-to-run
noise (2 rounds each, three pairs: 0.80/0.82, 1.00/0.99, 0.78/0.88 against 0.84/0.91,
0.57/0.71, 0.83/0.88 off; at 10 Mbit/s 1.52/1.51 against 1.46/1.52): what looked like jitter
there is mostly queueing in the CPU-starved switches' and ranks' socket buffers, which no
switch marks (the two cores are busy during the sweep)."""


def _error(msg: str) -> dist.DistBackendError:
    return dist.DistBackendError(f"tailfabric: {msg}")


@dataclass(frozen=True)
class MeshConfig:
    """Where a rank's endpoint lives and how soon a silent peer counts as gone."""

    topology: str | None = None
    """``topology.json`` of the fabric the rank runs on; None: loopback."""
    host: str | None = None
    """This rank's fabric host (required with ``topology``)."""
    loopback_planes: int = 2
    loopback_spines: int = 2
    """Loopback: EVs per plane (they differ only in the EV id)."""
    peer_timeout_s: float = 10.0
    """A rank silent this long (heartbeats every quarter of it) is gone."""
    host_rtt_ms: float = HOST_RTT_MS
    """Fabric only: passed to :func:`~host.mrc.emulated.emulated_fabric_config`."""
    pacing_gain: float = 0.0
    """Fabric only: MRC paces each connection at this multiple of ``cwnd / srtt``."""
    qa_threshold_ms: float = 0.0
    """Fabric only: quick adapt above this queueing delay (0: ``emulated_fabric_config``'s)."""
    noise_target_gain: float = NOISE_TARGET_GAIN
    """Fabric only: MRC's ``noise_target_gain`` (the switches mark ECN)."""
    qa_needs_ce: bool = False
    """Fabric only: MRC's ``qa_needs_ce`` (off by default: see :data:`NOISE_TARGET_GAIN`)."""
    share_verdicts: bool = False
    """MRC's ``share_verdicts`` (see :data:`SHARE_ENV`)."""
    ring_piece_bytes: int = 64 * 1024
    """The ring all-reduce passes segments on in pieces of this size."""

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> MeshConfig:
        """The settings of :data:`TOPOLOGY_ENV`, :data:`HOST_ENV`, :data:`PEER_TIMEOUT_ENV`
        and :data:`PLANES_ENV`.

        Raises:
            ValueError: a malformed value, or a topology without a host.
        """
        e = os.environ if env is None else env
        topo, host = e.get(TOPOLOGY_ENV) or None, e.get(HOST_ENV) or None
        if (topo is None) != (host is None):
            raise ValueError(f"set both {TOPOLOGY_ENV} and {HOST_ENV}, or neither (loopback)")
        cfg = cls(topology=topo, host=host)
        try:
            if PEER_TIMEOUT_ENV in e:
                cfg = replace(cfg, peer_timeout_s=float(e[PEER_TIMEOUT_ENV]))
            if PLANES_ENV in e:
                cfg = replace(cfg, loopback_planes=int(e[PLANES_ENV]))
            if HOST_RTT_ENV in e:
                cfg = replace(cfg, host_rtt_ms=float(e[HOST_RTT_ENV]))
            if QA_ENV in e:
                cfg = replace(cfg, qa_threshold_ms=float(e[QA_ENV]))
            if NOISE_ENV in e:
                cfg = replace(cfg, noise_target_gain=float(e[NOISE_ENV]))
            if QA_CE_ENV in e:
                if e[QA_CE_ENV] not in ("0", "1"):
                    raise ValueError
                cfg = replace(cfg, qa_needs_ce=e[QA_CE_ENV] == "1")
            if SHARE_ENV in e:
                if e[SHARE_ENV] not in ("0", "1"):
                    raise ValueError
                cfg = replace(cfg, share_verdicts=e[SHARE_ENV] == "1")
            if PACING_ENV in e:
                cfg = replace(cfg, pacing_gain=float(e[PACING_ENV]))
            if RING_PIECE_ENV in e:
                cfg = replace(cfg, ring_piece_bytes=int(e[RING_PIECE_ENV]) * 1024)
        except ValueError:
            raise ValueError(
                f"{PEER_TIMEOUT_ENV} must be a number of seconds, {HOST_RTT_ENV} and {QA_ENV} "
                f"numbers of milliseconds, {PACING_ENV} and {NOISE_ENV} numbers, {QA_CE_ENV} 0 or 1, "
                f"{SHARE_ENV} 0 or 1, "
                f"{PLANES_ENV} and "
                f"{RING_PIECE_ENV} integers"
            ) from None
        if not cfg.peer_timeout_s > 0 or not 1 <= cfg.loopback_planes <= 8:
            raise ValueError(f"need {PEER_TIMEOUT_ENV} > 0 and {PLANES_ENV} in 1..8")
        if not 0 <= cfg.qa_threshold_ms <= 60_000:
            raise ValueError(f"need {QA_ENV} in 0..60000 (0: the default)")
        if not 0 <= cfg.noise_target_gain <= 100:
            raise ValueError(f"need {NOISE_ENV} in 0..100 (0: off)")
        if not 0 <= cfg.pacing_gain <= 100:
            raise ValueError(f"need {PACING_ENV} in 0..100 (0: no pacing)")
        if not 0 <= cfg.host_rtt_ms <= 1000 or not 1024 <= cfg.ring_piece_bytes <= PIECE_BYTES:
            raise ValueError(
                f"need {HOST_RTT_ENV} in 0..1000 and {RING_PIECE_ENV} in 1..{PIECE_BYTES >> 10}"
            )
        return cfg


Key = tuple[int, Kind, int, int, int]  # (peer, kind, seq or tag, step, piece or count)


class Mesh:
    """The connections of rank ``rank`` to every other rank (``conns[peer]``)."""

    def __init__(
        self,
        endpoint: Endpoint,
        rank: int,
        world: int,
        conns: dict[int, Connection],
        cfg: MeshConfig,
    ) -> None:
        self.endpoint = endpoint
        self.rank, self.world = rank, world
        self.conns = conns
        self.cfg = cfg
        self._cv = threading.Condition()
        self._inbox: dict[Key, tuple[Header, memoryview]] = {}
        self._peer_error: dict[int, str] = {}
        self._said_bye: set[int] = set()
        now = time.monotonic()
        self._last_heard = dict.fromkeys(conns, now)
        self.aborted: str | None = None  # why the group cannot go on (a rank's ABORT, ...)
        self._closing = False
        self._threads = [
            threading.Thread(target=self._read, args=(p, c), daemon=True, name=f"tfpg-r{p}")
            for p, c in conns.items()
        ]
        self._threads.append(threading.Thread(target=self._beat, daemon=True, name="tfpg-hb"))
        for t in self._threads:
            t.start()

    # -- sending -------------------------------------------------------------------------------

    def send(self, peer: int, header: Header, payload: bytes | memoryview = b"") -> None:
        """Queue one message to ``peer`` (returns before it is acknowledged).

        Raises:
            DistBackendError: the connection to ``peer`` has ended.
        """
        try:
            self.conns[peer].send(encode(header, payload))
        except TransportError as e:
            raise _error(f"cannot send to rank {peer}: {e}") from None

    def broadcast_control(self, header: Header, payload: bytes = b"") -> None:
        """``header`` to every peer, ignoring connections that have ended."""
        for conn in self.conns.values():
            try:
                conn.send(encode(replace(header, src=self.rank), payload), timeout=0.5)
            except TransportError:
                pass

    # -- receiving -----------------------------------------------------------------------------

    def take(self, key: Key, deadline: float, what: str) -> tuple[Header, memoryview]:
        """The message filed under ``key``, waiting until ``deadline`` (monotonic).

        Raises:
            DistBackendError: the deadline passed, the peer is gone or silent, or the group
                was aborted.
        """
        peer = key[0]
        with self._cv:
            while True:
                msg = self._inbox.pop(key, None)
                if msg is not None:
                    return msg
                if self.aborted is not None:
                    raise _error(f"{what}: {self.aborted}")
                if peer in self._peer_error:
                    raise _error(f"{what}: {self._peer_error[peer]}")
                now = time.monotonic()
                silent = now - self._last_heard[peer]
                if silent > self.cfg.peer_timeout_s:
                    raise _error(
                        f"{what}: rank {peer} silent for {silent:.1f} s (gone? peer timeout "
                        f"{self.cfg.peer_timeout_s:g} s)"
                    )
                if now >= deadline:
                    raise _error(f"{what}: timed out waiting for rank {peer}")
                self._cv.wait(min(WAIT_SLICE_S, deadline - now))

    def abort(self, reason: str) -> None:
        """Mark the group unusable (waiters raise ``reason``)."""
        with self._cv:
            if self.aborted is None:
                self.aborted = reason
            self._cv.notify_all()

    # -- threads -------------------------------------------------------------------------------

    def _read(self, peer: int, conn: Connection) -> None:
        while True:
            try:
                msg = conn.recv()
            except ConnectionClosed:
                self._fail_peer(peer, f"connection to rank {peer} closed")
                return
            except TransportError as e:
                self._fail_peer(peer, f"connection to rank {peer} failed: {e}")
                return
            try:
                h = decode_header(msg)
                if h.src != peer or h.world != self.world:
                    raise WireError(
                        f"says rank {h.src} of {h.world}, expected rank {peer} of {self.world}"
                    )
            except WireError as e:
                self._fail_peer(peer, f"rank {peer} sent a malformed message: {e}")
                return
            self._file(peer, h, memoryview(msg)[HEADER_BYTES:])

    def _file(self, peer: int, h: Header, payload: memoryview) -> None:
        with self._cv:
            self._last_heard[peer] = time.monotonic()
            if h.kind in (Kind.COLLECTIVE, Kind.P2P):
                self._inbox[(peer, h.kind, h.seq, h.step, h.piece)] = (h, payload)
            elif h.kind is Kind.ABORT:
                reason = bytes(payload).decode("utf-8", "replace")[:500]
                if self.aborted is None:
                    self.aborted = f"rank {peer} aborted collective #{h.seq}: {reason}"
            elif h.kind is Kind.BYE:
                self._said_bye.add(peer)
                self._peer_error.setdefault(peer, f"rank {peer} shut its process group down")
            self._cv.notify_all()

    def _fail_peer(self, peer: int, why: str) -> None:
        with self._cv:
            if not self._closing:
                self._peer_error.setdefault(peer, why)
            self._cv.notify_all()

    def _beat(self) -> None:
        beat = encode(Header(Kind.HEARTBEAT, self.rank, self.world))
        interval = self.cfg.peer_timeout_s / 4
        while not self._closing:
            for conn in list(self.conns.values()):
                try:
                    conn.send(beat, timeout=interval)
                except TransportError:
                    pass
            with self._cv:
                self._cv.wait_for(lambda: self._closing, interval)

    def close(self, linger_s: float = 2.0) -> None:
        """Say BYE to every peer, wait (at most ``linger_s``) until what this rank sent has
        been acknowledged by the peers that have not said BYE themselves (those may still
        need its last messages; one that left acknowledges nothing more), then close the
        connections and the endpoint (idempotent)."""
        with self._cv:
            if self._closing:
                return
            self._closing = True
            self._cv.notify_all()
        bye = encode(Header(Kind.BYE, self.rank, self.world))
        with self._cv:
            gone = set(self._said_bye)
        alive = []
        for peer, conn in self.conns.items():
            try:
                conn.send(bye, timeout=0.1)
                if peer not in gone:
                    alive.append((peer, conn))
            except TransportError:
                pass
        deadline = time.monotonic() + linger_s
        for peer, conn in alive:
            while True:  # in slices: a peer that says BYE meanwhile acknowledges no more
                left = deadline - time.monotonic()
                try:
                    conn.flush(max(0.0, min(WAIT_SLICE_S, left)))
                    break
                except TransportTimeout:
                    with self._cv:
                        if peer in self._said_bye or left <= WAIT_SLICE_S:
                            break
                except TransportError:
                    break
        for conn in self.conns.values():
            conn.close()
        self.endpoint.close()


# -- rendezvous ------------------------------------------------------------------------------


def _addr_key(rank: int) -> str:
    return f"tailfabric/addr/{rank}"


SESSION_KEY = "tailfabric/session"


def _wait_keys(store: Store, keys: dict[str, int], timeout_s: float, what: str) -> None:
    """Wait for ``keys`` (key -> the rank that sets it) to be in the store.

    Raises:
        DistBackendError: naming the ranks whose keys are missing after ``timeout_s``.
    """
    try:
        store.wait(list(keys), timedelta(seconds=timeout_s))
    except Exception as e:  # the store's own timeout or connection error
        missing = sorted({r for k, r in keys.items() if not _check(store, k)})
        if not missing:
            raise _error(f"{what}: the store failed: {e}") from None
        raise _error(f"{what}: ranks {missing} did not join within {timeout_s:g} s") from None


def _check(store: Store, key: str) -> bool:
    try:
        return bool(store.check([key]))
    except Exception:
        return False


def _loopback(cfg: MeshConfig, rank: int) -> tuple[UdpNetwork, MrcConfig, dict[str, object]]:
    net = UdpNetwork(loopback_nics(cfg.loopback_planes))
    return net, loopback_config(dead_peer_timeout_s=cfg.peer_timeout_s), {"ports": net.ports}


def _fabric_routes(
    fabric: Fabric, me: str, rank: int, addrs: dict[int, dict[str, object]]
) -> RouteTable:
    table = RouteTable()
    owner: dict[str, int] = {}
    for peer, a in addrs.items():
        host = str(a.get("host"))
        if host in owner:
            raise _error(f"ranks {owner[host]} and {peer} both run on host {host}: one per host")
        owner[host] = peer
        if peer == rank:
            continue
        ports = [int(p) for p in a["ports"]]  # type: ignore[attr-defined]
        evs = fabric_evs(fabric, me, host, leaf_local=True)
        table.add(peer, [_with_port(ev, ports[ev.plane]) for ev in evs])
    return table


def _with_port(ev: Ev, port: int) -> Ev:
    return replace(ev, dest=(ev.dest[0], port))


def open_mesh(store: Store, rank: int, world: int, timeout_s: float, cfg: MeshConfig) -> Mesh:
    """Rendezvous through ``store`` and connect to every other rank.

    Raises:
        DistBackendError: a rank did not publish its address or connect within ``timeout_s``,
            a socket cannot be bound, or the topology does not know this host.
    """
    if world > 0xFFFF or not 0 <= rank < world:
        raise _error(f"rank {rank} of a world of {world}")
    deadline = time.monotonic() + timeout_s
    fabric: Fabric | None = None
    try:
        if cfg.topology is not None:
            assert cfg.host is not None
            fabric = Fabric.load(cfg.topology)
            net = UdpNetwork(fabric_nics(fabric, cfg.host, port=0), ecn=True)
            mrc = replace(
                emulated_fabric_config(fabric.spec.link_mbps, host_rtt_ms=cfg.host_rtt_ms),
                dead_peer_timeout_s=cfg.peer_timeout_s,
                pacing_gain=cfg.pacing_gain,
            )
            if cfg.qa_threshold_ms > 0:
                mrc = replace(mrc, cc=replace(mrc.cc, qa_threshold_us=cfg.qa_threshold_ms * 1e3))
            mrc = replace(
                mrc,
                cc=replace(
                    mrc.cc,
                    noise_target_gain=cfg.noise_target_gain,
                    qa_needs_ce=cfg.qa_needs_ce,
                ),
            )
            mine: dict[str, object] = {"host": cfg.host, "ports": net.ports}
        else:
            net, mrc, mine = _loopback(cfg, rank)
        mrc = replace(mrc, ev=replace(mrc.ev, share_verdicts=cfg.share_verdicts))
    except (OSError, KeyError, TopologyError, TransportError) as e:
        raise _error(f"rank {rank}: cannot open the endpoint: {e}") from None
    ep: Endpoint | None = None
    try:
        ep = Endpoint(net, rank, RouteTable(), mrc)
        if rank == 0:
            store.set(SESSION_KEY, secrets.token_hex(16))
        store.set(_addr_key(rank), json.dumps(mine))
        keys = {_addr_key(r): r for r in range(world)}
        keys[SESSION_KEY] = 0
        _wait_keys(store, keys, timeout_s, f"rank {rank}: rendezvous")
        nonce = bytes.fromhex(store.get(SESSION_KEY).decode())
        addrs = {r: _parse_addr(store.get(_addr_key(r)), r) for r in range(world)}
        if fabric is not None:
            assert cfg.host is not None
            try:
                ep.routes = _fabric_routes(fabric, cfg.host, rank, addrs)
            except (KeyError, TopologyError, TransportError) as e:
                raise _error(f"rank {rank}: no routes: {e}") from None
        else:
            for peer, a in addrs.items():
                if peer != rank:
                    ports = [int(p) for p in a["ports"]]  # type: ignore[attr-defined]
                    ep.routes.add(peer, loopback_evs(ports, cfg.loopback_spines))
        conns = _connect(ep, rank, world, nonce, deadline)
    except BaseException:
        if ep is not None:
            ep.close()
        else:
            net.close()
        raise
    return Mesh(ep, rank, world, conns, cfg)


def _parse_addr(raw: bytes, rank: int) -> dict[str, object]:
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict) or not all(
            isinstance(p, int) and 0 < p < 65536 for p in doc["ports"]
        ):
            raise ValueError("ports")
    except (ValueError, KeyError, TypeError):
        raise _error(f"rank {rank}'s address in the store is malformed: {raw[:80]!r}") from None
    return doc


def _connect(
    ep: Endpoint, rank: int, world: int, nonce: bytes, deadline: float
) -> dict[int, Connection]:
    """Open connections to the higher ranks, accept those of the lower ones."""
    conns: dict[int, Connection] = {}
    hello = encode(Header(Kind.HELLO, rank, world), nonce)
    try:
        for peer in range(rank + 1, world):
            conn = ep.connect(peer)
            conn.send(hello)
            conns[peer] = conn
        while len(conns) < world - 1:
            missing = sorted(set(range(rank)) - set(conns))
            left = deadline - time.monotonic()
            try:
                conn = ep.accept(timeout=max(0.0, left))
                msg = conn.recv(timeout=max(0.1, deadline - time.monotonic()))
                h = decode_header(msg)
            except TransportError:
                raise _error(
                    f"rank {rank}: ranks {missing} did not connect within the timeout"
                ) from None
            except WireError:
                conn.close()
                continue
            ok = h.kind is Kind.HELLO and h.src == conn.peer and msg[HEADER_BYTES:] == nonce
            if not ok or conn.peer not in missing:
                conn.close()  # a stale or foreign connection
                continue
            conns[conn.peer] = conn
    except BaseException:
        for c in conns.values():
            c.close()
        raise
    return conns
