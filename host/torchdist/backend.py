"""The ``tailfabric`` process group: PyTorch's collectives over MRC connections.

:func:`create` is the creator PyTorch calls from ``init_process_group("tailfabric", ...)``
(store, rank, world size, timeout): it opens the rank's :class:`~host.torchdist.mesh.Mesh`
and returns a :class:`ProcessGroupTailfabric`. Each collective is checked in the caller's
thread (a bad argument raises at once and leaves the group usable), numbered, and run on the
group's one collective thread in issue order; send/recv run on their own threads (a recv may
wait while a later send proceeds). Every operation returns a :class:`TailfabricWork` whose
``wait()`` raises the operation's :class:`torch.distributed.DistBackendError`; once a
collective failed (a peer gone, a timeout, mismatched tensors) the group is broken: the
failing rank tells the others (ABORT), and every later operation fails at once, as with NCCL.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import Store, Work
from torch.futures import Future

from host.torchdist import ops
from host.torchdist.mesh import Mesh, MeshConfig, open_mesh
from host.torchdist.ops import Call, OpError, RedOp, check_redop, check_tensor
from host.torchdist.wire import DTYPES, PIECE_BYTES, Header, Kind, Op

BACKEND_NAME = "tailfabric"
P2P_THREADS = 8

# PyTorch's stubs type these bases with overloads a Python override cannot match (and
# c10d's Python trampolines accept); the backend's own signatures are checked instead.
_WorkBase: Any = Work
_ProcessGroupBase: Any = dist.ProcessGroup


class TailfabricWork(_WorkBase):  # type: ignore[misc]
    """One operation in progress; ``wait`` raises its error."""

    def __init__(self, what: str, result: list[torch.Tensor]) -> None:
        super().__init__()
        self.what = what
        self._result = result
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._future: Future[list[torch.Tensor]] = Future()

    def _finish(self, error: BaseException | None) -> None:
        self._error = error
        self._done.set()
        if error is None:
            self._future.set_result(self._result)
        else:
            self._future.set_exception(error)  # type: ignore[arg-type]

    def wait(self, timeout: timedelta | None = None) -> bool:
        """Block until done (at most ``timeout``; zero or None: until the operation's own
        deadline).

        Raises:
            DistBackendError: the operation failed, or ``timeout`` passed first.
        """
        limit = timeout.total_seconds() if isinstance(timeout, timedelta) else None
        if not self._done.wait(limit if limit and limit > 0 else None):
            raise dist.DistBackendError(f"tailfabric: {self.what}: not done after {limit:g} s")
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self) -> bool:
        return self._done.is_set()

    def is_success(self) -> bool:
        return self._done.is_set() and self._error is None

    def exception(self) -> BaseException | None:
        return self._error

    def result(self) -> list[torch.Tensor]:
        return self._result

    def get_future(self) -> Future[list[torch.Tensor]]:
        return self._future


class ProcessGroupTailfabric(_ProcessGroupBase):  # type: ignore[misc]
    """A process group whose collectives run over :class:`~host.torchdist.mesh.Mesh`."""

    def __init__(self, mesh: Mesh, timeout_s: float) -> None:
        super().__init__(mesh.rank, mesh.world)
        self.mesh = mesh
        self.timeout_s = timeout_s
        self._seq = 0
        self._lock = threading.Lock()
        self._coll = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tfpg-coll")
        self._p2p = ThreadPoolExecutor(max_workers=P2P_THREADS, thread_name_prefix="tfpg-p2p")
        self._sent: Counter[tuple[int, int]] = Counter()
        self._received: Counter[tuple[int, int]] = Counter()
        self._shut = False

    def getBackendName(self) -> str:  # noqa: N802 (PyTorch's name)
        return BACKEND_NAME

    @property
    def peer_evs(self) -> dict[int, int]:
        """Peer rank -> number of EVs (paths) its connection sprays over."""
        return {p: len(c.evs) for p, c in self.mesh.conns.items()}

    # -- running -------------------------------------------------------------------------------

    def _deadline(self, timeout: timedelta | None = None) -> float:
        t = timeout.total_seconds() if isinstance(timeout, timedelta) else 0.0
        return time.monotonic() + (t if t > 0 else self.timeout_s)

    def _collective(
        self,
        op: Op,
        result: list[torch.Tensor],
        body: Callable[[Call], None],
        redop: RedOp | None = None,
        timeout: timedelta | None = None,
    ) -> TailfabricWork:
        with self._lock:
            self._raise_if_broken(op.name.lower())
            seq = self._seq
            self._seq += 1
        code = 0 if redop is None else int(redop) + 1
        call = Call(self.mesh, seq, op, self._deadline(timeout), code)
        work = TailfabricWork(call.what, result)

        def run() -> None:
            try:
                if self.mesh.aborted is not None:
                    raise dist.DistBackendError(f"tailfabric: {call.what}: {self.mesh.aborted}")
                body(call)
            except BaseException as e:
                err = e if isinstance(e, dist.DistError) else _wrap(call.what, e)
                self._break(seq, str(err))
                work._finish(err)
            else:
                work._finish(None)

        self._submit(self._coll, run, work)
        return work

    def _submit(
        self, pool: ThreadPoolExecutor, fn: Callable[[], None], work: TailfabricWork
    ) -> None:
        try:
            pool.submit(fn)
        except RuntimeError:  # shut down meanwhile
            work._finish(dist.DistBackendError(f"tailfabric: {work.what}: group shut down"))

    def _break(self, seq: int, reason: str) -> None:
        if self.mesh.aborted is None:
            self.mesh.broadcast_control(
                Header(Kind.ABORT, self.mesh.rank, self.mesh.world, seq=seq),
                reason.encode()[:500],
            )
        self.mesh.abort(f"collective #{seq} failed on rank {self.mesh.rank}: {reason}")

    def _raise_if_broken(self, what: str) -> None:
        if self._shut:
            raise dist.DistBackendError(f"tailfabric: {what}: the process group is shut down")
        if self.mesh.aborted is not None:
            raise dist.DistBackendError(
                f"tailfabric: {what}: the process group is broken ({self.mesh.aborted})"
            )

    # -- collectives ---------------------------------------------------------------------------

    def allreduce(self, tensors: list[torch.Tensor], opts: Any = None) -> TailfabricWork:
        t = _one(tensors, "allreduce")
        redop = _redop(opts)
        check_redop(redop, t.dtype, "allreduce")
        return self._collective(
            Op.ALLREDUCE,
            tensors,
            lambda c: ops.allreduce(c, t, redop),
            redop,
            _timeout(opts),
        )

    def allreduce_coalesced(self, tensors: list[torch.Tensor], opts: Any = None) -> TailfabricWork:
        redop = _redop(opts)
        for t in tensors:
            check_tensor(t, "allreduce_coalesced")
            check_redop(redop, t.dtype, "allreduce_coalesced")

        if len({t.dtype for t in tensors}) > 1:
            raise OpError("tailfabric: allreduce_coalesced: every tensor must have one dtype")

        def body(c: Call) -> None:
            flat = torch.cat([t.detach().reshape(-1) for t in tensors])
            ops.allreduce(c, flat, redop)
            start = 0
            for t in tensors:
                t.copy_(flat[start : start + t.numel()].view(t.shape))
                start += t.numel()

        return self._collective(Op.ALLREDUCE, tensors, body, redop, _timeout(opts))

    def broadcast(self, tensors: list[torch.Tensor], opts: Any = None) -> TailfabricWork:
        t = _one(tensors, "broadcast")
        root = self._root(getattr(opts, "rootRank", 0), "broadcast")
        return self._collective(
            Op.BROADCAST, tensors, lambda c: ops.broadcast(c, t, root), None, _timeout(opts)
        )

    def allgather(
        self,
        outputs: list[list[torch.Tensor]],
        inputs: list[torch.Tensor],
        opts: Any = None,
    ) -> TailfabricWork:
        t = _one(inputs, "allgather")
        if len(outputs) != 1:
            raise OpError("tailfabric: allgather: one list of outputs per input (one input)")
        outs = self._per_rank(outputs[0], t, "allgather")
        return self._collective(
            Op.ALLGATHER, outs, lambda c: ops.allgather(c, outs, t), None, _timeout(opts)
        )

    def all_gather_single(
        self, output: torch.Tensor, input: torch.Tensor, opts: Any = None
    ) -> TailfabricWork:
        """``all_gather_into_tensor``: ``output`` is every rank's ``input`` concatenated."""
        check_tensor(output, "all_gather_into_tensor")
        check_tensor(input, "all_gather_into_tensor")
        n = self.mesh.world
        if output.numel() != n * input.numel() or output.dtype != input.dtype:
            raise OpError(
                f"tailfabric: all_gather_into_tensor: output must hold {n} x {input.numel()} "
                f"elements of {input.dtype}, has {output.numel()} of {output.dtype}"
            )
        flat_out = output if output.is_contiguous() else output.contiguous()
        outs = list(flat_out.view(-1).chunk(n)) if input.numel() else [input.clone()] * n

        def body(c: Call) -> None:
            ops.allgather(c, outs, input)
            if flat_out is not output:
                output.copy_(flat_out)

        return self._collective(Op.ALLGATHER, [output], body, None, _timeout(opts))

    _allgather_base = all_gather_single

    def reduce_scatter(
        self,
        outputs: list[torch.Tensor],
        inputs: list[list[torch.Tensor]],
        opts: Any = None,
    ) -> TailfabricWork:
        out = _one(outputs, "reduce_scatter")
        if len(inputs) != 1:
            raise OpError("tailfabric: reduce_scatter: one list of inputs per output (one output)")
        ins = self._per_rank(inputs[0], out, "reduce_scatter")
        redop = _redop(opts)
        check_redop(redop, out.dtype, "reduce_scatter")
        return self._collective(
            Op.REDUCE_SCATTER,
            outputs,
            lambda c: ops.reduce_scatter(c, out, ins, redop),
            redop,
            _timeout(opts),
        )

    def reduce_scatter_single(
        self, output: torch.Tensor, input: torch.Tensor, opts: Any = None
    ) -> TailfabricWork:
        """``reduce_scatter_tensor``: rank r's ``output`` is the reduction of the r-th
        slice of every rank's ``input``."""
        check_tensor(output, "reduce_scatter_tensor")
        check_tensor(input, "reduce_scatter_tensor")
        n = self.mesh.world
        if input.numel() != n * output.numel() or output.dtype != input.dtype:
            raise OpError(
                f"tailfabric: reduce_scatter_tensor: input must hold {n} x {output.numel()} "
                f"elements of {output.dtype}, has {input.numel()} of {input.dtype}"
            )
        redop = _redop(opts)
        check_redop(redop, output.dtype, "reduce_scatter_tensor")
        ins = list(input.detach().reshape(-1).chunk(n)) if output.numel() else [output] * n
        return self._collective(
            Op.REDUCE_SCATTER,
            [output],
            lambda c: ops.reduce_scatter(c, output, ins, redop),
            redop,
            _timeout(opts),
        )

    _reduce_scatter_base = reduce_scatter_single

    def reduce(self, tensors: list[torch.Tensor], opts: Any = None) -> TailfabricWork:
        t = _one(tensors, "reduce")
        root = self._root(getattr(opts, "rootRank", 0), "reduce")
        redop = _redop(opts)
        check_redop(redop, t.dtype, "reduce")
        return self._collective(
            Op.REDUCE, tensors, lambda c: ops.reduce(c, t, root, redop), redop, _timeout(opts)
        )

    def gather(
        self,
        outputs: list[list[torch.Tensor]],
        inputs: list[torch.Tensor],
        opts: Any = None,
    ) -> TailfabricWork:
        t = _one(inputs, "gather")
        root = self._root(getattr(opts, "rootRank", 0), "gather")
        outs: list[torch.Tensor] = []
        if self.mesh.rank == root:
            if len(outputs) != 1:
                raise OpError("tailfabric: gather: the root needs one list of outputs")
            outs = self._per_rank(outputs[0], t, "gather")
        return self._collective(
            Op.GATHER, outs, lambda c: ops.gather(c, outs, t, root), None, _timeout(opts)
        )

    def scatter(
        self,
        outputs: list[torch.Tensor],
        inputs: list[list[torch.Tensor]],
        opts: Any = None,
    ) -> TailfabricWork:
        out = _one(outputs, "scatter")
        root = self._root(getattr(opts, "rootRank", 0), "scatter")
        ins: list[torch.Tensor] = []
        if self.mesh.rank == root:
            if len(inputs) != 1:
                raise OpError("tailfabric: scatter: the root needs one list of inputs")
            ins = self._per_rank(inputs[0], out, "scatter")
        return self._collective(
            Op.SCATTER, outputs, lambda c: ops.scatter(c, out, ins, root), None, _timeout(opts)
        )

    def barrier(self, opts: Any = None) -> TailfabricWork:
        return self._collective(Op.BARRIER, [], ops.barrier, None, _timeout(opts))

    # -- point to point ------------------------------------------------------------------------

    def send(self, tensors: list[torch.Tensor], dst: int, tag: int) -> TailfabricWork:
        t = _one(tensors, "send")
        self._peer(dst, "send")
        if not 0 <= tag < 2**63:
            raise OpError(f"tailfabric: send: tag must be in 0..2**63-1, got {tag}")
        with self._lock:
            self._raise_if_broken("send")
            count = self._sent[(dst, tag)]
            self._sent[(dst, tag)] += 1
        what = f"send to rank {dst} (tag {tag}, #{count})"
        work = TailfabricWork(what, tensors)
        data = ops.as_bytes(t)  # the tensor may change once send returns: copy now

        def run() -> None:
            try:
                for piece in range(max(1, -(-len(data) // PIECE_BYTES))):
                    chunk = data[piece * PIECE_BYTES : (piece + 1) * PIECE_BYTES]
                    h = Header(
                        Kind.P2P,
                        self.mesh.rank,
                        self.mesh.world,
                        seq=tag,
                        step=count,
                        piece=piece,
                        dtype=DTYPES[t.dtype],
                        total=len(data),
                    )
                    self.mesh.send(dst, h, chunk)
            except BaseException as e:
                work._finish(e if isinstance(e, dist.DistError) else _wrap(what, e))
            else:
                work._finish(None)

        self._submit(self._p2p, run, work)
        return work

    def recv(self, tensors: list[torch.Tensor], src: int, tag: int) -> TailfabricWork:
        t = _one(tensors, "recv")
        self._peer(src, "recv")
        with self._lock:
            self._raise_if_broken("recv")
            count = self._received[(src, tag)]
            self._received[(src, tag)] += 1
        what = f"recv from rank {src} (tag {tag}, #{count})"
        work = TailfabricWork(what, tensors)
        deadline = self._deadline()
        total = t.numel() * t.element_size()

        def run() -> None:
            try:
                buf = bytearray(total)
                for piece in range(max(1, -(-total // PIECE_BYTES))):
                    h, payload = self.mesh.take((src, Kind.P2P, tag, count, piece), deadline, what)
                    if h.total != total or h.dtype != DTYPES[t.dtype]:
                        raise dist.DistBackendError(
                            f"tailfabric: {what}: mismatched tensors: rank {src} sent "
                            f"{h.total} bytes of {ops.dtype_name(h.dtype)}, this rank expects "
                            f"{total} bytes of {t.dtype}"
                        )
                    start = piece * PIECE_BYTES
                    if start + len(payload) > total:
                        raise dist.DistBackendError(f"tailfabric: {what}: piece past the end")
                    buf[start : start + len(payload)] = payload
                t.copy_(ops.from_bytes(buf, t.dtype).view(t.shape))
            except BaseException as e:
                work._finish(e if isinstance(e, dist.DistError) else _wrap(what, e))
            else:
                work._finish(None)

        self._submit(self._p2p, run, work)
        return work

    def recv_anysource(self, tensors: list[torch.Tensor], tag: int) -> TailfabricWork:
        raise OpError("tailfabric: recv from any source is not supported: name the source rank")

    # -- helpers -------------------------------------------------------------------------------

    def _peer(self, r: int, what: str) -> None:
        if not 0 <= r < self.mesh.world or r == self.mesh.rank:
            raise OpError(
                f"tailfabric: {what}: peer rank {r} is not another rank of 0..{self.mesh.world - 1}"
            )

    def _root(self, r: int, what: str) -> int:
        if not 0 <= r < self.mesh.world:
            raise OpError(f"tailfabric: {what}: root rank {r} not in 0..{self.mesh.world - 1}")
        return r

    def _per_rank(
        self, tensors: Sequence[torch.Tensor], like: torch.Tensor, what: str
    ) -> list[torch.Tensor]:
        if len(tensors) != self.mesh.world:
            raise OpError(
                f"tailfabric: {what}: {len(tensors)} tensors for a group of {self.mesh.world}"
            )
        for t in tensors:
            check_tensor(t, what)
            if t.numel() != like.numel() or t.dtype != like.dtype:
                raise OpError(
                    f"tailfabric: {what}: every tensor must match ({like.numel()} elements of "
                    f"{like.dtype}), got {t.numel()} of {t.dtype}"
                )
        return list(tensors)

    def shutdown(self) -> None:
        """Close the connections (peers waiting for this rank learn it left); idempotent."""
        if self._shut:
            return
        self._shut = True
        self._coll.shutdown(wait=False, cancel_futures=True)
        self._p2p.shutdown(wait=False, cancel_futures=True)
        self.mesh.close()

    def abort(self) -> None:
        self.shutdown()


def _one(tensors: Sequence[torch.Tensor], what: str) -> torch.Tensor:
    if len(tensors) != 1:
        raise OpError(f"tailfabric: {what}: exactly one tensor per call, got {len(tensors)}")
    check_tensor(tensors[0], what)
    return tensors[0]


def _redop(opts: Any) -> RedOp:
    op = getattr(opts, "reduceOp", None)
    return RedOp.SUM if op is None else RedOp.of(op)


def _timeout(opts: Any) -> timedelta | None:
    t = getattr(opts, "timeout", None)
    return t if isinstance(t, timedelta) else None


def _wrap(what: str, e: BaseException) -> dist.DistBackendError:
    return dist.DistBackendError(f"tailfabric: {what}: {type(e).__name__}: {e}")


def create(store: Store, rank: int, world_size: int, timeout: timedelta) -> ProcessGroupTailfabric:
    """The backend creator PyTorch calls (``init_process_group("tailfabric", ...)``).

    Raises:
        DistBackendError: the rendezvous failed (a rank missing, no sockets, bad settings).
    """
    try:
        cfg = MeshConfig.from_env()
    except ValueError as e:
        raise dist.DistBackendError(f"tailfabric: {e}") from None
    timeout_s = timeout.total_seconds()
    mesh = open_mesh(store, rank, world_size, timeout_s, cfg)
    return ProcessGroupTailfabric(mesh, timeout_s)
