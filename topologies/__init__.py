"""Fabric topologies: the multi-plane Clos model (pure data) and, later, its Mininet build."""
