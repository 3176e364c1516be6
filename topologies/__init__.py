"""Fabric topologies: the multi-plane Clos model (pure data), its scale calculator, and its
Mininet build with tf-switch / BMv2 switches (``tf-topo``, ``make fabric``)."""
