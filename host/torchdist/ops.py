"""The collective algorithms over a :class:`~host.torchdist.mesh.Mesh`, on CPU tensors.

Each function runs one collective as rank ``mesh.rank`` and returns once its outputs are
written. Messages carry the collective's number (``seq``), kind, dtype, reduce op and the
tensor's total size: a peer that disagrees (another collective, another size or dtype) is
reported, not misread. Reductions take the ranks in rank order (or along the ring), so every
rank ends with bit-identical results.

* all-reduce: below :data:`RING_MIN_BYTES` every rank sends its tensor to every other (one
  round trip); above, a ring (reduce-scatter, then all-gather) that sends ``2 (n − 1) / n``
  of the tensor per rank;
* broadcast, gather, scatter, reduce: direct to or from the root;
* all-gather, reduce-scatter, barrier: direct exchanges between every pair.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from host.torchdist.mesh import Mesh
from host.torchdist.wire import DTYPE_OF_CODE, DTYPES, PIECE_BYTES, Header, Kind, Op

RING_MIN_BYTES = 32 * 1024
"""All-reduces of at least this many bytes (and at least one element per rank) use the ring.
On the emulated fabric (4 hosts, 20 Mbit/s) the ring took 62 ms at 64 KiB where every rank
sending to every other took 98-126 ms; both took 48-56 ms at 32 KiB, and at 16 KiB the
single exchange was the faster (27-39 ms against 36-41 ms)."""


RING_MAX_PIECES = 64
"""At most this many pieces per ring step (``MeshConfig.ring_piece_bytes`` sets their size)."""


class OpError(dist.DistBackendError):
    """This rank's own arguments are wrong (before anything was sent)."""


class RedOp(enum.IntEnum):
    """The reduce ops, by the names of ``torch.distributed.ReduceOp`` (the value goes on the
    wire, plus one: 0 means none)."""

    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8

    @classmethod
    def of(cls, op: object) -> RedOp:
        """The op of a ``ReduceOp`` (or its ``RedOpType``), by name.

        Raises:
            OpError: not a reduce op this module knows.
        """
        inner = getattr(op, "op", op)
        name = getattr(inner, "name", None)
        if isinstance(name, str) and name in cls.__members__:
            return cls[name]
        raise OpError(f"tailfabric: unknown reduce op {op!r}")


def _sum(acc: torch.Tensor, x: torch.Tensor) -> None:
    acc.add_(x)


def _prod(acc: torch.Tensor, x: torch.Tensor) -> None:
    acc.mul_(x)


def _min(acc: torch.Tensor, x: torch.Tensor) -> None:
    torch.minimum(acc, x, out=acc)


def _max(acc: torch.Tensor, x: torch.Tensor) -> None:
    torch.maximum(acc, x, out=acc)


def _band(acc: torch.Tensor, x: torch.Tensor) -> None:
    acc.bitwise_and_(x)


def _bor(acc: torch.Tensor, x: torch.Tensor) -> None:
    acc.bitwise_or_(x)


def _bxor(acc: torch.Tensor, x: torch.Tensor) -> None:
    acc.bitwise_xor_(x)


REDUCERS: dict[RedOp, Callable[[torch.Tensor, torch.Tensor], None]] = {
    RedOp.SUM: _sum,
    RedOp.AVG: _sum,  # then divided by the world size
    RedOp.PRODUCT: _prod,
    RedOp.MIN: _min,
    RedOp.MAX: _max,
    RedOp.BAND: _band,
    RedOp.BOR: _bor,
    RedOp.BXOR: _bxor,
}
"""How each reduce op folds one rank's contribution into the accumulator (PREMUL_SUM and
UNUSED have no row: refused)."""


def check_tensor(t: torch.Tensor, what: str) -> None:
    """Raises: OpError (not a dense CPU tensor of a dtype the wire carries)."""
    if not isinstance(t, torch.Tensor):
        raise OpError(f"tailfabric: {what}: expected a tensor, got {type(t).__name__}")
    if t.device.type != "cpu" or t.layout != torch.strided:
        raise OpError(f"tailfabric: {what}: only dense CPU tensors (got {t.device}, {t.layout})")
    if t.dtype not in DTYPES:
        names = ", ".join(str(d).removeprefix("torch.") for d in DTYPES)
        raise OpError(f"tailfabric: {what}: dtype {t.dtype} not supported; supported: {names}")


