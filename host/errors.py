"""The host stack's exceptions: one base class, one subclass per kind of failure."""

from __future__ import annotations


class TransportError(Exception):
    """Base class of every error the host transports raise."""


class ConnectionClosed(TransportError):
    """The connection (or its endpoint) was closed while an operation was pending."""


class PeerClosed(ConnectionClosed):
    """The peer closed the connection after its last complete message: an orderly end of the
    stream (TCP baseline), not a failure."""


class ConnectionFailed(TransportError):
    """The peer stopped answering, or delivered data that failed its end-to-end digest."""


class MessageTooLarge(TransportError):
    """A message is larger than the peer's receive buffer (``max_message_bytes``)."""


class TransportTimeout(TransportError, TimeoutError):
    """A blocking call (``wait``, ``recv``, ``accept``, ``send`` under backpressure) timed out."""


class RouteError(TransportError):
    """No EVs (paths) are known for a peer, or an EV id does not exist."""


class FabricNotRunning(TransportError):
    """An operation needs the emulated fabric, which is not up."""
