"""The per-transfer DBLP protocol: one tensor from a sender to a receiver in one round.

Sender (:func:`send_tensor`)::

    spray every chunk unreliably; attempt = 0
    loop:  wait (at most settle_timeout_s) until the transport reports each chunk of the
           attempt acknowledged or abandoned; PROBE(attempt) on the control channel;
           re-PROBE every probe_interval_s until the receiver answers
           STOP            -> done (the answer says how many chunks it holds)
           BITMAP(attempt) -> resend only the chunks it lacks; attempt += 1

Receiver (:func:`recv_tensor`): place chunks into a zero-filled buffer; answer each probe with
the bitmap of received chunks, or with STOP once the received fraction is at least ``1 − P``.
STOP also goes unprompted when every chunk is in, and (``StopRule.ON_ARRIVAL``, the
prototype's "S on its own") as soon as ``1 − P`` has arrived. Before STOP the receiver takes
whatever chunks are already queued. Its ``P`` is its own or, when it passes none, the
sender's (every chunk and probe carries it).

Either side raises :class:`~host.dblp.errors.RoundFailed` when nothing of the transfer has
come from the peer for the link's liveness timeout (``peer_timeout_s``, stretched by the
longest transfer seen: :class:`~host.dblp.link.Liveness`; a worker or server that
disappeared), when the
connection fails, or when the peer aborts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from host.api import SendHandleLike
from host.dblp.chunks import (
    Chunk,
    ChunkDrop,
    TensorSpec,
    bound_to_ppm,
    chunk_elems_for,
    encode_chunks,
)
from host.dblp.config import DblpConfig, StopRule
from host.dblp.control import Control, ControlKind
from host.dblp.errors import RoundFailed
from host.dblp.link import DblpLink, Event
from host.dblp.state import ReceiveState, missing_chunks
from host.errors import TransportError, TransportTimeout


@dataclass(frozen=True)
class SendReport:
    """How one sent transfer went."""

    round: int
    tensor_id: int
    chunks: int
    delivered: int  # chunks the receiver held at STOP
    attempts: int  # 1 = no resend was needed
    chunks_sent: int  # including resends
    probes: int
    bound: float
    latency_s: float  # first chunk sent -> STOP received

    @property
    def delivered_fraction(self) -> float:
        return self.delivered / self.chunks


@dataclass(frozen=True)
class RecvReport:
    """How one received transfer went; ``array`` is zero-filled where chunks are missing."""

    round: int
    tensor_id: int
    array: np.ndarray
    chunks: int
    received: int
    bound: float
    wait_s: float  # call -> first chunk or probe of the transfer
    transfer_s: float  # first chunk or probe -> STOP sent
    probes: int
    drops: dict[str, int]

    @property
    def delivered_fraction(self) -> float:
        return self.received / self.chunks


def chunk_elems(cfg: DblpConfig, spec: TensorSpec) -> int:
    """Elements per chunk for ``spec`` under ``cfg`` (the same at both ends)."""
    return chunk_elems_for(cfg.packet_bytes, spec.dtype)


def send_tensor(
    link: DblpLink, round_: int, tensor_id: int, array: np.ndarray, bound: float
) -> SendReport:
    """Send ``array`` as transfer ``(round_, tensor_id)`` under loss bound ``bound``.

    Raises:
        RoundFailed: the receiver stopped answering, the connection failed, or it aborted.
    """
    cfg = link.cfg
    spec = TensorSpec.of(tensor_id, array)
    chunks = encode_chunks(round_, spec, array, chunk_elems(cfg, spec), bound)
    n = len(chunks)
    key = (round_, tensor_id)
    ppm = bound_to_ppm(bound)
    t0 = last_heard = time.monotonic()
    attempt = sent = probes = seq = 0
    to_send = list(range(n))
    while True:
        handles = [link.send_chunk(chunks[i]) for i in to_send]
        sent += len(to_send)
        _settle(handles, cfg.settle_timeout_s, link)
        reprobes = 0
        while True:  # probe until this attempt is answered
            if reprobes == 0:  # reliable, plus the usual copies
                seq += 1
                probes += 1
                link.send_control(
                    Control(ControlKind.PROBE, round_, tensor_id, attempt, n, 0, ppm, seq)
                )
            else:  # silence: more and more unreliable probes, each its own sequence number
                for _ in range(min(1 << reprobes, cfg.reprobe_copies_max)):
                    seq += 1
                    probes += 1
                    link.send_control(
                        Control(ControlKind.PROBE, round_, tensor_id, attempt, n, 0, ppm, seq),
                        reliable=False,
                        copies=1,
                    )
            reprobes += 1
            next_probe = time.monotonic() + cfg.probe_interval_s
            answer = _await_answer(link, key, attempt, next_probe)
            now = time.monotonic()
            if answer is None:
                if now - last_heard > link.liveness.timeout_s:
                    raise RoundFailed(
                        f"round {round_} tensor {tensor_id}: no answer from "
                        f"{link.name} for {now - last_heard:.1f} s (attempt "
                        f"{attempt}, {probes} probes)"
                    )
                continue
            last_heard = now
            if answer.kind is ControlKind.STOP:
                link.liveness.observe(now - t0)
                return SendReport(
                    round_,
                    tensor_id,
                    n,
                    answer.received,
                    attempt + 1,
                    sent,
                    probes,
                    bound,
                    now - t0,
                )
            to_send = missing_chunks(answer)
            attempt += 1
            break


def _settle(handles: list[SendHandleLike], timeout_s: float, link: DblpLink) -> None:
    deadline = time.monotonic() + timeout_s
    for h in handles:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        try:
            h.wait(left)
        except TransportTimeout:
            return
        except TransportError as e:
            link.raise_if_failed()
            raise RoundFailed(f"connection to {link.name} failed: {e}") from e


def _await_answer(
    link: DblpLink, key: tuple[int, int], attempt: int, until: float
) -> Control | None:
    """The STOP, or the BITMAP of ``attempt``, of transfer ``key`` before ``until``."""
    while True:
        left = until - time.monotonic()
        if left <= 0:
            return None
        ev = link.next_tx(left)
        if ev is None:
            return None
        if ev.key != key:
            link.drops["stale_control"] += 1
        elif ev.kind is ControlKind.STOP or ev.attempt == attempt:
            return ev
        else:
            link.drops["stale_control"] += 1


def recv_tensor(
    link: DblpLink, round_: int, spec: TensorSpec, bound: float | None = None
) -> RecvReport:
    """Receive transfer ``(round_, spec.tensor_id)``; missing chunks read as zeros.

    Args:
        bound: this receiver's P; None = the sender's (carried by its chunks and probes).
    Raises:
        RoundFailed: nothing came from the sender for the liveness timeout, the connection
            failed, or the sender aborted.
    """
    cfg = link.cfg
    state = ReceiveState(
        round_, spec, chunk_elems(cfg, spec), None if bound is None else bound_to_ppm(bound)
    )
    key = state.key
    t0 = last_heard = time.monotonic()
    first: float | None = None
    probes = 0
    answered: set[int] = set()
    answered_attempts: set[int] = set()
    drops: dict[str, int] = {}
    backlog = link.take_pending(key)
    unprompted = cfg.stop_rule is StopRule.ON_ARRIVAL
    while True:
        if backlog:
            ev: Event | None = backlog.pop(0)
        else:
            ev = link.next_rx(max(0.0, last_heard + link.liveness.timeout_s - time.monotonic()))
        now = time.monotonic()
        if ev is None:
            if now - last_heard >= link.liveness.timeout_s:
                raise RoundFailed(
                    f"round {round_} tensor {spec.tensor_id}: nothing from "
                    f"{link.name} for {now - last_heard:.1f} s "
                    f"({state.received}/{state.count} chunks)"
                )
            continue
        if ev.key < key:
            _count(link, drops, ChunkDrop.WRONG_ROUND.value)
            continue
        if ev.key > key:
            link.defer(ev)
            continue
        last_heard = now
        if first is None:
            first = now
        if isinstance(ev, Control):  # a PROBE
            reason = state.on_probe(ev)
            if reason is not None:
                _count(link, drops, reason.value)
                continue
            probes += 1
            _drain(link, state, drops, cfg.probe_grace_s)
            if not state.done and ev.seq not in answered:
                answered.add(ev.seq)
                link.send_control(
                    Control(
                        ControlKind.BITMAP,
                        round_,
                        spec.tensor_id,
                        ev.attempt,
                        state.count,
                        state.received,
                        state.bound_ppm or 0,
                        ev.seq,
                        state.bitmap(),
                    ),
                    reliable=ev.attempt not in answered_attempts,
                )
                answered_attempts.add(ev.attempt)
        else:
            reason = state.accept(ev)
            if reason is not None:
                _count(link, drops, reason.value)
        complete = state.received == state.count
        if complete or (state.done and (isinstance(ev, Control) or unprompted)):
            _drain(link, state, drops)
            stop = Control(
                ControlKind.STOP,
                round_,
                spec.tensor_id,
                0,
                state.count,
                state.received,
                state.bound_ppm or 0,
            )
            link.finished(stop)
            link.send_control(stop)
            end = time.monotonic()
            link.liveness.observe(end - t0)
            return RecvReport(
                round_,
                spec.tensor_id,
                state.result(),
                state.count,
                state.received,
                state.bound,
                first - t0,
                end - first,
                probes,
                drops,
            )


def _drain(link: DblpLink, state: ReceiveState, drops: dict[str, int], wait_s: float = 0.0) -> None:
    """Take the chunks of this transfer that have already arrived (before STOP: it must not
    discard data that is here; before a BITMAP: chunks overtaken by the probe on the other
    channel are not resent), waiting up to ``wait_s`` for more while some are missing."""
    deadline = time.monotonic() + wait_s
    while True:
        left = deadline - time.monotonic() if state.received < state.count else 0.0
        ev = link.next_rx(max(0.0, left))
        if ev is None:
            return
        if ev.key > state.key:
            link.defer(ev)
        elif isinstance(ev, Chunk) and ev.key == state.key:
            reason = state.accept(ev)
            if reason is not None:
                _count(link, drops, reason.value)
        elif ev.key < state.key:
            _count(link, drops, ChunkDrop.WRONG_ROUND.value)


def _count(link: DblpLink, drops: dict[str, int], reason: str) -> None:
    link.drops[reason] += 1
    drops[reason] = drops.get(reason, 0) + 1
