"""The switch device around a pipeline: what turns the pure executor into a running switch.

Ports on Linux interfaces (AF_PACKET sockets with PACKET_MMAP rings, pcap capture, NIC
offloads), the traffic manager (egress queues, drain rates, priorities, time stamps), the
:class:`~switch.device.device.Device` that joins them to a pipeline, the runtime CLI channel
(``tf-switch-cli``) and Linux namespace helpers. The P4Runtime server (:mod:`switch.p4rt`) and
the ``tf-switch`` daemon (:mod:`switch.daemon`) sit on top of this package.
"""
