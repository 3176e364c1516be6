"""Host stack: the MRC multipath transport, its baselines, DBLP, training jobs and host agents.

``wire`` holds the datagram formats, ``paths`` turns the topology into EVs, ``network`` the
pluggable datagram I/O (UDP sockets per plane NIC), ``linkemu`` the emulated lossy network,
``api`` the message API every transport offers, ``mrc`` the transport itself, ``baseline``
the single-path and TCP baselines with the same API, ``bench`` the transport benchmark.
``dblp`` is the bounded-loss tensor exchange, ``collectives`` the parameter server and ring
over it, and ``train`` the training jobs. ``stream_agent`` and ``train_agent`` are the
per-host processes that experiments start in the fabric's hosts. Nothing here imports the
controller, the switch, Mininet or the experiments. See ``host/README.md``.
"""
