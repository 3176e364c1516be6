"""The tailfabric controller: routes, failures, loss events and telemetry over P4Runtime.

Modules (imports flow downwards; nothing here imports host code):

* ``entries``, ``wiring``, ``conditions``, ``routes``, ``dataplane`` -- pure: entities by name,
  port adjacency, failure/loss state, the computed tables, and a model of fabric.p4's
  forwarding that checks them.
* ``schema``, ``p4rt``, ``switches`` -- P4Runtime: names to ids through the P4Info, a typed
  client per device, a switch session that writes differences.
* ``telemetry``, ``incast``, ``linux``, ``processes`` -- burst digests to CSV, real incast
  traffic, Linux links, the fabric builder's ``state.json``.
* ``fabric`` (:class:`FabricController`), ``commands``, ``output``, ``server``, ``client``,
  ``cli`` -- the controller object, the ``tf-ctl`` command table, its server and CLI.

Nothing runs at import; see ``controller/README.md``.
"""
