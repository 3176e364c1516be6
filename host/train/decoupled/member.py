"""What learners and elastic workers share: their state across restarts, the inner optimizer's
state as one vector, and one incarnation's connection to its hub.

* :class:`MemberState`: a member's task (model, data order, validation batch), its inner
  optimizer, its counters and its last checkpoint. :meth:`MemberState.save` snapshots them
  (in memory, and to a file when the state has a ``path``: a process that is SIGKILLed finds
  it on its disk); :meth:`MemberState.restore` goes back to it, from the file when there is
  one. Subclasses say which counters they have (:meth:`MemberState.counters`).
* :class:`CheckpointWriter`: writes the files on a thread of its own, as asynchronous
  checkpointing does, so that a step never waits for the disk (on the shared ext4 disk a
  rename behind a journal commit held every learner's step loop for 0.3–0.5 s at once, which
  the uptime metric counted as the global model standing still). Only the newest pending
  snapshot is written; a process killed before its write lands restarts from the previous
  file, which the write-then-rename keeps whole.
* :func:`state_vector` / :func:`load_state_vector`: parameters and optimizer state as one
  float32 vector (:data:`OPTIMIZER_STATE` per inner optimizer): the elastic donor's STATE
  message and the checkpoint file's contents. The file is ``numpy.savez`` of that vector and
  the counters, read back with ``allow_pickle=False``.
* :class:`MemberLog`: what every member records of its connections (counts, bytes).
* :func:`run_member`: one incarnation: restore after a restart, connect (:class:`Uplink`), run
  the member's body, close, add up the bytes.
"""

from __future__ import annotations

import copy
import os
import pathlib
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import torch

from host.api import MessageEndpoint
from host.train.decoupled.errors import CheckpointError, LinkError
from host.train.decoupled.link import Uplink
from host.train.decoupled.process import Life
from host.train.diloco.config import DilocoConfig, InnerOptimizer
from host.train.diloco.task import WorkerTask, bind
from host.train.diloco.worker import get_flat, inner_optimizer, set_flat

# -- optimizer state as one vector -------------------------------------------------------------

OPTIMIZER_STATE: dict[InnerOptimizer, tuple[tuple[str, ...], bool]] = {
    InnerOptimizer.ADAMW: (("exp_avg", "exp_avg_sq"), True),
    InnerOptimizer.SGD: (("momentum_buffer",), False),
}
"""Per inner optimizer: its per-parameter state tensors and whether it counts steps."""


def state_vector(
    model: torch.nn.Module, opt: torch.optim.Optimizer, kind: InnerOptimizer
) -> np.ndarray:
    """Parameters, then each state tensor of every parameter, then the step count (float32).
    State not created yet counts as zeros."""
    keys, has_step = OPTIMIZER_STATE[kind]
    params = list(model.parameters())
    parts = [get_flat(model)]
    for key in keys:
        for p in params:
            t = opt.state.get(p, {}).get(key)
            parts.append(torch.zeros(p.numel()) if t is None else t.detach().reshape(-1).float())
    step = float(opt.state.get(params[0], {}).get("step", 0.0)) if has_step else 0.0
    parts.append(torch.tensor([step]))
    out: np.ndarray = torch.cat(parts).numpy()
    return out


def load_state_vector(
    model: torch.nn.Module, opt: torch.optim.Optimizer, kind: InnerOptimizer, vector: np.ndarray
) -> None:
    """The inverse of :func:`state_vector`.

    Raises:
        ValueError: the vector does not fit this model and optimizer.
    """
    keys, has_step = OPTIMIZER_STATE[kind]
    params = list(model.parameters())
    n = sum(p.numel() for p in params)
    if vector.size != n * (1 + len(keys)) + 1:
        raise ValueError(f"state of {vector.size} values for {n} parameters and {keys}")
    flat = torch.from_numpy(np.array(vector, dtype=np.float32))
    set_flat(model, flat[:n])
    step = float(flat[-1])
    opt.state.clear()
    if has_step and step == 0:
        return
    off = n
    states: dict[torch.Tensor, dict[str, Any]] = {p: {} for p in params}
    for key in keys:
        for p in params:
            states[p][key] = flat[off : off + p.numel()].view_as(p).clone()
            off += p.numel()
    for p in params:
        if has_step:
            states[p]["step"] = torch.tensor(step)
        opt.state[p] = states[p]


