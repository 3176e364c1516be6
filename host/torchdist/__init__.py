"""PyTorch integration: the ``tailfabric`` process-group backend and the DBLP DDP hook.

Importing this package registers the backend with ``torch.distributed`` (PyTorch's
extension point for backends written in Python), so that after ``import host.torchdist``::

    dist.init_process_group("tailfabric", init_method="env://")

runs the collectives over MRC connections (:mod:`~host.torchdist.backend`). On a fabric host
the backend reads the topology and the host name from ``TAILFABRIC_TOPOLOGY`` and
``TAILFABRIC_HOST`` (``tf-run`` sets them); without them every rank binds its planes on
loopback. :func:`~host.torchdist.hook.dblp_hook` with a :class:`~host.torchdist.hook.DBLPState`
is a DDP communication hook that exchanges gradient buckets under DBLP's loss bound.
"""

from __future__ import annotations

import torch.distributed as dist

from host.torchdist.backend import BACKEND_NAME, ProcessGroupTailfabric, TailfabricWork, create


def register() -> None:
    """Register the ``tailfabric`` backend with torch.distributed (idempotent)."""
    if BACKEND_NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND_NAME, create, devices=["cpu"])


register()

__all__ = ["BACKEND_NAME", "ProcessGroupTailfabric", "TailfabricWork", "create", "register"]
