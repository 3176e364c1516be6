// fabric.p4 -- the one program every switch (leaf and spine, every plane) of the tailfabric
// multi-plane Clos runs. Standard P4-16 for v1model; compiles with the project's tf-p4 and with
// `p4c --target bmv2 --arch v1model` (p4c-bm2-ss) unchanged. p4/README.md has the long form.
//
// ADDRESS PLAN (micro-SID "F3216": 32-bit locator block, 16-bit micro-SIDs, RFC 9800 NEXT-C-SID)
//   block      fcbb:bb00::/32                     (LB, 32 bits)
//   uSID       16 bits, 0x0000 = end of the carrier
//     leaf     0x1000 | plane << 8 | leaf          0x1000-0x1fff   (plane 0-15, leaf 0-255)
//     spine    0x2000 | plane << 8 | spine         0x2000-0x2fff
//     NIC      0x8000 | host << 4 | nic            0x8000-0x9fff   (host 0-511, nic/plane 0-15)
//     uA       0xe000 | port                       0xe000-0xe1ff   node-local End.X (not routed)
//   A path is one IPv6 destination address (the "carrier"):
//     fcbb:bb00:<first leaf>:<spine>:<destination leaf>:<destination NIC>::
//   Each switch owns the /48 block:<its uSID> (table my_sid, action usid_un) and the local uA
//   /48s block:e<port> (action usid_ua); it shifts the rest of the carrier left by 16 bits and
//   looks the new address up in `routes`: a leaf routes block:<spine>/48 to its uplink and
//   block:<local NIC>/48 to the host port; a spine routes block:<leaf>/48 to its downlink.
//   The host receives DA = fcbb:bb00:<NIC>:: (L4 checksums use this final DA, RFC 8200 8.1).
//   Plain IPv6 (baseline, no SR) uses `routes` and then `ecmp_routes` (ECMP over uplinks).
//
// PIPELINE
//   parser   [packet_out if from the CPU port] Ethernet, IPv6, routing header (SRH, type 4,
//            up to SRH_MAX_SEGMENTS = 8 segments in a header stack), UDP or TCP ports
//   ingress  packet-out; burst report -> digest; link probe / link-local / multicast punt;
//            srh_insert (source policy); my_sid (uN, uA, End, End with PSP); hop limit;
//            routes -> ecmp_routes (action selector); port_state (ports marked down);
//            trim_config (packet trimming decided at enqueue, sets the queue priority)
//   egress   burst telemetry (burst_config), ECN CE marking (ecn_config), loss injection
//            (loss_inject), port_mac (L2 rewrite), counters
//
// TABLES (all filled by the controller; none has const entries)
//   FabricIngress.srh_insert    ingress_port exact, ipv6.dst_addr lpm
//                               srh_insert_2(s1) / srh_insert_3(s1, s2) / NoAction
//   FabricIngress.my_sid        ipv6.dst_addr lpm
//                               usid_un / usid_ua(port) / srv6_end / srv6_end_psp / NoAction
//   FabricIngress.routes        ipv6.dst_addr lpm                   set_egress_port(port) / NoAction
//   FabricIngress.ecmp_routes   ipv6.dst_addr lpm; selector: src, dst, l4 proto, l4 ports, flow
//                               label; implementation FabricIngress.ecmp_selector (crc16)
//                               set_egress_port(port) / NoAction
//   FabricIngress.port_state    standard_metadata.egress_spec exact port_down / NoAction
//   FabricIngress.trim_config   standard_metadata.egress_spec exact
//                               set_trim(threshold, keep_bytes, priority) / NoAction
//   FabricEgress.burst_config   standard_metadata.egress_port exact track_bursts(high, low)
//   FabricEgress.ecn_config     standard_metadata.egress_port exact set_ecn_threshold(k)
//   FabricEgress.loss_inject    standard_metadata.egress_port exact, ipv6.dst_addr lpm
//                               inject_loss(threshold): drop when random bit<16> < threshold
//   FabricEgress.port_mac       standard_metadata.egress_port exact set_macs(src, dst)
//
// COUNTERS (indexed; read over P4Runtime)
//   port_rx, port_tx (512, packets_and_bytes): per ingress / egress port
//   rx_drops (512): drops charged to the ingress port (parse errors, no route, hop limit, SRH)
//   tx_drops (512): drops charged to the egress port (port down, injected loss)
//   drop_reasons (16): per DROP_* code below; FabricEgress.ecn_marks, FabricEgress.trims (512)
//   burst_reports_lost (1): burst records lost because the report ring was full
//
// DIGEST   burst_digest_t {port, start_us, end_us, peak_qdepth, packets} (one per microburst)
// CONTROLLER HEADERS  packet_out {egress_port, routed}, packet_in {ingress_port, reason}
#include <core.p4>
#include <v1model.p4>