def check_redop(op: RedOp, dtype: torch.dtype, what: str) -> None:
    if op not in REDUCERS:
        valid = ", ".join(o.name for o in REDUCERS)
        raise OpError(f"tailfabric: {what}: reduce op {op.name} not supported; valid: {valid}")
    if op == RedOp.AVG and not dtype.is_floating_point:
        raise OpError(f"tailfabric: {what}: AVG needs a floating-point tensor, got {dtype}")
    if op in (RedOp.BAND, RedOp.BOR, RedOp.BXOR) and dtype.is_floating_point:
        raise OpError(f"tailfabric: {what}: {op.name} needs an integer tensor, got {dtype}")


def as_bytes(t: torch.Tensor) -> memoryview:
    """The bytes of ``t`` (a contiguous copy when it is not contiguous)."""
    flat = t.detach().contiguous().reshape(-1)
    arr: Any = flat.view(torch.uint8).numpy()
    return memoryview(arr).cast("B")


def from_bytes(buf: bytearray, dtype: torch.dtype) -> torch.Tensor:
    """A flat tensor over ``buf`` (no copy)."""
    if not buf:
        return torch.empty(0, dtype=dtype)
    return torch.frombuffer(buf, dtype=torch.uint8).view(dtype)


@dataclass
class Call:
    """One collective being run: its number, deadline and description (for errors)."""

    mesh: Mesh
    seq: int
    op: Op
    deadline: float
    redop: int = 0

    @property
    def what(self) -> str:
        return f"{self.op.name.lower()} #{self.seq}"

    def send(self, peer: int, step: int, t: torch.Tensor | None) -> None:
        """``t`` (None: nothing) to ``peer`` as step ``step``, in pieces."""
        data = as_bytes(t) if t is not None else memoryview(b"")
        dtype = DTYPES[t.dtype] if t is not None else 0
        total = len(data)
        for piece in range(max(1, math.ceil(total / PIECE_BYTES))):
            chunk = data[piece * PIECE_BYTES : (piece + 1) * PIECE_BYTES]
            self.mesh.send(peer, self._header(step, piece, dtype, total), chunk)

    def send_piece(self, peer: int, step: int, piece: int, chunk: torch.Tensor, total: int) -> None:
        """One ``piece`` of step ``step``'s ``total`` bytes to ``peer`` (the pipelined ring:
        a piece goes on as soon as it is ready, not when the whole step is)."""
        h = self._header(step, piece, DTYPES[chunk.dtype], total)
        self.mesh.send(peer, h, as_bytes(chunk))

    def _header(self, step: int, piece: int, dtype: int, total: int) -> Header:
        return Header(
            Kind.COLLECTIVE,
            self.mesh.rank,
            self.mesh.world,
            seq=self.seq,
            step=step,
            piece=piece,
            op=self.op,
            dtype=dtype,
            redop=self.redop,
            total=total,
        )

    def recv_piece(
        self, peer: int, step: int, piece: int, like: torch.Tensor, total: int
    ) -> torch.Tensor:
        """Piece ``piece`` of step ``step`` from ``peer``: a flat tensor of ``like``'s dtype
        and size, of a step of ``total`` bytes.

        Raises:
            DistBackendError: the peer sent another collective, dtype or size, or is gone.
        """
        nbytes = like.numel() * like.element_size()
        h, payload = self.mesh.take(
            (peer, Kind.COLLECTIVE, self.seq, step, piece), self.deadline, self.what
        )
        self._check(h, peer, like.dtype, total, DTYPES[like.dtype])
        if len(payload) != nbytes:
            raise dist.DistBackendError(
                f"tailfabric: {self.what}: mismatched tensors: rank {peer} sent a piece of "
                f"{len(payload)} bytes where rank {self.mesh.rank} expects {nbytes}"
            )
        return from_bytes(bytearray(payload), like.dtype)

    def _check(self, h: Header, peer: int, dtype: torch.dtype, total: int, code: int) -> None:
        if h.op is not self.op:
            raise dist.DistBackendError(
                f"tailfabric: {self.what}: rank {peer} runs {h.op.name.lower()} as "
                f"collective #{self.seq} (collectives issued in a different order?)"
            )
        if h.total != total or h.dtype != code:
            raise dist.DistBackendError(
                f"tailfabric: {self.what}: mismatched tensors: rank {peer} sent "
                f"{h.total} bytes of {dtype_name(h.dtype)}, rank {self.mesh.rank} expects "
                f"{total} bytes of {dtype if code else 'nothing'}"
            )
        if h.redop != self.redop:
            raise dist.DistBackendError(
                f"tailfabric: {self.what}: rank {peer} reduces with another op"
            )

    def recv(self, peer: int, step: int, like: torch.Tensor | None) -> torch.Tensor:
        """Step ``step`` from ``peer``: a flat tensor of ``like``'s dtype and size (None: an
        empty message).

        Raises:
            DistBackendError: the peer sent another collective, dtype or size, or is gone.
        """
        dtype = like.dtype if like is not None else torch.uint8
        total = like.numel() * like.element_size() if like is not None else 0
        code = DTYPES[dtype] if like is not None else 0
        buf = bytearray(total)
        pieces = max(1, math.ceil(total / PIECE_BYTES))
        for piece in range(pieces):
            h, payload = self.mesh.take(
                (peer, Kind.COLLECTIVE, self.seq, step, piece), self.deadline, self.what
            )
            self._check(h, peer, dtype, total, code)
            start = piece * PIECE_BYTES
            if start + len(payload) > total:
                raise dist.DistBackendError(
                    f"tailfabric: {self.what}: rank {peer} sent a piece past the tensor's end"
                )
            buf[start : start + len(payload)] = payload
        return from_bytes(buf, dtype)


