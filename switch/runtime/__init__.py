"""Runtime state of the software switch: tables, action profiles, externs, replication, hashes.

Pure data structures with no I/O and no clock (callers pass ``now_us``). The packet executor
reads them on its hot path; the STF runner, the CLI and the P4Runtime server write them through
the strict, error-coded methods (:class:`switch.runtime.errors.StateError`).
"""