typedef bit<48>  mac_addr_t;
typedef bit<128> ipv6_addr_t;
typedef bit<9>   port_t;

const port_t  CPU_PORT = 255;
const bit<16> ETHERTYPE_IPV6 = 0x86DD;
const bit<16> ETHERTYPE_LINK_PROBE = 0x88B5;  // IEEE local experimental: controller link checks
const bit<8>  PROTO_TCP = 6;
const bit<8>  PROTO_UDP = 17;
const bit<8>  PROTO_ROUTING = 43;
const bit<8>  SRH_ROUTING_TYPE = 4;
#define SRH_MAX_SEGMENTS 8
const bit<8>  SRH_MAX_LAST_ENTRY = 7;         // SRH_MAX_SEGMENTS - 1
const bit<8>  SRH_DEPTH_MASK = 0xF8;          // Last Entry & mask == 0 <=> Last Entry <= 7
const bit<6>  TRIM_DSCP = 63;                 // DSCP of trimmed packets (local-use pool xxxx11)
const bit<2>  ECN_CE = 3;
const bit<32> BURST_RING_SIZE = 16;           // burst reports waiting for ingress (a power of 2)
const bit<32> BURST_DIGEST_RECEIVER = 1;

// drop_reasons indices
const bit<32> DROP_PARSER_ERROR = 1;   // truncated packet, header did not fit
const bit<32> DROP_NOT_IPV6 = 2;       // neither IPv6 nor a link probe
const bit<32> DROP_HOP_LIMIT = 3;      // hop limit <= 1 on a packet to forward
const bit<32> DROP_NO_ROUTE = 4;       // routes and ecmp_routes missed
const bit<32> DROP_SRH_MALFORMED = 5;  // Last Entry > Hdr Ext Len/2 - 1, SL > Last Entry + 1, RH type
const bit<32> DROP_SRH_TOO_DEEP = 6;   // SRH with more than SRH_MAX_SEGMENTS segments
const bit<32> DROP_PORT_DOWN = 7;      // egress port marked down in port_state
const bit<32> DROP_INJECTED_LOSS = 8;  // loss_inject
// packet_in.reason values
const bit<8> PUNT_LINK_PROBE = 1;      // EtherType ETHERTYPE_LINK_PROBE (from a neighbour)
const bit<8> PUNT_LOCAL = 2;           // a SID of this switch with nothing left to do (upper layer)
const bit<8> PUNT_LINK_LOCAL = 3;      // DA in fe80::/10 or ff00::/8 (NDP and friends)
// meta.sid_kind
const bit<3> SID_NONE = 0;
const bit<3> SID_UN = 1;
const bit<3> SID_UA = 2;
const bit<3> SID_END = 3;
const bit<3> SID_END_PSP = 4;

// ---------------------------------------------------------------------------------- headers

@controller_header("packet_out")
header packet_out_t {
    port_t  egress_port;  // routed == 0: send out of this port as is
    bit<1>  routed;       // 1: run the normal pipeline (as if received on the CPU port)
    bit<6>  pad;
}

@controller_header("packet_in")
header packet_in_t {
    port_t  ingress_port;
    bit<8>  reason;       // PUNT_*
    bit<7>  pad;
}

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