def dtype_name(code: int) -> str:
    dt = DTYPE_OF_CODE.get(code)
    return "nothing" if dt is None else str(dt)


def _flat(t: torch.Tensor) -> torch.Tensor:
    """A flat contiguous tensor sharing ``t``'s storage when possible (else a copy)."""
    return t.detach().reshape(-1) if t.is_contiguous() else t.detach().contiguous().reshape(-1)


def _write_back(dst: torch.Tensor, flat: torch.Tensor) -> None:
    if not (dst.is_contiguous() and flat.data_ptr() == dst.data_ptr()):
        dst.copy_(flat.view(dst.shape))


def _finish(acc: torch.Tensor, op: RedOp, world: int) -> None:
    if op == RedOp.AVG:
        acc.div_(world)


def allreduce(call: Call, t: torch.Tensor, op: RedOp) -> None:
    """``t`` becomes the reduction of every rank's ``t``."""
    mesh, n = call.mesh, call.mesh.world
    fold = REDUCERS[op]
    flat = _flat(t)
    nbytes = flat.numel() * flat.element_size()
    if n == 1:
        _finish(flat, op, n)
    elif nbytes < RING_MIN_BYTES or flat.numel() < n:
        for peer in _others(mesh):
            call.send(peer, 0, flat)
        parts = {peer: call.recv(peer, 0, flat) for peer in _others(mesh)}
        parts[mesh.rank] = flat.clone()
        acc = parts[0].clone()
        for r in range(1, n):
            fold(acc, parts[r])
        _finish(acc, op, n)
        flat.copy_(acc)
    else:
        _ring_allreduce(call, flat, fold)
        _finish(flat, op, n)
    _write_back(t, flat)


def _bounds(numel: int, n: int) -> list[tuple[int, int]]:
    base, extra = divmod(numel, n)
    out, start = [], 0
    for i in range(n):
        size = base + (1 if i < extra else 0)
        out.append((start, start + size))
        start += size
    return out


