"""DiLoCo, Factored Gossip DiLoCo and the synchronous data-parallel baseline, over the
project's transports.

``config`` (frozen settings, validated before anything starts; the paper's variants),
``errors`` (one base exception, one subclass per failure), ``mixing`` (graphs → doubly
stochastic mixing matrices, contraction factors, mixing with missing neighbours), ``outer``
(the per-worker Nesterov outer optimizer), ``wire`` (tensor messages: validated header, raw
bytes, drop reasons), ``mesh`` (one worker's MRC connections to its peers, reader threads, a
mailbox), ``exchange`` (ring all-reduce over the mesh or DBLP, neighbour mixing, Mix1 in the
background), ``task`` (a task bound to a worker plus its fixed validation batch),
``metrics`` (consensus distance, Jensen–Shannon divergence, utilization, link rates),
``worker`` (the per-round loops and their measurements), ``run`` (a whole job in one process
over the emulated fabric, calibration, the command line). Importing this package imports no
torch; the modules that need it do.
"""