header ipv6_t {
    bit<4>      version;
    bit<6>      dscp;
    bit<2>      ecn;
    bit<20>     flow_label;
    bit<16>     payload_len;
    bit<8>      next_hdr;
    bit<8>      hop_limit;
    ipv6_addr_t src_addr;
    ipv6_addr_t dst_addr;
}

// The first 8 bytes of a routing header; the SRH (routing type 4, RFC 8754 section 2).
header srh_t {
    bit<8>  next_hdr;
    bit<8>  hdr_ext_len;     // 8-octet units, not counting the first 8 octets
    bit<8>  routing_type;
    bit<8>  segments_left;
    bit<8>  last_entry;
    bit<8>  flags;
    bit<16> tag;
}

header srh_segment_t {
    ipv6_addr_t sid;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

header tcp_ports_t {
    bit<16> src_port;
    bit<16> dst_port;
}

struct headers_t {
    packet_out_t  packet_out;
    packet_in_t   packet_in;
    ethernet_t    ethernet;
    ipv6_t        ipv6;
    srh_t         srh;
    srh_segment_t[SRH_MAX_SEGMENTS] srh_segments;
    udp_t         udp;
    tcp_ports_t   tcp;
}

// One microburst on one egress port (times in microseconds of the switch clock).
struct burst_digest_t {
    port_t  port;
    bit<48> start_us;
    bit<48> end_us;
    bit<19> peak_qdepth;
    bit<32> packets;
}

struct fabric_meta_t {
    bit<8>  srh_to_parse;    // parser: segments still to extract
    bit<8>  srh_tlv_len;     // parser: Hdr Ext Len beyond the segment list (TLVs), 0 if none
    bit<8>  l4_proto;        // upper-layer protocol (after the SRH)
    bit<16> l4_src_port;
    bit<16> l4_dst_port;
    bit<3>  sid_kind;        // SID_*
    port_t  ua_port;
    bit<1>  forward;         // 1: a packet to route (hop limit applies)
    bit<1>  from_cpu;
    bit<1>  direct_out;      // packet-out sent as is: egress features skipped
    bit<32> drop_reason;     // DROP_* (0: none)
    bit<1>  trim_enabled;
    bit<32> trim_threshold;
    bit<16> trim_keep;
    bit<3>  trim_priority;
    bit<1>  trimmed;
    burst_digest_t burst;
}

// Shared by ingress and egress (top-level instances).
register<bit<32>>(512) qdepth_estimate;  // per port: packets queued (egress sets, ingress adds)
register<bit<32>>(1) burst_ring_head;    // written by egress: next slot to fill
register<bit<32>>(1) burst_ring_tail;    // written by ingress: next slot to report
register<bit<9>>(BURST_RING_SIZE)  burst_ring_port;
register<bit<48>>(BURST_RING_SIZE) burst_ring_start;
register<bit<48>>(BURST_RING_SIZE) burst_ring_end;
register<bit<19>>(BURST_RING_SIZE) burst_ring_peak;
register<bit<32>>(BURST_RING_SIZE) burst_ring_packets;
counter(512, CounterType.packets) rx_drops;
counter(512, CounterType.packets) tx_drops;
counter(16, CounterType.packets) drop_reasons;
counter(1, CounterType.packets) burst_reports_lost;

// ----------------------------------------------------------------------------------- parser

parser FabricParser(packet_in pkt, out headers_t hdr, inout fabric_meta_t meta,
                    inout standard_metadata_t standard_metadata) {
    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        pkt.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV6: parse_ipv6;
            default: accept;
        }
    }
    state parse_ipv6 {
        pkt.extract(hdr.ipv6);
        meta.l4_proto = hdr.ipv6.next_hdr;
        transition select(hdr.ipv6.next_hdr) {
            PROTO_ROUTING: parse_routing;
            PROTO_UDP: parse_udp;
            PROTO_TCP: parse_tcp;
            default: accept;
        }
    }
    state parse_routing {
        pkt.extract(hdr.srh);
        meta.l4_proto = hdr.srh.next_hdr;
        meta.srh_to_parse = hdr.srh.last_entry + 1;
        // Only an SRH whose segment list fits the stack is parsed further; ingress drops a
        // deeper one where it has to process it (End), and forwards it untouched elsewhere.
        transition select(hdr.srh.routing_type, hdr.srh.last_entry) {
            (SRH_ROUTING_TYPE, 0 &&& SRH_DEPTH_MASK): parse_srh_segment;  // Last Entry 0..7
            default: accept;
        }
    }
    state parse_srh_segment {
        pkt.extract(hdr.srh_segments.next);
        meta.srh_to_parse = meta.srh_to_parse - 1;
        transition select(meta.srh_to_parse) {
            0: parse_srh_end;
            default: parse_srh_segment;
        }
    }
    state parse_srh_end {
        meta.srh_tlv_len = hdr.srh.hdr_ext_len - ((hdr.srh.last_entry + 1) << 1);
        // TLVs (or an inconsistent length): the upper layer is not parsed
        transition select(meta.srh_tlv_len, hdr.srh.next_hdr) {
            (0, PROTO_UDP): parse_udp;
            (0, PROTO_TCP): parse_tcp;
            default: accept;
        }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        meta.l4_src_port = hdr.udp.src_port;
        meta.l4_dst_port = hdr.udp.dst_port;
        transition accept;
    }
    state parse_tcp {
        pkt.extract(hdr.tcp);
        meta.l4_src_port = hdr.tcp.src_port;
        meta.l4_dst_port = hdr.tcp.dst_port;
        transition accept;
    }
}

