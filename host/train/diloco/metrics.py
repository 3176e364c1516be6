"""What the experiments measure and the models they size links with.

* **Consensus distance** of worker i: ‖x_i − x̄‖₂, the L2 distance of its parameters to the
  workers' mean; the round's figure is the root mean square over workers,
  sqrt((1/M) Σ_i ‖x_i − x̄‖²).
* **Jensen–Shannon divergence** of the workers' output distributions P_1..P_M on a fixed
  batch (equal weights, natural log, in nats; 0 when all agree, at most ln M):
  JS = H(P̄) − (1/M) Σ_i H(P_i), with P̄ the mean distribution, averaged over the batch's
  rows (one row per predicted symbol).
* **Compute utilization**: compute time ÷ wall time of a round.
* **Bytes per round** (per worker, messages as :mod:`~host.train.diloco.wire` frames them):
  a ring all-reduce sends 2(M − 1) segment messages of ≈ N/M elements (2(M − 1)/M × the
  model), a neighbour exchange one message of N elements per neighbour; the counts are exact
  (:func:`ring_allreduce_bytes`, :func:`round_bytes`).
* **Link model**: with the emulator every host has one rate-limited downlink per plane and
  MRC sprays a message over all of them, so a worker receives at ``planes × rate``; each
  message travels as packets of at most ``payload_bytes`` with ``overhead_bytes`` of headers
  each. A round's communication takes T = wire bytes received / (planes × rate) (+ latency
  per sequential step, ignored by default); :func:`link_rate_mbps` inverts it for a wanted
  communication/compute ratio. In a ring all-reduce and a neighbour exchange on a regular
  graph every worker receives what it sends.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from host.mrc.config import FABRIC_PAYLOAD_BYTES
from host.train.diloco.config import Algorithm, DilocoConfig, Graph, Mix1Transport, Mix2Scope
from host.train.diloco.exchange import ring_step
from host.train.diloco.mixing import neighbours
from host.train.diloco.wire import message_bytes
from host.wire import DATA_HEADER_BYTES

EMU_OVERHEAD_BYTES = DATA_HEADER_BYTES
"""Per packet on the emulator: the MRC DATA header (the emulator counts UDP payloads)."""
FABRIC_OVERHEAD_BYTES = DATA_HEADER_BYTES + 64
"""Per packet on the fabric: the MRC DATA header plus Ethernet, IPv6 and UDP
(as :func:`host.mrc.emulated.packet_time_us` counts them)."""


def consensus_distances(params: Mapping[int, np.ndarray]) -> dict[int, float]:
    """Per worker: ‖x_i − x̄‖₂ (float64 arithmetic)."""
    if not params:
        return {}
    stacked = np.stack([params[r].astype(np.float64) for r in sorted(params)])
    mean = stacked.mean(axis=0)
    return {r: float(np.linalg.norm(stacked[k] - mean)) for k, r in enumerate(sorted(params))}


def consensus_rms(distances: Mapping[int, float]) -> float:
    """sqrt of the mean squared distance to the mean (0 for no workers)."""
    if not distances:
        return 0.0
    return math.sqrt(sum(d * d for d in distances.values()) / len(distances))


def _entropy(p: np.ndarray) -> np.ndarray:
    """Row entropies in nats, 0 · ln 0 = 0."""
    safe = np.where(p > 0, p, 1.0)
    out: np.ndarray = -(p * np.log(safe)).sum(axis=-1)
    return out


def js_divergence(probs: Sequence[np.ndarray]) -> float:
    """Generalised Jensen–Shannon divergence of equally weighted distributions, in nats,
    averaged over rows.

    Args:
        probs: one (rows, classes) array of probabilities per worker, all the same shape.
    Raises:
        ValueError: fewer than one distribution, or shapes differ.
    """
    if not probs:
        raise ValueError("the JS divergence needs at least one distribution")
    shape = probs[0].shape
    if any(p.shape != shape for p in probs):
        raise ValueError(f"distributions of different shapes: {[p.shape for p in probs]}")
    stacked = np.stack([p.astype(np.float64) for p in probs])
    mixed = _entropy(stacked.mean(axis=0))
    own = _entropy(stacked).mean(axis=0)
    return float(np.maximum(mixed - own, 0.0).mean())


def utilization(compute_s: float, wall_s: float) -> float:
    """compute ÷ wall (1 for an empty round)."""
    return compute_s / wall_s if wall_s > 0 else 1.0


def ring_allreduce_bytes(world: int, elements: int, rank: int = 0) -> int:
    """Bytes rank ``rank`` sends in a ring all-reduce of ``elements`` float32 values: one
    message per step, 2(M − 1) steps, each carrying the segment the step moves."""
    if world < 2:
        return 0
    sizes = [len(s) for s in np.array_split(np.empty(elements, dtype=np.uint8), world)]
    return sum(
        message_bytes(sizes[ring_step(rank, world, step).send]) for step in range(2 * (world - 1))
    )


def _neighbour_bytes(graph: Graph, workers: int, elements: int) -> int:
    return len(neighbours(graph, workers, 0)) * message_bytes(elements)


def _dp_bytes(cfg: DilocoConfig, elements: int) -> int:
    return cfg.inner_steps * ring_allreduce_bytes(cfg.workers, elements)


def _diloco_bytes(cfg: DilocoConfig, elements: int) -> int:
    return ring_allreduce_bytes(cfg.workers, elements)


MIX1_BYTES: dict[Mix1Transport, Callable[[DilocoConfig, int], int]] = {
    Mix1Transport.NEIGHBOURS: lambda c, n: _neighbour_bytes(c.gossip.mix1_graph, c.workers, n),
    Mix1Transport.ALLREDUCE: lambda c, n: ring_allreduce_bytes(c.workers, n),
}
MIX2_BYTES: dict[Mix2Scope, Callable[[DilocoConfig, int], int]] = {
    Mix2Scope.NONE: lambda c, n: 0,
    Mix2Scope.LOCAL: lambda c, n: _neighbour_bytes(c.gossip.mix2_graph, c.workers, n),
    Mix2Scope.GLOBAL: lambda c, n: ring_allreduce_bytes(c.workers, n),
}


def _gossip_bytes(cfg: DilocoConfig, elements: int) -> int:
    g = cfg.gossip
    return MIX1_BYTES[g.mix1_transport](cfg, elements) + MIX2_BYTES[g.mix2](cfg, elements)


ROUND_BYTES: dict[Algorithm, Callable[[DilocoConfig, int], int]] = {
    Algorithm.DATA_PARALLEL: _dp_bytes,
    Algorithm.DILOCO: _diloco_bytes,
    Algorithm.GOSSIP: _gossip_bytes,
}
"""Per algorithm: (config, model elements) → message bytes one worker sends per round."""


def round_bytes(cfg: DilocoConfig, elements: int) -> int:
    """Message bytes one worker sends (and, on these regular patterns, receives) per round."""
    return ROUND_BYTES[cfg.algorithm](cfg, elements)


def wire_bytes(
    msg_bytes: int,
    *,
    messages: int = 1,
    payload_bytes: int = FABRIC_PAYLOAD_BYTES,
    overhead_bytes: int = EMU_OVERHEAD_BYTES,
) -> int:
    """Bytes on the links for ``messages`` messages totalling ``msg_bytes``, each cut into
    packets of ``payload_bytes`` (counted as ⌈size/payload⌉ per message, averaged)."""
    if msg_bytes == 0:
        return 0
    per_message = msg_bytes / messages
    packets = messages * math.ceil(per_message / payload_bytes)
    return msg_bytes + packets * overhead_bytes


def comm_time_s(wire: int, rate_mbps: float, *, planes: int = 2, latency_s: float = 0.0) -> float:
    """Time to receive ``wire`` bytes over ``planes`` downlinks of ``rate_mbps`` each."""
    return wire * 8 / (planes * rate_mbps * 1e6) + latency_s


def link_rate_mbps(wire: int, compute_s: float, ratio: float, *, planes: int = 2) -> float:
    """The per-plane link rate at which receiving ``wire`` bytes takes ``ratio × compute_s``.

    Raises:
        ValueError: non-positive compute time or ratio.
    """
    if compute_s <= 0 or ratio <= 0:
        raise ValueError(f"need positive compute time and ratio, got {compute_s}, {ratio}")
    return wire * 8 / (ratio * compute_s * planes * 1e6)