# -- a member's state ---------------------------------------------------------------------------

Counters = dict[str, tuple[int, ...]]
"""A member's counters by name (a learner's step and per-fragment counters, a worker's
round)."""

STATE_KEY = "state"
"""The checkpoint file's array of :func:`state_vector`; every other array is a counter."""


class CheckpointWriter:
    """Writes checkpoint files on a daemon thread (module docstring): :meth:`submit` returns at
    once; a newer submission replaces one not yet written.

    Args:
        path: the checkpoint file.
    """

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self.written = 0
        self.errors: list[OSError] = []
        self._cond = threading.Condition()
        self._pending: tuple[np.ndarray, Counters] | None = None
        self._busy = False
        self._thread: threading.Thread | None = None

    def submit(self, state: np.ndarray, counters: Counters) -> None:
        """Write ``state`` and ``counters`` to :attr:`path` soon (``state`` must not change
        afterwards: pass a copy)."""
        with self._cond:
            self._pending = (state, counters)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name=f"checkpoint-{self.path.name}", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._pending is None:
                    self._cond.wait()
                state, counters = self._pending
                self._pending, self._busy = None, True
            try:
                write_checkpoint(self.path, state, counters)
            except OSError as e:  # kept for the member's report; the previous file stays
                self.errors.append(e)
            with self._cond:
                self._busy = False
                self.written += 1
                self._cond.notify_all()

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until everything submitted is on disk (False: not within ``timeout_s``)."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._pending is None and not self._busy, timeout=timeout_s
            )


@dataclass(frozen=True)
class Checkpoint:
    model: dict[str, torch.Tensor]
    optimizer: dict[str, Any]
    counters: Counters


def write_checkpoint(path: pathlib.Path, state: np.ndarray, counters: Mapping[str, Any]) -> None:
    """``state`` and ``counters`` to ``path`` (written beside it, then renamed: a process
    killed while writing leaves the previous checkpoint)."""
    tmp = path.with_name(path.name + ".tmp")
    arrays: dict[str, Any] = {k: np.asarray(v, dtype=np.int64) for k, v in counters.items()}
    arrays[STATE_KEY] = np.asarray(state, dtype=np.float32)
    with tmp.open("wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, path)


def read_checkpoint(path: pathlib.Path) -> tuple[np.ndarray, Counters]:
    """What :func:`write_checkpoint` wrote (nothing is unpickled).

    Raises:
        CheckpointError: not such a file.
    """
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, KeyError) as e:
        raise CheckpointError(f"{path}: not a checkpoint ({e})") from e
    state = arrays.pop(STATE_KEY, None)
    if state is None or state.dtype != np.float32:
        raise CheckpointError(f"{path}: no float32 '{STATE_KEY}' array")
    return state, {k: tuple(int(x) for x in v.reshape(-1)) for k, v in arrays.items()}