def _ring_allreduce(
    call: Call, flat: torch.Tensor, fold: Callable[[torch.Tensor, torch.Tensor], None]
) -> None:
    """Reduce-scatter then all-gather around the ring, pipelined by piece: each of the
    ``2 (n - 1)`` steps moves one segment (``1 / n`` of the tensor) in pieces of about
    ``mesh.cfg.ring_piece_bytes``, and a piece goes on to the next rank as soon as it has arrived
    (and been folded in), so the connection to the next rank never waits for a whole segment
    to drain at a step's end."""
    n, rank = call.mesh.world, call.mesh.rank
    nxt, prev = (rank + 1) % n, (rank - 1) % n
    seg = _bounds(flat.numel(), n)
    esize = flat.element_size()
    steps = 2 * (n - 1)
    piece_bytes = call.mesh.cfg.ring_piece_bytes

    def segment(step: int, incoming: bool) -> int:
        """The segment this rank sends (receives) at ``step``: in the reduce-scatter rank r
        sends (r - s) and receives (r - s - 1); the all-gather starts from the segment the
        reduce-scatter finished, (r + 1)."""
        s = step if step < n - 1 else step - (n - 1) - 1
        return (rank - s - (1 if incoming else 0)) % n

    def pieces(i: int) -> list[tuple[int, int]]:
        a, b = seg[i]
        count = max(1, min(RING_MAX_PIECES, math.ceil((b - a) * esize / piece_bytes)))
        return [(a + lo, a + hi) for lo, hi in _bounds(b - a, count)]

    def total(i: int) -> int:
        a, b = seg[i]
        return (b - a) * esize

    first = segment(0, False)
    for k, (a, b) in enumerate(pieces(first)):
        call.send_piece(nxt, 0, k, flat[a:b], total(first))
    for step in range(steps):
        i = segment(step, True)
        for k, (a, b) in enumerate(pieces(i)):
            got = call.recv_piece(prev, step, k, flat[a:b], total(i))
            if step < n - 1:
                fold(flat[a:b], got)
            else:
                flat[a:b].copy_(got)
            if step + 1 < steps:  # this piece is what the next step sends
                call.send_piece(nxt, step + 1, k, flat[a:b], total(i))


def _others(mesh: Mesh) -> list[int]:
    return [p for p in range(mesh.world) if p != mesh.rank]


def broadcast(call: Call, t: torch.Tensor, root: int) -> None:
    mesh = call.mesh
    if mesh.rank == root:
        for peer in _others(mesh):
            call.send(peer, 0, t)
    else:
        got = call.recv(root, 0, t)
        t.copy_(got.view(t.shape))


def allgather(call: Call, outs: Sequence[torch.Tensor], t: torch.Tensor) -> None:
    """``outs[r]`` becomes rank r's ``t``."""
    mesh = call.mesh
    for peer in _others(mesh):
        call.send(peer, 0, t)
    for peer in _others(mesh):
        outs[peer].copy_(call.recv(peer, 0, outs[peer]).view(outs[peer].shape))
    outs[mesh.rank].copy_(t)


def reduce_scatter(call: Call, out: torch.Tensor, ins: Sequence[torch.Tensor], op: RedOp) -> None:
    """``out`` becomes the reduction over ranks of their ``ins[rank]``."""
    mesh, n = call.mesh, call.mesh.world
    for peer in _others(mesh):
        call.send(peer, 0, ins[peer])
    parts = {peer: call.recv(peer, 0, ins[mesh.rank]) for peer in _others(mesh)}
    parts[mesh.rank] = _flat(ins[mesh.rank]).clone()
    acc = parts[0].clone()
    for r in range(1, n):
        REDUCERS[op](acc, parts[r])
    _finish(acc, op, n)
    out.copy_(acc.view(out.shape))


def reduce(call: Call, t: torch.Tensor, root: int, op: RedOp) -> None:
    """The root's ``t`` becomes the reduction of every rank's ``t``."""
    mesh, n = call.mesh, call.mesh.world
    if mesh.rank != root:
        call.send(root, 0, t)
        return
    parts = {peer: call.recv(peer, 0, t) for peer in _others(mesh)}
    parts[root] = _flat(t).clone()
    acc = parts[0].clone()
    for r in range(1, n):
        REDUCERS[op](acc, parts[r])
    _finish(acc, op, n)
    t.copy_(acc.view(t.shape))


def gather(call: Call, outs: Sequence[torch.Tensor], t: torch.Tensor, root: int) -> None:
    mesh = call.mesh
    if mesh.rank != root:
        call.send(root, 0, t)
        return
    for peer in _others(mesh):
        outs[peer].copy_(call.recv(peer, 0, outs[peer]).view(outs[peer].shape))
    outs[root].copy_(t)


def scatter(call: Call, out: torch.Tensor, ins: Sequence[torch.Tensor], root: int) -> None:
    mesh = call.mesh
    if mesh.rank == root:
        for peer in _others(mesh):
            call.send(peer, 0, ins[peer])
        out.copy_(ins[root])
    else:
        out.copy_(call.recv(root, 0, out).view(out.shape))


def barrier(call: Call) -> None:
    for peer in _others(call.mesh):
        call.send(peer, 0, None)
    for peer in _others(call.mesh):
        call.recv(peer, 0, None)
