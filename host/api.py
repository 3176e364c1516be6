"""The message API every transport offers (MRC, single-path, TCP), as typing protocols.

Collectives and training code are written against these: an endpoint per host process that
``connect``\\ s to and ``accept``\\ s peers; a connection whose ``send`` queues one message and
returns a handle to ``wait`` on, and whose ``recv`` returns whole messages in order.
Messages are bytes-like objects: ``bytes``, ``bytearray``, ``memoryview``, NumPy arrays, or
torch tensors (copied from the CPU); :func:`as_bytes` makes the copy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # host.mrc imports this module
    from host.mrc.receiver import PartialMessage
    from host.mrc.sender import SendOutcome


class SendHandleLike(Protocol):
    def done(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> SendOutcome: ...


class MessageConnection(Protocol):
    conn_id: int
    peer: int

    def send(
        self, data: object, *, reliable: bool = True, timeout: float | None = None
    ) -> SendHandleLike: ...

    def recv(self, timeout: float | None = None) -> bytes: ...

    def recv_partial(self, timeout: float | None = None) -> PartialMessage: ...

    def close(self) -> None: ...


class MessageEndpoint(Protocol):
    host_id: int

    def connect(self, peer: int) -> MessageConnection: ...

    def accept(self, timeout: float | None = None) -> MessageConnection: ...

    def close(self) -> None: ...


def as_bytes(data: object) -> bytes:
    """An immutable copy of a message: bytes-like objects, NumPy arrays, torch tensors."""
    if isinstance(data, bytes):
        return data
    obj: Any = data
    if hasattr(obj, "detach") and hasattr(obj, "numpy"):  # a torch tensor
        obj = obj.detach().cpu().contiguous().numpy()
    try:
        return memoryview(obj).tobytes()
    except TypeError:
        raise TypeError(f"cannot send a {type(data).__name__}: not a bytes-like object") from None