control FabricVerifyChecksum(inout headers_t hdr, inout fabric_meta_t meta) {
    apply { }
}

// ---------------------------------------------------------------------------------- ingress

control FabricIngress(inout headers_t hdr, inout fabric_meta_t meta,
                      inout standard_metadata_t standard_metadata) {
    counter(512, CounterType.packets_and_bytes) port_rx;
    action_selector(HashAlgorithm.crc16, 32w1024, 32w16) ecmp_selector;

    // -- source policy: insert an SRH for hosts that send plain IPv6 (H.Insert-style: the
    //    original destination stays as the last segment, Segment List[0])
    action srh_insert_2(ipv6_addr_t s1) {
        hdr.srh.setValid();
        hdr.srh.next_hdr = hdr.ipv6.next_hdr;
        hdr.srh.hdr_ext_len = 4;
        hdr.srh.routing_type = SRH_ROUTING_TYPE;
        hdr.srh.segments_left = 1;
        hdr.srh.last_entry = 1;
        hdr.srh.flags = 0;
        hdr.srh.tag = 0;
        hdr.srh_segments[0].setValid();
        hdr.srh_segments[0].sid = hdr.ipv6.dst_addr;
        hdr.srh_segments[1].setValid();
        hdr.srh_segments[1].sid = s1;
        hdr.ipv6.next_hdr = PROTO_ROUTING;
        hdr.ipv6.payload_len = hdr.ipv6.payload_len + 40;
        hdr.ipv6.dst_addr = s1;
    }
    action srh_insert_3(ipv6_addr_t s1, ipv6_addr_t s2) {
        hdr.srh.setValid();
        hdr.srh.next_hdr = hdr.ipv6.next_hdr;
        hdr.srh.hdr_ext_len = 6;
        hdr.srh.routing_type = SRH_ROUTING_TYPE;
        hdr.srh.segments_left = 2;
        hdr.srh.last_entry = 2;
        hdr.srh.flags = 0;
        hdr.srh.tag = 0;
        hdr.srh_segments[0].setValid();
        hdr.srh_segments[0].sid = hdr.ipv6.dst_addr;
        hdr.srh_segments[1].setValid();
        hdr.srh_segments[1].sid = s2;
        hdr.srh_segments[2].setValid();
        hdr.srh_segments[2].sid = s1;
        hdr.ipv6.next_hdr = PROTO_ROUTING;
        hdr.ipv6.payload_len = hdr.ipv6.payload_len + 56;
        hdr.ipv6.dst_addr = s1;
    }
    table srh_insert {
        key = {
            standard_metadata.ingress_port: exact;
            hdr.ipv6.dst_addr: lpm;
        }
        actions = { srh_insert_2; srh_insert_3; NoAction; }
        default_action = NoAction();
        size = 256;
    }

    // -- local SIDs
    action usid_un() {
        meta.sid_kind = SID_UN;
    }
    action usid_ua(port_t port) {
        meta.sid_kind = SID_UA;
        meta.ua_port = port;
    }
    action srv6_end() {
        meta.sid_kind = SID_END;
    }
    action srv6_end_psp() {
        meta.sid_kind = SID_END_PSP;
    }
    table my_sid {
        key = { hdr.ipv6.dst_addr: lpm; }
        actions = { usid_un; usid_ua; srv6_end; srv6_end_psp; NoAction; }
        default_action = NoAction();
        size = 256;
    }

    // -- routing
    action set_egress_port(port_t port) {
        standard_metadata.egress_spec = port;
    }
    table routes {
        key = { hdr.ipv6.dst_addr: lpm; }
        actions = { set_egress_port; NoAction; }
        default_action = NoAction();
        size = 4096;
    }
    table ecmp_routes {
        key = {
            hdr.ipv6.dst_addr: lpm;
            hdr.ipv6.src_addr: selector;
            hdr.ipv6.dst_addr: selector;
            meta.l4_proto: selector;
            meta.l4_src_port: selector;
            meta.l4_dst_port: selector;
            hdr.ipv6.flow_label: selector;
        }
        actions = { set_egress_port; NoAction; }
        default_action = NoAction();
        implementation = ecmp_selector;
        size = 1024;
    }

    // -- port state
    action port_down() {
        meta.drop_reason = DROP_PORT_DOWN;
    }
    table port_state {
        key = { standard_metadata.egress_spec: exact; }
        actions = { port_down; NoAction; }
        default_action = NoAction();
        size = 512;
    }

    // -- trimming
    action set_trim(bit<32> threshold, bit<16> keep_bytes, bit<3> priority) {
        meta.trim_enabled = 1;
        meta.trim_threshold = threshold;
        meta.trim_keep = keep_bytes;
        meta.trim_priority = priority;
    }
    table trim_config {
        key = { standard_metadata.egress_spec: exact; }
        actions = { set_trim; NoAction; }
        default_action = NoAction();
        size = 512;
    }

    action punt(bit<8> reason) {
        standard_metadata.egress_spec = CPU_PORT;
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = standard_metadata.ingress_port;
        hdr.packet_in.reason = reason;
        hdr.packet_in.pad = 0;
    }

    // Shift the carrier: block | (argument << 16), the last 16 bits zero (RFC 9800 uN/uA).
    action usid_shift() {
        hdr.ipv6.dst_addr = hdr.ipv6.dst_addr[127:96] ++ hdr.ipv6.dst_addr[79:0] ++ 16w0;
    }

    // End on the SRH (RFC 8986 4.1 S12-S14; checks done by the caller): SL-1, DA = SL[SL].
    action srh_advance() {
        hdr.srh.segments_left = hdr.srh.segments_left - 1;
        hdr.ipv6.dst_addr = hdr.srh_segments[hdr.srh.segments_left].sid;
    }

    // PSP (RFC 8986 4.16.1): remove the SRH.
    action srh_pop() {
        hdr.ipv6.next_hdr = hdr.srh.next_hdr;
        hdr.ipv6.payload_len = hdr.ipv6.payload_len - (16w8 + ((bit<16>)hdr.srh.hdr_ext_len << 3));
        hdr.srh.setInvalid();
        hdr.srh_segments[0].setInvalid();
        hdr.srh_segments[1].setInvalid();
        hdr.srh_segments[2].setInvalid();
        hdr.srh_segments[3].setInvalid();
        hdr.srh_segments[4].setInvalid();
        hdr.srh_segments[5].setInvalid();
        hdr.srh_segments[6].setInvalid();
        hdr.srh_segments[7].setInvalid();
    }

    apply {
        port_rx.count((bit<32>)standard_metadata.ingress_port);

        // A pending microburst report leaves with this packet's ingress pass (digests are
        // generated at the end of ingress only, so egress leaves them in a ring).
        bit<32> ring_head;
        bit<32> ring_tail;
        burst_ring_head.read(ring_head, 0);
        burst_ring_tail.read(ring_tail, 0);
        if (ring_head != ring_tail) {
            bit<32> slot = ring_tail & (BURST_RING_SIZE - 1);
            burst_ring_port.read(meta.burst.port, slot);
            burst_ring_start.read(meta.burst.start_us, slot);
            burst_ring_end.read(meta.burst.end_us, slot);
            burst_ring_peak.read(meta.burst.peak_qdepth, slot);
            burst_ring_packets.read(meta.burst.packets, slot);
            burst_ring_tail.write(0, ring_tail + 1);
            digest<burst_digest_t>(BURST_DIGEST_RECEIVER, meta.burst);
        }

        if (hdr.packet_out.isValid()) {
            meta.from_cpu = 1;
            if (hdr.packet_out.routed == 0) {
                meta.direct_out = 1;
                standard_metadata.egress_spec = hdr.packet_out.egress_port;
                hdr.packet_out.setInvalid();
                return;
            }
            hdr.packet_out.setInvalid();
        }

        if (standard_metadata.parser_error != error.NoError) {
            meta.drop_reason = DROP_PARSER_ERROR;
        } else if (!hdr.ipv6.isValid()) {
            if (hdr.ethernet.isValid() && hdr.ethernet.ether_type == ETHERTYPE_LINK_PROBE
                    && meta.from_cpu == 0) {
                punt(PUNT_LINK_PROBE);
            } else {
                meta.drop_reason = DROP_NOT_IPV6;
            }
        } else if (hdr.ipv6.dst_addr[127:120] == 0xff || hdr.ipv6.dst_addr[127:118] == 0x3fa) {
            punt(PUNT_LINK_LOCAL);
        } else {
            if (!hdr.srh.isValid()) {
                srh_insert.apply();
            }
            my_sid.apply();
            meta.forward = 1;
            if (meta.sid_kind == SID_NONE) {
                // transit: plain IPv6 forwarding
            } else if ((meta.sid_kind == SID_UN || meta.sid_kind == SID_UA)
                       && hdr.ipv6.dst_addr[79:0] != 0) {
                if (hdr.ipv6.hop_limit > 1) {
                    usid_shift();
                }
            } else if (!hdr.srh.isValid()) {
                meta.forward = 0;
                punt(PUNT_LOCAL);  // upper-layer processing (RFC 8986 4.1.1)
            } else if (hdr.srh.segments_left == 0) {
                meta.forward = 0;
                punt(PUNT_LOCAL);
            } else if (hdr.srh.routing_type != SRH_ROUTING_TYPE) {
                meta.drop_reason = DROP_SRH_MALFORMED;  // unknown routing type, SL != 0
            } else if (hdr.srh.last_entry > SRH_MAX_LAST_ENTRY) {
                meta.drop_reason = DROP_SRH_TOO_DEEP;
            } else if (hdr.srh.hdr_ext_len < ((hdr.srh.last_entry + 1) << 1)
                       || hdr.srh.segments_left > hdr.srh.last_entry + 1) {
                meta.drop_reason = DROP_SRH_MALFORMED;  // RFC 8986 4.1 S08-S10
            } else if (hdr.ipv6.hop_limit > 1) {
                srh_advance();
                if (meta.sid_kind == SID_END_PSP && hdr.srh.segments_left == 0
                        && meta.srh_tlv_len == 0) {
                    srh_pop();
                }
            }

            if (meta.drop_reason == 0 && meta.forward == 1) {
                if (hdr.ipv6.hop_limit <= 1) {
                    meta.drop_reason = DROP_HOP_LIMIT;
                } else {
                    hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1;
                    if (meta.sid_kind == SID_UA) {
                        standard_metadata.egress_spec = meta.ua_port;
                    } else if (!routes.apply().hit) {
                        if (!ecmp_routes.apply().hit) {
                            meta.drop_reason = DROP_NO_ROUTE;
                        }
                    }
                }
            }

            if (meta.drop_reason == 0 && meta.forward == 1) {
                port_state.apply();
                if (meta.drop_reason == DROP_PORT_DOWN) {
                    tx_drops.count((bit<32>)standard_metadata.egress_spec);
                }
            }

            // Trimming is decided here, at enqueue time, because only ingress can choose the
            // queue (standard_metadata.priority). The queue depth comes from qdepth_estimate:
            // egress writes each departing packet's deq_qdepth, ingress adds one per packet it
            // sends to the port since then.
            if (meta.drop_reason == 0 && meta.forward == 1 && hdr.udp.isValid()) {
                trim_config.apply();
                if (meta.trim_enabled == 1) {
                    bit<32> port_index = (bit<32>)standard_metadata.egress_spec;
                    bit<32> depth;
                    qdepth_estimate.read(depth, port_index);
                    qdepth_estimate.write(port_index, depth + 1);
                    bit<16> srh_bytes = 0;
                    if (hdr.srh.isValid()) {
                        srh_bytes = 16w8 + ((bit<16>)hdr.srh.hdr_ext_len << 3);
                    }
                    bit<16> kept_payload = srh_bytes + 8 + meta.trim_keep;
                    if (depth >= meta.trim_threshold && hdr.ipv6.payload_len > kept_payload) {
                        meta.trimmed = 1;
                        hdr.ipv6.payload_len = kept_payload;
                        hdr.ipv6.dscp = TRIM_DSCP;
                        hdr.udp.length = 8 + meta.trim_keep;
                        hdr.udp.checksum = 0;
                        standard_metadata.priority = meta.trim_priority;
                        truncate((bit<32>)kept_payload + 54);
                    }
                }
            }
        }

        if (meta.drop_reason != 0) {
            mark_to_drop(standard_metadata);
            drop_reasons.count(meta.drop_reason);
            if (meta.drop_reason != DROP_PORT_DOWN) {
                rx_drops.count((bit<32>)standard_metadata.ingress_port);
            }
        }
    }
}

