"""Settings of a DiLoCo job: frozen dataclasses, units in the names, validated at construction.

:class:`DilocoConfig` holds everything a job needs: the algorithm (synchronous data parallel,
DiLoCo, Factored Gossip DiLoCo), M workers, H inner steps per round, T rounds, the inner and
outer optimizers, the gossip settings (Mix1 graph and transport, Mix2 scope and graph,
timeouts), how all-reduces travel (reliable MRC or DBLP with a loss policy) and injected
faults. An invalid combination raises :class:`~host.train.diloco.errors.ConfigError` with the
setting and what would be valid, before any connection or thread exists.
:data:`VARIANTS` are the paper's named variants (``GlobalM1``, ``GlobalM1LocalM2``).
:func:`config_to_json` / :func:`config_from_json` are the job's JSON form (what a fabric
driver hands its agents), read back with the same checks.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import json
import math
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from host.dblp.config import LossPolicy, PhaseConfig
from host.train import job
from host.train.diloco.errors import ConfigError

TASK_NAMES = job.TASK_NAMES
"""Every task a DiLoCo job can train (checked against the tables in
:mod:`host.train.diloco.task` at import)."""


class Algorithm(enum.Enum):
    """What the workers do each round (one row of :data:`host.train.diloco.worker.ROUND_RULES`
    per member)."""

    DATA_PARALLEL = "dp"
    """Synchronous data parallel: every inner step all-reduces the gradient (H all-reduces
    per round; a round is only the unit of measurement)."""
    DILOCO = "diloco"
    """H local steps, then the pseudo-gradients are all-reduced and every worker applies the
    same outer step."""
    GOSSIP = "gossip"
    """Factored Gossip DiLoCo: Mix1 (parameters, in the background) and Mix2 (pseudo-gradients,
    blocking), per-worker outer state."""


class Graph(enum.Enum):
    """Communication graphs of the mixing steps (see :mod:`host.train.diloco.mixing`)."""

    RING = "ring"
    EXPONENTIAL = "exponential"
    HYPERCUBE = "hypercube"
    COMPLETE = "complete"


class Mix2Scope(enum.Enum):
    """Which outer gradients Mix2 averages (blocking)."""

    NONE = "none"  # W2 = I: no Mix2
    LOCAL = "local"  # W2 of ``mix2_graph``: the neighbours
    GLOBAL = "global"  # W2 = J: every worker (an all-reduce)


class Mix1Transport(enum.Enum):
    """How Mix1 moves the parameters."""

    NEIGHBOURS = "neighbours"
    """Every worker sends its round-start parameters to each neighbour of ``mix1_graph``
    ((degree) × model bytes per worker and round)."""
    ALLREDUCE = "allreduce"
    """Complete graph only: a ring all-reduce in the background (2(M−1)/M × model bytes)."""


class Reduce(enum.Enum):
    """How the all-reduces of data parallel, DiLoCo and global Mix2 travel."""

    MRC = "mrc"  # a ring all-reduce of reliable MRC messages
    DBLP = "dblp"  # host.collectives.RingAllReduce under a loss policy


class InnerOptimizer(enum.Enum):
    ADAMW = "adamw"
    SGD = "sgd"


class FaultKind(enum.Enum):
    """Faults a job can inject (one row of the worker's fault table per member)."""

    KILL = "kill"
    """The worker dies at the start of the round (it tells its peers, then stops)."""
    DROP_MIX1 = "drop_mix1"
    """The worker's Mix1 message of the round is lost (never sent)."""


@dataclass(frozen=True)
class Fault:
    rank: int
    round: int
    kind: FaultKind


@dataclass(frozen=True)
class InnerConfig:
    """The inner optimizer, applied to each worker's own parameters every inner step."""

    optimizer: InnerOptimizer = InnerOptimizer.ADAMW
    lr: float = 1e-3
    weight_decay: float = 0.1
    """AdamW's decoupled weight decay (SGD: none)."""
    beta1: float = 0.9
    beta2: float = 0.95
    sgd_momentum: float = 0.0
    """Momentum of the SGD inner optimizer (0: plain SGD, the paper's H = 1 special case)."""

    def __post_init__(self) -> None:
        if not self.lr > 0:
            raise ConfigError(f"inner lr must be positive, got {self.lr}")
        if self.weight_decay < 0:
            raise ConfigError(f"inner weight_decay must be >= 0, got {self.weight_decay}")
        for name in ("beta1", "beta2", "sgd_momentum"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"inner {name} must be in [0, 1), got {getattr(self, name)}")


@dataclass(frozen=True)
class OuterConfig:
    """The outer optimizer (SGD on the pseudo-gradient; Nesterov momentum by default, the
    DiLoCo paper's lr 0.7 and momentum 0.9). lr 1 and momentum 0 give FedAvg."""

    lr: float = 0.7
    momentum: float = 0.9
    nesterov: bool = True

    def __post_init__(self) -> None:
        if not self.lr > 0:
            raise ConfigError(f"outer lr must be positive, got {self.lr}")
        if not 0.0 <= self.momentum < 1.0:
            raise ConfigError(f"outer momentum must be in [0, 1), got {self.momentum}")
        if self.nesterov and self.momentum == 0:
            raise ConfigError("Nesterov outer steps need momentum > 0 (or nesterov=False)")


@dataclass(frozen=True)
class GossipConfig:
    """Factored gossip: Mix1 of round-start parameters in the background, Mix2 of outer
    gradients blocking."""

    mix1_graph: Graph = Graph.COMPLETE
    mix1_transport: Mix1Transport = Mix1Transport.NEIGHBOURS
    mix1_timeout_s: float = 5.0
    """Once the inner steps and Mix2 are done, wait at most this long for Mix1 messages still
    missing, then mix with what arrived (the rest's weight stays on the worker's own
    parameters) and count ``mix1_missing``."""
    mix2: Mix2Scope = Mix2Scope.LOCAL
    mix2_graph: Graph = Graph.RING
    """The graph of a LOCAL Mix2 (ignored otherwise)."""
    mix2_timeout_s: float = 30.0
    """A LOCAL Mix2 waits at most this long for its neighbours, then mixes what arrived and
    counts ``mix2_missing``. (A GLOBAL Mix2 is an all-reduce: it waits ``peer_timeout_s``.)"""

    def __post_init__(self) -> None:
        for name in ("mix1_timeout_s", "mix2_timeout_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.mix1_transport is Mix1Transport.ALLREDUCE and self.mix1_graph is not Graph.COMPLETE:
            raise ConfigError(
                f"mix1_transport 'allreduce' averages over every worker: it needs mix1_graph "
                f"'complete', not '{self.mix1_graph.value}' (use transport 'neighbours')"
            )


VARIANTS: dict[str, GossipConfig] = {
    "GlobalM1": GossipConfig(mix1_graph=Graph.COMPLETE, mix2=Mix2Scope.NONE),
    "GlobalM1LocalM2": GossipConfig(
        mix1_graph=Graph.COMPLETE, mix2=Mix2Scope.LOCAL, mix2_graph=Graph.RING
    ),
}
"""The Factored Gossip DiLoCo paper's variants: global parameter mixing in the background,
without and with a blocking local (ring) Mix2."""


def variant(name: str) -> GossipConfig:
    """The gossip settings of a named variant.

    Raises:
        ConfigError: unknown name (the message lists the valid ones).
    """
    try:
        return VARIANTS[name]
    except KeyError:
        raise ConfigError(
            f"unknown gossip variant '{name}'; valid: {', '.join(sorted(VARIANTS))}"
        ) from None


@dataclass(frozen=True)
class ReduceConfig:
    transport: Reduce = Reduce.MRC
    policy: LossPolicy = LossPolicy.RELIABLE
    """DBLP only: the loss-bound policy of each all-reduce."""
    phase: PhaseConfig = field(default_factory=PhaseConfig)
    """DBLP only: P_low, k and the phase detector."""


def _is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


GRAPH_REQUIREMENTS: dict[Graph, tuple[int, bool, str]] = {
    Graph.RING: (3, False, "a ring needs at least 3 workers (with 2, use 'complete')"),
    Graph.EXPONENTIAL: (2, False, "an exponential graph needs at least 2 workers"),
    Graph.HYPERCUBE: (
        2,
        True,
        "a hypercube needs a power-of-two number of workers (2, 4, 8, ...)",
    ),
    Graph.COMPLETE: (2, False, "a complete graph needs at least 2 workers"),
}
"""Per graph: the fewest workers, whether M must be a power of two, and the message."""


def check_graph(graph: Graph, workers: int, what: str) -> None:
    """Raises: ConfigError (``graph`` cannot connect ``workers`` workers)."""
    least, power_of_two, message = GRAPH_REQUIREMENTS[graph]
    if workers < least or (power_of_two and not _is_power_of_two(workers)):
        raise ConfigError(f"{what} '{graph.value}' with {workers} workers: {message}")


@dataclass(frozen=True)
class DilocoConfig:
    """One job. ``workers`` = M, ``inner_steps`` = H, ``rounds`` = T; every worker takes
    ``rounds × inner_steps`` optimizer steps on batches of ``batch_size`` of its own data."""

    algorithm: Algorithm = Algorithm.DILOCO
    task: str = "chars-transformer-m"
    workers: int = 4
    inner_steps: int = 20
    rounds: int = 10
    batch_size: int = 16
    seed: int = 0
    """Model initialisation (the same on every worker) and data order (per worker)."""
    inner: InnerConfig = field(default_factory=InnerConfig)
    outer: OuterConfig = field(default_factory=OuterConfig)
    gossip: GossipConfig = field(default_factory=GossipConfig)
    reduce: ReduceConfig = field(default_factory=ReduceConfig)
    eval_every_rounds: int = 1
    """Validation loss, consensus distance and JS divergence every this many rounds (and
    after the last); measured outside the timed part of the round."""
    peer_timeout_s: float = 30.0
    """A blocking step (all-reduce, global Mix2) waits this long for a peer, then stops."""
    setup_timeout_s: float = 30.0
    faults: tuple[Fault, ...] = ()

    def __post_init__(self) -> None:
        if self.task not in TASK_NAMES:
            raise ConfigError(f"unknown task '{self.task}'; valid: {', '.join(TASK_NAMES)}")
        for name in ("workers", "inner_steps", "rounds", "batch_size", "eval_every_rounds"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("peer_timeout_s", "setup_timeout_s"):
            if not getattr(self, name) > 0 or not math.isfinite(getattr(self, name)):
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.algorithm is Algorithm.GOSSIP:
            self._check_gossip()
        for f in self.faults:
            if not 0 <= f.rank < self.workers:
                raise ConfigError(f"fault {f.kind.value} for rank {f.rank}: no such worker")
            if not 0 <= f.round < self.rounds:
                raise ConfigError(
                    f"fault {f.kind.value} at round {f.round} outside 0..{self.rounds - 1}"
                )
            if f.kind is FaultKind.DROP_MIX1 and (
                self.algorithm is not Algorithm.GOSSIP
                or self.gossip.mix1_transport is not Mix1Transport.NEIGHBOURS
            ):
                raise ConfigError(
                    "fault 'drop_mix1' needs algorithm 'gossip' with mix1_transport "
                    "'neighbours' (Mix1 messages of its own)"
                )

    def _check_gossip(self) -> None:
        g = self.gossip
        if self.workers < 2:
            raise ConfigError(
                f"gossip needs at least 2 workers, got {self.workers} "
                "(with one worker use algorithm 'diloco')"
            )
        check_graph(g.mix1_graph, self.workers, "mix1_graph")
        if g.mix2 is Mix2Scope.LOCAL:
            check_graph(g.mix2_graph, self.workers, "mix2_graph")
        if self.reduce.transport is Reduce.DBLP:
            raise ConfigError(
                "gossip exchanges travel as reliable MRC messages; reduce transport 'dblp' "
                "is for algorithms 'dp' and 'diloco'"
            )

    @property
    def total_steps(self) -> int:
        return self.rounds * self.inner_steps

    def faults_at(self, rank: int, round_: int) -> list[FaultKind]:
        return [f.kind for f in self.faults if f.rank == rank and f.round == round_]


# -- JSON ---------------------------------------------------------------------------------------
#
# The driver of a fabric job hands every agent the job as JSON (nothing is unpickled): each
# dataclass is an object of its fields, each enum its value, a tuple a list. Reading it back
# checks every key and type against the dataclasses' annotations and then runs their
# validation, so a bad file fails with the setting's path named (``gossip.mix1_graph: ...``).


def to_dict(obj: object) -> Any:
    """``obj`` (a settings dataclass, enum, tuple or plain value) as JSON-ready data."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, tuple | list):
        return [to_dict(x) for x in obj]
    return obj


def _did_you_mean(name: str, valid: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(valid), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def _decode_dataclass(kind: type[Any], value: object, path: str) -> Any:
    if not isinstance(value, dict):
        raise ConfigError(f"{path or 'the job'}: expected an object, got {value!r:.60}")
    hints = typing.get_type_hints(kind)
    names = [f.name for f in dataclasses.fields(kind)]
    kw: dict[str, Any] = {}
    for key, item in value.items():
        if key not in names:
            where = f"{path}." if path else ""
            raise ConfigError(
                f"unknown setting '{where}{key}'{_did_you_mean(str(key), names)} "
                f"(valid: {', '.join(names)})"
            )
        kw[key] = _decode(hints[key], item, f"{path}.{key}" if path else key)
    try:
        return kind(**kw)
    except ConfigError:
        raise
    except (TypeError, ValueError) as e:  # validation of a dataclass from another package
        raise ConfigError(f"{path or 'the job'}: {e}") from e


def _decode(hint: Any, value: object, path: str) -> Any:
    """``value`` read as type ``hint``.

    Raises:
        ConfigError: it does not fit (the message names ``path``).
    """
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _decode_dataclass(hint, value, path)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        valid = [str(m.value) for m in hint]
        if str(value) not in valid:
            raise ConfigError(
                f"{path}: '{value}' is not one of {', '.join(valid)}"
                f"{_did_you_mean(str(value), valid)}"
            )
        return hint(value)
    if typing.get_origin(hint) is tuple:
        item_hint = typing.get_args(hint)[0]
        if not isinstance(value, list):
            raise ConfigError(f"{path}: expected a list, got {value!r:.60}")
        return tuple(_decode(item_hint, x, f"{path}[{i}]") for i, x in enumerate(value))
    plain = _PLAIN.get(hint)
    if plain is None:  # pragma: no cover - a field type this reader does not know
        raise ConfigError(f"{path}: cannot read a {hint} from JSON")
    return plain(value, path)


def _plain(kind: type[Any]) -> Callable[[object, str], Any]:
    def read(value: object, path: str) -> Any:
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if not isinstance(value, kind) or isinstance(value, bool) != (kind is bool):
            raise ConfigError(f"{path}: expected {kind.__name__}, got {value!r:.60}")
        return value

    return read


_PLAIN: dict[Any, Callable[[object, str], Any]] = {k: _plain(k) for k in (bool, int, float, str)}
"""The plain JSON types a setting can have, each with its reader."""


def config_to_json(cfg: DilocoConfig) -> str:
    """``cfg`` as one line of JSON (:func:`config_from_json` reads it back equal)."""
    return json.dumps(to_dict(cfg), sort_keys=True)


def config_from_json(text: str | bytes) -> DilocoConfig:
    """A job from its JSON form, every key, type and combination checked.

    Raises:
        ConfigError: not JSON, an unknown setting (with the nearest name), a wrong type or
            value, or an invalid combination (the setting's path is named).
    """
    return _from_json(DilocoConfig, text, "the job")


SettingsT = typing.TypeVar("SettingsT")


def settings_from_json(kind: type[SettingsT], text: str | bytes) -> SettingsT:
    """Any settings dataclass ``kind`` from its JSON form (:func:`to_dict`), every key, type
    and combination checked as :func:`config_from_json` checks a job.

    Raises:
        ConfigError: not JSON, an unknown setting, a wrong type or value, or an invalid
            combination (the setting's path is named).
    """
    return _from_json(kind, text, "the settings")


def _from_json(kind: type[SettingsT], text: str | bytes, what: str) -> SettingsT:
    """Raises: ConfigError (as :func:`settings_from_json`; ``what`` names the document)."""
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{what} is not JSON: {e}") from None
    out: SettingsT = _decode_dataclass(kind, doc, "")
    return out
