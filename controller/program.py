"""The names of ``p4/fabric.p4``'s control-plane objects that the controller uses -- names only.

Every id is looked up in the P4Info at run time (:mod:`controller.schema`), so these names are
the whole contract between the controller and the program; :func:`check_program` verifies them
against a P4Info when a pipeline is loaded, so a renamed table fails early and clearly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from controller.schema import Schema

# tables and their match fields
MY_SID = "FabricIngress.my_sid"
ROUTES = "FabricIngress.routes"
ECMP_ROUTES = "FabricIngress.ecmp_routes"
ECMP_SELECTOR = "FabricIngress.ecmp_selector"
PORT_STATE = "FabricIngress.port_state"
TRIM_CONFIG = "FabricIngress.trim_config"
BURST_CONFIG = "FabricEgress.burst_config"
ECN_CONFIG = "FabricEgress.ecn_config"
LOSS_INJECT = "FabricEgress.loss_inject"
PORT_MAC = "FabricEgress.port_mac"

DST_ADDR = "hdr.ipv6.dst_addr"
EGRESS_SPEC = "standard_metadata.egress_spec"
EGRESS_PORT = "standard_metadata.egress_port"

# actions
USID_UN = "FabricIngress.usid_un"
USID_UA = "FabricIngress.usid_ua"
SET_EGRESS_PORT = "FabricIngress.set_egress_port"
PORT_DOWN = "FabricIngress.port_down"
SET_TRIM = "FabricIngress.set_trim"
TRACK_BURSTS = "FabricEgress.track_bursts"
SET_ECN_THRESHOLD = "FabricEgress.set_ecn_threshold"
INJECT_LOSS = "FabricEgress.inject_loss"
SET_MACS = "FabricEgress.set_macs"

#: The tables (and the selector) whose whole content the controller owns.
MANAGED_TABLES = (
    MY_SID,
    ROUTES,
    ECMP_ROUTES,
    PORT_STATE,
    TRIM_CONFIG,
    BURST_CONFIG,
    ECN_CONFIG,
    LOSS_INJECT,
    PORT_MAC,
)
MANAGED_PROFILES = (ECMP_SELECTOR,)

# counters (indexed by port unless said otherwise)
PORT_RX = "FabricIngress.port_rx"
PORT_TX = "FabricEgress.port_tx"
RX_DROPS = "rx_drops"
TX_DROPS = "tx_drops"
ECN_MARKS = "FabricEgress.ecn_marks"
TRIMS = "FabricEgress.trims"
DROP_REASONS = "drop_reasons"  # indexed by reason
PORT_COUNTERS = (PORT_RX, PORT_TX, RX_DROPS, TX_DROPS, ECN_MARKS, TRIMS)

# digest and controller headers
BURST_DIGEST = "burst_digest_t"
PACKET_OUT = "packet_out"
PACKET_IN = "packet_in"

#: drop_reasons indices (DROP_* in fabric.p4)
DROP_REASON_NAMES = {
    1: "parser error",
    2: "not IPv6",
    3: "hop limit",
    4: "no route",
    5: "SRH malformed",
    6: "SRH too deep",
    7: "port down",
    8: "injected loss",
}

CPU_PORT = 255
DROP_PORT = 511  # v1model / BMv2: egress_spec 511 drops


def check_program(schema: Schema) -> None:
    """Every name above exists in ``schema``'s P4Info.

    Raises:
        SchemaError: the first missing name, with a "did you mean".
    """
    for t in MANAGED_TABLES:
        schema.table(t)
    for a in (
        USID_UN,
        USID_UA,
        SET_EGRESS_PORT,
        PORT_DOWN,
        SET_TRIM,
        TRACK_BURSTS,
        SET_ECN_THRESHOLD,
        INJECT_LOSS,
        SET_MACS,
    ):
        schema.action(a)
    for p in MANAGED_PROFILES:
        schema.action_profile(p)
    for c in (*PORT_COUNTERS, DROP_REASONS):
        schema.counter(c)
    schema.digest(BURST_DIGEST)
    for h in (PACKET_OUT, PACKET_IN):
        schema.packet_metadata(h)