// ----------------------------------------------------------------------------------- egress

control FabricEgress(inout headers_t hdr, inout fabric_meta_t meta,
                     inout standard_metadata_t standard_metadata) {
    counter(512, CounterType.packets_and_bytes) port_tx;
    counter(512, CounterType.packets) ecn_marks;
    counter(512, CounterType.packets) trims;
    // per-port burst state
    register<bit<1>>(512)  burst_active;
    register<bit<48>>(512) burst_start;
    register<bit<19>>(512) burst_peak;
    register<bit<32>>(512) burst_packets;

    bit<1>  burst_enabled = 0;
    bit<19> burst_high = 0;
    bit<19> burst_low = 0;
    bit<1>  ecn_enabled = 0;
    bit<19> ecn_threshold = 0;
    bit<1>  loss_enabled = 0;
    bit<16> loss_threshold = 0;

    action track_bursts(bit<19> high, bit<19> low) {
        burst_enabled = 1;
        burst_high = high;
        burst_low = low;
    }
    table burst_config {
        key = { standard_metadata.egress_port: exact; }
        actions = { track_bursts; NoAction; }
        default_action = NoAction();
        size = 512;
    }

    action set_ecn_threshold(bit<19> k) {
        ecn_enabled = 1;
        ecn_threshold = k;
    }
    table ecn_config {
        key = { standard_metadata.egress_port: exact; }
        actions = { set_ecn_threshold; NoAction; }
        default_action = NoAction();
        size = 512;
    }

    action inject_loss(bit<16> threshold) {
        loss_enabled = 1;
        loss_threshold = threshold;
    }
    table loss_inject {
        key = {
            standard_metadata.egress_port: exact;
            hdr.ipv6.dst_addr: lpm;
        }
        actions = { inject_loss; NoAction; }
        default_action = NoAction();
        size = 512;
    }

    action set_macs(mac_addr_t src, mac_addr_t dst) {
        hdr.ethernet.src_addr = src;
        hdr.ethernet.dst_addr = dst;
    }
    table port_mac {
        key = { standard_metadata.egress_port: exact; }
        actions = { set_macs; NoAction; }
        default_action = NoAction();
        size = 512;
    }

    apply {
        bit<32> port_index = (bit<32>)standard_metadata.egress_port;
        if (standard_metadata.egress_port == CPU_PORT || meta.direct_out == 1) {
            port_tx.count(port_index);
            return;
        }
        qdepth_estimate.write(port_index, (bit<32>)standard_metadata.deq_qdepth);

        // Microburst: starts when a departing packet leaves >= high packets queued behind it,
        // ends when one leaves <= low; the record goes to the ring for ingress to digest.
        burst_config.apply();
        if (burst_enabled == 1) {
            bit<19> depth = standard_metadata.deq_qdepth;
            bit<48> now = standard_metadata.egress_global_timestamp;
            bit<1> active;
            burst_active.read(active, port_index);
            if (active == 0) {
                if (depth >= burst_high) {
                    burst_active.write(port_index, 1);
                    burst_start.write(port_index, now);
                    burst_peak.write(port_index, depth);
                    burst_packets.write(port_index, 1);
                }
            } else {
                bit<19> peak;
                bit<32> packets;
                burst_peak.read(peak, port_index);
                burst_packets.read(packets, port_index);
                packets = packets + 1;
                if (depth > peak) {
                    peak = depth;
                }
                burst_peak.write(port_index, peak);
                burst_packets.write(port_index, packets);
                if (depth <= burst_low) {
                    burst_active.write(port_index, 0);
                    bit<32> head;
                    bit<32> tail;
                    burst_ring_head.read(head, 0);
                    burst_ring_tail.read(tail, 0);
                    if (head - tail < BURST_RING_SIZE) {
                        bit<32> slot = head & (BURST_RING_SIZE - 1);
                        bit<48> start;
                        burst_start.read(start, port_index);
                        burst_ring_port.write(slot, standard_metadata.egress_port);
                        burst_ring_start.write(slot, start);
                        burst_ring_end.write(slot, now);
                        burst_ring_peak.write(slot, peak);
                        burst_ring_packets.write(slot, packets);
                        burst_ring_head.write(0, head + 1);
                    } else {
                        burst_reports_lost.count(0);
                    }
                }
            }
        }

        if (hdr.ipv6.isValid()) {
            // ECN (RFC 3168): ECT(0)/ECT(1) become CE when the queue was >= k at enqueue.
            ecn_config.apply();
            if (ecn_enabled == 1 && hdr.ipv6.ecn != 0
                    && standard_metadata.enq_qdepth >= ecn_threshold) {
                if (hdr.ipv6.ecn != ECN_CE) {
                    hdr.ipv6.ecn = ECN_CE;
                    ecn_marks.count(port_index);
                }
            }

            // Transient loss: drop with probability threshold / 65536.
            loss_inject.apply();
            if (loss_enabled == 1) {
                bit<16> r;
                random(r, 16w0, 16w0xFFFF);
                if (r < loss_threshold) {
                    mark_to_drop(standard_metadata);
                    tx_drops.count(port_index);
                    drop_reasons.count(DROP_INJECTED_LOSS);
                    return;
                }
            }
        }

        port_mac.apply();
        if (meta.trimmed == 1) {
            trims.count(port_index);
        }
        port_tx.count(port_index);
    }
}

control FabricComputeChecksum(inout headers_t hdr, inout fabric_meta_t meta) {
    apply { }
}

control FabricDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv6);
        pkt.emit(hdr.srh);
        pkt.emit(hdr.srh_segments);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.tcp);
    }
}

V1Switch(FabricParser(), FabricVerifyChecksum(), FabricIngress(), FabricEgress(),
         FabricComputeChecksum(), FabricDeparser()) main;
