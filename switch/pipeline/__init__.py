"""The pipeline of one switch as pure state and a pure executor.

State: match-action tables, action profiles and selectors, counters, meters and registers,
parser value sets, the packet replication engine and the hash algorithms, built from a
program's :class:`~switch.schema.ProgramSchema` (:mod:`switch.pipeline.state`). Executor:
:class:`~switch.pipeline.v1model.V1Switch` runs a compiled program over that state with BMv2
``simple_switch`` semantics. Packet bytes, state and a time stamp in, packets and a verdict out:
no sockets, threads or queues here, and time is the caller's (a ``now`` per pass, or the
``clock`` given to ``V1Switch``); they belong to :mod:`switch.device`. The STF runner, the runtime CLI and the P4Runtime server write the state
through its strict, error-coded methods (:class:`switch.pipeline.errors.StateError`).
"""