class MemberState:
    """What survives a member's restarts (its 'disk').

    Args:
        ref: the job as a DiLoCo job (task, model, data order, inner optimizer).
        rank: which member: its data shard.
        path: the checkpoint file (None: checkpoints stay in memory, as in the emulator),
            written in the background (:class:`CheckpointWriter`).
    """

    def __init__(self, ref: DilocoConfig, rank: int, path: pathlib.Path | None = None) -> None:
        self.rank = rank
        self.inner = ref.inner.optimizer
        self.task: WorkerTask = bind(ref, rank)
        self.model = self.task.run.model
        self.params = list(self.model.parameters())
        self.opt = inner_optimizer(ref, self.model)
        self.path = path
        self.writer = CheckpointWriter(path) if path is not None else None
        self.checkpoint = self._snapshot()

    def counters(self) -> Counters:
        """The counters a checkpoint keeps (subclasses: theirs)."""
        return {}

    def load_counters(self, counters: Counters) -> None:
        """Set the counters of a checkpoint (subclasses: theirs).

        Raises:
            CheckpointError: a counter missing or of the wrong length.
        """

    def _snapshot(self) -> Checkpoint:
        return Checkpoint(
            {k: v.detach().clone() for k, v in self.model.state_dict().items()},
            copy.deepcopy(self.opt.state_dict()),
            self.counters(),
        )

    def save(self) -> None:
        """Checkpoint now in memory; the file, if the state has one, is written in the
        background (:meth:`flush` waits for it)."""
        self.checkpoint = self._snapshot()
        if self.writer is not None:
            self.writer.submit(self.state(), self.checkpoint.counters)  # a new array

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until the last checkpoint is on disk (True without a file)."""
        return self.writer is None or self.writer.flush(timeout_s)

    def restore(self) -> None:
        """Back to the last checkpoint: the file's when there is one (what a restarted
        process finds on its disk), else the one in memory.

        Raises:
            CheckpointError: the file cannot be read back or does not fit the model.
        """
        self.flush()
        if self.path is not None and self.path.exists():
            vector, counters = read_checkpoint(self.path)
            try:
                self.load(vector)
            except ValueError as e:
                raise CheckpointError(f"{self.path}: {e}") from e
            self.load_counters(counters)
            self.checkpoint = self._snapshot()
            return
        c = self.checkpoint
        self.model.load_state_dict(c.model)
        self.opt.load_state_dict(copy.deepcopy(c.optimizer))
        self.load_counters(c.counters)

    def state(self) -> np.ndarray:
        """Parameters and optimizer state (:func:`state_vector`)."""
        return state_vector(self.model, self.opt, self.inner)

    def load(self, vector: np.ndarray) -> None:
        """Raises: ValueError (the vector does not fit)."""
        load_state_vector(self.model, self.opt, self.inner, vector)


def counter(counters: Counters, name: str, length: int) -> tuple[int, ...]:
    """``counters[name]``, checked to hold ``length`` values.

    Raises:
        CheckpointError: missing or of another length.
    """
    v = counters.get(name)
    if v is None or len(v) != length:
        raise CheckpointError(f"checkpoint counter '{name}': need {length} values, got {v}")
    return v


# -- one incarnation ---------------------------------------------------------------------------


R = TypeVar("R")


@dataclass
class MemberLog:
    """What a member slot recorded over all its incarnations: counts, bytes, and (in
    subclasses) lists of records, each also handed to ``listener`` as it is kept (a fabric
    agent writes them to its file at once: a SIGKILL loses none that were kept)."""

    counts: Counter[str] = field(default_factory=Counter)
    bytes_sent: int = 0
    bytes_received: int = 0
    listener: Callable[[object], None] | None = None

    def keep(self, records: list[R], record: R) -> None:
        """Append ``record`` to ``records`` and hand it to the listener."""
        records.append(record)
        if self.listener is not None:
            self.listener(record)


def run_member(
    state: MemberState,
    log: MemberLog,
    life: Life,
    endpoint: MessageEndpoint,
    body: Callable[[Uplink], None],
    *,
    hub_host: int,
    hub: int,
    fingerprint: bytes,
    timeout_s: float,
    restore: bool = True,
) -> None:
    """One incarnation of a member: restore (after a restart), connect, ``body``, close.

    Args:
        hub_host: the hub's host (transport address); ``hub``: its rank (the sender field
            of what it sends).
        restore: a restarted incarnation (``life.incarnation`` > 0) restores its checkpoint
            first (False: it reconnects with what it holds).

    Raises:
        Killed: killed, or stopped at the end of the job.
        LinkError: the hub refused it or went away.
        CheckpointError: a restart found an unreadable checkpoint.
    """
    if life.incarnation > 0 and restore:
        state.restore()
        log.counts["restarts"] += 1
    link = Uplink(endpoint, state.rank, hub_host, hub, fingerprint, timeout_s=timeout_s)
    try:
        body(link)
    except LinkError:
        life.check()  # a kill that closed the link is a kill
        raise
    finally:
        link.close()
        log.bytes_sent += link.bytes_sent
        log.bytes_received += link.bytes_received
