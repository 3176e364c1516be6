"""DBLP as a DDP communication hook: gradient buckets averaged under a bounded loss.

::

    state = DBLPState(rounds_per_epoch=len(loader))
    ddp.register_comm_hook(state, dblp_hook)

Each bucket DDP hands the hook is one round of :class:`host.collectives.RingAllReduce` over
DBLP links (:mod:`host.dblp`): chunks sprayed unreliably over MRC, the receiver stopping
once ``1 − P`` of them arrived and zero-filling the rest. P comes from the phase-aware
policy of :class:`host.dblp.phase.PhaseController` (P_low inside a critical learning regime,
P_high outside; the regime is detected every ``rounds_per_epoch`` rounds from the change of
the averaged gradient's norm). :attr:`DBLPState.rounds` records each round's delivered
fraction and P. The links are opened on the first bucket, over the MRC endpoint of the
``tailfabric`` process group DDP runs on; the exchange runs on the state's own thread, so
DDP's backward pass goes on meanwhile.
"""

# No ``from __future__ import annotations``: DDP checks the hook's annotations at runtime
# (``GradBucket`` in, ``torch.futures.Future[torch.Tensor]`` out).
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch._C._distributed_c10d import GradBucket
from torch.futures import Future

from host.collectives import RingAllReduce, connect_ring, job_fingerprint
from host.dblp.config import DblpConfig, LossPolicy, PhaseConfig
from host.dblp.errors import DblpError
from host.dblp.phase import PhaseController
from host.torchdist.backend import ProcessGroupTailfabric

SETUP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class DBLPRound:
    """One bucket's exchange as this rank saw it."""

    round: int
    bucket: int  # DDP's bucket index
    elements: int
    bound: float  # P in force
    delivered_fraction: float  # chunks delivered / chunks sent, over this rank's transfers
    latency_s: float
    in_clr: bool  # the detector's state after the round


@dataclass
class DBLPState:
    """The hook's state: policy, P, the ring links and the per-round record.

    Args:
        process_group: the ``tailfabric`` group (None: the default group).
        policy: DBLP (phase-aware), FIXED (P_low always) or RELIABLE (P = 0).
        phase: P_low, k, eta; ``check_every_rounds`` is replaced by ``rounds_per_epoch``
            when that is given.
        rounds_per_epoch: buckets exchanged per epoch: the detector checks once an epoch.
        dblp: chunking and timers (``packet_bytes`` defaults to the MRC packet payload).
    """

    process_group: Any = None
    policy: LossPolicy = LossPolicy.DBLP
    phase: PhaseConfig = field(default_factory=PhaseConfig)
    rounds_per_epoch: int | None = None
    dblp: DblpConfig | None = None
    rounds: list[DBLPRound] = field(default_factory=list)

    def __post_init__(self) -> None:
        cfg = self.phase
        if self.rounds_per_epoch is not None:
            if self.rounds_per_epoch < 1:
                raise ValueError(f"rounds_per_epoch must be >= 1, got {self.rounds_per_epoch}")
            cfg = replace(cfg, check_every_rounds=self.rounds_per_epoch)
        self.controller = PhaseController(self.policy, cfg)
        self._ring: RingAllReduce | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dblp-hook")
        self._lock = threading.Lock()
        self._round = 0

    @property
    def bound(self) -> float:
        """P for the next round."""
        return self.controller.bound()

    def _group(self) -> ProcessGroupTailfabric:
        pg = self.process_group
        if pg is None:
            pg = dist.distributed_c10d._get_default_group()
        if not isinstance(pg, ProcessGroupTailfabric):
            raise dist.DistBackendError(
                "tailfabric: the DBLP hook needs DDP on a 'tailfabric' process group, got "
                f"{type(pg).__name__}"
            )
        return pg

    def _links(self) -> RingAllReduce:
        if self._ring is None:
            pg = self._group()
            mesh = pg.mesh
            cfg = self.dblp or DblpConfig(packet_bytes=mesh.endpoint.config.payload_bytes)
            fingerprint = job_fingerprint(f"torchdist-dblp/{mesh.world}")
            to_next, from_prev = connect_ring(
                mesh.endpoint,
                mesh.rank,
                list(range(mesh.world)),
                fingerprint,
                cfg,
                timeout_s=min(SETUP_TIMEOUT_S, pg.timeout_s),
            )
            self._ring = RingAllReduce(mesh.rank, mesh.world, to_next, from_prev, self.controller)
        return self._ring

    def exchange(self, bucket: int, grad: torch.Tensor) -> torch.Tensor:
        """The average over ranks of ``grad`` under this round's P (written into ``grad``).

        Raises:
            DistBackendError: a neighbour failed or vanished, or the setup failed.
        """
        with self._lock:
            round_ = self._round
            self._round += 1
        ring = self._links() if self._world() > 1 else None
        flat = grad.detach().reshape(-1)
        if ring is None:
            return grad
        vec: np.ndarray = flat.to(torch.float32).numpy()
        t0 = time.monotonic()
        try:
            res = ring.allreduce(round_, vec)
        except DblpError as e:
            raise dist.DistBackendError(f"tailfabric: DBLP round {round_}: {e}") from None
        flat.copy_(torch.from_numpy(res.vector).to(flat.dtype))
        self.rounds.append(
            DBLPRound(
                round_,
                bucket,
                flat.numel(),
                res.bound,
                res.delivered_fraction,
                time.monotonic() - t0,
                self.controller.in_clr,
            )
        )
        return grad

    def _world(self) -> int:
        pg = self.process_group
        return int(pg.size()) if pg is not None else dist.get_world_size()

    def close(self) -> None:
        """Close the ring links (the process group stays); idempotent."""
        self._pool.shutdown(wait=True)
        if self._ring is not None:
            self._ring.close()
            self._ring = None


def dblp_hook(state: DBLPState, bucket: GradBucket) -> Future[torch.Tensor]:
    """DDP communication hook: the bucket's gradients averaged over ranks by DBLP."""
    fut: Future[torch.Tensor] = Future()
    buf = bucket.buffer()
    index = bucket.index()

    def run() -> None:
        try:
            fut.set_result(state.exchange(index, buf))
        except BaseException as e:
            err = e if isinstance(e, dist.DistError) else dist.DistBackendError(f"{e!r}")
            fut.set_exception(err)  # type: ignore[arg-type]

    state._pool.submit(run)
    return fut
