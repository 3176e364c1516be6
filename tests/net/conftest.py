"""Fixtures of the network tests: ``netkit`` (namespaces and veths, always removed)."""

from tests.netkit import netkit

__all__ = ["netkit"]
