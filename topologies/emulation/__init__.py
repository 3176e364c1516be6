"""The emulation that runs a topology on this machine: the layer above the topology data.

It turns :mod:`topologies.model` into Mininet hosts and links, launches the switch processes
(``tf-switch`` through a fork server, or BMv2), brings the fabric up through the controller,
checks every path, records and removes what it started (``tf-topo``, ``make fabric``). It may
import the controller and the switch; the topology data below it imports neither.
"""
