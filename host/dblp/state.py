"""The receive side of one transfer as pure state: chunks and probes in, verdicts out.

:class:`ReceiveState` places each valid chunk into a zero-filled buffer (so whatever never
arrives reads as 0, as in DBLP's Algorithm 2), keeps the received bitmap, and decides when
the received fraction has reached ``1 − P``. Nothing here does I/O or reads a clock.
"""

from __future__ import annotations

import math

import numpy as np

from host.dblp.chunks import PPM, Chunk, ChunkDrop, TensorSpec, chunk_count
from host.dblp.control import Control, pack_bitmap

_EPS = 1e-9


def needed_chunks(count: int, bound: float) -> int:
    """The fewest chunks out of ``count`` whose fraction is at least ``1 − bound``."""
    return count - math.floor(count * bound + _EPS)


class ReceiveState:
    """One transfer being received.

    Args:
        round_: the round the chunks must carry.
        spec: the tensor the receiver expects (id within the round, dtype, shape).
        chunk_elems: the sender's chunking (both ends derive it from the same settings).
        bound_ppm: the receiver's own loss bound; None = adopt the sender's (from the
            first chunk or probe).
    """

    def __init__(
        self, round_: int, spec: TensorSpec, chunk_elems: int, bound_ppm: int | None
    ) -> None:
        self.round = round_
        self.spec = spec
        self.chunk_elems = chunk_elems
        self.count = chunk_count(spec.numel, chunk_elems)
        self.bound_ppm = bound_ppm
        self.flat = np.zeros(spec.numel, dtype=spec.np_dtype)
        self.got = bytearray(self.count)
        self.received = 0

    @property
    def key(self) -> tuple[int, int]:
        return (self.round, self.spec.tensor_id)

    @property
    def bound(self) -> float:
        return (self.bound_ppm or 0) / PPM

    @property
    def needed(self) -> int:
        """Chunks to hold before STOP (all of them while the bound is unknown)."""
        return self.count if self.bound_ppm is None else needed_chunks(self.count, self.bound)

    @property
    def done(self) -> bool:
        return self.received >= self.needed

    @property
    def fraction(self) -> float:
        return self.received / self.count

    def _matches(self, spec: TensorSpec, count: int, chunk_elems: int) -> bool:
        return spec == self.spec and count == self.count and chunk_elems == self.chunk_elems

    def accept(self, chunk: Chunk) -> ChunkDrop | None:
        """Place ``chunk`` (of this round); a reason when it is not used."""
        if chunk.round != self.round:
            return ChunkDrop.WRONG_ROUND
        if not self._matches(chunk.spec, chunk.count, chunk.chunk_elems):
            return ChunkDrop.FOREIGN
        if self.got[chunk.index]:
            return ChunkDrop.DUPLICATE
        start = chunk.index * self.chunk_elems
        values = np.frombuffer(chunk.payload, dtype=self.spec.np_dtype)
        self.flat[start : start + len(values)] = values
        self.got[chunk.index] = 1
        self.received += 1
        if self.bound_ppm is None:
            self.bound_ppm = chunk.bound_ppm
        return None

    def on_probe(self, probe: Control) -> ChunkDrop | None:
        """Learn from a probe of this transfer (the sender's bound when none is set)."""
        if probe.chunks != self.count:
            return ChunkDrop.FOREIGN
        if self.bound_ppm is None:
            self.bound_ppm = probe.bound_ppm
        return None

    def bitmap(self) -> bytes:
        return pack_bitmap(self.got)

    def result(self) -> np.ndarray:
        """The tensor with every missing chunk zero-filled."""
        return self.flat.reshape(self.spec.shape)

    def received_mask(self) -> np.ndarray:
        """Per element: whether its chunk arrived."""
        mask = np.repeat(
            np.frombuffer(bytes(self.got), dtype=np.uint8).astype(bool), self.chunk_elems
        )
        return mask[: self.spec.numel].reshape(self.spec.shape)


def missing_chunks(bitmap: Control) -> list[int]:
    """The chunk indices a BITMAP reports as not received."""
    return [i for i, got in enumerate(bitmap.bitmap()) if not got]
