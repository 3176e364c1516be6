"""P4Runtime server of the software switch: ``p4.v1.P4Runtime`` over gRPC for one ``Device``."""

from switch.p4rt.server import P4RuntimeServer

__all__ = ["P4RuntimeServer"]
