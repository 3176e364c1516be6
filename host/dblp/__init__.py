"""DBLP: phase-aware bounded-loss gradient exchange over the transport's unreliable mode.

A tensor is cut into chunks (:mod:`~host.dblp.chunks`, one sprayed packet each) and sent
unreliably; a control channel (:mod:`~host.dblp.control`) carries the sender's PROBE and the
receiver's answer, the BITMAP of what it holds (the sender resends only the rest) or STOP
once the received fraction reaches ``1 − P``; missing chunks are zero-filled
(:mod:`~host.dblp.state`, :mod:`~host.dblp.protocol`). P comes from a policy
(:mod:`~host.dblp.phase`): phase-aware DBLP, the fixed-P baseline, or P = 0.
:class:`~host.dblp.link.DblpLink` runs the reader threads of one connection.
"""

from host.dblp.chunks import ChunkDrop, DType, TensorSpec, decode_chunk, encode_chunks
from host.dblp.config import DblpConfig, LossPolicy, PhaseConfig
from host.dblp.control import Control, ControlKind, decode_control, encode_control
from host.dblp.errors import DblpError, DblpWireError, JobMismatch, RoundFailed
from host.dblp.link import DblpLink
from host.dblp.phase import BOUND_RULES, PhaseController
from host.dblp.protocol import RecvReport, SendReport, recv_tensor, send_tensor
from host.dblp.state import ReceiveState, needed_chunks

__all__ = [
    "BOUND_RULES",
    "ChunkDrop",
    "Control",
    "ControlKind",
    "DType",
    "DblpConfig",
    "DblpError",
    "DblpLink",
    "DblpWireError",
    "JobMismatch",
    "LossPolicy",
    "PhaseConfig",
    "PhaseController",
    "ReceiveState",
    "RecvReport",
    "RoundFailed",
    "SendReport",
    "TensorSpec",
    "decode_chunk",
    "decode_control",
    "encode_chunks",
    "encode_control",
    "needed_chunks",
    "recv_tensor",
    "send_tensor",
]
