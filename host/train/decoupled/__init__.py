"""Decoupled DiLoCo (learners that never wait for each other, a syncer that merges fragments
once a quorum reported) and its baseline, elastic data parallel, under chaos.

``config`` (frozen settings: the job, the syncer and its grace window, elastic data parallel,
the chaos schedule), ``errors``, ``fragments`` (balanced tensor fragmentation), ``weights``
(tokens²/steps and other merge weights; direct and Radial–Directional Averaging), ``grace``
(the adaptive grace window as a pure policy, time passed in), ``chaos`` (the seeded schedule
of kills, pauses, slow-downs and network failures, and the actions that apply it),
``link`` (a hub that members connect to at any time; a member's uplink), ``process``
(emulated processes: incarnations in threads, killed, restarted, paused, slowed), ``syncer``
(the pure syncer core: quorum, grace window, merge, outer step, refusals, liveness; its
thread), ``learner`` (inner steps, the fragment schedule with overlap τ, counters, overwrite
on merge, checkpoint and catch-up), ``elastic`` (the coordinator's rendezvous per round and a
worker), ``metrics`` (goodput, uptime, per-fragment figures, loss curves, CSVs), ``run``
(both jobs in one process over the emulated fabric under a chaos schedule; the command
line). The wire format is :mod:`host.train.diloco.wire`'s (its REPORT, MERGED, FRAGMENT,
PULL and elastic kinds). Importing this package imports no torch; the modules that need it do.
"""
