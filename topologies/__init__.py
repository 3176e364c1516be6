"""Fabric topologies as data: the multi-plane Clos model (names, ports, micro-SIDs, addresses),
its scale calculator and each host's network configuration. Modules at this level import
nothing else of the project and start no processes; :mod:`topologies.emulation` runs them."""
