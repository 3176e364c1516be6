"""Fixtures of the network tests: ``netkit`` (namespaces and veths, always removed) and
``no_fabric_running`` (skip while a fabric runs on this machine)."""

from tests.netkit import netkit, no_fabric_running

__all__ = ["netkit", "no_fabric_running"]
