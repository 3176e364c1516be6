"""Host stack: the MRC multipath transport, its baselines and the in-process network emulator.

``wire`` holds the datagram formats, ``paths`` turns the topology into EVs, ``network`` the
pluggable datagram I/O (UDP sockets per plane NIC), ``linkemu`` the emulated lossy network,
``mrc`` the transport itself, ``baseline`` the single-path and TCP baselines with the same API,
``bench`` the transport benchmark. See ``host/README.md``.
"""
